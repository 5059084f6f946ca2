//! The keyed API's gate: `x-api-key` → account, then the account's rate limits. Every
//! response after a successful key check carries the rate-limit headers, errors included.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::client::client_key;
use crate::error::{ApiError, rate_headers};
use crate::services::{ServiceError, keys};

pub async fn require_key(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let services = &state.services;
    let (parts, body) = request.into_parts();
    let Some(presented) = parts.headers.get("x-api-key") else {
        return ApiError::unauthorized("Missing x-api-key header").into_response();
    };
    // A client that keeps presenting wrong keys is refused before they are looked up.
    let client = client_key(&parts, services.settings.server.client_ip_header.as_deref());
    let now = crate::clock::now_ms();
    if let Err(decision) = services.auth_throttle.may_try(&client, now) {
        return ApiError::rate_limited(&decision).into_response();
    }
    let caller = match presented.to_str() {
        Ok(presented) => keys::authenticate(&services.store, presented).await,
        Err(_) => Err(ServiceError::Unauthorized("Invalid API key".into())),
    };
    let caller = match caller {
        Ok(caller) => caller,
        Err(err) => {
            if matches!(err, ServiceError::Unauthorized(_)) {
                services.auth_throttle.failed(&client, now);
            }
            return ApiError::from(err).into_response();
        }
    };
    let mut request = Request::from_parts(parts, body);
    let decision = match state
        .services
        .account_limiter
        .check(&caller.account.id, caller.account.limits, crate::clock::now_ms())
        .await
    {
        Ok(decision) => decision,
        Err(err) => return ApiError::from(ServiceError::from(err)).into_response(),
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
