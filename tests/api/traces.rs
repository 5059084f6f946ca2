//! An operator's traces: with `otlp_endpoint` set, a request's spans reach an OTLP
//! receiver (decoding the real protobuf) in the trace its caller's `traceparent` names,
//! each part under the request; the operator's chain node is told the trace, a plugin's
//! destination never is.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::HeaderMap;
use serde_json::json;

use crate::support::chains::LocalBase;
use crate::support::otlp::{OtlpReceiver, ReceivedSpan};
use crate::support::*;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// A stand-in in front of a real node that forwards every call and keeps its headers.
async fn recording_forwarder(upstream: &str) -> (FakeServer, Arc<Mutex<Vec<HeaderMap>>>) {
    let seen: Arc<Mutex<Vec<HeaderMap>>> = Arc::default();
    let (kept, upstream) = (seen.clone(), upstream.to_string());
    let router = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
        let (kept, upstream) = (kept.clone(), upstream.clone());
        async move {
            kept.lock().unwrap().push(headers);
            let reply = client()
                .post(&upstream)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            ([("content-type", "application/json")], reply.bytes().await.unwrap())
        }
    });
    (FakeServer::start(router).await, seen)
}

/// Every span of `trace` from `leaf` up to the root: the leaf's ancestors, in order.
fn ancestors<'a>(spans: &'a [ReceivedSpan], leaf: &'a ReceivedSpan) -> Vec<&'a ReceivedSpan> {
    let mut chain = vec![leaf];
    while let Some(parent) = spans.iter().find(|s| s.span_id == chain.last().unwrap().parent_span_id) {
        chain.push(parent);
    }
    chain
}

