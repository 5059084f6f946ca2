//! `POST /v1/agents/:agentId/chat` against a local server speaking the OpenAI
//! chat-completions wire format, with real WASM commands as tools.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fake_llm::{Policy, fake_openai_watched, text, tool_call};
use crate::support::*;

const MASTER_KEY: &str = "0101010101010101010101010101010101010101010101010101010101010101";

fn agent_manifest() -> String {
    let mut knowledge: Vec<String> = (0..150)
        .map(|i| format!("Filler note {i} on an unrelated topic."))
        .collect();
    knowledge.push("The office opens at 9:00 on weekdays.".into());
    format!(
        r#"
username = "alpha"
name = "Alpha"
personality = "Cheerful and brief."
knowledge = {}

[[commands]]
command = "hello"
description = "Greets someone"
handler_type = "simple_text"
parameters = [{{ name = "name", type = "string", required = true, description = "Who" }}]
config = {{ text = "Hello, {{{{name}}}}!" }}

[[commands]]
command = "notes"
handler_type = "custom"
plugin = "{}"

[[commands]]
command = "hidden"
handler_type = "simple_text"
enabled = false
config = {{ text = "x" }}
"#,
        serde_json::to_string(&knowledge).unwrap(),
        plugin_path("notes")
    )
}

pub(crate) struct ChatFixture {
    pub env: TestEnv,
    pub server: TestServer,
    pub key: String,
    pub seen: Arc<Mutex<Vec<Value>>>,
    /// Streams the model's stand-in saw cut before their end.
    pub cut: Arc<AtomicUsize>,
    _llm: FakeServer,
}

/// A server whose agent `alpha` (personality, 151 knowledge entries, `hello`, `notes` and
/// a disabled command) talks to a stand-in for a hosted model answering by `policy`.
pub(crate) async fn start(policy: Policy, extra_env: &[(&str, &str)]) -> ChatFixture {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let cut = Arc::new(AtomicUsize::new(0));
    let llm = fake_openai_watched(policy, seen.clone(), cut.clone()).await;
    let mut env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model")
        .with_env("AGENT_HOST_MASTER_KEY", MASTER_KEY);
    for (k, v) in extra_env {
        env = env.with_env(k, v);
    }
    let key = env.account_with_key("alice", "pro");
    env.apply_agent(&agent_manifest(), "alice");
    let server = env.serve();
    ChatFixture {
        env,
        server,
        key,
        seen,
        cut,
        _llm: llm,
    }
}

async fn chat(fx: &ChatFixture, body: Value) -> Reply {
    post_json(&fx.server.url("/v1/agents/alpha/chat"), Some(&fx.key), &body).await
}

