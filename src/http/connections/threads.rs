//! The threads that serve the public listener's connections: one per core,
//! each a single-threaded runtime that runs every connection handed to it
//! from accept to close, as nginx's workers do.
//!
//! On the shared work-stealing runtime, a worker that took a socket's
//! readiness woke an idle sibling to steal the task, and the connection's
//! state moved between cores: a `304` cost 13% more CPU on two workers than
//! on one (BENCHMARKS.md, "Connections on a thread each"). A connection
//! here never moves.
//!
//! The threads are started by the first listener that serves and live as
//! long as the process, shared by every listener after it. What a request
//! reaches on them (the store's connections, the caches, the ledger) works
//! across runtimes: a database connection opened on one of these threads
//! and pooled is polled through this runtime's reactor wherever it is used
//! next, so it must outlive every pool, and does.

use std::future::Future;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::Handle;

/// The threads, once started: none when they could not be.
static THREADS: OnceLock<Option<ConnectionThreads>> = OnceLock::new();

struct ConnectionThreads {
    runtimes: Vec<Handle>,
    next: AtomicUsize,
}

/// Runs `connection` on the next connection thread in turn, or on the
/// calling runtime where none could be started.
pub(super) fn spawn<F>(connection: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    match THREADS.get_or_init(start) {
        Some(threads) => {
            let turn = threads.next.fetch_add(1, Ordering::Relaxed);
            threads.runtimes[turn % threads.runtimes.len()].spawn(connection);
        }
        None => {
            tokio::spawn(connection);
        }
    }
}

/// One thread per core the process may use.
fn start() -> Option<ConnectionThreads> {
    let count = std::thread::available_parallelism().map_or(1, |n| n.get());
    match (0..count)
        .map(start_one)
        .collect::<std::io::Result<Vec<_>>>()
    {
        Ok(runtimes) => Some(ConnectionThreads {
            runtimes,
            next: AtomicUsize::new(0),
        }),
        Err(error) => {
            tracing::warn!(%error, "could not start the connection threads: connections run on the shared runtime");
            None
        }
    }
}

fn start_one(index: usize) -> std::io::Result<Handle> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name(format!("sitemapd-conn-{index}"))
        .spawn(move || runtime.block_on(std::future::pending::<()>()))?;
    Ok(handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread that runs each of `count` connections spawned in a row.
    async fn threads_of(count: usize) -> Vec<String> {
        let mut names = Vec::new();
        for _ in 0..count {
            let (sent, received) = tokio::sync::oneshot::channel();
            spawn(async move {
                let _ = sent.send(std::thread::current().name().map(str::to_owned));
            });
            names.push(received.await.expect("ran").expect("a named thread"));
        }
        names
    }

    #[tokio::test]
    async fn connections_run_on_the_connection_threads_in_turn() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let names = threads_of(2 * cores).await;
        assert!(
            names.iter().all(|name| name.starts_with("sitemapd-conn-")),
            "{names:?}"
        );
        // Each thread takes every `cores`-th connection, whichever test
        // spawned before: as many threads as cores, each as often.
        let mut distinct = names.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), cores, "{names:?}");
        assert_eq!(names[..cores], names[cores..], "{names:?}");
    }
}
