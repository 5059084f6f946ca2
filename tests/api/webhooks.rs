//! Signed webhooks, as an owner and their receiver see them: each event of the account
//! arrives signed (verified with the documented recipe and the reference library), a
//! failing receiver gets retries of the same event and its endpoint is disabled with the
//! reason, "send again" works, a private address is refused, and deliveries written while
//! no server runs are sent when one starts.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::api::execute_with;
use crate::support::chains::LocalBase;
use crate::support::webhooks::{Receiver, verify};
use crate::support::x402::*;
use crate::support::*;

fn shop() -> String {
    format!(
        r#"
username = "seller"
name = "Seller"

[[commands]]
command = "hello"
description = "Greets"
handler_type = "simple_text"
integrations = ["x402"]
price_usd = 0.05
parameters = [{{ name = "name", type = "string", required = true, description = "Who" }}]
config = {{ text = "Hello, {{{{name}}}}!" }}

[[commands]]
command = "report"
description = "A long report"
handler_type = "simple_text"
long_running = true
config = {{ text = "The report is ready." }}

[[commands]]
command = "down"
description = "Calls a server that is not there"
handler_type = "webhook"
config = {{ url = "http://127.0.0.1:9/hook" }}
{BROKEN}
[x402]
enabled = true
default_price_usd = 0.01
networks = ["base"]
"#
    )
}

/// A host that tries a failing delivery three more times a second apart and disables an
/// endpoint after four failures in a row, and sees a command failing after two runs.
fn quick(env: TestEnv) -> TestEnv {
    env.with_env("AGENT_HOST_WEBHOOK_ALLOW_PRIVATE", "127.0.0.1")
        .with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", "127.0.0.1")
        .with_env("AGENT_HOST_WEBHOOK_POLL_MS", "50")
        .with_env("AGENT_HOST_WEBHOOK_RETRY_SCHEDULE_SECS", "1,1,1")
        .with_env("AGENT_HOST_WEBHOOK_DISABLE_AFTER_FAILURES", "4")
        .with_env("AGENT_HOST_WEBHOOK_DISABLE_AFTER_SECS", "0")
        .with_env("AGENT_HOST_WEBHOOK_FAILING_MIN_RUNS", "2")
}

