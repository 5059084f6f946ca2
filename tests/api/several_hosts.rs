//! Three `agent-host serve` processes on loopback sharing one PostgreSQL database: what a
//! user relies on holds across them. These run in the PostgreSQL pass of the suite
//! (scripts/test.sh); on SQLite, where one process serves, they say so and return. Each runs
//! on a multi-threaded runtime: their database reads block, and the hooks and receivers
//! they serve in-process must go on answering meanwhile.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::chains::LocalBase;
use crate::support::x402::*;
use crate::support::*;

/// Every host gets the same master key by environment, as a deployment must.
const MASTER_KEY: &str = "5f6b3a0c9e1d2f4a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a";

/// The first host's environment and two more sharing its database; `None` on SQLite.
pub(crate) fn three_hosts(settings: Vec<(&str, String)>) -> Option<(TestEnv, TestEnv, TestEnv)> {
    if postgres::cluster().is_none() {
        eprintln!("several hosts need PostgreSQL: run with TEST_POSTGRES_URL (scripts/test.sh does)");
        return None;
    }
    let first = TestEnv::new()
        .with_env("AGENT_HOST_MASTER_KEY", MASTER_KEY)
        .with_envs(settings);
    let (second, third) = (first.another_host(), first.another_host());
    Some((first, second, third))
}

