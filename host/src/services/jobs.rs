//! Durable jobs for long-running commands. A job is a row before its work starts; the
//! worker moves it queued → running → succeeded | failed, and its status address reads it.
//! After a restart, queued jobs run, and jobs caught running are failed with
//! `internal_error` (their side effects may have happened; running them twice could repeat
//! them). Finished jobs are deleted after the retention period.

use crate::services::usage::Channel;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use serde_json::Value;

use super::runs::{self, Resolved};
use super::{ServiceError, Services};
use crate::plugins::{ExecError, Limit, ProgressSink};
use crate::store::JOB_CANCELLED as CANCELLED;
use crate::store::{JobOutcome, JobRecord, JobState, Store};

/// The address a job's status is read at (`public_base_url` has no trailing `/`).
pub fn status_url(public_base_url: &str, job_id: &str) -> String {
    format!("{public_base_url}/jobs/{job_id}")
}

/// Records the job, then starts it. Returns its id (128 random bits). A paid job serves
/// its payment (`paid_by`) in the same write that records it.
pub async fn submit(services: &Services, call: Resolved<'_>, paid_by: Option<&str>) -> Result<String, ServiceError> {
    let id = crate::random::hex_token(16);
    let now = crate::clock::now_ms();
    let retention = services.settings.jobs.job_retention_hours as i64 * 3_600_000;
    services
        .store
        .insert_job(
            JobRecord {
                id: id.clone(),
                agent_id: call.agent.id.clone(),
                command: call.command.def.name.clone(),
                origin: call.channel.as_str().to_string(),
                parameters: Value::Object(call.parameters),
                raw_text: call.raw_text,
                state: JobState::Queued,
                progress: None,
                response: None,
                format: None,
                artifact_url: None,
                error: None,
                code: None,
                created_at: now,
                expires_at: now + retention,
                finished_at: None,
            },
            paid_by.map(str::to_string),
        )
        .await?;
    services.lifecycle.spawn(run(services.clone(), id.clone()));
    Ok(id)
}

/// How long a running job's lease lasts; its host renews it every third of that.
fn lease(services: &Services) -> Duration {
    Duration::from_secs(services.settings.jobs.job_lease_secs)
}

fn lease_until(services: &Services) -> i64 {
    crate::clock::now_ms() + lease(services).as_millis() as i64
}

/// Renews the job's lease while the returned guard lives, so other hosts know it runs.
fn lease_keeper(services: &Services, job_id: &str) -> StopOnDrop {
    let (services, job_id) = (services.clone(), job_id.to_string());
    StopOnDrop(tokio::spawn(async move {
        let mut every = tokio::time::interval(lease(&services) / 3);
        every.tick().await;
        loop {
            every.tick().await;
            match services.store.renew_job_lease(&job_id, lease_until(&services)).await {
                Ok(true) => {}
                Ok(false) => return, // finished, or failed by another host as cut off
                Err(e) => tracing::warn!(job = %job_id, error = %e, "could not renew a job's lease"),
            }
        }
    }))
}

