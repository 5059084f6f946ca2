//! An OpenAI-compatible `POST {base}/chat/completions` client.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{
    Completion, CompletionRequest, LlmError, LlmFuture, LlmProvider, Message, Role, TextSink, ToolCall, Usage,
};

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
    /// Until when (ms since the epoch) the provider asked this server to wait after a 429:
    /// a paid message is refused before anyone pays meanwhile, not settled, failed and
    /// refunded at the agent's expense.
    limited_until_ms: std::sync::atomic::AtomicI64,
}

impl OpenAiProvider {
    pub fn new(base_url: &str, model: &str, api_key: Option<String>, timeout: Duration) -> OpenAiProvider {
        OpenAiProvider {
            // The request's own timeout bounds each call.
            client: crate::outbound::operator_client(None),
            base_url: base_url.trim_end_matches('/').to_string(),
            model: model.to_string(),
            limited_until_ms: std::sync::atomic::AtomicI64::new(0),
            api_key,
            timeout,
        }
    }

    fn body(&self, request: &CompletionRequest, stream: bool) -> Value {
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
        if stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({ "include_usage": true });
        }
        body
    }

    fn timed_out(&self) -> LlmError {
        LlmError::Timeout(self.timeout.as_millis() as u64)
    }

    /// Sends the request; a refusal (4xx, 5xx) is read whole and told as one.
    async fn send(&self, body: &Value, deadline: Instant) -> Result<reqwest::Response, LlmError> {
        let mut http = self
            .client
            .post(format!("{}/chat/completions", self.base_url))
            .json(body);
        if let Some(key) = &self.api_key {
            http = http.bearer_auth(key);
        }
        let http = crate::telemetry::traces::propagate(http);
        let response = tokio::time::timeout_at(deadline.into(), http.send())
            .await
            .map_err(|_| self.timed_out())?
            .map_err(|e| LlmError::Unreachable(e.without_url().to_string()))?;
        let status = response.status().as_u16();
        if status < 400 {
            return Ok(response);
        }
        let retry_after_secs = retry_after(response.headers());
        let text = self.read_whole(response, deadline).await?;
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| text.chars().take(300).collect());
        if status == 429 {
            let until = crate::clock::now_ms() + retry_after_secs as i64 * 1000;
            self.limited_until_ms
                .fetch_max(until, std::sync::atomic::Ordering::Relaxed);
            return Err(LlmError::RateLimited {
                retry_after_secs,
                message,
            });
        }
        Err(LlmError::Refused { status, message })
    }

    async fn read_whole(&self, response: reqwest::Response, deadline: Instant) -> Result<String, LlmError> {
        let text = tokio::time::timeout_at(deadline.into(), response.text())
            .await
            .map_err(|_| self.timed_out())?
            .map_err(|e| LlmError::Unreachable(e.without_url().to_string()))?;
        if text.len() > MAX_ANSWER_BYTES {
            return Err(LlmError::BadAnswer(format!(
                "an answer larger than {MAX_ANSWER_BYTES} bytes"
            )));
        }
        Ok(text)
    }

    async fn call(&self, request: CompletionRequest) -> Result<Completion, LlmError> {
        // One deadline for the whole call: sending, waiting and reading.
        let deadline = Instant::now() + self.timeout;
        let response = self.send(&self.body(&request, false), deadline).await?;
        let text = self.read_whole(response, deadline).await?;
        let value: Value = serde_json::from_str(&text).map_err(|_| LlmError::BadAnswer("not JSON".into()))?;
        completion(&value)
    }

    /// Asks for a stream and reads its events as they come. A provider that answers with
    /// one JSON body instead is read as such; one that refuses `stream_options` (some
    /// servers check every field) is asked once more without it.
    async fn call_streaming(&self, request: CompletionRequest, text: TextSink) -> Result<Completion, LlmError> {
        let deadline = Instant::now() + self.timeout;
        let mut body = self.body(&request, true);
        let mut response = match self.send(&body, deadline).await {
            Err(LlmError::Refused { status: 400, .. }) => {
                if let Some(fields) = body.as_object_mut() {
                    fields.remove("stream_options");
                }
                self.send(&body, deadline).await?
            }
            sent => sent?,
        };
        let is_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_stream {
            let body = self.read_whole(response, deadline).await?;
            let value: Value = serde_json::from_str(&body).map_err(|_| LlmError::BadAnswer("not JSON".into()))?;
            let completion = completion(&value)?;
            if !completion.content.is_empty() {
                text(&completion.content);
            }
            return Ok(completion);
        }
        let mut events = SseEvents::default();
        let mut joined = Joined::default();
        let read = async {
            let mut received = 0usize;
            while let Some(bytes) = response
                .chunk()
                .await
                .map_err(|e| LlmError::Unreachable(e.without_url().to_string()))?
            {
                received += bytes.len();
                if received > MAX_ANSWER_BYTES {
                    return Err(LlmError::BadAnswer(format!(
                        "an answer larger than {MAX_ANSWER_BYTES} bytes"
                    )));
                }
                for data in events.push(&bytes) {
                    if data == "[DONE]" {
                        return Ok(());
                    }
                    let chunk: Value = serde_json::from_str(&data)
                        .map_err(|_| LlmError::BadAnswer("a stream event that is not JSON".into()))?;
                    if let Some(piece) = joined.add(&chunk)?
                        && !text(&piece)
                    {
                        return Err(LlmError::Unreachable("the stream's reader went away".into()));
                    }
                }
            }
            // Some servers close without `[DONE]` after the last choice; a stream that
            // closed before any finish reason was cut, and half an answer is no answer.
            if joined.finished {
                Ok(())
            } else {
                Err(LlmError::Unreachable("the stream ended before the answer did".into()))
            }
        };
        tokio::time::timeout_at(deadline.into(), read)
            .await
            .map_err(|_| self.timed_out())??;
        joined.finish()
    }
}

