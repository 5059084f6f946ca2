//! A paid command's breaker: one that keeps failing for distinct payers (each refunded) is
//! paused before anyone else pays, on Base and on Solana, told to the owner, and tried
//! again once after its cooldown.

use std::time::Duration;

use serde_json::json;

use crate::support::chains::{LocalBase, LocalSolana};
use crate::support::x402::*;
use crate::support::*;

/// A paid command that keeps failing is paused by its breaker. One payer's failures count
/// once, so that payer alone pauses nothing for others; after two payers' refunded
/// failures, paid calls are refused before settlement (a 503 with the reason and
/// `Retry-After`, in both versions), except a retry of a payment made before, which gets
/// its kept answer; the owner sees it; after the cooldown one trial goes through, never for
/// a payer whose failure paused it: a failed trial pauses it again, a good one closes it.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_that_keeps_failing_is_paused_before_anyone_pays() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let healthy = Arc::new(AtomicBool::new(true));
    let flag = healthy.clone();
    let hook = FakeServer::start(axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let up = flag.load(Ordering::SeqCst);
            async move {
                if up {
                    (axum::http::StatusCode::OK, "all good now")
                } else {
                    (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "database down")
                }
            }
        }),
    ))
    .await;
    let flaky = paid_webhook("flaky", "Depends on a service that goes down", &hook.url("/hook"));
    let chain = LocalBase::start().await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", &format!("127.0.0.1:{}", hook.port))
        .with_env("AGENT_HOST_X402_BREAKER_FAILURES", "2")
        .with_env("AGENT_HOST_X402_BREAKER_COOLDOWN_SECS", "2")
        // Mallory pays again at once after each refund (the cool-off has a test of its own).
        .with_env("AGENT_HOST_X402_REFUND_COOLOFF_SECS", "0");
    let (env, _wallet) = base_shop(&chain, env, &flaky).await;
    let owner = env.create_key("acme");
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let ask = json!({ "command": "flaky" });
    let priced = post_x402(&url, &ask).await;
    let requirement = priced.json()["accepts"][0].clone();
    // Mallory and Bob will fail; Carol and Dave try it after.
    let mut payers = Vec::new();
    for _ in 0..4 {
        payers.push(base_payer(&chain, 1_000_000).await);
    }
    let mut nonce = 100;
    let mut pay = |who: usize| {
        nonce += 1;
        base_payment(&payers[who].0, &requirement, 20_000, nonce, 60)
    };
    let (mallory, bob, carol, dave) = (0, 1, 2, 3);

    // Carol's answer while the command is well: kept for a retry.
    let carols = pay(carol);
    let answered = paid(&url, &ask, &carols).await;
    assert_eq!(answered.status, 200, "{}", answered.text);
    healthy.store(false, Ordering::SeqCst);
    let failed = |reply: &Reply| {
        assert_eq!(code(reply), (500, "execution_error".into()), "{}", reply.text);
        assert!(reply.json()["refundTransactionSignature"].is_string(), "{}", reply.text);
    };
    // Mallory fails three times: counted once, so nobody else is refused.
    for _ in 0..3 {
        failed(&paid(&url, &ask, &pay(mallory)).await);
    }
    assert_eq!(post_x402(&url, &ask).await.status, 402, "paused by one payer");
    failed(&paid(&url, &ask, &pay(bob)).await);
    assert_eq!(chain.usdc_of(&payers[mallory].1).await, 1_000_000, "all refunded");
    assert_eq!(chain.usdc_of(&payers[bob].1).await, 1_000_000, "all refunded");

    // Paused: refused before settlement, asked the price or paid, in either version.
    let paused = |reply: &Reply, version: u64| {
        assert_eq!(code(reply), (503, "service_unavailable".into()), "{}", reply.text);
        assert_eq!(reply.json()["x402Version"], version);
        let message = reply.json()["error"].as_str().unwrap_or_default().to_string();
        assert!(message.contains("/flaky is paused"), "{message}");
        // The upstream's words are the owner's to read, not every caller's.
        assert!(!message.contains("database down"), "{message}");
        let retry: u64 = reply.header("retry-after").unwrap_or_default().parse().unwrap();
        assert!((1..=2).contains(&retry), "{retry}");
    };
    paused(&post_x402(&url, &ask).await, 1);
    paused(&paid(&url, &ask, &pay(dave)).await, 1);
    let offered_v2 = payment_required(&priced)["accepts"][0].clone();
    paused(&paid_v2(&url, &ask, &as_v2(&pay(dave), &offered_v2)).await, 2);
    // Carol's retry of her paid request still gets the answer she bought, paying nothing more.
    let retried = paid(&url, &ask, &carols).await;
    assert_eq!(retried.status, 200, "{}", retried.text);
    assert_eq!(retried.json()["response"], "all good now");
    assert_eq!(
        chain.usdc_of(&payers[dave].1).await,
        1_000_000,
        "nobody paid while paused"
    );
    assert_eq!(chain.usdc_of(&payers[carol].1).await, 1_000_000 - 20_000);
    // The other commands are still sold.
    let hello = json!({ "command": "hello", "name": "Ann" });
    assert_eq!(post_x402(&url, &hello).await.status, 402);

    // The owner sees it: on the account and in the command list.
    let account = get(&server.url("/v1/account"), Some(&owner)).await.json();
    let listed = &account["data"]["paused_commands"];
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{account}");
    assert_eq!(
        (&listed[0]["command"], &listed[0]["failures"]),
        (&json!("flaky"), &json!(2))
    );
    assert!(listed[0]["reason"].as_str().unwrap().contains("database down"));
    // The command list is served from the read cache, the agent's breakers with it: it
    // follows within the cache's bound.
    let list_url = server.url("/v1/agents/seller/commands");
    let paused_in_list = || async {
        let commands = get(&list_url, Some(&owner)).await.json();
        commands["data"]["commands"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c.get("paused").is_some())
            .map(|c| c["command"].as_str().unwrap().to_string())
            .collect::<Vec<String>>()
    };
    time_until(Duration::from_secs(3), "the listing to mark flaky paused", || async {
        paused_in_list().await == ["flaky"]
    })
    .await;

    // After the cooldown, one trial, never Mallory's or Bob's: Dave's fails, and the command
    // is paused again at once.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let opener = paid(&url, &ask, &pay(mallory)).await;
    assert_eq!(code(&opener), (503, "service_unavailable".into()), "{}", opener.text);
    failed(&paid(&url, &ask, &pay(dave)).await);
    paused(&paid(&url, &ask, &pay(carol)).await, 1);

    // The service is back: the next trial (Carol's) is served and the breaker closes.
    healthy.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let trial = paid(&url, &ask, &pay(carol)).await;
    assert_eq!(trial.status, 200, "{}", trial.text);
    assert_eq!(trial.json()["response"], "all good now");
    assert_eq!(paid(&url, &ask, &pay(mallory)).await.status, 200);
    let account = get(&server.url("/v1/account"), Some(&owner)).await.json();
    assert_eq!(account["data"]["paused_commands"], json!([]), "{account}");
    time_until(
        Duration::from_secs(3),
        "the listing to show flaky for sale again",
        || async { paused_in_list().await.is_empty() },
    )
    .await;
    let paid_by = |who: usize| chain.usdc_of(&payers[who].1);
    assert_eq!(
        paid_by(carol).await,
        1_000_000 - 2 * 20_000,
        "only the answers were paid"
    );
    assert_eq!(paid_by(mallory).await, 1_000_000 - 20_000, "only the answer was paid");
    assert_eq!(paid_by(dave).await, 1_000_000, "refunded");
}

