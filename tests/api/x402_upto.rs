//! A message priced by use (`[x402.chat_by_use]`), or a command (`by_use`), paid with
//! x402's `upto` scheme on Base: the payer signs a Permit2 witness transfer for the
//! maximum, and is charged, after the answer, for the tokens the model reported or the
//! units the command's plugin reported. On Anvil, with Permit2 (Uniswap's published
//! runtime code) and an upto proxy at their addresses and Circle's USDC; paid by
//! `@x402/fetch` with `@x402/evm`'s upto client, and by hand-signed payments for the edges.

use std::sync::{Arc, Mutex};

use alloy::primitives::U256;
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use serde_json::{Value, json};

use agent_host::chains::base::{PermitAuthorization, UPTO_PROXY};
use agent_host::chains::smart_wallets::PayerSignature;

use crate::support::chains::LocalBase;
use crate::support::facilitator::{RefFacilitator, fronted};
use crate::support::fake_llm::{Policy, fake_openai, refusal, text_with_usage};
use crate::support::mcp::sdk_client;
use crate::support::payers::{Payer, network_id, pay_by_use};
use crate::support::x402::*;
use crate::support::*;

/// $0.002 per 1,000 prompt tokens, $0.006 per 1,000 generated, at most $0.05 a message.
const BY_USE: &str = r#"
[x402.chat_by_use]
per_1k_input_tokens_usd = 0.002
per_1k_output_tokens_usd = 0.006
max_usd = 0.05
"#;
const MAX: u64 = 50_000;
/// What the model says each answer took.
const PROMPT_TOKENS: u64 = 1_234;
const COMPLETION_TOKENS: u64 = 567;
/// 2 micro-USDC a prompt token and 6 a generated one: 1,234 × 2 + 567 × 6.
const CHARGE: u64 = 5_870;

struct Shop {
    chain: LocalBase,
    env: TestEnv,
    server: TestServer,
    wallet: String,
    /// What the model was asked.
    seen: Arc<Mutex<Vec<Value>>>,
    _llm: Option<FakeServer>,
}

/// The seller with chat priced by use, its wallet funded for gas, Permit2 and the proxy
/// deployed, and a model that answers with `answer`.
async fn shop(answer: (u16, Value)) -> Shop {
    let chain = LocalBase::start().await;
    chain.deploy_permit2().await;
    let policy: Policy = Arc::new(move |_, _| answer.clone());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let llm = fake_openai(policy, seen.clone()).await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model");
    let (env, wallet) = base_shop(&chain, env, BY_USE).await;
    Shop {
        server: env.serve(),
        chain,
        env,
        wallet,
        seen,
        _llm: Some(llm),
    }
}

fn answered() -> (u16, Value) {
    text_with_usage("No rain today.", PROMPT_TOKENS, COMPLETION_TOKENS)
}

/// A payer holding 1 USDC that approved Permit2 once.
async fn approved_payer(chain: &LocalBase) -> (Payer<'static>, String) {
    let (payer, address) = Payer::on_base(chain, 1_000_000).await;
    chain.approve_permit2(&address, u64::MAX).await;
    (payer, address)
}

#[tokio::test]
async fn a_message_paid_by_use_is_charged_for_its_tokens_only() {
    let shop = shop(answered()).await;
    let url = shop.server.url("/x402/base/seller");

    // The price list offers both: the fixed price, and by use up to the maximum, settled by
    // the agent's own wallet.
    let offered = payment_required(&get(&url, None).await);
    let upto = offered["accepts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["scheme"] == "upto")
        .cloned()
        .unwrap_or_else(|| panic!("no upto offer: {offered}"));
    assert_eq!(offered["accepts"][0]["scheme"], "exact");
    assert_eq!(upto["amount"], MAX.to_string());
    assert_eq!(upto["payTo"], shop.wallet);
    assert_eq!(upto["extra"]["facilitatorAddress"], shop.wallet);

    let (payer, address) = approved_payer(&shop.chain).await;
    let eth_before = shop.chain.eth_of(&shop.wallet).await;
    let paid = pay_by_use(&payer, &url, &json!({ "message": "Will it rain?" })).await;
    assert_eq!(paid.status, 200, "{}", paid.body);
    assert_eq!(paid.body["response"], "No rain today.");
    assert_eq!(paid.body["receipt"]["amountPaidMicroUsdc"], CHARGE, "{}", paid.body);
    assert_eq!(
        paid.payment_response["amount"],
        CHARGE.to_string(),
        "{}",
        paid.payment_response
    );
    assert_eq!(paid.payment_response["success"], true);

    // On chain: exactly the charge moved, though the payer authorized ten times as much.
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - CHARGE);
    assert_eq!(shop.chain.usdc_of(&shop.wallet).await, CHARGE);
    let transaction = paid.payment_response["transaction"].as_str().unwrap();
    assert_eq!(
        shop.chain.receipt(transaction).await["to"],
        UPTO_PROXY.to_string().to_lowercase()
    );
    // The agent paid the settlement's gas, within the fee cap (base_max_fee_wei).
    let fee = eth_before - shop.chain.eth_of(&shop.wallet).await;
    assert!(fee > 0 && fee < 1_000_000_000_000_000, "fee {fee} wei");

    // The owner sees what was authorized, used and charged.
    let payment = &payments(&shop.env)[0];
    assert_eq!(payment["state"], "served", "{payment}");
    assert_eq!(payment["receipt"]["amountPaidMicroUsdc"], CHARGE, "{payment}");
    let by_use = json!({ "maxAmountMicroUsdc": MAX, "inputTokens": PROMPT_TOKENS, "outputTokens": COMPLETION_TOKENS });
    assert_eq!(payment["byUse"], by_use, "{payment}");
    // And the payer, in its receipt.
    assert_eq!(paid.body["receipt"]["byUse"], by_use, "{}", paid.body);
}

#[tokio::test]
async fn a_message_the_agent_fails_to_answer_costs_nothing() {
    let shop = shop(refusal(500, "The model is down")).await;
    let url = shop.server.url("/x402/base/seller");
    let (payer, address) = approved_payer(&shop.chain).await;

    let paid = pay_by_use(&payer, &url, &json!({ "message": "Will it rain?" })).await;
    assert!(paid.status >= 500, "{} {}", paid.status, paid.body);
    assert_eq!(paid.body["receipt"]["amountPaidMicroUsdc"], 0, "{}", paid.body);
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000, "nothing was taken");
    let payment = &payments(&shop.env)[0];
    assert_eq!(payment["state"], "failed", "{payment}");
    assert!(
        payment["error"].as_str().unwrap().starts_with("nothing charged"),
        "{payment}"
    );

    // An authorization that settled nothing is still used: Permit2 never saw its nonce,
    // so the service's record is what refuses it again.
    let offered = payment_required(&get(&url, None).await);
    let (signer, address) = base_payer(&shop.chain, 1_000_000).await;
    shop.chain.approve_permit2(&address, u64::MAX).await;
    let payment = upto_payment(&signer, &offered["accepts"][1], 9);
    let body = json!({ "message": "Will it rain?" });
    let first = paid_v2(&url, &body, &payment).await;
    assert!(first.status >= 500, "{}", first.text);
    let again = paid_v2(&url, &body, &payment).await;
    assert_eq!(code(&again), (409, "payment_already_used".into()), "{}", again.text);
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000);
}

