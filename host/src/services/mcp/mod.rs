//! An agent's commands as MCP tools: which tools a caller is shown, and a tool call
//! carried out. The agent's owner calls them free with a key; anyone else pays per call
//! with x402 through the purchase service, exactly as on the paid HTTP route (the same
//! once-only payments, limits, fee caps and refunds). JSON-RPC and content blocks are the
//! route's business.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::commands::{self, Answer, CommandCall, CommandOutcome};
use super::jobs::{self, JobStatus};
use super::keys::Caller;
use super::payments::X402Error;
use super::purchase::{self, Access, Order, RefundStarted, SaleOutcome};
use super::{ServiceError, Services, agents, chat, sign_in};
use crate::domain::{Command, Integration, ResponseFormat};
use crate::money::MicroUsdc;
use crate::services::usage::Channel;
use crate::store::AgentWithCommands;
use crate::x402::sign_in::SIGN_IN_WITH_X;

pub mod exposed;
mod sign_in_call;
pub mod tasks;
use crate::x402::wire::{MCP_PAYMENT_META, PaymentRequiredV2, ResourceInfo, SettleResponse, Version};
use sign_in_call::signed_in;

/// The tool that talks to the agent itself: its personality and knowledge, its commands
/// off (a paid chat must not reach a paid command for free).
pub const CHAT_TOOL: &str = "chat";

/// An agent's tools as one caller may use them.
pub struct Toolbox {
    pub found: Arc<AgentWithCommands>,
    access: Access,
    /// The client address of a caller without a key: a paid call's settlement that fails
    /// on chain is charged to it.
    client: Option<String>,
}

/// One tool as listed.
pub struct Tool<'a> {
    pub name: &'a str,
    /// The command it runs; `None` for the chat tool.
    pub command: Option<&'a Command>,
    /// What a call costs; `None` when it is free to this caller.
    pub price: Option<MicroUsdc>,
}

/// Opens the agent `agent_ref` (its id or username) for `caller`: the owner's key, or
/// nobody's. Without a key, only an agent that sells on some network now, or whose owner
/// opened its free tools, is found.
pub async fn open(services: &Services, agent_ref: &str, caller: Option<&Caller>) -> Result<Toolbox, ServiceError> {
    if let Some(caller) = caller {
        let found = agents::owned_with_commands(&services.store, &caller.account.id, agent_ref).await?;
        return Ok(Toolbox {
            found,
            access: Access::Owner,
            client: None,
        });
    }
    let closed = || ServiceError::from(X402Error::AgentNotSelling(agent_ref.to_string()));
    let found = services
        .store
        .agent_with_commands(agent_ref)
        .await?
        .ok_or_else(closed)?;
    let access = Access::public(services, &found.agent, found.agent.def.mcp_open).await;
    if access.closed() {
        return Err(closed());
    }
    Ok(Toolbox {
        found,
        access,
        client: None,
    })
}

impl Toolbox {
    /// The toolbox as opened for a caller at this client address.
    pub fn from_client(self, client: Option<String>) -> Toolbox {
        Toolbox { client, ..self }
    }

    /// The tools in a stable order: the chat tool, then the commands in manifest order (a
    /// command named like the chat tool is not one).
    pub fn tools(&self) -> Vec<Tool<'_>> {
        let commands = self.commands().filter(|c| c.def.name != CHAT_TOOL).map(Some);
        std::iter::once(None)
            .chain(commands)
            .filter_map(|command| self.offered(command))
            .collect()
    }

    /// The tool called `name`, if this caller may call it.
    pub fn tool(&self, name: &str) -> Option<Tool<'_>> {
        let command = match name {
            CHAT_TOOL => None,
            _ => Some(self.commands().find(|c| c.def.name == name)?),
        };
        self.offered(command)
    }

    /// What a tool does, in words a model reads.
    pub fn description(&self, tool: &Tool<'_>) -> String {
        match tool.command {
            Some(command) => command.def.description.clone(),
            None => format!(
                "Talk to {}: send a message, get its reply (its personality and knowledge; its commands are separate tools).",
                self.found.agent.def.name
            ),
        }
    }

    fn commands(&self) -> impl Iterator<Item = &Command> {
        agents::offered(&self.found.commands, Some(Integration::Mcp))
    }

    /// The command (`None`: the chat) as a tool of this caller: free, priced, or not
    /// offered to it.
    fn offered<'a>(&'a self, command: Option<&'a Command>) -> Option<Tool<'a>> {
        let name = command.map_or(CHAT_TOOL, |c| c.def.name.as_str());
        // A command whose parameters need a file cannot be called with arguments.
        if command.is_some_and(crate::schema::needs_file) {
            return None;
        }
        let price = self.access.price_of(&self.found.agent, command)?;
        Some(Tool { name, command, price })
    }
}

