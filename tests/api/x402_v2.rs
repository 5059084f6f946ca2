//! x402 version 2 beside version 1 on the same route: the `PAYMENT-REQUIRED` header on
//! every 402 and price list, `PAYMENT-SIGNATURE` payments checked against what was
//! offered, `PAYMENT-RESPONSE`, CAIP-2 network ids read from the chain configured, replays
//! across versions, and the discovery lists (`/.well-known/x402`, `/.well-known/x402.json`,
//! `/discovery/resources`). (The real v2 client
//! pays in `x402_clients`.)

use base64::Engine;
use serde_json::{Value, json};

use crate::support::chains::{BASE_USDC, LocalBase, LocalSolana, SOLANA_MAINNET_ID};
use crate::support::x402::*;
use crate::support::*;

const PUBLIC: &str = "https://pay.example.com";
/// Nothing listens there: a Solana RPC that cannot answer.
const NO_RPC: &str = "http://127.0.0.1:9";

fn refused(reply: &Reply, status: u16, code: &str) {
    let body = reply.json();
    assert_eq!(
        (reply.status, body["code"].clone(), body["x402Version"].clone()),
        (status, json!(code), json!(2)),
        "{}",
        reply.text
    );
}

/// A seller on both networks, on a server with `envs`.
fn seller(envs: Vec<(&'static str, String)>) -> (TestEnv, String, String, String) {
    let env = TestEnv::new()
        .with_env("AGENT_HOST_PUBLIC_BASE_URL", PUBLIC)
        .with_envs(envs);
    env.create_account("acme", "free");
    let agent_id = env.apply_agent(&paid_manifest("seller"), "acme");
    let solana_wallet = env.create_wallet("seller", "solana");
    let base_wallet = env.create_wallet("seller", "base");
    (env, agent_id, solana_wallet, base_wallet)
}

#[tokio::test]
async fn every_402_and_the_price_list_carry_the_v2_requirement() {
    let (env, agent_id, _, base_wallet) = seller(vec![("AGENT_HOST_SOLANA_RPC_URL", NO_RPC.into())]);
    let server = env.serve();
    let url = server.url("/x402/base/seller");

    let listed = get(&url, None).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    // The v1 body is untouched: v1 clients read it as before.
    assert_eq!(listed.json()["x402Version"], 1);
    assert_eq!(listed.json()["accepts"][0]["maxAmountRequired"], "10000");
    let mut v2 = payment_required(&listed);
    let bazaar = v2["extensions"]["bazaar"].take();
    assert_eq!(
        v2,
        json!({
            "x402Version": 2,
            "error": "PAYMENT-SIGNATURE header is required",
            "resource": {
                "url": format!("{PUBLIC}/x402/base/{agent_id}"),
                "description": "A message to Agent seller, or one of its commands",
                "mimeType": "application/json",
            },
            "accepts": [{
                "scheme": "exact",
                "network": "eip155:8453",
                "amount": "10000",
                "asset": BASE_USDC,
                "payTo": base_wallet,
                "maxTimeoutSeconds": 60,
                "extra": { "name": "USD Coin", "version": "2" },
            }],
            "extensions": {
                "bazaar": null,
                // A payer may name its payment, so that a retry is answered, not charged.
                "payment-identifier": {
                    "info": { "required": false },
                    "schema": {
                        "$schema": "https://json-schema.org/draft/2020-12/schema",
                        "type": "object",
                        "properties": {
                            "required": { "type": "boolean" },
                            "id": { "type": "string", "minLength": 16, "maxLength": 128, "pattern": "^[a-zA-Z0-9_-]+$" },
                        },
                    },
                },
            },
        })
    );
    // The bazaar extension describes the request, as v1's outputSchema did.
    assert_eq!(
        bazaar["info"]["input"],
        json!({ "type": "http", "method": "POST", "bodyType": "json", "body": { "message": "Hello" } })
    );
    let body = &bazaar["schema"]["properties"]["input"]["properties"]["body"]["properties"];
    assert_eq!(body["command"]["enum"], json!(["hello", "forecast"]));
    assert_eq!(body["city"]["type"], "string");
    assert_eq!(body["message"]["type"], "string");

    // A 402 is priced and described for exactly what was asked.
    let forecast = post_x402(&url, &json!({ "command": "forecast", "city": "Oslo" })).await;
    assert_eq!(forecast.status, 402, "{}", forecast.text);
    let v2 = payment_required(&forecast);
    assert_eq!(v2["accepts"][0]["amount"], "10000");
    assert_eq!(v2["resource"]["description"], "Run /forecast of Agent seller");
    let input = &v2["extensions"]["bazaar"];
    assert_eq!(
        input["info"]["input"]["body"],
        json!({ "command": "forecast", "city": "city" })
    );
    assert_eq!(
        input["schema"]["properties"]["input"]["properties"]["body"]["required"],
        json!(["command", "city"])
    );
    let hello = post_x402(&url, &json!({ "message": "/hello Ann" })).await;
    assert_eq!(payment_required(&hello)["accepts"][0]["amount"], "50000");

    // A named network is known without its node: version 2 on Solana mainnet though its
    // RPC cannot be reached.
    let solana = server.url("/x402/solana/seller");
    let listed = get(&solana, None).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert_eq!(payment_required(&listed)["accepts"][0]["network"], SOLANA_MAINNET_ID);
    drop(server);

    // A custom network whose RPC cannot name its chain: version 1 only, and a v2 payment
    // cannot be checked, so it is refused before anything else happens.
    let mut env = env;
    env.set_env("AGENT_HOST_SOLANA_NETWORK", "custom");
    let server = env.serve();
    let solana = server.url("/x402/solana/seller");
    let listed = get(&solana, None).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert_eq!(listed.json()["accepts"][0]["network"], "solana");
    assert!(listed.header("payment-required").is_none());
    let unnamed = paid_v2(&solana, &json!({ "message": "Hi" }), "e30=").await;
    assert_eq!(
        (unnamed.status, unnamed.json()["code"].clone()),
        (500, json!("internal_error"))
    );
    assert_eq!(unnamed.json()["x402Version"], 2);
}

#[tokio::test]
async fn a_network_is_named_by_the_chain_configured() {
    // A Base testnet by its chain id.
    let (env, ..) = seller(vec![
        ("AGENT_HOST_BASE_NETWORK", "sepolia".into()),
        ("AGENT_HOST_SOLANA_RPC_URL", NO_RPC.into()),
    ]);
    let server = env.serve();
    let v2 = payment_required(&get(&server.url("/x402/base/seller"), None).await);
    assert_eq!(v2["accepts"][0]["network"], "eip155:84532");
    drop(server);

    // A Solana chain by its genesis hash, asked of its RPC (here a local chain, which is
    // not mainnet: without the tests' stand-in setting it gets its own id).
    let chain = LocalSolana::start();
    let envs = chain
        .env()
        .into_iter()
        .filter(|(name, _)| *name != "AGENT_HOST_SOLANA_NETWORK_ID")
        .collect();
    let (env, ..) = seller(envs);
    let server = env.serve();
    let genesis = crate::support::chains::rpc(&chain.rpc_url, "getGenesisHash", json!([])).await;
    let genesis = genesis.as_str().unwrap();
    let v2 = payment_required(&get(&server.url("/x402/solana/seller"), None).await);
    assert_eq!(v2["accepts"][0]["network"], format!("solana:{}", &genesis[..32]));
    assert_ne!(v2["accepts"][0]["network"], SOLANA_MAINNET_ID);
    assert_eq!(
        get(&server.url("/x402/solana/seller"), None).await.json()["accepts"][0]["network"],
        "solana",
        "v1 keeps its network names"
    );
}

#[tokio::test]
async fn a_v2_payment_on_base_must_match_the_offer_and_is_served_once_across_versions() {
    let chain = LocalBase::start().await;
    let (env, _, _, agent_wallet) = seller(chain.env());
    chain.set_eth(&agent_wallet, 10u128.pow(16)).await; // it relays: pays the gas
    let server = env.serve();
    let payer = alloy::signers::local::PrivateKeySigner::random();
    let payer_address = payer.address().to_checksum(None);
    chain.mint_usdc(&payer_address, 1_000_000).await;
    let url = server.url("/x402/base/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let offered = payment_required(&post_x402(&url, &hello).await)["accepts"][0].clone();
    let signed = base_payment(&payer, &offered, 50_000, 1, 60);

    // Accepted terms other than the offer's are refused, whatever was signed.
    for (field, value, code) in [
        ("amount", json!("1"), "payment_requirement_mismatch"),
        (
            "payTo",
            json!(format!("{payer_address}")),
            "payment_requirement_mismatch",
        ),
        ("maxTimeoutSeconds", json!(86_400), "payment_requirement_mismatch"),
        ("network", json!("eip155:84532"), "wrong_network"),
    ] {
        let mut accepted = offered.clone();
        accepted[field] = value;
        let reply = paid_v2(&url, &hello, &as_v2(&signed, &accepted)).await;
        refused(&reply, 402, code);
        // The v2 client reads why in the PAYMENT-REQUIRED header of the 402.
        let v2 = payment_required(&reply);
        assert_eq!(v2["error"], reply.json()["error"], "{field}");
        assert_eq!(v2["accepts"][0], offered);
    }
    // A v1 payment in the v2 header, or both headers at once.
    refused(&paid_v2(&url, &hello, &signed).await, 402, "unsupported_x402_version");
    let both = client()
        .post(&url)
        .header("x-payment", &signed)
        .header("payment-signature", as_v2(&signed, &offered))
        .json(&hello);
    let reply = send(both).await;
    assert_eq!(
        (reply.status, reply.json()["code"].clone()),
        (402, json!("invalid_payment"))
    );
    // Refused once priced, as any refused v2 payment: the requirement names why.
    let v2 = payment_required(&reply);
    assert_eq!(v2["error"], reply.json()["error"]);
    assert!(v2["accepts"].as_array().is_some_and(|a| !a.is_empty()), "{v2}");
    assert_eq!(chain.usdc_of(&payer_address).await, 1_000_000, "nothing moved");

    // Offered extensions echoed back may be added to, never changed.
    let bazaar = payment_required(&post_x402(&url, &hello).await)["extensions"]["bazaar"].clone();
    let echoing = |extensions: Value| {
        let mut envelope = b64_json(&as_v2(&signed, &offered));
        envelope["extensions"] = extensions;
        base64::engine::general_purpose::STANDARD.encode(envelope.to_string())
    };
    let mut changed = bazaar.clone();
    changed["info"]["input"]["method"] = json!("GET");
    let reply = paid_v2(&url, &hello, &echoing(json!({ "bazaar": changed }))).await;
    refused(&reply, 402, "invalid_payment");
    let reason = reply.json()["error"].as_str().unwrap_or_default().to_string();
    assert!(reason.contains("extensions.bazaar.info.input.method"), "{reason}");
    assert_eq!(chain.usdc_of(&payer_address).await, 1_000_000, "nothing moved");

    // Paid in v2, echoing the bazaar with info of its own added: served, the settlement in
    // PAYMENT-RESPONSE with the CAIP-2 network.
    let mut added = bazaar.clone();
    added["info"]["client"] = json!("test-suite");
    let reply = paid_v2(&url, &hello, &echoing(json!({ "bazaar": added }))).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let body = reply.json();
    assert_eq!(body["response"], "Hello, Ann!");
    assert_eq!(body["x402Version"], 2);
    let settlement = body["receipt"]["transactionSignature"].clone();
    let mut settled = b64_json(reply.header("payment-response").unwrap());
    let receipt = settled.as_object_mut().unwrap().remove("extensions").unwrap();
    assert_eq!(
        receipt["offer-receipt"]["info"]["receipt"]["payload"]["payer"], payer_address,
        "{receipt}"
    );
    assert_eq!(
        settled,
        json!({ "success": true, "transaction": settlement, "network": "eip155:8453", "payer": payer_address })
    );
    assert!(reply.header("x-payment-response").is_none());

    // The same signed authorization again, in either version: for the same request, the
    // answer it bought told again (a retry after a lost answer); for another, refused.
    // Either way it is charged once, ever.
    let again = paid(&url, &hello, &signed).await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json()["receipt"]["transactionSignature"], settlement);
    let again = paid_v2(&url, &hello, &as_v2(&signed, &offered)).await;
    assert_eq!(
        again.json()["receipt"]["transactionSignature"],
        settlement,
        "{}",
        again.text
    );
    let other = json!({ "message": "/hello Bob" });
    refused(
        &paid_v2(&url, &other, &as_v2(&signed, &offered)).await,
        409,
        "payment_already_used",
    );

    // And the other way round: paid in v1 first, then presented in v2 for another request.
    let second = base_payment(&payer, &offered, 50_000, 2, 60);
    let reply = paid(&url, &hello, &second).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(b64_json(reply.header("x-payment-response").unwrap())["network"], "base");
    refused(
        &paid_v2(&url, &other, &as_v2(&second, &offered)).await,
        409,
        "payment_already_used",
    );

    assert_eq!(chain.usdc_of(&payer_address).await, 900_000);
    assert_eq!(chain.usdc_of(&agent_wallet).await, 100_000);
    // Each payment is recorded with the version it arrived in (newest first).
    let payments = env.cli_json(&["payments", "list", "--agent", "seller"]);
    let versions: Vec<Value> = payments
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["x402Version"].clone())
        .collect();
    assert_eq!(versions, vec![json!(1), json!(2)], "{payments}");
}

