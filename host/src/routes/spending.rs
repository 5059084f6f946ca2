//! `/v1/account/agents/{agent}/spending`: what the agent paid for the x402 services its
//! commands called, and what its owner lets it spend. Mounted under the account routes,
//! behind their key check; scope `manage`.

use axum::Router;
use axum::extract::State;
use axum::routing::get;

use super::AppState;
use super::account::{Answer, ListQuery, Manager, ok};
use crate::error::{ApiPath, ApiQuery};
use crate::services::{agents, spending};

pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/account/agents/{agent_id}/spending", get(list))
}

async fn list(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let spent = spending::of_agent(&services.store, &agent, query.limit()?).await?;
    ok(crate::views::spending(&spent, &services.chains))
}
