//! One tenant's plugin cannot starve the others, or reach what it was not granted: each
//! test runs a real hostile component against a real server.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::api::*;
use crate::support::fake_llm::{fake_openai, text};
use crate::support::*;

/// An agent whose `probe` command runs the probe component; `extra` is added to the command.
fn probe_agent(username: &str, extra: &str) -> String {
    format!(
        r#"
username = "{username}"
name = "Probe"

[[commands]]
command = "probe"
handler_type = "custom"
plugin = "{}"
{extra}
"#,
        plugin_path("probe")
    )
}

/// Threads of the server process now (tokio workers and its blocking pool).
fn threads(server: &TestServer) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

/// A component with several memories, each under the cap, cannot together take
/// more than one instance's memory budget.
#[tokio::test(flavor = "multi_thread")]
async fn memory_is_capped_for_the_whole_instance() {
    let env = TestEnv::new().with_env("AGENT_HOST_PLUGIN_MEMORY_MIB", "64");
    let key = env.account_with_key("alice", "free");
    let hog = |memories: u32, grow_mib: u32| {
        let path = env.path(&format!("hog-{memories}-{grow_mib}.wasm"));
        std::fs::write(&path, hostile::memory_hog(memories, grow_mib)).unwrap();
        path.display().to_string()
    };
    let manifest = format!(
        r#"
username = "hogs"
name = "Hogs"

[[commands]]
command = "small"
handler_type = "custom"
plugin = "{}"

[[commands]]
command = "big"
handler_type = "custom"
plugin = "{}"
"#,
        hog(2, 40),
        hog(4, 48)
    );
    env.apply_agent(&manifest, "alice");
    let server = env.serve();

    let small = execute_with(&server, &key, "hogs", "small", json!({})).await;
    assert_eq!(
        response_text(&small),
        "grew",
        "one memory of 40 MiB fits: {}",
        small.text
    );
    let big = execute_with(&server, &key, "hogs", "big", json!({})).await;
    assert_eq!(big.status, 500, "three memories of 48 MiB do not: {}", big.text);
    assert_eq!(big.error_code(), "execution_error");
    assert!(
        big.error_message()
            .contains("memory limit of 64 MiB (all of the instance's memories together)"),
        "{}",
        big.text
    );
    // More memories than a component may have at all: refused when applied.
    let many = format!(
        "username = \"many\"\nname = \"Many\"\n[[commands]]\ncommand = \"many\"\nhandler_type = \"custom\"\nplugin = \"{}\"\n",
        hog(8, 1)
    );
    let file = env.path("many.toml");
    std::fs::write(&file, many).unwrap();
    let refused = env.cli(&["agent", "apply", file.to_str().unwrap(), "--account", "alice"]);
    assert!(!refused.status.success(), "{}", refused.stdout);
    assert!(refused.stderr.contains("memor"), "{}", refused.stderr);
    // The host kept serving.
    assert_eq!(
        response_text(&execute_with(&server, &key, "hogs", "small", json!({})).await),
        "grew"
    );
}

/// A job reporting progress in a tight loop costs a few writes a second, not a
/// blocking thread per report; the job ends on time and others are served meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn a_progress_flood_is_coalesced() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "pro");
    let other = env.account_with_key("bob", "pro");
    env.apply_agent(
        &probe_agent("flood", "long_running = true\ntimeout_ms = 10000"),
        "alice",
    );
    env.apply_agent(&manifest("quiet"), "bob");
    let server = env.serve();
    let before = threads(&server);

    let accepted = execute_with(
        &server,
        &key,
        "flood",
        "probe",
        json!({"mode": "progress_flood", "n": 3000}),
    )
    .await;
    let status_url = accepted.json()["data"]["result"]["statusUrl"]
        .as_str()
        .unwrap()
        .to_string();
    let mut most = 0;
    let mut progress_seen = false;
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        most = most.max(threads(&server));
        let hello = post_json(
            &server.url("/v1/agents/quiet/commands/hello/execute"),
            Some(&other),
            &json!({"parameters": {"name": "Bo"}}),
        )
        .await;
        assert_eq!(hello.status, 200, "another tenant is served: {}", hello.text);
        let status = get(&status_url, None).await.json();
        progress_seen |= status["progress"].is_number();
        if status["state"] != "processing" {
            break status;
        }
        assert!(Instant::now() < deadline, "the job did not end: {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status["state"], "succeeded", "{status}");
    let reports: u64 = status["response"]
        .as_str()
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(reports > 10_000, "a real flood: {reports} reports");
    assert!(progress_seen, "progress still shows while it runs");
    assert!(
        most < before + 16,
        "the flood must not fill the blocking pool: {most} threads at most (from {before})"
    );
}

