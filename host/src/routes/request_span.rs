//! Every request's id, span and measure. The id is the caller's `x-request-id` when it is a
//! sane token (a proxy's), else made here; it names the span the request is served in, so
//! every log line written while serving it carries it, and the answer carries it back. Its
//! duration goes to the metrics by route template.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use tower::{Layer, Service};
use tracing::Instrument;

use crate::error::ApiError;
use crate::telemetry::traces::TraceStart;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Serves every route in its request's span, and answers a handler's panic with a 500 in
/// the API's envelope, inside that span. It sits on each route (the router inserts the
/// matched route's template before calling it), as one plain service: axum's `from_fn`
/// costs a request several allocations more per layer.
#[derive(Clone, Copy)]
pub struct RequestSpanLayer;

impl<S> Layer<S> for RequestSpanLayer {
    type Service = RequestSpan<S>;

    fn layer(&self, inner: S) -> RequestSpan<S> {
        RequestSpan { inner }
    }
}

#[derive(Clone)]
pub struct RequestSpan<S> {
    inner: S,
}

impl<S> Service<Request> for RequestSpan<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        // The service that was polled ready serves this request; a fresh clone waits.
        let ready = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, ready);
        Box::pin(serve_in_span(request, inner))
    }
}

async fn serve_in_span<S>(request: Request, mut inner: S) -> Result<Response, Infallible>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let id = request_id(request.headers());
    // The route template, never the path itself: paths carry ids without bound.
    let route = request.extensions().get::<MatchedPath>().cloned();
    let route = route.as_ref().map(MatchedPath::as_str);
    // A caller's W3C trace context: followed from a trusted peer, linked from anyone else.
    let start = crate::telemetry::traces::enabled().then(|| {
        let caller = opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.extract(&opentelemetry_http::HeaderExtractor(request.headers()))
        });
        let peer = request
            .extensions()
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|info| info.0.ip());
        crate::telemetry::traces::start(caller, peer)
    });
    let traced = !matches!(start, None | Some(TraceStart::Untraced));
    let id_text = id.to_str().unwrap_or_default();
    // One span either way; a traced one has the target the trace exporter takes.
    macro_rules! request_span {
        ($($target:tt)*) => {
            tracing::info_span!(
                $($target)*
                "request",
                "otel.kind" = "server",
                "otel.name" = tracing::field::Empty,
                request_id = id_text,
                "http.request.method" = %request.method(),
                "http.route" = route.unwrap_or("(none)"),
                "http.response.status_code" = tracing::field::Empty,
                "otel.status_code" = tracing::field::Empty,
            )
        };
    }
    let span = if traced {
        request_span!(target: crate::telemetry::traces::TRACED,)
    } else {
        request_span!()
    };
    if traced {
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        match start {
            Some(TraceStart::Continue(caller)) => {
                let _ = span.set_parent(caller);
            }
            Some(TraceStart::Root(Some(link))) => span.add_link(link),
            _ => {}
        }
        // Traces name a server span after its route template: "POST /agents/{id}/...".
        span.record(
            "otel.name",
            format!("{} {}", request.method(), route.unwrap_or("(none)")),
        );
    }
    let method = crate::telemetry::metrics::method_label(request.method());
    let metrics = crate::telemetry::metrics::metrics();
    // Counted until answered, or until the caller goes away and the request is dropped.
    let _in_flight = metrics.map(|m| m.http_in_flight());
    let started = Instant::now();
    // A panic while the future is made (in a service's `call`) or while it runs.
    let served = match std::panic::catch_unwind(AssertUnwindSafe(|| inner.call(request))) {
        Ok(future) => AssertUnwindSafe(future).catch_unwind().instrument(span.clone()).await,
        Err(panic) => Err(panic),
    };
    let mut response = match served {
        Ok(Ok(response)) => response,
        Err(_) => span.in_scope(|| {
            tracing::error!("a request handler panicked");
            ApiError::internal("Internal server error").into_response()
        }),
    };
    let status = response.status().as_u16();
    if let Some(metrics) = metrics {
        metrics.http_finished(method, route, status, started.elapsed().as_secs_f64());
    }
    span.record("http.response.status_code", status);
    // A server span is in error for a 5xx only: a 4xx is the caller's.
    if status >= 500 {
        span.record("otel.status_code", "ERROR");
    }
    span.in_scope(|| tracing::debug!(status, latency_us = started.elapsed().as_micros() as u64, "answered"));
    response.headers_mut().insert(REQUEST_ID, id);
    Ok(response)
}

/// The request's id: the caller's when it is acceptable, else a new one.
pub(super) fn request_id(headers: &axum::http::HeaderMap) -> HeaderValue {
    headers
        .get(&REQUEST_ID)
        .filter(|v| v.to_str().is_ok_and(acceptable))
        .cloned()
        .unwrap_or_else(new_id)
}

/// 32 hex digits, unique across processes and requests without a system call each: a
/// random prefix drawn once per process, then a counter. Ids need not be unguessable.
fn new_id() -> HeaderValue {
    static PREFIX: std::sync::LazyLock<u64> = std::sync::LazyLock::new(|| {
        let mut bytes = [0u8; 8];
        crate::random::fill(&mut bytes);
        u64::from_le_bytes(bytes)
    });
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let count = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let text = format!("{:016x}{count:016x}", *PREFIX);
    HeaderValue::from_str(&text).expect("hex digits are a valid header value")
}

/// A caller's id is kept when it is short and plain (it is echoed and logged as is).
fn acceptable(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'/' | b'+' | b'='))
}

#[cfg(test)]
mod tests {
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn a_handler_that_panics_is_answered_in_the_envelope_with_the_request_id() {
        let panicking = tower::service_fn(|_: Request| async {
            panic!("a handler's bug");
            #[allow(unreachable_code)]
            Ok::<Response, Infallible>(Response::default())
        });
        let request = Request::builder()
            .header(REQUEST_ID, "caller-7")
            .body(axum::body::Body::empty())
            .unwrap();
        let response = RequestSpanLayer.layer(panicking).oneshot(request).await.unwrap();
        assert_eq!(response.status(), 500);
        assert_eq!(response.headers()[REQUEST_ID], "caller-7");
        let body = axum::body::to_bytes(response.into_body(), 1024).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "internal_error");
    }

    #[derive(Clone)]
    struct PanicsWhenCalled;

    impl Service<Request> for PanicsWhenCalled {
        type Response = Response;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Response, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request) -> Self::Future {
            panic!("a layer's bug, before any future exists");
        }
    }

    #[tokio::test]
    async fn a_service_that_panics_in_call_is_answered_too() {
        let request = Request::builder().body(axum::body::Body::empty()).unwrap();
        let response = RequestSpanLayer.layer(PanicsWhenCalled).oneshot(request).await.unwrap();
        assert_eq!(response.status(), 500);
        assert!(response.headers().contains_key(REQUEST_ID));
    }

    #[test]
    fn made_ids_are_32_hex_digits_and_never_repeat() {
        let (a, b) = (super::new_id(), super::new_id());
        let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert_eq!(a[..16], b[..16], "one prefix per process");
    }

    #[test]
    fn only_plain_short_ids_are_kept() {
        assert!(super::acceptable("7f3a-11ee.b0c2"));
        assert!(super::acceptable("Root=1-5759e988-bd862e3fe1be46a994272793"));
        assert!(!super::acceptable(""));
        assert!(!super::acceptable("has space"));
        assert!(!super::acceptable("line\nbreak"));
        assert!(!super::acceptable(&"a".repeat(129)));
    }
}
