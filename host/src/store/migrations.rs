//! Numbered SQL files from `migrations/`, applied in order and recorded in
//! `schema_migrations` with a checksum, so an edited or unknown migration is noticed.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use sha2::{Digest, Sha256};

use super::StoreError;

pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every migration this binary knows, in order. Add new files at the end; never edit one
/// that has shipped.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_init",
        sql: include_str!("../../../migrations/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "0002_plugins_and_jobs",
        sql: include_str!("../../../migrations/0002_plugins_and_jobs.sql"),
    },
    Migration {
        version: 3,
        name: "0003_integrations",
        sql: include_str!("../../../migrations/0003_integrations.sql"),
    },
    Migration {
        version: 4,
        name: "0004_wallets",
        sql: include_str!("../../../migrations/0004_wallets.sql"),
    },
    Migration {
        version: 5,
        name: "0005_payments",
        sql: include_str!("../../../migrations/0005_payments.sql"),
    },
    Migration {
        version: 6,
        name: "0006_payment_refunds",
        sql: include_str!("../../../migrations/0006_payment_refunds.sql"),
    },
    Migration {
        version: 7,
        name: "0007_payment_hardening",
        sql: include_str!("../../../migrations/0007_payment_hardening.sql"),
    },
    Migration {
        version: 8,
        name: "0008_plugin_manifests",
        sql: include_str!("../../../migrations/0008_plugin_manifests.sql"),
    },
    Migration {
        version: 9,
        name: "0009_plugin_components",
        sql: include_str!("../../../migrations/0009_plugin_components.sql"),
    },
    Migration {
        version: 10,
        name: "0010_payment_version",
        sql: include_str!("../../../migrations/0010_payment_version.sql"),
    },
];

pub fn latest_version() -> i64 {
    MIGRATIONS.last().map(|m| m.version).unwrap_or(0)
}

fn checksum(sql: &str) -> String {
    hex::encode(Sha256::digest(sql.as_bytes()))
}

/// Brings the database up to this binary's schema. Runs in one IMMEDIATE transaction so
/// that two processes starting at once (a server and a CLI call) cannot both apply it.
pub fn apply(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version    INTEGER PRIMARY KEY,
            name       TEXT NOT NULL,
            checksum   TEXT NOT NULL,
            applied_at INTEGER NOT NULL
        )",
    )?;
    let newest: Option<i64> = tx
        .query_row("SELECT MAX(version) FROM schema_migrations", [], |r| r.get(0))
        .optional()?
        .flatten();
    if let Some(newest) = newest
        && newest > latest_version()
    {
        return Err(StoreError::SchemaTooNew {
            database: newest,
            binary: latest_version(),
        });
    }
    for migration in MIGRATIONS {
        let recorded: Option<String> = tx
            .query_row(
                "SELECT checksum FROM schema_migrations WHERE version = ?1",
                [migration.version],
                |r| r.get(0),
            )
            .optional()?;
        let sum = checksum(migration.sql);
        match recorded {
            Some(existing) if existing == sum => continue,
            Some(_) => return Err(StoreError::MigrationChanged { name: migration.name }),
            None => {
                tx.execute_batch(migration.sql)?;
                tx.execute(
                    "INSERT INTO schema_migrations (version, name, checksum, applied_at)
                     VALUES (?1, ?2, ?3, ?4)",
                    params![migration.version, migration.name, sum, crate::clock::now_ms()],
                )?;
                tracing::info!(migration = migration.name, "applied migration");
            }
        }
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database at 0005 with a refund under way (the old 'claimed' marker) keeps every
    /// payment through 0006, and the claimed one becomes `refunding`.
    #[test]
    fn payments_survive_the_refunding_rebuild() {
        let mut conn = Connection::open_in_memory().unwrap();
        for migration in &MIGRATIONS[..5] {
            conn.execute_batch(migration.sql).unwrap();
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
                params![migration.version, migration.name, checksum(migration.sql)],
            )
            .unwrap();
        }
        apply(&mut conn).unwrap();
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
