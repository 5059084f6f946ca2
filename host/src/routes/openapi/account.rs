//! The account API's operations (`/v1/account/...`): an account holder's keys, agents,
//! wallets, integrations and plugins, as data for the OpenAPI document.

use serde_json::json;

use super::operations::{MANAGE_ERRORS, Operation, enabled_body, success};

/// An OAuth 2.0 bearer token (RFC 6750's b64token).
const BEARER_TOKEN: &str = "^[A-Za-z0-9._~+/-]+=*$";

/// A key's label: at most 64 characters, no control characters (white space around it is
/// trimmed, and a blank one is none).
fn key_name() -> serde_json::Value {
    json!({ "type": ["string", "null"], "maxLength": 64, "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]*$",
        "description": "A label to tell the key apart" })
}

pub const ACCOUNT: &[Operation] = &[
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
            let tokens = json!({ "type": "integer", "minimum": 0 });
            success(
                json!({ "type": "object", "required": ["id", "name", "plan", "rpm", "rpd", "quotas", "paused_commands", "chat_tokens"], "properties": {
                    "chat_tokens": { "type": "object", "description": "the account's chat token budget and what is left of it",
                        "required": ["per_minute", "per_day", "left_this_minute", "left_today"],
                        "properties": { "per_minute": tokens, "per_day": tokens, "left_this_minute": tokens, "left_today": tokens } },
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
            json!({ "type": "object", "additionalProperties": false, "properties": {
                "scope": { "type": ["string", "null"], "enum": ["use", "spend", "manage", null], "default": "use" },
                "name": key_name(),
                "expires_at": { "type": ["string", "null"], "format": "date-time",
                    "description": "When it stops working, within 3650 days from now; never if absent" },
                "expires_in_days": { "type": ["integer", "null"], "minimum": 1, "maximum": 3650, "description": "Instead of expires_at" },
            }, "not": { "required": ["expires_at", "expires_in_days"], "properties": {
                "expires_at": { "type": "string" }, "expires_in_days": { "type": "integer" },
            }}})
        }),
        response: || success(json!({ "type": "object", "required": ["key", "id", "scope"] })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "patch",
        path: "/v1/account/keys/{keyId}",
        id: "updateKey",
        summary: "Rename one of the account's keys or change when it stops working (null removes the name or the end)",
        keyed: true,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "additionalProperties": false, "properties": {
                "name": key_name(),
                "expires_at": { "type": ["string", "null"], "format": "date-time", "description": "Within 3650 days from now" },
                "expires_in_days": { "type": ["integer", "null"], "minimum": 1, "maximum": 3650 },
            },
            // Something to change; an end given one way only (`expires_at: null` removes it).
            "anyOf": [
                { "required": ["name"] },
                { "required": ["expires_at"] },
                { "required": ["expires_in_days"], "properties": { "expires_in_days": { "type": "integer" } } },
            ],
            "not": { "required": ["expires_at", "expires_in_days"], "properties": { "expires_in_days": { "type": "integer" } } }})
        }),
        response: || success(json!({ "$ref": "#/components/schemas/Key" })),
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
        path: "/v1/account/oauth/grants",
        id: "listOAuthGrants",
        summary: "The OAuth grants the account's holder made: which client may call which agent's MCP tools as the account",
        keyed: true,
        pending: false,
        request: None,
        response: || {
            success(
                json!({ "type": "object", "required": ["grants"], "properties": { "grants": { "type": "array", "items": {
                "type": "object", "required": ["id", "agent_id", "client_id", "resource", "scope", "created_at"] } } } }),
            )
        },
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "delete",
        path: "/v1/account/oauth/grants/{grantId}",
        id: "revokeOAuthGrant",
        summary: "Revoke an OAuth grant: its access and refresh tokens stop working at once",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "required": ["id", "revoked_at"] })),
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
                "secret": { "type": ["string", "null"], "pattern": "^[0-9A-Za-z]+$",
                    "description": "Import this key instead of making one: Base, 32 bytes in hex (0x optional); Solana, the 64-byte key pair in base58" },
            }, "additionalProperties": false })
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
        path: "/v1/account/agents/{agentId}/chat-usage",
        id: "chatUsage",
        summary: "The agent's chats and their prompt and completion tokens by UTC day, with the sum",
        keyed: true,
        pending: false,
        request: None,
        response: || {
            let day = json!({ "type": "object", "required": ["chats", "prompt_tokens", "completion_tokens"], "properties": {
                "day": { "type": "string" }, "chats": { "type": "integer", "minimum": 0 },
                "prompt_tokens": { "type": "integer", "minimum": 0 }, "completion_tokens": { "type": "integer", "minimum": 0 },
            }});
            success(json!({ "type": "object", "required": ["days", "total"], "properties": {
                "days": { "type": "array", "items": day }, "total": day,
            }}))
        },
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "get",
        path: "/v1/account/agents/{agentId}/usage",
        id: "agentUsage",
        summary: "What the agent did and earned over a range, by hour or day and by command: calls by channel and outcome, run-time percentiles, x402 revenue by network and version, refunds, fees, price lists, chat tokens",
        keyed: true,
        pending: false,
        request: None,
        response: || success(usage_report(false)),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "get",
        path: "/v1/account/usage",
        id: "accountUsage",
        summary: "The account's usage report: its agents together, and each agent's totals",
        keyed: true,
        pending: false,
        request: None,
        response: || success(usage_report(true)),
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
                "token": { "type": "string", "pattern": "^[0-9]+:[A-Za-z0-9_-]+$", "description": "The bot token from @BotFather" },
                "webhook_url": { "type": ["string", "null"], "pattern": "^https://[^\\u0000]*$", "description": "Registered with setWebhook when given" },
            }, "additionalProperties": false })
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
                "access_token": { "type": "string", "pattern": BEARER_TOKEN },
                "refresh_token": { "type": ["string", "null"] },
                "expires_in": { "type": ["integer", "null"], "description": "Seconds until the access token expires (counted up to a year)" },
            }, "additionalProperties": false })
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
];

