//! Every handler type as a real WASM component, through `POST .../execute`.

use std::sync::{Arc, Mutex};

use axum::routing::{get as route_get, post};
use serde_json::{Value, json};

use crate::support::api::*;
use crate::support::fake_llm::{fake_openai, refusal, text};
use crate::support::*;

/// Runs a command and returns the reply.
async fn run(server: &TestServer, key: &str, agent: &str, command: &str, body: Value) -> Reply {
    execute(server, key, agent, command, &body).await
}

const TEXTS: &str = r#"
username = "texts"
name = "Texter"
personality = "Plain."

[[commands]]
command = "greet"
handler_type = "simple_text"
response_format = "markdown"
parameters = [
    { name = "name", type = "string", required = true },
    { name = "title", type = "string" },
    { name = "times", type = "number" },
]
config = { text = "Hello, {{title}} {{name}} x{{times}}!" }

[[commands]]
command = "off"
handler_type = "simple_text"
enabled = false
config = { text = "still runs" }

[[commands]]
command = "help"
description = "Lists the commands"
handler_type = "built_in"

[[commands]]
command = "about"
handler_type = "built_in"

[[commands]]
command = "start"
handler_type = "built_in"
"#;

#[tokio::test]
async fn simple_text_fills_placeholders_without_injection() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "free");
    env.apply_agent(TEXTS, "alice");
    let server = env.serve();

    let reply = run(
        &server,
        &key,
        "texts",
        "greet",
        json!({"parameters": {"name": "Ann", "title": "Dr", "times": 3}}),
    )
    .await;
    assert_eq!(answered(&reply), "Hello, Dr Ann x3!");
    assert_eq!(reply.json()["data"]["result"]["format"], "markdown");
    assert_eq!(reply.json()["data"]["command"], "greet");

    let missing_optional = run(&server, &key, "texts", "greet", json!({"parameters": {"name": "Ann"}})).await;
    assert_eq!(answered(&missing_optional), "Hello,  Ann x!");

    let injection = run(
        &server,
        &key,
        "texts",
        "greet",
        json!({"parameters": {"name": "{{title}}", "title": "X"}}),
    )
    .await;
    assert_eq!(
        answered(&injection),
        "Hello, X {{title}} x!",
        "a value is never rendered again"
    );

    let raw = run(
        &server,
        &key,
        "texts",
        "greet",
        json!({"rawText": "/greet title=Prof 'Ann Lee'"}),
    )
    .await;
    assert_eq!(answered(&raw), "Hello, Prof Ann Lee x!");
    let both = run(
        &server,
        &key,
        "texts",
        "greet",
        json!({"rawText": "/greet Raw", "parameters": {"name": "Explicit"}}),
    )
    .await;
    assert_eq!(answered(&both), "Hello,  Explicit x!", "parameters win over rawText");

    let disabled = run(&server, &key, "texts", "off", json!({})).await;
    assert_eq!(answered(&disabled), "still runs", "execute ignores enabled status");
}

#[tokio::test]
async fn parameters_are_validated_before_any_plugin_runs() {
    let env = TestEnv::new().with_own_component_cache();
    let key = env.account_with_key("alice", "free");
    env.apply_agent(TEXTS, "alice");
    let server = env.serve();
    let cases = [
        (json!({}), "missing required parameter 'name'"),
        (
            json!({"parameters": {"name": 7}}),
            "parameter 'name' must be of type string, got number",
        ),
        (
            json!({"parameters": {"name": "a", "times": "many"}}),
            "parameter 'times' must be of type number",
        ),
        (
            json!({"parameters": {"name": "a", "nmae": "b"}}),
            "unknown parameter 'nmae'",
        ),
        (
            json!({"rawText": "/greet times=lots Ann"}),
            "parameter 'times' must be a number",
        ),
        (json!({"rawText": "/other Ann"}), "rawText starts with /other"),
        (json!({"rawText": "/greet \"Ann"}), "unterminated"),
    ];
    for (body, expected) in cases {
        let reply = run(&server, &key, "texts", "greet", body.clone()).await;
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
        assert_eq!(reply.error_code(), "validation_error");
        assert!(
            reply.error_message().contains(expected),
            "{body}: {} should contain {expected}",
            reply.error_message()
        );
    }
    let unknown = run(&server, &key, "texts", "nope", json!({})).await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.error_code(), "not_found");
    assert!(unknown.error_message().contains("nope"));
    let health = get(&server.url("/health"), None).await.json();
    assert_eq!(
        health["plugins"]["compiled"], 0,
        "nothing was loaded for invalid requests"
    );
}

