//! The keyed API's gate: `x-api-key` → account, then the account's rate limits. Every
//! response after a successful key check carries the rate-limit headers, errors included.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::app::AppState;
use crate::error::ApiError;
use crate::services::keys;
use crate::services::rate_limit::RateDecision;

pub const CALLER_HEADERS: [&str; 3] = ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"];

pub async fn require_key(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let Some(presented) = request.headers().get("x-api-key") else {
        return ApiError::unauthorized("Missing x-api-key header").into_response();
    };
    let Ok(presented) = presented.to_str() else {
        return ApiError::unauthorized("Invalid API key").into_response();
    };
    let caller = match keys::authenticate(&state.services.store, presented).await {
        Ok(caller) => caller,
        Err(err) => return ApiError::from(err).into_response(),
    };
    let decision = state
        .limiter
        .check(&caller.account.id, caller.account.limits, crate::clock::now_ms());
    let mut response = if decision.allowed {
        request.extensions_mut().insert(caller);
        next.run(request).await
    } else {
        let error = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_exceeded",
            format!(
                "Rate limit of {} requests exceeded; retry in {} s",
                decision.limit, decision.retry_after_secs
            ),
        );
        let mut response = error.into_response();
        response
            .headers_mut()
            .insert("retry-after", HeaderValue::from(decision.retry_after_secs));
        response
    };
    add_rate_headers(response.headers_mut(), &decision);
    response
}

fn add_rate_headers(headers: &mut HeaderMap, decision: &RateDecision) {
    let values = [decision.limit as i64, decision.remaining as i64, decision.reset_unix];
    for (name, value) in CALLER_HEADERS.iter().zip(values) {
        headers.insert(HeaderName::from_static(name), HeaderValue::from(value));
    }
}
