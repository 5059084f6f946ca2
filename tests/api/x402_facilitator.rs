//! Facilitator mode: the operator's x402 facilitator (here the x402 reference's,
//! tests/node/facilitator.mjs, on the local chains) verifies and settles the payments
//! instead of the agent's wallet, which then needs no gas or fees. What it cannot answer
//! takes nothing from the payer. (The crash tests in facilitator mode are in
//! `x402_recovery`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::routing::post;
use serde_json::{Value, json};

use crate::support::chains::LocalBase;
use crate::support::facilitator::{RefFacilitator, fronted};
use crate::support::payers::{Payer, X402Client, pay_with};
use crate::support::x402::*;
use crate::support::*;

const AUTH: &str = "Bearer facilitator-secret";

/// A seller on Base whose wallet holds no gas, settling through `env`'s facilitator.
fn gasless_shop(env: TestEnv) -> (TestEnv, String) {
    env.create_account("acme", "free");
    env.apply_agent(&paid_manifest("seller"), "acme");
    let wallet = env.create_wallet("seller", "base");
    (env, wallet)
}

/// `client` buys `/hello` for `name`: the answer, and the settlement both the receipt and
/// the payment-response header name.
async fn buys_hello(client: X402Client, payer: &Payer<'_>, url: &str, name: &str) -> String {
    let paid = pay_with(client, payer, url, &json!({ "command": "hello", "name": name })).await;
    assert_eq!(paid.status, 200, "{client:?}: {}", paid.body);
    assert_eq!(paid.body["response"], format!("Hello, {name}!"));
    let transaction = paid.body["receipt"]["transactionSignature"].as_str().unwrap();
    assert_eq!(paid.payment_response["transaction"], transaction, "{client:?}");
    transaction.to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reference_facilitator_settles_both_versions_and_the_agent_pays_no_gas() {
    let chain = LocalBase::start().await;
    let facilitator = RefFacilitator::start(&chain, Some(AUTH)).await;
    let (env, wallet) = gasless_shop(
        TestEnv::new()
            .with_envs(chain.env())
            .with_envs(facilitator.env("base", Some(AUTH))),
    );
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let (payer, payer_address) = Payer::on_base(&chain, 1_000_000).await;

    for (client, name) in [(X402Client::Fetch2, "Ann"), (X402Client::Fetch1, "Bob")] {
        let transaction = buys_hello(client, &payer, &url, name).await;
        let transaction = transaction.as_str();
        // The facilitator's account sent the settlement and paid its gas.
        let receipt = chain.receipt(transaction).await;
        assert_eq!(receipt["status"], "0x1");
        assert_eq!(
            receipt["from"].as_str().unwrap().to_lowercase(),
            facilitator.evm.as_deref().unwrap().to_lowercase()
        );
    }
    assert_eq!(chain.usdc_of(&wallet).await, 100_000);
    assert_eq!(chain.usdc_of(&payer_address).await, 900_000);
    assert_eq!(chain.eth_of(&wallet).await, 0, "the agent's wallet paid no gas");
    let recorded = payments(&env);
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    assert!(recorded.iter().all(|p| p["state"] == "served"), "{recorded:?}");

    // A payment is used once, ever: the same signed payment for another request is refused
    // before the facilitator is asked.
    let hello = json!({ "command": "hello", "name": "Cy" });
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let signer: alloy::signers::local::PrivateKeySigner = payer.key.parse().unwrap();
    let signed = base_payment(&signer, &requirement, 50_000, 7, 60);
    assert_eq!(paid(&url, &hello, &signed).await.status, 200);
    let replay = paid(&url, &json!({ "command": "hello", "name": "Dee" }), &signed).await;
    assert_eq!(
        (replay.status, replay.json()["code"].clone()),
        (409, json!("payment_already_used"))
    );
    assert_eq!(chain.usdc_of(&payer_address).await, 850_000);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_facilitator_down_or_answering_garbage_takes_nothing() {
    let chain = LocalBase::start().await;
    let garbage = FakeServer::start(
        axum::Router::new()
            .route("/verify", post(|| async { axum::Json(json!({ "hello": "world" })) }))
            .route("/settle", post(|| async { "not json" })),
    )
    .await;
    let reference = RefFacilitator::start(&chain, Some(AUTH)).await;
    let (payer, payer_address) = Payer::on_base(&chain, 1_000_000).await;
    let signer: alloy::signers::local::PrivateKeySigner = payer.key.parse().unwrap();
    let cases = [
        ("http://127.0.0.1:9".to_string(), None, 503, "facilitator_unavailable"),
        (garbage.base.clone(), None, 502, "facilitator_error"),
        // The facilitator refuses us (401): no usable answer either.
        (reference.url.clone(), Some("Bearer wrong"), 502, "facilitator_error"),
    ];
    for (n, (facilitator_url, auth, status, code)) in cases.into_iter().enumerate() {
        let mut env = TestEnv::new()
            .with_envs(chain.env())
            .with_env("AGENT_HOST_X402_BASE_FACILITATOR_URL", &facilitator_url);
        if let Some(auth) = auth {
            env = env.with_env("AGENT_HOST_X402_BASE_FACILITATOR_AUTH", auth);
        }
        let (env, _) = gasless_shop(env);
        let server = env.serve();
        let url = server.url("/x402/base/seller");
        let hello = json!({ "command": "hello", "name": "Ann" });
        let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
        let reply = paid(
            &url,
            &hello,
            &base_payment(&signer, &requirement, 50_000, n as u8 + 1, 60),
        )
        .await;
        let body = reply.json();
        assert_eq!(
            (reply.status, body["code"].clone(), body["x402Version"].clone()),
            (status, json!(code), json!(1)),
            "{facilitator_url}: {}",
            reply.text
        );
        assert!(reply.header("retry-after").is_some());
        assert!(payments(&env).is_empty(), "nothing recorded: {:?}", payments(&env));
    }
    assert_eq!(chain.usdc_of(&payer_address).await, 1_000_000, "nothing was taken");
}

/// A facilitator's word that it settled is checked on our own node: one that claims a
/// settlement it never made (a made-up transaction, or a real one that paid someone else)
/// serves nothing and takes nothing; the payment waits, recorded, for recovery.
#[tokio::test(flavor = "multi_thread")]
async fn a_facilitator_that_claims_a_settlement_it_never_made_serves_nothing() {
    let chain = LocalBase::start().await;
    // A real transaction of the chain's that paid the agent nothing.
    let (stranger, _) = base_payer(&chain, 1_000).await;
    let unrelated = chain
        .send_as(
            &stranger.address().to_checksum(None),
            LocalBase::transfer_call("0x0000000000000000000000000000000000000001", 1),
            1_000_000_000,
        )
        .await;
    assert_eq!(chain.receipt(&unrelated).await["status"], "0x1");
    let made_up = format!("0x{}", "ab".repeat(32));
    for claimed in [made_up, unrelated] {
        let liar = FakeServer::start(
            axum::Router::new()
                .route("/verify", post(|| async { axum::Json(json!({ "isValid": true })) }))
                .route(
                    "/settle",
                    post(move || {
                        let claimed = claimed.clone();
                        async move {
                            axum::Json(json!({ "success": true, "transaction": claimed, "network": "eip155:8453" }))
                        }
                    }),
                ),
        )
        .await;
        let env = TestEnv::new()
            .with_envs(chain.env())
            .with_env("AGENT_HOST_X402_BASE_FACILITATOR_URL", &liar.base)
            .with_env("AGENT_HOST_X402_SETTLE_TIMEOUT_SECS", "1");
        let (env, wallet) = gasless_shop(env);
        let server = env.serve();
        let (payer, payer_address) = base_payer(&chain, 1_000_000).await;
        let url = server.url("/x402/base/seller");
        let hello = json!({ "command": "hello", "name": "Ann" });
        let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
        let reply = paid(&url, &hello, &base_payment(&payer, &requirement, 50_000, 1, 60)).await;
        assert_eq!(
            (reply.status, reply.json()["code"].clone()),
            (502, json!("facilitator_error")),
            "{}",
            reply.text
        );
        assert!(reply.json()["response"].is_null(), "nothing served: {}", reply.text);
        let recorded = payments(&env);
        assert_eq!(recorded.len(), 1, "{recorded:?}");
        assert_eq!(recorded[0]["state"], "verified", "left for recovery: {recorded:?}");
        assert_eq!(chain.usdc_of(&payer_address).await, 1_000_000, "nothing was taken");
        assert_eq!(chain.usdc_of(&wallet).await, 0);
    }
}

/// On Solana the facilitator's fee payer signs the payer's transaction and pays its fee:
/// the offer names it, both real clients pay, and the agent's wallet holds no SOL at all.
#[tokio::test(flavor = "multi_thread")]
async fn the_reference_facilitator_settles_on_solana_and_the_agent_pays_no_fee() {
    use crate::support::chains::LocalSolana;
    let chain = LocalSolana::start();
    let facilitator = RefFacilitator::on(None, Some(&chain), None).await;
    let fee_payer = facilitator.svm.clone().unwrap();
    let mut env = TestEnv::new()
        .with_envs(chain.env())
        .with_envs(facilitator.env("solana", None));
    env.create_account("acme", "free");
    env.apply_agent(&paid_manifest("seller"), "acme");
    let wallet = env.create_wallet("seller", "solana");
    chain.set_usdc(&wallet, 0).await; // the clients need payTo's token account to exist
    let server = env.serve();
    let url = server.url("/x402/solana/seller");
    let offered = post_x402(&url, &json!({ "message": "Hi" })).await.json();
    assert_eq!(offered["accepts"][0]["extra"]["feePayer"], fee_payer.as_str());
    let (payer, payer_address) = Payer::on_solana(&chain, 1_000_000).await;

    for (client, name) in [(X402Client::Fetch2, "Ann"), (X402Client::Fetch1, "Bob")] {
        let transaction = buys_hello(client, &payer, &url, name).await;
        let transaction = transaction.as_str();
        let sent = crate::support::chains::rpc(
            &chain.rpc_url,
            "getTransaction",
            json!([transaction, { "encoding": "json", "maxSupportedTransactionVersion": 0 }]),
        )
        .await;
        assert_eq!(
            sent["transaction"]["message"]["accountKeys"][0],
            fee_payer.as_str(),
            "the facilitator's fee payer paid the fee: {sent}"
        );
    }
    assert_eq!(chain.usdc_of(&wallet).await, Some(100_000));
    assert_eq!(chain.usdc_of(&payer_address).await, Some(900_000));
    assert_eq!(chain.sol_of(&wallet).await, 0, "the agent's wallet holds no SOL");
    let recorded = payments(&env);
    assert!(
        recorded.iter().all(|p| p["state"] == "served") && recorded.len() == 2,
        "{recorded:?}"
    );

    // With no way to learn the facilitator's fee payer, nothing is offered on Solana: an
    // offer naming the wrong fee payer could not be settled.
    env.set_env("AGENT_HOST_X402_SOLANA_FACILITATOR_URL", "http://127.0.0.1:9");
    let blind = env.serve();
    let reply = get(&blind.url("/x402/solana/seller"), None).await;
    assert_eq!(
        (reply.status, reply.json()["code"].clone()),
        (503, json!("facilitator_unavailable")),
        "{}",
        reply.text
    );
}

/// A facilitator that settles but answers `success: false` (its wait for the receipt timed
/// out, say): the payment is not failed on its word. It stays recorded; recovery finds the
/// transfer on chain and, since the answer never went out, refunds the payer.
#[tokio::test(flavor = "multi_thread")]
async fn a_settlement_the_facilitator_did_not_confirm_is_found_on_chain_and_refunded() {
    let chain = LocalBase::start().await;
    let reference = RefFacilitator::start(&chain, None).await;
    // In front of the reference facilitator: it passes everything on, and says the
    // settlement failed whatever happened.
    let upstream = reference.url.clone();
    let forward = move |path: &'static str| {
        let upstream = upstream.clone();
        move |axum::Json(body): axum::Json<Value>| async move {
            let answer: Value = client()
                .post(format!("{upstream}/{path}"))
                .json(&body)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            match path {
                "settle" => {
                    axum::Json(json!({ "success": false, "errorReason": "confirmation_timeout", "transaction": "" }))
                }
                _ => axum::Json(answer),
            }
        }
    };
    let lying = FakeServer::start(
        axum::Router::new()
            .route("/verify", post(forward("verify")))
            .route("/settle", post(forward("settle"))),
    )
    .await;
    let env = TestEnv::new()
        .with_envs(chain.env())
        .with_env("AGENT_HOST_X402_BASE_FACILITATOR_URL", &lying.base)
        .with_env("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1")
        .with_metrics();
    // The facilitator pays the settlement's gas; the refund is the agent's to send, and
    // its wallet holds no gas until the test gives it some.
    let (env, wallet) = gasless_shop(env);
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let (payer, payer_address) = Payer::on_base(&chain, 1_000_000).await;
    let signer: alloy::signers::local::PrivateKeySigner = payer.key.parse().unwrap();
    let hello = json!({ "command": "hello", "name": "Ann" });
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();

    // A payment meant to outlive the facilitator's wait by an hour is refused up front.
    let lasting = paid(&url, &hello, &base_payment(&signer, &requirement, 50_000, 1, 3_600)).await;
    assert_eq!(
        (lasting.status, lasting.json()["code"].clone()),
        (402, json!("invalid_payment"))
    );

    let reply = paid(&url, &hello, &base_payment(&signer, &requirement, 50_000, 2, 60)).await;
    assert_eq!(
        (reply.status, reply.json()["code"].clone()),
        (502, json!("facilitator_error")),
        "{}",
        reply.text
    );
    assert!(
        reply.json()["error"].as_str().unwrap().contains("recorded"),
        "{}",
        reply.text
    );
    assert_eq!(chain.usdc_of(&payer_address).await, 950_000, "the transfer did go out");
    // Recovery finds the settlement and starts the refund, which cannot go out yet: it
    // stays `refunding` pass after pass, and nothing is paid.
    newest_payment_becomes(&env, "refunding", std::time::Duration::from_secs(60)).await;
    server.after_a_full_recovery_pass().await;
    assert_eq!(payments(&env)[0]["state"], "refunding");
    assert_eq!(chain.usdc_of(&payer_address).await, 950_000);
    chain.set_eth(&wallet, 10u128.pow(16)).await; // the refund's gas
    // A landed payment is never failed (that state would end the wait here).
    let recorded = newest_payment_becomes(&env, "refunded", std::time::Duration::from_secs(60)).await;
    assert!(recorded["receipt"]["transactionSignature"].is_string(), "{recorded}");
    assert_eq!(payments(&env).len(), 1);
    server.after_a_full_recovery_pass().await;
    assert_eq!(chain.usdc_of(&payer_address).await, 1_000_000, "refunded, once");
    assert_eq!(chain.usdc_of(&wallet).await, 0);
}

/// `signer` sends `instructions` on the local Solana chain, paying the fee; its signature
/// once confirmed. A blockhash the node does not know yet is asked for again.
async fn send_solana(
    chain: &crate::support::chains::LocalSolana,
    signer: &solana_keypair::Keypair,
    instructions: &[solana_instruction::Instruction],
) -> String {
    use solana_signer::Signer;
    let rpc = crate::support::chains::rpc;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let signature = loop {
        let message = solana_message::Message::new_with_blockhash(
            instructions,
            Some(&signer.pubkey()),
            &latest_blockhash(chain).await,
        );
        let tx = solana_transaction::versioned::VersionedTransaction::try_new(
            solana_message::VersionedMessage::Legacy(message),
            &[signer],
        )
        .unwrap();
        let raw = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            bincode::serialize(&tx).unwrap(),
        );
        let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "sendTransaction", "params": [raw, { "encoding": "base64", "skipPreflight": true }] });
        let reply: Value = client()
            .post(&chain.rpc_url)
            .json(&call)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(signature) = reply["result"].as_str() {
            break signature.to_string();
        }
        assert!(
            reply["error"].to_string().contains("BlockhashNotFound") && std::time::Instant::now() < deadline,
            "{reply}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    loop {
        let status = rpc(&chain.rpc_url, "getSignatureStatuses", json!([[signature]])).await;
        let status = &status["value"][0];
        if !status.is_null() && status["confirmationStatus"] != "processed" {
            assert!(status["err"].is_null(), "{status}");
            return signature;
        }
        assert!(std::time::Instant::now() < deadline, "{signature} never confirmed");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// `owner` moves `micro` USDC from its own USDC account to itself: dust in its history.
fn dust(
    chain: &crate::support::chains::LocalSolana,
    owner: &solana_pubkey::Pubkey,
    micro: u64,
) -> solana_instruction::Instruction {
    let mint: solana_pubkey::Pubkey = chain.mint.parse().unwrap();
    let account = agent_host::chains::solana::associated_token_address(owner, &mint);
    spl_token_interface::instruction::transfer_checked(
        &spl_token_interface::ID,
        &account,
        &mint,
        &account,
        owner,
        &[],
        micro,
        6,
    )
    .unwrap()
}

/// ★ On Solana too, a facilitator's word is not a settlement: one that claims a settlement
/// it never made (a made-up signature, or a real transaction of someone else's) serves
/// nothing and takes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn on_solana_a_facilitator_that_claims_a_settlement_it_never_made_serves_nothing() {
    use crate::support::chains::LocalSolana;
    use solana_signer::Signer;
    let chain = LocalSolana::start();
    let reference = RefFacilitator::on(None, Some(&chain), None).await;
    let stranger = solana_keypair::Keypair::new();
    chain.set_sol(&stranger.pubkey().to_string(), 1_000_000_000).await;
    chain.set_usdc(&stranger.pubkey().to_string(), 1_000).await;
    let someone_elses = send_solana(&chain, &stranger, &[dust(&chain, &stranger.pubkey(), 1)]).await;
    let made_up = solana_signature::Signature::from([3; 64]).to_string();
    for claimed in [made_up, someone_elses] {
        let liar = fronted(&reference.url, Some(claimed)).await;
        let env = TestEnv::new()
            .with_env("AGENT_HOST_X402_SOLANA_FACILITATOR_URL", &liar.base)
            .with_env("AGENT_HOST_X402_SETTLE_TIMEOUT_SECS", "1");
        let (env, wallet) = solana_shop(&chain, env, "").await;
        let server = env.serve();
        let payer = solana_keypair::Keypair::new();
        chain.set_usdc(&payer.pubkey().to_string(), 1_000_000).await;
        let url = server.url("/x402/solana/seller");
        let hello = json!({ "command": "hello", "name": "Ann" });
        let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
        let reply = paid(
            &url,
            &hello,
            &solana_payment(&chain, &payer, &requirement, 50_000).await,
        )
        .await;
        assert_eq!(
            (reply.status, reply.json()["code"].clone()),
            (502, json!("facilitator_error")),
            "{}",
            reply.text
        );
        assert!(reply.json()["response"].is_null(), "nothing served: {}", reply.text);
        let recorded = payments(&env);
        assert_eq!(recorded.len(), 1, "{recorded:?}");
        assert_eq!(recorded[0]["state"], "verified", "left for recovery: {recorded:?}");
        assert_eq!(chain.usdc_of(&payer.pubkey().to_string()).await, Some(1_000_000));
        assert_eq!(chain.usdc_of(&wallet).await, Some(0));
    }
}