async fn register(server: &TestServer, key: &str, url: &str, events: Value) -> Value {
    let reply = post_json(
        &server.url("/v1/account/webhooks"),
        Some(key),
        &json!({ "url": url, "events": events, "description": "ops" }),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.json()["data"].clone()
}

async fn deliveries(server: &TestServer, key: &str, endpoint: &str) -> Vec<Value> {
    let reply = get(
        &server.url(&format!("/v1/account/webhooks/{endpoint}/deliveries")),
        Some(key),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()["data"]["deliveries"].as_array().unwrap().clone()
}

#[tokio::test]
async fn every_event_arrives_signed_and_a_failing_receiver_is_retried_then_disabled() {
    let chain = LocalBase::start().await;
    let receiver = Receiver::start().await;
    let env = quick(TestEnv::new()).with_envs(chain.env());
    let key = env.account_with_key("acme", "free");
    let other = env.account_with_key("bob", "free");
    let agent_id = env.apply_agent(&shop(), "acme");
    let wallet = env.create_wallet("seller", "base");
    chain.set_eth(&wallet, 10u128.pow(16)).await;
    let server = env.serve();

    // A private address, or a name for one, is refused when it is given.
    for url in [
        "http://10.0.0.7/hook",
        "http://169.254.169.254/latest",
        "http://localhost:8080/hook",
    ] {
        let refused = post_json(
            &server.url("/v1/account/webhooks"),
            Some(&key),
            &json!({ "url": url, "events": ["*"] }),
        )
        .await;
        assert_eq!(
            (refused.status, refused.error_code()),
            (400, "validation_error".to_string()),
            "{url}"
        );
        assert!(refused.error_message().contains("may not call"), "{}", refused.text);
    }
    let unknown = post_json(
        &server.url("/v1/account/webhooks"),
        Some(&key),
        &json!({ "url": receiver.url(), "events": ["payment.made"] }),
    )
    .await;
    assert_eq!(unknown.status, 400, "{}", unknown.text);

    let endpoint = register(&server, &key, &receiver.url(), json!(["*"])).await;
    let endpoint_id = endpoint["id"].as_str().unwrap().to_string();
    let secret = endpoint["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"), "{endpoint}");
    let listed = get(&server.url("/v1/account/webhooks"), Some(&key)).await;
    assert!(!listed.text.contains(&secret), "a list never holds a secret");
    let theirs = get(
        &server.url(&format!("/v1/account/webhooks/{endpoint_id}")),
        Some(&other),
    )
    .await;
    assert_eq!(theirs.status, 404, "another account's endpoint is not found");

    // What the account does: a key made and revoked, a job, a failing command, a paid
    // greeting, a broken paid command refunded, and a wallet alert it is already below.
    let made = post_json(&server.url("/v1/account/keys"), Some(&key), &json!({ "name": "bot" })).await;
    let made_id = made.json()["data"]["id"].as_str().unwrap().to_string();
    let revoked = keyed(
        reqwest::Method::DELETE,
        &server.url(&format!("/v1/account/keys/{made_id}")),
        &key,
        None,
    )
    .await;
    assert_eq!(revoked.status, 200);
    let job = execute_with(&server, &key, &agent_id, "report", json!({})).await;
    assert!(job.text.contains("statusUrl"), "{}", job.text);
    for _ in 0..2 {
        execute_with(&server, &key, &agent_id, "down", json!({})).await;
    }
    let (payer, _) = base_payer(&chain, 1_000_000).await;
    let url = server.url("/x402/base/seller");
    let hello = json!({ "command": "hello", "name": "Pay" });
    let terms = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    assert_eq!(
        paid(&url, &hello, &base_payment(&payer, &terms, 50_000, 1, 60))
            .await
            .status,
        200
    );
    let broken = json!({ "command": "broken" });
    let terms = post_x402(&url, &broken).await.json()["accepts"][0].clone();
    paid(&url, &broken, &base_payment(&payer, &terms, 20_000, 2, 60)).await;
    let alert = keyed(
        reqwest::Method::PUT,
        &server.url(&format!("/v1/account/agents/{agent_id}/wallets/base/alert")),
        &key,
        Some(&json!({ "below_usdc": "1000" })),
    )
    .await;
    assert_eq!(alert.status, 200, "{}", alert.text);

    let expected = [
        ("key.created", 1),
        ("key.revoked", 1),
        ("job.succeeded", 1),
        ("command.failing", 1),
        ("payment.settled", 2),
        ("payment.refunded", 1),
        ("wallet.low_balance", 1),
    ];
    let received = receiver
        .until("every event", |_| expected.iter().all(|(t, n)| receiver.count(t) >= *n))
        .await;
    for (event_type, n) in expected {
        assert_eq!(receiver.count(event_type), n, "{event_type}");
    }
    let settled = received
        .iter()
        .find(|r| r.event_type() == "payment.settled")
        .unwrap()
        .event();
    assert_eq!(settled["data"]["agent_id"], agent_id.as_str());
    assert!(settled["data"]["amount_micro_usdc"].is_i64(), "{settled}");
    let low = received
        .iter()
        .find(|r| r.event_type() == "wallet.low_balance")
        .unwrap()
        .event();
    assert_eq!(
        (&low["data"]["network"], &low["data"]["balance_micro_usdc"]),
        (&json!("base"), &json!(50_000))
    );
    let checked = verify(&secret, &received).await;
    assert_eq!(checked["refused"], json!([]), "{checked}");
    assert_eq!(checked["documented"].as_array().unwrap().len(), received.len());
    assert_eq!(checked["library"].as_array().unwrap().len(), received.len());
    // A wrong secret verifies nothing.
    let wrong = verify("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", &received[..1]).await;
    assert_eq!(wrong["documented"], json!([]), "{wrong}");
    let listed = deliveries(&server, &key, &endpoint_id).await;
    assert_eq!(listed.len(), received.len());
    assert!(
        listed
            .iter()
            .all(|d| d["state"] == "succeeded" && d["attempts"] == 1 && d["last_status"] == 200),
        "{listed:?}"
    );

    // The receiver fails: the next event is tried four times, the same id each time, then
    // fails; four failures in a row disable the endpoint, and the owner sees why.
    receiver.answer(500);
    let before = receiver.received().len();
    post_json(
        &server.url("/v1/account/keys"),
        Some(&key),
        &json!({ "name": "second" }),
    )
    .await;
    let tries = receiver.until("four attempts", |r| r.len() >= before + 4).await[before..].to_vec();
    assert!(tries.iter().all(|t| t.id == tries[0].id), "one event, retried");
    assert_eq!(verify(&secret, &tries).await["library"].as_array().unwrap().len(), 4);
    let shown = get(&server.url(&format!("/v1/account/webhooks/{endpoint_id}")), Some(&key)).await;
    let shown = shown.json()["data"].clone();
    assert_eq!(shown["enabled"], false, "{shown}");
    assert!(
        shown["disabled_reason"]
            .as_str()
            .unwrap()
            .contains("4 attempts in a row failed"),
        "{shown}"
    );
    let failed = deliveries(&server, &key, &endpoint_id).await[0].clone();
    assert_eq!(
        (&failed["state"], &failed["attempts"], &failed["last_status"]),
        (&json!("failed"), &json!(4), &json!(500))
    );
    let delivery_url = server.url(&format!(
        "/v1/account/webhooks/{endpoint_id}/deliveries/{}",
        failed["id"].as_str().unwrap()
    ));
    let detail = get(&delivery_url, Some(&key)).await.json()["data"].clone();
    assert_eq!(detail["attempts"].as_array().unwrap().len(), 4, "{detail}");
    // The receiver is an operator's exception (loopback): what it answers is not shown.
    assert_eq!(detail["attempts"][0]["status"], 500, "{detail}");
    assert!(detail["attempts"][0]["excerpt"].is_null(), "{detail}");
    // Disabled, it gets nothing more, and "send again" waits for it to be enabled.
    post_json(&server.url("/v1/account/keys"), Some(&key), &json!({})).await;
    let resend = post_json(&format!("{delivery_url}/resend"), Some(&key), &json!({})).await;
    assert_eq!(resend.status, 409, "{}", resend.text);
    let enabled = keyed(
        reqwest::Method::PATCH,
        &server.url(&format!("/v1/account/webhooks/{endpoint_id}")),
        &key,
        Some(&json!({ "enabled": true })),
    )
    .await;
    assert_eq!(enabled.json()["data"]["enabled"], true, "{}", enabled.text);
    receiver.answer(200);
    let resend = post_json(&format!("{delivery_url}/resend"), Some(&key), &json!({})).await;
    assert_eq!(
        (resend.status, &resend.json()["data"]["state"]),
        (200, &json!("pending")),
        "{}",
        resend.text
    );
    let again = receiver.until("sent again", |r| r.len() >= before + 5).await;
    assert_eq!(again[before + 4].id, tries[0].id, "the same event, sent again");
    assert_eq!(
        receiver.received().len(),
        before + 5,
        "the event made while disabled was not sent"
    );

    // 410 Gone disables the endpoint at once.
    receiver.answer(410);
    post_json(&server.url("/v1/account/keys"), Some(&key), &json!({})).await;
    receiver.until("one attempt", |r| r.len() >= before + 6).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let gone = loop {
        let shown = get(&server.url(&format!("/v1/account/webhooks/{endpoint_id}")), Some(&key))
            .await
            .json();
        if shown["data"]["enabled"] == false || std::time::Instant::now() > deadline {
            break shown["data"].clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(gone["disabled_reason"], "the endpoint answered 410 Gone", "{gone}");
    assert_eq!(receiver.received().len(), before + 6, "no retry after 410");
}

#[tokio::test]
async fn deliveries_written_while_no_server_runs_are_sent_when_one_starts() {
    let receiver = Receiver::start().await;
    let env = quick(TestEnv::new());
    let key = env.account_with_key("acme", "free");
    let server = env.serve();
    let endpoint = register(&server, &key, &receiver.url(), json!(["key.created"])).await;
    assert!(server.stop().success());
    // The CLI writes the key, its event and the delivery, and has exited: it sent nothing.
    env.cli_json(&["key", "create", "--account", "acme", "--name", "offline"]);
    assert!(receiver.received().is_empty());
    let _server = env.serve();
    let received = receiver.until("the key's event", |r| !r.is_empty()).await;
    assert_eq!(received[0].event()["data"]["name"], "offline");
    let checked = verify(endpoint["secret"].as_str().unwrap(), &received).await;
    assert_eq!(checked["refused"], json!([]), "{checked}");
}

/// An internal address the operator opened to plugins stays closed to webhooks: any account
/// may register an endpoint, so webhooks have their own exceptions.
#[tokio::test]
async fn the_plugins_private_exceptions_do_not_open_webhooks() {
    let receiver = Receiver::start().await;
    let env = TestEnv::new().with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", "127.0.0.1");
    let key = env.account_with_key("acme", "free");
    let server = env.serve();
    let refused = post_json(
        &server.url("/v1/account/webhooks"),
        Some(&key),
        &json!({ "url": receiver.url(), "events": ["*"] }),
    )
    .await;
    assert_eq!(
        (refused.status, refused.error_code()),
        (400, "validation_error".into()),
        "{}",
        refused.text
    );
    assert!(refused.error_message().contains("may not call"), "{}", refused.text);
}

/// A receiver that accepts connections and never answers (a tarpit), holding each until the
/// test ends; how many it holds.
async fn tarpit() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<tokio::net::TcpStream>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let holding = held.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            holding.lock().unwrap().push(stream);
        }
    });
    (port, held)
}

