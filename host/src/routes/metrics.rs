//! `GET /metrics` for Prometheus, on the operator's own listener (`metrics_listen`), never
//! on the public one.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::AppState;

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .fallback(|| async { (StatusCode::NOT_FOUND, "only /metrics is served here\n") })
        .with_state(state)
}

/// OpenMetrics when the scraper accepts it (Prometheus asks for it first), else the older
/// Prometheus text format (`curl`, `promtool`). With `metrics_token` set, only a scrape that
/// sends it as a bearer token.
async fn scrape(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(token) = &state.services.settings.telemetry.metrics_token
        && !bearer_is(&headers, token.expose())
    {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "send the metrics token: Authorization: Bearer <metrics_token>\n",
        )
            .into_response();
    }
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
            crate::telemetry::text_format::from_openmetrics(&crate::telemetry::metrics::encode()),
        ),
    };
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// Whether the request carries `Bearer <token>`, compared in constant time.
fn bearer_is(headers: &HeaderMap, token: &str) -> bool {
    use subtle::ConstantTimeEq;
    let sent = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    bool::from(sent.as_bytes().ct_eq(token.as_bytes()))
}
