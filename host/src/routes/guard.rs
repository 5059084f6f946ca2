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

/// Who calls an agent's protocol endpoint (MCP, A2A).
pub enum Visitor {
    /// The agent's owner, by key or OAuth access token: counted against the account.
    Owner(Caller),
    /// Anyone without a credential, counted against its client address as on the x402
    /// route.
    Stranger { client: String },
}

/// The gate of an agent's protocol endpoints: a key (`Authorization: Bearer`, or `x-api-key`
/// as on the keyed API), an OAuth access token given for this agent (when OAuth is on), or
/// nothing. Answers who calls and the rate decision whose headers the answer carries, or the
/// refusal.
pub async fn visitor(state: &AppState, parts: &Parts, agent: &str) -> Result<(Visitor, RateDecision), ApiError> {
    let services = &state.services;
    let presented = presented_key(&parts.headers);
    let access_token = services.settings.mcp.mcp_oauth
        && presented
            .as_ref()
            .and_then(|p| p.to_str().ok())
            .is_some_and(crate::services::oauth::is_access_token);
    match presented {
        // A token a client was given by OAuth: for this agent's endpoints only, from any
        // page (the client that holds it may live in one).
        Some(token) if access_token => {
            let authenticate =
                async |token: String| crate::services::oauth::authenticate(services, &token, agent).await;
            let (caller, decision) = check_credential(state, parts, &token, authenticate).await?;
            Ok((Visitor::Owner(caller), decision))
        }
        // A key from a page: only the origins that may use keys on the keyed API.
        Some(_) if !key_origin_allowed(state, &parts.headers) => Err(ApiError::new(
            axum::http::StatusCode::FORBIDDEN,
            "forbidden_origin",
            "API keys are not taken from this page's origin (cors_allowed_origins); a payment is",
        )),
        Some(key) => {
            let (caller, decision) = check_key(state, parts, &key).await?;
            Ok((Visitor::Owner(caller), decision))
        }
        None => {
            let client = client_key(parts, services.settings.server.client_ip_header.as_deref());
            let decision = services
                .x402_limiter
                .client(&client, crate::clock::now_ms())
                .await
                .map_err(ServiceError::from)?;
            if !decision.allowed {
                return Err(ServiceError::RateLimited(decision).into());
            }
            Ok((Visitor::Stranger { client }, decision))
        }
    }
}

/// Whether a key may come with this request: no page (`Origin`), the server's own, or an
/// origin the operator lets use keys (`cors_allowed_origins`), as on the keyed API.
fn key_origin_allowed(state: &AppState, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) else {
        return headers.get(header::ORIGIN).is_none();
    };
    let own = authority(&state.services.public_base_url)
        .zip(state.services.public_base_url.split_once("://"))
        .map(|(authority, (scheme, _))| format!("{scheme}://{authority}"));
    own.as_deref() == Some(origin) || super::cors::may_use_keys(&state.services.settings.server, origin)
}

/// `host:port` of an absolute URL.
pub fn authority(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    Some(rest.split('/').next()?.to_string()).filter(|a| !a.is_empty())
}