#[tokio::test(flavor = "multi_thread")]
async fn a_requests_spans_reach_the_collector_in_its_callers_trace() {
    let receiver = OtlpReceiver::start().await;
    let chain = LocalBase::start().await;
    let (node, node_calls) = recording_forwarder(&chain.rpc_url).await;
    let seen_by_plugin: Arc<Mutex<Vec<HeaderMap>>> = Arc::default();
    let kept = seen_by_plugin.clone();
    let destination = FakeServer::start(axum::Router::new().fallback(move |headers: HeaderMap| {
        kept.lock().unwrap().push(headers);
        async { "outside" }
    }))
    .await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_BASE_RPC_URL", &node.base)
        .with_env("AGENT_HOST_OTLP_ENDPOINT", &receiver.endpoint())
        .with_env("AGENT_HOST_OTLP_TRUSTED_PEERS", "127.0.0.1")
        .with_env(
            "AGENT_HOST_OUTBOUND_ALLOW_PRIVATE",
            &format!("127.0.0.1:{}", destination.port),
        )
        // The log filter does not decide what is traced.
        .with_env("AGENT_HOST_LOG", "warn")
        // The SDK's standard knob: batches every 200 ms rather than 5 s.
        .with_env("OTEL_BSP_SCHEDULE_DELAY", "200");
    let key = env.account_with_key("acme", "pro");
    let grant = format!("allowed_hosts = [\"127.0.0.1:{}\"]", destination.port);
    env.apply_agent(&(manifest("seller") + &probe_command("probe", &grant)), "acme");
    env.create_wallet("seller", "base");
    let server = env.serve();
    let traceparent = format!("00-{TRACE_ID}-{CALLER_SPAN}-01");

    // A balance: the request reads the store and asks the node.
    let balance = send(
        client()
            .get(server.url("/v1/agents/seller/wallet/base/balance"))
            .header("x-api-key", &key)
            .header("traceparent", &traceparent),
    )
    .await;
    assert_eq!(balance.status, 200, "{}", balance.text);
    let request_id = balance.header("x-request-id").expect("a request id").to_string();
    // The request's own span closes last: once it is in, all of the request's are.
    let spans = receiver
        .wait_for("for the balance's request", |s| {
            s.trace_id == TRACE_ID && s.kind == "SPAN_KIND_SERVER"
        })
        .await;
    let traced: Vec<ReceivedSpan> = spans.into_iter().filter(|s| s.trace_id == TRACE_ID).collect();
    let root = traced
        .iter()
        .find(|s| s.kind == "SPAN_KIND_SERVER")
        .expect("the request's span");
    assert_eq!(root.parent_span_id, CALLER_SPAN, "the caller's span is its parent");
    assert_eq!(root.name, "GET /v1/agents/{agent_id}/wallet/{network}/balance");
    assert_eq!(root.service, "agent-host");
    assert_eq!(root.attributes["request_id"], request_id);
    assert_eq!(root.attributes["http.response.status_code"], "200");
    for part in ["auth", "rate_limit", "store read"] {
        let span = traced
            .iter()
            .find(|s| s.name == part)
            .unwrap_or_else(|| panic!("no {part} span in {traced:#?}"));
        assert_eq!(ancestors(&traced, span).last().unwrap().span_id, root.span_id, "{part}");
    }
    let rpc = traced.iter().find(|s| s.attributes.contains_key("rpc.method")).unwrap();
    assert_eq!(rpc.kind, "SPAN_KIND_CLIENT");
    assert_eq!(rpc.attributes["network"], "base");
    assert_eq!(ancestors(&traced, rpc).last().unwrap().span_id, root.span_id);
    // The node was told the trace, with the call's own span as the parent.
    let told: Vec<String> = node_calls
        .lock()
        .unwrap()
        .iter()
        .filter_map(|h| h.get("traceparent").map(|v| v.to_str().unwrap().to_string()))
        .collect();
    let rpc_spans: Vec<&ReceivedSpan> = traced
        .iter()
        .filter(|s| s.attributes.contains_key("rpc.method"))
        .collect();
    // Only the request's calls carry one: the host's own, outside requests, are not traced.
    assert!(!told.is_empty(), "the node was not told the request's trace");
    for header in &told {
        let parts: Vec<&str> = header.split('-').collect();
        assert_eq!(parts[1], TRACE_ID, "{header}");
        assert!(
            rpc_spans.iter().any(|s| s.span_id == parts[2]),
            "{header} names no node call's span"
        );
    }

    // A plugin's run is a span of its request; its destination hears nothing of the trace.
    let probed = send(
        client()
            .post(server.url("/v1/agents/seller/commands/probe/execute"))
            .header("x-api-key", &key)
            .header("traceparent", &traceparent)
            .json(&json!({ "parameters": { "mode": "http", "url": destination.url("/data") } })),
    )
    .await;
    assert_eq!(probed.status, 200, "{}", probed.text);
    assert!(probed.text.contains("outside"), "{}", probed.text);
    let spans = receiver
        .wait_for("for the plugin run's request", |s| {
            s.kind == "SPAN_KIND_SERVER" && s.name.ends_with("/execute")
        })
        .await;
    let run = spans.iter().find(|s| s.name == "plugin run").unwrap();
    assert_eq!(run.trace_id, TRACE_ID);
    assert_eq!(run.attributes["command"], "probe");
    assert_eq!(run.attributes["outcome"], "succeeded");
    assert_eq!(ancestors(&spans, run).last().unwrap().parent_span_id, CALLER_SPAN);
    // Every trace is a request's: the host's own polling adds no one-span traces.
    let strays: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.parent_span_id.is_empty() && s.kind != "SPAN_KIND_SERVER")
        .collect();
    assert!(strays.is_empty(), "spans outside any request: {strays:#?}");
    let headers = seen_by_plugin.lock().unwrap().clone();
    assert_eq!(headers.len(), 1, "the plugin called its destination once");
    for name in ["traceparent", "tracestate", "baggage"] {
        assert!(headers[0].get(name).is_none(), "{name} reached a plugin's destination");
    }
}

