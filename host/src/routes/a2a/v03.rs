//! A2A 0.3, beside 1.0: many deployed clients (and x402's A2A extension's own examples)
//! still speak it. Its agent's URL is `/a2a/{agentId}/v0.3`, its card under it; its calls
//! are translated into 1.0's and answered by the same code, their results translated back.
//! What differs is the wire only: method names (`message/send`), a `kind` on every object,
//! lower-case states and roles, `blocking` for `returnImmediately`, parts as `{kind, text}`.
//! Push notifications are 1.0's alone.

use serde_json::{Map, Value, json};

use super::rpc::{Call, RpcError};

/// The version this dialect names on its card.
pub const PROTOCOL_VERSION: &str = "0.3.0";

/// A 0.3 call as the 1.0 call it asks for; or why it cannot be one.
pub fn call(call: Call) -> Result<Call, RpcError> {
    let Call { id, method, params } = call;
    let (method, params) = match method.as_str() {
        "message/send" => ("SendMessage", send_params(params)?),
        "message/stream" => ("SendStreamingMessage", send_params(params)?),
        "tasks/get" => ("GetTask", params),
        "tasks/cancel" => ("CancelTask", params),
        "tasks/resubscribe" => ("SubscribeToTask", params),
        "agent/getAuthenticatedExtendedCard" => ("GetExtendedAgentCard", params),
        push if push.starts_with("tasks/pushNotificationConfig/") => {
            return Err(RpcError::new(
                -32003,
                "PUSH_NOTIFICATION_NOT_SUPPORTED",
                "Push notifications are offered over A2A 1.0 (the agent's URL without /v0.3)",
            ));
        }
        other => {
            return Err(RpcError::new(
                -32601,
                "METHOD_NOT_FOUND",
                format!("Method '{other}' not found (this is A2A {PROTOCOL_VERSION})"),
            ));
        }
    };
    Ok(Call {
        id,
        method: method.to_string(),
        params,
    })
}

/// `MessageSendParams` as 1.0's `SendMessageRequest`.
fn send_params(params: Value) -> Result<Value, RpcError> {
    let Value::Object(mut params) = params else {
        return Err(RpcError::invalid_params("params must be an object"));
    };
    let message = match params.remove("message") {
        Some(Value::Object(message)) => message_in(message)?,
        Some(_) => return Err(RpcError::invalid_params("params.message must be an object")),
        None => Value::Null,
    };
    let mut request = json!({ "message": message });
    if let Some(Value::Object(configuration)) = params.remove("configuration") {
        if configuration
            .get("pushNotificationConfig")
            .is_some_and(|c| !c.is_null())
        {
            return Err(RpcError::new(
                -32003,
                "PUSH_NOTIFICATION_NOT_SUPPORTED",
                "Push notifications are offered over A2A 1.0 (the agent's URL without /v0.3)",
            ));
        }
        let mut translated = Map::new();
        if configuration.get("blocking") == Some(&Value::Bool(false)) {
            translated.insert("returnImmediately".into(), json!(true));
        }
        if let Some(length) = configuration.get("historyLength") {
            translated.insert("historyLength".into(), length.clone());
        }
        request["configuration"] = Value::Object(translated);
    }
    Ok(request)
}

/// A client's 0.3 message as 1.0's: its role's name and its parts' shape.
fn message_in(mut message: Map<String, Value>) -> Result<Value, RpcError> {
    let role = match message.get("role").and_then(Value::as_str) {
        Some("user") => "ROLE_USER",
        Some("agent") => "ROLE_AGENT",
        _ => "",
    };
    message.insert("role".into(), json!(role));
    message.remove("kind");
    if let Some(Value::Array(parts)) = message.remove("parts") {
        let parts: Result<Vec<Value>, RpcError> = parts.into_iter().map(part_in).collect();
        message.insert("parts".into(), Value::Array(parts?));
    }
    Ok(Value::Object(message))
}

fn part_in(part: Value) -> Result<Value, RpcError> {
    let Value::Object(mut part) = part else {
        return Err(RpcError::invalid_params("each part must be an object"));
    };
    let kind = part.remove("kind");
    Ok(match kind.as_ref().and_then(Value::as_str) {
        Some("text") => json!({ "text": part.remove("text").unwrap_or(Value::Null) }),
        Some("data") => json!({ "data": part.remove("data").unwrap_or(Value::Null) }),
        // A file, by bytes or address: 1.0's `raw` or `url`, refused as 1.0 refuses it.
        Some("file") => json!({ "url": part.remove("file").unwrap_or(Value::Null) }),
        _ => return Err(RpcError::invalid_params("each part has a kind: text, data or file")),
    })
}

/// A 1.0 result as 0.3 writes it. `SendMessage`'s `{task}` is the task itself; a stream's
/// events carry their `kind`.
pub fn result(method: &str, result: Value) -> Value {
    match method {
        "SendMessage" => match result.get("task") {
            Some(task) => task_out(task),
            None => result,
        },
        "GetTask" | "CancelTask" => task_out(&result),
        _ => result,
    }
}

