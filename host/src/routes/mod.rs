//! HTTP surface: extract and validate the wire format, call a service, answer in the
//! API's envelope. Only this module and `error` know axum.

mod account;
pub mod body_deadline;
mod chat_stream;
mod chatapp;
pub mod client;
mod console;
mod cors;
mod discovery;
mod guard;
mod jobs;
mod keyed;
mod mcp;
mod meta;
pub mod metrics;
mod openai;
pub mod openapi;
pub mod request_span;
pub mod requests;
mod state;
mod usage;
mod webhooks;
mod x402;

pub use state::AppState;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

pub fn router(state: AppState) -> Router {
    let max_body = state.services.settings.server.max_body_bytes;
    // Browsers: any page may pay; the operator's listed origins may call the keyed API.
    let cors = cors::layer(&state.services.settings.server);
    Router::new()
        .merge(meta::routes(state.clone()))
        .merge(keyed::routes(state.clone()))
        .merge(account::routes(state.clone()))
        .merge(x402::routes(state.clone()))
        .merge(discovery::routes(state.clone()))
        .merge(mcp::routes(state.clone()))
        .merge(openai::routes(state.clone()))
        .merge(jobs::routes())
        .merge(chatapp::routes())
        .merge(console::routes())
        .fallback(unknown_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panic_response))
        .layer(axum::middleware::map_response(security_headers))
        .layer(cors)
        // Outermost: the request id and span cover everything above, panics included.
        // Expected failures (a plugin's execution_error, a 501) are answers, not incidents:
        // they are traced at debug; real faults are logged where they happen.
        .layer(axum::middleware::from_fn(request_span::serve_in_span))
        .with_state(state)
}

/// The API's answers are data, never a page: a browser must not sniff them into HTML, run
/// or load anything from them, or frame them. The console's files set their own policy.
async fn security_headers(mut response: Response) -> Response {
    use axum::http::{HeaderValue, header};
    let headers = response.headers_mut();
    headers
        .entry(header::X_CONTENT_TYPE_OPTIONS)
        .or_insert(HeaderValue::from_static("nosniff"));
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"));
    response
}

async fn unknown_route(method: Method, uri: Uri) -> ApiError {
    ApiError::not_found(format!("No route for {method} {}", uri.path()))
}

async fn wrong_method(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked");
    ApiError::internal("Internal server error").into_response()
}
