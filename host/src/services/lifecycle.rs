//! The host's own life: whether it is stopping, and the work it must let finish first.
//! Work that outlives the request that started it (a job, a paid request whose caller left,
//! a refund, an answer to a chat) is spawned here, so shutdown can wait for it instead of
//! cutting it off mid-payment. It runs in the span of the request that started it (or, in a
//! traced request, a span of its own under it), so its log lines carry that request's id.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

#[derive(Default)]
pub struct Lifecycle {
    stopping: AtomicBool,
    work: TaskTracker,
    /// Jobs this host runs now, by id: their leases are released if shutdown outlasts them.
    running_jobs: Mutex<HashSet<String>>,
    /// Stops the jobs still running when the grace period ends.
    cut_jobs: CancellationToken,
}

impl Lifecycle {
    /// Runs `work` in the background, in the current span; shutdown waits for it (up to its
    /// grace period).
    pub fn spawn<F>(&self, work: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // A traced request's span ends when it is last left: work entering it after the
        // answer would stretch it to the work's end. The work gets a child span instead.
        let background = crate::telemetry::traces::part_span!("background");
        let span = match background.is_none() {
            true => tracing::Span::current(),
            false => background,
        };
        self.work.spawn(work.instrument(span))
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// From now on the host takes no new work: readiness answers 503, queued jobs wait for
    /// another host or the next start.
    pub fn begin_stopping(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    /// Waits up to `limit` for the background work; true when all of it finished.
    pub async fn drain(&self, limit: Duration) -> bool {
        self.work.close();
        tokio::time::timeout(limit, self.work.wait()).await.is_ok()
    }

    /// Marks a job as running here for as long as the guard lives.
    pub fn job_running(&self, id: &str) -> RunningJob<'_> {
        self.running_jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_string());
        RunningJob {
            lifecycle: self,
            id: id.to_string(),
        }
    }

    /// Stops the jobs still running here (their work is dropped where it stands, their
    /// leases no longer renewed) and gives their ids, once they have stopped or `limit`
    /// has passed.
    pub async fn cut_jobs(&self, limit: Duration) -> Vec<String> {
        let cut = self.running_jobs();
        self.cut_jobs.cancel();
        let deadline = tokio::time::Instant::now() + limit;
        while !self.running_jobs().is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        cut
    }

    /// Resolves when shutdown cuts the jobs still running.
    pub async fn jobs_cut(&self) {
        self.cut_jobs.cancelled().await
    }

    fn running_jobs(&self) -> Vec<String> {
        self.running_jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}

pub struct RunningJob<'a> {
    lifecycle: &'a Lifecycle,
    id: String,
}

impl Drop for RunningJob<'_> {
    fn drop(&mut self) {
        self.lifecycle
            .running_jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}