/// One event of a 1.0 stream (`StreamResponse`) as a 0.3 stream's; `last` when the stream
/// ends after it.
pub fn event(event: &Value, last: bool) -> Value {
    if let Some(task) = event.get("task") {
        return task_out(task);
    }
    if let Some(update) = event.get("statusUpdate") {
        let status = status_out(&update["status"]);
        // 0.3 marks the last event: the task ended or waits for its client, or the stream
        // ends anyway.
        let last = last || !matches!(status["state"].as_str(), Some("working" | "submitted"));
        return json!({
            "kind": "status-update",
            "taskId": update["taskId"],
            "contextId": update["contextId"],
            "status": status,
            "final": last,
        });
    }
    if let Some(update) = event.get("artifactUpdate") {
        return json!({
            "kind": "artifact-update",
            "taskId": update["taskId"],
            "contextId": update["contextId"],
            "artifact": artifact_out(&update["artifact"]),
            "append": update["append"],
            "lastChunk": update["lastChunk"],
        });
    }
    event.clone()
}

fn task_out(task: &Value) -> Value {
    let mut out = json!({
        "kind": "task",
        "id": task["id"],
        "contextId": task["contextId"],
        "status": status_out(&task["status"]),
    });
    if let Some(history) = task["history"].as_array() {
        out["history"] = history.iter().map(message_out).collect();
    }
    if let Some(artifacts) = task["artifacts"].as_array() {
        out["artifacts"] = artifacts.iter().map(artifact_out).collect();
    }
    if !task["metadata"].is_null() {
        out["metadata"] = task["metadata"].clone();
    }
    out
}

fn status_out(status: &Value) -> Value {
    let state = status["state"]
        .as_str()
        .and_then(|s| s.strip_prefix("TASK_STATE_"))
        .map(|s| s.to_ascii_lowercase().replace('_', "-"))
        .unwrap_or_else(|| "unknown".into());
    let mut out = json!({ "state": state, "timestamp": status["timestamp"] });
    if status["message"].is_object() {
        out["message"] = message_out(&status["message"]);
    }
    out
}

fn message_out(message: &Value) -> Value {
    let mut out = message.clone();
    out["kind"] = json!("message");
    out["role"] = json!(match message["role"].as_str() {
        Some("ROLE_AGENT") => "agent",
        _ => "user",
    });
    if let Some(parts) = message["parts"].as_array() {
        out["parts"] = parts.iter().map(part_out).collect();
    }
    out
}

fn artifact_out(artifact: &Value) -> Value {
    let mut out = artifact.clone();
    if let Some(parts) = artifact["parts"].as_array() {
        out["parts"] = parts.iter().map(part_out).collect();
    }
    out
}

fn part_out(part: &Value) -> Value {
    if let Some(text) = part.get("text") {
        return json!({ "kind": "text", "text": text });
    }
    if let Some(data) = part.get("data") {
        return json!({ "kind": "data", "data": data });
    }
    if let Some(url) = part.get("url") {
        return json!({ "kind": "file", "file": { "uri": url, "mimeType": part["mediaType"] } });
    }
    part.clone()
}

/// The card as 0.3 writes one: its endpoint in `url`, its schemes by `type`, no signature
/// (1.0's canonical form is not 0.3's).
pub fn card(card: &Value, url: &str) -> Value {
    let mut out = json!({
        "protocolVersion": PROTOCOL_VERSION,
        "name": card["name"],
        "description": card["description"],
        "url": url,
        "preferredTransport": "JSONRPC",
        "version": card["version"],
        "provider": card["provider"],
        "capabilities": {
            "streaming": true,
            "pushNotifications": false,
            "extensions": card["capabilities"]["extensions"],
        },
        "defaultInputModes": card["defaultInputModes"],
        "defaultOutputModes": card["defaultOutputModes"],
        "skills": card["skills"],
    });
    let mut schemes = Map::new();
    if let Some(given) = card["securitySchemes"].as_object() {
        for (name, scheme) in given {
            if let Some(s) = scheme.get("apiKeySecurityScheme") {
                schemes.insert(
                    name.clone(),
                    json!({ "type": "apiKey", "in": s["location"], "name": s["name"], "description": s["description"] }),
                );
            } else if let Some(s) = scheme.get("httpAuthSecurityScheme") {
                schemes.insert(
                    name.clone(),
                    json!({ "type": "http", "scheme": "bearer", "description": s["description"] }),
                );
            } else if let Some(s) = scheme.get("oauth2SecurityScheme") {
                schemes.insert(
                    name.clone(),
                    json!({ "type": "oauth2", "description": s["description"], "flows": s["flows"], "oauth2MetadataUrl": s["oauth2MetadataUrl"] }),
                );
            }
        }
    }
    out["securitySchemes"] = Value::Object(schemes);
    if let Some(requirements) = card["securityRequirements"].as_array() {
        let security: Vec<Value> = requirements
            .iter()
            .filter_map(|r| r["schemes"].as_object())
            .map(|schemes| {
                Value::Object(
                    schemes
                        .iter()
                        .map(|(name, list)| (name.clone(), list["list"].clone()))
                        .collect(),
                )
            })
            .collect();
        out["security"] = Value::Array(security);
    }
    out
}
