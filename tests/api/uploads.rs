//! Uploads cannot take the host's CPU, disk or memory from others. A
//! component is checked before it is compiled, compiles are bounded, a refused upload
//! leaves nothing behind, each component is kept once, within the account's quota, and
//! its owner can delete it; what nobody keeps is collected.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::*;

/// `bytes` with a custom section of `n` bytes appended: the same component under another
/// hash (custom sections may come anywhere in a component).
fn variant(bytes: &[u8], tag: u32, n: usize) -> Vec<u8> {
    fn leb(mut v: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = format!("variant-{tag}");
    let mut payload = Vec::new();
    leb(name.len(), &mut payload);
    payload.extend_from_slice(name.as_bytes());
    payload.extend(std::iter::repeat_n(0u8, n));
    let mut out = bytes.to_vec();
    out.push(0); // custom section
    leb(payload.len(), &mut out);
    out.extend(payload);
    out
}

fn probe_bytes() -> Vec<u8> {
    std::fs::read(plugin_path("probe")).unwrap()
}

async fn upload(server: &TestServer, key: &str, bytes: Vec<u8>) -> Reply {
    post_body(&server.url("/v1/account/plugins"), key, "application/wasm", bytes).await
}

/// Files in the data dir's compiled-component cache of the component `bytes`.
fn cached_artifacts(env: &TestEnv, bytes: &[u8]) -> usize {
    let hash = agent_host::plugins::content_hash(bytes);
    std::fs::read_dir(env.path("cache"))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&hash))
                .count()
        })
        .unwrap_or_default()
}

