//! Copies of the whole database: moving a deployment from one store to another (SQLite in
//! a data dir → the PostgreSQL database several hosts will share: every row of every
//! table, columns by name, into a target with the same schema version and no data yet),
//! and the SQLite online backup.

use std::path::Path;

use super::sql::{Db, Value, args};
use super::{Backend, Dialect, Store, StoreError};

/// Every table holding data, parents before the tables that refer to them.
/// `schema_migrations` is not copied: the target applied the same migrations itself.
const TABLES: &[&str] = &[
    "accounts",
    "api_keys",
    "agents",
    "commands",
    "rate_usage",
    "rate_counters",
    "plugins",
    "account_plugins",
    "plugin_kv",
    "agent_integrations",
    "wallets",
    "transfers",
    "payments",
    "jobs",
    "deployment_facts",
    "plugin_runs",
    "command_breakers",
    "chat_usage",
    "usage_counters",
    "webhook_endpoints",
    "webhook_events",
    "webhook_deliveries",
    "webhook_attempts",
    "wallet_alerts",
    "knowledge_vectors",
    "sign_in_uses",
    "oauth_clients",
    "oauth_codes",
    "oauth_grants",
    "oauth_tokens",
    "a2a_tasks",
    "a2a_push_configs",
    "schedules",
    "schedule_runs",
    "agent_spending",
];

impl Store {
    /// Copies every row into `target`, which must be empty and at the same schema version.
    /// Returns how many rows each table had.
    pub async fn copy_into(&self, target: &Store) -> Result<Vec<(&'static str, usize)>, StoreError> {
        let (ours, theirs) = (self.schema_version().await?, target.schema_version().await?);
        if ours != theirs {
            return Err(StoreError::Conflict(format!(
                "the target's schema is at version {theirs}, this database's at {ours}"
            )));
        }
        for table in TABLES {
            let count: i64 = target
                .read(move |db| db.query_one(&format!("SELECT COUNT(*) FROM {table}"), args![])?.get(0))
                .await?;
            if count > 0 {
                return Err(StoreError::Conflict(format!(
                    "the target already holds data (table {table}); copy into an empty database"
                )));
            }
        }
        let dialect = self.dialect();
        let mut copied = Vec::with_capacity(TABLES.len());
        for table in TABLES {
            let (columns, rows) = self
                .read(move |db| {
                    let columns = column_names(db, dialect, table)?;
                    let rows = db.query(&format!("SELECT {} FROM {table}", columns.join(", ")), args![])?;
                    Ok((columns, rows))
                })
                .await?;
            let count = rows.len();
            target
                .write(move |db| {
                    let placeholders: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
                    let insert = format!(
                        "INSERT INTO {table} ({}) VALUES ({})",
                        columns.join(", "),
                        placeholders.join(", ")
                    );
                    for row in rows {
                        db.execute(&insert, &row.into_values())?;
                    }
                    Ok(())
                })
                .await?;
            copied.push((*table, count));
        }
        Ok(copied)
    }

    /// A consistent copy of the SQLite database in `file`, taken while it serves (SQLite's
    /// `VACUUM INTO`: a snapshot of one read, compacted). PostgreSQL has its own tools.
    pub async fn backup_to(&self, file: &Path) -> Result<(), StoreError> {
        if let Backend::Postgres(_) = &*self.backend {
            return Err(StoreError::Conflict(
                "this host's database is PostgreSQL: back it up with pg_dump (or the managed service's backups); see the operations guide"
                    .into(),
            ));
        }
        // Created empty first, so that the copy, which holds sealed secrets and key hashes,
        // is private from its first byte (VACUUM INTO fills an empty file).
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options
            .open(file)
            .map_err(|e| StoreError::Conflict(format!("{}: {e}", file.display())))?;
        let file = file.to_string_lossy().into_owned();
        self.read(move |db| db.execute("VACUUM INTO ?1", args![file]).map(|_| ()))
            .await
    }
}

/// A table's columns, quoted (one of them is `window`, a keyword in PostgreSQL).
fn column_names(db: &dyn Db, dialect: Dialect, table: &str) -> Result<Vec<String>, StoreError> {
    let sql = match dialect {
        Dialect::Sqlite => "SELECT name FROM pragma_table_info(?1) ORDER BY cid",
        Dialect::Postgres => {
            "SELECT column_name::text FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = ?1 ORDER BY ordinal_position"
        }
    };
    db.query(sql, &[Value::from(table)])?
        .iter()
        .map(|row| Ok(format!("\"{}\"", row.get::<String>(0)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    /// A table a migration creates and the copy leaves out would be lost in the move.
    #[test]
    fn every_table_with_data_is_copied() {
        for migration in super::super::migrations::MIGRATIONS {
            for line in migration.sqlite.lines() {
                let Some(rest) = line.trim_start().strip_prefix("CREATE TABLE ") else {
                    continue;
                };
                let name = rest
                    .trim_start_matches("IF NOT EXISTS ")
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or_default();
                // Left out on purpose: tables rebuilt under a new name, and the read cache's
                // counter, which a new database starts for itself.
                if name.ends_with("_next") || name == "cache_version" {
                    continue;
                }
                assert!(
                    super::TABLES.contains(&name),
                    "table {name} is not in store/copy.rs TABLES"
                );
            }
        }
    }
}
