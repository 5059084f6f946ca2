use super::sql::args;
use super::{Store, StoreError};

impl Store {
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
        self.write(move |db| {
            // Two hosts adding keys to one scope at once must not both pass the cap.
            db.serialize(&format!("kv:{agent_id}:{scope}"))?;
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
                if count >= max_keys {
                    return Err(StoreError::Conflict(format!(
                        "this plugin already stores the maximum of {max_keys} keys"
                    )));
                }
            }
            db.execute(
                "INSERT INTO plugin_kv (agent_id, scope, key, value, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (agent_id, scope, key) DO UPDATE SET value = ?4, updated_at = ?5",
                args![agent_id, scope, key, value, crate::clock::now_ms()],
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