/// A payment signed by hand as `@x402/evm`'s upto client signs it, for `accepted`.
fn upto_payment(payer: &PrivateKeySigner, accepted: &Value, nonce: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let address = |v: &Value| v.as_str().unwrap().parse().unwrap();
    let mut auth = PermitAuthorization {
        from: payer.address(),
        token: address(&accepted["asset"]),
        max: accepted["amount"].as_str().unwrap().parse().unwrap(),
        spender: UPTO_PROXY,
        nonce: U256::from(nonce),
        deadline: U256::from(now + 300),
        to: address(&accepted["payTo"]),
        facilitator: address(&accepted["extra"]["facilitatorAddress"]),
        valid_after: U256::from(now - 600),
        signature: PayerSignature::parse(&[0x11; 65]).unwrap(),
        approval: None,
    };
    let signature = payer.sign_hash_sync(&auth.signing_hash(8453)).unwrap();
    auth.signature = PayerSignature::parse(&signature.as_bytes()).unwrap();
    let payment = json!({
        "x402Version": 2,
        "accepted": accepted,
        "payload": {
            "signature": format!("0x{}", hex::encode(signature.as_bytes())),
            "permit2Authorization": {
                "from": payer.address().to_string(),
                "permitted": { "token": accepted["asset"], "amount": accepted["amount"] },
                "spender": UPTO_PROXY.to_string(),
                "nonce": nonce.to_string(),
                "deadline": (now + 300).to_string(),
                "witness": { "to": accepted["payTo"], "facilitator": accepted["extra"]["facilitatorAddress"],
                             "validAfter": (now - 600).to_string() },
            },
        },
    });
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, payment.to_string())
}

#[tokio::test]
async fn an_authorization_pays_once_and_needs_permit2_approved() {
    let shop = shop(answered()).await;
    let url = shop.server.url("/x402/base/seller");
    let offered = payment_required(&get(&url, None).await);
    let upto = offered["accepts"][1].clone();
    assert_eq!(upto["scheme"], "upto");
    let (payer, address) = base_payer(&shop.chain, 1_000_000).await;
    shop.chain.approve_permit2(&address, u64::MAX).await;
    let body = json!({ "message": "Will it rain?" });

    let payment = upto_payment(&payer, &upto, 7);
    let first = paid_v2(&url, &body, &payment).await;
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(first.json()["receipt"]["amountPaidMicroUsdc"], CHARGE);
    // The same authorization for another request: refused, whatever it settled.
    let again = paid_v2(&url, &json!({ "message": "And tomorrow?" }), &payment).await;
    assert_eq!(code(&again), (409, "payment_already_used".into()), "{}", again.text);
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - CHARGE);

    // Without the one-time Permit2 approval: refused before any work, saying what to do.
    let (unapproved, _) = base_payer(&shop.chain, 1_000_000).await;
    let refused = paid_v2(&url, &body, &upto_payment(&unapproved, &upto, 8)).await;
    assert_eq!(
        code(&refused),
        (402, "permit2_allowance_required".into()),
        "{}",
        refused.text
    );
}

#[tokio::test]
async fn use_that_costs_nothing_settles_nothing() {
    // A provider that says the answer took no tokens: nothing to charge.
    let shop = shop(text_with_usage("No rain today.", 0, 0)).await;
    let url = shop.server.url("/x402/base/seller");
    let (payer, address) = approved_payer(&shop.chain).await;
    let eth_before = shop.chain.eth_of(&shop.wallet).await;

    let paid = pay_by_use(&payer, &url, &json!({ "message": "Will it rain?" })).await;
    assert_eq!(paid.status, 200, "{}", paid.body);
    assert_eq!(paid.body["response"], "No rain today.");
    assert_eq!(paid.body["receipt"]["amountPaidMicroUsdc"], 0, "{}", paid.body);
    assert_eq!(paid.payment_response["amount"], "0", "{}", paid.payment_response);
    assert_eq!(paid.payment_response["transaction"], "", "no transaction for 0");
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000);
    assert_eq!(shop.chain.eth_of(&shop.wallet).await, eth_before, "and no gas spent");
    assert_eq!(payments(&shop.env)[0]["state"], "served");
}

#[tokio::test]
async fn an_answer_whose_tokens_were_not_reported_is_neither_charged_nor_given() {
    let (status, mut reply) = text_with_usage("No rain today.", 1, 1);
    reply["usage"] = Value::Null;
    let shop = shop((status, reply)).await;
    let url = shop.server.url("/x402/base/seller");
    let (payer, address) = approved_payer(&shop.chain).await;

    let paid = pay_by_use(&payer, &url, &json!({ "message": "Will it rain?" })).await;
    assert_eq!(paid.status, 502, "{}", paid.body);
    assert!(
        paid.body.get("response").is_none(),
        "the answer is withheld: {}",
        paid.body
    );
    assert_eq!(paid.body["receipt"]["amountPaidMicroUsdc"], 0);
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000);
    let payment = &payments(&shop.env)[0];
    assert_eq!(payment["state"], "failed", "{payment}");
}

#[tokio::test]
async fn what_the_agent_could_not_settle_is_refused_before_the_work() {
    let shop = shop(answered()).await;
    let url = shop.server.url("/x402/base/seller");
    // The agent's wallet has no ETH left to pay a settlement's gas.
    shop.chain.set_eth(&shop.wallet, 0).await;
    let (payer, address) = approved_payer(&shop.chain).await;

    let paid = pay_by_use(&payer, &url, &json!({ "message": "Will it rain?" })).await;
    assert_eq!(paid.status, 402, "{}", paid.body);
    assert_eq!(paid.body["code"], "settlement_failed", "{}", paid.body);
    assert!(shop.seen.lock().unwrap().is_empty(), "the model was never asked");
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000);
}

#[tokio::test]
async fn a_payer_that_takes_its_approval_back_during_the_work_gets_nothing_and_cools_off() {
    // The model takes a second and a half: long enough for the payer to revoke Permit2.
    let (status, mut reply) = answered();
    reply["sleep_ms"] = json!(1_500);
    let shop = shop((status, reply)).await;
    let url = shop.server.url("/x402/base/seller");
    let (payer, address) = approved_payer(&shop.chain).await;

    let paying = {
        let (payer, url) = (payer.clone(), url.clone());
        tokio::spawn(async move { pay_by_use(&payer, &url, &json!({ "message": "Will it rain?" })).await })
    };
    while shop.seen.lock().unwrap().is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    shop.chain.approve_permit2(&address, 0).await;
    let paid = paying.await.unwrap();
    assert_eq!(paid.status, 402, "{}", paid.body);
    assert_eq!(paid.body["code"], "settlement_failed", "{}", paid.body);
    assert!(
        paid.body.get("response").is_none(),
        "the answer is withheld: {}",
        paid.body
    );
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000);

    // Its next payment waits out the cool-off of a payer whose settlement failed.
    shop.chain.approve_permit2(&address, u64::MAX).await;
    let offered = payment_required(&get(&url, None).await);
    let signer: PrivateKeySigner = payer.key.parse().unwrap();
    let again = paid_v2(
        &url,
        &json!({ "message": "Will it rain?" }),
        &upto_payment(&signer, &offered["accepts"][1], 11),
    )
    .await;
    assert_eq!(code(&again), (429, "payer_cooling_off".into()), "{}", again.text);
    assert_eq!(shop.seen.lock().unwrap().len(), 1, "the model was asked once");
}

