//! Sign-in with the wallet that paid (x402's sign-in-with-x), with @x402/extensions' own
//! client (`tests/node/sign_in.mjs`, `tests/node/mcp.mjs`) on the local chains: a wallet
//! that paid uses its pass, any wallet its free calls, and nothing more; a nonce is used
//! once, and a challenge signed for another domain is refused.

use serde_json::{Value, json};

use crate::support::chains::{LocalBase, LocalSolana};
use crate::support::mcp::sdk_client;
use crate::support::payers::{Payer, X402Client, pay_with};
use crate::support::x402::*;
use crate::support::*;

/// `weather` (0.03 USDC): a payment buys two more calls within the hour; `tip` (0.02):
/// one free call a day to any wallet that signs in, three a day for all wallets together;
/// `plain`: no sign-in at all.
const SIGN_IN_COMMANDS: &str = r#"
[[commands]]
command = "weather"
description = "Weather for a city"
handler_type = "simple_text"
integrations = ["mcp", "x402"]
price_usd = 0.03
parameters = [{ name = "city", type = "string", required = true }]
config = { text = "Sunny in {{city}}" }
sign_in = { pass = { calls = 2, hours = 1 } }

[[commands]]
command = "tip"
description = "A tip of the day"
handler_type = "simple_text"
integrations = ["mcp", "x402"]
price_usd = 0.02
config = { text = "Drink water." }
sign_in = { free = { calls = 1, hours = 24, total = 3 } }

[[commands]]
command = "plain"
description = "Paid every time"
handler_type = "simple_text"
integrations = ["x402"]
price_usd = 0.02
config = { text = "Paid." }
"#;

async fn sign_in_client(request: Value) -> Value {
    client_script("node", "node/sign_in.mjs", &request, "the sign-in client").await
}

/// POSTs `body` through the extension's `wrapFetchWithSIWx` as `payer`.
async fn signed_fetch(payer: &Payer<'_>, url: &str, body: Value) -> Value {
    sign_in_client(json!({ "mode": "fetch", "network": payer.network, "key": payer.key, "url": url, "body": body }))
        .await
}

/// The sign-in challenge of a fresh 402 at `url`.
async fn challenge_at(url: &str, body: &Value) -> Value {
    let reply = post_x402(url, body).await;
    assert_eq!(reply.status, 402, "{}", reply.text);
    let required = b64_json(reply.header("payment-required").expect("a v2 402"));
    required["extensions"]["sign-in-with-x"].clone()
}

fn b64_json(text: &str) -> Value {
    use base64::Engine;
    serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(text).unwrap()).unwrap()
}

/// Sends a signed challenge (the `SIGN-IN-WITH-X` value) with `body`.
async fn send_signed(url: &str, header: &str, body: &Value) -> Reply {
    send(client().post(url).header("sign-in-with-x", header).json(body)).await
}

