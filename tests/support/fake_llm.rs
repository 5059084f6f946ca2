//! A local server speaking the OpenAI chat-completions wire format, standing in for a
//! hosted model: it records each request and answers by a test's policy.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::FakeServer;

pub type Policy = Arc<dyn Fn(&Value, usize) -> (u16, Value) + Send + Sync>;

/// An OpenAI-compatible server that records each request and answers by `policy`
/// (given the request and how many came before it). A request with `stream: true` gets
/// the answer as OpenAI streams it: chunks of a few characters, tool calls in fragments,
/// usage last when `stream_options.include_usage` asks; an answer with `chunk_delay_ms`
/// sends its chunks that far apart.
pub async fn fake_openai(policy: Policy, seen: Arc<Mutex<Vec<Value>>>) -> FakeServer {
    fake_openai_watched(policy, seen, Arc::new(AtomicUsize::new(0))).await
}

/// `fake_openai`, counting in `cut` the streams whose reader went away before their end.
pub async fn fake_openai_watched(policy: Policy, seen: Arc<Mutex<Vec<Value>>>, cut: Arc<AtomicUsize>) -> FakeServer {
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        post(move |axum::Json(body): axum::Json<Value>| {
            let (policy, seen, cut) = (policy.clone(), seen.clone(), cut.clone());
            async move {
                let n = {
                    let mut seen = seen.lock().unwrap();
                    seen.push(body.clone());
                    seen.len() - 1
                };
                let (status, mut reply) = policy(&body, n);
                if status == 200 && reply.get("choices").is_some() && reply.get("usage").is_none() {
                    reply["usage"] = usage_of(&reply);
                }
                if reply.get("sleep_ms").is_some() {
                    tokio::time::sleep(Duration::from_millis(reply["sleep_ms"].as_u64().unwrap())).await;
                }
                let status = axum::http::StatusCode::from_u16(status).unwrap();
                let mut response = if let Some(raw) = reply["raw_body"].as_str() {
                    let content_type = reply["content_type"].as_str().unwrap_or("text/plain").to_string();
                    (status, [("content-type", content_type)], raw.to_string()).into_response()
                } else if status == 200 && body["stream"] == json!(true) {
                    let usage = body["stream_options"]["include_usage"] == json!(true);
                    streamed(&reply, usage, cut.clone())
                } else {
                    (status, axum::Json(reply.clone())).into_response()
                };
                for (name, value) in reply["headers"].as_object().into_iter().flatten() {
                    let value = axum::http::HeaderValue::from_str(value.as_str().unwrap()).unwrap();
                    let name = axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap();
                    response.headers_mut().insert(name, value);
                }
                response
            }
        }),
    );
    FakeServer::start(router).await
}

/// Notes a stream dropped before its last chunk.
struct CutWatch {
    finished: bool,
    cut: Arc<AtomicUsize>,
}

