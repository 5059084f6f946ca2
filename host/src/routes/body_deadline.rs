//! A request body has `body_read_timeout` to arrive, counted from its request's headers,
//! and a second more for each `GRACE_BYTES_PER_SEC` of it that did arrive: a client that
//! trickles a body holds a task and a connection, and is cut off with a 408, while a large
//! upload on a slow but steady link is not.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// A body arriving at least this fast (bytes per second) is never cut off.
const GRACE_BYTES_PER_SEC: u64 = 64 * 1024;

/// Why a body stopped: it was not in within its bound.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {} s", .0.as_secs())]
pub struct BodyTimedOut(pub Duration);

/// A body that fails with [`BodyTimedOut`] once its deadline passes before its end.
pub struct BodyDeadline<B> {
    inner: B,
    limit: Duration,
    /// When the deadline is, until a read first has to wait: most bodies are in with their
    /// headers (or empty), and never need a timer.
    due: Instant,
    timer: Option<Pin<Box<Sleep>>>,
    /// Bytes that arrived, beyond those that already moved the deadline.
    unspent: u64,
}

impl<B> BodyDeadline<B> {
    pub fn new(inner: B, limit: Duration) -> BodyDeadline<B> {
        BodyDeadline {
            inner,
            limit,
            due: Instant::now() + limit,
            timer: None,
            unspent: 0,
        }
    }

    /// Moves the deadline `by` later, with its timer if it has one.
    fn extend(&mut self, by: Duration) {
        self.due += by;
        if let Some(timer) = &mut self.timer {
            timer.as_mut().reset(self.due);
        }
    }
}

impl<B> Body for BodyDeadline<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            if let Some(Ok(data)) = frame.as_ref().map(|f| f.as_ref().map(|f| f.data_ref())) {
                self.unspent += data.map_or(0, |d| d.len() as u64);
                let seconds = self.unspent / GRACE_BYTES_PER_SEC;
                if seconds > 0 {
                    self.unspent %= GRACE_BYTES_PER_SEC;
                    self.extend(Duration::from_secs(seconds));
                }
            }
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let due = self.due;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut(self.limit))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether an error, or one of its causes, is a body that was not in within its bound.
pub fn timed_out<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a BodyTimedOut> {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(timed_out) = error.downcast_ref::<BodyTimedOut>() {
            return Some(timed_out);
        }
        cause = error.source();
    }
    None
}
