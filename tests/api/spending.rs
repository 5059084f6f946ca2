//! Agents paying for the x402 services their commands call, within what their owners allow
//! (docs/agents.md#paying-for-the-services-it-calls): a buyer agent's webhook command calls
//! a seller agent's paid route on the same host, the host pays from the buyer's wallet, on
//! the local chains, balances read back from the chain.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::support::api::{answered, execute_with};
use crate::support::chains::{LocalBase, LocalSolana};
use crate::support::facilitator::RefFacilitator;
use crate::support::webhooks::Receiver;
use crate::support::x402::{WEATHER, base_shop, solana_shop};
use crate::support::*;

/// The buyer's manifest: `buy` may pay the seller's origin up to 0.02 a payment and 0.025
/// a day; `browse` calls the same address but may not pay; `elsewhere` may pay, but only a
/// payee that is not the seller.
fn buyer(seller_url: &str, origin: &str) -> String {
    let call = |name: &str| {
        format!(
            r#"
[[commands]]
command = "{name}"
description = "Calls the seller"
handler_type = "webhook"
parameters = [{{ name = "command", type = "string", required = true }}, {{ name = "city", type = "string", required = true }}]
config = {{ url = "{seller_url}", response_field = "response" }}
"#
        )
    };
    format!(
        r#"username = "buyer"
name = "Buyer"
{}{}
[payments]
max_per_payment = "0.02"
max_per_day = "0.025"
payees = ["{origin}"]
commands = ["buy"]
"#,
        call("buy"),
        call("browse"),
    )
}

