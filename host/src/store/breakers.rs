//! Paid commands' circuit breakers (see services/payments/breaker.rs): one row per command
//! that failed lately; none for a command that is well.

use super::sql::{Db, Row, args};
use super::{Store, StoreError};

/// One command's breaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breaker {
    pub agent_id: String,
    pub command: String,
    /// Failures counted in the window that began at `window_start` (ms).
    pub failures: u32,
    pub window_start: i64,
    /// Set while the breaker is open: paid calls are refused until a trial succeeds.
    pub opened_at: Option<i64>,
    /// When the half-open trial now under way was let through.
    pub trial_at: Option<i64>,
    /// The last failure's reason, as shown to payers and the owner.
    pub reason: String,
    /// The payers whose failures were counted in the window (one each), then, once open,
    /// those whose failures opened it (they are never given its trial).
    pub payers: Vec<String>,
}

const COLUMNS: &str = "agent_id, command, failures, window_start, opened_at, trial_at, reason, payers";

/// Payers as stored: one a line (no address holds a line break).
fn payers_column(payers: &[String]) -> String {
    payers.join("\n")
}

fn breaker(row: &Row) -> Result<Breaker, StoreError> {
    Ok(Breaker {
        agent_id: row.get(0)?,
        command: row.get(1)?,
        failures: row.get::<i64>(2)?.clamp(0, u32::MAX as i64) as u32,
        window_start: row.get(3)?,
        opened_at: row.get(4)?,
        trial_at: row.get(5)?,
        reason: row.get(6)?,
        payers: row
            .get::<String>(7)?
            .lines()
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect(),
    })
}

/// The open breakers of one agent's commands, by command name; the read cache holds them
/// with the agent.
pub(super) fn open_breakers_of(db: &dyn Db, agent_id: &str) -> Result<Vec<Breaker>, StoreError> {
    db.query(
        &format!(
            "SELECT {COLUMNS} FROM command_breakers WHERE agent_id = ?1 AND opened_at IS NOT NULL ORDER BY command"
        ),
        args![agent_id],
    )?
    .iter()
    .map(breaker)
    .collect()
}

impl Store {
    pub async fn breaker(&self, agent_id: &str, command: &str) -> Result<Option<Breaker>, StoreError> {
        let (agent_id, command) = (agent_id.to_string(), command.to_string());
        self.read(move |db| {
            db.query_opt(
                &format!("SELECT {COLUMNS} FROM command_breakers WHERE agent_id = ?1 AND command = ?2"),
                args![&agent_id, &command],
            )?
            .map(|row| breaker(&row))
            .transpose()
        })
        .await
    }

    /// The open breakers of an account's agents.
    pub async fn open_breakers(&self, account_id: &str) -> Result<Vec<Breaker>, StoreError> {
        let account_id = account_id.to_string();
        self.read(move |db| {
            db.query(
                &format!(
                    "SELECT b.{} FROM command_breakers b JOIN agents g ON g.id = b.agent_id
                     WHERE g.account_id = ?1 AND b.opened_at IS NOT NULL ORDER BY b.agent_id, b.command",
                    COLUMNS.replace(", ", ", b.")
                ),
                args![account_id],
            )?
            .iter()
            .map(breaker)
            .collect()
        })
        .await
    }

    /// Replaces a command's breaker with what `next` makes of it (None: no breaker),
    /// serialized with every other change to it, on every host; `next`'s verdict is returned.
    pub async fn update_breaker<T, F>(&self, agent_id: &str, command: &str, next: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(Option<Breaker>) -> (Option<Breaker>, T) + Send + 'static,
    {
        let (agent_id, command) = (agent_id.to_string(), command.to_string());
        let written = self.write(move |db| {
            db.serialize(&format!("breaker:{agent_id}:{command}"))?;
            let now = db
                .query_opt(
                    &format!("SELECT {COLUMNS} FROM command_breakers WHERE agent_id = ?1 AND command = ?2"),
                    args![&agent_id, &command],
                )?
                .map(|row| breaker(&row))
                .transpose()?;
            let had = now.is_some();
            let before = now.clone();
            let (next, verdict) = next(now);
            // What the read cache holds of it (an open breaker) changed.
            let is_open = |b: &Option<Breaker>| b.as_ref().is_some_and(|b| b.opened_at.is_some());
            let open_changed = (is_open(&before) || is_open(&next)) && before != next;
            match &next {
                None if had => {
                    db.execute(
                        "DELETE FROM command_breakers WHERE agent_id = ?1 AND command = ?2",
                        args![&agent_id, &command],
                    )?;
                }
                None => {}
                Some(b) => {
                    db.execute(
                        "INSERT INTO command_breakers (agent_id, command, failures, window_start, opened_at, trial_at, reason,
                             payers)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                         ON CONFLICT (agent_id, command) DO UPDATE SET failures = ?3, window_start = ?4,
                             opened_at = ?5, trial_at = ?6, reason = ?7, payers = ?8",
                        args![
                            &agent_id,
                            &command,
                            b.failures as i64,
                            b.window_start,
                            b.opened_at,
                            b.trial_at,
                            &b.reason,
                            payers_column(&b.payers)
                        ],
                    )?;
                }
            }
            Ok((verdict, open_changed))
        });
        let (verdict, open_changed) = written.await?;
        // Other hosts learn of it through `cache_version` (migration 0019); this one at once.
        if open_changed {
            self.cache.clear();
        }
        Ok(verdict)
    }
}
