//! An account's components: uploaded over the management API (or applied from a file by
//! the CLI), checked like `agent apply` checks them, within the account's quota, stored
//! once by content hash, attached to commands by that hash, and removed by their owner
//! once no command runs them. Components nobody keeps are collected.

use std::collections::HashSet;
use std::time::Duration;

use std::sync::Arc;

use super::ServiceError;
use crate::plugins::{InspectError, Inspection, PluginManifest, Tenant, manifest_from_json, manifest_json};
use crate::store::{AccountPlugin, PluginRun, Store};

use super::Services;

/// How long an inspection's `manifest()` waits for the account's turn at a plugin slot.
const INSPECTION_WAIT: Duration = Duration::from_secs(30);

/// Checks the component (a component of our world, a served WIT version, a manifest that
/// agrees with its imports, within the size limit and the account's quota) and keeps it
/// as this account's. Its `manifest()` runs on the account's own share of plugin slots.
pub async fn upload(services: &Services, account_id: &str, bytes: Vec<u8>) -> Result<Inspection, ServiceError> {
    if bytes.is_empty() {
        return Err(ServiceError::Validation(
            "the body is empty: send the component's bytes (application/wasm)".into(),
        ));
    }
    // Counted whether the component is kept or refused: either way it was compiled.
    let plugins = &services.settings.plugins;
    let limits = crate::domain::RateLimits {
        per_minute: plugins.account_plugin_uploads_per_minute,
        per_day: plugins.account_plugin_uploads_per_day,
    };
    let decision = services
        .budgets
        .check(&format!("uploads:{account_id}"), limits, crate::clock::now_ms())
        .await?;
    if !decision.allowed {
        crate::telemetry::metrics::note_rate_limited("uploads");
        return Err(ServiceError::RateLimited(decision));
    }
    let inspection = install(services, account_id, bytes).await.map_err(|e| match e {
        InstallError::Refused(m) => ServiceError::Validation(m),
        InstallError::Other(e) => e,
    })?;
    Ok(inspection)
}

/// Why a component was not installed: refused for what it is (the caller words it), or
/// anything else (quota, a busy compiler, the store).
pub enum InstallError {
    Refused(String),
    Other(ServiceError),
}

impl From<ServiceError> for InstallError {
    fn from(err: ServiceError) -> Self {
        InstallError::Other(err)
    }
}

/// Installs a component for the account, after its quota allows it, and records it as the
/// account's. Shared by uploads and `agent apply` of a file.
pub async fn install(services: &Services, account_id: &str, bytes: Vec<u8>) -> Result<Inspection, InstallError> {
    check_quota(services, account_id, &bytes).await?;
    let tenant = Tenant {
        account: account_id.to_string(),
        wait: Some(INSPECTION_WAIT),
    };
    let inspection = keep_component(services, bytes, &tenant).await.map_err(|e| match e {
        InspectError::Refused(m) => InstallError::Refused(m),
        InspectError::Busy { retry_after_secs } => InstallError::Other(ServiceError::Unavailable {
            message: e.to_string(),
            retry_after_secs,
        }),
    })?;
    services
        .store
        .add_account_plugin(account_id, &inspection.hash)
        .await
        .map_err(ServiceError::from)?;
    Ok(inspection)
}

/// Checks a component and keeps it: its bytes in the database (the one copy), its compiled
/// artifact in the cache, the manifest it declared. A refused component leaves nothing
/// behind. A component kept already is not compiled or asked again: its first record
/// stands.
async fn keep_component(services: &Services, bytes: Vec<u8>, tenant: &Tenant) -> Result<Inspection, InspectError> {
    let hash = crate::plugins::content_hash(&bytes);
    if let Some(kept) = kept_component(services, &hash, &bytes).await? {
        return Ok(kept);
    }
    let bytes = Arc::new(bytes);
    let (inspection, compiled) = services.plugins.check_upload(bytes.clone(), tenant).await?;
    services
        .store
        .put_plugin(
            &inspection.hash,
            &manifest_json(&inspection.manifest),
            &inspection.wit_version,
            &bytes,
        )
        .await
        .map_err(|e| InspectError::Refused(format!("cannot record the component: {e}")))?;
    services.plugins.keep(compiled, &inspection.manifest).await?;
    // Another upload of the same bytes may have been recorded first: its record stands.
    Ok(kept_component(services, &hash, &bytes).await?.unwrap_or(inspection))
}

