//! OpenTelemetry traces, exported over OTLP/HTTP (protobuf) when `otlp_endpoint` is set.
//! The spans are the `tracing` spans the service opens (a request, and the parts inside
//! it); a request that comes with a W3C `traceparent` continues its caller's trace.

use std::sync::OnceLock;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// The tracer spans are exported with, sending to `endpoint` (e.g. `http://127.0.0.1:4318`,
/// its `/v1/traces`). Call inside the async runtime: exports run on it.
pub fn tracer(endpoint: &str) -> anyhow::Result<SdkTracer> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
        .with_http_client(OperatorHttp {
            client: crate::outbound::operator_client(Some(std::time::Duration::from_secs(10))),
            runtime: tokio::runtime::Handle::current(),
        })
        .build()?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name("agent-host").build())
        .build();
    opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
    let tracer = provider.tracer("agent-host");
    let _ = PROVIDER.set(provider);
    Ok(tracer)
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

/// A span for one part of a request (auth, a store call, a plugin run, a settlement, a
/// call upstream), opened only while traces are exported (the request's own span already
/// names every log line; without an exporter the parts would cost for nothing) and only
/// inside a request's span or work one started: the host's own polling outside any request
/// would otherwise fill the traces with one-span traces every second.
macro_rules! part_span {
    ($($span:tt)*) => {
        if $crate::telemetry::traces::enabled() && !tracing::Span::current().is_none() {
            tracing::info_span!($($span)*)
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
    if !enabled() {
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
