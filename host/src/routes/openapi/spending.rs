//! The account API's record of what an agent paid (`/v1/account/agents/{agentId}/spending`),
//! as data for the OpenAPI document.

use serde_json::json;

use super::operations::{MANAGE_ERRORS, Operation, success};

pub const SPENDING: &[Operation] = &[Operation {
    method: "get",
    path: "/v1/account/agents/{agentId}/spending",
    id: "listAgentSpending",
    summary: "What the agent paid for the x402 services its commands called (newest first), what its owner lets it spend, and what it paid in the last 24 hours",
    keyed: true,
    pending: false,
    request: None,
    response: || {
        success(
            json!({ "type": "object", "required": ["policy", "spent_today_micro_usdc", "payments"], "properties": {
            "policy": { "type": ["object", "null"] },
            "spent_today_micro_usdc": { "type": "integer" },
            "payments": { "type": "array", "items": { "type": "object",
                "required": ["id", "command", "network", "state", "amount_micro_usdc", "pay_to", "resource", "created_at"] } } } }),
        )
    },
    errors: MANAGE_ERRORS,
}];
