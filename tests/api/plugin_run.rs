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
    if on_postgres_pass() {
        return; // no database involved: checked in the SQLite pass
    }
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
    if on_postgres_pass() {
        return; // no database involved: checked in the SQLite pass
    }
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
    if on_postgres_pass() {
        return; // no database involved: checked in the SQLite pass
    }
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
    if on_postgres_pass() {
        return; // no database involved: checked in the SQLite pass
    }
    let env = TestEnv::sqlite().with_env(
        "AGENT_HOST_OUTBOUND_ALLOW_PRIVATE",
        &format!("127.0.0.1:{}", allowed.port),
    );
    let grant_allowed = format!("127.0.0.1:{}", allowed.port);
    let grant_inside = format!("127.0.0.1:{}", inside.port);
    let fetch_with = |mode: &str, url: String, hosts: Vec<String>| {
        let mut args = vec![
            "--param".to_string(),
            format!("mode={mode}"),
            "--param".into(),
            format!("url={url}"),
        ];
        for host in hosts {
            args.extend(["--allow-host".to_string(), host]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&env, "probe", &args)
    };
    let fetch = |url: String, hosts: Vec<String>| fetch_with("http", url, hosts);
    let ok = fetch(allowed.url("/ok"), vec![grant_allowed.clone()]);
    assert_eq!(ok.stdout.trim(), "status 200: granted and allowed", "{}", ok.stderr);
    let none = fetch(allowed.url("/ok"), vec![]);
    assert!(none.stderr.contains("no allowed_hosts"), "{}", none.stderr);
    let other = fetch("https://not-granted.example.org/".into(), vec![grant_allowed.clone()]);
    assert!(other.stderr.contains("not among the hosts granted"), "{}", other.stderr);
    let private = fetch(inside.url("/secret"), vec![grant_inside.clone()]);
    assert!(private.stderr.contains("private, loopback"), "{}", private.stderr);
    assert!(!private.stdout.contains("internal data"));

    // A standard client over wasi:http, the same guard: the plugin gets the code, the author
    // sees the reason among the run's log lines.
    let ok = fetch_with("wasi_http", allowed.url("/ok"), vec![grant_allowed]);
    assert_eq!(ok.stdout.trim(), "status 200: granted and allowed", "{}", ok.stderr);
    let private = fetch_with("wasi_http", inside.url("/secret"), vec![grant_inside]);
    assert!(private.stderr.contains("HttpRequestDenied"), "{}", private.stderr);
    assert!(private.stderr.contains("private, loopback"), "{}", private.stderr);
    assert!(!private.stdout.contains("internal data"));
}

