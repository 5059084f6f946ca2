//! The money edges of a paid request on a real Solana chain (Surfpool), where they differ
//! from Base's (`x402_edges`): a settlement the node dropped, and a payment in the x402
//! specification's own form that its payer sent to the chain itself, before presenting it
//! or while we were sending it.

use std::time::Duration;

use serde_json::{Value, json};
use solana_keypair::Keypair;
use solana_signer::Signer;

use crate::support::chains::{LocalSolana, rpc};
use crate::support::proxy::NodeRelay;
use crate::support::x402::*;
use crate::support::*;

/// A payer holding `micro` USDC (and 0.1 SOL for the fees of the specification's form,
/// where it pays them), and its address.
async fn solana_payer(chain: &LocalSolana, micro: u64) -> (Keypair, String) {
    let payer = Keypair::new();
    let address = payer.pubkey().to_string();
    chain.set_sol(&address, 100_000_000).await;
    chain.set_usdc(&address, micro).await;
    (payer, address)
}

/// A payment of `amount` in the specification's own form: the payer its own fee payer,
/// the transaction signed whole (`compute_price` micro-lamports a unit).
async fn whole_signed(chain: &LocalSolana, payer: &Keypair, offered: &Value, amount: u64, compute_price: u8) -> String {
    solana_envelope(
        &payer.pubkey(),
        &priced(solana_instructions(&payer.pubkey(), offered, amount), compute_price),
        &[payer],
        latest_blockhash(chain).await,
        true,
    )
}

/// Sends a payment's transaction to the chain as the payer's own wallet would (`options`
/// of `sendTransaction`); its signature.
async fn send_as_the_payer(chain: &LocalSolana, payment: &str, options: Value) -> Value {
    let mut options = options;
    options["encoding"] = json!("base64");
    rpc(
        &chain.rpc_url,
        "sendTransaction",
        json!([b64_json(payment)["payload"]["transaction"], options]),
    )
    .await
}

/// The standard instructions with another compute price (`micro_lamports` a unit): another
/// message, so another payment, however alike the rest.
fn priced(
    mut instructions: Vec<solana_instruction::Instruction>,
    micro_lamports: u8,
) -> Vec<solana_instruction::Instruction> {
    instructions[1].data[1] = micro_lamports;
    instructions
}

