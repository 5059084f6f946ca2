use std::collections::BTreeSet;

use crate::support::*;

fn commands_url(server: &TestServer) -> String {
    server.url("/v1/agents/alpha/commands")
}

#[tokio::test]
async fn every_keyed_response_carries_the_plan_headers() {
    let fx = Fixture::start();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let ok = get(&commands_url(&fx.server), Some(&fx.key)).await;
    let missing = get(&fx.url("/v1/agents/nobody/commands"), Some(&fx.key)).await;
    assert_eq!((ok.status, missing.status), (200, 404));
    assert_eq!(ok.header("x-ratelimit-limit"), Some("60"));
    assert_eq!(ok.header("x-ratelimit-remaining"), Some("59"));
    assert_eq!(
        missing.header("x-ratelimit-remaining"),
        Some("58"),
        "errors count and carry headers"
    );
    let reset: u64 = ok.header("x-ratelimit-reset").unwrap().parse().unwrap();
    assert!(
        reset > before && reset <= before + 61,
        "reset {reset} should be the next minute boundary"
    );
    assert_eq!(reset % 60, 0);

    let pro = fx.env.account_with_key("prof", "pro");
    fx.env.apply_agent(&manifest("pro_agent"), "prof");
    let reply = get(&fx.url("/v1/agents/pro_agent/commands"), Some(&pro)).await;
    assert_eq!(reply.header("x-ratelimit-limit"), Some("300"));
}

/// N parallel requests never let more than the limit through.
#[tokio::test]
async fn the_limit_is_exact_under_concurrency() {
    let env = TestEnv::new();
    env.cli_json(&[
        "account",
        "create",
        "ent",
        "--plan",
        "enterprise",
        "--rpm",
        "7",
        "--rpd",
        "1000",
    ]);
    let key = env.create_key("ent");
    env.apply_agent(&manifest("alpha"), "ent");
    let server = env.serve();
    let url = commands_url(&server);
    let replies = all_at_once((0..40).map(|_| {
        let url = url.clone();
        let key = key.clone();
        async move { get(&url, Some(&key)).await }
    }))
    .await;
    let ok: Vec<&Reply> = replies.iter().filter(|r| r.status == 200).collect();
    let limited: Vec<&Reply> = replies.iter().filter(|r| r.status == 429).collect();
    assert_eq!(ok.len(), 7, "exactly the limit gets through");
    assert_eq!(limited.len(), 33);
    let remaining: BTreeSet<u32> = ok
        .iter()
        .map(|r| r.header("x-ratelimit-remaining").unwrap().parse().unwrap())
        .collect();
    assert_eq!(remaining, (0..7).collect(), "each allowed request saw its own count");
    for reply in limited {
        assert_eq!(reply.error_code(), "rate_limit_exceeded");
        assert_eq!(reply.header("x-ratelimit-remaining"), Some("0"));
        assert_eq!(reply.header("x-ratelimit-limit"), Some("7"));
        let retry: u64 = reply.header("retry-after").unwrap().parse().unwrap();
        // The next minute, once a seventh of this full one has slid out of the last minute.
        assert!((1..=69).contains(&retry), "retry-after {retry}");
    }
}

#[tokio::test]
async fn the_daily_window_binds_and_survives_a_restart() {
    let env = TestEnv::new();
    env.cli_json(&[
        "account",
        "create",
        "ent",
        "--plan",
        "enterprise",
        "--rpm",
        "100",
        "--rpd",
        "3",
    ]);
    let key = env.create_key("ent");
    env.apply_agent(&manifest("alpha"), "ent");
    let server = env.serve();
    let first = get(&commands_url(&server), Some(&key)).await;
    assert_eq!(
        first.header("x-ratelimit-limit"),
        Some("3"),
        "the day window has fewer left, so it is reported"
    );
    assert_eq!(first.header("x-ratelimit-remaining"), Some("2"));
    let reset: u64 = first.header("x-ratelimit-reset").unwrap().parse().unwrap();
    assert_eq!(reset % 86_400, 0, "the daily window resets at UTC midnight");
    assert_eq!(get(&commands_url(&server), Some(&key)).await.status, 200);
    assert!(server.stop().success());

    let server = env.serve();
    assert_eq!(get(&commands_url(&server), Some(&key)).await.status, 200);
    let spent = get(&commands_url(&server), Some(&key)).await;
    assert_eq!(spent.status, 429, "a restart must not hand out a fresh daily quota");
    assert_eq!(spent.error_code(), "rate_limit_exceeded");
    let retry: u64 = spent.header("retry-after").unwrap().parse().unwrap();
    // Tomorrow, once a third of today has slid out of the last day.
    assert!(retry > 86_400 / 3 && retry <= 86_400 + 86_400 / 3, "{retry}");
}