/// A chat completion's message, its tool calls and usage.
fn completion(value: &Value) -> Result<Completion, LlmError> {
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
    let cut_short = value["choices"][0]["finish_reason"] == "length";
    answer(content, tool_calls, usage(&value["usage"]), cut_short)
}

/// A completion as the chat can use it: something said or asked for, and no tool call
/// cut at the token limit (its arguments would be half a JSON document).
fn answer(
    content: String,
    tool_calls: Vec<ToolCall>,
    usage: Option<Usage>,
    cut_short: bool,
) -> Result<Completion, LlmError> {
    if content.is_empty() && tool_calls.is_empty() {
        return Err(LlmError::BadAnswer("an empty message".into()));
    }
    if cut_short && !tool_calls.is_empty() {
        return Err(LlmError::BadAnswer("a tool call cut at the token limit".into()));
    }
    Ok(Completion {
        content,
        tool_calls,
        usage,
        cut_short,
    })
}

fn usage(value: &Value) -> Option<Usage> {
    value.is_object().then(|| Usage {
        input_tokens: value["prompt_tokens"].as_u64().unwrap_or(0),
        output_tokens: value["completion_tokens"].as_u64().unwrap_or(0),
    })
}

/// The provider's `Retry-After` in seconds (1 to 300; 5 when it names none or a date).
fn retry_after(headers: &reqwest::header::HeaderMap) -> u64 {
    let seconds = headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()));
    // Digits too many for a u64 are a very long wait, not none.
    seconds
        .map_or(5, |v| v.parse::<u64>().unwrap_or(u64::MAX))
        .clamp(1, 300)
}

/// Server-sent events cut from a byte stream: the data of each event, its lines joined.
#[derive(Default)]
struct SseEvents {
    buffer: Vec<u8>,
    /// How much of the buffer is known to hold no event's end.
    scanned: usize,
}

impl SseEvents {
    fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buffer.extend(bytes.iter().filter(|b| **b != b'\r'));
        let mut events = Vec::new();
        loop {
            let from = self.scanned.saturating_sub(1);
            let Some(at) = self.buffer[from..].windows(2).position(|w| w == b"\n\n") else {
                self.scanned = self.buffer.len();
                break;
            };
            let end = from + at;
            self.scanned = 0;
            let event: Vec<u8> = self.buffer.drain(..end + 2).collect();
            let event = String::from_utf8_lossy(&event);
            let data: Vec<&str> = event
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if !data.is_empty() {
                events.push(data.join("\n"));
            }
        }
        events
    }
}

/// A streamed completion put back together: its text, its tool calls joined by index
/// from their fragments, the usage the last chunk carries and how it finished.
#[derive(Default)]
struct Joined {
    content: String,
    calls: Vec<ToolCall>,
    usage: Option<Usage>,
    /// A chunk named the finish reason: the answer is whole (or cut at its limit).
    finished: bool,
    cut_short: bool,
}

