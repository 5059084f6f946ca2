use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError};

impl Store {
    pub async fn kv_get(&self, agent_id: &str, scope: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let (agent_id, scope, key) = (agent_id.to_string(), scope.to_string(), key.to_string());
        self.read(move |conn| {
            Ok(conn
                .query_row(
                    "SELECT value FROM plugin_kv WHERE agent_id = ?1 AND scope = ?2 AND key = ?3",
                    params![agent_id, scope, key],
                    |r| r.get(0),
                )
                .optional()?)
        })
        .await
    }

    /// Stores a value; a new key beyond `max_keys` in the scope is refused (Conflict).
    pub async fn kv_set(
        &self,
        agent_id: &str,
        scope: &str,
        key: &str,
        value: Vec<u8>,
        max_keys: u32,
    ) -> Result<(), StoreError> {
        let (agent_id, scope, key) = (agent_id.to_string(), scope.to_string(), key.to_string());
        self.write(move |tx| {
            let exists: bool = tx.query_row(
                "SELECT EXISTS (SELECT 1 FROM plugin_kv WHERE agent_id = ?1 AND scope = ?2 AND key = ?3)",
                params![agent_id, scope, key],
                |r| r.get(0),
            )?;
            if !exists {
                let count: u32 = tx.query_row(
                    "SELECT COUNT(*) FROM plugin_kv WHERE agent_id = ?1 AND scope = ?2",
                    params![agent_id, scope],
                    |r| r.get(0),
                )?;
                if count >= max_keys {
                    return Err(StoreError::Conflict(format!(
                        "this plugin already stores the maximum of {max_keys} keys"
                    )));
                }
            }
            tx.execute(
                "INSERT INTO plugin_kv (agent_id, scope, key, value, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (agent_id, scope, key) DO UPDATE SET value = ?4, updated_at = ?5",
                params![agent_id, scope, key, value, crate::clock::now_ms()],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn kv_delete(&self, agent_id: &str, scope: &str, key: &str) -> Result<(), StoreError> {
        let (agent_id, scope, key) = (agent_id.to_string(), scope.to_string(), key.to_string());
        self.write(move |tx| {
            tx.execute(
                "DELETE FROM plugin_kv WHERE agent_id = ?1 AND scope = ?2 AND key = ?3",
                params![agent_id, scope, key],
            )?;
            Ok(())
        })
        .await
    }
}
