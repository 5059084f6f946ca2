//! An agent as an OpenAI-compatible model (`/v1/agents/{id}/openai/v1`), talked to by
//! OpenAI's own clients (Python `openai`, npm `openai`) and by plain HTTP for what those
//! clients never send.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::chat::{ChatFixture, start};
use crate::support::fake_llm::{Policy, refusal, text, tool_call};
use crate::support::*;

/// A stand-in model that answers from what it was given: the agent's introduction, the
/// knowledge entry about the office, a greeting through the `hello` command, and the
/// command's result once it ran.
fn reading_model() -> Policy {
    Arc::new(|req, _| {
        let messages = req["messages"].as_array().unwrap();
        let system = messages[0]["content"].as_str().unwrap();
        let last = messages.last().unwrap();
        let fails = messages[1]["content"].as_str().unwrap_or("").contains("then fail");
        if last["role"] == "tool" && fails {
            return refusal(500, "overloaded");
        }
        if last["role"] == "tool" {
            let result: Value = serde_json::from_str(last["content"].as_str().unwrap()).unwrap();
            return text(&format!("The command said: {}", result["response"].as_str().unwrap()));
        }
        if req.get("tools").is_some() && last["content"].as_str().unwrap().starts_with("Greet") {
            return tool_call("call_1", "hello", json!({"name": "Ann"}));
        }
        let intro = system.split_once(". ").map_or(system, |(intro, _)| intro);
        let office = system.lines().find(|l| l.contains("office")).unwrap_or("- nothing");
        text(&format!("{intro}. {}", office.trim_start_matches("- ")))
    })
}

fn base_url(fx: &ChatFixture) -> String {
    fx.server.url("/v1/agents/alpha/openai/v1")
}

fn calls() -> Value {
    let office =
        json!([{"role": "system", "content": "Be formal."}, {"role": "user", "content": "When does the office open?"}]);
    json!([
        { "messages": office },
        { "messages": office, "stream": true },
        { "messages": [{"role": "user", "content": "Greet Ann"}], "stream": true },
        { "messages": office, "params": { "n": 2 } },
        { "messages": [{"role": "user", "content": "Greet Ann, then fail"}], "stream": true },
    ])
}

/// What both clients must have seen.
fn check(client: &str, out: &Value) {
    assert_eq!(out["models"], json!(["alpha"]), "{client}: {out}");
    let results = out["results"].as_array().unwrap();
    let expected = "You are Alpha (@alpha). The office opens at 9:00 on weekdays.";
    let (plain, streamed, tool, refused, midway) = (&results[0], &results[1], &results[2], &results[3], &results[4]);
    assert_eq!(
        plain["content"], expected,
        "{client}: personality and knowledge: {plain}"
    );
    assert_eq!(plain["finishReason"], "stop");
    let usage = &plain["usage"];
    assert!(usage["prompt_tokens"].as_u64().unwrap() > 0, "{client}: {usage}");
    assert_eq!(
        usage["total_tokens"].as_u64(),
        Some(usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap())
    );

    assert_eq!(streamed["content"], expected, "{client}: {streamed}");
    assert!(
        streamed["chunks"].as_u64().unwrap() > 4,
        "{client}: in pieces: {streamed}"
    );
    assert_eq!(streamed["finishReason"], "stop");
    assert!(
        streamed["usage"]["completion_tokens"].as_u64().unwrap() > 0,
        "{client}: {streamed}"
    );

    assert_eq!(
        tool["content"], "The command said: Hello, Ann!",
        "{client}: the command ran: {tool}"
    );

    let error = &refused["error"];
    assert_eq!(error["status"], 400, "{client}: {refused}");
    assert_eq!(error["param"], "n");
    assert_eq!(error["code"], "validation_error");
    assert!(
        error["message"].as_str().unwrap().contains("n must be 1"),
        "{client}: {error}"
    );

    // A failure after the stream began: the client raises it, in our words, not the provider's.
    let failed = &midway["error"];
    assert!(
        failed["message"].as_str().unwrap().contains("refused the request"),
        "{client}: {midway}"
    );
    assert!(!midway.to_string().contains("overloaded"), "{client}: {midway}");
}

