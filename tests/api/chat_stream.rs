//! Chat answered as server-sent events (`Accept: text/event-stream` or `stream: true`):
//! text as it is written, tool calls as they start and end, the answer's envelope last;
//! a client that hangs up stops the generation, on a hosted model and the embedded one.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};

use crate::chat::{ChatFixture, start};
use crate::support::fake_llm::{refusal, text, tool_call};
use crate::support::sse::{SseEvent, SseReader};
use crate::support::*;

fn streamed_chat(fx: &ChatFixture, body: Value) -> reqwest::RequestBuilder {
    client()
        .post(fx.server.url("/v1/agents/alpha/chat"))
        .header("x-api-key", &fx.key)
        .header("accept", "text/event-stream")
        .json(&body)
}

fn names(events: &[SseEvent]) -> Vec<&str> {
    events.iter().map(|e| e.name.as_deref().unwrap_or("")).collect()
}

fn deltas(events: &[SseEvent]) -> String {
    events
        .iter()
        .filter(|e| e.name.as_deref() == Some("delta"))
        .map(|e| e.json()["text"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streamed_chat_shows_its_tool_calls_then_its_text_then_the_answer() {
    let fx = start(
        Arc::new(|req, n| {
            if n == 0 && req.get("tools").is_some() {
                tool_call("call_1", "hello", json!({"name": "Ann"}))
            } else {
                text("I greeted Ann, who is doing well today.")
            }
        }),
        &[],
    )
    .await;
    let stream = SseReader::open(streamed_chat(
        &fx,
        json!({"message": "Greet Ann", "toolsEnabled": true}),
    ))
    .await;
    assert_eq!(stream.status, 200);
    assert!(
        stream.content_type().starts_with("text/event-stream"),
        "{}",
        stream.content_type()
    );
    let limit: u64 = stream.headers["x-ratelimit-limit"].to_str().unwrap().parse().unwrap();
    let remaining: u64 = stream.headers["x-ratelimit-remaining"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(remaining, limit - 1, "the stream is one request");
    let events = stream.rest().await;

    let order = names(&events);
    let first_delta = order.iter().position(|n| *n == "delta").unwrap();
    assert_eq!(&order[..2], ["tool_call_started", "tool_call_finished"], "{order:?}");
    assert!(order[first_delta..order.len() - 1].iter().all(|n| *n == "delta"));
    assert!(order.len() - 1 - first_delta > 1, "the text comes in pieces: {order:?}");
    assert_eq!(order.last(), Some(&"done"));

    let started = events[0].json();
    assert_eq!(started["name"], "hello");
    assert_eq!(started["arguments"], json!({"name": "Ann"}));
    let finished = events[1].json();
    assert_eq!(
        (finished["id"].clone(), finished["ok"].clone()),
        (json!("call_1"), json!(true))
    );
    assert!(
        finished["summary"].as_str().unwrap().contains("Hello, Ann!"),
        "{finished}"
    );

    let done = events.last().unwrap().json();
    assert_eq!(done["success"], true);
    assert_eq!(done["data"]["response"], "I greeted Ann, who is doing well today.");
    assert_eq!(deltas(&events), "I greeted Ann, who is doing well today.");
    assert!(done["data"]["timestamp"].as_str().unwrap().ends_with('Z'));
    assert_eq!(done["usage"]["promptTokens"], 20, "both rounds' tokens: {done}");

    let seen = fx.seen.lock().unwrap().clone();
    assert!(
        seen.iter().all(|r| r["stream"] == true),
        "the provider is streamed through"
    );

    // `stream: true` asks the same, without the header.
    let by_field = SseReader::open(
        client()
            .post(fx.server.url("/v1/agents/alpha/chat"))
            .header("x-api-key", &fx.key)
            .json(&json!({"message": "Hi", "stream": true})),
    )
    .await;
    assert!(by_field.content_type().starts_with("text/event-stream"));
    assert_eq!(names(&by_field.rest().await).last(), Some(&"done"));
    // And without either, the one JSON answer.
    let plain = post_json(
        &fx.server.url("/v1/agents/alpha/chat"),
        Some(&fx.key),
        &json!({"message": "Hi"}),
    )
    .await;
    assert_eq!(
        plain.json()["data"]["response"],
        "I greeted Ann, who is doing well today."
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failure_before_the_stream_has_its_status_and_one_after_is_an_error_event() {
    let fx = start(
        Arc::new(|req, _| {
            if req["messages"].as_array().unwrap().iter().any(|m| m["role"] == "tool") {
                refusal(500, "upstream overloaded")
            } else if req.get("tools").is_some() {
                tool_call("call_1", "hello", json!({"name": "Bo"}))
            } else {
                refusal(500, "upstream overloaded")
            }
        }),
        &[],
    )
    .await;
    let at_once = SseReader::open(streamed_chat(&fx, json!({"message": "Hi"}))).await;
    assert_eq!(at_once.status, 502);
    let body: Value = serde_json::from_str(&at_once.text().await).unwrap();
    assert_eq!(body["error"]["code"], "model_unavailable");

    let midway = SseReader::open(streamed_chat(&fx, json!({"message": "Greet Bo", "toolsEnabled": true}))).await;
    assert_eq!(midway.status, 200);
    let events = midway.rest().await;
    assert_eq!(names(&events), ["tool_call_started", "tool_call_finished", "error"]);
    let error = events[2].json();
    assert_eq!(error["error"]["code"], "model_unavailable");
    assert!(
        !events[2].data.contains("overloaded"),
        "the provider's words stay in the log"
    );

    let invalid = SseReader::open(streamed_chat(&fx, json!({"message": ""}))).await;
    assert_eq!(invalid.status, 400, "a bad request is refused before any stream");
}

#[tokio::test(flavor = "multi_thread")]
async fn hanging_up_stops_the_hosted_models_stream() {
    let long = "word ".repeat(400);
    let fx = start(
        Arc::new(move |_, _| {
            let (status, mut reply) = text(&long);
            reply["chunk_delay_ms"] = json!(20);
            (status, reply)
        }),
        &[],
    )
    .await;
    let mut stream = SseReader::open(streamed_chat(&fx, json!({"message": "Talk a lot"}))).await;
    let first = stream.next().await.unwrap();
    assert_eq!(first.name.as_deref(), Some("delta"));
    drop(stream);
    // 100 chunks 20 ms apart would take 2 s; the stand-in sees its stream cut instead.
    time_until(Duration::from_secs(10), "the provider's stream cut", || async {
        fx.cut.load(Ordering::SeqCst) == 1
    })
    .await;
    // The chat cut short still counts for its owner.
    let usage_url = fx.server.url("/v1/account/agents/alpha/chat-usage");
    time_until(Duration::from_secs(5), "the cut chat recorded", || async {
        get(&usage_url, Some(&fx.key)).await.json()["data"]["total"]["chats"] == 1
    })
    .await;
}

fn embedded_env(max_tokens: &str) -> TestEnv {
    TestEnv::new()
        .with_env("AGENT_HOST_EMBEDDED_MODEL_PATH", &smollm2_path())
        .with_env("AGENT_HOST_EMBEDDED_MAX_TOKENS", max_tokens)
        .with_env("AGENT_HOST_LLM_TIMEOUT_MS", "120000")
        .with_metrics()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_embedded_model_streams_token_by_token_and_stops_when_the_client_hangs_up() {
    let env = embedded_env("400");
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&manifest("alpha"), "alice");
    let server = env.serve();
    let request = |message: &str| {
        client()
            .post(server.url("/v1/agents/alpha/chat"))
            .header("x-api-key", &key)
            .json(&json!({"message": message, "stream": true}))
    };

    let events = SseReader::open(request("Say hello in one short sentence."))
        .await
        .rest()
        .await;
    let order = names(&events);
    assert_eq!(order.last(), Some(&"done"), "{order:?}");
    assert!(
        order.iter().filter(|n| **n == "delta").count() > 1,
        "more than one piece: {order:?}"
    );
    let done = events.last().unwrap().json();
    assert_eq!(deltas(&events), done["data"]["response"].as_str().unwrap());
    let completion = done["usage"]["completionTokens"].as_u64().unwrap();
    assert!(completion > 1, "{done}");
    let counted = "agent_host_chat_tokens_total{agent=\"alpha\",type=\"completion\"}";
    assert_eq!(
        server.metric(counted).await,
        completion as f64,
        "the chat's tokens in the metrics"
    );

    let mut stream = SseReader::open(request("Write a very long story about a dragon and a city.")).await;
    assert_eq!(stream.next().await.unwrap().name.as_deref(), Some("delta"));
    drop(stream);
    // The model's own account: the generation left the queue because its caller went
    // away (not at its end or its deadline).
    time_until(
        Duration::from_secs(30),
        "the generation stopped for its caller",
        || async {
            server
                .metric("agent_host_llm_embedded_stopped_total{reason=\"caller_gone\"}")
                .await
                == 1.0
        },
    )
    .await;
    time_until(Duration::from_secs(5), "the queue empty", || async {
        server.metric("agent_host_llm_embedded_generations").await == 0.0
    })
    .await;
}
