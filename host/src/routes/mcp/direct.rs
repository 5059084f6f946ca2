//! The direct path: a plain `tools/call` answered without the SDK's session machinery.
//!
//! rmcp serves every stateless POST by starting a one-message service: three tasks, a
//! channel each way and a tree of cancellation tokens, for one request and one answer.
//! Measured under load, that doubled the server's CPU per tool call over a keyed
//! execute of the same command. The call that dominates traffic, a `tools/call` of the
//! revisions before 2026-07-28 that asks for no progress, needs none of it: it is parsed
//! with rmcp's own message types and answered by the same [`answer_call`] the SDK calls.
//!
//! The path is only taken when the request plainly needs nothing else of the SDK: a JSON
//! body of at most the body limit, an `Accept` of both JSON and SSE, a protocol version
//! of those revisions (or none), a `Host` the SDK would allow (checked by the gate).
//! Anything else, refusals included, is the SDK's to answer.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header, request::Parts, uri::Authority};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, JsonRpcRequest, ProtocolVersion, RequestId, RequestMetaObject,
    ServerJsonRpcMessage, ServerResult,
};

use super::server::answer_call;
use rmcp::ErrorData;

use super::{Visit, invalid_request};
use crate::routes::AppState;

/// What the direct path did with a request.
pub(super) enum Direct {
    Answered(Response),
    /// Not the direct path's: the request as it came (its body read, when it was).
    Pass(Request),
}

/// The header checks that decide whether a request may take the direct path.
pub(super) struct Eligibility {
    /// The SDK's allowed hosts, read once: a name and, when the entry has one, a port;
    /// empty when every host is allowed.
    allowed_hosts: Vec<(String, Option<u16>)>,
    max_body_bytes: usize,
}

pub(super) async fn try_answer(state: &AppState, eligibility: &Eligibility, request: Request) -> Direct {
    let (parts, body) = request.into_parts();
    let visit = parts.extensions.get::<Visit>().cloned();
    let (Some(visit), true) = (visit, eligibility.admits(&parts)) else {
        return Direct::Pass(Request::from_parts(parts, body));
    };
    let bytes = match axum::body::to_bytes(body, eligibility.max_body_bytes).await {
        Ok(bytes) => bytes,
        // Not in within its bound: 408; too large (or cut off): refused in the SDK's words.
        Err(err) => {
            return Direct::Answered(match crate::routes::body_deadline::timed_out(&err) {
                Some(timed_out) => too_slow(timed_out),
                None => too_large(eligibility.max_body_bytes),
            });
        }
    };
    let Some((id, params, meta)) = plain_call(&bytes) else {
        return Direct::Pass(Request::from_parts(parts, Body::from(bytes)));
    };
    // No progress token: a long-running command answers with its job to poll. The call
    // runs on its own task, as the SDK runs its handlers: a client that goes away does not
    // cut a paid call off between its settlement and its answer, and shutdown waits for it.
    let no_progress = None::<fn(u8) -> std::future::Ready<()>>;
    let (state, toolbox) = (state.clone(), visit.0);
    let lifecycle = state.services.lifecycle.clone();
    let call = lifecycle.spawn(async move { answer_call(&state, &toolbox, params, &meta, no_progress, false).await });
    let message = match call.await {
        Ok(Ok(response)) => ServerJsonRpcMessage::response(ServerResult::from(response), id),
        // The revisions before 2026-07-28 answer a JSON-RPC error with HTTP 200.
        Ok(Err(error)) => ServerJsonRpcMessage::error(error, Some(id)),
        Err(_) => ServerJsonRpcMessage::error(ErrorData::internal_error("Internal server error", None), Some(id)),
    };
    Direct::Answered(json(StatusCode::OK, &message))
}

