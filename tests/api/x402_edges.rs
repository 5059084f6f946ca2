//! The money edges of a paid request on a real chain (Anvil with Circle's FiatTokenV2_2),
//! each pinned where it used to rest on a fake chain or on nothing: a settlement the node
//! dropped, a payment presented again after its window, a retry of a refunded payment, an
//! answer too large or too old to keep, payers who cannot pay refused before any gas, and a
//! refund that cannot go out at first.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::chains::LocalBase;
use crate::support::proxy::NodeRelay;
use crate::support::side::Side;
use crate::support::x402::*;
use crate::support::*;

/// A settlement the node refused to take never moved money: it is `failed`, the payer
/// is not cooled off, its payment-identifier is free again, and a new signature under that
/// id settles once.
#[tokio::test]
async fn a_settlement_the_node_dropped_frees_its_id_and_the_next_signature_settles_once() {
    let chain = LocalBase::start().await;
    let relay = NodeRelay::start(&chain.rpc_url, Duration::ZERO, 1).await;
    let env = TestEnv::new();
    let (env, agent_wallet) = base_shop(&chain, env, "").await;
    let env = env.with_env("AGENT_HOST_BASE_RPC_URL", &relay.rpc_url);
    let server = env.serve();
    let (payer, payer_address) = base_payer(&chain, 1_000_000).await;
    let url = server.url("/x402/base/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let offered = payment_required(&post_x402(&url, &hello).await)["accepts"][0].clone();
    let id = "pay_5d1e0c7b9a8f46e2b3c4";
    let gas_before = chain.eth_of(&agent_wallet).await;

    let dropped = paid_v2(
        &url,
        &hello,
        &named_v2(&base_payment(&payer, &offered, 50_000, 1, 60), &offered, id),
    )
    .await;
    assert_eq!(code(&dropped), (402, "settlement_failed".into()), "{}", dropped.text);
    assert_eq!(relay.refused(), 1);
    assert_eq!(payments(&env)[0]["state"], "failed");
    assert_eq!(chain.eth_of(&agent_wallet).await, gas_before, "nothing was mined");

    // At once (no cool-off), a new signature under the same id: served, charged once.
    let next = paid_v2(
        &url,
        &hello,
        &named_v2(&base_payment(&payer, &offered, 50_000, 2, 60), &offered, id),
    )
    .await;
    assert_eq!(next.status, 200, "{}", next.text);
    assert_eq!(next.json()["response"], "Hello, Ann!");
    assert_eq!(chain.usdc_of(&payer_address).await, 950_000);
    assert_eq!(chain.usdc_of(&agent_wallet).await, 50_000);
    let states: Vec<Value> = payments(&env).iter().map(|p| p["state"].clone()).collect();
    assert_eq!(states, [json!("served"), json!("failed")], "newest first");
}

/// The same signed payment for the same request is the payer asking again only within
/// its window (`maxTimeoutSeconds`); after it, it is a copy: 409, charged nothing more. In
/// either version.
#[tokio::test]
async fn the_same_payment_after_its_window_is_refused_for_the_same_request() {
    let chain = LocalBase::start().await;
    let (env, agent_wallet) = base_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    let (payer, payer_address) = base_payer(&chain, 1_000_000).await;
    let url = server.url("/x402/base/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let offered = payment_required(&post_x402(&url, &hello).await)["accepts"][0].clone();
    let v1 = base_payment(&payer, &offered, 50_000, 1, 60);
    let v2 = as_v2(&base_payment(&payer, &offered, 50_000, 2, 60), &offered);

    for payment in [&v1, &v2] {
        let first = paid_either(&url, &hello, payment).await;
        assert_eq!(first.status, 200, "{}", first.text);
        let again = paid_either(&url, &hello, payment).await;
        assert_eq!(again.status, 200, "within its window: {}", again.text);
        assert_eq!(again.json()["response"], first.json()["response"]);
    }
    // Older than the window (60 s): the records are made two minutes older.
    env.sql("UPDATE payments SET created_at = created_at - 120000");
    for payment in [&v1, &v2] {
        let late = paid_either(&url, &hello, payment).await;
        assert_eq!(code(&late), (409, "payment_already_used".into()), "{}", late.text);
    }
    assert_eq!(chain.usdc_of(&payer_address).await, 900_000, "each charged once");
    assert_eq!(chain.usdc_of(&agent_wallet).await, 100_000);
}

/// A retry of a payment whose request failed and was refunded is told so, and no second
/// refund goes out, in either version.
#[tokio::test]
async fn a_retry_of_a_refunded_payment_names_the_refund_and_pays_nothing_more() {
    let chain = LocalBase::start().await;
    let (env, agent_wallet) = base_shop(&chain, TestEnv::new(), BROKEN).await;
    let server = env.serve();
    let (payer, payer_address) = base_payer(&chain, 1_000_000).await;
    let url = server.url("/x402/base/seller");
    let broken = json!({ "command": "broken" });
    let offered = payment_required(&post_x402(&url, &broken).await)["accepts"][0].clone();
    let v1 = base_payment(&payer, &offered, 20_000, 1, 60);

    let failed = paid(&url, &broken, &v1).await;
    assert_eq!(failed.status, 500, "{}", failed.text);
    assert!(
        failed.json()["refundTransactionSignature"].is_string(),
        "{}",
        failed.text
    );
    for retry in [
        paid(&url, &broken, &v1).await,
        paid_v2(&url, &broken, &as_v2(&v1, &offered)).await,
    ] {
        assert_eq!(code(&retry), (409, "payment_already_used".into()), "{}", retry.text);
        assert!(
            retry.json()["error"].as_str().unwrap().contains("refunded"),
            "{}",
            retry.text
        );
    }
    let transfers = env.cli_json(&["wallet", "transfers", "--agent", "seller"]);
    let refunds = transfers
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"] == "refund")
        .count();
    assert_eq!(refunds, 1, "{transfers}");
    assert_eq!(chain.usdc_of(&payer_address).await, 1_000_000, "paid back once");
    assert_eq!(chain.usdc_of(&agent_wallet).await, 0);
}

/// An answer larger than `x402_kept_answer_max_bytes` is answered once; one kept past its
/// retention is forgotten. A retry of either is told its answer is not kept, and the payer
/// is charged once, in either version.
#[tokio::test]
async fn an_answer_too_large_or_too_old_to_keep_is_not_served_again() {
    let chain = LocalBase::start().await;
    let long = format!(
        "\n[[commands]]\ncommand = \"essay\"\ndescription = \"A long text\"\nhandler_type = \"simple_text\"\nintegrations = [\"x402\"]\nprice_usd = 0.02\nconfig = {{ text = \"{}\" }}\n",
        "word ".repeat(400)
    );
    let env = TestEnv::new().with_env("AGENT_HOST_X402_KEPT_ANSWER_MAX_BYTES", "1024");
    let (env, agent_wallet) = base_shop(&chain, env, &long).await;
    let server = env.serve();
    let (payer, payer_address) = base_payer(&chain, 1_000_000).await;
    let url = server.url("/x402/base/seller");
    let not_kept = |reply: &Reply| {
        assert_eq!(code(reply), (409, "payment_already_used".into()), "{}", reply.text);
        assert!(
            reply.json()["error"].as_str().unwrap().contains("not kept"),
            "{}",
            reply.text
        );
    };

    // Each kind in either version, each payment its own (authorization nonces 1 to 4).
    let essay = json!({ "command": "essay" });
    let hello = json!({ "command": "hello", "name": "Ann" });
    let for_essay = payment_required(&post_x402(&url, &essay).await)["accepts"][0].clone();
    let for_hello = payment_required(&post_x402(&url, &hello).await)["accepts"][0].clone();
    for (version, nonce) in [(1, 1), (2, 3)] {
        let in_version = |payment: String, offered: &Value| match version {
            1 => payment,
            _ => as_v2(&payment, offered),
        };
        let payment = in_version(base_payment(&payer, &for_essay, 20_000, nonce, 60), &for_essay);
        let first = paid_either(&url, &essay, &payment).await;
        assert_eq!(first.status, 200, "v{version}: {}", first.text);
        assert!(first.text.len() > 1024);
        not_kept(&paid_either(&url, &essay, &payment).await);

        let payment = in_version(base_payment(&payer, &for_hello, 50_000, nonce + 1, 60), &for_hello);
        assert_eq!(paid_either(&url, &hello, &payment).await.status, 200);
        assert_eq!(
            paid_either(&url, &hello, &payment).await.status,
            200,
            "v{version}: kept while fresh"
        );
        env.sql("UPDATE payments SET answer_expires_at = 1 WHERE answer IS NOT NULL");
        not_kept(&paid_either(&url, &hello, &payment).await);
    }

    assert_eq!(
        chain.usdc_of(&payer_address).await,
        1_000_000 - 140_000,
        "each charged once"
    );
    assert_eq!(chain.usdc_of(&agent_wallet).await, 140_000);
}

/// A payer whose authorization cannot move the money (one micro-USDC short, or the
/// authorization cancelled on chain) is refused from a read of the chain: the agent sends
/// nothing, pays no gas, and nothing is recorded.
#[tokio::test]
async fn a_payer_who_cannot_pay_is_refused_before_any_gas() {
    let chain = LocalBase::start().await;
    let (env, agent_wallet) = base_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let offered = payment_required(&post_x402(&url, &hello).await)["accepts"][0].clone();
    let gas_before = chain.eth_of(&agent_wallet).await;

    let (short, _) = base_payer(&chain, 49_999).await;
    let v1 = base_payment(&short, &offered, 50_000, 1, 60);
    let refused = paid(&url, &hello, &v1).await;
    assert_eq!(code(&refused), (402, "insufficient_funds".into()), "{}", refused.text);
    let refused = paid_v2(
        &url,
        &hello,
        &as_v2(&base_payment(&short, &offered, 50_000, 2, 60), &offered),
    )
    .await;
    assert_eq!(code(&refused), (402, "insufficient_funds".into()), "{}", refused.text);

    let (cancelling, cancelling_address) = base_payer(&chain, 1_000_000).await;
    let payment = base_payment(&cancelling, &offered, 50_000, 3, 60);
    chain.cancel_authorization(&cancelling, [3; 32]).await;
    let refused = paid(&url, &hello, &payment).await;
    assert_eq!(code(&refused), (409, "payment_already_used".into()), "{}", refused.text);

    assert_eq!(chain.eth_of(&agent_wallet).await, gas_before, "no gas spent");
    assert_eq!(chain.pending().await, 0, "nothing sent");
    assert!(payments(&env).is_empty(), "nothing recorded");
    assert_eq!(chain.usdc_of(&cancelling_address).await, 1_000_000);
}

/// A failed command's refund that cannot go out (the agent's wallet has nothing left to pay
/// fees with: no ETH on Base, no SOL on Solana) stays
/// `refunding` across recovery passes; once the wallet is funded, exactly one refund lands
/// and the payer has every micro-USDC back.
#[tokio::test]
async fn a_refund_without_gas_waits_and_then_is_paid_once_on_base() {
    a_refund_without_fees_waits_and_then_is_paid_once("base").await;
}

#[tokio::test]
async fn a_refund_without_fees_waits_and_then_is_paid_once_on_solana() {
    a_refund_without_fees_waits_and_then_is_paid_once("solana").await;
}

async fn a_refund_without_fees_waits_and_then_is_paid_once(network: &str) {
    let side = Side::start(network).await;
    let reached = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let (at, go) = (reached.clone(), release.clone());
    let hook = FakeServer::start(axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let (at, go) = (at.clone(), go.clone());
            async move {
                at.notify_one();
                go.notified().await;
                (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "down")
            }
        }),
    ))
    .await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", &format!("127.0.0.1:{}", hook.port))
        .with_env("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1")
        .with_metrics();
    let failing = paid_webhook("failing", "Fails after it is paid", &hook.url("/hook"));
    let (env, agent_wallet) = side.shop(env, &failing, 1_000_000).await;
    let server = env.serve();
    let payer_address = side.payer();
    let url = server.url(&format!("/x402/{network}/seller"));
    let body = json!({ "command": "failing" });
    let offered = post_x402(&url, &body).await.json()["accepts"][0].clone();
    let payment = side.payment(&offered, 20_000, 1, 60).await;

    let request = tokio::spawn({
        let (url, body) = (url.clone(), body.clone());
        async move { paid(&url, &body, &payment).await }
    });
    // Settled, and the command running: the wallet's gas is taken away, then it fails.
    tokio::time::timeout(Duration::from_secs(30), reached.notified())
        .await
        .expect("the paid command never ran");
    side.fund_fees(&agent_wallet, false).await;
    release.notify_one();
    let failed = request.await.unwrap();
    assert_eq!(failed.status, 500, "{}", failed.text);
    assert!(failed.json()["refundTransactionSignature"].is_null(), "{}", failed.text);
    assert_eq!(side.usdc_of(&payer_address).await, 980_000);

    server.after_a_full_recovery_pass().await;
    server.after_a_full_recovery_pass().await;
    let waiting = payments(&env);
    assert_eq!(waiting[0]["state"], "refunding", "{waiting:?}");
    assert_eq!(
        waiting[0]["needs_operator"],
        Value::Null,
        "no gas is not a failed transfer: {waiting:?}"
    );
    assert_eq!(side.usdc_of(&payer_address).await, 980_000);

    side.fund_fees(&agent_wallet, true).await;
    newest_payment_becomes(&env, "refunded", Duration::from_secs(30)).await;
    server.after_a_full_recovery_pass().await;
    let transfers = env.cli_json(&["wallet", "transfers", "--agent", "seller"]);
    let confirmed = transfers
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"] == "refund" && t["state"] == "confirmed")
        .count();
    assert_eq!(confirmed, 1, "{transfers}");
    assert_eq!(side.usdc_of(&payer_address).await, 1_000_000, "every micro-USDC back");
    assert_eq!(side.usdc_of(&agent_wallet).await, 0);
}

