//! Graceful shutdown of a listener's connections: when it begins, each
//! connection finishes the response in flight and closes, and an idle one
//! closes at once; the listener waits for the last.
//!
//! hyper-util's `GracefulShutdown` polled a watch channel's notification
//! with every poll of every connection, under a lock that the connections
//! of both cores took (BENCHMARKS.md, "Connections on a thread each"). Here
//! a poll reads one flag that nothing writes until shutdown; each
//! connection's waker is kept once, to be woken when it begins.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use hyper_util::server::graceful::GracefulConnection;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

/// A listener's shutdown, shared by its connections.
#[derive(Debug, Default)]
pub(super) struct Shutdown {
    begun: AtomicBool,
    /// The connections to wake when it begins, by key.
    wakers: Mutex<HashMap<u64, Waker>>,
    next_key: AtomicU64,
    open: TaskTracker,
}

impl Shutdown {
    pub(super) fn new() -> Arc<Shutdown> {
        Arc::default()
    }

    /// A connection just accepted: the shutdown waits for it from now on,
    /// before it is served.
    pub(super) fn admit(self: &Arc<Self>) -> Admitted {
        Admitted {
            shutdown: self.clone(),
            open: self.open.token(),
        }
    }

    /// Whether it has begun.
    pub(super) fn begun(&self) -> bool {
        self.begun.load(Ordering::Acquire)
    }

    /// Tells every connection to finish, then waits until each has.
    pub(super) async fn begin_and_wait(&self) {
        self.begun.store(true, Ordering::Release);
        let wakers = std::mem::take(&mut *self.wakers());
        for waker in wakers.into_values() {
            waker.wake();
        }
        self.open.close();
        self.open.wait().await;
    }

    fn wakers(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Waker>> {
        self.wakers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A connection admitted, not yet served.
pub(super) struct Admitted {
    shutdown: Arc<Shutdown>,
    open: TaskTrackerToken,
}

impl Admitted {
    /// `connection`, to be shut down gracefully when the shutdown begins.
    pub(super) fn watch<C: GracefulConnection>(self, connection: C) -> Watched<C> {
        Watched {
            connection: Box::pin(connection),
            shutdown: self.shutdown,
            key: None,
            told: false,
            _open: self.open,
        }
    }
}

/// A connection that shuts down gracefully once its listener's shutdown
/// begins.
pub(super) struct Watched<C> {
    connection: Pin<Box<C>>,
    shutdown: Arc<Shutdown>,
    /// Its waker's key, once kept.
    key: Option<u64>,
    /// Whether it was told to shut down.
    told: bool,
    _open: TaskTrackerToken,
}

impl<C: GracefulConnection> Future for Watched<C> {
    type Output = C::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<C::Output> {
        let this = &mut *self;
        if !this.told {
            if this.key.is_none() {
                // Kept before the flag is read: a shutdown that begins
                // after the read finds the waker.
                let key = this.shutdown.next_key.fetch_add(1, Ordering::Relaxed);
                this.shutdown.wakers().insert(key, cx.waker().clone());
                this.key = Some(key);
            }
            if this.shutdown.begun() {
                this.connection.as_mut().graceful_shutdown();
                this.told = true;
            }
        }
        this.connection.as_mut().poll(cx)
    }
}

impl<C> Drop for Watched<C> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.shutdown.wakers().remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::time::Duration;

    use axum::body::Body;
    use hyper::server::conn::http1;
    use hyper_util::rt::TokioIo;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// A connection served as a listener serves it, and its client's end.
    async fn served(admitted: Admitted) -> (tokio::task::JoinHandle<()>, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("address"))
            .await
            .expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        let served = tokio::spawn(async move {
            let service = hyper::service::service_fn(|_| async {
                Ok::<_, Infallible>(hyper::Response::new(Body::empty()))
            });
            let connection = http1::Builder::new().serve_connection(TokioIo::new(server), service);
            let _ = admitted.watch(connection).await;
        });
        (served, client)
    }

    #[tokio::test]
    async fn shutdown_closes_idle_connections_and_waits_for_each_admitted() {
        let shutdown = Shutdown::new();
        // A keep-alive connection that answered a request and waits for the
        // next.
        let (idle, mut client) = served(shutdown.admit()).await;
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            .await
            .expect("request");
        let mut answer = [0; 512];
        let read = client.read(&mut answer).await.expect("answer");
        assert!(answer[..read].starts_with(b"HTTP/1.1 200"));
        // Admitted before the shutdown began, served only after.
        let late = shutdown.admit();
        let waited = tokio::spawn({
            let shutdown = shutdown.clone();
            async move { shutdown.begin_and_wait().await }
        });
        let mut rest = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut rest))
            .await
            .expect("the idle connection closes at once")
            .expect("read");
        idle.await.expect("served");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waited.is_finished(),
            "the shutdown waits for the admitted one"
        );
        let (late, mut late_client) = served(late).await;
        tokio::time::timeout(Duration::from_secs(5), late_client.read_to_end(&mut rest))
            .await
            .expect("a connection served after the shutdown began closes at once")
            .expect("read");
        late.await.expect("served");
        tokio::time::timeout(Duration::from_secs(5), waited)
            .await
            .expect("the shutdown ends with its last connection")
            .expect("waited");
    }
}
