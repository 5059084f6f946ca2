//! Crashes around a paid request: the server is killed after the payer's money moved and
//! before the answer went out. After the restart every payment is found and finished:
//! the payer is refunded, once, and nothing is charged twice.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::chains::LocalBase;
use crate::support::facilitator::RefFacilitator;
use crate::support::payers::{Payer, X402Client, try_pay_with};
use crate::support::side::Side;
use crate::support::x402::*;
use crate::support::*;

/// A webhook that is reached and never answers: the paid command is mid-run when the
/// server dies.
async fn hanging_hook(reached: Arc<tokio::sync::Notify>) -> FakeServer {
    FakeServer::slow_hook(reached, Duration::from_secs(600), "too late").await
}

/// Waits until every payment has left `verified`, `settled` and `refunding`.
async fn settled_down(env: &TestEnv) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list = payments(env);
        let open = |p: &Value| ["verified", "settled", "refunding"].contains(&p["state"].as_str().unwrap());
        if !list.iter().any(open) {
            return list;
        }
        assert!(Instant::now() < deadline, "payments left unfinished: {list:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn payments_cut_off_by_a_crash_are_refunded_once_after_the_restart() {
    let chain = LocalBase::start().await;
    let solana = crate::support::chains::LocalSolana::start();
    let reached = Arc::new(tokio::sync::Notify::new());
    let hook = hanging_hook(reached.clone()).await;
    let stuck = paid_webhook("stuck", "Calls a webhook that never answers", &hook.url("/hook"));
    // First run: a settlement that lands but never gets its 1000 confirmations, so the
    // request is still waiting on it when the server dies.
    let mut env = TestEnv::new()
        .with_env("AGENT_HOST_BASE_RPC_URL", &chain.rpc_url)
        .with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", &format!("127.0.0.1:{}", hook.port))
        .with_env("AGENT_HOST_BASE_CONFIRMATIONS", "1000")
        .with_envs(solana.env());
    env.create_account("acme", "free");
    env.apply_agent(&format!("{}{stuck}", paid_manifest("seller")), "acme");
    let agent_wallet = env.create_wallet("seller", "base");
    chain.set_eth(&agent_wallet, 10u128.pow(16)).await;
    let (payer, payer_address) = Payer::on_base(&chain, 1_000_000).await;

    let mut server = env.serve();
    let url = server.url("/x402/base/seller");
    let request = {
        let (payer, url) = (payer.clone(), url.clone());
        tokio::spawn(async move {
            try_pay_with(
                X402Client::Fetch2,
                &payer,
                &url,
                &json!({ "command": "hello", "name": "Ann" }),
            )
            .await
        })
    };
    // Killed once the settlement is on chain (the money moved), before any answer.
    let deadline = Instant::now() + Duration::from_secs(30);
    while chain.usdc_of(&agent_wallet).await != 50_000 {
        assert!(Instant::now() < deadline, "the settlement never landed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.crash();
    let cut = request.await.unwrap();
    assert!(cut.is_err(), "no answer reached the payer: {:?}", cut.map(|p| p.body));
    assert_eq!(payments(&env)[0]["state"], "verified");

    // Second run: the settlement is found confirmed and, never answered, refunded.
    env.set_env("AGENT_HOST_BASE_CONFIRMATIONS", "1");
    let mut server = env.serve();
    let list = settled_down(&env).await;
    assert_eq!(list[0]["state"], "refunded", "{list:?}");
    assert_eq!(chain.usdc_of(&payer_address).await, 1_000_000);

    // Killed while the paid command runs, after settlement.
    let request = {
        let (payer, url) = (payer.clone(), server.url("/x402/base/seller"));
        tokio::spawn(
            async move { try_pay_with(X402Client::Fetch1, &payer, &url, &json!({ "command": "stuck" })).await },
        )
    };
    tokio::time::timeout(Duration::from_secs(30), reached.notified())
        .await
        .expect("the paid command never ran");
    server.crash();
    assert!(request.await.unwrap().is_err(), "no answer reached the payer");
    assert_eq!(chain.usdc_of(&payer_address).await, 980_000, "paid before the crash");
    // And two payments cut off before their settlement got anywhere: one never signed, one
    // (Solana) signed and stored but never sent, now past its blockhash.
    {
        env.sql(&format!(
            "INSERT INTO payments (id, identity, agent_id, network, payer, pay_to, amount, request, state, created_at, updated_at)
             SELECT 'pay_cut', 'base:cut', agent_id, 'base', '{payer_address}', pay_to, 10000, '{{}}', 'verified', 0, 0
             FROM payments LIMIT 1"
        ));
        let (signature, raw) = unsent_solana_transaction();
        env.sql(&format!(
            "INSERT INTO payments (id, identity, agent_id, network, payer, pay_to, amount, request, state,
                                   transaction_signature, raw_tx, created_at, updated_at)
             SELECT 'pay_unsent', 'solana:unsent', agent_id, 'solana', 'x', 'y', 10000, '{{}}', 'verified',
                    '{signature}', '{raw}', 0, 0
             FROM payments LIMIT 1"
        ));
    }

    // Third run: the served-never answer is refunded; the unsigned one failed, nothing taken.
    let _server = env.serve();
    let list = settled_down(&env).await;
    let state = |id: &str| list.iter().find(|p| p["id"] == id).map(|p| p["state"].clone());
    assert_eq!(list[0]["command"], "stuck");
    assert_eq!(list[0]["state"], "refunded", "{list:?}");
    assert_eq!(state("pay_cut"), Some(json!("failed")), "{list:?}");
    assert_eq!(state("pay_unsent"), Some(json!("failed")), "{list:?}");
    assert_eq!(chain.usdc_of(&payer_address).await, 1_000_000, "every cent came back");
    assert_eq!(chain.usdc_of(&agent_wallet).await, 0);
    // Each refund went out exactly once.
    let transfers = env.cli_json(&["wallet", "transfers", "--agent", "seller"]);
    let refunds: Vec<&Value> = transfers
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"] == "refund")
        .collect();
    assert_eq!(refunds.len(), 2, "{transfers}");
    assert!(refunds.iter().all(|t| t["state"] == "confirmed"), "{transfers}");
}

/// The steps of a paid request a crash can cut, in order.
const PAYMENT_STEPS: [&str; 6] = [
    "x402:after_sign",
    "x402:after_record",
    "x402:after_send",
    "x402:after_confirm",
    "x402:after_work",
    "x402:after_served",
];
/// The steps of a refund (a wallet transfer) a crash can cut.
const REFUND_STEPS: [&str; 5] = [
    "refund:after_start",
    "transfer:after_record",
    "transfer:after_sign",
    "transfer:after_send",
    "transfer:after_confirm",
];

/// Waits until no payment is unfinished and no transfer pending.
async fn all_settled(env: &TestEnv) -> (Vec<Value>, Vec<Value>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let payments = payments(env);
        let transfers = env.cli_json(&["wallet", "transfers", "--agent", "seller", "--limit", "100000"]);
        let transfers = transfers.as_array().unwrap().clone();
        let open = payments
            .iter()
            .any(|p| !["served", "refunded", "failed"].contains(&p["state"].as_str().unwrap()))
            || transfers.iter().any(|t| t["state"] == "pending");
        if !open {
            return (payments, transfers);
        }
        assert!(Instant::now() < deadline, "left unfinished: {payments:?} {transfers:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The ledger against the chain: the payer spent exactly what was served, the agent holds
/// exactly that, and each refunded payment has exactly one confirmed refund.
async fn ledger_matches_the_chain(side: &Side, env: &TestEnv, wallet: &str, funded: u64, step: &str) {
    let (payments, transfers) = all_settled(env).await;
    let served: u64 = payments
        .iter()
        .filter(|p| p["state"] == "served")
        .map(|p| p["receipt"]["amountPaidMicroUsdc"].as_u64().unwrap())
        .sum();
    assert_eq!(
        funded - side.usdc_of(&side.payer()).await,
        served,
        "{step}: the payer paid for what was served, once: {payments:?}"
    );
    assert_eq!(
        side.usdc_of(wallet).await,
        served,
        "{step}: the agent holds exactly that"
    );
    let refunds: Vec<&Value> = transfers
        .iter()
        .filter(|t| t["kind"] == "refund" && t["state"] == "confirmed")
        .collect();
    let refunded: Vec<&Value> = payments.iter().filter(|p| p["state"] == "refunded").collect();
    assert_eq!(
        refunds.len(),
        refunded.len(),
        "{step}: one refund per refunded payment: {transfers:?}"
    );
    for payment in refunded {
        let refund = refunds.iter().find(|t| t["id"] == payment["refund_transfer_id"]);
        assert!(refund.is_some(), "{step}: {payment} names its confirmed refund");
    }
}

/// Killed with SIGKILL at each step of a paid request and of its refund, restarted: every
/// USDC that arrived is served or refunded exactly once, nothing is served twice, no
/// transfer goes out twice (checked against the chain after every crash). With
/// `facilitated`, Base's payments are settled by the reference facilitator.
async fn a_crash_at_any_step_of_a_payment_loses_and_doubles_nothing(network: &str, facilitated: bool) {
    let side = Side::start(network).await;
    let mut env = TestEnv::new()
        .with_env("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1")
        .with_env("AGENT_HOST_X402_PAYER_LIMIT_PER_MINUTE", "1000")
        // One payer's calls fail and are refunded step after step (the cool-off after a
        // refund has a test of its own, x402_abuse).
        .with_env("AGENT_HOST_X402_REFUND_COOLOFF_SECS", "0");
    let facilitator = match (&side, facilitated) {
        (Side::Base(chain, _), true) => Some(RefFacilitator::on(Some(chain), None, None).await),
        (Side::Solana(chain, _), true) => Some(RefFacilitator::on(None, Some(chain), None).await),
        _ => None,
    };
    if let Some(facilitator) = &facilitator {
        env = env.with_envs(facilitator.env(network, None));
    }
    // A facilitator's payment recorded and never settled is failed once it has expired
    // (plus a margin for clocks): short-lived payments keep the wait short.
    let valid_for = if facilitated { 8 } else { 60 };
    let funded = 1_000_000;
    let (mut env, wallet) = side.shop(env, crate::support::x402::BROKEN, funded).await;
    let hello = json!({ "command": "hello", "name": "Ann" });
    let broken = json!({ "command": "broken" });
    // Recorded and never sent to the facilitator, a payment fails once it can no longer
    // land: the local Solana chain never expires a blockhash, so that step is Base's.
    let never_expires = facilitated && network == "solana";
    let steps = PAYMENT_STEPS
        .iter()
        .filter(|s| !(never_expires && **s == "x402:after_record"))
        .map(|s| (s, &hello, 50_000))
        .chain(REFUND_STEPS.iter().map(|s| (s, &broken, 20_000)));
    for (n, (step, body, price)) in steps.enumerate() {
        env.set_env("AGENT_HOST_TEST_FAULT", step);
        let server = env.serve();
        let url = server.url(&format!("/x402/{network}/seller"));
        let requirement = crate::support::x402::post_x402(&url, body).await.json()["accepts"][0].clone();
        let payment = side.payment(&requirement, price, n as u8 + 1, valid_for).await;
        let cut = client()
            .post(&url)
            .header("x-payment", &payment)
            .json(body)
            .send()
            .await;
        assert!(
            cut.is_err(),
            "{step}: the server should have died before answering: {cut:?}"
        );
        drop(server);
        env.set_env("AGENT_HOST_TEST_FAULT", "");
        let _restarted = env.serve();
        ledger_matches_the_chain(&side, &env, &wallet, funded, step).await;
    }
    // What each crash leads to: signed but never recorded, nothing happened; recorded, sent,
    // confirmed or worked on but never answered, refunded; answered (served), kept; cut
    // anywhere in a refund, refunded once. A facilitator is never asked twice: recorded and
    // not yet asked, the payment fails (nothing was taken) once it expires.
    let states: Vec<(String, String)> = payments(&env)
        .iter()
        .rev()
        .map(|p| {
            (
                p["command"].as_str().unwrap().into(),
                p["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    let first = match (facilitated, never_expires) {
        (_, true) => None,
        (true, false) => Some(["hello", "failed"]),
        (false, false) => Some(["hello", "refunded"]),
    };
    let expected: Vec<(String, String)> = first
        .into_iter()
        .chain([["hello", "refunded"]; 3])
        .chain([["hello", "served"]])
        .chain([["broken", "refunded"]; 5])
        .map(|[c, s]| (c.into(), s.into()))
        .collect();
    assert_eq!(states, expected);
}

#[tokio::test]
async fn a_crash_at_any_step_of_a_base_payment_loses_and_doubles_nothing() {
    a_crash_at_any_step_of_a_payment_loses_and_doubles_nothing("base", false).await;
}

#[tokio::test]
async fn a_crash_at_any_step_of_a_base_payment_a_facilitator_settles_loses_and_doubles_nothing() {
    a_crash_at_any_step_of_a_payment_loses_and_doubles_nothing("base", true).await;
}

#[tokio::test]
async fn a_crash_at_any_step_of_a_solana_payment_a_facilitator_settles_loses_and_doubles_nothing() {
    a_crash_at_any_step_of_a_payment_loses_and_doubles_nothing("solana", true).await;
}

#[tokio::test]
async fn a_crash_at_any_step_of_a_solana_payment_loses_and_doubles_nothing() {
    a_crash_at_any_step_of_a_payment_loses_and_doubles_nothing("solana", false).await;
}

/// Killed at each step of a wallet transfer and restarted: the transfer is sent at most
/// once, and its record says what the chain did (never sent: failed; else confirmed).
async fn a_crash_at_any_step_of_a_transfer_sends_it_at_most_once(network: &str) {
    let side = Side::start(network).await;
    let env = TestEnv::new().with_env("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1");
    let (mut env, wallet) = side.shop(env, "", 0).await;
    match &side {
        Side::Base(chain, _) => chain.mint_usdc(&wallet, 10_000_000).await,
        Side::Solana(chain, _) => chain.set_usdc(&wallet, 10_000_000).await,
    }
    let key = env.create_key("acme");
    let recipient = match &side {
        Side::Base(..) => alloy::signers::local::PrivateKeySigner::random()
            .address()
            .to_checksum(None),
        Side::Solana(..) => solana_signer::Signer::pubkey(&solana_keypair::Keypair::new()).to_string(),
    };
    let steps = [
        "transfer:after_record",
        "transfer:after_sign",
        "transfer:after_send",
        "transfer:after_confirm",
    ];
    for step in steps {
        env.set_env("AGENT_HOST_TEST_FAULT", step);
        let server = env.serve();
        let url = server.url(&format!("/v1/agents/seller/wallet/{network}/transfer"));
        let body = json!({ "recipientAddress": recipient, "amountUsdc": 1.5 });
        let cut = client().post(&url).header("x-api-key", &key).json(&body).send().await;
        assert!(cut.is_err(), "{step}: the server should have died before answering");
        drop(server);
        env.set_env("AGENT_HOST_TEST_FAULT", "");
        let _restarted = env.serve();
        all_settled(&env).await;
    }
    let transfers = env.cli_json(&["wallet", "transfers", "--agent", "seller"]);
    let states: Vec<&str> = transfers
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["failed", "confirmed", "confirmed", "confirmed"], "{transfers}");
    assert_eq!(side.usdc_of(&recipient).await, 4_500_000, "three sent, each once");
    assert_eq!(side.usdc_of(&wallet).await, 5_500_000);
}

#[tokio::test]
async fn a_crash_at_any_step_of_a_base_transfer_sends_it_at_most_once() {
    a_crash_at_any_step_of_a_transfer_sends_it_at_most_once("base").await;
}

#[tokio::test]
async fn a_crash_at_any_step_of_a_solana_transfer_sends_it_at_most_once() {
    a_crash_at_any_step_of_a_transfer_sends_it_at_most_once("solana").await;
}

/// 200 paid requests from the real clients (x402-fetch 1.2.0 and @x402/fetch 2.x, on Base
/// and on Solana; messages, commands, failing commands that are refunded, long-running jobs),
/// while the server is killed with SIGKILL at random moments and restarted (each kill cutting
/// payments in flight; a payer cut off waits for the server before its next). At the end the
/// ledger matches both chains: each payer paid exactly for what was served, the agent holds
/// exactly that, and every refunded payment has exactly one confirmed refund.
#[tokio::test(flavor = "multi_thread")]
async fn two_hundred_payments_cut_by_random_kills_leave_the_ledger_whole() {
    let (base, solana) = (LocalBase::start().await, crate::support::chains::LocalSolana::start());
    let env = TestEnv::new()
        .with_envs(base.env())
        .with_envs(solana.env())
        .with_env("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1")
        .with_env("AGENT_HOST_X402_CLIENT_LIMIT_PER_MINUTE", "100000")
        .with_env("AGENT_HOST_X402_PAYER_LIMIT_PER_MINUTE", "100000")
        // Every payment is tried: a payer refunded once is not turned away for the rest.
        .with_env("AGENT_HOST_X402_REFUND_COOLOFF_SECS", "0")
        .with_env("AGENT_HOST_X402_PAYER_COOLOFF_SECS", "0")
        // Nor is the failing command paused: its refunds are part of the ledger checked.
        .with_env("AGENT_HOST_X402_BREAKER_FAILURES", "100000");
    env.create_account("acme", "free");
    env.apply_agent(
        &format!(
            "{}{}{}",
            paid_manifest("seller"),
            crate::support::x402::BROKEN,
            crate::support::x402::REPORT
        ),
        "acme",
    );
    let base_wallet = env.create_wallet("seller", "base");
    let solana_wallet = env.create_wallet("seller", "solana");
    base.set_eth(&base_wallet, 10u128.pow(17)).await;
    solana.set_sol(&solana_wallet, 10_000_000_000).await;
    solana.set_usdc(&solana_wallet, 0).await;

    // Eight payers, four on each chain, each paying at least 25 times in turn, and on until
    // the server was killed five times (a fast machine pays 25 before that): at most 60.
    let mut payers = Vec::new();
    for _ in 0..4 {
        payers.push((Payer::on_base(&base, 4_000_000).await, "base"));
        payers.push((Payer::on_solana(&solana, 4_000_000).await, "solana"));
    }
    let kills_so_far = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let bodies = [
        json!({ "command": "hello", "name": "Ann" }),
        json!({ "command": "broken" }),
        json!({ "command": "report" }),
        json!({ "message": "/forecast Oslo" }),
    ];
    // The clients keep one address, the front's; the server behind it restarts on a new
    // port each time.
    let mut server = env.serve();
    let front = crate::support::proxy::Front::start(&server.base).await;
    let mut workers = tokio::task::JoinSet::new();
    for (i, ((payer, _), network)) in payers.iter().enumerate() {
        let (payer, url, health, bodies, kills_so_far) = (
            payer.clone(),
            format!("{}/x402/{network}/seller", front.base),
            format!("{}/health", front.base),
            bodies.clone(),
            kills_so_far.clone(),
        );
        workers.spawn(async move {
            let mut cut = 0;
            for n in 0..60 {
                if n >= 25 && kills_so_far.load(std::sync::atomic::Ordering::Relaxed) >= 5 {
                    break;
                }
                let x402 = X402Client::ALL[(i + n) % 2];
                let body = &bodies[(i + n) % bodies.len()];
                if try_pay_with(x402, &payer, &url, body).await.is_err() {
                    // Cut by a kill: as a client would, it waits for the server to answer
                    // again before its next payment.
                    cut += 1;
                    time_until(Duration::from_secs(60), "the server answers again", || async {
                        client()
                            .get(&health)
                            .send()
                            .await
                            .is_ok_and(|r| r.status().is_success())
                    })
                    .await;
                }
            }
            cut
        });
    }
    // Killed every 1 to 4 seconds (a paid request takes about one), restarted behind the
    // front at once.
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("random kills, seed {seed}");
    let (mut kills, mut cuts) = (0, 0);
    while !workers.is_empty() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let pause = Duration::from_millis(1_000 + seed % 3_000);
        tokio::select! {
            _ = tokio::time::sleep(pause) => {
                server.crash();
                kills += 1;
                kills_so_far.store(kills, std::sync::atomic::Ordering::Relaxed);
                server = env.serve();
                front.point_at(&server.base);
            }
            done = workers.join_next() => { cuts += done.unwrap().unwrap(); }
        }
    }
    eprintln!("{cuts} payments cut off by the kills");
    assert!(kills >= 5, "killed {kills} times");
    // Eight payers are paying at almost every moment: each kill cuts some in flight.
    assert!(cuts >= kills, "{kills} kills cut only {cuts} payments");

    let (payments, transfers) = all_settled(&env).await;
    let count = |state: &str| payments.iter().filter(|p| p["state"] == state).count();
    assert!(
        count("served") >= 20 && count("refunded") >= 5,
        "a meaningful mix: {payments:?}"
    );
    for ((payer, address), network) in &payers {
        let funded = 4_000_000;
        let held = match *network {
            "base" => base.usdc_of(address).await,
            _ => solana.usdc_of(address).await.unwrap_or(0),
        };
        let served: u64 = payments
            .iter()
            .filter(|p| p["receipt"]["payer"] == address.as_str() && p["state"] == "served")
            .map(|p| p["receipt"]["amountPaidMicroUsdc"].as_u64().unwrap())
            .sum();
        let theirs: Vec<String> = payments
            .iter()
            .filter(|p| p["receipt"]["payer"] == address.as_str())
            .map(|p| {
                format!(
                    "{} {} {} {} {}",
                    p["id"], p["command"], p["state"], p["receipt"]["transactionSignature"], p["error"]
                )
            })
            .collect();
        let refunds_to: Vec<String> = transfers
            .iter()
            .filter(|t| t["recipient"] == address.as_str())
            .map(|t| {
                format!(
                    "{} {} {} {}",
                    t["id"], t["state"], t["amount_micro_usdc"], t["signature"]
                )
            })
            .collect();
        assert_eq!(
            funded - held,
            served,
            "{} {address}: paid exactly for what was served\n{theirs:#?}\n{refunds_to:#?}\n{}",
            payer.network,
            server.log()
        );
    }
    let served_on = |network: &str| -> u64 {
        payments
            .iter()
            .filter(|p| p["network"] == network && p["state"] == "served")
            .map(|p| p["receipt"]["amountPaidMicroUsdc"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(base.usdc_of(&base_wallet).await, served_on("base"));
    assert_eq!(solana.usdc_of(&solana_wallet).await.unwrap_or(0), served_on("solana"));
    let refunds: Vec<&Value> = transfers
        .iter()
        .filter(|t| t["kind"] == "refund" && t["state"] == "confirmed")
        .collect();
    let refunded: Vec<&Value> = payments.iter().filter(|p| p["state"] == "refunded").collect();
    assert_eq!(refunds.len(), refunded.len(), "one refund each");
    eprintln!(
        "{kills} kills; {} payments: {} served, {} refunded, {} failed",
        payments.len(),
        count("served"),
        count("refunded"),
        count("failed")
    );
}

/// Killed between a paid job's failure and its refund: the payment still says `served`;
/// after the restart, a recovery pass starts the refund, once.
#[tokio::test]
async fn a_paid_jobs_refund_cut_off_by_a_crash_is_paid_after_the_restart() {
    let side = Side::start("base").await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1")
        .with_metrics();
    let funded = 1_000_000;
    let (mut env, wallet) = side.shop(env, crate::support::x402::SLOW_BROKEN, funded).await;
    env.set_env("AGENT_HOST_TEST_FAULT", "job:after_finish");
    let mut server = env.serve();
    let url = server.url("/x402/base/seller");
    let body = json!({ "command": "slowbroken" });
    let requirement = crate::support::x402::post_x402(&url, &body).await.json()["accepts"][0].clone();
    let payment = side.payment(&requirement, 40_000, 1, 60).await;
    let accepted = crate::support::x402::paid(&url, &body, &payment).await;
    assert_eq!(accepted.status, 202, "{}", accepted.text);
    // The job fails at once (nothing listens on port 9), and the server dies right after.
    let deadline = Instant::now() + Duration::from_secs(20);
    while client().get(server.url("/health")).send().await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "the server should have died after the job failed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.crash();
    assert_eq!(
        payments(&env)[0]["state"],
        "served",
        "cut off before the refund started"
    );
    assert_eq!(side.usdc_of(&side.payer()).await, funded - 40_000);

    env.set_env("AGENT_HOST_TEST_FAULT", "");
    let restarted = env.serve();
    newest_payment_becomes(&env, "refunded", Duration::from_secs(30)).await;
    restarted.after_a_full_recovery_pass().await;
    let (_, transfers) = all_settled(&env).await;
    let refunds: Vec<&Value> = transfers.iter().filter(|t| t["kind"] == "refund").collect();
    assert_eq!(refunds.len(), 1, "{transfers:?}");
    assert_eq!(side.usdc_of(&side.payer()).await, funded, "paid back in full");
    assert_eq!(side.usdc_of(&wallet).await, 0);
}
