//! Paid A2A tasks (x402's A2A extension): a task for a priced skill asks for its payment,
//! the client answers with one, and the task ends with its receipt; on both local chains,
//! paid by the A2A JavaScript SDK's client with the payment built by the x402 packages.
//! A payment is used once across A2A and HTTP, and a failing paid task is refunded.

use serde_json::{Value, json};

use crate::support::chains::{LocalBase, LocalSolana};
use crate::support::payers::{Payer, network_id};
use crate::support::x402::*;
use crate::support::*;

/// A paid skill that takes its time (not long-running: the answer comes in the call).
fn slow_skill() -> String {
    format!(
        r#"
[[commands]]
command = "slowpoke"
description = "Takes its time"
handler_type = "custom"
plugin = "{}"
integrations = ["x402", "a2a"]
price_usd = 0.01
timeout_ms = 10000
"#,
        plugin_path("probe")
    )
}

const SKILLS: &str = r#"
[[commands]]
command = "weather"
description = "Weather for a city"
handler_type = "simple_text"
integrations = ["x402", "a2a"]
price_usd = 0.03
parameters = [{ name = "city", type = "string", required = true }]
config = { text = "Sunny in {{city}}" }

[[commands]]
command = "broken"
description = "Calls a server that is not there"
handler_type = "webhook"
integrations = ["x402", "a2a"]
price_usd = 0.02
config = { url = "http://127.0.0.1:9/hook" }
"#;

async fn client(request: &Value) -> Value {
    client_script("node", "node/a2a.mjs", request, "the A2A JavaScript client").await
}

fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or_default()
}

fn metadata(task: &Value) -> &Value {
    &task["status"]["message"]["metadata"]
}

