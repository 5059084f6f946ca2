//! Schedules (migration 34): made, kept in step with a manifest, paused and resumed, and
//! found when due. Their runs are `schedule_runs.rs`: a run is taken by moving its schedule's
//! `next_run_at` forward from the time it was due, in the write that records the run, so two
//! hosts that see the same time due cannot both take it.

use super::sql::{Db, Row, args};
use super::{Store, StoreError, json_column, to_json};
use crate::domain::schedule::{Missed, ScheduleDef, Timing};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleStatus {
    Active,
    /// Its owner paused it.
    Paused,
    /// It failed too many times in a row; its owner resumes it.
    Stopped,
    /// A one-off that ran.
    Done,
}

impl ScheduleStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleStatus::Active => "active",
            ScheduleStatus::Paused => "paused",
            ScheduleStatus::Stopped => "stopped",
            ScheduleStatus::Done => "done",
        }
    }

    fn parse(text: &str) -> Option<ScheduleStatus> {
        Some(match text {
            "active" => ScheduleStatus::Active,
            "paused" => ScheduleStatus::Paused,
            "stopped" => ScheduleStatus::Stopped,
            "done" => ScheduleStatus::Done,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone)]
pub struct ScheduleRecord {
    pub id: String,
    pub account_id: String,
    pub agent_id: String,
    pub def: ScheduleDef,
    /// `manifest` or `api`.
    pub source: String,
    pub status: ScheduleStatus,
    pub stopped_reason: Option<String>,
    pub next_run_at: Option<i64>,
    pub last_run_at: Option<i64>,
    /// `succeeded`, `failed` or `skipped`: how its last run ended.
    pub last_outcome: Option<String>,
    pub consecutive_failures: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

pub(super) const COLUMNS: &str = "id, account_id, agent_id, name, source, timing, action, delivery, missed, status, \
     stopped_reason, next_run_at, last_run_at, last_outcome, consecutive_failures, created_at, updated_at";

impl ScheduleRecord {
    /// A schedule made now, first running at `next_run_at` (`None`: never; a one-off past).
    pub fn new(account_id: &str, agent_id: &str, source: &str, def: ScheduleDef, next_run_at: Option<i64>) -> Self {
        let now = crate::clock::now_ms();
        ScheduleRecord {
            id: format!("sch_{}", crate::random::hex_token(8)),
            account_id: account_id.to_string(),
            agent_id: agent_id.to_string(),
            status: status_of(&def, next_run_at),
            def,
            source: source.to_string(),
            stopped_reason: None,
            next_run_at,
            last_run_at: None,
            last_outcome: None,
            consecutive_failures: 0,
            created_at: now,
            updated_at: now,
        }
    }
}

pub(super) fn schedule_from_row(row: &Row) -> Result<ScheduleRecord, StoreError> {
    let status: String = row.get(9)?;
    let missed = match row.get::<String>(8)?.as_str() {
        "skip" => Missed::Skip,
        _ => Missed::CatchUp,
    };
    Ok(ScheduleRecord {
        id: row.get(0)?,
        account_id: row.get(1)?,
        agent_id: row.get(2)?,
        def: ScheduleDef {
            name: row.get(3)?,
            timing: json_column(&row.get::<String>(5)?, "schedule timing")?,
            action: json_column(&row.get::<String>(6)?, "schedule action")?,
            delivery: json_column(&row.get::<String>(7)?, "schedule delivery")?,
            missed,
            enabled: status != "paused",
        },
        source: row.get(4)?,
        status: ScheduleStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("schedule in unknown status {status}")))?,
        stopped_reason: row.get(10)?,
        next_run_at: row.get(11)?,
        last_run_at: row.get(12)?,
        last_outcome: row.get(13)?,
        consecutive_failures: row.get(14)?,
        created_at: row.get(15)?,
        updated_at: row.get(16)?,
    })
}

fn missed_text(missed: Missed) -> &'static str {
    match missed {
        Missed::CatchUp => "catch_up",
        Missed::Skip => "skip",
    }
}

