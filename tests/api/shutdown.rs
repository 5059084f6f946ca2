//! A deploy stops the server with SIGTERM. What it was doing is finished, not cut off:
//! a running command, a paid request mid-run and a job are answered, the payer is not
//! refunded, and the next start finds nothing to recover. Work that outlasts the grace
//! period is handed to recovery at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::api::*;
use crate::support::chains::LocalBase;
use crate::support::payers::{Payer, X402Client, try_pay_with};
use crate::support::x402::*;
use crate::support::*;

fn probe_commands() -> String {
    probe_command("nap", "timeout_ms = 20000") + &probe_command("long_nap", "long_running = true\ntimeout_ms = 20000")
}

/// `/jobs/<id>` of a job an execute started: the next server listens on another port.
fn job_path(reply: &Reply) -> String {
    let url = reply.json()["data"]["result"]["statusUrl"]
        .as_str()
        .unwrap()
        .to_string();
    format!("/jobs/{}", url.rsplit_once("/jobs/").unwrap().1)
}

#[tokio::test]
async fn sigterm_lets_a_command_a_paid_request_and_a_job_finish() {
    let chain = LocalBase::start().await;
    let reached = Arc::new(tokio::sync::Notify::new());
    let hook = FakeServer::slow_hook(reached.clone(), Duration::from_secs(3), "answered after 3 s").await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_BASE_RPC_URL", &chain.rpc_url)
        .with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", &format!("127.0.0.1:{}", hook.port))
        .with_env("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1")
        .with_metrics();
    let key = env.account_with_key("acme", "free");
    let slow = paid_webhook("slow", "Answers after three seconds", &hook.url("/hook"));
    env.apply_agent(
        &format!("{}{slow}{}", paid_manifest("seller"), probe_commands()),
        "acme",
    );
    let agent_wallet = env.create_wallet("seller", "base");
    chain.set_eth(&agent_wallet, 10u128.pow(16)).await;
    let (payer, payer_address) = Payer::on_base(&chain, 1_000_000).await;

    let server = env.serve();
    let job_path = {
        let reply = execute_with(&server, &key, "seller", "long_nap", json!({"mode": "sleep", "n": 3000})).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        job_path(&reply)
    };
    let command = {
        let (url, key) = (server.url("/v1/agents/seller/commands/nap/execute"), key.clone());
        tokio::spawn(
            async move { post_json(&url, Some(&key), &json!({"parameters": {"mode": "sleep", "n": 3000}})).await },
        )
    };
    let paid = {
        let (payer, url) = (payer.clone(), server.url("/x402/base/seller"));
        tokio::spawn(async move { try_pay_with(X402Client::Fetch2, &payer, &url, &json!({ "command": "slow" })).await })
    };
    // The deploy comes once the paid command runs: its payment has settled.
    tokio::time::timeout(Duration::from_secs(30), reached.notified())
        .await
        .expect("the paid command never ran");
    let signalled = Instant::now();
    server.terminate();

    let command = command.await.unwrap();
    assert_eq!(command.status, 200, "{}", command.text);
    assert_eq!(command.json()["data"]["result"]["response"], "slept 3000 ms");
    let paid = paid.await.unwrap().expect("the paid request is answered");
    assert_eq!(paid.status, 200, "{}", paid.body);
    assert_eq!(paid.body["response"], "answered after 3 s", "{}", paid.body);
    let status = server.wait_for_exit(Duration::from_secs(25));
    assert!(status.success(), "a clean stop exits 0: {status:?}");
    assert!(
        signalled.elapsed() < Duration::from_secs(20),
        "it stopped once the work was done"
    );

    // What the next start sees: the job done, the payment served, nothing to take up.
    let server = env.serve();
    let job = get(&server.url(&job_path), None).await;
    assert_eq!(job.json()["state"], "succeeded", "{}", job.text);
    assert_eq!(job.json()["response"], "slept 3000 ms");
    server.after_a_full_recovery_pass().await;
    let payments = env.cli_json(&["payments", "list", "--agent", "seller"]);
    assert_eq!(payments.as_array().unwrap().len(), 1, "{payments}");
    assert_eq!(payments[0]["state"], "served", "{payments}");
    assert_eq!(
        chain.usdc_of(&payer_address).await,
        980_000,
        "paid once, never refunded"
    );
    assert_eq!(chain.usdc_of(&agent_wallet).await, 20_000);
    let log = server.log();
    assert!(
        !log.contains("taken up") && !log.contains("recovered"),
        "nothing to recover: {log}"
    );
}