/// What a paid task shows at each step, on either network.
fn check_paid(steps: &[Value], network: &str, payer: &str) {
    // The card names the extension and the price.
    let card = &steps[0]["card"];
    let extension = &card["capabilities"]["extensions"][0];
    assert!(extension["uri"].as_str().unwrap().contains("a2a-x402"), "{card}");
    let weather = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "weather")
        .unwrap_or_else(|| panic!("{card}"));
    assert!(
        weather["description"].as_str().unwrap().contains("0.03 USDC"),
        "{weather}"
    );
    // Asked, paid, answered, with the receipt.
    let paid = &steps[1];
    assert_eq!(state(&paid["asked"]), "TASK_STATE_INPUT_REQUIRED", "{paid}");
    let asked = metadata(&paid["asked"]);
    assert_eq!(asked["x402.payment.status"], "payment-required", "{paid}");
    let required = &asked["x402.payment.required"];
    assert_eq!(required["x402Version"], 2, "{required}");
    assert_eq!(required["resource"]["url"], "a2a://skill/weather", "{required}");
    let accept = required["accepts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["network"] == network)
        .unwrap_or_else(|| panic!("{required}"));
    assert_eq!(accept["amount"], "30000", "{required}");
    let task = &paid["task"];
    assert_eq!(state(task), "TASK_STATE_COMPLETED", "{paid}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "Sunny in Oslo", "{task}");
    let receipt = &metadata(task)["x402.payment.receipts"][0];
    assert_eq!(metadata(task)["x402.payment.status"], "payment-completed", "{task}");
    assert_eq!(
        (&receipt["success"], &receipt["network"]),
        (&json!(true), &json!(network)),
        "{task}"
    );
    assert_eq!(receipt["payer"], payer, "{task}");
    // The same payment again, for another task: refused, and asked for again.
    let replay = &steps[2]["task"];
    assert_eq!(state(replay), "TASK_STATE_INPUT_REQUIRED", "{replay}");
    assert_eq!(metadata(replay)["x402.payment.status"], "payment-failed", "{replay}");
    assert_eq!(metadata(replay)["x402.payment.error"], "DUPLICATE_NONCE", "{replay}");
    assert!(
        metadata(replay)["x402.payment.required"]["accepts"].is_array(),
        "{replay}"
    );
    // Paid over A2A, refused over HTTP; paid over HTTP, refused over A2A.
    assert_eq!(steps[3]["status"], 409, "{}", steps[3]);
    assert_eq!(steps[3]["body"]["code"], "payment_already_used", "{}", steps[3]);
    assert_eq!(steps[4]["status"], 200, "{}", steps[4]);
    let crossed = &steps[5]["task"];
    assert_eq!(metadata(crossed)["x402.payment.error"], "DUPLICATE_NONCE", "{crossed}");
    // A paid skill that fails by the agent's fault: failed, and its payment refunded.
    let broken = &steps[6]["task"];
    assert_eq!(state(broken), "TASK_STATE_FAILED", "{}", steps[6]);
    assert_eq!(
        metadata(broken)["x402.payment.receipts"][0]["success"],
        true,
        "{broken}"
    );
    assert!(metadata(broken)["x402.payment.refund"].is_object(), "{broken}");
    // Declined: the task ends, nothing paid.
    let declined = &steps[7]["task"];
    assert_eq!(state(declined), "TASK_STATE_CANCELED", "{declined}");
    assert_eq!(
        metadata(declined)["x402.payment.status"],
        "payment-rejected",
        "{declined}"
    );
    // The public card, with the extension and its prices, is signed and checks.
    assert_eq!(steps[8]["verified"], true, "{}", steps[8]);
    assert_ne!(steps[8]["changed"], "accepted", "{}", steps[8]);
}

/// A seller whose cards the operator signs.
fn signing(env: TestEnv) -> TestEnv {
    let key_file = env.path("card-key");
    std::fs::write(&key_file, "22".repeat(32)).unwrap();
    env.with_env("AGENT_HOST_A2A_CARD_SIGNING_KEY_FILE", key_file.to_str().unwrap())
}

fn paid_steps(server: &TestServer, network: &str, pay: &Value) -> Value {
    let http = server.url(&format!("/x402/{network}/seller"));
    json!([
        { "do": "card" },
        { "do": "send", "skill": "weather", "data": { "city": "Oslo" }, "pay": pay },
        { "do": "send", "skill": "weather", "data": { "city": "Rome" }, "payload": "$1" },
        { "do": "payHttp", "url": http, "body": { "command": "weather", "city": "Oslo" }, "payload": "$1" },
        { "do": "payHttp", "url": http, "body": { "command": "weather", "city": "Kyiv" }, "pay": pay },
        { "do": "send", "skill": "weather", "data": { "city": "Paris" }, "payload": "$4" },
        { "do": "send", "skill": "broken", "data": {}, "pay": pay },
        { "do": "send", "skill": "weather", "data": { "city": "Lima" }, "decline": true },
        { "do": "verify" },
    ])
}

#[tokio::test]
async fn a_paid_skill_is_an_a2a_task_paid_once_on_base() {
    let chain = LocalBase::start().await;
    let (env, wallet) = base_shop(&chain, signing(TestEnv::new()), SKILLS).await;
    let server = env.serve();
    let (payer, address) = Payer::on_base(&chain, 1_000_000).await;
    let pay = json!({ "network": "base", "key": payer.key, "rpcUrl": payer.rpc_url, "networkId": network_id("base") });
    let out = client(&json!({
        "url": server.url("/a2a/seller/"),
        "key": null,
        "steps": paid_steps(&server, "base", &pay),
    }))
    .await;
    let steps = out["steps"].as_array().unwrap();
    check_paid(steps, network_id("base"), &address);
    let receipt = &metadata(&steps[1]["task"])["x402.payment.receipts"][0];
    let tx = receipt["transaction"].as_str().unwrap();
    assert_eq!(chain.receipt(tx).await["status"], "0x1");
    // Two weathers paid (A2A, HTTP); the broken call's 0.02 came back.
    time_until(std::time::Duration::from_secs(30), "the refund lands", || async {
        chain.usdc_of(&address).await == 940_000
    })
    .await;
    assert_eq!(chain.usdc_of(&wallet).await, 60_000);
}

#[tokio::test]
async fn a_paid_skill_is_an_a2a_task_paid_once_on_solana() {
    let chain = LocalSolana::start();
    let (env, wallet) = solana_shop(&chain, signing(TestEnv::new()), SKILLS).await;
    let server = env.serve();
    let (payer, address) = Payer::on_solana(&chain, 1_000_000).await;
    let pay =
        json!({ "network": "solana", "key": payer.key, "rpcUrl": payer.rpc_url, "networkId": network_id("solana") });
    let out = client(&json!({
        "url": server.url("/a2a/seller/"),
        "key": null,
        "steps": paid_steps(&server, "solana", &pay),
    }))
    .await;
    let steps = out["steps"].as_array().unwrap();
    check_paid(steps, network_id("solana"), &address);
    time_until(std::time::Duration::from_secs(30), "the refund lands", || async {
        chain.usdc_of(&address).await == Some(940_000)
    })
    .await;
    assert_eq!(chain.usdc_of(&wallet).await, Some(60_000));
}

#[tokio::test]
async fn the_owner_uses_a_priced_skill_free_and_a_stranger_cannot_read_its_tasks() {
    let chain = LocalBase::start().await;
    let (env, _wallet) = base_shop(&chain, TestEnv::new(), SKILLS).await;
    let key = env.create_key("acme");
    let server = env.serve();
    let call = |key: Option<String>, params: Value| {
        let url = server.url("/a2a/seller");
        async move {
            let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params });
            post_json(&url, key.as_deref(), &body).await.json()
        }
    };
    let message = json!({ "message": { "messageId": "m1", "role": "ROLE_USER", "parts": [{ "data": { "city": "Oslo" } }], "metadata": { "skill": "weather" } } });
    let owner = call(Some(key.clone()), message.clone()).await;
    assert_eq!(state(&owner["result"]["task"]), "TASK_STATE_COMPLETED", "{owner}");
    assert!(
        owner["result"]["task"]["status"].get("message").is_none(),
        "no payment: {owner}"
    );
    // A stranger is asked to pay; input the skill refuses is refused before a price is named.
    let stranger = call(None, message).await;
    assert_eq!(
        state(&stranger["result"]["task"]),
        "TASK_STATE_INPUT_REQUIRED",
        "{stranger}"
    );
    let bad = json!({ "message": { "messageId": "m2", "role": "ROLE_USER", "parts": [{ "data": { "town": "Oslo" } }], "metadata": { "skill": "weather" } } });
    let refused = call(None, bad).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    // A payment answer with no payload, or a payload that is not one, keeps the task waiting.
    let task_id = stranger["result"]["task"]["id"].as_str().unwrap();
    let empty = json!({ "message": { "messageId": "m3", "taskId": task_id, "role": "ROLE_USER", "parts": [{ "text": "here" }] } });
    let reply = call(None, empty).await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    let junk = json!({ "message": { "messageId": "m4", "taskId": task_id, "role": "ROLE_USER", "parts": [{ "text": "here" }],
        "metadata": { "x402.payment.status": "payment-submitted", "x402.payment.payload": { "x402Version": 2, "accepted": { "network": "eip155:1" } } } } });
    let reply = call(None, junk).await;
    let task = &reply["result"]["task"];
    assert_eq!(state(task), "TASK_STATE_INPUT_REQUIRED", "{reply}");
    assert_eq!(metadata(task)["x402.payment.error"], "INVALID_PAYLOAD", "{reply}");
    // The owner's key does not reach a stranger's task.
    let get = json!({ "jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": { "id": task_id } });
    let theirs = post_json(&server.url("/a2a/seller"), Some(&key), &get).await.json();
    assert_eq!(theirs["error"]["code"], -32001, "{theirs}");
    // Cancelled before paying: it ends, and asks for nothing any more.
    let cancel = json!({ "jsonrpc": "2.0", "id": 3, "method": "CancelTask", "params": { "id": task_id } });
    let cancelled = post_json(&server.url("/a2a/seller"), None, &cancel).await.json();
    assert_eq!(state(&cancelled["result"]), "TASK_STATE_CANCELED", "{cancelled}");
    let ended = metadata(&cancelled["result"]);
    assert_eq!(ended["x402.payment.status"], "payment-rejected", "{cancelled}");
    assert!(ended.get("x402.payment.required").is_none(), "{cancelled}");
}

