//! One run of a plugin on its author's machine (`agent-host plugin run`): the component
//! becomes the only command of a local agent in a local store, and runs through the path
//! the keyed execute endpoint takes. The same parameter checks, grants, sandbox limits and
//! outbound guard apply; nothing here is a second implementation of any of them.

use crate::services::usage::Channel;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::commands::{self, Answer, CommandCall, CommandOutcome};
use super::{ServiceError, Services, accounts, agents, params, runs};
use crate::domain::{Agent, Command, Plan};
use crate::manifest::{self, PluginSource};
use crate::plugins::PluginKind;

/// The local agent the run belongs to; its key-value store lives as long as the store does.
const LOCAL: &str = "local";

/// The component and how it is granted, as the author gave them.
#[derive(Debug, Clone, Default)]
pub struct LocalSetup {
    pub file: PathBuf,
    /// The command's `config` table, as an agent manifest would give it.
    pub config: Map<String, Value>,
    /// Hosts the command may reach (an agent manifest's `allowed_hosts`).
    pub allowed_hosts: Vec<String>,
    pub allow_llm: bool,
    pub timeout_ms: Option<u64>,
}

/// The component installed as the local agent's only command, ready to run.
pub struct LocalPlugin {
    agent: Agent,
    command: Command,
}

/// Checks the component and makes it the local agent's command, as `agent apply` would.
pub async fn install(services: &Services, setup: &LocalSetup) -> Result<LocalPlugin, ServiceError> {
    let bytes = std::fs::read(&setup.file)
        .map_err(|e| ServiceError::Validation(format!("cannot read {}: {e}", setup.file.display())))?;
    let declared = services
        .plugins
        .inspect(bytes, PluginKind::Custom)
        .await
        .map_err(|e| ServiceError::Validation(format!("{}: {e}", setup.file.display())))?
        .manifest;
    // Run in the foreground even when the plugin calls itself long-running: a local run
    // waits for its answer, with a job's deadline.
    let timeout_ms = setup
        .timeout_ms
        .or(declared.long_running.then_some(services.settings.jobs.job_timeout_ms));
    let manifest = local_manifest(&command_name(&declared.name), setup, timeout_ms)?;
    let folder = setup.file.parent().unwrap_or(Path::new("."));
    let manifest = manifest::parse(&manifest, "plugin run", PluginSource::Files(folder))
        .map_err(|e| ServiceError::Validation(e.to_string()))?;
    let account = match accounts::by_name(&services.store, LOCAL).await {
        Ok(account) => account,
        Err(ServiceError::NotFound(_)) => accounts::create(&services.store, LOCAL, Plan::Free, None, None).await?,
        Err(other) => return Err(other),
    };
    agents::apply_as(services, &manifest, &account.id).await?;
    let agent = agents::owned(&services.store, &account.id, LOCAL).await?;
    let command = runs::find(services, &agent, &command_name(&declared.name)).await?;
    Ok(LocalPlugin { agent, command })
}

/// Runs it once and answers what the execute endpoint would. A text value of a parameter
/// the plugin declares as another type is read as that type (`--param n=5` is a number).
pub async fn run(
    services: &Services,
    plugin: &LocalPlugin,
    parameters: Map<String, Value>,
) -> Result<Answer, ServiceError> {
    run_metered(services, plugin, parameters)
        .await
        .map(|(answer, _)| answer)
}

/// [`run`], with the units of work the run reported (`meter.add`): what a payer would be
/// charged for, were the command sold by use.
pub async fn run_metered(
    services: &Services,
    plugin: &LocalPlugin,
    mut parameters: Map<String, Value>,
) -> Result<(Answer, u64), ServiceError> {
    for spec in &plugin.command.def.parameters {
        if let Some(Value::String(text)) = parameters.get(&spec.name) {
            let value = params::from_text(spec, text).map_err(ServiceError::Validation)?;
            parameters.insert(spec.name.clone(), value);
        }
    }
    let meter = crate::plugins::Meter::new();
    let call = CommandCall {
        agent: &plugin.agent,
        command: &plugin.command,
        parameters: Some(parameters),
        raw_text: None,
        channel: Channel::Cli,
        paid_by: None,
        slot: None,
        metered: Some(commands::Metered {
            meter: meter.clone(),
            within: None,
        }),
    };
    match commands::execute(services, call).await? {
        CommandOutcome::Answered(answer) => Ok((answer, meter.units())),
        // The local manifest never declares a long-running command.
        CommandOutcome::Queued { job_id } => Err(ServiceError::Execution(format!(
            "the command was queued as job {job_id}; a local run answers at once"
        ))),
    }
}

/// The plugin's name as a command name (`hello-world` → `hello_world`): what an agent
/// manifest would most likely call it.
fn command_name(plugin: &str) -> String {
    let name: String = plugin
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(32)
        .collect();
    if name.is_empty() { "plugin".into() } else { name }
}

/// The agent manifest of the local agent: one custom command running `setup.file`.
fn local_manifest(name: &str, setup: &LocalSetup, timeout_ms: Option<u64>) -> Result<String, ServiceError> {
    let file = setup
        .file
        .file_name()
        .and_then(|f| f.to_str())
        .ok_or_else(|| ServiceError::Validation(format!("{} is not a file name", setup.file.display())))?;
    let mut command = json!({
        "command": name,
        "handler_type": "custom",
        "plugin": file,
        "allowed_hosts": setup.allowed_hosts,
        "allow_llm": setup.allow_llm,
        "long_running": false,
        "config": setup.config,
    });
    if let Some(ms) = timeout_ms {
        command["timeout_ms"] = json!(ms);
    }
    let value: toml::Value = serde_json::from_value(json!({
        "username": LOCAL,
        "name": "Local run",
        "commands": [command],
    }))
    .map_err(|e| ServiceError::Validation(format!("--config: {e}")))?;
    toml::to_string(&value).map_err(|e| ServiceError::Validation(format!("--config: {e}")))
}
