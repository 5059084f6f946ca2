use serde_json::json;

use crate::support::*;

fn chat_url(fx: &Fixture) -> String {
    fx.url(&format!("/v1/agents/{}/chat", fx.agent_id))
}

#[tokio::test]
async fn malformed_json_is_a_validation_error() {
    let fx = Fixture::start();
    let request = client()
        .post(chat_url(&fx))
        .header("x-api-key", &fx.key)
        .header("content-type", "application/json")
        .body("{\"message\": ");
    let reply = send(request).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.error_code(), "validation_error");
    assert!(
        reply.error_message().starts_with("Malformed JSON body"),
        "{}",
        reply.text
    );
    // Rate-limit headers ride on errors too.
    assert_eq!(reply.header("x-ratelimit-limit"), Some("60"));
}

#[tokio::test]
async fn a_wrong_content_type_is_a_validation_error() {
    let fx = Fixture::start();
    let request = client()
        .post(chat_url(&fx))
        .header("x-api-key", &fx.key)
        .header("content-type", "text/plain")
        .body("{\"message\": \"hi\"}");
    let reply = send(request).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.error_code(), "validation_error");
    assert!(reply.error_message().contains("application/json"));
}

#[tokio::test]
async fn a_field_of_the_wrong_type_is_named() {
    let fx = Fixture::start();
    let cases = [
        (json!({"message": 5}), "message"),
        (json!({"message": "hi", "maxToolCalls": "five"}), "maxToolCalls"),
        (json!({"message": "hi", "maxToolCalls": 11}), "maxToolCalls"),
        (json!({"message": "hi", "maxToolCalls": 1.5}), "maxToolCalls"),
        (json!({"message": "hi", "toolsEnabled": "yes"}), "toolsEnabled"),
        (
            json!({"message": "hi", "conversationHistory": [{"role": "robot", "content": "x"}]}),
            "conversationHistory[0].role",
        ),
        (json!({"message": "x".repeat(10_001)}), "message"),
        (json!({}), "message"),
        (json!([1, 2]), ""),
    ];
    for (body, field) in cases {
        let reply = post_json(&chat_url(&fx), Some(&fx.key), &body).await;
        assert_eq!(reply.status, 400, "{body}");
        assert_eq!(reply.error_code(), "validation_error");
        assert!(
            reply.error_message().contains(field),
            "message {:?} should name {field}",
            reply.error_message()
        );
    }
    // 10,000 characters of a two-byte letter is within the limit: characters, not bytes.
    let ok = post_json(&chat_url(&fx), Some(&fx.key), &json!({"message": "é".repeat(10_000)})).await;
    assert_eq!(
        ok.status, 503,
        "valid, so it reached the (unconfigured) model: {}",
        ok.text
    );
}

#[tokio::test]
async fn an_oversized_body_is_413() {
    let env = TestEnv::new().with_env("AGENT_HOST_MAX_BODY_BYTES", "2048");
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&manifest("alpha"), "alice");
    let server = env.serve();
    let body = json!({"message": "x".repeat(4096)});
    let reply = post_json(&server.url("/v1/agents/alpha/chat"), Some(&key), &body).await;
    assert_eq!(reply.status, 413);
    assert_eq!(reply.error_code(), "validation_error");
    assert!(reply.error_message().contains("too large"));
}

#[tokio::test]
async fn unknown_routes_and_wrong_methods_answer_in_json() {
    let fx = Fixture::start();
    let reply = get(&fx.url("/v2/anything"), Some(&fx.key)).await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.error_code(), "not_found");
    let reply = send(
        client()
            .delete(fx.url(&chat_url(&fx).replace(&fx.server.base, "")))
            .header("x-api-key", &fx.key),
    )
    .await;
    assert_eq!(reply.status, 405);
    assert_eq!(reply.error_code(), "method_not_allowed");
    assert_eq!(reply.header("allow"), Some("POST"));
}

