//! Every agent is an A2A server at `/a2a/{agentId}` (A2A 1.0, JSON-RPC): its card under
//! the agent's URL, its commands with `a2a` in their integrations as skills, any other
//! message a chat turn, every message a task. Driven by the official SDKs' clients
//! (Python `a2a-sdk`, npm `@a2a-js/sdk`) and by plain HTTP for what they never send.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::support::fake_llm::{fake_openai, text};
use crate::support::webhooks::Receiver;
use crate::support::*;

fn manifest(extra: &str) -> String {
    format!(
        r#"
username = "courier"
name = "Courier"
personality = "Brief and exact."
{extra}

[[commands]]
command = "hello"
description = "Greets someone"
handler_type = "simple_text"
integrations = ["a2a"]
parameters = [{{ name = "name", type = "string", required = true, description = "Who" }}]
config = {{ text = "Hello, {{{{name}}}}!" }}

[[commands]]
command = "nap"
description = "Sleeps, reporting progress"
handler_type = "custom"
plugin = "{probe}"
integrations = ["a2a"]
long_running = true
timeout_ms = 10000

[[commands]]
command = "offstage"
description = "Not offered on A2A"
handler_type = "simple_text"
config = {{ text = "no" }}
"#,
        probe = plugin_path("probe")
    )
}

/// A server whose agent `courier` talks through a stand-in model that repeats how many
/// messages it was given (so a test sees the history) and streams slowly enough to be
/// seen in pieces.
struct Fixture {
    env: TestEnv,
    server: TestServer,
    key: String,
    agent_id: String,
    seen: Arc<Mutex<Vec<Value>>>,
    _llm: FakeServer,
}

async fn start(extra: &str) -> Fixture {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let llm = fake_openai(
        Arc::new(|request, _| {
            let count = request["messages"].as_array().map_or(0, Vec::len);
            text(&format!("I was given {count} messages; all is well here."))
        }),
        seen.clone(),
    )
    .await;
    let env = TestEnv::new();
    // The operator's key that signs the cards.
    let key_file = env.path("card-key");
    std::fs::write(&key_file, "11".repeat(32)).unwrap();
    let env = env
        .with_env("AGENT_HOST_A2A_CARD_SIGNING_KEY_FILE", key_file.to_str().unwrap())
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model")
        // The push notifications' receiver is on loopback.
        .with_env("AGENT_HOST_WEBHOOK_ALLOW_PRIVATE", "127.0.0.1");
    let key = env.account_with_key("alice", "pro");
    let agent_id = env.apply_agent(&manifest(extra), "alice");
    let server = env.serve();
    Fixture {
        env,
        server,
        key,
        agent_id,
        seen,
        _llm: llm,
    }
}

async fn python(request: &Value) -> Value {
    client_script(&python_path(), "python/a2a_client.py", request, "the A2A Python client").await
}

async fn node(request: &Value) -> Value {
    client_script("node", "node/a2a.mjs", request, "the A2A JavaScript client").await
}

