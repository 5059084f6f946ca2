use std::path::Path;
use std::sync::Arc;

use super::{ServiceError, Services, accounts};
use crate::domain::{Agent, Command, CommandDef, HandlerType, Integration, ResponseFormat};
use crate::manifest::{self, AgentManifest};
use crate::plugins::PluginManifest;
use crate::store::{AgentSummary, AgentWithCommands, ApplyOutcome, Store};

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

/// A manifest sent over the network (the management API): TOML, or the same as JSON.
/// Plugins are named by the hash of a component the account uploaded.
pub fn parse_sent(body: &[u8], json: bool) -> Result<AgentManifest, ServiceError> {
    let text =
        std::str::from_utf8(body).map_err(|_| ServiceError::Validation("the manifest is not UTF-8 text".into()))?;
    let parsed = if json {
        manifest::parse_json(text, "manifest")
    } else {
        manifest::parse(text, "manifest", manifest::PluginSource::Uploaded)
    };
    parsed.map_err(|e| ServiceError::Validation(e.to_string()))
}

/// `agent apply` on the server: a new agent needs its owner named.
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
    apply_as(services, manifest, &account_id).await
}

/// Creates or updates the agent as this account's. A username another account holds is
/// refused.
pub async fn apply_as(
    services: &Services,
    manifest: &AgentManifest,
    account_id: &str,
) -> Result<ApplyOutcome, ServiceError> {
    let store = &services.store;
    let most = services.settings.quotas.agent_max_commands;
    if manifest.commands.len() as u64 > most {
        return Err(ServiceError::QuotaExceeded(format!(
            "the manifest has {} commands; an agent may have at most {most} (agent_max_commands)",
            manifest.commands.len()
        )));
    }
    // A scheduled command's parameters, checked as each run will check them, before anything
    // of the manifest is applied.
    for schedule in &manifest.schedules {
        if let crate::domain::schedule::Action::Command { command, parameters } = &schedule.action
            && let Some(def) = manifest.commands.iter().find(|c| &c.name == command)
        {
            super::params::resolve(&def.name, &def.parameters, Some(parameters.clone()), None).map_err(|why| {
                ServiceError::Validation(format!("schedule '{}': invalid parameters: {why}", schedule.name))
            })?;
        }
    }
    let mut commands = Vec::with_capacity(manifest.commands.len());
    for command in &manifest.commands {
        commands.push(install_plugin(services, account_id, command.clone()).await?);
    }
    let outcome = store
        .apply_agent(
            account_id,
            manifest.agent.clone(),
            commands,
            services.settings.quotas.account_max_agents,
        )
        .await?;
    for (kind, enabled) in [
        ("chatapp", manifest.chatapp_enabled),
        ("social", manifest.social_enabled),
    ] {
        if let Some(enabled) = enabled {
            // Nothing to switch before the account is connected; `connect` enables it.
            store.set_integration_enabled(&outcome.agent_id, kind, enabled).await?;
        }
    }
    // Its schedules as the manifest says, each new one's first time read on the schedules' clock.
    let now = crate::clock::controllable_now_ms();
    let schedules = manifest
        .schedules
        .iter()
        .map(|def| (def.clone(), def.timing.next_after(now)))
        .collect();
    let most_schedules = services.settings.schedules.schedule_max_per_account;
    store
        .sync_manifest_schedules(account_id, &outcome.agent_id, schedules, most_schedules)
        .await?;
    // A remote MCP server's credential goes with the server when the manifest drops it.
    let kept = manifest.agent.mcp_servers.iter().map(|s| s.credential_kind()).collect();
    store
        .delete_integrations_except(&outcome.agent_id, crate::domain::remote_mcp::CREDENTIAL_PREFIX, kept)
        .await?;
    // Its first chats need not wait for the knowledge to be embedded.
    super::knowledge::prepare_applied(services, &outcome.agent_id, account_id, &manifest.agent.knowledge).await;
    Ok(outcome)
}

