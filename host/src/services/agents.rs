use std::path::Path;
use std::sync::Arc;

use super::{ServiceError, Services, accounts};
use crate::domain::{Agent, Command, CommandDef, HandlerType, Integration, ResponseFormat};
use crate::manifest::{self, AgentManifest};
use crate::store::{AgentWithCommands, ApplyOutcome, Store};

/// `agent apply`: validates the manifest and creates or updates the agent. A new agent
/// needs an owner; an existing one keeps its owner (naming another is refused).
pub async fn apply_file(
    services: &Services,
    path: &Path,
    account_name: Option<&str>,
) -> Result<(AgentManifest, ApplyOutcome), ServiceError> {
    let manifest = manifest::load(path).map_err(|e| ServiceError::Validation(e.to_string()))?;
    let outcome = apply(services, &manifest, account_name).await?;
    Ok((manifest, outcome))
}

pub async fn apply(
    services: &Services,
    manifest: &AgentManifest,
    account_name: Option<&str>,
) -> Result<ApplyOutcome, ServiceError> {
    let store = &services.store;
    let existing = store.agent(&manifest.agent.username).await?;
    let account_id = match (account_name, existing) {
        (Some(name), _) => accounts::by_name(store, name).await?.id,
        (None, Some(agent)) => agent.account_id,
        (None, None) => {
            return Err(ServiceError::Validation(format!(
                "agent '{}' is new: name its owner with --account",
                manifest.agent.username
            )));
        }
    };
    let mut commands = Vec::with_capacity(manifest.commands.len());
    for command in &manifest.commands {
        commands.push(install_plugin(services, command.clone()).await?);
    }
    let outcome = store.apply_agent(&account_id, manifest.agent.clone(), commands).await?;
    for (kind, enabled) in [
        ("chatapp", manifest.chatapp_enabled),
        ("social", manifest.social_enabled),
    ] {
        if let Some(enabled) = enabled {
            // Nothing to switch before the account is connected; `connect` enables it.
            store.set_integration_enabled(&outcome.agent_id, kind, enabled).await?;
        }
    }
    Ok(outcome)
}

/// For a custom command: checks its component, stores it by content hash (compiled and
/// cached), and fills in what the agent manifest leaves to the plugin's own manifest.
async fn install_plugin(services: &Services, mut def: CommandDef) -> Result<CommandDef, ServiceError> {
    if def.handler_type != HandlerType::Custom {
        return Ok(def);
    }
    let Some(path) = def.plugin.clone() else { return Ok(def) };
    let bytes = std::fs::read(&path)
        .map_err(|e| ServiceError::Validation(format!("command '{}': cannot read {path}: {e}", def.name)))?;
    let inspection = services
        .plugins
        .install(bytes)
        .await
        .map_err(|e| ServiceError::Validation(format!("command '{}': {path}: {e}", def.name)))?;
    let plugin = inspection.manifest;
    def.plugin = Some(inspection.hash);
    if def.parameters.is_empty() {
        def.parameters = plugin.parameters.into_iter().map(Into::into).collect();
    }
    if def.description.is_empty() {
        def.description = plugin.description;
    }
    if def.response_format == ResponseFormat::Text {
        def.response_format = plugin.response_format.into();
    }
    def.long_running |= plugin.long_running;
    Ok(def)
}

/// After an upgrade, once at start: components applied before their manifests were
/// recorded get them recorded (asked once, under the limits), and key-value data kept
/// under a plugin's own name moves to the stores of the commands that run it, and
/// components recorded before the database kept their bytes get them. Each step does
/// nothing the second time.
pub async fn upgrade_plugins(services: &Services) -> Result<(), ServiceError> {
    for hash in services.store.unrecorded_plugins().await? {
        match services.plugins.record_manifest(&hash).await {
            Ok(manifest) => {
                let moved = services.store.rescope_kv(&hash, &manifest.name).await?;
                tracing::info!(plugin = %hash, moved, "recorded the manifest of a component applied before");
            }
            Err(err) => tracing::warn!(plugin = %hash, "could not record its manifest; apply its agent again: {err}"),
        }
    }
    // Components recorded before the database kept their bytes: from the data dir's copy.
    for hash in services.store.plugins_without_component().await? {
        match services.plugins.store_component(&hash).await {
            Ok(()) => tracing::info!(plugin = %hash, "stored the component in the database"),
            Err(err) => tracing::warn!(plugin = %hash, "could not store the component in the database: {err}"),
        }
    }
    Ok(())
}

/// The agent if it exists and belongs to this account. Another account's agent answers
/// exactly like a missing one, so ids cannot be probed.
pub async fn owned(store: &Store, account_id: &str, id_or_username: &str) -> Result<Agent, ServiceError> {
    match store.agent(id_or_username).await? {
        Some(agent) if agent.account_id == account_id => Ok(agent),
        _ => Err(ServiceError::NotFound(format!("Agent '{id_or_username}' not found"))),
    }
}

/// The agent (as `owned` decides) with its commands, in one store read (or none: the
/// read cache).
pub async fn owned_with_commands(
    store: &Store,
    account_id: &str,
    id_or_username: &str,
) -> Result<Arc<AgentWithCommands>, ServiceError> {
    match store.agent_with_commands(id_or_username).await? {
        Some(found) if found.agent.account_id == account_id => Ok(found),
        _ => Err(ServiceError::NotFound(format!("Agent '{id_or_username}' not found"))),
    }
}

/// The enabled commands offered on this integration, if one is named, else all.
pub fn offered(commands: &[Command], integration: Option<Integration>) -> impl Iterator<Item = &Command> {
    commands
        .iter()
        .filter(move |c| integration.is_none_or(|i| c.def.enabled && c.def.integrations.contains(&i)))
}
