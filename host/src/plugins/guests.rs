//! Threads of the guests' own. A run starts where it is called; one that is not done after
//! its first slice (it yielded at an epoch tick, or waits on a host call) goes on here. So a
//! command of a few microseconds never changes threads, and however busy long runs keep
//! these, the server's threads stay free to accept requests, read the store and answer other
//! tenants.

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

    /// Polls `run` once here, and finishes it on the guest threads if that was not enough.
    pub(super) async fn finish<F>(&self, run: F) -> Result<F::Output, tokio::task::JoinError>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let mut run = Box::pin(run);
        let first = std::future::poll_fn(|cx| std::task::Poll::Ready(run.as_mut().poll(cx))).await;
        if let std::task::Poll::Ready(done) = first {
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