/// On Solana too: a paid command failing for distinct payers is paused, and the next payer
/// is refused before the agent's wallet signs or pays a fee, in either version.
#[tokio::test]
async fn on_solana_a_command_that_keeps_failing_is_paused_before_anyone_pays() {
    use solana_signer::Signer;
    let chain = LocalSolana::start();
    let env = TestEnv::new()
        .with_env("AGENT_HOST_X402_BREAKER_FAILURES", "2")
        .with_env("AGENT_HOST_X402_BREAKER_COOLDOWN_SECS", "60");
    let (env, wallet) = solana_shop(&chain, env, BROKEN).await;
    let server = env.serve();
    let url = server.url("/x402/solana/seller");
    let broken = json!({ "command": "broken" });
    let priced = post_x402(&url, &broken).await;
    let requirement = priced.json()["accepts"][0].clone();
    let payer = || async {
        let payer = solana_keypair::Keypair::new();
        chain.set_usdc(&payer.pubkey().to_string(), 1_000_000).await;
        payer
    };
    for _ in 0..2 {
        let payer = payer().await;
        let reply = paid(
            &url,
            &broken,
            &solana_payment(&chain, &payer, &requirement, 20_000).await,
        )
        .await;
        assert_eq!(code(&reply), (500, "execution_error".into()), "{}", reply.text);
        assert!(reply.json()["refundTransactionSignature"].is_string(), "{}", reply.text);
        assert_eq!(
            chain.usdc_of(&payer.pubkey().to_string()).await,
            Some(1_000_000),
            "refunded"
        );
    }

    let sol_before = chain.sol_of(&wallet).await;
    let recorded = payments(&env).len();
    let next = payer().await;
    let paused = |reply: &Reply, version: u64| {
        assert_eq!(code(reply), (503, "service_unavailable".into()), "{}", reply.text);
        assert_eq!(reply.json()["x402Version"], version, "{}", reply.text);
        assert!(reply.header("retry-after").is_some(), "{}", reply.text);
    };
    paused(&post_x402(&url, &broken).await, 1);
    let payment = solana_payment(&chain, &next, &requirement, 20_000).await;
    paused(&paid(&url, &broken, &payment).await, 1);
    let offered_v2 = payment_required(&priced)["accepts"][0].clone();
    paused(&paid_v2(&url, &broken, &as_v2(&payment, &offered_v2)).await, 2);
    assert_eq!(chain.sol_of(&wallet).await, sol_before, "no fee paid while paused");
    assert_eq!(payments(&env).len(), recorded, "nothing recorded while paused");
    assert_eq!(chain.usdc_of(&next.pubkey().to_string()).await, Some(1_000_000));
    // The other commands are still sold.
    let hello = json!({ "command": "hello", "name": "Ann" });
    assert_eq!(post_x402(&url, &hello).await.status, 402);
}