/// ★ A Solana settlement whose answer the facilitator lost is found on chain by the
/// payer's message, among the payer's other transactions, and refunded once (its answer
/// never went out).
#[tokio::test(flavor = "multi_thread")]
async fn on_solana_a_settlement_the_facilitator_did_not_confirm_is_found_by_its_message_and_refunded() {
    use crate::support::chains::LocalSolana;
    use solana_signer::Signer;
    let chain = LocalSolana::start();
    let reference = RefFacilitator::on(None, Some(&chain), None).await;
    let forgetful = fronted(&reference.url, None).await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_X402_SOLANA_FACILITATOR_URL", &forgetful.base)
        .with_env("AGENT_HOST_X402_SETTLE_TIMEOUT_SECS", "1");
    let (env, wallet) = solana_shop(&chain, env, "").await;
    let payer = solana_keypair::Keypair::new();
    let payer_address = payer.pubkey().to_string();
    chain.set_usdc(&payer_address, 1_000_000).await;
    chain.set_sol(&payer_address, 1_000_000_000).await;
    let url_path = "/x402/solana/seller";
    let hello = json!({ "command": "hello", "name": "Ann" });
    {
        let server = env.serve();
        let url = server.url(url_path);
        let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
        let reply = paid(
            &url,
            &hello,
            &solana_payment(&chain, &payer, &requirement, 50_000).await,
        )
        .await;
        assert_eq!(
            (reply.status, reply.json()["code"].clone()),
            (502, json!("facilitator_error")),
            "{}",
            reply.text
        );
    }
    assert_eq!(
        chain.usdc_of(&payer_address).await,
        Some(950_000),
        "the transfer did go out"
    );
    // The payer's account carries its own transactions after the settlement.
    for micro in 1..=5 {
        send_solana(&chain, &payer, &[dust(&chain, &payer.pubkey(), micro)]).await;
    }

    let mut env = env;
    env.set_env("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1");
    let _server = env.serve();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let recorded = loop {
        let recorded = payments(&env);
        assert_ne!(
            recorded[0]["state"], "failed",
            "a landed payment is never failed: {recorded:?}"
        );
        if recorded[0]["state"] == "refunded" {
            break recorded;
        }
        assert!(std::time::Instant::now() < deadline, "not refunded: {recorded:?}");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert!(
        recorded[0]["receipt"]["transactionSignature"].is_string(),
        "{recorded:?}"
    );
    assert_eq!(chain.usdc_of(&payer_address).await, Some(1_000_000), "refunded, once");
    assert_eq!(chain.usdc_of(&wallet).await, Some(0));
}

/// A stand-in facilitator that passes `/supported` to `upstream` (the reference's, so the
/// offer names its fee payer), answers `/verify` with `verdict`, and counts the `/settle`
/// calls, answering them with text that is not JSON.
async fn judging(upstream: &str, verdict: Value, settles: Arc<AtomicUsize>) -> FakeServer {
    let upstream = format!("{upstream}/supported");
    FakeServer::start(
        axum::Router::new()
            .route(
                "/supported",
                axum::routing::get(move || {
                    let upstream = upstream.clone();
                    async move {
                        axum::Json(
                            client()
                                .get(upstream)
                                .send()
                                .await
                                .unwrap()
                                .json::<Value>()
                                .await
                                .unwrap(),
                        )
                    }
                }),
            )
            .route(
                "/verify",
                post(move || {
                    let verdict = verdict.clone();
                    async move { axum::Json(verdict) }
                }),
            )
            .route(
                "/settle",
                post(move || {
                    let settles = settles.clone();
                    async move {
                        settles.fetch_add(1, Ordering::SeqCst);
                        "not json"
                    }
                }),
            ),
    )
    .await
}

/// A facilitator that finds a payment invalid is believed on both chains: `402
/// invalid_payment` with its reason, nothing recorded, and it is never asked to settle.
#[tokio::test(flavor = "multi_thread")]
async fn a_payment_the_facilitator_finds_invalid_is_refused_and_never_settled() {
    use crate::support::chains::LocalSolana;
    use solana_signer::Signer;
    let (base, solana) = (LocalBase::start().await, LocalSolana::start());
    let reference = RefFacilitator::on(Some(&base), Some(&solana), None).await;
    let settles = Arc::new(AtomicUsize::new(0));
    let believed = |reply: &Reply, env: &TestEnv, reason: &str| {
        assert_eq!(code(reply), (402, "invalid_payment".into()), "{}", reply.text);
        assert!(reply.text.contains(reason), "the facilitator's reason: {}", reply.text);
        assert!(payments(env).is_empty(), "nothing recorded: {:?}", payments(env));
    };

    // Base.
    let refusing = judging(
        &reference.url,
        json!({ "isValid": false, "invalidReason": "invalid_exact_evm_payload_authorization_value" }),
        settles.clone(),
    )
    .await;
    let env = TestEnv::new()
        .with_envs(base.env())
        .with_env("AGENT_HOST_X402_BASE_FACILITATOR_URL", &refusing.base);
    let (env, _) = gasless_shop(env);
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let (payer, payer_address) = base_payer(&base, 1_000_000).await;
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let reply = paid(&url, &hello, &base_payment(&payer, &requirement, 50_000, 1, 60)).await;
    believed(&reply, &env, "invalid_exact_evm_payload_authorization_value");
    assert_eq!(base.usdc_of(&payer_address).await, 1_000_000);

    // Solana.
    let refusing = judging(
        &reference.url,
        json!({ "isValid": false, "invalidReason": "invalid_exact_svm_payload_transaction_amount_mismatch" }),
        settles.clone(),
    )
    .await;
    let env = TestEnv::new().with_env("AGENT_HOST_X402_SOLANA_FACILITATOR_URL", &refusing.base);
    let (env, _) = solana_shop(&solana, env, "").await;
    let server = env.serve();
    let url = server.url("/x402/solana/seller");
    let payer = solana_keypair::Keypair::new();
    solana.set_usdc(&payer.pubkey().to_string(), 1_000_000).await;
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let reply = paid(
        &url,
        &hello,
        &solana_payment(&solana, &payer, &requirement, 50_000).await,
    )
    .await;
    believed(&reply, &env, "invalid_exact_svm_payload_transaction_amount_mismatch");
    assert_eq!(solana.usdc_of(&payer.pubkey().to_string()).await, Some(1_000_000));
    assert_eq!(settles.load(Ordering::SeqCst), 0, "never asked to settle");
}

/// On Solana too, a facilitator that answers garbage, or is gone by the time the payment
/// comes, takes nothing and records nothing.
#[tokio::test(flavor = "multi_thread")]
async fn on_solana_a_facilitator_down_or_answering_garbage_takes_nothing() {
    use crate::support::chains::LocalSolana;
    use solana_signer::Signer;
    let solana = LocalSolana::start();
    let reference = RefFacilitator::on(None, Some(&solana), None).await;
    let payer = solana_keypair::Keypair::new();
    solana.set_usdc(&payer.pubkey().to_string(), 1_000_000).await;
    let hello = json!({ "command": "hello", "name": "Ann" });
    for (going_down, status, code) in [
        (false, 502, "facilitator_error"),
        (true, 503, "facilitator_unavailable"),
    ] {
        let garbage = judging(&reference.url, json!({ "hello": "world" }), Arc::default()).await;
        let env = TestEnv::new().with_env("AGENT_HOST_X402_SOLANA_FACILITATOR_URL", &garbage.base);
        let (env, _) = solana_shop(&solana, env, "").await;
        let server = env.serve();
        let url = server.url("/x402/solana/seller");
        let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
        if going_down {
            drop(garbage);
        }
        let reply = paid(
            &url,
            &hello,
            &solana_payment(&solana, &payer, &requirement, 50_000).await,
        )
        .await;
        assert_eq!(
            (reply.status, reply.json()["code"].clone()),
            (status, json!(code)),
            "{}",
            reply.text
        );
        assert!(reply.header("retry-after").is_some(), "{}", reply.text);
        assert!(payments(&env).is_empty(), "nothing recorded: {:?}", payments(&env));
    }
    assert_eq!(solana.usdc_of(&payer.pubkey().to_string()).await, Some(1_000_000));
}
