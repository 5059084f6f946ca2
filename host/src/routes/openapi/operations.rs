//! Every operation of the API, as data: its method and path, what it takes and answers,
//! and the errors it may give (the account API's in `account.rs`). `mod.rs` writes the
//! OpenAPI document from them.

use serde_json::{Value, json};

use super::text_rules::{COMMAND_NAMED, NOT_BLANK};

pub struct Operation {
    pub method: &'static str,
    pub path: &'static str,
    pub id: &'static str,
    pub summary: &'static str,
    pub keyed: bool,
    /// Not served yet: answers 501 `not_implemented` until its capability lands.
    pub pending: bool,
    pub request: Option<fn() -> Value>,
    pub response: fn() -> Value,
    pub errors: &'static [(u16, &'static str)],
}

pub(super) const KEYED_ERRORS: &[(u16, &str)] =
    &[(401, "unauthorized"), (404, "not_found"), (429, "rate_limit_exceeded")];
/// The management API's: a key without scope `manage` is refused; lists take `?limit`.
pub(super) const MANAGE_ERRORS: &[(u16, &str)] = &[(400, "validation_error"), (403, "insufficient_scope")];
/// A paid request's refusals, at the agent's address or a command's.
const INVOKE_ERRORS: &[(u16, &str)] = &[
    (400, "validation_error"),
    (402, "payment_required"),
    (402, "invalid_payment"),
    (402, "unsupported_x402_version"),
    (402, "wrong_network"),
    (402, "payment_requirement_mismatch"),
    (402, "payment_amount_mismatch"),
    (402, "invalid_signature"),
    (402, "settlement_failed"),
    (404, "agent_not_found"),
    (404, "command_not_found"),
    (409, "payment_already_used"),
    (409, "payment_identifier_conflict"),
    (429, "rate_limit_exceeded"),
    (429, "payment_in_progress"),
    (429, "payer_cooling_off"),
    (500, "execution_error"),
    (500, "internal_error"),
    (502, "facilitator_error"),
    (503, "service_unavailable"),
    (503, "facilitator_unavailable"),
];
/// Operations that answer 201 when they make something (`applyAgent` also 200 on update).
pub(super) const CREATES: &[&str] = &[
    "createKey",
    "applyAgent",
    "addWallet",
    "uploadPlugin",
    "createWebhook",
    "createSchedule",
];