#[tokio::test]
async fn built_in_commands_read_the_agent_through_their_capability() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "free");
    env.apply_agent(TEXTS, "alice");
    let server = env.serve();
    let help = answered(&run(&server, &key, "texts", "help", json!({})).await);
    assert!(help.contains("/greet <name> [title] [times]"), "{help}");
    assert!(help.contains("/help — Lists the commands"), "{help}");
    assert!(!help.contains("/off"), "disabled commands are not listed: {help}");
    let about = answered(&run(&server, &key, "texts", "about", json!({})).await);
    assert!(about.starts_with("Texter (@texts)\nPlain."), "{about}");
    let start = answered(&run(&server, &key, "texts", "start", json!({})).await);
    assert!(start.contains("I'm Texter"), "{start}");
}

const PROMPTS: &str = r#"
username = "poet"
name = "Poet"

[[commands]]
command = "haiku"
handler_type = "prompt"
parameters = [{ name = "topic", type = "string", required = true }]
config = { template = "Write a haiku about {{topic}}.", system = "You are a poet." }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn prompt_completes_the_template_through_the_llm_provider() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let llm = fake_openai(Arc::new(|_, _| text("  Autumn moon rises  ")), seen.clone()).await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "test-model")
        .with_env("AGENT_HOST_LLM_API_KEY", "sk-test");
    let key = env.account_with_key("alice", "free");
    env.apply_agent(PROMPTS, "alice");
    let server = env.serve();
    let reply = run(&server, &key, "poet", "haiku", json!({"parameters": {"topic": "rain"}})).await;
    assert_eq!(answered(&reply), "Autumn moon rises");
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["model"], "test-model");
    assert_eq!(
        requests[0]["messages"],
        json!([
            { "role": "system", "content": "You are a poet." },
            { "role": "user", "content": "Write a haiku about rain." },
        ])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn prompt_reports_provider_failures_as_execution_errors() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let llm = fake_openai(Arc::new(|_, _| refusal(503, "The model is overloaded")), seen).await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "test-model");
    let key = env.account_with_key("alice", "free");
    env.apply_agent(PROMPTS, "alice");
    let server = env.serve();
    let reply = run(&server, &key, "poet", "haiku", json!({"parameters": {"topic": "rain"}})).await;
    assert_eq!(reply.status, 500);
    assert_eq!(reply.error_code(), "execution_error");
    // The provider's own words (they can carry the operator's account
    // details) reach neither the plugin nor the caller; the owner's log of the run has them.
    assert!(
        reply.error_message().contains("refused the request (HTTP 503)")
            && !reply.error_message().contains("The model is overloaded"),
        "{}",
        reply.error_message()
    );
    let logs = get(&server.url("/v1/account/agents/poet/logs"), Some(&key)).await;
    assert!(logs.text.contains("The model is overloaded"), "{}", logs.text);

    let unconfigured = TestEnv::new();
    let key = unconfigured.account_with_key("alice", "free");
    unconfigured.apply_agent(PROMPTS, "alice");
    let server = unconfigured.serve();
    let reply = run(&server, &key, "poet", "haiku", json!({"parameters": {"topic": "rain"}})).await;
    assert_eq!(reply.status, 500);
    assert!(
        reply.error_message().contains("no LLM provider is configured"),
        "{}",
        reply.error_message()
    );
}

fn webhook_manifest(base: &str) -> String {
    format!(
        r#"
username = "hooks"
name = "Hooks"

[[commands]]
command = "lookup"
handler_type = "webhook"
parameters = [{{ name = "q", type = "string", required = true }}]
config = {{ url = "{base}/hook", headers = {{ "X-Token" = "t0k" }}, response_field = "data.answer" }}

[[commands]]
command = "plain"
handler_type = "webhook"
config = {{ url = "{base}/plain" }}

[[commands]]
command = "render"
handler_type = "webhook"
response_format = "image"
parameters = [{{ name = "prompt", type = "string", required = true }}]
config = {{ url = "{base}/render", poll_timeout_secs = 20 }}
timeout_ms = 20000

[[commands]]
command = "broken"
handler_type = "webhook"
config = {{ url = "{base}/broken" }}

[[commands]]
command = "doomed"
handler_type = "webhook"
config = {{ url = "{base}/doomed" }}
timeout_ms = 20000
"#
    )
}

