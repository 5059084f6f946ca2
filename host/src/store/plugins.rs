use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError};

impl Store {
    /// Records a component (its bytes, when known) and what it declared; the first record
    /// of a hash stays, and only gains its bytes if it had none.
    pub async fn put_plugin(
        &self,
        hash: &str,
        manifest: &serde_json::Value,
        wit_version: &str,
        component: &[u8],
    ) -> Result<(), StoreError> {
        let (hash, manifest, wit_version) = (hash.to_string(), manifest.to_string(), wit_version.to_string());
        let component = component.to_vec();
        self.write(move |tx| {
            tx.execute(
                "INSERT INTO plugins (hash, manifest, size, wit_version, created_at, component)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (hash) DO UPDATE SET component = excluded.component WHERE plugins.component IS NULL",
                params![
                    hash,
                    manifest,
                    component.len() as i64,
                    wit_version,
                    crate::clock::now_ms(),
                    component
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// The component with this content hash, if the database holds its bytes.
    pub async fn plugin_component(&self, hash: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let hash = hash.to_string();
        self.read(move |conn| {
            let bytes: Option<Option<Vec<u8>>> = conn
                .prepare_cached("SELECT component FROM plugins WHERE hash = ?1")?
                .query_row(params![hash], |r| r.get(0))
                .optional()?;
            Ok(bytes.flatten())
        })
        .await
    }

    /// Recorded components whose bytes the database does not hold yet (recorded before it
    /// kept them).
    pub async fn plugins_without_component(&self) -> Result<Vec<String>, StoreError> {
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached("SELECT hash FROM plugins WHERE component IS NULL")?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            Ok(rows.collect::<Result<Vec<String>, _>>()?)
        })
        .await
    }

    /// Gives a recorded component its bytes, if it has none.
    pub async fn put_plugin_component(&self, hash: &str, component: Vec<u8>) -> Result<(), StoreError> {
        let hash = hash.to_string();
        self.write(move |tx| {
            tx.execute(
                "UPDATE plugins SET component = ?2 WHERE hash = ?1 AND component IS NULL",
                params![hash, component],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn plugin_manifest(&self, hash: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let hash = hash.to_string();
        self.read(move |conn| {
            let text: Option<String> = conn
                .prepare_cached("SELECT manifest FROM plugins WHERE hash = ?1")?
                .query_row(params![hash], |r| r.get(0))
                .optional()?;
            text.map(|t| super::json_column(&t, "plugin manifest")).transpose()
        })
        .await
    }

    /// Components that custom commands use and whose manifest was never recorded.
    pub async fn unrecorded_plugins(&self) -> Result<Vec<String>, StoreError> {
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT DISTINCT c.plugin FROM commands c
                 WHERE c.plugin IS NOT NULL AND NOT EXISTS (SELECT 1 FROM plugins p WHERE p.hash = c.plugin)",
            )?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            Ok(rows.collect::<Result<Vec<String>, _>>()?)
        })
        .await
    }

    /// Moves key-value data stored under a plugin's own name (before stores were the
    /// command's) to the commands of that agent that run the plugin `hash`. Copies never
    /// overwrite newer data; the old scope goes once copied.
    pub async fn rescope_kv(&self, hash: &str, plugin_name: &str) -> Result<usize, StoreError> {
        let (hash, plugin_name) = (hash.to_string(), plugin_name.to_string());
        self.write(move |tx| {
            let copied = tx.execute(
                "INSERT OR IGNORE INTO plugin_kv (agent_id, scope, key, value, updated_at)
                 SELECT kv.agent_id, 'command:' || c.name, kv.key, kv.value, kv.updated_at
                 FROM plugin_kv kv JOIN commands c ON c.agent_id = kv.agent_id AND c.plugin = ?1
                 WHERE kv.scope = ?2",
                params![hash, plugin_name],
            )?;
            tx.execute(
                "DELETE FROM plugin_kv WHERE scope = ?2
                   AND agent_id IN (SELECT agent_id FROM commands WHERE plugin = ?1)",
                params![hash, plugin_name],
            )?;
            Ok(copied)
        })
        .await
    }
}
