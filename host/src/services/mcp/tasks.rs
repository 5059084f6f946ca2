//! Long-running tool calls as MCP tasks (the `io.modelcontextprotocol/tasks` extension): a
//! task is the call's job, by its id. Its state follows the job's; cancelling it stops the
//! job's plugin run. Anyone who holds a task's id may read and cancel it at the agent's
//! endpoint, as a job's status address is read by whoever holds it.

use super::{ToolOutcome, Toolbox};
use crate::domain::ResponseFormat;
use crate::services::commands::Answer;
use crate::services::jobs::{self, JobStatus};
use crate::services::purchase::RefundStarted;
use crate::services::{ServiceError, Services};
use crate::store::JOB_CANCELLED;

/// A task as the client sees it.
pub struct TaskView {
    pub id: String,
    /// The command (the tool) it runs.
    pub command: String,
    pub created_at: i64,
    pub updated_at: i64,
    /// How long it is kept from its start.
    pub ttl_ms: u64,
    pub state: TaskState,
}

pub enum TaskState {
    /// Queued or running; the plugin's last progress report, in percent.
    Working {
        progress: Option<u8>,
    },
    /// It ran: answered, or failed as a tool fails (with a paid job's refund).
    Completed(ToolOutcome),
    Cancelled,
    /// It could not run at all (the host failed it): a protocol-level failure.
    Failed(String),
}

/// The task `id` of this agent, if there is one (and its record has not expired).
pub async fn task(services: &Services, toolbox: &Toolbox, id: &str) -> Result<Option<TaskView>, ServiceError> {
    let now = crate::clock::now_ms();
    let job = services.store.job(id).await?;
    let Some(job) = job.filter(|j| j.agent_id == toolbox.found.agent.id && j.expires_at >= now) else {
        return Ok(None);
    };
    let paid = services.store.payment_by_job(id).await?.is_some();
    let state = match jobs::status(&services.store, id).await? {
        JobStatus::Missing => return Ok(None),
        JobStatus::Processing { progress, .. } => TaskState::Working { progress },
        JobStatus::Succeeded {
            response,
            format,
            artifact_url,
            ..
        } => TaskState::Completed(ToolOutcome::Answered(Answer {
            response,
            format: format.as_deref().and_then(ResponseFormat::parse).unwrap_or_default(),
            media_url: artifact_url,
            cut_short: false,
        })),
        JobStatus::Failed { code, .. } if code == JOB_CANCELLED => TaskState::Cancelled,
        JobStatus::Failed { error, code, .. } if code == "internal_error" => TaskState::Failed(error),
        JobStatus::Failed {
            error,
            refund_signature,
            ..
        } => TaskState::Completed(ToolOutcome::Failed {
            error: ServiceError::Execution(error),
            refund: paid.then_some(RefundStarted {
                transaction: refund_signature,
            }),
        }),
    };
    Ok(Some(TaskView {
        id: job.id,
        command: job.command,
        created_at: job.created_at,
        updated_at: job.finished_at.unwrap_or(job.created_at),
        ttl_ms: u64::try_from(job.expires_at - job.created_at).unwrap_or_default(),
        state,
    }))
}

/// Cancels the task `id` of this agent: see [`jobs::cancel`]. Whether there was one.
pub async fn cancel(services: &Services, toolbox: &Toolbox, id: &str) -> Result<bool, ServiceError> {
    if task(services, toolbox, id).await?.is_none() {
        return Ok(false);
    }
    jobs::cancel(services, id).await
}
