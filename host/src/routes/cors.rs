//! Cross-origin calls from browsers.
//!
//! - The paid surfaces (`/x402/...`, their discovery, the agents' MCP endpoints):
//!   any origin, since anyone may pay. Nothing there rests on a cookie, so nothing is
//!   lent to the page; it may send the payment headers and read the settlement's.
//!   Job statuses too: a page that bought a long-running command polls its job. And the
//!   OAuth endpoints an MCP client in a page calls (metadata, registration, token,
//!   revocation): none rests on a cookie. The consent page's own calls stay same-origin.
//! - The keyed API (`/v1/...`): only the origins the operator lists
//!   (`cors_allowed_origins`), none by default. A key travels in `x-api-key`, never in a
//!   cookie, so no credentials mode: an allowed page must hold the key itself.
//! - The console and everything else: no other origin.

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::response::Response;

use crate::config::ServerSettings;

/// Whether `path` is one anybody may pay at, from any page (with the job statuses, so a
/// page may poll the long-running command it bought: a job's address is its secret).
pub fn is_paid_surface(path: &str) -> bool {
    path.starts_with("/x402/")
        || path.starts_with("/.well-known/x402")
        || path == "/discovery/resources"
        || path.starts_with("/mcp/")
        || path.starts_with("/jobs/")
        || path.starts_with("/icons/")
        || path.starts_with("/.well-known/oauth-")
        || ["/oauth/register", "/oauth/token", "/oauth/revoke"].contains(&path)
}

/// Whether a page on `origin` may send an API key: one the operator lists in
/// `cors_allowed_origins` (checked when the settings were read: a plain origin, or `*`).
pub fn may_use_keys(server: &ServerSettings, origin: &str) -> bool {
    server.cors_allowed_origins.iter().any(|o| o == "*" || o == origin)
}

/// The CORS policy, for every address: one policy for both kinds of surface, since every
/// preflight is answered before routing (or it would be a 405). Its header values are made
/// once, here, not per request.
pub struct Cors {
    server: ServerSettings,
    vary: HeaderValue,
    allow_methods: HeaderValue,
    allow_headers: HeaderValue,
    expose_headers: HeaderValue,
    max_age: HeaderValue,
}

impl Cors {
    pub fn new(server: &ServerSettings) -> Cors {
        // What a payer or an MCP client sends, beside the keyed API's key. The reference v2
        // client (@x402/fetch) also sends `access-control-expose-headers` with its payment,
        // as a request header: a preflight that does not allow it blocks every browser payment.
        let sent = [
            "content-type",
            "authorization",
            "accept",
            "x-api-key",
            "payment-signature",
            "x-payment",
            "sign-in-with-x",
            "access-control-expose-headers",
            "mcp-protocol-version",
            "mcp-method",
            "mcp-name",
            "mcp-session-id",
            "last-event-id",
            "x-request-id",
            "traceparent",
            "tracestate",
        ];
        // What a payer reads: the price, the settlement, the rate limits, the request's id.
        let read = [
            &["retry-after", "location", "www-authenticate"][..],
            &crate::error::RATE_HEADERS[..],
            &[
                "payment-required",
                "payment-response",
                "x-payment-response",
                "mcp-session-id",
                "x-request-id",
            ][..],
        ]
        .concat();
        let list = |names: &[&str]| HeaderValue::from_str(&names.join(",")).expect("header names are valid values");
        Cors {
            server: server.clone(),
            vary: HeaderValue::from_static("origin, access-control-request-method, access-control-request-headers"),
            allow_methods: HeaderValue::from_static("GET,POST,PUT,PATCH,DELETE"),
            allow_headers: list(&sent),
            expose_headers: list(&read),
            max_age: HeaderValue::from_static("600"),
        }
    }

    /// The origin a page on it may read this answer from: any for the paid surfaces, the
    /// listed ones for the keyed API, none elsewhere.
    pub fn allowed_origin(&self, request: &Parts) -> Option<HeaderValue> {
        let origin = request.headers.get(header::ORIGIN)?;
        let path = request.uri.path();
        let allowed = is_paid_surface(path)
            || (path.starts_with("/v1/") && origin.to_str().is_ok_and(|o| may_use_keys(&self.server, o)));
        allowed.then(|| origin.clone())
    }

    /// The answer to a preflight (any `OPTIONS`), which never reaches a route.
    pub fn preflight(&self, origin: Option<HeaderValue>) -> Response {
        let mut response = Response::new(Body::empty());
        let headers = response.headers_mut();
        headers.insert(header::VARY, self.vary.clone());
        headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, self.allow_methods.clone());
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, self.allow_headers.clone());
        headers.insert(header::ACCESS_CONTROL_MAX_AGE, self.max_age.clone());
        if let Some(origin) = origin {
            headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        }
        response
    }

    /// What every other answer carries for browsers.
    pub fn decorate(&self, origin: Option<HeaderValue>, response: &mut Response) {
        let headers = response.headers_mut();
        headers.append(header::VARY, self.vary.clone());
        headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, self.expose_headers.clone());
        if let Some(origin) = origin {
            headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        }
    }
}
