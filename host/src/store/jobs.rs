use super::sql::{Row, args};
use super::{Store, StoreError, json_column, to_json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Queued,
    Running,
    Succeeded,
    Failed,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
        }
    }

    fn parse(text: &str) -> Option<JobState> {
        Some(match text {
            "queued" => JobState::Queued,
            "running" => JobState::Running,
            "succeeded" => JobState::Succeeded,
            "failed" => JobState::Failed,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone)]
pub struct JobRecord {
    pub id: String,
    pub agent_id: String,
    pub command: String,
    pub origin: String,
    pub parameters: serde_json::Value,
    pub raw_text: Option<String>,
    pub state: JobState,
    pub progress: Option<u8>,
    pub response: Option<String>,
    pub format: Option<String>,
    pub artifact_url: Option<String>,
    pub error: Option<String>,
    pub code: Option<String>,
    pub created_at: i64,
    pub expires_at: i64,
    /// When it ended, once it has.
    pub finished_at: Option<i64>,
}

/// How a job ended.
#[derive(Debug, Clone)]
pub enum JobOutcome {
    Succeeded {
        response: String,
        format: String,
        artifact_url: Option<String>,
    },
    Failed {
        error: String,
        code: String,
    },
}

const COLUMNS: &str = "id, agent_id, command, origin, parameters, raw_text, state, progress, response, format, \
     artifact_url, error, code, created_at, expires_at, finished_at";

fn job_from_row(row: &Row) -> Result<JobRecord, StoreError> {
    let state: String = row.get(6)?;
    let Some(state) = JobState::parse(&state) else {
        return Err(StoreError::Corrupt(format!("job in unknown state {state}")));
    };
    Ok(JobRecord {
        id: row.get(0)?,
        agent_id: row.get(1)?,
        command: row.get(2)?,
        origin: row.get(3)?,
        parameters: json_column(&row.get::<String>(4)?, "job parameters")?,
        raw_text: row.get(5)?,
        state,
        progress: row.get(7)?,
        response: row.get(8)?,
        format: row.get(9)?,
        artifact_url: row.get(10)?,
        error: row.get(11)?,
        code: row.get(12)?,
        created_at: row.get(13)?,
        expires_at: row.get(14)?,
        finished_at: row.get(15)?,
    })
}

impl Store {
    /// Records a queued job. A paid job also serves its payment (`settled` → `served`,
    /// linked to the job) in the same transaction: after a crash the job exists and will
    /// run exactly when the payment counts as served, so a payer is never both served by
    /// the job and refunded for it.
    pub async fn insert_job(&self, job: JobRecord, paid_by: Option<String>) -> Result<(), StoreError> {
        self.write(move |db| {
            db.execute(
                "INSERT INTO jobs (id, agent_id, command, origin, parameters, raw_text, state, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                args![
                    &job.id,
                    job.agent_id,
                    job.command,
                    job.origin,
                    to_json(&job.parameters),
                    job.raw_text,
                    job.state.as_str(),
                    job.created_at,
                    job.expires_at
                ],
            )?;
            if let Some(payment) = paid_by {
                let linked = db.execute(
                    "UPDATE payments SET job_id = ?2, state = 'served', updated_at = ?3
                     WHERE id = ?1 AND state = 'settled'",
                    args![&payment, &job.id, job.created_at],
                )?;
                if linked != 1 {
                    return Err(StoreError::Conflict(format!(
                        "payment {payment} is no longer settled; the job was not queued"
                    )));
                }
            }
            Ok(())
        })
        .await
    }

    pub async fn job(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        let id = id.to_string();
        self.read(move |db| {
            db.query_opt(&format!("SELECT {COLUMNS} FROM jobs WHERE id = ?1"), args![id])?
                .map(|row| job_from_row(&row))
                .transpose()
        })
        .await
    }

    /// The agent's jobs, newest first (expired ones are deleted by the clean-up).
    pub async fn jobs_of(&self, agent_id: &str, limit: u32) -> Result<Vec<JobRecord>, StoreError> {
        let agent_id = agent_id.to_string();
        self.read(move |db| {
            db.query(
                &format!("SELECT {COLUMNS} FROM jobs WHERE agent_id = ?1 ORDER BY created_at DESC, id LIMIT ?2"),
                args![agent_id, limit as i64],
            )?
            .iter()
            .map(job_from_row)
            .collect()
        })
        .await
    }

    pub async fn jobs_in_state(&self, state: JobState) -> Result<Vec<JobRecord>, StoreError> {
        self.read(move |db| {
            db.query(
                &format!("SELECT {COLUMNS} FROM jobs WHERE state = ?1 ORDER BY created_at"),
                args![state.as_str()],
            )?
            .iter()
            .map(job_from_row)
            .collect()
        })
        .await
    }

    /// Moves a queued job to running, leased to the caller until `lease_until`; false if it
    /// was not queued (another host or task took it).
    pub async fn start_job(&self, id: &str, lease_until: i64) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            let changed = db.execute(
                "UPDATE jobs SET state = 'running', started_at = ?2, progress = 0, lease_until = ?3
                 WHERE id = ?1 AND state = 'queued'",
                args![id, crate::clock::now_ms(), lease_until],
            )?;
            Ok(changed == 1)
        })
        .await
    }

    /// Extends a running job's lease; false when it is no longer running.
    pub async fn renew_job_lease(&self, id: &str, lease_until: i64) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            Ok(db.execute(
                "UPDATE jobs SET lease_until = ?2 WHERE id = ?1 AND state = 'running'",
                args![id, lease_until],
            )? == 1)
        })
        .await
    }

    /// How many jobs wait and run (every host's), and when the oldest waiting one was made.
    pub async fn job_counts(&self) -> Result<(u64, u64, Option<i64>), StoreError> {
        self.read(|db| {
            let row = db.query_one(
                "SELECT COUNT(*) FILTER (WHERE state = 'queued'), COUNT(*) FILTER (WHERE state = 'running'),
                        MIN(created_at) FILTER (WHERE state = 'queued')
                 FROM jobs WHERE state IN ('queued', 'running')",
                args![],
            )?;
            Ok((row.get::<i64>(0)? as u64, row.get::<i64>(1)? as u64, row.get(2)?))
        })
        .await
    }

    /// Ends the leases of these running jobs now, as if their host had died: the next
    /// recovery pass (another host's, or the next start's) takes them up.
    pub async fn release_job_leases(&self, ids: Vec<String>) -> Result<(), StoreError> {
        self.write(move |db| {
            for id in &ids {
                db.execute(
                    "UPDATE jobs SET lease_until = 0 WHERE id = ?1 AND state = 'running'",
                    args![id.as_str()],
                )?;
            }
            Ok(())
        })
        .await
    }

    /// Running jobs whose lease ended before `before`: their host stopped renewing it.
    pub async fn jobs_cut_off(&self, before: i64) -> Result<Vec<JobRecord>, StoreError> {
        self.read(move |db| {
            db.query(
                &format!(
                    "SELECT {COLUMNS} FROM jobs
                     WHERE state = 'running' AND (lease_until IS NULL OR lease_until < ?1) ORDER BY created_at"
                ),
                args![before],
            )?
            .iter()
            .map(job_from_row)
            .collect()
        })
        .await
    }

    pub async fn set_job_progress(&self, id: &str, percent: u8) -> Result<(), StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            db.execute(
                "UPDATE jobs SET progress = ?2 WHERE id = ?1 AND state = 'running'",
                args![id, percent],
            )?;
            Ok(())
        })
        .await
    }

    /// Records the end of an unfinished job; a finished one is left as it is.
    /// Ends a queued or running job; false when it had ended already (another host, or
    /// recovery, ended it first).
    pub async fn finish_job(&self, id: &str, outcome: JobOutcome) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.write(move |db| finish(db, &id, outcome)).await
    }

    /// A client asks to stop a job: a queued one ends now (`cancelled`); a running one is
    /// marked, for the host running it to stop. The job's state before, or `None` when
    /// there is no such job.
    pub async fn request_job_cancel(&self, id: &str, why: &str) -> Result<Option<JobState>, StoreError> {
        let (id, why) = (id.to_string(), why.to_string());
        self.write(move |db| {
            let Some(row) = db.query_opt("SELECT state FROM jobs WHERE id = ?1", args![&id])? else {
                return Ok(None);
            };
            let state: String = row.get(0)?;
            let state = JobState::parse(&state).ok_or_else(|| StoreError::Corrupt(format!("job in state {state}")))?;
            match state {
                JobState::Queued => {
                    let cancelled = JobOutcome::Failed {
                        error: why,
                        code: CANCELLED.into(),
                    };
                    finish(db, &id, cancelled)?;
                }
                JobState::Running => {
                    db.execute(
                        "UPDATE jobs SET cancel_requested_at = ?2 WHERE id = ?1 AND cancel_requested_at IS NULL",
                        args![&id, crate::clock::now_ms()],
                    )?;
                }
                JobState::Succeeded | JobState::Failed => {}
            }
            Ok(Some(state))
        })
        .await
    }

    /// Whether a client asked to stop this job.
    pub async fn job_cancel_requested(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.read(move |db| {
            Ok(db
                .query_opt(
                    "SELECT 1 FROM jobs WHERE id = ?1 AND cancel_requested_at IS NOT NULL",
                    args![id],
                )?
                .is_some())
        })
        .await
    }
}

