//! Where A2A clients asked a task's changes to be pushed (migration 31): each config's
//! URL, and its token and credentials sealed with the master key (rotated with the rest,
//! `sealed.rs`).

use super::sealed::{KeyCheck, fence};
use super::sql::{Row, args};
use super::{Store, StoreError};

/// The associated data a push config's secret is sealed under.
pub fn push_secret_label(task_id: &str, id: &str) -> String {
    format!("a2a-push:{task_id}:{id}")
}

#[derive(Debug, Clone)]
pub struct A2aPushRecord {
    pub task_id: String,
    pub id: String,
    pub url: String,
    /// The `Authorization` scheme its credentials are sent with.
    pub scheme: Option<String>,
    /// The token and credentials, sealed.
    pub secret: Vec<u8>,
    pub created_at: i64,
    pub expires_at: i64,
}

const COLUMNS: &str = "task_id, id, url, scheme, secret, created_at, expires_at";

fn push_from_row(row: &Row) -> Result<A2aPushRecord, StoreError> {
    Ok(A2aPushRecord {
        task_id: row.get(0)?,
        id: row.get(1)?,
        url: row.get(2)?,
        scheme: row.get(3)?,
        secret: row.get(4)?,
        created_at: row.get(5)?,
        expires_at: row.get(6)?,
    })
}

impl Store {
    /// Keeps a push config (one of the same id is replaced), unless its task holds `limit`
    /// others already.
    pub async fn put_a2a_push(&self, record: A2aPushRecord, limit: u32, key_check: KeyCheck) -> Result<(), StoreError> {
        self.write(move |db| {
            fence(db, &key_check)?;
            db.execute(
                "DELETE FROM a2a_push_configs WHERE task_id = ?1 AND id = ?2",
                args![&record.task_id, &record.id],
            )?;
            let count: i64 = db
                .query_one(
                    "SELECT COUNT(*) FROM a2a_push_configs WHERE task_id = ?1",
                    args![&record.task_id],
                )?
                .get(0)?;
            if count >= i64::from(limit) {
                return Err(StoreError::QuotaExceeded(format!(
                    "a task keeps {limit} push configs at most; delete one first"
                )));
            }
            db.execute(
                &format!("INSERT INTO a2a_push_configs ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
                args![
                    record.task_id,
                    record.id,
                    record.url,
                    record.scheme,
                    record.secret,
                    record.created_at,
                    record.expires_at
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// A task's push configs, oldest first.
    pub async fn a2a_pushes(&self, task_id: &str) -> Result<Vec<A2aPushRecord>, StoreError> {
        let task_id = task_id.to_string();
        self.read(move |db| {
            db.query(
                &format!("SELECT {COLUMNS} FROM a2a_push_configs WHERE task_id = ?1 ORDER BY created_at, id"),
                args![task_id],
            )?
            .iter()
            .map(push_from_row)
            .collect()
        })
        .await
    }

    /// Forgets a push config; whether there was one.
    pub async fn delete_a2a_push(&self, task_id: &str, id: &str) -> Result<bool, StoreError> {
        let (task_id, id) = (task_id.to_string(), id.to_string());
        self.write(move |db| {
            Ok(db.execute(
                "DELETE FROM a2a_push_configs WHERE task_id = ?1 AND id = ?2",
                args![task_id, id],
            )? == 1)
        })
        .await
    }

    pub async fn delete_expired_a2a_pushes(&self, now: i64) -> Result<usize, StoreError> {
        self.write(move |db| Ok(db.execute("DELETE FROM a2a_push_configs WHERE expires_at < ?1", args![now])? as usize))
            .await
    }
}