/// A tool call as the client sent it.
pub struct ToolCall {
    pub name: String,
    pub arguments: Map<String, Value>,
    /// `_meta["x402/payment"]`: the payment object, or its base64 form.
    pub payment: Option<Value>,
    /// `_meta["sign-in-with-x"]`: a signed sign-in challenge (object or base64), used when
    /// there is no payment.
    pub sign_in: Option<Value>,
    /// The call as sent, recorded with its payment.
    pub request: Value,
}

/// How a tool call ended.
pub enum Called {
    /// It ran (or was refused by the command); a paid one carries its settlement.
    Done {
        outcome: ToolOutcome,
        settlement: Option<SettleResponse>,
    },
    /// A buyer must pay first (again, when `error` says why the payment was refused).
    PaymentRequired(PaymentRequiredV2),
    /// No tool of that name for this caller.
    UnknownTool,
}

/// What a tool gave.
pub enum ToolOutcome {
    Answered(Answer),
    /// A long-running command the caller did not wait for: its job.
    Queued {
        job_id: String,
    },
    /// Failed, or refused by the command: the caller (a model) may act on it. A paid
    /// call that failed by the agent's fault carries its refund.
    Failed {
        error: ServiceError,
        refund: Option<RefundStarted>,
    },
}

impl From<SaleOutcome> for ToolOutcome {
    fn from(outcome: SaleOutcome) -> ToolOutcome {
        match outcome {
            SaleOutcome::Answered(answer) => ToolOutcome::Answered(answer),
            SaleOutcome::Queued { job_id } => ToolOutcome::Queued { job_id },
            SaleOutcome::Failed { error, refund } => ToolOutcome::Failed { error, refund },
        }
    }
}

fn failed(error: ServiceError) -> ToolOutcome {
    ToolOutcome::Failed { error, refund: None }
}

/// Calls a tool. `progress` is told a long-running command's progress while the call
/// waits for it; without it, the call answers the command's job at once.
pub async fn call(
    services: &Services,
    toolbox: &Toolbox,
    call: ToolCall,
    progress: Option<impl AsyncFnMut(u8)>,
) -> Result<Called, ServiceError> {
    let Some(tool) = toolbox.tool(&call.name) else {
        return Ok(Called::UnknownTool);
    };
    let called = match (toolbox.access.offers(), tool.price) {
        (offers, Some(price)) if !toolbox.access.is_owner() => {
            let description = toolbox.description(&tool);
            let format = tool.command.map_or("text", |c| c.def.response_format.as_str());
            let extensions = match (offers.first(), input_schema(tool.command)) {
                (Some(offer), Some(schema)) => offer.mcp_extensions(tool.name, &description, &schema, format),
                _ => Map::new(),
            };
            let sold = purchase::Sold {
                offers,
                price,
                command: tool.command.map(|c| c.def.name.as_str()),
                resource: ResourceInfo {
                    url: format!("mcp://tool/{}", tool.name),
                    description: Some(description),
                    mime_type: Some("application/json".into()),
                },
                extensions,
            };
            buy(services, sold, &tool, call, toolbox.client.as_deref()).await?
        }
        _ => {
            let outcome = match charge_owner_for_open(services, toolbox).await {
                Ok(()) => run_free(services, toolbox, &tool, call.arguments).await,
                Err(err) => failed(err),
            };
            Called::Done {
                outcome,
                settlement: None,
            }
        }
    };
    Ok(match (called, progress) {
        (
            Called::Done {
                outcome: ToolOutcome::Queued { job_id },
                settlement,
            },
            Some(progress),
        ) => Called::Done {
            outcome: wait(services, &job_id, settlement.is_some(), progress).await,
            settlement,
        },
        (called, _) => called,
    })
}

