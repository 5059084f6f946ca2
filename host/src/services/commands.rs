//! Running a command for a caller: resolve its parameters, then run it now or, when it is
//! long-running, record it as a durable job and answer with the job's id.

use serde_json::{Map, Value};

use super::runs::{self, Resolved};
use super::usage::Channel;
use super::{ServiceError, Services, jobs, params};
use crate::domain::{Agent, Command, ResponseFormat};

/// One call of a command, as a caller asks for it.
pub struct CommandCall<'a> {
    pub agent: &'a Agent,
    pub command: &'a Command,
    /// Named parameters; `None` when only `raw_text` was given.
    pub parameters: Option<Map<String, Value>>,
    /// The `/command ...` text, parsed into parameters when `parameters` is `None`.
    pub raw_text: Option<String>,
    /// Where it came from (the plugin is told `channel.origin()`).
    pub channel: Channel,
    /// The payment this call serves (its id), when it was paid for.
    pub paid_by: Option<&'a str>,
    /// A plugin slot reserved for it before it was paid for (see `runs::reserve_slot`).
    pub slot: Option<crate::plugins::SlotPermit>,
    /// Where its run counts the units it reports (sold by use), and how long it may take.
    pub metered: Option<Metered>,
}

/// A run whose units are counted for its caller: for a run sold by use, its payer is charged
/// them, and it must end while its payment can still be settled (`within`).
pub struct Metered {
    pub meter: crate::plugins::Meter,
    pub within: Option<std::time::Duration>,
}

/// What running a command gave.
#[derive(Debug, Clone)]
pub enum CommandOutcome {
    /// It ran and answered.
    Answered(Answer),
    /// A long-running command: its job was recorded and started; its status tells the end.
    Queued { job_id: String },
}

/// A command's answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub response: String,
    pub format: ResponseFormat,
    pub media_url: Option<String>,
    /// The model stopped at its length limit (a chat's answer; a command's never is).
    pub cut_short: bool,
}

/// Runs the call. A long-running command answers at once with its job; a paid one serves
/// its payment (`paid_by`) when its job is recorded.
pub async fn execute(services: &Services, call: CommandCall<'_>) -> Result<CommandOutcome, ServiceError> {
    let command = call.command;
    let parameters = params::resolve(
        &command.def.name,
        &command.def.parameters,
        call.parameters,
        call.raw_text.as_deref(),
    )
    .map_err(ServiceError::Validation)?;
    let resolved = Resolved {
        agent: call.agent,
        command,
        parameters,
        raw_text: call.raw_text,
        channel: call.channel,
    };
    if command.def.long_running {
        let job_id = jobs::submit(services, resolved, call.paid_by).await?;
        return Ok(CommandOutcome::Queued { job_id });
    }
    let channel = resolved.channel;
    let mut run = runs::prepare(services, resolved, None).await?;
    run.slot = call.slot;
    if let Some(metered) = call.metered {
        run.meter = Some(metered.meter);
        if let Some(within) = metered.within {
            run.timeout = Some(run.timeout.map_or(within, |t| t.min(within)));
        }
    }
    let output = runs::execute(services, run, channel)
        .await
        .map_err(|e| runs::exec_error(&command.def.name, e))?;
    Ok(CommandOutcome::Answered(Answer {
        response: output.response,
        format: output.format.into(),
        media_url: output.media_url,
        cut_short: false,
    }))
}

/// What a caller is told of a queued command until its job ends.
pub fn accepted(command: &Command) -> String {
    format!(
        "Accepted: /{} is running; poll the status address for its result.",
        command.def.name
    )
}