/// The code of a job a client cancelled.
pub const CANCELLED: &str = "cancelled";

/// Ends a queued or running job in this write; true when it did (it had not ended).
fn finish(db: &dyn super::sql::Db, id: &str, outcome: JobOutcome) -> Result<bool, StoreError> {
    let now = crate::clock::now_ms();
    let (changed, event, code) = match outcome {
        JobOutcome::Succeeded {
            response,
            format,
            artifact_url,
        } => (
            db.execute(
                "UPDATE jobs SET state = 'succeeded', progress = 100, response = ?2, format = ?3, artifact_url = ?4,
                    finished_at = ?5 WHERE id = ?1 AND state IN ('queued', 'running')",
                args![id, response, format, artifact_url, now],
            )?,
            "job.succeeded",
            None,
        ),
        JobOutcome::Failed { error, code } => (
            db.execute(
                "UPDATE jobs SET state = 'failed', error = ?2, code = ?3, finished_at = ?4
                 WHERE id = ?1 AND state IN ('queued', 'running')",
                args![id, error, &code, now],
            )?,
            "job.failed",
            Some(code),
        ),
    };
    if changed == 1 {
        let row = db.query_one("SELECT agent_id, command FROM jobs WHERE id = ?1", args![id])?;
        let agent_id: String = row.get(0)?;
        let data = serde_json::json!({
            "job_id": &id, "agent_id": &agent_id, "command": row.get::<String>(1)?, "code": code,
        });
        super::webhooks::emit_for_agent_in(db, &agent_id, event, &format!("{event}:{id}"), data)?;
    }
    Ok(changed == 1)
}

impl Store {
    pub async fn delete_expired_jobs(&self, now: i64) -> Result<usize, StoreError> {
        self.write(move |db| Ok(db.execute("DELETE FROM jobs WHERE expires_at < ?1", args![now])? as usize))
            .await
    }
}
