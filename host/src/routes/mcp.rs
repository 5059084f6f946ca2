//! `/mcp/{agentId}`: every agent is an MCP server whose tools are its commands (and a chat
//! tool). The protocol (Streamable HTTP; the stateless 2026-07-28 revision and the
//! `initialize` revisions before it, on one URL) is the official SDK's, rmcp; this module
//! puts the gate in front of it (a key, or nothing for a buyer) and turns the agent's tools
//! and their outcomes into MCP's words.
//!
//! The server keeps no sessions: every request stands alone, so any host of several can
//! answer it. GET and DELETE are answered 405, as both eras allow a server without a
//! stream of its own.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult, MetaObject,
    PaginatedRequestParams, ProgressNotificationParam, Resource, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use super::AppState;
use super::client::client_key;
use super::guard;
use crate::domain::{HandlerType, ResponseFormat};
use crate::error::{ApiError, ApiPath, rate_headers};
use crate::services::mcp::{self, Called, ToolCall, ToolOutcome, Toolbox};
use crate::services::{ServiceError, jobs};

pub fn routes(state: AppState) -> Router<AppState> {
    let server = AgentServer { state: state.clone() };
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(NeverSessionManager::default()),
        config(&state),
    );
    Router::new()
        .route(
            "/mcp/{agent}",
            any(move |request: Request| {
                let service = service.clone();
                async move { as_json_rpc(service.handle(request).await.into_response()).await }
            }),
        )
        .route_layer(middleware::from_fn_with_state(state, admit))
}

/// Stateless, JSON answers (a call that reports progress streams as SSE), the API's body
/// limit, and the guards against DNS rebinding: known host names, and no page from an
/// origin the operator did not list.
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
    let origins = &settings.server.cors_allowed_origins;
    if origins.iter().any(|o| o == "*") {
        config.disable_allowed_origins()
    } else {
        let own = origin(&state.services.public_base_url);
        config
            .with_allowed_origins(own.into_iter().chain(origins.iter().cloned()))
            .enforce_origin_validation()
    }
}

/// `host:port` of an absolute URL.
fn authority(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    Some(rest.split('/').next()?.to_string()).filter(|a| !a.is_empty())
}

/// `scheme://host:port` of an absolute URL.
fn origin(url: &str) -> Option<String> {
    let scheme = url.split_once("://")?.0;
    Some(format!("{scheme}://{}", authority(url)?))
}

/// What the gate found, for the handler: the agent's tools as this caller may use them.
#[derive(Clone)]
struct Visit(Arc<Toolbox>);