fn status_of(def: &ScheduleDef, next_run_at: Option<i64>) -> ScheduleStatus {
    match (def.enabled, next_run_at) {
        (false, _) => ScheduleStatus::Paused,
        (true, Some(_)) => ScheduleStatus::Active,
        (true, None) => ScheduleStatus::Done,
    }
}

fn count_of_account(db: &dyn Db, account_id: &str) -> Result<i64, StoreError> {
    db.query_one(
        "SELECT COUNT(*) FROM schedules WHERE account_id = ?1",
        args![account_id],
    )?
    .get(0)
}

fn quota_error(limit: u64) -> StoreError {
    StoreError::QuotaExceeded(format!("An account may keep {limit} schedules; delete one first"))
}

/// A new schedule's row (its status follows from its definition and first time).
fn insert_in(db: &dyn Db, record: &ScheduleRecord) -> Result<(), StoreError> {
    let def = &record.def;
    db.execute(
        &format!("INSERT INTO schedules ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL, ?11, NULL, NULL, 0, ?12, ?12)"),
        args![
            &record.id,
            &record.account_id,
            &record.agent_id,
            &def.name,
            &record.source,
            to_json(&def.timing),
            to_json(&def.action),
            to_json(&def.delivery),
            missed_text(def.missed),
            status_of(def, record.next_run_at).as_str(),
            record.next_run_at,
            record.created_at
        ],
    )
    .map_err(|e| match e.is_unique_violation() {
        true => StoreError::Conflict(format!("the agent has a schedule named '{}' already", def.name)),
        false => e,
    })?;
    Ok(())
}

/// What a schedule's definition is stored as, to tell whether a manifest changed it. An
/// interval counts from when it was made: applying the same manifest again does not move it.
fn stored_form(def: &ScheduleDef) -> (String, String, String, &'static str, bool) {
    let timing = match &def.timing {
        Timing::Every { seconds, .. } => Timing::Every {
            seconds: *seconds,
            from: 0,
        },
        other => other.clone(),
    };
    (
        to_json(&timing),
        to_json(&def.action),
        to_json(&def.delivery),
        missed_text(def.missed),
        def.enabled,
    )
}

impl Store {
    /// Records a schedule made through the API or the CLI, unless the account keeps `limit`
    /// already (counted in the same write).
    pub async fn insert_schedule(&self, record: ScheduleRecord, limit: u64) -> Result<(), StoreError> {
        self.write(move |db| {
            // Two at once (two hosts): the second counts the first.
            db.serialize(&format!("account-schedules:{}", record.account_id))?;
            if count_of_account(db, &record.account_id)? >= limit as i64 {
                return Err(quota_error(limit));
            }
            insert_in(db, &record)
        })
        .await
    }

    /// Makes the agent's manifest schedules those of `wanted` (each with its next time if it
    /// were new): a new name is added, a changed one takes its new definition (and starts
    /// afresh), an unchanged one keeps its times and history, and one the manifest no longer
    /// names is deleted. A schedule of the same name made through the API becomes the
    /// manifest's. The account keeps at most `limit` in all.
    pub async fn sync_manifest_schedules(
        &self,
        account_id: &str,
        agent_id: &str,
        wanted: Vec<(ScheduleDef, Option<i64>)>,
        limit: u64,
    ) -> Result<(), StoreError> {
        let (account_id, agent_id) = (account_id.to_string(), agent_id.to_string());
        self.write(move |db| {
            db.serialize(&format!("account-schedules:{account_id}"))?;
            let now = crate::clock::now_ms();
            let existing: Vec<ScheduleRecord> = db
                .query(
                    &format!("SELECT {COLUMNS} FROM schedules WHERE agent_id = ?1"),
                    args![&agent_id],
                )?
                .iter()
                .map(schedule_from_row)
                .collect::<Result<_, _>>()?;
            for old in existing.iter().filter(|s| s.source == "manifest") {
                if !wanted.iter().any(|(def, _)| def.name == old.def.name) {
                    db.execute("DELETE FROM schedules WHERE id = ?1", args![&old.id])?;
                }
            }
            for (def, next_run_at) in &wanted {
                match existing.iter().find(|s| s.def.name == def.name) {
                    Some(old) if old.source == "manifest" && stored_form(&old.def) == stored_form(def) => {}
                    Some(old) => {
                        db.execute(
                            "UPDATE schedules SET source = 'manifest', timing = ?2, action = ?3, delivery = ?4,
                                 missed = ?5, status = ?6, stopped_reason = NULL, next_run_at = ?7,
                                 consecutive_failures = 0, updated_at = ?8 WHERE id = ?1",
                            args![
                                &old.id,
                                to_json(&def.timing),
                                to_json(&def.action),
                                to_json(&def.delivery),
                                missed_text(def.missed),
                                status_of(def, *next_run_at).as_str(),
                                *next_run_at,
                                now
                            ],
                        )?;
                    }
                    None => insert_in(
                        db,
                        &ScheduleRecord::new(&account_id, &agent_id, "manifest", def.clone(), *next_run_at),
                    )?,
                }
            }
            if count_of_account(db, &account_id)? > limit as i64 {
                return Err(quota_error(limit));
            }
            Ok(())
        })
        .await
    }

