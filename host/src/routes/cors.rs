//! Cross-origin calls from browsers to the keyed API, for the origins the operator lists
//! (`cors_allowed_origins`); none by default. A key travels in `x-api-key`, never in a
//! cookie, so no credentials mode: an allowed page must hold the key itself.

use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, Method, header};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::config::ServerSettings;

/// The CORS layer (over every route: a preflight must be answered before routing, or
/// it would be a 405); None when no origin is allowed.
pub fn layer(server: &ServerSettings) -> Option<CorsLayer> {
    let origins = &server.cors_allowed_origins;
    if origins.is_empty() {
        return None;
    }
    // Checked when the settings were read: each is a plain origin, or `*`.
    let any = origins.iter().any(|o| o == "*");
    let listed: Vec<HeaderValue> = origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()).collect();
    // The keyed API (`/v1/...`) and its job statuses only: the paid API and the console
    // are not opened to other origins by this setting.
    let allow = AllowOrigin::predicate(move |origin: &HeaderValue, request: &Parts| {
        let path = request.uri.path();
        (path.starts_with("/v1/") || path.starts_with("/jobs/")) && (any || listed.contains(origin))
    });
    let named = |names: &[&'static str]| names.iter().map(|n| HeaderName::from_static(n)).collect::<Vec<_>>();
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE])
            .allow_headers([vec![header::CONTENT_TYPE], named(&["x-api-key"])].concat())
            .expose_headers(
                [
                    vec![header::RETRY_AFTER, header::LOCATION],
                    named(&crate::error::RATE_HEADERS),
                ]
                .concat(),
            )
            .max_age(std::time::Duration::from_secs(600)),
    )
}