async fn webhook_target(seen: Arc<Mutex<Vec<(String, Value)>>>) -> FakeServer {
    let polls = Arc::new(Mutex::new(0u32));
    let seen_hook = seen.clone();
    let router = axum::Router::new()
        .route(
            "/hook",
            post(move |headers: axum::http::HeaderMap, axum::Json(body): axum::Json<Value>| {
                let seen = seen_hook.clone();
                async move {
                    let token = headers.get("x-token").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
                    seen.lock().unwrap().push((token, body.clone()));
                    axum::Json(json!({ "data": { "answer": format!("found {}", body["q"].as_str().unwrap_or("?")) } }))
                }
            }),
        )
        .route("/plain", post(|| async { "plain text answer" }))
        .route("/broken", post(|| async { (axum::http::StatusCode::BAD_GATEWAY, "upstream exploded") }))
        .route(
            "/render",
            post(|headers: axum::http::HeaderMap| async move {
                let host = headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or_default().to_string();
                (
                    axum::http::StatusCode::ACCEPTED,
                    axum::Json(json!({ "success": true, "jobId": "j1", "statusUrl": format!("http://{host}/status/j1"),
                                        "retryAfterSeconds": 0.2, "message": "rendering" })),
                )
            }),
        )
        .route(
            "/status/j1",
            route_get(move || {
                let polls = polls.clone();
                async move {
                    let mut n = polls.lock().unwrap();
                    *n += 1;
                    if *n < 3 {
                        axum::Json(json!({ "state": "processing", "progress": *n * 30, "retryAfterSeconds": 0.2 }))
                    } else {
                        axum::Json(json!({ "state": "succeeded", "response": "a red fox", "artifactUrl": "https://cdn.example.com/fox.png" }))
                    }
                }
            }),
        )
        .route(
            "/doomed",
            post(|headers: axum::http::HeaderMap| async move {
                let host = headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or_default().to_string();
                (axum::http::StatusCode::ACCEPTED, axum::Json(json!({ "statusUrl": format!("http://{host}/status/bad"), "retryAfterSeconds": 0.1 })))
            }),
        )
        .route(
            "/status/bad",
            route_get(|| async { axum::Json(json!({ "state": "failed", "error": "GPU on fire", "code": "generation_failed" })) }),
        );
    FakeServer::start(router).await
}

#[tokio::test(flavor = "multi_thread")]
async fn webhooks_call_out_map_replies_and_poll_to_a_final_state() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let target = webhook_target(seen.clone()).await;
    // The target is on loopback, which is refused unless the operator lists it.
    let env = TestEnv::new().with_env(
        "AGENT_HOST_OUTBOUND_ALLOW_PRIVATE",
        &format!("127.0.0.1:{}", target.port),
    );
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&webhook_manifest(&target.base), "alice");
    let server = env.serve();

    let reply = run(&server, &key, "hooks", "lookup", json!({"parameters": {"q": "otters"}})).await;
    assert_eq!(answered(&reply), "found otters");
    let calls = seen.lock().unwrap().clone();
    assert_eq!(
        calls,
        vec![("t0k".to_string(), json!({"q": "otters"}))],
        "headers and JSON body as configured"
    );

    assert_eq!(
        answered(&run(&server, &key, "hooks", "plain", json!({})).await),
        "plain text answer"
    );

    let rendered = run(
        &server,
        &key,
        "hooks",
        "render",
        json!({"parameters": {"prompt": "fox"}}),
    )
    .await;
    assert_eq!(answered(&rendered), "a red fox");
    let result = &rendered.json()["data"]["result"];
    assert_eq!(result["format"], "image");
    assert_eq!(result["mediaUrl"], "https://cdn.example.com/fox.png");

    let broken = run(&server, &key, "hooks", "broken", json!({})).await;
    assert_eq!(broken.status, 500);
    assert_eq!(broken.error_code(), "execution_error");
    assert!(broken.error_message().contains("HTTP 502") && broken.error_message().contains("upstream exploded"));

    let doomed = run(&server, &key, "hooks", "doomed", json!({})).await;
    assert_eq!(doomed.status, 500);
    assert!(
        doomed.error_message().contains("GPU on fire"),
        "{}",
        doomed.error_message()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_webhook_on_a_private_address_is_refused_by_default() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let target = webhook_target(seen.clone()).await;
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&webhook_manifest(&target.base), "alice");
    let server = env.serve();
    let reply = run(&server, &key, "hooks", "plain", json!({})).await;
    assert_eq!(reply.status, 500);
    assert!(
        reply.error_message().contains("private, loopback"),
        "{}",
        reply.error_message()
    );
    assert!(seen.lock().unwrap().is_empty());
}