#[tokio::test]
async fn accounts_are_limited_separately() {
    let env = TestEnv::new();
    env.cli_json(&[
        "account",
        "create",
        "small",
        "--plan",
        "enterprise",
        "--rpm",
        "1",
        "--rpd",
        "10",
    ]);
    let small = env.create_key("small");
    let other = env.account_with_key("other", "free");
    env.apply_agent(&manifest("alpha"), "small");
    env.apply_agent(&manifest("beta"), "other");
    let server = env.serve();
    assert_eq!(get(&commands_url(&server), Some(&small)).await.status, 200);
    assert_eq!(get(&commands_url(&server), Some(&small)).await.status, 429);
    assert_eq!(
        get(&server.url("/v1/agents/beta/commands"), Some(&other)).await.status,
        200
    );
}

/// The unkeyed x402 endpoints count every request per client address (the day window
/// binds here, so the test cannot straddle a minute); behind a proxy, the last entry of
/// its header is the address.
#[tokio::test]
async fn x402_requests_are_limited_per_client_address() {
    let env = TestEnv::new()
        .with_env("AGENT_HOST_X402_CLIENT_LIMIT_PER_DAY", "3")
        .with_env("AGENT_HOST_CLIENT_IP_HEADER", "X-Forwarded-For");
    env.create_account("acme", "free");
    env.apply_agent(&crate::support::x402::paid_manifest("seller"), "acme");
    env.cli_json(&["wallet", "create", "--agent", "seller", "--network", "base"]);
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let from = |address: &str| client().get(&url).header("x-forwarded-for", address.to_string());

    let mut remaining = Vec::new();
    for _ in 0..3 {
        let reply = send(from("198.51.100.7")).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(reply.header("x-ratelimit-limit"), Some("3"));
        remaining.push(reply.header("x-ratelimit-remaining").unwrap().to_string());
    }
    assert_eq!(remaining, ["2", "1", "0"]);
    // Unpaid POSTs count too; the refusal is in the x402 envelope, with the headers.
    let refused = send(
        client()
            .post(&url)
            .header("x-forwarded-for", "198.51.100.7")
            .json(&serde_json::json!({ "message": "hi" })),
    )
    .await;
    assert_eq!(refused.status, 429, "{}", refused.text);
    let body = refused.json();
    assert_eq!(
        (body["code"].as_str(), body["x402Version"].as_i64()),
        (Some("rate_limit_exceeded"), Some(1))
    );
    assert_eq!(body["success"], false);
    assert!(refused.header("retry-after").unwrap().parse::<u64>().unwrap() >= 1);
    assert_eq!(refused.header("x-ratelimit-remaining"), Some("0"));

    // A forged first entry does not help: the proxy's own (last) entry counts.
    let forged = send(from("203.0.113.1, 198.51.100.7")).await;
    assert_eq!(forged.status, 429);
    // Another address, and the keyed API, are not affected.
    assert_eq!(send(from("198.51.100.8")).await.status, 200);
    let key = env.account_with_key("alice", "free");
    let keyed = get(&server.url("/v1/agents/seller/commands"), Some(&key)).await;
    assert_eq!(keyed.status, 404, "another account's agent; not a 429: {}", keyed.text);

    // An IPv6 client is its /64, whichever of its addresses it uses.
    for address in ["2001:db8:7:7::1", "2001:db8:7:7:ffff::9", "2001:db8:7:7:1:2:3:4"] {
        assert_eq!(send(from(address)).await.status, 200, "{address}");
    }
    assert_eq!(send(from("2001:db8:7:7:abcd::1")).await.status, 429, "the same /64");
    assert_eq!(send(from("2001:db8:7:8::1")).await.status, 200, "another /64");
}

