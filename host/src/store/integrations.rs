use super::sql::args;
use super::{KeyCheck, Store, StoreError, json_column, to_json};

/// An agent's connection to a third-party account. `secret` is sealed by the caller.
#[derive(Debug, Clone)]
pub struct Integration {
    pub agent_id: String,
    pub kind: String,
    pub enabled: bool,
    pub secret: Vec<u8>,
    pub public: serde_json::Value,
}

impl Store {
    pub async fn put_integration(&self, integration: Integration, sealed_with: KeyCheck) -> Result<(), StoreError> {
        self.write(move |db| {
            super::sealed::fence(db, &sealed_with)?;
            db.execute(
                "INSERT INTO agent_integrations (agent_id, kind, enabled, secret, public, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (agent_id, kind) DO UPDATE SET enabled = ?3, secret = ?4, public = ?5, updated_at = ?6",
                args![
                    integration.agent_id,
                    integration.kind,
                    integration.enabled,
                    integration.secret,
                    to_json(&integration.public),
                    crate::clock::now_ms()
                ],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn integration(&self, agent_id: &str, kind: &str) -> Result<Option<Integration>, StoreError> {
        let (agent_id, kind) = (agent_id.to_string(), kind.to_string());
        self.read(move |db| {
            let Some(row) = db.query_opt(
                "SELECT enabled, secret, public FROM agent_integrations WHERE agent_id = ?1 AND kind = ?2",
                args![&agent_id, &kind],
            )?
            else {
                return Ok(None);
            };
            Ok(Some(Integration {
                agent_id,
                kind,
                enabled: row.get(0)?,
                secret: row.get(1)?,
                public: json_column(&row.get::<String>(2)?, "integration public data")?,
            }))
        })
        .await
    }

    /// Turns it on or off; false if there is none.
    pub async fn set_integration_enabled(&self, agent_id: &str, kind: &str, enabled: bool) -> Result<bool, StoreError> {
        let (agent_id, kind) = (agent_id.to_string(), kind.to_string());
        self.write(move |db| {
            Ok(db.execute(
                "UPDATE agent_integrations SET enabled = ?3, updated_at = ?4 WHERE agent_id = ?1 AND kind = ?2",
                args![agent_id, kind, enabled, crate::clock::now_ms()],
            )? == 1)
        })
        .await
    }

    /// Removes the agent's integrations whose kind starts with `prefix`, but those in `keep`
    /// (a remote MCP server's credential, once its manifest no longer names it).
    pub async fn delete_integrations_except(
        &self,
        agent_id: &str,
        prefix: &str,
        keep: Vec<String>,
    ) -> Result<u64, StoreError> {
        let (agent_id, prefix) = (agent_id.to_string(), prefix.to_string());
        self.write(move |db| {
            let mut deleted = 0;
            for row in db.query(
                "SELECT kind FROM agent_integrations WHERE agent_id = ?1",
                args![&agent_id],
            )? {
                let kind: String = row.get(0)?;
                if kind.starts_with(&prefix) && !keep.contains(&kind) {
                    deleted += db.execute(
                        "DELETE FROM agent_integrations WHERE agent_id = ?1 AND kind = ?2",
                        args![&agent_id, &kind],
                    )?;
                }
            }
            Ok(deleted)
        })
        .await
    }

    /// Removes it; false if there was none.
    pub async fn delete_integration(&self, agent_id: &str, kind: &str) -> Result<bool, StoreError> {
        let (agent_id, kind) = (agent_id.to_string(), kind.to_string());
        self.write(move |db| {
            Ok(db.execute(
                "DELETE FROM agent_integrations WHERE agent_id = ?1 AND kind = ?2",
                args![agent_id, kind],
            )? == 1)
        })
        .await
    }
}
