//! The repository layer. All SQL of the service lives under this module, behind typed
//! async functions, so routes and services never see SQLite (and a PostgreSQL backend
//! can take its place). Work runs on tokio's blocking pool, never on a runtime thread.

mod accounts;
mod agents;
mod integrations;
mod jobs;
mod keys;
mod kv;
pub mod migrations;
mod payments;
mod plugins;
mod rate;
mod wallets;

pub use accounts::NewAccount;
pub use agents::{AgentSummary, ApplyOutcome};
pub use integrations::Integration;
pub use jobs::{JobOutcome, JobRecord, JobState};
pub use keys::KeyRecord;
pub use payments::{NewPayment, PaymentRecord};
pub use rate::UsageRow;
pub use wallets::{NewTransfer, TransferKind, TransferRecord, TransferState, WalletRecord};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error(
        "the database schema (version {database}) is newer than this agent-host supports \
         (version {binary}); run a newer agent-host or restore a backup"
    )]
    SchemaTooNew { database: i64, binary: i64 },
    #[error(
        "migration {name} differs from the one applied to this database; migrations must never be edited once applied"
    )]
    MigrationChanged { name: &'static str },
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    NotFound(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("database task failed: {0}")]
    Task(String),
}

/// Readers kept open between calls; more are opened on demand under load.
const IDLE_READERS: usize = 8;

#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    busy_timeout: Duration,
    /// SQLite allows one writer at a time; taking this lock first avoids busy retries
    /// between our own writers. Other processes (the CLI) are covered by busy_timeout.
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
}

impl Store {
    /// Opens (creating if needed) the database at `path` and applies pending migrations.
    pub fn open(path: &Path, busy_timeout: Duration) -> Result<Store, StoreError> {
        let mut writer = open_connection(path, busy_timeout)?;
        migrations::apply(&mut writer)?;
        Ok(Store {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                busy_timeout,
                writer: Mutex::new(writer),
                readers: Mutex::new(Vec::new()),
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs a read on a pooled connection, off the async runtime.
    pub(crate) async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = self.inner.clone();
        run_blocking(move || {
            let pooled = inner.readers.lock().map_err(poisoned)?.pop();
            let conn = match pooled {
                Some(conn) => conn,
                None => open_connection(&inner.path, inner.busy_timeout)?,
            };
            let result = f(&conn);
            let mut readers = inner.readers.lock().map_err(poisoned)?;
            if readers.len() < IDLE_READERS {
                readers.push(conn);
            }
            result
        })
        .await
    }

    /// Runs `f` in one IMMEDIATE transaction; it commits only if `f` returns Ok.
    pub(crate) async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = self.inner.clone();
        run_blocking(move || {
            let mut conn = inner.writer.lock().map_err(poisoned)?;
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let value = f(&tx)?;
            tx.commit()?;
            Ok(value)
        })
        .await
    }

    /// True when the database answers a trivial query.
    pub async fn ping(&self) -> bool {
        self.read(|conn| Ok(conn.prepare_cached("SELECT 1")?.query_row([], |r| r.get::<_, i64>(0))?))
            .await
            .is_ok()
    }

    pub async fn schema_version(&self) -> Result<i64, StoreError> {
        self.read(|conn| {
            Ok(
                conn.query_row("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", [], |r| {
                    r.get(0)
                })?,
            )
        })
        .await
    }
}

fn open_connection(path: &Path, busy_timeout: Duration) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(busy_timeout)?;
    // WAL lets readers run beside the writer; NORMAL sync is durable across process
    // crashes (the WAL survives) and only risks the last commits on power loss.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

async fn run_blocking<T, F>(f: F) -> Result<T, StoreError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, StoreError> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Task(e.to_string()))?
}

fn poisoned<E>(_: E) -> StoreError {
    StoreError::Task("a database lock was poisoned by an earlier panic".into())
}

/// Reads a JSON column, reporting corruption instead of panicking.
fn json_column<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    // Serialising our own plain data types cannot fail.
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

fn is_unique_violation(err: &rusqlite::Error) -> bool {
    matches!(
        err,
        rusqlite::Error::SqliteFailure(e, _) if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
            || e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
    )
}