/// The inspection of a component kept already, from its record.
async fn kept_component(services: &Services, hash: &str, bytes: &[u8]) -> Result<Option<Inspection>, InspectError> {
    let record = services
        .store
        .plugin_record(hash)
        .await
        .map_err(|e| InspectError::Refused(format!("cannot read the component's record: {e}")))?;
    let Some(record) = record.filter(|r| r.has_component) else {
        return Ok(None);
    };
    let Some(manifest) = manifest_from_json(&record.manifest) else {
        return Ok(None);
    };
    services
        .plugins
        .kept(hash, bytes, record.wit_version, manifest)
        .map(Some)
}

/// Refuses a component the account's quota has no room for: one more component, and its
/// bytes beside the others'. One the account keeps already costs nothing more.
async fn check_quota(services: &Services, account_id: &str, bytes: &[u8]) -> Result<(), ServiceError> {
    let hash = crate::plugins::content_hash(bytes);
    if services.store.account_has_plugin(account_id, &hash).await? {
        return Ok(());
    }
    let (count, total) = services.store.account_plugin_usage(account_id).await?;
    let settings = &services.settings;
    if count + 1 > settings.quotas.account_max_plugins {
        return Err(ServiceError::QuotaExceeded(format!(
            "this account keeps {count} components, its quota (account_max_plugins); delete one it no longer uses"
        )));
    }
    if total + bytes.len() as u64 > settings.quotas.account_max_plugin_bytes {
        return Err(ServiceError::QuotaExceeded(format!(
            "this account's components take {total} bytes; with this one of {} they would pass its quota of {} (account_max_plugin_bytes)",
            bytes.len(),
            settings.quotas.account_max_plugin_bytes
        )));
    }
    Ok(())
}

pub async fn list(store: &Store, account_id: &str) -> Result<Vec<AccountPlugin>, ServiceError> {
    Ok(store.account_plugins(account_id).await?)
}

/// Removes a component from the account's. Refused while one of its agents runs it;
/// once no account keeps it, the collector deletes it.
pub async fn remove(store: &Store, account_id: &str, hash: &str) -> Result<(), ServiceError> {
    let users = store.agents_using_plugin(account_id, hash).await?;
    if !users.is_empty() {
        return Err(ServiceError::Conflict(format!(
            "component {hash} is run by agent {}: remove or change those commands first",
            users.join(", ")
        )));
    }
    if !store.remove_account_plugin(account_id, hash).await? {
        return Err(ServiceError::NotFound(format!("This account has no component {hash}")));
    }
    Ok(())
}

/// Deletes components no account keeps and no command runs (their bytes, records and
/// compiled artifacts), and compiled artifacts of components this store does not know.
/// Returns how many components and files went.
pub async fn collect_garbage(services: &Services) -> Result<(usize, usize), ServiceError> {
    let grace = collect_grace(services);
    let before = crate::clock::now_ms() - grace.as_millis() as i64;
    let deleted = services.store.delete_unreferenced_plugins(before).await?;
    for hash in &deleted {
        services.plugins.forget(hash);
    }
    let kept: HashSet<String> = services.store.plugin_hashes().await?.into_iter().collect();
    let plugins = services.plugins.clone();
    let files = tokio::task::spawn_blocking(move || plugins.sweep_cache(&kept, grace))
        .await
        .map_err(|e| ServiceError::Execution(format!("the cache sweep failed: {e}")))?;
    if !deleted.is_empty() || files > 0 {
        tracing::info!(components = deleted.len(), files, "collected unused components");
    }
    Ok((deleted.len(), files))
}

