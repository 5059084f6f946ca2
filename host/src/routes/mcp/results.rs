//! A tool's outcome in MCP's words: the answer's text, its media as links, JSON answers as
//! structured content, failures as tool errors; shaped by the tool's manifest entry (its own
//! content blocks, or held to its output schema). A call and its task's result alike.

use rmcp::model::{CallToolResult, ContentBlock, Resource};
use serde_json::{Map, Value, json};

use crate::domain::{McpToolMeta, ResponseFormat};
use crate::error::ApiError;
use crate::services::ServiceError;
use crate::services::jobs;
use crate::services::mcp::ToolOutcome;

/// A result held to the tool's declared output schema: a JSON object answer with every
/// `required` property of the schema is its structured content; another answer is a tool
/// error, since a client may check it against the schema it was shown. An error carries no
/// structured content then (clients check any they get against the schema), only its text.
fn following(result: CallToolResult, schema: Option<&Map<String, Value>>) -> CallToolResult {
    let Some(schema) = schema else {
        return result;
    };
    let unstructured = |mut error: CallToolResult| {
        error.structured_content = None;
        error
    };
    if result.is_error == Some(true) {
        return unstructured(result);
    }
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let why = match &result.structured_content {
        Some(Value::Object(answer)) => required
            .iter()
            .filter_map(Value::as_str)
            .find(|k| !answer.contains_key(*k))
            .map(|k| format!("'{k}' is missing")),
        _ => Some("it is not a JSON object".into()),
    };
    match why {
        None => result,
        Some(why) => unstructured(failure(
            ServiceError::Execution(format!("The command's answer does not follow its output schema: {why}")),
            None,
        )),
    }
}

/// A result as its tool's manifest shapes it: its own content blocks, or held to its output
/// schema. A call and its task's result are shaped alike.
pub(super) fn shaped(result: CallToolResult, tool: Option<&McpToolMeta>) -> CallToolResult {
    let result = match tool.is_some_and(|t| t.content_blocks) {
        true => as_blocks(result),
        false => result,
    };
    following(result, tool.and_then(|t| t.output_schema.as_ref()))
}

/// The result of a tool that answers MCP content itself (`content_blocks`): its answer, a
/// JSON array of content blocks, as the result's content; an answer that is not one is a
/// tool error.
fn as_blocks(result: CallToolResult) -> CallToolResult {
    if result.is_error == Some(true) {
        return result;
    }
    let answer = result
        .content
        .first()
        .and_then(|block| block.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_default();
    match serde_json::from_str::<Vec<ContentBlock>>(&answer) {
        Ok(blocks) if !blocks.is_empty() => CallToolResult::success(blocks),
        _ => failure(
            ServiceError::Execution("The command's answer is not a JSON array of MCP content blocks".into()),
            None,
        ),
    }
}

/// A tool's outcome as MCP content: the answer's text, its media as a link, and JSON
/// answers also as structured content.
pub(super) fn result_of(outcome: ToolOutcome, public_base_url: &str) -> CallToolResult {
    match outcome {
        ToolOutcome::Answered(answer) => {
            let mut content = Vec::new();
            if !answer.response.is_empty() {
                content.push(ContentBlock::text(answer.response.clone()));
            }
            if let Some(url) = answer.media_url {
                let kind = match answer.format {
                    ResponseFormat::Video => "video",
                    _ => "image",
                };
                content.push(ContentBlock::resource_link(Resource::new(url, kind)));
            }
            let mut result = CallToolResult::success(content);
            result.structured_content = serde_json::from_str::<Value>(&answer.response)
                .ok()
                .filter(Value::is_object);
            result
        }
        ToolOutcome::Queued { job_id } => {
            let status_url = jobs::status_url(public_base_url, &job_id);
            let mut result = CallToolResult::success(vec![ContentBlock::text(format!(
                "Started: the command runs as job {job_id}; its result will be at {status_url}"
            ))]);
            result.structured_content = Some(json!({ "jobId": job_id, "statusUrl": status_url }));
            result
        }
        ToolOutcome::Failed { error, refund } => failure(error, refund),
    }
}

/// A failure as a tool result the model reads (`isError`), with the API's code, and the
/// refund of a paid call that failed by the agent's fault.
pub(super) fn failure(error: ServiceError, refund: Option<crate::services::purchase::RefundStarted>) -> CallToolResult {
    let err = ApiError::from(error);
    let mut details = json!({ "code": err.code, "message": err.message });
    if let Some(refund) = refund {
        details["refundTransaction"] = json!(refund.transaction);
    }
    let mut result = CallToolResult::error(vec![ContentBlock::text(err.message)]);
    result.structured_content = Some(details);
    result
}
