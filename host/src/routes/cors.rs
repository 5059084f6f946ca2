//! Cross-origin calls from browsers.
//!
//! - The paid surfaces (`/x402/...`, their discovery, the agents' MCP endpoints):
//!   any origin, since anyone may pay. Nothing there rests on a cookie, so nothing is
//!   lent to the page; it may send the payment headers and read the settlement's.
//!   Job statuses too: a page that bought a long-running command polls its job.
//! - The keyed API (`/v1/...`): only the origins the operator lists
//!   (`cors_allowed_origins`), none by default. A key travels in `x-api-key`, never in a
//!   cookie, so no credentials mode: an allowed page must hold the key itself.
//! - The console and everything else: no other origin.

use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, Method, header};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::config::ServerSettings;

/// Whether `path` is one anybody may pay at, from any page (with the job statuses, so a
/// page may poll the long-running command it bought: a job's address is its secret).
pub fn is_paid_surface(path: &str) -> bool {
    path.starts_with("/x402/")
        || path.starts_with("/.well-known/x402")
        || path == "/discovery/resources"
        || path.starts_with("/mcp/")
        || path.starts_with("/jobs/")
}

/// Whether a page on `origin` may send an API key: one the operator lists in
/// `cors_allowed_origins` (checked when the settings were read: a plain origin, or `*`).
pub fn may_use_keys(server: &ServerSettings, origin: &str) -> bool {
    server.cors_allowed_origins.iter().any(|o| o == "*" || o == origin)
}

/// The CORS layer, over every route: a preflight must be answered before routing, or it
/// would be a 405. One layer for both policies, since a layer answers every preflight.
pub fn layer(server: &ServerSettings) -> CorsLayer {
    let server = server.clone();
    let allow = AllowOrigin::predicate(move |origin: &HeaderValue, request: &Parts| {
        let path = request.uri.path();
        is_paid_surface(path) || (path.starts_with("/v1/") && origin.to_str().is_ok_and(|o| may_use_keys(&server, o)))
    });
    let named = |names: &[&'static str]| names.iter().map(|n| HeaderName::from_static(n)).collect::<Vec<_>>();
    // What a payer or an MCP client sends, beside the keyed API's key. The reference v2
    // client (@x402/fetch) also sends `access-control-expose-headers` with its payment, as
    // a request header: a preflight that does not allow it blocks every browser payment.
    let sent = named(&[
        "x-api-key",
        "payment-signature",
        "x-payment",
        "access-control-expose-headers",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
        "mcp-session-id",
        "last-event-id",
        "x-request-id",
        "traceparent",
        "tracestate",
    ]);
    // What a payer reads: the price, the settlement, the rate limits, the request's id.
    let read = named(&[
        "payment-required",
        "payment-response",
        "x-payment-response",
        "mcp-session-id",
        "x-request-id",
    ]);
    CorsLayer::new()
        .allow_origin(allow)
        .allow_methods([Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE])
        .allow_headers([vec![header::CONTENT_TYPE, header::AUTHORIZATION, header::ACCEPT], sent].concat())
        .expose_headers(
            [
                vec![header::RETRY_AFTER, header::LOCATION, header::WWW_AUTHENTICATE],
                named(&crate::error::RATE_HEADERS),
                read,
            ]
            .concat(),
        )
        .max_age(std::time::Duration::from_secs(600))
}