#[test]
fn plugin_test_runs_the_cases_beside_the_plugin() {
    if on_postgres_pass() {
        return; // no database involved: checked in the SQLite pass
    }
    let env = TestEnv::sqlite();
    let cases = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../plugins/examples/notes/plugin-tests.toml"
    );
    let notes = plugin_path("notes");
    let passed = env.cli(&["plugin", "test", cases, "--plugin", &notes]);
    assert!(passed.status.success(), "{}{}", passed.stdout, passed.stderr);
    assert!(
        passed.stdout.contains("ok    lists what was added"),
        "{}",
        passed.stdout
    );
    assert!(
        passed.stdout.trim_end().ends_with("7 passed, 0 failed"),
        "{}",
        passed.stdout
    );

    // A wrong expectation fails the run and says what came instead; the others still run.
    let wrong = env.path("wrong.toml");
    std::fs::write(
        &wrong,
        format!(
            "plugin = {notes:?}\n\n[[case]]\nname = \"adds\"\nparams = {{ action = \"add\", text = \"tea\" }}\nexpect = \"Noted.\"\n\n\
             [[case]]\nname = \"lists\"\nparams = {{ action = \"list\" }}\nexpect_contains = \"tea\"\n\n\
             [[case]]\nname = \"should refuse\"\nparams = {{ action = \"list\" }}\nexpect_error = \"nope\"\n"
        ),
    )
    .unwrap();
    let failed = env.cli(&["plugin", "test", wrong.to_str().unwrap()]);
    assert_eq!(failed.status.code(), Some(1));
    assert!(
        failed
            .stdout
            .contains("FAIL  adds: expected \"Noted.\", got \"Noted (1 in all).\""),
        "{}",
        failed.stdout
    );
    assert!(failed.stdout.contains("ok    lists"), "{}", failed.stdout);
    assert!(
        failed
            .stdout
            .contains("FAIL  should refuse: expected an error, got \"1. tea\""),
        "{}",
        failed.stdout
    );
    assert!(failed.stdout.contains("1 passed, 2 failed"), "{}", failed.stdout);
    assert!(failed.stderr.is_empty(), "{}", failed.stderr);

    let report = env.cli(&["--json", "plugin", "test", wrong.to_str().unwrap()]);
    assert_eq!(report.status.code(), Some(1));
    let report = report.json();
    assert_eq!(
        (report["passed"].as_u64(), report["failed"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(
        report["cases"][1],
        json!({ "name": "lists", "passed": true, "detail": null })
    );

    let missing = env.cli(&["plugin", "test", env.path("none.toml").to_str().unwrap()]);
    assert!(
        missing.stderr.contains("none.toml: cannot read it"),
        "{}",
        missing.stderr
    );
}

/// Reads lines from a child's pipe on a thread, so a test can wait for one with a deadline.
fn lines_of(pipe: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

fn wait_for(lines: &std::sync::mpsc::Receiver<String>, wanted: &str) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match lines.recv_timeout(left) {
            Ok(line) if line.contains(wanted) => return seen,
            Ok(line) => seen.push(line),
            Err(_) => break,
        }
    }
    panic!("no line with {wanted:?} within 30 s; saw {seen:?}");
}

#[test]
fn watch_rebuilds_and_runs_again_when_a_source_changes() {
    if on_postgres_pass() {
        return; // no database involved: checked in the SQLite pass
    }
    let env = TestEnv::sqlite();
    let project = env.path("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::copy(plugin_path("notes"), project.join("plugin.wasm")).unwrap();
    std::fs::write(project.join("lib.src"), "first").unwrap();
    // The "build" swaps in another component, so a rerun shows it took the new one.
    let build = format!("cp {} plugin.wasm", plugin_path("probe"));
    let mut child = env.cli_child(
        &[
            "plugin",
            "run",
            "plugin.wasm",
            "--param",
            "action=list",
            "--watch",
            "--build",
            &build,
        ],
        &project,
    );
    let out = lines_of(child.stdout.take().unwrap());
    let err = lines_of(child.stderr.take().unwrap());
    wait_for(&out, "No notes yet.");
    std::fs::write(project.join("lib.src"), "second").unwrap();
    wait_for(&err, &format!("changed: {build}"));
    // The probe takes `mode`, not `action`: the new component answered.
    wait_for(&err, "unknown parameter 'action'; this command takes: mode, url, n");
    // One change, one rebuild: the watcher's first look after the run finds the component
    // the build wrote already known, and says it waits, without starting another.
    let before_idle = wait_for(&err, "waiting for changes");
    assert!(
        before_idle.iter().all(|line| !line.contains("changed")),
        "a rebuild started another: {before_idle:?}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

/// An author sees the units its plugin reports (`meter.add`): what a payer would be charged
/// for, were the command sold by use.
#[test]
fn a_run_shows_the_units_its_plugin_reported() {
    if on_postgres_pass() {
        return; // no database involved: checked in the SQLite pass
    }
    let env = TestEnv::sqlite();
    let ran = run(&env, "probe", &["--param", "mode=meter", "--param", "n=4"]);
    assert!(ran.status.success(), "{}", ran.stderr);
    assert_eq!(ran.stdout.trim(), "worked 4 units\nunits: 4");
    let json = env.cli_json(&[
        "plugin",
        "run",
        &plugin_path("probe"),
        "--param",
        "mode=meter",
        "--param",
        "n=4",
    ]);
    assert_eq!(json["units"], 4, "{json}");
    // A run that reports nothing says nothing of units.
    let quiet = run(&env, "probe", &["--param", "mode=echo"]);
    assert!(!quiet.stdout.contains("units"), "{}", quiet.stdout);
}
