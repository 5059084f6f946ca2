//! `/a2a/{agentId}`: every agent is an A2A server (version 1.0, the JSON-RPC binding). Its
//! card is at `/a2a/{agentId}/.well-known/agent-card.json`, where A2A clients look for it
//! under the agent's URL; `/a2a` lists the agents whose owners list them. The gate is the
//! MCP endpoint's: the owner's key or OAuth token, or nothing for what the owner opened.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use self::rpc::{Call, Dialect, RpcError};
use super::AppState;
use super::guard::{self, Visitor};
use crate::error::{ApiError, ApiPath, rate_headers};
use crate::services::ServiceError;
use crate::services::a2a::{self, Desk};

mod card;
mod rpc;
mod stream;
mod v03;
mod wire;

pub use card::{card_url, endpoint};

/// The agents one page of `/a2a` lists at most.
const LISTED_PAGE: u32 = 100;

pub fn routes(state: AppState) -> Router<AppState> {
    // What anyone may read counts against the client's limit, as the paid routes do; the
    // calls are counted at their gate.
    let public = Router::new()
        .route("/a2a", get(listed))
        .route("/a2a/{agent}/.well-known/agent-card.json", get(agent_card))
        .route("/a2a/{agent}/v0.3/.well-known/agent-card.json", get(agent_card_v03))
        .route("/.well-known/jwks.json", get(card_keys))
        .route_layer(axum::middleware::from_fn_with_state(state, super::x402::limit_clients));
    Router::new()
        .route("/a2a/{agent}", post(call))
        .route("/a2a/{agent}/v0.3", post(call_v03))
        .merge(public)
}

/// The key set the agents' cards are signed with: the operator's one key, or none.
async fn card_keys(State(state): State<AppState>) -> Response {
    let keys: Vec<Value> = state.services.card_key.iter().map(|k| k.jwk()).collect();
    let mut response = axum::Json(json!({ "keys": keys })).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
    response
}

/// The gate's refusal: the API's status and headers, a JSON-RPC error body (its
/// `ErrorInfo` carries the API's code). A 401 says how to sign in.
fn refusal(err: ApiError) -> Response {
    let body = RpcError::refused(&err).reply(&Value::Null);
    let mut response = (err.status, axum::Json(body)).into_response();
    response.headers_mut().extend(err.headers);
    if err.status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

/// Opens the agent for whoever calls: its owner (by key or token), or anyone when the
/// owner opened it. The rate decision's headers go on the answer.
async fn open(
    state: &AppState,
    parts: &Parts,
    agent: &str,
) -> Result<(Desk, crate::services::rate_limit::RateDecision), ApiError> {
    let (visitor, decision) = guard::visitor(state, parts, agent).await?;
    let (caller, client) = match visitor {
        Visitor::Owner(caller) => (Some(caller), None),
        Visitor::Stranger { client } => (None, Some(client)),
    };
    match a2a::open(&state.services, agent, caller.as_ref(), client).await {
        Ok(desk) => Ok((desk, decision)),
        Err(ServiceError::Store(err)) => Err(ServiceError::Store(err).into()),
        // Without a key, an agent that neither sells nor was opened is one that needs a key
        // (and says nothing of whether it exists).
        Err(_) if caller.is_none() => Err(ApiError::unauthorized(
            "This agent's skills need its owner's key (x-api-key, or Authorization: Bearer)",
        )),
        Err(err) => Err(err.into()),
    }
}

async fn call(
    State(state): State<AppState>,
    path: Result<ApiPath<String>, ApiError>,
    parts: Parts,
    body: Bytes,
) -> Response {
    answer_in(state, path, parts, body, Dialect::V1).await
}

/// A2A 0.3's calls, at the agent's URL with `/v0.3` (see `v03`).
async fn call_v03(
    State(state): State<AppState>,
    path: Result<ApiPath<String>, ApiError>,
    parts: Parts,
    body: Bytes,
) -> Response {
    answer_in(state, path, parts, body, Dialect::V03).await
}

async fn answer_in(
    state: AppState,
    path: Result<ApiPath<String>, ApiError>,
    parts: Parts,
    body: Bytes,
    dialect: Dialect,
) -> Response {
    let ApiPath(agent) = match path {
        Ok(path) => path,
        Err(err) => return refusal(err),
    };
    if dialect == Dialect::V1
        && let Err(err) = check_version(&parts.headers)
    {
        return rpc::json_reply(err.reply(&Value::Null));
    }
    let (desk, decision) = match open(&state, &parts, &agent).await {
        Ok(opened) => opened,
        Err(err) => return refusal(err),
    };
    let call = read_call(&body).and_then(|call| match dialect {
        Dialect::V1 => Ok(call),
        Dialect::V03 => {
            let id = call.id.clone();
            v03::call(call).map_err(|err| (id, err))
        }
    });
    let mut response = match call {
        Ok(call) => rpc::answer(state.services.clone(), Arc::new(desk), call, dialect).await,
        Err((id, err)) => {
            let status = if err.code == -32700 {
                StatusCode::BAD_REQUEST
            } else {
                StatusCode::OK
            };
            (status, axum::Json(err.reply(&id))).into_response()
        }
    };
    response.headers_mut().extend(rate_headers(&decision));
    response
}

/// The version a client asks for (`A2A-Version`); none is taken as the one spoken here.
fn check_version(headers: &HeaderMap) -> Result<(), RpcError> {
    let Some(asked) = headers.get("a2a-version") else {
        return Ok(());
    };
    let asked = asked.to_str().unwrap_or_default().trim();
    let major_minor = asked.split('.').take(2).collect::<Vec<_>>().join(".");
    if asked.is_empty() || major_minor == card::PROTOCOL_VERSION || asked == "1" {
        return Ok(());
    }
    Err(RpcError::new(
        -32009,
        "VERSION_NOT_SUPPORTED",
        format!(
            "A2A version '{asked}' is not spoken here; this server speaks {}",
            card::PROTOCOL_VERSION
        ),
    ))
}

/// The body as one JSON-RPC request; or the error to answer, with the id when it was read.
fn read_call(body: &[u8]) -> Result<Call, (Value, RpcError)> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| (Value::Null, RpcError::parse(format!("The body is not JSON: {e}"))))?;
    let Value::Object(mut object) = value else {
        return Err((
            Value::Null,
            RpcError::invalid_request("A request is one JSON-RPC object (batches are not taken)"),
        ));
    };
    let id = match object.remove("id") {
        None => Value::Null,
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => id,
        Some(_) => {
            return Err((
                Value::Null,
                RpcError::invalid_request("id must be a string or a number"),
            ));
        }
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((id, RpcError::invalid_request("jsonrpc must be \"2.0\"")));
    }
    let Some(Value::String(method)) = object.remove("method") else {
        return Err((id, RpcError::invalid_request("method is missing")));
    };
    let params = object.remove("params").unwrap_or(Value::Null);
    Ok(Call { id, method, params })
}

