use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn missing_malformed_unknown_and_wrong_keys_are_401() {
    let fx = Fixture::start();
    let url = fx.url(&format!("/v1/agents/{}/commands", fx.agent_id));
    let (id, _secret) = fx.key.rsplit_once('_').unwrap();
    let wrong_secret = format!("{id}_{}", "A".repeat(43));
    for key in [
        None,
        Some(""),
        Some("not-a-key"),
        Some("ahk_0000000000000000_AAAA"),
        Some(wrong_secret.as_str()),
    ] {
        let reply = get(&url, key).await;
        assert_eq!(reply.status, 401, "key {key:?}");
        assert_eq!(reply.error_code(), "unauthorized");
        assert!(
            reply.header("x-ratelimit-limit").is_none(),
            "no account, no limit headers"
        );
    }
    assert_eq!(get(&url, Some(&fx.key)).await.status, 200);
}

#[tokio::test]
async fn another_accounts_agent_is_indistinguishable_from_a_missing_one() {
    let fx = Fixture::start();
    let bob = fx.env.account_with_key("bob", "free");
    let bobs_agent = fx.env.apply_agent(&manifest("bravo"), "bob");
    let missing = "00000000-0000-4000-8000-000000000000";
    let posts = [
        ("chat", json!({"message": "hi"})),
        ("commands/hello/execute", json!({"parameters": {"name": "x"}})),
        ("chatapp/send", json!({"chatId": 1, "text": "hi"})),
        ("social/post", json!({"text": "hi"})),
        (
            "wallet/solana/transfer",
            json!({"recipientAddress": "x", "amountUsdc": 1}),
        ),
    ];
    for (path, body) in &posts {
        let theirs = post_json(&fx.url(&format!("/v1/agents/{bobs_agent}/{path}")), Some(&fx.key), body).await;
        let none = post_json(&fx.url(&format!("/v1/agents/{missing}/{path}")), Some(&fx.key), body).await;
        assert_eq!((theirs.status, none.status), (404, 404), "{path}");
        // The API answers a missing agent on chatapp/send with chatapp_not_configured.
        let expected = if *path == "chatapp/send" {
            "chatapp_not_configured"
        } else {
            "not_found"
        };
        assert_eq!(theirs.error_code(), expected, "{path}");
        assert_eq!(none.error_code(), expected, "{path}");
        assert_eq!(
            theirs.error_message().replace(&bobs_agent, "ID"),
            none.error_message().replace(missing, "ID")
        );
    }
    for path in ["commands", "wallet/base/balance"] {
        let theirs = get(&fx.url(&format!("/v1/agents/{bobs_agent}/{path}")), Some(&fx.key)).await;
        assert_eq!(theirs.status, 404, "{path}");
        assert_eq!(theirs.error_code(), "not_found");
    }
    // By username too, and the owner still sees it.
    assert_eq!(
        get(&fx.url("/v1/agents/bravo/commands"), Some(&fx.key)).await.status,
        404
    );
    let own = get(&fx.url("/v1/agents/bravo/commands"), Some(&bob)).await;
    assert_eq!(own.status, 200);
    assert_eq!(own.json()["data"]["agent_id"], bobs_agent.as_str());
}

