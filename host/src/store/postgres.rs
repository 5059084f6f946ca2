//! The shared backend: PostgreSQL, for several hosts serving from one database.
//!
//! The store's functions are synchronous closures over [`Db`] (one body for both
//! backends); here each statement is driven on the async client from the blocking-pool
//! thread the closure runs on, through the runtime's handle.

use std::error::Error;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::runtime::Handle;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

use super::StoreError;
use super::sql::{Db, Row, Value, postgres_placeholders};

pub(super) struct Postgres {
    pool: Pool,
    handle: Handle,
    locks: LockSession,
}

/// What a statement failed with, for the store's error.
pub(super) type PgError = tokio_postgres::Error;

impl Postgres {
    /// Connects (checking the address and credentials now, not at the first request) and
    /// brings the schema up to date.
    pub(super) async fn connect(url: &str, pool_size: usize) -> Result<Postgres, StoreError> {
        let invalid = |e: String| StoreError::Unavailable(format!("the database address is not valid: {e}"));
        let (url, tls) = super::tls::from_address(url).map_err(invalid)?;
        let config = tokio_postgres::Config::from_str(&url).map_err(|e| invalid(e.to_string()))?;
        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(2))
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(Duration::from_secs(10)))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        let store = Postgres {
            pool,
            handle: Handle::current(),
            locks: LockSession {
                config,
                tls,
                client: tokio::sync::Mutex::new(None),
            },
        };
        let handle = store.handle.clone();
        let pool = store.pool.clone();
        tokio::task::spawn_blocking(move || {
            let mut client = handle.block_on(pool.get()).map_err(pool_error)?;
            let tx = handle.block_on(client.transaction())?;
            // Hosts starting together apply migrations one at a time.
            let db = PgDb {
                client: &tx,
                handle: &handle,
            };
            db.execute("SELECT pg_advisory_xact_lock(?1)", &[Value::Int(MIGRATION_LOCK)])?;
            super::migrations::apply(&db, super::Dialect::Postgres)?;
            handle.block_on(tx.commit())?;
            Ok::<_, StoreError>(())
        })
        .await
        .map_err(|e| StoreError::Task(e.to_string()))??;
        Ok(store)
    }

    /// Runs a read on a pooled connection; blocks.
    pub(super) fn read<T>(&self, f: impl FnOnce(&dyn Db) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let client = self.handle.block_on(self.pool.get()).map_err(pool_error)?;
        f(&PgDb {
            client: &client,
            handle: &self.handle,
        })
    }

    /// Runs `f` in one transaction; it commits only if `f` returns Ok. Blocks.
    pub(super) fn write<T>(&self, f: impl FnOnce(&dyn Db) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut client = self.handle.block_on(self.pool.get()).map_err(pool_error)?;
        let tx = self.handle.block_on(client.transaction())?;
        let value = f(&PgDb {
            client: &tx,
            handle: &self.handle,
        })?;
        self.handle.block_on(tx.commit())?;
        Ok(value)
    }

    pub(super) fn pool_status(&self) -> super::PoolStatus {
        let status = self.pool.status();
        super::PoolStatus {
            max: status.max_size,
            used: status.size.saturating_sub(status.available),
            idle: status.available,
            waiting: status.waiting,
        }
    }

    /// Takes the advisory lock `key` if no other host holds it. Locks are held by this
    /// host's lock session, so a host that dies (its connection gone) frees them all.
    pub(super) async fn try_lock(&self, key: i64) -> Result<Option<AdvisoryLock>, StoreError> {
        let client = self.locks.client().await?;
        let taken: bool = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
            .await?
            .try_get(0)?;
        Ok(taken.then(|| AdvisoryLock { key, client }))
    }
}

/// The one connection per host that holds its advisory locks (several at once: the
/// client pipelines them). Outside the pool, so it is never recycled under a held lock.
struct LockSession {
    config: tokio_postgres::Config,
    tls: super::tls::PgTls,
    client: tokio::sync::Mutex<Option<Arc<tokio_postgres::Client>>>,
}

impl LockSession {
    async fn client(&self) -> Result<Arc<tokio_postgres::Client>, StoreError> {
        let mut current = self.client.lock().await;
        if let Some(client) = current.as_ref().filter(|c| !c.is_closed()) {
            return Ok(client.clone());
        }
        if current.is_some() {
            // Its locks went with it; whoever held one is finishing without it.
            tracing::error!("the database session holding this host's locks was lost; opening another");
        }
        let (client, connection) = self.config.connect(self.tls.clone()).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(error = %e, "the database lock session ended");
            }
        });
        let client = Arc::new(client);
        *current = Some(client.clone());
        Ok(client)
    }
}

