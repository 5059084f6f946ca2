//! Paying from a browser: the payment page a person gets at an agent's x402 address, and a
//! page on another origin paying with the reference client, in headless Chromium
//! (tests/node/paypage.mjs, with playwright-core) against the local Base chain.

use std::time::Duration;

use serde_json::Value;

use crate::support::chains::LocalBase;
use crate::support::payers::Payer;
use crate::support::x402::*;
use crate::support::*;

/// A browser opening the address gets the page; x402 clients and indexers (JSON, `*/*`, no
/// Accept at all) get the price list, from the same address.
#[tokio::test]
async fn a_browser_gets_the_payment_page_and_a_client_the_price_list() {
    let env = TestEnv::new();
    env.create_account("acme", "free");
    env.apply_agent(&paid_manifest("seller"), "acme");
    env.create_wallet("seller", "base");
    let server = env.serve();
    let browser_accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
    for path in ["/x402/base/seller", "/x402/base/seller/commands/hello"] {
        let page = send(client().get(server.url(path)).header("accept", browser_accept)).await;
        assert_eq!(page.status, 200, "{}", page.text);
        assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));
        assert!(page.text.contains("/console/pay/pay.js"), "{}", page.text);
        let csp = page.header("content-security-policy").unwrap();
        assert!(
            csp.contains("script-src 'self'") && csp.contains("default-src 'none'"),
            "{csp}"
        );
        assert_eq!(page.header("vary"), Some("accept"));
        for accept in [Some("application/json"), Some("*/*"), None] {
            let mut request = client().get(server.url(path));
            if let Some(accept) = accept {
                request = request.header("accept", accept);
            }
            let list = send(request).await;
            assert_eq!(list.json()["x402Version"], 1, "{accept:?}: {}", list.text);
            assert!(list.header("payment-required").is_some());
        }
    }
    // An address that sells nothing is no page either.
    let missing = send(
        client()
            .get(server.url("/x402/base/nobody"))
            .header("accept", browser_accept),
    )
    .await;
    assert_eq!(
        (missing.status, missing.json()["code"].clone()),
        (404, "agent_not_found".into())
    );
    let script = get(&server.url("/console/pay/pay.js"), None).await;
    assert_eq!(script.status, 200);
    assert!(!script.text.contains("https://"), "nothing from elsewhere");
}