/// One account's long runs hold at most its share of the slots, and short
/// commands keep theirs: another tenant's `simple_text` answers while they run.
#[tokio::test(flavor = "multi_thread")]
async fn one_tenant_cannot_hold_every_plugin_slot() {
    let env = TestEnv::new()
        .with_env("AGENT_HOST_PLUGIN_MAX_CONCURRENCY", "8")
        .with_env("AGENT_HOST_PLUGIN_MAX_CONCURRENCY_PER_ACCOUNT", "3")
        .with_metrics();
    let greedy = env.account_with_key("greedy", "pro");
    let other = env.account_with_key("other", "pro");
    env.apply_agent(&probe_agent("jobs", "long_running = true\ntimeout_ms = 8000"), "greedy");
    env.apply_agent(&probe_agent("slow", "timeout_ms = 8000"), "greedy");
    env.apply_agent(&manifest("quiet"), "other");
    let server = env.serve();

    // Ten long jobs and ten slow requests, all looping until their deadline.
    for _ in 0..10 {
        let reply = execute_with(&server, &greedy, "jobs", "probe", json!({"mode": "loop"})).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    let mut slow = tokio::task::JoinSet::new();
    for _ in 0..10 {
        let (url, key) = (server.url("/v1/agents/slow/commands/probe/execute"), greedy.clone());
        slow.spawn(async move { post_json(&url, Some(&key), &json!({"parameters": {"mode": "loop"}})).await });
    }
    // The greedy account holds its whole share.
    server.until_metric("agent_host_plugin_slots_in_use", 3.0).await;

    // Another tenant is answered at once, not after the loops' 8 s.
    let hello = tokio::time::timeout(
        Duration::from_secs(4),
        post_json(
            &server.url("/v1/agents/quiet/commands/hello/execute"),
            Some(&other),
            &json!({"parameters": {"name": "Ann"}}),
        ),
    )
    .await
    .expect("another tenant must not wait behind the greedy one");
    assert_eq!(hello.status, 200, "{}", hello.text);

    // The greedy account's own extra requests are told to retry, not left hanging.
    let replies = slow.join_all().await;
    let refused = replies.iter().filter(|r| r.status == 429).count();
    assert!(
        refused >= 5,
        "{:?}",
        replies.iter().map(|r| &r.text).collect::<Vec<_>>()
    );
    assert!(
        replies
            .iter()
            .filter(|r| r.status == 429)
            .all(|r| r.error_code() == "rate_limit_exceeded" && r.header("retry-after").is_some())
    );
}

/// The manifest is taken once, when the agent is applied; a request never runs
/// `manifest()`, so a component whose `manifest()` turns hostile later still just runs.
#[tokio::test(flavor = "multi_thread")]
async fn manifest_is_never_called_on_a_request_path() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "pro");
    let manifest = format!(
        "username = \"moody\"\nname = \"Moody\"\n[[commands]]\ncommand = \"moody\"\nhandler_type = \"custom\"\nplugin = \"{}\"\n",
        plugin_path("moody")
    );
    let file = env.path("moody.toml");
    std::fs::write(&file, manifest).unwrap();
    let window = || {
        (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            / 3000)
            % 2
    };
    // Applied while its manifest() answers (every other 3-second window).
    let mut applied = false;
    for _ in 0..4 {
        while window() == 1 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if env
            .cli(&["agent", "apply", file.to_str().unwrap(), "--account", "alice"])
            .status
            .success()
        {
            applied = true;
            break;
        }
    }
    assert!(applied, "the moody plugin could not be applied in a calm window");
    let server = env.serve();
    // Now its manifest() hangs: requests go on regardless.
    while window() == 0 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut runs = tokio::task::JoinSet::new();
    for _ in 0..10 {
        let (url, key) = (server.url("/v1/agents/moody/commands/moody/execute"), key.clone());
        runs.spawn(async move { post_json(&url, Some(&key), &json!({})).await });
    }
    for reply in runs.join_all().await {
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(response_text(&reply), "moody but working");
    }
}