/// What the x402 packages pay with, by use (`@x402/evm`'s upto client registered alone).
fn by_use(payer: &Payer<'_>) -> Value {
    json!({ "network": "base", "key": payer.key, "rpcUrl": payer.rpc_url, "networkId": network_id("base"),
            "scheme": "upto" })
}

#[tokio::test]
async fn the_chat_tool_is_paid_by_use_over_mcp() {
    let shop = shop(answered()).await;
    let (payer, address) = approved_payer(&shop.chain).await;
    let run = sdk_client(&json!({
        "url": shop.server.url("/mcp/seller"),
        "calls": [{ "name": "chat", "arguments": { "message": "Will it rain?" }, "pay": by_use(&payer) }],
    }))
    .await;
    let called = &run["results"][0];
    let schemes: Vec<&Value> = called["paymentRequired"]["accepts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["scheme"])
        .collect();
    assert!(schemes.contains(&&json!("upto")), "{called}");
    assert_eq!(called["payment"]["accepted"]["scheme"], "upto", "{called}");
    assert_eq!(called["result"]["content"][0]["text"], "No rain today.", "{called}");
    let receipt = &called["result"]["_meta"]["x402/payment-response"];
    assert_eq!(receipt["success"], true, "{called}");
    assert_eq!(receipt["amount"], CHARGE.to_string(), "{receipt}");
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - CHARGE);
    assert_eq!(shop.chain.usdc_of(&shop.wallet).await, CHARGE);
}

#[tokio::test]
async fn a_chat_task_is_paid_by_use_over_a2a() {
    let shop = shop(answered()).await;
    let (payer, address) = approved_payer(&shop.chain).await;
    let out = client_script(
        "node",
        "node/a2a.mjs",
        &json!({
            "url": shop.server.url("/a2a/seller/"),
            "key": null,
            "steps": [{ "do": "send", "text": "Will it rain?", "pay": by_use(&payer) }],
        }),
        "the A2A JavaScript client",
    )
    .await;
    let step = &out["steps"][0];
    assert_eq!(step["payment"]["accepted"]["scheme"], "upto", "{step}");
    let task = &step["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{step}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "No rain today.", "{task}");
    let receipt = &task["status"]["message"]["metadata"]["x402.payment.receipts"][0];
    assert_eq!(receipt["amount"], CHARGE.to_string(), "{task}");
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - CHARGE);
}

/// OpenAI's Node client at the agent's paid OpenAI-compatible address, paying with
/// `@x402/fetch` as its fetch.
async fn openai_paying(shop: &Shop, pay: Value, calls: Value) -> Value {
    let request = json!({
        "baseUrl": shop.server.url("/x402/base/seller/openai/v1"), "model": "seller", "pay": pay, "calls": calls,
    });
    client_script("node", "node/openai.mjs", &request, "OpenAI's Node client").await
}

#[tokio::test]
async fn openais_client_pays_by_use_at_the_paid_completions_address() {
    let (status, mut reply) = answered();
    reply["chunk_delay_ms"] = json!(20);
    let shop = shop((status, reply)).await;
    let (payer, address) = approved_payer(&shop.chain).await;
    let ask = json!([{ "role": "user", "content": "Will it rain?" }]);
    let out = openai_paying(
        &shop,
        by_use(&payer),
        json!([{ "messages": ask }, { "messages": ask, "stream": true }]),
    )
    .await;
    assert_eq!(out["models"], json!(["seller"]), "{out}");
    for (i, answer) in out["results"].as_array().unwrap().iter().enumerate() {
        assert_eq!(answer["content"], "No rain today.", "{i}: {answer}");
        assert_eq!(answer["finishReason"], "stop", "{i}: {answer}");
        assert_eq!(
            (&answer["usage"]["prompt_tokens"], &answer["usage"]["completion_tokens"]),
            (&json!(PROMPT_TOKENS), &json!(COMPLETION_TOKENS)),
            "{i}: {answer}"
        );
    }
    assert_eq!(
        out["results"][0]["paymentResponse"]["amount"],
        CHARGE.to_string(),
        "{out}"
    );
    assert!(
        out["results"][1]["chunks"].as_u64().unwrap() > 3,
        "streamed in pieces: {out}"
    );
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - 2 * CHARGE);
    assert_eq!(shop.chain.usdc_of(&shop.wallet).await, 2 * CHARGE);
    // The model was never offered the agent's commands as tools.
    assert!(
        shop.seen
            .lock()
            .unwrap()
            .iter()
            .all(|asked| asked.get("tools").is_none())
    );
}

#[tokio::test]
async fn a_paid_stream_whose_reader_leaves_is_charged_for_what_was_generated() {
    // The model takes a second and a half; the reader gives up after half a second.
    let (status, mut reply) = answered();
    reply["sleep_ms"] = json!(1_500);
    let shop = shop((status, reply)).await;
    let (payer, address) = approved_payer(&shop.chain).await;
    let ask = json!([{ "role": "user", "content": "Will it rain?" }]);
    let out = openai_paying(
        &shop,
        by_use(&payer),
        json!([{ "messages": ask, "stream": true, "hangUpAfterMs": 500 }]),
    )
    .await;
    assert_eq!(out["results"][0]["aborted"], true, "{out}");
    // Generated to its end all the same, and charged for what the model says it generated.
    time_until(
        std::time::Duration::from_secs(20),
        "the stream's charge lands",
        || async { shop.chain.usdc_of(&address).await == 1_000_000 - CHARGE },
    )
    .await;
    let payment = newest_payment_becomes(&shop.env, "served", std::time::Duration::from_secs(10)).await;
    assert_eq!(payment["receipt"]["amountPaidMicroUsdc"], CHARGE, "{payment}");
}

#[tokio::test]
async fn a_stream_paid_by_use_gives_no_text_before_its_charge() {
    // The payer takes its approval back while the model writes: the charge cannot be
    // settled, and not a word of the answer goes out.
    let (status, mut reply) = answered();
    reply["sleep_ms"] = json!(1_500);
    let shop = shop((status, reply)).await;
    let (payer, address) = approved_payer(&shop.chain).await;
    let asking = {
        let request = json!({
            "baseUrl": shop.server.url("/x402/base/seller/openai/v1"), "model": "seller", "pay": by_use(&payer),
            "calls": [{ "messages": [{ "role": "user", "content": "Will it rain?" }], "stream": true }],
        });
        tokio::spawn(async move { client_script("node", "node/openai.mjs", &request, "OpenAI's Node client").await })
    };
    while shop.seen.lock().unwrap().is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    shop.chain.approve_permit2(&address, 0).await;
    let out = asking.await.unwrap();
    let answer = &out["results"][0];
    assert_eq!(answer["error"]["status"], 402, "{out}");
    assert_eq!(answer["error"]["code"], "settlement_failed", "{out}");
    assert!(answer.get("content").is_none(), "{out}");
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000);
}

