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
    let replies = futures_join(40, |_| {
        let url = url.clone();
        let key = key.clone();
        async move { get(&url, Some(&key)).await }
    })
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
        assert!((1..=60).contains(&retry), "retry-after {retry}");
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
    assert!(retry > 0 && retry <= 86_400);
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

async fn futures_join<F, Fut, T>(n: usize, make: F) -> Vec<T>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = (0..n).map(|i| tokio::spawn(make(i))).collect();
    let mut out = Vec::with_capacity(n);
    for handle in handles {
        out.push(handle.await.expect("task"));
    }
    out
}
