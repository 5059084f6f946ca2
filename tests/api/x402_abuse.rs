//! Payers who try to make the agent pay: for their fees, their failures, their refunds.
//! Each test plays the hostile payer against a real server on real local chains and checks
//! the agent's wallet to the lamport and the micro-USDC.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::chains::{LocalBase, LocalSolana};
use crate::support::x402::*;
use crate::support::*;

fn limit(units: u32) -> solana_instruction::Instruction {
    let mut data = vec![2];
    data.extend_from_slice(&units.to_le_bytes());
    solana_instruction::Instruction::new_with_bytes(COMPUTE_BUDGET, &data, vec![])
}

fn price(micro_lamports: u64) -> solana_instruction::Instruction {
    let mut data = vec![3];
    data.extend_from_slice(&micro_lamports.to_le_bytes());
    solana_instruction::Instruction::new_with_bytes(COMPUTE_BUDGET, &data, vec![])
}

/// The agent's wallet pays the fee of a co-signed Solana payment, so the fee it
/// may be charged is capped (signatures and priority fee, from the requested limit).
#[tokio::test]
async fn solana_fees_the_agent_pays_are_capped() {
    use solana_signer::Signer;
    let chain = LocalSolana::start();
    let (env, wallet) = solana_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    let payer = solana_keypair::Keypair::new();
    let payer_address = payer.pubkey().to_string();
    chain.set_usdc(&payer_address, 1_000_000).await;
    let url = server.url("/x402/solana/seller");
    let hello = json!({ "message": "/hello Ann" });
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let fee_payer = solana_key(&requirement["extra"]["feePayer"]);
    let pay = |budget: Vec<solana_instruction::Instruction>, blockhash| {
        let mut instructions = solana_instructions(&payer.pubkey(), &requirement, 50_000);
        instructions.splice(0..2, budget);
        solana_envelope(&fee_payer, &instructions, &[&payer], blockhash, false)
    };

    // The issue's abuse: 1,400,000 units at 5,000,000 micro-lamports, 7,010,000 lamports.
    let before = chain.sol_of(&wallet).await;
    let abusive = pay(vec![limit(1_400_000), price(5_000_000)], latest_blockhash(&chain).await);
    let reply = paid(&url, &hello, &abusive).await;
    assert_eq!(code(&reply), (402, "invalid_payment".into()), "{}", reply.text);
    assert!(reply.text.contains("7010000 lamports"), "{}", reply.text);
    // No limit set: the runtime's 1.4M units count, even at a small price.
    let unlimited = pay(vec![price(100)], latest_blockhash(&chain).await);
    assert_eq!(code(&paid(&url, &hello, &unlimited).await).0, 402);
    assert_eq!(chain.sol_of(&wallet).await, before, "refused: the agent paid nothing");

    // A stock client's payment costs the agent 10,001 lamports; one at the cap, 20,000.
    let stock = pay(vec![limit(20_000), price(1)], latest_blockhash(&chain).await);
    assert_eq!(paid(&url, &hello, &stock).await.status, 200);
    assert_eq!(before - chain.sol_of(&wallet).await, 10_001);
    let at_cap = pay(vec![limit(20_000), price(500_000)], latest_blockhash(&chain).await);
    let reply = paid(&url, &hello, &at_cap).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(before - chain.sol_of(&wallet).await, 10_001 + 20_000);
    let over = pay(vec![limit(20_000), price(500_100)], latest_blockhash(&chain).await);
    assert_eq!(code(&paid(&url, &hello, &over).await), (402, "invalid_payment".into()));
    assert_eq!(
        before - chain.sol_of(&wallet).await,
        30_001,
        "the most one request costs the agent"
    );
}

