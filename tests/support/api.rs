//! One helper per keyed API call the tests make, each returning the reply as the server
//! sent it; the test asserts what it expects of it.

use serde_json::{Value, json};

use super::{Reply, TestServer, post_json};

/// `POST /v1/agents/{agent}/commands/{command}/execute` with `body` as sent.
pub async fn execute(server: &TestServer, key: &str, agent: &str, command: &str, body: &Value) -> Reply {
    let url = server.url(&format!("/v1/agents/{agent}/commands/{command}/execute"));
    post_json(&url, Some(key), body).await
}

/// The same with only named parameters: `{"parameters": parameters}`.
pub async fn execute_with(server: &TestServer, key: &str, agent: &str, command: &str, parameters: Value) -> Reply {
    execute(server, key, agent, command, &json!({ "parameters": parameters })).await
}

/// The command's response text in an execute reply, or "" when it has none.
pub fn response_text(reply: &Reply) -> String {
    reply.json()["data"]["result"]["response"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The response text of an execute reply that must have succeeded.
pub fn answered(reply: &Reply) -> String {
    assert_eq!(reply.status, 200, "{}", reply.text);
    let body = reply.json();
    assert_eq!(body["success"], true, "{body}");
    assert_eq!(body["data"]["result"]["success"], true, "{body}");
    let response = body["data"]["result"]["response"].as_str();
    response.expect("a response text").to_string()
}

/// `POST /v1/agents/{agent}/chat` with `body` as sent.
pub async fn chat(server: &TestServer, key: &str, agent: &str, body: &Value) -> Reply {
    post_json(&server.url(&format!("/v1/agents/{agent}/chat")), Some(key), body).await
}
