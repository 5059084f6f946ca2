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
    let env = TestEnv::new()
        .with_env("AGENT_HOST_PLUGIN_MEMORY_MIB", "64")
        .with_metrics();
    let key = env.account_with_key("alice", "pro");
    env.apply_agent(&probe_manifest(&[]), "alice");
    let server = env.serve();

    // While an infinite loop burns its budget, other calls are answered promptly.
    let looping = {
        let (url, key) = (server.url("/v1/agents/probe/commands/probe/execute"), key.clone());
        tokio::spawn(async move { post_json(&url, Some(&key), &json!({"parameters": {"mode": "loop"}})).await })
    };
    server.until_metric("agent_host_plugin_slots_in_use", 1.0).await;
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

    // The same guard behind both interfaces: the host's `http.fetch` and, for a standard
    // client compiled for WASI (wstd in the probe), `wasi:http` (WIT 0.2.0).
    for mode in ["http", "wasi_http"] {
        let ok = probe(&server, &key, json!({"mode": mode, "url": redirector.url("/ok")})).await;
        assert_eq!(
            ok.json()["data"]["result"]["response"],
            "status 200: granted and allowed",
            "{mode}: {}",
            ok.text
        );
    }
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
    ];
    for (url, expected) in &cases {
        let reply = probe(&server, &key, json!({"mode": "http", "url": url})).await;
        assert_contained(&reply, expected);
        assert!(!reply.text.contains("internal data"));
        // wasi:http has an error code, not a message: the guest sees `HTTP-request-denied`,
        // and the reason goes to the run's log for its author.
        let reply = probe(&server, &key, json!({"mode": "wasi_http", "url": url})).await;
        assert_contained(&reply, "HttpRequestDenied");
        assert!(!reply.text.contains("internal data"));
        let note = newest_log_line(&server, &key).await;
        assert!(
            note.contains(expected) && note.contains("wasi:http request to"),
            "{url}: {note}"
        );
    }
    let file = probe(&server, &key, json!({"mode": "http", "url": "file:///etc/passwd"})).await;
    assert_contained(&file, "scheme 'file'");
    // A URL no HTTP client takes: refused before anything is sent.
    let file = probe(&server, &key, json!({"mode": "wasi_http", "url": "file:///etc/passwd"})).await;
    assert!(file.status >= 400 && !file.text.contains("root:"), "{}", file.text);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_hosts_own_address_and_unlisted_ports_are_refused() {
    // Public addresses, so only the new rules can refuse them; both are refused before
    // any connection is tried (this machine has no route to them anyway).
    let granted = vec!["93.184.216.34".to_string(), "93.184.216.35:8080".to_string()];
    let env = TestEnv::new().with_env("AGENT_HOST_PUBLIC_BASE_URL", "http://93.184.216.34");
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&probe_manifest(&granted), "alice");
    let server = env.serve();
    let cases = [
        (
            "http://93.184.216.34/v1/agents",
            "93.184.216.34 is this server's own address",
        ),
        ("http://93.184.216.35:8080/", "port 8080 is not allowed by this server"),
    ];
    for (url, expected) in cases {
        let reply = probe(&server, &key, json!({"mode": "http", "url": url})).await;
        assert_contained(&reply, expected);
        let reply = probe(&server, &key, json!({"mode": "wasi_http", "url": url})).await;
        assert_contained(&reply, "HttpRequestDenied");
        assert!(newest_log_line(&server, &key).await.contains(expected), "{url}");
    }
}

/// The last line of the probe's newest kept run.
async fn newest_log_line(server: &TestServer, key: &str) -> String {
    let logs = get(&server.url("/v1/account/agents/probe/logs?limit=1"), Some(key)).await;
    let lines = logs.json()["data"]["runs"][0]["lines"].clone();
    let last = lines.as_array().and_then(|l| l.last()).cloned().unwrap_or_default();
    last["message"].as_str().unwrap_or_default().to_string()
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
    let reply = probe(&server, &key, json!({"mode": "wasi_http", "url": target.url("/")})).await;
    assert_contained(&reply, "HttpRequestDenied");
    assert!(newest_log_line(&server, &key).await.contains("no allowed_hosts"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_has_at_most_eight_wasi_http_requests_in_flight() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    // (now, most at once)
    let seen = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let counter = seen.clone();
    let upstream = FakeServer::start(axum::Router::new().route(
        "/slow",
        route_get(move || {
            let seen = counter.clone();
            async move {
                let now = seen.0.fetch_add(1, Ordering::SeqCst) + 1;
                seen.1.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
                seen.0.fetch_sub(1, Ordering::SeqCst);
                "ok"
            }
        }),
    ))
    .await;
    let granted = format!("127.0.0.1:{}", upstream.port);
    let env = TestEnv::new().with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", &granted);
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&probe_manifest(&[granted]), "alice");
    let server = env.serve();
    let burst = probe(
        &server,
        &key,
        json!({"mode": "wasi_http_burst", "url": upstream.url("/slow"), "n": 20}),
    )
    .await;
    assert_eq!(
        burst.json()["data"]["result"]["response"],
        "20 of 20 answered",
        "{}",
        burst.text
    );
    let most = seen.1.load(Ordering::SeqCst);
    assert!((2..=8).contains(&most), "{most} requests were in flight at once");
}

#[tokio::test(flavor = "multi_thread")]
async fn outbound_sizes_and_times_are_capped_through_both_interfaces() {
    let upstream = FakeServer::start(
        axum::Router::new()
            .route("/big", route_get(|| async { "x".repeat(4096) }))
            .route("/small", route_get(|| async { "x".repeat(100) }))
            .route(
                "/slow",
                route_get(|| async {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    "late"
                }),
            ),
    )
    .await;
    let granted = format!("127.0.0.1:{}", upstream.port);
    let env = TestEnv::new()
        .with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", &granted)
        .with_env("AGENT_HOST_OUTBOUND_MAX_RESPONSE_BYTES", "1024")
        .with_env("AGENT_HOST_OUTBOUND_TIMEOUT_MS", "300");
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&probe_manifest(&[granted]), "alice");
    let server = env.serve();

    let small = probe(
        &server,
        &key,
        json!({"mode": "wasi_http", "url": upstream.url("/small")}),
    )
    .await;
    assert_eq!(
        small.json()["data"]["result"]["response"],
        format!("status 200: {}", "x".repeat(100))
    );
    let big = probe(&server, &key, json!({"mode": "http", "url": upstream.url("/big")})).await;
    assert_contained(&big, "larger than 1024 bytes");
    let big = probe(&server, &key, json!({"mode": "wasi_http", "url": upstream.url("/big")})).await;
    assert_contained(&big, "HttpResponseBodySize(Some(1024))");

    let started = Instant::now();
    let slow = probe(&server, &key, json!({"mode": "http", "url": upstream.url("/slow")})).await;
    assert_contained(&slow, "did not answer in time");
    let slow = probe(
        &server,
        &key,
        json!({"mode": "wasi_http", "url": upstream.url("/slow")}),
    )
    .await;
    assert_contained(&slow, "HttpResponseTimeout");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "both gave up at the operator's limit"
    );
}