/// Runs tests/node/paypage.mjs in Chromium against `server`'s `seller`, paid by `payer_key`,
/// with `extra` settings; its result line.
async fn paypage(server: &TestServer, seller: &str, payer_key: &str, extra: &[(&str, String)]) -> Value {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&chromium).exists(),
        "{chromium} is missing: scripts/test.sh installs Debian's chromium"
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/node/paypage.mjs");
    let mut run = tokio::process::Command::new("node");
    run.arg(script)
        .env("PAY_BASE", server.url(""))
        .env("SELLER", seller)
        .env("PAYER_KEY", payer_key)
        .env("CHROMIUM", &chromium)
        .envs(extra.iter().map(|(name, value)| (*name, value.as_str())));
    if let Ok(dir) = std::env::var("PAYPAGE_SCREENSHOTS") {
        run.env("SCREENSHOTS", dir);
    }
    let (passed, log) = run_tool(run, Duration::from_secs(180), "the browser payments").await;
    assert!(
        passed,
        "the browser payments failed:\n{log}\nserver log:\n{}",
        server.log()
    );
    log.lines()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("no result line in:\n{log}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_person_pays_on_the_payment_page_and_another_origin_pays_with_the_reference_client() {
    let chain = LocalBase::start().await;
    let (env, agent_wallet) = base_shop(&chain, TestEnv::new(), "").await;
    let seller = env.cli_json(&["agent", "show", "seller"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let server = env.serve();
    let (payer, payer_address) = Payer::on_base(&chain, 1_000_000).await;

    let result = paypage(&server, &seller, &payer.key, &[]).await;

    // The page's first answer was lost: it sent the same payment again, and got it.
    assert_eq!(result["page"]["sent"], 2, "{result}");
    // Both purchases are on chain, each once: the page's and the other origin's.
    assert_eq!(chain.usdc_of(&agent_wallet).await, 100_000);
    assert_eq!(chain.usdc_of(&payer_address).await, 900_000);
    // Each answer named the settlement that carried it, and it is on chain.
    for transaction in [
        &result["page"]["transaction"],
        &result["crossOrigin"]["paymentResponse"]["transaction"],
    ] {
        let receipt = chain.receipt(transaction.as_str().unwrap()).await;
        assert_eq!(receipt["status"], "0x1", "{result} {receipt}");
    }
}

/// The wallets people are given pay on the page too: a smart wallet on Base not deployed
/// yet (it signs with ERC-6492; the settlement deploys it), and a Solana wallet found
/// through the Wallet Standard, as Phantom, Solflare and Backpack are, which signs the
/// payment transaction the server builds for it.
#[tokio::test(flavor = "multi_thread")]
async fn a_person_pays_on_the_payment_page_with_a_smart_wallet_and_with_a_solana_wallet() {
    use crate::support::chains::LocalSolana;
    use solana_signer::Signer;
    let base = LocalBase::start().await;
    let solana = LocalSolana::start();
    let env = TestEnv::new().with_envs(solana.env()).with_env(
        "AGENT_HOST_X402_BASE_WALLET_FACTORIES",
        &base.wallet_factory().await.to_string(),
    );
    let (env, base_wallet) = base_shop(&base, env, "").await;
    let solana_wallet = env.create_wallet("seller", "solana");
    solana.set_sol(&solana_wallet, 1_000_000_000).await;
    solana.set_usdc(&solana_wallet, 0).await;
    let seller = env.cli_json(&["agent", "show", "seller"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let server = env.serve();
    let (smart, smart_address) = Payer::smart_wallet_on_base(&base, 1_000_000, false).await;
    let solana_payer = solana_keypair::Keypair::new();
    let solana_address = solana_payer.pubkey().to_string();
    solana.set_sol(&solana_address, 100_000_000).await;
    solana.set_usdc(&solana_address, 1_000_000).await;

    let wallets = [
        ("SCENARIO", "wallets".to_string()),
        ("SMART_WALLET", smart.smart_wallet.as_ref().unwrap().to_string()),
        ("BASE_RPC", base.rpc_url.clone()),
        ("SOLANA_PAYER_KEY", solana_payer.to_base58_string()),
    ];
    let result = paypage(&server, &seller, &smart.key, &wallets).await;

    assert!(
        base.has_code(&smart_address).await,
        "the settlement deployed the smart wallet"
    );
    assert_eq!(base.usdc_of(&smart_address).await, 950_000);
    assert_eq!(base.usdc_of(&base_wallet).await, 50_000);
    let receipt = base
        .receipt(result["smartWallet"]["transaction"].as_str().unwrap())
        .await;
    assert_eq!(receipt["status"], "0x1", "{result} {receipt}");
    assert_eq!(solana.usdc_of(&solana_address).await, Some(950_000));
    assert_eq!(solana.usdc_of(&solana_wallet).await, Some(50_000));
    let paid = payments(&env);
    assert_eq!(paid.len(), 2, "{paid:?}");
    assert!(paid.iter().all(|p| p["state"] == "served"), "{paid:?}");
    assert!(
        paid.iter()
            .any(|p| p["receipt"]["transactionSignature"] == result["solana"]["transaction"]),
        "{result} {paid:?}"
    );
}

/// What the page has the server build on Solana: the standard x402 payment (the seller's
/// fee payer, the payer's transfer of exactly the price, a memo that keeps two payments
/// apart), unsigned; refused with the paid API's errors for bad input.
#[tokio::test]
async fn the_solana_payment_transaction_is_the_standard_payment_unsigned() {
    use crate::support::chains::LocalSolana;
    use solana_signer::Signer;
    let chain = LocalSolana::start();
    let (env, agent_wallet) = solana_shop(&chain, TestEnv::new(), "").await;
    let server = env.serve();
    let url = server.url("/x402/solana/seller/payment-transaction");
    let payer = solana_keypair::Keypair::new();
    let build = |body: Value| {
        let url = url.clone();
        async move { post_json(&url, None, &body).await }
    };
    let decode = |reply: &Reply| -> solana_transaction::versioned::VersionedTransaction {
        let raw = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            reply.json()["transaction"].as_str().unwrap(),
        )
        .unwrap();
        bincode::deserialize(&raw).unwrap()
    };
    let mut memos = Vec::new();
    for (body, price) in [
        (serde_json::json!({ "payer": payer.pubkey().to_string() }), 10_000u64),
        (
            serde_json::json!({ "payer": payer.pubkey().to_string(), "command": "hello" }),
            50_000,
        ),
        (
            serde_json::json!({ "payer": payer.pubkey().to_string(), "command": "hello" }),
            50_000,
        ),
    ] {
        let reply = build(body).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(reply.json()["amount"], price.to_string());
        let tx = decode(&reply);
        let keys = tx.message.static_account_keys();
        assert_eq!(keys[0].to_string(), agent_wallet, "the seller's wallet pays the fee");
        assert!(tx.signatures.iter().all(|s| *s == Default::default()), "unsigned");
        let instructions = tx.message.instructions();
        assert_eq!(instructions.len(), 4);
        let transfer = &instructions[2].data;
        assert_eq!(transfer[0], 12, "TransferChecked");
        assert_eq!(u64::from_le_bytes(transfer[1..9].try_into().unwrap()), price);
        memos.push(instructions[3].data.clone());
    }
    assert_ne!(memos[1], memos[2], "two payments of one price are two messages");
    let refusals = [
        (
            serde_json::json!({ "payer": "not-an-address" }),
            400,
            "validation_error",
        ),
        (serde_json::json!({ "payer": agent_wallet }), 400, "validation_error"),
        (
            serde_json::json!({ "payer": payer.pubkey().to_string(), "extra": 1 }),
            400,
            "validation_error",
        ),
        (
            serde_json::json!({ "payer": payer.pubkey().to_string(), "command": "nope" }),
            404,
            "command_not_found",
        ),
    ];
    for (body, status, code) in refusals {
        let reply = build(body.clone()).await;
        assert_eq!(
            (reply.status, reply.json()["code"].clone()),
            (status, code.into()),
            "{body}: {}",
            reply.text
        );
        assert_eq!(reply.json()["success"], false);
    }
}