#[tokio::test]
async fn openais_client_pays_the_fixed_price_and_is_priced_first() {
    let shop = shop(answered()).await;
    let (payer, address) = Payer::on_base(&shop.chain, 1_000_000).await;
    let url = shop.server.url("/x402/base/seller/openai/v1/chat/completions");
    // Unpaid: a 402 in OpenAI's shape, with what to pay in PAYMENT-REQUIRED.
    let unpaid = post_json(
        &url,
        None,
        &json!({ "model": "seller", "messages": [{ "role": "user", "content": "Will it rain?" }] }),
    )
    .await;
    assert_eq!(unpaid.status, 402, "{}", unpaid.text);
    assert_eq!(unpaid.json()["error"]["code"], "payment_required", "{}", unpaid.text);
    let offered = payment_required(&unpaid);
    assert_eq!(offered["accepts"][0]["scheme"], "exact");
    assert_eq!(offered["accepts"][1]["scheme"], "upto");
    // What could not be bought is refused before any price: no message, or a conversation
    // holding more than a paid message may (it is sold at a message's price).
    let bad = post_json(&url, None, &json!({ "model": "seller", "messages": [] })).await;
    assert_eq!(bad.status, 400, "{}", bad.text);
    assert_eq!(bad.json()["error"]["param"], "messages", "{}", bad.text);
    let long = json!({ "model": "seller", "messages": [
        { "role": "user", "content": "x".repeat(6_000) }, { "role": "assistant", "content": "ok" },
        { "role": "user", "content": "y".repeat(5_000) },
    ] });
    let bad = post_json(&url, None, &long).await;
    assert_eq!(bad.status, 400, "{}", bad.text);
    assert!(
        bad.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 10000"),
        "{}",
        bad.text
    );

    let pay = json!({ "network": "base", "key": payer.key, "rpcUrl": payer.rpc_url, "networkId": network_id("base") });
    let ask = json!([{ "role": "user", "content": "Will it rain?" }]);
    let out = openai_paying(
        &shop,
        pay,
        json!([{ "messages": ask }, { "messages": ask, "stream": true }]),
    )
    .await;
    let answer = &out["results"][0];
    assert_eq!(answer["content"], "No rain today.", "{out}");
    assert_eq!(answer["paymentResponse"]["success"], true, "{out}");
    // Settled before any text, the fixed price's stream comes as the model writes.
    assert_eq!(out["results"][1]["content"], "No rain today.", "{out}");
    assert!(out["results"][1]["chunks"].as_u64().unwrap() > 3, "{out}");
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - 2 * 10_000);
}

#[tokio::test]
async fn openais_python_client_pays_by_use_through_the_x402_transport() {
    let shop = shop(answered()).await;
    let (payer, address) = approved_payer(&shop.chain).await;
    let request = json!({
        "baseUrl": shop.server.url("/x402/base/seller/openai/v1"), "model": "seller",
        "pay": { "key": payer.key, "networkId": network_id("base"), "scheme": "upto" },
        "calls": [{ "messages": [{ "role": "user", "content": "Will it rain?" }] },
                  { "messages": [{ "role": "user", "content": "Will it rain?" }], "stream": true }],
    });
    let out = client_script(&python(), "python/openai_client.py", &request, "OpenAI's Python client").await;
    for (i, answer) in out["results"].as_array().unwrap().iter().enumerate() {
        assert_eq!(answer["content"], "No rain today.", "{i}: {answer}");
        assert_eq!(answer["usage"]["completion_tokens"], COMPLETION_TOKENS, "{i}: {answer}");
    }
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - 2 * CHARGE);
}

#[tokio::test]
async fn indexers_find_the_price_by_use_beside_the_fixed_one() {
    let shop = shop(answered()).await;
    let offered = payment_required(&get(&shop.server.url("/x402/base/seller"), None).await);
    let list = get(&shop.server.url("/discovery/resources"), None).await.json();
    let base = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "http" && item["resource"].as_str().unwrap().contains("/x402/base/"))
        .cloned()
        .unwrap_or_else(|| panic!("{list}"));
    // What a payer would be offered, in the same order: the fixed price, then by use.
    assert_eq!(base["accepts"], offered["accepts"], "{base}");
    let draft = get(&shop.server.url("/.well-known/x402.json"), None).await.json();
    let item = &draft["items"][0];
    assert_eq!(item["accepts"], offered["accepts"], "{item}");
}

#[tokio::test]
async fn the_paid_openai_address_refuses_in_openais_shape() {
    let chain = LocalBase::start().await;
    let env = TestEnv::new().with_env("AGENT_HOST_X402_CLIENT_LIMIT_PER_MINUTE", "2");
    let (env, _) = base_shop(&chain, env, BY_USE).await;
    let server = env.serve();
    let url = server.url("/x402/base/seller/openai/v1/models");
    for _ in 0..2 {
        let listed = get(&url, None).await;
        assert_eq!(listed.status, 200, "{}", listed.text);
    }
    // Past the client address's limit: OpenAI's clients read why, and when to come back.
    let limited = get(&url, None).await;
    assert_eq!(limited.status, 429, "{}", limited.text);
    assert_eq!(limited.json()["error"]["type"], "rate_limit_error", "{}", limited.text);
    assert!(limited.header("retry-after").is_some(), "{}", limited.text);
}

#[tokio::test]
async fn use_worth_more_than_the_maximum_is_charged_the_maximum() {
    // 100,000 generated tokens at 6 micro-USDC each would be 0.6 USDC; the payer authorized 0.05.
    let shop = shop(text_with_usage("A very long answer.", PROMPT_TOKENS, 100_000)).await;
    let (payer, address) = approved_payer(&shop.chain).await;
    let paid = pay_by_use(
        &payer,
        &shop.server.url("/x402/base/seller"),
        &json!({ "message": "Tell me everything." }),
    )
    .await;
    assert_eq!(paid.status, 200, "{}", paid.body);
    assert_eq!(paid.body["receipt"]["amountPaidMicroUsdc"], MAX, "{}", paid.body);
    assert_eq!(paid.body["receipt"]["byUse"]["outputTokens"], 100_000, "{}", paid.body);
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - MAX);
    assert_eq!(shop.chain.usdc_of(&shop.wallet).await, MAX);
}