fn notes_manifest(username: &str) -> String {
    format!(
        r#"
username = "{username}"
name = "Notebook"

[[commands]]
command = "notes"
handler_type = "custom"
plugin = "{}"
"#,
        plugin_path("notes")
    )
}

#[tokio::test]
async fn a_custom_plugin_runs_with_its_own_key_value_store() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "free");
    let file = env.path("notes.toml");
    std::fs::write(&file, notes_manifest("nb1")).unwrap();
    let applied = env.cli_json(&["agent", "apply", file.to_str().unwrap(), "--account", "alice"]);
    assert_eq!(applied["created"], true);
    env.apply_agent(&notes_manifest("nb2"), "alice");
    let server = env.serve();

    // The plugin's own manifest supplied the parameters the agent manifest left out.
    let listed = get(&server.url("/v1/agents/nb1/commands"), Some(&key)).await.json();
    let params = &listed["data"]["commands"][0]["parameters"];
    assert_eq!(params[0]["name"], "action");
    assert_eq!(
        listed["data"]["commands"][0]["description"],
        "Keeps short notes: add, list, clear"
    );

    assert_eq!(
        answered(&run(&server, &key, "nb1", "notes", json!({"rawText": "/notes add Buy milk"})).await),
        "Noted (1 in all)."
    );
    assert_eq!(
        answered(
            &run(
                &server,
                &key,
                "nb1",
                "notes",
                json!({"parameters": {"action": "add", "text": "Call Bo"}})
            )
            .await
        ),
        "Noted (2 in all)."
    );
    assert_eq!(
        answered(&run(&server, &key, "nb1", "notes", json!({"rawText": "/notes list"})).await),
        "1. Buy milk\n2. Call Bo"
    );
    assert_eq!(
        answered(&run(&server, &key, "nb2", "notes", json!({"rawText": "/notes list"})).await),
        "No notes yet.",
        "each agent has its own store"
    );
    let invalid = run(&server, &key, "nb1", "notes", json!({"rawText": "/notes juggle"})).await;
    assert_eq!(invalid.status, 400, "the plugin's invalid-input is the caller's error");
    assert!(invalid.error_message().contains("unknown action 'juggle'"));

    // Stored once, content-addressed, in the database: no second copy in the data dir.
    let hash = agent_host::plugins::content_hash(&std::fs::read(plugin_path("notes")).unwrap());
    assert_eq!(
        env.sql(&format!(
            "SELECT COUNT(*) FROM plugins WHERE hash = '{hash}' AND component IS NOT NULL"
        ))[0][0]
            .as_deref(),
        Some("1")
    );
    assert!(!env.path("plugins").exists());
}

