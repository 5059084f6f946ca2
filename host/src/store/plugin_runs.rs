//! Plugin runs kept for their owner to read back: outcome, duration and log lines, the
//! newest per agent and command.

use serde::{Deserialize, Serialize};

use super::sql::{Row, args};
use super::{Store, StoreError, json_column, to_json};

/// One `log` call of a plugin, as written (control characters already written out).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogLine {
    pub at: i64,
    pub level: String,
    pub message: String,
}

#[derive(Debug, Clone)]
pub struct PluginRun {
    pub id: String,
    pub agent_id: String,
    pub command: String,
    pub origin: String,
    pub started_at: i64,
    pub duration_ms: i64,
    /// `succeeded`, `invalid_input`, `failed`, `unavailable` or `crashed`.
    pub outcome: String,
    pub error: Option<String>,
    pub lines: Vec<LogLine>,
}

const COLUMNS: &str = "id, agent_id, command, origin, started_at, duration_ms, outcome, error, lines";

fn run_from_row(row: &Row) -> Result<PluginRun, StoreError> {
    Ok(PluginRun {
        id: row.get(0)?,
        agent_id: row.get(1)?,
        command: row.get(2)?,
        origin: row.get(3)?,
        started_at: row.get(4)?,
        duration_ms: row.get(5)?,
        outcome: row.get(6)?,
        error: row.get(7)?,
        lines: json_column(&row.get::<String>(8)?, "plugin run lines")?,
    })
}

impl Store {
    /// Keeps a run, and of its agent's command only the newest `keep`.
    pub async fn record_plugin_run(&self, run: PluginRun, keep: u32) -> Result<(), StoreError> {
        self.write(move |db| {
            db.execute(
                &format!("INSERT INTO plugin_runs ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
                args![
                    &run.id,
                    &run.agent_id,
                    &run.command,
                    run.origin,
                    run.started_at,
                    run.duration_ms,
                    run.outcome,
                    run.error,
                    to_json(&run.lines)
                ],
            )?;
            db.execute(
                "DELETE FROM plugin_runs WHERE agent_id = ?1 AND command = ?2 AND id NOT IN (
                     SELECT id FROM plugin_runs WHERE agent_id = ?1 AND command = ?2
                     ORDER BY started_at DESC, id DESC LIMIT ?3)",
                args![run.agent_id, run.command, keep as i64],
            )?;
            Ok(())
        })
        .await
    }

    /// The agent's runs (of one command, if named), newest first; only those started
    /// after `after` (epoch ms) when given.
    pub async fn plugin_runs(
        &self,
        agent_id: &str,
        command: Option<&str>,
        after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<PluginRun>, StoreError> {
        let (agent_id, command) = (agent_id.to_string(), command.map(str::to_string));
        self.read(move |db| {
            db.query(
                &format!(
                    "SELECT {COLUMNS} FROM plugin_runs
                     WHERE agent_id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR command = ?2) AND started_at > ?3
                     ORDER BY started_at DESC, id DESC LIMIT ?4"
                ),
                args![agent_id, command, after.unwrap_or(i64::MIN), limit as i64],
            )?
            .iter()
            .map(run_from_row)
            .collect()
        })
        .await
    }
}