/// An embedded-model generation stops when the plugin that asked for it is
/// killed, and generations queue within a bound: the agent's chat still answers.
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_plugins_generation_stops() {
    let env = TestEnv::new()
        .with_env("AGENT_HOST_EMBEDDED_MODEL_PATH", &smollm2_path())
        .with_env("AGENT_HOST_EMBEDDED_MAX_TOKENS", "4096")
        .with_env("AGENT_HOST_LLM_TIMEOUT_MS", "20000");
    let key = env.account_with_key("alice", "pro");
    env.apply_agent(&probe_agent("writer", "allow_llm = true\ntimeout_ms = 800"), "alice");
    let server = env.serve();

    let mut runs = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (url, key) = (server.url("/v1/agents/writer/commands/probe/execute"), key.clone());
        runs.spawn(async move { post_json(&url, Some(&key), &json!({"parameters": {"mode": "llm"}})).await });
    }
    let replies = runs.join_all().await;
    assert!(replies.iter().all(|r| r.status == 500), "killed or refused");
    assert!(
        replies.iter().any(|r| r.error_message().contains("busy")),
        "more than the queue takes are told the model is busy: {:?}",
        replies.iter().map(|r| r.error_message()).collect::<Vec<_>>()
    );
    let chat = post_json(
        &server.url("/v1/agents/writer/chat"),
        Some(&key),
        &json!({"message": "Say hello."}),
    )
    .await;
    assert_eq!(
        chat.status, 200,
        "the killed plugins' generations must not hold the model: {}",
        chat.text
    );
}

/// The operator's HTTP_PROXY is never used for plugin requests: the proxy would
/// resolve names itself and the address check would never run.
#[tokio::test(flavor = "multi_thread")]
async fn the_environment_proxy_is_never_used_for_plugins() {
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    let proxy = FakeServer::start(axum::Router::new().fallback(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async { "proxied internal data" }
    }))
    .await;
    let proxy_url = format!("http://127.0.0.1:{}", proxy.port);
    let env = TestEnv::new()
        .with_env("HTTP_PROXY", &proxy_url)
        .with_env("http_proxy", &proxy_url)
        .with_env("HTTPS_PROXY", &proxy_url);
    // A name no rule refuses by itself that resolves to loopback: this machine's own name
    // (its /etc/hosts maps it), standing for an internal name in the operator's DNS.
    let name = std::fs::read_to_string("/etc/hostname").unwrap().trim().to_string();
    let resolved: Vec<std::net::SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(&(name.as_str(), 80))
        .map(Iterator::collect)
        .unwrap_or_default();
    assert!(
        !resolved.is_empty() && resolved.iter().all(|a| a.ip().is_loopback()),
        "this test needs the machine's name ({name}) to resolve to loopback: {resolved:?}"
    );
    let key = env.account_with_key("alice", "pro");
    env.apply_agent(
        &probe_agent("prober", &format!("allowed_hosts = [\"{name}\"]")),
        "alice",
    );
    let server = env.serve();
    // Port 80: allowed, so what refuses it is the address the name resolves to.
    let url = format!("http://{name}/secret");
    let reply = execute_with(&server, &key, "prober", "probe", json!({"mode": "http", "url": url})).await;
    assert_eq!(reply.status, 500, "{}", reply.text);
    assert!(reply.error_message().contains("private, loopback"), "{}", reply.text);
    assert!(!reply.text.contains("internal data"));
    assert_eq!(
        hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the proxy was not asked"
    );
}