/// A payer that goes away while its paid task runs cuts off its wait, not the work: the
/// task completes with its receipt and the payment is served, not refunded.
#[tokio::test]
async fn a_payer_who_leaves_mid_task_is_served_and_the_task_completes() {
    let chain = LocalBase::start().await;
    let (env, wallet) = base_shop(&chain, TestEnv::new(), &format!("{SKILLS}{}", slow_skill())).await;
    let server = env.serve();
    let (payer, address) = Payer::on_base(&chain, 1_000_000).await;
    let pay = json!({ "network": "base", "key": payer.key, "rpcUrl": payer.rpc_url, "networkId": network_id("base") });
    let out = client(&json!({
        "url": server.url("/a2a/seller/"),
        "key": null,
        "steps": [{ "do": "send", "skill": "slowpoke", "data": { "mode": "sleep", "n": 2500 }, "pay": pay, "abortAfterMs": 800 }],
    }))
    .await;
    let step = &out["steps"][0];
    assert!(step["aborted"].is_string(), "the client stopped waiting: {step}");
    let task_id = step["asked"]["id"].as_str().unwrap().to_string();
    let task = until_completed(&server, &task_id).await;
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "slept 2500 ms", "{task}");
    assert_eq!(metadata(&task)["x402.payment.receipts"][0]["success"], true, "{task}");
    assert_eq!(chain.usdc_of(&address).await, 990_000, "paid once, not refunded");
    assert_eq!(chain.usdc_of(&wallet).await, 10_000);
}

