//! The pay-per-use API's price list: `GET /x402/{network}/{agentId}` and the 402 a
//! `POST` without `X-PAYMENT` answers, as standard x402 (version 1) clients read them.

use serde_json::{Value, json};

use crate::support::x402::*;
use crate::support::*;

const PUBLIC: &str = "https://pay.example.com";

struct Shop {
    _env: TestEnv,
    server: TestServer,
    agent_id: String,
    solana_wallet: String,
    base_wallet: String,
}

fn open_shop() -> Shop {
    let env = TestEnv::new().with_env("AGENT_HOST_PUBLIC_BASE_URL", PUBLIC);
    env.create_account("acme", "free");
    let agent_id = env.apply_agent(&paid_manifest("seller"), "acme");
    let wallet = |network: &str| env.create_wallet("seller", network);
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
    let reply = post_x402(&url, &json!({ "command": "hello", "name": "Ann" })).await;
    assert_eq!(reply.json()["accepts"][0]["description"], "Run /hello of Agent seller");
    // Parameters the command would refuse are refused before anyone signs for them.
    let reply = post_x402(&url, &json!({ "command": "hello" })).await;
    assert_eq!(
        (reply.status, reply.json()["code"].clone()),
        (400, json!("validation_error"))
    );
    // No body at all is a probe of the address: the price of what it sells.
    assert_eq!(price(&send(client().post(&url)).await), "10000");
    let command_url = shop.server.url("/x402/base/seller/commands/hello");
    assert_eq!(price(&send(client().post(&command_url)).await), "50000");
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
    // Text no database can keep is refused before a price is even named.
    check(
        post_x402(&url("/x402/base/seller"), &json!({ "message": "a\u{0}b" })).await,
        400,
        "validation_error",
    );
    check(get(&url("/x402/base/sel%00ler"), None).await, 400, "validation_error");
    // The index answers in version 2's words, a malformed query too.
    let reply = get(&url("/discovery/resources?type=%00"), None).await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    let body = reply.json();
    assert_eq!(
        (&body["success"], &body["code"], &body["x402Version"]),
        (&json!(false), &json!("validation_error"), &json!(2))
    );
}