/// A payer holding one price sends twenty different payments at once. One is
/// served; the others are refused before anything is sent, because a payer's settlements
/// go one at a time, each checked against the balance the last one left. The agent pays
/// exactly one fee. A wallet's guard that names the agent's fee payer is refused.
#[tokio::test]
async fn a_payer_cannot_make_the_agent_pay_for_twenty_failures() {
    use solana_signer::Signer;
    let chain = LocalSolana::start();
    let (env, wallet) = solana_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    let payer = solana_keypair::Keypair::new();
    let payer_address = payer.pubkey().to_string();
    chain.set_usdc(&payer_address, 50_000).await; // one /hello
    let url = server.url("/x402/solana/seller");
    let hello = json!({ "message": "/hello Ann" });
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let fee_payer = solana_key(&requirement["extra"]["feePayer"]);
    let blockhash = latest_blockhash(&chain).await;

    let lighthouse = solana_pubkey::Pubkey::from_str_const("L2TExMFKdjpN9kozasaurPirfHy9P8sbXoAN1qA3S95");
    let mut asserting = solana_instructions(&payer.pubkey(), &requirement, 50_000);
    asserting.push(solana_instruction::Instruction::new_with_bytes(
        lighthouse,
        &[0],
        vec![solana_instruction::AccountMeta::new_readonly(fee_payer, false)],
    ));
    let reply = paid(
        &url,
        &hello,
        &solana_envelope(&fee_payer, &asserting, &[&payer], blockhash, false),
    )
    .await;
    assert_eq!(code(&reply), (402, "invalid_payment".into()), "{}", reply.text);
    assert!(reply.text.contains("fee payer"), "{}", reply.text);

    let before = chain.sol_of(&wallet).await;
    let mut racers = tokio::task::JoinSet::new();
    for i in 0..20u32 {
        // Twenty different transactions: each asks for a slightly different limit.
        let mut instructions = solana_instructions(&payer.pubkey(), &requirement, 50_000);
        instructions[0] = limit(20_000 + i);
        let payment = solana_envelope(&fee_payer, &instructions, &[&payer], blockhash, false);
        let (url, hello) = (url.clone(), hello.clone());
        racers.spawn(async move { paid(&url, &hello, &payment).await });
    }
    let replies = racers.join_all().await;
    let outcomes: Vec<(u16, String)> = replies.iter().map(code).collect();
    assert_eq!(outcomes.iter().filter(|(s, _)| *s == 200).count(), 1, "{outcomes:?}");
    // None of the others reached the chain: each was refused from the balance the served
    // one left, before anything was sent.
    assert!(
        outcomes
            .iter()
            .all(|(status, code)| *status == 200 || (*status == 402 && code == "insufficient_funds")),
        "{outcomes:?}"
    );
    assert!(
        payments(&env).iter().all(|p| p["state"] == "served"),
        "nothing else recorded: {:?}",
        payments(&env)
    );
    assert_eq!(
        before - chain.sol_of(&wallet).await,
        10_001,
        "exactly one fee, for the one that landed"
    );
    assert_eq!(chain.usdc_of(&payer_address).await, Some(0));
    assert_eq!(chain.usdc_of(&wallet).await, Some(50_000));
}

