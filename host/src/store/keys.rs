use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use super::accounts::{ACCOUNT_COLUMNS, account_from_row};
use super::sql::{Db, Row, args};
use super::{Store, StoreError};
use crate::domain::{Account, ApiKeyInfo, KeyScope};

/// What authentication needs to know about a presented key id.
#[derive(Debug)]
pub struct KeyRecord {
    pub info: ApiKeyInfo,
    pub secret_hash: Vec<u8>,
    pub account: Arc<Account>,
    /// When this process last recorded the key's use (ms), or the stored time.
    touched_at: AtomicI64,
}

impl KeyRecord {
    pub fn new(info: ApiKeyInfo, secret_hash: Vec<u8>, account: Account) -> KeyRecord {
        KeyRecord {
            touched_at: AtomicI64::new(info.last_used_at.unwrap_or(i64::MIN / 2)),
            info,
            secret_hash,
            account: Arc::new(account),
        }
    }

    /// True at most once per `every` ms of use: whoever gets true records the use.
    pub fn claim_touch(&self, now: i64, every: i64) -> bool {
        let last = self.touched_at.load(Ordering::Relaxed);
        now - last >= every
            && self
                .touched_at
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }
}

const KEY_COLUMNS: &str = "id, account_id, scope, created_at, last_used_at, revoked_at, name, expires_at";

fn info_from_row(row: &Row) -> Result<ApiKeyInfo, StoreError> {
    let scope: String = row.get(2)?;
    Ok(ApiKeyInfo {
        id: row.get(0)?,
        account_id: row.get(1)?,
        scope: KeyScope::parse(&scope).ok_or_else(|| StoreError::Corrupt(format!("key with unknown scope {scope}")))?,
        created_at: row.get(3)?,
        last_used_at: row.get(4)?,
        revoked_at: row.get(5)?,
        name: row.get(6)?,
        expires_at: row.get(7)?,
    })
}

/// A key's event: never its secret, which the store does not hold.
fn key_event(key: &ApiKeyInfo) -> serde_json::Value {
    serde_json::json!({
        "key_id": key.id, "name": key.name, "scope": key.scope.as_str(),
        "expires_at": key.expires_at.map(crate::clock::iso),
    })
}

/// The key with this id, unless unknown or (when an account is named) another account's.
fn key_in(db: &dyn Db, id: &str, account_id: Option<&str>) -> Result<Option<ApiKeyInfo>, StoreError> {
    let Some(row) = db.query_opt(&format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = ?1"), args![id])? else {
        return Ok(None);
    };
    let key = info_from_row(&row)?;
    Ok(Some(key).filter(|key| account_id.is_none_or(|a| a == key.account_id)))
}

impl Store {
    pub async fn insert_key(
        &self,
        id: &str,
        account_id: &str,
        scope: KeyScope,
        name: Option<String>,
        expires_at: Option<i64>,
        secret_hash: Vec<u8>,
    ) -> Result<ApiKeyInfo, StoreError> {
        let info = ApiKeyInfo {
            id: id.to_string(),
            account_id: account_id.to_string(),
            scope,
            name,
            created_at: crate::clock::now_ms(),
            last_used_at: None,
            revoked_at: None,
            expires_at,
        };
        let row = info.clone();
        self.write(move |db| {
            db.execute(
                "INSERT INTO api_keys (id, account_id, scope, secret_hash, created_at, name, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                args![
                    &row.id,
                    &row.account_id,
                    row.scope.as_str(),
                    secret_hash,
                    row.created_at,
                    &row.name,
                    row.expires_at
                ],
            )?;
            let dedup = format!("key.created:{}", row.id);
            super::webhooks::emit_in(db, &row.account_id, "key.created", &dedup, key_event(&row))?;
            Ok(())
        })
        .await?;
        Ok(info)
    }

    pub async fn list_keys(&self, account_id: &str) -> Result<Vec<ApiKeyInfo>, StoreError> {
        let account_id = account_id.to_string();
        self.read(move |db| {
            db.query(
                &format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE account_id = ?1 ORDER BY created_at, id"),
                args![account_id],
            )?
            .iter()
            .map(info_from_row)
            .collect()
        })
        .await
    }

    /// Marks a key revoked; returns the key as it now stands, or None if unknown (or, when
    /// an account is named, not that account's). Revoking twice keeps the first time.
    pub async fn revoke_key(&self, id: &str, account_id: Option<&str>) -> Result<Option<ApiKeyInfo>, StoreError> {
        let id = id.to_string();
        let account_id = account_id.map(str::to_string);
        self.write_cached(move |db| {
            let Some(key) = key_in(db, &id, account_id.as_deref())? else {
                return Ok(None);
            };
            if key.revoked_at.is_some() {
                return Ok(Some(key));
            }
            let now = crate::clock::now_ms();
            db.execute("UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1", args![&id, now])?;
            let key = ApiKeyInfo {
                revoked_at: Some(now),
                ..key
            };
            let dedup = format!("key.revoked:{id}");
            super::webhooks::emit_in(db, &key.account_id, "key.revoked", &dedup, key_event(&key))?;
            Ok(Some(key))
        })
        .await
    }

    /// Sets a key's name and expiry as given (`None` leaves one as it is); returns the key
    /// as it now stands, or None if unknown or, when an account is named, not that account's.
    pub async fn update_key(
        &self,
        id: &str,
        account_id: Option<&str>,
        name: Option<Option<String>>,
        expires_at: Option<Option<i64>>,
    ) -> Result<Option<ApiKeyInfo>, StoreError> {
        let id = id.to_string();
        let account_id = account_id.map(str::to_string);
        self.write_cached(move |db| {
            let Some(key) = key_in(db, &id, account_id.as_deref())? else {
                return Ok(None);
            };
            let key = ApiKeyInfo {
                name: name.unwrap_or(key.name),
                expires_at: expires_at.unwrap_or(key.expires_at),
                ..key
            };
            db.execute(
                "UPDATE api_keys SET name = ?2, expires_at = ?3 WHERE id = ?1",
                args![&id, &key.name, key.expires_at],
            )?;
            // Every update is its own event: the dedup key names this one alone.
            let dedup = format!("key.updated:{id}:{}", crate::random::hex_token(8));
            super::webhooks::emit_in(db, &key.account_id, "key.updated", &dedup, key_event(&key))?;
            Ok(Some(key))
        })
        .await
    }

    /// The key with this id and its account, from the read cache when it has them.
    pub async fn key_for_auth(&self, id: &str) -> Result<Option<Arc<KeyRecord>>, StoreError> {
        if let Some(found) = self.cache.key(id) {
            return Ok(Some(found));
        }
        let ticket = self.cache.ticket();
        let id = id.to_string();
        let found = self
            .read(move |db| {
                let sql = format!(
                "SELECT k.id, k.account_id, k.scope, k.created_at, k.last_used_at, k.revoked_at, k.name, k.expires_at, k.secret_hash, {ACCOUNT_COLUMNS}
                 FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = ?1"
            );
                db.query_opt(&sql, args![id])?
                    .map(|row| {
                        Ok(Arc::new(KeyRecord::new(
                            info_from_row(&row)?,
                            row.get(8)?,
                            account_from_row(&row, 9)?,
                        )))
                    })
                    .transpose()
            })
            .await?;
        if let Some(record) = &found {
            self.cache.keep_key(ticket, record);
        }
        Ok(found)
    }

    pub async fn touch_key(&self, id: &str, at: i64) -> Result<(), StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            db.execute("UPDATE api_keys SET last_used_at = ?2 WHERE id = ?1", args![id, at])?;
            Ok(())
        })
        .await
    }
}
