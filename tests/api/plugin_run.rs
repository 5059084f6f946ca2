//! `agent-host plugin run`: an author runs a component once on their own machine, without
//! a server or a database, in the server's sandbox: the same parameter checks, grants,
//! limits and outbound guard.

use axum::routing::get as route_get;
use serde_json::json;

use crate::support::*;

fn run(env: &TestEnv, plugin: &str, args: &[&str]) -> CliOutput {
    let path = plugin_path(plugin);
    let mut all = vec!["plugin", "run", path.as_str()];
    all.extend_from_slice(args);
    env.cli(&all)
}

#[test]
fn runs_a_plugin_and_keeps_its_store_only_when_asked() {
    let env = TestEnv::sqlite();
    let kept = env.path("notes-kv");
    let kv = kept.to_str().unwrap();
    let added = run(
        &env,
        "notes",
        &["--param", "action=add", "--param", "text=Buy milk", "--kv-dir", kv],
    );
    assert!(added.status.success(), "{}", added.stderr);
    assert_eq!(added.stdout.trim(), "Noted (1 in all).");
    let listed = run(&env, "notes", &["--param", "action=list", "--kv-dir", kv]);
    assert_eq!(listed.stdout.trim(), "1. Buy milk", "{}", listed.stderr);
    // Without --kv-dir the store is the run's own, and gone after it.
    let fresh = run(&env, "notes", &["--param", "action=list"]);
    assert_eq!(fresh.stdout.trim(), "No notes yet.", "{}", fresh.stderr);

    let json = env.cli_json(&[
        "plugin",
        "run",
        &plugin_path("notes"),
        "--param",
        "action=list",
        "--kv-dir",
        kv,
    ]);
    assert_eq!(
        json,
        json!({ "response": "1. Buy milk", "format": "text", "mediaUrl": null })
    );
    // The server's database was never made: a plugin run needs none.
    assert!(!env.data_dir().join("agent-host.db").exists());
    assert!(
        std::fs::read_dir(env.data_dir())
            .unwrap()
            .all(|e| !e.unwrap().file_name().to_string_lossy().ends_with(".db"))
    );
}

#[test]
fn its_input_is_checked_as_the_server_checks_it() {
    let env = TestEnv::sqlite();
    let missing = run(&env, "notes", &[]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        missing.stderr.contains("missing required parameter 'action'"),
        "{}",
        missing.stderr
    );
    let unknown = run(&env, "notes", &["--param", "action=list", "--param", "colour=red"]);
    assert!(
        unknown
            .stderr
            .contains("unknown parameter 'colour'; this command takes: action, text"),
        "{}",
        unknown.stderr
    );
    let refused = run(&env, "notes", &["--param", "action=burn"]);
    assert!(refused.stderr.contains("unknown action 'burn'"), "{}", refused.stderr);
    let typed = run(&env, "probe", &["--param", "mode=sleep", "--param", "n=many"]);
    assert!(
        typed.stderr.contains("parameter 'n' must be a number, got 'many'"),
        "{}",
        typed.stderr
    );
    let malformed = run(&env, "notes", &["--param", "action"]);
    assert!(
        malformed.stderr.contains("write it as NAME=VALUE"),
        "{}",
        malformed.stderr
    );
    let config = run(&env, "notes", &["--param", "action=list", "--config", "[1]"]);
    assert!(
        config.stderr.contains("--config must be a JSON object"),
        "{}",
        config.stderr
    );

    let not_wasm = env.path("not.wasm");
    std::fs::write(&not_wasm, b"not a component").unwrap();
    let broken = env.cli(&["plugin", "run", not_wasm.to_str().unwrap()]);
    assert_eq!(broken.status.code(), Some(1));
    assert!(broken.stderr.contains("not.wasm"), "{}", broken.stderr);
}

#[test]
fn the_sandbox_limits_hold() {
    let env = TestEnv::sqlite().with_env("AGENT_HOST_PLUGIN_MEMORY_MIB", "32");
    let looped = run(&env, "probe", &["--param", "mode=loop", "--timeout-ms", "800"]);
    assert_eq!(looped.status.code(), Some(1));
    assert!(looped.stderr.contains("timed out after 800 ms"), "{}", looped.stderr);
    let hoarded = run(&env, "probe", &["--param", "mode=memory"]);
    assert!(
        hoarded.stderr.contains("exceeded the memory limit of 32 MiB"),
        "{}",
        hoarded.stderr
    );
    let files = run(&env, "probe", &["--param", "mode=read_file"]);
    assert!(!files.stdout.contains("root:") && !files.stderr.contains("root:"));
    let vars = run(&env, "probe", &["--param", "mode=env"]);
    assert_eq!(vars.stdout.trim(), "env: 0 variables []", "{}", vars.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn outbound_http_goes_through_the_servers_guard() {
    let allowed =
        FakeServer::start(axum::Router::new().route("/ok", route_get(|| async { "granted and allowed" }))).await;
    let inside = FakeServer::start(axum::Router::new().route("/secret", route_get(|| async { "internal data" }))).await;
    // The operator's outbound rules apply to local runs too: loopback only where allowed.
    let env = TestEnv::sqlite().with_env(
        "AGENT_HOST_OUTBOUND_ALLOW_PRIVATE",
        &format!("127.0.0.1:{}", allowed.port),
    );
    let grant_allowed = format!("127.0.0.1:{}", allowed.port);
    let grant_inside = format!("127.0.0.1:{}", inside.port);
    let fetch = |url: String, hosts: Vec<String>| {
        let mut args = vec![
            "--param".to_string(),
            "mode=http".into(),
            "--param".into(),
            format!("url={url}"),
        ];
        for host in hosts {
            args.extend(["--allow-host".to_string(), host]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&env, "probe", &args)
    };
    let ok = fetch(allowed.url("/ok"), vec![grant_allowed.clone()]);
    assert_eq!(ok.stdout.trim(), "status 200: granted and allowed", "{}", ok.stderr);
    let none = fetch(allowed.url("/ok"), vec![]);
    assert!(none.stderr.contains("no allowed_hosts"), "{}", none.stderr);
    let other = fetch("https://not-granted.example.org/".into(), vec![grant_allowed.clone()]);
    assert!(other.stderr.contains("not among the hosts granted"), "{}", other.stderr);
    let private = fetch(inside.url("/secret"), vec![grant_inside]);
    assert!(private.stderr.contains("private, loopback"), "{}", private.stderr);
    assert!(!private.stdout.contains("internal data"));
}