/// One account's backlog to receivers that never answer cannot hold back another account's
/// deliveries: the due ones are taken a few per endpoint with the accounts taking turns,
/// and one account's sends take half of a host's at most.
#[tokio::test(flavor = "multi_thread")]
async fn one_accounts_backlog_does_not_delay_anothers_delivery() {
    let (port, held) = tarpit().await;
    let receiver = Receiver::start().await;
    // The tarpit's sends do not time out while the test runs: the connections it holds are
    // the sends in flight.
    let env = TestEnv::new()
        .with_env("AGENT_HOST_WEBHOOK_ALLOW_PRIVATE", "127.0.0.1")
        .with_env("AGENT_HOST_WEBHOOK_POLL_MS", "50")
        .with_env("AGENT_HOST_OUTBOUND_TIMEOUT_MS", "120000")
        .with_env("AGENT_HOST_WEBHOOK_TIMEOUT_MS", "120000");
    let a = env.account_with_key("tarpitted", "pro");
    let b = env.account_with_key("bystander", "pro");
    let server = env.serve();
    for i in 0..20 {
        register(
            &server,
            &a,
            &format!("http://127.0.0.1:{port}/hook/{i}"),
            json!(["key.created"]),
        )
        .await;
    }
    // 15 keys to 20 endpoints: 300 deliveries due at once.
    for _ in 0..15 {
        let made = post_json(&server.url("/v1/account/keys"), Some(&a), &json!({})).await;
        assert_eq!(made.status, 201, "{}", made.text);
    }
    let due: i64 = env.sql("SELECT COUNT(*) FROM webhook_deliveries WHERE state IN ('pending', 'sending')")[0][0]
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(due, 300);
    time_until(
        Duration::from_secs(20),
        "the tarpit holding the first sends",
        || async { held.lock().unwrap().len() >= 4 },
    )
    .await;

    register(&server, &b, &receiver.url(), json!(["key.created"])).await;
    let asked = std::time::Instant::now();
    let made = post_json(&server.url("/v1/account/keys"), Some(&b), &json!({})).await;
    assert_eq!(made.status, 201);
    receiver.until("the bystander's delivery", |r| !r.is_empty()).await;
    let waited = asked.elapsed();
    assert!(waited < Duration::from_secs(3), "arrived after {waited:?}");
    assert!(
        held.lock().unwrap().len() <= 4,
        "the tarpitted account holds half the sends at most"
    );
}

