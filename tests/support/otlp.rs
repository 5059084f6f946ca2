//! A local OTLP/HTTP trace receiver, standing in for an OpenTelemetry collector (which
//! cannot be installed here): it decodes each `POST /v1/traces` as the collector does, from
//! the protobuf `ExportTraceServiceRequest`, and keeps the spans for the test to read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;

use super::FakeServer;

/// One span as received, ids in lowercase hex (as in a `traceparent`).
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub name: String,
    /// `SPAN_KIND_SERVER`, `SPAN_KIND_CLIENT`, ...
    pub kind: String,
    pub attributes: HashMap<String, String>,
    /// The resource's `service.name`.
    pub service: String,
    /// Start and end, in ns since the Unix epoch.
    pub start_ns: u64,
    pub end_ns: u64,
    /// The trace ids of the spans it links to.
    pub linked_traces: Vec<String>,
}

pub struct OtlpReceiver {
    server: FakeServer,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
}

impl OtlpReceiver {
    pub async fn start() -> OtlpReceiver {
        let spans: Arc<Mutex<Vec<ReceivedSpan>>> = Arc::default();
        let kept = spans.clone();
        let router = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                let kept = kept.clone();
                async move { receive(&kept, &headers, &body) }
            }),
        );
        OtlpReceiver {
            server: FakeServer::start(router).await,
            spans,
        }
    }

    /// What `otlp_endpoint` is set to.
    pub fn endpoint(&self) -> String {
        self.server.base.clone()
    }

    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap().clone()
    }

    /// Waits until a received span passes `wanted` (the exporter sends in batches), and
    /// returns every span received by then.
    pub async fn wait_for(&self, what: &str, wanted: impl Fn(&ReceivedSpan) -> bool) -> Vec<ReceivedSpan> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let spans = self.spans();
            if spans.iter().any(&wanted) {
                return spans;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no span {what} arrived; received: {:#?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Answers as the collector does: 200 with an (empty) protobuf response, 400 for a body
/// that is not an OTLP protobuf export.
fn receive(kept: &Mutex<Vec<ReceivedSpan>>, headers: &HeaderMap, body: &[u8]) -> (StatusCode, Vec<u8>) {
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok());
    if content_type != Some("application/x-protobuf") {
        return (StatusCode::UNSUPPORTED_MEDIA_TYPE, Vec::new());
    }
    let Ok(export) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, Vec::new());
    };
    let mut spans = kept.lock().unwrap();
    for resource_spans in export.resource_spans {
        let resource = resource_spans
            .resource
            .map(|r| attributes(&r.attributes))
            .unwrap_or_default();
        let service = resource.get("service.name").cloned().unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                spans.push(ReceivedSpan {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    kind: span.kind().as_str_name().to_string(),
                    name: span.name,
                    attributes: attributes(&span.attributes),
                    service: service.clone(),
                    start_ns: span.start_time_unix_nano,
                    end_ns: span.end_time_unix_nano,
                    linked_traces: span.links.iter().map(|l| hex(&l.trace_id)).collect(),
                });
            }
        }
    }
    (StatusCode::OK, ExportTraceServiceResponse::default().encode_to_vec())
}

fn attributes(list: &[opentelemetry_proto::tonic::common::v1::KeyValue]) -> HashMap<String, String> {
    list.iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(AnyValue::StringValue(s)) => s.clone(),
                Some(AnyValue::IntValue(i)) => i.to_string(),
                Some(AnyValue::BoolValue(b)) => b.to_string(),
                Some(AnyValue::DoubleValue(d)) => d.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
