//! `/`, `/health`, `/ready`, `/openapi.json`: what the service is, whether it is well and
//! whether a load balancer should send it requests.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::{Value, json};

use super::AppState;

/// The API version the API's descriptor reports (the binary has its own).
pub const API_VERSION: &str = "1.0.0";

pub fn routes(state: AppState) -> Router<AppState> {
    // The document lists the paid addresses (store reads, a facilitator's fee payer): it
    // counts against the client's limit like the discovery lists.
    let document = Router::new()
        .route("/openapi.json", get(openapi))
        .route_layer(axum::middleware::from_fn_with_state(state, super::x402::limit_clients));
    Router::new()
        .route("/", get(descriptor))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .merge(document)
}

async fn descriptor() -> axum::Json<Value> {
    axum::Json(json!({
        "name": "Agent Interaction Service",
        "version": API_VERSION,
        "server": { "name": "agent-host", "version": env!("CARGO_PKG_VERSION") },
        "endpoints": {
            "health": "GET /health",
            "ready": "GET /ready",
            "chat": "POST /v1/agents/{agentId}/chat",
            "listCommands": "GET /v1/agents/{agentId}/commands",
            "executeCommand": "POST /v1/agents/{agentId}/commands/{commandName}/execute",
            "chatappSend": "POST /v1/agents/{agentId}/chatapp/send",
            "socialPost": "POST /v1/agents/{agentId}/social/post",
            "walletBalance": "GET /v1/agents/{agentId}/wallet/{network}/balance",
            "walletTransfer": "POST /v1/agents/{agentId}/wallet/{network}/transfer",
            "x402Requirements": "GET /x402/{network}/{agentId}",
            "x402Invoke": "POST /x402/{network}/{agentId}",
            "x402Discovery": "GET /discovery/resources",
            "x402WellKnownIndex": "GET /.well-known/x402",
            "x402WellKnownDocument": "GET /.well-known/x402.json",
        },
        "documentation": "/openapi.json",
    }))
}

async fn health(State(state): State<AppState>) -> impl IntoResponse {
    let reachable = state.services.store.reachable().await;
    let (compiled, cached) = state.services.plugins.cache_stats();
    let status = if reachable {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({
        "status": if reachable { "ok" } else { "degraded" },
        "version": API_VERSION,
        "serverVersion": env!("CARGO_PKG_VERSION"),
        "database": { "reachable": reachable },
        "uptimeSeconds": state.started.elapsed().as_secs(),
        "plugins": {
            "compiled": compiled,
            "loadedFromCache": cached,
            "uploadsInLine": state.services.plugins.uploads_in_line(),
        },
        "timestamp": crate::clock::now_iso(),
    });
    (status, axum::Json(body))
}

/// Readiness, for a load balancer: the database answers, holds every migration this binary
/// knows, and the host is not stopping. `/health` stays liveness (the process answers).
async fn ready(State(state): State<AppState>) -> impl IntoResponse {
    let services = &state.services;
    let stopping = services.lifecycle.is_stopping();
    let schema = services.store.schema_version().await.ok();
    let migrated = schema.is_some_and(|v| v >= crate::store::migrations::latest_version());
    let ready = !stopping && migrated;
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({
        "status": if ready { "ready" } else if stopping { "stopping" } else { "unavailable" },
        "database": { "reachable": schema.is_some(), "migrated": migrated },
        "stopping": stopping,
    });
    (status, axum::Json(body))
}

/// The API's description, with the paid address of every agent for sale here (the first
/// few hundred) for indexers that read nothing else. Without the store, the API alone.
async fn openapi(State(state): State<AppState>) -> axum::Json<Value> {
    let mut document = super::openapi::document();
    if let Err(err) = super::openapi::add_paid_addresses(&state.services, &mut document).await {
        tracing::warn!("the OpenAPI document is served without the paid addresses: {err}");
    }
    axum::Json(document)
}
