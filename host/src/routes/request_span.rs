//! Every request's id, span and measure. The id is the caller's `x-request-id` when it is a
//! sane token (a proxy's), else made here; it names the span the request is served in, so
//! every log line written while serving it carries it, and the answer carries it back. Its
//! duration goes to the metrics by route template.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use crate::telemetry::traces::TraceStart;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The request's id, for a handler that wants to name it (a job, an audit line).
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

pub async fn serve_in_span(mut request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| acceptable(v))
        .map(str::to_string)
        .unwrap_or_else(new_id);
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
    // One span either way; a traced one has the target the trace exporter takes.
    macro_rules! request_span {
        ($($target:tt)*) => {
            tracing::info_span!(
                $($target)*
                "request",
                "otel.kind" = "server",
                "otel.name" = tracing::field::Empty,
                request_id = %id,
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
    request.extensions_mut().insert(RequestId(id.clone()));
    let metrics = crate::telemetry::metrics::metrics();
    // Counted until answered, or until the caller goes away and the request is dropped.
    let _in_flight = metrics.map(|m| m.http_in_flight());
    let started = Instant::now();
    let mut response = next.run(request).instrument(span.clone()).await;
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
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}

/// 32 hex digits, unique across processes and requests without a system call each: a
/// random prefix drawn once per process, then a counter. Ids need not be unguessable.
fn new_id() -> String {
    static PREFIX: std::sync::LazyLock<u64> = std::sync::LazyLock::new(|| {
        let mut bytes = [0u8; 8];
        crate::random::fill(&mut bytes);
        u64::from_le_bytes(bytes)
    });
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let count = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{:016x}{count:016x}", *PREFIX)
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
    #[test]
    fn made_ids_are_32_hex_digits_and_never_repeat() {
        let (a, b) = (super::new_id(), super::new_id());
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