/// The agent's card: its owner's (with a credential), or the public one of an agent its
/// owner listed or opened.
async fn agent_card(State(state): State<AppState>, ApiPath(agent): ApiPath<String>, parts: Parts) -> Response {
    if guard::presented_key(&parts.headers).is_some() {
        return match open(&state, &parts, &agent).await {
            Ok((desk, decision)) => {
                let mut response = axum::Json(card::card(&state, &desk)).into_response();
                let headers = response.headers_mut();
                headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
                headers.extend(rate_headers(&decision));
                response
            }
            Err(err) => err.into_response(),
        };
    }
    match a2a::public(&state.services, &agent).await {
        Ok(Some(desk)) => {
            let mut response = axum::Json(card::card(&state, &desk)).into_response();
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=60"));
            response
        }
        Ok(None) => ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("No public A2A card for agent '{agent}': its owner reads it with a key"),
        )
        .into_response(),
        Err(err) => ApiError::from(err).into_response(),
    }
}

/// The agent's card as A2A 0.3 writes one, for the 0.3 URL.
async fn agent_card_v03(State(state): State<AppState>, path: ApiPath<String>, parts: Parts) -> Response {
    let ApiPath(agent) = &path;
    let agent = agent.clone();
    let response = agent_card(State(state.clone()), path, parts).await;
    if !response.status().is_success() {
        return response;
    }
    let (head, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return ApiError::internal("Internal server error").into_response();
    };
    let Ok(card) = serde_json::from_slice::<Value>(&bytes) else {
        return ApiError::internal("Internal server error").into_response();
    };
    // Its own URL names the agent by id, as the 1.0 card's interface does.
    let id = card["supportedInterfaces"][0]["url"]
        .as_str()
        .and_then(|u| u.rsplit('/').next())
        .unwrap_or(&agent)
        .to_string();
    let url = format!("{}/v0.3", endpoint(&state, &id));
    let mut response = axum::Json(v03::card(&card, &url)).into_response();
    if let Some(cache) = head.headers.get(header::CACHE_CONTROL) {
        response.headers_mut().insert(header::CACHE_CONTROL, cache.clone());
    }
    response
}

#[derive(Deserialize)]
struct ListedQuery {
    after: Option<String>,
}

/// The agents whose owners list them, with their cards' addresses.
async fn listed(
    State(state): State<AppState>,
    query: Result<Query<ListedQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return ApiError::validation("Invalid query: the one parameter is 'after', a username").into_response();
    };
    let agents = match a2a::listed(&state.services, query.after.as_deref(), LISTED_PAGE).await {
        Ok(agents) => agents,
        Err(err) => return ApiError::from(err).into_response(),
    };
    let next = (agents.len() == LISTED_PAGE as usize)
        .then(|| agents.last().map(|a| a.def.username.clone()))
        .flatten();
    let agents: Vec<Value> = agents
        .iter()
        .map(|agent| {
            json!({
                "id": agent.id,
                "username": agent.def.username,
                "name": agent.def.name,
                "url": endpoint(&state, &agent.id),
                "card_url": card_url(&state, &agent.id),
            })
        })
        .collect();
    let mut response = axum::Json(json!({ "agents": agents, "next": next })).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=60"));
    response
}