/// A client presenting wrong keys (or wrong webhook secrets) is refused
/// before any lookup once past its limit, even with a good key then; other clients are not.
#[tokio::test]
async fn wrong_keys_are_throttled_per_client_address_before_any_lookup() {
    let env = TestEnv::new()
        .with_env("AGENT_HOST_AUTH_FAILURE_LIMIT_PER_MINUTE", "3")
        .with_env("AGENT_HOST_CLIENT_IP_HEADER", "X-Forwarded-For");
    let key = env.account_with_key("acme", "pro");
    env.apply_agent(&manifest("alpha"), "acme");
    let server = env.serve();
    let url = server.url("/v1/agents/alpha/commands");
    let from = |address: &str, key: &str| {
        client()
            .get(&url)
            .header("x-forwarded-for", address.to_string())
            .header("x-api-key", key.to_string())
    };
    let wrong = "ahk_0000000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    for _ in 0..3 {
        assert_eq!(send(from("198.51.100.20", wrong)).await.status, 401);
    }
    let throttled = send(from("198.51.100.20", wrong)).await;
    assert_eq!(throttled.status, 429, "{}", throttled.text);
    assert_eq!(throttled.error_code(), "rate_limit_exceeded");
    assert!(throttled.header("retry-after").is_some());
    assert_eq!(
        send(from("198.51.100.20", &key)).await.status,
        429,
        "refused before its key is read"
    );
    assert_eq!(
        send(from("198.51.100.21", &key)).await.status,
        200,
        "another client is served"
    );
    // The webhook's wrong secrets count the same way.
    for _ in 0..3 {
        let reply = send(
            client()
                .post(server.url("/chatapp/alpha/webhook"))
                .header("x-forwarded-for", "198.51.100.22")
                .header("x-telegram-bot-api-secret-token", "guess")
                .json(&serde_json::json!({"update_id": 1})),
        )
        .await;
        assert_eq!(reply.status, 401, "{}", reply.text);
    }
    let reply = send(
        client()
            .post(server.url("/chatapp/alpha/webhook"))
            .header("x-forwarded-for", "198.51.100.22")
            .header("x-telegram-bot-api-secret-token", "guess")
            .json(&serde_json::json!({"update_id": 1})),
    )
    .await;
    assert_eq!(reply.status, 429, "{}", reply.text);
}

/// A paid request refused at a payer's limit of one a day: 429, the limit's headers, and
/// when to come back.
fn past_a_limit_of_one(reply: &Reply) {
    assert_eq!(reply.status, 429, "{}", reply.text);
    assert_eq!(reply.json()["code"], "rate_limit_exceeded");
    assert_eq!(reply.header("x-ratelimit-limit"), Some("1"));
    assert_eq!(reply.header("x-ratelimit-remaining"), Some("0"));
    assert!(reply.header("retry-after").is_some());
}

