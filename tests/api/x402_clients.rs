//! The real, published x402 clients pay the service end to end, on both local chains,
//! each set up as its own documentation says and nothing more: `x402-fetch` 1.2.0 (x402
//! version 1) and `@x402/fetch` 2.x as its README's Quick Start (version 2 schemes only)
//! each buy a message (the model's reply), a priced command and a long-running command
//! (202, polled), on one route, and the money is checked on chain.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fake_llm::{Policy, fake_openai, text};
use crate::support::payers::{Paid, Payer, X402Client, network_id, pay_retrying, pay_with};
use crate::support::proxy::CuttingProxy;
use crate::support::x402::*;
use crate::support::*;

/// What each client buys, with its price in micro-USDC: 0.09 USDC per client.
const MESSAGE: u64 = 10_000;
const HELLO: u64 = 50_000;
const LONG_REPORT: u64 = 30_000;

struct Market {
    env: TestEnv,
    server: TestServer,
    /// The seller's wallet on the test's network: `payTo`.
    agent_wallet: String,
    agent_id: String,
    seen: Arc<Mutex<Vec<Value>>>,
    _llm: FakeServer,
}

/// The seller agent with x402 on and a wallet on `network`, on a server pointed at
/// `chain_env`, with a model that always answers "No rain today."
async fn open_market(network: &str, chain_env: Vec<(&'static str, String)>) -> Market {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let policy: Policy = Arc::new(|_, _| text("No rain today."));
    let llm = fake_openai(policy, seen.clone()).await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model")
        .with_envs(chain_env);
    env.create_account("acme", "free");
    let agent_id = env.apply_agent(&format!("{}{REPORT}", paid_manifest("seller")), "acme");
    let agent_wallet = env.create_wallet("seller", network);
    Market {
        server: env.serve(),
        env,
        agent_wallet,
        agent_id,
        seen,
        _llm: llm,
    }
}

fn assert_paid(client: X402Client, paid: &Paid, amount: u64, payer: &str, pay_to: &str, network: &str) {
    let receipt = &paid.body["receipt"];
    assert_eq!(receipt["amountPaidMicroUsdc"], amount, "{client:?}: {}", paid.body);
    assert_eq!(receipt["payer"], payer, "{client:?}");
    assert_eq!(receipt["payTo"], pay_to, "{client:?}");
    // Each version's own header, with the network as that version names it.
    let (version, named) = match client {
        X402Client::Fetch1 => (1, network),
        X402Client::Fetch2 => (2, network_id(network)),
    };
    assert_eq!(paid.body["x402Version"], version, "{client:?}: {}", paid.body);
    assert_eq!(
        paid.payment_response_header.as_deref(),
        Some(client.response_header()),
        "{client:?}"
    );
    let header = &paid.payment_response;
    assert_eq!(header["success"], true, "{client:?}: {header}");
    assert_eq!(header["transaction"], receipt["transactionSignature"], "{client:?}");
    assert_eq!(header["network"], named, "{client:?}");
    assert_eq!(header["payer"], payer, "{client:?}");
}

/// Each client buys a message, `/hello` and the long-running report; returns what was spent.
/// Every answer comes with a receipt signed by `pay_to` that docs/x402.md's recipe verifies.
async fn every_client_buys(market: &Market, payer: &Payer<'_>, payer_address: &str, pay_to: &str) -> u64 {
    let url = market.server.url(&format!("/x402/{}/seller", payer.network));
    let mut spent = 0;
    let mut receipts = Vec::new();
    let mut answered = |paid: &Paid| {
        let receipt =
            signed_receipt(&paid.payment_response).unwrap_or_else(|| panic!("no receipt: {}", paid.payment_response));
        receipts.push((
            (receipt.clone(), pay_to.to_string()),
            paid.payment_response["transaction"].clone(),
        ));
    };
    for client in X402Client::ALL {
        let paid = pay_with(client, payer, &url, &json!({ "message": "Will it rain?" })).await;
        assert_eq!(paid.status, 200, "{client:?}: {}", paid.body);
        assert_eq!(paid.body["response"], "No rain today.");
        assert_paid(client, &paid, MESSAGE, payer_address, pay_to, payer.network);
        answered(&paid);

        let paid = pay_with(client, payer, &url, &json!({ "command": "hello", "name": "Ann" })).await;
        assert_eq!(paid.status, 200, "{client:?}: {}", paid.body);
        assert_eq!(paid.body["response"], "Hello, Ann!");
        assert_paid(client, &paid, HELLO, payer_address, pay_to, payer.network);
        answered(&paid);

        let paid = pay_with(client, payer, &url, &json!({ "command": "report" })).await;
        assert_eq!(paid.status, 202, "{client:?}: {}", paid.body);
        assert_paid(client, &paid, LONG_REPORT, payer_address, pay_to, payer.network);
        assert_eq!(
            signed_receipt(&paid.payment_response),
            None,
            "queued work is not delivered yet"
        );
        let status = poll_job(paid.body["statusUrl"].as_str().unwrap(), Duration::from_secs(20)).await;
        assert_eq!(status["state"], "succeeded", "{client:?}: {status}");
        assert_eq!(status["response"], "The report is ready.");
        spent += MESSAGE + HELLO + LONG_REPORT;
    }
    let (mut checked, transactions): (Vec<_>, Vec<_>) = receipts.into_iter().unzip();
    // The same receipt said to come from another wallet is refused.
    checked.push((checked[0].0.clone(), payer_address.to_string()));
    let verified = verify_receipts(&checked).await;
    assert!(verified.last().unwrap().is_err(), "{verified:?}");
    for (stated, transaction) in verified.iter().zip(transactions) {
        let stated = stated
            .as_ref()
            .unwrap_or_else(|e| panic!("the recipe refused a receipt: {e}"));
        // The resource the 402 named: the agent's address by id.
        let resource = market
            .server
            .url(&format!("/x402/{}/{}", payer.network, market.agent_id));
        assert_eq!(stated["resourceUrl"], resource, "{stated}");
        assert_eq!(stated["payer"], payer_address, "{stated}");
        assert_eq!(stated["network"], network_id(payer.network), "{stated}");
        assert_eq!(stated["transaction"], transaction, "{stated}");
    }
    // A paid message buys the reply only: the model is offered no command to run.
    let seen = market.seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "one model call per paid message");
    assert!(seen.iter().all(|request| request.get("tools").is_none()), "{seen:?}");
    spent
}