fn python_path() -> String {
    std::env::var("MCP_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or_default()
}

fn answer(task: &Value) -> &str {
    task["artifacts"][0]["parts"][0]["text"].as_str().unwrap_or_default()
}

/// The steps both SDKs take, and what both must see; pushes go to `hook` with `token`.
fn steps(hook: &str, token: &str) -> Value {
    json!([
        { "do": "card" },
        { "do": "send", "text": "Hi there" },
        { "do": "send", "skill": "hello", "data": { "name": "Ada" } },
        { "do": "send", "text": "/hello Bob" },
        { "do": "send", "skill": "hello", "data": { "name": 5 } },
        { "do": "send", "skill": "nap", "data": { "mode": "sleep", "n": 1200 } },
        { "do": "send", "skill": "nap", "data": { "mode": "sleep", "n": 6000 }, "immediately": true },
        { "do": "get", "task": "$6" },
        { "do": "cancel", "task": "$6" },
        { "do": "cancel", "task": "$6" },
        { "do": "send", "text": "Tell me more", "stream": true },
        { "do": "send", "skill": "nap", "data": { "mode": "sleep", "n": 1500 }, "immediately": true },
        { "do": "subscribe", "task": "$11" },
        { "do": "send", "skill": "offstage" },
        { "do": "list" },
        { "do": "send", "skill": "nap", "data": { "mode": "sleep", "n": 1500 }, "immediately": true },
        { "do": "push", "task": "$15", "url": hook, "token": token },
        { "do": "verify" },
    ])
}

fn check(client: &str, server: &TestServer, agent_id: &str, out: &Value) {
    let steps = out["steps"].as_array().unwrap_or_else(|| panic!("{client}: {out}"));
    let card = &steps[0]["card"];
    assert_eq!(card["name"], "Courier", "{client}: {card}");
    assert_eq!(card["description"], "Brief and exact.", "{client}");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        server.url(&format!("/a2a/{agent_id}")),
        "{client}: {card}"
    );
    assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0", "{client}");
    assert_eq!(card["capabilities"]["streaming"], true, "{client}");
    let skills: Vec<&str> = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        skills,
        ["chat", "hello", "nap"],
        "{client}: only the a2a commands, and the chat"
    );
    assert_eq!(card["skills"][1]["examples"][0], "/hello name=<name>", "{client}");

    let chat = &steps[1]["task"];
    assert_eq!(state(chat), "TASK_STATE_COMPLETED", "{client}: {chat}");
    assert_eq!(
        answer(chat),
        "I was given 2 messages; all is well here.",
        "{client}: {chat}"
    );
    let hello = &steps[2]["task"];
    assert_eq!(
        (state(hello), answer(hello)),
        ("TASK_STATE_COMPLETED", "Hello, Ada!"),
        "{client}"
    );
    assert_eq!(
        answer(&steps[3]["task"]),
        "Hello, Bob!",
        "{client}: typed as in a chat app"
    );
    // Input the skill refuses: the task is rejected, and says why.
    let refused = &steps[4]["task"];
    assert_eq!(state(refused), "TASK_STATE_REJECTED", "{client}: {refused}");
    let why = refused["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("name"), "{client}: {refused}");
    // A long skill, waited for.
    let napped = &steps[5]["task"];
    assert_eq!(
        (state(napped), answer(napped)),
        ("TASK_STATE_COMPLETED", "slept 1200 ms"),
        "{client}: {napped}"
    );
    // A long skill not waited for: working, read, cancelled (once: the second is refused).
    assert_eq!(state(&steps[6]["task"]), "TASK_STATE_WORKING", "{client}: {}", steps[6]);
    assert_eq!(state(&steps[7]["task"]), "TASK_STATE_WORKING", "{client}: {}", steps[7]);
    assert_eq!(
        state(&steps[8]["task"]),
        "TASK_STATE_CANCELED",
        "{client}: {}",
        steps[8]
    );
    assert!(steps[9]["error"].is_string(), "{client}: cancelled twice: {}", steps[9]);
    assert!(
        steps[9]["message"].as_str().unwrap().contains("cannot be canceled"),
        "{client}: {}",
        steps[9]
    );
    // The chat streamed: the task first, then the answer in pieces, then its end.
    let events = steps[10]["events"].as_array().unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"task"), "{client}: {kinds:?}");
    assert_eq!(kinds.last(), Some(&"statusUpdate"), "{client}: {kinds:?}");
    let pieces: Vec<&Value> = events.iter().filter(|e| e["kind"] == "artifactUpdate").collect();
    assert!(pieces.len() > 1, "{client}: the answer came in pieces: {kinds:?}");
    let streamed: String = pieces
        .iter()
        .map(|e| {
            e["event"]["artifactUpdate"]["artifact"]["parts"][0]["text"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(streamed, "I was given 2 messages; all is well here.", "{client}");
    assert_eq!(
        events.last().unwrap()["event"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED",
        "{client}"
    );
    // Subscribed to a working task: followed to its end, with its answer.
    let followed = steps[12]["events"].as_array().unwrap();
    let last = followed.last().unwrap();
    assert_eq!(
        last["event"]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{client}: {followed:?}"
    );
    assert!(
        followed
            .iter()
            .any(|e| e["event"]["artifactUpdate"]["artifact"]["parts"][0]["text"] == "slept 1500 ms"),
        "{client}: {followed:?}"
    );
    // A command not offered on A2A is no skill here.
    assert!(steps[13]["error"].is_string(), "{client}: {}", steps[13]);
    // The owner's tasks: every message above became one (the call of `offstage`, refused
    // before any work, did not).
    let listed = &steps[14]["list"];
    assert_eq!(listed["totalSize"], 8, "{client}: {}", steps[14]);
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 8, "{client}");
    // A push config on a working task, read back in the list.
    let push = &steps[16];
    assert!(push["config"]["id"].is_string(), "{client}: {push}");
    assert_eq!(
        push["configs"]["configs"][0]["id"], push["config"]["id"],
        "{client}: {push}"
    );
}

/// The push of the task `step` 15 made: its last state, whole, with the client's token.
async fn check_push(client: &str, receiver: &Receiver, token: &str, out: &Value) {
    let task_id = out["steps"][15]["task"]["id"].as_str().unwrap().to_string();
    let received = receiver.until("the push of the nap's end", |r| !r.is_empty()).await;
    let push = &received[0];
    assert_eq!(push.token, token, "{client}");
    let body: Value = serde_json::from_str(&push.body).unwrap();
    assert_eq!(body["task"]["id"], task_id.as_str(), "{client}: {body}");
    assert_eq!(state(&body["task"]), "TASK_STATE_COMPLETED", "{client}: {body}");
    assert_eq!(answer(&body["task"]), "slept 1500 ms", "{client}: {body}");
    // Signed as the webhooks are, the token the key.
    let expected = agent_host::services::webhooks::sign::signature(
        token.as_bytes(),
        &push.id,
        push.timestamp.parse().unwrap(),
        push.body.as_bytes(),
    );
    assert_eq!(push.signature, expected, "{client}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_python_client_talks_runs_skills_and_follows_tasks() {
    let fx = start("").await;
    let agent_id = fx.agent_id.clone();
    let receiver = Receiver::start().await;
    let steps = steps(&receiver.url(), "python-token");
    let out = python(&json!({ "url": fx.server.url("/a2a/courier"), "key": fx.key, "steps": steps })).await;
    check("python", &fx.server, &agent_id, &out);
    check_push("python", &receiver, "python-token", &out).await;
    // The cancelled task's job was stopped, not run out.
    let cancelled = out["steps"][8]["task"]["id"].as_str().unwrap().to_string();
    let reply = rpc(&fx, Some(&fx.key), "GetTask", json!({ "id": cancelled })).await;
    assert_eq!(reply["result"]["status"]["state"], "TASK_STATE_CANCELED", "{reply}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_javascript_client_talks_runs_skills_and_follows_tasks() {
    let fx = start("").await;
    let agent_id = fx.agent_id.clone();
    let receiver = Receiver::start().await;
    let steps = steps(&receiver.url(), "javascript-token");
    let out = node(&json!({ "url": fx.server.url("/a2a/courier/"), "key": fx.key, "steps": steps })).await;
    check("javascript", &fx.server, &agent_id, &out);
    check_push("javascript", &receiver, "javascript-token", &out).await;
}

async fn rpc(fx: &Fixture, key: Option<&str>, method: &str, params: Value) -> Value {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    post_json(&fx.server.url("/a2a/courier"), key, &body).await.json()
}

fn user_message(text: &str, context: Option<&str>) -> Value {
    let mut message = json!({
        "messageId": uuid_like(),
        "role": "ROLE_USER",
        "parts": [{ "text": text }],
    });
    if let Some(context) = context {
        message["contextId"] = json!(context);
    }
    message
}

fn uuid_like() -> String {
    format!(
        "m-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_context_keeps_the_owners_conversation_and_no_one_elses() {
    let fx = start("[a2a]\nopen = true").await;
    let first = rpc(
        &fx,
        Some(&fx.key),
        "SendMessage",
        json!({ "message": user_message("Hello", None) }),
    )
    .await;
    let context = first["result"]["task"]["contextId"].as_str().unwrap().to_string();
    let second = rpc(
        &fx,
        Some(&fx.key),
        "SendMessage",
        json!({ "message": user_message("And then?", Some(&context)) }),
    )
    .await;
    // The system prompt, the first turn (two messages) and this one.
    assert_eq!(
        answer(&second["result"]["task"]),
        "I was given 4 messages; all is well here.",
        "{second}"
    );
    let seen = fx.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen["messages"][1]["content"], "Hello", "{seen}");
    assert_eq!(seen["messages"][3]["content"], "And then?", "{seen}");
    // A caller without a key naming the owner's context gets none of it, nor its tasks.
    let stranger = rpc(
        &fx,
        None,
        "SendMessage",
        json!({ "message": user_message("What was said?", Some(&context)) }),
    )
    .await;
    assert_eq!(
        answer(&stranger["result"]["task"]),
        "I was given 2 messages; all is well here.",
        "{stranger}"
    );
    let task_id = second["result"]["task"]["id"].as_str().unwrap();
    let theirs = rpc(&fx, None, "GetTask", json!({ "id": task_id })).await;
    assert_eq!(theirs["error"]["code"], -32001, "{theirs}");
    assert_eq!(theirs["error"]["data"][0]["reason"], "TASK_NOT_FOUND", "{theirs}");
    // The stranger's own task is read by its id, but there is no list of strangers' tasks.
    let own = stranger["result"]["task"]["id"].as_str().unwrap();
    let read = rpc(&fx, None, "GetTask", json!({ "id": own, "historyLength": 1 })).await;
    assert_eq!(read["result"]["status"]["state"], "TASK_STATE_COMPLETED", "{read}");
    assert_eq!(read["result"]["history"].as_array().unwrap().len(), 1, "{read}");
    assert_eq!(read["result"]["history"][0]["role"], "ROLE_AGENT", "{read}");
    let list = rpc(&fx, None, "ListTasks", json!({})).await;
    assert_eq!(list["error"]["code"], -32004, "{list}");
    // The owner's list is filtered by context.
    let list = rpc(&fx, Some(&fx.key), "ListTasks", json!({ "contextId": context })).await;
    assert_eq!(list["result"]["totalSize"], 2, "{list}");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_accounts_key_finds_neither_the_agent_nor_its_tasks() {
    let fx = start("").await;
    let bob = fx.env.account_with_key("bob", "pro");
    let mine = rpc(
        &fx,
        Some(&fx.key),
        "SendMessage",
        json!({ "message": user_message("/hello Ann", None) }),
    )
    .await;
    let task_id = mine["result"]["task"]["id"].as_str().unwrap();
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": { "id": task_id } });
    let reply = post_json(&fx.server.url("/a2a/courier"), Some(&bob), &body).await;
    assert_eq!(reply.status, 404, "{}", reply.text);
    assert_eq!(reply.json()["error"]["code"], -32600, "{}", reply.text);
    // Its card is not public: the owner's key reads it, a stranger is told it is not there.
    let card_url = fx.server.url("/a2a/courier/.well-known/agent-card.json");
    assert_eq!(get(&card_url, None).await.status, 404);
    assert_eq!(get(&card_url, Some(&bob)).await.status, 404);
    assert_eq!(get(&card_url, Some(&fx.key)).await.status, 200);
    // Nor does anyone use it without a key: it is not open.
    let keyless = post_json(&fx.server.url("/a2a/courier"), None, &body).await;
    assert_eq!(keyless.status, 401, "{}", keyless.text);
    assert_eq!(keyless.json()["error"]["data"][0]["reason"], "UNAUTHENTICATED");
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_requests_get_a2a_errors_and_the_server_stays_up() {
    let fx = start("").await;
    let url = fx.server.url("/a2a/courier");
    let key = Some(fx.key.as_str());
    let raw = |body: &str| {
        let (url, body) = (url.clone(), body.to_string());
        let key = fx.key.clone();
        async move {
            reqwest::Client::new()
                .post(&url)
                .header("x-api-key", key)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap()
        }
    };
    let not_json = raw("{ nope").await;
    assert_eq!(not_json.status(), 400);
    let body: Value = not_json.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32700, "{body}");
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let body: Value = raw(&deep).await.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32700, "{body}");
    let body: Value = raw("[]").await.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32600, "{body}");
    let body: Value = raw(r#"{"jsonrpc":"1.0","id":3,"method":"GetTask"}"#)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (body["error"]["code"].clone(), body["id"].clone()),
        (json!(-32600), json!(3)),
        "{body}"
    );

    let unknown = rpc(&fx, key, "message/send", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    assert_eq!(unknown["error"]["data"][0]["domain"], "a2a-protocol.org", "{unknown}");
    let missing = rpc(&fx, key, "SendMessage", json!({})).await;
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    let wrong_type = rpc(&fx, key, "GetTask", json!({ "id": 7 })).await;
    assert_eq!(wrong_type["error"]["code"], -32602, "{wrong_type}");
    let file = json!({ "messageId": "m1", "role": "ROLE_USER", "parts": [{ "url": "https://example.com/a.png" }] });
    let refused = rpc(&fx, key, "SendMessage", json!({ "message": file })).await;
    assert_eq!(refused["error"]["code"], -32005, "{refused}");
    let many = json!({ "messageId": "m2", "role": "ROLE_USER", "parts": vec![json!({ "text": "a" }); 40] });
    let refused = rpc(&fx, key, "SendMessage", json!({ "message": many })).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let long = json!({ "messageId": "m3", "role": "ROLE_USER", "parts": [{ "text": "x".repeat(10_001) }] });
    let refused = rpc(&fx, key, "SendMessage", json!({ "message": long })).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let as_agent = json!({ "messageId": "m4", "role": "ROLE_AGENT", "parts": [{ "text": "hi" }] });
    let refused = rpc(&fx, key, "SendMessage", json!({ "message": as_agent })).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let unknown_skill =
        json!({ "messageId": "m5", "role": "ROLE_USER", "parts": [{ "text": "x" }], "metadata": { "skill": "nope" } });
    let refused = rpc(&fx, key, "SendMessage", json!({ "message": unknown_skill })).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let nowhere = rpc(&fx, key, "GetTask", json!({ "id": "no-such-task" })).await;
    assert_eq!(nowhere["error"]["code"], -32001, "{nowhere}");
    let page = rpc(&fx, key, "ListTasks", json!({ "pageToken": "garbage" })).await;
    assert_eq!(page["error"]["code"], -32602, "{page}");

    // A push config that cannot be kept, sent with a message: refused before the task is
    // recorded (none is left working, never run).
    let before = rpc(&fx, key, "ListTasks", json!({})).await["result"]["totalSize"].clone();
    let bad = json!({ "message": user_message("/hello Kit", None),
        "configuration": { "taskPushNotificationConfig": { "url": "https://example.com/hook", "token": "t".repeat(600) } } });
    let refused = rpc(&fx, key, "SendMessage", bad).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let after = rpc(&fx, key, "ListTasks", json!({})).await["result"]["totalSize"].clone();
    assert_eq!(before, after, "no task was recorded");
    let big = json!({ "messageId": "m6", "role": "ROLE_USER", "parts": [{ "data": { "pad": "x".repeat(40_000) } }], "metadata": { "skill": "hello" } });
    let refused = rpc(&fx, key, "SendMessage", json!({ "message": big })).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let push = rpc(
        &fx,
        key,
        "CreateTaskPushNotificationConfig",
        json!({ "taskId": "nope", "url": "https://example.com/hook" }),
    )
    .await;
    assert_eq!(push["error"]["code"], -32001, "{push}");
    let mine = rpc(
        &fx,
        key,
        "SendMessage",
        json!({ "message": user_message("/hello Kim", None) }),
    )
    .await;
    let task_id = mine["result"]["task"]["id"].as_str().unwrap();
    for url in ["ftp://example.com/hook", "http://169.254.169.254/latest", "not a url"] {
        let push = rpc(
            &fx,
            key,
            "CreateTaskPushNotificationConfig",
            json!({ "taskId": task_id, "url": url }),
        )
        .await;
        assert_eq!(push["error"]["code"], -32602, "{url}: {push}");
    }
    // A version this server does not speak.
    let old = reqwest::Client::new()
        .post(&url)
        .header("x-api-key", &fx.key)
        .header("a2a-version", "0.3")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": { "id": "x" } }))
        .send()
        .await
        .unwrap();
    let body: Value = old.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32009, "{body}");
    // Still up, and still answering.
    let hello = rpc(
        &fx,
        key,
        "SendMessage",
        json!({ "message": user_message("/hello Zed", None) }),
    )
    .await;
    assert_eq!(answer(&hello["result"]["task"]), "Hello, Zed!", "{hello}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_open_listed_agent_gives_away_only_what_is_not_for_sale() {
    // Selling its chat and `nap`; `hello` is not for sale, so open.
    let fx = start(
        "[a2a]\nopen = true\nlisted = true\n\n[x402]\nenabled = true\ndefault_price_usd = 0.01\nnetworks = [\"base\"]",
    )
    .await;
    let agent_id = &fx.agent_id;
    let card = get(&fx.server.url("/a2a/courier/.well-known/agent-card.json"), None).await;
    assert_eq!(card.status, 200, "{}", card.text);
    let card = card.json();
    let skills: Vec<&str> = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(skills, ["hello", "nap"], "{card}");
    assert!(
        card.get("securityRequirements").is_none(),
        "open: used without a key: {card}"
    );
    // Push notifications are the owner's: a stranger's card says none.
    assert_eq!(card["capabilities"]["pushNotifications"], false, "{card}");
    // A personality is the model's instructions: a stranger's card does not show it.
    assert!(!card.to_string().contains("Brief and exact."), "{card}");
    let owners = get(
        &fx.server.url("/a2a/courier/.well-known/agent-card.json"),
        Some(&fx.key),
    )
    .await
    .json();
    assert_eq!(owners["description"], "Brief and exact.", "{owners}");
    let hello = rpc(
        &fx,
        None,
        "SendMessage",
        json!({ "message": user_message("/hello Sam", None) }),
    )
    .await;
    assert_eq!(answer(&hello["result"]["task"]), "Hello, Sam!", "{hello}");
    let chat = rpc(&fx, None, "SendMessage", json!({ "message": user_message("Hi", None) })).await;
    assert_eq!(chat["error"]["code"], -32602, "the chat is for sale: {chat}");
    // Push notifications are the owner's: a stranger holds a task by its id alone.
    let task_id = hello["result"]["task"]["id"].as_str().unwrap();
    let push = json!({ "taskId": task_id, "url": "https://example.com/hook" });
    let refused = rpc(&fx, None, "CreateTaskPushNotificationConfig", push).await;
    assert_eq!(refused["error"]["code"], -32003, "{refused}");
    let inline = json!({ "message": user_message("/hello Pat", None),
        "configuration": { "taskPushNotificationConfig": { "url": "https://example.com/hook" } } });
    let refused = rpc(&fx, None, "SendMessage", inline).await;
    assert_eq!(refused["error"]["code"], -32003, "{refused}");
    // The host's list names it, with its card.
    let listed = get(&fx.server.url("/a2a"), None).await.json();
    assert_eq!(listed["agents"][0]["username"], "courier", "{listed}");
    assert_eq!(
        listed["agents"][0]["card_url"],
        fx.server.url(&format!("/a2a/{agent_id}/.well-known/agent-card.json"))
    );
    // The command list names the A2A card.
    let commands = get(&fx.server.url("/v1/agents/courier/commands"), Some(&fx.key))
        .await
        .json();
    assert_eq!(
        commands["data"]["a2a_card_url"],
        fx.server.url(&format!("/a2a/{agent_id}/.well-known/agent-card.json")),
        "{commands}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stranger_reads_no_upstream_words_and_public_reads_are_limited() {
    // A model that refuses with words of its provider's account.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let llm = fake_openai(
        Arc::new(|_, _| crate::support::fake_llm::refusal(400, "org-secret-123 over quota")),
        seen,
    )
    .await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model")
        .with_env("AGENT_HOST_X402_CLIENT_LIMIT_PER_MINUTE", "6");
    env.account_with_key("alice", "pro");
    env.apply_agent(&manifest("[a2a]\nopen = true"), "alice");
    let server = env.serve();
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": { "message": user_message("Hi", None) } });
    let reply = post_json(&server.url("/a2a/courier"), None, &body).await.json();
    let task = &reply["result"]["task"];
    assert_eq!(state(task), "TASK_STATE_FAILED", "{reply}");
    assert!(!reply.to_string().contains("org-secret-123"), "{reply}");
    // Reading cards counts against the client's limit, as the paid routes do.
    let card = server.url("/a2a/courier/.well-known/agent-card.json");
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(get(&card, None).await.status);
    }
    assert!(statuses.contains(&429), "{statuses:?}");
}

/// A2A 0.3 beside 1.0, at the agent's URL with `/v0.3`: an SDK's legacy client and the
/// a2a-lint conformance linter (PyPI) with its live probes, against an agent open to all.
#[tokio::test(flavor = "multi_thread")]
async fn a2a_0_3_clients_and_the_linter_are_answered_at_v0_3() {
    let fx = start("[a2a]\nopen = true").await;
    let base = fx.server.url("/a2a/courier/v0.3");
    let card = get(&format!("{base}/.well-known/agent-card.json"), None).await.json();
    assert_eq!(card["protocolVersion"], "0.3.0", "{card}");
    assert_eq!(
        card["url"],
        fx.server.url(&format!("/a2a/{}/v0.3", fx.agent_id)),
        "{card}"
    );
    assert_eq!(card["securitySchemes"]["apiKey"]["type"], "apiKey", "{card}");
    // The JavaScript SDK's 0.3 client: a message, a skill typed as text, a long skill.
    let out = node(
        &json!({ "url": format!("{base}/"), "key": null, "legacy": true, "steps": [
            { "do": "send", "text": "Hi there" },
            { "do": "send", "text": "/hello Lin" },
            { "do": "send", "skill": "nap", "data": { "mode": "sleep", "n": 300 } },
        ]}),
    )
    .await;
    let steps = out["steps"].as_array().unwrap();
    assert_eq!(state(&steps[0]["task"]), "TASK_STATE_COMPLETED", "{out}");
    assert_eq!(
        answer(&steps[0]["task"]),
        "I was given 2 messages; all is well here.",
        "{out}"
    );
    assert_eq!(answer(&steps[1]["task"]), "Hello, Lin!", "{out}");
    assert_eq!(answer(&steps[2]["task"]), "slept 300 ms", "{out}");
    // The linter: the card's checks and its live message/send and message/stream probes.
    let python = python_path();
    let lint = std::path::Path::new(&python).with_file_name("a2a-lint");
    let output = tokio::process::Command::new(&lint)
        .args([base.as_str(), "--live", "--json"])
        .output()
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", lint.display()));
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("a2a-lint printed {}", String::from_utf8_lossy(&output.stdout)));
    assert_eq!(report["summary"]["errors"], 0, "{report}");
    assert!(report["liveRoundTripMs"].is_number(), "{report}");
    assert!(report["streamEvents"].as_u64().unwrap_or(0) >= 2, "{report}");
    // A 1.0 method name is not a 0.3 one, and the reverse.
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {} });
    let reply = post_json(&base, None, &body).await.json();
    assert_eq!(reply["error"]["code"], -32601, "{reply}");
}

