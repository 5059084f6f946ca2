use rusqlite::{OptionalExtension, params};

use super::accounts::{ACCOUNT_COLUMNS, account_from_row};
use super::{Store, StoreError};
use crate::domain::{Account, ApiKeyInfo};

/// What authentication needs to know about a presented key id.
pub struct KeyRecord {
    pub info: ApiKeyInfo,
    pub secret_hash: Vec<u8>,
    pub account: Account,
}

fn info_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ApiKeyInfo> {
    Ok(ApiKeyInfo {
        id: row.get(0)?,
        account_id: row.get(1)?,
        created_at: row.get(2)?,
        last_used_at: row.get(3)?,
        revoked_at: row.get(4)?,
    })
}

impl Store {
    pub async fn insert_key(&self, id: &str, account_id: &str, secret_hash: Vec<u8>) -> Result<ApiKeyInfo, StoreError> {
        let info = ApiKeyInfo {
            id: id.to_string(),
            account_id: account_id.to_string(),
            created_at: crate::clock::now_ms(),
            last_used_at: None,
            revoked_at: None,
        };
        let row = info.clone();
        self.write(move |tx| {
            tx.execute(
                "INSERT INTO api_keys (id, account_id, secret_hash, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![row.id, row.account_id, secret_hash, row.created_at],
            )?;
            Ok(())
        })
        .await?;
        Ok(info)
    }

    pub async fn list_keys(&self, account_id: &str) -> Result<Vec<ApiKeyInfo>, StoreError> {
        let account_id = account_id.to_string();
        self.read(move |conn| {
            let mut stmt = conn.prepare(
                "SELECT id, account_id, created_at, last_used_at, revoked_at FROM api_keys
                 WHERE account_id = ?1 ORDER BY created_at, id",
            )?;
            let rows = stmt.query_map([account_id], info_from_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    /// Marks a key revoked; returns the key as it now stands, or None if unknown.
    /// Revoking twice keeps the first revocation time.
    pub async fn revoke_key(&self, id: &str) -> Result<Option<ApiKeyInfo>, StoreError> {
        let id = id.to_string();
        self.write(move |tx| {
            tx.execute(
                "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                params![id, crate::clock::now_ms()],
            )?;
            Ok(tx
                .query_row(
                    "SELECT id, account_id, created_at, last_used_at, revoked_at FROM api_keys WHERE id = ?1",
                    [id],
                    info_from_row,
                )
                .optional()?)
        })
        .await
    }

    pub async fn key_for_auth(&self, id: &str) -> Result<Option<KeyRecord>, StoreError> {
        let id = id.to_string();
        self.read(move |conn| {
            let sql = format!(
                "SELECT k.id, k.account_id, k.created_at, k.last_used_at, k.revoked_at, k.secret_hash, {ACCOUNT_COLUMNS}
                 FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = ?1"
            );
            conn.prepare_cached(&sql)?
                .query_row([id], |row| {
                    let info = info_from_row(row)?;
                    let secret_hash: Vec<u8> = row.get(5)?;
                    Ok(account_from_row(row, 6)?.map(|account| KeyRecord {
                        info,
                        secret_hash,
                        account,
                    }))
                })
                .optional()?
                .transpose()
        })
        .await
    }

    pub async fn touch_key(&self, id: &str, at: i64) -> Result<(), StoreError> {
        let id = id.to_string();
        self.write(move |tx| {
            tx.execute("UPDATE api_keys SET last_used_at = ?2 WHERE id = ?1", params![id, at])?;
            Ok(())
        })
        .await
    }
}
