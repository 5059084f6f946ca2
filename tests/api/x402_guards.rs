//! Solana payers with browser wallets: Phantom and Solflare add Lighthouse guard
//! instructions to the transactions they sign, before and after the transfer. Such a
//! payment settles; a guard that passes the host's simulation and fails on chain costs the
//! agent its fee payer's fee (within the cap) and the payer its cool-off; any other extra
//! program is still refused. (The guard program is a stand-in at Lighthouse's address:
//! `support::guards` says why.)

use serde_json::{Value, json};
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_signer::Signer;

use crate::support::chains::{LocalSolana, rpc};
use crate::support::guards::{ChangingRelay, LIGHTHOUSE, guard, guard_of, place_guard_program};
use crate::support::x402::*;
use crate::support::*;

const HELLO: u64 = 50_000;

async fn solana_payer(chain: &LocalSolana, micro: u64) -> Keypair {
    let payer = Keypair::new();
    chain.set_sol(&payer.pubkey().to_string(), 100_000_000).await;
    chain.set_usdc(&payer.pubkey().to_string(), micro).await;
    payer
}

fn hello() -> Value {
    json!({ "command": "hello", "name": "Ann" })
}

/// The standard payment with `before` guards ahead of the transfer and `after` ones behind.
async fn guarded_payment(
    chain: &LocalSolana,
    payer: &Keypair,
    offered: &Value,
    before: &[solana_instruction::Instruction],
    after: &[solana_instruction::Instruction],
) -> String {
    let mut instructions = solana_instructions(&payer.pubkey(), offered, HELLO);
    let transfer = instructions.pop().unwrap();
    instructions.extend_from_slice(before);
    instructions.push(transfer);
    instructions.extend_from_slice(after);
    solana_envelope(
        &solana_key(&offered["extra"]["feePayer"]),
        &instructions,
        &[payer],
        latest_blockhash(chain).await,
        false,
    )
}

/// How many of a landed transaction's instructions call `program`.
async fn calls_of(chain: &LocalSolana, signature: &str, program: &Pubkey) -> usize {
    let tx = rpc(
        &chain.rpc_url,
        "getTransaction",
        json!([signature, { "commitment": "confirmed", "maxSupportedTransactionVersion": 0, "encoding": "json" }]),
    )
    .await;
    assert!(tx["meta"]["err"].is_null(), "{tx}");
    let keys = tx["transaction"]["message"]["accountKeys"].as_array().unwrap();
    tx["transaction"]["message"]["instructions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| keys[i["programIdIndex"].as_u64().unwrap() as usize] == program.to_string())
        .count()
}

#[tokio::test]
async fn a_payment_guarded_as_phantom_signs_it_settles() {
    let chain = LocalSolana::start();
    place_guard_program(&chain, &LIGHTHOUSE).await;
    let (env, agent_wallet) = solana_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    let url = server.url("/x402/solana/seller");
    let offered = post_x402(&url, &hello()).await.json()["accepts"][0].clone();
    let payer = solana_payer(&chain, 1_000_000).await;
    // After the transfer, wallets assert on the accounts it moved money between (never the
    // fee payer's own account, which no instruction of a payment may name).
    let mint: Pubkey = offered["asset"].as_str().unwrap().parse().unwrap();
    let agent_usdc = agent_host::chains::solana::associated_token_address(&agent_wallet.parse().unwrap(), &mint);
    let payment = guarded_payment(
        &chain,
        &payer,
        &offered,
        &[guard(&payer.pubkey())],
        &[guard(&payer.pubkey()), guard(&agent_usdc)],
    )
    .await;
    let reply = paid(&url, &hello(), &payment).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json()["response"], "Hello, Ann!");
    let signature = reply.json()["receipt"]["transactionSignature"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        calls_of(&chain, &signature, &LIGHTHOUSE).await,
        3,
        "the guards ran on chain"
    );
    assert_eq!(chain.usdc_of(&agent_wallet).await, Some(HELLO));
    assert_eq!(
        chain.usdc_of(&payer.pubkey().to_string()).await,
        Some(1_000_000 - HELLO)
    );
}