#[tokio::test]
async fn a_retry_under_the_payers_id_gets_its_answer_on_any_host_and_pays_once() {
    let chain = LocalBase::start().await;
    let (env, _, _, agent_wallet) = seller(chain.env());
    chain.set_eth(&agent_wallet, 10u128.pow(16)).await; // it relays: pays the gas
    // Two hosts on one store: the retry may reach either.
    let (first_host, second_host) = (env.serve(), env.serve());
    let payer = alloy::signers::local::PrivateKeySigner::random();
    let payer_address = payer.address().to_checksum(None);
    chain.mint_usdc(&payer_address, 1_000_000).await;
    let (url, other_url) = (
        first_host.url("/x402/base/seller"),
        second_host.url("/x402/base/seller"),
    );
    let hello = json!({ "command": "hello", "name": "Ann" });
    let offered = payment_required(&post_x402(&url, &hello).await)["accepts"][0].clone();
    let id = "pay_3f1c9a0be7d24c55a1e0";

    let first = paid_v2(
        &url,
        &hello,
        &named_v2(&base_payment(&payer, &offered, 50_000, 1, 60), &offered, id),
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.text);
    let settlement = first.json()["receipt"]["transactionSignature"].clone();
    // The answer is lost on the way; the client signs a new authorization under the same
    // id and retries, here at the other host: the same answer, and no second charge.
    let retry = base_payment(&payer, &offered, 50_000, 2, 60);
    let again = paid_v2(&other_url, &hello, &named_v2(&retry, &offered, id)).await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json()["response"], first.json()["response"]);
    assert_eq!(again.json()["receipt"]["transactionSignature"], settlement);
    assert_eq!(
        b64_json(again.header("payment-response").unwrap())["transaction"],
        settlement
    );
    assert_eq!(chain.usdc_of(&payer_address).await, 950_000, "charged once");
    // The id names one request: another under it is refused, and a malformed id too.
    let other = json!({ "command": "hello", "name": "Bob" });
    refused(
        &paid_v2(&url, &other, &named_v2(&retry, &offered, id)).await,
        409,
        "payment_identifier_conflict",
    );
    refused(
        &paid_v2(&url, &hello, &named_v2(&retry, &offered, "short")).await,
        402,
        "invalid_payment",
    );
    assert_eq!(chain.usdc_of(&payer_address).await, 950_000);
    assert_eq!(chain.usdc_of(&agent_wallet).await, 50_000);

    // Past the copy window (a minute; here the records are made older), the first payment
    // itself presented under the id is a copy, public in our relay's calldata, not the
    // payer asking again: refused. A new payment of the payer's under it still is answered.
    env.sql("UPDATE payments SET created_at = created_at - 120000");
    let original = base_payment(&payer, &offered, 50_000, 1, 60);
    refused(
        &paid_v2(&url, &hello, &named_v2(&original, &offered, id)).await,
        409,
        "payment_already_used",
    );
    let fresh = base_payment(&payer, &offered, 50_000, 3, 60);
    let answered = paid_v2(&url, &hello, &named_v2(&fresh, &offered, id)).await;
    assert_eq!(answered.status, 200, "{}", answered.text);
    assert_eq!(answered.json()["response"], first.json()["response"]);
    assert_eq!(chain.usdc_of(&payer_address).await, 950_000, "charged once");
}

