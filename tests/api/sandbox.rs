//! A hostile plugin, contained: each misbehaviour ends in `execution_error` with a clear
//! message, while other requests keep being served.

use std::time::{Duration, Instant};

use axum::routing::get as route_get;
use serde_json::{Value, json};

use crate::support::*;

fn probe_manifest(allowed_hosts: &[String]) -> String {
    format!(
        r#"
username = "probe"
name = "Probe"

[[commands]]
command = "probe"
handler_type = "custom"
plugin = "{}"
allowed_hosts = {}
timeout_ms = 1500
"#,
        plugin_path("probe"),
        serde_json::to_string(allowed_hosts).unwrap()
    )
}

async fn probe(server: &TestServer, key: &str, params: Value) -> Reply {
    post_json(
        &server.url("/v1/agents/probe/commands/probe/execute"),
        Some(key),
        &json!({ "parameters": params }),
    )
    .await
}

fn assert_contained(reply: &Reply, expected: &str) {
    assert_eq!(reply.status, 500, "{}", reply.text);
    assert_eq!(reply.error_code(), "execution_error");
    assert!(
        reply.error_message().contains(expected),
        "{:?} should contain {expected:?}",
        reply.error_message()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn runaway_plugins_are_stopped_and_the_host_keeps_serving() {
    let env = TestEnv::new().with_env("AGENT_HOST_PLUGIN_MEMORY_MIB", "64");
    let key = env.account_with_key("alice", "pro");
    env.apply_agent(&probe_manifest(&[]), "alice");
    let server = env.serve();

    // While an infinite loop burns its budget, other calls are answered promptly.
    let looping = {
        let (url, key) = (server.url("/v1/agents/probe/commands/probe/execute"), key.clone());
        tokio::spawn(async move { post_json(&url, Some(&key), &json!({"parameters": {"mode": "loop"}})).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    for _ in 0..5 {
        let started = Instant::now();
        let echo = probe(&server, &key, json!({"mode": "echo", "url": "hi"})).await;
        assert_eq!(echo.status, 200, "{}", echo.text);
        assert!(
            started.elapsed() < Duration::from_millis(1000),
            "served beside the loop"
        );
    }
    let started = Instant::now();
    let looped = looping.await.unwrap();
    assert_contained(&looped, "timed out after 1500 ms");
    assert!(started.elapsed() < Duration::from_secs(3));

    assert_contained(
        &probe(&server, &key, json!({"mode": "memory"})).await,
        "exceeded the memory limit of 64 MiB",
    );
    assert_contained(
        &probe(&server, &key, json!({"mode": "recursion"})).await,
        "recursion too deep",
    );
    assert_contained(
        &probe(&server, &key, json!({"mode": "huge_output", "n": 2_000_000})).await,
        "larger than the limit of 1048576 bytes",
    );
    assert_contained(
        &probe(&server, &key, json!({"mode": "panic"})).await,
        "the plugin panicked",
    );
    assert!(get(&server.url("/health"), None).await.json()["status"] == "ok");
    let echo = probe(&server, &key, json!({"mode": "echo", "url": "still here"})).await;
    assert_eq!(echo.json()["data"]["result"]["response"], "probe ok: still here");
}

#[tokio::test]
async fn plugins_see_no_files_and_no_environment() {
    let env = TestEnv::new().with_env("SECRET_TOKEN", "s3cret");
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&probe_manifest(&[]), "alice");
    let server = env.serve();
    let read = probe(&server, &key, json!({"mode": "read_file"})).await;
    assert_contained(&read, "read_file:");
    assert!(!read.text.contains("root:"));
    let vars = probe(&server, &key, json!({"mode": "env"})).await;
    assert_eq!(vars.json()["data"]["result"]["response"], "env: 0 variables []");
}

#[tokio::test(flavor = "multi_thread")]
async fn outbound_http_reaches_only_granted_public_hosts() {
    let inside = FakeServer::start(axum::Router::new().route("/secret", route_get(|| async { "internal data" }))).await;
    let redirect_to = inside.url("/secret");
    let redirector = FakeServer::start(
        axum::Router::new()
            .route("/ok", route_get(|| async { "granted and allowed" }))
            .route(
                "/hop",
                route_get(move || {
                    let to = redirect_to.clone();
                    async move { axum::response::Redirect::temporary(&to) }
                }),
            )
            .route(
                "/meta",
                route_get(|| async { axum::response::Redirect::temporary("http://169.254.169.254/latest/meta-data/") }),
            ),
    )
    .await;
    let granted = vec![
        format!("127.0.0.1:{}", redirector.port),
        format!("127.0.0.1:{}", inside.port),
        "169.254.169.254".to_string(),
        "example.com".to_string(),
    ];
    // The operator allows the redirector (only) on loopback, as for an internal API.
    let env = TestEnv::new().with_env(
        "AGENT_HOST_OUTBOUND_ALLOW_PRIVATE",
        &format!("127.0.0.1:{}", redirector.port),
    );
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&probe_manifest(&granted), "alice");
    let server = env.serve();

    let ok = probe(&server, &key, json!({"mode": "http", "url": redirector.url("/ok")})).await;
    assert_eq!(
        ok.json()["data"]["result"]["response"],
        "status 200: granted and allowed",
        "{}",
        ok.text
    );
    let cases = [
        (
            "https://not-granted.example.org/".to_string(),
            "not among the hosts granted",
        ),
        (inside.url("/secret"), "private, loopback"),
        (
            "http://169.254.169.254/latest/meta-data/".to_string(),
            "private, loopback or link-local",
        ),
        (redirector.url("/hop"), "private, loopback"),
        (redirector.url("/meta"), "link-local"),
        ("file:///etc/passwd".to_string(), "scheme 'file'"),
    ];
    for (url, expected) in cases {
        let reply = probe(&server, &key, json!({"mode": "http", "url": url})).await;
        assert_contained(&reply, expected);
        assert!(!reply.text.contains("internal data"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_without_allowed_hosts_has_no_network() {
    let target = FakeServer::start(axum::Router::new().route("/", route_get(|| async { "hi" }))).await;
    let env = TestEnv::new().with_env(
        "AGENT_HOST_OUTBOUND_ALLOW_PRIVATE",
        &format!("127.0.0.1:{}", target.port),
    );
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&probe_manifest(&[]), "alice");
    let server = env.serve();
    let reply = probe(&server, &key, json!({"mode": "http", "url": target.url("/")})).await;
    assert_contained(&reply, "no allowed_hosts");
}