/// `otlp_sample_ratio = 0`: requests are traced only when their trusted caller's
/// `traceparent` says it samples them.
#[tokio::test(flavor = "multi_thread")]
async fn a_callers_sampled_flag_decides_and_the_ratio_decides_the_rest() {
    let receiver = OtlpReceiver::start().await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_OTLP_ENDPOINT", &receiver.endpoint())
        .with_env("AGENT_HOST_OTLP_SAMPLE_RATIO", "0")
        .with_env("AGENT_HOST_OTLP_TRUSTED_PEERS", "127.0.0.0/8")
        .with_env("OTEL_BSP_SCHEDULE_DELAY", "100");
    let key = env.account_with_key("acme", "pro");
    env.apply_agent(&manifest("seller"), "acme");
    let server = env.serve();
    let list = |traceparent: Option<String>| {
        let mut call = client()
            .get(server.url("/v1/agents/seller/commands"))
            .header("x-api-key", &key);
        if let Some(traceparent) = traceparent {
            call = call.header("traceparent", traceparent);
        }
        send(call)
    };
    let unsampled_trace = "0af7651916cd43dd8448eb211c80319c";
    assert_eq!(list(None).await.status, 200);
    assert_eq!(
        list(Some(format!("00-{unsampled_trace}-b7ad6b7169203331-00")))
            .await
            .status,
        200
    );
    assert_eq!(list(Some(format!("00-{TRACE_ID}-{CALLER_SPAN}-01"))).await.status, 200);
    receiver
        .wait_for("of the sampled request", |s| s.kind == "SPAN_KIND_SERVER")
        .await;
    // Spans are exported in the order they end: the unsampled request ended before the
    // sampled one began, so a span of its would have come in this batch or an earlier one.
    let spans: Vec<ReceivedSpan> = receiver.spans();
    assert!(spans.iter().any(|s| s.name == "auth"), "{spans:#?}");
    assert!(
        spans.iter().all(|s| s.trace_id == TRACE_ID),
        "only the caller's sampled trace: {:#?}",
        spans.iter().map(|s| (&s.name, &s.trace_id)).collect::<Vec<_>>()
    );
    assert_eq!(spans.iter().filter(|s| s.kind == "SPAN_KIND_SERVER").count(), 1);
}

/// A caller the operator did not name as trusted cannot choose what is traced nor put its
/// trace id in what the service sends on: its request, drawn by the ratio, starts a trace of
/// its own that links to the caller's.
#[tokio::test(flavor = "multi_thread")]
async fn an_untrusted_callers_trace_is_linked_not_continued() {
    let receiver = OtlpReceiver::start().await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_OTLP_ENDPOINT", &receiver.endpoint())
        .with_env("AGENT_HOST_OTLP_TRUSTED_PEERS", "192.0.2.0/24")
        .with_env("OTEL_BSP_SCHEDULE_DELAY", "100");
    let key = env.account_with_key("acme", "pro");
    env.apply_agent(&manifest("seller"), "acme");
    let server = env.serve();
    let listed = send(
        client()
            .get(server.url("/v1/agents/seller/commands"))
            .header("x-api-key", &key)
            .header("traceparent", format!("00-{TRACE_ID}-{CALLER_SPAN}-01")),
    )
    .await;
    assert_eq!(listed.status, 200);
    let spans = receiver
        .wait_for("of the request", |s| s.kind == "SPAN_KIND_SERVER")
        .await;
    let server_span = spans.iter().find(|s| s.kind == "SPAN_KIND_SERVER").unwrap();
    assert_ne!(server_span.trace_id, TRACE_ID, "a trace of its own");
    assert!(server_span.parent_span_id.is_empty(), "a root span");
    assert_eq!(
        server_span.linked_traces,
        vec![TRACE_ID.to_string()],
        "linked to the caller's"
    );
    assert!(
        spans.iter().all(|s| s.trace_id != TRACE_ID),
        "nothing in the caller's trace"
    );
}
