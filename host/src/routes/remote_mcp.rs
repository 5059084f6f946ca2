//! `/v1/account/agents/{agent}/mcp-servers`: the remote MCP servers an agent's manifest
//! names, the tools each offers its chat now, and their credentials (set, or granted with
//! OAuth; never shown). Mounted under the account routes, behind their key check; scope
//! `manage`. The OAuth grant's callback, where the owner's browser comes back, is public
//! (`callback_routes`): its sealed `state` says whose grant it is.

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post, put};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::account::{Answer, Manager, ok};
use crate::error::{ApiJson, ApiPath, ApiQuery};
use crate::services::{agents, remote_oauth, remote_tools};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/account/agents/{agent_id}/mcp-servers", get(list))
        .route(
            "/v1/account/agents/{agent_id}/mcp-servers/{server}/credential",
            put(set_credential).delete(remove_credential),
        )
        .route(
            "/v1/account/agents/{agent_id}/mcp-servers/{server}/oauth",
            post(start_oauth),
        )
}

/// The public callback of the owners' OAuth grants.
pub fn callback_routes() -> Router<AppState> {
    Router::new().route(remote_oauth::CALLBACK_PATH, get(oauth_callback))
}

async fn start_oauth(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath((agent_id, server)): ApiPath<(String, String)>,
) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let authorization_url = remote_oauth::start(services, &agent, &server).await?;
    ok(json!({ "server": server, "authorization_url": authorization_url }))
}

/// What the authorization server sends the owner's browser back with.
#[derive(Deserialize)]
struct Callback {
    state: Option<String>,
    code: Option<String>,
    iss: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// Ends the grant and takes the owner back to the agent's MCP tab in the console.
async fn oauth_callback(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<Callback>,
) -> Result<axum::response::Redirect, crate::error::ApiError> {
    if let Some(error) = &query.error {
        let described = query.error_description.as_deref().unwrap_or_default();
        return Err(crate::error::ApiError::validation(format!(
            "The authorization server did not grant access: {error} {described}"
        )));
    }
    let (Some(grant), Some(code)) = (query.state.as_deref(), query.code.as_deref()) else {
        return Err(crate::error::ApiError::validation(
            "The callback needs 'state' and 'code'",
        ));
    };
    let services = &state.services;
    let (agent, server) = remote_oauth::finish(services, grant, code, query.iss.as_deref()).await?;
    remote_tools::forget_listing(services, &agent, &server);
    // The MCP tab shows the server connected.
    Ok(axum::response::Redirect::to(&format!(
        "/console#/agents/{}/mcp",
        agent.id
    )))
}

async fn list(State(state): State<AppState>, Manager(caller): Manager, ApiPath(agent_id): ApiPath<String>) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let servers = remote_tools::status(services, &agent).await?;
    ok(json!({ "servers": servers.iter().map(crate::views::remote_server).collect::<Vec<_>>() }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Credential {
    /// The header's value, such as `Bearer ...`.
    value: String,
}

async fn set_credential(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath((agent_id, server)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<Credential>,
) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    remote_tools::set_credential(services, &agent, &server, &body.value).await?;
    ok(json!({ "server": server, "credential_set": true }))
}

async fn remove_credential(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath((agent_id, server)): ApiPath<(String, String)>,
) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let removed = remote_tools::remove_credential(services, &agent, &server).await?;
    ok(json!({ "server": server, "removed": removed }))
}
