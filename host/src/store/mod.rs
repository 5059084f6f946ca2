//! The repository layer. All SQL of the service lives under this module, behind typed
//! async functions, so routes and services never see which database they use: SQLite in
//! the data dir (the embedded default) or PostgreSQL shared by several hosts. Each function
//! is written once, against [`sql::Db`]. Work runs on tokio's blocking pool, never on a
//! runtime thread.

mod a2a_push;
mod a2a_tasks;
mod accounts;
mod agents;
mod bounded_map;
mod breakers;
mod cache;
mod chat_usage;
mod copy;
mod facts;
mod integrations;
mod jobs;
mod keys;
mod knowledge;
mod kv;
mod liveness;
mod locks;
mod metered_payments;
pub mod migrations;
mod oauth;
mod payment_refunds;
mod payments;
mod plugin_runs;
mod plugins;
mod postgres;
mod rate;
mod schedule_runs;
mod schedules;
mod sealed;
mod sign_ins;
mod spending;
pub mod sql;
mod sqlite;
mod tls;
pub mod usage;
mod wallet_alerts;
mod wallets;
mod webhook_deliveries;
pub mod webhooks;

pub use a2a_push::{A2aPushRecord, push_secret_label};
pub use a2a_tasks::{A2aTaskMove, A2aTaskQuery, A2aTaskRecord};
pub use accounts::{AccountUsage, NewAccount};
pub use agents::{AgentSummary, ApplyOutcome};
pub use breakers::Breaker;
pub use cache::AgentWithCommands;
pub use chat_usage::ChatUsageDay;
pub use integrations::Integration;
pub use jobs::{CANCELLED as JOB_CANCELLED, JobOutcome, JobRecord, JobState};
pub use keys::KeyRecord;
pub use kv::KvQuota;
pub use locks::SharedTurn;
pub use oauth::{Authorized, CodeRecord, GrantInfo, NewToken, OAuthClient, TokenRecord};
pub use payment_refunds::RefundFailure;
pub use payments::{EarlierPayment, NewPayment, PayerCosts, PaymentRecord, PaymentState, SettledBy};
pub use plugin_runs::{LogLine, PluginRun};
pub use plugins::{AccountPlugin, PluginRecord};
pub use rate::{Claim, Claimed, Unused, UsageRow};
pub use schedule_runs::{RunEnd, RunState, ScheduleRun};
pub use schedules::{ScheduleRecord, ScheduleStatus};
pub use sealed::{KEY_CHECK, KeyCheck, SealedAt, SealedRecord};
pub use sign_ins::{SignInGrant, SignInRefusal, SignInUse};
pub use spending::{NewSpend, SpendRecord, SpendState};
use sql::args;
pub use wallet_alerts::WalletAlert;
pub use wallets::{Listing, NewTransfer, TransferKind, TransferRecord, TransferState, WalletRecord};
pub use webhook_deliveries::{
    AttemptResult, ClaimedDelivery, DisableRule, DueDelivery, WebhookAttempt, WebhookDelivery,
};
pub use webhooks::{EndpointChange, WebhookEndpoint};

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use postgres::Postgres;
use sql::Db;
use sqlite::Sqlite;
use tracing::Instrument;

use crate::telemetry::traces::part_span;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("database error: {0}")]
    Postgres(#[from] postgres::PgError),
    #[error("the database cannot be reached: {0}")]
    Unavailable(String),
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
    /// A sealing write by a host whose master key a rotation has replaced.
    #[error("this host's master key was replaced by a rotation; restart it with the current key (nothing was written)")]
    KeyRetired,
    #[error("{0}")]
    NotFound(String),
    /// The account keeps as many of something as its quota allows.
    #[error("{0}")]
    QuotaExceeded(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("database task failed: {0}")]
    Task(String),
}

impl StoreError {
    /// A row with this key (or unique value) exists already.
    fn is_unique_violation(&self) -> bool {
        match self {
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => {
                e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                    || e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
            }
            StoreError::Postgres(e) => e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION),
            _ => false,
        }
    }
}

/// Which SQL a migration is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

#[derive(Clone)]
pub struct Store {
    backend: Arc<Backend>,
    cache: Arc<cache::ReadCache>,
    /// Reads and writes sent to the database so far, by every clone.
    round_trips: Arc<std::sync::atomic::AtomicU64>,
    /// The database's last answer to `/health`.
    liveness: Arc<liveness::Liveness>,
}

enum Backend {
    Sqlite(Sqlite),
    Postgres(Postgres),
}