#[tokio::test]
async fn key_use_is_recorded() {
    let fx = Fixture::start();
    let before = fx.env.cli_json(&["key", "list", "--account", "alice"]);
    assert!(before["keys"][0]["last_used_at"].is_null());
    assert_eq!(
        get(&fx.url(&format!("/v1/agents/{}/commands", fx.agent_id)), Some(&fx.key))
            .await
            .status,
        200
    );
    // Recorded off the request path; give it a moment.
    let mut last_used = serde_json::Value::Null;
    for _ in 0..50 {
        last_used = fx.env.cli_json(&["key", "list", "--account", "alice"])["keys"][0]["last_used_at"].clone();
        if !last_used.is_null() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(last_used.as_str().is_some_and(|t| t.ends_with('Z')), "{last_used}");
}

#[tokio::test]
async fn command_list_shows_the_manifest_and_filters_by_integration() {
    let fx = Fixture::start();
    let reply = get(&fx.url("/v1/agents/alpha/commands"), Some(&fx.key)).await;
    assert_eq!(reply.status, 200);
    let body = reply.json();
    assert_eq!(body["success"], true);
    assert_eq!(body["data"]["agent_id"], fx.agent_id.as_str());
    assert_eq!(body["data"]["agent_username"], "alpha");
    let commands = body["data"]["commands"].as_array().unwrap();
    let names: Vec<&str> = commands.iter().map(|c| c["command"].as_str().unwrap()).collect();
    assert_eq!(names, ["hello", "secret", "about"]);
    let hello = &commands[0];
    assert_eq!(hello["handler_type"], "simple_text");
    assert_eq!(hello["response_format"], "text");
    assert_eq!(
        hello["parameters"],
        json!([{ "name": "name", "type": "string", "required": true, "description": "Who" }])
    );
    assert_eq!(
        hello["parameterSchema"],
        json!([{ "name": "name", "required": true, "schema": { "type": "string", "description": "Who" } }])
    );
    assert_eq!(hello["price_usd"], json!(0.05));
    assert!(commands.iter().all(|c| c["parameterSchema"].is_array()));

    let names_for = |body: serde_json::Value| -> Vec<String> {
        body["data"]["commands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["command"].as_str().unwrap().to_string())
            .collect()
    };
    let chatapp = get(&fx.url("/v1/agents/alpha/commands?integration=chatapp"), Some(&fx.key)).await;
    assert_eq!(
        names_for(chatapp.json()),
        ["hello"],
        "disabled commands are not offered"
    );
    let social = get(&fx.url("/v1/agents/alpha/commands?integration=social"), Some(&fx.key)).await;
    assert_eq!(names_for(social.json()), ["about"]);
    let bad = get(&fx.url("/v1/agents/alpha/commands?integration=fax"), Some(&fx.key)).await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.error_code(), "validation_error");
    assert!(bad.error_message().contains("integration"));
}

/// A browser on an origin the operator lists may call the keyed API
/// (preflight answered, the rate headers readable); any other origin, and every origin by
/// default, gets no CORS permission.
#[tokio::test]
async fn browsers_may_call_the_keyed_api_only_from_listed_origins() {
    let preflight = |server: &TestServer, origin: &str| {
        let request = client()
            .request(reqwest::Method::OPTIONS, server.url("/v1/agents/alpha/chat"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "x-api-key,content-type");
        send(request)
    };
    let env = TestEnv::new().with_env("AGENT_HOST_CORS_ALLOWED_ORIGINS", "https://app.example.com/");
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&manifest("alpha"), "alice");
    let server = env.serve();
    let allowed = preflight(&server, "https://app.example.com").await;
    assert!(allowed.status < 300, "{}", allowed.text);
    assert_eq!(
        allowed.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
    let headers = allowed.header("access-control-allow-headers").unwrap_or_default();
    assert!(headers.contains("x-api-key"), "{headers}");
    let elsewhere = preflight(&server, "https://evil.example.net").await;
    assert_eq!(elsewhere.header("access-control-allow-origin"), None);
    let listed = send(
        client()
            .get(server.url("/v1/agents/alpha/commands"))
            .header("x-api-key", &key)
            .header("origin", "https://app.example.com"),
    )
    .await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert_eq!(
        listed.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
    let exposed = listed.header("access-control-expose-headers").unwrap_or_default();
    assert!(
        exposed.contains("x-ratelimit-remaining") && exposed.contains("retry-after"),
        "{exposed}"
    );

    let closed = Fixture::start();
    let reply = preflight(&closed.server, "https://app.example.com").await;
    assert_eq!(reply.header("access-control-allow-origin"), None, "off by default");

    // An origin that could never match stops the start, naming the setting.
    let bad = TestEnv::new().with_env("AGENT_HOST_CORS_ALLOWED_ORIGINS", "app.example.com/path");
    let out = bad.cli(&["account", "create", "zed"]);
    assert!(
        !out.status.success() && out.stderr.contains("CORS_ALLOWED_ORIGINS"),
        "{}",
        out.stderr
    );
}
