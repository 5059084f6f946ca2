//! `POST /chatapp/{agentId}/webhook`: Telegram's updates for the agent's bot. No API key:
//! Telegram proves itself with the secret it was given at `setWebhook`, sent in
//! `X-Telegram-Bot-Api-Secret-Token`. The update is acknowledged at once and answered in
//! the background, so Telegram does not time out and re-send it.

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use serde_json::{Value, json};

use crate::app::AppState;
use crate::error::{ApiError, ApiJson, ApiPath};
use crate::services::chatapp;

pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";
const REMEMBERED_UPDATES: usize = 256;

pub fn routes() -> Router<AppState> {
    Router::new().route("/chatapp/{agent_id}/webhook", post(update))
}

async fn update(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiPath(agent_id): ApiPath<String>,
    ApiJson(update): ApiJson<Value>,
) -> Result<axum::Json<Value>, ApiError> {
    let services = state.services.clone();
    let agent = services
        .store
        .agent(&agent_id)
        .await
        .map_err(crate::services::ServiceError::from)?;
    let Some(agent) = agent else {
        return Err(ApiError::not_found(format!("Agent '{agent_id}' not found")));
    };
    let presented = headers
        .get(SECRET_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if presented.is_empty() || !chatapp::webhook_secret_matches(&services, &agent, presented).await? {
        return Err(ApiError::unauthorized(
            "Missing or wrong X-Telegram-Bot-Api-Secret-Token",
        ));
    }
    if let Some(id) = update["update_id"].as_i64() {
        let mut recent = state.recent_updates.lock().unwrap_or_else(|p| p.into_inner());
        let seen = recent.entry(agent.id.clone()).or_default();
        if seen.contains(&id) {
            return Ok(axum::Json(json!({ "ok": true, "duplicate": true })));
        }
        seen.push_back(id);
        if seen.len() > REMEMBERED_UPDATES {
            seen.pop_front();
        }
    }
    tokio::spawn(async move {
        if let Err(e) = chatapp::handle_update(&services, &agent, &update).await {
            tracing::warn!(agent = %agent.id, error = %e, "could not answer a chat-app update");
        }
    });
    Ok(axum::Json(json!({ "ok": true })))
}
