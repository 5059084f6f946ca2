//! An operator's view: a real Prometheus scrapes `/metrics` (on its own listener) during a
//! short mixed load, and what the load did reads back through Prometheus's query API, as a
//! dashboard reads it.

use std::time::Duration;

use serde_json::json;

use crate::support::api::*;
use crate::support::chains::LocalBase;
use crate::support::payers::{Payer, X402Client, try_pay_with};
use crate::support::prometheus::Prometheus;
use crate::support::x402::*;
use crate::support::*;

fn probe_commands() -> String {
    probe_command("hog", "") + &probe_command("nap", "long_running = true")
}

#[tokio::test]
async fn prometheus_reads_what_a_mixed_load_did() {
    let chain = LocalBase::start().await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_BASE_RPC_URL", &chain.rpc_url)
        .with_env("AGENT_HOST_METRICS_LISTEN", "127.0.0.1:0")
        .with_env("AGENT_HOST_PLUGIN_MEMORY_MIB", "16");
    let key = env.account_with_key("acme", "pro");
    env.apply_agent(&format!("{}{}", paid_manifest("seller"), probe_commands()), "acme");
    let wallet = env.create_wallet("seller", "base");
    chain.set_eth(&wallet, 10u128.pow(16)).await;
    let (payer, payer_address) = Payer::on_base(&chain, 1_000_000).await;
    let server = env.serve();
    let scrape_url = server.ready["metrics"]
        .as_str()
        .expect("the metrics address")
        .to_string();
    assert!(
        get(&server.url("/metrics"), None).await.status == 404,
        "never on the public listener"
    );
    let target = scrape_url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_string();
    let prometheus = Prometheus::scraping(&target).await;

    // Keyed runs, a plugin that fails (past its memory), a job, and a paid request.
    for name in ["Ann", "Bo", "Cy"] {
        let reply = execute_with(&server, &key, "seller", "hello", json!({ "name": name })).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    let failed = execute_with(&server, &key, "seller", "hog", json!({ "mode": "memory", "n": 64 })).await;
    assert_eq!(failed.status, 500, "{}", failed.text);
    let job = execute_with(&server, &key, "seller", "nap", json!({ "mode": "sleep", "n": 10 })).await;
    let status_url = job.json()["data"]["result"]["statusUrl"].as_str().unwrap().to_string();
    assert_eq!(
        poll_job(&status_url, Duration::from_secs(10)).await["state"],
        "succeeded"
    );
    let paid = try_pay_with(
        X402Client::Fetch2,
        &payer,
        &server.url("/x402/base/seller"),
        &json!({ "command": "forecast", "city": "Oslo" }),
    )
    .await
    .unwrap();
    assert_eq!(paid.status, 200, "{}", paid.body);

    prometheus.expect(r#"up{job="agent-host"}"#, 1.0).await;
    let runs = |command: &str, outcome: &str| {
        format!(r#"sum(agent_host_plugin_runs_total{{agent="seller",command="{command}",outcome="{outcome}"}})"#)
    };
    prometheus.expect(&runs("hello", "succeeded"), 3.0).await;
    prometheus.expect(&runs("hog", "limit_exceeded"), 1.0).await;
    prometheus.expect(&runs("forecast", "succeeded"), 1.0).await;
    prometheus
        .expect(r#"sum(agent_host_jobs_finished_total{state="succeeded"})"#, 1.0)
        .await;
    prometheus.expect("agent_host_jobs_queued", 0.0).await;
    let execute = r#"sum(http_server_request_duration_seconds_count{http_route="/v1/agents/{agent_id}/commands/{command_name}/execute",http_request_method="POST"})"#;
    prometheus.expect(execute, 5.0).await;
    prometheus
        .expect(
            r#"sum(agent_host_x402_payments_total{network="base",version="2",state="served"})"#,
            1.0,
        )
        .await;
    prometheus
        .expect(
            r#"sum(agent_host_x402_revenue_micro_usdc_total{network="base"})"#,
            10_000.0,
        )
        .await;
    prometheus
        .expect(r#"sum(agent_host_x402_offers_total{network="base"}) >= bool 1"#, 1.0)
        .await;
    // The agent's wallet relayed the payment on Base: it paid gas.
    prometheus.expect("agent_host_x402_fee_wei_total > bool 0", 1.0).await;
    prometheus
        .expect(
            r#"sum(rpc_client_call_duration_seconds_count{network="base"}) > bool 0"#,
            1.0,
        )
        .await;
    prometheus
        .expect(r#"sum(db_client_operation_duration_seconds_count) > bool 0"#, 1.0)
        .await;

    // Every query of the operations guide's dashboard is valid PromQL over names this
    // server exposes, and those this load feeds have data.
    // A family with no series yet is not in the exposition: it must then be one the
    // server registers, by its name without prefix and unit.
    let exposed = send(client().get(&scrape_url)).await.text;
    let registered = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/telemetry/metrics.rs")).unwrap();
    let known = |token: &str| {
        let family = ["_bucket", "_count", "_sum"]
            .iter()
            .find_map(|suffix| token.strip_suffix(suffix))
            .unwrap_or(token);
        let stem = ["_total", "_seconds", "_bytes"]
            .iter()
            .find_map(|unit| family.strip_suffix(unit))
            .unwrap_or(family);
        let stem = stem.strip_prefix("agent_host_").unwrap_or(stem);
        exposed.contains(&format!("# TYPE {family} ")) || registered.contains(&format!("\"{stem}\""))
    };
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operations.md")).unwrap();
    let dashboard = guide.split("### A dashboard").nth(1).expect("the dashboard section");
    let mut fed = 0;
    for row in dashboard.lines().filter(|l| l.starts_with("| ") && l.contains('`')) {
        let (panel, queries) = row.trim_matches('|').split_once(" | ").unwrap();
        let panel = panel.trim();
        for query in queries.split('`').skip(1).step_by(2) {
            let query = query.replace("\\|", "|");
            let names = query
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|t| {
                    ["agent_host_", "http_server_", "rpc_client_", "db_client_"]
                        .iter()
                        .any(|p| t.starts_with(p))
                });
            for name in names {
                assert!(known(name), "{panel}: {name} is not a metric this server exposes");
            }
            let fed_here = [
                "Requests per second",
                "x402 revenue",
                "Plugin failures",
                "Fee spend, ETH",
                "Job queue",
            ]
            .iter()
            .any(|p| panel.starts_with(p));
            // A rate needs two scrapes of a series: the panels fed here fill within seconds.
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while prometheus.series(&query).await.is_empty() && fed_here {
                assert!(std::time::Instant::now() < deadline, "{panel}: {query} has no data");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            fed += usize::from(fed_here);
        }
    }
    assert_eq!(fed, 6, "the fed panels were all found in the guide");

    // The older text format lints clean with Prometheus's own tool.
    let text = send(client().get(&scrape_url)).await;
    assert!(
        text.header("content-type")
            .unwrap()
            .starts_with("text/plain; version=0.0.4"),
        "{:?}",
        text.headers
    );
    let mut lint = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool");
    use std::io::Write;
    lint.stdin.take().unwrap().write_all(text.text.as_bytes()).unwrap();
    let linted = lint.wait_with_output().unwrap();
    assert!(
        linted.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&linted.stdout),
        String::from_utf8_lossy(&linted.stderr)
    );
    // No payer, key or wallet address in any label.
    for secret in [payer_address.as_str(), wallet.as_str(), key.as_str()] {
        assert!(!text.text.contains(secret), "{secret} in the metrics");
    }
}

/// Metrics are a business's figures: beyond loopback only when the operator says so, and
/// behind a token when one is set.
#[tokio::test]
async fn metrics_stay_on_loopback_and_behind_their_token() {
    let remote = TestEnv::new().with_env("AGENT_HOST_METRICS_LISTEN", "0.0.0.0:0");
    let refused = remote.cli(&["serve", "--listen", "127.0.0.1:0"]);
    assert!(!refused.status.success());
    assert!(refused.stderr.contains("metrics_allow_remote"), "{}", refused.stderr);

    let env = TestEnv::new()
        .with_metrics()
        .with_env("AGENT_HOST_METRICS_TOKEN", "s3cret-scrape")
        .with_env("AGENT_HOST_METRICS_AGENTS", "alpha");
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&manifest("alpha"), "alice");
    env.apply_agent(&manifest("beta"), "alice");
    let server = env.serve();
    let url = server.ready["metrics"].as_str().unwrap().to_string();
    for agent in ["alpha", "beta"] {
        let listed = get(&server.url(&format!("/v1/agents/{agent}/commands")), Some(&key)).await;
        assert_eq!(listed.status, 200);
        let ran = execute_with(&server, &key, agent, "hello", json!({ "name": "Ann" })).await;
        assert_eq!(ran.status, 200, "{}", ran.text);
    }
    let anonymous = send(client().get(&url)).await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.text);
    let wrong = send(client().get(&url).bearer_auth("guess")).await;
    assert_eq!(wrong.status, 401);
    let scraped = send(client().get(&url).bearer_auth("s3cret-scrape")).await;
    assert_eq!(scraped.status, 200);
    assert!(
        scraped.text.contains("agent=\"alpha\""),
        "the named agent has its label"
    );
    assert!(!scraped.text.contains("agent=\"beta\""), "another is counted as other");
    assert!(scraped.text.contains("agent=\"other\""));
}
