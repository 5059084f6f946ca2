//! The OpenAI chat-completions wire format, as an agent takes and answers it: the request
//! read into a chat, the answer and its stream chunks, and errors in OpenAI's shape.
//!
//! What is taken: `messages` (system and developer messages as the caller's instructions,
//! read after the agent's own; user, assistant and tool messages as the conversation;
//! text content only), `stream`, `stream_options.include_usage`, `max_tokens` or
//! `max_completion_tokens`, `temperature`, and `n` of 1. The agent's enabled commands are
//! its tools and run on this server, so `tools` from the request are refused and
//! `tool_choice` is ignored; `model` is not checked (answers name the agent). Other fields
//! (`top_p`, `user`, `seed`, ...) are ignored.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::llm::Role;
use crate::routes::requests::{self, ChatRequest, ChatTurn};
use crate::services::chat::{ChatInput, ChatReply};

#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    #[serde(default)]
    pub messages: Vec<InMessage>,
    /// `null` reads as absent, as OpenAI takes it.
    #[serde(default, deserialize_with = "null_as_false")]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default, deserialize_with = "crate::routes::requests::whole")]
    pub max_tokens: Option<u32>,
    #[serde(default, deserialize_with = "crate::routes::requests::whole")]
    pub max_completion_tokens: Option<u32>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default, deserialize_with = "crate::routes::requests::whole")]
    pub n: Option<u32>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
}

fn null_as_false<'de, D: serde::Deserializer<'de>>(value: D) -> Result<bool, D::Error> {
    Ok(Option::<bool>::deserialize(value)?.unwrap_or(false))
}

#[derive(Debug, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

#[derive(Debug, Deserialize)]
pub struct InMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<Content>,
    #[serde(default)]
    pub tool_calls: Option<Vec<Value>>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Value>),
}

/// An error as OpenAI's clients read it.
#[derive(Debug)]
pub struct OpenAiError {
    pub error: ApiError,
    pub param: Option<String>,
}

impl OpenAiError {
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> OpenAiError {
        OpenAiError {
            error: ApiError::validation(message),
            param: Some(param.into()),
        }
    }

    pub fn body(&self) -> Value {
        let kind = match self.error.status.as_u16() {
            400 | 404 | 409 | 413 | 422 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            429 => "rate_limit_error",
            _ => "api_error",
        };
        json!({ "error": {
            "message": self.error.message, "type": kind, "param": self.param, "code": self.error.code,
        } })
    }
}

impl From<ApiError> for OpenAiError {
    fn from(error: ApiError) -> OpenAiError {
        OpenAiError { error, param: None }
    }
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        let mut response = (self.error.status, axum::Json(self.body())).into_response();
        response.headers_mut().extend(self.error.headers);
        // OpenAI's clients retry a 5xx; a generation that failed or ran out of time is not
        // worth asking again at once (a busy model's 503 says when to retry instead).
        if matches!(
            self.error.status,
            StatusCode::BAD_GATEWAY | StatusCode::GATEWAY_TIMEOUT | StatusCode::INTERNAL_SERVER_ERROR
        ) {
            response
                .headers_mut()
                .insert("x-should-retry", HeaderValue::from_static("false"));
        }
        response
    }
}

impl CompletionRequest {
    pub fn parse(body: &[u8]) -> Result<CompletionRequest, OpenAiError> {
        let mut reader = serde_json::Deserializer::from_slice(body);
        serde_path_to_error::deserialize(&mut reader).map_err(|e| {
            let path = e.path().to_string();
            let message = format!("The request body is not a chat completion request: {}", e.inner());
            match path.as_str() {
                "." | "" => OpenAiError {
                    param: None,
                    ..OpenAiError::invalid("", message)
                },
                _ => OpenAiError::invalid(path, message),
            }
        })
    }

