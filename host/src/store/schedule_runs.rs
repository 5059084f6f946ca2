//! A schedule's runs (migration 34): taken (`running`, or `skipped`) in the write that moves
//! its schedule's next time on, kept alive by their host's lease, ended once, and read back
//! for the owner. The schedules themselves are `schedules.rs`.

use serde_json::{Value, json};

use super::schedules::{COLUMNS, ScheduleStatus, schedule_from_row};
use super::sql::{Db, Row, args};
use super::{Store, StoreError};
use crate::domain::schedule::Delivery;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    Running,
    Succeeded,
    Failed,
    Skipped,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Succeeded => "succeeded",
            RunState::Failed => "failed",
            RunState::Skipped => "skipped",
        }
    }

    fn parse(text: &str) -> Option<RunState> {
        Some(match text {
            "running" => RunState::Running,
            "succeeded" => RunState::Succeeded,
            "failed" => RunState::Failed,
            "skipped" => RunState::Skipped,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone)]
pub struct ScheduleRun {
    pub id: String,
    pub schedule_id: String,
    pub due_at: i64,
    pub state: RunState,
    pub started_at: i64,
    pub deadline_at: i64,
    pub finished_at: Option<i64>,
    pub output: Option<String>,
    pub error: Option<String>,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub enum RunEnd {
    Succeeded { output: String },
    Failed { error: String },
}

/// Runs of one schedule kept; older ones are deleted as new ones come.
pub const RUNS_KEPT: i64 = 100;

const RUN_COLUMNS: &str = "id, schedule_id, due_at, state, started_at, deadline_at, finished_at, output, error";

fn run_from_row(row: &Row) -> Result<ScheduleRun, StoreError> {
    let state: String = row.get(3)?;
    Ok(ScheduleRun {
        id: row.get(0)?,
        schedule_id: row.get(1)?,
        due_at: row.get(2)?,
        state: RunState::parse(&state).ok_or_else(|| StoreError::Corrupt(format!("run in unknown state {state}")))?,
        started_at: row.get(4)?,
        deadline_at: row.get(5)?,
        finished_at: row.get(6)?,
        output: row.get(7)?,
        error: row.get(8)?,
    })
}

impl Store {
    /// Takes the schedule's time `due_at` for `run` (running, or skipped), moving it on to
    /// `next_run_at` (`None`: it is done), unless another host took it first or its last run
    /// is still running. True when this call took it.
    pub async fn take_schedule_run(
        &self,
        schedule_id: &str,
        next_run_at: Option<i64>,
        run: ScheduleRun,
    ) -> Result<bool, StoreError> {
        let schedule_id = schedule_id.to_string();
        self.write(move |db| {
            let now = crate::clock::now_ms();
            let finished = (run.state == RunState::Skipped).then_some(run.started_at);
            let taken = db.execute(
                "UPDATE schedules SET next_run_at = ?3, status = ?4, last_run_at = ?5,
                     last_outcome = CASE WHEN ?6 = 'skipped' THEN 'skipped' ELSE last_outcome END, updated_at = ?5
                 WHERE id = ?1 AND status = 'active' AND next_run_at = ?2
                   AND NOT EXISTS (SELECT 1 FROM schedule_runs WHERE schedule_id = ?1 AND state = 'running')",
                args![
                    &schedule_id,
                    run.due_at,
                    next_run_at,
                    if next_run_at.is_some() { "active" } else { "done" },
                    now,
                    run.state.as_str()
                ],
            )? == 1;
            if !taken {
                return Ok(false);
            }
            db.execute(
                &format!("INSERT INTO schedule_runs ({RUN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, ?8)"),
                args![
                    &run.id,
                    &schedule_id,
                    run.due_at,
                    run.state.as_str(),
                    run.started_at,
                    run.deadline_at,
                    finished,
                    run.error
                ],
            )?;
            db.execute(
                "DELETE FROM schedule_runs WHERE schedule_id = ?1 AND state <> 'running' AND id NOT IN
                     (SELECT id FROM schedule_runs WHERE schedule_id = ?1 ORDER BY due_at DESC LIMIT ?2)",
                args![&schedule_id, RUNS_KEPT],
            )?;
            Ok(true)
        })
        .await
    }

    /// Ends a running run, unless it has ended already (recovery failed it as cut off). A
    /// failure counts against its schedule: after `stop_after` in a row an active schedule
    /// is stopped and `schedule.stopped` raised. A success delivered by webhook raises
    /// `schedule.ran` with its output. True when this call ended it.
    pub async fn finish_schedule_run(&self, run_id: &str, end: RunEnd, stop_after: u64) -> Result<bool, StoreError> {
        let run_id = run_id.to_string();
        self.write(move |db| finish_in(db, &run_id, &end, stop_after)).await
    }

    /// Extends a running run's lease; false when it is no longer running.
    pub async fn renew_schedule_run(&self, run_id: &str, until: i64) -> Result<bool, StoreError> {
        let run_id = run_id.to_string();
        self.write(move |db| {
            Ok(db.execute(
                "UPDATE schedule_runs SET deadline_at = ?2 WHERE id = ?1 AND state = 'running'",
                args![run_id, until],
            )? == 1)
        })
        .await
    }

    /// Runs still `running` whose lease ended before `before`: their host stopped.
    pub async fn schedule_runs_cut_off(&self, before: i64) -> Result<Vec<String>, StoreError> {
        self.read(move |db| {
            db.query(
                "SELECT id FROM schedule_runs WHERE state = 'running' AND deadline_at < ?1",
                args![before],
            )?
            .iter()
            .map(|row| row.get(0))
            .collect()
        })
        .await
    }

    /// The schedule's runs, newest first.
    pub async fn schedule_runs(&self, schedule_id: &str, limit: u32) -> Result<Vec<ScheduleRun>, StoreError> {
        let schedule_id = schedule_id.to_string();
        self.read(move |db| {
            db.query(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM schedule_runs WHERE schedule_id = ?1 ORDER BY due_at DESC LIMIT ?2"
                ),
                args![schedule_id, i64::from(limit)],
            )?
            .iter()
            .map(run_from_row)
            .collect()
        })
        .await
    }
}

fn finish_in(db: &dyn Db, run_id: &str, end: &RunEnd, stop_after: u64) -> Result<bool, StoreError> {
    let now = crate::clock::now_ms();
    let (state, output, error) = match end {
        RunEnd::Succeeded { output } => (RunState::Succeeded, Some(output.as_str()), None),
        RunEnd::Failed { error } => (RunState::Failed, None, Some(error.as_str())),
    };
    let ended = db.execute(
        "UPDATE schedule_runs SET state = ?2, finished_at = ?3, output = ?4, error = ?5
         WHERE id = ?1 AND state = 'running'",
        args![run_id, state.as_str(), now, output, error],
    )? == 1;
    if !ended {
        return Ok(false);
    }
    let Some(row) = db.query_opt(
        &format!(
            "SELECT {} FROM schedules s JOIN schedule_runs r ON r.schedule_id = s.id WHERE r.id = ?1",
            COLUMNS
                .split(", ")
                .map(|c| format!("s.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        args![run_id],
    )?
    else {
        return Ok(true);
    };
    let schedule = schedule_from_row(&row)?;
    let failures = match state {
        RunState::Succeeded => 0,
        _ => schedule.consecutive_failures + 1,
    };
    let stop = state == RunState::Failed && failures >= stop_after as i64 && schedule.status == ScheduleStatus::Active;
    let reason = stop.then(|| {
        format!(
            "failed {failures} times in a row; the last time: {}",
            error.unwrap_or_default()
        )
    });
    db.execute(
        "UPDATE schedules SET last_outcome = ?2, consecutive_failures = ?3, updated_at = ?4,
             status = CASE WHEN ?5 = 1 AND status = 'active' THEN 'stopped' ELSE status END,
             stopped_reason = CASE WHEN ?5 = 1 AND status = 'active' THEN ?6 ELSE stopped_reason END
         WHERE id = ?1",
        args![&schedule.id, state.as_str(), failures, now, stop, reason.clone()],
    )?;
    let about = |extra: Value| {
        let mut data = json!({
            "schedule_id": schedule.id,
            "schedule": schedule.def.name,
            "agent_id": schedule.agent_id,
            "run_id": run_id,
        });
        if let (Value::Object(data), Value::Object(extra)) = (&mut data, extra) {
            data.extend(extra);
        }
        data
    };
    if stop {
        super::webhooks::emit_in(
            db,
            &schedule.account_id,
            "schedule.stopped",
            &format!("schedule.stopped:{run_id}"),
            about(json!({ "failures": failures, "reason": reason })),
        )?;
    }
    if let (RunState::Succeeded, Delivery::Webhook) = (state, &schedule.def.delivery) {
        super::webhooks::emit_in(
            db,
            &schedule.account_id,
            "schedule.ran",
            &format!("schedule.ran:{run_id}"),
            about(json!({ "output": output })),
        )?;
    }
    Ok(true)
}
