//! The OpenAPI 3.1 description served at `/openapi.json`. A test walks every operation
//! here against the running router, so the two cannot drift apart.

use serde_json::{Map, Value, json};

use self::operations::{CREATES, KEYED_ERRORS};

mod account;
mod openai;
mod operations;
mod paid;
mod remote_mcp;
mod schedules;
mod spending;
mod text_rules;
mod webhooks;

pub use paid::add_paid_addresses;

/// The paid operations (their concrete copies per agent are in `paid.rs`), and those that
/// answer a price list.
const PAID: &[&str] = &["x402Invoke", "x402InvokeCommand"];
const PRICED: &[&str] = &[
    "x402Requirements",
    "x402CommandRequirements",
    "x402Invoke",
    "x402InvokeCommand",
];

/// The paid API's answers: its own error envelope, and both versions' headers.
fn is_x402(path: &str) -> bool {
    path.starts_with("/x402/") || path.starts_with("/.well-known/x402") || path == "/discovery/resources"
}

fn header(description: &str) -> Value {
    json!({ "description": description, "schema": { "type": "string" } })
}

fn path_parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|name| {
            let mut schema = json!({ "type": "string" });
            if name == "network" {
                schema["enum"] = json!(["solana", "base"]);
            }
            if name == "plugin" {
                schema["pattern"] = json!("^sha256:[0-9a-f]{64}$");
            }
            json!({ "name": name, "in": "path", "required": true, "schema": schema })
        })
        .collect()
}

pub fn document() -> Value {
    let mut document = operations_document();
    text_rules::state_on_requests(&mut document, &["ChatMessage"]);
    document
}