#[tokio::test]
async fn a_job_that_outlasts_the_grace_period_is_left_to_recovery_at_once() {
    // A lease of an hour: only its release lets the next host take the job up now. (On
    // SQLite the next start fails every running job anyway: the PostgreSQL pass is the one
    // that proves the release.)
    let env = TestEnv::new()
        .with_env("AGENT_HOST_SHUTDOWN_GRACE_SECS", "1")
        .with_env("AGENT_HOST_JOB_LEASE_SECS", "3600")
        .with_env("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1");
    let key = env.account_with_key("acme", "free");
    env.apply_agent(&format!("{}{}", manifest("worker"), probe_commands()), "acme");
    let server = env.serve();
    let reply = execute_with(
        &server,
        &key,
        "worker",
        "long_nap",
        json!({"mode": "sleep", "n": 15000}),
    )
    .await;
    let job_path = job_path(&reply);
    env.until_job_running(&job_path).await;
    let signalled = Instant::now();
    server.terminate();
    let status = server.wait_for_exit(Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "the grace period bounds the stop"
    );

    let server = env.serve();
    let job = poll_job(&server.url(&job_path), Duration::from_secs(10)).await;
    assert_eq!(job["state"], "failed", "{job}");
    assert_eq!(job["code"], "internal_error");
    assert!(job["error"].as_str().unwrap().contains("not run again"), "{job}");
}

#[tokio::test]
async fn ready_says_whether_to_send_requests_and_every_answer_names_its_request() {
    let env = TestEnv::new();
    let server = env.serve();
    let ready = get(&server.url("/ready"), None).await;
    assert_eq!(ready.status, 200, "{}", ready.text);
    assert_eq!(
        ready.json(),
        json!({"status": "ready", "database": {"reachable": true, "migrated": true}, "stopping": false})
    );

    // An id the caller (a proxy) gave is kept; otherwise one is made.
    let client = reqwest::Client::new();
    let given = client
        .get(server.url("/health"))
        .header("x-request-id", "lb-7f3a-0001")
        .send()
        .await
        .unwrap();
    assert_eq!(given.headers()["x-request-id"], "lb-7f3a-0001");
    let made = get(&server.url("/v1/agents/nobody/commands"), None).await;
    assert_eq!(made.status, 401);
    let id = made.header("x-request-id").expect("an id on an error too").to_string();
    assert_eq!(id.len(), 32, "{id}");
    let unsafe_id = client
        .get(server.url("/health"))
        .header("x-request-id", "a b")
        .send()
        .await
        .unwrap();
    assert_ne!(unsafe_id.headers()["x-request-id"], "a b");
}

#[tokio::test]
async fn json_logs_carry_the_request_id_into_the_work_it_started() {
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LOG_FORMAT", "json")
        .with_env("AGENT_HOST_LOG", "info,agent_host=debug,plugin=info");
    let key = env.account_with_key("acme", "free");
    env.apply_agent(
        &format!("{}{}", manifest("worker"), probe_command("note", "long_running = true")),
        "acme",
    );
    let server = env.serve();
    let client = reqwest::Client::new();
    let refused = client
        .get(server.url("/v1/agents/nobody/commands"))
        .header("x-request-id", "trace-me-41")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    // A job's plugin logs from a task of its own, after the request was answered.
    let started = client
        .post(server.url("/v1/agents/worker/commands/note/execute"))
        .header("x-api-key", &key)
        .header("x-request-id", "trace-me-42")
        .json(&json!({ "parameters": { "mode": "log", "url": "written-by-the-job" } }))
        .send()
        .await
        .unwrap();
    assert_eq!(started.headers()["x-request-id"], "trace-me-42");
    let started: serde_json::Value = started.json().await.unwrap();
    let status_url = started["data"]["result"]["statusUrl"].as_str().unwrap().to_string();
    assert_eq!(
        poll_job(&status_url, Duration::from_secs(10)).await["state"],
        "succeeded"
    );

    let log = server.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let request_of = |line: &serde_json::Value| {
        line["spans"]
            .as_array()
            .and_then(|spans| spans.iter().find_map(|s| s["request_id"].as_str()))
            .map(str::to_string)
    };
    let answered = lines
        .iter()
        .find(|l| request_of(l).as_deref() == Some("trace-me-41"))
        .unwrap_or_else(|| panic!("no line of the refused request: {log}"));
    assert_eq!(answered["spans"][0]["http.route"], "/v1/agents/{agent_id}/commands");
    assert_eq!(answered["status"], 401);
    assert!(answered["timestamp"].is_string() && answered["level"].is_string());
    let from_the_job = lines
        .iter()
        .find(|l| l["message"] == "written-by-the-job")
        .unwrap_or_else(|| panic!("the plugin's line is missing: {log}"));
    assert_eq!(
        request_of(from_the_job).as_deref(),
        Some("trace-me-42"),
        "{from_the_job}"
    );
}
