//! The OpenAPI 3.1 description served at `/openapi.json`. A test walks every operation
//! here against the running router, so the two cannot drift apart.

use serde_json::{Map, Value, json};

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

const KEYED_ERRORS: &[(u16, &str)] = &[(401, "unauthorized"), (404, "not_found"), (429, "rate_limit_exceeded")];
/// The management API's: a key without scope `manage` is refused; lists take `?limit`.
const MANAGE_ERRORS: &[(u16, &str)] = &[(400, "validation_error"), (403, "insufficient_scope")];
/// Operations that answer 201 when they make something (`applyAgent` also 200 on update).
const CREATES: &[&str] = &["createKey", "applyAgent", "addWallet", "uploadPlugin"];

pub const OPERATIONS: &[Operation] = &[
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
                "message": { "type": "string", "maxLength": 10000, "pattern": "\\S", "description": "Not only white space" },
                "conversationHistory": {
                    "type": "array", "maxItems": 100, "items": { "$ref": "#/components/schemas/ChatMessage" },
                    "description": "At most 100 turns and 100,000 characters in all",
                },
                "toolsEnabled": { "type": "boolean", "default": false },
                "maxToolCalls": { "type": ["integer", "null"], "minimum": 0, "maximum": 10, "default": 5 },
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
                        { "type": "integer", "not": { "const": 0 } },
                        { "type": "string", "pattern": "^\\s*-?0*[1-9][0-9]{0,17}\\s*$" },
                    ],
                    "description": "Positive: a user; negative: a group; -100...: a supergroup or channel",
                },
                "text": { "type": "string", "minLength": 1, "maxLength": 4096 },
                "parseMode": { "type": ["string", "null"], "enum": ["Markdown", "MarkdownV2", "HTML", null] },
                "replyToMessageId": { "type": ["integer", "null"], "minimum": 1 },
                "inlineKeyboard": { "type": ["array", "null"], "items": { "type": "array", "items": {
                    "type": "object", "required": ["text"],
                    "properties": {
                        "text": { "type": "string", "minLength": 1 },
                        "callback_data": { "type": ["string", "null"], "minLength": 1, "description": "At most 64 bytes" },
                        "url": { "type": ["string", "null"], "pattern": "^(https?|tg)://" },
                    },
                    "description": "Exactly one of callback_data or url",
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
                "mediaUrls": { "type": ["array", "null"], "items": { "type": "string", "pattern": "^https?://" }, "maxItems": 4 },
                "replyToTweetId": { "type": ["string", "null"], "pattern": "^[0-9]+$" },
            }, "anyOf": [
                { "required": ["text"], "properties": { "text": { "type": "string", "pattern": "\\S" } } },
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
                    "type": "string", "pattern": "\\S",
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
                { "required": ["message"], "properties": { "message": { "type": "string", "pattern": "\\S" } } },
                { "required": ["command"], "properties": { "command": { "type": "string", "pattern": "[^\\s/]" } } },
            ]})
        }),
        response: || json!({ "type": "object" }),
        errors: &[
            (400, "validation_error"),
            (400, "invalid_payment"),
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
            (429, "rate_limit_exceeded"),
            (429, "payment_in_progress"),
            (429, "payer_cooling_off"),
            (500, "execution_error"),
            (500, "internal_error"),
            (503, "service_unavailable"),
        ],
    },
    Operation {
        method: "get",
        path: "/v1/account",
        id: "showAccount",
        summary: "The account of this key: name, plan, rate limits, its quotas with their use, and its paid commands paused after repeated failures (scope manage)",
        keyed: true,
        pending: false,
        request: None,
        response: || {
            let quota = json!({ "type": "object", "required": ["used", "limit"], "properties": {
                "used": { "type": "integer", "minimum": 0 }, "limit": { "type": "integer", "minimum": 1 } } });
            success(
                json!({ "type": "object", "required": ["id", "name", "plan", "rpm", "rpd", "quotas", "paused_commands"], "properties": {
                    "quotas": { "type": "object", "required": ["agents", "commands_per_agent", "plugins", "plugin_bytes", "kv_bytes"],
                        "additionalProperties": quota },
                    "paused_commands": { "type": "array", "items": { "type": "object",
                        "required": ["agent_id", "command", "reason", "failures", "paused_at", "retry_after_seconds"] } },
                }}),
            )
        },
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "get",
        path: "/v1/account/keys",
        id: "listKeys",
        summary: "The account's API keys: ids, scopes and times, never secrets",
        keyed: true,
        pending: false,
        request: None,
        response: || {
            success(
                json!({ "type": "object", "properties": { "keys": { "type": "array", "items": { "$ref": "#/components/schemas/Key" } } } }),
            )
        },
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "post",
        path: "/v1/account/keys",
        id: "createKey",
        summary: "Create an API key (201); its secret is in this answer only",
        keyed: true,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "properties": {
                "scope": { "type": ["string", "null"], "enum": ["use", "spend", "manage", null], "default": "use" },
                "name": { "type": ["string", "null"], "maxLength": 64, "description": "A label to tell the key apart" },
            }})
        }),
        response: || success(json!({ "type": "object", "required": ["key", "id", "scope"] })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "delete",
        path: "/v1/account/keys/{keyId}",
        id: "revokeKey",
        summary: "Revoke one of the account's keys",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "$ref": "#/components/schemas/Key" })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "get",
        path: "/v1/account/agents",
        id: "listAgents",
        summary: "The account's agents",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "properties": { "agents": { "type": "array" } } })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "post",
        path: "/v1/account/agents",
        id: "applyAgent",
        summary: "Create (201) or update (200) an agent from its manifest, TOML or JSON; plugins by sha256: hash",
        keyed: true,
        pending: false,
        request: Some(|| json!({ "type": "object", "required": ["username", "name"] })),
        response: || success(json!({ "type": "object", "required": ["id", "username", "created", "commands"] })),
        errors: &[
            (400, "validation_error"),
            (403, "insufficient_scope"),
            (403, "quota_exceeded"),
            (409, "conflict"),
            (415, "validation_error"),
            (503, "service_unavailable"),
        ],
    },
    Operation {
        method: "get",
        path: "/v1/account/agents/{agentId}",
        id: "showAgent",
        summary: "One of the account's agents with its commands",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "required": ["id", "username", "commands"] })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "delete",
        path: "/v1/account/agents/{agentId}",
        id: "deleteAgent",
        summary: "Delete an agent that holds no wallet; its jobs, transfers and payments stay on record",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "required": ["id", "deleted"] })),
        errors: &[(403, "insufficient_scope"), (409, "conflict")],
    },
    Operation {
        method: "get",
        path: "/v1/account/agents/{agentId}/wallets",
        id: "listWallets",
        summary: "The agent's wallet addresses",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "properties": { "wallets": { "type": "array" } } })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "post",
        path: "/v1/account/agents/{agentId}/wallets",
        id: "addWallet",
        summary: "Create the agent's wallet on a network (201), or import one from its secret key",
        keyed: true,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "required": ["network"], "properties": {
                "network": { "type": "string", "enum": ["solana", "base"] },
                "secret": { "type": ["string", "null"], "description": "Import this key instead of making one" },
            }})
        }),
        response: || success(json!({ "type": "object", "required": ["network", "address"] })),
        errors: &[
            (400, "validation_error"),
            (403, "insufficient_scope"),
            (409, "conflict"),
        ],
    },
    Operation {
        method: "get",
        path: "/v1/account/agents/{agentId}/wallets/{network}/qr",
        id: "walletQr",
        summary: "The wallet's funding request (Solana Pay or EIP-681 for USDC) as a QR code, image/svg+xml",
        keyed: true,
        pending: false,
        request: None,
        response: || json!({ "type": "string" }),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "get",
        path: "/v1/account/agents/{agentId}/transfers",
        id: "listTransfers",
        summary: "The agent's USDC transfers, newest first, with their states",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "properties": { "transfers": { "type": "array" } } })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "get",
        path: "/v1/account/agents/{agentId}/payments",
        id: "listPayments",
        summary: "The x402 payments the agent received, newest first, with receipts and states",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "properties": { "payments": { "type": "array" } } })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "get",
        path: "/v1/account/agents/{agentId}/jobs",
        id: "listJobs",
        summary: "The agent's long-running jobs, newest first, with their states",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "properties": { "jobs": { "type": "array" } } })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "get",
        path: "/v1/account/agents/{agentId}/logs",
        id: "listLogs",
        summary: "The agent's kept plugin runs, newest first: each run that logged or did not succeed, with its outcome, duration and log lines",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "properties": { "runs": { "type": "array" } } })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "get",
        path: "/v1/account/agents/{agentId}/integrations",
        id: "showIntegrations",
        summary: "The agent's chat-app bot and social account: connected, enabled, public names (never tokens)",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "required": ["chatapp", "social"] })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "put",
        path: "/v1/account/agents/{agentId}/integrations/chatapp",
        id: "connectChatapp",
        summary: "Connect the agent's bot: the token is checked with Telegram's getMe and kept sealed",
        keyed: true,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "required": ["token"], "properties": {
                "token": { "type": "string", "description": "The bot token from @BotFather" },
                "webhook_url": { "type": ["string", "null"], "description": "Registered with setWebhook when given" },
            }})
        }),
        response: || success(json!({ "type": "object", "required": ["bot_username", "enabled"] })),
        errors: &[
            (400, "validation_error"),
            (403, "insufficient_scope"),
            (500, "chatapp_send_failed"),
        ],
    },
    Operation {
        method: "patch",
        path: "/v1/account/agents/{agentId}/integrations/chatapp",
        id: "enableChatapp",
        summary: "Let the bot send again, or keep it connected but refused (403 chatapp_disabled)",
        keyed: true,
        pending: false,
        request: Some(enabled_body),
        response: || success(json!({ "type": "object", "required": ["enabled"] })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "delete",
        path: "/v1/account/agents/{agentId}/integrations/chatapp",
        id: "disconnectChatapp",
        summary: "Forget the agent's bot and its token",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "required": ["disconnected"] })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "put",
        path: "/v1/account/agents/{agentId}/integrations/social",
        id: "connectSocial",
        summary: "Connect the agent's social account with its OAuth 2.0 user tokens, checked with /2/users/me and kept sealed",
        keyed: true,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "required": ["access_token"], "properties": {
                "access_token": { "type": "string" },
                "refresh_token": { "type": ["string", "null"] },
                "expires_in": { "type": ["integer", "null"], "description": "Seconds until the access token expires" },
            }})
        }),
        response: || success(json!({ "type": "object", "required": ["username", "enabled"] })),
        errors: &[
            (400, "validation_error"),
            (403, "insufficient_scope"),
            (502, "social_api_error"),
        ],
    },
    Operation {
        method: "patch",
        path: "/v1/account/agents/{agentId}/integrations/social",
        id: "enableSocial",
        summary: "Let the agent post again, or keep the account connected but refused",
        keyed: true,
        pending: false,
        request: Some(enabled_body),
        response: || success(json!({ "type": "object", "required": ["enabled"] })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "delete",
        path: "/v1/account/agents/{agentId}/integrations/social",
        id: "disconnectSocial",
        summary: "Forget the agent's social account and its tokens",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "required": ["disconnected"] })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "get",
        path: "/v1/account/plugins",
        id: "listPlugins",
        summary: "The components the account uploaded, by content hash",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "properties": { "plugins": { "type": "array" } } })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "post",
        path: "/v1/account/plugins",
        id: "uploadPlugin",
        summary: "Upload a component (application/wasm, 201), checked as agent apply checks it",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "required": ["hash", "plugin", "manifest"] })),
        errors: &[
            (400, "validation_error"),
            (403, "insufficient_scope"),
            (403, "quota_exceeded"),
            (413, "validation_error"),
            (415, "validation_error"),
            (503, "service_unavailable"),
        ],
    },
    Operation {
        method: "delete",
        path: "/v1/account/plugins/{plugin}",
        id: "deletePlugin",
        summary: "Remove a component from the account's (sha256:HEX), unless one of its commands runs it",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "required": ["plugin", "deleted"] })),
        errors: &[
            (400, "validation_error"),
            (403, "insufficient_scope"),
            (409, "conflict"),
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

/// The paid API's answers: its own error envelope, and both versions' headers.
fn is_x402(path: &str) -> bool {
    path.starts_with("/x402/") || path.starts_with("/.well-known/x402") || path == "/discovery/resources"
}

fn header(description: &str) -> Value {
    json!({ "description": description, "schema": { "type": "string" } })
}

fn enabled_body() -> Value {
    json!({ "type": "object", "required": ["enabled"], "properties": { "enabled": { "type": "boolean" } } })
}

fn success(data: Value) -> Value {
    json!({ "type": "object", "required": ["success", "data"], "properties": {
        "success": { "type": "boolean", "const": true }, "data": data,
    }})
}

fn path_parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|name| {
            let mut schema = json!({ "type": "string" });
            if name == "network" {
                schema["enum"] = json!(["solana", "base"]);
            }
            json!({ "name": name, "in": "path", "required": true, "schema": schema })
        })
        .collect()
}

