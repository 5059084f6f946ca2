use super::sql::args;
use super::{Store, StoreError};

/// What a key-value write may take: keys in its scope, bytes of its account's stores.
#[derive(Debug, Clone)]
pub struct KvQuota {
    pub max_keys: u32,
    pub account_id: String,
    pub max_account_bytes: u64,
}

impl Store {
    /// Bytes all of the account's key-value stores hold.
    pub async fn account_kv_bytes(&self, account_id: &str) -> Result<u64, StoreError> {
        let account_id = account_id.to_string();
        self.read(move |db| {
            let used: i64 = db
                .query_one(
                    "SELECT CAST(COALESCE(SUM(k.size), 0) AS BIGINT) FROM plugin_kv k JOIN agents g ON g.id = k.agent_id
                     WHERE g.account_id = ?1",
                    args![account_id],
                )?
                .get(0)?;
            Ok(used as u64)
        })
        .await
    }

    pub async fn kv_get(&self, agent_id: &str, scope: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let (agent_id, scope, key) = (agent_id.to_string(), scope.to_string(), key.to_string());
        self.read(move |db| {
            db.query_opt(
                "SELECT value FROM plugin_kv WHERE agent_id = ?1 AND scope = ?2 AND key = ?3",
                args![agent_id, scope, key],
            )?
            .map(|row| row.get(0))
            .transpose()
        })
        .await
    }

    /// Stores a value; a new key beyond `quota.max_keys` in the scope is refused (Conflict),
    /// and so is a value that would take the account's stores past `quota.max_account_bytes`
    /// (QuotaExceeded).
    pub async fn kv_set(
        &self,
        agent_id: &str,
        scope: &str,
        key: &str,
        value: Vec<u8>,
        quota: KvQuota,
    ) -> Result<(), StoreError> {
        let (agent_id, scope, key) = (agent_id.to_string(), scope.to_string(), key.to_string());
        self.write(move |db| {
            // Two hosts writing one account's stores at once must not both pass its caps.
            db.serialize(&format!("kv:{}", quota.account_id))?;
            let old: i64 = db
                .query_opt(
                    "SELECT size FROM plugin_kv WHERE agent_id = ?1 AND scope = ?2 AND key = ?3",
                    args![&agent_id, &scope, &key],
                )?
                .map(|row| row.get(0))
                .transpose()?
                .unwrap_or(0);
            let new = value.len() as i64;
            if new > old {
                let used: i64 = db
                    .query_one(
                        "SELECT CAST(COALESCE(SUM(k.size), 0) AS BIGINT) FROM plugin_kv k JOIN agents g ON g.id = k.agent_id
                         WHERE g.account_id = ?1",
                        args![&quota.account_id],
                    )?
                    .get(0)?;
                if (used - old + new) as u64 > quota.max_account_bytes {
                    return Err(StoreError::QuotaExceeded(format!(
                        "this account's plugins already store {used} bytes; its quota is {} (account_max_kv_bytes)",
                        quota.max_account_bytes
                    )));
                }
            }
            let exists: bool = db
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM plugin_kv WHERE agent_id = ?1 AND scope = ?2 AND key = ?3)",
                    args![&agent_id, &scope, &key],
                )?
                .get(0)?;
            if !exists {
                let count: u32 = db
                    .query_one(
                        "SELECT COUNT(*) FROM plugin_kv WHERE agent_id = ?1 AND scope = ?2",
                        args![&agent_id, &scope],
                    )?
                    .get(0)?;
                if count >= quota.max_keys {
                    return Err(StoreError::Conflict(format!(
                        "this plugin already stores the maximum of {} keys",
                        quota.max_keys
                    )));
                }
            }
            db.execute(
                "INSERT INTO plugin_kv (agent_id, scope, key, value, size, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (agent_id, scope, key) DO UPDATE SET value = ?4, size = ?5, updated_at = ?6",
                args![agent_id, scope, key, value, new, crate::clock::now_ms()],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn kv_delete(&self, agent_id: &str, scope: &str, key: &str) -> Result<(), StoreError> {
        let (agent_id, scope, key) = (agent_id.to_string(), scope.to_string(), key.to_string());
        self.write(move |db| {
            db.execute(
                "DELETE FROM plugin_kv WHERE agent_id = ?1 AND scope = ?2 AND key = ?3",
                args![agent_id, scope, key],
            )?;
            Ok(())
        })
        .await
    }
}