/// A keyless call of an open tool counts against the owner's plan (see
/// [`agents::charge_owner_for_keyless`]); the owner's own calls were counted at the gate.
async fn charge_owner_for_open(services: &Services, toolbox: &Toolbox) -> Result<(), ServiceError> {
    if toolbox.access.is_owner() {
        return Ok(());
    }
    agents::charge_owner_for_keyless(services, &toolbox.found.agent, "mcp_open").await
}

/// The owner's call: the command run as the keyed API runs it, or a chat.
async fn run_free(
    services: &Services,
    toolbox: &Toolbox,
    tool: &Tool<'_>,
    arguments: Map<String, Value>,
) -> ToolOutcome {
    let agent = &toolbox.found.agent;
    let worked = match tool.command {
        Some(command) => {
            let call = CommandCall {
                agent,
                command,
                parameters: Some(arguments),
                raw_text: None,
                channel: Channel::Mcp,
                paid_by: None,
                slot: None,
                metered: None,
            };
            commands::execute(services, call).await
        }
        None => match chat_message(&arguments) {
            Ok(message) => chat::reply_without_tools(services, agent, message, 0)
                .await
                .map(CommandOutcome::Answered),
            Err(err) => Err(err),
        },
    };
    match worked {
        Ok(CommandOutcome::Answered(answer)) => ToolOutcome::Answered(answer),
        Ok(CommandOutcome::Queued { job_id }) => ToolOutcome::Queued { job_id },
        Err(err) => failed(err),
    }
}

/// A tool's arguments as JSON Schema: the command's parameters, or the chat tool's
/// message. `None` for a command no argument can call (it takes a file).
pub fn input_schema(command: Option<&Command>) -> Option<Value> {
    match command {
        Some(command) => crate::schema::arguments(command),
        None => Some(serde_json::json!({
            "type": "object",
            "properties": { "message": { "type": "string", "description": "What to say to the agent" } },
            "required": ["message"],
        })),
    }
}

/// The chat tool's one argument.
fn chat_message(arguments: &Map<String, Value>) -> Result<String, ServiceError> {
    match arguments.get("message") {
        Some(Value::String(m)) if !m.trim().is_empty() => {
            if m.chars().count() > chat::MESSAGE_MAX_CHARS {
                return Err(ServiceError::Validation(format!(
                    "Invalid argument 'message': at most {} characters",
                    chat::MESSAGE_MAX_CHARS
                )));
            }
            Ok(m.trim().to_string())
        }
        _ => Err(ServiceError::Validation(
            "Missing argument 'message': the text to send the agent".into(),
        )),
    }
}

