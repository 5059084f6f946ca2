//! HTTP surface: extract and validate the wire format, call a service, answer in the
//! API's envelope. Only this module and `error` know axum.

mod a2a;
mod account;
pub mod body_deadline;
mod chat_stream;
mod chatapp;
pub mod client;
mod console;
mod cors;
mod discovery;
mod edge;
mod guard;
mod jobs;
mod keyed;
mod mcp;
mod meta;
pub mod metrics;
mod oauth;
mod openai;
pub mod openapi;
mod remote_mcp;
pub mod request_span;
pub mod requests;
mod schedules;
mod spending;
mod state;
mod usage;
mod webhooks;
mod x402;
mod x402_transaction;

pub use state::AppState;

use std::convert::Infallible;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{Method, StatusCode, Uri};
use axum::response::Response;
use tower::{Layer, Service};

use crate::error::ApiError;

/// What a listener serves: the public API (`router`) or the metrics.
pub trait Api:
    Service<Request, Response = Response, Error = Infallible, Future: Send + 'static> + Clone + Send + Sync + 'static
{
}

impl<S> Api for S where
    S: Service<Request, Response = Response, Error = Infallible, Future: Send + 'static>
        + Clone
        + Send
        + Sync
        + 'static
{
}

/// The public API as one service. Only the request's span sits on each route (it needs the
/// matched route's template); the rest is applied once around the router (see `edge`).
pub fn router(state: AppState) -> impl Api {
    let max_body = state.services.settings.server.max_body_bytes;
    // Browsers: any page may pay; the operator's listed origins may call the keyed API.
    let cors = cors::Cors::new(&state.services.settings.server);
    let router = Router::new()
        .merge(meta::routes(state.clone()))
        .merge(keyed::routes(state.clone()))
        .merge(account::routes(state.clone()))
        .merge(x402::routes(state.clone()))
        .merge(discovery::routes(state.clone()))
        .merge(mcp::routes(state.clone()))
        .merge(a2a::routes(state.clone()))
        .merge(oauth::routes(state.clone()))
        .merge(remote_mcp::callback_routes())
        .merge(openai::routes(state.clone()))
        .merge(jobs::routes())
        .merge(chatapp::routes())
        .merge(console::routes())
        .fallback(unknown_route)
        .method_not_allowed_fallback(wrong_method)
        // The request id and span cover the route and its panics. Expected failures (a
        // plugin's execution_error, a 501) are answers, not incidents: they are traced at
        // debug; real faults are logged where they happen.
        .layer(request_span::RequestSpanLayer)
        .with_state(state);
    edge::Edge::new(DefaultBodyLimit::max(max_body).layer(router), cors)
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