pub fn document() -> Value {
    let mut paths = Map::new();
    for op in OPERATIONS {
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
            let schema = match (is_x402(op.path), status) {
                (true, 402) => json!({ "oneOf": [
                    { "$ref": "#/components/schemas/PaymentRequired" },
                    { "$ref": "#/components/schemas/X402Error" },
                ]}),
                (true, _) => json!({ "$ref": "#/components/schemas/X402Error" }),
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
        if op.id == "x402Invoke" {
            // For indexers that read paid operations here: paid with x402, each agent at its
            // own price (its 402, or /.well-known/x402.json, names it), no key.
            operation["x-payment-info"] = json!({ "price": { "mode": "dynamic" }, "protocols": [{ "x402": {} }] });
            operation["security"] = json!([]);
            operation["responses"]["202"] = json!({
                "description": "A paid long-running command: poll statusUrl",
                "content": { "application/json": { "schema": { "type": "object",
                    "required": ["success", "jobId", "statusUrl", "retryAfterSeconds", "receipt"] } } },
            });
            let settled = json!({
                "X-PAYMENT-RESPONSE": header("x402 version 1: base64 of {success, transaction, network, payer}"),
                "PAYMENT-RESPONSE": header("x402 version 2: base64 of {success, transaction, network (CAIP-2), payer}"),
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
            }
        }
        if op.id == "x402Requirements" || op.id == "x402Invoke" {
            let status = if op.id == "x402Invoke" { "402" } else { "200" };
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
                "schema": { "type": "string", "enum": ["chatapp", "social", "x402", "mcp"] },
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
        if op.id == "listLogs"
            && let Some(parameters) = operation["parameters"].as_array_mut()
        {
            parameters.push(json!({ "name": "command", "in": "query", "required": false,
                "schema": { "type": "string" } }));
        }
        if ["listTransfers", "listPayments", "listJobs", "listLogs"].contains(&op.id)
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
            "securitySchemes": { "apiKey": { "type": "apiKey", "in": "header", "name": "x-api-key" } },
            "schemas": {
                "Error": { "type": "object", "required": ["error"], "properties": { "error": {
                    "type": "object", "required": ["message", "code"],
                    "properties": { "message": { "type": "string" }, "code": { "type": "string" } },
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
                    "revoked_at": { "type": ["string", "null"] }, "active": { "type": "boolean" },
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
                "CommandResult": { "type": "object", "properties": {
                    "success": { "type": "boolean" }, "response": { "type": "string" }, "format": { "type": "string" },
                    "mediaUrl": { "type": ["string", "null"] }, "statusUrl": { "type": ["string", "null"] },
                }},
            },
        },
    })
}
