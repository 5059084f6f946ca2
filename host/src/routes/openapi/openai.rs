//! The agents as OpenAI-compatible models (`/v1/agents/{agentId}/openai/v1/...`), as data for
//! the OpenAPI document. Their answers and errors are OpenAI's shapes, not the keyed API's.

use serde_json::json;

use super::operations::Operation;

/// Where an operation answers in OpenAI's shapes.
pub fn is_openai(path: &str) -> bool {
    path.starts_with("/v1/agents/{agentId}/openai/")
}

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

pub const OPENAI: &[Operation] = &[
    Operation {
        method: "post",
        path: "/v1/agents/{agentId}/openai/v1/chat/completions",
        id: "openaiChatCompletions",
        summary: "Chat with the agent in OpenAI's chat-completions shape (stream: server-sent chunks, then [DONE])",
        keyed: false,
        pending: false,
        request: Some(|| {
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
        }),
        response: || {
            json!({ "type": "object", "required": ["id", "object", "created", "model", "choices", "usage"], "properties": {
                "object": { "const": "chat.completion" },
                "choices": { "type": "array", "items": { "type": "object", "required": ["index", "message", "finish_reason"] } },
                "usage": { "type": "object", "required": ["prompt_tokens", "completion_tokens", "total_tokens"] },
            }})
        },
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
];
