//! The fixed reference of `http-load.sh`: a bare axum server on the same tokio runtime
//! kind as agent-host, with no key check, no store and no plugin. It answers the routes the
//! script loads with the same JSON bodies agent-host does (execute parses its request body
//! as JSON, as agent-host does), so the ratio to it is what agent-host's own work costs.
//! `bare_server PORT`.

use axum::routing::{get, post};
use serde_json::{Value, json};

#[tokio::main]
async fn main() {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(18998);
    let router = axum::Router::new()
        .route("/health", get(|| async { axum::Json(json!({ "status": "ok" })) }))
        .route(
            "/v1/agents/{agent}/commands",
            get(|| async {
                axum::Json(
                    json!({ "success": true, "data": { "agent_id": "agt_0", "agent_username": "helper",
                    "commands": [{ "command": "hello", "handler_type": "simple_text" }] } }),
                )
            }),
        )
        .route(
            "/v1/agents/{agent}/commands/{command}/execute",
            post(|axum::Json(body): axum::Json<Value>| async move {
                let name = body["parameters"]["name"].as_str().unwrap_or("you").to_string();
                axum::Json(json!({ "success": true, "data": { "command": "hello", "result": {
                    "success": true, "response": format!("Hello, {name}!"), "format": "text",
                    "mediaUrl": null, "statusUrl": null } } }))
            }),
        );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
    axum::serve(listener, router).await.expect("serve");
}
