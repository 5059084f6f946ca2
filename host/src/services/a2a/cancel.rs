//! Cancelling an A2A task (`CancelTask`): one waiting for its payment ends at once; a long
//! skill's stops its job, wherever it runs; a chat turn and a short skill run to their end.

use super::Desk;
use super::paid;
use super::tasks::{A2aError, Task, TaskState, get, record};
use crate::services::{Services, jobs};
use crate::store::A2aTaskMove;

/// Stops a working task's job; the task ends `canceled`. A chat turn runs to its end.
pub async fn cancel(services: &Services, desk: &Desk, id: &str) -> Result<Task, A2aError> {
    let task = get(services, desk, id).await?;
    if task.state.ended() {
        return Err(A2aError::NotCancelable(task.id, task.state.as_str()));
    }
    let now = crate::clock::now_ms();
    let record = record(services, id).await?;
    if task.state == TaskState::InputRequired {
        // Nothing was paid or run: the task just ends, unless a payment claimed it meanwhile.
        let change = A2aTaskMove {
            from: TaskState::InputRequired.as_str(),
            to: TaskState::Canceled.as_str(),
            payment: paid::cancelled(),
            error: Some("Cancelled by the client before it paid".into()),
            expires_at: None,
        };
        if !services.store.move_a2a_task(id, change, now).await? {
            return Err(A2aError::NotCancelable(task.id, "being paid"));
        }
        return get(services, desk, id).await;
    }
    let job_id = match (record.job_id, &record.skill) {
        (Some(job_id), _) => job_id,
        // A long skill's job is linked to its task a moment after the task is recorded: a
        // cancel that comes first waits for it (a busy host showed the gap).
        (None, Some(_)) => match linked_job(services, id).await? {
            Some(job_id) => job_id,
            None => return Err(A2aError::NotCancelable(task.id, "a skill run that runs to its end,")),
        },
        (None, None) => return Err(A2aError::NotCancelable(task.id, "a chat turn, which runs to its end,")),
    };
    if jobs::cancel(services, &job_id).await? {
        services
            .store
            .end_a2a_task(
                id,
                TaskState::Canceled.as_str(),
                None,
                Some("Cancelled by the client".into()),
                now,
            )
            .await?;
    }
    get(services, desk, id).await
}

/// The job of a skill's task once it is linked (within a couple of seconds); `None` when the
/// task ends first or never gets one (a short skill runs in its request).
async fn linked_job(services: &Services, id: &str) -> Result<Option<String>, A2aError> {
    for _ in 0..40 {
        let record = record(services, id).await?;
        let ended = TaskState::parse(&record.state).is_none_or(|state| state.ended());
        if record.job_id.is_some() || ended {
            return Ok(record.job_id);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Ok(None)
}