impl Store {
    /// Opens (creating if needed) the SQLite database at `path` and applies pending
    /// migrations.
    pub fn open(path: &Path, busy_timeout: Duration) -> Result<Store, StoreError> {
        Ok(Store {
            backend: Arc::new(Backend::Sqlite(Sqlite::open(path, busy_timeout)?)),
            cache: Arc::default(),
            round_trips: Arc::default(),
            liveness: Arc::default(),
        })
    }

    /// Connects to the PostgreSQL database at `url` (a pool of at most `pool_size`
    /// connections) and applies pending migrations.
    pub async fn connect(url: &str, pool_size: usize) -> Result<Store, StoreError> {
        Ok(Store {
            backend: Arc::new(Backend::Postgres(Postgres::connect(url, pool_size).await?)),
            cache: Arc::default(),
            round_trips: Arc::default(),
            liveness: Arc::default(),
        })
    }

    pub fn dialect(&self) -> Dialect {
        match &*self.backend {
            Backend::Sqlite(_) => Dialect::Sqlite,
            Backend::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Reads and writes this store has sent to the database so far (what the read cache
    /// spares shows here).
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs a read, off the async runtime.
    pub(crate) async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Db) -> Result<T, StoreError> + Send + 'static,
    {
        self.round_trips.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let backend = self.backend.clone();
        let measure = self.measure("read");
        let result = run_blocking(move || match &*backend {
            Backend::Sqlite(db) => db.read(f),
            Backend::Postgres(db) => db.read(f),
        })
        .instrument(self.span("read"))
        .await;
        drop(measure);
        result
    }

    /// Runs `f` in one transaction, off the async runtime; it commits only if `f` returns Ok.
    pub(crate) async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Db) -> Result<T, StoreError> + Send + 'static,
    {
        self.round_trips.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let backend = self.backend.clone();
        let measure = self.measure("write");
        let result = run_blocking(move || match &*backend {
            Backend::Sqlite(db) => db.write(f),
            Backend::Postgres(db) => db.write(f),
        })
        .instrument(self.span("write"))
        .await;
        drop(measure);
        result
    }

    /// A read's or write's span in a trace (waits for a connection included).
    fn span(&self, kind: &'static str) -> tracing::Span {
        part_span!(
            "db",
            "otel.kind" = "client",
            "otel.name" = if kind == "read" { "store read" } else { "store write" },
            "db.system.name" = self.system_name(),
        )
    }

    fn system_name(&self) -> &'static str {
        match self.dialect() {
            Dialect::Sqlite => "sqlite",
            Dialect::Postgres => "postgresql",
        }
    }

    /// Measures one read or write (a transaction, waits for a connection included) until
    /// dropped, when metrics are on.
    fn measure(&self, kind: &'static str) -> Option<Measure> {
        let metrics = crate::telemetry::metrics::metrics()?;
        Some(Measure {
            metrics,
            system: self.system_name(),
            kind,
            started: std::time::Instant::now(),
        })
    }

    /// The PostgreSQL pool now: most connections, in use, idle, calls waiting for one.
    pub fn pool_status(&self) -> Option<PoolStatus> {
        match &*self.backend {
            Backend::Sqlite(_) => None,
            Backend::Postgres(db) => Some(db.pool_status()),
        }
    }

    /// A write to what the read cache holds: this process's cache is emptied as soon as it
    /// is done (other processes learn of it through `cache_version`).
    pub(crate) async fn write_cached<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Db) -> Result<T, StoreError> + Send + 'static,
    {
        let result = self.write(f).await;
        self.cache.clear();
        result
    }

    /// True when the database answers a trivial query.
    pub async fn ping(&self) -> bool {
        self.read(|db| db.query_one("SELECT 1", args![])?.get::<i64>(0))
            .await
            .is_ok()
    }

    pub async fn schema_version(&self) -> Result<i64, StoreError> {
        self.read(|db| {
            db.query_one("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", args![])?
                .get(0)
        })
        .await
    }
}

pub struct PoolStatus {
    pub max: usize,
    pub used: usize,
    pub idle: usize,
    pub waiting: usize,
}

struct Measure {
    metrics: &'static crate::telemetry::metrics::Metrics,
    system: &'static str,
    kind: &'static str,
    started: std::time::Instant,
}

impl Drop for Measure {
    fn drop(&mut self) {
        self.metrics
            .db_operation(self.system, self.kind, self.started.elapsed().as_secs_f64());
    }
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

/// Reads a JSON column, reporting corruption instead of panicking.
fn json_column<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    // Serialising our own plain data types cannot fail.
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}
