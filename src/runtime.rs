//! Running a future on another runtime: what takes the CPU for long, sent
//! from a connection thread to the shared runtime (see
//! `http::connections`).

use std::future::Future;

use tokio::runtime::Handle;

/// Runs `future` on `runtime` and waits for its output: `None` when the
/// runtime shut down first. A panic in it goes on in the caller.
pub(crate) async fn run_on<F>(runtime: &Handle, future: F) -> Option<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match runtime.spawn(future).await {
        Ok(output) => Some(output),
        Err(stopped) => match stopped.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_) => None,
        },
    }
}
