//! The agents as OpenAI-compatible models (`/v1/agents/{agentId}/openai/v1/...` with a key,
//! `/x402/{network}/{agentId}/openai/v1/...` paid), as data for the OpenAPI document. Their
//! answers and errors are OpenAI's shapes, not the keyed or paid API's.

use serde_json::json;

use super::operations::Operation;

/// Where an operation answers in OpenAI's shapes: the keyed endpoint, and the paid one.
pub fn is_openai(path: &str) -> bool {
    path.starts_with("/v1/agents/{agentId}/openai/") || path.starts_with(PAID)
}

/// The paid endpoint: no key, an x402 version 2 payment (docs/x402.md).
const PAID: &str = "/x402/{network}/{agentId}/openai/";

pub fn is_paid_openai(path: &str) -> bool {
    path.starts_with(PAID)
}

const PAID_ERRORS: &[(u16, &str)] = &[
    (400, "validation_error"),
    (402, "payment_required"),
    (402, "invalid_payment"),
    (402, "settlement_failed"),
    (402, "unsupported_x402_version"),
    (404, "agent_not_found"),
    (409, "payment_already_used"),
    (409, "payment_identifier_conflict"),
    (429, "rate_limit_exceeded"),
    (429, "payer_cooling_off"),
    (429, "payment_in_progress"),
    (429, "over_budget"),
    (502, "model_unavailable"),
    (503, "model_unavailable"),
    (504, "generation_timeout"),
];

const ERRORS: &[(u16, &str)] = &[
    (400, "validation_error"),
    (401, "unauthorized"),
    (404, "not_found"),
    (429, "rate_limit_exceeded"),
    (502, "model_unavailable"),
    (503, "model_unavailable"),
    (504, "generation_timeout"),
];

fn model() -> serde_json::Value {
    json!({ "type": "object", "required": ["id", "object", "created", "owned_by"], "properties": {
        "id": { "type": "string" }, "object": { "const": "model" },
        "created": { "type": "integer" }, "owned_by": { "type": "string" },
    }})
}

/// A chat completion request, as the endpoint takes it.
fn completion_request() -> serde_json::Value {
    json!({ "type": "object", "required": ["messages"], "properties": {
        "model": { "type": "string", "description": "Not checked: answers name the agent" },
        "messages": { "type": "array", "minItems": 1, "items": { "type": "object", "required": ["role"], "properties": {
            "role": { "type": "string", "enum": ["system", "developer", "user", "assistant", "tool"] },
            "content": { "type": ["string", "array", "null"] },
            "tool_call_id": { "type": "string" },
        }}, "description": "The last message must be the user's" },
        "stream": { "type": "boolean", "default": false },
        "stream_options": { "type": "object", "properties": { "include_usage": { "type": "boolean" } } },
        "max_tokens": { "type": ["integer", "null"], "minimum": 1 },
        "max_completion_tokens": { "type": ["integer", "null"], "minimum": 1 },
        "temperature": { "type": ["number", "null"], "minimum": 0, "maximum": 2 },
        "n": { "type": ["integer", "null"], "const": 1 },
    }})
}

fn completion() -> serde_json::Value {
    json!({ "type": "object", "required": ["id", "object", "created", "model", "choices", "usage"], "properties": {
        "object": { "const": "chat.completion" },
        "choices": { "type": "array", "items": { "type": "object", "required": ["index", "message", "finish_reason"] } },
        "usage": { "type": "object", "required": ["prompt_tokens", "completion_tokens", "total_tokens"] },
    }})
}

pub const OPENAI: &[Operation] = &[
    Operation {
        method: "post",
        path: "/v1/agents/{agentId}/openai/v1/chat/completions",
        id: "openaiChatCompletions",
        summary: "Chat with the agent in OpenAI's chat-completions shape (stream: server-sent chunks, then [DONE])",
        keyed: false,
        pending: false,
        request: Some(completion_request),
        response: completion,
        errors: ERRORS,
    },
    Operation {
        method: "get",
        path: "/v1/agents/{agentId}/openai/v1/models",
        id: "openaiListModels",
        summary: "The agent, as the one model of its OpenAI-compatible endpoint",
        keyed: false,
        pending: false,
        request: None,
        response: || {
            json!({ "type": "object", "required": ["object", "data"], "properties": {
                "object": { "const": "list" }, "data": { "type": "array", "items": model() },
            }})
        },
        errors: ERRORS,
    },
    Operation {
        method: "get",
        path: "/v1/agents/{agentId}/openai/v1/models/{model}",
        id: "openaiShowModel",
        summary: "The agent as a model (its username or id)",
        keyed: false,
        pending: false,
        request: None,
        response: model,
        errors: ERRORS,
    },
    Operation {
        method: "post",
        path: "/x402/{network}/{agentId}/openai/v1/chat/completions",
        id: "x402OpenaiChatCompletions",
        summary: "The agent as an OpenAI-compatible model for payers without a key: without PAYMENT-SIGNATURE (x402 version 2), 402 with PAYMENT-REQUIRED; with it, the completion (stream: server-sent chunks, then [DONE]) and PAYMENT-RESPONSE (a stream at a fixed price has none: it is settled in the payments list)",
        keyed: false,
        pending: false,
        request: Some(completion_request),
        response: completion,
        errors: PAID_ERRORS,
    },
    Operation {
        method: "get",
        path: "/x402/{network}/{agentId}/openai/v1/models",
        id: "x402OpenaiListModels",
        summary: "The agent, as the one model of its paid OpenAI-compatible endpoint (free to read)",
        keyed: false,
        pending: false,
        request: None,
        response: || {
            json!({ "type": "object", "required": ["object", "data"], "properties": {
                "object": { "const": "list" }, "data": { "type": "array", "items": model() },
            }})
        },
        errors: &[
            (400, "unsupported_network"),
            (404, "agent_not_found"),
            (429, "rate_limit_exceeded"),
        ],
    },
];
