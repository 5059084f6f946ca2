//! The web console at `/console`: its files and their headers over HTTP, and the account
//! holder's flows in headless Chromium (tests/node/console.mjs, with playwright-core) against
//! a server with a real x402 payment on the local Base chain.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::chains::LocalBase;
use crate::support::fake_llm::{Policy, fake_openai, text, tool_call};
use crate::support::payers::{Payer, X402Client, pay_by_use, pay_with};
use crate::support::webhooks::{Receiver, verify};
use crate::support::x402::*;
use crate::support::*;

#[tokio::test]
async fn the_console_is_served_with_a_strict_policy() {
    let fx = Fixture::start();
    for path in ["/console", "/console/"] {
        let page = get(&fx.url(path), None).await;
        assert_eq!(page.status, 200);
        assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));
        assert!(page.text.contains("/console/js/main.js"), "{}", page.text);
        let csp = page.header("content-security-policy").unwrap();
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(directive), "{csp}");
        }
        assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(page.header("x-frame-options"), Some("DENY"));
        assert!(page.header("set-cookie").is_none(), "no cookie, ever");
    }
    let script = get(&fx.url("/console/js/main.js"), None).await;
    assert_eq!(script.header("content-type"), Some("text/javascript; charset=utf-8"));
    // Nothing from elsewhere: no CDN, no remote font.
    assert!(!script.text.contains("https://"), "{}", script.text);
    let missing = get(&fx.url("/console/js/../../secrets"), None).await;
    assert_eq!(missing.status, 404);
    let missing = get(&fx.url("/console/nothing.js"), None).await;
    assert_eq!((missing.status, missing.error_code()), (404, "not_found".into()));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_account_holder_does_it_all_in_the_browser() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&chromium).exists(),
        "{chromium} is missing: scripts/test.sh installs Debian's chromium"
    );
    let chain = LocalBase::start().await;
    // A model that greets Ann with the agent's /hello when asked to, and says hello otherwise.
    let policy: Policy = Arc::new(|request, _| {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let asked = messages
            .last()
            .is_some_and(|m| m["role"] == "user" && m["content"].as_str().unwrap_or("").contains("Greet"));
        let (status, mut body) = match asked {
            true => tool_call("c1", "hello", json!({ "name": "Ann" })),
            false => text("Hello from the agent."),
        };
        body["usage"] = json!({ "prompt_tokens": 21, "completion_tokens": 5, "total_tokens": 26 });
        (status, body)
    });
    let llm = fake_openai(policy, Arc::new(Mutex::new(Vec::new()))).await;
    let receiver = Receiver::start().await;
    let env = TestEnv::new()
        .with_envs(chain.env())
        .with_env("AGENT_HOST_PLUGIN_MAX_COMPONENT_BYTES", "4000000")
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model")
        .with_env("AGENT_HOST_USAGE_FLUSH_MS", "100")
        .with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", "127.0.0.1")
        .with_env("AGENT_HOST_WEBHOOK_ALLOW_PRIVATE", "127.0.0.1")
        .with_env("AGENT_HOST_WEBHOOK_POLL_MS", "50")
        .with_env("AGENT_HOST_MCP_OAUTH", "true");
    // pro: the page makes more than free's 60 requests a minute.
    let manage_key = env.account_with_key("acme", "pro");
    let nap = format!(
        "\n[[commands]]\ncommand = \"nap\"\nhandler_type = \"custom\"\nplugin = \"{}\"\nlong_running = true\ntimeout_ms = 30000\n",
        plugin_path("probe")
    );
    // Its chat is also sold by use: 2 micro-USDC a prompt token, 6 a generated one.
    let by_use =
        "\n[x402.chat_by_use]\nper_1k_input_tokens_usd = 0.002\nper_1k_output_tokens_usd = 0.006\nmax_usd = 0.05\n";
    // A remote MCP server it names (unreachable here), whose credential the page sets.
    let remote = "\n[[mcp_servers]]\nname = \"docs\"\nurl = \"http://127.0.0.1:9/mcp\"\nheader = \"Authorization\"\ntimeout_ms = 500\n";
    let seller = env.apply_agent(
        &format!("{}{REPORT}{nap}{by_use}{remote}", paid_manifest("seller")),
        "acme",
    );
    let wallet = env.create_wallet("seller", "base");
    chain.set_eth(&wallet, 10u128.pow(16)).await; // it relays the payments: pays the gas
    chain.deploy_permit2().await;
    let server = env.serve();

    // A real x402 client buys a command and a long-running report.
    let (payer, payer_address) = Payer::on_base(&chain, 1_000_000).await;
    let url = server.url("/x402/base/seller");
    let paid = pay_with(
        X402Client::Fetch2,
        &payer,
        &url,
        &json!({ "command": "forecast", "city": "Paris" }),
    )
    .await;
    assert_eq!(paid.status, 200, "{}", paid.body);
    let paid_tx = paid.body["receipt"]["transactionSignature"]
        .as_str()
        .unwrap()
        .to_string();
    let report = pay_with(X402Client::Fetch2, &payer, &url, &json!({ "command": "report" })).await;
    assert_eq!(report.status, 202, "{}", report.body);
    poll_job(report.body["statusUrl"].as_str().unwrap(), Duration::from_secs(20)).await;
    // And a message by use: 21 prompt and 5 generated tokens, 72 micro-USDC.
    chain.approve_permit2(&payer_address, u64::MAX).await;
    let by_use = pay_by_use(&payer, &url, &json!({ "message": "Hi" })).await;
    assert_eq!(by_use.body["receipt"]["amountPaidMicroUsdc"], 72, "{}", by_use.body);

    // A chat with the agent, whose tokens the console shows.
    let chatted = send(
        client()
            .post(server.url("/v1/agents/seller/openai/v1/chat/completions"))
            .bearer_auth(&manage_key)
            .json(&json!({ "model": "seller", "messages": [{ "role": "user", "content": "Hi" }] })),
    )
    .await;
    assert_eq!(chatted.status, 200, "{}", chatted.text);
    let tokens = &chatted.json()["usage"];

    // Three greetings over the keyed API: with the two paid commands, five runs, and 0.040072
    // USDC earned in three payments (0.01, 0.03 and the message's 0.000072), which the
    // dashboard must show.
    for name in ["Ann", "Bo", "Cy"] {
        let reply =
            crate::support::api::execute_with(&server, &manage_key, &seller, "hello", json!({ "name": name })).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let totals = loop {
        let report = get(&server.url("/v1/account/usage"), Some(&manage_key)).await.json();
        let totals = report["data"]["totals"].clone();
        if totals["calls"] == 5 || Instant::now() > deadline {
            break totals;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        (&totals["calls"], &totals["revenue_micro_usdc"]),
        (&json!(5), &json!({ "base": 40_072 })),
        "{totals}"
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/node/console.mjs");
    let mut run = tokio::process::Command::new("node");
    run.arg(script)
        .env("CONSOLE_BASE", server.url(""))
        .env("MANAGE_KEY", &manage_key)
        .env("SELLER", &seller)
        .env("PAID_TX", &paid_tx)
        .env("PAYER", &payer_address)
        // Today's chats: the keyed one and the one paid by use (21 and 5 tokens each).
        .env(
            "PROMPT_TOKENS",
            (tokens["prompt_tokens"].as_u64().unwrap() + 21).to_string(),
        )
        .env(
            "COMPLETION_TOKENS",
            (tokens["completion_tokens"].as_u64().unwrap() + 5).to_string(),
        )
        .env("EXPECT_CHATS", "2 chats")
        .env("NOTES_WASM", plugin_path("notes"))
        .env("WEBHOOK_URL", receiver.url())
        .env("EXPECT_REVENUE", "0.040072 USDC")
        .env("EXPECT_PAID", "3")
        .env("EXPECT_RUNS", "5")
        .env("CHROMIUM", &chromium);
    // CONSOLE_SCREENSHOTS=docs/console refreshes the pictures of docs/console.md.
    if let Ok(dir) = std::env::var("CONSOLE_SCREENSHOTS") {
        run.env("SCREENSHOTS", dir);
    }
    let (passed, log) = run_tool(run, Duration::from_secs(180), "the browser flows").await;
    assert!(
        passed,
        "the browser flows failed:\n{log}\nserver log:\n{}",
        server.log()
    );
    assert!(log.contains("console: all flows passed"), "{log}");
    // The credential set in the page is kept, sealed.
    let servers = get(
        &server.url(&format!("/v1/account/agents/{seller}/mcp-servers")),
        Some(&manage_key),
    )
    .await
    .json();
    assert_eq!(servers["data"]["servers"][0]["credential_set"], true, "{servers}");
    assert!(!env.database_contains(b"console-secret"));

    // The endpoint added in the page got the key made meanwhile, and again when the page
    // sent it again, signed with the secret the page showed.
    let endpoints = get(&server.url("/v1/account/webhooks"), Some(&manage_key)).await.json();
    let endpoint_id = endpoints["data"]["endpoints"][0]["id"].as_str().unwrap().to_string();
    let shown = get(
        &server.url(&format!("/v1/account/webhooks/{endpoint_id}")),
        Some(&manage_key),
    )
    .await
    .json();
    let received = receiver.received();
    let created: Vec<_> = received.iter().filter(|r| r.event_type() == "key.created").collect();
    assert!(
        created.len() >= 2 && created.iter().all(|r| r.id == created[0].id),
        "sent, then sent again"
    );
    let checked: Value = verify(shown["data"]["secret"].as_str().unwrap(), &received).await;
    assert_eq!(checked["refused"], json!([]), "{checked}");
    assert_eq!(checked["documented"].as_array().unwrap().len(), received.len());

    // What the page did is really done: the plugin's command ran, and its note is kept.
    let notes = post_json(
        &server.url("/v1/agents/notebook/commands/notes/execute"),
        Some(&manage_key),
        &json!({ "parameters": { "action": "list" } }),
    )
    .await;
    assert_eq!(
        notes.json()["data"]["result"]["response"],
        "1. Buy milk",
        "{}",
        notes.text
    );
}
