//! `/x402/{network}/{agentId}`: the pay-per-use API. Its body shape differs from the
//! keyed API: `{success: false, error, code, x402Version}`.

use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use crate::app::AppState;
pub use crate::x402::X402_VERSION;

pub fn routes() -> Router<AppState> {
    Router::new().route("/x402/{network}/{agent_id}", get(not_yet).post(not_yet))
}

async fn not_yet() -> Response {
    let body = json!({
        "success": false,
        "error": "The pay-per-use API is not available on this server yet",
        "code": "not_implemented",
        "x402Version": X402_VERSION,
    });
    (StatusCode::NOT_IMPLEMENTED, axum::Json(body)).into_response()
}
