//! The owner's tasks with an agent, a page at a time, newest first: A2A's `ListTasks`.

use super::Desk;
use super::tasks::{A2aError, Task, TaskState, follow_job};
use crate::services::Services;
use crate::store::A2aTaskQuery;

/// The most tasks one page of a listing holds.
pub const PAGE_MAX: u32 = 100;

/// A page of this caller's tasks, newest first.
pub struct Listing {
    pub tasks: Vec<Task>,
    /// Where the next page starts, when there is one.
    pub next: Option<String>,
    pub total: u64,
}

/// What a listing asks for.
pub struct ListFilter {
    pub context_id: Option<String>,
    pub state: Option<TaskState>,
    pub updated_since: Option<i64>,
    pub page_size: u32,
    /// A page token a listing gave.
    pub page_token: Option<String>,
}

/// The owner's tasks with the agent. A caller without a key has no list of its own.
pub async fn list(services: &Services, desk: &Desk, filter: ListFilter) -> Result<Listing, A2aError> {
    let Some(account) = desk.account_id() else {
        return Err(A2aError::Unsupported(
            "Listing tasks needs the owner's key; a task is read by its id".into(),
        ));
    };
    let after = match filter.page_token.as_deref().filter(|t| !t.is_empty()) {
        Some(token) => Some(read_page_token(token)?),
        None => None,
    };
    let limit = filter.page_size.clamp(1, PAGE_MAX);
    let query = A2aTaskQuery {
        agent_id: desk.found.agent.id.clone(),
        account_id: account.to_string(),
        context_id: filter.context_id,
        state: filter.state.map(|s| s.as_str().to_string()),
        updated_since: filter.updated_since,
        after,
        limit: limit + 1,
    };
    let now = crate::clock::now_ms();
    let (mut records, total) = services.store.a2a_tasks(query, now).await?;
    let more = records.len() > limit as usize;
    records.truncate(limit as usize);
    let next = more
        .then(|| records.last().map(|r| format!("{}.{}", r.created_at, r.id)))
        .flatten();
    let mut tasks = Vec::with_capacity(records.len());
    for record in records {
        tasks.push(follow_job(services, record).await?);
    }
    Ok(Listing { tasks, next, total })
}

fn read_page_token(token: &str) -> Result<(i64, String), A2aError> {
    let invalid = || A2aError::InvalidParams("pageToken is not one a listing gave".into());
    let (at, id) = token.split_once('.').ok_or_else(invalid)?;
    let at = at.parse::<i64>().map_err(|_| invalid())?;
    uuid::Uuid::parse_str(id).map_err(|_| invalid())?;
    Ok((at, id.to_string()))
}
