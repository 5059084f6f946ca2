//! Chat: the agent answers with its personality and knowledge, and may call its enabled
//! commands as tools. Each tool call runs through the plugin runtime exactly like
//! `execute` (origin `chat tool`, same validation and sandbox); its result or error goes
//! back to the model. At most `max_tool_calls` calls run; after that the model must answer.

use serde::Serialize;
use serde_json::Value;

use super::chat_tokens::Tally;
use super::commands::{Answer, CommandCall, CommandOutcome};
use super::{ServiceError, Services, commands, knowledge};
use crate::domain::{Agent, Command, ResponseFormat};
use crate::llm::{CompletionRequest, Message, Role, TextSink, ToolCall, ToolSpec, Usage};
use crate::services::usage::Channel;

/// Longest message, in characters (the API's limit).
pub const MESSAGE_MAX_CHARS: usize = 10_000;
/// Characters of one tool result shown to the model at most.
const TOOL_RESULT_MAX_CHARS: usize = 4_000;

/// Characters of a tool's result or error shown to a stream's reader.
const TOOL_SUMMARY_MAX_CHARS: usize = 200;

#[derive(Debug, Clone)]
pub struct ChatInput {
    pub message: String,
    pub history: Vec<(Role, String)>,
    /// The caller's own instructions, read after the agent's (never instead of them).
    pub instructions: Vec<String>,
    pub tools_enabled: bool,
    pub max_tool_calls: u8,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    /// Where a streamed chat's events go as they happen.
    pub events: Option<ChatEvents>,
    /// Tokens of the owner's budget already taken for this chat (a paid chat's first round,
    /// taken before its payment settled).
    pub prepaid_tokens: u32,
    /// The chat is the agent's owner's own (a key of the account, a schedule): the remote MCP
    /// servers' tools, which act with the owner's credentials, are offered too.
    pub owner_tools: bool,
}

impl ChatInput {
    /// What the caller puts in the prompt, in bytes (at least its characters): its message,
    /// its earlier turns and its instructions.
    pub fn callers_text_len(&self) -> usize {
        self.message.len()
            + self.history.iter().map(|(_, turn)| turn.len()).sum::<usize>()
            + self.instructions.iter().map(String::len).sum::<usize>()
    }

    /// One message, no history, no tools.
    pub fn new(message: String) -> ChatInput {
        ChatInput {
            message,
            history: Vec::new(),
            instructions: Vec::new(),
            tools_enabled: false,
            max_tool_calls: 0,
            max_tokens: None,
            temperature: None,
            events: None,
            prepaid_tokens: 0,
            owner_tools: false,
        }
    }
}

/// What a streamed chat tells its reader while it happens; the reply itself comes last.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatEvent {
    /// More of the answer's text.
    Text(String),
    ToolStarted {
        id: String,
        name: String,
        arguments: String,
    },
    ToolFinished {
        id: String,
        name: String,
        ok: bool,
        /// The start of its result, or why it failed.
        summary: String,
    },
}

pub type ChatEvents = tokio::sync::mpsc::UnboundedSender<ChatEvent>;

#[derive(Debug)]
pub struct ChatReply {
    pub response: String,
    /// Tool calls that ran through the plugin runtime.
    pub tool_calls_run: u32,
    /// Tokens of every round together, as far as the provider told them.
    pub usage: Usage,
    /// The provider told every round's tokens: `usage` is all the chat used.
    pub usage_reported: bool,
    /// Whether the last round stopped at its token limit rather than at its end.
    pub cut_short: bool,
}