    /// The chat this request asks for: the last message is the one answered.
    pub fn chat_input(&self) -> Result<ChatInput, OpenAiError> {
        if self.tools.as_ref().is_some_and(|tools| !tools.is_empty()) {
            return Err(OpenAiError::invalid(
                "tools",
                "This agent's tools are its own commands, run on the server; tools from the request are not taken",
            ));
        }
        if let Some(n) = self.n.filter(|n| *n != 1) {
            return Err(OpenAiError::invalid(
                "n",
                format!("One choice is answered; n must be 1, not {n}"),
            ));
        }
        if let Some(t) = self.temperature.filter(|t| !(0.0..=2.0).contains(t)) {
            return Err(OpenAiError::invalid(
                "temperature",
                format!("temperature must be between 0 and 2, not {t}"),
            ));
        }
        let max_tokens = self.max_completion_tokens.or(self.max_tokens);
        if max_tokens == Some(0) {
            return Err(OpenAiError::invalid("max_tokens", "max_tokens must be at least 1"));
        }
        let Some((last, earlier)) = self.messages.split_last() else {
            return Err(OpenAiError::invalid("messages", "messages must not be empty"));
        };
        if last.role != "user" {
            return Err(OpenAiError::invalid(
                format!("messages[{}].role", self.messages.len() - 1),
                "The last message must be the user's: it is the one the agent answers",
            ));
        }
        let mut instructions = Vec::new();
        let mut history = Vec::new();
        for (i, message) in earlier.iter().enumerate() {
            let content = text_of(message, i)?;
            match message.role.as_str() {
                "system" | "developer" => instructions.push(content),
                "user" => history.push((Role::User, content)),
                "assistant" => history.push((Role::Assistant, with_calls(content, message))),
                // Results of calls the caller made itself: context for the agent.
                "tool" => history.push((
                    Role::User,
                    format!(
                        "Result of tool call {}: {content}",
                        message.tool_call_id.as_deref().unwrap_or("?")
                    ),
                )),
                other => {
                    return Err(OpenAiError::invalid(
                        format!("messages[{i}].role"),
                        format!("Unknown role '{other}': use system, developer, user, assistant or tool"),
                    ));
                }
            }
        }
        let message = text_of(last, self.messages.len() - 1)?;
        // The keyed chat's own limits (message, turns, characters) hold here too; the
        // instructions count as one more turn.
        let turns = history
            .iter()
            .map(|(role, content)| (*role, content.clone()))
            .chain((!instructions.is_empty()).then(|| (Role::User, instructions.concat())));
        let check = ChatRequest {
            message: message.clone(),
            conversation_history: turns
                .map(|(role, content)| ChatTurn {
                    role: match role {
                        Role::Assistant => requests::Role::Assistant,
                        _ => requests::Role::User,
                    },
                    content,
                })
                .collect(),
            tools_enabled: true,
            max_tool_calls: None,
            stream: self.stream,
        };
        check.validate().map_err(|e| OpenAiError {
            param: Some("messages".into()),
            ..OpenAiError::from(e)
        })?;
        Ok(ChatInput {
            history,
            instructions,
            tools_enabled: true,
            max_tool_calls: ChatRequest::DEFAULT_MAX_TOOL_CALLS,
            max_tokens,
            temperature: self.temperature,
            ..ChatInput::new(message)
        })
    }

    pub fn include_usage(&self) -> bool {
        self.stream_options.as_ref().is_some_and(|o| o.include_usage)
    }
}

/// A message's text: a string, or its text parts joined.
fn text_of(message: &InMessage, index: usize) -> Result<String, OpenAiError> {
    match &message.content {
        None => Ok(String::new()),
        Some(Content::Text(text)) => Ok(text.clone()),
        Some(Content::Parts(parts)) => {
            let mut text = String::new();
            for (p, part) in parts.iter().enumerate() {
                match (part["type"].as_str(), part["text"].as_str()) {
                    (Some("text"), Some(piece)) => text.push_str(piece),
                    (kind, _) => {
                        return Err(OpenAiError::invalid(
                            format!("messages[{index}].content[{p}]"),
                            format!(
                                "Only text content is taken, not {}",
                                kind.unwrap_or("a part without a type")
                            ),
                        ));
                    }
                }
            }
            Ok(text)
        }
    }
}

