//! `/v1/account/webhooks`: an account's signed-webhook endpoints, their deliveries (with
//! every attempt, and a way to send one again), and the low-balance alerts on its agents'
//! wallets that raise `wallet.low_balance`. Mounted under the account routes, behind their
//! key check; scope `manage`.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::account::{Answer, ListQuery, Manager, ok};
use super::requests;
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery};
use crate::money::MicroUsdc;
use crate::services::webhooks::{self, NewEndpoint};
use crate::services::{agents, wallet_alerts};
use crate::store::EndpointChange;
use crate::views;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/account/webhooks", get(list).post(create))
        .route(
            "/v1/account/webhooks/{endpoint_id}",
            get(show).patch(update).delete(remove),
        )
        .route("/v1/account/webhooks/{endpoint_id}/deliveries", get(deliveries))
        .route(
            "/v1/account/webhooks/{endpoint_id}/deliveries/{delivery_id}",
            get(delivery),
        )
        .route(
            "/v1/account/webhooks/{endpoint_id}/deliveries/{delivery_id}/resend",
            post(resend),
        )
        .route(
            "/v1/account/agents/{agent_id}/wallets/{network}/alert",
            put(set_alert).delete(remove_alert),
        )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateEndpoint {
    url: String,
    /// Event types, or `["*"]` for all.
    events: Vec<String>,
    description: Option<String>,
}

async fn list(State(state): State<AppState>, Manager(caller): Manager) -> Answer {
    let endpoints = webhooks::list(&state.services, &caller.account).await?;
    ok(json!({ "endpoints": endpoints.iter().map(|e| views::webhook_endpoint(e, None)).collect::<Vec<_>>() }))
}

async fn create(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiJson(body): ApiJson<CreateEndpoint>,
) -> Answer {
    let new = NewEndpoint {
        url: body.url,
        description: webhooks::parse_description(body.description.as_deref())?,
        events: webhooks::parse_events(&body.events)?,
    };
    let (endpoint, secret) = webhooks::create(&state.services, &caller.account, new).await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(json!({ "success": true, "data": views::webhook_endpoint(&endpoint, Some(&secret)) })),
    ))
}

async fn show(State(state): State<AppState>, Manager(caller): Manager, ApiPath(id): ApiPath<String>) -> Answer {
    let (endpoint, secret) = webhooks::show(&state.services, &caller.account, &id).await?;
    ok(views::webhook_endpoint(&endpoint, Some(&secret)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateEndpoint {
    url: Option<String>,
    events: Option<Vec<String>>,
    #[serde(default, deserialize_with = "requests::present")]
    description: Option<Option<String>>,
    /// `true` enables a disabled endpoint (its failures forgotten); `false` disables it.
    enabled: Option<bool>,
}

async fn update(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<UpdateEndpoint>,
) -> Answer {
    if body.url.is_none() && body.events.is_none() && body.description.is_none() && body.enabled.is_none() {
        return Err(ApiError::validation(
            "Nothing to change: give 'url', 'events', 'description' or 'enabled'",
        ));
    }
    let change = EndpointChange {
        url: body.url,
        description: body
            .description
            .map(|d| webhooks::parse_description(d.as_deref()))
            .transpose()?,
        events: body.events.map(|e| webhooks::parse_events(&e)).transpose()?,
        enabled: body.enabled,
    };
    let endpoint = webhooks::update(&state.services, &caller.account, &id, change).await?;
    ok(views::webhook_endpoint(&endpoint, None))
}

async fn remove(State(state): State<AppState>, Manager(caller): Manager, ApiPath(id): ApiPath<String>) -> Answer {
    webhooks::delete(&state.services, &caller.account, &id).await?;
    ok(json!({ "id": id, "deleted": true }))
}

async fn deliveries(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Answer {
    let limit = query.limit()?;
    let list = webhooks::deliveries(&state.services, &caller.account, &id, limit).await?;
    ok(json!({ "deliveries": list.iter().map(views::webhook_delivery).collect::<Vec<_>>() }))
}

/// The delivery, if it is the endpoint's (another's answers as unknown).
async fn owned_delivery(
    state: &AppState,
    manager: &Manager,
    endpoint_id: &str,
    delivery_id: &str,
) -> Result<Value, ApiError> {
    let (delivery, body, attempts) = webhooks::delivery(&state.services, &manager.0.account, delivery_id).await?;
    if delivery.endpoint_id != endpoint_id {
        return Err(ApiError::not_found(format!(
            "no webhook delivery with id {delivery_id}"
        )));
    }
    let mut view = views::webhook_delivery(&delivery);
    view["body"] = json!(body);
    view["attempts"] = attempts.iter().map(views::webhook_attempt).collect();
    Ok(view)
}

async fn delivery(
    State(state): State<AppState>,
    manager: Manager,
    ApiPath((endpoint_id, delivery_id)): ApiPath<(String, String)>,
) -> Answer {
    ok(owned_delivery(&state, &manager, &endpoint_id, &delivery_id).await?)
}

async fn resend(
    State(state): State<AppState>,
    manager: Manager,
    ApiPath((endpoint_id, delivery_id)): ApiPath<(String, String)>,
) -> Answer {
    owned_delivery(&state, &manager, &endpoint_id, &delivery_id).await?;
    let delivery = webhooks::resend(&state.services, &manager.0.account, &delivery_id).await?;
    ok(views::webhook_delivery(&delivery))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Alert {
    /// Decimal USDC text, such as `"5.00"`.
    below_usdc: String,
}

async fn set_alert(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath((agent_id, network)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<Alert>,
) -> Answer {
    let network = requests::network(&network)?;
    let below = MicroUsdc::parse_decimal(body.below_usdc.trim())
        .map_err(|e| ApiError::validation(format!("Invalid field 'below_usdc': {e}")))?;
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let alert = wallet_alerts::set(services, &agent.id, network, Some(below)).await?;
    ok(alert.as_ref().map(views::wallet_alert).unwrap_or(Value::Null))
}

async fn remove_alert(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath((agent_id, network)): ApiPath<(String, String)>,
) -> Answer {
    let network = requests::network(&network)?;
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    wallet_alerts::set(services, &agent.id, network, None).await?;
    ok(json!({ "network": network.as_str(), "alert": null }))
}