/// The system prompt: who the agent is, what it knows (`known`: the entries chosen for the
/// message), how to use tools when it has them, and the caller's own instructions.
pub fn system_prompt(agent: &Agent, known: &[String], with_tools: bool, instructions: &[String]) -> String {
    let def = &agent.def;
    let mut prompt = format!("You are {} (@{}).", def.name, def.username);
    if !def.personality.trim().is_empty() {
        prompt.push_str(&format!(" {}", def.personality.trim()));
    }
    prompt.push_str(&format!(
        "\nStay in character as {}. Do not invent facts you were not given.",
        def.name
    ));
    if !known.is_empty() {
        prompt.push_str("\n\nWhat you know:");
        for entry in known {
            prompt.push_str(&format!("\n- {}", entry.trim()));
        }
    }
    if with_tools {
        prompt
            .push_str("\n\nYou can run commands through the tools you are given. Call one only when it helps answer.");
    }
    if !instructions.is_empty() {
        prompt.push_str("\n\nThe caller also asks:");
        for text in instructions {
            prompt.push_str(&format!("\n{}", text.trim()));
        }
    }
    prompt
}

/// A command as a tool: its parameters as a JSON Schema object.
pub fn tool_spec(command: &Command) -> Option<ToolSpec> {
    let description = if command.def.description.is_empty() {
        format!("Runs /{}", command.def.name)
    } else {
        command.def.description.clone()
    };
    Some(ToolSpec {
        name: command.def.name.clone(),
        description,
        parameters: crate::schema::arguments(command)?,
    })
}

/// What the model reads of a command's result (its tool message, not an API answer).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolResult<'a> {
    response: &'a str,
    format: ResponseFormat,
    #[serde(skip_serializing_if = "Option::is_none")]
    media_url: Option<&'a str>,
    /// Where a long-running command's result will be.
    #[serde(skip_serializing_if = "Option::is_none")]
    status_url: Option<&'a str>,
}

impl ToolResult<'_> {
    fn text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The first round's worst case for `input` to `agent`, before the knowledge is chosen:
/// the most knowledge the prompt may hold counts in full. A paid chat takes this from the
/// owner's budget before it settles.
pub fn worst_first_round(services: &Services, agent: &Agent, input: &ChatInput) -> u32 {
    let def = &agent.def;
    // At most `BUDGET_CHARS` characters are chosen, each at most as wide as the widest the
    // knowledge holds, and never more than all of it.
    let all: usize = def.knowledge.iter().map(String::len).sum();
    let widest = def
        .knowledge
        .iter()
        .flat_map(|entry| entry.chars())
        .map(char::len_utf8)
        .max()
        .unwrap_or(1);
    let prompt_chars = input.callers_text_len()
        + def.name.len() * 2
        + def.username.len()
        + def.personality.len()
        + all.min(knowledge::BUDGET_CHARS * widest)
        // Each entry chosen is a line of its own ("\n- ").
        + 3 * def.knowledge.len().min(knowledge::BUDGET_CHARS)
        + SYSTEM_PROMPT_WORDS_CHARS;
    let prompt = u32::try_from(prompt_chars.div_ceil(4)).unwrap_or(u32::MAX);
    prompt.saturating_add(super::chat_budget::answer_limit(services, None))
}

/// The system prompt's own words, besides the agent's (a bound, checked by a test).
const SYSTEM_PROMPT_WORDS_CHARS: usize = 400;

/// The agent's reply to one message with none of its commands as tools: what a paid chat
/// or a chat tool gives (a cheap message must not reach an expensive command through it).
pub async fn reply_without_tools(
    services: &Services,
    agent: &Agent,
    message: String,
    prepaid_tokens: u32,
) -> Result<Answer, ServiceError> {
    Ok(reply_measured(services, agent, ChatInput::new(message), prepaid_tokens)
        .await?
        .0)
}

/// The agent's answer to a paid conversation, without tools (a cheap message must not run
/// an expensive command), with the tokens it took as the model reported them (what a
/// message paid for by use is charged for; `None` when the model did not report them all).
pub async fn reply_measured(
    services: &Services,
    agent: &Agent,
    input: ChatInput,
    prepaid_tokens: u32,
) -> Result<(Answer, Option<Usage>), ServiceError> {
    let input = ChatInput {
        prepaid_tokens,
        tools_enabled: false,
        max_tool_calls: 0,
        ..input
    };
    let reply = chat(services, agent, Vec::new(), input).await?;
    let answer = Answer {
        response: reply.response,
        format: ResponseFormat::Text,
        media_url: None,
        cut_short: reply.cut_short,
    };
    Ok((answer, reply.usage_reported.then_some(reply.usage)))
}

