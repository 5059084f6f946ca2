use rusqlite::{OptionalExtension, Row, params};

use super::{Store, StoreError, json_column, to_json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Queued,
    Running,
    Succeeded,
    Failed,
}

impl JobState {
    fn as_str(self) -> &'static str {
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
     artifact_url, error, code, created_at, expires_at";

fn job_from_row(row: &Row<'_>) -> rusqlite::Result<Result<JobRecord, StoreError>> {
    let parameters: String = row.get(4)?;
    let state: String = row.get(6)?;
    let Some(state) = JobState::parse(&state) else {
        return Ok(Err(StoreError::Corrupt(format!("job in unknown state {state}"))));
    };
    let parameters = match json_column(&parameters, "job parameters") {
        Ok(p) => p,
        Err(e) => return Ok(Err(e)),
    };
    Ok(Ok(JobRecord {
        id: row.get(0)?,
        agent_id: row.get(1)?,
        command: row.get(2)?,
        origin: row.get(3)?,
        parameters,
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
    }))
}

impl Store {
    /// Records a queued job. A paid job also serves its payment (`settled` → `served`,
    /// linked to the job) in the same transaction: after a crash the job exists and will
    /// run exactly when the payment counts as served, so a payer is never both served by
    /// the job and refunded for it.
    pub async fn insert_job(&self, job: JobRecord, paid_by: Option<String>) -> Result<(), StoreError> {
        self.write(move |tx| {
            tx.execute(
                "INSERT INTO jobs (id, agent_id, command, origin, parameters, raw_text, state, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    job.id,
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
                let linked = tx.execute(
                    "UPDATE payments SET job_id = ?2, state = 'served', updated_at = ?3
                     WHERE id = ?1 AND state = 'settled'",
                    params![payment, job.id, job.created_at],
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
        self.read(move |conn| {
            let sql = format!("SELECT {COLUMNS} FROM jobs WHERE id = ?1");
            conn.prepare_cached(&sql)?
                .query_row([id], job_from_row)
                .optional()?
                .transpose()
        })
        .await
    }

    pub async fn jobs_in_state(&self, state: JobState) -> Result<Vec<JobRecord>, StoreError> {
        self.read(move |conn| {
            let sql = format!("SELECT {COLUMNS} FROM jobs WHERE state = ?1 ORDER BY created_at");
            let mut stmt = conn.prepare_cached(&sql)?;
            let rows = stmt.query_map([state.as_str()], job_from_row)?;
            let mut out = Vec::new();
            for row in rows {
                out.push(row??);
            }
            Ok(out)
        })
        .await
    }

    /// Moves a queued job to running; false if it was not queued (taken already).
    pub async fn start_job(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.write(move |tx| {
            let changed = tx.execute(
                "UPDATE jobs SET state = 'running', started_at = ?2, progress = 0 WHERE id = ?1 AND state = 'queued'",
                params![id, crate::clock::now_ms()],
            )?;
            Ok(changed == 1)
        })
        .await
    }

    pub async fn set_job_progress(&self, id: &str, percent: u8) -> Result<(), StoreError> {
        let id = id.to_string();
        self.write(move |tx| {
            tx.execute(
                "UPDATE jobs SET progress = ?2 WHERE id = ?1 AND state = 'running'",
                params![id, percent],
            )?;
            Ok(())
        })
        .await
    }

    /// Records the end of an unfinished job; a finished one is left as it is.
    pub async fn finish_job(&self, id: &str, outcome: JobOutcome) -> Result<(), StoreError> {
        let id = id.to_string();
        self.write(move |tx| {
            let now = crate::clock::now_ms();
            match outcome {
                JobOutcome::Succeeded { response, format, artifact_url } => tx.execute(
                    "UPDATE jobs SET state = 'succeeded', progress = 100, response = ?2, format = ?3, artifact_url = ?4,
                        finished_at = ?5 WHERE id = ?1 AND state IN ('queued', 'running')",
                    params![id, response, format, artifact_url, now],
                )?,
                JobOutcome::Failed { error, code } => tx.execute(
                    "UPDATE jobs SET state = 'failed', error = ?2, code = ?3, finished_at = ?4
                     WHERE id = ?1 AND state IN ('queued', 'running')",
                    params![id, error, code, now],
                )?,
            };
            Ok(())
        })
        .await
    }

    pub async fn delete_expired_jobs(&self, now: i64) -> Result<usize, StoreError> {
        self.write(move |tx| Ok(tx.execute("DELETE FROM jobs WHERE expires_at < ?1", [now])?))
            .await
    }
}