#[tokio::test]
async fn a_wallet_that_paid_signs_in_on_base_and_uses_its_pass_then_pays_again() {
    let chain = LocalBase::start().await;
    let (env, _wallet) = base_shop(&chain, TestEnv::new(), SIGN_IN_COMMANDS).await;
    let server = env.serve();
    let weather = server.url("/x402/base/seller/commands/weather");
    let city = json!({ "city": "Oslo" });
    let (payer, address) = Payer::on_base(&chain, 1_000_000).await;

    // The 402 offers a challenge bound to this address, on the chains the agent sells on;
    // a command without sign-in terms offers none.
    let offered = challenge_at(&weather, &city).await;
    assert_eq!(
        offered["info"]["uri"].as_str().unwrap(),
        offered["info"]["resources"][0].as_str().unwrap()
    );
    assert!(
        offered["info"]["uri"]
            .as_str()
            .unwrap()
            .starts_with(&server.url("/x402/base/")),
        "{offered}"
    );
    assert!(
        offered["supportedChains"]
            .as_array()
            .unwrap()
            .contains(&json!({ "chainId": "eip155:8453", "type": "eip191" })),
        "{offered}"
    );
    let plain = post_x402(&server.url("/x402/base/seller/commands/plain"), &json!({})).await;
    assert!(
        b64_json(plain.header("payment-required").unwrap())["extensions"]
            .get("sign-in-with-x")
            .is_none()
    );

    // Before paying, the client signs in and is asked to pay still, told why.
    let unpaid = signed_fetch(&payer, &weather, city.clone()).await;
    assert_eq!(unpaid["status"], 402, "{unpaid}");
    assert_eq!(unpaid["body"]["code"], "sign_in_refused", "{unpaid}");
    assert!(
        unpaid["body"]["error"].as_str().unwrap().contains("has not paid"),
        "{unpaid}"
    );
    assert!(
        unpaid["paymentRequired"]["extensions"]["sign-in-with-x"].is_object(),
        "a fresh challenge"
    );

    // Paid once with @x402/fetch; then two calls on the pass, and the third is paid for.
    let paid = pay_with(X402Client::Fetch2, &payer, &weather, &city).await;
    assert_eq!(paid.status, 200, "{}", paid.body);
    for left in [1, 0] {
        let used = signed_fetch(&payer, &weather, city.clone()).await;
        assert_eq!(used["status"], 200, "{used}");
        assert_eq!(used["body"]["response"], "Sunny in Oslo");
        assert_eq!(
            used["body"]["signedIn"],
            json!({ "wallet": address, "network": "base", "under": "pass", "callsLeft": left })
        );
    }
    let over = signed_fetch(&payer, &weather, city.clone()).await;
    assert_eq!(over["status"], 402, "{over}");
    assert!(over["body"]["error"].as_str().unwrap().contains("used up"), "{over}");
    assert_eq!(chain.usdc_of(&address).await, 970_000, "one payment, three answers");
    // Paying again buys a new pass.
    assert_eq!(pay_with(X402Client::Fetch2, &payer, &weather, &city).await.status, 200);
    assert_eq!(
        signed_fetch(&payer, &weather, city.clone()).await["body"]["signedIn"]["callsLeft"],
        1
    );

    // A free call: any wallet, once a day; a nonce once; another domain never.
    let tip = server.url("/x402/base/seller/commands/tip");
    let (stranger, _) = Payer::on_base(&chain, 1).await;
    let challenge = challenge_at(&tip, &json!({})).await;
    let signed = sign_in_client(json!({
        "mode": "sign", "network": "base", "key": stranger.key, "url": tip, "challenge": challenge,
    }))
    .await;
    let header = signed["header"].as_str().unwrap();
    // A command without parameters: no body at all will do.
    let first = send(client().post(&tip).header("sign-in-with-x", header)).await;
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(first.json()["signedIn"]["under"], "free");
    let replayed = send_signed(&tip, header, &json!({})).await;
    assert_eq!(replayed.status, 402, "{}", replayed.text);
    assert!(
        replayed.json()["error"].as_str().unwrap().contains("nonce was used"),
        "{}",
        replayed.text
    );
    let again = signed_fetch(&stranger, &tip, json!({})).await;
    assert_eq!(again["status"], 402, "{again}");
    assert!(
        again["body"]["error"]
            .as_str()
            .unwrap()
            .contains("free calls are used until"),
        "{again}"
    );

    let challenge = challenge_at(&tip, &json!({})).await;
    let (newcomer, _) = Payer::on_base(&chain, 1).await;
    let forged = sign_in_client(json!({
        "mode": "sign", "network": "base", "key": newcomer.key, "url": tip, "challenge": challenge,
        "domain": "evil.example",
    }))
    .await;
    let elsewhere = send_signed(&tip, forged["header"].as_str().unwrap(), &json!({})).await;
    assert_eq!(elsewhere.status, 402, "{}", elsewhere.text);
    assert!(
        elsewhere.json()["error"].as_str().unwrap().contains("evil.example"),
        "{}",
        elsewhere.text
    );
    // The refused sign-in used nothing: the newcomer's free call is still there.
    assert_eq!(signed_fetch(&newcomer, &tip, json!({})).await["status"], 200);
    // Wallets cost nothing to make: all of them together have three free calls a day.
    let (third, _) = Payer::on_base(&chain, 1).await;
    assert_eq!(signed_fetch(&third, &tip, json!({})).await["status"], 200);
    let (fourth, _) = Payer::on_base(&chain, 1).await;
    let none_left = signed_fetch(&fourth, &tip, json!({})).await;
    assert_eq!(none_left["status"], 402, "{none_left}");
    assert!(
        none_left["body"]["error"].as_str().unwrap().contains("all wallets"),
        "{none_left}"
    );

    // Over MCP: the same pass, through the SDK client with the extension's signer.
    let run = sdk_client(&json!({
        "url": server.url("/mcp/seller"),
        "calls": [
            { "name": "weather", "arguments": { "city": "Rome" }, "signIn": { "network": "base", "key": payer.key } },
            { "name": "weather", "arguments": { "city": "Rome" }, "signIn": { "network": "base", "key": payer.key } },
        ],
    }))
    .await;
    let used = &run["results"][0]["result"];
    assert_eq!(used["content"][0]["text"], "Sunny in Rome", "{used}");
    assert_eq!(used["isError"], false, "{used}");
    let over = &run["results"][1]["result"];
    assert!(
        over["structuredContent"]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("used up"),
        "the pass had one call left: {over}"
    );
    assert_eq!(chain.usdc_of(&address).await, 940_000, "two payments in all");
}

