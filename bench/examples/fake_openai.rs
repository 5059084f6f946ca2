//! An OpenAI-compatible chat-completions server that answers at once with a fixed reply,
//! so the chat benchmarks measure the host, not a model. A request with `stream: true`
//! gets the reply as OpenAI streams it: `CHUNKS` chunks of one word, `GAP_MS` apart, the
//! usage, then `[DONE]`. `fake_openai PORT [CHUNKS] [GAP_MS]`.

use std::time::Duration;

use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use serde_json::{Value, json};

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().ok());
    let port = args.next().flatten().unwrap_or(18999) as u16;
    let chunks = args.next().flatten().unwrap_or(50);
    let gap = Duration::from_millis(args.next().flatten().unwrap_or(0));
    let reply = json!({ "id": "c", "object": "chat.completion", "choices": [{ "index": 0, "finish_reason": "stop",
        "message": { "role": "assistant", "content": "We open at 9:00." } }],
        "usage": { "prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26 } });
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        post(move |axum::Json(body): axum::Json<Value>| {
            let reply = reply.clone();
            async move {
                if body["stream"] == json!(true) {
                    return streamed(chunks, gap);
                }
                axum::Json(reply).into_response()
            }
        }),
    );
    // As streaming servers do: each chunk leaves at once, not after the reader's delayed ACK.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind")
        .tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
    axum::serve(listener, router).await.expect("serve");
}

fn streamed(chunks: u64, gap: Duration) -> Response {
    let chunk = |delta: Value, finish: Value| {
        json!({ "id": "c", "object": "chat.completion.chunk", "created": 1, "model": "fake",
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] })
        .to_string()
    };
    let mut events = vec![chunk(json!({ "role": "assistant", "content": "" }), Value::Null)];
    events.extend((0..chunks).map(|i| chunk(json!({ "content": format!("word{i} ") }), Value::Null)));
    events.push(chunk(json!({}), json!("stop")));
    events.push(
        json!({ "id": "c", "object": "chat.completion.chunk", "choices": [],
            "usage": { "prompt_tokens": 20, "completion_tokens": chunks, "total_tokens": 20 + chunks } })
        .to_string(),
    );
    events.push("[DONE]".into());
    let body = async_stream(events, gap);
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(axum::body::Body::from_stream(body))
        .expect("a response")
}

/// The events as SSE, `gap` apart.
fn async_stream(
    events: Vec<String>,
    gap: Duration,
) -> impl futures_util::Stream<Item = Result<String, std::convert::Infallible>> {
    futures_util::stream::unfold(events.into_iter(), move |mut events| async move {
        let data = events.next()?;
        if !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
        Some((Ok(format!("data: {data}\n\n")), events))
    })
}