/// Runs one queued job to its end, unless another host or task took it first. A host that
/// is stopping starts nothing: the job stays queued for another host or the next start.
async fn run(services: Services, id: String) {
    if services.lifecycle.is_stopping() {
        return;
    }
    match services.store.start_job(&id, lease_until(&services)).await {
        Ok(true) => {}
        Ok(false) => return, // someone else has it, or it is finished
        Err(e) => {
            tracing::error!(job = %id, error = %e, "could not start a job");
            return;
        }
    }
    let lifecycle = services.lifecycle.clone();
    let _here = lifecycle.job_running(&id);
    let leased = lease_keeper(&services, &id);
    // A shutdown that outlasts its grace period stops the work where it stands; the job's
    // lease is then released and recovery fails it (it may have had side effects).
    let outcome = tokio::select! {
        worked = work(&services, &id) => worked,
        // Dropping the work stops the plugin run where it stands.
        () = cancel_requested(&services, &id) => Err((CANCELLED_BY_CLIENT.to_string(), CANCELLED)),
        _ = lifecycle.jobs_cut() => return,
    };
    let outcome = match outcome {
        Ok(output) => output,
        Err((error, code)) => JobOutcome::Failed {
            error,
            code: code.to_string(),
        },
    };
    drop(leased);
    let failure = match &outcome {
        JobOutcome::Failed { error, code } => Some((error.clone(), code.clone())),
        _ => None,
    };
    match services.store.finish_job(&id, outcome).await {
        // Counted by the one write that ended it.
        Ok(true) => {
            if let Some(metrics) = crate::telemetry::metrics::metrics() {
                metrics.job_finished(if failure.is_some() { "failed" } else { "succeeded" });
            }
        }
        Ok(false) => {}
        Err(e) => tracing::error!(job = %id, error = %e, "could not record a job's end"),
    }
    match failure {
        Some((why, code)) => {
            crate::faults::crash_point("job:after_finish");
            // A paid job that failed by the agent's fault: its payer gets the money back.
            super::payments::refund_failed_job(&services, &id, &why, &code).await;
        }
        None => super::payments::breaker::job_answered(&services.store, &id).await,
    }
}

/// What a cancelled job's error says.
const CANCELLED_BY_CLIENT: &str = "Cancelled by the client";
/// How often a running job's host looks for a client's request to stop it.
const CANCEL_POLL: Duration = Duration::from_millis(500);

/// Ends when a client has asked to stop the job (on any host).
async fn cancel_requested(services: &Services, id: &str) {
    let mut every = tokio::time::interval(CANCEL_POLL);
    loop {
        every.tick().await;
        match services.store.job_cancel_requested(id).await {
            Ok(true) => return,
            Ok(false) => {}
            Err(e) => tracing::warn!(job = %id, error = %e, "could not look for a job's cancellation"),
        }
    }
}

/// Asks to stop the job `id` (a client's MCP task): a queued job ends now, a running one
/// within a moment, its plugin run stopped, wherever it runs; an ended one stays as it
/// ended. It ends `failed` with code `cancelled`, and a paid one is not refunded: the
/// payer chose to stop the work it bought (and a refund per cancellation would let a
/// payer make the agent pay refund fees and trip its breaker at will). Whether the job
/// was there.
pub async fn cancel(services: &Services, id: &str) -> Result<bool, ServiceError> {
    Ok(services
        .store
        .request_job_cancel(id, CANCELLED_BY_CLIENT)
        .await?
        .is_some())
}

async fn work(services: &Services, id: &str) -> Result<JobOutcome, (String, &'static str)> {
    let internal = |e: &dyn std::fmt::Display| (e.to_string(), "internal_error");
    let job = services
        .store
        .job(id)
        .await
        .map_err(|e| internal(&e))?
        .ok_or_else(|| internal(&"job vanished"))?;
    let agent = services
        .store
        .agent(&job.agent_id)
        .await
        .map_err(|e| internal(&e))?
        .ok_or_else(|| ("the agent no longer exists".to_string(), "internal_error"))?;
    let command = runs::find(services, &agent, &job.command)
        .await
        .map_err(|e| (e.to_string(), "invalid_input"))?;
    let parameters = job.parameters.as_object().cloned().unwrap_or_default();
    let (progress, _writer) = progress_writer(services, id);
    let channel = Channel::parse(&job.origin);
    let call = Resolved {
        agent: &agent,
        command: &command,
        parameters,
        raw_text: job.raw_text,
        channel,
    };
    let run = runs::prepare(services, call, Some(progress))
        .await
        .map_err(|e| (e.to_string(), "internal_error"))?;
    match runs::execute(services, run, channel).await {
        Ok(output) => Ok(JobOutcome::Succeeded {
            response: output.response,
            format: crate::domain::ResponseFormat::from(output.format).as_str().to_string(),
            artifact_url: output.media_url,
        }),
        Err(err) => {
            let code = match &err {
                ExecError::InvalidInput(_) => "invalid_input",
                ExecError::Failed(_) => "generation_failed",
                ExecError::Unavailable(_) => "model_unavailable",
                ExecError::Exceeded(Limit::Time, _) => "generation_timeout",
                ExecError::Exceeded(..) | ExecError::Crashed(_) => "generation_failed",
                ExecError::Load(_) | ExecError::Busy(_) => "internal_error",
            };
            Err((format!("/{} failed: {err}", command.def.name), code))
        }
    }
}