/// A command sold by the pages its plugin reports: $0.0025 a page, at most $0.05 a call;
/// its fixed price, $0.02, stays offered first.
fn pages_manifest() -> String {
    format!(
        r#"
[[commands]]
command = "pages"
description = "Reads pages"
handler_type = "custom"
plugin = "{}"
integrations = ["x402", "mcp", "a2a"]
price_usd = 0.02
timeout_ms = 2000
by_use = {{ per_unit_usd = 0.0025, unit = "page", max_usd = 0.05 }}
"#,
        plugin_path("probe")
    )
}
const PAGE: u64 = 2_500;

/// The seller of `pages`, on a chain with Permit2 and the proxy.
async fn pages_shop() -> Shop {
    pages_shop_in(TestEnv::new()).await
}

async fn pages_shop_in(env: TestEnv) -> Shop {
    let chain = LocalBase::start().await;
    chain.deploy_permit2().await;
    let (env, wallet) = base_shop(&chain, env, &pages_manifest()).await;
    Shop {
        server: env.serve(),
        chain,
        env,
        wallet,
        seen: Arc::default(),
        _llm: None,
    }
}

#[tokio::test]
async fn a_command_sold_by_use_is_charged_for_the_units_its_plugin_reports() {
    let shop = pages_shop().await;
    let url = shop.server.url("/x402/base/seller");
    let order = |mode: &str, n: u64| json!({ "command": "pages", "mode": mode, "n": n });

    // Its 402 offers the fixed price first, then by use up to the maximum, and says what a
    // unit costs.
    let offered = payment_required(&post_x402(&url, &order("meter", 1)).await);
    assert_eq!(offered["accepts"][0]["scheme"], "exact", "{offered}");
    assert_eq!(offered["accepts"][0]["amount"], "20000", "{offered}");
    assert_eq!(offered["accepts"][1]["scheme"], "upto", "{offered}");
    assert_eq!(offered["accepts"][1]["amount"], "50000", "{offered}");
    let described = offered["resource"]["description"].as_str().unwrap();
    assert!(
        described.contains("0.0025 USDC per page, at most 0.05 USDC"),
        "{described}"
    );

    let (payer, address) = approved_payer(&shop.chain).await;
    let paid = pay_by_use(&payer, &url, &order("meter", 7)).await;
    assert_eq!(paid.status, 200, "{}", paid.body);
    assert_eq!(paid.body["response"], "worked 7 units");
    assert_eq!(paid.body["receipt"]["amountPaidMicroUsdc"], 7 * PAGE, "{}", paid.body);
    assert_eq!(paid.payment_response["amount"], (7 * PAGE).to_string());
    let by_use = json!({ "maxAmountMicroUsdc": 50_000, "units": 7 });
    assert_eq!(paid.body["receipt"]["byUse"], by_use, "{}", paid.body);
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - 7 * PAGE);
    assert_eq!(shop.chain.usdc_of(&shop.wallet).await, 7 * PAGE);
    let payment = &payments(&shop.env)[0];
    assert_eq!(payment["state"], "served", "{payment}");
    assert_eq!(payment["command"], "pages", "{payment}");
    assert_eq!(payment["byUse"], by_use, "{payment}");

    // Thirty pages are worth more than the maximum: the maximum is charged.
    let paid = pay_by_use(&payer, &url, &order("meter", 30)).await;
    assert_eq!(paid.status, 200, "{}", paid.body);
    assert_eq!(paid.body["receipt"]["amountPaidMicroUsdc"], 50_000, "{}", paid.body);
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - 7 * PAGE - 50_000);
}

#[tokio::test]
async fn a_command_that_fails_is_charged_nothing_whatever_it_reported() {
    // The payer pays again at once after each failure (its cool-off has a test of its own).
    let shop = pages_shop_in(TestEnv::new().with_env("AGENT_HOST_X402_REFUND_COOLOFF_SECS", "0")).await;
    let url = shop.server.url("/x402/base/seller");
    let (payer, address) = approved_payer(&shop.chain).await;

    // It reported 5 pages, then failed: nothing is charged.
    let failed = pay_by_use(
        &payer,
        &url,
        &json!({ "command": "pages", "mode": "meter_then_fail", "n": 5 }),
    )
    .await;
    assert_eq!(failed.status, 500, "{}", failed.body);
    assert_eq!(failed.body["receipt"]["amountPaidMicroUsdc"], 0, "{}", failed.body);
    // It reported 4, then ran out of its time: nothing either.
    let timed_out = pay_by_use(
        &payer,
        &url,
        &json!({ "command": "pages", "mode": "meter_then_loop", "n": 4 }),
    )
    .await;
    assert_eq!(timed_out.status, 500, "{}", timed_out.body);
    assert_eq!(
        timed_out.body["receipt"]["amountPaidMicroUsdc"], 0,
        "{}",
        timed_out.body
    );
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000, "nothing was taken");
    let listed = payments(&shop.env);
    assert!(
        listed.iter().all(|p| p["state"] == "failed"
            && p["error"].as_str().unwrap().starts_with("nothing charged")
            && p["byUse"]["units"].as_u64().unwrap() > 0),
        "{listed:?}"
    );

    // It refused the payer's own input after reading 3 pages: those are charged, as a call
    // at the fixed price that refuses its input is not refunded.
    let refused = pay_by_use(
        &payer,
        &url,
        &json!({ "command": "pages", "mode": "meter_then_refuse", "n": 3 }),
    )
    .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(refused.body["code"], "validation_error", "{}", refused.body);
    assert_eq!(
        refused.body["receipt"]["amountPaidMicroUsdc"],
        3 * PAGE,
        "{}",
        refused.body
    );
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - 3 * PAGE);
}

#[tokio::test]
async fn a_paid_tool_is_bought_by_use_over_mcp() {
    let shop = pages_shop().await;
    let (payer, address) = approved_payer(&shop.chain).await;
    let run = sdk_client(&json!({
        "url": shop.server.url("/mcp/seller"),
        "calls": [{ "name": "pages", "arguments": { "mode": "meter", "n": 3 }, "pay": by_use(&payer) }],
    }))
    .await;
    let called = &run["results"][0];
    let offered = &called["paymentRequired"]["accepts"];
    assert_eq!(offered[0]["scheme"], "exact", "{called}");
    assert_eq!(offered[1]["scheme"], "upto", "{called}");
    assert_eq!(offered[1]["amount"], "50000", "{called}");
    assert_eq!(called["result"]["content"][0]["text"], "worked 3 units", "{called}");
    let receipt = &called["result"]["_meta"]["x402/payment-response"];
    assert_eq!(receipt["amount"], (3 * PAGE).to_string(), "{receipt}");
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - 3 * PAGE);
}

#[test]
fn a_command_sold_by_use_needs_a_plugin_that_reports_units() {
    let env = TestEnv::new();
    env.create_account("acme", "free");
    // A component built against WIT 0.2.0 has no `meter` to report with.
    let manifest = format!("{}{}", paid_manifest("seller"), pages_manifest())
        .replace(&plugin_path("probe"), &plugin_path("frozen_0_2"));
    let file = env.path("pages.toml");
    std::fs::write(&file, manifest).unwrap();
    let out = env.cli(&["agent", "apply", file.to_str().unwrap(), "--account", "acme"]);
    assert_eq!(out.status.code(), Some(1), "{}", out.stdout);
    assert!(
        out.stderr.contains("agent:plugin@0.2.0") && out.stderr.contains("wit/v0.4.0"),
        "{}",
        out.stderr
    );
}