/// A Base settlement that lands and fails (the payer spent its USDC between our
/// checks and the block) costs the agent gas; that payer is refused for a while after.
#[tokio::test]
async fn a_payer_whose_settlement_failed_on_chain_is_cooled_off() {
    let chain = LocalBase::start().await;
    let (env, agent_wallet) = base_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    let (payer, payer_address) = base_payer(&chain, 50_000).await;
    let url = server.url("/x402/base/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();

    chain.set_automine(false).await;
    let payment = base_payment(&payer, &requirement, 50_000, 1, 60);
    let request = {
        let (url, hello) = (url.clone(), hello.clone());
        tokio::spawn(async move { paid(&url, &hello, &payment).await })
    };
    wait_for_pending(&chain, 1).await;
    // The payer empties its account in the same block, ahead of our settlement.
    let sink = alloy::signers::local::PrivateKeySigner::random()
        .address()
        .to_checksum(None);
    chain
        .send_as(&payer_address, LocalBase::transfer_call(&sink, 50_000), 100_000_000_000)
        .await;
    chain.mine().await;
    chain.set_automine(true).await;
    let reply = request.await.unwrap();
    assert_eq!(code(&reply), (402, "settlement_failed".into()), "{}", reply.text);
    assert_eq!(payments(&env)[0]["state"], "failed");

    // Funded again, the same payer is refused until its cool-off ends; others are not.
    chain.mint_usdc(&payer_address, 50_000).await;
    let again = paid(&url, &hello, &base_payment(&payer, &requirement, 50_000, 2, 60)).await;
    assert_eq!(code(&again), (429, "payer_cooling_off".into()), "{}", again.text);
    let wait: u64 = again.header("retry-after").unwrap().parse().unwrap();
    assert!(
        (590..=600).contains(&wait),
        "the default cool-off is 10 minutes: {wait}"
    );
    let other = alloy::signers::local::PrivateKeySigner::random();
    chain.mint_usdc(&other.address().to_checksum(None), 50_000).await;
    let reply = paid(&url, &hello, &base_payment(&other, &requirement, 50_000, 3, 60)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        chain.usdc_of(&payer_address).await,
        50_000,
        "the cooled-off payer paid nothing more"
    );
    assert_eq!(
        chain.usdc_of(&agent_wallet).await,
        50_000,
        "only the other payer's payment arrived"
    );
}

async fn wait_for_pending(chain: &LocalBase, count: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while chain.pending().await < count {
        assert!(Instant::now() < deadline, "our settlement never reached the pool");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

alloy::sol! {
    interface IAuthorization {
        function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter,
            uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s);
    }
}

/// The calldata that executes the authorization inside a Base X-PAYMENT value, as anyone
/// holding it can.
fn execute_authorization(payment: &str) -> Vec<u8> {
    use alloy::sol_types::SolCall;
    let envelope: Value =
        serde_json::from_slice(&base64::Engine::decode(&base64::engine::general_purpose::STANDARD, payment).unwrap())
            .unwrap();
    let auth = &envelope["payload"]["authorization"];
    let field = |name: &str| auth[name].as_str().unwrap().to_string();
    let signature: alloy::primitives::Signature = envelope["payload"]["signature"].as_str().unwrap().parse().unwrap();
    IAuthorization::transferWithAuthorizationCall {
        from: field("from").parse().unwrap(),
        to: field("to").parse().unwrap(),
        value: field("value").parse().unwrap(),
        validAfter: field("validAfter").parse().unwrap(),
        validBefore: field("validBefore").parse().unwrap(),
        nonce: field("nonce").parse().unwrap(),
        v: 27 + u8::from(signature.v()),
        r: signature.r().into(),
        s: signature.s().into(),
    }
    .abi_encode()
}

/// The payer's authorization executed by someone else, before our relay (in the
/// same block) or before the payment was even presented: the USDC reached the agent, so
/// the request is served, once, with that transaction as the receipt.
#[tokio::test]
async fn a_front_run_base_payment_is_served_not_failed() {
    let chain = LocalBase::start().await;
    let (env, agent_wallet) = base_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    let (payer, payer_address) = base_payer(&chain, 1_000_000).await;
    let url = server.url("/x402/base/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let relayer = alloy::signers::local::PrivateKeySigner::random()
        .address()
        .to_checksum(None);

    // In the same block, ahead of our relay.
    chain.set_automine(false).await;
    let payment = base_payment(&payer, &requirement, 50_000, 1, 60);
    let request = {
        let (url, hello, payment) = (url.clone(), hello.clone(), payment.clone());
        tokio::spawn(async move { paid(&url, &hello, &payment).await })
    };
    wait_for_pending(&chain, 1).await;
    let front_run = chain
        .send_as(&relayer, execute_authorization(&payment), 100_000_000_000)
        .await;
    chain.mine().await;
    chain.set_automine(true).await;
    let reply = request.await.unwrap();
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json()["receipt"]["transactionSignature"], front_run.as_str());
    assert_eq!(chain.usdc_of(&agent_wallet).await, 50_000);

    // Executed before it was presented: served on that transaction, and only once.
    let early = base_payment(&payer, &requirement, 50_000, 2, 60);
    let executed = chain
        .send_as(&relayer, execute_authorization(&early), 1_000_000_000)
        .await;
    assert_eq!(chain.receipt(&executed).await["status"], "0x1");
    let reply = paid(&url, &hello, &early).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json()["receipt"]["transactionSignature"], executed.as_str());
    // Presented again for another request: used once.
    let other = json!({ "message": "/hello Bob" });
    assert_eq!(
        code(&paid(&url, &other, &early).await),
        (409, "payment_already_used".into())
    );
    assert_eq!(chain.usdc_of(&agent_wallet).await, 100_000);
    assert_eq!(chain.usdc_of(&payer_address).await, 900_000, "paid twice, served twice");
    let states: Vec<Value> = payments(&env).iter().map(|p| p["state"].clone()).collect();
    assert_eq!(states, [json!("served"), json!("served")]);
    // Both are the owner's revenue, the one recorded already settled too.
    let key = env.create_key("acme");
    let usage = get(&server.url("/v1/account/agents/seller/usage"), Some(&key))
        .await
        .json();
    let totals = &usage["data"]["totals"];
    assert_eq!(
        (&totals["payments"], &totals["revenue_micro_usdc"]),
        (&json!({ "base": 2 }), &json!({ "base": 100_000 })),
        "{usage}"
    );
}

/// One transaction may execute many authorizations; each pays only what its own transfer
/// paid. A payer who pays the agent once with N1 and, in the same transaction, burns N2
/// paying itself nothing, cannot present N2 as a second payment: nothing is served for it,
/// nothing is refunded, nothing is sent. A batch that pays the agent for two payers (as a
/// facilitator settles) is two payments, each accepted once.
#[tokio::test]
async fn one_transfer_pays_for_one_authorization() {
    let chain = LocalBase::start().await;
    let (env, agent_wallet) = base_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    // Exactly the price: nothing left to pay a second time with.
    let (payer, payer_address) = base_payer(&chain, 50_000).await;
    let pays = base_payment(&payer, &requirement, 50_000, 1, 60);
    let mut to_itself = requirement.clone();
    to_itself["payTo"] = json!(payer_address);
    let burns = base_payment(&payer, &to_itself, 0, 2, 60);
    let batch = chain
        .batch([execute_authorization(&pays), execute_authorization(&burns)])
        .await;
    assert_eq!(chain.usdc_of(&agent_wallet).await, 50_000);
    let gas = chain.eth_of(&agent_wallet).await;

    // N2, presented as a payment to the agent: its own transfer paid the agent nothing.
    let n2 = base_payment(&payer, &requirement, 50_000, 2, 60);
    for body in [&hello, &json!({ "message": "/hello Bob" })] {
        assert_eq!(code(&paid(&url, body, &n2).await), (409, "payment_already_used".into()));
    }
    assert!(payments(&env).is_empty(), "{:?}", payments(&env));
    // N1: served once, on the batch's transaction, with nothing sent by the agent.
    let reply = paid(&url, &hello, &pays).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json()["receipt"]["transactionSignature"], batch.as_str());
    assert_eq!(
        code(&paid(&url, &json!({ "message": "/hello Bob" }), &n2).await),
        (409, "payment_already_used".into())
    );
    let states: Vec<Value> = payments(&env).iter().map(|p| p["state"].clone()).collect();
    assert_eq!(states, [json!("served")]);
    assert_eq!(chain.eth_of(&agent_wallet).await, gas, "the agent sent nothing");
    assert_eq!(chain.usdc_of(&agent_wallet).await, 50_000, "nothing refunded");

    // Two payers settled by one transaction: each its own transfer, each accepted once.
    let (ann, _) = base_payer(&chain, 50_000).await;
    let (bob, _) = base_payer(&chain, 50_000).await;
    let (ann_pays, bob_pays) = (
        base_payment(&ann, &requirement, 50_000, 3, 60),
        base_payment(&bob, &requirement, 50_000, 3, 60),
    );
    let both = chain
        .batch([execute_authorization(&ann_pays), execute_authorization(&bob_pays)])
        .await;
    for payment in [&ann_pays, &bob_pays] {
        let reply = paid(&url, &hello, payment).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(reply.json()["receipt"]["transactionSignature"], both.as_str());
        assert_eq!(
            code(&paid(&url, &json!({ "message": "/hello Bob" }), payment).await),
            (409, "payment_already_used".into())
        );
    }
    let served = payments(&env);
    assert_eq!(served.len(), 3, "{served:?}");
    assert!(served.iter().all(|p| p["state"] == "served"), "{served:?}");
    assert_eq!(chain.usdc_of(&agent_wallet).await, 150_000);
    assert_eq!(chain.eth_of(&agent_wallet).await, gas, "the agent sent nothing");
}