fn recorded_components(env: &TestEnv) -> usize {
    env.sql("SELECT COUNT(*) FROM plugins")[0][0]
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_upload_leaves_nothing_and_is_refused_before_compiling() {
    // A small budget: the greedy component's manifest() is stopped soon.
    let env = TestEnv::new()
        .with_own_component_cache()
        .with_env("AGENT_HOST_PLUGIN_MEMORY_MIB", "16");
    let key = env.account_with_key("alice", "free");
    let server = env.serve();

    // Not a component, a core module, and a component of another world: refused from their
    // bytes alone, before any compile (the compile counter does not move).
    let core = wat::parse_str("(module)").unwrap();
    let foreign = wat::parse_str("(component (core module (memory 1)))").unwrap();
    for (bytes, expected) in [
        (b"not wasm at all".to_vec(), "not a WebAssembly component"),
        (core, "core WebAssembly module"),
        (foreign, "does not export agent:plugin/command"),
    ] {
        let reply = upload(&server, &key, bytes).await;
        assert_eq!(reply.status, 400, "{}", reply.text);
        assert!(reply.error_message().contains(expected), "{}", reply.text);
    }
    let health = get(&server.url("/health"), None).await.json();
    let compiled_before = health["plugins"]["compiled"].as_u64().unwrap();

    // A component whose manifest() fails (it hoards memory) is compiled and asked, then
    // refused: no record, no artifact.
    let greedy_bytes = std::fs::read(plugin_path("greedy")).unwrap();
    let greedy = upload(&server, &key, greedy_bytes.clone()).await;
    assert_eq!(greedy.status, 400, "{}", greedy.text);
    let health = get(&server.url("/health"), None).await.json();
    assert_eq!(health["plugins"]["compiled"].as_u64().unwrap(), compiled_before + 1);
    assert_eq!(recorded_components(&env), 0, "nothing recorded for a refused upload");
    assert_eq!(
        cached_artifacts(&env, &greedy_bytes),
        0,
        "no artifact written for a refused upload"
    );

    // An accepted one is kept once: one record with its bytes, one artifact.
    let accepted = upload(&server, &key, probe_bytes()).await;
    assert_eq!(accepted.status, 201, "{}", accepted.text);
    assert_eq!(recorded_components(&env), 1);
    assert_eq!(cached_artifacts(&env, &probe_bytes()), 1);
    assert!(!env.path("plugins").exists(), "no second copy in the data dir");
    // Uploaded again: the first record stands, nothing is compiled again.
    let compiled = get(&server.url("/health"), None).await.json()["plugins"]["compiled"].clone();
    let again = upload(&server, &key, probe_bytes()).await;
    assert_eq!(again.status, 201, "{}", again.text);
    assert_eq!(again.json()["data"], accepted.json()["data"]);
    assert_eq!(
        get(&server.url("/health"), None).await.json()["plugins"]["compiled"],
        compiled
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn compiles_at_once_are_bounded_and_the_rest_told_when_to_retry() {
    let env = TestEnv::new()
        .with_own_component_cache()
        .with_env("AGENT_HOST_PLUGIN_MAX_COMPILES", "1")
        .with_env("AGENT_HOST_ACCOUNT_PLUGIN_UPLOADS_PER_MINUTE", "1000");
    let key = env.account_with_key("alice", "pro");
    let server = env.serve();
    let probe = probe_bytes();
    let mut uploads = tokio::task::JoinSet::new();
    for tag in 0..16 {
        let (url, key, bytes) = (server.url("/v1/account/plugins"), key.clone(), variant(&probe, tag, 16));
        uploads.spawn(async move { post_body(&url, &key, "application/wasm", bytes).await });
    }
    let replies = uploads.join_all().await;
    let accepted = replies.iter().filter(|r| r.status == 201).count();
    let refused: Vec<&Reply> = replies.iter().filter(|r| r.status == 503).collect();
    assert_eq!(
        accepted + refused.len(),
        16,
        "{:?}",
        replies.iter().map(|r| &r.text).collect::<Vec<_>>()
    );
    // One compiling and four waiting behind it; the rest are told to come back.
    assert!(accepted >= 5, "{accepted} accepted");
    assert!(
        !refused.is_empty(),
        "16 at once are more than one compile and its queue"
    );
    for reply in refused {
        assert_eq!(reply.error_code(), "service_unavailable", "{}", reply.text);
        assert!(
            reply
                .header("retry-after")
                .is_some_and(|s| s.parse::<u64>().unwrap() > 0)
        );
    }
    // Coming back later works.
    let later = upload(&server, &key, variant(&probe, 99, 16)).await;
    assert_eq!(later.status, 201, "{}", later.text);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_accounts_components_are_within_its_quota() {
    let probe = probe_bytes();
    let env = TestEnv::new()
        .with_own_component_cache()
        .with_env("AGENT_HOST_ACCOUNT_MAX_PLUGINS", "2")
        .with_env(
            "AGENT_HOST_ACCOUNT_MAX_PLUGIN_BYTES",
            &(2 * probe.len() + 100).to_string(),
        );
    let key = env.account_with_key("alice", "free");
    let other = env.account_with_key("bob", "free");
    let server = env.serve();
    assert_eq!(upload(&server, &key, variant(&probe, 1, 8)).await.status, 201);
    assert_eq!(upload(&server, &key, variant(&probe, 2, 8)).await.status, 201);
    let third = upload(&server, &key, variant(&probe, 3, 8)).await;
    assert_eq!(third.status, 403, "{}", third.text);
    assert_eq!(third.error_code(), "quota_exceeded");
    assert!(third.error_message().contains("account_max_plugins"), "{}", third.text);
    // One it keeps already costs nothing more; another account has its own quota.
    assert_eq!(upload(&server, &key, variant(&probe, 2, 8)).await.status, 201);
    assert_eq!(upload(&server, &other, variant(&probe, 3, 8)).await.status, 201);
    // Bytes count too: one component of twice the size does not fit beside another.
    let big = upload(&server, &other, variant(&probe, 4, probe.len() + 200)).await;
    assert_eq!(big.status, 403, "{}", big.text);
    assert!(big.error_message().contains("account_max_plugin_bytes"), "{}", big.text);
    // `agent apply` of a file counts against the same quota.
    let manifest = format!(
        "username = \"over\"\nname = \"Over\"\n[[commands]]\ncommand = \"probe\"\nhandler_type = \"custom\"\nplugin = \"{}\"\n",
        plugin_path("notes")
    );
    let file = env.path("over.toml");
    std::fs::write(&file, manifest).unwrap();
    let applied = env.cli(&["agent", "apply", file.to_str().unwrap(), "--account", "alice"]);
    assert!(!applied.status.success(), "{}", applied.stdout);
    assert!(applied.stderr.contains("account_max_plugins"), "{}", applied.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unused_component_is_deleted_by_its_owner_then_collected() {
    let env = TestEnv::new()
        .with_own_component_cache()
        .with_env("AGENT_HOST_PLUGIN_COLLECT_AFTER_SECS", "1");
    let key = env.account_with_key("alice", "free");
    let other = env.account_with_key("bob", "free");
    let server = env.serve();
    let uploaded = upload(&server, &key, probe_bytes()).await;
    assert_eq!(uploaded.status, 201, "{}", uploaded.text);
    let plugin = uploaded.json()["data"]["plugin"].as_str().unwrap().to_string();
    let applied = post_body(
        &server.url("/v1/account/agents"),
        &key,
        "application/toml",
        format!(
            "username = \"user\"\nname = \"User\"\n[[commands]]\ncommand = \"probe\"\nhandler_type = \"custom\"\nplugin = \"{plugin}\"\n"
        )
        .into_bytes(),
    )
    .await;
    assert_eq!(applied.status, 201, "{}", applied.text);
    let delete = |key: String| {
        let url = server.url(&format!("/v1/account/plugins/{plugin}"));
        async move { keyed(reqwest::Method::DELETE, &url, &key, None).await }
    };

    // In use: refused, naming the agent.
    let refused = delete(key.clone()).await;
    assert_eq!(refused.status, 409, "{}", refused.text);
    assert!(refused.error_message().contains("user"), "{}", refused.text);
    // Another account cannot delete it (it does not have it).
    assert_eq!(delete(other.clone()).await.status, 404);
    let bad = keyed(
        reqwest::Method::DELETE,
        &server.url("/v1/account/plugins/nonsense"),
        &key,
        None,
    )
    .await;
    assert_eq!(bad.status, 400, "{}", bad.text);

    // Once the agent is gone, its owner deletes it, and the collector removes its record,
    // bytes and compiled artifact.
    let gone = keyed(
        reqwest::Method::DELETE,
        &server.url("/v1/account/agents/user"),
        &key,
        None,
    )
    .await;
    assert_eq!(gone.status, 200, "{}", gone.text);
    let deleted = delete(key.clone()).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    let listed = get(&server.url("/v1/account/plugins"), Some(&key)).await.json();
    assert_eq!(listed["data"]["plugins"], json!([]));
    let started = Instant::now();
    assert_eq!(cached_artifacts(&env, &probe_bytes()), 1);
    while recorded_components(&env) > 0 || cached_artifacts(&env, &probe_bytes()) > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "not collected: {} records, {} artifacts",
            recorded_components(&env),
            cached_artifacts(&env, &probe_bytes())
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// An upload's `manifest()` runs on its own account's share of plugin slots: an account
/// whose runs hold its share waits for its own turn, and another account's upload does not.
/// Told by what ended first, not by durations (a cold compile takes what it takes).
#[tokio::test(flavor = "multi_thread")]
async fn an_inspection_is_accounted_to_the_uploading_account() {
    let env = TestEnv::new()
        .with_own_component_cache()
        .with_env("AGENT_HOST_PLUGIN_MAX_CONCURRENCY_PER_ACCOUNT", "1")
        .with_metrics();
    let busy = env.account_with_key("busy", "pro");
    let other = env.account_with_key("other", "pro");
    env.apply_agent(
        &format!(
            "username = \"looper\"\nname = \"Looper\"\n[[commands]]\ncommand = \"probe\"\nhandler_type = \"custom\"\nplugin = \"{}\"\ntimeout_ms = 8000\n",
            plugin_path("probe")
        ),
        "busy",
    );
    let server = env.serve();
    let looping = {
        let (url, key) = (server.url("/v1/agents/looper/commands/probe/execute"), busy.clone());
        tokio::spawn(async move { post_json(&url, Some(&key), &json!({"parameters": {"mode": "loop"}})).await })
    };
    // The loop holds the busy account's one slot (for 8 s).
    server.until_metric("agent_host_plugin_slots_in_use", 1.0).await;
    let theirs = upload(&server, &other, variant(&probe_bytes(), 1, 8)).await;
    assert_eq!(theirs.status, 201, "{}", theirs.text);
    assert!(
        !looping.is_finished(),
        "the other account's upload did not wait for the loop"
    );
    let own = upload(&server, &busy, variant(&probe_bytes(), 2, 8)).await;
    assert_eq!(own.status, 201, "{}", own.text);
    assert!(
        looping.is_finished(),
        "the busy account's upload waited for its own slot"
    );
    assert!(looping.await.unwrap().status == 500);
}

/// One account's uploads take the compile queue one at a time: however many it sends,
/// another account's upload is queued behind one of them, not refused.
#[tokio::test(flavor = "multi_thread")]
async fn one_accounts_uploads_cannot_fill_the_compile_queue() {
    let env = TestEnv::new()
        .with_own_component_cache()
        .with_env("AGENT_HOST_PLUGIN_MAX_COMPILES", "1");
    let alice = env.account_with_key("alice", "pro");
    let bob = env.account_with_key("bob", "pro");
    let server = env.serve();
    let probe = probe_bytes();
    let mut uploads = tokio::task::JoinSet::new();
    for tag in 0..5 {
        let (url, key, bytes) = (
            server.url("/v1/account/plugins"),
            alice.clone(),
            variant(&probe, tag, 16),
        );
        uploads.spawn(async move { post_body(&url, &key, "application/wasm", bytes).await });
    }
    time_until(Duration::from_secs(30), "alice's five uploads in line", || async {
        get(&server.url("/health"), None).await.json()["plugins"]["uploadsInLine"] == 5
    })
    .await;
    let bobs = upload(&server, &bob, variant(&probe, 50, 16)).await;
    assert_eq!(bobs.status, 201, "{}", bobs.text);
    for reply in uploads.join_all().await {
        assert_eq!(reply.status, 201, "alice's wait their turn: {}", reply.text);
    }
}

/// Uploads are counted per account, kept or refused: each is a compile.
#[tokio::test]
async fn an_accounts_uploads_are_limited_per_minute() {
    let env = TestEnv::new()
        .with_own_component_cache()
        .with_env("AGENT_HOST_ACCOUNT_PLUGIN_UPLOADS_PER_MINUTE", "2");
    let alice = env.account_with_key("alice", "pro");
    let bob = env.account_with_key("bob", "pro");
    let server = env.serve();
    let probe = probe_bytes();
    assert_eq!(upload(&server, &alice, variant(&probe, 1, 16)).await.status, 201);
    assert_eq!(upload(&server, &alice, b"not a component".to_vec()).await.status, 400);
    let third = upload(&server, &alice, variant(&probe, 2, 16)).await;
    assert_eq!(
        (third.status, third.error_code()),
        (429, "rate_limit_exceeded".into()),
        "{}",
        third.text
    );
    assert!(third.header("retry-after").is_some());
    assert_eq!(
        upload(&server, &bob, variant(&probe, 3, 16)).await.status,
        201,
        "another account's own count"
    );
}