/// A buyer's call: priced, then settled and served through the purchase service.
async fn buy(
    services: &Services,
    sold: purchase::Sold<'_>,
    tool: &Tool<'_>,
    call: ToolCall,
    client: Option<&str>,
) -> Result<Called, ServiceError> {
    let offers = sold.offers;
    let Some(first) = offers.first() else {
        return Ok(Called::UnknownTool);
    };
    let order = match tool.command {
        Some(command) => Order::Command {
            name: command.def.name.clone(),
            parameters: call.arguments,
            raw_text: None,
        },
        None => Order::Message(chat_message(&call.arguments)?),
    };
    // A tool that takes sign-ins offers a challenge with its price, for the MCP endpoint.
    let endpoint = format!("{}/mcp/{}", services.public_base_url, first.agent.id);
    let asked = tool.command.map(|command| sign_in::Asked {
        agent: &first.agent,
        command,
        uri: &endpoint,
        resource: &sold.resource.url,
    });
    let challenge = match &asked {
        Some(asked) => sign_in::challenge(services, asked).await,
        None => None,
    };
    let required = |error: Option<String>| {
        let error = error.unwrap_or_else(|| "Payment required: send it in _meta[\"x402/payment\"]".into());
        let mut required = purchase::payment_required(services, &sold, error);
        if let Some(challenge) = &challenge {
            required
                .extensions
                .insert(SIGN_IN_WITH_X.to_string(), challenge.clone());
        }
        Called::PaymentRequired(required)
    };
    if let (None, Some(presented), Some(asked)) = (&call.payment, call.sign_in, &asked) {
        return signed_in(services, first, order, call.request, asked, presented, required).await;
    }
    let Some(sent) = call.payment else {
        // What could not be bought anyway is refused before a price is named.
        return Ok(
            match purchase::quote(services, first, order, call.request, false)
                .await?
                .check_input()
            {
                Ok(_) => required(None),
                Err(err) => Called::Done {
                    outcome: failed(err),
                    settlement: None,
                },
            },
        );
    };
    let payment = match purchase::read_payment(sent, offers, MCP_PAYMENT_META) {
        Ok(found) => found,
        Err(reason) => return Ok(required(Some(reason))),
    };
    let (offer, payment) = payment;
    let checked = match purchase::quote(services, offer, order, call.request, true)
        .await?
        .offered_with(sold.extensions.clone())
        .check_input()
    {
        Ok(checked) => checked,
        // The payer's input, refused before any money moved: nothing to pay for.
        Err(err) => {
            return Ok(Called::Done {
                outcome: failed(err),
                settlement: None,
            });
        }
    };
    let sale = match purchase::buy(services, checked, &payment, client).await {
        Ok(sale) => sale,
        // Refused before anything was taken (a replay, a wrong amount): pay again.
        Err(ServiceError::X402(X402Error::Refused(refusal))) => return Ok(required(Some(refusal.message))),
        // Sent but not confirmed: the payer is told which transaction to watch.
        Err(ServiceError::X402(X402Error::SettlementPending { transaction, payer })) => {
            let settlement = offer.pending_response(&transaction, &payer);
            let err = X402Error::SettlementPending { transaction, payer };
            return Ok(Called::Done {
                outcome: failed(err.into()),
                settlement: Some(settlement),
            });
        }
        Err(err) => return Err(err),
    };
    let delivered = matches!(sale.outcome, SaleOutcome::Answered(_));
    let settlement = offer
        .settle_response(services, &sale.settled, Version::V2, &sold.resource.url, delivered)
        .await;
    let settlement = Some(settlement);
    let outcome = ToolOutcome::from(sale.outcome);
    Ok(Called::Done { outcome, settlement })
}

/// Waits for a long-running command's job, telling its progress.
async fn wait(services: &Services, job_id: &str, paid: bool, progress: impl AsyncFnMut(u8)) -> ToolOutcome {
    let within = Duration::from_millis(services.settings.jobs.job_timeout_ms + 5_000);
    match jobs::wait(&services.store, job_id, within, progress).await {
        Ok(JobStatus::Succeeded {
            response,
            format,
            artifact_url,
            ..
        }) => ToolOutcome::Answered(Answer {
            response,
            format: format.as_deref().and_then(ResponseFormat::parse).unwrap_or_default(),
            media_url: artifact_url,
            cut_short: false,
        }),
        // A paid job that failed was refunded (its transaction, once on chain).
        Ok(JobStatus::Failed {
            error,
            refund_signature,
            ..
        }) => ToolOutcome::Failed {
            error: ServiceError::Execution(error),
            refund: paid.then_some(RefundStarted {
                transaction: refund_signature,
            }),
        },
        Ok(JobStatus::Missing) => failed(ServiceError::Execution(
            "The command's job is gone (its record expired)".into(),
        )),
        Ok(JobStatus::Processing { .. }) => ToolOutcome::Queued {
            job_id: job_id.to_string(),
        },
        Err(err) => failed(err),
    }
}