#[test]
fn applying_a_manifest_checks_its_plugin() {
    let env = TestEnv::new();
    env.create_account("alice", "free");
    let check = |bytes: &[u8], expected: &str| {
        let wasm = env.path(&format!("bad-{}.wasm", unique()));
        std::fs::write(&wasm, bytes).unwrap();
        let manifest = format!(
            "username = \"bad\"\nname = \"Bad\"\n[[commands]]\ncommand = \"x\"\nhandler_type = \"custom\"\nplugin = \"{}\"\n",
            wasm.display()
        );
        let file = env.path(&format!("bad-{}.toml", unique()));
        std::fs::write(&file, manifest).unwrap();
        let out = env.cli(&["agent", "apply", file.to_str().unwrap(), "--account", "alice"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stderr.contains(expected), "expected {expected:?} in {}", out.stderr);
    };
    check(b"not wasm at all", "not a WebAssembly component");
    check(b"\0asm\x01\0\0\0", "core WebAssembly module, not a component");
    assert_eq!(env.cli_json(&["agent", "list"])["agents"], json!([]));
}

#[test]
fn plugin_inspect_prints_the_manifest() {
    let env = TestEnv::new();
    let out = env.cli_json(&["plugin", "inspect", &plugin_path("notes")]);
    assert_eq!(out["manifest"]["name"], "notes");
    assert_eq!(out["manifest"]["capabilities"], json!(["kv"]));
    assert_eq!(out["witVersion"], "0.4.0", "the SDK targets the newest world");
    assert_eq!(
        out["manifest"]["parameters"][0],
        json!({"name": "action", "type": "string", "required": true, "description": "add, list or clear"})
    );
    assert!(
        out["imports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i.as_str().unwrap().starts_with("agent:plugin/kv@0.4.0"))
    );
    // The world offers wasi:http; a plugin that does not use it does not import it.
    assert!(!out["imports"].to_string().contains("wasi:http"), "{}", out["imports"]);
    let bad = env.cli(&["plugin", "inspect", "/etc/hostname"]);
    assert_eq!(bad.status.code(), Some(1));
}

#[tokio::test]
async fn compiled_components_are_cached_across_restarts() {
    let env = TestEnv::new().with_own_component_cache();
    let key = env.account_with_key("alice", "free");
    env.apply_agent(TEXTS, "alice");
    let server = env.serve();
    answered(&run(&server, &key, "texts", "greet", json!({"parameters": {"name": "a"}})).await);
    let first = get(&server.url("/health"), None).await.json();
    assert_eq!(first["plugins"]["compiled"], 1);
    drop(server);

    let server = env.serve();
    answered(&run(&server, &key, "texts", "greet", json!({"parameters": {"name": "a"}})).await);
    answered(&run(&server, &key, "texts", "help", json!({})).await);
    let second = get(&server.url("/health"), None).await.json();
    assert_eq!(
        second["plugins"]["compiled"], 1,
        "only the new component was compiled: {second}"
    );
    assert_eq!(
        second["plugins"]["loadedFromCache"], 1,
        "the one from before came from the disk cache"
    );
}

#[tokio::test]
async fn a_python_plugin_serves_the_same_contract() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "free");
    let manifest = format!(
        "username = \"pyagent\"\nname = \"Py\"\n[[commands]]\ncommand = \"echo\"\nhandler_type = \"custom\"\nplugin = \"{}\"\n",
        py_echo_path()
    );
    env.apply_agent(&manifest, "alice");
    let server = env.serve();
    let reply = run(
        &server,
        &key,
        "pyagent",
        "echo",
        json!({"rawText": "/echo shout=yes hello there"}),
    )
    .await;
    assert_eq!(answered(&reply), "HELLO THERE (from Python)");
    // Built against the frozen WIT 0.1.0, which the host keeps serving beside the newer.
    assert_eq!(
        env.cli_json(&["plugin", "inspect", &py_echo_path()])["witVersion"],
        "0.1.0"
    );
    let listed = get(&server.url("/v1/agents/pyagent/commands"), Some(&key)).await.json();
    assert_eq!(
        listed["data"]["commands"][0]["description"],
        "Echoes text back (written in Python)"
    );
    let invalid = run(&server, &key, "pyagent", "echo", json!({"parameters": {"text": "  "}})).await;
    assert_eq!(invalid.status, 400);
    assert!(invalid.error_message().contains("non-empty"), "{}", invalid.text);
}