/// A component (or cache file) unused for this long is collected: one recorded more
/// recently may belong to an upload or apply in progress, about to reference it.
fn collect_grace(services: &Services) -> Duration {
    Duration::from_secs(services.settings.plugins.plugin_collect_after_secs)
}

/// Collects unused components from start until `stop`: every tenth of the grace period,
/// at most every ten minutes.
pub async fn collect_periodically(services: Services, mut stop: tokio::sync::watch::Receiver<bool>) {
    let every = (collect_grace(&services) / 10).min(Duration::from_secs(600));
    loop {
        if let Err(e) = collect_garbage(&services).await {
            tracing::warn!(error = %e, "could not collect unused components");
        }
        let before = crate::clock::now_ms() - collect_grace(&services).as_millis() as i64;
        match super::knowledge::collect_vectors(&services, before).await {
            Ok(0) => {}
            Ok(vectors) => tracing::info!(vectors, "collected the vectors of knowledge no agent has"),
            Err(e) => tracing::warn!(error = %e, "could not collect unused knowledge vectors"),
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// After an upgrade, once at start. Components applied before their manifests were
/// recorded get them recorded (asked once, under the limits), and key-value data kept under
/// a plugin's own name moves to the stores of the commands that run it; components recorded
/// before the database kept their bytes get them. Both read the copies the data dir kept
/// then (`plugins/HASH.wasm`), which go once the database holds their bytes: one copy of
/// each component is kept, the database's. Each step does nothing the second time.
pub async fn upgrade(services: &Services) -> Result<(), ServiceError> {
    let copies = services.settings.data_dir.join("plugins");
    let copy = |hash: &str| std::fs::read(copies.join(format!("{hash}.wasm")));
    for hash in services.store.unrecorded_plugins().await? {
        let recorded = match copy(&hash) {
            Ok(bytes) => record_manifest(services, &hash, bytes).await,
            Err(e) => Err(format!("no copy in the data dir ({e})")),
        };
        match recorded {
            Ok(manifest) => {
                let moved = services.store.rescope_kv(&hash, &manifest.name).await?;
                tracing::info!(plugin = %hash, moved, "recorded the manifest of a component applied before");
            }
            Err(err) => tracing::warn!(plugin = %hash, "could not record its manifest; apply its agent again: {err}"),
        }
    }
    for hash in services.store.plugins_without_component().await? {
        match copy(&hash) {
            Ok(bytes) if crate::plugins::content_hash(&bytes) == hash => {
                services.store.put_plugin_component(&hash, bytes).await?;
                tracing::info!(plugin = %hash, "stored the component in the database");
            }
            _ => {
                tracing::warn!(plugin = %hash, "could not store the component in the database: no good copy in the data dir")
            }
        }
    }
    let Ok(entries) = std::fs::read_dir(&copies) else {
        return Ok(());
    };
    let held: HashSet<String> = services.store.plugin_hashes().await?.into_iter().collect();
    let without: HashSet<String> = services.store.plugins_without_component().await?.into_iter().collect();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let hash = name.trim_end_matches(".wasm").trim_end_matches(".tmp");
        if held.contains(hash) && !without.contains(hash) || name.ends_with(".tmp") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    let _ = std::fs::remove_dir(&copies);
    Ok(())
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

/// Asks a component applied by an older version of this host what it declares, and
/// records it beside its bytes.
async fn record_manifest(services: &Services, hash: &str, bytes: Vec<u8>) -> Result<PluginManifest, String> {
    let (manifest, wit_version) = services
        .plugins
        .ask_manifest(hash, bytes.clone())
        .await
        .map_err(|e| e.to_string())?;
    services
        .store
        .put_plugin(hash, &manifest_json(&manifest), wit_version, &bytes)
        .await
        .map_err(|e| e.to_string())?;
    Ok(manifest)
}