/// The gate: a key (`Authorization: Bearer`, or `x-api-key` as on the keyed API) makes
/// the owner's visit, counted against the account's rate limit; no key makes a buyer's,
/// counted against the client address like the x402 route. Nothing is asked of GET and
/// DELETE, which the server refuses anyway.
async fn admit(
    State(state): State<AppState>,
    path: Result<ApiPath<String>, ApiError>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let ApiPath(agent) = match path {
        Ok(path) => path,
        Err(err) => return refusal(err),
    };
    let (mut parts, body) = request.into_parts();
    let services = &state.services;
    let (caller, decision) = match presented_key(&parts.headers) {
        Some(key) => match guard::check_key(&state, &parts, &key).await {
            Ok((caller, decision)) => (Some(caller), decision),
            Err(err) => return refusal(err),
        },
        None => {
            let client = client_key(&parts, services.settings.server.client_ip_header.as_deref());
            match services.x402_limiter.client(&client, crate::clock::now_ms()).await {
                Ok(decision) if decision.allowed => (None, decision),
                Ok(decision) => return refusal(ServiceError::RateLimited(decision).into()),
                Err(err) => return refusal(ServiceError::from(err).into()),
            }
        }
    };
    let toolbox = match mcp::open(services, &agent, caller.as_ref()).await {
        Ok(toolbox) => toolbox,
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

fn presented_key(headers: &HeaderMap) -> Option<HeaderValue> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .and_then(|key| HeaderValue::from_str(key.trim()).ok());
    bearer.or_else(|| headers.get("x-api-key").cloned())
}

/// A refusal before the protocol: the status and headers the API gives it, the body a
/// JSON-RPC error (its `data.code` the API's code). A 401 carries a bare
/// `WWW-Authenticate: Bearer`: no OAuth metadata, which would make clients drop the key
/// header they were given.
fn refusal(err: ApiError) -> Response {
    let mut body = invalid_request(&err.message);
    body["error"]["data"] = json!({ "code": err.code });
    let mut response = (err.status, axum::Json(body)).into_response();
    response.headers_mut().extend(err.headers);
    if err.status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
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

#[derive(Clone)]
struct AgentServer {
    state: AppState,
}

impl AgentServer {
    fn visit(ctx: &RequestContext<RoleServer>) -> Result<Arc<Toolbox>, ErrorData> {
        ctx.extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Visit>())
            .map(|visit| visit.0.clone())
            .ok_or_else(|| ErrorData::internal_error("Internal server error", None))
    }
}

impl ServerHandler for AgentServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("agent-host", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "An agent's commands as tools, and a chat tool to talk to the agent. \
                 With a key they are free; without one, a priced tool answers what to pay \
                 (x402), paid in the call's _meta[\"x402/payment\"].",
            )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let toolbox = Self::visit(&ctx)?;
        let tools: Vec<Tool> = toolbox
            .tools()
            .iter()
            .filter_map(|tool| tool_of(tool, toolbox.description(tool)))
            .collect();
        let per_page = self.state.services.settings.mcp.mcp_tools_per_page;
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|start| *start < tools.len())
                .ok_or_else(|| ErrorData::invalid_params(format!("Invalid cursor '{cursor}'"), None))?,
        };
        let end = (start + per_page).min(tools.len());
        let next = (end < tools.len()).then(|| end.to_string());
        let page = tools.into_iter().skip(start).take(per_page).collect();
        Ok(ListToolsResult {
            next_cursor: next,
            ..ListToolsResult::with_all_items(page)
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let toolbox = Self::visit(&ctx)?;
        let name = request.name.to_string();
        let arguments = request.arguments.unwrap_or_default();
        // Text no database can keep, refused as on every other surface.
        if let Err(refused) = crate::error::refuse_nul(&serde_json::to_vec(&arguments).unwrap_or_default()) {
            return Ok(failure(ServiceError::Validation(refused.message), None).into());
        }
        let sent = json!({ "tool": name, "arguments": arguments });
        let call = ToolCall {
            name,
            arguments,
            payment: ctx.meta.get(mcp::PAYMENT_META).cloned(),
            request: sent,
        };
        let services = &self.state.services;
        // A client that sent a progress token waits for a long-running command, told its
        // progress; any other is given the command's job to poll.
        let progress = ctx.meta.get_progress_token().map(|token| {
            let peer = ctx.peer.clone();
            async move |percent: u8| {
                let report = ProgressNotificationParam::new(token.clone(), f64::from(percent)).with_total(100.0);
                let _ = peer.notify_progress(report).await;
            }
        });
        let result = match mcp::call(services, &toolbox, call, progress).await {
            // As both revisions name it: a protocol error, not a tool's.
            Ok(Called::UnknownTool) => {
                return Err(ErrorData::invalid_params(
                    format!("Unknown tool: {}", request.name),
                    None,
                ));
            }
            Ok(Called::PaymentRequired(required)) => {
                CallToolResult::structured_error(serde_json::to_value(required).unwrap_or_default())
            }
            Ok(Called::Done { outcome, settlement }) => {
                let mut result = result_of(outcome, &services.public_base_url);
                if let Some(settlement) = settlement {
                    let mut meta = Map::new();
                    meta.insert(
                        mcp::PAYMENT_RESPONSE_META.into(),
                        serde_json::to_value(settlement).unwrap_or_default(),
                    );
                    result.meta = Some(MetaObject(meta));
                }
                result
            }
            Err(ServiceError::Store(err)) => {
                tracing::error!("an MCP tool call failed on the store: {err}");
                return Err(ErrorData::internal_error("Internal server error", None));
            }
            Err(err) => failure(err, None),
        };
        Ok(result.into())
    }
}

/// A tool as MCP lists it. A command that takes a file is not a tool (no argument can
/// carry one).
fn tool_of(tool: &mcp::Tool<'_>, description: String) -> Option<Tool> {
    let schema = match tool.command {
        Some(command) => crate::schema::arguments(command)?,
        None => json!({
            "type": "object",
            "properties": { "message": { "type": "string", "description": "What to say to the agent" } },
            "required": ["message"],
        }),
    };
    let Value::Object(schema) = schema else {
        return None;
    };
    let mut description = description;
    if let Some(price) = tool.price {
        description = format!("{description} Costs {price} USDC a call, paid with x402.")
            .trim()
            .to_string();
    }
    let mut listed = Tool::new(tool.name.to_string(), description, Arc::new(schema));
    // A fixed text reads nothing and changes nothing; other handlers may reach anything.
    if tool
        .command
        .is_some_and(|c| c.def.handler_type == HandlerType::SimpleText)
    {
        listed = listed.with_annotations(
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        );
    }
    Some(listed)
}

/// A tool's outcome as MCP content: the answer's text, its media as a link, and JSON
/// answers also as structured content.
fn result_of(outcome: ToolOutcome, public_base_url: &str) -> CallToolResult {
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
fn failure(error: ServiceError, refund: Option<crate::services::purchase::RefundStarted>) -> CallToolResult {
    let err = ApiError::from(error);
    let mut details = json!({ "code": err.code, "message": err.message });
    if let Some(refund) = refund {
        details["refundTransaction"] = json!(refund.transaction);
    }
    let mut result = CallToolResult::error(vec![ContentBlock::text(err.message)]);
    result.structured_content = Some(details);
    result
}
