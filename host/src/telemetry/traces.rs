//! OpenTelemetry traces, exported over OTLP/HTTP (protobuf) when `otlp_endpoint` is set.
//! The spans are the `tracing` spans the service opens (a request, and the parts inside
//! it); a request that comes with a W3C `traceparent` continues its caller's trace.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::trace::{SpanContext, TraceContextExt};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider};

use crate::config::AddressRange;

static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();
/// The peers whose `traceparent` is followed; set with the tracer.
static TRUSTED_PEERS: OnceLock<Vec<AddressRange>> = OnceLock::new();
/// A request without a caller's decision is traced when its draw falls below this.
static SAMPLE_BELOW: AtomicU64 = AtomicU64::new(u64::MAX);

/// The target of every exported span: the trace layer lets only these through, so a request
/// not sampled costs what it costs with traces off.
pub const TRACED: &str = "agent_host::traced";

/// Where spans go, and how many requests are traced.
pub struct Export<'a> {
    /// An OTLP/HTTP address, e.g. `http://127.0.0.1:4318` (its `/v1/traces`).
    pub endpoint: &'a str,
    /// The share of requests traced when no trusted caller decides, 0 to 1.
    pub sample_ratio: f64,
    /// Callers (a proxy, a service of the operator's) whose `traceparent` is followed.
    pub trusted_peers: &'a [AddressRange],
}

/// The tracer spans are exported with. Call inside the async runtime: exports run on it.
pub fn tracer(export: &Export) -> anyhow::Result<SdkTracer> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("{}/v1/traces", export.endpoint.trim_end_matches('/')))
        .with_http_client(OperatorHttp {
            client: crate::outbound::operator_client(Some(std::time::Duration::from_secs(10))),
            runtime: tokio::runtime::Handle::current(),
        })
        .build()?;
    // Whether a request is traced is decided when it arrives (`sampled`): every span that
    // reaches the SDK is kept.
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(Sampler::AlwaysOn)
        .with_resource(Resource::builder().with_service_name("agent-host").build())
        .build();
    opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
    let tracer = provider.tracer("agent-host");
    SAMPLE_BELOW.store(threshold(export.sample_ratio), Ordering::Relaxed);
    let _ = TRUSTED_PEERS.set(export.trusted_peers.to_vec());
    let _ = PROVIDER.set(provider);
    Ok(tracer)
}

/// How a request's trace begins.
#[derive(Debug)]
pub enum TraceStart {
    /// Not traced.
    Untraced,
    /// Traced as part of a trusted caller's trace.
    Continue(opentelemetry::Context),
    /// Traced as a trace of its own; a caller's context, when it sent one, is linked.
    Root(Option<SpanContext>),
}

/// How a request that came from `peer` with `caller`'s context is traced. Only a trusted
/// peer's `traceparent` decides: anyone else's would choose which requests we trace (and so
/// what the exporter carries) and plant its trace id in what we send the LLM provider,
/// facilitator and nodes. Their requests are sampled by the ratio and start a new trace
/// linked to theirs. The ratio's draw spreads a per-process counter over 64 bits
/// (Fibonacci hashing): evenly sampled, no random numbers drawn per request.
pub fn start(caller: opentelemetry::Context, peer: Option<std::net::IpAddr>) -> TraceStart {
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    // A dual-stack listener sees an IPv4 peer as ::ffff:a.b.c.d.
    let trusted = peer.map(|ip| ip.to_canonical()).is_some_and(|ip| {
        TRUSTED_PEERS
            .get()
            .is_some_and(|ranges| ranges.iter().any(|r| r.contains(ip)))
    });
    decide(caller, trusted, || {
        drawn(
            DRAWS.fetch_add(1, Ordering::Relaxed),
            SAMPLE_BELOW.load(Ordering::Relaxed),
        )
    })
}

fn decide(caller: opentelemetry::Context, trusted: bool, draw: impl FnOnce() -> bool) -> TraceStart {
    let context = caller.span().span_context().clone();
    match (context.is_valid(), trusted) {
        (true, true) if context.is_sampled() => TraceStart::Continue(caller),
        (true, true) => TraceStart::Untraced,
        (valid, _) if draw() => TraceStart::Root(valid.then_some(context)),
        _ => TraceStart::Untraced,
    }
}

/// The draws a ratio keeps: those below this. A ratio of 1 keeps every draw (the largest
/// included), a ratio of 0 none.
fn threshold(ratio: f64) -> u64 {
    if ratio >= 1.0 {
        u64::MAX
    } else {
        (ratio.max(0.0) * u64::MAX as f64) as u64
    }
}

/// Whether the `n`th request is traced under `below`.
fn drawn(n: u64, below: u64) -> bool {
    below == u64::MAX || n.wrapping_mul(0x9E37_79B9_7F4A_7C15) < below
}

