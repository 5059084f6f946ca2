//! Payers whose wallet is a contract (Coinbase Smart Wallet and the Base app, embedded
//! wallets) pay on Base through the real x402 clients, signing as viem's smart accounts do:
//! deployed, the wallet checks its own signature (ERC-1271); not yet deployed, the signature
//! says how to deploy it (ERC-6492), and the settlement deploys it. Nothing that costs the
//! agent more than a settlement may, and nothing signed by anyone but the wallet's owner,
//! gets as far as a transaction.

use alloy::primitives::{Address, B256, U256};
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::{SolStruct, SolValue};
use serde_json::{Value, json};

use crate::support::chains::{LocalBase, gas_burner};
use crate::support::mcp::sdk_client;
use crate::support::payers::{Payer, X402Client, network_id, pay_with};
use crate::support::x402::*;
use crate::support::*;

const HELLO: u64 = 50_000;

alloy::sol! {
    /// What the tests' smart wallet has its owner sign: the hash, bound to the wallet.
    struct WalletMessage {
        bytes32 hash;
    }
}

/// The tests' smart wallet's own signature form, made with `key` (its owner's or not).
fn wallet_signature(key: &PrivateKeySigner, wallet: Address, digest: B256) -> Vec<u8> {
    let domain = alloy::sol_types::eip712_domain! {
        name: "Test Smart Wallet",
        version: "1",
        chain_id: 8453,
        verifying_contract: wallet,
    };
    let replay_safe = WalletMessage { hash: digest }.eip712_signing_hash(&domain);
    let signature = key.sign_hash_sync(&replay_safe).unwrap().as_bytes().to_vec();
    (U256::ZERO, alloy::primitives::Bytes::from(signature)).abi_encode_params()
}

fn hello() -> Value {
    json!({ "command": "hello", "name": "Ann" })
}

#[tokio::test]
async fn a_deployed_smart_wallet_pays_with_both_clients() {
    let chain = LocalBase::start().await;
    let (env, agent_wallet) = base_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let (payer, wallet) = Payer::smart_wallet_on_base(&chain, 1_000_000, true).await;
    for client in X402Client::ALL {
        let paid = pay_with(client, &payer, &url, &hello()).await;
        assert_eq!(paid.status, 200, "{client:?}: {}", paid.body);
        assert_eq!(paid.body["response"], "Hello, Ann!");
        assert_eq!(paid.body["receipt"]["payer"], wallet, "{client:?}");
        assert_eq!(paid.payment_response["payer"], wallet, "{client:?}");
    }
    assert_eq!(chain.usdc_of(&wallet).await, 1_000_000 - 2 * HELLO);
    assert_eq!(chain.usdc_of(&agent_wallet).await, 2 * HELLO);
    let recorded = payments(&env);
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    assert!(
        recorded
            .iter()
            .all(|p| p["state"] == "served" && p["receipt"]["payer"] == wallet),
        "{recorded:?}"
    );
}

/// The tests' factory, on the list of those the agent's wallet deploys wallets through
/// (Coinbase Smart Wallet's by default).
async fn allowing_the_test_factory(chain: &LocalBase, env: TestEnv) -> TestEnv {
    env.with_env(
        "AGENT_HOST_X402_BASE_WALLET_FACTORIES",
        &chain.wallet_factory().await.to_string(),
    )
}

