//! `/v1/account/.../usage`: what an account's agents did and earned, for its owner's
//! dashboards (`services::usage_report`), and each agent's chat tokens by day. Mounted
//! under the account routes, behind their key check; scope `manage`.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::account::{Answer, Manager, ok};
use crate::error::{ApiError, ApiPath, ApiQuery};
use crate::services::{agents, usage_report};
use crate::views;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/account/agents/{agent_id}/chat-usage", get(chat_usage))
        .route("/v1/account/agents/{agent_id}/usage", get(agent_usage))
        .route("/v1/account/usage", get(account_usage))
}

/// `?days=N`: the last N UTC days, today included (30 unless asked).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DaysQuery {
    days: Option<u32>,
}

async fn chat_usage(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<DaysQuery>,
) -> Answer {
    let days = match query.days {
        None => 30,
        Some(n @ 1..=366) => n,
        Some(n) => {
            return Err(ApiError::validation(format!(
                "Invalid query parameter 'days': {n} is not between 1 and 366"
            )));
        }
    };
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let usage = crate::services::chat_tokens::by_day(services, &agent, days).await?;
    ok(views::chat_usage(&usage))
}

/// `?from&to&step`: a usage report's range (`usage_report::range`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeQuery {
    from: Option<String>,
    to: Option<String>,
    step: Option<String>,
}

impl RangeQuery {
    fn range(&self) -> Result<usage_report::Range, ApiError> {
        let now = crate::clock::now_ms();
        Ok(usage_report::range(
            self.from.as_deref(),
            self.to.as_deref(),
            self.step.as_deref(),
            now,
        )?)
    }
}

async fn agent_usage(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<RangeQuery>,
) -> Answer {
    let range = query.range()?;
    let store = &state.services.store;
    let agent = agents::owned(store, &caller.account.id, &agent_id).await?;
    let report = usage_report::report(store, &caller.account.id, Some(&agent.id), range).await?;
    ok(json!(report))
}

async fn account_usage(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiQuery(query): ApiQuery<RangeQuery>,
) -> Answer {
    let range = query.range()?;
    let report = usage_report::report(&state.services.store, &caller.account.id, None, range).await?;
    ok(json!(report))
}