/// How often a job's progress is written at most: a plugin may report in a tight loop.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// Aborts its task when dropped: a job's progress writer or lease keeper when the job's work
/// ends, a scheduled run's lease keeper however its run ends (a panic too).
pub struct StopOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A job's progress sink and its one writer: a report only stores the latest value (the
/// plugin never waits, and nothing piles up); the writer saves it at most every
/// `PROGRESS_EVERY`, for as long as the returned guard lives.
fn progress_writer(services: &Services, job_id: &str) -> (ProgressSink, StopOnDrop) {
    // 0: nothing new; p + 1: percent p reported since the last write.
    let latest = Arc::new(AtomicU8::new(0));
    let reported = latest.clone();
    let sink: ProgressSink = Arc::new(move |percent, _message| {
        reported.store(percent.min(100) + 1, Ordering::Relaxed);
    });
    let (store, job_id) = (services.store.clone(), job_id.to_string());
    let writer = tokio::spawn(async move {
        let mut every = tokio::time::interval(PROGRESS_EVERY);
        loop {
            every.tick().await;
            let value = latest.swap(0, Ordering::Relaxed);
            if value > 0
                && let Err(e) = store.set_job_progress(&job_id, value - 1).await
            {
                tracing::warn!(job = %job_id, error = %e, "could not save a job's progress");
            }
        }
    });
    (sink, StopOnDrop(writer))
}

/// How long a queued job is left to the host that queued it before recovery takes it.
const FRESH_JOB_MS: i64 = 10_000;

/// Runs what never started and fails what was cut off mid-run (its host stopped renewing
/// its lease), at start and in every recovery pass. At the start of the only host serving
/// from its store every running job was cut off, lease or not.
pub async fn recover(services: &Services, at_start: bool) -> Result<(usize, usize), ServiceError> {
    let before = match at_start && !services.store.is_shared() {
        true => i64::MAX,
        false => crate::clock::now_ms(),
    };
    let interrupted = services.store.jobs_cut_off(before).await?;
    for job in &interrupted {
        let why = "the server running this job stopped before it finished; it was not run again";
        let ended_here = services
            .store
            .finish_job(
                &job.id,
                JobOutcome::Failed {
                    error: why.into(),
                    code: "internal_error".into(),
                },
            )
            .await?;
        if let Some(metrics) = crate::telemetry::metrics::metrics().filter(|_| ended_here) {
            metrics.job_finished("failed");
        }
        if !ended_here {
            // Its host ended it first (succeeded, or failed and refunded by that host).
            continue;
        }
        // A paid job: its payer gets the money back (in the background: it is a transfer).
        let (services, id) = (services.clone(), job.id.clone());
        let lifecycle = services.lifecycle.clone();
        lifecycle.spawn(async move { super::payments::refund_failed_job(&services, &id, why, "internal_error").await });
    }
    // A job queued moments ago is its submitter's to start (in its request's span), unless
    // this is the only host and it has just started: then every queued job is an orphan.
    let orphaned_before = match at_start && !services.store.is_shared() {
        true => i64::MAX,
        false => crate::clock::now_ms() - FRESH_JOB_MS,
    };
    let queued: Vec<JobRecord> = services
        .store
        .jobs_in_state(JobState::Queued)
        .await?
        .into_iter()
        .filter(|job| job.created_at < orphaned_before)
        .collect();
    for job in &queued {
        services.lifecycle.spawn(run(services.clone(), job.id.clone()));
    }
    Ok((queued.len(), interrupted.len()))
}

