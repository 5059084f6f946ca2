//! The account API's remote MCP servers (`/v1/account/agents/{agentId}/mcp-servers`), as
//! data for the OpenAPI document.

use serde_json::json;

use super::operations::{MANAGE_ERRORS, Operation, success};

const ONE_ERRORS: &[(u16, &str)] = &[
    (400, "validation_error"),
    (403, "insufficient_scope"),
    (404, "not_found"),
];

pub const REMOTE_MCP: &[Operation] = &[
    Operation {
        method: "get",
        path: "/v1/account/agents/{agentId}/mcp-servers",
        id: "listRemoteMcpServers",
        summary: "The remote MCP servers the agent's manifest names, each listed now: the tools its chat is offered, whether its credential is set (never the credential)",
        keyed: true,
        pending: false,
        request: None,
        response: || {
            success(json!({ "type": "object", "required": ["servers"], "properties": {
                "servers": { "type": "array", "items": { "type": "object",
                    "required": ["name", "url", "credential_set", "tools"] } } } }))
        },
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "put",
        path: "/v1/account/agents/{agentId}/mcp-servers/{server}/credential",
        id: "setRemoteMcpCredential",
        summary: "Set the value of a remote MCP server's credential header (its manifest names the header); sealed at rest",
        keyed: true,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "required": ["value"], "additionalProperties": false, "properties": {
                "value": { "type": "string", "minLength": 1, "maxLength": 8192,
                    "pattern": "^[^\\u0000-\\u001f\\u007f]*[^\\s\\u0000-\\u001f\\u007f][^\\u0000-\\u001f\\u007f]*$" } } })
        }),
        response: || success(json!({ "type": "object", "required": ["server", "credential_set"] })),
        errors: ONE_ERRORS,
    },
    Operation {
        method: "delete",
        path: "/v1/account/agents/{agentId}/mcp-servers/{server}/credential",
        id: "removeRemoteMcpCredential",
        summary: "Forget a remote MCP server's credential",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "required": ["server", "removed"] })),
        errors: ONE_ERRORS,
    },
    Operation {
        method: "post",
        path: "/v1/account/agents/{agentId}/mcp-servers/{server}/oauth",
        id: "startRemoteMcpOAuth",
        summary: "Begin the owner's OAuth grant to a remote MCP server (`oauth = true`): the address to send the owner's browser to; the server's authorization server sends it back to /oauth/mcp-servers/callback, which keeps the grant sealed",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "required": ["server", "authorization_url"] })),
        errors: ONE_ERRORS,
    },
    Operation {
        method: "post",
        path: "/v1/account/mcp-servers/oauth/finish",
        id: "finishRemoteMcpOAuth",
        summary: "Finish an OAuth grant to a remote MCP server with what its authorization server sent the browser back with (the console does this, signed in): only the account that began it, once",
        keyed: true,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "required": ["state", "code"], "additionalProperties": false, "properties": {
                "state": { "type": "string" }, "code": { "type": "string" }, "iss": { "type": "string" } } })
        }),
        response: || success(json!({ "type": "object", "required": ["agent_id", "server", "connected"] })),
        errors: ONE_ERRORS,
    },
];
