//! The owners' usage report (`/v1/account/agents/{id}/usage`, `/v1/account/usage`): after a
//! scripted mix of keyed calls, MCP calls, a chat with a command call, price lists, x402
//! payments and a refund, the numbers are exactly what the script did, on SQLite and on
//! PostgreSQL, and only the owner sees them.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::api::execute_with;
use crate::support::chains::LocalBase;
use crate::support::fake_llm::{Policy, fake_openai, text, tool_call};
use crate::support::mcp::post_message;
use crate::support::x402::*;
use crate::support::*;

fn shop_manifest() -> String {
    format!(
        r#"
username = "seller"
name = "Seller"
personality = "Helpful."

[[commands]]
command = "hello"
description = "Greets"
handler_type = "simple_text"
integrations = ["mcp", "x402"]
price_usd = 0.05
parameters = [{{ name = "name", type = "string", required = true, description = "Who" }}]
config = {{ text = "Hello, {{{{name}}}}!" }}

[[commands]]
command = "down"
description = "Calls a server that is not there"
handler_type = "webhook"
config = {{ url = "http://127.0.0.1:9/hook" }}
{BROKEN}
[x402]
enabled = true
default_price_usd = 0.01
networks = ["base"]
"#
    )
}

/// An answer of the stand-in model that reports its tokens.
fn with_usage((status, mut body): (u16, Value), prompt: u64, completion: u64) -> (u16, Value) {
    body["usage"] =
        json!({ "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion });
    (status, body)
}

/// The report until `done` says it holds everything (runs are added every 100 ms here,
/// fees once the chain is asked), or the last one after 20 s.
async fn report_when(url: &str, key: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let reply = get(url, Some(key)).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        let data = reply.json()["data"].clone();
        if done(&data) || Instant::now() > deadline {
            return data;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn command<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["command"] == name)
        .unwrap_or_else(|| panic!("no {name} in {report}"))
}

#[tokio::test]
async fn the_report_holds_exactly_what_the_agent_did_and_earned() {
    let chain = LocalBase::start().await;
    let policy: Policy = Arc::new(|_, n| match n {
        0 => with_usage(tool_call("c1", "hello", json!({ "name": "Bo" })), 40, 7),
        _ => with_usage(text("I greeted Bo."), 55, 5),
    });
    let llm = fake_openai(policy, Arc::new(Mutex::new(Vec::new()))).await;
    let env = TestEnv::new()
        .with_envs(chain.env())
        .with_env("AGENT_HOST_USAGE_FLUSH_MS", "100")
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model");
    let key = env.account_with_key("acme", "free");
    let other = env.account_with_key("bob", "free");
    let agent_id = env.apply_agent(&shop_manifest(), "acme");
    let wallet = env.create_wallet("seller", "base");
    chain.set_eth(&wallet, 10u128.pow(16)).await;
    let server = env.serve();

    // Keyed: three greetings and two failures; a call refused before it runs is no run.
    for name in ["Ann", "Al", "Amy"] {
        let reply = execute_with(&server, &key, &agent_id, "hello", json!({ "name": name })).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    for _ in 0..2 {
        let reply = execute_with(&server, &key, &agent_id, "down", json!({})).await;
        assert_eq!(reply.status, 500, "{}", reply.text);
    }
    let refused = execute_with(&server, &key, &agent_id, "hello", json!({})).await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    // MCP, with the owner's key.
    let call = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "hello", "arguments": { "name": "Mo" } },
    });
    let bearer = format!("Bearer {key}");
    let reply = post_message(
        &server.url(&format!("/mcp/{agent_id}")),
        &[("authorization", &bearer), ("mcp-protocol-version", "2025-11-25")],
        call.to_string(),
    )
    .await;
    assert!(reply.text.contains("Hello, Mo!"), "{}", reply.text);
    // A chat whose model calls hello once, over two rounds of tokens.
    let chat = post_json(
        &server.url(&format!("/v1/agents/{agent_id}/chat")),
        Some(&key),
        &json!({ "message": "Greet Bo", "toolsEnabled": true }),
    )
    .await;
    assert_eq!(chat.status, 200, "{}", chat.text);

    // x402: two price lists, a greeting paid (0.05) and a broken command paid (0.02),
    // which fails and is refunded.
    let (payer, _) = base_payer(&chain, 1_000_000).await;
    let url = server.url("/x402/base/seller");
    let hello = json!({ "command": "hello", "name": "Pay" });
    let broken = json!({ "command": "broken" });
    let hello_terms = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let broken_terms = post_x402(&url, &broken).await.json()["accepts"][0].clone();
    let reply = paid(&url, &hello, &base_payment(&payer, &hello_terms, 50_000, 1, 60)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let reply = paid(&url, &broken, &base_payment(&payer, &broken_terms, 20_000, 2, 60)).await;
    assert_ne!(reply.status, 200, "{}", reply.text);

    let agent_url = server.url(&format!("/v1/account/agents/{agent_id}/usage?step=hour"));
    // Fees are read from the chain once each transaction landed: two settlements, a refund.
    let report = report_when(&agent_url, &key, |r| {
        r["totals"]["calls"] == 9 && r["totals"]["refunds"] == 1 && r["totals"]["fee_transactions"] == 3
    })
    .await;
    let totals = &report["totals"];
    // 3 + 2 keyed, 1 MCP, 1 from the chat, 2 paid; the two `down` and the broken one failed.
    assert_eq!(
        (&totals["calls"], &totals["failed"]),
        (&json!(9), &json!(3)),
        "{report}"
    );
    assert_eq!(totals["payments"], json!({ "base": 2 }));
    assert_eq!(totals["revenue_micro_usdc"], json!({ "base": 70_000 }));
    assert_eq!(totals["revenue_by_version"], json!({ "v1": 70_000 }));
    assert_eq!(
        (&totals["refunds"], &totals["refunded_micro_usdc"]),
        (&json!(1), &json!(20_000))
    );
    assert_eq!(totals["offers"], 2, "{report}");
    assert_eq!(totals["fee_transactions"], 3, "{report}");
    assert!(
        totals["fees"]["base_wei"].as_i64().unwrap() > 0,
        "settling and refunding cost gas: {report}"
    );
    assert_eq!(
        (&totals["chats"], &totals["prompt_tokens"], &totals["completion_tokens"]),
        (&json!(1), &json!(95), &json!(12))
    );

    let hello = command(&report, "hello");
    assert_eq!(
        hello["by_channel"],
        json!({ "api": { "succeeded": 3 }, "mcp": { "succeeded": 1 }, "chat_tool": { "succeeded": 1 }, "x402": { "succeeded": 1 } })
    );
    assert_eq!(
        (&hello["revenue_micro_usdc"], &hello["offers"]),
        (&json!({ "base": 50_000 }), &json!(1))
    );
    for p in ["p50_ms", "p95_ms", "p99_ms"] {
        assert!(hello[p].as_f64().unwrap() >= 0.0, "{hello}");
    }
    let down = command(&report, "down");
    assert_eq!((&down["calls"], &down["failed"]), (&json!(2), &json!(2)));
    let broken = command(&report, "broken");
    assert_eq!((&broken["failed"], &broken["refunds"]), (&json!(1), &json!(1)));
    // The hour's step holds it all; the day before holds nothing.
    let points = report["points"].as_array().unwrap();
    assert_eq!(points.len(), 24);
    assert_eq!(points.last().unwrap()["calls"], 9);
    assert_eq!(points.iter().map(|p| p["calls"].as_i64().unwrap()).sum::<i64>(), 9);

    // The account's view adds its agents up; by day it is the same numbers.
    let account = get(&server.url("/v1/account/usage"), Some(&key)).await.json()["data"].clone();
    assert_eq!(account["step"], "day");
    assert_eq!(account["totals"], report["totals"]);
    assert_eq!(account["agents"][&agent_id]["calls"], 9);

    // Another account sees none of it.
    let theirs = get(&agent_url, Some(&other)).await;
    assert_eq!((theirs.status, theirs.error_code()), (404, "not_found".to_string()));
    let mine = get(&server.url("/v1/account/usage"), Some(&other)).await.json()["data"].clone();
    assert_eq!((&mine["totals"]["calls"], &mine["agents"]), (&json!(0), &json!({})));
    // Nonsense ranges are refused in the API's envelope.
    for query in [
        "step=minute",
        "from=2026-02-01&to=2026-01-01",
        "from=yesterday",
        "days=3",
    ] {
        let url = server.url(&format!("/v1/account/agents/{agent_id}/usage?{query}"));
        let reply = get(&url, Some(&key)).await;
        assert_eq!(
            (reply.status, reply.error_code()),
            (400, "validation_error".to_string()),
            "{query}"
        );
    }
}

/// On Solana the agent's wallet pays every fee (as the fee payer of each settlement, and
/// for its refunds): the report and the metric count them to the lamport, exactly what
/// left the wallet.
#[tokio::test]
async fn solana_fees_are_counted_to_the_lamport_in_the_report_and_the_metric() {
    use solana_signer::Signer;
    let chain = crate::support::chains::LocalSolana::start();
    let env = TestEnv::new()
        .with_env("AGENT_HOST_USAGE_FLUSH_MS", "100")
        .with_metrics();
    let (env, wallet) = solana_shop(&chain, env, BROKEN).await;
    let key = env.create_key("acme");
    let server = env.serve();
    let sol_before = chain.sol_of(&wallet).await;
    let payer = solana_keypair::Keypair::new();
    chain.set_usdc(&payer.pubkey().to_string(), 1_000_000).await;
    let url = server.url("/x402/solana/seller");
    let hello = json!({ "command": "hello", "name": "Pay" });
    let broken = json!({ "command": "broken" });
    let hello_terms = post_x402(&url, &hello).await.json()["accepts"][0].clone();
    let reply = paid(
        &url,
        &hello,
        &solana_payment(&chain, &payer, &hello_terms, 50_000).await,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let broken_terms = post_x402(&url, &broken).await.json()["accepts"][0].clone();
    let reply = paid(
        &url,
        &broken,
        &solana_payment(&chain, &payer, &broken_terms, 20_000).await,
    )
    .await;
    assert_eq!(reply.status, 500, "{}", reply.text);
    assert!(reply.json()["refundTransactionSignature"].is_string(), "{}", reply.text);

    let report = report_when(&server.url("/v1/account/agents/seller/usage?step=hour"), &key, |r| {
        r["totals"]["fee_transactions"] == 3
    })
    .await;
    let spent = sol_before - chain.sol_of(&wallet).await;
    let totals = &report["totals"];
    assert_eq!(totals["fee_transactions"], 3, "two settlements and a refund: {report}");
    assert_eq!(totals["fees"]["solana_lamports"], json!(spent), "{report}");
    assert_eq!(
        server.metric("agent_host_x402_fee_lamports_total").await,
        spent as f64,
        "the metric counts the same lamports"
    );
    assert_eq!(totals["payments"], json!({ "solana": 2 }), "{report}");
    assert_eq!(totals["refunded_micro_usdc"], json!(20_000), "{report}");
}