#[tokio::test(flavor = "multi_thread")]
async fn answers_in_character_with_history_and_relevant_knowledge() {
    let fx = start(Arc::new(|_, _| text("We open at 9.")), &[]).await;
    let reply = chat(
        &fx,
        json!({
            "message": "When does the office open?",
            "conversationHistory": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
        }),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let body = reply.json();
    assert_eq!(body["success"], true);
    assert_eq!(body["data"]["response"], "We open at 9.");
    assert!(body["data"]["agentId"].as_str().unwrap().len() > 10);
    assert!(body["data"]["timestamp"].as_str().unwrap().ends_with('Z'));

    let request = fx.seen.lock().unwrap()[0].clone();
    assert_eq!(request["model"], "fake-model");
    assert!(request.get("tools").is_none(), "tools are off by default");
    let messages = request["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[0]["role"], "system");
    let system = messages[0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You are Alpha (@alpha). Cheerful and brief."),
        "{system}"
    );
    assert!(
        system.contains("The office opens at 9:00 on weekdays."),
        "the relevant entry is in"
    );
    assert!(
        system.len() < 5_000,
        "150 filler notes do not all fit: {} chars",
        system.len()
    );
    assert_eq!(messages[1], json!({"role": "user", "content": "Hi"}));
    assert_eq!(messages[2], json!({"role": "assistant", "content": "Hello!"}));
    assert_eq!(
        messages[3],
        json!({"role": "user", "content": "When does the office open?"})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_call_runs_a_real_command_and_its_result_goes_back() {
    let fx = start(
        Arc::new(|req, n| {
            if n == 0 && req.get("tools").is_some() {
                tool_call("call_1", "hello", json!({"name": "Ann"}))
            } else {
                text("I greeted Ann.")
            }
        }),
        &[],
    )
    .await;
    let reply = chat(&fx, json!({"message": "Greet Ann", "toolsEnabled": true})).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json()["data"]["response"], "I greeted Ann.");
    let seen = fx.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    let tools: Vec<&str> = seen[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["hello", "notes"], "enabled commands only");
    assert_eq!(
        seen[0]["tools"][0]["function"]["parameters"]["required"],
        json!(["name"])
    );
    let last = seen[1]["messages"].as_array().unwrap();
    let assistant = &last[last.len() - 2];
    assert_eq!(assistant["tool_calls"][0]["id"], "call_1");
    let tool = &last[last.len() - 1];
    assert_eq!(tool["role"], "tool");
    assert_eq!(tool["tool_call_id"], "call_1");
    assert!(tool["content"].as_str().unwrap().contains("Hello, Ann!"), "{tool}");
}

#[tokio::test(flavor = "multi_thread")]
async fn exactly_max_tool_calls_run_then_the_model_must_answer() {
    // The model asks for another note every time it may call a tool.
    let fx = start(
        Arc::new(|req, n| {
            if req.get("tools").is_some() {
                tool_call(
                    &format!("call_{n}"),
                    "notes",
                    json!({"action": "add", "text": format!("note {n}")}),
                )
            } else {
                text("Enough notes.")
            }
        }),
        &[],
    )
    .await;
    let reply = chat(
        &fx,
        json!({"message": "Take notes", "toolsEnabled": true, "maxToolCalls": 3}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json()["data"]["response"], "Enough notes.");
    let listed = post_json(
        &fx.server.url("/v1/agents/alpha/commands/notes/execute"),
        Some(&fx.key),
        &json!({"rawText": "/notes list"}),
    )
    .await;
    assert_eq!(
        listed.json()["data"]["result"]["response"],
        "1. note 0\n2. note 1\n3. note 2",
        "exactly 3 ran"
    );
    let seen = fx.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4, "3 rounds with tools, then one without");
    assert!(seen[3].get("tools").is_none());

    let zero = chat(
        &fx,
        json!({"message": "Take notes", "toolsEnabled": true, "maxToolCalls": 0}),
    )
    .await;
    assert_eq!(zero.json()["data"]["response"], "Enough notes.");
    assert!(
        fx.seen.lock().unwrap()[4].get("tools").is_none(),
        "0 means no tools at all"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_tool_is_told_to_the_model_and_the_chat_goes_on() {
    let fx = start(
        Arc::new(|req, _| {
            if req.get("tools").is_some() {
                tool_call("c1", "hello", json!({}))
            } else {
                text("Sorry, I need a name.")
            }
        }),
        &[],
    )
    .await;
    let reply = chat(
        &fx,
        json!({"message": "Greet", "toolsEnabled": true, "maxToolCalls": 1}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json()["data"]["response"], "Sorry, I need a name.");
    let seen = fx.seen.lock().unwrap().clone();
    let tool = seen[1]["messages"].as_array().unwrap().last().unwrap().clone();
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .contains("missing required parameter 'name'"),
        "{tool}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn provider_errors_and_timeouts_are_clear_5xx() {
    let fx = start(
        Arc::new(|_, _| {
            (
                500,
                json!({"error": {"message": "upstream overloaded", "type": "server_error"}}),
            )
        }),
        &[],
    )
    .await;
    let reply = chat(&fx, json!({"message": "hi"})).await;
    assert_eq!(reply.status, 502);
    assert_eq!(reply.error_code(), "model_unavailable");
    // The provider's own words can carry the operator's account details: logged, not answered.
    assert_eq!(
        reply.error_message(),
        "The language model provider refused the request (HTTP 500)"
    );
    assert!(
        fx.server.log().contains("upstream overloaded"),
        "the detail is in the log"
    );

    let slow = start(
        Arc::new(|_, _| (200, json!({"sleep_ms": 3000}))),
        &[("AGENT_HOST_LLM_TIMEOUT_MS", "300")],
    )
    .await;
    let started = std::time::Instant::now();
    let reply = chat(&slow, json!({"message": "hi"})).await;
    assert_eq!(reply.status, 504);
    assert_eq!(reply.error_code(), "generation_timeout");
    assert!(started.elapsed() < Duration::from_secs(2), "never a hang");

    let env = TestEnv::new();
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&manifest("bravo"), "alice");
    let server = env.serve();
    let reply = post_json(
        &server.url("/v1/agents/bravo/chat"),
        Some(&key),
        &json!({"message": "hi"}),
    )
    .await;
    assert_eq!(reply.status, 503);
    assert_eq!(reply.error_code(), "model_unavailable");
}

#[tokio::test(flavor = "multi_thread")]
async fn validation_and_missing_agents() {
    let fx = start(Arc::new(|_, _| text("ok")), &[]).await;
    let missing = post_json(
        &fx.server.url("/v1/agents/nobody/chat"),
        Some(&fx.key),
        &json!({"message": "hi"}),
    )
    .await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.error_code(), "not_found");
    let long_history: Vec<Value> = (0..101).map(|_| json!({"role": "user", "content": "x"})).collect();
    let too_long = chat(&fx, json!({"message": "hi", "conversationHistory": long_history})).await;
    assert_eq!(too_long.status, 400);
    assert!(too_long.error_message().contains("conversationHistory"));
    assert!(fx.seen.lock().unwrap().is_empty(), "nothing reached the model");
}

/// A request our own plugins made (it carries our signed marker) gets no tools.
#[tokio::test(flavor = "multi_thread")]
async fn the_recursion_guard_turns_tools_off_for_our_own_plugins() {
    let fx = start(
        Arc::new(|_, _| text("no tools for you")),
        &[("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", "127.0.0.1")],
    )
    .await;
    let master: [u8; 32] = hex_bytes(MASTER_KEY);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let marker = agent_host::marker::MarkerKey::derive(&master).sign(now);
    let body = json!({"message": "hi", "toolsEnabled": true});
    let marked = send(
        client()
            .post(fx.server.url("/v1/agents/alpha/chat"))
            .header("x-api-key", &fx.key)
            .header("x-agent-host-origin", &marker)
            .json(&body),
    )
    .await;
    assert_eq!(marked.status, 200, "{}", marked.text);
    let forged = send(
        client()
            .post(fx.server.url("/v1/agents/alpha/chat"))
            .header("x-api-key", &fx.key)
            .header("x-agent-host-origin", "v1.1.deadbeef")
            .json(&body),
    )
    .await;
    assert_eq!(forged.status, 200);
    // The same on the OpenAI-compatible endpoint, whose chats have tools on.
    let marked_openai = send(
        client()
            .post(fx.server.url("/v1/agents/alpha/openai/v1/chat/completions"))
            .bearer_auth(&fx.key)
            .header("x-agent-host-origin", &marker)
            .json(&json!({"model": "alpha", "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await;
    assert_eq!(marked_openai.status, 200, "{}", marked_openai.text);
    {
        let seen = fx.seen.lock().unwrap();
        assert!(seen[0].get("tools").is_none(), "a valid marker forces tools off");
        assert!(seen[1].get("tools").is_some(), "a forged marker changes nothing");
        assert!(seen[2].get("tools").is_none(), "on the OpenAI endpoint too");
    }

    // The whole loop: a webhook command that calls this very chat endpoint with tools on.
    let loop_manifest = format!(
        r#"
username = "looper"
name = "Looper"

[[commands]]
command = "ask"
handler_type = "webhook"
parameters = [{{ name = "message", type = "string", required = true }}, {{ name = "toolsEnabled", type = "boolean" }}]
config = {{ url = "{}/v1/agents/alpha/chat", headers = {{ "x-api-key" = "{}" }}, response_field = "data.response" }}
"#,
        fx.server.base, fx.key
    );
    fx.env.apply_agent(&loop_manifest, "alice");
    let reply = post_json(
        &fx.server.url("/v1/agents/looper/commands/ask/execute"),
        Some(&fx.key),
        &json!({"parameters": {"message": "loop?", "toolsEnabled": true}}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json()["data"]["result"]["response"], "no tools for you");
    let seen = fx.seen.lock().unwrap();
    assert!(
        seen[2].get("tools").is_none(),
        "the chat our webhook caused had no tools"
    );
}

fn hex_bytes(text: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[i * 2..i * 2 + 2], 16).unwrap();
    }
    out
}

/// The real embedded model, offline: a non-empty answer to a short message.
#[tokio::test(flavor = "multi_thread")]
async fn the_embedded_model_answers_offline() {
    let env = TestEnv::new()
        .with_env("AGENT_HOST_EMBEDDED_MODEL_PATH", &smollm2_path())
        .with_env("AGENT_HOST_EMBEDDED_MAX_TOKENS", "24")
        .with_env("AGENT_HOST_LLM_TIMEOUT_MS", "120000");
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&manifest("alpha"), "alice");
    let server = env.serve();
    let reply = post_json(
        &server.url("/v1/agents/alpha/chat"),
        Some(&key),
        &json!({"message": "Say hello in one short sentence."}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let answer = reply.json()["data"]["response"].as_str().unwrap().to_string();
    assert!(answer.chars().any(char::is_alphabetic), "a real answer: {answer:?}");
}

/// The failures a hosted model really gives, each mapped to one stable answer: a proxy's
/// HTML page, a rate limit with its wait, a 200 that is not JSON, an answer or a tool call
/// cut at the token limit, and a stream cut before its end. The provider's own words are
/// never passed on.
#[tokio::test(flavor = "multi_thread")]
async fn each_provider_failure_has_a_stable_answer() {
    use crate::support::fake_llm::{
        cut_at_limit, cut_stream, html_page, not_json, rate_limited, tool_call_cut_at_limit,
    };
    let fx = start(
        Arc::new(|body, _| {
            let asked = body["messages"].as_array().unwrap().last().unwrap()["content"].to_string();
            let said = |word: &str| asked.contains(word);
            if said("html") {
                html_page(502)
            } else if said("busy") {
                rate_limited(7)
            } else if said("garbage") {
                not_json()
            } else if said("halfcall") {
                tool_call_cut_at_limit("call_1", "hello")
            } else if said("long") {
                cut_at_limit("Once upon a time")
            } else {
                cut_stream("This answer is cut by the network halfway through")
            }
        }),
        &[],
    )
    .await;
    let failed = |reply: &Reply, status: u16, message: &str| {
        assert_eq!(reply.status, status, "{}", reply.text);
        assert_eq!(reply.error_code(), "model_unavailable", "{}", reply.text);
        assert_eq!(reply.error_message(), message, "{}", reply.text);
        assert!(
            !reply.text.contains("nginx") && !reply.text.contains("org-Secret123"),
            "{}",
            reply.text
        );
    };
    let html = chat(&fx, json!({"message": "html"})).await;
    failed(&html, 502, "The language model provider refused the request (HTTP 502)");
    let busy = chat(&fx, json!({"message": "busy"})).await;
    failed(
        &busy,
        503,
        "The language model provider is limiting this server's requests; try again in 7 s",
    );
    assert_eq!(busy.header("retry-after"), Some("7"));
    let unreadable = "The language model provider sent an answer this server cannot read";
    failed(&chat(&fx, json!({"message": "garbage"})).await, 502, unreadable);
    failed(&chat(&fx, json!({"message": "halfcall"})).await, 502, unreadable);

    // Text cut at its limit is still an answer, and OpenAI's clients are told why it ended.
    let long = chat(&fx, json!({"message": "long"})).await;
    assert_eq!(long.status, 200, "{}", long.text);
    assert_eq!(long.json()["data"]["response"], "Once upon a time");
    let completions = fx.server.url("/v1/agents/alpha/openai/v1/chat/completions");
    let asked = |text: &str, stream: bool| json!({"model": "alpha", "stream": stream, "messages": [{"role": "user", "content": text}]});
    let long = send(
        client()
            .post(&completions)
            .bearer_auth(&fx.key)
            .json(&asked("long", false)),
    )
    .await;
    assert_eq!(long.json()["choices"][0]["finish_reason"], "length", "{}", long.text);

    // A stream the network cut: an error where the answer's end would be, never half an
    // answer passed off as whole.
    let cut = send(
        client()
            .post(&completions)
            .bearer_auth(&fx.key)
            .json(&asked("story", true)),
    )
    .await;
    assert_eq!(cut.status, 200, "{}", cut.text);
    assert!(cut.text.contains(r#""code":"model_unavailable""#), "{}", cut.text);
    assert!(!cut.text.contains(r#""finish_reason":"stop""#), "{}", cut.text);
}

/// Chat spends the operator's model: every round's answer limit is clamped to
/// `chat_max_tokens` whatever the caller asks, and an account's chats share a token budget,
/// charged at each round's worst case before it runs; past it, 429 in each surface's shape.
#[tokio::test(flavor = "multi_thread")]
async fn chats_spend_a_clamped_answer_within_the_accounts_token_budget() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    // 600-token answers (a token per 4 characters, as the stand-in counts them).
    let llm = crate::support::fake_llm::fake_openai(Arc::new(|_, _| text(&"word ".repeat(480))), seen.clone()).await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model")
        .with_env("AGENT_HOST_CHAT_MAX_TOKENS", "600")
        .with_env("AGENT_HOST_ACCOUNT_CHAT_TOKENS_PER_DAY", "1000");
    let key = env.account_with_key("alice", "pro");
    env.apply_agent(&manifest("beta"), "alice");
    let server = env.serve();

    let asked = json!({ "model": "beta", "max_tokens": 1_000_000, "messages": [{ "role": "user", "content": "Hi" }] });
    let first = send(
        client()
            .post(server.url("/v1/agents/beta/openai/v1/chat/completions"))
            .bearer_auth(&key)
            .json(&asked),
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(
        seen.lock().unwrap()[0]["max_tokens"],
        600,
        "clamped before it reached the provider"
    );
    let account = get(&server.url("/v1/account"), Some(&key)).await.json()["data"]["chat_tokens"].clone();
    assert_eq!(account["per_day"], 1000);
    let left = account["left_today"].as_u64().unwrap();
    assert!(left < 400, "the round's worst case was charged: {account}");

    // The second chat's worst case does not fit: refused before the model is asked.
    let second = post_json(
        &server.url("/v1/agents/beta/chat"),
        Some(&key),
        &json!({ "message": "Hi again" }),
    )
    .await;
    assert_eq!(
        (second.status, second.error_code()),
        (429, "rate_limit_exceeded".into()),
        "{}",
        second.text
    );
    assert!(second.error_message().contains("token budget"), "{}", second.text);
    assert!(second.header("retry-after").is_some());
    let openai = send(
        client()
            .post(server.url("/v1/agents/beta/openai/v1/chat/completions"))
            .bearer_auth(&key)
            .json(&asked),
    )
    .await;
    assert_eq!(openai.status, 429, "{}", openai.text);
    assert!(
        openai.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("token budget"),
        "OpenAI's error object: {}",
        openai.text
    );
    assert_eq!(seen.lock().unwrap().len(), 1, "the model was asked once");
    assert!(
        server.stop().success(),
        "the budgets' counts do not stop a clean shutdown"
    );
}

/// A paid chat takes its first round from the owner's chat budget once the payment passed
/// its checks, before it settles: with no room, it is refused and nothing is paid; with room
/// for one, two payers at once cannot both count on it.
#[tokio::test(flavor = "multi_thread")]
async fn a_paid_chat_the_owners_budget_cannot_answer_is_refused_before_it_is_paid() {
    use crate::support::x402::*;
    let chain = crate::support::chains::LocalBase::start().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let llm = crate::support::fake_llm::fake_openai(Arc::new(|_, _| text("Sunny.")), seen.clone()).await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model")
        .with_env("AGENT_HOST_CHAT_MAX_TOKENS", "100")
        .with_env("AGENT_HOST_ACCOUNT_CHAT_TOKENS_PER_DAY", "300");
    let (env, _) = base_shop(&chain, env, "").await;
    let server = env.serve();
    let (payer, payer_address) = base_payer(&chain, 1_000_000).await;
    let url = server.url("/x402/base/seller");
    let ask = json!({ "message": "What is the weather?" });
    let offered = payment_required(&post_x402(&url, &ask).await)["accepts"][0].clone();
    // The agent's default price, $0.01.
    let price = 10_000;

    // A first round's worst case (the prompt's bound, about 120 tokens, and 100 of answer)
    // fits the day's 300 once: served and paid.
    let first = paid(&url, &ask, &base_payment(&payer, &offered, price, 1, 60)).await;
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(chain.usdc_of(&payer_address).await, 1_000_000 - price);
    // Not twice: refused before it settles, nothing more taken, the model not asked again.
    let refused = paid(&url, &ask, &base_payment(&payer, &offered, price, 2, 60)).await;
    assert_eq!(refused.status, 429, "{}", refused.text);
    assert!(refused.text.contains("token budget"), "{}", refused.text);
    assert_eq!(
        chain.usdc_of(&payer_address).await,
        1_000_000 - price,
        "nothing more was taken"
    );
    assert_eq!(payments(&env).len(), 1, "the refused one is not recorded");
    assert_eq!(seen.lock().unwrap().len(), 1, "the model was asked once");
}
