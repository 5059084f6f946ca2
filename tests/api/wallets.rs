//! Agent wallets against real local chains: Surfpool (Solana, real SPL Token and
//! Associated Token programs) and Anvil (chain id 8453) with Circle's FiatTokenV2_2.
//! Every transfer is checked on chain, to the micro-USDC.

use serde_json::{Value, json};

use crate::support::chains::{LocalBase, LocalSolana};
use crate::support::*;

const SOL: u64 = 1_000_000_000;

/// The built-in `balance`, offered in chat and the chat-app.
const BALANCE_COMMAND: &str = r#"
[[commands]]
command = "balance"
description = "My wallet balance"
handler_type = "built_in"
integrations = ["chatapp"]
parameters = [{ name = "network", type = "string", description = "solana or base" }]
"#;
const ETH: u128 = 1_000_000_000_000_000_000;

/// A server pointed at both local chains, with one agent that has a wallet on each.
struct World {
    env: TestEnv,
    server: TestServer,
    key: String,
    agent: String,
    solana: LocalSolana,
    base: LocalBase,
    solana_wallet: String,
    base_wallet: String,
}

impl World {
    async fn start() -> World {
        let solana = LocalSolana::start();
        let base = LocalBase::start().await;
        let env = TestEnv::new().with_envs(solana.env()).with_envs(base.env());
        let key = env.account_with_key("acme", "pro");
        let agent = env.apply_agent(&format!("{}{BALANCE_COMMAND}", manifest("payee")), "acme");
        let solana_wallet = env.create_wallet("payee", "solana");
        let base_wallet = env.create_wallet("payee", "base");
        let server = env.serve();
        World {
            env,
            server,
            key,
            agent,
            solana,
            base,
            solana_wallet,
            base_wallet,
        }
    }

    async fn balance(&self, network: &str) -> Reply {
        let url = self
            .server
            .url(&format!("/v1/agents/{}/wallet/{network}/balance", self.agent));
        get(&url, Some(&self.key)).await
    }

    async fn transfer(&self, network: &str, body: Value) -> Reply {
        let url = self
            .server
            .url(&format!("/v1/agents/{}/wallet/{network}/transfer", self.agent));
        post_json(&url, Some(&self.key), &body).await
    }

    fn transfers(&self) -> Vec<Value> {
        self.env
            .cli_json(&["wallet", "transfers", "--agent", "payee"])
            .as_array()
            .unwrap()
            .clone()
    }
}

/// Asserts the error status and code; returns the message.
fn expect_error(reply: &Reply, status: u16, code: &str) -> String {
    assert_eq!(
        (reply.status, reply.error_code()),
        (status, code.to_string()),
        "{}",
        reply.text
    );
    reply.error_message()
}

fn new_solana_address() -> String {
    agent_host::chains::WalletKey::generate(agent_host::domain::Network::Solana).address()
}

fn new_base_address() -> String {
    agent_host::chains::WalletKey::generate(agent_host::domain::Network::Base).address()
}