/// A command sold by use that keeps failing is paused by its breaker, as one at a fixed
/// price is: failures for two payers (charged nothing) pause it, and a payment by use is
/// then refused before anything is held.
#[tokio::test]
async fn a_command_sold_by_use_that_keeps_failing_is_paused_before_anything_is_held() {
    let shop = pages_shop_in(
        TestEnv::new()
            .with_env("AGENT_HOST_X402_BREAKER_FAILURES", "2")
            .with_env("AGENT_HOST_X402_BREAKER_COOLDOWN_SECS", "60"),
    )
    .await;
    let url = shop.server.url("/x402/base/seller");
    let failing = json!({ "command": "pages", "mode": "meter_then_fail", "n": 2 });
    let offered = payment_required(&post_x402(&url, &failing).await)["accepts"][1].clone();
    assert_eq!(offered["scheme"], "upto");
    for nonce in [1, 2] {
        let (payer, _) = base_payer(&shop.chain, 1_000_000).await;
        let address = payer.address().to_checksum(None);
        shop.chain.approve_permit2(&address, u64::MAX).await;
        let failed = paid_v2(&url, &failing, &upto_payment(&payer, &offered, nonce)).await;
        assert_eq!(code(&failed), (500, "execution_error".into()), "{}", failed.text);
    }
    let (carol, carols) = base_payer(&shop.chain, 1_000_000).await;
    shop.chain.approve_permit2(&carols, u64::MAX).await;
    let good = json!({ "command": "pages", "mode": "meter", "n": 1 });
    let paused = paid_v2(&url, &good, &upto_payment(&carol, &offered, 3)).await;
    assert_eq!(code(&paused), (503, "service_unavailable".into()), "{}", paused.text);
    assert!(paused.text.contains("/pages is paused"), "{}", paused.text);
    assert_eq!(payments(&shop.env).len(), 2, "nothing was held for Carol");
    assert_eq!(shop.chain.usdc_of(&carols).await, 1_000_000);
}

/// A seller pricing its messages (`[x402.chat_by_use]`) and `pages` by use, settling
/// through `front` (the reference facilitator, or something in front of it); its wallet
/// holds no gas.
async fn facilitated_shop(chain: LocalBase, front: &str, extra: &[(&str, &str)]) -> Shop {
    facilitated_shop_answering(chain, front, extra, answered()).await
}

async fn facilitated_shop_answering(
    chain: LocalBase,
    front: &str,
    extra: &[(&str, &str)],
    answer: (u16, Value),
) -> Shop {
    chain.deploy_permit2().await;
    let policy: Policy = Arc::new(move |_, _| answer.clone());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let llm = fake_openai(policy, seen.clone()).await;
    let mut env = TestEnv::new()
        .with_envs(chain.env())
        .with_env("AGENT_HOST_X402_BASE_FACILITATOR_URL", front)
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model");
    for (name, value) in extra {
        env = env.with_env(name, value);
    }
    env.create_account("acme", "free");
    env.apply_agent(
        &format!("{}{BY_USE}{}", paid_manifest("seller"), pages_manifest()),
        "acme",
    );
    let wallet = env.create_wallet("seller", "base");
    Shop {
        server: env.serve(),
        chain,
        env,
        wallet,
        seen,
        _llm: Some(llm),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reference_facilitator_settles_what_was_used_and_the_agent_pays_no_gas() {
    let chain = LocalBase::start().await;
    let facilitator = RefFacilitator::start(&chain, None).await;
    let settler = facilitator.evm.clone().unwrap();
    let shop = facilitated_shop(chain, &facilitator.url, &[]).await;
    let url = shop.server.url("/x402/base/seller");

    // The payer's witness must name the facilitator's settling address, as its /supported says.
    let offered = payment_required(&get(&url, None).await);
    assert_eq!(offered["accepts"][1]["scheme"], "upto", "{offered}");
    assert_eq!(
        offered["accepts"][1]["extra"]["facilitatorAddress"]
            .as_str()
            .unwrap()
            .to_lowercase(),
        settler.to_lowercase()
    );

    let (payer, address) = approved_payer(&shop.chain).await;
    let chat = pay_by_use(&payer, &url, &json!({ "message": "Will it rain?" })).await;
    assert_eq!(chat.status, 200, "{}", chat.body);
    assert_eq!(chat.body["receipt"]["amountPaidMicroUsdc"], CHARGE, "{}", chat.body);
    let pages = pay_by_use(&payer, &url, &json!({ "command": "pages", "mode": "meter", "n": 7 })).await;
    assert_eq!(pages.status, 200, "{}", pages.body);
    assert_eq!(pages.body["receipt"]["amountPaidMicroUsdc"], 7 * PAGE, "{}", pages.body);

    // Exactly the charges moved, each by the facilitator's own call of the proxy.
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - CHARGE - 7 * PAGE);
    assert_eq!(shop.chain.usdc_of(&shop.wallet).await, CHARGE + 7 * PAGE);
    for paid in [&chat, &pages] {
        let receipt = shop
            .chain
            .receipt(paid.payment_response["transaction"].as_str().unwrap())
            .await;
        assert_eq!(receipt["status"], "0x1");
        assert_eq!(receipt["from"].as_str().unwrap().to_lowercase(), settler.to_lowercase());
        assert_eq!(receipt["to"], UPTO_PROXY.to_string().to_lowercase());
    }
    assert_eq!(
        shop.chain.eth_of(&shop.wallet).await,
        0,
        "the agent's wallet paid no gas"
    );
    let recorded = payments(&shop.env);
    assert!(recorded.iter().all(|p| p["state"] == "served"), "{recorded:?}");

    // Once, ever: the same authorization again is refused before the facilitator is asked.
    let upto = offered["accepts"][1].clone();
    let (signer, signer_address) = base_payer(&shop.chain, 1_000_000).await;
    shop.chain.approve_permit2(&signer_address, u64::MAX).await;
    let payment = upto_payment(&signer, &upto, 5);
    let body = json!({ "message": "Will it rain?" });
    assert_eq!(paid_v2(&url, &body, &payment).await.status, 200);
    // The same payment for the same request is a retry: its answer, charged once.
    let retried = paid_v2(&url, &body, &payment).await;
    assert_eq!(retried.status, 200, "{}", retried.text);
    let elsewhere = paid_v2(&url, &json!({ "message": "And tomorrow?" }), &payment).await;
    assert_eq!(
        code(&elsewhere),
        (409, "payment_already_used".into()),
        "{}",
        elsewhere.text
    );
    assert_eq!(shop.chain.usdc_of(&signer_address).await, 1_000_000 - CHARGE);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upto_settlement_the_facilitator_did_not_confirm_is_found_on_chain_and_refunded() {
    let chain = LocalBase::start().await;
    let reference = RefFacilitator::start(&chain, None).await;
    // It settles, then says it did not.
    let front = fronted(&reference.url, None).await;
    let shop = facilitated_shop(chain, &front.base, &[("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1")]).await;
    let url = shop.server.url("/x402/base/seller");
    let (payer, address) = approved_payer(&shop.chain).await;

    let paid = pay_by_use(&payer, &url, &json!({ "command": "pages", "mode": "meter", "n": 4 })).await;
    assert_eq!(paid.status, 502, "{}", paid.body);
    assert_eq!(paid.body["code"], "facilitator_error", "{}", paid.body);
    assert!(
        paid.body.get("response").is_none(),
        "the answer is withheld: {}",
        paid.body
    );
    assert_eq!(
        shop.chain.usdc_of(&address).await,
        1_000_000 - 4 * PAGE,
        "the charge did go out"
    );
    // Recovery finds it on chain, then gives it back: the answer never went out.
    shop.chain.set_eth(&shop.wallet, 10u128.pow(16)).await; // the refund's gas
    let refunded = newest_payment_becomes(&shop.env, "refunded", std::time::Duration::from_secs(60)).await;
    assert_eq!(refunded["byUse"]["units"], 4, "{refunded}");
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000, "refunded, once");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_facilitator_that_claims_an_upto_settlement_it_never_made_serves_nothing() {
    let chain = LocalBase::start().await;
    let reference = RefFacilitator::start(&chain, None).await;
    // A real transaction of the chain's, which settles nothing of this payment.
    let (_, stranger) = base_payer(&chain, 10).await;
    let unrelated = chain.approve_permit2(&stranger, 1).await;
    let front = fronted(&reference.url, Some(unrelated)).await;
    let shop = facilitated_shop(chain, &front.base, &[("AGENT_HOST_X402_SETTLE_TIMEOUT_SECS", "2")]).await;
    let url = shop.server.url("/x402/base/seller");
    let (payer, address) = approved_payer(&shop.chain).await;

    let paid = pay_by_use(&payer, &url, &json!({ "message": "Will it rain?" })).await;
    assert_eq!(paid.status, 502, "{}", paid.body);
    assert!(
        paid.body.get("response").is_none(),
        "the answer is withheld: {}",
        paid.body
    );
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000);
    let payment = &payments(&shop.env)[0];
    assert_ne!(payment["state"], "served", "{payment}");
}

/// Work that failed by the agent's fault charges nothing, but its payer cools off as after
/// a refund: a command it can make fail is not to be run again and again for free.
#[tokio::test]
async fn a_payer_whose_work_failed_cools_off_before_its_next_payment_by_use() {
    let shop = pages_shop().await;
    let url = shop.server.url("/x402/base/seller");
    let (payer, address) = approved_payer(&shop.chain).await;
    let failed = pay_by_use(
        &payer,
        &url,
        &json!({ "command": "pages", "mode": "meter_then_fail", "n": 1 }),
    )
    .await;
    assert_eq!(failed.status, 500, "{}", failed.body);
    let offered =
        payment_required(&post_x402(&url, &json!({ "command": "pages", "mode": "meter" })).await)["accepts"][1].clone();
    let signer: PrivateKeySigner = payer.key.parse().unwrap();
    let again = paid_v2(
        &url,
        &json!({ "command": "pages", "mode": "meter", "n": 1 }),
        &upto_payment(&signer, &offered, 77),
    )
    .await;
    assert_eq!(code(&again), (429, "payer_cooling_off".into()), "{}", again.text);
    assert!(again.header("retry-after").is_some(), "{}", again.text);
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000);
    assert_eq!(payments(&shop.env).len(), 1, "nothing was held for the second");
}