#[tokio::test(flavor = "multi_thread")]
async fn openais_clients_chat_with_an_agent_and_its_commands() {
    let fx = start(reading_model(), &[]).await;
    let request = json!({ "baseUrl": base_url(&fx), "key": fx.key, "model": "alpha", "calls": calls() });
    let python = client_script(&python(), "python/openai_client.py", &request, "OpenAI's Python client").await;
    check("python", &python);
    let node = client_script("node", "node/openai.mjs", &request, "OpenAI's Node client").await;
    check("node", &node);

    // The caller's instructions are read after the agent's, never instead of them.
    let seen = fx.seen.lock().unwrap()[0].clone();
    let system = seen["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You are Alpha (@alpha). Cheerful and brief."),
        "{system}"
    );
    assert!(system.ends_with("The caller also asks:\nBe formal."), "{system}");
    assert_eq!(
        seen["messages"].as_array().unwrap().len(),
        2,
        "one system message, then the question"
    );

    // The tokens of every chat are the owner's to see: 2 clients × 4 chats (one failed in
    // its second round), the greetings in two rounds each.
    let usage = get(&fx.server.url("/v1/account/agents/alpha/chat-usage"), Some(&fx.key)).await;
    assert_eq!(usage.status, 200, "{}", usage.text);
    let total = &usage.json()["data"]["total"];
    assert_eq!(total["chats"], 8, "{total}");
    assert_eq!(total["prompt_tokens"], 10 * 10, "{total}");
    assert!(total["completion_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn keys_missing_agents_and_unknown_paths_answer_in_openais_shape() {
    let fx = start(reading_model(), &[]).await;
    let url = |path: &str| format!("{}{path}", base_url(&fx));
    let question = json!({"model": "alpha", "messages": [{"role": "user", "content": "Hi"}]});

    let no_key = send(client().post(url("/chat/completions")).json(&question)).await;
    assert_eq!(no_key.status, 401);
    assert_eq!(no_key.json()["error"]["type"], "authentication_error");
    let wrong_key = send(
        client()
            .post(url("/chat/completions"))
            .bearer_auth("nope")
            .json(&question),
    )
    .await;
    assert_eq!(
        (wrong_key.status, wrong_key.json()["error"]["code"].clone()),
        (401, json!("unauthorized"))
    );

    // `x-api-key` as on the rest of the API, and the rate-limit headers as everywhere.
    let keyed = send(
        client()
            .post(url("/chat/completions"))
            .header("x-api-key", &fx.key)
            .json(&question),
    )
    .await;
    assert_eq!(keyed.status, 200, "{}", keyed.text);
    assert!(keyed.header("x-ratelimit-remaining").is_some());
    assert_eq!(keyed.json()["object"], "chat.completion");
    assert!(keyed.json()["id"].as_str().unwrap().starts_with("chatcmpl-"));

    let other = fx.env.account_with_key("bob", "pro");
    let elsewhere = send(
        client()
            .post(url("/chat/completions"))
            .bearer_auth(&other)
            .json(&question),
    )
    .await;
    assert_eq!(elsewhere.status, 404, "another account's agent is not found");
    assert_eq!(elsewhere.json()["error"]["type"], "invalid_request_error");

    let not_json = send(
        client()
            .post(url("/chat/completions"))
            .bearer_auth(&fx.key)
            .header("content-type", "application/json")
            .body("{"),
    )
    .await;
    assert_eq!(not_json.status, 400);
    let tools = send(client().post(url("/chat/completions")).bearer_auth(&fx.key).json(
        &json!({"model": "alpha", "messages": [{"role": "user", "content": "Hi"}],
                          "tools": [{"type": "function", "function": {"name": "f"}}]}),
    ))
    .await;
    assert_eq!(
        (tools.status, tools.json()["error"]["param"].clone()),
        (400, json!("tools"))
    );

    let model = send(client().get(url("/models/alpha")).bearer_auth(&fx.key)).await;
    assert_eq!(model.json()["id"], "alpha");
    assert_eq!(
        send(client().get(url("/models/gpt-4o")).bearer_auth(&fx.key))
            .await
            .status,
        404
    );
    // A wrong method is refused in OpenAI's shape too.
    let put = send(
        client()
            .put(url("/chat/completions"))
            .bearer_auth(&fx.key)
            .json(&question),
    )
    .await;
    assert_eq!(put.status, 405, "{}", put.text);
    assert_eq!(put.json()["error"]["code"], "method_not_allowed", "{}", put.text);
    let embeddings = send(client().post(url("/embeddings")).bearer_auth(&fx.key).json(&json!({}))).await;
    assert_eq!(embeddings.status, 404);
    assert!(
        embeddings.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("chat/completions")
    );
}

/// The completions route reads its body raw; a body over the limit, one sent as a form and
/// a key past its rate are still answered in OpenAI's shape, a 429 with `retry-after`.
#[tokio::test(flavor = "multi_thread")]
async fn oversized_untyped_and_too_frequent_requests_answer_in_openais_shape() {
    let fx = start(reading_model(), &[("AGENT_HOST_MAX_BODY_BYTES", "2000")]).await;
    let url = format!("{}/chat/completions", base_url(&fx));
    let shape = |reply: &Reply, status: u16, kind: &str, code: &str| {
        assert_eq!(reply.status, status, "{}", reply.text);
        let error = &reply.json()["error"];
        assert_eq!(
            (&error["type"], &error["code"]),
            (&json!(kind), &json!(code)),
            "{}",
            reply.text
        );
        error["message"].as_str().unwrap().to_string()
    };
    let long = json!({"model": "alpha", "messages": [{"role": "user", "content": "a".repeat(3000)}]});
    let too_large = send(client().post(&url).bearer_auth(&fx.key).json(&long)).await;
    let message = shape(&too_large, 413, "invalid_request_error", "validation_error");
    assert!(message.contains("too large"), "{message}");
    let question = r#"{"model": "alpha", "messages": [{"role": "user", "content": "Hi"}]}"#;
    let untyped = send(client().post(&url).bearer_auth(&fx.key).body(question)).await;
    assert_eq!(
        untyped.status, 200,
        "JSON without a content type is read: {}",
        untyped.text
    );
    let form = send(
        client()
            .post(&url)
            .bearer_auth(&fx.key)
            .header("content-type", "multipart/form-data; boundary=x")
            .body(question),
    )
    .await;
    let message = shape(&form, 400, "invalid_request_error", "validation_error");
    assert!(message.contains("Content-Type"), "{message}");

    // A key of an account allowed two requests a minute: the third is told when to retry.
    fx.env.cli_json(&[
        "account",
        "create",
        "tiny",
        "--plan",
        "enterprise",
        "--rpm",
        "2",
        "--rpd",
        "100",
    ]);
    let tiny = fx.env.create_key("tiny");
    for _ in 0..2 {
        let reply = send(client().post(&url).bearer_auth(&tiny).body(question)).await;
        assert_ne!(reply.status, 429, "{}", reply.text);
    }
    let limited = send(client().post(&url).bearer_auth(&tiny).body(question)).await;
    shape(&limited, 429, "rate_limit_error", "rate_limit_exceeded");
    let retry: u64 = limited.header("retry-after").expect("retry-after").parse().unwrap();
    // A sliding minute: the wait may reach into the next one.
    assert!((1..=120).contains(&retry), "{retry}: {}", limited.text);
}

/// Offline, with the embedded model: OpenAI's client streams an answer from the agent.
#[tokio::test(flavor = "multi_thread")]
async fn openais_client_streams_from_the_embedded_model() {
    let env = TestEnv::new()
        .with_env("AGENT_HOST_EMBEDDED_MODEL_PATH", &smollm2_path())
        .with_env("AGENT_HOST_EMBEDDED_MAX_TOKENS", "48")
        .with_env("AGENT_HOST_LLM_TIMEOUT_MS", "120000");
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&manifest("alpha"), "alice");
    let server = env.serve();
    let request = json!({
        "baseUrl": server.url("/v1/agents/alpha/openai/v1"), "key": key, "model": "alpha",
        "calls": [{ "messages": [{"role": "user", "content": "Say hello in one short sentence."}], "stream": true }],
    });
    let out = client_script(&python(), "python/openai_client.py", &request, "OpenAI's Python client").await;
    let answer = &out["results"][0];
    assert!(
        answer["content"].as_str().unwrap().chars().any(char::is_alphabetic),
        "{answer}"
    );
    assert!(answer["chunks"].as_u64().unwrap() > 3, "token by token: {answer}");
    assert!(answer["usage"]["completion_tokens"].as_u64().unwrap() > 1, "{answer}");
}
