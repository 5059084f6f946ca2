//! An OpenAI-compatible chat-completions server that answers at once with a fixed reply,
//! so chat-overhead.sh measures the host, not a model. `fake_openai PORT`.

use axum::routing::post;
use serde_json::json;

#[tokio::main]
async fn main() {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(18999);
    let reply = json!({ "id": "c", "object": "chat.completion", "choices": [{ "index": 0, "finish_reason": "stop",
        "message": { "role": "assistant", "content": "We open at 9:00." } }] });
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let reply = reply.clone();
            async move { axum::Json(reply) }
        }),
    );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
    axum::serve(listener, router).await.expect("serve");
}