/// A payment answered at once (`returnImmediately`): the task says it is being paid, with
/// no price list left, and then completes with its receipt.
#[tokio::test]
async fn a_payment_answered_at_once_shows_the_task_being_paid() {
    let chain = LocalBase::start().await;
    let (env, _wallet) = base_shop(&chain, TestEnv::new(), &format!("{SKILLS}{}", slow_skill())).await;
    let server = env.serve();
    let (payer, _address) = Payer::on_base(&chain, 1_000_000).await;
    let pay = json!({ "network": "base", "key": payer.key, "rpcUrl": payer.rpc_url, "networkId": network_id("base") });
    let out = client(&json!({
        "url": server.url("/a2a/seller/"),
        "key": null,
        "steps": [{ "do": "send", "skill": "slowpoke", "data": { "mode": "sleep", "n": 1500 }, "pay": pay, "immediately": true },
                  { "do": "get", "task": "$0" }],
    }))
    .await;
    let answered = &out["steps"][0]["task"];
    assert_eq!(state(answered), "TASK_STATE_WORKING", "{out}");
    assert_eq!(metadata(answered)["x402.payment.status"], "payment-submitted", "{out}");
    assert!(metadata(answered).get("x402.payment.required").is_none(), "{out}");
    let task_id = answered["id"].as_str().unwrap().to_string();
    let task = until_completed(&server, &task_id).await;
    assert_eq!(metadata(&task)["x402.payment.status"], "payment-completed", "{task}");
    assert_eq!(metadata(&task)["x402.payment.receipts"][0]["success"], true, "{task}");
}

/// The seller's task `task_id` once it completed, read without a key (at most 20 s).
async fn until_completed(server: &TestServer, task_id: &str) -> Value {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": { "id": task_id } });
    let url = server.url("/a2a/seller");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let task = post_json(&url, None, &body).await.json()["result"].clone();
        if state(&task) == "TASK_STATE_COMPLETED" || std::time::Instant::now() > deadline {
            return task;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