/// A model provider that limits this server (429) costs the payers nothing and the agent
/// one refund: the message it refused is refunded with the provider's wait as
/// `Retry-After`, and while that wait lasts a paid message is refused before anyone pays.
#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limited_model_is_refused_before_anyone_pays_for_its_wait() {
    let chain = LocalBase::start().await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let llm = crate::support::fake_llm::fake_openai(
        Arc::new(|_, _| crate::support::fake_llm::rate_limited(30)),
        seen.clone(),
    )
    .await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "m")
        .with_env("AGENT_HOST_X402_REFUND_COOLOFF_SECS", "0");
    let (env, agent_wallet) = base_shop(&chain, env, "").await;
    let server = env.serve();
    let (payer, payer_address) = base_payer(&chain, 1_000_000).await;
    let url = server.url("/x402/base/seller");
    let ask = json!({ "message": "What is the weather like?" });
    let offered = post_x402(&url, &ask).await.json()["accepts"][0].clone();

    let first = paid(&url, &ask, &base_payment(&payer, &offered, 10_000, 1, 60)).await;
    assert_eq!(code(&first), (503, "model_unavailable".into()), "{}", first.text);
    assert!(first.json()["refundTransactionSignature"].is_string(), "{}", first.text);
    let wait: u64 = first
        .header("retry-after")
        .expect("the provider's wait")
        .parse()
        .unwrap();
    assert!((29..=30).contains(&wait), "{wait}");
    assert_eq!(chain.usdc_of(&payer_address).await, 1_000_000, "refunded");

    let gas_before = chain.eth_of(&agent_wallet).await;
    let second = paid(&url, &ask, &base_payment(&payer, &offered, 10_000, 2, 60)).await;
    assert_eq!(code(&second), (503, "model_unavailable".into()), "{}", second.text);
    assert!(second.json()["receipt"].is_null(), "nothing settled: {}", second.text);
    assert!(second.header("retry-after").is_some(), "{}", second.text);
    assert_eq!(payments(&env).len(), 1, "the second was never recorded");
    assert_eq!(chain.eth_of(&agent_wallet).await, gas_before, "no gas spent on it");
    assert_eq!(seen.lock().unwrap().len(), 1, "the provider was not asked again");
    assert_eq!(chain.usdc_of(&payer_address).await, 1_000_000);
}

/// Sends a payment in the header of its own version: `X-PAYMENT` (v1) or
/// `PAYMENT-SIGNATURE` (v2).
async fn paid_either(url: &str, body: &Value, payment: &str) -> Reply {
    match b64_json(payment)["x402Version"].as_u64() {
        Some(2) => paid_v2(url, body, payment).await,
        _ => paid(url, body, payment).await,
    }
}