/// A plugin's log text stays one line: it cannot forge the host's own lines.
#[tokio::test(flavor = "multi_thread")]
async fn plugin_log_lines_cannot_forge_host_lines() {
    let env = TestEnv::new().with_env("AGENT_HOST_LOG", "warn,plugin=info");
    let key = env.account_with_key("alice", "pro");
    env.apply_agent(&probe_agent("prober", ""), "alice");
    let server = env.serve();
    let forged = "all good\n2026-01-01T00:00:00.000000Z ERROR agent_host::routes: forged by a plugin\r\x1b[2K";
    let reply = execute_with(&server, &key, "prober", "probe", json!({"mode": "log", "url": forged})).await;
    assert_eq!(response_text(&reply), "logged", "{}", reply.text);
    let log = server.log();
    assert!(log.contains("all good\\n2026-01-01T00:00:00.000000Z ERROR"), "{log}");
    assert!(
        !log.lines().any(|l| l.starts_with("2026-01-01T00:00:00.000000Z")),
        "no forged line: {log}"
    );
    assert!(!log.contains("\x1b[2K"), "no escape sequence reaches the terminal");
}

/// Components past the size limit are refused before anything compiles them.
#[test]
fn oversized_components_are_refused() {
    let env = TestEnv::new();
    env.create_account("alice", "pro");
    // The probe, padded with a 33 MiB custom section: still a valid component.
    let mut bytes = std::fs::read(plugin_path("probe")).unwrap();
    let payload_len = 33 << 20;
    let name = b"padding";
    let mut section = vec![name.len() as u8];
    section.extend_from_slice(name);
    section.resize(section.len() + payload_len, 0);
    bytes.push(0); // custom section id
    let mut size = section.len();
    loop {
        let byte = (size & 0x7f) as u8;
        size >>= 7;
        bytes.push(if size == 0 { byte } else { byte | 0x80 });
        if size == 0 {
            break;
        }
    }
    bytes.extend_from_slice(&section);
    let path = env.path("padded.wasm");
    std::fs::write(&path, &bytes).unwrap();
    let manifest = format!(
        "username = \"big\"\nname = \"Big\"\n[[commands]]\ncommand = \"big\"\nhandler_type = \"custom\"\nplugin = \"{}\"\n",
        path.display()
    );
    let file = env.path("big.toml");
    std::fs::write(&file, manifest).unwrap();
    let out = env.cli(&["agent", "apply", file.to_str().unwrap(), "--account", "alice"]);
    assert!(!out.status.success(), "{}", out.stdout);
    assert!(
        out.stderr.contains("this host accepts at most 33554432"),
        "{}",
        out.stderr
    );
}

/// IPv6 spellings of internal IPv4 addresses are refused like the addresses.
#[tokio::test(flavor = "multi_thread")]
async fn ipv6_forms_of_internal_addresses_are_refused() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "pro");
    // Granted as the URL parser writes them (::127.0.0.1 is ::7f00:1).
    let granted = r#"allowed_hosts = ["[::7f00:1]", "[2002:7f00:1::]", "[fec0::1]"]"#;
    env.apply_agent(&probe_agent("prober", granted), "alice");
    let server = env.serve();
    for url in ["http://[::127.0.0.1]/", "http://[2002:7f00:1::]/", "http://[fec0::1]/"] {
        let reply = execute_with(&server, &key, "prober", "probe", json!({"mode": "http", "url": url})).await;
        assert_eq!(reply.status, 500, "{url}: {}", reply.text);
        assert!(reply.error_message().contains("private"), "{url}: {}", reply.text);
    }
}