/// A push config's token and credentials are sealed with the master key, and a rotation
/// reseals them with every other secret.
#[tokio::test(flavor = "multi_thread")]
async fn a_push_configs_secrets_survive_a_master_key_rotation() {
    let receiver = Receiver::start().await;
    let Fixture { env, server, key, .. } = start("").await;
    let call = |method: &str, params: Value| {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        let (url, key) = (server.url("/a2a/courier"), key.clone());
        async move { post_json(&url, Some(&key), &body).await.json() }
    };
    let message = json!({ "messageId": "m1", "role": "ROLE_USER", "parts": [{ "data": { "mode": "sleep", "n": 60000 } }], "metadata": { "skill": "nap" } });
    let sent = call(
        "SendMessage",
        json!({ "message": message, "configuration": { "returnImmediately": true } }),
    )
    .await;
    let task_id = sent["result"]["task"]["id"].as_str().unwrap().to_string();
    let config = json!({ "taskId": task_id, "url": receiver.url(), "token": "tok-rotate",
        "authentication": { "scheme": "Bearer", "credentials": "cred-rotate" } });
    let made = call("CreateTaskPushNotificationConfig", config).await;
    let id = made["result"]["id"].as_str().unwrap().to_string();
    drop(server);
    // The deployment's check value and the push config.
    assert_eq!(env.cli_json(&["secrets", "check"])["opened"], 2);
    assert_eq!(env.cli_json(&["secrets", "rotate"])["resealed"], 2);
    let server = env.serve();
    let body = json!({ "jsonrpc": "2.0", "id": 2, "method": "GetTaskPushNotificationConfig", "params": { "taskId": task_id, "id": id } });
    let read = post_json(&server.url("/a2a/courier"), Some(&key), &body).await.json();
    assert_eq!(read["result"]["token"], "tok-rotate", "{read}");
    assert_eq!(read["result"]["authentication"]["credentials"], "cred-rotate", "{read}");
}
