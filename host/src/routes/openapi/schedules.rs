//! The account API's schedules (`/v1/account/agents/{agentId}/schedules`), as data for the
//! OpenAPI document.

use serde_json::{Value, json};

use super::operations::{MANAGE_ERRORS, Operation, success};

/// A schedule as the owner writes it: one of four times, a command or a prompt.
fn spec() -> Value {
    let whole = |min: u64, max: u64| json!({ "type": "integer", "minimum": min, "maximum": max });
    json!({ "type": "object", "required": ["name"], "additionalProperties": false, "properties": {
        "name": { "type": "string", "pattern": "^[a-z0-9_-]{1,64}$" },
        "cron": { "type": "string", "description": "minute hour day-of-month month day-of-week, or @daily and the like" },
        "timezone": { "type": "string", "description": "The cron expression's IANA time zone; UTC when absent" },
        "every_seconds": whole(60, 31_622_400),
        "at": { "type": "string", "format": "date-time" },
        "after_seconds": whole(1, 31_622_400),
        "command": { "type": "string" },
        "parameters": { "type": "object" },
        "prompt": { "type": "string", "minLength": 1, "maxLength": 4000 },
        "deliver": { "type": "object", "required": ["to"], "properties": {
            "to": { "type": "string", "enum": ["log", "telegram", "social", "webhook"] },
            "chat_id": { "type": "integer" } } },
        "missed": { "type": "string", "enum": ["catch_up", "skip"] },
        "enabled": { "type": "boolean" },
    }})
}

fn schedule() -> Value {
    json!({ "type": "object", "required": ["id", "name", "source", "status", "next_run_at", "deliver"], "properties": {
        "id": { "type": "string" }, "name": { "type": "string" },
        "source": { "type": "string", "enum": ["manifest", "api"] },
        "status": { "type": "string", "enum": ["active", "paused", "stopped", "done"] },
        "next_run_at": { "type": ["string", "null"], "format": "date-time" },
        "last_run_at": { "type": ["string", "null"], "format": "date-time" },
        "last_outcome": { "type": ["string", "null"], "enum": ["succeeded", "failed", "skipped", null] },
        "deliver": { "type": "object", "required": ["to"] },
    }})
}

const ONE_ERRORS: &[(u16, &str)] = &[
    (400, "validation_error"),
    (403, "insufficient_scope"),
    (404, "not_found"),
];

pub const SCHEDULES: &[Operation] = &[
    Operation {
        method: "get",
        path: "/v1/account/agents/{agentId}/schedules",
        id: "listSchedules",
        summary: "The agent's schedules, with their next and last runs",
        keyed: true,
        pending: false,
        request: None,
        response: || {
            success(json!({ "type": "object", "required": ["schedules"], "properties": {
            "schedules": { "type": "array", "items": schedule() } } }))
        },
        errors: MANAGE_ERRORS,
    },
    Operation {
        method: "post",
        path: "/v1/account/agents/{agentId}/schedules",
        id: "createSchedule",
        summary: "Schedule a command run or a prompt (201): once, after a delay, every interval or on a cron expression in a time zone",
        keyed: true,
        pending: false,
        request: Some(spec),
        response: || success(schedule()),
        errors: &[
            (400, "validation_error"),
            (403, "insufficient_scope"),
            (403, "quota_exceeded"),
            (404, "not_found"),
            (409, "conflict"),
        ],
    },
    Operation {
        method: "get",
        path: "/v1/account/agents/{agentId}/schedules/{schedule}",
        id: "showSchedule",
        summary: "One schedule, by id or name",
        keyed: true,
        pending: false,
        request: None,
        response: || success(schedule()),
        errors: ONE_ERRORS,
    },
    Operation {
        method: "patch",
        path: "/v1/account/agents/{agentId}/schedules/{schedule}",
        id: "updateSchedule",
        summary: "Pause a schedule, or resume it from now (a stopped one too, its failures forgotten)",
        keyed: true,
        pending: false,
        request: Some(|| {
            json!({ "type": "object", "required": ["enabled"], "additionalProperties": false,
                "properties": { "enabled": { "type": "boolean" } } })
        }),
        response: || success(schedule()),
        errors: &[
            (400, "validation_error"),
            (403, "insufficient_scope"),
            (404, "not_found"),
            (409, "conflict"),
        ],
    },
    Operation {
        method: "delete",
        path: "/v1/account/agents/{agentId}/schedules/{schedule}",
        id: "deleteSchedule",
        summary: "Delete a schedule and its runs",
        keyed: true,
        pending: false,
        request: None,
        response: || success(json!({ "type": "object", "required": ["id", "deleted"] })),
        errors: ONE_ERRORS,
    },
    Operation {
        method: "get",
        path: "/v1/account/agents/{agentId}/schedules/{schedule}/runs",
        id: "listScheduleRuns",
        summary: "A schedule's runs, newest first: when each was due, how it ended, its answer or error",
        keyed: true,
        pending: false,
        request: None,
        response: || {
            success(
                json!({ "type": "object", "required": ["schedule", "runs"], "properties": {
            "schedule": schedule(), "runs": { "type": "array" } } }),
            )
        },
        errors: ONE_ERRORS,
    },
];