/// A custom plugin reaches the host's LLM only when its command grants it, and
/// never asks for more tokens than the operator allows.
#[tokio::test(flavor = "multi_thread")]
async fn the_llm_is_granted_per_command_and_capped() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let llm = fake_openai(std::sync::Arc::new(|_, _| text("A story.")), seen.clone()).await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake")
        .with_env("AGENT_HOST_PLUGIN_LLM_MAX_TOKENS", "50");
    let key = env.account_with_key("alice", "pro");
    env.apply_agent(&probe_agent("granted", "allow_llm = true"), "alice");
    env.apply_agent(&probe_agent("ungranted", ""), "alice");
    let server = env.serve();

    let refused = execute_with(&server, &key, "ungranted", "probe", json!({"mode": "llm"})).await;
    assert_eq!(refused.status, 500, "{}", refused.text);
    assert!(refused.error_message().contains("allow_llm"), "{}", refused.text);
    assert!(seen.lock().unwrap().is_empty(), "nothing reached the provider");

    let answered = execute_with(&server, &key, "granted", "probe", json!({"mode": "llm", "n": 100000})).await;
    assert_eq!(response_text(&answered), "A story.", "{}", answered.text);
    let asked = seen.lock().unwrap()[0]["max_tokens"].clone();
    assert_eq!(asked, 50, "capped at the operator's plugin_llm_max_tokens");
}

/// A command's key-value store is named by the agent manifest (the command), so a
/// component cannot claim another's by giving itself the same name.
#[tokio::test(flavor = "multi_thread")]
async fn a_component_cannot_claim_another_commands_store() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "pro");
    let manifest = format!(
        r#"
username = "desk"
name = "Desk"

[[commands]]
command = "notes"
handler_type = "custom"
plugin = "{}"

[[commands]]
command = "thief"
handler_type = "custom"
plugin = "{}"
"#,
        plugin_path("notes"),
        plugin_path("impostor")
    );
    env.apply_agent(&manifest, "alice");
    let server = env.serve();
    let added = post_json(
        &server.url("/v1/agents/desk/commands/notes/execute"),
        Some(&key),
        &json!({"rawText": "/notes add the safe code is 1234"}),
    )
    .await;
    assert_eq!(added.status, 200, "{}", added.text);
    let stolen = execute_with(&server, &key, "desk", "thief", json!({})).await;
    assert_eq!(response_text(&stolen), "nothing", "{}", stolen.text);
    // The notes command still has its own.
    let listed = post_json(
        &server.url("/v1/agents/desk/commands/notes/execute"),
        Some(&key),
        &json!({"rawText": "/notes list"}),
    )
    .await;
    assert!(response_text(&listed).contains("1234"), "{}", listed.text);
}

/// Item 15, for deployments that ran before: a component applied before manifests were
/// recorded gets its manifest recorded at start, and the notes it kept under its own name
/// move to its command's store (nothing is lost).
#[tokio::test(flavor = "multi_thread")]
async fn an_upgrade_keeps_the_notes_kept_under_a_plugins_own_name() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "pro");
    let agent_id = env.apply_agent(
        &format!(
            "username = \"desk\"\nname = \"Desk\"\n[[commands]]\ncommand = \"memo\"\nhandler_type = \"custom\"\nplugin = \"{}\"\n",
            plugin_path("notes")
        ),
        "alice",
    );
    // As an older version left it: no recorded manifest, the component as a copy in the
    // data dir, the store named by the plugin.
    let bytes = std::fs::read(plugin_path("notes")).unwrap();
    let hash = env.sql("SELECT plugin FROM commands")[0][0].clone().unwrap();
    std::fs::create_dir_all(env.path("plugins")).unwrap();
    let copy = env.path(&format!("plugins/{hash}.wasm"));
    std::fs::write(&copy, bytes).unwrap();
    env.sql("DELETE FROM plugins");
    env.sql(&format!(
        "INSERT INTO plugin_kv (agent_id, scope, key, value, updated_at) VALUES ('{agent_id}', 'notes', 'notes', {}, 0)",
        env.blob_literal(b"Water the plants")
    ));
    let server = env.serve();
    let listed = post_json(
        &server.url("/v1/agents/desk/commands/memo/execute"),
        Some(&key),
        &json!({"rawText": "/memo list"}),
    )
    .await;
    assert!(response_text(&listed).contains("Water the plants"), "{}", listed.text);
    // One copy is kept, the database's: the data dir's is gone.
    assert!(!copy.exists(), "the data dir's copy of the component is removed");
    assert_eq!(
        env.sql("SELECT COUNT(*) FROM plugins WHERE component IS NOT NULL")[0][0].as_deref(),
        Some("1")
    );
}