/// The report `services::usage_report` builds; money in micro-USDC, times in ISO 8601.
fn usage_report(per_agent: bool) -> serde_json::Value {
    let counts = json!({ "type": "object", "additionalProperties": { "type": "integer", "minimum": 0 } });
    let totals = json!({ "type": "object",
    "required": ["calls", "failed", "payments", "revenue_micro_usdc", "revenue_by_version", "refunds",
        "refunded_micro_usdc", "offers", "fees", "fee_transactions", "chats", "prompt_tokens", "completion_tokens"],
    "properties": {
        "calls": { "type": "integer", "minimum": 0 },
        "failed": { "type": "integer", "minimum": 0, "description": "Runs that ended other than succeeded or invalid_input" },
        "payments": counts, "revenue_micro_usdc": counts, "revenue_by_version": counts,
        "refunds": { "type": "integer", "minimum": 0 }, "refunded_micro_usdc": { "type": "integer", "minimum": 0 },
        "offers": { "type": "integer", "minimum": 0, "description": "Price lists (402 answers) given" },
        "fees": { "type": "object", "description": "solana_lamports, base_wei", "additionalProperties": { "type": "integer" } },
        "fee_transactions": { "type": "integer", "minimum": 0 },
        "chats": { "type": "integer", "minimum": 0 },
        "prompt_tokens": { "type": "integer", "minimum": 0 }, "completion_tokens": { "type": "integer", "minimum": 0 },
    }});
    let ms = json!({ "type": ["number", "null"], "minimum": 0 });
    let latency =
        json!({ "type": "object", "properties": { "p50_ms": ms, "p95_ms": ms, "p99_ms": ms, "mean_ms": ms } });
    let mut report = json!({ "type": "object", "required": ["from", "to", "step", "totals", "latency", "points", "commands"],
    "properties": {
        "from": { "type": "string" }, "to": { "type": "string" }, "step": { "type": "string", "enum": ["hour", "day"] },
        "totals": totals, "latency": latency,
        "points": { "type": "array", "items": { "allOf": [totals, { "type": "object", "required": ["at"], "properties": { "at": { "type": "string" } } }] } },
        "commands": { "type": "array", "items": { "allOf": [totals, latency, { "type": "object", "required": ["command", "by_channel"], "properties": {
            "command": { "type": "string" },
            "by_channel": { "type": "object", "additionalProperties": counts },
        }}] } },
    }});
    if per_agent {
        if let Some(required) = report["required"].as_array_mut() {
            required.push(json!("agents"));
        }
        report["properties"]["agents"] = json!({ "type": "object", "additionalProperties": totals });
    }
    report
}