/// The guard passed the host's simulation; by the time the transaction ran, what it asserts
/// had changed, so it failed on chain. The agent's wallet, its fee payer, paid the fee (at
/// most `x402_solana_max_fee_lamports`), nothing else; the payer is refused while it cools
/// off, and other payers are not.
#[tokio::test]
async fn a_guard_that_fails_on_chain_costs_the_agent_at_most_the_fee_and_cools_the_payer_off() {
    let chain = LocalSolana::start();
    place_guard_program(&chain, &LIGHTHOUSE).await;
    let guarded = Keypair::new().pubkey();
    chain.set_sol(&guarded.to_string(), 1_000_000).await;
    let relay = ChangingRelay::start(&chain, guarded).await;
    let (env, agent_wallet) = solana_shop(&chain, TestEnv::new(), "").await;
    let env = env.with_env("AGENT_HOST_SOLANA_RPC_URL", &relay.rpc_url);
    let server = env.serve();
    let url = server.url("/x402/solana/seller");
    let offered = post_x402(&url, &hello()).await.json()["accepts"][0].clone();
    let payer = solana_payer(&chain, 1_000_000).await;
    let agent_sol = chain.sol_of(&agent_wallet).await;

    let payment = guarded_payment(&chain, &payer, &offered, &[], &[guard(&guarded)]).await;
    let reply = paid(&url, &hello(), &payment).await;
    assert!(relay.changed(), "the transaction went to the chain");
    assert_eq!(code(&reply), (402, "settlement_failed".into()), "{}", reply.text);
    let spent = agent_sol - chain.sol_of(&agent_wallet).await;
    assert!(spent <= 20_000, "the agent paid {spent} lamports, over the fee cap");
    assert_eq!(chain.usdc_of(&payer.pubkey().to_string()).await, Some(1_000_000));
    assert_eq!(chain.usdc_of(&agent_wallet).await, Some(0));
    let recorded = payments(&env);
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0]["state"], "failed", "{recorded:?}");
    // The guard (the fourth instruction) failed its assertion, on chain.
    let error = recorded[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains(r#"{"InstructionError":[3,{"Custom":1}]}"#), "{error}");

    // The payer cools off; another payer is served.
    let again = guarded_payment(&chain, &payer, &offered, &[], &[]).await;
    let reply = paid(&url, &hello(), &again).await;
    assert_eq!(code(&reply), (429, "payer_cooling_off".into()), "{}", reply.text);
    let other = solana_payer(&chain, 1_000_000).await;
    let reply = paid(
        &url,
        &hello(),
        &guarded_payment(&chain, &other, &offered, &[], &[]).await,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
}

/// A guard is taken from Lighthouse only: the same assertion from any other program, even
/// beside a real guard, is refused before anything is signed or sent.
#[tokio::test]
async fn a_payment_with_any_other_extra_program_is_still_refused() {
    let chain = LocalSolana::start();
    place_guard_program(&chain, &LIGHTHOUSE).await;
    let imitation = Pubkey::new_unique();
    place_guard_program(&chain, &imitation).await;
    let (env, agent_wallet) = solana_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    let url = server.url("/x402/solana/seller");
    let offered = post_x402(&url, &hello()).await.json()["accepts"][0].clone();
    let payer = solana_payer(&chain, 1_000_000).await;
    let agent_sol = chain.sol_of(&agent_wallet).await;
    let payment = guarded_payment(
        &chain,
        &payer,
        &offered,
        &[guard(&payer.pubkey())],
        &[guard_of(&imitation, &payer.pubkey())],
    )
    .await;
    let reply = paid(&url, &hello(), &payment).await;
    assert_eq!(code(&reply), (402, "invalid_payment".into()), "{}", reply.text);
    assert!(reply.text.contains(&imitation.to_string()), "{}", reply.text);
    assert_eq!(chain.sol_of(&agent_wallet).await, agent_sol, "nothing was sent");
    assert!(payments(&env).is_empty());
}
