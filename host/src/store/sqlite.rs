//! The embedded backend: one SQLite file in the data dir, one writer at a time (WAL lets
//! readers run beside it).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::StoreError;
use super::sql::{Db, Row, Value};

/// Readers kept open between calls; more are opened on demand under load.
const IDLE_READERS: usize = 8;

pub(super) struct Sqlite {
    path: PathBuf,
    busy_timeout: Duration,
    /// SQLite allows one writer at a time; taking this lock first avoids busy retries
    /// between our own writers. Other processes (the CLI) are covered by busy_timeout.
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
}

impl Sqlite {
    pub(super) fn open(path: &Path, busy_timeout: Duration) -> Result<Sqlite, StoreError> {
        owner_only(path)?;
        let mut writer = open_connection(path, busy_timeout)?;
        let tx = writer.transaction_with_behavior(TransactionBehavior::Immediate)?;
        super::migrations::apply(&*tx, super::Dialect::Sqlite)?;
        tx.commit()?;
        Ok(Sqlite {
            path: path.to_path_buf(),
            busy_timeout,
            writer: Mutex::new(writer),
            readers: Mutex::new(Vec::new()),
        })
    }

    /// Runs a read on a pooled connection; blocks.
    pub(super) fn read<T>(&self, f: impl FnOnce(&dyn Db) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let pooled = self.readers.lock().map_err(poisoned)?.pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => open_connection(&self.path, self.busy_timeout)?,
        };
        let result = f(&conn);
        let mut readers = self.readers.lock().map_err(poisoned)?;
        if readers.len() < IDLE_READERS {
            readers.push(conn);
        }
        result
    }

    /// Runs `f` in one IMMEDIATE transaction; it commits only if `f` returns Ok. Blocks.
    pub(super) fn write<T>(&self, f: impl FnOnce(&dyn Db) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut conn = self.writer.lock().map_err(poisoned)?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let value = f(&*tx)?;
        tx.commit()?;
        Ok(value)
    }
}

/// The database holds sealed secrets and every account's records: only the service's own
/// user may read it. The file is made 0600 before SQLite first opens it (its WAL and
/// shared-memory files then take the same mode), and files made before are narrowed.
fn owner_only(path: &Path) -> Result<(), StoreError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let failed = |e: std::io::Error| StoreError::Task(format!("cannot restrict {}: {e}", path.display()));
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(path)
            .map_err(failed)?;
        for suffix in ["", "-wal", "-shm"] {
            let file = PathBuf::from(format!("{}{suffix}", path.display()));
            match std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(failed(e)),
                _ => {}
            }
        }
    }
    Ok(())
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

fn poisoned<E>(_: E) -> StoreError {
    StoreError::Task("a database lock was poisoned by an earlier panic".into())
}

impl Db for Connection {
    fn query(&self, sql: &str, args: &[Value]) -> Result<Vec<Row>, StoreError> {
        let mut stmt = self.prepare_cached(sql)?;
        let columns = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(args))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let values = (0..columns)
                .map(|i| row.get_ref(i).map(value_of))
                .collect::<Result<Vec<_>, _>>()?;
            out.push(Row(values));
        }
        Ok(out)
    }

    fn execute(&self, sql: &str, args: &[Value]) -> Result<u64, StoreError> {
        Ok(self.prepare_cached(sql)?.execute(rusqlite::params_from_iter(args))? as u64)
    }

    fn batch(&self, sql: &str) -> Result<(), StoreError> {
        Ok(self.execute_batch(sql)?)
    }

    fn serialize(&self, _name: &str) -> Result<(), StoreError> {
        Ok(()) // writes take the database's one write lock (IMMEDIATE) already
    }
}

fn value_of(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(n) => Value::Int(n),
        // The schema stores no floats; one read here is kept as its nearest integer.
        ValueRef::Real(x) => Value::Int(x as i64),
        ValueRef::Text(bytes) => Value::Text(String::from_utf8_lossy(bytes).into_owned()),
        ValueRef::Blob(bytes) => Value::Blob(bytes.to_vec()),
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(n) => ToSqlOutput::Borrowed(ValueRef::Integer(*n)),
            Value::Text(text) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            Value::Blob(bytes) => ToSqlOutput::Borrowed(ValueRef::Blob(bytes)),
        })
    }
}