/// The API of the specification: the agent API, jobs, the chat app's webhook, the paid
/// API and its discovery.
pub const SPEC: &[Operation] = &[
    Operation {
        method: "get",
        path: "/",
        id: "describeService",
        summary: "Service descriptor: name, version and endpoints",
        keyed: false,
        pending: false,
        request: None,
        response: || json!({ "type": "object", "required": ["name", "version", "endpoints"] }),
        errors: &[],
    },
    Operation {
        method: "get",
        path: "/health",
        id: "health",
        summary: "Health: status, version, database reachability, uptime",
        keyed: false,
        pending: false,
        request: None,
        response: || {
            json!({ "type": "object", "required": ["status", "version", "database", "uptimeSeconds"], "properties": {
                "status": { "type": "string", "enum": ["ok", "degraded"] },
                "version": { "type": "string" },
                "database": { "type": "object", "properties": { "reachable": { "type": "boolean" } } },
                "uptimeSeconds": { "type": "integer" },
            }})
        },
        errors: &[(503, "degraded")],
    },
    Operation {
        method: "get",
        path: "/ready",
        id: "ready",
        summary: "Readiness for a load balancer: database reachable and migrated, not stopping",
        keyed: false,
        pending: false,
        request: None,
        response: || {
            json!({ "type": "object", "required": ["status", "database", "stopping"], "properties": {
                "status": { "type": "string", "enum": ["ready", "stopping", "unavailable"] },
                "database": { "type": "object", "properties": {
                    "reachable": { "type": "boolean" }, "migrated": { "type": "boolean" },
                }},
                "stopping": { "type": "boolean" },
            }})
        },
        errors: &[(503, "not ready")],
    },
    Operation {
        method: "get",
        path: "/openapi.json",
        id: "openapi",
        summary: "This document",
        keyed: false,
        pending: false,
        request: None,
        response: || json!({ "type": "object" }),
        errors: &[],
    },
    Operation {
        method: "post",
        path: "/v1/agents/{agentId}/chat",
        id: "chat",
        summary: "Chat with the agent",
        keyed: true,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "required": ["message"], "properties": {
                "message": { "type": "string", "maxLength": 10000, "pattern": NOT_BLANK, "description": "Not only white space" },
                "conversationHistory": {
                    "type": "array", "maxItems": 100, "items": { "$ref": "#/components/schemas/ChatMessage" },
                    "description": "At most 100 turns and 100,000 characters in all",
                },
                "toolsEnabled": { "type": "boolean", "default": false },
                "maxToolCalls": { "type": ["integer", "null"], "minimum": 0, "maximum": 10, "default": 5 },
                "stream": { "type": "boolean", "default": false,
                    "description": "Answer as server-sent events (delta, tool_call_started, tool_call_finished, then done or error), as Accept: text/event-stream asks too" },
            }})
        }),
        response: || {
            success(json!({ "type": "object", "properties": {
                "response": { "type": "string" }, "agentId": { "type": "string" }, "timestamp": { "type": "string", "format": "date-time" },
            }}))
        },
        errors: &[
            (400, "validation_error"),
            (502, "model_unavailable"),
            (503, "model_unavailable"),
            (504, "generation_timeout"),
        ],
    },
    Operation {
        method: "get",
        path: "/v1/agents/{agentId}/commands",
        id: "listCommands",
        summary: "List the agent's commands with their parameters",
        keyed: true,
        pending: false,
        request: None,
        response: || {
            success(json!({ "type": "object", "properties": {
                "agent_id": { "type": "string" }, "agent_username": { "type": "string" },
                "mcp_url": { "type": "string", "description": "The agent's MCP server: its commands with mcp in their integrations, as tools" },
                "a2a_card_url": { "type": "string", "description": "The agent's A2A card: its commands with a2a in their integrations, as skills" },
                "commands": { "type": "array", "items": { "$ref": "#/components/schemas/Command" } },
            }}))
        },
        errors: &[(400, "validation_error")],
    },
    Operation {
        method: "post",
        path: "/v1/agents/{agentId}/commands/{commandName}/execute",
        id: "executeCommand",
        summary: "Execute a command",
        keyed: true,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "properties": {
                "parameters": { "type": ["object", "null"] }, "rawText": { "type": ["string", "null"] },
            }})
        }),
        response: || {
            success(json!({ "type": "object", "properties": {
                "command": { "type": "string" }, "result": { "$ref": "#/components/schemas/CommandResult" },
            }}))
        },
        errors: &[(400, "validation_error"), (500, "execution_error")],
    },
    Operation {
        method: "post",
        path: "/v1/agents/{agentId}/chatapp/send",
        id: "chatappSend",
        summary: "Send a message through the agent's chat-app bot",
        keyed: true,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "required": ["chatId", "text"], "properties": {
                "chatId": {
                    "oneOf": [
                        { "type": "integer", "not": { "const": 0 }, "minimum": -999_999_999_999_999_999_i64, "maximum": 999_999_999_999_999_999_i64 },
                        { "type": "string", "pattern": "^\\s*-?0*[1-9][0-9]{0,17}\\s*$" },
                    ],
                    "description": "Positive: a user; negative: a group; -100...: a supergroup or channel",
                },
                "text": { "type": "string", "minLength": 1, "maxLength": 4096 },
                "parseMode": { "type": ["string", "null"], "enum": ["Markdown", "MarkdownV2", "HTML", null] },
                "replyToMessageId": { "type": ["integer", "null"], "minimum": 1, "maximum": 2_147_483_647 },
                "inlineKeyboard": { "type": ["array", "null"], "items": { "type": "array", "items": {
                    "type": "object", "required": ["text"],
                    "properties": {
                        "text": { "type": "string", "minLength": 1 },
                        "callback_data": { "type": ["string", "null"], "minLength": 1, "description": "At most 64 bytes" },
                        "url": { "type": ["string", "null"], "pattern": "^(https?|tg)://[^\\u0000]*$" },
                    },
                    "description": "Exactly one of callback_data or url",
                    "oneOf": [
                        { "required": ["callback_data"], "properties": { "callback_data": { "type": "string" }, "url": { "type": "null" } } },
                        { "required": ["url"], "properties": { "url": { "type": "string" }, "callback_data": { "type": "null" } } },
                    ],
                }}},
            }})
        }),
        response: || {
            success(json!({ "type": "object", "properties": {
                "message_id": { "type": "integer" }, "chat_id": { "type": "string" },
                "text": { "type": "string" }, "sent_at": { "type": "string", "format": "date-time" },
            }}))
        },
        errors: &[
            (400, "validation_error"),
            (404, "chatapp_not_configured"),
            (500, "chatapp_send_failed"),
        ],
    },
    Operation {
        method: "post",
        path: "/v1/agents/{agentId}/social/post",
        id: "socialPost",
        summary: "Post on the agent's connected social account",
        keyed: true,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "properties": {
                "text": { "type": ["string", "null"], "description": "At most 280 as X counts (a URL 23, wide characters 2)" },
                "mediaUrls": { "type": ["array", "null"], "items": { "type": "string", "pattern": "^https?://[^\\u0000]*$" }, "maxItems": 4 },
                "replyToTweetId": { "type": ["string", "null"], "pattern": "^[0-9]+$" },
            }, "anyOf": [
                { "required": ["text"], "properties": { "text": { "type": "string", "pattern": NOT_BLANK } } },
                { "required": ["mediaUrls"], "properties": { "mediaUrls": { "type": "array", "minItems": 1 } } },
            ]})
        }),
        response: || {
            success(json!({ "type": "object", "properties": {
                "ok": { "type": "boolean" }, "tweet_id": { "type": "string" }, "tweet_url": { "type": "string" },
                "agent_id": { "type": "string" }, "username": { "type": "string" },
            }}))
        },
        errors: &[
            (400, "social_not_connected"),
            (403, "social_forbidden"),
            (500, "social_not_configured"),
        ],
    },
    Operation {
        method: "get",
        path: "/v1/agents/{agentId}/wallet/{network}/balance",
        id: "walletBalance",
        summary: "The agent's USDC and native balance on a network",
        keyed: true,
        pending: false,
        request: None,
        response: || {
            json!({ "type": "object", "properties": { "data": { "type": "object", "properties": {
                "network": { "type": "string" }, "walletAddress": { "type": "string" },
                "balanceUsdc": { "type": "number" }, "balanceNative": { "type": "number" },
                "nativeToken": { "type": "string" }, "explorerUrl": { "type": "string" },
            }}}})
        },
        errors: &[(400, "wallet_not_configured"), (500, "internal_error")],
    },
    Operation {
        method: "post",
        path: "/v1/agents/{agentId}/wallet/{network}/transfer",
        id: "walletTransfer",
        summary: "Transfer USDC from the agent's wallet",
        keyed: true,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "required": ["recipientAddress", "amountUsdc"], "properties": {
                "recipientAddress": {
                    "type": "string", "pattern": NOT_BLANK,
                    "description": "Solana: base58 of 32 bytes; Base: 0x and 40 hex digits (EIP-55 when mixed case)",
                },
                "amountUsdc": { "type": "number", "minimum": 0.000001, "description": "At most 6 decimals" },
                "memo": { "type": ["string", "null"], "maxLength": 500 },
            }})
        }),
        response: || {
            json!({ "type": "object", "properties": { "data": { "type": "object", "properties": {
                "transactionSignature": { "type": "string" }, "network": { "type": "string" },
                "amount": { "type": "number" }, "recipient": { "type": "string" }, "sender": { "type": "string" },
                "explorerUrl": { "type": "string" }, "memo": { "type": "string" },
            }}}})
        },
        errors: &[
            (400, "transfer_failed"),
            (403, "insufficient_scope"),
            (500, "internal_error"),
        ],
    },
    Operation {
        method: "get",
        path: "/jobs/{jobId}",
        id: "jobStatus",
        summary: "Status of a long-running job: processing, succeeded or failed (always 200)",
        keyed: false,
        pending: false,
        request: None,
        response: || {
            json!({ "type": "object", "required": ["state"], "properties": {
                "state": { "type": "string", "enum": ["processing", "succeeded", "failed"] },
                "progress": { "type": "integer", "minimum": 0, "maximum": 100 },
                "response": { "type": "string" }, "artifactUrl": { "type": "string" },
                "error": { "type": "string" }, "code": { "type": "string" },
            }})
        },
        errors: &[],
    },
    Operation {
        method: "post",
        path: "/chatapp/{agentId}/webhook",
        id: "chatappUpdate",
        summary: "Telegram updates for the agent's bot (X-Telegram-Bot-Api-Secret-Token, no API key)",
        keyed: false,
        pending: false,
        request: Some(
            || json!({ "type": "object", "properties": { "update_id": { "type": "integer" }, "message": { "type": "object" } } }),
        ),
        response: || json!({ "type": "object", "properties": { "ok": { "type": "boolean" } } }),
        errors: &[
            (400, "validation_error"),
            (401, "unauthorized"),
            (404, "not_found"),
            (413, "validation_error"),
            (429, "rate_limit_exceeded"),
        ],
    },
    Operation {
        method: "get",
        path: "/x402/{network}/{agentId}",
        id: "x402Requirements",
        summary: "What a paid call to the agent costs: x402 version 1 in the body, version 2 in the PAYMENT-REQUIRED header",
        keyed: false,
        pending: false,
        request: None,
        response: || json!({ "type": "object", "properties": { "x402Version": { "type": "integer" }, "accepts": { "type": "array" } } }),
        errors: &[
            (400, "unsupported_network"),
            (400, "wallet_not_configured"),
            (404, "agent_not_found"),
            (429, "rate_limit_exceeded"),
        ],
    },
    Operation {
        method: "post",
        path: "/x402/{network}/{agentId}",
        id: "x402Invoke",
        summary: "A paid interaction with the agent (X-PAYMENT for x402 version 1, PAYMENT-SIGNATURE for version 2); without either, 402 with the price of what was asked in both versions",
        keyed: false,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "properties": {
                "message": { "type": ["string", "null"], "description": "A leading /command runs that command" },
                "command": { "type": ["string", "null"] },
            }, "anyOf": [
                { "required": ["message"], "properties": { "message": { "type": "string", "pattern": NOT_BLANK } } },
                { "required": ["command"], "properties": { "command": { "type": "string", "pattern": COMMAND_NAMED } } },
            ]})
        }),
        response: || json!({ "type": "object" }),
        errors: INVOKE_ERRORS,
    },
    Operation {
        method: "get",
        path: "/x402/{network}/{agentId}/commands/{commandName}",
        id: "x402CommandRequirements",
        summary: "What one paid command of the agent costs, at its own address",
        keyed: false,
        pending: false,
        request: None,
        response: || json!({ "type": "object", "properties": { "x402Version": { "type": "integer" }, "accepts": { "type": "array" } } }),
        errors: &[
            (400, "unsupported_network"),
            (400, "wallet_not_configured"),
            (404, "agent_not_found"),
            (404, "command_not_found"),
            (429, "rate_limit_exceeded"),
        ],
    },
    Operation {
        method: "post",
        path: "/x402/{network}/{agentId}/commands/{commandName}",
        id: "x402InvokeCommand",
        summary: "A paid run of one command at its own address: the body holds its parameters alone; paid and answered as x402Invoke",
        keyed: false,
        pending: false,
        request: Some(|| json!({ "type": "object", "description": "The command's parameters" })),
        response: || json!({ "type": "object" }),
        errors: INVOKE_ERRORS,
    },
    Operation {
        method: "post",
        path: "/x402/solana/{agentId}/payment-transaction",
        id: "x402PaymentTransaction",
        summary: "The unsigned Solana payment transaction for a message (or `command`) at its price, for a browser wallet to sign (payer's transfer, the seller's fee payer); sent back signed as any x402 payment",
        keyed: false,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "required": ["payer"], "additionalProperties": false, "properties": {
                "payer": { "type": "string", "pattern": "^[1-9A-HJ-NP-Za-km-z]{32,44}$",
                            "description": "The paying wallet's Solana address (base58 of 32 bytes)" },
                "command": { "type": ["string", "null"], "pattern": COMMAND_NAMED },
            }})
        }),
        response: || {
            json!({ "type": "object", "properties": {
                "transaction": { "type": "string", "description": "base64 wire transaction, its signatures empty" },
                "lastValidBlockHeight": { "type": "integer" },
                "amount": { "type": "string" },
                "payTo": { "type": "string" },
                "feePayer": { "type": "string" },
            }})
        },
        errors: &[
            (400, "validation_error"),
            (400, "wallet_not_configured"),
            (404, "agent_not_found"),
            (404, "command_not_found"),
            (429, "rate_limit_exceeded"),
        ],
    },
    Operation {
        method: "get",
        path: "/discovery/resources",
        id: "x402Discovery",
        summary: "Every agent for sale here over x402, as the facilitators' discovery list (x402 v2 specification §8); type=mcp for the MCP servers",
        keyed: false,
        pending: false,
        request: None,
        response: || json!({ "$ref": "#/components/schemas/DiscoveryList" }),
        errors: &[(400, "validation_error"), (429, "rate_limit_exceeded")],
    },
    Operation {
        method: "get",
        path: "/.well-known/x402",
        id: "x402WellKnownIndex",
        summary: "The addresses of every paid route here (each takes a POST), as x402 indexers read an origin's file",
        keyed: false,
        pending: false,
        request: None,
        response: || {
            json!({ "type": "object", "required": ["version", "resources", "instructions"], "properties": {
                "version": { "type": "integer", "const": 1 },
                "resources": { "type": "array", "items": { "type": "string" } },
                "agentCards": { "type": "array", "items": { "type": "string" }, "description": "The A2A cards of the agents on this page" },
                "instructions": { "type": "string" },
            }})
        },
        errors: &[(400, "validation_error"), (429, "rate_limit_exceeded")],
    },
    Operation {
        method: "get",
        path: "/.well-known/x402.json",
        id: "x402WellKnownDocument",
        summary: "Every paid route here with its version-2 price, request and answer, in the x402 foundation's draft shape for an origin",
        keyed: false,
        pending: false,
        request: None,
        response: || {
            json!({ "type": "object", "required": ["x402Version", "items"], "properties": {
                "x402Version": { "type": "integer", "const": 2 },
                "lastUpdated": { "type": "integer" },
                "items": { "type": "array", "items": { "type": "object",
                    "required": ["resource", "type", "accepts", "input"], "properties": {
                        "resource": { "type": "object", "required": ["url"] }, "type": { "type": "string" },
                        "accepts": { "type": "array" }, "input": { "type": "object" }, "output": { "type": "object" },
                    }}},
            }})
        },
        errors: &[(400, "validation_error"), (429, "rate_limit_exceeded")],
    },
];

pub(super) fn enabled_body() -> Value {
    json!({ "type": "object", "required": ["enabled"], "additionalProperties": false,
        "properties": { "enabled": { "type": "boolean" } } })
}

pub(super) fn success(data: Value) -> Value {
    json!({ "type": "object", "required": ["success", "data"], "properties": {
        "success": { "type": "boolean", "const": true }, "data": data,
    }})
}

/// Every operation: the specification's, then the account API's.
pub fn all() -> impl Iterator<Item = &'static Operation> {
    SPEC.iter()
        .chain(super::account::ACCOUNT)
        .chain(super::webhooks::WEBHOOKS)
        .chain(super::schedules::SCHEDULES)
        .chain(super::remote_mcp::REMOTE_MCP)
        .chain(super::spending::SPENDING)
        .chain(super::openai::OPENAI)
}