/// A payer whose account has code (here an EIP-7702 delegation) decides how much gas
/// USDC's check of its signature burns, and the agent pays that gas: a settlement that
/// would need more than `base_max_gas` is refused before anything is sent, whether the
/// check burns 2 million gas and then says yes, or loops for ever.
#[tokio::test]
async fn a_payer_whose_signature_check_burns_gas_is_refused_before_anything_is_sent() {
    use crate::support::chains::gas_burner;
    let chain = LocalBase::start().await;
    let (env, agent_wallet) = base_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    let (payer, payer_address) = base_payer(&chain, 1_000_000).await;
    let url = server.url("/x402/base/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let gas = chain.eth_of(&agent_wallet).await;
    let burners = [gas_burner(80_000), "0x5b600056".to_string()];
    for (n, burner) in burners.iter().enumerate() {
        chain.delegate(&payer_address, burner).await;
        let reply = paid(
            &url,
            &hello,
            &base_payment(&payer, &requirement, 50_000, n as u8 + 1, 60),
        )
        .await;
        assert_eq!(code(&reply), (402, "settlement_failed".into()), "{}", reply.text);
        assert_eq!(chain.pending().await, 0, "nothing sent");
        assert_eq!(chain.eth_of(&agent_wallet).await, gas, "the agent paid no gas");
        assert!(payments(&env).is_empty(), "{:?}", payments(&env));
    }
    assert_eq!(chain.usdc_of(&payer_address).await, 1_000_000);
}

/// A payer whose paid call was refunded (the agent paid the refund's fee) waits out
/// `x402_refund_cooloff_secs` before it may pay again, refused before anything is settled;
/// other payers are not held up.
#[tokio::test]
async fn a_refunded_payer_cools_off_and_others_do_not() {
    let chain = LocalBase::start().await;
    let (env, _) = base_shop(&chain, TestEnv::new(), BROKEN).await;
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let broken = json!({ "command": "broken" });
    let hello = json!({ "command": "hello", "name": "Ann" });
    let requirement = post_x402(&url, &broken).await.json()["accepts"][0].clone();
    let (ann, ann_address) = base_payer(&chain, 1_000_000).await;
    let (bob, _) = base_payer(&chain, 1_000_000).await;

    let failed = paid(&url, &broken, &base_payment(&ann, &requirement, 20_000, 1, 60)).await;
    assert_eq!(code(&failed), (500, "execution_error".into()), "{}", failed.text);
    assert!(
        failed.json()["refundTransactionSignature"].is_string(),
        "{}",
        failed.text
    );
    let hello_price = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let again = paid(&url, &hello, &base_payment(&ann, &hello_price, 50_000, 2, 60)).await;
    assert_eq!(code(&again), (429, "payer_cooling_off".into()), "{}", again.text);
    let wait: u64 = again.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=30).contains(&wait), "{wait}");
    assert_eq!(
        chain.usdc_of(&ann_address).await,
        1_000_000,
        "refunded, nothing more taken"
    );
    let other = paid(&url, &hello, &base_payment(&bob, &hello_price, 50_000, 1, 60)).await;
    assert_eq!(other.status, 200, "{}", other.text);
}

