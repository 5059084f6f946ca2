//! The keyed API's gate: `x-api-key` → account, then the account's rate limits. Every
//! response after a successful key check carries the rate-limit headers, errors included.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::app::AppState;
use crate::error::{ApiError, rate_headers};
use crate::services::keys;

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
    let decision = match state
        .limiter
        .check(&caller.account.id, caller.account.limits, crate::clock::now_ms())
        .await
    {
        Ok(decision) => decision,
        Err(err) => return ApiError::from(crate::services::ServiceError::from(err)).into_response(),
    };
    let mut response = if decision.allowed {
        request.extensions_mut().insert(caller);
        next.run(request).await
    } else {
        ApiError::rate_limited(&decision).into_response()
    };
    response.headers_mut().extend(rate_headers(&decision));
    response
}
