//! Finding a command and preparing one run of it: its component, resolved invocation,
//! grants and limits. Both a call answered now (`commands`) and a durable job (`jobs`)
//! start from here.

use std::time::Duration;

use serde_json::{Map, Value};

use super::usage::{Channel, Failing, Owner};
use super::{ServiceError, Services, wallets};
use crate::domain::{Agent, Command, HandlerType, Network};
use crate::plugins::{AgentProfile, CommandInfo};
use crate::plugins::{
    AgentSnapshot, ComponentRef, ExecError, Grants, Invocation, Output, ProgressSink, Ran, Run, RunLog, SlotPermit,
    Tenant,
};
use crate::store::{PluginRun, Store};
use crate::telemetry::traces::part_span;
use tracing::Instrument;

/// Runs kept per agent and command for their owner (`agent-host logs`); older ones go.
pub const RUNS_KEPT_PER_COMMAND: u32 = 100;

/// A call whose parameters are resolved against the command's declaration: what a run is
/// prepared from.
pub struct Resolved<'a> {
    pub agent: &'a Agent,
    pub command: &'a Command,
    pub parameters: Map<String, Value>,
    pub raw_text: Option<String>,
    pub channel: Channel,
}

pub async fn find(services: &Services, agent: &Agent, name: &str) -> Result<Command, ServiceError> {
    let commands = services.store.commands(&agent.id).await?;
    pick(&commands, agent, name).cloned()
}

/// The command named `name` (with or without `/`) among the agent's commands.
pub fn pick<'a>(commands: &'a [Command], agent: &Agent, name: &str) -> Result<&'a Command, ServiceError> {
    let name = name.trim_start_matches('/');
    commands
        .iter()
        .find(|c| c.def.name == name)
        .ok_or_else(|| ServiceError::NotFound(format!("Command '{name}' not found for agent '{}'", agent.def.username)))
}

/// Runs `run`, counts it in its agent's usage, and keeps its log for the owner when it
/// logged or did not succeed.
pub async fn execute(services: &Services, run: Run, channel: Channel) -> Result<Output, ExecError> {
    let span = part_span!(
        "plugin run",
        "agent.id" = %run.agent_id,
        command = %run.invocation.command,
        outcome = tracing::field::Empty,
    );
    let (account_id, agent_id, command) = (
        run.tenant.account.clone(),
        run.agent_id.clone(),
        run.invocation.command.clone(),
    );
    let started = std::time::Instant::now();
    let Ran { result, log } = services.plugins.execute(run).instrument(span.clone()).await;
    let outcome = crate::plugins::outcome_label(&result);
    span.record("outcome", outcome);
    let owner = Owner {
        account_id: &account_id,
        agent_id: &agent_id,
    };
    let ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    // A run refused for want of a slot never started: the host was busy, not the command.
    let started_at_all = !matches!(result, Err(ExecError::Busy(_)));
    if started_at_all && let Some(failing) = services.usage.run(owner, &command, channel, outcome, ms) {
        tell_failing(services, &account_id, &agent_id, &command, failing);
    }
    if let Some(log) = log {
        keep_log(&services.store, log).await;
    }
    result
}

/// Writes `command.failing` for the command's hour (once, whichever host sees it first).
fn tell_failing(services: &Services, account_id: &str, agent_id: &str, command: &str, failing: Failing) {
    let store = services.store.clone();
    let (account_id, agent_id, command) = (account_id.to_string(), agent_id.to_string(), command.to_string());
    services.lifecycle.spawn(async move {
        let dedup = format!("command.failing:{agent_id}:{command}:{}", failing.hour);
        let data = serde_json::json!({
            "agent_id": agent_id, "command": command, "hour": crate::clock::iso(failing.hour),
            "runs": failing.runs, "failed": failing.failed,
        });
        if let Err(err) = store.emit_event(&account_id, "command.failing", dedup, data).await {
            tracing::warn!(error = %err, "could not write command.failing");
        }
    });
}

/// A log the store cannot keep does not change the run's answer.
async fn keep_log(store: &Store, log: RunLog) {
    let record = PluginRun {
        id: uuid::Uuid::new_v4().to_string(),
        agent_id: log.agent_id,
        command: log.command,
        origin: crate::plugins::bindings::origin_name(log.origin).into(),
        started_at: log.started_at,
        duration_ms: log.duration_ms,
        outcome: log.outcome.into(),
        error: log.error,
        lines: log.lines,
    };
    if let Err(e) = store.record_plugin_run(record, RUNS_KEPT_PER_COMMAND).await {
        tracing::warn!(error = %e, "could not keep a plugin run's record");
    }
}

pub fn exec_error(command: &str, err: ExecError) -> ServiceError {
    match err {
        ExecError::InvalidInput(m) => ServiceError::Validation(format!("/{command}: {m}")),
        ExecError::Busy(m) => ServiceError::Busy(format!("/{command} did not start: {m}")),
        other => ServiceError::Execution(format!("/{command} failed: {other}")),
    }
}

/// How long a run that someone waits on (not a job) may wait for a plugin slot.
const SLOT_WAIT: Duration = Duration::from_secs(5);