/// A held advisory lock; released when dropped.
pub(super) struct AdvisoryLock {
    key: i64,
    client: Arc<tokio_postgres::Client>,
}

impl Drop for AdvisoryLock {
    fn drop(&mut self) {
        let (key, client) = (self.key, self.client.clone());
        // A session that has ended holds nothing any more.
        if let Ok(handle) = Handle::try_current()
            && !client.is_closed()
        {
            handle.spawn(async move {
                if let Err(e) = client.execute("SELECT pg_advisory_unlock($1)", &[&key]).await {
                    tracing::warn!(error = %e, "could not release a database lock");
                }
            });
        }
    }
}

/// `pg_advisory_xact_lock` key of migrations ("agentmig").
const MIGRATION_LOCK: i64 = 0x6167_656e_746d_6967;

fn pool_error(err: deadpool_postgres::PoolError) -> StoreError {
    match err {
        deadpool_postgres::PoolError::Backend(e) => StoreError::Postgres(e),
        other => StoreError::Unavailable(other.to_string()),
    }
}

struct PgDb<'a, C> {
    client: &'a C,
    handle: &'a Handle,
}

impl<C: GenericClient> Db for PgDb<'_, C> {
    fn query(&self, sql: &str, args: &[Value]) -> Result<Vec<Row>, StoreError> {
        let sql = postgres_placeholders(sql);
        let params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        let rows = self.handle.block_on(async {
            let statement = self.client.prepare_cached(&sql).await?;
            self.client.query(&statement, &params).await
        })?;
        rows.iter()
            .map(|row| {
                (0..row.len())
                    .map(|i| row.try_get::<_, Value>(i))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Row)
                    .map_err(StoreError::Postgres)
            })
            .collect()
    }

    fn execute(&self, sql: &str, args: &[Value]) -> Result<u64, StoreError> {
        let sql = postgres_placeholders(sql);
        let params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        Ok(self.handle.block_on(async {
            let statement = self.client.prepare_cached(&sql).await?;
            self.client.execute(&statement, &params).await
        })?)
    }

    fn batch(&self, sql: &str) -> Result<(), StoreError> {
        Ok(self.handle.block_on(self.client.batch_execute(sql))?)
    }

    fn serialize(&self, name: &str) -> Result<(), StoreError> {
        self.execute(
            "SELECT pg_advisory_xact_lock(?1)",
            &[Value::Int(super::locks::lock_key(name))],
        )?;
        Ok(())
    }
}

type BoxError = Box<dyn Error + Sync + Send>;

/// Values are written as the type PostgreSQL expects at that place, so one statement text
/// serves both backends (a flag is an integer in SQLite and a boolean here).
impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(n) => match *ty {
                Type::BOOL => (*n != 0).to_sql(ty, out),
                Type::INT2 => i16::try_from(*n)?.to_sql(ty, out),
                Type::INT4 => i32::try_from(*n)?.to_sql(ty, out),
                Type::INT8 => n.to_sql(ty, out),
                Type::TEXT | Type::VARCHAR | Type::UNKNOWN => n.to_string().to_sql(&Type::TEXT, out),
                _ => Err(format!("an integer cannot be written as {ty}").into()),
            },
            Value::Text(text) => text.to_sql(ty, out),
            Value::Blob(bytes) => bytes.to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

impl<'a> FromSql<'a> for Value {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Value, BoxError> {
        Ok(match *ty {
            Type::BOOL => Value::Int(i64::from(bool::from_sql(ty, raw)?)),
            Type::INT2 => Value::Int(i64::from(i16::from_sql(ty, raw)?)),
            Type::INT4 => Value::Int(i64::from(i32::from_sql(ty, raw)?)),
            Type::INT8 => Value::Int(i64::from_sql(ty, raw)?),
            Type::BYTEA => Value::Blob(Vec::<u8>::from_sql(ty, raw)?),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                Value::Text(String::from_sql(ty, raw)?)
            }
            _ => return Err(format!("the store does not read {ty} columns").into()),
        })
    }

    fn from_sql_null(_: &Type) -> Result<Value, BoxError> {
        Ok(Value::Null)
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}
