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

#[tokio::test(flavor = "multi_thread")]
async fn a_person_pays_on_the_payment_page_and_another_origin_pays_with_the_reference_client() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&chromium).exists(),
        "{chromium} is missing: scripts/test.sh installs Debian's chromium"
    );
    let chain = LocalBase::start().await;
    let (env, agent_wallet) = base_shop(&chain, TestEnv::new(), "").await;
    let seller = env.cli_json(&["agent", "show", "seller"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let server = env.serve();
    let (payer, payer_address) = Payer::on_base(&chain, 1_000_000).await;

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/node/paypage.mjs");
    let mut run = tokio::process::Command::new("node");
    run.arg(script)
        .env("PAY_BASE", server.url(""))
        .env("SELLER", &seller)
        .env("PAYER_KEY", &payer.key)
        .env("CHROMIUM", &chromium);
    if let Ok(dir) = std::env::var("PAYPAGE_SCREENSHOTS") {
        run.env("SCREENSHOTS", dir);
    }
    let (passed, log) = run_tool(run, Duration::from_secs(180), "the browser payments").await;
    assert!(
        passed,
        "the browser payments failed:\n{log}\nserver log:\n{}",
        server.log()
    );
    let result: Value = log
        .lines()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("no result line in:\n{log}"));

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
