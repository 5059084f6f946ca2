//! `/icons/{agent}` and `/icons/{agent}/{tool}`: the icons an agent's manifest gives its MCP
//! server and tools (`[mcp] icon`, `[mcp.tools.<name>] icon`), which MCP clients show. Public,
//! like the agent's name in its MCP server's info; served so that nothing in them runs (an
//! SVG's scripts included), from any page.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine;

use crate::domain::McpIcon;
use crate::error::{ApiError, ApiPath};
use crate::routes::AppState;

/// Counted per client address, as the paid routes are: an unknown agent is a store read.
pub(super) fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/icons/{agent}", get(agent_icon))
        .route("/icons/{agent}/{tool}", get(tool_icon))
        .route_layer(axum::middleware::from_fn_with_state(
            state,
            crate::routes::x402::limit_clients,
        ))
}

/// Where an agent's icon, or its tool's, is served.
pub(super) fn icon_url(public_base_url: &str, agent_id: &str, tool: Option<&str>) -> String {
    match tool {
        Some(tool) => format!("{public_base_url}/icons/{agent_id}/{tool}"),
        None => format!("{public_base_url}/icons/{agent_id}"),
    }
}

async fn agent_icon(State(state): State<AppState>, ApiPath(agent): ApiPath<String>) -> Result<Response, ApiError> {
    let found = state
        .services
        .store
        .agent_with_commands(&agent)
        .await
        .map_err(internal)?;
    let icon = found.and_then(|f| f.agent.def.mcp.icon.clone());
    icon.map(serve).ok_or_else(|| ApiError::not_found("No icon"))
}

async fn tool_icon(
    State(state): State<AppState>,
    ApiPath((agent, tool)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    let found = state
        .services
        .store
        .agent_with_commands(&agent)
        .await
        .map_err(internal)?;
    let icon = found.and_then(|f| f.agent.def.mcp.tools.get(&tool).and_then(|t| t.icon.clone()));
    icon.map(serve).ok_or_else(|| ApiError::not_found("No icon"))
}

fn internal(err: crate::store::StoreError) -> ApiError {
    ApiError::from(crate::services::ServiceError::Store(err))
}

fn serve(icon: McpIcon) -> Response {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&icon.data)
        .unwrap_or_default();
    let mut response = bytes.into_response();
    let headers = response.headers_mut();
    let fixed = HeaderValue::from_static;
    if let Ok(mime) = HeaderValue::from_str(&icon.mime_type) {
        headers.insert(header::CONTENT_TYPE, mime);
    }
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        fixed("default-src 'none'; style-src 'unsafe-inline'; sandbox"),
    );
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, fixed("nosniff"));
    headers.insert(header::CACHE_CONTROL, fixed("public, max-age=300"));
    response
}
