//! A2A tasks (migration 31): one per message an A2A client sent an agent, kept until it
//! expires. A task's end is written once: a cancel and a finish racing each other cannot
//! both win.

use serde_json::Value;

use super::sql::{Row, args};
use super::{Store, StoreError, json_column, to_json};

/// The states a task can leave; the others are ends.
const OPEN_STATES: &str = "('submitted', 'working', 'input-required')";

#[derive(Debug, Clone)]
pub struct A2aTaskRecord {
    pub id: String,
    pub agent_id: String,
    /// The account whose credential sent it; `None` for a caller without one.
    pub account_id: Option<String>,
    pub context_id: String,
    /// The command it runs; `None` for a chat turn.
    pub skill: Option<String>,
    pub state: String,
    pub job_id: Option<String>,
    pub request: Value,
    pub reply: Option<Value>,
    pub error: Option<String>,
    /// A paid task's x402 state.
    pub payment: Option<Value>,
    pub created_at: i64,
    pub updated_at: i64,
    pub expires_at: i64,
}

/// A change of a task from one state to another; what is `None` stays.
pub struct A2aTaskMove {
    pub from: &'static str,
    pub to: &'static str,
    pub payment: Option<Value>,
    pub error: Option<String>,
    pub expires_at: Option<i64>,
}

/// Which tasks a listing shows, newest first.
pub struct A2aTaskQuery {
    pub agent_id: String,
    pub account_id: String,
    pub context_id: Option<String>,
    pub state: Option<String>,
    /// Only tasks changed at or after this time (ms).
    pub updated_since: Option<i64>,
    /// The last task of the page before: `(created_at, id)`.
    pub after: Option<(i64, String)>,
    pub limit: u32,
}

const COLUMNS: &str = "id, agent_id, account_id, context_id, skill, state, job_id, request, reply, error, \
     created_at, updated_at, expires_at, payment";

fn task_from_row(row: &Row) -> Result<A2aTaskRecord, StoreError> {
    let reply: Option<String> = row.get(8)?;
    let payment: Option<String> = row.get(13)?;
    Ok(A2aTaskRecord {
        id: row.get(0)?,
        agent_id: row.get(1)?,
        account_id: row.get(2)?,
        context_id: row.get(3)?,
        skill: row.get(4)?,
        state: row.get(5)?,
        job_id: row.get(6)?,
        request: json_column(&row.get::<String>(7)?, "a2a task request")?,
        reply: reply.map(|r| json_column(&r, "a2a task reply")).transpose()?,
        error: row.get(9)?,
        created_at: row.get(10)?,
        updated_at: row.get(11)?,
        expires_at: row.get(12)?,
        payment: payment.map(|p| json_column(&p, "a2a task payment")).transpose()?,
    })
}