/// The agent's reply; its tokens are added to the agent's day however the chat ends.
pub async fn chat(
    services: &Services,
    agent: &Agent,
    commands: Vec<Command>,
    input: ChatInput,
) -> Result<ChatReply, ServiceError> {
    let mut tally = Tally::new(services, agent);
    let reply = converse(services, agent, commands, input, &mut tally).await;
    tally.record().await;
    reply
}

async fn converse(
    services: &Services,
    agent: &Agent,
    commands: Vec<Command>,
    input: ChatInput,
    tally: &mut Tally,
) -> Result<ChatReply, ServiceError> {
    let offered: Vec<Command> = if input.tools_enabled && input.max_tool_calls > 0 {
        commands.into_iter().filter(|c| c.def.enabled).collect()
    } else {
        Vec::new()
    };
    let mut tools: Vec<ToolSpec> = offered.iter().filter_map(tool_spec).collect();
    // The remote MCP servers' tools too, in the owner's own chats where commands may be called.
    let with_remote = input.owner_tools && input.tools_enabled && input.max_tool_calls > 0;
    let remote = match with_remote && !agent.def.mcp_servers.is_empty() {
        true => {
            let own: Vec<&str> = offered.iter().map(|c| c.def.name.as_str()).collect();
            super::remote_tools::RemoteTools::load(services, agent, &own).await
        }
        false => Default::default(),
    };
    tools.extend(remote.specs().iter().cloned());
    let known = knowledge::relevant(services, &agent.def.knowledge, &input.message, knowledge::BUDGET_CHARS).await;
    let mut messages = vec![Message::new(
        Role::System,
        system_prompt(agent, &known, !tools.is_empty(), &input.instructions),
    )];
    messages.extend(
        input
            .history
            .into_iter()
            .map(|(role, content)| Message::new(role, content)),
    );
    messages.push(Message::new(Role::User, input.message));
    let events = input.events;
    let text_sink: Option<TextSink> = events.clone().map(|events| -> TextSink {
        std::sync::Arc::new(move |piece: &str| events.send(ChatEvent::Text(piece.to_string())).is_ok())
    });

    let max_tokens = super::chat_budget::answer_limit(services, input.max_tokens);
    let mut prepaid = input.prepaid_tokens;
    let max = input.max_tool_calls as u32;
    let mut run = 0u32;
    // Each round either answers or runs at least one call, so this bounds the loop.
    for _round in 0..=max + 1 {
        let may_call = !tools.is_empty() && run < max;
        let request = CompletionRequest {
            messages: messages.clone(),
            max_tokens: Some(max_tokens),
            temperature: input.temperature,
            tools: if may_call { tools.clone() } else { Vec::new() },
        };
        // The account's budget pays for the round's worst case before it runs (what was taken
        // for it already, less).
        let worst = super::chat_budget::worst_case(&request);
        let owed = worst.saturating_sub(std::mem::take(&mut prepaid));
        if owed > 0 {
            super::chat_budget::charge(services, &agent.account_id, owed).await?;
        }
        tally.asking();
        let completion = match &text_sink {
            Some(sink) => services.llm.stream(request, sink.clone()).await,
            None => services.llm.complete(request).await,
        }
        .map_err(ServiceError::Model)?;
        super::chat_budget::charge_beyond(services, &agent.account_id, worst, completion.usage).await;
        tally.add(completion.usage);
        if !may_call || completion.tool_calls.is_empty() {
            let text = completion.content.trim().to_string();
            if text.is_empty() {
                return Err(ServiceError::Model(crate::llm::LlmError::BadAnswer(
                    "the model gave no answer".into(),
                )));
            }
            let cut_short = completion.cut_short
                || completion
                    .usage
                    .is_some_and(|used| used.output_tokens >= u64::from(max_tokens));
            return Ok(ChatReply {
                response: text,
                tool_calls_run: run,
                usage: tally.usage(),
                usage_reported: tally.fully_reported(),
                cut_short,
            });
        }
        let mut assistant = Message::new(Role::Assistant, completion.content.clone());
        assistant.tool_calls = completion.tool_calls.clone();
        messages.push(assistant);
        for call in &completion.tool_calls {
            let tell = |event: ChatEvent| {
                if let Some(events) = &events {
                    let _ = events.send(event);
                }
            };
            let result = if run < max {
                run += 1;
                tell(ChatEvent::ToolStarted {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                });
                let (result, ok) = run_tool(services, agent, &offered, &remote, call).await;
                tell(ChatEvent::ToolFinished {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    ok,
                    summary: result.chars().take(TOOL_SUMMARY_MAX_CHARS).collect(),
                });
                result
            } else {
                format!(
                    "Not run: the limit of {max} tool calls for this message is reached. Answer with what you have."
                )
            };
            messages.push(Message::tool_result(&call.id, result));
        }
    }
    Err(ServiceError::Model(crate::llm::LlmError::BadAnswer(
        "the model did not stop calling tools".into(),
    )))
}