/// For a custom command: finds its component (a file, checked and stored by content hash,
/// compiled and cached; or one the account uploaded, by hash), records it as the account's,
/// and fills in what the agent manifest leaves to the plugin's own manifest.
async fn install_plugin(
    services: &Services,
    account_id: &str,
    mut def: CommandDef,
) -> Result<CommandDef, ServiceError> {
    if def.handler_type != HandlerType::Custom {
        return Ok(def);
    }
    let Some(reference) = def.plugin.clone() else {
        return Ok(def);
    };
    let (hash, plugin, wit_version): (String, PluginManifest, String) = match manifest::uploaded_hash(&reference) {
        Some(hash) => {
            let not_uploaded = || {
                ServiceError::Validation(format!(
                    "command '{}': this account has uploaded no component {reference}",
                    def.name
                ))
            };
            if !services.store.account_has_plugin(account_id, hash).await? {
                return Err(not_uploaded());
            }
            let declared = services
                .plugins
                .declared(&services.plugins.custom(hash))
                .await
                .map_err(|_| not_uploaded())?;
            let wit_version = services
                .store
                .plugin_record(hash)
                .await?
                .map(|record| record.wit_version)
                .unwrap_or_default();
            (hash.to_string(), (*declared).clone(), wit_version)
        }
        None => {
            let bytes = std::fs::read(&reference).map_err(|e| {
                ServiceError::Validation(format!("command '{}': cannot read {reference}: {e}", def.name))
            })?;
            let inspection = super::plugins::install(services, account_id, bytes)
                .await
                .map_err(|e| match e {
                    super::plugins::InstallError::Refused(m) => {
                        ServiceError::Validation(format!("command '{}': {reference}: {m}", def.name))
                    }
                    super::plugins::InstallError::Other(e) => e,
                })?;
            (inspection.hash, inspection.manifest, inspection.wit_version)
        }
    };
    if def.by_use.is_some() {
        sells_by_use(&def, &plugin, &wit_version)?;
    }
    def.plugin = Some(hash);
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

/// A command sold by use is charged the units its plugin reports, before it answers: its
/// component must be able to report them (`meter`, WIT 0.4.0 and later), and answer at once.
fn sells_by_use(def: &CommandDef, plugin: &PluginManifest, wit_version: &str) -> Result<(), ServiceError> {
    let name = &def.name;
    let before_meter = ["0.1.0", "0.2.0", "0.3.0"];
    let reports_units = !wit_version.is_empty() && !before_meter.contains(&wit_version);
    if !reports_units {
        return Err(ServiceError::Validation(format!(
            "command '{name}': by_use charges the units its plugin reports through agent:plugin/meter, which came with \
             WIT 0.4.0; this component targets agent:plugin@{wit_version}: build it against wit/v0.4.0 (agent-plugin-sdk \
             does) and report units with meter::add"
        )));
    }
    if plugin.long_running {
        return Err(ServiceError::Validation(format!(
            "command '{name}': by_use cannot sell a long-running plugin: its units are charged before it answers, \
             within the payment's five minutes"
        )));
    }
    Ok(())
}

/// Every agent (the operator's view), or one account's.
pub async fn list(store: &Store, account_id: Option<&str>) -> Result<Vec<AgentSummary>, ServiceError> {
    Ok(store.list_agents(account_id).await?)
}

/// Deletes an agent of this account with its commands, integrations and key-value data.
/// Its jobs, transfers and payments stay on record. An agent that holds a wallet is kept:
/// its key would go with it, and with the key any funds at the address.
pub async fn delete(store: &Store, account_id: &str, id_or_username: &str) -> Result<Agent, ServiceError> {
    let agent = owned(store, account_id, id_or_username).await?;
    if store.delete_agent_without_wallets(&agent.id).await? {
        return Ok(agent);
    }
    let wallets = store.wallets_of(&agent.id).await?;
    if !wallets.is_empty() {
        let networks: Vec<&str> = wallets.iter().map(|w| w.network.as_str()).collect();
        return Err(ServiceError::Conflict(format!(
            "agent '{}' holds a wallet on {}; its key would be lost with it, so it is not deleted",
            agent.def.username,
            networks.join(" and ")
        )));
    }
    // Deleted meanwhile by another request: gone either way.
    Ok(agent)
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

/// A keyless use of an agent its owner opened (an open MCP tool, an open A2A skill) is the
/// owner's gift, and counts against the owner's plan as the owner's own requests do (as a
/// Telegram chat's messages do): strangers can use no more of the agent than its owner
/// could. `surface` names the limit in the metrics when it refuses.
pub async fn charge_owner_for_keyless(
    services: &Services,
    agent: &Agent,
    surface: &'static str,
) -> Result<(), ServiceError> {
    charge_owner(services, agent, surface, |retry_after_secs| {
        format!(
            "This agent's owner has used the requests their plan allows for now (calls without a key count against it); retry in {retry_after_secs} s"
        )
    })
    .await
}

/// Counts one request of the agent's owner against the owner's plan, made for them (a call
/// they opened to strangers, a run they scheduled); refused with `refusal`'s words (given the
/// seconds until there is room) when the plan has no room now. `surface` names the limit in
/// the metrics.
pub async fn charge_owner(
    services: &Services,
    agent: &Agent,
    surface: &'static str,
    refusal: impl FnOnce(u64) -> String,
) -> Result<(), ServiceError> {
    let owner = services
        .store
        .account_by_id(&agent.account_id)
        .await?
        .ok_or_else(|| ServiceError::NotFound(format!("Agent '{}' not found", agent.def.username)))?;
    let decision = services
        .account_limiter
        .check(&owner.id, owner.limits, crate::clock::now_ms())
        .await?;
    if decision.allowed {
        return Ok(());
    }
    crate::telemetry::metrics::note_rate_limited(surface);
    Err(ServiceError::OverBudget {
        message: refusal(decision.retry_after_secs),
        decision,
    })
}

/// The enabled commands offered on this integration, if one is named, else all.
pub fn offered(commands: &[Command], integration: Option<Integration>) -> impl Iterator<Item = &Command> {
    commands
        .iter()
        .filter(move |c| integration.is_none_or(|i| c.def.enabled && c.def.integrations.contains(&i)))
}