/// Deletes expired jobs (and the A2A tasks that ran them or chatted, kept as long), and
/// forgets the paid answers kept past their time (a job's status and a paid answer are
/// kept for a retry alike), now and then, until `stop` turns true.
pub async fn clean_up_periodically(services: Services, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        let now = crate::clock::now_ms();
        match services.store.delete_expired_jobs(now).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "expired jobs removed"),
            Err(e) => tracing::warn!(error = %e, "could not remove expired jobs"),
        }
        match services.store.delete_expired_a2a_tasks(now).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "expired A2A tasks removed"),
            Err(e) => tracing::warn!(error = %e, "could not remove expired A2A tasks"),
        }
        if let Err(e) = services.store.delete_expired_a2a_pushes(now).await {
            tracing::warn!(error = %e, "could not remove expired A2A push configs");
        }
        match services.store.forget_expired_answers(now).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(forgotten = n, "expired paid answers forgotten"),
            Err(e) => tracing::warn!(error = %e, "could not forget expired paid answers"),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(600)) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// The agent's jobs, newest first, for its owner.
pub async fn list(
    store: &crate::store::Store,
    agent_id: &str,
    limit: u32,
) -> Result<Vec<crate::store::JobRecord>, ServiceError> {
    Ok(store.jobs_of(agent_id, limit).await?)
}

/// Where a job is, as its status address tells it.
#[derive(Debug, Clone, PartialEq)]
pub enum JobStatus {
    /// No job with this id, or its record expired.
    Missing,
    /// Queued or running; `progress` is the plugin's last report, in percent.
    Processing { job_id: String, progress: Option<u8> },
    Succeeded {
        job_id: String,
        response: String,
        format: Option<String>,
        artifact_url: Option<String>,
    },
    Failed {
        job_id: String,
        error: String,
        code: String,
        /// A paid job refunded to its payer: the refund's transaction, once on chain.
        refund_signature: Option<String>,
    },
}

/// Waits for the job `id` to end, for at most `within`, telling `on_progress` each new
/// progress report on the way. Answers where the job is at the end: `Processing` when
/// the wait ran out first.
pub async fn wait(
    store: &Store,
    id: &str,
    within: Duration,
    mut on_progress: impl AsyncFnMut(u8),
) -> Result<JobStatus, ServiceError> {
    let deadline = tokio::time::Instant::now() + within;
    let mut told = None;
    loop {
        let status = status(store, id).await?;
        match status {
            JobStatus::Processing { progress, .. } => {
                if let Some(progress) = progress.filter(|p| told.is_none_or(|told| *p > told)) {
                    told = Some(progress);
                    on_progress(progress).await;
                }
                if tokio::time::Instant::now() >= deadline {
                    return Ok(status);
                }
                tokio::time::sleep(JOB_POLL).await;
            }
            ended => return Ok(ended),
        }
    }
}

/// How often a waiting caller looks at its job: a job's progress is a row in the store.
const JOB_POLL: Duration = Duration::from_millis(250);

/// Where the job `id` is now.
pub async fn status(store: &Store, id: &str) -> Result<JobStatus, ServiceError> {
    let now = crate::clock::now_ms();
    let Some(job) = store.job(id).await?.filter(|job| job.expires_at >= now) else {
        return Ok(JobStatus::Missing);
    };
    Ok(match job.state {
        JobState::Queued | JobState::Running => JobStatus::Processing {
            job_id: job.id,
            progress: job.progress,
        },
        JobState::Succeeded => JobStatus::Succeeded {
            job_id: job.id,
            response: job.response.unwrap_or_default(),
            format: job.format,
            artifact_url: job.artifact_url,
        },
        JobState::Failed => {
            let refund_signature = match store.payment_by_job(&job.id).await? {
                Some(payment) => super::payments::refund::signature_of(store, &payment).await?,
                None => None,
            };
            JobStatus::Failed {
                error: job.error.unwrap_or_else(|| "failed".into()),
                code: job.code.unwrap_or_else(|| "internal_error".into()),
                job_id: job.id,
                refund_signature,
            }
        }
    })
}