/// An assistant turn that called the caller's tools, told in words.
fn with_calls(content: String, message: &InMessage) -> String {
    let calls: Vec<String> = message
        .tool_calls
        .iter()
        .flatten()
        .map(|c| {
            format!(
                "[called {} with {}]",
                c["function"]["name"].as_str().unwrap_or("a tool"),
                c["function"]["arguments"].as_str().unwrap_or("{}")
            )
        })
        .collect();
    [content, calls.join(" ")]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// What every answer and chunk of one completion share.
pub struct Completion {
    pub id: String,
    pub created: i64,
    pub model: String,
}

impl Completion {
    pub fn new(model: &str) -> Completion {
        Completion {
            id: format!("chatcmpl-{}", crate::random::alphanumeric(24)),
            created: crate::clock::now_ms() / 1000,
            model: model.to_string(),
        }
    }

    pub fn answer(&self, reply: &ChatReply) -> Value {
        let tokens = (reply.usage.input_tokens, reply.usage.output_tokens);
        self.answer_text(&reply.response, tokens, finish_reason(reply))
    }

    /// An answer of `text` that took `(prompt, completion)` tokens.
    pub fn answer_text(&self, text: &str, tokens: (u64, u64), finish_reason: &str) -> Value {
        json!({
            "id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
            "choices": [{
                "index": 0,
                "message": { "role": "assistant", "content": text, "refusal": null },
                "finish_reason": finish_reason,
                "logprobs": null,
            }],
            "usage": usage(tokens),
            "system_fingerprint": null,
        })
    }

    /// One chunk of a streamed answer: `delta`, and the finish reason in the last.
    pub fn chunk(&self, delta: Value, finish_reason: Option<&str>, with_usage: bool) -> Value {
        let mut chunk = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": null }],
            "system_fingerprint": null,
        });
        if with_usage {
            chunk["usage"] = Value::Null;
        }
        chunk
    }

    /// A stream's first chunk: the assistant's role.
    pub fn opening(&self, with_usage: bool) -> Value {
        self.chunk(json!({ "role": "assistant", "content": "" }), None, with_usage)
    }

    /// A chunk of the answer's text.
    pub fn text(&self, text: &str, with_usage: bool) -> Value {
        self.chunk(json!({ "content": text }), None, with_usage)
    }

    /// A stream's last chunks: the finish, then the usage of `(prompt, completion)` tokens
    /// when `stream_options.include_usage` asked for it (then `[DONE]` follows).
    pub fn closing(&self, finish_reason: &str, tokens: (u64, u64), with_usage: bool) -> Vec<Value> {
        let mut chunks = vec![self.chunk(json!({}), Some(finish_reason), with_usage)];
        if with_usage {
            chunks.push(json!({
                "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": [], "usage": usage(tokens), "system_fingerprint": null,
            }));
        }
        chunks
    }
}

pub fn finish_reason(reply: &ChatReply) -> &'static str {
    if reply.cut_short { "length" } else { "stop" }
}

fn usage((prompt, completion): (u64, u64)) -> Value {
    json!({ "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt.saturating_add(completion) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: Value) -> Result<ChatInput, OpenAiError> {
        CompletionRequest::parse(body.to_string().as_bytes())?.chat_input()
    }

    #[test]
    fn the_conversation_becomes_instructions_history_and_the_message() {
        let input = parse(json!({
            "model": "anything",
            "messages": [
                {"role": "system", "content": "Answer in French."},
                {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":1}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "42"},
                {"role": "user", "content": "And now?"},
            ],
            "max_completion_tokens": 50, "temperature": 0.2, "top_p": 0.9, "user": "u1",
        }))
        .unwrap();
        assert_eq!(input.message, "And now?");
        assert_eq!(input.instructions, ["Answer in French."]);
        assert_eq!(
            input.history,
            [
                (Role::User, "Hi".to_string()),
                (Role::Assistant, r#"[called lookup with {"q":1}]"#.to_string()),
                (Role::User, "Result of tool call c1: 42".to_string()),
            ]
        );
        assert_eq!((input.max_tokens, input.temperature), (Some(50), Some(0.2)));
        assert!(input.tools_enabled, "the agent's own commands are its tools");
    }

    #[test]
    fn what_cannot_be_served_is_refused_naming_its_field() {
        let refused = |body: Value| parse(body).err().map(|e| (e.error.status.as_u16(), e.param)).unwrap();
        let user = json!([{"role": "user", "content": "Hi"}]);
        assert_eq!(
            refused(json!({"messages": user, "tools": [{"type": "function"}]})),
            (400, Some("tools".into()))
        );
        assert_eq!(refused(json!({"messages": user, "n": 2})), (400, Some("n".into())));
        assert_eq!(
            refused(json!({"messages": user, "temperature": 3})),
            (400, Some("temperature".into()))
        );
        assert_eq!(
            refused(json!({"messages": user, "max_tokens": 0})),
            (400, Some("max_tokens".into()))
        );
        assert_eq!(refused(json!({"messages": []})), (400, Some("messages".into())));
        assert_eq!(
            refused(json!({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]})),
            (400, Some("messages[1].role".into()))
        );
        assert_eq!(
            refused(json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})),
            (400, Some("messages[0].content[0]".into()))
        );
        assert_eq!(refused(json!({"messages": "hi"})), (400, Some("messages".into())));
        assert_eq!(
            refused(json!({"messages": [{"role": "user", "content": "x".repeat(10_001)}]})),
            (400, Some("messages".into()))
        );
        let bad = parse(json!({"messages": user, "n": 3})).err().unwrap().body();
        assert_eq!(bad["error"]["type"], "invalid_request_error");
        assert_eq!(bad["error"]["code"], "validation_error");
    }
}
