//! The pay-per-use API's price list: `GET /x402/{network}/{agentId}` and the 402 a
//! `POST` without `X-PAYMENT` answers, as standard x402 (version 1) clients read them.

use serde_json::{Value, json};

use crate::support::*;

const PUBLIC: &str = "https://pay.example.com";

struct Shop {
    _env: TestEnv,
    server: TestServer,
    agent_id: String,
    solana_wallet: String,
    base_wallet: String,
}

fn paid_manifest(username: &str) -> String {
    format!(
        r#"{}
[[commands]]
command = "forecast"
description = "Weather for a city"
handler_type = "simple_text"
integrations = ["x402"]
parameters = [{{ name = "city", type = "string", required = true, description = "City name" }}, {{ name = "name", type = "string" }}]
config = {{ text = "Sunny in {{{{city}}}}" }}

[x402]
enabled = true
default_price_usd = 0.01
networks = ["solana", "base"]
"#,
        manifest(username)
    )
}

fn open_shop() -> Shop {
    let env = TestEnv::new().with_env("AGENT_HOST_PUBLIC_BASE_URL", PUBLIC);
    env.create_account("acme", "free");
    let agent_id = env.apply_agent(&paid_manifest("seller"), "acme");
    let wallet = |network: &str| {
        env.cli_json(&["wallet", "create", "--agent", "seller", "--network", network])["address"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (solana_wallet, base_wallet) = (wallet("solana"), wallet("base"));
    // Neither x402 nor wallets: not for sale.
    env.apply_agent(&manifest("private"), "acme");
    let server = env.serve();
    Shop {
        _env: env,
        server,
        agent_id,
        solana_wallet,
        base_wallet,
    }
}

async fn post_x402(url: &str, body: &Value) -> Reply {
    post_json(url, None, body).await
}

#[tokio::test]
async fn the_price_list_is_a_standard_payment_requirement() {
    let shop = open_shop();
    let reply = get(&shop.server.url("/x402/base/seller"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let body = reply.json();
    assert_eq!(body["x402Version"], 1);
    assert!(body["error"].is_string());
    assert_eq!(body["accepts"].as_array().unwrap().len(), 1);
    let requirement = &body["accepts"][0];
    assert_eq!(
        requirement,
        &json!({
            "scheme": "exact",
            "network": "base",
            "maxAmountRequired": "10000",
            "resource": format!("{PUBLIC}/x402/base/{}", shop.agent_id),
            "description": "A message to Agent seller, or one of its commands",
            "mimeType": "application/json",
            "payTo": shop.base_wallet,
            "maxTimeoutSeconds": 60,
            "asset": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
            "outputSchema": { "input": {
                "type": "http",
                "method": "POST",
                "bodyType": "json",
                "bodyFields": {
                    "message": { "type": "string", "required": false, "description": "Free text for the agent; a leading /command runs that command" },
                    "command": { "type": "string", "required": false, "description": "A command to run instead of a message", "enum": ["hello", "forecast"] },
                    "name": { "type": "string", "required": false, "description": "Who (/hello)" },
                    "city": { "type": "string", "required": false, "description": "City name (/forecast)" },
                },
            }},
            "extra": {
                "serviceName": "agent-host",
                "agentId": shop.agent_id,
                "agentName": "Agent seller",
                "availableCommands": ["hello", "forecast"],
                "commandPricing": { "hello": 0.05, "forecast": 0.01 },
                "name": "USD Coin",
                "version": "2",
            },
        })
    );

    // Solana: the USDC mint, and the fee payer standard clients leave to us.
    let body = get(&shop.server.url(&format!("/x402/solana/{}", shop.agent_id)), None)
        .await
        .json();
    let requirement = &body["accepts"][0];
    assert_eq!(requirement["payTo"], shop.solana_wallet.as_str());
    assert_eq!(requirement["asset"], "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v");
    assert_eq!(requirement["extra"]["feePayer"], shop.solana_wallet.as_str());
    assert!(requirement["extra"].get("name").is_none());
}

#[tokio::test]
async fn an_unpaid_request_gets_a_402_priced_for_what_it_asked() {
    let shop = open_shop();
    let url = shop.server.url("/x402/base/seller");
    let price = |reply: &Reply| {
        assert_eq!(reply.status, 402, "{}", reply.text);
        let body = reply.json();
        assert_eq!(body["x402Version"], 1);
        body["accepts"][0]["maxAmountRequired"].as_str().unwrap().to_string()
    };
    assert_eq!(
        price(&post_x402(&url, &json!({ "command": "hello", "name": "Ann" })).await),
        "50000"
    );
    assert_eq!(
        price(&post_x402(&url, &json!({ "message": "/hello Ann" })).await),
        "50000"
    );
    assert_eq!(
        price(&post_x402(&url, &json!({ "message": "/forecast Oslo" })).await),
        "10000"
    );
    assert_eq!(
        price(&post_x402(&url, &json!({ "message": "What can you do?" })).await),
        "10000"
    );
    let reply = post_x402(&url, &json!({ "command": "hello" })).await;
    assert_eq!(reply.json()["accepts"][0]["description"], "Run /hello of Agent seller");
}

#[tokio::test]
async fn what_cannot_be_bought_is_refused_in_the_x402_envelope() {
    let shop = open_shop();
    let check = |reply: Reply, status: u16, code: &str| {
        assert_eq!(reply.status, status, "{}", reply.text);
        let body = reply.json();
        assert_eq!(
            (
                body["success"].clone(),
                body["code"].clone(),
                body["x402Version"].clone()
            ),
            (json!(false), json!(code), json!(1)),
            "{body}"
        );
    };
    let url = |path: &str| shop.server.url(path);
    check(get(&url("/x402/base/nobody"), None).await, 404, "agent_not_found");
    check(get(&url("/x402/base/private"), None).await, 404, "agent_not_found");
    check(
        get(&url("/x402/ethereum/seller"), None).await,
        400,
        "unsupported_network",
    );
    check(
        post_x402(&url("/x402/base/seller"), &json!({ "command": "secret" })).await,
        404,
        "command_not_found",
    );
    check(
        post_x402(&url("/x402/base/seller"), &json!({ "message": "/about" })).await,
        404,
        "command_not_found",
    );
    check(
        post_x402(&url("/x402/base/seller"), &json!({})).await,
        400,
        "validation_error",
    );
    check(
        post_x402(&url("/x402/base/seller"), &json!({ "message": 5 })).await,
        400,
        "validation_error",
    );
}

#[tokio::test]
async fn an_agent_needs_a_wallet_on_the_network_to_be_paid() {
    let env = TestEnv::new();
    env.create_account("acme", "free");
    env.apply_agent(&paid_manifest("seller"), "acme");
    env.cli_json(&["wallet", "create", "--agent", "seller", "--network", "solana"]);
    let server = env.serve();
    let reply = get(&server.url("/x402/base/seller"), None).await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.json()["code"], "wallet_not_configured");
    assert_eq!(get(&server.url("/x402/solana/seller"), None).await.status, 200);
}