#[tokio::test]
async fn an_undeployed_smart_wallet_pays_and_its_settlement_deploys_it() {
    let chain = LocalBase::start().await;
    let env = allowing_the_test_factory(&chain, TestEnv::new()).await;
    let (env, agent_wallet) = base_shop(&chain, env, "").await;
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    for client in X402Client::ALL {
        let (payer, wallet) = Payer::smart_wallet_on_base(&chain, 1_000_000, false).await;
        assert!(!chain.has_code(&wallet).await);
        let gas = chain.eth_of(&agent_wallet).await;

        let paid = pay_with(client, &payer, &url, &hello()).await;
        assert_eq!(paid.status, 200, "{client:?}: {}", paid.body);
        assert_eq!(paid.body["receipt"]["payer"], wallet);
        assert!(
            chain.has_code(&wallet).await,
            "{client:?}: the settlement deployed the wallet"
        );
        let tx = paid.body["receipt"]["transactionSignature"].as_str().unwrap();
        let receipt = chain.receipt(tx).await;
        assert_eq!(receipt["status"], "0x1");
        assert!(
            receipt["to"].is_null(),
            "one transaction, a contract creation: {receipt}"
        );
        // The agent paid the deployment with the settlement, within one settlement's caps.
        let spent = gas - chain.eth_of(&agent_wallet).await;
        assert!(spent > 0 && spent <= 300_000 * 20_000_000_000, "{spent} wei");

        // Deployed now: the client signs plainly (ERC-1271), and USDC is called directly.
        let paid = pay_with(client, &payer, &url, &hello()).await;
        assert_eq!(paid.status, 200, "{client:?}: {}", paid.body);
        let tx = paid.body["receipt"]["transactionSignature"].as_str().unwrap();
        assert!(!chain.receipt(tx).await["to"].is_null(), "a plain USDC call");
        assert_eq!(chain.usdc_of(&wallet).await, 1_000_000 - 2 * HELLO);
    }
    assert_eq!(chain.usdc_of(&agent_wallet).await, 4 * HELLO);
    assert_eq!(payments(&env).len(), 4);
}