#[tokio::test]
async fn a_wallet_that_paid_signs_in_on_solana() {
    let chain = LocalSolana::start();
    let (env, _wallet) = solana_shop(&chain, TestEnv::new(), SIGN_IN_COMMANDS).await;
    let server = env.serve();
    let weather = server.url("/x402/solana/seller/commands/weather");
    let city = json!({ "city": "Lima" });
    let (payer, address) = Payer::on_solana(&chain, 1_000_000).await;

    let unpaid = signed_fetch(&payer, &weather, city.clone()).await;
    assert_eq!(unpaid["status"], 402, "{unpaid}");
    assert!(
        unpaid["body"]["error"].as_str().unwrap().contains("has not paid"),
        "{unpaid}"
    );
    let paid = pay_with(X402Client::Fetch2, &payer, &weather, &city).await;
    assert_eq!(paid.status, 200, "{}", paid.body);
    let used = signed_fetch(&payer, &weather, city.clone()).await;
    assert_eq!(used["status"], 200, "{used}");
    assert_eq!(
        used["body"]["signedIn"],
        json!({ "wallet": address, "network": "solana", "under": "pass", "callsLeft": 1 })
    );

    // Over MCP with the Solana signer; then a challenge signed for another domain.
    let run = sdk_client(&json!({
        "url": server.url("/mcp/seller"),
        "calls": [{ "name": "weather", "arguments": { "city": "Lima" }, "signIn": { "network": "solana", "key": payer.key } }],
    }))
    .await;
    assert_eq!(
        run["results"][0]["result"]["content"][0]["text"], "Sunny in Lima",
        "{run}"
    );
    let tip = server.url("/x402/solana/seller/commands/tip");
    let challenge = challenge_at(&tip, &json!({})).await;
    let forged = sign_in_client(json!({
        "mode": "sign", "network": "solana", "key": payer.key, "url": tip, "challenge": challenge,
        "domain": "evil.example",
    }))
    .await;
    let elsewhere = send_signed(&tip, forged["header"].as_str().unwrap(), &json!({})).await;
    assert_eq!(elsewhere.status, 402, "{}", elsewhere.text);
    assert!(
        elsewhere.json()["error"].as_str().unwrap().contains("evil.example"),
        "{}",
        elsewhere.text
    );
    assert_eq!(chain.usdc_of(&address).await, Some(970_000), "paid once");
}

/// Smart wallets sign in as they pay: a deployed one that paid uses its pass (its contract
/// accepts the signature, ERC-1271), and one not deployed yet uses a free call (ERC-6492,
/// checked with the wallet deployed in the simulation only).
#[tokio::test]
async fn smart_wallets_sign_in_deployed_or_not() {
    let chain = LocalBase::start().await;
    let (env, _wallet) = base_shop(&chain, TestEnv::new(), SIGN_IN_COMMANDS).await;
    let server = env.serve();
    let weather = server.url("/x402/base/seller/commands/weather");
    let city = json!({ "city": "Oslo" });
    let as_wallet = |payer: &Payer<'_>, url: &str, body: Value| {
        json!({ "mode": "fetch", "network": "base", "key": payer.key, "rpcUrl": payer.rpc_url,
                "smartWallet": payer.smart_wallet, "url": url, "body": body })
    };

    let (deployed, address) = Payer::smart_wallet_on_base(&chain, 1_000_000, true).await;
    assert_eq!(
        pay_with(X402Client::Fetch2, &deployed, &weather, &city).await.status,
        200
    );
    let used = sign_in_client(as_wallet(&deployed, &weather, city.clone())).await;
    assert_eq!(used["status"], 200, "{used}");
    assert_eq!(used["body"]["signedIn"]["wallet"], address);
    assert_eq!(used["body"]["signedIn"]["under"], "pass");

    let tip = server.url("/x402/base/seller/commands/tip");
    let (undeployed, address) = Payer::smart_wallet_on_base(&chain, 1, false).await;
    let free = sign_in_client(as_wallet(&undeployed, &tip, json!({}))).await;
    assert_eq!(free["status"], 200, "{free}");
    assert_eq!(free["body"]["signedIn"]["wallet"], address);
    assert!(!chain.has_code(&address).await, "signing in deployed nothing");
    // The owner's key alone is not the wallet: its signature names the key's address.
    let owner = Payer {
        smart_wallet: None,
        ..undeployed
    };
    let as_owner = signed_fetch(&owner, &tip, json!({})).await;
    assert_eq!(
        as_owner["body"]["signedIn"]["wallet"].as_str().map(|w| w == address),
        Some(false),
        "{as_owner}"
    );
}
