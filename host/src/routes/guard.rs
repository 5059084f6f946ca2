//! The keyed API's gate: `x-api-key` → account, then the account's rate limits. Every
//! response after a successful key check carries the rate-limit headers, errors included.

use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::client::client_key;
use crate::error::{ApiError, rate_headers};
use crate::services::keys::Caller;
use crate::services::rate_limit::RateDecision;
use crate::services::{ServiceError, keys};
use crate::telemetry::metrics::note_rate_limited;
use crate::telemetry::traces::part_span;
use tracing::Instrument;

pub async fn require_key(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let presented = request.headers().get("x-api-key").cloned();
    admit(
        &state,
        request,
        next,
        presented,
        "Missing x-api-key header",
        IntoResponse::into_response,
    )
    .await
}

/// Admits a request with the key it presents: its caller for the handler, and the rate-limit
/// headers on the answer; a missing or refused key answered by `refuse`, in the surface's
/// own error shape.
pub async fn admit(
    state: &AppState,
    request: Request,
    next: Next,
    presented: Option<HeaderValue>,
    missing: &str,
    refuse: impl Fn(ApiError) -> Response,
) -> Response {
    let (parts, body) = request.into_parts();
    let Some(presented) = presented else {
        return refuse(ApiError::unauthorized(missing));
    };
    let (caller, decision) = match check_key(state, &parts, &presented).await {
        Ok(admitted) => admitted,
        Err(refusal) => return refuse(refusal),
    };
    let mut request = Request::from_parts(parts, body);
    request.extensions_mut().insert(caller);
    let mut response = next.run(request).await;
    response.headers_mut().extend(rate_headers(&decision));
    response
}

/// The key a client presents as `Authorization: Bearer` (as MCP and OpenAI clients send it)
/// or in `x-api-key`. An `Authorization` header that is not a bearer key is what is presented
/// (and refused as a key), never passed over for `x-api-key`.
pub fn presented_key(headers: &HeaderMap) -> Option<HeaderValue> {
    let Some(authorization) = headers.get(header::AUTHORIZATION) else {
        return headers.get("x-api-key").cloned();
    };
    let bearer = authorization
        .to_str()
        .ok()
        .and_then(|v| {
            v.get(..7)
                .filter(|s| s.eq_ignore_ascii_case("bearer "))
                .map(|_| &v[7..])
        })
        .and_then(|key| HeaderValue::from_str(key.trim()).ok());
    Some(bearer.unwrap_or_else(|| authorization.clone()))
}

/// Whether the request was caused by one of our own plugins (it carries a valid, recent
/// marker): a chat it asks for gets no tools, so webhook → chat → tool → webhook cannot loop.
pub fn from_our_plugin(state: &AppState, headers: &HeaderMap) -> bool {
    headers
        .get(crate::marker::HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| state.services.marker.verify(v, crate::clock::now_ms() / 1000))
}

/// Checks a presented key, then its account's rate limit: the caller and the decision
/// whose headers the answer carries, or the refusal (a rate limit's with its headers).
pub async fn check_key(
    state: &AppState,
    parts: &Parts,
    presented: &HeaderValue,
) -> Result<(Caller, RateDecision), ApiError> {
    let store = &state.services.store;
    check_credential(state, parts, presented, async |presented: String| {
        keys::authenticate(store, &presented).await
    })
    .await
}

/// Checks a presented credential with `authenticate` (a key's check, or an OAuth access
/// token's), then its account's rate limit, as [`check_key`] does for keys: a client that
/// keeps presenting wrong credentials is refused before they are looked up.
pub async fn check_credential(
    state: &AppState,
    parts: &Parts,
    presented: &HeaderValue,
    authenticate: impl AsyncFnOnce(String) -> Result<Caller, ServiceError>,
) -> Result<(Caller, RateDecision), ApiError> {
    let services = &state.services;
    // A client that keeps presenting wrong keys is refused before they are looked up.
    let client = client_key(parts, services.settings.server.client_ip_header.as_deref());
    let now = crate::clock::now_ms();
    if let Err(decision) = services.auth_throttle.may_try(&client, now) {
        note_rate_limited("auth_failures");
        return Err(ApiError::rate_limited(&decision));
    }
    let caller = match presented.to_str() {
        Ok(presented) => authenticate(presented.to_string()).instrument(part_span!("auth")).await,
        Err(_) => Err(ServiceError::Unauthorized("Invalid API key".into())),
    };
    let caller = caller.inspect_err(|err| {
        if matches!(err, ServiceError::Unauthorized(_)) {
            services.auth_throttle.failed(&client, now);
        }
    })?;
    let decision = services
        .account_limiter
        .check(&caller.account.id, caller.account.limits, crate::clock::now_ms())
        .instrument(part_span!("rate_limit"))
        .await
        .map_err(ServiceError::from)?;
    if !decision.allowed {
        note_rate_limited("account");
        let mut refusal = ApiError::rate_limited(&decision);
        refusal.headers.extend(rate_headers(&decision));
        return Err(refusal);
    }
    Ok((caller, decision))
}
