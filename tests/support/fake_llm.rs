//! A local server speaking the OpenAI chat-completions wire format, standing in for a
//! hosted model: it records each request and answers by a test's policy.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::post;
use serde_json::{Value, json};

use super::FakeServer;

pub type Policy = Arc<dyn Fn(&Value, usize) -> (u16, Value) + Send + Sync>;

/// An OpenAI-compatible server that records each request and answers by `policy`
/// (given the request and how many came before it).
pub async fn fake_openai(policy: Policy, seen: Arc<Mutex<Vec<Value>>>) -> FakeServer {
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        post(move |axum::Json(body): axum::Json<Value>| {
            let (policy, seen) = (policy.clone(), seen.clone());
            async move {
                let n = {
                    let mut seen = seen.lock().unwrap();
                    seen.push(body.clone());
                    seen.len() - 1
                };
                let (status, reply) = policy(&body, n);
                if reply.get("sleep_ms").is_some() {
                    tokio::time::sleep(Duration::from_millis(reply["sleep_ms"].as_u64().unwrap())).await;
                }
                (axum::http::StatusCode::from_u16(status).unwrap(), axum::Json(reply))
            }
        }),
    );
    FakeServer::start(router).await
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
