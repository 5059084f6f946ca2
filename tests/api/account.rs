//! The management API (`/v1/account/...`): what an account holder does without a shell on
//! the server. Each endpoint's success, its validation errors, the key scopes, and that one
//! account never sees or touches another's keys, agents, plugins, wallets or payments.

use serde_json::{Value, json};

use crate::support::*;

/// A key of `scope` made through the API with `manager`'s key.
async fn new_key(server: &TestServer, manager: &str, scope: &str) -> String {
    let reply = post_json(
        &server.url("/v1/account/keys"),
        Some(manager),
        &json!({ "scope": scope }),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.json()["data"]["scope"], scope);
    reply.json()["data"]["key"].as_str().unwrap().to_string()
}

fn custom_manifest(username: &str, plugin: &str) -> String {
    format!(
        r#"
username = "{username}"
name = "Agent {username}"

[[commands]]
command = "probe"
handler_type = "custom"
plugin = "{plugin}"
"#
    )
}

#[tokio::test]
async fn keys_are_made_listed_and_revoked_by_their_account() {
    let fx = Fixture::start();
    let made = post_json(&fx.url("/v1/account/keys"), Some(&fx.key), &json!({})).await;
    assert_eq!(made.status, 201, "{}", made.text);
    let data = made.json()["data"].clone();
    assert_eq!(data["scope"], "use", "a key gets the least power unless asked: {data}");
    let new_key = data["key"].as_str().unwrap().to_string();
    let new_id = data["id"].as_str().unwrap().to_string();
    assert!(new_key.starts_with(&format!("{new_id}_")));

    let commands = fx.url(&format!("/v1/agents/{}/commands", fx.agent_id));
    assert_eq!(
        get(&commands, Some(&new_key)).await.status,
        200,
        "the new key works at once"
    );

    let listed = get(&fx.url("/v1/account/keys"), Some(&fx.key)).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    let secret = new_key.rsplit('_').next().unwrap();
    assert!(!listed.text.contains(secret), "a list never holds a secret");
    let keys = listed.json()["data"]["keys"].as_array().unwrap().clone();
    assert_eq!(keys.len(), 2, "{keys:?}");
    let row = keys.iter().find(|k| k["id"] == new_id.as_str()).unwrap();
    assert_eq!(
        (row["scope"].as_str(), row["active"].as_bool()),
        (Some("use"), Some(true))
    );
    assert_eq!(row["name"], Value::Null, "no name given");

    // A name tells keys apart in the list.
    let named = post_json(
        &fx.url("/v1/account/keys"),
        Some(&fx.key),
        &json!({ "scope": "spend", "name": "  Telegram bot " }),
    )
    .await;
    assert_eq!(
        (named.status, &named.json()["data"]["name"]),
        (201, &json!("Telegram bot")),
        "{}",
        named.text
    );
    let listed = get(&fx.url("/v1/account/keys"), Some(&fx.key)).await.json();
    let names: Vec<&Value> = listed["data"]["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| &k["name"])
        .collect();
    assert!(names.contains(&&json!("Telegram bot")), "{listed}");
    // The fields in order, as an array, are not an object (serde alone would take them).
    let array = post_json(&fx.url("/v1/account/keys"), Some(&fx.key), &json!([null, null])).await;
    assert_eq!(
        (array.status, array.error_code()),
        (400, "validation_error".to_string()),
        "{}",
        array.text
    );
    for bad in ["x".repeat(65), "line\nbreak".to_string()] {
        let reply = post_json(&fx.url("/v1/account/keys"), Some(&fx.key), &json!({ "name": bad })).await;
        assert_eq!(
            (reply.status, reply.error_code()),
            (400, "validation_error".to_string()),
            "{}",
            reply.text
        );
        assert!(reply.error_message().contains("'name'"), "{}", reply.text);
    }

    let revoked = keyed(
        reqwest::Method::DELETE,
        &fx.url(&format!("/v1/account/keys/{new_id}")),
        &fx.key,
        None,
    )
    .await;
    assert_eq!(revoked.status, 200, "{}", revoked.text);
    assert_eq!(revoked.json()["data"]["active"], false);
    let refused = get(&commands, Some(&new_key)).await;
    assert_eq!(
        (refused.status, refused.error_code()),
        (401, "unauthorized".to_string())
    );

    let unknown = keyed(
        reqwest::Method::DELETE,
        &fx.url("/v1/account/keys/ahk_0000000000000000"),
        &fx.key,
        None,
    )
    .await;
    assert_eq!((unknown.status, unknown.error_code()), (404, "not_found".to_string()));
    let bad = post_json(&fx.url("/v1/account/keys"), Some(&fx.key), &json!({ "scope": "root" })).await;
    assert_eq!((bad.status, bad.error_code()), (400, "validation_error".to_string()));
    assert!(bad.error_message().contains("use, spend, manage"), "{}", bad.text);
    let account = get(&fx.url("/v1/account"), Some(&fx.key)).await.json();
    assert_eq!(
        (&account["data"]["name"], &account["data"]["plan"]),
        (&json!("alice"), &json!("free"))
    );
}

/// An RFC 3339 time `secs` seconds from now.
fn in_secs(secs: i64) -> String {
    use time::format_description::well_known::Rfc3339;
    (time::OffsetDateTime::now_utc() + time::Duration::seconds(secs))
        .format(&Rfc3339)
        .unwrap()
}

#[tokio::test]
async fn keys_are_named_and_end_when_their_owner_says() {
    let fx = Fixture::start();
    let keys_url = fx.url("/v1/account/keys");
    let commands = fx.url(&format!("/v1/agents/{}/commands", fx.agent_id));

    let month = post_json(
        &keys_url,
        Some(&fx.key),
        &json!({ "name": "CI", "expires_in_days": 30 }),
    )
    .await;
    assert_eq!(month.status, 201, "{}", month.text);
    let ends = month.json()["data"]["expires_at"].as_str().unwrap().to_string();
    let days = (time::OffsetDateTime::parse(&ends, &time::format_description::well_known::Rfc3339).unwrap()
        - time::OffsetDateTime::now_utc())
    .whole_hours();
    assert!((719..=720).contains(&days), "30 days from now: {ends}");

    for (body, field) in [
        (json!({ "expires_at": in_secs(-60) }), "'expires_at'"),
        (json!({ "expires_at": "next tuesday" }), "'expires_at'"),
        (json!({ "expires_in_days": 0 }), "'expires_in_days'"),
        (json!({ "expires_in_days": 3, "expires_at": in_secs(60) }), "not both"),
    ] {
        let refused = post_json(&keys_url, Some(&fx.key), &body).await;
        assert_eq!(
            (refused.status, refused.error_code()),
            (400, "validation_error".to_string()),
            "{body}"
        );
        assert!(refused.error_message().contains(field), "{body}: {}", refused.text);
    }

    // A key that ends in two seconds works until then, and is renamed meanwhile.
    let brief = post_json(&keys_url, Some(&fx.key), &json!({ "expires_at": in_secs(2) })).await;
    assert_eq!(brief.status, 201, "{}", brief.text);
    let brief_key = brief.json()["data"]["key"].as_str().unwrap().to_string();
    let brief_id = brief.json()["data"]["id"].as_str().unwrap().to_string();
    let brief_url = fx.url(&format!("/v1/account/keys/{brief_id}"));
    assert_eq!(get(&commands, Some(&brief_key)).await.status, 200);
    let renamed = keyed(
        reqwest::Method::PATCH,
        &brief_url,
        &fx.key,
        Some(&json!({ "name": "demo script" })),
    )
    .await;
    assert_eq!(renamed.status, 200, "{}", renamed.text);
    assert_eq!(renamed.json()["data"]["name"], "demo script");
    assert!(
        renamed.json()["data"]["expires_at"].is_string(),
        "a rename keeps the end: {}",
        renamed.text
    );

    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let expired = get(&commands, Some(&brief_key)).await;
    assert_eq!(
        (expired.status, expired.error_code()),
        (401, "unauthorized".to_string())
    );
    assert!(expired.error_message().contains("expired at"), "{}", expired.text);
    let listed = get(&keys_url, Some(&fx.key)).await.json();
    let row = listed["data"]["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == brief_id.as_str())
        .unwrap()
        .clone();
    assert_eq!(
        (&row["active"], &row["expired"], &row["name"]),
        (&json!(false), &json!(true), &json!("demo script"))
    );
    assert!(row["last_used_at"].is_string(), "its use was recorded: {row}");

    // Its owner can give it a new end, or none: every host's cache sees the change.
    let extended = keyed(
        reqwest::Method::PATCH,
        &brief_url,
        &fx.key,
        Some(&json!({ "expires_at": null })),
    )
    .await;
    assert_eq!(extended.status, 200, "{}", extended.text);
    assert_eq!(extended.json()["data"]["active"], true);
    assert_eq!(get(&commands, Some(&brief_key)).await.status, 200);
    let past = keyed(
        reqwest::Method::PATCH,
        &brief_url,
        &fx.key,
        Some(&json!({ "expires_at": in_secs(-1) })),
    )
    .await;
    assert_eq!(past.status, 400, "to end a key now, revoke it: {}", past.text);
    let unknown = keyed(
        reqwest::Method::PATCH,
        &fx.url("/v1/account/keys/ahk_0000000000000000"),
        &fx.key,
        Some(&json!({ "name": "x" })),
    )
    .await;
    assert_eq!(unknown.status, 404, "{}", unknown.text);

    // The CLI does the same, by the key's id.
    let made = fx.env.cli_json(&[
        "key",
        "create",
        "--account",
        "alice",
        "--name",
        "ops",
        "--expires",
        "7d",
    ]);
    assert!(made["expires_at"].is_string(), "{made}");
    let id = made["id"].as_str().unwrap();
    let updated = fx
        .env
        .cli_json(&["key", "update", id, "--name", "", "--expires", "never"]);
    assert_eq!(
        (&updated["name"], &updated["expires_at"]),
        (&Value::Null, &Value::Null),
        "{updated}"
    );
    let refused = fx
        .env
        .cli(&["key", "create", "--account", "alice", "--expires", "yesterday"]);
    assert!(
        !refused.status.success() && refused.stderr.contains("expires_at"),
        "{}",
        refused.stderr
    );
}

/// A key that ends cannot make a key that outlives it, nor stretch one (its own included)
/// past its end; every change of a key is an event for the account's webhooks.
#[tokio::test]
async fn a_key_cannot_outlive_the_key_that_made_it() {
    let env = TestEnv::new()
        .with_env("AGENT_HOST_WEBHOOK_ALLOW_PRIVATE", "127.0.0.1")
        .with_env("AGENT_HOST_WEBHOOK_POLL_MS", "50");
    let owner_key = env.account_with_key("alice", "free");
    let server = env.serve();
    let keys_url = server.url("/v1/account/keys");
    let receiver = crate::support::webhooks::Receiver::start().await;
    let endpoint = post_json(
        &server.url("/v1/account/webhooks"),
        Some(&owner_key),
        &json!({ "url": receiver.url(), "events": ["key.updated"] }),
    )
    .await;
    assert_eq!(endpoint.status, 201, "{}", endpoint.text);
    let week = post_json(
        &keys_url,
        Some(&owner_key),
        &json!({ "scope": "manage", "expires_in_days": 7 }),
    )
    .await;
    assert_eq!(week.status, 201, "{}", week.text);
    let week_key = week.json()["data"]["key"].as_str().unwrap().to_string();
    let week_id = week.json()["data"]["id"].as_str().unwrap().to_string();

    for body in [
        json!({ "scope": "manage" }),
        json!({ "scope": "use", "expires_in_days": 8 }),
    ] {
        let refused = post_json(&keys_url, Some(&week_key), &body).await;
        assert_eq!(
            (refused.status, refused.error_code()),
            (403, "insufficient_scope".into()),
            "{body}: {}",
            refused.text
        );
        assert!(refused.error_message().contains("ends at"), "{}", refused.text);
    }
    let shorter = post_json(
        &keys_url,
        Some(&week_key),
        &json!({ "scope": "use", "expires_in_days": 6 }),
    )
    .await;
    assert_eq!(shorter.status, 201, "a key ending sooner is fine: {}", shorter.text);
    let shorter_id = shorter.json()["data"]["id"].as_str().unwrap().to_string();

    let own_url = server.url(&format!("/v1/account/keys/{week_id}"));
    for body in [json!({ "expires_at": null }), json!({ "expires_in_days": 30 })] {
        let refused = keyed(reqwest::Method::PATCH, &own_url, &week_key, Some(&body)).await;
        assert_eq!(refused.status, 403, "{body}: {}", refused.text);
    }
    let other_url = server.url(&format!("/v1/account/keys/{shorter_id}"));
    let stretched = keyed(
        reqwest::Method::PATCH,
        &other_url,
        &week_key,
        Some(&json!({ "expires_at": null })),
    )
    .await;
    assert_eq!(stretched.status, 403, "nor another key: {}", stretched.text);
    let listed = get(&keys_url, Some(&owner_key)).await.json();
    let own = listed["data"]["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == week_id.as_str())
        .unwrap()
        .clone();
    assert!(own["expires_at"].is_string(), "its end stands: {own}");

    // A rename and an end brought nearer are allowed, and each is an event.
    let renamed = keyed(
        reqwest::Method::PATCH,
        &own_url,
        &week_key,
        Some(&json!({ "name": "ci", "expires_in_days": 2 })),
    )
    .await;
    assert_eq!(renamed.status, 200, "{}", renamed.text);
    let keyless = keyed(
        reqwest::Method::PATCH,
        &other_url,
        &owner_key,
        Some(&json!({ "expires_at": null })),
    )
    .await;
    assert_eq!(keyless.status, 200, "a key with no end may: {}", keyless.text);
    receiver
        .until("two key.updated events", |_| receiver.count("key.updated") >= 2)
        .await;
    let events: Vec<Value> = receiver.received().iter().map(|r| r.event()).collect();
    assert!(
        events
            .iter()
            .any(|e| e["data"]["key_id"] == week_id.as_str() && e["data"]["name"] == "ci"),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["data"]["key_id"] == shorter_id.as_str() && e["data"]["expires_at"].is_null()),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_key_does_only_what_its_scope_allows() {
    let fx = Fixture::start();
    let user = new_key(&fx.server, &fx.key, "use").await;
    let spender = new_key(&fx.server, &fx.key, "spend").await;
    let agent = &fx.agent_id;

    // Use: the agent endpoints, but no money out and no account.
    let execute = fx.url(&format!("/v1/agents/{agent}/commands/hello/execute"));
    let ran = post_json(&execute, Some(&user), &json!({ "parameters": { "name": "Ann" } })).await;
    assert_eq!(ran.status, 200, "{}", ran.text);
    let transfer = fx.url(&format!("/v1/agents/{agent}/wallet/base/transfer"));
    // Refused before the body is read: a malformed body still says "scope".
    let refused = post_json(&transfer, Some(&user), &json!({ "nonsense": true })).await;
    assert_eq!(
        (refused.status, refused.error_code()),
        (403, "insufficient_scope".to_string()),
        "{}",
        refused.text
    );
    assert!(refused.error_message().contains("'spend'"), "{}", refused.text);
    for (method, path) in [
        ("GET", "/v1/account"),
        ("POST", "/v1/account/keys"),
        ("GET", "/v1/account/agents"),
        ("POST", "/v1/account/plugins"),
    ] {
        for key in [&user, &spender] {
            let request = match method {
                "GET" => client().get(fx.url(path)),
                _ => client().post(fx.url(path)).json(&json!({ "scope": "manage" })),
            };
            let reply = send(request.header("x-api-key", key)).await;
            assert_eq!(
                (reply.status, reply.error_code()),
                (403, "insufficient_scope".to_string()),
                "{method} {path}: {}",
                reply.text
            );
            assert!(reply.header("x-ratelimit-limit").is_some(), "refusals are counted too");
        }
    }
    // Spend: the transfer gets past the scope (and fails on what it is: no wallet).
    let tried = post_json(
        &transfer,
        Some(&spender),
        &json!({ "recipientAddress": "0x000000000000000000000000000000000000dEaD", "amountUsdc": 1 }),
    )
    .await;
    assert_ne!(tried.status, 403, "{}", tried.text);
    assert_eq!(tried.error_code(), "wallet_not_configured", "{}", tried.text);
    // Keys made by the CLI for an account holder manage.
    assert_eq!(get(&fx.url("/v1/account"), Some(&fx.key)).await.status, 200);
    let listed = fx.env.cli_json(&["key", "list", "--account", "alice"]);
    let scopes: Vec<&str> = listed["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["scope"].as_str().unwrap())
        .collect();
    assert_eq!(scopes, ["manage", "use", "spend"]);
}

#[tokio::test]
async fn agents_are_applied_over_http_with_the_same_checks_as_the_cli() {
    let fx = Fixture::start();
    let url = fx.url("/v1/account/agents");
    let created = post_body(&url, &fx.key, "application/toml", manifest("beta").into_bytes()).await;
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.json()["data"]["created"], true);
    let changed = manifest("beta").replace("Hello, {{name}}!", "Howdy, {{name}}!");
    let updated = post_body(&url, &fx.key, "application/toml", changed.into_bytes()).await;
    assert_eq!(
        (updated.status, &updated.json()["data"]["created"]),
        (200, &json!(false))
    );
    let ran = post_json(
        &fx.url("/v1/agents/beta/commands/hello/execute"),
        Some(&fx.key),
        &json!({ "parameters": { "name": "Bo" } }),
    )
    .await;
    assert_eq!(ran.json()["data"]["result"]["response"], "Howdy, Bo!", "{}", ran.text);

    // The same manifest as JSON.
    let as_json = json!({
        "username": "gamma", "name": "Gamma",
        "commands": [{ "command": "hi", "handler_type": "simple_text", "config": { "text": "hi" } }],
    });
    let made = post_json(&url, Some(&fx.key), &as_json).await;
    assert_eq!(made.status, 201, "{}", made.text);

    // A mistake gets the message `agent apply` prints, file name aside.
    let broken = manifest("delta").replace("handler_type = \"simple_text\"", "handler_type = \"simple_txt\"");
    let reply = post_body(&url, &fx.key, "application/toml", broken.clone().into_bytes()).await;
    assert_eq!(
        (reply.status, reply.error_code()),
        (400, "validation_error".to_string())
    );
    std::fs::write(fx.env.path("broken.toml"), &broken).unwrap();
    let cli = fx.env.cli(&[
        "agent",
        "apply",
        fx.env.path("broken.toml").to_str().unwrap(),
        "--account",
        "alice",
    ]);
    let cli_message = cli.stderr.trim().trim_start_matches("error: ").to_string();
    let (_, cli_rest) = cli_message.split_once(".toml").unwrap();
    let api_rest = reply.error_message().strip_prefix("manifest").unwrap().to_string();
    assert_eq!(api_rest, cli_rest, "the API says what the CLI says");
    assert!(api_rest.starts_with(":10:"), "with its line: {api_rest}");

    // A manifest sent over the network never names a file on the server.
    let by_path = custom_manifest("eps", "/etc/passwd");
    let reply = post_body(&url, &fx.key, "application/toml", by_path.into_bytes()).await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert!(reply.error_message().contains("commands[0].plugin"), "{}", reply.text);
    assert!(reply.error_message().contains("sha256:"), "{}", reply.text);
    let reply = post_body(&url, &fx.key, "text/html", b"<p>".to_vec()).await;
    assert_eq!(
        (reply.status, reply.error_code()),
        (415, "validation_error".to_string())
    );
    let reply = post_body(&url, &fx.key, "application/json", b"[1]".to_vec()).await;
    assert_eq!(
        (reply.status, reply.error_code()),
        (400, "validation_error".to_string())
    );

    let list = get(&url, Some(&fx.key)).await.json();
    let names: Vec<&str> = list["data"]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["username"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alpha", "beta", "gamma"]);
    let shown = get(&fx.url("/v1/account/agents/beta"), Some(&fx.key)).await.json();
    assert_eq!(shown["data"]["commands"][0]["command"], "hello");
    assert_eq!(shown, {
        let cli = fx.env.cli_json(&["agent", "show", "beta"]);
        json!({ "success": true, "data": cli })
    });
}

#[tokio::test]
async fn a_plugin_uploaded_over_http_runs_as_a_command() {
    let env = TestEnv::new().with_env("AGENT_HOST_PLUGIN_MAX_COMPONENT_BYTES", "4000000");
    let key = env.account_with_key("alice", "free");
    let server = env.serve();
    let bytes = std::fs::read(plugin_path("probe")).unwrap();
    let uploads = server.url("/v1/account/plugins");
    let uploaded = post_body(&uploads, &key, "application/wasm", bytes.clone()).await;
    assert_eq!(uploaded.status, 201, "{}", uploaded.text);
    let plugin = uploaded.json()["data"]["plugin"].as_str().unwrap().to_string();
    assert!(plugin.starts_with("sha256:") && plugin.len() == 7 + 64, "{plugin}");
    assert_eq!(uploaded.json()["data"]["manifest"]["name"], "probe");

    let listed = get(&uploads, Some(&key)).await.json();
    let plugins = listed["data"]["plugins"].as_array().unwrap();
    assert_eq!(plugins.len(), 1);
    assert_eq!(
        (&plugins[0]["plugin"], &plugins[0]["used_by_commands"]),
        (&json!(plugin), &json!(0))
    );

    let applied = post_body(
        &server.url("/v1/account/agents"),
        &key,
        "application/toml",
        custom_manifest("prober", &plugin).into_bytes(),
    )
    .await;
    assert_eq!(applied.status, 201, "{}", applied.text);
    let ran = post_json(
        &server.url("/v1/agents/prober/commands/probe/execute"),
        Some(&key),
        &json!({ "parameters": { "mode": "echo", "url": "uploaded" } }),
    )
    .await;
    assert_eq!(
        ran.json()["data"]["result"]["response"],
        "probe ok: uploaded",
        "{}",
        ran.text
    );
    let listed = get(&uploads, Some(&key)).await.json();
    assert_eq!(listed["data"]["plugins"][0]["used_by_commands"], 1);

    // What is not a component of our world is refused with the reason.
    let reply = post_body(&uploads, &key, "application/wasm", b"\0asm\x01\0\0\0".to_vec()).await;
    assert_eq!(
        (reply.status, reply.error_code()),
        (400, "validation_error".to_string())
    );
    assert!(reply.error_message().contains("not a component"), "{}", reply.text);
    let reply = post_body(&uploads, &key, "application/wasm", Vec::new()).await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    let reply = post_body(&uploads, &key, "text/plain", bytes).await;
    assert_eq!(reply.status, 415, "{}", reply.text);
    let reply = post_body(&uploads, &key, "application/wasm", vec![0u8; 4_000_001]).await;
    assert_eq!(
        (reply.status, reply.error_code()),
        (413, "validation_error".to_string()),
        "{}",
        reply.text
    );
    let unknown = custom_manifest("ghost", &format!("sha256:{}", "ab".repeat(32)));
    let reply = post_body(
        &server.url("/v1/account/agents"),
        &key,
        "application/toml",
        unknown.into_bytes(),
    )
    .await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert!(
        reply.error_message().contains("has uploaded no component"),
        "{}",
        reply.text
    );
}

#[tokio::test]
async fn an_agents_wallets_and_records_are_its_owners_to_see() {
    let fx = Fixture::start();
    let agent = &fx.agent_id;
    let wallets = fx.url(&format!("/v1/account/agents/{agent}/wallets"));
    let made = post_json(&wallets, Some(&fx.key), &json!({ "network": "base" })).await;
    assert_eq!(made.status, 201, "{}", made.text);
    let address = made.json()["data"]["address"].as_str().unwrap().to_string();
    assert!(address.starts_with("0x") && address.len() == 42, "{address}");
    let again = post_json(&wallets, Some(&fx.key), &json!({ "network": "base" })).await;
    assert_eq!(
        (again.status, again.error_code()),
        (409, "conflict".to_string()),
        "{}",
        again.text
    );
    let bad = post_json(&wallets, Some(&fx.key), &json!({ "network": "ethereum" })).await;
    assert_eq!((bad.status, bad.error_code()), (400, "validation_error".to_string()));
    let listed = get(&wallets, Some(&fx.key)).await;
    assert!(!listed.text.contains("secret"), "{}", listed.text);
    assert_eq!(listed.json()["data"]["wallets"][0]["address"], address.as_str());

    for (list, field) in [("transfers", "transfers"), ("payments", "payments"), ("jobs", "jobs")] {
        let url = fx.url(&format!("/v1/account/agents/{agent}/{list}"));
        let reply = get(&url, Some(&fx.key)).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(reply.json()["data"][field], json!([]));
        let reply = get(&format!("{url}?limit=0"), Some(&fx.key)).await;
        assert_eq!(
            (reply.status, reply.error_code()),
            (400, "validation_error".to_string())
        );
    }

    // An agent with a wallet keeps its key: not deleted. One without goes.
    let kept = keyed(
        reqwest::Method::DELETE,
        &fx.url(&format!("/v1/account/agents/{agent}")),
        &fx.key,
        None,
    )
    .await;
    assert_eq!(
        (kept.status, kept.error_code()),
        (409, "conflict".to_string()),
        "{}",
        kept.text
    );
    assert!(kept.error_message().contains("wallet on base"), "{}", kept.text);
    fx.env.apply_agent(&manifest("beta"), "alice");
    let gone = keyed(
        reqwest::Method::DELETE,
        &fx.url("/v1/account/agents/beta"),
        &fx.key,
        None,
    )
    .await;
    assert_eq!(gone.status, 200, "{}", gone.text);
    let after = get(&fx.url("/v1/agents/beta/commands"), Some(&fx.key)).await;
    assert_eq!(after.status, 404, "{}", after.text);
}

/// Bob's key, with `manage`, against Alice's records: every one answers like a missing one,
/// and nothing of Alice's changes.
#[tokio::test]
async fn one_account_never_reaches_anothers_records() {
    let env = TestEnv::new();
    let alice = env.account_with_key("alice", "free");
    let bob = env.account_with_key("bob", "pro"); // room for every call below
    let alpha = env.apply_agent(&manifest("alpha"), "alice");
    env.apply_agent(&manifest("bobby"), "bob");
    env.create_wallet("alpha", "base");
    let server = env.serve();
    let uploaded = post_body(
        &server.url("/v1/account/plugins"),
        &alice,
        "application/wasm",
        std::fs::read(plugin_path("probe")).unwrap(),
    )
    .await;
    let alices_plugin = uploaded.json()["data"]["plugin"].as_str().unwrap().to_string();
    let alices_key_id = env.cli_json(&["key", "list", "--account", "alice"])["keys"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    let agents = get(&server.url("/v1/account/agents"), Some(&bob)).await.json();
    let names: Vec<&str> = agents["data"]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["username"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bobby"]);
    let keys = get(&server.url("/v1/account/keys"), Some(&bob)).await;
    assert!(!keys.text.contains(&alices_key_id), "{}", keys.text);
    let plugins = get(&server.url("/v1/account/plugins"), Some(&bob)).await.json();
    assert_eq!(plugins["data"]["plugins"], json!([]));

    for target in [alpha.as_str(), "alpha"] {
        for path in [
            "",
            "/wallets",
            "/wallets/base/qr",
            "/transfers",
            "/payments",
            "/jobs",
            "/logs",
            "/integrations",
        ] {
            let reply = get(&server.url(&format!("/v1/account/agents/{target}{path}")), Some(&bob)).await;
            assert_eq!(
                (reply.status, reply.error_code()),
                (404, "not_found".to_string()),
                "{path}: {}",
                reply.text
            );
        }
        let reply = post_json(
            &server.url(&format!("/v1/account/agents/{target}/wallets")),
            Some(&bob),
            &json!({ "network": "solana" }),
        )
        .await;
        assert_eq!(reply.status, 404, "{}", reply.text);
        let reply = keyed(
            reqwest::Method::DELETE,
            &server.url(&format!("/v1/account/agents/{target}")),
            &bob,
            None,
        )
        .await;
        assert_eq!(reply.status, 404, "{}", reply.text);
        // Alice's integrations: neither connected, switched nor removed by Bob.
        let integration_calls = [
            (reqwest::Method::PUT, "chatapp", json!({ "token": "123:bobs-bot" })),
            (reqwest::Method::PUT, "social", json!({ "access_token": "bobs-token" })),
            (reqwest::Method::PATCH, "chatapp", json!({ "enabled": false })),
            (reqwest::Method::PATCH, "social", json!({ "enabled": false })),
            (reqwest::Method::DELETE, "chatapp", json!({})),
            (reqwest::Method::DELETE, "social", json!({})),
        ];
        for (method, kind, body) in integration_calls {
            let url = server.url(&format!("/v1/account/agents/{target}/integrations/{kind}"));
            let reply = keyed(method.clone(), &url, &bob, Some(&body)).await;
            assert_eq!(reply.status, 404, "{method} {kind}: {}", reply.text);
        }
        // The API's keyed routes on Alice's agent, with Bob's key that may do all of them.
        let keyed_calls = [
            (reqwest::Method::POST, "/chat", json!({ "message": "hi" })),
            (reqwest::Method::GET, "/commands", json!(null)),
            (
                reqwest::Method::POST,
                "/commands/hello/execute",
                json!({ "parameters": {} }),
            ),
            (
                reqwest::Method::POST,
                "/chatapp/send",
                json!({ "chatId": 1, "text": "hi" }),
            ),
            (reqwest::Method::POST, "/social/post", json!({ "text": "hi" })),
            (reqwest::Method::GET, "/wallet/base/balance", json!(null)),
            (
                reqwest::Method::POST,
                "/wallet/base/transfer",
                json!({ "recipientAddress": "0x000000000000000000000000000000000000dEaD", "amountUsdc": 1 }),
            ),
        ];
        for (method, path, body) in keyed_calls {
            let body = Some(&body).filter(|b| !b.is_null());
            let url = |agent: &str| server.url(&format!("/v1/agents/{agent}{path}"));
            // Exactly what an agent that does not exist answers (a 404, the API's code).
            let reply = keyed(method.clone(), &url(target), &bob, body).await;
            let missing = keyed(method.clone(), &url("no-such-agent"), &bob, body).await;
            assert_eq!(reply.status, 404, "{method} {path}: {}", reply.text);
            assert_eq!(
                (reply.status, reply.error_code()),
                (missing.status, missing.error_code()),
                "{method} {path}: {}",
                reply.text
            );
        }
    }
    let reply = keyed(
        reqwest::Method::DELETE,
        &server.url(&format!("/v1/account/keys/{alices_key_id}")),
        &bob,
        None,
    )
    .await;
    assert_eq!((reply.status, reply.error_code()), (404, "not_found".to_string()));
    // Alice's name is taken, but her agent is not Bob's to change.
    let reply = post_body(
        &server.url("/v1/account/agents"),
        &bob,
        "application/toml",
        manifest("alpha").into_bytes(),
    )
    .await;
    assert_eq!(
        (reply.status, reply.error_code()),
        (409, "conflict".to_string()),
        "{}",
        reply.text
    );
    // Knowing the hash of Alice's component does not let Bob run it.
    let reply = post_body(
        &server.url("/v1/account/agents"),
        &bob,
        "application/toml",
        custom_manifest("bobprobe", &alices_plugin).into_bytes(),
    )
    .await;
    assert_eq!(reply.status, 400, "{}", reply.text);

    // Nothing of Alice's moved.
    assert_eq!(get(&server.url("/v1/account"), Some(&alice)).await.status, 200);
    let hers = get(&server.url("/v1/account/agents/alpha/wallets"), Some(&alice))
        .await
        .json();
    assert_eq!(hers["data"]["wallets"].as_array().map(Vec::len), Some(1));
    let hers = get(&server.url("/v1/account/agents/alpha"), Some(&alice)).await.json();
    assert_eq!(hers["data"]["name"], "Agent alpha");
    let value: Value = get(&server.url("/v1/account/plugins"), Some(&alice)).await.json();
    assert_eq!(value["data"]["plugins"][0]["plugin"], alices_plugin.as_str());
}
