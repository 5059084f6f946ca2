//! `/v1/account/agents/{agent}/schedules`: the work an agent does on its own
//! (docs/schedules.md), with each schedule's runs. Mounted under the account routes, behind
//! their key check; scope `manage`.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::account::{Answer, ListQuery, Manager, ok};
use crate::domain::schedule::ScheduleSpec;
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery};
use crate::services::{agents, schedules};
use crate::views;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/account/agents/{agent_id}/schedules", get(list).post(create))
        .route(
            "/v1/account/agents/{agent_id}/schedules/{schedule}",
            get(show).patch(update).delete(remove),
        )
        .route("/v1/account/agents/{agent_id}/schedules/{schedule}/runs", get(runs))
}

async fn list(State(state): State<AppState>, Manager(caller): Manager, ApiPath(agent_id): ApiPath<String>) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let list = schedules::list(services, &agent).await?;
    ok(json!({ "schedules": list.iter().map(views::schedule).collect::<Vec<_>>() }))
}

async fn create(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
    ApiJson(spec): ApiJson<ScheduleSpec>,
) -> Answer {
    let services = &state.services;
    let found = agents::owned_with_commands(&services.store, &caller.account.id, &agent_id).await?;
    let made = schedules::create(services, &found.agent, &found.commands, spec).await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(json!({ "success": true, "data": views::schedule(&made) })),
    ))
}

async fn show(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath((agent_id, schedule)): ApiPath<(String, String)>,
) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    ok(views::schedule(&schedules::find(services, &agent, &schedule).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Update {
    /// `false` pauses it; `true` resumes it from now (a stopped one too).
    enabled: Option<bool>,
}

async fn update(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath((agent_id, schedule)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<Update>,
) -> Answer {
    let Some(enabled) = body.enabled else {
        return Err(ApiError::validation("Nothing to change: give 'enabled'"));
    };
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    ok(views::schedule(
        &schedules::set_enabled(services, &agent, &schedule, enabled).await?,
    ))
}

async fn remove(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath((agent_id, schedule)): ApiPath<(String, String)>,
) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let removed = schedules::delete(services, &agent, &schedule).await?;
    ok(json!({ "id": removed.id, "name": removed.def.name, "deleted": true }))
}

async fn runs(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath((agent_id, schedule)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let (schedule, runs) = schedules::runs(services, &agent, &schedule, query.limit()?).await?;
    ok(json!({
        "schedule": views::schedule(&schedule),
        "runs": runs.iter().map(views::schedule_run).collect::<Vec<_>>(),
    }))
}
