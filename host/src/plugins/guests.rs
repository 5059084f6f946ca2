//! Threads of the guests' own. A run starts where it is called and stays there while it is
//! done or waiting on a host call (a key-value read) before its first epoch tick has passed.
//! Once its guest code runs after a tick (the epoch callback marks it), it goes on here. The
//! tick is wall time: a run whose host call outlasts a tick moves at the next guest code
//! after it. So a command of a few microseconds, host calls included, never changes threads,
//! and however busy long runs keep these, the server's threads stay free to accept requests,
//! read the store and answer other tenants: a guest holds a server thread for at most about
//! one tick.

use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

pub(super) struct GuestThreads(Option<tokio::runtime::Runtime>);

impl GuestThreads {
    pub(super) fn new() -> std::io::Result<GuestThreads> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get()))
            .thread_name("wasm-guest")
            .enable_all()
            .build()?;
        Ok(GuestThreads(Some(runtime)))
    }

    /// Polls `run` here until it is done or `sliced` (its guest ran after an epoch tick), and
    /// finishes it on the guest threads in the second case. A panic in the run (host code:
    /// a guest's trap is an error, not a panic) comes back as `Err`, wherever it ran.
    pub(super) async fn finish<F>(&self, run: F, sliced: &AtomicBool) -> Result<F::Output, String>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let mut run = Box::pin(run);
        let here = std::future::poll_fn(|cx| {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run.as_mut().poll(cx))) {
                Ok(Poll::Ready(done)) => Poll::Ready(Some(Ok(done))),
                Ok(Poll::Pending) if sliced.load(Ordering::Relaxed) => Poll::Ready(None),
                // Waiting on a host call, whose wakeup brings it back here.
                Ok(Poll::Pending) => Poll::Pending,
                Err(panic) => Poll::Ready(Some(Err(panic_message(panic.as_ref())))),
            }
        })
        .await;
        if let Some(done) = here {
            return done;
        }
        // Each poll registers the waker it is given, so the run may move to another task;
        // it keeps its caller's span (the request's id in what the plugin logs).
        let runtime = self.0.as_ref().expect("guest threads run until dropped");
        AbortOnDrop(runtime.spawn(tracing::Instrument::in_current_span(run)))
            .await
            .map_err(|e| e.to_string())
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str));
    format!("panicked: {}", text.unwrap_or("(no message)"))
}

impl Drop for GuestThreads {
    fn drop(&mut self) {
        // Dropping a runtime inside another one's task would panic: let it wind down alone.
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// A spawned run that is aborted when whoever awaits it goes away.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> std::future::Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn thread_name() -> String {
        std::thread::current().name().unwrap_or_default().to_string()
    }

    #[tokio::test]
    async fn a_run_waiting_on_a_host_call_stays_and_one_past_a_tick_moves() {
        let guests = GuestThreads::new().unwrap();
        let caller = thread_name();
        // Waits (a host call's Pending), then finishes: never on a guest thread.
        let sliced = Arc::new(AtomicBool::new(false));
        let (answer, answered) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move { answer.send(()) });
        let ran_on = guests
            .finish(
                async move {
                    answered.await.unwrap();
                    thread_name()
                },
                &sliced,
            )
            .await
            .unwrap();
        assert_eq!(ran_on, caller);
        // Marked as past a tick when it yields: it finishes on the guest threads.
        let marked = sliced.clone();
        let ran_on = guests
            .finish(
                async move {
                    marked.store(true, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                    thread_name()
                },
                &sliced,
            )
            .await
            .unwrap();
        assert_eq!(ran_on, "wasm-guest");
    }

    #[tokio::test]
    async fn a_panic_in_a_run_comes_back_as_an_error() {
        let guests = GuestThreads::new().unwrap();
        let sliced = AtomicBool::new(false);
        let ended = guests.finish(async { panic!("host bug") }, &sliced).await;
        assert_eq!(ended, Err::<(), _>("panicked: host bug".to_string()));
    }
}
