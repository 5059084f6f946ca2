//! `GET /metrics` for Prometheus, on the operator's own listener (`metrics_listen`), never
//! on the public one.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use axum::routing::get;

use super::AppState;

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .fallback(|| async { (axum::http::StatusCode::NOT_FOUND, "only /metrics is served here\n") })
        .with_state(state)
}

/// OpenMetrics when the scraper accepts it (Prometheus asks for it first), else the older
/// Prometheus text format (`curl`, `promtool`).
async fn scrape(State(state): State<AppState>, headers: HeaderMap) -> impl IntoResponse {
    crate::services::vitals::refresh(&state.services).await;
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("application/openmetrics-text"));
    let (content_type, body) = match openmetrics {
        true => (
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            crate::telemetry::metrics::encode(),
        ),
        false => (
            "text/plain; version=0.0.4; charset=utf-8",
            crate::telemetry::metrics::encode_text_format(),
        ),
    };
    ([(header::CONTENT_TYPE, content_type)], body)
}