/// A receiver that does not answer three times in a row is left alone for a while, all of
/// its deliveries: none of them holds a sending slot for its whole timeout meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn an_endpoint_that_keeps_timing_out_is_paused_as_a_whole() {
    let (port, held) = tarpit().await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_WEBHOOK_ALLOW_PRIVATE", "127.0.0.1")
        .with_env("AGENT_HOST_WEBHOOK_POLL_MS", "50")
        .with_env("AGENT_HOST_WEBHOOK_TIMEOUT_MS", "200")
        .with_env("AGENT_HOST_WEBHOOK_RETRY_SCHEDULE_SECS", "1,1,1,1,1,1");
    let key = env.account_with_key("acme", "pro");
    let server = env.serve();
    let endpoint = register(
        &server,
        &key,
        &format!("http://127.0.0.1:{port}/hook"),
        json!(["key.created"]),
    )
    .await;
    for _ in 0..6 {
        post_json(&server.url("/v1/account/keys"), Some(&key), &json!({})).await;
    }
    let id = endpoint["id"].as_str().unwrap().to_string();
    let paused = format!("SELECT paused_until FROM webhook_endpoints WHERE id = '{id}'");
    time_until(Duration::from_secs(30), "the endpoint paused", || async {
        env.sql(&paused)[0][0].is_some()
    })
    .await;
    let sent = held.lock().unwrap().len();
    assert!(
        (3..=4).contains(&sent),
        "three attempts in a row (two at once at most): {sent}; attempts {:?}; endpoint {:?}",
        env.sql("SELECT delivery_id, n, at, latency_ms, error FROM webhook_attempts ORDER BY at"),
        env.sql(&format!(
            "SELECT consecutive_timeouts, consecutive_failures, paused_until FROM webhook_endpoints WHERE id = '{id}'"
        ))
    );
    // Paused for 30 s: nothing more is sent meanwhile, though six deliveries are due.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(held.lock().unwrap().len(), sent, "nothing sent while paused");
    let waiting = deliveries(&server, &key, &id).await;
    assert!(waiting.iter().all(|d| d["state"] != "succeeded"), "{waiting:?}");
}
