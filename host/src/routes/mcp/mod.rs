//! `/mcp/{agentId}`: every agent is an MCP server whose tools are its commands (and a chat
//! tool). The protocol (Streamable HTTP; the stateless 2026-07-28 revision and the
//! `initialize` revisions before it, on one URL) is the official SDK's, rmcp; this module
//! puts the gate in front of it (a key, or nothing for a buyer) and turns the agent's tools
//! and their outcomes into MCP's words.
//!
//! A plain `tools/call`, the bulk of the traffic, is answered on a direct path that skips
//! the SDK's per-request service (see `direct.rs`).
//!
//! The server keeps no sessions: every request stands alone, so any host of several can
//! answer it. GET and DELETE are answered 405, as both eras allow a server without a
//! stream of its own.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};

use self::direct::{Direct, Eligibility};
use self::server::AgentServer;
use super::AppState;
use super::guard::{self, Visitor, authority};
use crate::error::{ApiError, ApiPath, rate_headers};
use crate::services::ServiceError;
use crate::services::mcp::{self, Toolbox};
use crate::services::oauth;

mod direct;
mod icons;
mod results;
mod server;
mod tasks;

pub fn routes(state: AppState) -> Router<AppState> {
    let server = AgentServer { state: state.clone() };
    let config = config(&state);
    let eligibility = Arc::new(Eligibility::new(&config.allowed_hosts, config.max_request_body_bytes));
    let service = Arc::new(StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    ));
    let direct = eligibility.clone();
    Router::new()
        .route(
            "/mcp/{agent}",
            any(move |State(state): State<AppState>, request: Request| {
                let (service, eligibility) = (service.clone(), direct.clone());
                async move {
                    match direct::try_answer(&state, &eligibility, request).await {
                        Direct::Answered(response) => response,
                        Direct::Pass(request) => as_json_rpc(service.handle(request).await.into_response()).await,
                    }
                }
            }),
        )
        .route_layer(middleware::from_fn_with_state((state.clone(), eligibility), admit))
        .merge(icons::routes(state))
}

/// Stateless, JSON answers (a call that reports progress streams as SSE), the API's body
/// limit, and the guard against DNS rebinding: known host names only.
fn config(state: &AppState) -> StreamableHttpServerConfig {
    let settings = &state.services.settings;
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(settings.server.max_body_bytes);
    let public = authority(&state.services.public_base_url);
    let hosts = &settings.mcp.mcp_allowed_hosts;
    config = if hosts.iter().any(|h| h == "*") {
        config.disable_allowed_hosts()
    } else {
        let loopback = ["localhost", "127.0.0.1", "::1", "[::1]"].map(String::from);
        config.with_allowed_hosts(loopback.into_iter().chain(public.clone()).chain(hosts.iter().cloned()))
    };
    // Any page may pay here, as on the x402 routes (no cookie is lent to it): the guard
    // against DNS rebinding is the Host check above.
    config.disable_allowed_origins()
}

/// What the gate found, for the handler: the agent's tools as this caller may use them.
#[derive(Clone)]
struct Visit(Arc<Toolbox>);

