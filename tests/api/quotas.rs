//! What one account may keep is bounded (agents, commands per agent,
//! key-value bytes across its plugins), `GET /v1/account` shows each quota with its use,
//! and a plugin's own words are cut to a stated length wherever they are kept or echoed.

use serde_json::{Value, json};

use crate::support::*;

fn agent_toml(username: &str, commands: usize) -> Vec<u8> {
    let mut text = format!("username = \"{username}\"\nname = \"Agent {username}\"\n");
    for i in 0..commands {
        text.push_str(&format!(
            "[[commands]]\ncommand = \"c{i}\"\nhandler_type = \"simple_text\"\nconfig = {{ text = \"hi\" }}\n"
        ));
    }
    text.into_bytes()
}

fn probe_agent(username: &str) -> String {
    format!(
        "username = \"{username}\"\nname = \"Probe\"\n[[commands]]\ncommand = \"probe\"\nhandler_type = \"custom\"\nplugin = \"{}\"\n",
        plugin_path("probe")
    )
}

async fn quotas(server: &TestServer, key: &str) -> Value {
    let account = get(&server.url("/v1/account"), Some(key)).await;
    assert_eq!(account.status, 200, "{}", account.text);
    account.json()["data"]["quotas"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_and_commands_are_within_the_accounts_quotas() {
    let env = TestEnv::new()
        .with_env("AGENT_HOST_ACCOUNT_MAX_AGENTS", "2")
        .with_env("AGENT_HOST_AGENT_MAX_COMMANDS", "3");
    let key = env.account_with_key("alice", "free");
    let server = env.serve();
    let apply = |body: Vec<u8>| {
        let (url, key) = (server.url("/v1/account/agents"), key.clone());
        async move { post_body(&url, &key, "application/toml", body).await }
    };
    assert_eq!(apply(agent_toml("one", 3)).await.status, 201);
    let too_many = apply(agent_toml("two", 4)).await;
    assert_eq!(too_many.status, 403, "{}", too_many.text);
    assert_eq!(too_many.error_code(), "quota_exceeded");
    assert!(
        too_many.error_message().contains("agent_max_commands"),
        "{}",
        too_many.text
    );
    assert_eq!(apply(agent_toml("two", 1)).await.status, 201);
    let third = apply(agent_toml("three", 1)).await;
    assert_eq!(third.status, 403, "{}", third.text);
    assert!(third.error_message().contains("account_max_agents"), "{}", third.text);
    // Updating an agent it has is not a new one.
    assert_eq!(apply(agent_toml("one", 2)).await.status, 200);

    let quotas = quotas(&server, &key).await;
    assert_eq!(quotas["agents"], json!({ "used": 2, "limit": 2 }));
    assert_eq!(quotas["commands_per_agent"], json!({ "used": 2, "limit": 3 }));
    assert_eq!(quotas["plugins"]["used"], 0);
    assert_eq!(quotas["kv_bytes"]["used"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn plugins_key_value_bytes_are_bounded_per_account() {
    let env = TestEnv::new().with_env("AGENT_HOST_ACCOUNT_MAX_KV_BYTES", "100000");
    let key = env.account_with_key("alice", "pro");
    let other = env.account_with_key("bob", "pro");
    env.apply_agent(&probe_agent("pone"), "alice");
    env.apply_agent(&probe_agent("ptwo"), "alice");
    env.apply_agent(&probe_agent("pthree"), "bob");
    let server = env.serve();
    let write = |agent: &str, key: &str, bytes: usize| {
        let (url, key) = (
            server.url(&format!("/v1/agents/{agent}/commands/probe/execute")),
            key.to_string(),
        );
        let value = "v".repeat(bytes);
        async move {
            post_json(
                &url,
                Some(&key),
                &json!({"parameters": {"mode": "kv_write", "url": value}}),
            )
            .await
        }
    };
    assert_eq!(write("pone", &key, 60_000).await.status, 200);
    // Another agent of the same account: the account's stores together are over 100 KB.
    let refused = write("ptwo", &key, 60_000).await;
    assert_eq!(refused.status, 500, "{}", refused.text);
    assert!(
        refused.error_message().contains("account_max_kv_bytes"),
        "{}",
        refused.text
    );
    // Shrinking a value is always allowed; then the other fits.
    assert_eq!(write("pone", &key, 10_000).await.status, 200);
    assert_eq!(write("ptwo", &key, 60_000).await.status, 200);
    // Another account has its own.
    assert_eq!(write("pthree", &other, 60_000).await.status, 200);
    assert_eq!(
        quotas(&server, &key).await["kv_bytes"],
        json!({ "used": 70_000, "limit": 100_000 })
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugins_error_text_is_cut_where_it_is_kept_and_echoed() {
    let env = TestEnv::new();
    let key = env.account_with_key("alice", "pro");
    env.apply_agent(&probe_agent("talker"), "alice");
    let server = env.serve();
    // The probe echoes an unknown mode in its error: 20,000 characters of it.
    let mode = "m".repeat(20_000);
    let reply = post_json(
        &server.url("/v1/agents/talker/commands/probe/execute"),
        Some(&key),
        &json!({"parameters": {"mode": mode}}),
    )
    .await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    let message = reply.error_message();
    assert!(message.contains("(cut at 1000 characters)"), "{}", &message[..200]);
    assert!(
        message.chars().count() < 1_200,
        "{} characters echoed",
        message.chars().count()
    );
    // The owner's log keeps it cut too.
    let logs = get(&server.url("/v1/account/agents/talker/logs"), Some(&key))
        .await
        .json();
    let kept = logs["data"]["runs"][0]["error"].as_str().unwrap();
    assert!(kept.chars().count() < 1_200, "{} characters kept", kept.chars().count());
}