/// The component a command runs.
pub fn component_of(services: &Services, command: &Command) -> Result<ComponentRef, ServiceError> {
    match (command.def.handler_type, &command.def.plugin) {
        (HandlerType::Custom, Some(hash)) => Ok(services.plugins.custom(hash)),
        (HandlerType::Custom, None) => Err(ServiceError::Execution(format!(
            "/{} has no plugin; apply its manifest again",
            command.def.name
        ))),
        (handler, _) => services
            .plugins
            .builtin(handler)
            .ok_or_else(|| ServiceError::Execution(format!("no component for handler type {}", handler.as_str()))),
    }
}

/// Everything one run needs: component, invocation, grants, limits. A job (`progress` is
/// given) waits for its slot as long as it takes; anything else at most `SLOT_WAIT`.
pub async fn prepare(
    services: &Services,
    call: Resolved<'_>,
    progress: Option<ProgressSink>,
) -> Result<Run, ServiceError> {
    let Resolved {
        agent,
        command,
        parameters,
        raw_text,
        channel,
    } = call;
    let component = component_of(services, command)?;
    let manifest = services
        .plugins
        .declared(&component)
        .await
        .map_err(|e| exec_error(&command.def.name, e))?;
    let webhook_url = match command.def.handler_type {
        HandlerType::Webhook => command.def.config.text("url"),
        _ => None,
    };
    let mut grants = Grants::for_command(
        component.kind,
        &manifest.capabilities,
        &command.def.allowed_hosts,
        webhook_url.as_deref(),
        command.def.allow_llm,
    );
    grants.pays = grants.http && (agent.def.payments.as_ref()).is_some_and(|policy| policy.covers(&command.def.name));
    let agent_snapshot = if grants.agent_info {
        Some(snapshot(services, agent).await?)
    } else {
        None
    };
    let mut config = command.def.config.json().to_string();
    if command.def.handler_type == HandlerType::BuiltIn && builtin_name(command) == "balance" {
        let network = match parameters.get("network") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(Network::parse(text.trim()).ok_or_else(|| {
                ServiceError::Validation(format!("Invalid parameter 'network': '{text}' is not solana or base"))
            })?),
            Some(_) => {
                return Err(ServiceError::Validation(
                    "Invalid parameter 'network': must be a string".into(),
                ));
            }
        };
        // The frozen 0.1.0 WIT has no wallet interface: the host reads the balances and
        // hands them to the built-in plugin, which words the answer.
        let facts = wallets::facts(services, &agent.id, network).await?;
        let mut object = command.def.config.object();
        let facts = serde_json::to_value(facts)
            .map_err(|e| ServiceError::Execution(format!("/balance: the wallets could not be described: {e}")))?;
        object.insert("wallets".into(), facts);
        config = Value::Object(object).to_string();
    }
    let timeout = timeout_of(services, command);
    let tenant = tenant_of(agent, progress.is_none());
    Ok(Run {
        component,
        invocation: Invocation {
            agent_id: agent.id.clone(),
            command: command.def.name.clone(),
            parameters: Value::Object(parameters).to_string(),
            raw_text,
            config,
            response_format: command.def.response_format.into(),
            origin: channel.origin(),
        },
        agent_id: agent.id.clone(),
        agent_name: agent.def.username.clone(),
        grants,
        agent: agent_snapshot,
        progress,
        timeout: Some(timeout),
        tenant,
        // The agent manifest names the store (its command), never the component: another
        // component cannot claim a store by giving itself the same name.
        kv_scope: format!("command:{}", command.def.name),
        slot: None,
        meter: None,
    })
}

/// How long a run of `command` may take.
fn timeout_of(services: &Services, command: &Command) -> Duration {
    let default_timeout = if command.def.long_running {
        services.settings.jobs.job_timeout_ms
    } else {
        services.settings.plugins.plugin_timeout_ms
    };
    Duration::from_millis(command.def.timeout_ms.unwrap_or(default_timeout))
}

/// Whose run it is: the agent's account; one someone `waits` on waits `SLOT_WAIT` at most
/// for its slot (a job waits its turn).
fn tenant_of(agent: &Agent, waits: bool) -> Tenant {
    Tenant {
        account: agent.account_id.clone(),
        wait: waits.then_some(SLOT_WAIT),
    }
}

/// A plugin slot for a run of `command` that someone waits on, taken before anything is
/// taken for the run (a payment): a server with none free refuses it first.
pub async fn reserve_slot(services: &Services, agent: &Agent, command: &Command) -> Result<SlotPermit, ServiceError> {
    services
        .plugins
        .reserve(&tenant_of(agent, true), timeout_of(services, command))
        .await
        .map_err(|e| exec_error(&command.def.name, e))
}

async fn snapshot(services: &Services, agent: &Agent) -> Result<AgentSnapshot, ServiceError> {
    let commands = services.store.commands(&agent.id).await?;
    Ok(AgentSnapshot {
        profile: AgentProfile {
            id: agent.id.clone(),
            username: agent.def.username.clone(),
            name: agent.def.name.clone(),
            personality: agent.def.personality.clone(),
            knowledge: agent.def.knowledge.clone(),
        },
        commands: commands
            .into_iter()
            .map(|c| CommandInfo {
                name: c.def.name,
                description: c.def.description,
                parameters: c.def.parameters.into_iter().map(Into::into).collect(),
                enabled: c.def.enabled,
            })
            .collect(),
    })
}

/// Which built-in a `built_in` command runs: `config.builtin`, else its own name.
fn builtin_name(command: &Command) -> String {
    command
        .def
        .config
        .text("builtin")
        .unwrap_or_else(|| command.def.name.clone())
}
