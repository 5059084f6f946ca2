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
                if status == 200 && body["stream"] == json!(true) {
                    let usage = body["stream_options"]["include_usage"] == json!(true);
                    return streamed(&reply, usage, cut.clone());
                }
                (axum::http::StatusCode::from_u16(status).unwrap(), axum::Json(reply)).into_response()
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
    let pending: std::collections::VecDeque<String> = chunks(reply, with_usage).into();
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

/// The provider's own error answer, as OpenAI words it.
pub fn refusal(status: u16, message: &str) -> (u16, Value) {
    (
        status,
        json!({ "error": { "message": message, "type": "server_error" } }),
    )
}

pub fn tool_call(id: &str, name: &str, arguments: Value) -> (u16, Value) {
    (
        200,
        json!({ "id": "c", "object": "chat.completion", "choices": [{ "index": 0, "finish_reason": "tool_calls",
        "message": { "role": "assistant", "content": null, "tool_calls": [
            { "id": id, "type": "function", "function": { "name": name, "arguments": arguments.to_string() } }] } }] }),
    )
}
