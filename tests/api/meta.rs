use serde_json::Value;

use crate::support::*;

#[tokio::test]
async fn descriptor_lists_the_spec_endpoints() {
    let fx = Fixture::start();
    let reply = get(&fx.url("/"), None).await;
    assert_eq!(reply.status, 200);
    let body = reply.json();
    assert_eq!(body["version"], "1.0.0");
    let endpoints = body["endpoints"].as_object().unwrap();
    for name in [
        "health",
        "chat",
        "listCommands",
        "executeCommand",
        "chatappSend",
        "socialPost",
        "walletBalance",
        "walletTransfer",
    ] {
        assert!(endpoints.contains_key(name), "descriptor lacks {name}: {body}");
    }
}

#[tokio::test]
async fn health_reports_database_and_uptime() {
    let fx = Fixture::start();
    let reply = get(&fx.url("/health"), None).await;
    assert_eq!(reply.status, 200);
    let body = reply.json();
    assert_eq!(body["status"], "ok");
    assert_eq!(body["version"], "1.0.0");
    assert_eq!(body["database"]["reachable"], true);
    assert!(body["uptimeSeconds"].as_u64().is_some());
    assert!(body["timestamp"].as_str().unwrap().ends_with('Z'));
}

/// Every operation the document describes is really routed, with the method it names,
/// behind a key when it says so; every other method on its path is a JSON 405.
#[tokio::test]
async fn openapi_document_matches_the_router() {
    let fx = Fixture::start();
    let doc = get(&fx.url("/openapi.json"), None).await.json();
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    let documented: Vec<&str> = paths.keys().map(String::as_str).collect();
    for expected in [
        "/health",
        "/v1/agents/{agentId}/chat",
        "/v1/agents/{agentId}/commands",
        "/v1/agents/{agentId}/commands/{commandName}/execute",
        "/v1/agents/{agentId}/chatapp/send",
        "/v1/agents/{agentId}/social/post",
        "/v1/agents/{agentId}/wallet/{network}/balance",
        "/v1/agents/{agentId}/wallet/{network}/transfer",
        "/x402/{network}/{agentId}",
    ] {
        assert!(documented.contains(&expected), "{expected} is not documented");
    }
    let http = client();
    for (path, item) in paths {
        let concrete = path
            .replace("{agentId}", &fx.agent_id)
            .replace("{commandName}", "hello")
            .replace("{network}", "solana");
        let methods: Vec<&str> = item.as_object().unwrap().keys().map(String::as_str).collect();
        for method in ["get", "post", "put", "delete", "patch"] {
            let request = http
                .request(method.to_uppercase().parse().unwrap(), fx.url(&concrete))
                .header("x-api-key", &fx.key)
                .json(&serde_json::json!({}));
            let reply = send(request).await;
            if methods.contains(&method) {
                assert_ne!(reply.status, 405, "{method} {path} is documented but not routed");
                if reply.status == 404 {
                    assert!(
                        !reply.text.contains("No route"),
                        "{method} {path} is documented but not routed"
                    );
                }
                let op = &item[method];
                // `security: []` (the paid operations) names no key.
                if op["security"].as_array().is_some_and(|schemes| !schemes.is_empty()) {
                    let bare = send(http.request(method.to_uppercase().parse().unwrap(), fx.url(&concrete))).await;
                    assert_eq!(bare.status, 401, "{method} {path} should need a key");
                }
                for status in op["responses"].as_object().unwrap().keys() {
                    assert!(status.len() == 3, "{status}");
                }
                assert!(
                    op["responses"].get(reply.status.to_string()).is_some() || reply.status == 400,
                    "{method} {path} answered {} which it does not document: {}",
                    reply.status,
                    reply.text
                );
            } else {
                assert_eq!(reply.status, 405, "{method} {path} should be 405, got {}", reply.status);
                assert_eq!(reply.error_code(), "method_not_allowed");
            }
        }
    }
}

#[tokio::test]
async fn every_response_is_json() {
    let fx = Fixture::start();
    for path in ["/", "/health", "/openapi.json", "/nowhere", "/v1/agents/x/commands"] {
        let reply = get(&fx.url(path), None).await;
        assert_eq!(reply.header("content-type"), Some("application/json"), "{path}");
        let _: Value = reply.json();
    }
}

/// API answers, errors included, are never sniffed, run or framed by a
/// browser; the console keeps its own page policy.
#[tokio::test]
async fn api_answers_carry_nosniff_and_a_deny_all_policy() {
    let fx = Fixture::start();
    for path in ["/", "/health", "/nowhere", "/v1/agents/x/commands", "/x402/base/nobody"] {
        let reply = get(&fx.url(path), None).await;
        assert_eq!(reply.header("x-content-type-options"), Some("nosniff"), "{path}");
        assert_eq!(
            reply.header("content-security-policy"),
            Some("default-src 'none'; frame-ancestors 'none'"),
            "{path}"
        );
    }
    let console = get(&fx.url("/console/"), None).await;
    let policy = console.header("content-security-policy").unwrap_or_default();
    assert!(policy.contains("script-src 'self'"), "{policy}");
}