/// A page on any origin may pay (the paid routes, their discovery and the MCP endpoints
/// answer its preflight and let it read the payment headers); it gets nothing of the keyed
/// API or the console unless the operator lists its origin.
#[tokio::test]
async fn any_page_may_pay_but_reaches_nothing_else() {
    let (env, _, _, _) = seller(vec![("AGENT_HOST_SOLANA_RPC_URL", NO_RPC.into())]);
    let server = env.serve();
    let page = "https://shop.example";
    let preflight = |path: &str, headers: &str| {
        send(
            client()
                .request(reqwest::Method::OPTIONS, server.url(path))
                .header("origin", page)
                .header("access-control-request-method", "POST")
                .header("access-control-request-headers", headers),
        )
    };
    for path in ["/x402/base/seller", "/mcp/seller"] {
        // As the reference v2 client (@x402/fetch) asks: it sends Access-Control-Expose-Headers
        // as a request header with its payment.
        let reply = preflight(path, "payment-signature,content-type,access-control-expose-headers").await;
        assert!(reply.status < 300, "{path}: {} {}", reply.status, reply.text);
        assert_eq!(reply.header("access-control-allow-origin"), Some(page), "{path}");
        assert_eq!(reply.header("access-control-allow-credentials"), None, "{path}");
        let allowed = reply.header("access-control-allow-headers").unwrap_or_default();
        assert!(
            allowed.contains("payment-signature") && allowed.contains("access-control-expose-headers"),
            "{path}: {allowed}"
        );
    }
    // The price, read by the page from the 402's header.
    let hello = json!({ "message": "Hello" });
    let priced = send(
        client()
            .post(server.url("/x402/base/seller"))
            .header("origin", page)
            .json(&hello),
    )
    .await;
    assert_eq!(priced.status, 402, "{}", priced.text);
    assert_eq!(priced.header("access-control-allow-origin"), Some(page));
    let exposed = priced.header("access-control-expose-headers").unwrap_or_default();
    assert!(
        exposed.contains("payment-required") && exposed.contains("payment-response"),
        "{exposed}"
    );
    let listed = send(client().get(server.url("/.well-known/x402")).header("origin", page)).await;
    assert_eq!(listed.header("access-control-allow-origin"), Some(page));
    // A job it bought, polled from the page; not the keyed API or the console.
    let job = preflight("/jobs/0123", "content-type").await;
    assert_eq!(job.header("access-control-allow-origin"), Some(page));
    for path in ["/v1/agents/seller/commands", "/console/"] {
        let reply = preflight(path, "x-api-key").await;
        assert_eq!(reply.header("access-control-allow-origin"), None, "{path}");
    }
}

