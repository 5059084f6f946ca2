//! The API against its own published schema: schemathesis (PyPI) reads `/openapi.json` and
//! generates requests for every operation (bodies, headers, path and query values, valid and
//! not), and checks that nothing answers 5xx, that every answer has a documented status,
//! content type and schema (so every error keeps the API's envelope), and that invalid input
//! is refused. The server has real counterparts: both local chains with the agent's funded
//! wallets, and a local model speaking the OpenAI wire format.
//! `scripts/schemathesis.sh SECONDS` runs it for longer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::chains::{LocalBase, LocalSolana};
use crate::support::fake_llm::{fake_openai, text};
use crate::support::*;

/// Telegram and X as they answer a token they do not know (each in its own wire format),
/// so connecting a bot or an account is refused as it would be for real, never sent out.
async fn refusing_telegram_and_x() -> FakeServer {
    use axum::http::{StatusCode, Uri};
    FakeServer::start(axum::Router::new().fallback(|uri: Uri| async move {
        let body = if uri.path().starts_with("/2/") {
            serde_json::json!({ "title": "Unauthorized", "type": "about:blank", "status": 401, "detail": "Unauthorized" })
        } else {
            serde_json::json!({ "ok": false, "error_code": 401, "description": "Unauthorized" })
        };
        (StatusCode::UNAUTHORIZED, axum::Json(body))
    }))
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_keeps_to_its_published_schema() {
    let (base, solana) = (LocalBase::start().await, LocalSolana::start());
    let llm = fake_openai(
        Arc::new(|_, _| text("Hello from the model.")),
        Arc::new(Mutex::new(Vec::new())),
    )
    .await;
    let refusing = refusing_telegram_and_x().await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_CHATAPP_API_BASE", &refusing.base)
        .with_env("AGENT_HOST_SOCIAL_API_BASE", &refusing.base)
        .with_envs(base.env())
        .with_envs(solana.env())
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake")
        .with_env("AGENT_HOST_X402_CLIENT_LIMIT_PER_MINUTE", "1000000")
        .with_env("AGENT_HOST_X402_PAYER_LIMIT_PER_MINUTE", "1000000")
        .with_env("AGENT_HOST_AUTH_FAILURE_LIMIT_PER_MINUTE", "1000000")
        .with_env("AGENT_HOST_AUTH_FAILURE_LIMIT_PER_DAY", "100000000");
    env.cli_json(&[
        "account",
        "create",
        "acme",
        "--plan",
        "enterprise",
        "--rpm",
        "1000000",
        "--rpd",
        "100000000",
    ]);
    let key = env.create_key("acme");
    let helper = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/helper.toml");
    env.cli_json(&["agent", "apply", helper, "--account", "acme"]);
    let solana_wallet = env.create_wallet("helper", "solana");
    let base_wallet = env.create_wallet("helper", "base");
    solana.set_sol(&solana_wallet, 10_000_000_000).await;
    solana.set_usdc(&solana_wallet, 1_000_000_000).await;
    base.set_eth(&base_wallet, 10u128.pow(18)).await;
    base.mint_usdc(&base_wallet, 1_000_000_000).await;
    let server = env.serve();

    let seconds: u64 = std::env::var("SCHEMATHESIS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/schemathesis.toml");
    let mut run = tokio::process::Command::new("schemathesis");
    run.args(["--config-file", config, "run", &server.url("/openapi.json")])
        .args(["--max-time", &seconds.to_string()])
        .env("API_KEY", &key)
        .env("NO_COLOR", "1");
    let (passed, report) = run_tool(run, Duration::from_secs(seconds + 300), "schemathesis").await;
    assert!(passed, "schemathesis found failures:\n{report}");
    assert!(report.contains("passed"), "{report}");
}