/// Signed payments count per payer, before any chain call: past the limit a payer's
/// payment is refused (nothing moves), other payers go on, and a payment forged in a
/// payer's name (its signature fails) does not spend that payer's allowance.
#[tokio::test]
async fn x402_payments_are_limited_per_payer() {
    use crate::support::chains::LocalBase;
    use alloy::signers::local::PrivateKeySigner;
    let chain = LocalBase::start().await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_BASE_RPC_URL", &chain.rpc_url)
        .with_env("AGENT_HOST_X402_PAYER_LIMIT_PER_DAY", "1");
    env.create_account("acme", "free");
    env.apply_agent(&crate::support::x402::paid_manifest("seller"), "acme");
    let agent_wallet = env.create_wallet("seller", "base");
    chain.set_eth(&agent_wallet, 10u128.pow(16)).await;
    let server = env.serve();
    let url = server.url("/x402/base/seller");
    let hello = serde_json::json!({ "command": "hello", "name": "Ann" });
    let requirement = post_json(&url, None, &hello).await.json()["accepts"][0].clone();
    let pay = |payment: String| {
        let (url, hello) = (url.clone(), hello.clone());
        async move { send(client().post(&url).header("x-payment", payment).json(&hello)).await }
    };
    let (victim, mallory) = (PrivateKeySigner::random(), PrivateKeySigner::random());
    let victim_address = victim.address().to_string();
    chain.mint_usdc(&victim_address, 1_000_000).await;

    // Mallory's payment with the victim's name on it: refused by its signature, uncounted.
    let forged = crate::support::x402::in_the_name_of(
        &crate::support::x402::base_payment(&mallory, &requirement, 50_000, 1, 60),
        &victim_address,
    );
    for _ in 0..3 {
        let reply = pay(forged.clone()).await;
        assert_eq!(reply.status, 402, "{}", reply.text);
        assert_eq!(reply.json()["code"], "invalid_signature");
    }
    let first = pay(crate::support::x402::base_payment(&victim, &requirement, 50_000, 2, 60)).await;
    assert_eq!(first.status, 200, "the victim's allowance is whole: {}", first.text);
    let second = pay(crate::support::x402::base_payment(&victim, &requirement, 50_000, 3, 60)).await;
    past_a_limit_of_one(&second);
    assert_eq!(
        chain.usdc_of(&victim_address).await,
        950_000,
        "only the first payment moved money"
    );

    let other = PrivateKeySigner::random();
    chain.mint_usdc(&other.address().to_string(), 100_000).await;
    let reply = pay(crate::support::x402::base_payment(&other, &requirement, 50_000, 4, 60)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
}

/// On Solana too: past its limit a payer's payment is refused before anything is signed
/// or sent, with the limit's headers; another payer goes on.
#[tokio::test]
async fn x402_payments_are_limited_per_payer_on_solana() {
    use solana_signer::Signer;
    let chain = crate::support::chains::LocalSolana::start();
    let env = TestEnv::new().with_env("AGENT_HOST_X402_PAYER_LIMIT_PER_DAY", "1");
    let (env, wallet) = crate::support::x402::solana_shop(&chain, env, "").await;
    let server = env.serve();
    let url = server.url("/x402/solana/seller");
    let hello = serde_json::json!({ "command": "hello", "name": "Ann" });
    let requirement = post_json(&url, None, &hello).await.json()["accepts"][0].clone();
    // Each payment its own transaction: a compute-unit limit of its own.
    let pay = |payer: solana_keypair::Keypair, n: u32| {
        let (url, hello, requirement, chain) = (url.clone(), hello.clone(), requirement.clone(), &chain);
        async move {
            use crate::support::x402::*;
            let mut instructions = solana_instructions(&payer.pubkey(), &requirement, 50_000);
            let mut limit = vec![2];
            limit.extend_from_slice(&(20_000 + n).to_le_bytes());
            instructions[0] = solana_instruction::Instruction::new_with_bytes(COMPUTE_BUDGET, &limit, vec![]);
            let fee_payer = solana_key(&requirement["extra"]["feePayer"]);
            let payment = solana_envelope(
                &fee_payer,
                &instructions,
                &[&payer],
                latest_blockhash(chain).await,
                false,
            );
            send(client().post(&url).header("x-payment", payment).json(&hello)).await
        }
    };
    let payer = solana_keypair::Keypair::new();
    let payer_address = payer.pubkey().to_string();
    chain.set_usdc(&payer_address, 1_000_000).await;
    let first = pay(payer.insecure_clone(), 1).await;
    assert_eq!(first.status, 200, "{}", first.text);
    let sol_before = chain.sol_of(&wallet).await;
    let second = pay(payer.insecure_clone(), 2).await;
    past_a_limit_of_one(&second);
    assert_eq!(
        chain.usdc_of(&payer_address).await,
        Some(950_000),
        "only the first moved money"
    );
    assert_eq!(chain.sol_of(&wallet).await, sol_before, "no fee for the refused one");

    let other = solana_keypair::Keypair::new();
    chain.set_usdc(&other.pubkey().to_string(), 100_000).await;
    let reply = pay(other, 3).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
}