    pub async fn schedules_of(&self, agent_id: &str) -> Result<Vec<ScheduleRecord>, StoreError> {
        let agent_id = agent_id.to_string();
        self.read(move |db| {
            db.query(
                &format!("SELECT {COLUMNS} FROM schedules WHERE agent_id = ?1 ORDER BY name"),
                args![agent_id],
            )?
            .iter()
            .map(schedule_from_row)
            .collect()
        })
        .await
    }

    /// The agent's schedule by id or by name.
    pub async fn schedule(&self, agent_id: &str, id_or_name: &str) -> Result<Option<ScheduleRecord>, StoreError> {
        let (agent_id, key) = (agent_id.to_string(), id_or_name.to_string());
        self.read(move |db| {
            db.query_opt(
                &format!("SELECT {COLUMNS} FROM schedules WHERE agent_id = ?1 AND (id = ?2 OR name = ?2)"),
                args![agent_id, key],
            )?
            .map(|row| schedule_from_row(&row))
            .transpose()
        })
        .await
    }

    /// Deletes it and its runs; false when it was not there.
    pub async fn delete_schedule(&self, agent_id: &str, id: &str) -> Result<bool, StoreError> {
        let (agent_id, id) = (agent_id.to_string(), id.to_string());
        self.write(move |db| {
            Ok(db.execute(
                "DELETE FROM schedules WHERE agent_id = ?1 AND id = ?2",
                args![agent_id, id],
            )? == 1)
        })
        .await
    }

    /// Pauses a schedule, or resumes it (its failures forgotten) to run next at `next_run_at`
    /// (`None`: a one-off whose time has passed, which is then done).
    pub async fn set_schedule_enabled(
        &self,
        agent_id: &str,
        id: &str,
        enabled: bool,
        next_run_at: Option<i64>,
    ) -> Result<Option<ScheduleRecord>, StoreError> {
        let (agent_id, id) = (agent_id.to_string(), id.to_string());
        self.write(move |db| {
            let now = crate::clock::now_ms();
            let changed = match enabled {
                false => db.execute(
                    "UPDATE schedules SET status = 'paused', updated_at = ?3
                     WHERE agent_id = ?1 AND id = ?2 AND status IN ('active', 'stopped')",
                    args![&agent_id, &id, now],
                )?,
                true => db.execute(
                    "UPDATE schedules SET status = ?3, next_run_at = ?4, stopped_reason = NULL,
                         consecutive_failures = 0, updated_at = ?5
                     WHERE agent_id = ?1 AND id = ?2 AND status IN ('paused', 'stopped')",
                    args![
                        &agent_id,
                        &id,
                        if next_run_at.is_some() { "active" } else { "done" },
                        next_run_at,
                        now
                    ],
                )?,
            };
            let _ = changed;
            db.query_opt(
                &format!("SELECT {COLUMNS} FROM schedules WHERE agent_id = ?1 AND id = ?2"),
                args![agent_id, id],
            )?
            .map(|row| schedule_from_row(&row))
            .transpose()
        })
        .await
    }

