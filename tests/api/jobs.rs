//! Long-running commands become durable jobs, polled at their status address.

use std::time::Duration;

use serde_json::json;

use crate::support::api::*;
use crate::support::*;

fn slow_manifest() -> String {
    format!(
        r#"
username = "slow"
name = "Slow"

[[commands]]
command = "nap"
handler_type = "custom"
plugin = "{probe}"
long_running = true
timeout_ms = 10000

[[commands]]
command = "stuck"
handler_type = "custom"
plugin = "{probe}"
long_running = true
timeout_ms = 600
"#,
        probe = plugin_path("probe")
    )
}

async fn start_job(server: &TestServer, key: &str, command: &str, params: serde_json::Value) -> String {
    let reply = execute_with(server, key, "slow", command, params).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let result = &reply.json()["data"]["result"];
    let status_url = result["statusUrl"].as_str().expect("a status address").to_string();
    assert!(status_url.starts_with(&server.base), "{status_url}");
    status_url
}

#[tokio::test]
async fn a_long_running_command_answers_at_once_and_is_polled_to_success() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&slow_manifest(), "alice");
    let server = env.serve();
    let status_url = start_job(&server, &key, "nap", json!({"mode": "sleep", "n": 1500})).await;
    let id = status_url.rsplit('/').next().unwrap();
    assert_eq!(id.len(), 32, "128 random bits");

    let early = get(&status_url, None).await.json();
    assert_eq!(early["state"], "processing");
    let mut saw_progress = false;
    for _ in 0..30 {
        let body = get(&status_url, None).await.json();
        if body["progress"].as_u64().is_some_and(|p| p > 0 && p < 100) {
            saw_progress = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(saw_progress, "the plugin's progress reports reach the status");
    let done = poll_job(&status_url, Duration::from_secs(15)).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["response"], "slept 1500 ms");
}

#[tokio::test]
async fn a_failing_job_ends_failed_with_a_standard_code() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&slow_manifest(), "alice");
    let server = env.serve();
    let status_url = start_job(&server, &key, "stuck", json!({"mode": "loop"})).await;
    let done = poll_job(&status_url, Duration::from_secs(10)).await;
    assert_eq!(done["state"], "failed");
    assert_eq!(done["code"], "generation_timeout");
    assert!(done["error"].as_str().unwrap().contains("timed out"));

    let unknown = get(&server.url("/jobs/00000000000000000000000000000000"), None).await;
    assert_eq!(unknown.status, 200);
    assert_eq!(
        unknown.json(),
        json!({"state": "failed", "error": "No job with this id (it may have expired)", "code": "not_found"})
    );
}

#[tokio::test]
async fn jobs_survive_a_restart_resumed_or_failed_never_stuck() {
    // On a shared store (PostgreSQL) the cut-off job is found once its lease runs out.
    let env = TestEnv::new()
        .with_env("AGENT_HOST_JOB_LEASE_SECS", "3")
        .with_env("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1");
    let key = env.account_with_key("alice", "free");
    let agent_id = env.apply_agent(&slow_manifest(), "alice");
    let server = env.serve();
    let cut_off = start_job(&server, &key, "nap", json!({"mode": "sleep", "n": 5000})).await;
    env.until_job_running(&cut_off).await;
    drop(server); // killed mid-run

    // A job recorded but never started (as if the crash came right after the insert).
    let queued_id = "0123456789abcdef0123456789abcdef";
    env.sql(&format!(
        "INSERT INTO jobs (id, agent_id, command, origin, parameters, state, created_at, expires_at)
         VALUES ('{queued_id}', '{agent_id}', 'nap', 'api', '{{\"mode\":\"sleep\",\"n\":200}}', 'queued', 0, 9999999999999)"
    ));

    let server = env.serve();
    let cut_off = cut_off.rsplit_once("/jobs/").unwrap().1;
    let failed = poll_job(&server.url(&format!("/jobs/{cut_off}")), Duration::from_secs(10)).await;
    assert_eq!(failed["state"], "failed");
    assert_eq!(failed["code"], "internal_error");
    assert!(failed["error"].as_str().unwrap().contains("not run again"), "{failed}");
    let resumed = poll_job(&server.url(&format!("/jobs/{queued_id}")), Duration::from_secs(10)).await;
    assert_eq!(resumed["state"], "succeeded", "{resumed}");
    assert_eq!(resumed["response"], "slept 200 ms");
}