/// In wallet mode as in facilitator mode, an authorization must expire within the offer's
/// `maxTimeoutSeconds` and a margin for clocks: one signed to live an hour (anyone who
/// copies it could present it all that hour) is refused before anything is recorded.
#[tokio::test]
async fn a_base_authorization_that_outlives_the_offer_is_refused() {
    let chain = LocalBase::start().await;
    let (env, _) = base_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let (payer, _) = base_payer(&chain, 1_000_000).await;
    let lasting = paid(&url, &hello, &base_payment(&payer, &requirement, 50_000, 1, 3_600)).await;
    assert_eq!(code(&lasting), (402, "invalid_payment".into()), "{}", lasting.text);
    assert!(payments(&env).is_empty());
    assert_eq!(chain.pending().await, 0);
    let prompt = paid(&url, &hello, &base_payment(&payer, &requirement, 50_000, 2, 60)).await;
    assert_eq!(prompt.status, 200, "{}", prompt.text);
}

/// What the work needs is taken before the payment: with the account's only plugin slot
/// held, a paid command is refused (429) before anything is settled, rather than settled
/// and refunded at the agent's cost; so is a paid message while no model is configured
/// (503). Nothing is recorded and nothing taken.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_cannot_be_served_is_refused_before_anyone_pays() {
    use std::sync::Arc;
    let reached = Arc::new(tokio::sync::Notify::new());
    let hook = FakeServer::slow_hook(reached.clone(), Duration::from_secs(20), "slow answer").await;
    let chain = LocalBase::start().await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", &format!("127.0.0.1:{}", hook.port))
        .with_env("AGENT_HOST_PLUGIN_MAX_CONCURRENCY_PER_ACCOUNT", "1");
    let slow = paid_webhook("slow", "Takes its time", &hook.url("/hook"));
    let (env, _) = base_shop(&chain, env, &slow).await;
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let (ann, _) = base_payer(&chain, 1_000_000).await;
    let (bob, bob_address) = base_payer(&chain, 1_000_000).await;
    let slow_order = json!({ "command": "slow" });
    let slow_price = post_x402(&url, &slow_order).await.json()["accepts"][0].clone();
    let held = {
        let (url, payment) = (url.clone(), base_payment(&ann, &slow_price, 20_000, 1, 60));
        tokio::spawn(async move { paid(&url, &json!({ "command": "slow" }), &payment).await })
    };
    reached.notified().await;

    let hello = json!({ "command": "hello", "name": "Bob" });
    let hello_price = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let busy = paid(&url, &hello, &base_payment(&bob, &hello_price, 50_000, 1, 60)).await;
    assert_eq!(code(&busy), (429, "rate_limit_exceeded".into()), "{}", busy.text);
    let message = json!({ "message": "hi" });
    let message_price = post_x402(&url, &message).await.json()["accepts"][0].clone();
    let no_model = paid(&url, &message, &base_payment(&bob, &message_price, 10_000, 2, 60)).await;
    assert_eq!(code(&no_model), (503, "model_unavailable".into()), "{}", no_model.text);
    assert_eq!(chain.usdc_of(&bob_address).await, 1_000_000, "nothing taken from Bob");
    let recorded = payments(&env);
    assert_eq!(recorded.len(), 1, "only Ann's: {recorded:?}");
    held.abort();
}