#[tokio::test]
async fn request_bodies_are_validated_naming_the_field() {
    let fx = Fixture::start();
    let agent = &fx.agent_id;
    let bad_cases = [
        (
            format!("/v1/agents/{agent}/commands/hello/execute"),
            json!({"parameters": "name=Ann"}),
            "parameters",
        ),
        (
            format!("/v1/agents/{agent}/chatapp/send"),
            json!({"chatId": "abc", "text": "hi"}),
            "chatId",
        ),
        (
            format!("/v1/agents/{agent}/chatapp/send"),
            json!({"chatId": 1, "text": ""}),
            "text",
        ),
        (
            format!("/v1/agents/{agent}/chatapp/send"),
            json!({"chatId": 1, "text": "hi", "parseMode": "BBCode"}),
            "parseMode",
        ),
        (
            format!("/v1/agents/{agent}/chatapp/send"),
            json!({"chatId": 1, "text": "hi", "inlineKeyboard": [[{"text": "a"}]]}),
            "inlineKeyboard[0][0]",
        ),
        (
            format!("/v1/agents/{agent}/chatapp/send"),
            json!({"chatId": 1, "text": "é".repeat(4097)}),
            "text",
        ),
        (
            format!("/v1/agents/{agent}/chatapp/send"),
            json!({"chatId": 1, "text": "hi", "inlineKeyboard": [[{"text": "a", "callback_data": "x".repeat(65)}]]}),
            "callback_data",
        ),
        (
            format!("/v1/agents/{agent}/chatapp/send"),
            json!({"chatId": "-100abc", "text": "hi"}),
            "chatId",
        ),
        (format!("/v1/agents/{agent}/social/post"), json!({}), "mediaUrls"),
        (
            format!("/v1/agents/{agent}/wallet/base/transfer"),
            json!({"amountUsdc": 1}),
            "recipientAddress",
        ),
        (
            format!("/v1/agents/{agent}/wallet/base/transfer"),
            json!({"recipientAddress": 7, "amountUsdc": 1}),
            "recipientAddress",
        ),
        (
            format!("/v1/agents/{agent}/wallet/base/transfer"),
            json!({"recipientAddress": "0x1", "amountUsdc": 0}),
            "amountUsdc",
        ),
        (
            format!("/v1/agents/{agent}/wallet/base/transfer"),
            json!({"recipientAddress": "0x1", "amountUsdc": -2}),
            "amountUsdc",
        ),
        (
            format!("/v1/agents/{agent}/wallet/base/transfer"),
            json!({"recipientAddress": "0x1", "amountUsdc": 0.0000001}),
            "amountUsdc",
        ),
        (
            format!("/v1/agents/{agent}/wallet/base/transfer"),
            json!({"recipientAddress": "0x1", "amountUsdc": "5"}),
            "amountUsdc",
        ),
        (
            format!("/v1/agents/{agent}/wallet/dogecoin/transfer"),
            json!({"recipientAddress": "0x1", "amountUsdc": 1}),
            "network",
        ),
        (
            format!("/v1/agents/{agent}/wallet/base/transfer"),
            json!({"recipientAddress": "0xabc", "amountUsdc": 1234.567891}),
            "recipientAddress",
        ),
    ];
    for (path, body, field) in &bad_cases {
        let reply = post_json(&fx.url(path), Some(&fx.key), body).await;
        assert_eq!(reply.status, 400, "{path} {body}: {}", reply.text);
        assert_eq!(reply.error_code(), "validation_error");
        assert!(
            reply.error_message().contains(field),
            "{path}: {:?} should name {field}",
            reply.error_message()
        );
    }
    let social = post_json(
        &fx.url(&format!("/v1/agents/{agent}/social/post")),
        Some(&fx.key),
        &json!({}),
    )
    .await;
    assert!(social.error_message().contains("text") && social.error_message().contains("mediaUrls"));
    let balance = get(
        &fx.url(&format!("/v1/agents/{agent}/wallet/ethereum/balance")),
        Some(&fx.key),
    )
    .await;
    assert_eq!(balance.status, 400);
    assert_eq!(balance.error_code(), "validation_error");
}

#[tokio::test]
async fn x402_routes_answer_in_their_own_envelope() {
    let fx = Fixture::start();
    let reply = get(&fx.url("/x402/solana/nobody"), None).await;
    assert_eq!(reply.status, 404);
    let body = reply.json();
    assert_eq!(body["success"], false);
    assert_eq!(body["code"], "agent_not_found");
    assert_eq!(body["x402Version"], 1);
    assert!(body["error"].is_string());
}

#[tokio::test]
async fn the_nul_character_is_refused_in_bodies_paths_and_queries() {
    let fx = Fixture::start();
    let agent = &fx.agent_id;
    let replies = [
        post_json(&chat_url(&fx), Some(&fx.key), &json!({"message": "a\u{0}b"})).await,
        post_json(
            &fx.url("/v1/account/agents"),
            Some(&fx.key),
            &json!({"username": "nul", "name": "a\u{0}"}),
        )
        .await,
        get(
            &fx.url(&format!("/v1/account/agents/{agent}/logs?command=L%18%00")),
            Some(&fx.key),
        )
        .await,
        get(&fx.url("/v1/agents/a%00b/commands"), Some(&fx.key)).await,
    ];
    for reply in replies {
        assert_eq!(reply.status, 400, "{}", reply.text);
        assert_eq!(reply.error_code(), "validation_error");
        assert!(reply.error_message().contains("NUL"), "{}", reply.text);
    }
    // Text that merely mentions the escape is text.
    let mention = post_json(&chat_url(&fx), Some(&fx.key), &json!({"message": "say \\u0000"})).await;
    assert_ne!(mention.status, 400, "{}", mention.text);
}