impl Drop for CutWatch {
    fn drop(&mut self) {
        if !self.finished {
            self.cut.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// What the stand-in says an answer took: 10 prompt tokens, a token per 4 characters
/// (and one per tool call) of completion.
fn usage_of(reply: &Value) -> Value {
    let message = &reply["choices"][0]["message"];
    let chars = message["content"].as_str().unwrap_or("").chars().count();
    let calls = message["tool_calls"].as_array().map_or(0, Vec::len);
    let completion = (chars.div_ceil(4) + calls) as u64;
    json!({ "prompt_tokens": 10, "completion_tokens": completion, "total_tokens": 10 + completion })
}

/// A chat completion as the chunks OpenAI streams it in.
fn chunks(reply: &Value, with_usage: bool) -> Vec<String> {
    let message = &reply["choices"][0]["message"];
    let chunk = |delta: Value, finish: Value| {
        let mut chunk = json!({ "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] });
        if with_usage {
            chunk["usage"] = Value::Null;
        }
        chunk.to_string()
    };
    let mut out = vec![chunk(json!({ "role": "assistant", "content": "" }), Value::Null)];
    let content: Vec<char> = message["content"].as_str().unwrap_or("").chars().collect();
    for piece in content.chunks(4) {
        out.push(chunk(
            json!({ "content": piece.iter().collect::<String>() }),
            Value::Null,
        ));
    }
    let calls = message["tool_calls"].as_array().cloned().unwrap_or_default();
    for (index, call) in calls.iter().enumerate() {
        let arguments = call["function"]["arguments"].as_str().unwrap_or("");
        let (first, rest) = arguments.split_at(arguments.len() / 2);
        out.push(chunk(
            json!({ "tool_calls": [{ "index": index, "id": call["id"], "type": "function",
                "function": { "name": call["function"]["name"], "arguments": "" } }] }),
            Value::Null,
        ));
        for part in [first, rest] {
            out.push(chunk(
                json!({ "tool_calls": [{ "index": index, "function": { "arguments": part } }] }),
                Value::Null,
            ));
        }
    }
    let finish = if calls.is_empty() { "stop" } else { "tool_calls" };
    out.push(chunk(json!({}), json!(finish)));
    if with_usage {
        let usage = &reply["usage"];
        out.push(
            json!({ "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
                "choices": [], "usage": usage })
            .to_string(),
        );
    }
    out.push("[DONE]".into());
    out
}

fn streamed(reply: &Value, with_usage: bool, cut: Arc<AtomicUsize>) -> Response {
    let delay = Duration::from_millis(reply["chunk_delay_ms"].as_u64().unwrap_or(0));
    let mut all = chunks(reply, with_usage);
    if reply["cut_stream"] == json!(true) {
        // The connection closes mid-answer: no finish reason, no usage, no [DONE].
        all.truncate(all.len() / 2);
    }
    let pending: std::collections::VecDeque<String> = all.into();
    let watch = CutWatch { finished: false, cut };
    let body = futures_util::stream::unfold((pending, watch), move |(mut pending, mut watch)| async move {
        let data = pending.pop_front()?;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        watch.finished = pending.is_empty();
        Some((
            Ok::<_, std::convert::Infallible>(format!("data: {data}\n\n")),
            (pending, watch),
        ))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(axum::body::Body::from_stream(body))
        .unwrap()
}

pub fn text(content: &str) -> (u16, Value) {
    (
        200,
        json!({ "id": "c", "object": "chat.completion", "choices": [{ "index": 0, "finish_reason": "stop",
        "message": { "role": "assistant", "content": content } }] }),
    )
}

/// [`text`], with the tokens the provider says it took (`usage`).
pub fn text_with_usage(content: &str, prompt_tokens: u64, completion_tokens: u64) -> (u16, Value) {
    let (status, mut body) = text(content);
    body["usage"] = json!({ "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens });
    (status, body)
}

/// The provider's own error answer, as OpenAI words it.
pub fn refusal(status: u16, message: &str) -> (u16, Value) {
    (
        status,
        json!({ "error": { "message": message, "type": "server_error" } }),
    )
}

/// What a proxy in front of the provider answers when the provider is down: an HTML page.
pub fn html_page(status: u16) -> (u16, Value) {
    let page = format!(
        "<html><head><title>{status} Bad Gateway</title></head><body><center><h1>{status} Bad Gateway</h1></center><hr><center>nginx</center></body></html>"
    );
    (status, json!({ "raw_body": page, "content_type": "text/html" }))
}

/// OpenAI's rate-limit refusal, with the `retry-after` it sends.
pub fn rate_limited(retry_after_secs: u64) -> (u16, Value) {
    (
        429,
        json!({ "error": { "message": "Rate limit reached for gpt-4o-mini in organization org-Secret123 on requests per min (RPM): Limit 3, Used 3, Requested 1.", "type": "requests", "code": "rate_limit_exceeded" },
                "headers": { "retry-after": retry_after_secs.to_string() } }),
    )
}

/// A 200 whose body is not JSON (a misconfigured gateway's page).
pub fn not_json() -> (u16, Value) {
    (
        200,
        json!({ "raw_body": "upstream connect error or disconnect/reset before headers", "content_type": "text/plain" }),
    )
}

/// Text that stopped at its token limit: `finish_reason: "length"`.
pub fn cut_at_limit(content: &str) -> (u16, Value) {
    let (status, mut reply) = text(content);
    reply["choices"][0]["finish_reason"] = json!("length");
    (status, reply)
}

/// A tool call whose arguments stopped at the token limit, half a JSON document.
pub fn tool_call_cut_at_limit(id: &str, name: &str) -> (u16, Value) {
    let (status, mut reply) = tool_call(id, name, json!({}));
    reply["choices"][0]["finish_reason"] = json!("length");
    reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = json!("{\"name\": \"An");
    (status, reply)
}

/// An answer whose stream the connection cuts halfway (when it is asked for a stream).
pub fn cut_stream(content: &str) -> (u16, Value) {
    let (status, mut reply) = text(content);
    reply["cut_stream"] = json!(true);
    (status, reply)
}

pub fn tool_call(id: &str, name: &str, arguments: Value) -> (u16, Value) {
    (
        200,
        json!({ "id": "c", "object": "chat.completion", "choices": [{ "index": 0, "finish_reason": "tool_calls",
        "message": { "role": "assistant", "content": null, "tool_calls": [
            { "id": id, "type": "function", "function": { "name": name, "arguments": arguments.to_string() } }] } }] }),
    )
}

/// A model that calls the tool its user names (`call NAME {json}`), then says what the tool
/// answered.
pub fn calls_named_tools() -> Policy {
    Arc::new(|request, n| {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or_default();
        if last["role"] == "tool" {
            let said: String = last["content"].as_str().unwrap_or_default().chars().take(200).collect();
            return text(&format!("The tool said: {said}"));
        }
        let asked = last["content"].as_str().unwrap_or_default().to_string();
        match asked.strip_prefix("call ").and_then(|rest| rest.split_once(' ')) {
            Some((name, arguments)) if request.get("tools").is_some() => {
                tool_call(&format!("c{n}"), name, serde_json::from_str(arguments).unwrap())
            }
            _ => text("No tool for that."),
        }
    })
}