/// The gate: a key (`Authorization: Bearer`, or `x-api-key` as on the keyed API) makes
/// the owner's visit, counted against the account's rate limit; no key makes a buyer's,
/// counted against the client address like the x402 route. Nothing is asked of GET and
/// DELETE, which the server refuses anyway, nor of a request by a host name the server does
/// not answer to (DNS rebinding): the SDK refuses it before a key is looked up.
async fn admit(
    State((state, eligibility)): State<(AppState, Arc<Eligibility>)>,
    path: Result<ApiPath<String>, ApiError>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST || !eligibility.host_allowed(request.headers()) {
        return next.run(request).await;
    }
    let ApiPath(agent) = match path {
        Ok(path) => path,
        Err(err) => return refusal(err, None),
    };
    // The OAuth challenge is written only for a refusal that needs it.
    let refusal = |err: ApiError| refusal(err, challenge(&state, &agent).as_ref());
    let (mut parts, body) = request.into_parts();
    let services = &state.services;
    let (visitor, decision) = match guard::visitor(&state, &parts, &agent).await {
        Ok(admitted) => admitted,
        Err(err) => return refusal(err),
    };
    let (caller, client) = match visitor {
        Visitor::Owner(caller) => (Some(caller), None),
        Visitor::Stranger { client } => (None, Some(client)),
    };
    let toolbox = match mcp::open(services, &agent, caller.as_ref()).await {
        Ok(toolbox) => toolbox.from_client(client),
        Err(ServiceError::Store(err)) => return refusal(ServiceError::Store(err).into()),
        // Without a key, an agent that sells nothing here is one that needs a key (and
        // says nothing of whether it exists).
        Err(_) if caller.is_none() => {
            return refusal(ApiError::unauthorized(
                "This agent's tools need an API key: Authorization: Bearer <key>",
            ));
        }
        Err(err) => return refusal(err.into()),
    };
    parts.extensions.insert(Visit(Arc::new(toolbox)));
    let mut response = next.run(Request::from_parts(parts, body)).await;
    response.headers_mut().extend(rate_headers(&decision));
    response
}

/// The `WWW-Authenticate` challenge of the agent's 401s when OAuth is on: where its
/// Protected Resource Metadata is, and the scope to ask for (RFC 9728 §5.1).
fn challenge(state: &AppState, agent: &str) -> Option<HeaderValue> {
    let metadata = super::oauth::resource_metadata_url(state, agent)?;
    HeaderValue::from_str(&format!(
        "Bearer resource_metadata=\"{metadata}\", scope=\"{}\"",
        oauth::SCOPE
    ))
    .ok()
}

/// A refusal before the protocol: the status and headers the API gives it, the body a
/// JSON-RPC error (its `data.code` the API's code). A 401 carries the OAuth `challenge`
/// when OAuth is on, else a bare `WWW-Authenticate: Bearer`: no OAuth metadata, which would
/// make clients drop the key header they were given.
fn refusal(err: ApiError, challenge: Option<&HeaderValue>) -> Response {
    let mut body = invalid_request(&err.message);
    body["error"]["data"] = json!({ "code": err.code });
    let mut response = (err.status, axum::Json(body)).into_response();
    response.headers_mut().extend(err.headers);
    if err.status == StatusCode::UNAUTHORIZED {
        let value = challenge.cloned().unwrap_or_else(|| HeaderValue::from_static("Bearer"));
        response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// The SDK refuses what is not a message it can serve (too large, a wrong content type, a
/// host or origin refused) in plain text, and a body that is not JSON as an invalid request
/// (`415`); here every refusal is a JSON-RPC error, and one of a body that is not JSON at all
/// a parse error (`400`, `-32700`), as JSON-RPC names it.
async fn as_json_rpc(response: Response) -> Response {
    if !response.status().is_client_error() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, 64 * 1024).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_string(),
        Err(_) => String::new(),
    };
    let mut error = match serde_json::from_str::<Value>(&text) {
        Ok(reply) if reply["error"].is_object() => reply,
        _ => invalid_request(&text),
    };
    // The SDK's 415 for a body it could not read as a message; serde_json's words say when
    // it was not JSON at all (a syntax error, nesting too deep).
    let syntax = [
        "while parsing",
        "expected value",
        "trailing characters",
        "recursion limit",
    ];
    let message = error["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if parts.status == StatusCode::UNSUPPORTED_MEDIA_TYPE
        && message.starts_with("fail to deserialize request body")
        && syntax.iter().any(|s| message.contains(s))
    {
        error["error"]["code"] = json!(-32700);
        parts.status = StatusCode::BAD_REQUEST;
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Response::from_parts(parts, axum::body::Body::from(error.to_string()))
}

/// A JSON-RPC "invalid request" error for a message whose id could not be read.
fn invalid_request(message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": null, "error": { "code": -32600, "message": message } })
}
