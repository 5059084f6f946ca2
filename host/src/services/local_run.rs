//! One run of a plugin on its author's machine (`agent-host plugin run`): the component
//! becomes the only command of a local agent in a local store, and runs through the path
//! the keyed execute endpoint takes. The same parameter checks, grants, sandbox limits and
//! outbound guard apply; nothing here is a second implementation of any of them.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::commands::{self, CommandResult};
use super::{ServiceError, Services, accounts, agents, params};
use crate::domain::Plan;
use crate::manifest::{self, PluginSource};
use crate::plugins::{Origin, PluginKind};

/// The local agent the run belongs to; its key-value store lives as long as the store does.
const LOCAL: &str = "local";

/// What to run, as the author gave it on the command line.
#[derive(Debug, Clone, Default)]
pub struct LocalRun {
    pub file: PathBuf,
    /// `name=value` pairs, read as the command's parameter types say.
    pub parameters: Vec<(String, String)>,
    /// The command's `config` table, as an agent manifest would give it.
    pub config: Map<String, Value>,
    /// Hosts the command may reach (an agent manifest's `allowed_hosts`).
    pub allowed_hosts: Vec<String>,
    pub allow_llm: bool,
    pub timeout_ms: Option<u64>,
}

/// Runs the component once and answers what the execute endpoint would.
pub async fn run(services: &Services, run: &LocalRun) -> Result<CommandResult, ServiceError> {
    let bytes = std::fs::read(&run.file)
        .map_err(|e| ServiceError::Validation(format!("cannot read {}: {e}", run.file.display())))?;
    let declared = services
        .plugins
        .inspect(bytes, PluginKind::Custom)
        .await
        .map_err(|e| ServiceError::Validation(format!("{}: {e}", run.file.display())))?
        .manifest;
    let name = declared.name.clone();
    // Run in the foreground even when the plugin calls itself long-running: a local run
    // waits for its answer, with a job's deadline.
    let timeout_ms = run
        .timeout_ms
        .or(declared.long_running.then_some(services.settings.job_timeout_ms));
    let manifest = local_manifest(&name, run, timeout_ms)?;
    let folder = run.file.parent().unwrap_or(Path::new("."));
    let manifest = manifest::parse(&manifest, "plugin run", PluginSource::Files(folder))
        .map_err(|e| ServiceError::Validation(e.to_string()))?;
    let account = match accounts::by_name(&services.store, LOCAL).await {
        Ok(account) => account,
        Err(ServiceError::NotFound(_)) => accounts::create(&services.store, LOCAL, Plan::Free, None, None).await?,
        Err(other) => return Err(other),
    };
    agents::apply_as(services, &manifest, &account.id).await?;
    let agent = agents::owned(&services.store, &account.id, LOCAL).await?;
    let command = commands::find(services, &agent, &name).await?;
    let mut parameters = Map::new();
    for (key, text) in &run.parameters {
        let value = match command.def.parameters.iter().find(|spec| &spec.name == key) {
            Some(spec) => params::from_text(spec, text).map_err(ServiceError::Validation)?,
            // Unknown: the run's own check names the parameters the command takes.
            None => Value::String(text.clone()),
        };
        parameters.insert(key.clone(), value);
    }
    commands::execute(services, &agent, &command, Some(parameters), None, Origin::Api, None).await
}

/// The agent manifest of the local agent: one custom command running `run.file`.
fn local_manifest(name: &str, run: &LocalRun, timeout_ms: Option<u64>) -> Result<String, ServiceError> {
    let file = run
        .file
        .file_name()
        .and_then(|f| f.to_str())
        .ok_or_else(|| ServiceError::Validation(format!("{} is not a file name", run.file.display())))?;
    let mut command = json!({
        "command": name,
        "handler_type": "custom",
        "plugin": file,
        "allowed_hosts": run.allowed_hosts,
        "allow_llm": run.allow_llm,
        "long_running": false,
        "config": run.config,
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
