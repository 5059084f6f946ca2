//! The signed-webhook operations (`/v1/account/webhooks/...`) and wallet alerts, as data
//! for the OpenAPI document.

use serde_json::{Value, json};

use super::operations::{MANAGE_ERRORS, Operation, success};
use crate::store::webhooks::EVENT_TYPES;

fn endpoint(with_secret: bool) -> Value {
    let mut schema = json!({ "type": "object",
    "required": ["id", "url", "events", "enabled", "created_at", "consecutive_failures"],
    "properties": {
        "id": { "type": "string" }, "url": { "type": "string" }, "description": { "type": ["string", "null"] },
        "events": { "type": "array", "items": { "type": "string" } },
        "enabled": { "type": "boolean" },
        "disabled_at": { "type": ["string", "null"] },
        "disabled_reason": { "type": ["string", "null"], "description": "Why it was disabled: the owner, a 410, or failing too long" },
        "consecutive_failures": { "type": "integer", "minimum": 0 },
        "failing_since": { "type": ["string", "null"] }, "last_success_at": { "type": ["string", "null"] },
        "created_at": { "type": "string" },
    }});
    if with_secret {
        if let Some(required) = schema["required"].as_array_mut() {
            required.push(json!("secret"));
        }
        schema["properties"]["secret"] =
            json!({ "type": "string", "description": "whsec_ and the base64 signing key" });
    }
    schema
}

fn delivery() -> Value {
    json!({ "type": "object", "required": ["id", "event_id", "event_type", "endpoint_id", "state", "attempts"],
    "properties": {
        "id": { "type": "string" }, "event_id": { "type": "string", "description": "The webhook-id header" },
        "event_type": { "type": "string" }, "endpoint_id": { "type": "string" },
        "state": { "type": "string", "enum": ["pending", "sending", "succeeded", "failed"] },
        "attempts": { "type": "integer", "minimum": 0 },
        "next_attempt_at": { "type": ["string", "null"] },
        "last_status": { "type": ["integer", "null"] }, "last_error": { "type": ["string", "null"] },
        "last_latency_ms": { "type": ["integer", "null"] },
    }})
}

/// A label without control characters.
const NO_CONTROL: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$";

/// Where deliveries go: http(s), and a public address unless the operator allows it.
fn webhook_url() -> Value {
    json!({ "type": "string", "maxLength": 2048, "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://[^\\u0000]*$",
        "description": "An http or https URL whose host resolves to public addresses only" })
}

/// The event types an endpoint may name, or `*` for all.
fn events() -> Value {
    let mut names: Vec<&str> = EVENT_TYPES.to_vec();
    names.push("*");
    json!({ "type": "array", "minItems": 1, "items": { "type": "string", "enum": names } })
}

pub const WEBHOOKS: &[Operation] = &[
    Operation {
        method: "get",
        path: "/v1/account/webhooks",
        id: "listWebhooks",
        summary: "The account's webhook endpoints (never their secrets)",
        keyed: true,
        pending: false,
        request: None,
        response: || {
            success(json!({ "type": "object", "required": ["endpoints"], "properties": {
            "endpoints": { "type": "array", "items": endpoint(false) } } }))
        },
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "post",
        path: "/v1/account/webhooks",
        id: "createWebhook",
        summary: "Register an endpoint for events (201); the answer holds its signing secret. A private address is refused",
        keyed: true,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "required": ["url", "events"], "additionalProperties": false, "properties": {
                "url": webhook_url(), "events": events(),
                "description": { "type": ["string", "null"], "maxLength": 200, "pattern": NO_CONTROL },
            }})
        }),
        response: || success(endpoint(true)),
        errors: &[
            (400, "validation_error"),
            (403, "insufficient_scope"),
            (403, "quota_exceeded"),
        ],
    },
    Operation {
        method: "get",
        path: "/v1/account/webhooks/{endpointId}",
        id: "showWebhook",
        summary: "One endpoint, with its signing secret",
        keyed: true,
        pending: false,
        request: None,
        response: || success(endpoint(true)),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "patch",
        path: "/v1/account/webhooks/{endpointId}",
        id: "updateWebhook",
        summary: "Change an endpoint's url, events or description, or enable (its failures forgotten) or disable it",
        keyed: true,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "minProperties": 1, "additionalProperties": false, "properties": {
                "url": webhook_url(), "events": events(),
                "description": { "type": ["string", "null"], "maxLength": 200, "pattern": NO_CONTROL },
                "enabled": { "type": "boolean" },
            }})
        }),
        response: || success(endpoint(false)),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "delete",
        path: "/v1/account/webhooks/{endpointId}",
        id: "deleteWebhook",
        summary: "Delete an endpoint and its deliveries",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "required": ["id", "deleted"] })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "get",
        path: "/v1/account/webhooks/{endpointId}/deliveries",
        id: "listWebhookDeliveries",
        summary: "An endpoint's deliveries, newest first: state, attempts, the last status, error and latency",
        keyed: true,
        pending: false,
        request: None,
        response: || {
            success(json!({ "type": "object", "required": ["deliveries"], "properties": {
            "deliveries": { "type": "array", "items": delivery() } } }))
        },
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "get",
        path: "/v1/account/webhooks/{endpointId}/deliveries/{deliveryId}",
        id: "showWebhookDelivery",
        summary: "One delivery: the body sent and every attempt",
        keyed: true,
        pending: false,
        request: None,
        response: || {
            let mut schema = delivery();
            if let Some(required) = schema["required"].as_array_mut() {
                required.extend([json!("body"), json!("attempts")]);
            }
            schema["properties"]["body"] = json!({ "type": "string" });
            schema["properties"]["attempts"] = json!({ "type": "array", "items": { "type": "object",
            "required": ["n", "at", "latency_ms"], "properties": {
                "n": { "type": "integer" }, "at": { "type": "string" }, "status": { "type": ["integer", "null"] },
                "error": { "type": ["string", "null"] }, "latency_ms": { "type": "integer" },
                "excerpt": { "type": ["string", "null"] },
            }}});
            success(schema)
        },
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "post",
        path: "/v1/account/webhooks/{endpointId}/deliveries/{deliveryId}/resend",
        id: "resendWebhookDelivery",
        summary: "Send a delivery again now (one more attempt); the endpoint must be enabled",
        keyed: true,
        pending: false,
        request: None,
        response: || success(delivery()),
        errors: &[
            (400, "validation_error"),
            (403, "insufficient_scope"),
            (409, "conflict"),
        ],
    },
    Operation {
        method: "put",
        path: "/v1/account/agents/{agentId}/wallets/{network}/alert",
        id: "setWalletAlert",
        summary: "Raise wallet.low_balance when the wallet's USDC goes below an amount",
        keyed: true,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "required": ["below_usdc"], "additionalProperties": false, "properties": {
                "below_usdc": { "type": "string", "pattern": "^0*[0-9]{1,13}(\\.[0-9]{1,6})?$", "description": "Decimal USDC, e.g. 5.00" },
            }})
        }),
        response: || success(json!({ "type": ["object", "null"] })),
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "delete",
        path: "/v1/account/agents/{agentId}/wallets/{network}/alert",
        id: "removeWalletAlert",
        summary: "Remove the wallet's low-balance alert",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "required": ["network"] })),
        errors: MANAGE_ERRORS,
    },
];
