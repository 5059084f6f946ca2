//! Per-command logs for authors: each plugin run that logged or did not succeed is kept
//! with its id, outcome, duration and lines, the newest per command, and read back by the
//! agent's owner (`/v1/account/agents/{id}/logs`, `agent-host logs`), no one else.

use serde_json::{Value, json};

use crate::support::api::*;
use crate::support::*;

fn manifest() -> String {
    format!(
        r#"
username = "probe"
name = "Probe"

[[commands]]
command = "probe"
handler_type = "custom"
plugin = "{probe}"
timeout_ms = 1500

[[commands]]
command = "other"
handler_type = "custom"
plugin = "{probe}"
"#,
        probe = plugin_path("probe")
    )
}

async fn probe(server: &TestServer, key: &str, command: &str, params: Value) -> Reply {
    execute_with(server, key, "probe", command, params).await
}

async fn logs(server: &TestServer, key: &str, query: &str) -> Reply {
    get(&server.url(&format!("/v1/account/agents/probe/logs{query}")), Some(key)).await
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_that_log_or_fail_are_kept_for_their_owner() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "free");
    let bob = env.account_with_key("bob", "free");
    env.apply_agent(&manifest(), "alice");
    let server = env.serve();

    let logged = probe(
        &server,
        &key,
        "probe",
        json!({ "mode": "log", "url": "first line\nERROR forged" }),
    )
    .await;
    assert_eq!(logged.status, 200, "{}", logged.text);
    let quiet = probe(&server, &key, "probe", json!({ "mode": "echo", "url": "x" })).await;
    assert_eq!(quiet.status, 200);
    let panicked = probe(&server, &key, "probe", json!({ "mode": "panic" })).await;
    assert_eq!(panicked.status, 500);
    let other = probe(
        &server,
        &key,
        "other",
        json!({ "mode": "log", "url": "from the other command" }),
    )
    .await;
    assert_eq!(other.status, 200);

    let all = logs(&server, &key, "").await;
    assert_eq!(all.status, 200, "{}", all.text);
    let runs = all.json()["data"]["runs"].as_array().unwrap().clone();
    // Newest first; the quiet success is not kept.
    let shown: Vec<(&str, &str)> = runs
        .iter()
        .map(|r| (r["command"].as_str().unwrap(), r["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        shown,
        [("other", "succeeded"), ("probe", "crashed"), ("probe", "succeeded")]
    );
    let crashed = &runs[1];
    assert!(
        crashed["error"]
            .as_str()
            .unwrap()
            .contains("the probe panicked on purpose"),
        "{crashed}"
    );
    let kept = &runs[2];
    assert_eq!(kept["origin"], "api");
    assert_eq!(kept["error"], Value::Null);
    assert!(kept["duration_ms"].as_i64().unwrap() >= 0);
    assert_eq!(kept["id"].as_str().unwrap().len(), 36);
    assert_eq!(kept["lines"].as_array().unwrap().len(), 1);
    assert_eq!(kept["lines"][0]["level"], "info");
    // Written out, so a plugin cannot forge a line of its own record either.
    assert_eq!(kept["lines"][0]["message"], "first line\\nERROR forged");

    let one = logs(&server, &key, "?command=probe&limit=1").await.json();
    assert_eq!(one["data"]["runs"].as_array().unwrap().len(), 1);
    assert_eq!(one["data"]["runs"][0]["outcome"], "crashed");
    let slash = logs(&server, &key, "?command=/other").await.json();
    assert_eq!(
        slash["data"]["runs"][0]["lines"][0]["message"],
        "from the other command"
    );
    assert_eq!(logs(&server, &key, "?limit=0").await.error_code(), "validation_error");

    // The CLI prints what the API answers.
    let cli = env.cli_json(&["logs", "--agent", "probe"]);
    assert_eq!(cli, all.json()["data"]);

    // Another account finds no such agent; a key that may only use agents is refused.
    assert_eq!(logs(&server, &bob, "").await.status, 404);
    let made = post_json(&server.url("/v1/account/keys"), Some(&key), &json!({ "scope": "use" })).await;
    let user = made.json()["data"]["key"].as_str().unwrap().to_string();
    assert_eq!(logs(&server, &user, "").await.error_code(), "insufficient_scope");
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_newest_runs_of_a_command_are_kept() {
    let env = TestEnv::new();
    // Room for the runs within the rate limit.
    env.cli_json(&[
        "account",
        "create",
        "alice",
        "--plan",
        "enterprise",
        "--rpm",
        "10000",
        "--rpd",
        "100000",
    ]);
    let key = env.create_key("alice");
    env.apply_agent(&manifest(), "alice");
    let server = env.serve();
    for n in 0..105 {
        let reply = probe(
            &server,
            &key,
            "probe",
            json!({ "mode": "log", "url": format!("run {n}") }),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    probe(&server, &key, "other", json!({ "mode": "log", "url": "kept apart" })).await;
    let runs = logs(&server, &key, "?command=probe&limit=500").await.json()["data"]["runs"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(runs.len(), 100);
    assert_eq!(runs[0]["lines"][0]["message"], "run 104");
    assert_eq!(runs[99]["lines"][0]["message"], "run 5");
    // One command's runs do not push out another's.
    let other = logs(&server, &key, "?command=other").await.json();
    assert_eq!(other["data"]["runs"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_follow_prints_runs_as_they_come() {
    use std::io::BufRead;
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&manifest(), "alice");
    let server = env.serve();
    probe(&server, &key, "probe", json!({ "mode": "log", "url": "before" })).await;
    let mut child = env.cli_child(&["--json", "logs", "--agent", "probe", "--follow"], env.data_dir());
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["lines"][0]["message"], "before");
    probe(&server, &key, "probe", json!({ "mode": "log", "url": "after" })).await;
    probe(&server, &key, "probe", json!({ "mode": "panic" })).await;
    let next: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(next["lines"][0]["message"], "after");
    let last: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(last["outcome"], "crashed");
    child.kill().unwrap();
    child.wait().unwrap();
}
