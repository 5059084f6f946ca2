//! Crashes around a paid request: the server is killed after the payer's money moved and
//! before the answer went out. After the restart every payment is found and finished:
//! the payer is refunded, once, and nothing is charged twice.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::post;
use serde_json::{Value, json};

use crate::support::chains::LocalBase;
use crate::support::payers::{Payer, X402Client, try_pay_with};
use crate::support::*;
use crate::x402::paid_manifest;

/// A webhook that is reached and never answers: the paid command is mid-run when the
/// server dies. Tells `reached` when it is called.
async fn hanging_hook(reached: Arc<tokio::sync::Notify>) -> FakeServer {
    let router = axum::Router::new().route(
        "/hook",
        post(move || {
            let reached = reached.clone();
            async move {
                reached.notify_one();
                tokio::time::sleep(Duration::from_secs(600)).await;
                "too late"
            }
        }),
    );
    FakeServer::start(router).await
}

/// A signed Solana transaction over a blockhash the chain never issued: it can never land.
pub(crate) fn unsent_solana_transaction() -> (String, String) {
    use solana_signer::Signer;
    let signer = solana_keypair::Keypair::new();
    let memo = solana_pubkey::Pubkey::from_str_const("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr");
    let message = solana_message::Message::new_with_blockhash(
        &[solana_instruction::Instruction::new_with_bytes(memo, b"cut", vec![])],
        Some(&signer.pubkey()),
        &solana_hash::Hash::new_unique(),
    );
    let signature = signer.sign_message(&message.serialize());
    let tx = solana_transaction::versioned::VersionedTransaction {
        signatures: vec![signature],
        message: solana_message::VersionedMessage::Legacy(message),
    };
    let raw = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        bincode::serialize(&tx).unwrap(),
    );
    (signature.to_string(), raw)
}

fn payments(env: &TestEnv) -> Vec<Value> {
    env.cli_json(&["payments", "list", "--agent", "seller"])
        .as_array()
        .unwrap()
        .clone()
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
    let stuck = format!(
        r#"
[[commands]]
command = "stuck"
description = "Calls a webhook that never answers"
handler_type = "webhook"
integrations = ["x402"]
price_usd = 0.02
config = {{ url = "{}" }}
"#,
        hook.url("/hook")
    );
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
        let db = rusqlite::Connection::open(env.data_dir().join("agent-host.db")).unwrap();
        db.execute(
            "INSERT INTO payments (id, identity, agent_id, network, payer, pay_to, amount, request, state, created_at, updated_at)
             SELECT 'pay_cut', 'base:cut', agent_id, 'base', ?1, pay_to, 10000, '{}', 'verified', 0, 0 FROM payments LIMIT 1",
            [&payer_address],
        )
        .unwrap();
        let (signature, raw) = unsent_solana_transaction();
        db.execute(
            "INSERT INTO payments (id, identity, agent_id, network, payer, pay_to, amount, request, state,
                                   transaction_signature, raw_tx, created_at, updated_at)
             SELECT 'pay_unsent', 'solana:unsent', agent_id, 'solana', 'x', 'y', 10000, '{}', 'verified', ?1, ?2, 0, 0
             FROM payments LIMIT 1",
            [&signature, &raw],
        )
        .unwrap();
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