/// An agent that may pay only a payee that is not the seller.
fn picky(seller_url: &str) -> String {
    format!(
        r#"username = "picky"
name = "Picky"

[[commands]]
command = "buy"
handler_type = "webhook"
parameters = [{{ name = "command", type = "string", required = true }}, {{ name = "city", type = "string", required = true }}]
config = {{ url = "{seller_url}", response_field = "response" }}

[payments]
max_per_payment = 1
max_per_day = 1
payees = ["https://api.example.com", "0x1111111111111111111111111111111111111111"]
commands = ["buy"]
"#
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn failure(reply: &Reply) -> String {
    assert_ne!(reply.status, 200, "{}", reply.text);
    reply.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn spending(server: &TestServer, key: &str, agent: &str) -> Value {
    let reply = get(&server.url(&format!("/v1/account/agents/{agent}/spending")), Some(key)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()["data"].clone()
}

/// One of the local chains.
enum Chain<'a> {
    Base(&'a LocalBase),
    Solana(&'a LocalSolana),
}

impl Chain<'_> {
    fn network(&self) -> &'static str {
        match self {
            Chain::Base(_) => "base",
            Chain::Solana(_) => "solana",
        }
    }

    async fn fund(&self, wallet: &str, micro: u64) {
        match self {
            Chain::Base(chain) => chain.mint_usdc(wallet, micro).await,
            Chain::Solana(chain) => chain.set_usdc(wallet, micro).await,
        }
    }

    /// The wallet's USDC, read from the chain.
    async fn usdc(&self, wallet: &str) -> u64 {
        match self {
            Chain::Base(chain) => chain.usdc_of(wallet).await,
            Chain::Solana(chain) => chain.usdc_of(wallet).await.unwrap_or(0),
        }
    }

    /// The transaction landed and succeeded.
    async fn landed(&self, transaction: &str) {
        match self {
            Chain::Base(chain) => assert_eq!(chain.receipt(transaction).await["status"], "0x1"),
            Chain::Solana(chain) => {
                let status = crate::support::chains::rpc(
                    &chain.rpc_url,
                    "getSignatureStatuses",
                    json!([[transaction], { "searchTransactionHistory": true }]),
                )
                .await;
                let status = &status["value"][0];
                assert!(status.is_object(), "{transaction} is not on the chain");
                assert!(status["err"].is_null(), "{status}");
            }
        }
    }
}

/// What both chains show: the buyer pays the seller's forecast (0.01) twice; a 0.03
/// weather is over its per-payment maximum, a third forecast over its day; `browse` gets
/// the 402 as it came; `picky` pays nobody it was not told to.
async fn buys_within_its_limits(chain: Chain<'_>, env: TestEnv, port: u16, seller: &str) -> Bought {
    let network = chain.network();
    let receiver = Receiver::start().await;
    let key = env.account_with_key("bob", "pro");
    let seller_url = format!("http://127.0.0.1:{port}/x402/{network}/seller");
    let buyer_id = env.apply_agent(&buyer(&seller_url, &format!("http://127.0.0.1:{port}")), "bob");
    env.apply_agent(&picky(&seller_url), "bob");
    let (buyer_wallet, picky_wallet) = (env.create_wallet("buyer", network), env.create_wallet("picky", network));
    chain.fund(&buyer_wallet, 50_000).await;
    chain.fund(&picky_wallet, 50_000).await;
    let server = env.serve_with(&["serve", "--listen", &format!("127.0.0.1:{port}")]);
    let endpoint = post_json(
        &server.url("/v1/account/webhooks"),
        Some(&key),
        &json!({ "url": receiver.url(), "events": ["spending.payment_made"] }),
    )
    .await;
    assert_eq!(endpoint.status, 201, "{}", endpoint.text);
    let forecast = json!({ "command": "forecast", "city": "Paris" });

    // Paid: the seller's answer comes back, and the money moved on chain.
    let reply = execute_with(&server, &key, "buyer", "buy", forecast.clone()).await;
    assert_eq!(answered(&reply), "Sunny in Paris");
    assert_eq!(chain.usdc(&buyer_wallet).await, 40_000);
    assert_eq!(chain.usdc(seller).await, 10_000);
    let record = spending(&server, &key, "buyer").await;
    let paid = &record["payments"][0];
    assert_eq!(
        (
            paid["state"].as_str(),
            paid["amount_micro_usdc"].as_u64(),
            paid["command"].as_str()
        ),
        (Some("settled"), Some(10_000), Some("buy")),
        "{record}"
    );
    assert_eq!(paid["pay_to"], seller);
    assert_eq!(paid["payer"], buyer_wallet.as_str());
    assert_eq!(paid["resource"], seller_url.as_str());
    assert_eq!(paid["x402Version"], 2, "the seller offers v2 beside v1: v2 is paid");
    let transaction = paid["transaction"]
        .as_str()
        .expect("the settlement's transaction")
        .to_string();
    chain.landed(&transaction).await;
    assert_eq!(record["spent_today_micro_usdc"], 10_000);
    assert_eq!(record["policy"]["max_per_day_micro_usdc"], 25_000);

    // Over the per-payment maximum: nothing is paid, and the command says why.
    let reply = execute_with(
        &server,
        &key,
        "buyer",
        "buy",
        json!({ "command": "weather", "city": "Lima" }),
    )
    .await;
    let why = failure(&reply);
    assert!(
        why.contains("0.03 USDC is more than this agent's maximum per payment (0.02 USDC)"),
        "{why}"
    );

    // A second forecast fits the day (0.02 of 0.025), a third does not.
    assert_eq!(
        answered(&execute_with(&server, &key, "buyer", "buy", forecast.clone()).await),
        "Sunny in Paris"
    );
    let why = failure(&execute_with(&server, &key, "buyer", "buy", forecast.clone()).await);
    assert!(
        why.contains("maximum of 0.025 USDC a day (0.02 USDC paid in the last 24 hours)"),
        "{why}"
    );
    assert_eq!(chain.usdc(&buyer_wallet).await, 30_000);
    assert_eq!(chain.usdc(seller).await, 20_000);

    // A command its owner did not let pay gets the 402 as the seller sent it.
    let why = failure(&execute_with(&server, &key, "buyer", "browse", forecast.clone()).await);
    assert!(why.contains("402"), "{why}");

    // A payee not on the list is not paid, whatever the agent may spend.
    let why = failure(&execute_with(&server, &key, "picky", "buy", forecast).await);
    assert!(why.contains("is among this agent's payees"), "{why}");
    assert_eq!(chain.usdc(&picky_wallet).await, 50_000);
    assert_eq!(spending(&server, &key, "picky").await["payments"], json!([]));

    // Two payments recorded, both told to the owner's webhook; the refusals paid nothing.
    assert_eq!(chain.usdc(&buyer_wallet).await, 30_000);
    let record = spending(&server, &key, "buyer").await;
    assert_eq!(record["payments"].as_array().unwrap().len(), 2, "{record}");
    let told = receiver.until("two payments told", |got| got.len() >= 2).await;
    let event = told[0].event();
    assert_eq!(event["type"], "spending.payment_made");
    assert_eq!(event["data"]["state"], "settled");
    assert_eq!(event["data"]["amount_micro_usdc"], 10_000);
    assert_eq!(event["data"]["pay_to"], seller);
    Bought {
        server,
        key,
        buyer_id,
        transaction,
        _env: env,
    }
}

/// What a run of purchases leaves to look at.
struct Bought {
    server: TestServer,
    key: String,
    buyer_id: String,
    /// The first payment's settlement.
    transaction: String,
    /// Its data dir and database, kept while the server runs.
    _env: TestEnv,
}

fn paying_env() -> TestEnv {
    TestEnv::new()
        .with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", "127.0.0.1")
        .with_env("AGENT_HOST_WEBHOOK_ALLOW_PRIVATE", "127.0.0.1")
        .with_env("AGENT_HOST_WEBHOOK_POLL_MS", "50")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_pays_another_agents_paid_command_on_base_within_its_limits() {
    let chain = LocalBase::start().await;
    let (env, seller) = base_shop(&chain, paying_env(), WEATHER).await;
    let bought = buys_within_its_limits(Chain::Base(&chain), env, free_port(), &seller).await;

    // The owner sees them in the usage report, and in the console, in Chromium.
    for path in ["/v1/account", "/v1/account/usage"] {
        let reply = get(&bought.server.url(path), Some(&bought.key)).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.text);
    }
    let usage = get(&bought.server.url("/v1/account/usage"), Some(&bought.key))
        .await
        .json();
    let totals = &usage["data"]["totals"];
    assert_eq!(
        (&totals["purchases"]["base"], &totals["spent_micro_usdc"]["base"]),
        (&json!(2), &json!(20_000)),
        "{usage}"
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/node/console_spending.mjs");
    let mut run = tokio::process::Command::new("node");
    run.arg(script)
        .env("CONSOLE_BASE", bought.server.url(""))
        .env("MANAGE_KEY", &bought.key)
        .env("AGENT", &bought.buyer_id)
        .env(
            "EXPECT_LIMITS",
            "Up to 0.02 USDC a payment and 0.025 USDC in any 24 hours (0.02 USDC paid in the last 24 hours)",
        )
        .env("EXPECT_TX", &bought.transaction)
        .env("CHROMIUM", &chromium);
    let (passed, log) = run_tool(run, std::time::Duration::from_secs(90), "the console").await;
    assert!(passed && log.contains("console: spending shown"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_pays_another_agents_paid_command_on_solana_within_its_limits() {
    let chain = LocalSolana::start();
    let (env, seller) = solana_shop(&chain, paying_env(), WEATHER).await;
    buys_within_its_limits(Chain::Solana(&chain), env, free_port(), &seller).await;
}

const MASTER: &str = "0404040404040404040404040404040404040404040404040404040404040404";

/// Six buys at once (on two hosts sharing PostgreSQL, three each; on SQLite, one host) fit
/// two payments in the day's 0.025: two are paid, four refused, and the wallet shows it.
#[tokio::test(flavor = "multi_thread")]
async fn the_daily_maximum_holds_for_payments_made_at_once_on_every_host() {
    let chain = LocalBase::start().await;
    let (env, seller) = base_shop(&chain, paying_env().with_env("AGENT_HOST_MASTER_KEY", MASTER), "").await;
    let port = free_port();
    let key = env.account_with_key("bob", "pro");
    let seller_url = format!("http://127.0.0.1:{port}/x402/base/seller");
    env.apply_agent(&buyer(&seller_url, &format!("http://127.0.0.1:{port}")), "bob");
    let wallet = env.create_wallet("buyer", "base");
    chain.mint_usdc(&wallet, 100_000).await;
    let first = env.serve_with(&["serve", "--listen", &format!("127.0.0.1:{port}")]);
    let other_env = env.postgres_url().map(|_| env.another_host());
    let other = other_env.as_ref().map(TestEnv::serve);
    let hosts: Vec<&TestServer> = std::iter::once(&first).chain(other.as_ref()).collect();

    let mut buys = tokio::task::JoinSet::new();
    for i in 0..6 {
        let url = hosts[i % hosts.len()].url("/v1/agents/buyer/commands/buy/execute");
        let key = key.clone();
        buys.spawn(async move {
            let forecast = json!({ "parameters": { "command": "forecast", "city": format!("City{i}") } });
            post_json(&url, Some(&key), &forecast).await
        });
    }
    let replies = buys.join_all().await;
    let paid = replies.iter().filter(|r| r.status == 200).count();
    let refused: Vec<String> = replies.iter().filter(|r| r.status != 200).map(failure).collect();
    assert_eq!(paid, 2, "{refused:?}");
    assert!(refused.iter().all(|why| why.contains("a day")), "{refused:?}");
    assert_eq!(chain.usdc_of(&wallet).await, 80_000);
    assert_eq!(chain.usdc_of(&seller).await, 20_000);
    let record = spending(&first, &key, "buyer").await;
    assert_eq!(record["spent_today_micro_usdc"], 20_000, "{record}");
}

/// The x402 reference server (tests/node/paid_server.mjs) selling a forecast for 0.001 USDC,
/// settling through the reference facilitator; killed when dropped.
struct PaidApi {
    _child: tokio::process::Child,
    url: String,
}

async fn paid_api(facilitator: &RefFacilitator, sells: &[(&str, String)]) -> PaidApi {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/node/paid_server.mjs");
    let mut command = tokio::process::Command::new("node");
    command
        .arg(script)
        .env("FACILITATOR_URL", &facilitator.url)
        .env("PRICE_UNITS", "1000")
        .envs(sells.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("node runs the paid server");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(child.stdout.take().unwrap()));
    let first = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
        .await
        .expect("the paid server starts")
        .unwrap()
        .expect("its address");
    let started: Value = serde_json::from_str(&first).unwrap();
    PaidApi {
        _child: child,
        url: started["url"].as_str().unwrap().to_string(),
    }
}

/// An agent whose JavaScript plugin (plugins/examples/js-weather) fetches the forecast with
/// `fetch()`, that is `wasi:http`, and may pay the API up to 0.002 a day.
fn weather_buyer(api: &str) -> String {
    let port = api.rsplit(':').next().unwrap();
    format!(
        r#"username = "walker"
name = "Walker"

[[commands]]
command = "weather"
handler_type = "custom"
plugin = "{plugin}"
allowed_hosts = ["127.0.0.1:{port}"]
config = {{ api_url = "{api}", cache_seconds = 0 }}

[payments]
max_per_payment = 0.001
max_per_day = 0.002
payees = ["{api}"]
commands = ["weather"]
"#,
        plugin = js_weather_path(),
    )
}

/// Three forecasts bought from the reference server through `wasi:http`: two paid (0.001
/// each, balances on chain), the third over the day.
async fn buys_from_the_reference_server(chain: Chain<'_>, env: TestEnv, api: &PaidApi, payee: &str) {
    let network = chain.network();
    let key = env.account_with_key("carol", "pro");
    env.apply_agent(&weather_buyer(&api.url), "carol");
    let wallet = env.create_wallet("walker", network);
    chain.fund(&wallet, 5_000).await;
    let server = env.serve();
    let lisbon = json!({ "latitude": 38.72, "longitude": -9.14 });
    for _ in 0..2 {
        let reply = execute_with(&server, &key, "walker", "weather", lisbon.clone()).await;
        assert_eq!(
            answered(&reply),
            "21.5 °C, wind 7.2 km/h at 38.72, -9.14 (2026-11-30T12:00 GMT)"
        );
    }
    assert_eq!(chain.usdc(&wallet).await, 3_000);
    assert_eq!(chain.usdc(payee).await, 2_000);
    let record = spending(&server, &key, "walker").await;
    let payments = record["payments"].as_array().unwrap();
    assert_eq!(payments.len(), 2, "{record}");
    for paid in payments {
        assert_eq!(
            (paid["state"].as_str(), paid["x402Version"].as_u64()),
            (Some("settled"), Some(2)),
            "{paid}"
        );
        chain.landed(paid["transaction"].as_str().unwrap()).await;
    }
    let third = execute_with(&server, &key, "walker", "weather", lisbon).await;
    assert_ne!(third.status, 200, "{}", third.text);
    assert_eq!(chain.usdc(&wallet).await, 3_000);
    // The plugin only hears "denied" from wasi:http; the reason is in its run's log.
    let logs = get(
        &server.url("/v1/account/agents/walker/logs?command=weather"),
        Some(&key),
    )
    .await;
    assert!(logs.text.contains("maximum of 0.002 USDC a day"), "{}", logs.text);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_pays_the_x402_reference_server_through_wasi_http_on_base() {
    let chain = LocalBase::start().await;
    let facilitator = RefFacilitator::start(&chain, None).await;
    let payee = alloy::signers::local::PrivateKeySigner::random()
        .address()
        .to_checksum(None);
    let api = paid_api(&facilitator, &[("EVM_PAY_TO", payee.clone())]).await;
    let env = paying_env().with_envs(chain.env());
    buys_from_the_reference_server(Chain::Base(&chain), env, &api, &payee).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_pays_the_x402_reference_server_through_wasi_http_on_solana() {
    use solana_signer::Signer;
    let chain = LocalSolana::start();
    let facilitator = RefFacilitator::on(None, Some(&chain), None).await;
    let payee = solana_keypair::Keypair::new().pubkey().to_string();
    chain.set_usdc(&payee, 0).await;
    let sells = [
        ("SVM_PAY_TO", payee.clone()),
        ("SVM_NETWORK", crate::support::chains::SOLANA_MAINNET_ID.to_string()),
        ("SVM_MINT", chain.mint.clone()),
    ];
    let api = paid_api(&facilitator, &sells).await;
    let env = paying_env().with_envs(chain.env());
    buys_from_the_reference_server(Chain::Solana(&chain), env, &api, &payee).await;
}

/// A chat that buys a paid tool: the buyer's owner chats; the model calls `shop__weather`,
/// a tool the seller agent sells over MCP on this host (0.03 USDC, x402's MCP transport).
fn mcp_buyer(mcp_url: &str, origin: &str, max_per_payment: &str) -> String {
    format!(
        r#"username = "shopper"
name = "Shopper"

[[commands]]
command = "hello"
handler_type = "simple_text"
config = {{ text = "Hello!" }}

[[mcp_servers]]
name = "shop"
url = "{mcp_url}"

[payments]
max_per_payment = "{max_per_payment}"
max_per_day = "0.1"
payees = ["{origin}"]
mcp_servers = ["shop"]
"#
    )
}

async fn shop_chat(server: &TestServer, key: &str, message: &str) -> Value {
    let reply = post_json(
        &server.url("/v1/agents/shopper/chat"),
        Some(key),
        &json!({ "message": message, "toolsEnabled": true, "maxToolCalls": 3 }),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()["data"].clone()
}

/// A seller agent selling `weather` over MCP (0.03 USDC) and the shopper's owner chatting, on
/// one host on Anvil; the shopper may pay up to `max_per_payment`, its wallet holds 0.1.
struct McpShop {
    chain: LocalBase,
    server: TestServer,
    key: String,
    wallet: String,
    seller: String,
    _env: TestEnv,
    _llm: FakeServer,
}

impl McpShop {
    async fn open(max_per_payment: &str) -> McpShop {
        use crate::support::fake_llm::{calls_named_tools, fake_openai};
        let chain = LocalBase::start().await;
        let llm = fake_openai(calls_named_tools(), Default::default()).await;
        let env = paying_env()
            .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
            .with_env("AGENT_HOST_LLM_MODEL", "fake-model");
        let (env, seller) = base_shop(&chain, env, WEATHER).await;
        let port = free_port();
        let origin = format!("http://127.0.0.1:{port}");
        let key = env.account_with_key("dana", "pro");
        env.apply_agent(
            &mcp_buyer(&format!("{origin}/mcp/seller"), &origin, max_per_payment),
            "dana",
        );
        let wallet = env.create_wallet("shopper", "base");
        chain.mint_usdc(&wallet, 100_000).await;
        let server = env.serve_with(&["serve", "--listen", &format!("127.0.0.1:{port}")]);
        McpShop {
            chain,
            server,
            key,
            wallet,
            seller,
            _env: env,
            _llm: llm,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chat_buys_a_paid_tool_of_a_remote_mcp_server_on_base() {
    let shop = McpShop::open("0.05").await;
    let McpShop {
        chain,
        server,
        key,
        wallet,
        seller,
        ..
    } = &shop;

    // The seller's tool answers "payment required"; the host pays 0.03 and calls it again.
    let answered = shop_chat(server, key, r#"call shop__weather {"city": "Oslo"}"#).await;
    assert_eq!(answered["response"], "The tool said: Sunny in Oslo", "{answered}");
    assert_eq!(chain.usdc_of(wallet).await, 70_000);
    assert_eq!(chain.usdc_of(seller).await, 30_000);
    let record = spending(server, key, "shopper").await;
    let paid = &record["payments"][0];
    assert_eq!(
        (
            paid["state"].as_str(),
            paid["command"].as_str(),
            paid["amount_micro_usdc"].as_u64()
        ),
        (Some("settled"), Some("shop__weather"), Some(30_000)),
        "{record}"
    );
    assert_eq!(paid["resource"], server.url("/mcp/seller"));
    assert_eq!(
        chain.receipt(paid["transaction"].as_str().unwrap()).await["status"],
        "0x1"
    );
}

/// Over the per-payment maximum, the model is told why and nothing is paid.
#[tokio::test(flavor = "multi_thread")]
async fn a_chat_is_told_why_a_paid_tool_was_not_bought() {
    let shop = McpShop::open("0.02").await;
    let McpShop {
        chain,
        server,
        key,
        wallet,
        seller,
        ..
    } = &shop;

    let answered = shop_chat(server, key, r#"call shop__weather {"city": "Oslo"}"#).await;
    let said = answered["response"].as_str().unwrap();
    assert!(
        said.contains("more than this agent's maximum per payment (0.02 USDC)"),
        "{said}"
    );
    assert_eq!(chain.usdc_of(wallet).await, 100_000);
    assert_eq!(chain.usdc_of(seller).await, 0);
    assert_eq!(spending(server, key, "shopper").await["payments"], json!([]));
}

/// The payment headers of each request a server was sent, in order.
type PaymentHeaders = Arc<Mutex<Vec<Vec<(String, String)>>>>;

/// A paid server on loopback: `/paid` answers 402 with a v2 offer of 0.001 Base USDC to
/// `pay_to`; a request that carries the host's payment (`PAYMENT-SIGNATURE`) is redirected
/// to `other`. The payment headers of every request are kept.
async fn redirecting_payee(pay_to: &str, other: &str) -> (FakeServer, PaymentHeaders) {
    use axum::http::{HeaderMap, StatusCode, header};
    use axum::response::IntoResponse;
    let seen: PaymentHeaders = Arc::default();
    let offer = json!({
        "x402Version": 2, "error": "payment required", "resource": { "url": "/paid" },
        "accepts": [{ "scheme": "exact", "network": "eip155:8453", "amount": "1000",
            "asset": crate::support::chains::BASE_USDC, "payTo": pay_to, "maxTimeoutSeconds": 60,
            "extra": { "name": "USD Coin", "version": "2" } }]
    });
    let required = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, offer.to_string());
    let (kept, other) = (seen.clone(), other.to_string());
    let paid = move |headers: HeaderMap| {
        let payment: Vec<(String, String)> = headers
            .iter()
            .filter(|(name, _)| ["x-payment", "payment-signature"].contains(&name.as_str()))
            .map(|(name, value)| (name.to_string(), value.to_str().unwrap_or_default().to_string()))
            .collect();
        kept.lock().unwrap().push(payment.clone());
        let (required, other) = (required.clone(), other.clone());
        async move {
            match payment.iter().any(|(name, _)| name == "payment-signature") {
                false => (StatusCode::PAYMENT_REQUIRED, [("payment-required", required)], "{}").into_response(),
                true => (StatusCode::FOUND, [(header::LOCATION, other)], "").into_response(),
            }
        }
    };
    let router = axum::Router::new().route("/paid", axum::routing::post(paid));
    (FakeServer::start(router).await, seen)
}

/// What a redirect cannot do: carry the host's payment to another host (the paid request
/// follows no redirect), or make the agent pay a server its owner did not list (the list is
/// checked against the server that asked, not the one first called). A payment header the
/// plugin set itself is not sent with the host's.
#[tokio::test(flavor = "multi_thread")]
async fn redirects_neither_carry_the_payment_away_nor_choose_the_payee() {
    use axum::http::{StatusCode, header};
    let chain = LocalBase::start().await;
    let attacker = alloy::signers::local::PrivateKeySigner::random()
        .address()
        .to_checksum(None);
    // Where a payment must never arrive.
    let reached: Arc<Mutex<Vec<String>>> = Arc::default();
    let kept = reached.clone();
    let elsewhere = FakeServer::start(axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
        let kept = kept.clone();
        async move {
            kept.lock().unwrap().push(format!("{headers:?}"));
            "nothing here"
        }
    }))
    .await;
    let (shop, seen) = redirecting_payee(&attacker, &elsewhere.url("/take")).await;
    // A listed server that redirects to the unlisted shop.
    let to_shop = shop.url("/paid");
    let front = FakeServer::start(axum::Router::new().route(
        "/go",
        axum::routing::post(move || {
            let to_shop = to_shop.clone();
            async move { (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, to_shop)]) }
        }),
    ))
    .await;
    let env = paying_env().with_envs(chain.env());
    let key = env.account_with_key("erin", "pro");
    let agent = |name: &str, url: &str, hosts: &str, payee: &str, headers: &str| {
        format!(
            r#"username = "{name}"
name = "{name}"

[[commands]]
command = "buy"
handler_type = "webhook"
allowed_hosts = ["{hosts}"]
config = {{ url = "{url}"{headers} }}

[payments]
max_per_payment = 0.01
max_per_day = 0.1
payees = ["{payee}"]
commands = ["buy"]
"#
        )
    };
    let elsewhere_host = format!("127.0.0.1:{}", elsewhere.port);
    let own_header = r#", headers = { "X-PAYMENT" = "the plugin's own" }"#;
    env.apply_agent(
        &agent("careful", &shop.url("/paid"), &elsewhere_host, &shop.base, own_header),
        "erin",
    );
    let shop_host = format!("127.0.0.1:{}", shop.port);
    env.apply_agent(&agent("fooled", &front.url("/go"), &shop_host, &front.base, ""), "erin");
    for name in ["careful", "fooled"] {
        let wallet = env.create_wallet(name, "base");
        chain.mint_usdc(&wallet, 100_000).await;
    }
    let server = env.serve();

    // Paid, then redirected: the redirect is the answer, the payment stays with the shop.
    let reply = execute_with(&server, &key, "careful", "buy", json!({})).await;
    assert!(reply.text.contains("302"), "{}", reply.text);
    let attempts = seen.lock().unwrap().clone();
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!(
        attempts[0],
        vec![("x-payment".to_string(), "the plugin's own".to_string())]
    );
    let names: Vec<&str> = attempts[1].iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        vec!["payment-signature"],
        "the host's payment alone: {attempts:?}"
    );
    assert!(reached.lock().unwrap().is_empty(), "the payment went nowhere else");
    let record = spending(&server, &key, "careful").await;
    let paid = &record["payments"][0];
    assert_eq!(paid["state"], "unknown", "{record}");
    assert_eq!(paid["error"], "the payee answered HTTP 302");
    assert_eq!(paid["resource"], shop.url("/paid"));

    // The listed front redirects to the unlisted shop, whose 402 names the attacker: refused.
    seen.lock().unwrap().clear();
    let why = failure(&execute_with(&server, &key, "fooled", "buy", json!({})).await);
    let expected = format!(
        "neither {} nor the address it pays ({attacker}) is among this agent's payees",
        shop.base
    );
    assert!(why.contains(&expected), "{why}");
    assert_eq!(seen.lock().unwrap().len(), 1, "asked once, never paid");
    assert_eq!(spending(&server, &key, "fooled").await["payments"], json!([]));
}

/// A host that dies after recording a payment, before signing it: the payment is found after
/// the restart, still counted against the day (it might have been signed), and nothing moved.
#[tokio::test(flavor = "multi_thread")]
async fn a_payment_cut_off_before_signing_is_found_after_a_restart() {
    let chain = LocalBase::start().await;
    let (mut env, seller) = base_shop(&chain, paying_env(), "").await;
    let port = free_port();
    let key = env.account_with_key("bob", "pro");
    let seller_url = format!("http://127.0.0.1:{port}/x402/base/seller");
    env.apply_agent(&buyer(&seller_url, &format!("http://127.0.0.1:{port}")), "bob");
    let wallet = env.create_wallet("buyer", "base");
    chain.mint_usdc(&wallet, 50_000).await;
    let listen = format!("127.0.0.1:{port}");
    let forecast = json!({ "command": "forecast", "city": "Paris" });

    env.set_env("AGENT_HOST_TEST_FAULT", "spending:after_record");
    let server = env.serve_with(&["serve", "--listen", &listen]);
    let url = server.url("/v1/agents/buyer/commands/buy/execute");
    let cut = client()
        .post(&url)
        .header("x-api-key", &key)
        .json(&json!({ "parameters": forecast }))
        .send()
        .await;
    assert!(cut.is_err(), "the host died before answering: {cut:?}");
    drop(server);
    env.set_env("AGENT_HOST_TEST_FAULT", "");

    let server = env.serve_with(&["serve", "--listen", &listen]);
    let record = spending(&server, &key, "buyer").await;
    assert_eq!(record["payments"][0]["state"], "signing", "{record}");
    assert_eq!(
        record["spent_today_micro_usdc"], 10_000,
        "it counts: it might have been signed"
    );
    assert_eq!(chain.usdc_of(&wallet).await, 50_000);
    assert_eq!(chain.usdc_of(&seller).await, 0);
    // What is left of the day is still spent as usual.
    let reply = execute_with(&server, &key, "buyer", "buy", forecast).await;
    assert_eq!(answered(&reply), "Sunny in Paris");
    assert_eq!(chain.usdc_of(&wallet).await, 40_000);
}

/// A server that speaks x402 version 1 only: a proxy in front of the seller's paid route that
/// drops the version 2 header from its 402 (and passes everything else both ways). The agent
/// pays it as v1 clients do: `X-PAYMENT`, read back from `X-PAYMENT-RESPONSE`.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_speaks_only_version_1_is_paid_in_version_1() {
    let chain = LocalBase::start().await;
    let (env, seller) = base_shop(&chain, paying_env(), "").await;
    let port = free_port();
    let upstream = format!("http://127.0.0.1:{port}/x402/base/seller");
    let v1_only = FakeServer::start(axum::Router::new().route(
        "/paid",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let upstream = upstream.clone();
            async move {
                let mut forward = client().post(&upstream).body(body.to_vec());
                for (name, value) in headers.iter() {
                    if matches!(name.as_str(), "content-type" | "x-payment") {
                        forward = forward.header(name.as_str(), value.as_bytes());
                    }
                }
                let answer = forward.send().await.unwrap();
                let status = axum::http::StatusCode::from_u16(answer.status().as_u16()).unwrap();
                let mut kept = axum::http::HeaderMap::new();
                for (name, value) in answer.headers() {
                    if matches!(name.as_str(), "content-type" | "x-payment-response") {
                        kept.insert(name.clone(), value.clone());
                    }
                }
                let body = answer.bytes().await.unwrap();
                (status, kept, body.to_vec())
            }
        }),
    ))
    .await;
    let key = env.account_with_key("bob", "pro");
    env.apply_agent(&buyer(&v1_only.url("/paid"), &v1_only.base), "bob");
    let wallet = env.create_wallet("buyer", "base");
    chain.mint_usdc(&wallet, 50_000).await;
    let server = env.serve_with(&["serve", "--listen", &format!("127.0.0.1:{port}")]);

    let reply = execute_with(
        &server,
        &key,
        "buyer",
        "buy",
        json!({ "command": "forecast", "city": "Oslo" }),
    )
    .await;
    assert_eq!(answered(&reply), "Sunny in Oslo");
    assert_eq!(chain.usdc_of(&wallet).await, 40_000);
    assert_eq!(chain.usdc_of(&seller).await, 10_000);
    let record = spending(&server, &key, "buyer").await;
    let paid = &record["payments"][0];
    assert_eq!(
        (paid["state"].as_str(), paid["x402Version"].as_u64()),
        (Some("settled"), Some(1)),
        "{record}"
    );
    assert_eq!(
        chain.receipt(paid["transaction"].as_str().unwrap()).await["status"],
        "0x1"
    );
}