/// `plugin new` writes a crate that builds as is into a component the host accepts.
#[test]
fn a_scaffolded_plugin_builds_and_is_accepted() {
    let env = TestEnv::new();
    let out = env.cli_json(&[
        "plugin",
        "new",
        "hello-world",
        "--dir",
        env.data_dir().to_str().unwrap(),
    ]);
    let dir = std::path::PathBuf::from(out["path"].as_str().unwrap());
    // Reuse the workspace's lock file so the build needs no new resolution.
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock"),
        dir.join("Cargo.lock"),
    )
    .unwrap();
    let target = std::path::Path::new(env!("BUILT_PLUGIN_NOTES"))
        .ancestors()
        .nth(3)
        .unwrap()
        .to_path_buf();
    let build = std::process::Command::new(env!("CARGO"))
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .current_dir(&dir)
        // Share the plugin build's compiled dependencies.
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(build.status.success(), "{}", String::from_utf8_lossy(&build.stderr));
    let wasm = target.join("wasm32-wasip2/release/hello_world.wasm");
    let inspected = env.cli_json(&["plugin", "inspect", wasm.to_str().unwrap()]);
    assert_eq!(inspected["manifest"]["name"], "hello-world");
    assert_eq!(inspected["manifest"]["parameters"][0]["name"], "name");
    // Its own cases pass, run from its folder.
    let tested = env.cli_in(&dir, &["plugin", "test", "--plugin", wasm.to_str().unwrap()]);
    assert!(
        tested.stdout.contains("2 passed, 0 failed"),
        "{}{}",
        tested.stdout,
        tested.stderr
    );
    let again = env.cli(&[
        "plugin",
        "new",
        "hello-world",
        "--dir",
        env.data_dir().to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(1), "an existing folder is not overwritten");
}

/// Components live in the database, content-addressed: a host whose data dir has neither
/// the component nor its compiled artifact (another host applied the agent) runs it from
/// the database, and keeps a copy. A component recorded before the database kept bytes
/// gets them at start, from the data dir's copy.
#[tokio::test]
async fn a_plugin_runs_from_the_database_when_the_data_dir_lacks_it() {
    let env = TestEnv::new().with_own_component_cache();
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&notes_manifest("nb1"), "alice");
    let hash = agent_host::plugins::content_hash(&std::fs::read(plugin_path("notes")).unwrap());
    let copy = env.path(&format!("plugins/{hash}.wasm"));
    let stored = || {
        env.sql(&format!("SELECT component FROM plugins WHERE hash = '{hash}'"))[0][0]
            .as_ref()
            .map(|bytes| hex::decode(bytes).unwrap())
    };
    assert_eq!(
        stored().map(|b| agent_host::plugins::content_hash(&b)),
        Some(hash.clone())
    );

    // No compiled artifact is left on this host's disk (and there never was a copy).
    assert!(!copy.exists());
    for artifact in std::fs::read_dir(env.path("cache")).unwrap() {
        std::fs::remove_file(artifact.unwrap().path()).unwrap();
    }
    let server = env.serve();
    let added = run(&server, &key, "nb1", "notes", json!({"rawText": "/notes add Buy milk"})).await;
    assert_eq!(answered(&added), "Noted (1 in all).");
    assert!(!copy.exists(), "the database's bytes are the one copy");
    let health = get(&server.url("/health"), None).await.json();
    assert_eq!(health["plugins"]["compiled"], 1, "{health}");
    drop(server);

    // Recorded before the database kept bytes, by a version that kept a copy in the data
    // dir: filled in at start from the copy, which then goes.
    env.sql("UPDATE plugins SET component = NULL");
    std::fs::create_dir_all(env.path("plugins")).unwrap();
    std::fs::write(&copy, std::fs::read(plugin_path("notes")).unwrap()).unwrap();
    assert_eq!(stored(), None);
    let server = env.serve();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while stored().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the component was not stored at start"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(stored().map(|b| agent_host::plugins::content_hash(&b)), Some(hash));
    let listed = run(&server, &key, "nb1", "notes", json!({"rawText": "/notes list"})).await;
    assert_eq!(answered(&listed), "1. Buy milk");
    assert!(
        !copy.exists(),
        "the data dir's copy went once the database held the bytes"
    );
}