#[tokio::test]
async fn wallets_are_created_imported_and_listed_by_the_cli() {
    let env = TestEnv::new();
    env.create_account("acme", "free");
    env.apply_agent(&manifest("keeper"), "acme");
    env.apply_agent(&manifest("importer"), "acme");

    let created = env.cli_json(&["wallet", "create", "--agent", "keeper", "--network", "solana"]);
    let solana_address = created["address"].as_str().unwrap().to_string();
    assert!(agent_host::chains::validate_address(agent_host::domain::Network::Solana, &solana_address).is_ok());
    let created = env.cli_json(&["wallet", "create", "--agent", "keeper", "--network", "base"]);
    let base_address = created["address"].as_str().unwrap().to_string();
    assert!(agent_host::chains::validate_address(agent_host::domain::Network::Base, &base_address).is_ok());

    let again = env.cli(&["wallet", "create", "--agent", "keeper", "--network", "base"]);
    assert!(!again.status.success());
    assert!(again.stderr.contains("already has a base wallet"), "{}", again.stderr);
    let bad = env.cli(&["wallet", "create", "--agent", "keeper", "--network", "ethereum"]);
    assert!(bad.stderr.contains("use solana or base"), "{}", bad.stderr);

    let list = env.cli_json(&["wallet", "list", "--agent", "keeper"]);
    assert_eq!(list[0]["network"], "base");
    assert_eq!(list[0]["address"], base_address.as_str());
    assert_eq!(list[1]["address"], solana_address.as_str());

    // Imports: Anvil's first dev key, and a Solana keypair as solana-keygen writes it.
    let imported = env
        .cli_with_stdin(
            &["--json", "wallet", "import", "--agent", "importer", "--network", "base"],
            "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80\n",
        )
        .ok();
    assert_eq!(imported["address"], "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
    let keypair: Vec<u8> = (1..=32u8).chain(std::iter::repeat_n(0, 32)).collect();
    let seed_only = agent_host::chains::WalletKey::from_secret(agent_host::domain::Network::Solana, &keypair[..32])
        .unwrap()
        .address();
    let seed_b58 = bs58::encode(&keypair[..32]).into_string();
    let imported = env
        .cli_with_stdin(
            &[
                "--json",
                "wallet",
                "import",
                "--agent",
                "importer",
                "--network",
                "solana",
            ],
            &seed_b58,
        )
        .ok();
    assert_eq!(imported["address"], seed_only.as_str());
    let refused = env.cli_with_stdin(
        &["wallet", "import", "--agent", "keeper", "--network", "solana"],
        "not-a-key",
    );
    assert!(!refused.status.success());

    // The secret is sealed: the private key's bytes are nowhere in the database file.
    let dev_key = hex::decode("ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80").unwrap();
    assert!(!env.database_contains(&dev_key));
    assert!(!env.database_contains(&keypair[..32]));
}

#[tokio::test]
async fn balances_are_read_from_both_chains_exactly() {
    let world = World::start().await;
    world.solana.set_sol(&world.solana_wallet, 1_500_000_001).await;
    world.base.set_eth(&world.base_wallet, ETH / 4).await;

    // No USDC account yet on Solana: zero, not an error.
    let reply = world.balance("solana").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let body = reply.json();
    assert!(body.get("success").is_none(), "the API's balance body is {{data}} only");
    assert_eq!(
        body["data"],
        json!({
            "network": "solana",
            "walletAddress": world.solana_wallet,
            "balanceUsdc": 0,
            "balanceNative": 1.500000001,
            "nativeToken": "SOL",
            "explorerUrl": format!("https://explorer.solana.com/address/{}?cluster=custom", world.solana_wallet),
        })
    );

    world.solana.set_usdc(&world.solana_wallet, 1_234_567_891).await;
    world.base.mint_usdc(&world.base_wallet, 1).await;
    let body = world.balance("solana").await.json();
    assert_eq!(body["data"]["balanceUsdc"], json!(1234.567891));
    let body = world.balance("base").await.json();
    assert_eq!(
        body["data"],
        json!({
            "network": "base",
            "walletAddress": world.base_wallet,
            "balanceUsdc": 0.000001,
            "balanceNative": 0.25,
            "nativeToken": "ETH",
            "explorerUrl": format!("https://basescan.org/address/{}", world.base_wallet),
        })
    );
}

#[tokio::test]
async fn wallet_errors_use_the_spec_codes() {
    let solana = LocalSolana::start();
    let mut env = TestEnv::new().with_envs(solana.env());
    // Base's node is down: a closed port.
    let closed = crate::support::proxy::ClosedPort::new();
    env = env.with_env("AGENT_HOST_BASE_RPC_URL", &format!("http://{}", closed.address));
    let key = env.account_with_key("acme", "free");
    let agent = env.apply_agent(&manifest("payee"), "acme");
    env.cli_json(&["wallet", "create", "--agent", "payee", "--network", "base"]);
    let server = env.serve();
    let url = |rest: &str| server.url(&format!("/v1/agents/{agent}/wallet/{rest}"));

    let reply = get(&url("polygon/balance"), Some(&key)).await;
    expect_error(&reply, 400, "validation_error");
    let reply = get(&url("solana/balance"), Some(&key)).await;
    expect_error(&reply, 400, "wallet_not_configured");
    let reply = post_json(
        &url("solana/transfer"),
        Some(&key),
        &json!({ "recipientAddress": new_solana_address(), "amountUsdc": 1 }),
    )
    .await;
    expect_error(&reply, 400, "wallet_not_configured");
    let reply = get(&url("base/balance"), None).await;
    assert_eq!(reply.status, 401);
    let reply = get(&server.url("/v1/agents/nobody/wallet/base/balance"), Some(&key)).await;
    assert_eq!(reply.status, 404);

    let reply = get(&url("base/balance"), Some(&key)).await;
    let message = expect_error(&reply, 500, "internal_error");
    assert!(message.contains("base"), "{message}");
    let reply = post_json(
        &url("base/transfer"),
        Some(&key),
        &json!({ "recipientAddress": new_base_address(), "amountUsdc": 1 }),
    )
    .await;
    let message = expect_error(&reply, 500, "internal_error");
    assert!(message.contains("base"), "{message}");
}

#[tokio::test]
async fn transfer_requests_are_validated_per_network() {
    let world = World::start().await;
    let cases = [
        (
            "solana",
            json!({ "recipientAddress": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", "amountUsdc": 1 }),
            "recipientAddress",
        ),
        (
            "solana",
            json!({ "recipientAddress": "EPjFWdd5AufqSSqeM2qN1xzybapC8G4w", "amountUsdc": 1 }),
            "32",
        ),
        (
            "base",
            json!({ "recipientAddress": "0x833589fcD6eDb6E08f4c7C32D4f71b54bdA02913", "amountUsdc": 1 }),
            "checksum",
        ),
        (
            "base",
            json!({ "recipientAddress": "0x833589fcd6edb6e08f4c7c32d4f71b54bda0291", "amountUsdc": 1 }),
            "40 hex",
        ),
        (
            "base",
            json!({ "recipientAddress": 42, "amountUsdc": 1 }),
            "must be a string",
        ),
        ("base", json!({ "amountUsdc": 1 }), "recipientAddress"),
        (
            "base",
            json!({ "recipientAddress": new_base_address(), "amountUsdc": 0.0000001 }),
            "6 decimal",
        ),
        (
            "base",
            json!({ "recipientAddress": new_base_address(), "amountUsdc": 0 }),
            "positive",
        ),
        (
            "solana",
            json!({ "recipientAddress": new_solana_address(), "amountUsdc": -1 }),
            "negative",
        ),
        (
            "solana",
            json!({ "recipientAddress": new_solana_address(), "amountUsdc": "1" }),
            "number",
        ),
        (
            "solana",
            json!({ "recipientAddress": world.solana_wallet, "amountUsdc": 1 }),
            "own wallet",
        ),
    ];
    for (network, body, expected) in cases {
        let reply = world.transfer(network, body.clone()).await;
        let message = expect_error(&reply, 400, "validation_error");
        assert!(message.contains(expected), "{body}: {message}");
    }
    assert!(
        world.transfers().is_empty(),
        "nothing invalid is recorded as a transfer"
    );
}

#[tokio::test]
async fn solana_transfers_move_exact_amounts_and_create_the_recipient_account() {
    let world = World::start().await;
    world.solana.set_sol(&world.solana_wallet, SOL).await;
    world.solana.set_usdc(&world.solana_wallet, 2_000_000_000).await;
    let recipient = new_solana_address();
    assert_eq!(world.solana.usdc_of(&recipient).await, None);

    let reply = world
        .transfer(
            "solana",
            json!({ "recipientAddress": recipient, "amountUsdc": 0.000001, "memo": "invoice 17" }),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let data = reply.json()["data"].clone();
    let signature = data["transactionSignature"].as_str().unwrap().to_string();
    assert_eq!(
        data,
        json!({
            "transactionSignature": signature,
            "network": "solana",
            "amount": 0.000001,
            "recipient": recipient,
            "sender": world.solana_wallet,
            "explorerUrl": format!("https://explorer.solana.com/tx/{signature}?cluster=custom"),
            "memo": "invoice 17",
        })
    );
    assert_eq!(
        world.solana.usdc_of(&recipient).await,
        Some(1),
        "the recipient's token account was created"
    );
    assert_eq!(world.solana.usdc_of(&world.solana_wallet).await, Some(1_999_999_999));
    let spent = SOL - world.solana.sol_of(&world.solana_wallet).await;
    assert!(
        spent > 2_000_000,
        "the wallet paid the new account's rent and the fee: {spent}"
    );

    let reply = world
        .transfer(
            "solana",
            json!({ "recipientAddress": recipient, "amountUsdc": 1234.567891 }),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json()["data"]["memo"], Value::Null);
    assert_eq!(world.solana.usdc_of(&recipient).await, Some(1_234_567_892));
    assert_eq!(world.solana.usdc_of(&world.solana_wallet).await, Some(765_432_108));

    // The memo is ours only: the transaction on chain has no Memo instruction.
    let tx = chains_rpc(
        &world.solana.rpc_url,
        "getTransaction",
        json!([signature, { "encoding": "json", "commitment": "confirmed", "maxSupportedTransactionVersion": 0 }]),
    )
    .await;
    let keys = tx["transaction"]["message"]["accountKeys"].to_string();
    assert!(!keys.contains("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr"), "{keys}");

    let records = world.transfers();
    assert_eq!(records.len(), 2);
    assert_eq!(records[1]["state"], "confirmed");
    assert_eq!(records[1]["memo"], "invoice 17");
    assert_eq!(records[1]["signature"], signature.as_str());
    assert_eq!(records[0]["amount_micro_usdc"], 1_234_567_891u64);
}

async fn chains_rpc(url: &str, method: &str, params: Value) -> Value {
    crate::support::chains::rpc(url, method, params).await
}

#[tokio::test]
async fn base_transfers_move_exact_amounts() {
    let world = World::start().await;
    world.base.set_eth(&world.base_wallet, ETH / 100).await;
    world.base.mint_usdc(&world.base_wallet, 2_000_000_000).await;
    let recipient = new_base_address();
    // A lower-case recipient is fine (no checksum to check).
    let reply = world
        .transfer(
            "base",
            json!({ "recipientAddress": recipient.to_lowercase(), "amountUsdc": 1234.567891, "memo": "rent" }),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let data = reply.json()["data"].clone();
    let hash = data["transactionSignature"].as_str().unwrap().to_string();
    assert_eq!(data["amount"], json!(1234.567891));
    assert_eq!(data["sender"], world.base_wallet.as_str());
    assert_eq!(data["explorerUrl"], format!("https://basescan.org/tx/{hash}"));
    assert_eq!(data["memo"], "rent");
    assert_eq!(world.base.usdc_of(&recipient).await, 1_234_567_891);
    assert_eq!(world.base.usdc_of(&world.base_wallet).await, 765_432_109);

    let reply = world
        .transfer("base", json!({ "recipientAddress": recipient, "amountUsdc": 0.000001 }))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(world.base.usdc_of(&recipient).await, 1_234_567_892);

    // On chain it is a plain EIP-1559 USDC transfer: no memo in its input.
    let tx = chains_rpc(&world.base.rpc_url, "eth_getTransactionByHash", json!([hash])).await;
    assert_eq!(tx["type"], "0x2");
    assert_eq!(
        tx["to"].as_str().unwrap().to_lowercase(),
        crate::support::chains::BASE_USDC.to_lowercase()
    );
    assert_eq!(tx["input"].as_str().unwrap().len(), 2 + 2 * (4 + 32 + 32));
}

#[tokio::test]
async fn short_funds_are_refused_with_the_amounts() {
    let world = World::start().await;
    // Solana: 1 USDC and no SOL.
    world.solana.set_usdc(&world.solana_wallet, 1_000_000).await;
    let recipient = new_solana_address();
    let reply = world
        .transfer("solana", json!({ "recipientAddress": recipient, "amountUsdc": 2 }))
        .await;
    let message = expect_error(&reply, 400, "transfer_failed");
    assert!(
        message.contains("needs 2 USDC") && message.contains("has 1 USDC"),
        "{message}"
    );

    let reply = world
        .transfer("solana", json!({ "recipientAddress": recipient, "amountUsdc": 0.5 }))
        .await;
    let message = expect_error(&reply, 400, "transfer_failed");
    assert!(message.contains("0.00001 SOL") && message.contains("rent"), "{message}");
    assert_eq!(world.solana.usdc_of(&recipient).await, None);
    assert_eq!(world.solana.usdc_of(&world.solana_wallet).await, Some(1_000_000));

    // Base: USDC short, then ETH short.
    world.base.mint_usdc(&world.base_wallet, 500_000).await;
    let recipient = new_base_address();
    let reply = world
        .transfer("base", json!({ "recipientAddress": recipient, "amountUsdc": 0.500001 }))
        .await;
    let message = expect_error(&reply, 400, "transfer_failed");
    assert!(message.contains("needs 0.500001 USDC"), "{message}");
    let reply = world
        .transfer("base", json!({ "recipientAddress": recipient, "amountUsdc": 0.5 }))
        .await;
    let message = expect_error(&reply, 400, "transfer_failed");
    assert!(message.contains("ETH for gas"), "{message}");
    assert_eq!(world.base.usdc_of(&recipient).await, 0);

    // Each refusal is on record as a failed transfer, with its reason.
    let records = world.transfers();
    assert_eq!(records.len(), 4);
    assert!(
        records.iter().all(|r| r["state"] == "failed" && r["error"].is_string()),
        "{records:?}"
    );

    // A blacklisted recipient: Circle's contract refuses, and we say so.
    world.base.set_eth(&world.base_wallet, ETH / 100).await;
    world.base.blacklist(&recipient).await;
    let reply = world
        .transfer("base", json!({ "recipientAddress": recipient, "amountUsdc": 0.1 }))
        .await;
    let message = expect_error(&reply, 400, "transfer_failed");
    assert!(message.contains("blacklisted"), "{message}");
}

#[tokio::test]
async fn concurrent_transfers_cannot_spend_the_same_balance_twice() {
    let world = World::start().await;
    world.solana.set_sol(&world.solana_wallet, SOL).await;
    world.solana.set_usdc(&world.solana_wallet, 1_000_000).await;
    world.base.set_eth(&world.base_wallet, ETH / 100).await;
    world.base.mint_usdc(&world.base_wallet, 1_000_000).await;

    for (network, recipient) in [("solana", new_solana_address()), ("base", new_base_address())] {
        let body = json!({ "recipientAddress": recipient, "amountUsdc": 0.8 });
        let (a, b) = tokio::join!(
            world.transfer(network, body.clone()),
            world.transfer(network, body.clone())
        );
        let mut statuses = [a.status, b.status];
        statuses.sort();
        assert_eq!(statuses, [200, 400], "{network}: {} / {}", a.text, b.text);
        let refused = if a.status == 400 { &a } else { &b };
        assert_eq!(refused.error_code(), "transfer_failed");
        let received = match network {
            "solana" => world.solana.usdc_of(&recipient).await.unwrap(),
            _ => world.base.usdc_of(&recipient).await,
        };
        assert_eq!(received, 800_000, "{network}: exactly one transfer went out");
    }
}

#[tokio::test]
async fn a_wallet_key_that_does_not_decrypt_is_a_clear_500() {
    let world = World::start().await;
    world.base.set_eth(&world.base_wallet, ETH / 100).await;
    world.base.mint_usdc(&world.base_wallet, 1_000_000).await;
    // One bit of the sealed key flipped (in the last byte, the authentication tag's).
    let sealed = world.env.sql("SELECT secret FROM wallets WHERE network = 'solana'")[0][0]
        .clone()
        .unwrap();
    let mut sealed = hex::decode(sealed).unwrap();
    *sealed.last_mut().unwrap() ^= 1;
    world.env.sql(&format!(
        "UPDATE wallets SET secret = {} WHERE network = 'solana'",
        world.env.blob_literal(&sealed)
    ));
    let reply = world
        .transfer(
            "solana",
            json!({ "recipientAddress": new_solana_address(), "amountUsdc": 1 }),
        )
        .await;
    let message = expect_error(&reply, 500, "internal_error");
    assert!(message.contains("cannot be decrypted"), "{message}");
    // Nothing else breaks: the other wallet still pays.
    let recipient = new_base_address();
    let reply = world
        .transfer("base", json!({ "recipientAddress": recipient, "amountUsdc": 0.25 }))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(world.base.usdc_of(&recipient).await, 250_000);
    assert_eq!(world.balance("solana").await.status, 200, "a balance needs no key");
}

#[tokio::test]
async fn pending_transfers_are_reconciled_against_the_chain_at_start() {
    let mut world = World::start().await;
    world.solana.set_sol(&world.solana_wallet, SOL).await;
    world.solana.set_usdc(&world.solana_wallet, 5_000_000).await;
    world.base.set_eth(&world.base_wallet, ETH / 100).await;
    world.base.mint_usdc(&world.base_wallet, 5_000_000).await;
    let reply = world
        .transfer(
            "solana",
            json!({ "recipientAddress": new_solana_address(), "amountUsdc": 1 }),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let reply = world
        .transfer(
            "base",
            json!({ "recipientAddress": new_base_address(), "amountUsdc": 1 }),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    world.server.crash();

    // As a crash would leave them: two sent but not marked, one never signed.
    {
        world.env.sql("UPDATE transfers SET state = 'pending'");
        world.env.sql(&format!(
            "INSERT INTO transfers (id, agent_id, network, sender, recipient, amount, state, created_at, updated_at)
             VALUES ('tr_cut', '{}', 'base', '{wallet}', '{wallet}', 5, 'pending', 0, 0)",
            world.agent,
            wallet = world.base_wallet
        ));
    }
    world.server = world.env.serve();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let records = loop {
        let records = world.transfers();
        if records.iter().all(|r| r["state"] != "pending") || std::time::Instant::now() > deadline {
            break records;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let state = |id: &str| records.iter().find(|r| r["id"] == id).map(|r| r["state"].clone());
    assert_eq!(state("tr_cut"), Some(json!("failed")), "{records:?}");
    let confirmed = records.iter().filter(|r| r["state"] == "confirmed").count();
    assert_eq!(confirmed, 2, "{records:?}");
    // And nothing was sent twice.
    assert_eq!(world.solana.usdc_of(&world.solana_wallet).await, Some(4_000_000));
    assert_eq!(world.base.usdc_of(&world.base_wallet).await, 4_000_000);
}

#[tokio::test]
async fn the_balance_built_in_tells_what_the_wallets_hold() {
    let world = World::start().await;
    world.solana.set_sol(&world.solana_wallet, 1_500_000_000).await;
    world.solana.set_usdc(&world.solana_wallet, 12_500_000).await;
    world.base.set_eth(&world.base_wallet, ETH / 1000).await;
    world.base.mint_usdc(&world.base_wallet, 3).await;
    let execute = |body: Value| {
        let url = world
            .server
            .url(&format!("/v1/agents/{}/commands/balance/execute", world.agent));
        let key = world.key.clone();
        async move { post_json(&url, Some(&key), &body).await }
    };

    let reply = execute(json!({ "parameters": { "network": "solana" } })).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let text = reply.json()["data"]["result"]["response"].as_str().unwrap().to_string();
    assert_eq!(
        text,
        format!("My solana wallet {} holds 12.5 USDC and 1.5 SOL.", world.solana_wallet)
    );

    let reply = execute(json!({ "rawText": "/balance" })).await;
    let text = reply.json()["data"]["result"]["response"].as_str().unwrap().to_string();
    assert!(text.contains("12.5 USDC and 1.5 SOL"), "{text}");
    assert!(
        text.contains(&format!("{} holds 0.000003 USDC and 0.001 ETH", world.base_wallet)),
        "{text}"
    );

    let reply = execute(json!({ "rawText": "/balance polygon" })).await;
    expect_error(&reply, 400, "validation_error");
}
