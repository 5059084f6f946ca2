//! Numbered SQL files, applied in order and recorded in `schema_migrations` with a
//! checksum, so an edited or unknown migration is noticed. Each migration is written
//! twice, once per dialect (`migrations/` for SQLite, `migrations/postgres/` for
//! PostgreSQL), with the same number and name: the two schemas move together.

use sha2::{Digest, Sha256};

use super::sql::{Db, args};
use super::{Dialect, StoreError};

pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sqlite: &'static str,
    pub postgres: &'static str,
}

impl Migration {
    pub fn sql(&self, dialect: Dialect) -> &'static str {
        match dialect {
            Dialect::Sqlite => self.sqlite,
            Dialect::Postgres => self.postgres,
        }
    }
}

/// One entry of [`MIGRATIONS`]: both files of a numbered migration.
macro_rules! migration {
    ($version:literal, $name:literal) => {
        Migration {
            version: $version,
            name: $name,
            sqlite: include_str!(concat!("../../../migrations/", $name, ".sql")),
            postgres: include_str!(concat!("../../../migrations/postgres/", $name, ".sql")),
        }
    };
}

/// Every migration this binary knows, in order. Add new files at the end; never edit one
/// that has shipped.
pub const MIGRATIONS: &[Migration] = &[
    migration!(1, "0001_init"),
    migration!(2, "0002_plugins_and_jobs"),
    migration!(3, "0003_integrations"),
    migration!(4, "0004_wallets"),
    migration!(5, "0005_payments"),
    migration!(6, "0006_payment_refunds"),
    migration!(7, "0007_payment_hardening"),
    migration!(8, "0008_plugin_manifests"),
    migration!(9, "0009_plugin_components"),
    migration!(10, "0010_payment_version"),
    migration!(11, "0011_several_hosts"),
    migration!(12, "0012_keyed_path"),
    migration!(13, "0013_self_service"),
    migration!(14, "0014_plugin_runs"),
    migration!(15, "0015_hardening"),
    migration!(16, "0016_mcp"),
    migration!(17, "0017_kept_answers"),
    migration!(18, "0018_facilitated_payments"),
    migration!(19, "0019_breakers_in_cache"),
    migration!(20, "0020_chat_usage"),
    migration!(21, "0021_knowledge_vectors"),
    migration!(22, "0022_key_expiry"),
    migration!(23, "0023_usage"),
    migration!(24, "0024_webhooks"),
    migration!(25, "0025_payments_integrity"),
    migration!(26, "0026_payments_for_the_operator"),
    migration!(27, "0027_webhook_fairness"),
    migration!(28, "0028_sign_in"),
    migration!(29, "0029_oauth"),
    migration!(30, "0030_mcp_resources_and_tasks"),
    migration!(31, "0031_a2a"),
    migration!(32, "0032_pricing_by_use"),
    migration!(33, "0033_by_use_commands_and_releases"),
    migration!(34, "0034_schedules"),
    migration!(35, "0035_remote_mcp_servers"),
    migration!(36, "0036_agent_spending"),
];

pub fn latest_version() -> i64 {
    MIGRATIONS.last().map(|m| m.version).unwrap_or(0)
}

fn checksum(sql: &str) -> String {
    hex::encode(Sha256::digest(sql.as_bytes()))
}

/// Brings the database up to this binary's schema. The caller runs it in one transaction
/// that no other process can run beside (SQLite: IMMEDIATE; PostgreSQL: an advisory lock),
/// so two processes starting at once cannot both apply a migration.
pub fn apply(db: &dyn Db, dialect: Dialect) -> Result<(), StoreError> {
    db.batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version    BIGINT PRIMARY KEY,
            name       TEXT NOT NULL,
            checksum   TEXT NOT NULL,
            applied_at BIGINT NOT NULL
        )",
    )?;
    let newest: Option<i64> = db
        .query_one("SELECT MAX(version) FROM schema_migrations", args![])?
        .get(0)?;
    if let Some(newest) = newest
        && newest > latest_version()
    {
        return Err(StoreError::SchemaTooNew {
            database: newest,
            binary: latest_version(),
        });
    }
    for migration in MIGRATIONS {
        let recorded: Option<String> = db
            .query_opt(
                "SELECT checksum FROM schema_migrations WHERE version = ?1",
                args![migration.version],
            )?
            .map(|row| row.get(0))
            .transpose()?;
        let sum = checksum(migration.sql(dialect));
        match recorded {
            Some(existing) if existing == sum => continue,
            Some(_) => return Err(StoreError::MigrationChanged { name: migration.name }),
            None => {
                db.batch(migration.sql(dialect))?;
                db.execute(
                    "INSERT INTO schema_migrations (version, name, checksum, applied_at)
                     VALUES (?1, ?2, ?3, ?4)",
                    args![migration.version, migration.name, sum, crate::clock::now_ms()],
                )?;
                tracing::info!(migration = migration.name, "applied migration");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rusqlite::{Connection, params};

    use super::*;

    /// A database at 0005 with a refund under way (the old 'claimed' marker) keeps every
    /// payment through 0006, and the claimed one becomes `refunding`.
    #[test]
    fn payments_survive_the_refunding_rebuild() {
        let conn = Connection::open_in_memory().unwrap();
        for migration in &MIGRATIONS[..5] {
            conn.execute_batch(migration.sqlite).unwrap();
        }
        conn.execute_batch(
            "INSERT INTO payments (id, identity, agent_id, network, payer, pay_to, amount, request, state, refund_transfer_id, created_at, updated_at) VALUES
             ('p1', 'i1', 'a', 'base', 'x', 'y', 10, '{}', 'served', NULL, 1, 1),
             ('p2', 'i2', 'a', 'base', 'x', 'y', 20, '{}', 'settled', 'claimed', 2, 2),
             ('p3', 'i3', 'a', 'solana', 'x', 'y', 30, '{}', 'refunded', 'tr_1', 3, 3);
             CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at INTEGER NOT NULL);",
        )
        .unwrap();
        for migration in &MIGRATIONS[..5] {
            conn.execute(
                "INSERT INTO schema_migrations VALUES (?1, ?2, ?3, 0)",
                params![migration.version, migration.name, checksum(migration.sqlite)],
            )
            .unwrap();
        }
        apply(&conn, Dialect::Sqlite).unwrap();
        let rows: Vec<(String, String, Option<String>, i64)> = conn
            .prepare("SELECT id, state, refund_transfer_id, amount FROM payments ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            rows,
            [
                ("p1".into(), "served".into(), None, 10),
                ("p2".into(), "refunding".into(), None, 20),
                ("p3".into(), "refunded".into(), Some("tr_1".into()), 30),
            ]
        );
        let duplicate = conn.execute(
            "INSERT INTO payments (id, identity, agent_id, network, payer, pay_to, amount, request, state, created_at, updated_at)
             VALUES ('p4', 'i1', 'a', 'base', 'x', 'y', 10, '{}', 'verified', 4, 4)",
            [],
        );
        assert!(duplicate.is_err(), "a payment's identity stays unique");
    }
}