/// Runs one tool call and says what happened, for the model, and whether it ran well.
/// Failures are told, not thrown: a command that fails does not fail the chat.
async fn run_tool(
    services: &Services,
    agent: &Agent,
    offered: &[Command],
    remote: &super::remote_tools::RemoteTools,
    call: &ToolCall,
) -> (String, bool) {
    let command = offered.iter().find(|c| c.def.name == call.name);
    if command.is_none() && !remote.owns(&call.name) {
        return (format!("Error: there is no tool named '{}'.", call.name), false);
    }
    let arguments = match serde_json::from_str::<Value>(if call.arguments.trim().is_empty() {
        "{}"
    } else {
        &call.arguments
    }) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return ("Error: the arguments must be a JSON object.".into(), false),
        Err(e) => return (format!("Error: the arguments are not valid JSON ({e})."), false),
    };
    tracing::debug!(agent = %agent.id, tool = %call.name, "chat tool call");
    let Some(command) = command else {
        return remote.call(services, &call.name, Value::Object(arguments)).await;
    };
    let call = CommandCall {
        agent,
        command,
        parameters: Some(arguments),
        raw_text: None,
        channel: Channel::ChatTool,
        paid_by: None,
        slot: None,
        metered: None,
    };
    match commands::execute(services, call).await {
        Ok(CommandOutcome::Answered(answer)) => (
            ToolResult {
                response: &truncate(&answer.response),
                format: answer.format,
                media_url: answer.media_url.as_deref(),
                status_url: None,
            }
            .text(),
            true,
        ),
        Ok(CommandOutcome::Queued { job_id }) => (
            ToolResult {
                response: &commands::accepted(command),
                format: command.def.response_format,
                media_url: None,
                status_url: Some(&super::jobs::status_url(&services.public_base_url, &job_id)),
            }
            .text(),
            true,
        ),
        Err(err) => (format!("Error: {}", truncate(&err.public_text())), false),
    }
}