#[tokio::test]
async fn a_solana_payment_is_served_once_across_versions() {
    use solana_signer::Signer;
    let chain = LocalSolana::start();
    let (env, _, agent_wallet, _) = seller(chain.env());
    chain.set_sol(&agent_wallet, 1_000_000_000).await; // it pays the fees
    chain.set_usdc(&agent_wallet, 0).await; // x402 clients need payTo's token account to exist
    let server = env.serve();
    let payer = solana_keypair::Keypair::new();
    let payer_address = payer.pubkey().to_string();
    chain.set_usdc(&payer_address, 1_000_000).await;
    let url = server.url("/x402/solana/seller");
    let hello = json!({ "message": "/hello Ann" });
    let offered = payment_required(&post_x402(&url, &hello).await)["accepts"][0].clone();
    assert_eq!(offered["network"], SOLANA_MAINNET_ID);
    assert_eq!(offered["extra"], json!({ "feePayer": agent_wallet }));

    let first = solana_payment(&chain, &payer, &offered, 50_000).await;
    let reply = paid_v2(&url, &hello, &as_v2(&first, &offered)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let settled = b64_json(reply.header("payment-response").unwrap());
    assert_eq!(settled["network"], SOLANA_MAINNET_ID);
    assert_eq!(settled["payer"], payer_address.as_str());
    // Again in v1 for the same request: the same answer and settlement; for another
    // request, in either version: refused.
    let again = paid(&url, &hello, &first).await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json()["receipt"]["transactionSignature"], settled["transaction"]);
    let other = json!({ "message": "/hello Bob" });
    let again = paid(&url, &other, &first).await;
    assert_eq!(
        (again.status, again.json()["code"].clone()),
        (409, json!("payment_already_used"))
    );

    let second = solana_payment(&chain, &payer, &offered, 50_000).await;
    assert_eq!(paid(&url, &hello, &second).await.status, 200);
    refused(
        &paid_v2(&url, &other, &as_v2(&second, &offered)).await,
        409,
        "payment_already_used",
    );

    assert_eq!(chain.usdc_of(&payer_address).await, Some(900_000));
    assert_eq!(chain.usdc_of(&agent_wallet).await, Some(100_000));
}