impl Joined {
    /// Takes one chunk; the text it adds, if any.
    fn add(&mut self, chunk: &Value) -> Result<Option<String>, LlmError> {
        if let Some(message) = chunk["error"]["message"].as_str() {
            return Err(LlmError::Refused {
                status: 200,
                message: message.to_string(),
            });
        }
        if let Some(usage) = usage(&chunk["usage"]) {
            self.usage = Some(usage);
        }
        if let Some(reason) = chunk["choices"][0]["finish_reason"].as_str() {
            self.finished = true;
            self.cut_short = reason == "length";
        }
        let delta = &chunk["choices"][0]["delta"];
        for fragment in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = fragment["index"].as_u64().unwrap_or(0) as usize;
            if index > 64 {
                return Err(LlmError::BadAnswer("a tool call index past 64".into()));
            }
            while self.calls.len() <= index {
                self.calls.push(ToolCall {
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                });
            }
            let call = &mut self.calls[index];
            if let Some(id) = fragment["id"].as_str() {
                call.id = id.to_string();
            }
            if let Some(name) = fragment["function"]["name"].as_str() {
                call.name.push_str(name);
            }
            if let Some(arguments) = fragment["function"]["arguments"].as_str() {
                call.arguments.push_str(arguments);
            }
        }
        let piece = delta["content"].as_str().filter(|t| !t.is_empty()).map(str::to_string);
        if let Some(piece) = &piece {
            self.content.push_str(piece);
        }
        Ok(piece)
    }

    fn finish(self) -> Result<Completion, LlmError> {
        let tool_calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .filter(|c| !c.id.is_empty() && !c.name.is_empty())
            .collect();
        answer(self.content, tool_calls, self.usage, self.cut_short)
    }
}

impl LlmProvider for OpenAiProvider {
    fn name(&self) -> String {
        format!("openai-compatible:{}", self.model)
    }

    fn ready(&self) -> Result<(), LlmError> {
        let until = self.limited_until_ms.load(std::sync::atomic::Ordering::Relaxed);
        let left_ms = until - crate::clock::now_ms();
        if left_ms > 0 {
            return Err(LlmError::RateLimited {
                retry_after_secs: (left_ms as u64).div_ceil(1000),
                message: "the provider asked this server to wait".into(),
            });
        }
        Ok(())
    }

    fn complete(&self, request: CompletionRequest) -> LlmFuture<'_> {
        Box::pin(self.call(request))
    }

    fn stream(&self, request: CompletionRequest, text: TextSink) -> LlmFuture<'_> {
        Box::pin(self.call_streaming(request, text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_cut_wherever_the_bytes_break() {
        let wire =
            ": keep-alive\r\n\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: line one\ndata: line two\n\ndata: [DONE]\n\n";
        for size in [1, 3, wire.len()] {
            let mut events = SseEvents::default();
            let seen: Vec<String> = wire.as_bytes().chunks(size).flat_map(|c| events.push(c)).collect();
            assert_eq!(
                seen,
                ["{\"a\":1}", "line one\nline two", "[DONE]"],
                "in pieces of {size}"
            );
        }
    }

    #[test]
    fn a_streamed_answer_is_joined_with_its_tool_calls_and_usage() {
        let chunks = [
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "Let me "}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "check."}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": "call_1", "type": "function", "function": {"name": "weather", "arguments": ""}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "\"Oslo\"}"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}}),
        ];
        let mut joined = Joined::default();
        let pieces: Vec<String> = chunks.iter().filter_map(|c| joined.add(c).unwrap()).collect();
        assert_eq!(pieces, ["Let me ", "check."]);
        let completion = joined.finish().unwrap();
        assert_eq!(completion.content, "Let me check.");
        assert_eq!(
            completion.tool_calls,
            [ToolCall {
                id: "call_1".into(),
                name: "weather".into(),
                arguments: r#"{"city":"Oslo"}"#.into()
            }]
        );
        assert_eq!(
            completion.usage,
            Some(Usage {
                input_tokens: 12,
                output_tokens: 7
            })
        );
        let mut failed = Joined::default();
        assert!(matches!(
            failed.add(&json!({"error": {"message": "overloaded"}})),
            Err(LlmError::Refused { .. })
        ));
    }
}
