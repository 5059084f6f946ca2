use super::sql::args;
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
        self.write(move |db| {
            db.execute(
                "INSERT INTO plugins (hash, manifest, size, wit_version, created_at, component)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (hash) DO UPDATE SET component = excluded.component WHERE plugins.component IS NULL",
                args![
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
        self.read(move |db| {
            let bytes: Option<Option<Vec<u8>>> = db
                .query_opt("SELECT component FROM plugins WHERE hash = ?1", args![hash])?
                .map(|row| row.get(0))
                .transpose()?;
            Ok(bytes.flatten())
        })
        .await
    }

    /// Recorded components whose bytes the database does not hold yet (recorded before it
    /// kept them).
    pub async fn plugins_without_component(&self) -> Result<Vec<String>, StoreError> {
        self.read(move |db| {
            db.query("SELECT hash FROM plugins WHERE component IS NULL", args![])?
                .iter()
                .map(|row| row.get(0))
                .collect()
        })
        .await
    }

    /// Gives a recorded component its bytes, if it has none.
    pub async fn put_plugin_component(&self, hash: &str, component: Vec<u8>) -> Result<(), StoreError> {
        let hash = hash.to_string();
        self.write(move |db| {
            db.execute(
                "UPDATE plugins SET component = ?2 WHERE hash = ?1 AND component IS NULL",
                args![hash, component],
            )?;
            Ok(())
        })
        .await
    }

    /// What is recorded of a component, if anything.
    pub async fn plugin_record(&self, hash: &str) -> Result<Option<PluginRecord>, StoreError> {
        let hash = hash.to_string();
        self.read(move |db| {
            db.query_opt(
                "SELECT manifest, wit_version, component IS NOT NULL FROM plugins WHERE hash = ?1",
                args![hash],
            )?
            .map(|row| {
                Ok(PluginRecord {
                    manifest: super::json_column(&row.get::<String>(0)?, "plugin manifest")?,
                    wit_version: row.get(1)?,
                    has_component: row.get::<i64>(2)? != 0,
                })
            })
            .transpose()
        })
        .await
    }

    pub async fn plugin_manifest(&self, hash: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let hash = hash.to_string();
        self.read(move |db| {
            let text: Option<String> = db
                .query_opt("SELECT manifest FROM plugins WHERE hash = ?1", args![hash])?
                .map(|row| row.get(0))
                .transpose()?;
            text.map(|t| super::json_column(&t, "plugin manifest")).transpose()
        })
        .await
    }

    /// Components that custom commands use and whose manifest was never recorded.
    pub async fn unrecorded_plugins(&self) -> Result<Vec<String>, StoreError> {
        self.read(move |db| {
            db.query(
                "SELECT DISTINCT c.plugin FROM commands c
                 WHERE c.plugin IS NOT NULL AND NOT EXISTS (SELECT 1 FROM plugins p WHERE p.hash = c.plugin)",
                args![],
            )?
            .iter()
            .map(|row| row.get(0))
            .collect()
        })
        .await
    }

    /// Moves key-value data stored under a plugin's own name (before stores were the
    /// command's) to the commands of that agent that run the plugin `hash`. Copies never
    /// overwrite newer data; the old scope goes once copied.
    pub async fn rescope_kv(&self, hash: &str, plugin_name: &str) -> Result<usize, StoreError> {
        let (hash, plugin_name) = (hash.to_string(), plugin_name.to_string());
        self.write(move |db| {
            let copied = db.execute(
                "INSERT INTO plugin_kv (agent_id, scope, key, value, size, updated_at)
                 SELECT kv.agent_id, 'command:' || c.name, kv.key, kv.value, kv.size, kv.updated_at
                 FROM plugin_kv kv JOIN commands c ON c.agent_id = kv.agent_id AND c.plugin = ?1
                 WHERE kv.scope = ?2
                 ON CONFLICT (agent_id, scope, key) DO NOTHING",
                args![&hash, &plugin_name],
            )?;
            db.execute(
                "DELETE FROM plugin_kv WHERE scope = ?2
                   AND agent_id IN (SELECT agent_id FROM commands WHERE plugin = ?1)",
                args![hash, plugin_name],
            )?;
            Ok(copied as usize)
        })
        .await
    }

    /// Records that this account uploaded (or applied) the component; once.
    pub async fn add_account_plugin(&self, account_id: &str, hash: &str) -> Result<(), StoreError> {
        let (account_id, hash) = (account_id.to_string(), hash.to_string());
        self.write(move |db| {
            db.execute(
                "INSERT INTO account_plugins (account_id, hash, created_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (account_id, hash) DO NOTHING",
                args![account_id, hash, crate::clock::now_ms()],
            )?;
            Ok(())
        })
        .await
    }

    /// How many components this account keeps, and their bytes together.
    pub async fn account_plugin_usage(&self, account_id: &str) -> Result<(u64, u64), StoreError> {
        let account_id = account_id.to_string();
        self.read(move |db| {
            let row = db.query_one(
                "SELECT COUNT(*), CAST(COALESCE(SUM(p.size), 0) AS BIGINT)
                 FROM account_plugins ap JOIN plugins p ON p.hash = ap.hash WHERE ap.account_id = ?1",
                args![account_id],
            )?;
            Ok((row.get::<i64>(0)? as u64, row.get::<i64>(1)? as u64))
        })
        .await
    }

    /// The usernames of this account's agents that have a command running the component.
    pub async fn agents_using_plugin(&self, account_id: &str, hash: &str) -> Result<Vec<String>, StoreError> {
        let (account_id, hash) = (account_id.to_string(), hash.to_string());
        self.read(move |db| {
            db.query(
                "SELECT DISTINCT g.username FROM commands c JOIN agents g ON g.id = c.agent_id
                 WHERE g.account_id = ?1 AND c.plugin = ?2 ORDER BY g.username",
                args![account_id, hash],
            )?
            .iter()
            .map(|row| row.get(0))
            .collect()
        })
        .await
    }

    /// Removes the component from the account's, unless one of the account's commands runs
    /// it (checked in the same transaction). False if the account did not have it.
    pub async fn remove_account_plugin(&self, account_id: &str, hash: &str) -> Result<bool, StoreError> {
        let (account_id, hash) = (account_id.to_string(), hash.to_string());
        self.write(move |db| {
            let used = db
                .query_opt(
                    "SELECT 1 FROM commands c JOIN agents g ON g.id = c.agent_id
                     WHERE g.account_id = ?1 AND c.plugin = ?2",
                    args![&account_id, &hash],
                )?
                .is_some();
            if used {
                return Err(StoreError::Conflict(format!(
                    "component {hash} is run by a command of this account; remove the command first"
                )));
            }
            Ok(db.execute(
                "DELETE FROM account_plugins WHERE account_id = ?1 AND hash = ?2",
                args![account_id, hash],
            )? > 0)
        })
        .await
    }

    /// Deletes the components no account keeps and no command runs, recorded before
    /// `before_ms` (an upload in progress is left alone); returns their hashes.
    pub async fn delete_unreferenced_plugins(&self, before_ms: i64) -> Result<Vec<String>, StoreError> {
        self.write(move |db| {
            let orphans: Vec<String> = db
                .query(
                    "SELECT p.hash FROM plugins p WHERE p.created_at < ?1
                       AND NOT EXISTS (SELECT 1 FROM account_plugins ap WHERE ap.hash = p.hash)
                       AND NOT EXISTS (SELECT 1 FROM commands c WHERE c.plugin = p.hash)",
                    args![before_ms],
                )?
                .iter()
                .map(|row| row.get(0))
                .collect::<Result<_, _>>()?;
            for hash in &orphans {
                db.execute(
                    "DELETE FROM plugins WHERE hash = ?1
                       AND NOT EXISTS (SELECT 1 FROM account_plugins ap WHERE ap.hash = ?1)
                       AND NOT EXISTS (SELECT 1 FROM commands c WHERE c.plugin = ?1)",
                    args![hash],
                )?;
            }
            Ok(orphans)
        })
        .await
    }

    /// Every recorded component's hash.
    pub async fn plugin_hashes(&self) -> Result<Vec<String>, StoreError> {
        self.read(move |db| {
            db.query("SELECT hash FROM plugins", args![])?
                .iter()
                .map(|row| row.get(0))
                .collect()
        })
        .await
    }

    pub async fn account_has_plugin(&self, account_id: &str, hash: &str) -> Result<bool, StoreError> {
        let (account_id, hash) = (account_id.to_string(), hash.to_string());
        self.read(move |db| {
            Ok(db
                .query_opt(
                    "SELECT 1 FROM account_plugins ap JOIN plugins p ON p.hash = ap.hash
                     WHERE ap.account_id = ?1 AND ap.hash = ?2",
                    args![account_id, hash],
                )?
                .is_some())
        })
        .await
    }

    /// The components this account uploaded, newest first, with what each declared and
    /// how many of the account's commands run it.
    pub async fn account_plugins(&self, account_id: &str) -> Result<Vec<AccountPlugin>, StoreError> {
        let account_id = account_id.to_string();
        self.read(move |db| {
            db.query(
                "SELECT p.hash, p.manifest, p.size, p.wit_version, ap.created_at,
                        (SELECT COUNT(*) FROM commands c JOIN agents g ON g.id = c.agent_id
                         WHERE c.plugin = p.hash AND g.account_id = ap.account_id)
                 FROM account_plugins ap JOIN plugins p ON p.hash = ap.hash
                 WHERE ap.account_id = ?1 ORDER BY ap.created_at DESC, p.hash",
                args![account_id],
            )?
            .iter()
            .map(|row| {
                Ok(AccountPlugin {
                    hash: row.get(0)?,
                    manifest: super::json_column(&row.get::<String>(1)?, "plugin manifest")?,
                    size: row.get::<i64>(2)? as u64,
                    wit_version: row.get(3)?,
                    uploaded_at: row.get(4)?,
                    used_by: row.get::<i64>(5)? as u32,
                })
            })
            .collect()
        })
        .await
    }
}

/// What is recorded of a component.
#[derive(Debug, Clone)]
pub struct PluginRecord {
    pub manifest: serde_json::Value,
    pub wit_version: String,
    /// Whether the database holds its bytes (it did not before migration 0009).
    pub has_component: bool,
}

/// A component as its uploader lists it.
#[derive(Debug, Clone)]
pub struct AccountPlugin {
    pub hash: String,
    pub manifest: serde_json::Value,
    pub size: u64,
    pub wit_version: String,
    pub uploaded_at: i64,
    pub used_by: u32,
}