#[tokio::test]
async fn the_discovery_list_shows_every_agent_for_sale() {
    let (env, seller_id, _, base_wallet) = seller(vec![
        // A custom Solana network whose node cannot be reached: it cannot name its chain.
        ("AGENT_HOST_SOLANA_NETWORK", "custom".into()),
        ("AGENT_HOST_SOLANA_RPC_URL", NO_RPC.into()),
    ]);
    // A second seller on Base only (no Solana wallet), and an agent that sells nothing.
    let other_id = env.apply_agent(&paid_manifest("trader"), "acme");
    env.create_wallet("trader", "base");
    env.apply_agent(&manifest("private"), "acme");
    env.create_wallet("private", "base");
    let server = env.serve();

    let list = get(&server.url("/discovery/resources"), None).await;
    assert_eq!(list.status, 200, "{}", list.text);
    let list = list.json();
    assert_eq!(list["x402Version"], 2);
    assert_eq!(list["pagination"], json!({ "limit": 20, "offset": 0, "total": 3 }));
    let entries: Vec<(String, u64)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            (
                item["resource"].as_str().unwrap().to_string(),
                item["x402Version"].as_u64().unwrap(),
            )
        })
        .collect();
    // Username order, then the manifest's network order; Solana cannot name its chain
    // here, so its entry is a version-1 one.
    assert_eq!(
        entries,
        vec![
            (format!("{PUBLIC}/x402/solana/{seller_id}"), 1),
            (format!("{PUBLIC}/x402/base/{seller_id}"), 2),
            (format!("{PUBLIC}/x402/base/{other_id}"), 2),
        ]
    );
    let base = &list["items"][1];
    assert_eq!(base["type"], "http");
    let price_list = payment_required(&get(&server.url("/x402/base/seller"), None).await);
    assert_eq!(
        base["accepts"][0], price_list["accepts"][0],
        "what a payer would be offered"
    );
    assert_eq!(base["accepts"][0]["payTo"], base_wallet.as_str());
    assert_eq!(base["metadata"]["username"], "seller");
    let commands: Vec<(Value, Value)> = base["metadata"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["command"].clone(), c["amount"].clone()))
        .collect();
    assert_eq!(
        commands,
        vec![(json!("hello"), json!("50000")), (json!("forecast"), json!("10000"))]
    );
    assert_eq!(list["items"][0]["accepts"][0]["maxAmountRequired"], "10000");

    // Pages, the type filter, and refused queries in the x402 envelope.
    let page = get(&server.url("/discovery/resources?limit=1&offset=2"), None)
        .await
        .json();
    assert_eq!(page["pagination"], json!({ "limit": 1, "offset": 2, "total": 3 }));
    assert_eq!(page["items"][0]["resource"], format!("{PUBLIC}/x402/base/{other_id}"));
    // The same agents' MCP servers, where their tools are sold (the chat at the agent's price).
    let mcp = get(&server.url("/discovery/resources?type=mcp"), None).await.json();
    assert_eq!(mcp["pagination"]["total"], 3);
    assert_eq!(mcp["items"][1]["type"], "mcp");
    assert_eq!(mcp["items"][1]["resource"], format!("{PUBLIC}/mcp/{seller_id}"));
    assert_eq!(mcp["items"][1]["accepts"][0], base["accepts"][0]);
    // And their A2A endpoints, where their skills are bought as tasks.
    let a2a = get(&server.url("/discovery/resources?type=a2a"), None).await.json();
    assert_eq!(a2a["items"][1]["type"], "a2a");
    assert_eq!(a2a["items"][1]["resource"], format!("{PUBLIC}/a2a/{seller_id}"));
    let none = get(&server.url("/discovery/resources?type=ftp"), None).await.json();
    assert_eq!(
        (none["items"].clone(), none["pagination"]["total"].clone()),
        (json!([]), json!(0))
    );
    for path in ["/discovery/resources", "/.well-known/x402.json"] {
        for query in ["limit=0", "limit=101", "limit=ten", "offset=-1"] {
            let reply = get(&server.url(&format!("{path}?{query}")), None).await;
            refused(&reply, 400, "validation_error");
        }
    }

    // What indexers read at the origin. The addresses of every paid route:
    let index = get(&server.url("/.well-known/x402"), None).await.json();
    assert_eq!(index["version"], 1);
    let resources: Vec<String> = entries.iter().map(|(url, _)| url.clone()).collect();
    assert_eq!(index["resources"], json!(resources));
    assert!(index["instructions"].as_str().unwrap().contains("POST"), "{index}");
    // Each agent's A2A card, once however many networks it is paid on.
    let cards = index["agentCards"].as_array().unwrap();
    assert!(
        cards.contains(&json!(format!("{PUBLIC}/a2a/{seller_id}/.well-known/agent-card.json"))),
        "{index}"
    );
    let unique: std::collections::HashSet<&Value> = cards.iter().collect();
    assert_eq!(unique.len(), cards.len(), "{index}");
    // The foundation's draft: each route that offers version 2 with its price, request and
    // answer, in the shape its validator checks (no per-item version or extensions).
    let draft = get(&server.url("/.well-known/x402.json"), None).await.json();
    assert_eq!(draft["x402Version"], 2);
    let items = draft["items"].as_array().unwrap();
    let urls: Vec<&str> = items.iter().map(|i| i["resource"]["url"].as_str().unwrap()).collect();
    assert_eq!(
        urls,
        [&resources[1], &resources[2]],
        "the Solana route offers no version 2 here"
    );
    for item in items {
        assert_eq!(item["type"], "http");
        assert!(item["accepts"].is_array() && item["input"].is_object(), "{item}");
        assert!(
            item.get("x402Version").is_none() && item.get("extensions").is_none(),
            "{item}"
        );
    }
    let seller = &items[0];
    assert_eq!(seller["accepts"][0], price_list["accepts"][0]);
    assert_eq!(seller["input"]["method"], "POST");
    assert_eq!(
        seller["input"]["body"]["properties"]["command"]["enum"],
        json!(["hello", "forecast"])
    );
    assert_eq!(
        seller["resource"]["description"],
        "A message to Agent seller, or one of its commands"
    );
    // Nothing the agent keeps to itself: its personality, its knowledge, a command not
    // for sale.
    for text in [index.to_string(), draft.to_string(), list.to_string()] {
        for kept in ["Helpful.", "Fact one.", "secret", "hidden"] {
            assert!(!text.contains(kept), "{kept} in {text}");
        }
    }
}