/// The same signed payment for a command, sent again (a client that lost the answer), gets
/// the answer it bought, charged once.
#[tokio::test]
async fn a_command_bought_by_use_answers_its_retry_once_charged() {
    let shop = pages_shop().await;
    let url = shop.server.url("/x402/base/seller");
    let order = json!({ "command": "pages", "mode": "meter", "n": 2 });
    let offered = payment_required(&post_x402(&url, &order).await)["accepts"][1].clone();
    let (signer, address) = base_payer(&shop.chain, 1_000_000).await;
    shop.chain.approve_permit2(&address, u64::MAX).await;
    let payment = upto_payment(&signer, &offered, 3);
    let first = paid_v2(&url, &order, &payment).await;
    assert_eq!(first.status, 200, "{}", first.text);
    let again = paid_v2(&url, &order, &payment).await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json()["response"], "worked 2 units");
    assert_eq!(
        again.json()["receipt"]["amountPaidMicroUsdc"],
        2 * PAGE,
        "{}",
        again.text
    );
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - 2 * PAGE);
    assert_eq!(payments(&shop.env).len(), 1);
}

#[tokio::test]
async fn a_skill_is_bought_by_use_over_a2a() {
    let shop = pages_shop().await;
    let (payer, address) = approved_payer(&shop.chain).await;
    let out = client_script(
        "node",
        "node/a2a.mjs",
        &json!({
            "url": shop.server.url("/a2a/seller/"),
            "key": null,
            "steps": [{ "do": "send", "skill": "pages", "data": { "mode": "meter", "n": 5 }, "pay": by_use(&payer) }],
        }),
        "the A2A JavaScript client",
    )
    .await;
    let step = &out["steps"][0];
    assert_eq!(step["payment"]["accepted"]["scheme"], "upto", "{step}");
    assert_eq!(step["payment"]["accepted"]["extra"]["byUse"]["unit"], "page", "{step}");
    let task = &step["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{step}");
    let receipt = &task["status"]["message"]["metadata"]["x402.payment.receipts"][0];
    assert_eq!(receipt["amount"], (5 * PAGE).to_string(), "{task}");
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - 5 * PAGE);
}

