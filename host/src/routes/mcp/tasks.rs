//! A long-running call's task in MCP's words (the tasks extension): made for its job, and
//! as `tasks/get` shows it.

use rmcp::ErrorData;
use rmcp::model::{DetailedTask, Task, TaskPayload, TaskStatus};
use serde_json::{Map, Value, json};

use super::results::{result_of, shaped};
use crate::services::ServiceError;
use crate::services::mcp::Toolbox;
use crate::services::mcp::tasks::{TaskState, TaskView};

/// How often a task's client should look again.
const TASK_POLL_MS: u64 = 1_000;

/// A task just made for a job: working, kept as long as the job is.
pub(super) fn new_task(services: &crate::services::Services, job_id: &str) -> Task {
    let now = crate::clock::iso(crate::clock::now_ms());
    let ttl_ms = services.settings.jobs.job_retention_hours * 3_600_000;
    Task::new(job_id, TaskStatus::Working, now.clone(), now)
        .with_ttl_ms(ttl_ms)
        .with_poll_interval_ms(TASK_POLL_MS)
}

/// A task as `tasks/get` answers it: its state, with a finished call's result inlined (a
/// failed tool is `completed` with `isError`; `failed` is for a call that could not run).
pub(super) fn detailed(view: TaskView, toolbox: &Toolbox, public_base_url: &str) -> DetailedTask {
    let tool = toolbox.found.agent.def.mcp.tools.get(&view.command);
    let mut task = Task::new(
        view.id,
        TaskStatus::Working,
        crate::clock::iso(view.created_at),
        crate::clock::iso(view.updated_at),
    )
    .with_poll_interval_ms(TASK_POLL_MS);
    task.ttl_ms = Some(view.ttl_ms);
    let payload = match view.state {
        TaskState::Working { progress } => {
            if let Some(progress) = progress {
                task = task.with_status_message(format!("{progress}% done"));
            }
            TaskPayload::Working
        }
        TaskState::Completed(outcome) => {
            let result = shaped(result_of(outcome, public_base_url), tool);
            let result = serde_json::to_value(result).unwrap_or_default();
            TaskPayload::Completed {
                result: match result {
                    Value::Object(object) => object,
                    _ => Map::new(),
                },
            }
        }
        TaskState::Cancelled => TaskPayload::Cancelled,
        TaskState::Failed(message) => {
            let error = json!({ "code": -32603, "message": message });
            TaskPayload::Failed {
                error: error.as_object().cloned().unwrap_or_default(),
            }
        }
    };
    DetailedTask::new(task, payload)
}

pub(super) fn unknown_task(id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("Unknown task: {id}"), Some(json!({ "taskId": id })))
}

pub(super) fn store_failure(err: ServiceError) -> ErrorData {
    tracing::error!("an MCP task request failed: {err}");
    ErrorData::internal_error("Internal server error", None)
}