fn operations_document() -> Value {
    let mut paths = Map::new();
    for op in operations::all() {
        let mut responses = Map::new();
        let success_answer = json!({
            "description": "Success",
            "content": { "application/json": { "schema": (op.response)() } },
        });
        if CREATES.contains(&op.id) {
            responses.insert("201".into(), success_answer.clone());
        }
        if !CREATES.contains(&op.id) || op.id == "applyAgent" {
            responses.insert("200".into(), success_answer);
        }
        let mut errors: Vec<(u16, &str)> = op.errors.to_vec();
        if op.keyed {
            errors.extend_from_slice(KEYED_ERRORS);
        }
        if op.pending {
            errors.push((501, "not_implemented"));
        }
        for (status, code) in errors {
            // The paid API has its own envelope; its 402 is the price list or a refusal.
            let schema = match (is_x402(op.path) && !openai::is_paid_openai(op.path), status) {
                (true, 402) => json!({ "oneOf": [
                    { "$ref": "#/components/schemas/PaymentRequired" },
                    { "$ref": "#/components/schemas/X402Error" },
                ]}),
                (true, _) => json!({ "$ref": "#/components/schemas/X402Error" }),
                _ if openai::is_openai(op.path) => json!({ "$ref": "#/components/schemas/OpenAiError" }),
                _ => json!({ "$ref": "#/components/schemas/Error" }),
            };
            // One status, several codes: the description lists them all.
            let entry = responses.entry(status.to_string()).or_insert_with(|| {
                json!({
                    "description": "",
                    "content": { "application/json": { "schema": schema } },
                })
            });
            let listed = entry["description"].as_str().unwrap_or_default();
            entry["description"] = json!(if listed.is_empty() {
                code.to_string()
            } else {
                format!("{listed} | {code}")
            });
        }
        let mut operation = json!({
            "operationId": op.id,
            "summary": op.summary,
            "parameters": path_parameters(op.path),
            "responses": responses,
        });
        if op.keyed {
            operation["security"] = json!([{ "apiKey": [] }]);
        }
        if openai::is_openai(op.path) && !openai::is_paid_openai(op.path) {
            operation["security"] = json!([{ "bearer": [] }, { "apiKey": [] }]);
        }
        // Streamed answers: each server-sent event, as `{event?, data}`.
        let events = match op.id {
            "chat" => Some(json!([
                "delta",
                "tool_call_started",
                "tool_call_finished",
                "done",
                "error"
            ])),
            "openaiChatCompletions" | "x402OpenaiChatCompletions" => Some(json!(null)),
            _ => None,
        };
        if let Some(names) = events {
            let mut event = json!({ "type": "object", "required": ["data"], "properties": {
                "data": { "type": "string", "description": "JSON, or [DONE] last on the OpenAI endpoint" } } });
            if names.is_array() {
                event["required"] = json!(["event", "data"]);
                event["properties"]["event"] = json!({ "type": "string", "enum": names });
            }
            operation["responses"]["200"]["content"]["text/event-stream"] = json!({ "schema": event });
        }
        if PAID.contains(&op.id) {
            // For indexers that read paid operations here: paid with x402, each agent at its
            // own price (its 402, or /.well-known/x402.json, names it), no key.
            operation["x-payment-info"] = json!({ "price": { "mode": "dynamic" }, "protocols": [{ "x402": {} }] });
            operation["security"] = json!([]);
            operation["responses"]["202"] = json!({
                "description": "A long-running command, paid (with its receipt) or signed in for (with signedIn): poll statusUrl",
                "content": { "application/json": { "schema": { "type": "object",
                    "required": ["success", "jobId", "statusUrl", "retryAfterSeconds"] } } },
            });
            let settled = json!({
                "X-PAYMENT-RESPONSE": header("x402 version 1: base64 of {success, transaction, network, payer, extensions}; extensions[\"offer-receipt\"] holds the agent's signed receipt when the call was answered"),
                "PAYMENT-RESPONSE": header("x402 version 2: base64 of {success, transaction, network (CAIP-2), payer, extensions}; extensions[\"offer-receipt\"] holds the agent's signed receipt when the call was answered"),
            });
            for status in ["200", "202"] {
                operation["responses"][status]["headers"] = settled.clone();
            }
            if let Some(parameters) = operation["parameters"].as_array_mut() {
                parameters.push(json!({ "name": "X-PAYMENT", "in": "header", "required": false,
                    "description": "x402 version 1: base64 of {x402Version: 1, scheme, network, payload}",
                    "schema": { "type": "string" } }));
                parameters.push(json!({ "name": "PAYMENT-SIGNATURE", "in": "header", "required": false,
                    "description": "x402 version 2: base64 of {x402Version: 2, accepted, payload, resource?, extensions?}",
                    "schema": { "type": "string" } }));
                parameters.push(json!({ "name": "SIGN-IN-WITH-X", "in": "header", "required": false,
                    "description": "Instead of a payment, for a command that takes sign-ins: base64 of the 402's sign-in-with-x challenge signed by the wallet (CAIP-122); refused as 402 sign_in_refused",
                    "schema": { "type": "string" } }));
            }
        }
        if PRICED.contains(&op.id) {
            let status = if PAID.contains(&op.id) { "402" } else { "200" };
            operation["responses"][status]["headers"] = json!({
                "PAYMENT-REQUIRED": header("x402 version 2: base64 of {x402Version: 2, error, resource, accepts, extensions}; absent while the chain's CAIP-2 id is unknown"),
            });
        }
        // The discovery lists' pages: (largest, default) limit.
        let paged = match op.id {
            "x402Discovery" | "x402WellKnownDocument" => Some((100, 20)),
            "x402WellKnownIndex" => Some((100, 100)),
            _ => None,
        };
        if let Some((most, default)) = paged
            && let Some(parameters) = operation["parameters"].as_array_mut()
        {
            parameters.push(json!({ "name": "limit", "in": "query", "required": false,
                "schema": { "type": "integer", "minimum": 1, "maximum": most, "default": default } }));
            parameters.push(json!({ "name": "offset", "in": "query", "required": false,
                "schema": { "type": "integer", "minimum": 0, "maximum": 1000000, "default": 0 } }));
            if op.id == "x402Discovery" {
                parameters.push(json!({ "name": "type", "in": "query", "required": false,
                    "schema": { "type": "string" } }));
            }
        }
        if op.id == "listCommands"
            && let Some(parameters) = operation["parameters"].as_array_mut()
        {
            parameters.push(json!({
                "name": "integration", "in": "query", "required": false,
                "schema": { "type": "string", "enum": ["chatapp", "social", "x402", "mcp", "a2a"] },
            }));
        }
        if let Some(request) = op.request {
            operation["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": request() } },
            });
        }
        if op.id == "createKey" {
            // No body is a key of scope `use`.
            operation["requestBody"]["required"] = json!(false);
        }
        if op.id == "applyAgent" {
            operation["requestBody"]["content"]["application/toml"] =
                json!({ "schema": { "type": "string", "description": "The manifest as agent apply reads it" } });
        }
        if op.id == "uploadPlugin" {
            // application/wasm is the component's own type; octet-stream is accepted too.
            let binary = json!({ "schema": { "type": "string", "format": "binary" } });
            operation["requestBody"] = json!({ "required": true, "content": {
                "application/wasm": binary, "application/octet-stream": binary,
            }});
        }
        if op.id == "walletQr" {
            operation["responses"]["200"]["content"] = json!({ "image/svg+xml": { "schema": (op.response)() } });
        }
        if op.id == "chatUsage"
            && let Some(parameters) = operation["parameters"].as_array_mut()
        {
            parameters.push(json!({ "name": "days", "in": "query", "required": false,
                "schema": { "type": "integer", "minimum": 1, "maximum": 366, "default": 30 } }));
        }
        if op.id == "agentUsage" || op.id == "accountUsage" {
            let date = "an RFC 3339 time or a UTC date (YYYY-MM-DD)";
            let when = json!({ "type": "string", "anyOf": [{ "format": "date-time" }, { "format": "date" }] });
            let range = [
                json!({ "name": "from", "in": "query", "required": false, "description": format!("Start: {date}; by default 7 days (step day) or 24 hours (step hour) before to; before to, at most 1000 steps from it"),
                    "schema": when.clone() }),
                json!({ "name": "to", "in": "query", "required": false, "description": format!("End: {date}, whose day is included; by default the current step's end"),
                    "schema": when }),
                json!({ "name": "step", "in": "query", "required": false,
                    "schema": { "type": "string", "enum": ["hour", "day"], "default": "day" } }),
            ];
            match operation["parameters"].as_array_mut() {
                Some(parameters) => parameters.extend(range),
                None => operation["parameters"] = json!(range),
            }
        }
        if op.id == "listLogs"
            && let Some(parameters) = operation["parameters"].as_array_mut()
        {
            parameters.push(json!({ "name": "command", "in": "query", "required": false,
                "schema": { "type": "string" } }));
        }
        if [
            "listTransfers",
            "listPayments",
            "listJobs",
            "listLogs",
            "listWebhookDeliveries",
        ]
        .contains(&op.id)
            && let Some(parameters) = operation["parameters"].as_array_mut()
        {
            parameters.push(json!({ "name": "limit", "in": "query", "required": false,
                "schema": { "type": "integer", "minimum": 1, "maximum": 500, "default": 50 } }));
        }
        let entry = paths.entry(op.path.to_string()).or_insert_with(|| json!({}));
        entry[op.method] = operation;
    }
    json!({
        "openapi": "3.1.0",
        "info": { "title": "Agent Interaction Service", "version": super::meta::API_VERSION },
        "paths": paths,
        "components": {
            "securitySchemes": {
                "apiKey": { "type": "apiKey", "in": "header", "name": "x-api-key" },
                "bearer": { "type": "http", "scheme": "bearer", "description": "An API key, as OpenAI's clients send it" },
            },
            "schemas": {
                "Error": { "type": "object", "required": ["error"], "properties": { "error": {
                    "type": "object", "required": ["message", "code"],
                    "properties": { "message": { "type": "string" }, "code": { "type": "string" } },
                }}},
                "OpenAiError": { "type": "object", "required": ["error"], "properties": { "error": {
                    "type": "object", "required": ["message", "type"],
                    "properties": { "message": { "type": "string" }, "type": { "type": "string" },
                        "param": { "type": ["string", "null"] }, "code": { "type": ["string", "null"] } },
                }}},
                "X402Error": { "type": "object", "required": ["success", "error", "code", "x402Version"], "properties": {
                    "success": { "const": false }, "error": { "type": "string" }, "code": { "type": "string" },
                    "x402Version": { "type": "integer", "enum": [1, 2] },
                }},
                "PaymentRequired": { "type": "object", "required": ["x402Version", "error", "accepts"], "properties": {
                    "x402Version": { "type": "integer", "const": 1 }, "error": { "type": "string" }, "accepts": { "type": "array" },
                }},
                "DiscoveryList": { "type": "object", "required": ["x402Version", "items", "pagination"], "properties": {
                    "x402Version": { "type": "integer", "const": 2 },
                    "items": { "type": "array", "items": { "type": "object",
                        "required": ["resource", "type", "x402Version", "accepts", "lastUpdated"], "properties": {
                            "resource": { "type": "string" }, "type": { "type": "string" },
                            "x402Version": { "type": "integer", "enum": [1, 2] }, "accepts": { "type": "array" },
                            "lastUpdated": { "type": "integer" }, "metadata": { "type": "object" },
                        }}},
                    "pagination": { "type": "object", "required": ["limit", "offset", "total"], "properties": {
                        "limit": { "type": "integer" }, "offset": { "type": "integer" }, "total": { "type": "integer" },
                    }},
                }},
                "Key": { "type": "object", "required": ["id", "scope", "created_at", "active"], "properties": {
                    "id": { "type": "string" }, "name": { "type": ["string", "null"] },
                    "scope": { "type": "string", "enum": ["use", "spend", "manage"] },
                    "created_at": { "type": "string" }, "last_used_at": { "type": ["string", "null"] },
                    "revoked_at": { "type": ["string", "null"] }, "expires_at": { "type": ["string", "null"] },
                    "expired": { "type": "boolean" },
                    "active": { "type": "boolean", "description": "Neither revoked nor expired" },
                }},
                "ChatMessage": { "type": "object", "required": ["role", "content"], "properties": {
                    "role": { "type": "string", "enum": ["user", "assistant"] }, "content": { "type": "string" },
                }},
                "Command": { "type": "object", "properties": {
                    "id": { "type": "string" }, "command": { "type": "string" }, "description": { "type": "string" },
                    "handler_type": { "type": "string", "enum": ["simple_text", "prompt", "webhook", "built_in", "custom"] },
                    "parameters": { "type": "array", "items": { "type": "object", "properties": {
                        "name": { "type": "string" }, "type": { "type": "string" },
                        "required": { "type": "boolean" }, "description": { "type": "string" },
                    }}},
                    "response_format": { "type": "string", "enum": ["text", "markdown", "image", "video"] },
                    "parameterSchema": { "type": "array", "items": { "type": "object", "properties": {
                        "name": { "type": "string" }, "required": { "type": "boolean" }, "schema": { "type": "object" },
                    }}},
                }},
                "JsonText": text_rules::json_text(),
                "CommandResult": { "type": "object", "properties": {
                    "success": { "type": "boolean" }, "response": { "type": "string" }, "format": { "type": "string" },
                    "mediaUrl": { "type": ["string", "null"] }, "statusUrl": { "type": ["string", "null"] },
                }},
            },
        },
    })
}