/// Waits until at least `room` seconds of the current minute are left, so a burst
/// counted against a per-minute limit falls in one window.
async fn with_room_in_the_minute(room: u64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    if 60 - now % 60 < room {
        tokio::time::sleep(Duration::from_secs(60 - now % 60)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn limits_keys_and_replays_hold_across_hosts() {
    let chain = LocalBase::start().await;
    let Some((a, b, c)) = three_hosts(vec![
        ("AGENT_HOST_BASE_RPC_URL", chain.rpc_url.clone()),
        ("AGENT_HOST_X402_PAYER_LIMIT_PER_MINUTE", "1000".into()),
        ("AGENT_HOST_X402_CLIENT_LIMIT_PER_MINUTE", "1000".into()),
    ]) else {
        return;
    };
    let key = a.account_with_key("acme", "free"); // 60 requests a minute
    a.apply_agent(&paid_manifest("seller"), "acme");
    let agent_wallet = a.create_wallet("seller", "base");
    chain.set_eth(&agent_wallet, 10u128.pow(16)).await;
    let hosts = [a.serve(), b.serve(), c.serve()];

    // The plan's 60 a minute, exactly, with 90 requests spread over three hosts at once.
    with_room_in_the_minute(20).await;
    let burst = (0..90).map(|i| {
        let url = hosts[i % 3].url("/v1/agents/seller/commands");
        let key = key.clone();
        async move { get(&url, Some(&key)).await.status }
    });
    let statuses = all_at_once(burst).await;
    let allowed = statuses.iter().filter(|s| **s == 200).count();
    let refused = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!((allowed, refused), (60, 30), "{statuses:?}");

    // A key made by one host's CLI works on every host; revoked, every host refuses it.
    let other = b.account_with_key("beta", "pro");
    b.apply_agent(&crate::support::manifest("beta_agent"), "beta");
    for host in &hosts {
        let reply = get(&host.url("/v1/agents/beta_agent/commands"), Some(&other)).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    // Each host keeps keys and agents in memory, yet sees a write made on another within
    // a second: a command changed by an apply, then a revocation.
    let changed = crate::support::manifest("beta_agent").replace("Hello, {{name}}!", "Hi, {{name}}.");
    a.apply_agent(&changed, "beta");
    let hello = |host: &TestServer| {
        let url = host.url("/v1/agents/beta_agent/commands/hello/execute");
        let other = other.clone();
        async move { post_json(&url, Some(&other), &json!({ "parameters": { "name": "Ann" } })).await }
    };
    for host in &hosts {
        time_until(Duration::from_secs(1), "the applied text served", || async {
            hello(host).await.json()["data"]["result"]["response"] == "Hi, Ann."
        })
        .await;
    }
    let key_id = other.split('_').take(2).collect::<Vec<_>>().join("_");
    c.cli_json(&["key", "revoke", &key_id]);
    for host in &hosts {
        time_until(Duration::from_secs(1), "the revoked key refused", || async {
            hello(host).await.status == 401
        })
        .await;
    }

    // A payment is used once across hosts: sent to the others for another request it is
    // refused; for the same request it is a retry, answered from the first host's record.
    let payer = alloy::signers::local::PrivateKeySigner::random();
    chain.mint_usdc(&payer.address().to_checksum(None), 1_000_000).await;
    let hello = json!({ "command": "hello", "name": "Ann" });
    let requirement = post_x402(&hosts[0].url("/x402/base/seller"), &hello).await.json()["accepts"][0].clone();
    let payment = base_payment(&payer, &requirement, 50_000, 7, 60);
    let first = paid(&hosts[0].url("/x402/base/seller"), &hello, &payment).await;
    assert_eq!(first.status, 200, "{}", first.text);
    let other = json!({ "command": "hello", "name": "Bob" });
    for host in &hosts[1..] {
        let replay = paid(&host.url("/x402/base/seller"), &other, &payment).await;
        assert_eq!(replay.status, 409, "{}", replay.text);
        assert_eq!(replay.json()["code"], "payment_already_used");
        let retry = paid(&host.url("/x402/base/seller"), &hello, &payment).await;
        assert_eq!(retry.status, 200, "{}", retry.text);
        assert_eq!(
            retry.json()["receipt"]["transactionSignature"],
            first.json()["receipt"]["transactionSignature"]
        );
    }
    assert_eq!(chain.usdc_of(&agent_wallet).await, 50_000, "paid once");
}

/// A counting stand-in for a slow webhook: how many times each job's `n` arrived.
async fn counting_hook() -> (FakeServer, Arc<Mutex<HashMap<u64, u32>>>) {
    let seen = Arc::new(Mutex::new(HashMap::new()));
    let counts = seen.clone();
    let router = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let counts = counts.clone();
            async move {
                let n = body["n"].as_u64().unwrap_or(u64::MAX);
                *counts.lock().unwrap().entry(n).or_insert(0) += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
                axum::Json(json!({ "response": format!("hooked {n}") }))
            }
        }),
    );
    (FakeServer::start(router).await, seen)
}

#[tokio::test(flavor = "multi_thread")]
async fn each_job_runs_once_and_a_dead_hosts_job_is_failed_by_another() {
    let (hook, seen) = counting_hook().await;
    let Some((a, b, c)) = three_hosts(vec![
        ("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", "127.0.0.1".into()),
        ("AGENT_HOST_JOB_LEASE_SECS", "3".into()),
        ("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1".into()),
    ]) else {
        return;
    };
    let key = a.account_with_key("acme", "pro");
    let manifest = format!(
        r#"
username = "worker"
name = "Worker"

[[commands]]
command = "hook"
handler_type = "webhook"
long_running = true
parameters = [{{ name = "n", type = "number", required = true }}]
config = {{ url = "{}/hook", response_field = "response" }}

[[commands]]
command = "nap"
handler_type = "custom"
plugin = "{}"
long_running = true
timeout_ms = 10000
"#,
        hook.base,
        plugin_path("probe")
    );
    let agent_id = a.apply_agent(&manifest, "acme");
    let mut hosts = [a.serve(), b.serve(), c.serve()];

    // Jobs queued as a host that died right after recording them would leave them, for
    // every host's recovery to find, and jobs submitted to each host while it goes on.
    for n in 0..15 {
        a.sql(&format!(
            "INSERT INTO jobs (id, agent_id, command, origin, parameters, state, created_at, expires_at)
             VALUES ('{n:032x}', '{agent_id}', 'hook', 'api', '{{\"n\":{n}}}', 'queued', 0, 9999999999999)"
        ));
    }
    let mut submitted = Vec::new();
    for n in 15..30 {
        let host = &hosts[n % 3];
        let reply = post_json(
            &host.url("/v1/agents/worker/commands/hook/execute"),
            Some(&key),
            &json!({ "parameters": { "n": n } }),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        submitted.push(status_url(&reply));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let done = a.sql("SELECT COUNT(*) FROM jobs WHERE state = 'succeeded'")[0][0].clone();
        if done.as_deref() == Some("30") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "jobs still unfinished: {done:?} of 30 succeeded"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 30, "every job ran: {seen:?}");
    assert!(seen.values().all(|runs| *runs == 1), "each exactly once: {seen:?}");
    let status = poll_job(&submitted[0], Duration::from_secs(5)).await;
    assert_eq!(status["response"], "hooked 15");

    // A host killed mid-job: another fails the job once its lease runs out, and does not
    // run it again.
    let reply = post_json(
        &hosts[0].url("/v1/agents/worker/commands/nap/execute"),
        Some(&key),
        &json!({ "parameters": { "mode": "sleep", "n": 8000 } }),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let job_path = status_url(&reply).rsplit_once("/jobs/").unwrap().1.to_string();
    a.until_job_running(&job_path).await;
    hosts[0].crash();
    let started = Instant::now();
    let failed = poll_job(&hosts[1].url(&format!("/jobs/{job_path}")), Duration::from_secs(15)).await;
    assert_eq!(failed["state"], "failed", "{failed}");
    assert!(failed["error"].as_str().unwrap().contains("not run again"), "{failed}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "failed within the lease and a recovery pass, before the nap would have ended: {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_killed_mid_settlement_is_finished_by_another() {
    let chain = LocalBase::start().await;
    let Some((mut a, b, c)) = three_hosts(vec![
        ("AGENT_HOST_BASE_RPC_URL", chain.rpc_url.clone()),
        ("AGENT_HOST_BASE_CONFIRMATIONS", "1".into()),
        ("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1".into()),
    ]) else {
        return;
    };
    a.create_account("acme", "free");
    a.apply_agent(&paid_manifest("seller"), "acme");
    let agent_wallet = a.create_wallet("seller", "base");
    chain.set_eth(&agent_wallet, 10u128.pow(16)).await;
    // The first host dies right after recording the signed settlement, before sending it.
    a.set_env("AGENT_HOST_TEST_FAULT", "x402:after_record");
    let mut dying = a.serve();
    let _others = [b.serve(), c.serve()];

    let payer = alloy::signers::local::PrivateKeySigner::random();
    let payer_address = payer.address().to_checksum(None);
    chain.mint_usdc(&payer_address, 1_000_000).await;
    let hello = json!({ "command": "hello", "name": "Ann" });
    let url = dying.url("/x402/base/seller");
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let payment = base_payment(&payer, &requirement, 50_000, 9, 120);
    let cut_off = client()
        .post(&url)
        .header("x-payment", &payment)
        .json(&hello)
        .send()
        .await;
    assert!(cut_off.is_err(), "no answer reached the payer: {cut_off:?}");
    dying.crash();

    // Another host sends the stored settlement, and since no answer reached the payer,
    // refunds it: the payer ends as it began, the agent with nothing.
    let deadline = Instant::now() + Duration::from_secs(30);
    let state = loop {
        let state = b.sql("SELECT state FROM payments")[0][0].clone().unwrap();
        if state == "refunded" || Instant::now() > deadline {
            break state;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(state, "refunded");
    assert_eq!(chain.usdc_of(&payer_address).await, 1_000_000);
    assert_eq!(chain.usdc_of(&agent_wallet).await, 0);
    let transfers = b.sql("SELECT kind, state FROM transfers");
    assert_eq!(
        transfers,
        vec![vec![Some("refund".to_string()), Some("confirmed".to_string())]],
        "one refund"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn transfers_from_one_wallet_through_three_hosts_never_overspend() {
    let chain = LocalBase::start().await;
    // A slower node: each sent transaction held 300 ms. Without one turn per wallet across
    // hosts, two hosts would read the same nonce in that window.
    let node = crate::support::proxy::NodeRelay::start(&chain.rpc_url, Duration::from_millis(300), 0).await;
    let Some((a, b, c)) = three_hosts(vec![("AGENT_HOST_BASE_RPC_URL", node.rpc_url.clone())]) else {
        return;
    };
    let key = a.account_with_key("acme", "pro");
    let agent = a.apply_agent(&crate::support::manifest("payee"), "acme");
    let wallet = a.create_wallet("payee", "base");
    chain.set_eth(&wallet, 10u128.pow(17)).await;
    chain.mint_usdc(&wallet, 1_000_000).await;
    let hosts = [a.serve(), b.serve(), c.serve()];

    // Fifteen transfers of 0.1 USDC from a wallet holding 1.0, five through each host.
    let sends = (0..15).map(|i| {
        let url = hosts[i % 3].url(&format!("/v1/agents/{agent}/wallet/base/transfer"));
        let key = key.clone();
        let recipient = alloy::signers::local::PrivateKeySigner::random()
            .address()
            .to_checksum(None);
        async move {
            post_json(
                &url,
                Some(&key),
                &json!({ "recipientAddress": recipient, "amountUsdc": 0.1 }),
            )
            .await
        }
    });
    let replies = all_at_once(sends).await;
    let sent: Vec<&Reply> = replies.iter().filter(|r| r.status == 200).collect();
    let refused = replies.iter().filter(|r| r.status == 400).count();
    assert_eq!(
        (sent.len(), refused),
        (10, 5),
        "{:?}",
        replies.iter().map(|r| &r.text).collect::<Vec<_>>()
    );
    assert_eq!(chain.usdc_of(&wallet).await, 0, "exactly the balance went out");
    let mut nonces = Vec::new();
    for reply in sent {
        let hash = reply.json()["data"]["transactionSignature"]
            .as_str()
            .unwrap()
            .to_string();
        let tx = crate::support::chains::rpc(&chain.rpc_url, "eth_getTransactionByHash", json!([hash])).await;
        nonces.push(tx["nonce"].as_str().unwrap().to_string());
    }
    nonces.sort();
    nonces.dedup();
    assert_eq!(nonces.len(), 10, "no nonce used twice: {nonces:?}");
}

fn status_url(accepted: &Reply) -> String {
    accepted.json()["data"]["result"]["statusUrl"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_host_given_another_master_key_refuses_to_start() {
    let Some((a, mut b, _)) = three_hosts(vec![]) else {
        return;
    };
    a.create_account("acme", "free");
    b.set_env("AGENT_HOST_MASTER_KEY", &"11".repeat(32));
    for args in [&["serve", "--listen", "127.0.0.1:0"][..], &["agent", "list"][..]] {
        let out = b.cli(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("give every host the same AGENT_HOST_MASTER_KEY"),
            "{}",
            out.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sqlite_deployment_moves_to_postgres_with_db_copy() {
    let Some(cluster) = postgres::cluster() else {
        eprintln!("db copy needs PostgreSQL: run with TEST_POSTGRES_URL (scripts/test.sh does)");
        return;
    };
    // A single host on SQLite, with an account, a key, an agent, a wallet and a finished job.
    let single = TestEnv::sqlite().with_env("AGENT_HOST_MASTER_KEY", MASTER_KEY);
    let key = single.account_with_key("acme", "pro");
    let agent_id = single.apply_agent(
        &format!("{}{}", paid_manifest("seller"), crate::support::x402::REPORT),
        "acme",
    );
    let wallet = single.create_wallet("seller", "base");
    let server = single.serve();
    let hello = post_json(
        &server.url("/v1/agents/seller/commands/report/execute"),
        Some(&key),
        &json!({ "parameters": {} }),
    )
    .await;
    assert_eq!(hello.status, 200, "{}", hello.text);
    let job = status_url(&hello).rsplit_once("/jobs/").unwrap().1.to_string();
    poll_job(&server.url(&format!("/jobs/{job}")), Duration::from_secs(5)).await;
    drop(server);

    let target = postgres::Database::create(&cluster);
    let copied = single.cli_json(&["db", "copy", "--to", &target.url]);
    assert_eq!(copied["copied"]["accounts"], 1, "{copied}");
    assert_eq!(copied["copied"]["api_keys"], 1, "{copied}");
    assert_eq!(copied["copied"]["wallets"], 1, "{copied}");
    assert!(copied["rows"].as_u64().unwrap() >= 5, "{copied}");

    // A host on PostgreSQL, with an empty data dir of its own, serves it all as it was.
    let moved = TestEnv::sqlite()
        .with_env("AGENT_HOST_MASTER_KEY", MASTER_KEY)
        .with_env("AGENT_HOST_DATABASE_URL", &target.url);
    let server = moved.serve();
    let listed = get(&server.url("/v1/agents/seller/commands"), Some(&key)).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    let wallets = moved.cli_json(&["wallet", "list", "--agent", "seller"]);
    assert!(wallets.to_string().contains(&wallet), "{wallets}");
    let found = moved.cli_json(&["agent", "list"]);
    assert!(found.to_string().contains(&agent_id), "{found}");
    let status = poll_job(&server.url(&format!("/jobs/{job}")), Duration::from_secs(5)).await;
    assert_eq!(status["state"], "succeeded", "{status}");
    assert_eq!(status["response"], "The report is ready.");

    // Copying again would mix two deployments: refused.
    let again = single.cli(&["db", "copy", "--to", &target.url]);
    assert!(!again.status.success());
    assert!(again.stderr.contains("already holds data"), "{}", again.stderr);
}

/// The suite's cluster takes TLS only (scripts/postgres.sh), and this
/// whole pass connects with `sslmode=verify-full`. Here, on a database of its own: the
/// service's sessions are encrypted, a plaintext address is refused by the server, a
/// certificate that does not chain to `sslrootcert` is refused, and `require` without a
/// CA file encrypts without checking, as libpq does.
#[tokio::test(flavor = "multi_thread")]
async fn the_database_is_reached_over_verified_tls_only() {
    let Some(cluster) = postgres::cluster() else {
        eprintln!("TLS to PostgreSQL needs PostgreSQL: run with TEST_POSTGRES_URL (scripts/test.sh does)");
        return;
    };
    assert!(cluster.contains("sslmode=verify-full"), "{cluster}");
    let db = postgres::Database::create(&cluster);
    let on = |url: &str| {
        TestEnv::sqlite()
            .with_env("AGENT_HOST_DATABASE_URL", url)
            .with_env("AGENT_HOST_MASTER_KEY", MASTER_KEY)
    };

    let plain = on(&db.url.replace("sslmode=verify-full", "sslmode=disable")).cli(&["account", "create", "plain"]);
    assert!(!plain.status.success(), "{}", plain.stdout);
    assert!(plain.stderr.contains("no encryption"), "{}", plain.stderr);
    let wrong_ca = db.url.replace("/ca.crt", "/server.crt"); // a certificate, not its CA
    let refused = on(&wrong_ca).cli(&["account", "create", "trusting"]);
    assert!(!refused.status.success(), "{}", refused.stdout);
    assert!(
        refused.stderr.to_lowercase().contains("certificate"),
        "{}",
        refused.stderr
    );
    let unchecked = db.url.split_once("sslmode=").unwrap().0.to_string() + "sslmode=require";
    on(&unchecked).cli_json(&["account", "create", "unchecked"]);

    // The cluster's Unix socket (in the directory of its CA file), where TLS is never
    // used: reached, whatever the TLS set-up.
    let (address, query) = db.url.split_once('?').unwrap();
    let dir = query.split("sslrootcert=").nth(1).unwrap().trim_end_matches("/ca.crt");
    let port = address.rsplit_once(':').unwrap().1.split('/').next().unwrap();
    let socket = format!("postgres://agent@{}:{port}/{}", dir.replace('/', "%2F"), db.name);
    on(&socket).cli_json(&["account", "create", "local"]);

    let env = on(&db.url);
    let key = env.account_with_key("acme", "free");
    let server = env.serve();
    assert_eq!(get(&server.url("/v1/account"), Some(&key)).await.status, 200);
    let sessions = db.rows(
        "SELECT s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
         WHERE a.datname = current_database() AND a.backend_type = 'client backend'",
    );
    assert!(sessions.len() >= 2, "the service's and this query's: {sessions:?}");
    assert!(
        sessions.iter().all(|row| row[0].as_deref() == Some("t")),
        "{sessions:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_counted_on_each_host_adds_up_and_a_stopping_host_keeps_its_share() {
    let Some((a, b, _)) = three_hosts(vec![("AGENT_HOST_USAGE_FLUSH_MS", "100".into())]) else {
        return;
    };
    // b adds what it counted only when it stops: nothing it ran may be lost by a deploy.
    let b = b.with_env("AGENT_HOST_USAGE_FLUSH_MS", "3600000");
    let key = a.account_with_key("acme", "free");
    let agent_id = a.apply_agent(&manifest("seller"), "acme");
    let (first, second) = (a.serve(), b.serve());
    let hello = |server: &TestServer| {
        let url = server.url(&format!("/v1/agents/{agent_id}/commands/hello/execute"));
        let key = key.clone();
        async move {
            let reply = post_json(&url, Some(&key), &json!({ "parameters": { "name": "Ann" } })).await;
            assert_eq!(reply.status, 200, "{}", reply.text);
        }
    };
    for _ in 0..4 {
        hello(&first).await;
    }
    for _ in 0..3 {
        hello(&second).await;
    }
    let url = first.url(&format!("/v1/account/agents/{agent_id}/usage"));
    let calls = |report: &Value| report["data"]["totals"]["calls"].as_i64().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while calls(&get(&url, Some(&key)).await.json()) < 4 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        calls(&get(&url, Some(&key)).await.json()),
        4,
        "the first host's, added as it goes"
    );
    assert!(second.stop().success());
    let report = get(&url, Some(&key)).await.json();
    assert_eq!(calls(&report), 7, "the second host's, added as it stopped: {report}");
    let hello = report["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["command"] == "hello")
        .unwrap()
        .clone();
    assert_eq!(hello["by_channel"], json!({ "api": { "succeeded": 7 } }));
}

#[tokio::test(flavor = "multi_thread")]
async fn each_webhook_delivery_is_sent_once_by_one_of_the_hosts() {
    let receiver = crate::support::webhooks::Receiver::start().await;
    let Some((a, b, c)) = three_hosts(vec![
        ("AGENT_HOST_WEBHOOK_ALLOW_PRIVATE", "127.0.0.1".into()),
        ("AGENT_HOST_WEBHOOK_POLL_MS", "20".into()),
    ]) else {
        return;
    };
    let key = a.account_with_key("acme", "pro");
    let hosts = [a.serve(), b.serve(), c.serve()];
    let registered = post_json(
        &hosts[0].url("/v1/account/webhooks"),
        Some(&key),
        &json!({ "url": receiver.url(), "events": ["key.created"] }),
    )
    .await;
    assert_eq!(registered.status, 201, "{}", registered.text);
    // 30 events written through all three hosts, each host polling every 20 ms.
    for i in 0..30 {
        let made = post_json(&hosts[i % 3].url("/v1/account/keys"), Some(&key), &json!({})).await;
        assert_eq!(made.status, 201, "{}", made.text);
    }
    receiver.until("30 deliveries", |r| r.len() >= 30).await;
    // Every delivery recorded as succeeded on its first attempt: no host holds one that it
    // could still send, so what the receiver has is all it will ever get.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let rows = a.sql("SELECT state, attempts FROM webhook_deliveries");
        let done = rows
            .iter()
            .all(|row| row[0].as_deref() == Some("succeeded") && row[1].as_deref() == Some("1"));
        if rows.len() == 30 && done {
            break;
        }
        assert!(Instant::now() < deadline, "deliveries not all succeeded once: {rows:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let received = receiver.received().len();
    let mut ids: Vec<String> = receiver.received().into_iter().map(|r| r.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!((received, ids.len()), (30, 30), "each event once, by one host");
    let secret = get(
        &hosts[1].url(&format!(
            "/v1/account/webhooks/{}",
            registered.json()["data"]["id"].as_str().unwrap()
        )),
        Some(&key),
    )
    .await
    .json()["data"]["secret"]
        .clone();
    let checked = crate::support::webhooks::verify(secret.as_str().unwrap(), &receiver.received()).await;
    assert_eq!(checked["library"].as_array().unwrap().len(), 30, "{checked}");
}