/// A settlement the node refused to take never reached the chain: it is `failed`, the
/// payer is not cooled off (the agent paid no fee), its payment-identifier is free again,
/// and another payment under that id settles once.
#[tokio::test]
async fn a_settlement_the_solana_node_dropped_frees_its_id_and_the_next_payment_settles_once() {
    let chain = LocalSolana::start();
    let relay = NodeRelay::start(&chain.rpc_url, Duration::ZERO, 1).await;
    let (env, agent_wallet) = solana_shop(&chain, TestEnv::new(), "").await;
    let env = env.with_env("AGENT_HOST_SOLANA_RPC_URL", &relay.rpc_url);
    let server = env.serve();
    let (payer, payer_address) = solana_payer(&chain, 1_000_000).await;
    let url = server.url("/x402/solana/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let offered = payment_required(&post_x402(&url, &hello).await)["accepts"][0].clone();
    let fee_payer = solana_key(&offered["extra"]["feePayer"]);
    let transfer = solana_instructions(&payer.pubkey(), &offered, 50_000);
    let id = "pay_0c2e8b7d41f94a6e9d3b";
    let agent_sol = chain.sol_of(&agent_wallet).await;

    let blockhash = latest_blockhash(&chain).await;
    let first = solana_envelope(&fee_payer, &transfer, &[&payer], blockhash, false);
    let dropped = paid_v2(&url, &hello, &named_v2(&first, &offered, id)).await;
    assert_eq!(code(&dropped), (402, "settlement_failed".into()), "{}", dropped.text);
    assert_eq!(relay.refused(), 1);
    assert_eq!(payments(&env)[0]["state"], "failed");
    assert_eq!(chain.sol_of(&agent_wallet).await, agent_sol, "no fee paid");

    // At once (no cool-off), another payment under the same id: served, charged once.
    let next = solana_envelope(&fee_payer, &priced(transfer, 2), &[&payer], blockhash, false);
    let served = paid_v2(&url, &hello, &named_v2(&next, &offered, id)).await;
    assert_eq!(served.status, 200, "{}", served.text);
    assert_eq!(served.json()["response"], "Hello, Ann!");
    assert_eq!(chain.usdc_of(&payer_address).await, Some(950_000));
    assert_eq!(chain.usdc_of(&agent_wallet).await, Some(50_000));
    let states: Vec<Value> = payments(&env).iter().map(|p| p["state"].clone()).collect();
    assert_eq!(states, [json!("served"), json!("failed")], "newest first");
}

/// A payment in the specification's own form (the payer is the fee payer and signs it
/// all) that its payer's wallet sent to the chain itself before presenting it: the money
/// reached the agent, so the request is served, once, on that transaction, even though
/// the payer has nothing left; the agent sends nothing and pays nothing. One that landed
/// and failed is refused, saying so.
#[tokio::test]
async fn a_solana_payment_its_payer_landed_itself_is_served_once() {
    let chain = LocalSolana::start();
    let (env, agent_wallet) = solana_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    // Exactly the price: once it is on chain, the payer's balance covers nothing more.
    let (payer, payer_address) = solana_payer(&chain, 50_000).await;
    let url = server.url("/x402/solana/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let offered = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let payment = whole_signed(&chain, &payer, &offered, 50_000, 1).await;

    let landed = send_as_the_payer(&chain, &payment, json!({ "preflightCommitment": "confirmed" })).await;
    time_until(
        Duration::from_secs(20),
        "the payer's own transaction landing",
        || async { chain.usdc_of(&agent_wallet).await == Some(50_000) },
    )
    .await;
    let agent_sol = chain.sol_of(&agent_wallet).await;

    let reply = paid(&url, &hello, &payment).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json()["response"], "Hello, Ann!");
    assert_eq!(reply.json()["receipt"]["transactionSignature"], landed);
    assert_eq!(reply.json()["receipt"]["payer"], payer_address.as_str());
    // Presented again for another request: used once.
    let other = json!({ "message": "/hello Bob" });
    assert_eq!(
        code(&paid(&url, &other, &payment).await),
        (409, "payment_already_used".into())
    );

    // One its wallet sent that landed and failed (nothing to pay with): told so, not
    // settled again, nothing recorded.
    let payment = whole_signed(&chain, &payer, &offered, 50_000, 2).await;
    let failed = send_as_the_payer(&chain, &payment, json!({ "skipPreflight": true })).await;
    time_until(Duration::from_secs(20), "the failed transaction landing", || async {
        let status = rpc(
            &chain.rpc_url,
            "getSignatureStatuses",
            json!([[failed], { "searchTransactionHistory": true }]),
        )
        .await;
        !status["value"][0]["err"].is_null()
    })
    .await;
    let reply = paid(&url, &hello, &payment).await;
    assert_eq!(code(&reply), (402, "invalid_payment".into()), "{}", reply.text);
    assert!(reply.text.contains("landed and failed"), "{}", reply.text);

    assert_eq!(chain.usdc_of(&payer_address).await, Some(0));
    assert_eq!(chain.usdc_of(&agent_wallet).await, Some(50_000), "paid once");
    assert_eq!(chain.sol_of(&agent_wallet).await, agent_sol, "the agent paid nothing");
    let states: Vec<Value> = payments(&env).iter().map(|p| p["state"].clone()).collect();
    assert_eq!(states, [json!("served")]);
}

/// The payer's wallet sends its fully signed payment while our settlement of it is on its
/// way, and the node refuses ours (it has the payer's): the money reached the agent, so
/// the request is served on that transaction, not failed with the payer's money kept.
#[tokio::test]
async fn a_solana_payment_its_payer_sent_while_we_did_is_served_not_failed() {
    let chain = LocalSolana::start();
    let relay = NodeRelay::start(&chain.rpc_url, Duration::from_secs(3), 1).await;
    let (env, agent_wallet) = solana_shop(&chain, TestEnv::new(), "").await;
    let env = env.with_env("AGENT_HOST_SOLANA_RPC_URL", &relay.rpc_url);
    let server = env.serve();
    let (payer, payer_address) = solana_payer(&chain, 1_000_000).await;
    let url = server.url("/x402/solana/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let offered = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let payment = whole_signed(&chain, &payer, &offered, 50_000, 1).await;

    let request = {
        let (url, hello, payment) = (url.clone(), hello.clone(), payment.clone());
        tokio::spawn(async move { paid(&url, &hello, &payment).await })
    };
    time_until(Duration::from_secs(20), "our settlement at the node", || async {
        relay.arrived() == 1
    })
    .await;
    let landed = send_as_the_payer(&chain, &payment, json!({ "preflightCommitment": "confirmed" })).await;
    let reply = request.await.unwrap();
    assert_eq!(relay.refused(), 1, "ours was refused");
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json()["receipt"]["transactionSignature"], landed);
    assert_eq!(chain.usdc_of(&payer_address).await, Some(950_000));
    assert_eq!(chain.usdc_of(&agent_wallet).await, Some(50_000), "paid once");
    let states: Vec<Value> = payments(&env).iter().map(|p| p["state"].clone()).collect();
    assert_eq!(states, [json!("served")]);
}