/// A settlement not confirmed in time answers 500 (over MCP: a tool error whose
/// settlement says `success: false` and names the transaction) and is finished by the
/// running service (confirmed, then refunded: the answer never reached the payer), no
/// restart.
#[tokio::test]
async fn a_stuck_settlement_is_finished_while_the_service_runs() {
    let chain = LocalBase::start().await;
    let (env, agent_wallet) = base_shop(
        &chain,
        TestEnv::new()
            .with_env("AGENT_HOST_X402_SETTLE_TIMEOUT_SECS", "2")
            .with_env("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1"),
        WEATHER,
    )
    .await;
    let server = env.serve();
    let (payer, payer_address) = base_payer(&chain, 1_000_000).await;
    let url = server.url("/x402/base/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();

    let (mcp_payer, mcp_payer_address) = crate::support::payers::Payer::on_base(&chain, 1_000_000).await;
    chain.set_automine(false).await;
    let reply = paid(&url, &hello, &base_payment(&payer, &requirement, 50_000, 1, 60)).await;
    assert_eq!(code(&reply), (500, "internal_error".into()), "{}", reply.text);
    assert!(reply.text.contains("not confirmed in time"), "{}", reply.text);
    assert_eq!(payments(&env)[0]["state"], "verified");

    let pay = json!({ "network": "base", "key": mcp_payer.key, "rpcUrl": mcp_payer.rpc_url,
                      "networkId": crate::support::payers::network_id("base") });
    let run = crate::support::mcp::sdk_client(&json!({
        "url": server.url("/mcp/seller"),
        "calls": [{ "name": "weather", "arguments": { "city": "Oslo" }, "pay": pay }],
    }))
    .await;
    let result = &run["results"][0]["result"];
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["code"], "internal_error", "{result}");
    let settlement = &result["_meta"]["x402/payment-response"];
    assert_eq!(settlement["success"], false, "{result}");
    assert_eq!(settlement["errorReason"], "settlement_pending", "{result}");
    assert_eq!(
        settlement["payer"].as_str().unwrap().to_lowercase(),
        mcp_payer_address.to_lowercase()
    );
    assert!(
        settlement["transaction"].as_str().unwrap().starts_with("0x"),
        "{settlement}"
    );

    chain.set_automine(true).await;
    chain.mine().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while payments(&env).iter().any(|p| p["state"] != "refunded") {
        assert!(Instant::now() < deadline, "{:?}", payments(&env));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(payments(&env).iter().all(|p| p["refund_transfer_id"].is_string()));
    assert_eq!(chain.usdc_of(&payer_address).await, 1_000_000, "paid and refunded");
    assert_eq!(chain.usdc_of(&mcp_payer_address).await, 1_000_000, "paid and refunded");
    assert_eq!(chain.usdc_of(&agent_wallet).await, 0);
}

/// A refund never creates the payer's token account: a payer who closed it after
/// paying is owed the refund, visibly, and paid once the account is back.
#[tokio::test]
async fn a_refund_never_creates_an_account() {
    use solana_signer::Signer;
    let chain = LocalSolana::start();
    let slow_failure = format!(
        r#"
[[commands]]
command = "stuck"
description = "A long job that times out"
handler_type = "custom"
plugin = "{}"
integrations = ["x402"]
price_usd = 0.02
long_running = true
timeout_ms = 3000
"#,
        plugin_path("probe")
    );
    let (env, wallet) = solana_shop(
        &chain,
        TestEnv::new().with_env("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1"),
        &slow_failure,
    )
    .await;
    let server = env.serve();
    let payer = solana_keypair::Keypair::new();
    let payer_address = payer.pubkey().to_string();
    chain.set_usdc(&payer_address, 20_000).await; // exactly the price
    chain.set_sol(&payer_address, 100_000_000).await; // to close its account
    let url = server.url("/x402/solana/seller");
    let stuck = json!({ "command": "stuck", "mode": "loop" });
    let requirement = post_x402(&url, &stuck).await.json()["accepts"][0].clone();
    let fee_payer = solana_key(&requirement["extra"]["feePayer"]);
    let instructions = solana_instructions(&payer.pubkey(), &requirement, 20_000);
    let payment = solana_envelope(
        &fee_payer,
        &instructions,
        &[&payer],
        latest_blockhash(&chain).await,
        false,
    );
    let before = chain.sol_of(&wallet).await;
    let reply = paid(&url, &stuck, &payment).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    // The payer closes its emptied account while the job runs, and keeps the rent.
    chain.close_usdc_account(&payer).await;
    let status = poll_job(reply.json()["statusUrl"].as_str().unwrap(), Duration::from_secs(20)).await;
    assert_eq!(status["state"], "failed", "{status}");
    let owed = newest_payment_becomes(&env, "refund_owed", Duration::from_secs(20)).await;
    assert!(owed["error"].as_str().unwrap().contains("owed"), "{owed}");
    assert_eq!(
        chain.usdc_of(&payer_address).await,
        None,
        "no account was created for it"
    );
    assert_eq!(
        before - chain.sol_of(&wallet).await,
        10_001,
        "the agent paid the settlement fee, no rent"
    );

    // The payer opens its account again: the owed refund is paid.
    chain.set_usdc(&payer_address, 0).await;
    newest_payment_becomes(&env, "refunded", Duration::from_secs(40)).await;
    assert_eq!(chain.usdc_of(&payer_address).await, Some(20_000));
}

/// A command refusing the payer's own input (after its parameters passed) is
/// served, not refunded; a failure of the agent's own is refunded. On both chains.
#[tokio::test]
async fn the_payers_own_bad_input_is_not_refunded_on_base() {
    the_payers_own_bad_input_is_not_refunded("base").await;
}

#[tokio::test]
async fn the_payers_own_bad_input_is_not_refunded_on_solana() {
    the_payers_own_bad_input_is_not_refunded("solana").await;
}

async fn the_payers_own_bad_input_is_not_refunded(network: &str) {
    let side = crate::support::side::Side::start(network).await;
    let probe = format!(
        r#"
[[commands]]
command = "probe"
description = "Does what it is told"
handler_type = "custom"
plugin = "{}"
integrations = ["x402"]
price_usd = 0.02
"#,
        plugin_path("probe")
    );
    let (env, agent_wallet) = side.shop(TestEnv::new(), &probe, 1_000_000).await;
    let server = env.serve();
    let payer_address = side.payer();
    let url = server.url(&format!("/x402/{network}/seller"));
    let bogus = json!({ "command": "probe", "mode": "bogus" });
    let requirement = post_x402(&url, &bogus).await.json()["accepts"][0].clone();

    let reply = paid(&url, &bogus, &side.payment(&requirement, 20_000, 1, 60).await).await;
    assert_eq!(code(&reply), (400, "validation_error".into()), "{}", reply.text);
    assert!(reply.json()["receipt"].is_object());
    assert!(
        reply.json().get("refundTransactionSignature").is_none(),
        "{}",
        reply.text
    );
    assert_eq!(payments(&env)[0]["state"], "served");
    assert_eq!(side.usdc_of(&payer_address).await, 980_000);

    let crash = json!({ "command": "probe", "mode": "panic" });
    let reply = paid(&url, &crash, &side.payment(&requirement, 20_000, 2, 60).await).await;
    assert_eq!(code(&reply), (500, "execution_error".into()), "{}", reply.text);
    assert!(reply.json()["refundTransactionSignature"].is_string(), "{}", reply.text);
    assert_eq!(
        side.usdc_of(&payer_address).await,
        980_000,
        "the agent's failure was refunded"
    );
    assert_eq!(
        side.usdc_of(&agent_wallet).await,
        20_000,
        "the agent keeps what was served"
    );
}

/// An RPC node's address (often carrying a provider's API key) never reaches an
/// answer: not a payer's, not an account holder's. The log keeps the detail.
#[tokio::test]
async fn an_rpc_nodes_address_never_reaches_a_caller() {
    use solana_signer::Signer;
    let secret = "SECRET-PROVIDER-KEY-42";
    let env = TestEnv::new()
        .with_env(
            "AGENT_HOST_SOLANA_RPC_URL",
            &format!("http://127.0.0.1:9/rpc?api-key={secret}"),
        )
        .with_env("AGENT_HOST_LOG", "warn");
    let key = env.account_with_key("acme", "free");
    env.apply_agent(&paid_manifest("seller"), "acme");
    env.create_wallet("seller", "solana");
    let server = env.serve();
    let url = server.url("/x402/solana/seller");
    let hello = json!({ "message": "/hello Ann" });
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let payer = solana_keypair::Keypair::new();
    let instructions = solana_instructions(&payer.pubkey(), &requirement, 50_000);
    let payment = solana_envelope(
        &solana_key(&requirement["extra"]["feePayer"]),
        &instructions,
        &[&payer],
        solana_hash::Hash::new_unique(),
        false,
    );
    let reply = paid(&url, &hello, &payment).await;
    assert_eq!(code(&reply), (500, "internal_error".into()), "{}", reply.text);
    assert_eq!(reply.json()["error"], "The solana RPC node failed; try again later");
    let balance = get(&server.url("/v1/agents/seller/wallet/solana/balance"), Some(&key)).await;
    assert_eq!(balance.status, 500, "{}", balance.text);
    for text in [&reply.text, &balance.text] {
        assert!(!text.contains(secret) && !text.contains("127.0.0.1:9"), "{text}");
    }
    assert!(server.log().contains("solana RPC node failed"), "the detail is logged");
}

/// Serves with the crash point `fault` set and pays for `body`: the server dies there.
async fn crash_at(
    env: &mut TestEnv,
    fault: &str,
    payer: &alloy::signers::local::PrivateKeySigner,
    body: &Value,
    nonce: u8,
    price: u64,
) {
    env.set_env("AGENT_HOST_TEST_FAULT", fault);
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let requirement = post_x402(&url, body).await.json()["accepts"][0].clone();
    let payment = base_payment(payer, &requirement, price, nonce, 60);
    let cut = client().post(&url).header("x-payment", payment).json(body).send().await;
    assert!(cut.is_err(), "the server died before answering: {cut:?}");
    env.set_env("AGENT_HOST_TEST_FAULT", "");
}

/// The answer never leaves without its payment marked served, and a served
/// payment is never refunded: killed after the work, the payer is refunded (it got no
/// answer); killed after the mark, it is not.
#[tokio::test]
async fn a_served_request_is_never_refunded() {
    let chain = LocalBase::start().await;
    let (mut env, agent_wallet) = base_shop(
        &chain,
        TestEnv::new()
            .with_env("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1")
            .with_metrics(),
        REPORT,
    )
    .await;
    let (payer, payer_address) = base_payer(&chain, 1_000_000).await;
    let hello = json!({ "command": "hello", "name": "Ann" });
    let report = json!({ "command": "report" });

    // Killed after the work, before the mark: no answer went out, so a refund.
    crash_at(&mut env, "x402:after_work", &payer, &hello, 1, 50_000).await;
    let server = env.serve();
    let refunded = newest_payment_becomes(&env, "refunded", Duration::from_secs(30)).await;
    assert_eq!(refunded["command"], "hello");
    assert_eq!(chain.usdc_of(&payer_address).await, 1_000_000);
    assert_eq!(chain.usdc_of(&agent_wallet).await, 0);
    drop(server);

    // Killed after the mark: served stays served.
    crash_at(&mut env, "x402:after_served", &payer, &hello, 2, 50_000).await;
    let server = env.serve();
    server.after_a_full_recovery_pass().await;
    assert_eq!(payments(&env)[0]["state"], "served");
    assert_eq!(chain.usdc_of(&payer_address).await, 950_000);
    assert_eq!(chain.usdc_of(&agent_wallet).await, 50_000);
    drop(server);

    // A paid job: queued and served in one write, so it either runs or is refunded.
    crash_at(&mut env, "x402:after_work", &payer, &report, 3, 30_000).await;
    let server = env.serve();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (payment, job) = loop {
        let payment = payments(&env)[0].clone();
        let job = match payment["job_id"].as_str() {
            Some(id) => get(&server.url(&format!("/jobs/{id}")), None).await.json(),
            None => Value::Null,
        };
        let done = matches!(
            (payment["state"].as_str().unwrap(), job["state"].as_str().unwrap_or("")),
            ("served", "succeeded") | ("refunded", "failed")
        );
        if done {
            break (payment, job);
        }
        assert!(Instant::now() < deadline, "{payment} {job}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let paid_back = chain.usdc_of(&payer_address).await;
    match payment["state"].as_str().unwrap() {
        "served" => assert_eq!(paid_back, 920_000, "ran, not refunded: {job}"),
        _ => assert_eq!(paid_back, 950_000, "refunded, did not run: {job}"),
    }
}

/// Item 4, Solana: a settlement the chain never took, past the last block its blockhash
/// allows, is declared failed by the running service (nothing was taken), no restart.
#[tokio::test]
async fn an_expired_solana_settlement_is_failed_while_the_service_runs() {
    let chain = LocalSolana::start();
    let (env, _) = solana_shop(
        &chain,
        TestEnv::new().with_env("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1"),
        "",
    )
    .await;
    let _server = env.serve();
    // Planted after the start: the recovery that runs at start cannot have seen it.
    let (signature, raw) = unsent_solana_transaction();
    env.sql(&format!(
        "INSERT INTO payments (id, identity, agent_id, network, payer, pay_to, amount, request, state,
                               transaction_signature, raw_tx, valid_until, created_at, updated_at)
         SELECT 'pay_expired', 'solana:{signature}', id, 'solana', 'payer', 'agent', 10000, '{{}}', 'verified',
                '{signature}', '{raw}', 1, 0, 0
         FROM agents WHERE username = 'seller'"
    ));
    let failed = newest_payment_becomes(&env, "failed", Duration::from_secs(20)).await;
    assert_eq!(failed["id"], "pay_expired");
    assert!(failed["error"].as_str().unwrap().contains("expired"), "{failed}");
}