impl Eligibility {
    /// For an SDK configured with `allowed_hosts` (as it writes them) and `max_body_bytes`.
    pub(super) fn new(allowed_hosts: &[String], max_body_bytes: usize) -> Eligibility {
        let allowed_hosts = allowed_hosts
            .iter()
            .map(|allowed| match Authority::try_from(allowed.as_str()) {
                Ok(authority) => (bare_host(authority.host()), authority.port_u16()),
                Err(_) => (bare_host(allowed), None),
            })
            .collect();
        Eligibility {
            allowed_hosts,
            max_body_bytes,
        }
    }

    /// The `Host` is not looked at again: a request with a visit passed the gate, which
    /// checked it first.
    fn admits(&self, parts: &Parts) -> bool {
        let headers = &parts.headers;
        is_json(headers) && accepts_json_and_sse(headers) && is_earlier_revision(headers)
    }

    /// Whether the SDK would answer a request by this `Host`.
    pub(super) fn host_allowed(&self, headers: &HeaderMap) -> bool {
        if self.allowed_hosts.is_empty() {
            return true;
        }
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        let Some(host) = host.and_then(|h| Authority::try_from(h).ok()) else {
            return false;
        };
        let (name, port) = (bare_host(host.host()), host.port_u16());
        self.allowed_hosts
            .iter()
            .any(|(allowed, allowed_port)| *allowed == name && allowed_port.is_none_or(|p| port == Some(p)))
    }
}

fn bare_host(host: &str) -> String {
    host.trim_matches(['[', ']']).to_ascii_lowercase()
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim())
        .is_some_and(|essence| essence.eq_ignore_ascii_case("application/json"))
}

/// Both media types, named plainly (any parameter, a weight for one, leaves it to the SDK).
fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        for entry in value.split(',').map(str::trim) {
            if entry.contains(';') {
                return false;
            }
            json |= entry.eq_ignore_ascii_case("application/json");
            sse |= entry.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// No `MCP-Protocol-Version` (the SDK reads 2025-03-26 then), or a revision it knows that
/// comes before the stateless one with its required headers.
fn is_earlier_revision(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all("mcp-protocol-version").iter();
    match (values.next(), values.next()) {
        (None, _) => true,
        (Some(value), None) => value.to_str().is_ok_and(|version| {
            version < ProtocolVersion::STANDARD_HEADERS.as_str()
                && ProtocolVersion::KNOWN_VERSIONS
                    .iter()
                    .any(|known| known.as_str() == version)
        }),
        (Some(_), Some(_)) => false,
    }
}

/// A `tools/call` request that asks for nothing but its result: no progress token, no
/// per-request protocol version, no answers to an earlier input request.
/// Its `_meta` comes apart from the parameters, as the SDK reads it.
/// Read as that one kind of request, not as any message: trying each kind in turn costs
/// more than the rest of the parse.
fn plain_call(bytes: &Bytes) -> Option<(RequestId, CallToolRequestParams, RequestMetaObject)> {
    // Any other message is the SDK's, which reads it again: not read twice in full.
    if !bytes.windows(b"tools/call".len()).any(|window| window == b"tools/call") {
        return None;
    }
    let request = serde_json::from_slice::<JsonRpcRequest<CallToolRequest>>(bytes).ok()?;
    let mut call = request.request;
    let meta = call.extensions.remove::<RequestMetaObject>().unwrap_or_default();
    let params = call.params;
    let plain = meta.get_progress_token().is_none()
        && meta.protocol_version().is_none()
        && params.input_responses.is_none()
        && params.request_state.is_none();
    plain.then_some((request.id, params, meta))
}

fn too_slow(timed_out: &crate::routes::body_deadline::BodyTimedOut) -> Response {
    let message = format!("Request Timeout: {timed_out}");
    (StatusCode::REQUEST_TIMEOUT, axum::Json(invalid_request(&message))).into_response()
}

fn too_large(max_bytes: usize) -> Response {
    let message = format!("Payload Too Large: request body exceeds {max_bytes} bytes");
    (StatusCode::PAYLOAD_TOO_LARGE, axum::Json(invalid_request(&message))).into_response()
}

fn json(status: StatusCode, message: &ServerJsonRpcMessage) -> Response {
    match serde_json::to_vec(message) {
        Ok(body) => (status, [(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}