/// Kilobytes of the server process's resident memory: now (`VmRSS`) or at its peak (`VmHWM`).
fn memory_kb(server: &TestServer, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// What a plugin makes the host hold through wasi:http (header fields,
/// bodies, unread responses) counts against its run's memory budget, at run and in
/// `manifest()`: each hoarder ends in the same memory failure as a linear-memory hog, the
/// server's peak memory stays within the budgets of the runs at once, and another tenant is
/// served meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn wasi_http_resources_count_against_the_run_memory() {
    // Responses of 8 MiB: four unread ones are over a 32 MiB budget.
    let big =
        FakeServer::start(axum::Router::new().route("/big", axum::routing::get(|| async { vec![b'r'; 8 << 20] })))
            .await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_PLUGIN_MEMORY_MIB", "32")
        .with_env("AGENT_HOST_OUTBOUND_MAX_RESPONSE_BYTES", &(16u64 << 20).to_string())
        .with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", &format!("127.0.0.1:{}", big.port));
    let key = env.account_with_key("alice", "pro");
    let other = env.account_with_key("bob", "pro");
    env.apply_agent(
        &probe_agent(
            "hoarder",
            &format!("allowed_hosts = [\"127.0.0.1:{}\"]\ntimeout_ms = 20000", big.port),
        ),
        "alice",
    );
    env.apply_agent(&manifest("quiet"), "bob");
    let server = env.serve();
    let hello_url = server.url("/v1/agents/quiet/commands/hello/execute");
    let hello = move || {
        let (url, key) = (hello_url.clone(), other.clone());
        async move { post_json(&url, Some(&key), &json!({"parameters": {"name": "Bo"}})).await }
    };
    assert_eq!(hello().await.status, 200);
    let before_kb = memory_kb(&server, "VmRSS:");

    // Another tenant's command, every 20 ms while the hoarders run.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let neighbour = {
        let (stop, hello) = (stop.clone(), hello.clone());
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let started = Instant::now();
                assert_eq!(hello().await.status, 200);
                latencies.push(started.elapsed());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            latencies
        })
    };

    // The three hoarders at once, and an upload whose manifest() hoards.
    let mut hoarders = tokio::task::JoinSet::new();
    for mode in ["hoard_fields", "hoard_bodies", "hoard_responses"] {
        let (url, key) = (server.url("/v1/agents/hoarder/commands/probe/execute"), key.clone());
        let params = json!({"parameters": {"mode": mode, "url": big.url("/big")}});
        hoarders.spawn(async move { (mode, post_json(&url, Some(&key), &params).await) });
    }
    let upload = post_body(
        &server.url("/v1/account/plugins"),
        &key,
        "application/wasm",
        std::fs::read(plugin_path("greedy")).unwrap(),
    )
    .await;
    assert_eq!(upload.status, 400, "{}\n{}", upload.text, server.log());
    assert!(
        upload.error_message().contains("manifest() failed")
            && upload.error_message().contains("exceeded the memory limit of 32 MiB"),
        "{}",
        upload.text
    );
    for (mode, reply) in hoarders.join_all().await {
        assert_eq!(reply.status, 500, "{mode}: {}", reply.text);
        assert_eq!(reply.error_code(), "execution_error", "{mode}");
        assert!(
            reply.error_message().contains("exceeded the memory limit of 32 MiB"),
            "{mode}: {}",
            reply.text
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut latencies = neighbour.await.unwrap();

    // Four runs of 32 MiB at once, plus the host's own working room.
    let peak_kb = memory_kb(&server, "VmHWM:");
    assert!(
        peak_kb < before_kb + 4 * 32 * 1024 + 96 * 1024,
        "peak {} MiB from {} MiB",
        peak_kb >> 10,
        before_kb >> 10
    );
    latencies.sort();
    let median = latencies[latencies.len() / 2];
    let worst = latencies[latencies.len() - 1];
    assert!(
        median < Duration::from_millis(250) && worst < Duration::from_secs(2),
        "another tenant waited: median {median:?}, worst {worst:?} of {}",
        latencies.len()
    );
    // The host is unharmed: the budget is per run, and a well-behaved run fits in it.
    let echo = execute_with(
        &server,
        &key,
        "hoarder",
        "probe",
        json!({"mode": "echo", "url": "after"}),
    )
    .await;
    assert_eq!(response_text(&echo), "probe ok: after", "{}", echo.text);
}

/// A plugin's use of the language model is bounded per run (calls, prompt
/// characters, tokens asked for) and per account across runs; past either, the plugin is
/// told why (its typed `unavailable` failure) and the provider is not asked.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugins_llm_use_is_bounded_per_run_and_per_account() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let llm = fake_openai(std::sync::Arc::new(|_, _| text("Hello.")), seen.clone()).await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake")
        .with_env("AGENT_HOST_PLUGIN_LLM_CALLS_PER_RUN", "3")
        .with_env("AGENT_HOST_PLUGIN_LLM_TOKENS_PER_RUN", "200")
        // Each call costs 50 tokens of answer and 3 of prompt: 6 calls fit, not 7.
        .with_env("AGENT_HOST_ACCOUNT_PLUGIN_LLM_TOKENS_PER_MINUTE", "350");
    let key = env.account_with_key("alice", "pro");
    let other = env.account_with_key("bob", "pro");
    env.apply_agent(&probe_agent("talker", "allow_llm = true"), "alice");
    env.apply_agent(&probe_agent("other", "allow_llm = true"), "bob");
    let server = env.serve();
    let asked = || seen.lock().unwrap().len();

    let three = execute_with(&server, &key, "talker", "probe", json!({"mode": "llm_loop", "n": 3})).await;
    assert_eq!(response_text(&three), "3 answers", "{}", three.text);
    let four = execute_with(&server, &key, "talker", "probe", json!({"mode": "llm_loop", "n": 4})).await;
    assert_eq!(four.status, 500, "{}", four.text);
    assert!(
        four.error_message().contains("unavailable") && four.error_message().contains("plugin_llm_calls_per_run"),
        "{}",
        four.text
    );
    assert_eq!(asked(), 6, "the fourth call never reached the provider");

    // Six calls of this account's budget are spent; the seventh is refused in any run.
    let refused = execute_with(&server, &key, "talker", "probe", json!({"mode": "llm_loop", "n": 1})).await;
    assert_eq!(refused.status, 500, "{}", refused.text);
    assert!(
        refused.error_message().contains("account_plugin_llm_tokens_per_minute"),
        "{}",
        refused.text
    );
    assert_eq!(asked(), 6);
    // Another account has its own budget.
    let theirs = execute_with(&server, &other, "other", "probe", json!({"mode": "llm_loop", "n": 1})).await;
    assert_eq!(response_text(&theirs), "1 answers", "{}", theirs.text);
}