/// x402scan's discovery, step by step as it runs: `/openapi.json` only; each operation
/// with `x-payment-info` is a paid resource at its exact path, with its price (a decimal
/// USD string) and its input (the request body's schema); a body-less probe of each must
/// answer a version-2 402 on a network it indexes.
#[tokio::test]
async fn an_indexer_reading_the_openapi_document_finds_every_paid_command() {
    let (env, seller_id, solana_wallet, base_wallet) = seller(vec![("AGENT_HOST_SOLANA_RPC_URL", NO_RPC.into())]);
    let server = env.serve();

    let document = get(&server.url("/openapi.json"), None).await.json();
    assert!(document["openapi"].is_string() && document["info"]["title"].is_string());
    let mut found = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        let Some(info) = item["post"].get("x-payment-info") else {
            continue;
        };
        assert_eq!(info["protocols"], json!([{ "x402": {} }]), "{path}");
        // Templates name no resource: the indexer keeps only what it can call.
        if path.contains('{') {
            continue;
        }
        let price = &info["price"];
        assert_eq!(
            (&price["mode"], &price["currency"]),
            (&json!("fixed"), &json!("USD")),
            "{path}"
        );
        let input = &item["post"]["requestBody"]["content"]["application/json"]["schema"];
        assert_eq!(input["type"], "object", "{path}: {input}");
        let probe = send(client().post(server.url(path)).header("accept", "application/json")).await;
        assert_eq!(probe.status, 402, "{path}: {}", probe.text);
        let challenge = payment_required(&probe);
        found.push((
            path.clone(),
            price["amount"].as_str().unwrap().to_string(),
            challenge["accepts"][0]["network"].as_str().unwrap().to_string(),
            challenge["accepts"][0]["amount"].as_str().unwrap().to_string(),
            input["required"].clone(),
        ));
        let wallet = match path.starts_with("/x402/solana/") {
            true => &solana_wallet,
            false => &base_wallet,
        };
        assert_eq!(challenge["accepts"][0]["payTo"], wallet.as_str(), "{path}");
        assert_eq!(challenge["resource"]["url"], format!("{PUBLIC}{path}"));
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    let at = |tail: &str| format!("/x402/base/{seller_id}{tail}");
    // Solana mainnet's addresses answer version 2 as well, by its CAIP-2 id.
    let on_solana = found
        .iter()
        .filter(|(_, _, network, _, _)| network == SOLANA_MAINNET_ID);
    assert_eq!(on_solana.count(), 3, "{found:?}");
    let found: Vec<_> = found
        .into_iter()
        .filter(|(_, _, network, _, _)| network == "eip155:8453")
        .collect();
    assert_eq!(
        found,
        vec![
            (
                at(""),
                "0.01".into(),
                "eip155:8453".into(),
                "10000".into(),
                json!(["message"])
            ),
            (
                at("/commands/forecast"),
                "0.01".into(),
                "eip155:8453".into(),
                "10000".into(),
                json!(["city"])
            ),
            (
                at("/commands/hello"),
                "0.05".into(),
                "eip155:8453".into(),
                "50000".into(),
                json!(["name"])
            ),
        ]
    );
    // A command's address names the command: its price list says so, and one not for sale
    // has none.
    let listed = get(&server.url(&at("/commands/hello")), None).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert_eq!(listed.json()["accepts"][0]["maxAmountRequired"], "50000");
    assert_eq!(
        payment_required(&listed)["resource"]["description"],
        "Run /hello of Agent seller"
    );
    let hidden = get(&server.url(&at("/commands/secret")), None).await;
    assert_eq!(
        (hidden.status, hidden.json()["code"].clone()),
        (404, json!("command_not_found"))
    );
}

