//! Threads of the guests' own. A run starts where it is called and stays there while it is
//! cheap: done, or waiting on a host call (a key-value read), within its first epoch tick.
//! Once it runs past a tick (it yielded there) it goes on here. So a command of a few
//! microseconds, host calls included, never changes threads, and however busy long runs
//! keep these, the server's threads stay free to accept requests, read the store and answer
//! other tenants: a guest holds a server thread for at most about one tick.

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

    /// Polls `run` here until it is done or `sliced` (its guest ran past an epoch tick), and
    /// finishes it on the guest threads in the second case.
    pub(super) async fn finish<F>(&self, run: F, sliced: &AtomicBool) -> Result<F::Output, tokio::task::JoinError>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let mut run = Box::pin(run);
        let here = std::future::poll_fn(|cx| match run.as_mut().poll(cx) {
            Poll::Ready(done) => Poll::Ready(Some(done)),
            Poll::Pending if sliced.load(Ordering::Relaxed) => Poll::Ready(None),
            // Waiting on a host call, whose wakeup brings it back here.
            Poll::Pending => Poll::Pending,
        })
        .await;
        if let Some(done) = here {
            return Ok(done);
        }
        // Each poll registers the waker it is given, so the run may move to another task;
        // it keeps its caller's span (the request's id in what the plugin logs).
        let runtime = self.0.as_ref().expect("guest threads run until dropped");
        AbortOnDrop(runtime.spawn(tracing::Instrument::in_current_span(run))).await
    }
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
