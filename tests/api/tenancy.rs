//! The console's mutating routes, read as a stranger with a free account would: another
//! account's key, webhook, deliveries, wallet alert and chat usage are not found (and
//! nothing of theirs changes or is sent), a `use` or `spend` key of the owner's own is
//! refused `insufficient_scope` on each, and a webhook address that would reach somewhere
//! it must not is refused when it is given.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::webhooks::Receiver;
use crate::support::*;

/// One mutating (or private) route of the console, with a body that would pass.
struct Route {
    method: Method,
    path: String,
    body: Option<Value>,
}

fn route(method: Method, path: String, body: Option<Value>) -> Route {
    Route { method, path, body }
}

async fn call(server: &TestServer, key: &str, route: &Route) -> Reply {
    keyed(route.method.clone(), &server.url(&route.path), key, route.body.as_ref()).await
}

#[tokio::test]
async fn no_account_reaches_anothers_resources_and_no_narrow_key_manages() {
    let receiver = Receiver::start().await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", "127.0.0.1")
        .with_env("AGENT_HOST_WEBHOOK_ALLOW_PRIVATE", "127.0.0.1")
        .with_env("AGENT_HOST_WEBHOOK_POLL_MS", "50");
    let alice = env.account_with_key("alice", "free");
    let mallory = env.account_with_key("mallory", "free");
    env.apply_agent(&manifest("alpha"), "alice");
    env.apply_agent(&manifest("mallet"), "mallory");
    env.create_wallet("alpha", "base");
    let server = env.serve();
    // The owner's own keys of scope use and spend (made before her endpoint listens).
    let mut narrow = Vec::new();
    for scope in ["use", "spend"] {
        let made = post_json(
            &server.url("/v1/account/keys"),
            Some(&alice),
            &json!({ "scope": scope }),
        )
        .await;
        narrow.push((scope, made.json()["data"]["key"].as_str().unwrap().to_string()));
    }

    // Alice's things: a named key, an endpoint with one delivery, a wallet alert.
    let made = post_json(&server.url("/v1/account/keys"), Some(&alice), &json!({ "name": "ci" })).await;
    assert_eq!(made.status, 201, "{}", made.text);
    let key_id = made.json()["data"]["id"].as_str().unwrap().to_string();
    // Her only delivery: the key made after the endpoint was registered.
    let endpoint = post_json(
        &server.url("/v1/account/webhooks"),
        Some(&alice),
        &json!({ "url": receiver.url(), "events": ["key.created"], "description": "ops" }),
    )
    .await;
    assert_eq!(endpoint.status, 201, "{}", endpoint.text);
    let endpoint_id = endpoint.json()["data"]["id"].as_str().unwrap().to_string();
    let made = post_json(&server.url("/v1/account/keys"), Some(&alice), &json!({ "name": "bot" })).await;
    assert_eq!(made.status, 201, "{}", made.text);
    receiver.until("the key's event", |r| r.len() == 1).await;
    let listed = get(
        &server.url(&format!("/v1/account/webhooks/{endpoint_id}/deliveries")),
        Some(&alice),
    )
    .await;
    let delivery_id = listed.json()["data"]["deliveries"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let alert = "/v1/account/agents/alpha/wallets/base/alert".to_string();
    let set = keyed(
        Method::PUT,
        &server.url(&alert),
        &alice,
        Some(&json!({ "below_usdc": "5.00" })),
    )
    .await;
    assert_eq!(set.status, 200, "{}", set.text);

    let routes = [
        route(
            Method::PATCH,
            format!("/v1/account/keys/{key_id}"),
            Some(json!({ "name": "taken" })),
        ),
        route(
            Method::PATCH,
            format!("/v1/account/webhooks/{endpoint_id}"),
            Some(json!({ "enabled": false })),
        ),
        route(
            Method::GET,
            format!("/v1/account/webhooks/{endpoint_id}/deliveries"),
            None,
        ),
        route(
            Method::POST,
            format!("/v1/account/webhooks/{endpoint_id}/deliveries/{delivery_id}/resend"),
            None,
        ),
        route(Method::PUT, alert.clone(), Some(json!({ "below_usdc": "0.01" }))),
        route(Method::DELETE, alert.clone(), None),
        route(Method::GET, "/v1/account/agents/alpha/chat-usage".into(), None),
        route(Method::DELETE, format!("/v1/account/webhooks/{endpoint_id}"), None),
    ];
    // Another account: not found, exactly as if none existed. The owner's own keys of scope
    // use and spend: refused before anything is read.
    let mut callers = vec![("another account's key", mallory.clone(), 404, "not_found")];
    for (scope, key) in &narrow {
        callers.push((scope, key.clone(), 403, "insufficient_scope"));
    }
    for (who, key, status, code) in &callers {
        for route in &routes {
            let reply = call(&server, key, route).await;
            assert_eq!(
                (reply.status, reply.error_code()),
                (*status, code.to_string()),
                "{who}, {} {}: {}",
                route.method,
                route.path,
                reply.text
            );
        }
    }

    // Nothing of Alice's changed.
    let keys = get(&server.url("/v1/account/keys"), Some(&alice)).await;
    let ci = keys.json()["data"]["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == key_id.as_str())
        .cloned()
        .unwrap();
    assert_eq!(ci["name"], "ci", "{ci}");
    let shown = get(
        &server.url(&format!("/v1/account/webhooks/{endpoint_id}")),
        Some(&alice),
    )
    .await;
    assert_eq!(shown.status, 200, "{}", shown.text);
    assert_eq!(shown.json()["data"]["enabled"], true, "{}", shown.text);
    let wallets = get(&server.url("/v1/account/agents/alpha/wallets"), Some(&alice)).await;
    let alert = wallets.json()["data"]["wallets"][0]["low_balance_alert"].clone();
    assert_eq!(alert["below_micro_usdc"], 5_000_000, "{}", wallets.text);
    // No resend reached her receiver: her own resend is the second delivery it ever gets.
    let resent = keyed(
        Method::POST,
        &server.url(&format!(
            "/v1/account/webhooks/{endpoint_id}/deliveries/{delivery_id}/resend"
        )),
        &alice,
        None,
    )
    .await;
    assert!(resent.status < 300, "{}", resent.text);
    let received = receiver.until("her own resend", |r| r.len() >= 2).await;
    assert_eq!(received.len(), 2, "{received:?}");
}

#[tokio::test]
async fn a_webhook_address_that_would_reach_elsewhere_is_refused() {
    let receiver = Receiver::start().await;
    // A receiver that answers with a redirect to another address (here: the receiver's,
    // which would count a request that followed it).
    let elsewhere = receiver.url();
    let redirecting = FakeServer::start(axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let elsewhere = elsewhere.clone();
            async move { (axum::http::StatusCode::FOUND, [("location", elsewhere)], "moved") }
        }),
    ))
    .await;
    let allowed = format!("127.0.0.1:{},127.0.0.1:{}", receiver.server.port, redirecting.port);
    let env = TestEnv::new()
        .with_env("AGENT_HOST_WEBHOOK_ALLOW_PRIVATE", &allowed)
        .with_env("AGENT_HOST_WEBHOOK_MAX_ENDPOINTS", "2")
        .with_env("AGENT_HOST_WEBHOOK_POLL_MS", "50");
    let key = env.account_with_key("alice", "free");
    let server = env.serve();
    let endpoints = server.url("/v1/account/webhooks");
    let refused = |reply: &Reply, fragment: &str| {
        assert_eq!(
            (reply.status, reply.error_code()),
            (400, "validation_error".to_string()),
            "{}",
            reply.text
        );
        assert!(reply.error_message().contains(fragment), "{fragment}: {}", reply.text);
    };
    let register = |url: String, events: Value, description: &str| {
        let body = json!({ "url": url, "events": events, "description": description });
        let (endpoints, key) = (endpoints.clone(), key.clone());
        async move { post_json(&endpoints, Some(&key), &body).await }
    };
    let all = json!(["*"]);
    for url in [
        "ftp://hooks.example.com/in",
        "file:///etc/passwd",
        "javascript:alert(1)",
    ] {
        refused(&register(url.into(), all.clone(), "x").await, "http or https");
    }
    refused(
        &register("https://user:secret@hooks.example.com/in".into(), all.clone(), "x").await,
        "no credentials",
    );
    let long = format!("https://hooks.example.com/{}", "a".repeat(2049 - 26));
    assert_eq!(long.chars().count(), 2049);
    refused(&register(long, all.clone(), "x").await, "at most 2048");
    refused(
        &register(receiver.url(), all.clone(), "line one\nline two").await,
        "'description'",
    );
    refused(&register(receiver.url(), json!([]), "x").await, "events");
    for url in [
        "http://[::ffff:127.0.0.1]:80/hook",
        "http://[::ffff:169.254.169.254]/latest/meta-data",
        "http://[::ffff:a9fe:a9fe]/latest/meta-data",
    ] {
        refused(&register(url.into(), all.clone(), "x").await, "may not call");
    }

    // A good endpoint may not be moved to a private address afterwards.
    let made = register(receiver.url(), json!(["key.created"]), "ops").await;
    assert_eq!(made.status, 201, "{}", made.text);
    let id = made.json()["data"]["id"].as_str().unwrap().to_string();
    let moved = keyed(
        Method::PATCH,
        &server.url(&format!("/v1/account/webhooks/{id}")),
        &key,
        Some(&json!({ "url": "http://169.254.169.254/latest" })),
    )
    .await;
    refused(&moved, "may not call");
    let shown = get(&server.url(&format!("/v1/account/webhooks/{id}")), Some(&key)).await;
    assert_eq!(shown.json()["data"]["url"], receiver.url(), "{}", shown.text);

    // The redirect is not followed: once its attempt is recorded (302), the receiver has
    // only its own endpoint's delivery.
    let redirected = register(redirecting.url("/hook"), json!(["key.created"]), "moved").await;
    assert_eq!(redirected.status, 201, "{}", redirected.text);
    let redirected = redirected.json()["data"]["id"].as_str().unwrap().to_string();
    let made = post_json(&server.url("/v1/account/keys"), Some(&key), &json!({ "name": "bot" })).await;
    assert_eq!(made.status, 201, "{}", made.text);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let attempt = loop {
        let listed = get(
            &server.url(&format!("/v1/account/webhooks/{redirected}/deliveries")),
            Some(&key),
        )
        .await;
        let first = listed.json()["data"]["deliveries"][0].clone();
        if first["attempts"].as_u64().unwrap_or(0) >= 1 {
            break first;
        }
        assert!(std::time::Instant::now() < deadline, "never attempted: {}", listed.text);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(attempt["last_status"], 302, "{attempt}");
    let received = receiver.until("its own delivery", |r| !r.is_empty()).await;
    assert_eq!(received.len(), 1, "{received:?}");

    // The quota: two endpoints, then no more.
    let over = register("https://hooks.example.com/third".into(), all.clone(), "x").await;
    assert_eq!(over.status, 403, "{}", over.text);
    assert_eq!(over.error_code(), "quota_exceeded", "{}", over.text);
}