/// Rates are part of what a payer signs for: a payment made before the owner raised them
/// is refused before anything is held.
#[tokio::test]
async fn a_payment_signed_at_old_rates_is_refused_after_they_change() {
    let shop = pages_shop().await;
    let url = shop.server.url("/x402/base/seller");
    let order = json!({ "command": "pages", "mode": "meter", "n": 2 });
    let offered = payment_required(&post_x402(&url, &order).await)["accepts"][1].clone();
    assert_eq!(offered["extra"]["byUse"], json!({ "perUnit": "2500", "unit": "page" }));
    let (signer, address) = base_payer(&shop.chain, 1_000_000).await;
    shop.chain.approve_permit2(&address, u64::MAX).await;
    let payment = upto_payment(&signer, &offered, 4);

    let dearer = format!("{}{}", paid_manifest("seller"), pages_manifest())
        .replace("per_unit_usd = 0.0025", "per_unit_usd = 0.025");
    shop.env.apply_agent(&dearer, "acme");
    // The running server sees the change within its cache's bound (docs/api.md: a second).
    let started = std::time::Instant::now();
    loop {
        let now = payment_required(&post_x402(&url, &order).await)["accepts"][1].clone();
        if now["extra"]["byUse"]["perUnit"] == "25000" {
            break;
        }
        assert!(started.elapsed().as_secs() < 5, "the new rates never showed: {now}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let refused = paid_v2(&url, &order, &payment).await;
    assert_eq!(
        code(&refused),
        (402, "payment_requirement_mismatch".into()),
        "{}",
        refused.text
    );
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000);
    assert!(payments(&shop.env).is_empty());
}

/// A payer that never approved Permit2, and holds no ETH, pays by use all the same: its
/// client signs USDC's permit for Permit2 (x402's `eip2612GasSponsoring`, which the 402
/// offers), and the agent's settlement submits it.
#[tokio::test]
async fn a_payer_that_never_approved_permit2_pays_with_a_signed_permit() {
    let shop = shop(answered()).await;
    let url = shop.server.url("/x402/base/seller");
    let offered = payment_required(&get(&url, None).await);
    assert_eq!(
        offered["extensions"]["eip2612GasSponsoring"]["info"]["version"], "1",
        "{offered}"
    );
    let (payer, address) = Payer::on_base(&shop.chain, 1_000_000).await;
    assert_eq!(shop.chain.eth_of(&address).await, 0);

    let paid = pay_by_use(&payer, &url, &json!({ "message": "Will it rain?" })).await;
    assert_eq!(paid.status, 200, "{}", paid.body);
    assert_eq!(paid.body["receipt"]["amountPaidMicroUsdc"], CHARGE, "{}", paid.body);
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - CHARGE);
    // The permit approved Permit2 for the maximum; the charge took its part of it.
    assert_eq!(shop.chain.permit2_allowance(&address).await, MAX - CHARGE);
    assert_eq!(shop.chain.eth_of(&address).await, 0, "the payer sent nothing itself");
}

/// The same through the reference facilitator: it submits the permit with the charge, and
/// the settlement it made is found on chain.
#[tokio::test(flavor = "multi_thread")]
async fn the_facilitator_submits_a_payers_permit_with_the_charge() {
    let chain = LocalBase::start().await;
    let facilitator = RefFacilitator::start(&chain, None).await;
    let shop = facilitated_shop(chain, &facilitator.url, &[]).await;
    let url = shop.server.url("/x402/base/seller");
    let (payer, address) = Payer::on_base(&shop.chain, 1_000_000).await;

    let paid = pay_by_use(&payer, &url, &json!({ "command": "pages", "mode": "meter", "n": 3 })).await;
    assert_eq!(paid.status, 200, "{}", paid.body);
    assert_eq!(paid.body["receipt"]["amountPaidMicroUsdc"], 3 * PAGE, "{}", paid.body);
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000 - 3 * PAGE);
    assert_eq!(shop.chain.permit2_allowance(&address).await, 50_000 - 3 * PAGE);
    assert_eq!(payments(&shop.env)[0]["state"], "served");
}

/// An answer the model cut at its length limit says so at the paid address too, streamed
/// or not, as OpenAI's own does: `finish_reason` is `length`.
#[tokio::test]
async fn a_paid_answer_cut_at_the_length_limit_finishes_with_length() {
    let (status, mut reply) = answered();
    reply["choices"][0]["finish_reason"] = json!("length");
    let shop = shop((status, reply)).await;
    let (payer, _) = approved_payer(&shop.chain).await;
    let ask = json!([{ "role": "user", "content": "Will it rain?" }]);
    let out = openai_paying(
        &shop,
        by_use(&payer),
        json!([{ "messages": ask }, { "messages": ask, "stream": true }]),
    )
    .await;
    for (i, answer) in out["results"].as_array().unwrap().iter().enumerate() {
        assert_eq!(answer["content"], "No rain today.", "{i}: {answer}");
        assert_eq!(answer["finishReason"], "length", "{i}: {answer}");
    }
}

/// Through the facilitator too, a payer that takes its approval back while the model writes
/// gets nothing and cools off; the facilitator's refusal is not the agent's fault.
#[tokio::test(flavor = "multi_thread")]
async fn through_the_facilitator_a_payer_that_takes_its_approval_back_cools_off() {
    let chain = LocalBase::start().await;
    let facilitator = RefFacilitator::start(&chain, None).await;
    let (status, mut reply) = answered();
    reply["sleep_ms"] = json!(1_500);
    let shop = facilitated_shop_answering(chain, &facilitator.url, &[], (status, reply)).await;
    let url = shop.server.url("/x402/base/seller");
    let (payer, address) = approved_payer(&shop.chain).await;
    let paying = {
        let (payer, url) = (payer.clone(), url.clone());
        tokio::spawn(async move { pay_by_use(&payer, &url, &json!({ "message": "Will it rain?" })).await })
    };
    while shop.seen.lock().unwrap().is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    shop.chain.approve_permit2(&address, 0).await;
    let paid = paying.await.unwrap();
    assert_eq!(paid.status, 402, "{}", paid.body);
    assert_eq!(paid.body["code"], "settlement_failed", "{}", paid.body);
    assert!(paid.body.get("response").is_none(), "{}", paid.body);
    assert_eq!(shop.chain.usdc_of(&address).await, 1_000_000);

    shop.chain.approve_permit2(&address, u64::MAX).await;
    let offered = payment_required(&get(&url, None).await);
    let signer: PrivateKeySigner = payer.key.parse().unwrap();
    let again = paid_v2(
        &url,
        &json!({ "message": "Will it rain?" }),
        &upto_payment(&signer, &offered["accepts"][1], 12),
    )
    .await;
    assert_eq!(code(&again), (429, "payer_cooling_off".into()), "{}", again.text);
}

/// A permit for Permit2 that would not pass (not the payer's signature) is found out before
/// the work, by simulating the settlement as the facilitator would send it.
#[tokio::test(flavor = "multi_thread")]
async fn a_permit_that_would_not_pass_is_refused_before_the_work() {
    let chain = LocalBase::start().await;
    let facilitator = RefFacilitator::start(&chain, None).await;
    let shop = facilitated_shop(chain, &facilitator.url, &[]).await;
    let url = shop.server.url("/x402/base/seller");
    let offered = payment_required(&get(&url, None).await);
    let upto = offered["accepts"][1].clone();
    let (signer, address) = base_payer(&shop.chain, 1_000_000).await;
    let mut payment = b64_json(&upto_payment(&signer, &upto, 21));
    let deadline = payment["payload"]["permit2Authorization"]["deadline"].clone();
    payment["extensions"] = json!({ "eip2612GasSponsoring": { "info": {
        "from": address, "asset": upto["asset"], "spender": agent_host::chains::base::PERMIT2.to_string(),
        "amount": upto["amount"], "nonce": "0", "deadline": deadline,
        "signature": format!("0x{}1b", "11".repeat(64)), "version": "1",
    } } });
    let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, payment.to_string());
    let refused = paid_v2(&url, &json!({ "message": "Will it rain?" }), &encoded).await;
    assert_eq!(code(&refused), (402, "settlement_failed".into()), "{}", refused.text);
    assert!(shop.seen.lock().unwrap().is_empty(), "the model was never asked");
    assert!(payments(&shop.env).is_empty(), "nothing was held");
}
