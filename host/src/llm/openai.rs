//! An OpenAI-compatible `POST {base}/chat/completions` client.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Completion, CompletionRequest, LlmError, LlmFuture, LlmProvider, Message, Role, ToolCall, Usage};

/// A message as the chat-completions API takes it.
fn wire_message(m: &Message) -> Value {
    let mut out = json!({ "role": m.role, "content": m.content });
    if m.role == Role::Assistant && !m.tool_calls.is_empty() {
        out["content"] = if m.content.is_empty() {
            Value::Null
        } else {
            json!(m.content)
        };
        out["tool_calls"] = m
            .tool_calls
            .iter()
            .map(
                |c| json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.arguments } }),
            )
            .collect();
    }
    if let Some(id) = &m.tool_call_id {
        out["tool_call_id"] = json!(id);
    }
    out
}

/// Larger answers are refused rather than held in memory.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

pub struct OpenAiProvider {
    client: reqwest::Client,
    base_url: String,
    model: String,
    api_key: Option<String>,
    timeout: Duration,
}

impl OpenAiProvider {
    pub fn new(base_url: &str, model: &str, api_key: Option<String>, timeout: Duration) -> OpenAiProvider {
        OpenAiProvider {
            // The request's own timeout bounds each call.
            client: crate::outbound::operator_client(None),
            base_url: base_url.trim_end_matches('/').to_string(),
            model: model.to_string(),
            api_key,
            timeout,
        }
    }

    async fn call(&self, request: CompletionRequest) -> Result<Completion, LlmError> {
        let mut body = json!({
            "model": self.model,
            "messages": request.messages.iter().map(wire_message).collect::<Vec<_>>(),
        });
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({ "type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters,
                    }})
                })
                .collect();
            body["tool_choice"] = json!("auto");
        }
        if let Some(max) = request.max_tokens {
            body["max_tokens"] = json!(max);
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        let mut http = self
            .client
            .post(format!("{}/chat/completions", self.base_url))
            .json(&body);
        if let Some(key) = &self.api_key {
            http = http.bearer_auth(key);
        }
        let timeout_ms = self.timeout.as_millis() as u64;
        let http = crate::telemetry::traces::propagate(http);
        let response = tokio::time::timeout(self.timeout, http.send())
            .await
            .map_err(|_| LlmError::Timeout(timeout_ms))?
            .map_err(|e| LlmError::Unreachable(e.without_url().to_string()))?;
        let status = response.status().as_u16();
        let text = tokio::time::timeout(self.timeout, response.text())
            .await
            .map_err(|_| LlmError::Timeout(timeout_ms))?
            .map_err(|e| LlmError::Unreachable(e.without_url().to_string()))?;
        if text.len() > MAX_ANSWER_BYTES {
            return Err(LlmError::BadAnswer(format!(
                "an answer larger than {MAX_ANSWER_BYTES} bytes"
            )));
        }
        let value: Value = serde_json::from_str(&text).map_err(|_| {
            if status >= 400 {
                LlmError::Refused {
                    status,
                    message: text.chars().take(300).collect(),
                }
            } else {
                LlmError::BadAnswer("not JSON".into())
            }
        })?;
        if status >= 400 {
            let message = value["error"]["message"].as_str().unwrap_or("no message").to_string();
            return Err(LlmError::Refused { status, message });
        }
        let message = &value["choices"][0]["message"];
        if !message.is_object() {
            return Err(LlmError::BadAnswer("no choices[0].message".into()));
        }
        let tool_calls: Vec<ToolCall> = message["tool_calls"]
            .as_array()
            .map(|calls| {
                calls
                    .iter()
                    .filter_map(|c| {
                        Some(ToolCall {
                            id: c["id"].as_str()?.to_string(),
                            name: c["function"]["name"].as_str()?.to_string(),
                            arguments: c["function"]["arguments"].as_str().unwrap_or("{}").to_string(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let content = message["content"].as_str().unwrap_or_default().to_string();
        if content.is_empty() && tool_calls.is_empty() {
            return Err(LlmError::BadAnswer("an empty message".into()));
        }
        let usage = value["usage"].is_object().then(|| Usage {
            input_tokens: value["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
            output_tokens: value["usage"]["completion_tokens"].as_u64().unwrap_or(0),
        });
        Ok(Completion {
            content,
            tool_calls,
            usage,
        })
    }
}

impl LlmProvider for OpenAiProvider {
    fn name(&self) -> String {
        format!("openai-compatible:{}", self.model)
    }

    fn complete(&self, request: CompletionRequest) -> LlmFuture<'_> {
        Box::pin(self.call(request))
    }
}