/// Open-Meteo's forecast endpoint as it answers: the current values with their units, or
/// `{"error": true, "reason"}` with a 400. It refuses the place at longitude 179.5 (as it
/// refuses what it cannot serve), and counts the calls it answers.
async fn fake_open_meteo(calls: Arc<Mutex<Vec<String>>>) -> FakeServer {
    use axum::extract::RawQuery;
    use axum::http::StatusCode;
    let router = axum::Router::new().route(
        "/v1/forecast",
        route_get(move |RawQuery(query): RawQuery| {
            let calls = calls.clone();
            async move {
                let query = query.unwrap_or_default();
                calls.lock().unwrap().push(query.clone());
                let value = |name: &str| {
                    query
                        .split('&')
                        .find_map(|pair| pair.strip_prefix(&format!("{name}=")))
                        .and_then(|v| v.parse::<f64>().ok())
                };
                let (Some(latitude), Some(longitude)) = (value("latitude"), value("longitude")) else {
                    return (StatusCode::BAD_REQUEST, axum::Json(json!({ "error": true, "reason": "Parameter 'latitude' and 'longitude' must have the same number of elements" })));
                };
                if longitude == 179.5 {
                    return (StatusCode::BAD_REQUEST, axum::Json(json!({ "error": true, "reason": "No data is available for this location" })));
                }
                (StatusCode::OK, axum::Json(json!({
                    "latitude": latitude, "longitude": longitude, "generationtime_ms": 0.03,
                    "utc_offset_seconds": 0, "timezone": "GMT", "timezone_abbreviation": "GMT", "elevation": 8.0,
                    "current_units": { "time": "iso8601", "interval": "seconds", "temperature_2m": "°C", "wind_speed_10m": "km/h" },
                    "current": { "time": "2026-11-23T18:00", "interval": 900, "temperature_2m": 14.3, "wind_speed_10m": 11.5 },
                })))
            }
        }),
    );
    FakeServer::start(router).await
}

/// The JavaScript example (plugins/examples/js-weather, componentize-js): it calls an HTTP
/// API through the host's guard, keeps each answer in its key-value store, and its errors
/// come out as the host's.
#[tokio::test(flavor = "multi_thread")]
async fn a_javascript_plugin_calls_an_api_and_keeps_its_answers() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let meteo = fake_open_meteo(calls.clone()).await;
    let env = TestEnv::new().with_env(
        "AGENT_HOST_OUTBOUND_ALLOW_PRIVATE",
        &format!("127.0.0.1:{}", meteo.port),
    );
    let key = env.account_with_key("alice", "free");
    let manifest = format!(
        r#"username = "jsagent"
name = "JS"

[[commands]]
command = "weather"
handler_type = "custom"
plugin = "{plugin}"
allowed_hosts = ["127.0.0.1:{port}"]
config = {{ api_url = "{api}", cache_seconds = 600 }}

[[commands]]
command = "offline"
handler_type = "custom"
plugin = "{plugin}"
config = {{ api_url = "{api}" }}
"#,
        plugin = js_weather_path(),
        port = meteo.port,
        api = meteo.base,
    );
    env.apply_agent(&manifest, "alice");
    let server = env.serve();
    let lisbon = json!({ "parameters": { "latitude": 38.72, "longitude": -9.14 } });

    let first = answered(&run(&server, &key, "jsagent", "weather", lisbon.clone()).await);
    assert_eq!(first, "14.3 °C, wind 11.5 km/h at 38.72, -9.14 (2026-11-23T18:00 GMT)");
    assert_eq!(calls.lock().unwrap().len(), 1);
    assert!(calls.lock().unwrap()[0].contains("latitude=38.72&longitude=-9.14&current=temperature_2m"));
    let again = answered(&run(&server, &key, "jsagent", "weather", lisbon.clone()).await);
    assert_eq!(again, format!("{first} (cached)"));
    assert_eq!(
        calls.lock().unwrap().len(),
        1,
        "the second answer came from the key-value store"
    );
    // The store is the command's: the other command (same component) has its own, and no network.
    let offline = run(&server, &key, "jsagent", "offline", lisbon.clone()).await;
    assert_eq!(offline.status, 500, "{}", offline.text);
    assert!(
        offline
            .error_message()
            .contains("the weather service could not be reached"),
        "{}",
        offline.text
    );
    // `fetch()` went out through wasi:http; why the guard refused is in the run's log.
    let log = get(
        &server.url("/v1/account/agents/jsagent/logs?command=offline&limit=1"),
        Some(&key),
    )
    .await
    .json();
    let note = log["data"]["runs"][0]["lines"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(note.contains("no allowed_hosts"), "{log}");

    let pole = run(
        &server,
        &key,
        "jsagent",
        "weather",
        json!({ "parameters": { "latitude": 91, "longitude": 0 } }),
    )
    .await;
    assert_eq!((pole.status, pole.error_code()), (400, "validation_error".into()));
    assert!(
        pole.error_message().contains("latitude must be between -90 and 90"),
        "{}",
        pole.text
    );
    let refused = run(
        &server,
        &key,
        "jsagent",
        "weather",
        json!({ "parameters": { "latitude": 10, "longitude": 179.5 } }),
    )
    .await;
    assert_eq!((refused.status, refused.error_code()), (500, "execution_error".into()));
    assert!(
        refused
            .error_message()
            .contains("the weather service refused (400): No data is available for this location"),
        "{}",
        refused.text
    );
    let listed = get(&server.url("/v1/agents/jsagent/commands"), Some(&key)).await.json();
    assert_eq!(
        listed["data"]["commands"][0]["description"],
        "The current temperature at a place (written in JavaScript)"
    );
}