impl Store {
    pub async fn insert_a2a_task(&self, task: A2aTaskRecord) -> Result<(), StoreError> {
        self.write(move |db| {
            db.execute(
                &format!(
                    "INSERT INTO a2a_tasks ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
                ),
                args![
                    task.id,
                    task.agent_id,
                    task.account_id,
                    task.context_id,
                    task.skill,
                    task.state,
                    task.job_id,
                    to_json(&task.request),
                    task.reply.as_ref().map(to_json),
                    task.error,
                    task.created_at,
                    task.updated_at,
                    task.expires_at,
                    task.payment.as_ref().map(to_json)
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// The task `id`, unless it has expired.
    pub async fn a2a_task(&self, id: &str, now: i64) -> Result<Option<A2aTaskRecord>, StoreError> {
        let id = id.to_string();
        self.read(move |db| {
            db.query_opt(
                &format!("SELECT {COLUMNS} FROM a2a_tasks WHERE id = ?1 AND expires_at >= ?2"),
                args![id, now],
            )?
            .map(|row| task_from_row(&row))
            .transpose()
        })
        .await
    }

    /// A page of an account's tasks with an agent, newest first, and how many match in all.
    pub async fn a2a_tasks(&self, query: A2aTaskQuery, now: i64) -> Result<(Vec<A2aTaskRecord>, u64), StoreError> {
        self.read(move |db| {
            let mut filter = String::from("agent_id = ?1 AND account_id = ?2 AND expires_at >= ?3");
            let mut values = args![&query.agent_id, &query.account_id, now].to_vec();
            if let Some(context) = &query.context_id {
                values.push(context.into());
                filter += &format!(" AND context_id = ?{}", values.len());
            }
            if let Some(state) = &query.state {
                values.push(state.into());
                filter += &format!(" AND state = ?{}", values.len());
            }
            if let Some(since) = query.updated_since {
                values.push(since.into());
                filter += &format!(" AND updated_at >= ?{}", values.len());
            }
            let total: i64 = db
                .query_one(&format!("SELECT COUNT(*) FROM a2a_tasks WHERE {filter}"), &values)?
                .get(0)?;
            if let Some((created_at, id)) = &query.after {
                values.push((*created_at).into());
                values.push(id.into());
                let (at, id) = (values.len() - 1, values.len());
                filter += &format!(" AND (created_at < ?{at} OR (created_at = ?{at} AND id > ?{id}))");
            }
            values.push(i64::from(query.limit).into());
            let page = db
                .query(
                    &format!(
                        "SELECT {COLUMNS} FROM a2a_tasks WHERE {filter} ORDER BY created_at DESC, id LIMIT ?{}",
                        values.len()
                    ),
                    &values,
                )?
                .iter()
                .map(task_from_row)
                .collect::<Result<Vec<_>, _>>()?;
            Ok((page, u64::try_from(total).unwrap_or_default()))
        })
        .await
    }

    /// The last `limit` chat turns of a conversation that were answered, oldest first: what
    /// the client said and what the agent replied.
    pub async fn a2a_context_turns(
        &self,
        agent_id: &str,
        account_id: &str,
        context_id: &str,
        limit: u32,
        now: i64,
    ) -> Result<Vec<(Value, Value)>, StoreError> {
        let (agent_id, account_id, context_id) = (agent_id.to_string(), account_id.to_string(), context_id.to_string());
        self.read(move |db| {
            let mut turns = db
                .query(
                    "SELECT request, reply FROM a2a_tasks
                     WHERE agent_id = ?1 AND account_id = ?2 AND context_id = ?3 AND skill IS NULL
                       AND state = 'completed' AND reply IS NOT NULL AND expires_at >= ?4
                     ORDER BY created_at DESC, id LIMIT ?5",
                    args![agent_id, account_id, context_id, now, i64::from(limit)],
                )?
                .iter()
                .map(|row| {
                    Ok((
                        json_column(&row.get::<String>(0)?, "a2a task request")?,
                        json_column(&row.get::<String>(1)?, "a2a task reply")?,
                    ))
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            turns.reverse();
            Ok(turns)
        })
        .await
    }

    /// Links a task to the job that runs it.
    pub async fn set_a2a_task_job(&self, id: &str, job_id: &str, now: i64) -> Result<(), StoreError> {
        let (id, job_id) = (id.to_string(), job_id.to_string());
        self.write(move |db| {
            db.execute(
                "UPDATE a2a_tasks SET job_id = ?2, updated_at = ?3 WHERE id = ?1",
                args![id, job_id, now],
            )?;
            Ok(())
        })
        .await
    }

    /// Ends a task that has not ended: `state`, with the agent's reply or the error. Whether
    /// this call ended it (an earlier end, a cancel's, stands).
    pub async fn end_a2a_task(
        &self,
        id: &str,
        state: &str,
        reply: Option<Value>,
        error: Option<String>,
        now: i64,
    ) -> Result<bool, StoreError> {
        let (id, state) = (id.to_string(), state.to_string());
        self.write(move |db| {
            let changed = db.execute(
                &format!(
                    "UPDATE a2a_tasks SET state = ?2, reply = ?3, error = ?4, updated_at = ?5
                     WHERE id = ?1 AND state IN {OPEN_STATES}"
                ),
                args![id, state, reply.as_ref().map(to_json), error, now],
            )?;
            Ok(changed == 1)
        })
        .await
    }

    /// Moves a task from `from` to `to` (a paid task claimed by one payment, given back for
    /// another, or declined), writing its payment state and why, and when it expires now.
    /// Whether it was in `from`: of two changes racing for one task, one is made.
    pub async fn move_a2a_task(&self, id: &str, change: A2aTaskMove, now: i64) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            let changed = db.execute(
                "UPDATE a2a_tasks SET state = ?3, payment = COALESCE(?4, payment), error = COALESCE(?5, error),
                    expires_at = COALESCE(?6, expires_at), updated_at = ?7
                 WHERE id = ?1 AND state = ?2",
                args![
                    id,
                    change.from,
                    change.to,
                    change.payment.as_ref().map(to_json),
                    change.error,
                    change.expires_at,
                    now
                ],
            )?;
            Ok(changed == 1)
        })
        .await
    }

    /// Writes a task's payment state (its receipts, once paid).
    pub async fn set_a2a_task_payment(&self, id: &str, payment: Value) -> Result<(), StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            db.execute(
                "UPDATE a2a_tasks SET payment = ?2 WHERE id = ?1",
                args![id, to_json(&payment)],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn delete_expired_a2a_tasks(&self, now: i64) -> Result<usize, StoreError> {
        self.write(move |db| Ok(db.execute("DELETE FROM a2a_tasks WHERE expires_at < ?1", args![now])? as usize))
            .await
    }
}
