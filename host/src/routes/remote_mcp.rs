//! `/v1/account/agents/{agent}/mcp-servers`: the remote MCP servers an agent's manifest
//! names, the tools each offers its chat now, and their credentials (set, never shown).
//! Mounted under the account routes, behind their key check; scope `manage`.

use axum::Router;
use axum::extract::State;
use axum::routing::{get, put};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::account::{Answer, Manager, ok};
use crate::error::{ApiJson, ApiPath};
use crate::services::{agents, remote_tools};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/account/agents/{agent_id}/mcp-servers", get(list))
        .route(
            "/v1/account/agents/{agent_id}/mcp-servers/{server}/credential",
            put(set_credential).delete(remove_credential),
        )
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