/// Sends the spans still buffered; at shutdown.
pub fn flush() {
    if let Some(provider) = PROVIDER.get()
        && let Err(e) = provider.force_flush()
    {
        tracing::warn!("could not send the last spans: {e}");
    }
}

/// Whether spans are exported (and an incoming `traceparent` is worth reading).
pub fn enabled() -> bool {
    PROVIDER.get().is_some()
}

/// Whether the current span is part of a traced request (a sampled one, or work it started).
pub fn in_traced_span() -> bool {
    enabled()
        && tracing::Span::current()
            .metadata()
            .is_some_and(|span| span.target() == TRACED)
}

/// A span for one part of a request (auth, a store call, a plugin run, a settlement, a
/// call upstream), opened only inside a traced request's span or work one started: the
/// request's own span already names every log line, a request not sampled pays nothing
/// more, and the host's own polling outside any request adds no one-span traces.
macro_rules! part_span {
    ($($span:tt)*) => {
        if $crate::telemetry::traces::in_traced_span() {
            tracing::info_span!(target: $crate::telemetry::traces::TRACED, $($span)*)
        } else {
            tracing::Span::none()
        }
    };
}
pub(crate) use part_span;

/// Adds the current span's W3C trace context (`traceparent`) to a call to one of the
/// operator's own upstreams (chain nodes, the facilitator, the LLM, the chat and social
/// APIs). Never used for a plugin's destinations: a trace id would tell a third party
/// which of the service's requests belong together.
pub fn propagate(call: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    if !in_traced_span() {
        return call;
    }
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let context = tracing::Span::current().context();
    let mut headers = http::HeaderMap::new();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut opentelemetry_http::HeaderInjector(&mut headers))
    });
    call.headers(headers)
}

/// The exporter's HTTP client: the service's own (reqwest 0.12, the operator's upstream
/// client), its calls run on the service's runtime. The exporter's batch thread waits for
/// them there.
#[derive(Debug, Clone)]
struct OperatorHttp {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

type Answer = Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError>;

// The trait is declared with `async_trait`: its method is this boxed future.
impl opentelemetry_http::HttpClient for OperatorHttp {
    fn send_bytes<'a, 'b>(
        &'a self,
        request: http::Request<bytes::Bytes>,
    ) -> std::pin::Pin<Box<dyn Future<Output = Answer> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(self.send(request))
    }
}

impl OperatorHttp {
    async fn send(&self, request: http::Request<bytes::Bytes>) -> Answer {
        let client = self.client.clone();
        let (parts, body) = request.into_parts();
        let call = async move {
            let response = client
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send()
                .await?;
            let (status, headers) = (response.status(), response.headers().clone());
            let mut answer = http::Response::new(response.bytes().await?);
            *answer.status_mut() = status;
            *answer.headers_mut() = headers;
            Ok::<_, reqwest::Error>(answer)
        };
        Ok(self.runtime.spawn(call).await??)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanId, TraceFlags, TraceId, TraceState};

    fn caller(sampled: bool) -> opentelemetry::Context {
        let flags = if sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        let context = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            flags,
            true,
            TraceState::default(),
        );
        opentelemetry::Context::new().with_remote_span_context(context)
    }

    #[test]
    fn only_a_trusted_callers_traceparent_decides() {
        let never = || false;
        let always = || true;
        // Ratio 0: an untrusted caller's sampled flag does not make us trace.
        assert!(matches!(decide(caller(true), false, never), TraceStart::Untraced));
        // A trusted caller's flag is followed both ways, whatever the ratio.
        assert!(matches!(decide(caller(true), true, never), TraceStart::Continue(_)));
        assert!(matches!(decide(caller(false), true, always), TraceStart::Untraced));
        // An untrusted caller drawn by the ratio gets a trace of its own, linked to theirs.
        match decide(caller(false), false, always) {
            TraceStart::Root(Some(link)) => assert_eq!(
                link.trace_id(),
                TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()
            ),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            decide(opentelemetry::Context::new(), false, always),
            TraceStart::Root(None)
        ));
    }

    #[test]
    fn a_ratio_traces_its_share_of_consecutive_requests() {
        for (ratio, draws) in [
            (0.0, 10_000u64),
            (0.01, 100_000),
            (0.05, 10_000),
            (0.5, 10_000),
            (1.0, 10_000),
        ] {
            let below = threshold(ratio);
            let traced = (0..draws).filter(|n| drawn(*n, below)).count() as f64;
            let expected = ratio * draws as f64;
            assert!(
                (traced - expected).abs() <= expected * 0.05,
                "ratio {ratio}: {traced} of {draws} traced"
            );
        }
        // Any run of a hundred requests holds about its share: no long gaps or clumps.
        let below = threshold(0.1);
        for start in (0..100_000u64).step_by(100) {
            let traced = (start..start + 100).filter(|n| drawn(*n, below)).count();
            assert!((5..=15).contains(&traced), "{traced} of requests {start}..+100");
        }
    }
}