#[tokio::test]
async fn the_real_x402_clients_pay_on_base() {
    use crate::support::chains::LocalBase;
    let chain = LocalBase::start().await;
    let market = open_market("base", chain.env()).await;
    let agent_wallet = &market.agent_wallet;
    chain.set_eth(agent_wallet, 10u128.pow(16)).await; // it relays: pays the gas

    let (payer, payer_address) = Payer::on_base(&chain, 1_000_000).await;
    let spent = every_client_buys(&market, &payer, &payer_address, agent_wallet).await;
    assert_eq!(spent, 180_000);
    assert_eq!(chain.usdc_of(&payer_address).await, 1_000_000 - spent);
    assert_eq!(chain.usdc_of(agent_wallet).await, spent);
}

#[tokio::test]
async fn the_real_x402_clients_pay_on_solana() {
    use crate::support::chains::LocalSolana;
    let chain = LocalSolana::start();
    let market = open_market("solana", chain.env()).await;
    let agent_wallet = &market.agent_wallet;
    chain.set_sol(agent_wallet, 1_000_000_000).await; // the fee payer
    chain.set_usdc(agent_wallet, 0).await; // the clients need payTo's token account to exist

    let (payer, payer_address) = Payer::on_solana(&chain, 1_000_000).await;
    let spent = every_client_buys(&market, &payer, &payer_address, agent_wallet).await;
    assert_eq!(spent, 180_000);
    assert_eq!(chain.usdc_of(&payer_address).await, Some(1_000_000 - spent));
    assert_eq!(chain.usdc_of(agent_wallet).await, Some(spent));
}

/// A real client names its payment (x402's payment-identifier, as @x402/extensions shows
/// it), pays, and loses the answer: the connection drops after the server settled. It
/// asks again, signs a new payment under the same id, and gets the answer it paid for;
/// the chain shows one transfer. Its retry goes to another host of the service (a load
/// balancer's next turn), which shares the first's store (PostgreSQL in the suite's
/// second pass).
async fn a_client_that_lost_its_paid_answer_retries_and_pays_once(network: &str) {
    use crate::support::chains::{LocalBase, LocalSolana};
    enum Chain {
        Base(LocalBase),
        Solana(LocalSolana),
    }
    let chain = match network {
        "base" => Chain::Base(LocalBase::start().await),
        _ => Chain::Solana(LocalSolana::start()),
    };
    let market = open_market(
        network,
        match &chain {
            Chain::Base(chain) => chain.env(),
            Chain::Solana(chain) => chain.env(),
        },
    )
    .await;
    let other_host = market.env.serve();
    let (payer, payer_address) = match &chain {
        Chain::Base(chain) => {
            chain.set_eth(&market.agent_wallet, 10u128.pow(16)).await; // it relays: pays the gas
            Payer::on_base(chain, 1_000_000).await
        }
        Chain::Solana(chain) => {
            chain.set_sol(&market.agent_wallet, 1_000_000_000).await; // the fee payer
            chain.set_usdc(&market.agent_wallet, 0).await;
            Payer::on_solana(chain, 1_000_000).await
        }
    };
    let usdc_of = async |owner: &str| match &chain {
        Chain::Base(chain) => chain.usdc_of(owner).await,
        Chain::Solana(chain) => chain.usdc_of(owner).await.unwrap_or(0),
    };
    let proxy = CuttingProxy::across(&[&market.server.base, &other_host.base]).await;
    let url = format!("{}/x402/{network}/seller", proxy.base);
    let hello = json!({ "command": "hello", "name": "Ann" });

    let paid = pay_retrying(
        X402Client::Fetch2,
        &payer,
        &url,
        &hello,
        "pay_lost_answer_0123456789",
        3,
    )
    .await;
    assert_eq!(proxy.cuts(), 1, "the first answer was dropped");
    assert_eq!(paid.failures.len(), 1, "one attempt lost: {:?}", paid.failures);
    assert_eq!(paid.status, 200, "{}", paid.body);
    assert_eq!(paid.body["response"], "Hello, Ann!");
    assert_paid(
        X402Client::Fetch2,
        &paid,
        HELLO,
        &payer_address,
        &market.agent_wallet,
        network,
    );
    assert_eq!(usdc_of(&payer_address).await, 1_000_000 - HELLO, "one transfer");
    assert_eq!(usdc_of(&market.agent_wallet).await, HELLO);
}

#[tokio::test]
async fn a_client_that_lost_its_paid_answer_retries_on_another_host_and_pays_once_on_base() {
    a_client_that_lost_its_paid_answer_retries_and_pays_once("base").await;
}

#[tokio::test]
async fn a_client_that_lost_its_paid_answer_retries_on_another_host_and_pays_once_on_solana() {
    a_client_that_lost_its_paid_answer_retries_and_pays_once("solana").await;
}