    /// Active schedules whose time has come by `now`, the longest due first; one whose last
    /// run still runs waits (and does not hold a place in the list meanwhile).
    pub async fn due_schedules(&self, now: i64, limit: u32) -> Result<Vec<ScheduleRecord>, StoreError> {
        self.read(move |db| {
            db.query(
                &format!(
                    "SELECT {COLUMNS} FROM schedules WHERE status = 'active' AND next_run_at <= ?1
                       AND NOT EXISTS (SELECT 1 FROM schedule_runs r
                                       WHERE r.schedule_id = schedules.id AND r.state = 'running')
                     ORDER BY next_run_at LIMIT ?2"
                ),
                args![now, i64::from(limit)],
            )?
            .iter()
            .map(schedule_from_row)
            .collect()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::schedule::{Action, ScheduleSpec};
    use crate::store::{RunState, ScheduleRun};

    fn def(name: &str) -> ScheduleDef {
        ScheduleSpec {
            name: name.into(),
            every_seconds: Some(60),
            prompt: Some("Go.".into()),
            ..Default::default()
        }
        .check(0)
        .unwrap()
    }

    async fn store_with_agent(dir: &tempfile::TempDir) -> Store {
        let store = Store::open(&dir.path().join("t.db"), std::time::Duration::from_secs(5)).unwrap();
        store
            .write(|db| {
                db.execute(
                    "INSERT INTO accounts (id, name, plan, created_at) VALUES ('acc', 'acc', 'free', 0)",
                    args![],
                )?;
                db.execute(
                    "INSERT INTO agents (id, account_id, username, name, created_at, updated_at)
                     VALUES ('agent', 'acc', 'agent', 'Agent', 0, 0)",
                    args![],
                )?;
                Ok(())
            })
            .await
            .unwrap();
        store
    }

    fn run(schedule_id: &str, due_at: i64) -> ScheduleRun {
        ScheduleRun {
            id: format!("srn_{schedule_id}_{due_at}"),
            schedule_id: schedule_id.into(),
            due_at,
            state: RunState::Running,
            started_at: 0,
            deadline_at: i64::MAX,
            finished_at: None,
            output: None,
            error: None,
        }
    }

    /// Schedules whose runs last longer than their interval must not fill every pass's list
    /// and keep everyone else's waiting (a review found it).
    #[tokio::test]
    async fn schedules_still_running_hold_no_place_among_those_due() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_agent(&dir).await;
        for i in 0..60 {
            let record = ScheduleRecord::new("acc", "agent", "api", def(&format!("busy-{i}")), Some(1_000));
            let id = record.id.clone();
            store.insert_schedule(record, 1_000).await.unwrap();
            assert!(
                store
                    .take_schedule_run(&id, Some(61_000), run(&id, 1_000))
                    .await
                    .unwrap()
            );
            // Due again, its run still going.
            store
                .write(move |db| {
                    db.execute("UPDATE schedules SET next_run_at = 1000 WHERE id = ?1", args![id])?;
                    Ok(())
                })
                .await
                .unwrap();
        }
        let waiting = ScheduleRecord::new("acc", "agent", "api", def("waiting"), Some(2_000));
        store.insert_schedule(waiting.clone(), 1_000).await.unwrap();
        let due = store.due_schedules(5_000, 50).await.unwrap();
        assert_eq!(
            due.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
            [waiting.id.as_str()]
        );
        assert!(matches!(due[0].def.action, Action::Prompt { .. }));
    }

    #[tokio::test]
    async fn an_account_keeps_at_most_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_agent(&dir).await;
        for i in 0..2 {
            let record = ScheduleRecord::new("acc", "agent", "api", def(&format!("s{i}")), Some(1));
            store.insert_schedule(record, 2).await.unwrap();
        }
        let third = ScheduleRecord::new("acc", "agent", "api", def("s2"), Some(1));
        assert!(matches!(
            store.insert_schedule(third, 2).await,
            Err(StoreError::QuotaExceeded(_))
        ));
        // A manifest of three is refused as a whole.
        let wanted = (0..3).map(|i| (def(&format!("m{i}")), Some(1))).collect();
        assert!(store.sync_manifest_schedules("acc", "agent", wanted, 2).await.is_err());
        assert_eq!(store.schedules_of("agent").await.unwrap().len(), 2);
    }
}