/// The paid routes read their bodies raw; a body over the limit, one sent as a form and a
/// client past its limit are still answered in x402's envelope, not the framework's text.
#[tokio::test]
async fn oversized_untyped_and_too_frequent_requests_keep_the_x402_envelope() {
    let env = TestEnv::new()
        .with_env("AGENT_HOST_MAX_BODY_BYTES", "2000")
        .with_env("AGENT_HOST_X402_CLIENT_LIMIT_PER_MINUTE", "4");
    env.create_account("acme", "free");
    env.apply_agent(&paid_manifest("seller"), "acme");
    env.create_wallet("seller", "base");
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let envelope = |reply: &Reply, status: u16, code: &str| {
        assert_eq!(reply.status, status, "{}", reply.text);
        assert_eq!(reply.header("content-type"), Some("application/json"));
        let body = reply.json();
        assert_eq!(
            (&body["success"], &body["code"], &body["x402Version"]),
            (&json!(false), &json!(code), &json!(1)),
            "{body}"
        );
        body["error"].as_str().unwrap().to_string()
    };
    let long = json!({ "message": "a".repeat(3000) });
    let too_large = send(client().post(&url).json(&long)).await;
    assert!(envelope(&too_large, 413, "validation_error").contains("too large"));
    // In the version the payer spoke: a v2 payment header is answered as version 2.
    let v2 = send(client().post(&url).header("payment-signature", "e30=").json(&long)).await;
    assert_eq!(v2.json()["x402Version"], 2, "{}", v2.text);
    // JSON sent without saying so (Python's requests with data=, fetch with a string) is
    // read as JSON: priced like any other. A body that says it is a form is refused.
    let untyped = send(client().post(&url).body(r#"{"message": "hi"}"#)).await;
    assert_eq!(untyped.status, 402, "{}", untyped.text);
    assert_eq!(
        untyped.json()["accepts"][0]["maxAmountRequired"],
        "10000",
        "{}",
        untyped.text
    );
    let form = send(
        client()
            .post(&url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body("message=hi"),
    )
    .await;
    assert!(envelope(&form, 400, "validation_error").contains("Content-Type"));
    // The fifth request this minute from this address.
    let limited = send(client().post(&url).json(&json!({ "message": "hi" }))).await;
    envelope(&limited, 429, "rate_limit_exceeded");
    let retry: u64 = limited.header("retry-after").expect("retry-after").parse().unwrap();
    // A sliding minute: the wait may reach into the next one.
    assert!((1..=120).contains(&retry), "{retry}: {}", limited.text);
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

#[tokio::test]
async fn a_base_payment_is_verified_settled_once_and_served() {
    use crate::support::chains::LocalBase;
    let chain = LocalBase::start().await;
    // Replays count against the payer and the client too: room for the race of 20.
    let env = TestEnv::new()
        .with_env("AGENT_HOST_BASE_RPC_URL", &chain.rpc_url)
        .with_env("AGENT_HOST_X402_PAYER_LIMIT_PER_MINUTE", "1000")
        .with_env("AGENT_HOST_X402_CLIENT_LIMIT_PER_MINUTE", "1000")
        // One payer walks every path, a refund included (the cool-off after a refund has
        // a test of its own, x402_abuse).
        .with_env("AGENT_HOST_X402_REFUND_COOLOFF_SECS", "0")
        .with_env("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1")
        .with_metrics();
    env.create_account("acme", "free");
    let agent_id = env.apply_agent(
        &format!("{}{BROKEN}{SLOW_BROKEN}{REPORT}", paid_manifest("seller")),
        "acme",
    );
    let agent_wallet = env.create_wallet("seller", "base");
    chain.set_eth(&agent_wallet, 10u128.pow(16)).await; // it relays: pays the gas
    let server = env.serve();
    let payer = alloy::signers::local::PrivateKeySigner::random();
    let payer_address = payer.address().to_checksum(None);
    chain.mint_usdc(&payer_address, 1_000_000).await;
    let url = server.url("/x402/base/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();

    // Paid exactly: answered, with the receipt, and the money moved on chain.
    let payment = base_payment(&payer, &requirement, 50_000, 1, 60);
    let reply = paid(&url, &hello, &payment).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let body = reply.json();
    assert_eq!(body["response"], "Hello, Ann!");
    assert_eq!(body["agentId"], agent_id.as_str());
    assert_eq!(body["x402Version"], 1);
    let receipt = &body["receipt"];
    assert_eq!(receipt["amountPaidMicroUsdc"], 50_000);
    assert_eq!(receipt["amountPaidUsdc"], json!(0.05));
    assert_eq!(receipt["payer"], payer_address.as_str());
    assert_eq!(receipt["payTo"], agent_wallet.as_str());
    let settlement = receipt["transactionSignature"].as_str().unwrap().to_string();
    let header = reply.header("x-payment-response").unwrap();
    let mut decoded: Value =
        serde_json::from_slice(&base64::Engine::decode(&base64::engine::general_purpose::STANDARD, header).unwrap())
            .unwrap();
    // The agent's signed receipt beside the settlement (docs/x402.md#signed-receipts).
    let signed = decoded.as_object_mut().unwrap().remove("extensions").unwrap();
    assert_eq!(
        signed["offer-receipt"]["info"]["receipt"]["format"], "eip712",
        "{signed}"
    );
    assert_eq!(
        decoded,
        json!({ "success": true, "transaction": settlement, "network": "base", "payer": payer_address })
    );
    assert_eq!(chain.usdc_of(&payer_address).await, 950_000);
    assert_eq!(chain.usdc_of(&agent_wallet).await, 50_000);

    // The same payment again, now and concurrently: never charged twice. For the same
    // request it is a retry (its answer was lost on the way): the answer it bought, with
    // the same settlement; for another request it is refused.
    let reply = paid(&url, &hello, &payment).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json()["response"], "Hello, Ann!");
    assert_eq!(reply.json()["receipt"]["transactionSignature"], settlement.as_str());
    let reply = paid(&url, &json!({ "message": "/hello Bob" }), &payment).await;
    assert_eq!(
        (reply.status, reply.json()["code"].clone()),
        (409, json!("payment_already_used")),
        "{}",
        reply.text
    );
    let fresh = base_payment(&payer, &requirement, 50_000, 2, 60);
    let mut racers = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let (url, hello, fresh) = (url.clone(), hello.clone(), fresh.clone());
        racers.spawn(async move { paid(&url, &hello, &fresh).await });
    }
    let replies = racers.join_all().await;
    one_settlement_for_all(&replies);
    assert_eq!(chain.usdc_of(&payer_address).await, 900_000);

    // Paid for the cheap command, presented for the expensive one; short, expired.
    let forecast = post_x402(&url, &json!({ "command": "forecast", "city": "Oslo" }))
        .await
        .json()["accepts"][0]
        .clone();
    let cases = [
        (
            base_payment(&payer, &forecast, 10_000, 3, 60),
            "payment_amount_mismatch",
        ),
        (
            base_payment(&payer, &requirement, 49_999, 4, 60),
            "payment_amount_mismatch",
        ),
        (
            base_payment(&payer, &requirement, 50_001, 10, 60),
            "payment_amount_mismatch",
        ),
        (base_payment(&payer, &requirement, 50_000, 5, 3), "payment_expired"),
        (
            // Signed by someone else, in the payer's name.
            in_the_name_of(
                &base_payment(
                    &alloy::signers::local::PrivateKeySigner::random(),
                    &requirement,
                    50_000,
                    11,
                    60,
                ),
                &payer_address,
            ),
            "invalid_signature",
        ),
    ];
    for (payment, code) in cases {
        let reply = paid(&url, &hello, &payment).await;
        assert_eq!(
            (reply.status, reply.json()["code"].clone()),
            (402, json!(code)),
            "{}",
            reply.text
        );
    }
    // Wrong recipient: signed to pay someone else.
    let mut elsewhere = requirement.clone();
    elsewhere["payTo"] = json!(alloy::signers::local::PrivateKeySigner::random().address().to_string());
    let reply = paid(&url, &hello, &base_payment(&payer, &elsewhere, 50_000, 6, 60)).await;
    assert_eq!(reply.json()["code"], "payment_recipient_mismatch", "{}", reply.text);
    assert_eq!(
        chain.usdc_of(&payer_address).await,
        900_000,
        "no refused payment moved money"
    );

    // A run that fails after settlement is refunded from the agent's wallet.
    let broken_req = post_x402(&url, &json!({ "command": "broken" })).await.json()["accepts"][0].clone();
    let reply = paid(
        &url,
        &json!({ "command": "broken" }),
        &base_payment(&payer, &broken_req, 20_000, 7, 60),
    )
    .await;
    assert_eq!(reply.status, 500, "{}", reply.text);
    let body = reply.json();
    assert_eq!(body["code"], "execution_error");
    assert!(body["refundTransactionSignature"].is_string(), "{body}");
    assert_eq!(chain.usdc_of(&payer_address).await, 900_000, "the 0.02 came back");
    assert_eq!(chain.usdc_of(&agent_wallet).await, 100_000);

    // A long-running paid command: 202 with the receipt, then polled to its result.
    let report = json!({ "command": "report" });
    let report_req = post_x402(&url, &report).await.json()["accepts"][0].clone();
    let reply = paid(&url, &report, &base_payment(&payer, &report_req, 30_000, 8, 60)).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let body = reply.json();
    assert_eq!(body["receipt"]["amountPaidMicroUsdc"], 30_000);
    assert!(body["jobId"].is_string() && body["etaSeconds"].is_number() && body["retryAfterSeconds"].is_number());
    let status = poll_job(body["statusUrl"].as_str().unwrap(), std::time::Duration::from_secs(20)).await;
    assert_eq!(status["state"], "succeeded", "{status}");
    assert_eq!(chain.usdc_of(&payer_address).await, 870_000);

    // A paid job that ends failed: its payer is refunded.
    let slow = json!({ "command": "slowbroken" });
    let slow_req = post_x402(&url, &slow).await.json()["accepts"][0].clone();
    let reply = paid(&url, &slow, &base_payment(&payer, &slow_req, 40_000, 9, 60)).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let job_id = reply.json()["jobId"].clone();
    let status = poll_job(
        reply.json()["statusUrl"].as_str().unwrap(),
        std::time::Duration::from_secs(20),
    )
    .await;
    assert_eq!(status["state"], "failed", "{status}");
    // The refund is recorded once its transfer is confirmed: wait for the record.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let payments = loop {
        let payments = env.cli_json(&["payments", "list", "--agent", "seller"]);
        if payments[0]["state"] == "refunded" {
            break payments;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the failed job's payment was not refunded: {payments}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(chain.usdc_of(&payer_address).await, 870_000);
    assert_eq!(payments[0]["job_id"], job_id);
    // The failed job's status record names the refund, as it is on chain.
    let failed = get(&server.url(&format!("/jobs/{}", job_id.as_str().unwrap())), None)
        .await
        .json();
    let transfers = env.cli_json(&["wallet", "transfers", "--agent", "seller"]);
    let refund = transfers
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == payments[0]["refund_transfer_id"])
        .expect("the refund's transfer is listed");
    assert_eq!(failed["refundTransactionSignature"], refund["signature"], "{failed}");
    assert!(refund["signature"].is_string());
    // Refunded once only, however the job's end and the link raced, and recovery (which
    // would finish a refund left half-done) finds nothing more to pay.
    server.after_a_full_recovery_pass().await;
    assert_eq!(chain.usdc_of(&payer_address).await, 870_000);
    let refunds = env.cli_json(&["wallet", "transfers", "--agent", "seller"]);
    let refunds = refunds.as_array().unwrap().iter().filter(|t| t["kind"] == "refund");
    assert_eq!(
        refunds.count(),
        2,
        "the broken command's and the failed job's, once each"
    );

    // The owner sees every payment with its receipt and how it ended.
    let payments = env.cli_json(&["payments", "list", "--agent", "seller"]);
    let states: Vec<&str> = payments
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        ["refunded", "served", "refunded", "served", "served"],
        "{payments}"
    );
    assert_eq!(payments[4]["receipt"]["transactionSignature"], settlement.as_str());
    assert_eq!(payments[4]["receipt"]["amountPaidMicroUsdc"], 50_000);
    assert_eq!(payments[4]["command"], "hello");
    assert!(payments[2]["refund_transfer_id"].is_string());
}

#[tokio::test]
async fn a_solana_payment_is_co_signed_settled_once_and_served() {
    use crate::support::chains::LocalSolana;
    use solana_signer::Signer;
    let chain = LocalSolana::start();
    let env = TestEnv::new().with_envs(chain.env());
    env.create_account("acme", "free");
    env.apply_agent(&paid_manifest("seller"), "acme");
    let agent_wallet = env.create_wallet("seller", "solana");
    chain.set_sol(&agent_wallet, 1_000_000_000).await; // it pays the fees
    chain.set_usdc(&agent_wallet, 0).await; // x402 clients need payTo's token account to exist
    let server = env.serve();
    let payer = solana_keypair::Keypair::new();
    let payer_address = payer.pubkey().to_string();
    chain.set_usdc(&payer_address, 1_000_000).await;
    let url = server.url("/x402/solana/seller");
    let hello = json!({ "message": "/hello Ann" });
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();

    let payment = solana_payment(&chain, &payer, &requirement, 50_000).await;
    let reply = paid(&url, &hello, &payment).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let body = reply.json();
    assert_eq!(body["response"], "Hello, Ann!");
    assert_eq!(body["receipt"]["payer"], payer_address.as_str());
    assert_eq!(body["receipt"]["payTo"], agent_wallet.as_str());
    assert_eq!(body["receipt"]["amountPaidMicroUsdc"], 50_000);
    let settled = crate::support::chains::rpc(
        &chain.rpc_url,
        "getSignatureStatuses",
        json!([[body["receipt"]["transactionSignature"]], { "searchTransactionHistory": true }]),
    )
    .await;
    assert!(settled["value"][0]["err"].is_null(), "{settled}");
    assert_eq!(chain.usdc_of(&payer_address).await, Some(950_000));
    assert_eq!(chain.usdc_of(&agent_wallet).await, Some(50_000));

    // Again for the same request: its answer, not charged twice; for another: refused.
    // Short: refused before anything moves.
    let reply = paid(&url, &hello, &payment).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let receipt = &reply.json()["receipt"];
    assert_eq!(receipt["transactionSignature"], body["receipt"]["transactionSignature"]);
    assert_eq!(receipt["amountPaidMicroUsdc"], 50_000);
    let reply = paid(&url, &json!({ "message": "/hello Bob" }), &payment).await;
    assert_eq!(
        (reply.status, reply.json()["code"].clone()),
        (409, json!("payment_already_used")),
        "{}",
        reply.text
    );
    let short = solana_payment(&chain, &payer, &requirement, 49_999).await;
    let reply = paid(&url, &hello, &short).await;
    assert_eq!(
        (reply.status, reply.json()["code"].clone()),
        (402, json!("payment_amount_mismatch")),
        "{}",
        reply.text
    );
    assert_eq!(chain.usdc_of(&payer_address).await, Some(950_000));
}

/// Every Solana payment that breaks a rule is refused with its code before anything is
/// sent; the x402 specification's own form (the payer pays the fee) is served; and of 20 concurrent
/// submissions of one payment exactly one is served.
#[tokio::test]
async fn solana_payments_are_checked_rule_by_rule() {
    use crate::support::chains::LocalSolana;
    use solana_instruction::{AccountMeta, Instruction};
    use solana_keypair::Keypair;
    use solana_signer::Signer;
    let chain = LocalSolana::start();
    // Replays count against the payer too: room for the race of 20.
    let env = TestEnv::new()
        .with_env("AGENT_HOST_X402_PAYER_LIMIT_PER_MINUTE", "1000")
        .with_envs(chain.env());
    env.create_account("acme", "free");
    env.apply_agent(&paid_manifest("seller"), "acme");
    let agent_wallet = env.create_wallet("seller", "solana");
    chain.set_sol(&agent_wallet, 1_000_000_000).await;
    chain.set_usdc(&agent_wallet, 5_000_000).await; // the agent's own money: a target
    let server = env.serve();
    let (payer, mallory) = (Keypair::new(), Keypair::new());
    let payer_address = payer.pubkey().to_string();
    chain.set_usdc(&payer_address, 1_000_000).await;
    chain.set_sol(&payer_address, 100_000_000).await; // for the x402 specification's form, where it pays the fee
    let url = server.url("/x402/solana/seller");
    let hello = json!({ "message": "/hello Ann" });
    let requirement = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let fee_payer = solana_key(&requirement["extra"]["feePayer"]);
    let usdc = solana_key(&requirement["asset"]);
    let ata = agent_host::chains::solana::associated_token_address;
    let blockhash = latest_blockhash(&chain).await;
    let standard = |amount: u64| solana_instructions(&payer.pubkey(), &requirement, amount);
    let transfer_checked = |source, mint, destination, authority| {
        spl_token_interface::instruction::transfer_checked(
            &spl_token_interface::ID,
            &source,
            &mint,
            &destination,
            &authority,
            &[],
            50_000,
            6,
        )
        .unwrap()
    };
    let co_signed = |instructions: Vec<Instruction>, signers: &[&Keypair]| {
        solana_envelope(&fee_payer, &instructions, signers, blockhash, false)
    };

    let other_mint = solana_pubkey::Pubkey::new_unique();
    let mut wrong_mint = standard(50_000);
    wrong_mint[2] = transfer_checked(
        ata(&payer.pubkey(), &other_mint),
        other_mint,
        ata(&fee_payer, &other_mint),
        payer.pubkey(),
    );
    let mut elsewhere = requirement.clone();
    elsewhere["payTo"] = json!(mallory.pubkey().to_string());
    let mut extra_instruction = standard(50_000);
    let mut system_transfer = vec![2, 0, 0, 0];
    system_transfer.extend_from_slice(&50_000_000u64.to_le_bytes());
    extra_instruction.push(Instruction::new_with_bytes(
        solana_pubkey::Pubkey::default(), // the System program
        &system_transfer,
        vec![
            AccountMeta::new(payer.pubkey(), true),
            AccountMeta::new(mallory.pubkey(), false),
        ],
    ));
    // The transfer draws on the fee payer's (the agent's) own USDC: we would sign it.
    let mut fee_payer_pays = standard(50_000);
    fee_payer_pays[2] = transfer_checked(ata(&fee_payer, &usdc), usdc, ata(&fee_payer, &usdc), fee_payer);
    let cases = [
        ("wrong mint", co_signed(wrong_mint, &[&payer]), "wrong_asset"),
        (
            "wrong recipient",
            co_signed(solana_instructions(&payer.pubkey(), &elsewhere, 50_000), &[&payer]),
            "payment_recipient_mismatch",
        ),
        (
            "short",
            co_signed(standard(49_999), &[&payer]),
            "payment_amount_mismatch",
        ),
        (
            "over",
            co_signed(standard(50_001), &[&payer]),
            "payment_amount_mismatch",
        ),
        (
            "extra instruction",
            co_signed(extra_instruction, &[&payer]),
            "invalid_payment",
        ),
        (
            "fee payer moving funds",
            co_signed(fee_payer_pays, &[]),
            "invalid_payment",
        ),
        (
            "not signed by the payer",
            co_signed(standard(50_000), &[&mallory]),
            "invalid_signature",
        ),
        (
            "expired blockhash",
            solana_envelope(
                &fee_payer,
                &standard(50_000),
                &[&payer],
                solana_hash::Hash::new_unique(),
                false,
            ),
            "payment_expired",
        ),
    ];
    for (case, payment, code) in cases {
        let reply = paid(&url, &hello, &payment).await;
        assert_eq!(
            (reply.status, reply.json()["code"].clone()),
            (402, json!(code)),
            "{case}: {}",
            reply.text
        );
    }
    assert_eq!(chain.usdc_of(&payer_address).await, Some(1_000_000), "nothing moved");
    assert_eq!(chain.usdc_of(&agent_wallet).await, Some(5_000_000));

    // The x402 specification's own form: the payer is the fee payer and signs everything.
    let agent_sol = chain.sol_of(&agent_wallet).await;
    let spec_form = solana_envelope(&payer.pubkey(), &standard(50_000), &[&payer], blockhash, true);
    let reply = paid(&url, &hello, &spec_form).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json()["receipt"]["payer"], payer_address.as_str());
    assert_eq!(chain.usdc_of(&payer_address).await, Some(950_000));
    assert!(
        chain.sol_of(&payer_address).await < 100_000_000,
        "the payer paid the fee"
    );
    assert_eq!(chain.sol_of(&agent_wallet).await, agent_sol, "the agent paid nothing");

    // One payment, 20 concurrent submissions: exactly one is served.
    let payment = solana_payment(&chain, &payer, &requirement, 50_000).await;
    let mut racers = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let (url, hello, payment) = (url.clone(), hello.clone(), payment.clone());
        racers.spawn(async move { paid(&url, &hello, &payment).await });
    }
    let replies = racers.join_all().await;
    one_settlement_for_all(&replies);
    assert_eq!(chain.usdc_of(&payer_address).await, Some(900_000));
    assert_eq!(chain.usdc_of(&agent_wallet).await, Some(5_100_000));
}

/// Replies to one payment presented many times at once for one request: each is its
/// answer with one and the same settlement, or asks to retry while the first is answered.
fn one_settlement_for_all(replies: &[Reply]) {
    let texts: Vec<&str> = replies.iter().map(|r| r.text.as_str()).collect();
    let served: Vec<Value> = replies
        .iter()
        .filter(|r| r.status == 200)
        .map(|r| r.json()["receipt"]["transactionSignature"].clone())
        .collect();
    assert!(!served.is_empty(), "{texts:?}");
    assert!(served.iter().all(|tx| tx == &served[0]), "{texts:?}");
    assert!(
        replies
            .iter()
            .all(|r| r.status == 200 || (r.status == 429 && r.json()["code"] == "payment_in_progress")),
        "{texts:?}"
    );
}