#[tokio::test]
async fn a_command_bought_at_its_own_address_is_served_and_its_retry_matches_either_address() {
    let chain = LocalBase::start().await;
    let (env, _, _, agent_wallet) = seller(chain.env());
    chain.set_eth(&agent_wallet, 10u128.pow(16)).await; // it relays: pays the gas
    let server = env.serve();
    let (payer, _) = base_payer(&chain, 1_000_000).await;
    let url = server.url("/x402/base/seller/commands/hello");
    let body = json!({ "name": "Ann" });
    let offered = payment_required(&post_x402(&url, &body).await)["accepts"][0].clone();
    assert_eq!(offered["amount"], "50000");
    let signed = base_payment(&payer, &offered, 50_000, 1, 60);

    // The body holds the parameters alone; naming another command there is refused.
    let other = paid_v2(
        &url,
        &json!({ "command": "forecast", "city": "Oslo" }),
        &as_v2(&signed, &offered),
    )
    .await;
    refused(&other, 400, "validation_error");
    let bought = paid_v2(&url, &body, &as_v2(&signed, &offered)).await;
    assert_eq!(bought.status, 200, "{}", bought.text);
    assert_eq!(bought.json()["response"], "Hello, Ann!");
    let paid_before = chain.usdc_of(&agent_wallet).await;
    // The same payment for the same request at the agent's address: the same answer, the
    // same settlement, nothing charged again.
    let agent_url = server.url("/x402/base/seller");
    let again = paid_v2(
        &agent_url,
        &json!({ "command": "hello", "name": "Ann" }),
        &as_v2(&signed, &offered),
    )
    .await;
    assert_eq!(again.status, 200, "{}", again.text);
    let settlement = |reply: &Reply| reply.json()["receipt"]["transactionSignature"].clone();
    assert_eq!(settlement(&again), settlement(&bought));
    assert_eq!(chain.usdc_of(&agent_wallet).await, paid_before);
}