fn truncate(text: &str) -> String {
    if text.chars().count() <= TOOL_RESULT_MAX_CHARS {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(TOOL_RESULT_MAX_CHARS).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::domain::{AgentDef, CommandConfig, CommandDef, HandlerType, ParamSpec, ParamType, X402Settings};

    #[test]
    fn the_model_reads_a_result_as_compact_json_without_empty_fields() {
        let answered = ToolResult {
            response: "Sunny",
            format: ResponseFormat::Text,
            media_url: None,
            status_url: None,
        };
        assert_eq!(answered.text(), r#"{"response":"Sunny","format":"text"}"#);
        let queued = ToolResult {
            status_url: Some("http://h/v1/jobs/j"),
            ..answered
        };
        assert_eq!(
            queued.text(),
            r#"{"response":"Sunny","format":"text","statusUrl":"http://h/v1/jobs/j"}"#
        );
    }

    fn agent(knowledge: Vec<String>) -> Agent {
        Agent {
            id: "a".into(),
            account_id: "acc".into(),
            def: AgentDef {
                username: "helper".into(),
                name: "Helper".into(),
                personality: "Kind and brief.".into(),
                knowledge,
                x402: X402Settings {
                    enabled: false,
                    default_price: None,
                    networks: vec![],
                    chat_by_use: None,
                },
                mcp_open: false,
                mcp: Default::default(),
                a2a: Default::default(),
                mcp_servers: Vec::new(),
                payments: None,
            },
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn the_prompt_carries_personality_and_the_relevant_knowledge() {
        let mut facts: Vec<String> = (0..200)
            .map(|i| format!("Filler fact number {i} about nothing in particular."))
            .collect();
        facts.push("The office opens at 9:00 on weekdays.".into());
        let known = knowledge::choose(&facts, "when does the office open", None, knowledge::BUDGET_CHARS);
        let prompt = system_prompt(&agent(facts), &known, false, &[]);
        assert!(prompt.starts_with("You are Helper (@helper). Kind and brief."));
        assert!(prompt.contains("- The office opens at 9:00 on weekdays."));
        assert!(prompt.len() < knowledge::BUDGET_CHARS + 500, "within the budget");
        assert!(!prompt.contains("tools"));
    }

    /// A paid chat's first round is checked against the budget before the knowledge is
    /// chosen: the bound must hold whatever is chosen.
    #[test]
    fn the_first_rounds_estimate_bounds_its_prompt() {
        let facts: Vec<String> = (0..400)
            .map(|i| format!("Fact {i}: the shelf holds {i} boxes."))
            .collect();
        let helper = agent(facts.clone());
        let message = "How many boxes are on shelf 7?";
        let known = knowledge::choose(&facts, message, None, knowledge::BUDGET_CHARS);
        let prompt = system_prompt(&helper, &known, false, &[]);
        let own_words = prompt.len()
            - helper.def.personality.len()
            - known.iter().map(|entry| entry.len() + 3).sum::<usize>()
            - helper.def.name.len() * 2
            - helper.def.username.len();
        assert!(
            own_words <= SYSTEM_PROMPT_WORDS_CHARS,
            "{own_words} characters of the prompt's own"
        );
        assert!(known.iter().map(String::len).sum::<usize>() <= knowledge::BUDGET_CHARS);
    }

    #[test]
    fn commands_become_json_schema_tools() {
        let command = Command {
            id: "c".into(),
            def: CommandDef {
                name: "weather".into(),
                description: "Weather for a city".into(),
                handler_type: HandlerType::Custom,
                parameters: vec![
                    ParamSpec {
                        name: "city".into(),
                        kind: ParamType::String,
                        required: true,
                        description: "City".into(),
                        values: Vec::new(),
                        default: None,
                    },
                    ParamSpec {
                        name: "days".into(),
                        kind: ParamType::Number,
                        required: false,
                        description: String::new(),
                        values: Vec::new(),
                        default: None,
                    },
                ],
                response_format: ResponseFormat::Text,
                enabled: true,
                integrations: vec![],
                price: None,
                config: CommandConfig::default(),
                plugin: None,
                allowed_hosts: vec![],
                allow_llm: false,
                long_running: false,
                timeout_ms: None,
                sign_in: None,
                by_use: None,
            },
        };
        let spec = tool_spec(&command).unwrap();
        assert_eq!(spec.name, "weather");
        assert_eq!(
            spec.parameters,
            json!({ "type": "object", "required": ["city"], "properties": {
                "city": { "type": "string", "description": "City" }, "days": { "type": "number" } } })
        );
        let mut needs_file = command.clone();
        needs_file.def.parameters.push(ParamSpec {
            name: "doc".into(),
            kind: ParamType::File,
            required: true,
            description: String::new(),
            values: Vec::new(),
            default: None,
        });
        assert!(tool_spec(&needs_file).is_none());
    }
}
