//! Chat: the agent answers with its personality and knowledge, and may call its enabled
//! commands as tools. Each tool call runs through the plugin runtime exactly like
//! `execute` (origin `chat tool`, same validation and sandbox); its result or error goes
//! back to the model. At most `max_tool_calls` calls run; after that the model must answer.

use serde::Serialize;
use serde_json::Value;

use super::commands::{Answer, CommandCall, CommandOutcome};
use super::{ServiceError, Services, commands, knowledge};
use crate::domain::{Agent, Command, ResponseFormat};
use crate::llm::{CompletionRequest, Message, Role, ToolCall, ToolSpec};
use crate::plugins::Origin;

/// Longest message, in characters (the API's limit).
pub const MESSAGE_MAX_CHARS: usize = 10_000;
/// Characters of knowledge put in the system prompt at most (about 1,000 tokens).
pub const KNOWLEDGE_BUDGET_CHARS: usize = 4_000;
/// Characters of one tool result shown to the model at most.
const TOOL_RESULT_MAX_CHARS: usize = 4_000;

pub struct ChatInput {
    pub message: String,
    pub history: Vec<(Role, String)>,
    pub tools_enabled: bool,
    pub max_tool_calls: u8,
}

#[derive(Debug)]
pub struct ChatReply {
    pub response: String,
    /// Tool calls that ran through the plugin runtime.
    pub tool_calls_run: u32,
}

/// The system prompt: who the agent is, what it knows (the entries relevant to `message`
/// when there are too many), and how to use tools when it has them.
pub fn system_prompt(agent: &Agent, message: &str, with_tools: bool) -> String {
    let def = &agent.def;
    let mut prompt = format!("You are {} (@{}).", def.name, def.username);
    if !def.personality.trim().is_empty() {
        prompt.push_str(&format!(" {}", def.personality.trim()));
    }
    prompt.push_str(&format!(
        "\nStay in character as {}. Do not invent facts you were not given.",
        def.name
    ));
    let known = knowledge::select(&def.knowledge, message, KNOWLEDGE_BUDGET_CHARS);
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

/// The agent's reply to one message with none of its commands as tools: what a paid chat
/// or a chat tool gives (a cheap message must not reach an expensive command through it).
pub async fn reply_without_tools(services: &Services, agent: &Agent, message: String) -> Result<Answer, ServiceError> {
    let input = ChatInput {
        message,
        history: Vec::new(),
        tools_enabled: false,
        max_tool_calls: 0,
    };
    let reply = chat(services, agent, Vec::new(), input).await?;
    Ok(Answer {
        response: reply.response,
        format: ResponseFormat::Text,
        media_url: None,
    })
}

pub async fn chat(
    services: &Services,
    agent: &Agent,
    commands: Vec<Command>,
    input: ChatInput,
) -> Result<ChatReply, ServiceError> {
    let offered: Vec<Command> = if input.tools_enabled && input.max_tool_calls > 0 {
        commands.into_iter().filter(|c| c.def.enabled).collect()
    } else {
        Vec::new()
    };
    let tools: Vec<ToolSpec> = offered.iter().filter_map(tool_spec).collect();
    let mut messages = vec![Message::new(
        Role::System,
        system_prompt(agent, &input.message, !tools.is_empty()),
    )];
    messages.extend(
        input
            .history
            .into_iter()
            .map(|(role, content)| Message::new(role, content)),
    );
    messages.push(Message::new(Role::User, input.message));

    let max = input.max_tool_calls as u32;
    let mut run = 0u32;
    // Each round either answers or runs at least one call, so this bounds the loop.
    for _round in 0..=max + 1 {
        let may_call = !tools.is_empty() && run < max;
        let request = CompletionRequest {
            messages: messages.clone(),
            max_tokens: None,
            temperature: None,
            tools: if may_call { tools.clone() } else { Vec::new() },
        };
        let completion = services.llm.complete(request).await.map_err(ServiceError::Model)?;
        if !may_call || completion.tool_calls.is_empty() {
            let text = completion.content.trim().to_string();
            if text.is_empty() {
                return Err(ServiceError::Model(crate::llm::LlmError::BadAnswer(
                    "the model gave no answer".into(),
                )));
            }
            return Ok(ChatReply {
                response: text,
                tool_calls_run: run,
            });
        }
        let mut assistant = Message::new(Role::Assistant, completion.content.clone());
        assistant.tool_calls = completion.tool_calls.clone();
        messages.push(assistant);
        for call in &completion.tool_calls {
            let result = if run < max {
                run += 1;
                run_tool(services, agent, &offered, call).await
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

/// Runs one tool call and says what happened, for the model. Failures are told, not thrown:
/// a command that fails does not fail the chat.
async fn run_tool(services: &Services, agent: &Agent, offered: &[Command], call: &ToolCall) -> String {
    let Some(command) = offered.iter().find(|c| c.def.name == call.name) else {
        return format!("Error: there is no tool named '{}'.", call.name);
    };
    let arguments = match serde_json::from_str::<Value>(if call.arguments.trim().is_empty() {
        "{}"
    } else {
        &call.arguments
    }) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return "Error: the arguments must be a JSON object.".into(),
        Err(e) => return format!("Error: the arguments are not valid JSON ({e})."),
    };
    tracing::debug!(agent = %agent.id, tool = %call.name, "chat tool call");
    let call = CommandCall {
        agent,
        command,
        parameters: Some(arguments),
        raw_text: None,
        origin: Origin::ChatTool,
        paid_by: None,
    };
    match commands::execute(services, call).await {
        Ok(CommandOutcome::Answered(answer)) => ToolResult {
            response: &truncate(&answer.response),
            format: answer.format,
            media_url: answer.media_url.as_deref(),
            status_url: None,
        }
        .text(),
        Ok(CommandOutcome::Queued { job_id }) => ToolResult {
            response: &commands::accepted(command),
            format: command.def.response_format,
            media_url: None,
            status_url: Some(&super::jobs::status_url(&services.public_base_url, &job_id)),
        }
        .text(),
        Err(err) => format!("Error: {}", truncate(&err.to_string())),
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

    use crate::domain::{AgentDef, CommandDef, HandlerType, ParamSpec, ParamType, X402Settings};

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
                },
                mcp_open: false,
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
        let prompt = system_prompt(&agent(facts), "when does the office open", false);
        assert!(prompt.starts_with("You are Helper (@helper). Kind and brief."));
        assert!(prompt.contains("- The office opens at 9:00 on weekdays."));
        assert!(prompt.len() < KNOWLEDGE_BUDGET_CHARS + 500, "within the budget");
        assert!(!prompt.contains("tools"));
    }

    #[test]
    fn commands_become_json_schema_tools() {
        let command = Command {
            id: "c".into(),
            agent_id: "a".into(),
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
                    },
                    ParamSpec {
                        name: "days".into(),
                        kind: ParamType::Number,
                        required: false,
                        description: String::new(),
                    },
                ],
                response_format: ResponseFormat::Text,
                enabled: true,
                integrations: vec![],
                price: None,
                config: json!({}),
                plugin: None,
                allowed_hosts: vec![],
                allow_llm: false,
                long_running: false,
                timeout_ms: None,
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
        });
        assert!(tool_spec(&needs_file).is_none());
    }
}