/// `plugin new --lang js` and `--lang python` write projects whose own build makes a
/// component the host accepts, and whose own cases pass.
#[test]
fn scaffolded_javascript_and_python_plugins_build_and_pass_their_cases() {
    if on_postgres_pass() {
        return; // no database involved: checked in the SQLite pass
    }
    let env = TestEnv::sqlite();
    let parent = env.data_dir().to_str().unwrap().to_string();
    for (lang, name, build) in [
        ("js", "hello-js", "npm run build"),
        ("python", "hello-py", "./build.sh"),
    ] {
        let made = env.cli_json(&["plugin", "new", name, "--lang", lang, "--dir", &parent]);
        let dir = std::path::PathBuf::from(made["path"].as_str().unwrap());
        let built = std::process::Command::new("sh")
            .args(["-c", build])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            built.status.success(),
            "{lang}: {}",
            String::from_utf8_lossy(&built.stderr)
        );
        let tested = env.cli_in(&dir, &["plugin", "test"]);
        assert!(
            tested.status.success()
                && tested.stdout.contains("ok    greets")
                && tested.stdout.contains("2 passed, 0 failed"),
            "{lang}: {}{}",
            tested.stdout,
            tested.stderr
        );
        let wasm = dir.join(format!("dist/{}.wasm", name.replace('-', "_")));
        let inspected = env.cli_json(&["plugin", "inspect", wasm.to_str().unwrap()]);
        assert_eq!(inspected["manifest"]["name"], name, "{lang}");
    }
    let unknown = env.cli(&["plugin", "new", "x", "--lang", "cobol", "--dir", &parent]);
    assert_eq!(unknown.status.code(), Some(2), "{}", unknown.stderr);
    assert!(
        unknown.stderr.contains("possible values: rust, js, python"),
        "{}",
        unknown.stderr
    );
}

/// A component built against the frozen WIT 0.2.0 (its own bindings, no SDK) runs beside the
/// SDK's 0.4.0 ones, and reaches the host's `llm` interface of its version.
#[tokio::test(flavor = "multi_thread")]
async fn a_component_of_an_older_minor_version_still_runs() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let llm = fake_openai(Arc::new(|_, _| text("hello")), seen.clone()).await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model");
    assert_eq!(
        env.cli_json(&["plugin", "inspect", &plugin_path("frozen_0_2")])["witVersion"],
        "0.2.0"
    );
    let key = env.account_with_key("acme", "free");
    let manifest = format!(
        "username = \"old\"\nname = \"Old\"\n\n[[commands]]\ncommand = \"frozen\"\nhandler_type = \"custom\"\nplugin = \"{}\"\nallow_llm = true\n",
        plugin_path("frozen_0_2")
    );
    env.apply_agent(&manifest, "acme");
    let server = env.serve();
    let reply = run(&server, &key, "old", "frozen", json!({})).await;
    assert_eq!(answered(&reply), "0.2.0 says: hello", "{}", reply.text);
    assert_eq!(seen.lock().unwrap().len(), 1);
}
