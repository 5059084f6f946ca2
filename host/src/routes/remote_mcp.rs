//! `/v1/account/agents/{agent}/mcp-servers`: the remote MCP servers an agent's manifest
//! names, the tools each offers its chat now, and their credentials (set, or granted with
//! OAuth; never shown). Mounted under the account routes, behind their key check; scope
//! `manage`. The OAuth grant's callback, where the owner's browser comes back, is public
//! (`callback_routes`) and grants nothing: it hands the code to the console, where the owner
//! finishes the grant with their key.

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
        .route("/v1/account/mcp-servers/oauth/finish", post(finish_oauth))
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

/// The browser's way back: nothing is granted here, where anyone may land. The code goes
/// on to the console, in the address's fragment (never sent to a server), where the owner,
/// signed in, finishes the grant with their key.
async fn oauth_callback(
    ApiQuery(query): ApiQuery<Callback>,
) -> Result<axum::response::Redirect, crate::error::ApiError> {
    if let Some(error) = &query.error {
        let described = query.error_description.as_deref().unwrap_or_default();
        return Err(crate::error::ApiError::validation(format!(
            "The authorization server did not grant access: {error} {described}"
        )));
    }
    let (Some(grant), Some(code)) = (query.state, query.code) else {
        return Err(crate::error::ApiError::validation(
            "The callback needs 'state' and 'code'",
        ));
    };
    let mut forward = vec![("state", grant), ("code", code)];
    forward.extend(query.iss.map(|iss| ("iss", iss)));
    // Encoded twice: once as a query, then as one part of the console's `#/page/part`.
    let forward = serde_urlencoded::to_string(&forward).unwrap_or_default();
    let forward = serde_urlencoded::to_string([("", forward)]).unwrap_or_default();
    let forward = forward.trim_start_matches('=');
    Ok(axum::response::Redirect::to(&format!("/console#/mcp-grant/{forward}")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Finish {
    state: String,
    code: String,
    iss: Option<String>,
}

/// The grant's last step, by the owner who began it (their key's account must be the one
/// the grant was begun for).
async fn finish_oauth(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiJson(body): ApiJson<Finish>,
) -> Answer {
    let services = &state.services;
    let (agent, server) = remote_oauth::finish(
        services,
        &caller.account.id,
        &body.state,
        &body.code,
        body.iss.as_deref(),
    )
    .await?;
    remote_tools::forget_listing(services, &agent, &server);
    ok(json!({ "agent_id": agent.id, "server": server, "connected": true }))
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
