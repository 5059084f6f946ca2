use std::path::Path;

use super::{ServiceError, accounts};
use crate::domain::{Agent, Command, Integration};
use crate::manifest::{self, AgentManifest};
use crate::store::{ApplyOutcome, Store};

/// `agent apply`: validates the manifest and creates or updates the agent. A new agent
/// needs an owner; an existing one keeps its owner (naming another is refused).
pub async fn apply_file(
    store: &Store,
    path: &Path,
    account_name: Option<&str>,
) -> Result<(AgentManifest, ApplyOutcome), ServiceError> {
    let manifest = manifest::load(path).map_err(|e| ServiceError::Validation(e.to_string()))?;
    let outcome = apply(store, &manifest, account_name).await?;
    Ok((manifest, outcome))
}

pub async fn apply(
    store: &Store,
    manifest: &AgentManifest,
    account_name: Option<&str>,
) -> Result<ApplyOutcome, ServiceError> {
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
    Ok(store
        .apply_agent(&account_id, manifest.agent.clone(), manifest.commands.clone())
        .await?)
}

/// The agent if it exists and belongs to this account. Another account's agent answers
/// exactly like a missing one, so ids cannot be probed.
pub async fn owned(store: &Store, account_id: &str, id_or_username: &str) -> Result<Agent, ServiceError> {
    match store.agent(id_or_username).await? {
        Some(agent) if agent.account_id == account_id => Ok(agent),
        _ => Err(ServiceError::NotFound(format!("Agent '{id_or_username}' not found"))),
    }
}

/// The agent's commands; with an integration, only the enabled ones offered there.
pub async fn commands(
    store: &Store,
    agent: &Agent,
    integration: Option<Integration>,
) -> Result<Vec<Command>, ServiceError> {
    let mut commands = store.commands(&agent.id).await?;
    if let Some(integration) = integration {
        commands.retain(|c| c.def.enabled && c.def.integrations.contains(&integration));
    }
    Ok(commands)
}
