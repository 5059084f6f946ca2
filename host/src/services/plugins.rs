//! An account's components: uploaded over the management API (or applied from a file by
//! the CLI), checked like `agent apply` checks them, stored once by content hash, and
//! attached to commands by that hash.

use super::ServiceError;
use crate::plugins::Inspection;
use crate::store::{AccountPlugin, PluginRun, Store};

use super::Services;

/// Checks the component (a component of our world, a served WIT version, a manifest that
/// agrees with its imports, within the size limit) and keeps it as this account's.
pub async fn upload(services: &Services, account_id: &str, bytes: Vec<u8>) -> Result<Inspection, ServiceError> {
    if bytes.is_empty() {
        return Err(ServiceError::Validation(
            "the body is empty: send the component's bytes (application/wasm)".into(),
        ));
    }
    let inspection = services
        .plugins
        .install(bytes)
        .await
        .map_err(|e| ServiceError::Validation(e.to_string()))?;
    services.store.add_account_plugin(account_id, &inspection.hash).await?;
    Ok(inspection)
}

pub async fn list(store: &Store, account_id: &str) -> Result<Vec<AccountPlugin>, ServiceError> {
    Ok(store.account_plugins(account_id).await?)
}

/// The agent's kept plugin runs (of one command, if named), newest first: each run that
/// logged or did not succeed, with its lines. `after` (epoch ms) keeps only later ones.
pub async fn runs(
    store: &Store,
    agent_id: &str,
    command: Option<&str>,
    after: Option<i64>,
    limit: u32,
) -> Result<Vec<PluginRun>, ServiceError> {
    Ok(store.plugin_runs(agent_id, command, after, limit).await?)
}