/// Deploying a wallet costs the agent gas that only a price of at least
/// `x402_base_deploy_min_micro_usdc` (0.05 USDC by default) pays for: a cheaper request
/// from an undeployed wallet is refused, and nothing is sent.
#[tokio::test]
async fn an_undeployed_wallet_is_refused_for_a_request_that_does_not_cover_its_deployment() {
    let chain = LocalBase::start().await;
    let env = allowing_the_test_factory(&chain, TestEnv::new()).await;
    let (env, agent_wallet) = base_shop(&chain, env, "").await;
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let (payer, wallet) = Payer::smart_wallet_on_base(&chain, 1_000_000, false).await;
    let gas = chain.eth_of(&agent_wallet).await;
    // The forecast costs 0.01 USDC.
    let forecast = json!({ "command": "forecast", "city": "Oslo" });
    let refused = pay_with(X402Client::Fetch2, &payer, &url, &forecast).await;
    assert_eq!(refused.status, 402, "{}", refused.body);
    let reason = refused.payment_response["errorReason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let said = format!("{reason} {}", refused.body);
    assert!(said.contains("not deployed yet"), "{said}");
    assert_eq!(chain.pending().await, 0, "nothing sent");
    assert_eq!(chain.eth_of(&agent_wallet).await, gas, "the agent paid nothing");
    assert!(!chain.has_code(&wallet).await);
    assert_eq!(chain.usdc_of(&wallet).await, 1_000_000);
    assert!(payments(&env).is_empty(), "{:?}", payments(&env));
}

/// A wallet decides how much gas its signature check burns, and the agent pays that gas:
/// a check over `base_max_gas` (300,000), or one that leaves the settlement over it, is
/// refused as `invalid_payment` before anything is signed or sent.
#[tokio::test]
async fn a_wallet_whose_check_costs_more_than_a_settlement_may_is_refused_before_anything_is_sent() {
    let chain = LocalBase::start().await;
    let (env, agent_wallet) = base_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let requirement = post_x402(&url, &hello()).await.json()["accepts"][0].clone();
    let gas = chain.eth_of(&agent_wallet).await;
    // About 2 million gas to check; about 234,000 (under the cap alone, over it with the transfer).
    let cases = [(80_000u32, "to check its signature"), (9_000, "cannot be settled from")];
    for (n, (loops, why)) in cases.into_iter().enumerate() {
        let wallet = format!("0x00000000000000000000000000000000000b0b0{n}");
        chain.set_code(&wallet, &gas_burner(loops)).await;
        chain.mint_usdc(&wallet, 1_000_000).await;
        let from: Address = wallet.parse().unwrap();
        let payment = base_payment_as(from, |_| vec![0xab; 100], &requirement, HELLO, n as u8 + 1, 60);
        let reply = paid(&url, &hello(), &payment).await;
        assert_eq!(code(&reply), (402, "invalid_payment".into()), "{loops}: {}", reply.text);
        assert!(reply.text.contains(why) && reply.text.contains("gas"), "{}", reply.text);
        assert_eq!(chain.pending().await, 0, "nothing sent");
        assert_eq!(chain.eth_of(&agent_wallet).await, gas, "the agent paid no gas");
        assert_eq!(chain.usdc_of(&wallet).await, 1_000_000);
    }
    assert!(payments(&env).is_empty(), "{:?}", payments(&env));
}

/// A payment in a smart wallet's name is the wallet's only if the wallet accepts its
/// signature: one signed by anyone else, in the wallet's form or as a key, is refused
/// before anything is looked up or counted for the wallet, which still pays as usual.
#[tokio::test]
async fn nobody_pays_in_a_smart_wallets_name() {
    let chain = LocalBase::start().await;
    // One payment a minute per payer: a stranger's attempts must not spend the wallet's.
    let env = TestEnv::new().with_env("AGENT_HOST_X402_PAYER_LIMIT_PER_MINUTE", "1");
    let (env, agent_wallet) = base_shop(&chain, env, "").await;
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let requirement = post_x402(&url, &hello()).await.json()["accepts"][0].clone();
    let (payer, wallet) = Payer::smart_wallet_on_base(&chain, 1_000_000, true).await;
    let from: Address = wallet.parse().unwrap();
    let stranger = PrivateKeySigner::random();
    let forged = [
        base_payment_as(
            from,
            |digest| wallet_signature(&stranger, from, digest),
            &requirement,
            HELLO,
            1,
            60,
        ),
        base_payment_as(
            from,
            |digest| stranger.sign_hash_sync(&digest).unwrap().as_bytes().to_vec(),
            &requirement,
            HELLO,
            2,
            60,
        ),
    ];
    for payment in &forged {
        let reply = paid(&url, &hello(), payment).await;
        assert_eq!(code(&reply), (402, "invalid_signature".into()), "{}", reply.text);
    }
    assert_eq!(chain.pending().await, 0);
    assert!(payments(&env).is_empty(), "{:?}", payments(&env));
    let paid = pay_with(X402Client::Fetch2, &payer, &url, &hello()).await;
    assert_eq!(paid.status, 200, "{}", paid.body);
    assert_eq!(chain.usdc_of(&agent_wallet).await, HELLO);
}

/// Over MCP too, a deployed smart wallet and one not yet deployed pay tool calls (the
/// operator here lets a 0.03 USDC call deploy a wallet).
#[tokio::test]
async fn smart_wallets_pay_tool_calls_over_mcp() {
    let chain = LocalBase::start().await;
    let env = TestEnv::new().with_env("AGENT_HOST_X402_BASE_DEPLOY_MIN_MICRO_USDC", "30000");
    let env = allowing_the_test_factory(&chain, env).await;
    let (env, agent_wallet) = base_shop(&chain, env, WEATHER).await;
    let server = env.serve();
    let url = server.url("/mcp/seller");
    for deployed in [true, false] {
        let (payer, wallet) = Payer::smart_wallet_on_base(&chain, 1_000_000, deployed).await;
        let pay = json!({ "network": "base", "key": payer.key, "rpcUrl": payer.rpc_url,
                          "networkId": network_id("base"), "smartWallet": payer.smart_wallet });
        let run = sdk_client(&json!({
            "url": url, "calls": [{ "name": "weather", "arguments": { "city": "Oslo" }, "pay": pay }],
        }))
        .await;
        let result = &run["results"][0]["result"];
        assert_eq!(
            result["content"][0]["text"], "Sunny in Oslo",
            "deployed {deployed}: {run}"
        );
        let receipt = &result["_meta"]["x402/payment-response"];
        assert_eq!(receipt["success"], true, "{receipt}");
        assert_eq!(receipt["payer"], wallet, "{receipt}");
        assert!(chain.has_code(&wallet).await);
        assert_eq!(chain.usdc_of(&wallet).await, 970_000);
    }
    assert_eq!(chain.usdc_of(&agent_wallet).await, 60_000);
}

/// A factory's code runs in the agent's own transaction, on the agent's gas: the agent's
/// wallet deploys wallets through the factories on `x402_base_wallet_factories` only
/// (Coinbase Smart Wallet's by default). A wallet of any other factory is refused before
/// anything is sent, and may still pay once deployed.
#[tokio::test]
async fn a_wallet_of_a_factory_not_on_the_list_is_refused_until_it_is_deployed() {
    let chain = LocalBase::start().await;
    let (env, agent_wallet) = base_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let (payer, wallet) = Payer::smart_wallet_on_base(&chain, 1_000_000, false).await;
    let gas = chain.eth_of(&agent_wallet).await;
    let refused = pay_with(X402Client::Fetch2, &payer, &url, &hello()).await;
    assert_eq!(refused.status, 402, "{}", refused.body);
    let said = format!("{} {}", refused.payment_response, refused.body);
    assert!(said.contains("x402_base_wallet_factories"), "{said}");
    assert_eq!(chain.pending().await, 0, "nothing sent");
    assert_eq!(chain.eth_of(&agent_wallet).await, gas);
    assert!(!chain.has_code(&wallet).await);
    // Deployed by its owner, it pays as any deployed wallet.
    let owner: PrivateKeySigner = payer.key.parse().unwrap();
    chain.deploy_smart_wallet(owner.address(), 0).await;
    let paid = pay_with(X402Client::Fetch2, &payer, &url, &hello()).await;
    assert_eq!(paid.status, 200, "{}", paid.body);
}

/// An ERC-6492 signature from a wallet deployed meanwhile settles with a plain USDC call
/// on its inner signature: nothing is deployed, and the factory's code does not run.
#[tokio::test]
async fn a_wrapped_signature_of_a_deployed_wallet_settles_with_a_plain_call() {
    let chain = LocalBase::start().await;
    let (env, _) = base_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let requirement = post_x402(&url, &hello()).await.json()["accepts"][0].clone();
    let owner = PrivateKeySigner::random();
    let wallet = chain.deploy_smart_wallet(owner.address(), 0).await;
    chain.mint_usdc(&wallet.to_string(), 1_000_000).await;
    let factory = chain.wallet_factory().await;
    let create = alloy::sol_types::SolCall::abi_encode(&crate::support::chains::IWalletFactory::createAccountCall {
        owner: owner.address(),
        salt: U256::ZERO,
    });
    let wrapped = |digest| {
        let inner = wallet_signature(&owner, wallet, digest);
        let mut bytes = (
            factory,
            alloy::primitives::Bytes::from(create.clone()),
            alloy::primitives::Bytes::from(inner),
        )
            .abi_encode_params();
        bytes.extend_from_slice(&[0x64, 0x92].repeat(16));
        bytes
    };
    let reply = paid(
        &url,
        &hello(),
        &base_payment_as(wallet, wrapped, &requirement, HELLO, 1, 60),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let tx = reply.json()["receipt"]["transactionSignature"]
        .as_str()
        .unwrap()
        .to_string();
    let receipt = chain.receipt(&tx).await;
    assert_eq!(
        receipt["to"].as_str().unwrap().to_lowercase(),
        crate::support::chains::BASE_USDC.to_lowercase(),
        "a plain USDC call: {receipt}"
    );
}

/// A wallet not deployed yet whose check burns gas fails inside the simulated deployment as
/// a refusal would: told apart, it is refused as costing more than a settlement may.
#[tokio::test]
async fn an_undeployed_wallet_whose_check_burns_gas_is_refused_as_too_costly() {
    let chain = LocalBase::start().await;
    let factory = chain.deploy_test_contract("TestBurningWalletFactory", &[]).await;
    let env = TestEnv::new().with_env("AGENT_HOST_X402_BASE_WALLET_FACTORIES", &factory.to_string());
    let (env, agent_wallet) = base_shop(&chain, env, "").await;
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let requirement = post_x402(&url, &hello()).await.json()["accepts"][0].clone();
    // About a million gas: over the cap of 300,000, under ten times it.
    let rounds = U256::from(20_000u64);
    let address = crate::support::chains::rpc(
        &chain.rpc_url,
        "eth_call",
        json!([{ "to": factory.to_string(), "data": format!("0x{}", hex::encode(
            alloy::sol_types::SolCall::abi_encode(&IBurningFactory::getAddressCall { rounds }))) }, "latest"]),
    )
    .await;
    let wallet = Address::from_word(address.as_str().unwrap().parse().unwrap());
    chain.mint_usdc(&wallet.to_string(), 1_000_000).await;
    let create = alloy::sol_types::SolCall::abi_encode(&IBurningFactory::createAccountCall { rounds });
    let wrapped = |_| {
        let mut bytes = (
            factory,
            alloy::primitives::Bytes::from(create.clone()),
            alloy::primitives::Bytes::from(vec![1u8; 65]),
        )
            .abi_encode_params();
        bytes.extend_from_slice(&[0x64, 0x92].repeat(16));
        bytes
    };
    let gas = chain.eth_of(&agent_wallet).await;
    let reply = paid(
        &url,
        &hello(),
        &base_payment_as(wallet, wrapped, &requirement, HELLO, 1, 60),
    )
    .await;
    assert_eq!(code(&reply), (402, "invalid_payment".into()), "{}", reply.text);
    assert!(reply.text.contains("gas"), "{}", reply.text);
    assert_eq!(chain.pending().await, 0);
    assert_eq!(chain.eth_of(&agent_wallet).await, gas);
    assert!(!chain.has_code(&wallet.to_string()).await);
}

alloy::sol! {
    interface IBurningFactory {
        function createAccount(uint256 rounds) returns (address);
        function getAddress(uint256 rounds) returns (address);
    }
}

/// A node that cannot answer the wallet's check (a provider's rate limit) gives no verdict
/// on the signature: the request is told the chain is unavailable, not that it was
/// signed wrong.
#[tokio::test]
async fn a_node_that_cannot_answer_the_wallets_check_is_no_refusal_of_the_signature() {
    let chain = LocalBase::start().await;
    let node = chain.rpc_url.clone();
    let router = axum::Router::new().route(
        "/",
        axum::routing::post(move |axum::Json(call): axum::Json<Value>| {
            let node = node.clone();
            async move {
                if call["method"] == "eth_call" {
                    return axum::Json(json!({ "jsonrpc": "2.0", "id": call["id"],
                        "error": { "code": -32005, "message": "request limit exceeded" } }));
                }
                axum::Json(post_for_json(&node, &call).await)
            }
        }),
    );
    let limited = FakeServer::start(router).await;
    let (env, _) = base_shop(&chain, TestEnv::new(), "").await;
    let env = env.with_env("AGENT_HOST_BASE_RPC_URL", &limited.base);
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let offered = send(client().post(&url).json(&hello())).await;
    let requirement = offered.json()["accepts"][0].clone();
    let owner = PrivateKeySigner::random();
    let wallet = chain.deploy_smart_wallet(owner.address(), 0).await;
    let signed = |digest| wallet_signature(&owner, wallet, digest);
    let reply = paid(
        &url,
        &hello(),
        &base_payment_as(wallet, signed, &requirement, HELLO, 1, 60),
    )
    .await;
    assert!(reply.status >= 500, "{} {}", reply.status, reply.text);
    assert_ne!(reply.json()["code"], "invalid_signature", "{}", reply.text);
}
