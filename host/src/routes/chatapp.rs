//! `POST /chatapp/{agentId}/webhook`: Telegram's updates for the agent's bot. No API key:
//! Telegram proves itself with the secret it was given at `setWebhook`, sent in
//! `X-Telegram-Bot-Api-Secret-Token`, checked before the body is read as JSON. A client
//! that keeps presenting wrong secrets is throttled by its address. The update is
//! acknowledged at once and answered in the background, so Telegram does not time out and
//! re-send it.

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::request::Parts;
use axum::routing::post;
use serde_json::{Value, json};

use super::AppState;
use super::client::client_key;
use crate::error::{ApiBody, ApiError, ApiPath};
use crate::services::ServiceError;
use crate::services::chatapp::{self, Received};

pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// Telegram's updates are small (a message is at most 4096 characters).
const MAX_UPDATE_BYTES: usize = 256 * 1024;

pub fn routes() -> Router<AppState> {
    Router::new().route(
        "/chatapp/{agent_id}/webhook",
        post(update).layer(DefaultBodyLimit::max(MAX_UPDATE_BYTES)),
    )
}

async fn update(
    State(state): State<AppState>,
    parts: Parts,
    ApiPath(agent_id): ApiPath<String>,
    body: ApiBody,
) -> Result<axum::Json<Value>, ApiError> {
    let services = &state.services;
    let client = client_key(&parts, services.settings.server.client_ip_header.as_deref());
    let now = crate::clock::now_ms();
    if let Err(decision) = services.auth_throttle.may_try(&client, now) {
        crate::telemetry::metrics::note_rate_limited("auth_failures");
        return Err(ApiError::rate_limited(&decision));
    }
    let presented = parts
        .headers
        .get(SECRET_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let received = chatapp::receive(services, &agent_id, presented, &body.bytes)
        .await
        .inspect_err(|e| {
            if matches!(e, ServiceError::Unauthorized(_)) {
                services.auth_throttle.failed(&client, now);
            }
        })?;
    Ok(axum::Json(match received {
        Received::Answering | Received::Ignored => json!({ "ok": true }),
        Received::Duplicate => json!({ "ok": true, "duplicate": true }),
        Received::SlowedDown { retry_after_secs } => json!({ "ok": true, "slowed_down": retry_after_secs }),
    }))
}
