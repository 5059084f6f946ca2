//! `POST /v1/agents/:agentId/chatapp/send` against a local server speaking the Telegram
//! Bot API wire format, errors included.

use std::sync::{Arc, Mutex};

use axum::extract::Path;
use axum::routing::post;
use serde_json::{Value, json};

use crate::support::*;

pub(crate) const TOKEN: &str = "123456:TEST-token_abc";
/// Where Telegram is told to send updates: HTTPS, as it requires, at the address a proxy in
/// front of the server would have. The tests deliver the updates to the server themselves.
const PUBLIC_HOOK: &str = "https://agents.example.com/chatapp/alpha/webhook";

/// A Bot API stand-in: `/bot<token>/getMe` and `/bot<token>/sendMessage`, with Telegram's
/// real error bodies chosen by the chat id.
pub(crate) async fn fake_telegram(sent: Arc<Mutex<Vec<Value>>>) -> FakeServer {
    let router = axum::Router::new().route(
        "/{bot}/{method}",
        post(move |Path((bot, method)): Path<(String, String)>, axum::Json(body): axum::Json<Value>| {
            let sent = sent.clone();
            async move {
                let fail = |status: u16, description: &str, extra: Value| {
                    let mut body = json!({ "ok": false, "error_code": status, "description": description });
                    if !extra.is_null() {
                        body["parameters"] = extra;
                    }
                    (axum::http::StatusCode::from_u16(status).unwrap(), axum::Json(body))
                };
                if bot != format!("bot{TOKEN}") {
                    return fail(401, "Unauthorized", Value::Null);
                }
                match method.as_str() {
                    "getMe" => (
                        axum::http::StatusCode::OK,
                        axum::Json(json!({ "ok": true, "result": { "id": 123456, "is_bot": true, "first_name": "Helper", "username": "helper_bot" } })),
                    ),
                    "setWebhook" if !body["url"].as_str().unwrap_or_default().starts_with("https://") => {
                        fail(400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook", Value::Null)
                    }
                    "setWebhook" => {
                        sent.lock().unwrap().push(json!({ "setWebhook": body }));
                        (axum::http::StatusCode::OK, axum::Json(json!({ "ok": true, "result": true, "description": "Webhook was set" })))
                    }
                    "sendMessage" => {
                        let first_try = {
                            let mut sent = sent.lock().unwrap();
                            let tried = sent.iter().any(|b| b["chat_id"] == 777777);
                            sent.push(body.clone());
                            !tried
                        };
                        match body["chat_id"].as_i64().unwrap_or_default() {
                            777777 if first_try => fail(429, "Too Many Requests: retry after 1", json!({ "retry_after": 1 })),
                            404404 => fail(400, "Bad Request: chat not found", Value::Null),
                            403403 => fail(403, "Forbidden: bot was blocked by the user", Value::Null),
                            429429 => fail(429, "Too Many Requests: retry after 7", json!({ "retry_after": 7 })),
                            500500 => fail(400, "Bad Request: can't parse entities: Unsupported start tag \"q\" at byte offset 0", Value::Null),
                            _ if body["reply_parameters"]["message_id"] == 999 => fail(400, "Bad Request: message to be replied not found", Value::Null),
                            chat => (
                                axum::http::StatusCode::OK,
                                axum::Json(json!({ "ok": true, "result": {
                                    "message_id": 42, "date": 1795341600,
                                    "from": { "id": 123456, "is_bot": true, "first_name": "Helper", "username": "helper_bot" },
                                    "chat": { "id": chat, "type": if chat < 0 { "supergroup" } else { "private" } },
                                    "text": body["text"] } })),
                            ),
                        }
                    }
                    _ => fail(404, "Not Found", Value::Null),
                }
            }
        }),
    );
    FakeServer::start(router).await
}

struct Bot {
    env: TestEnv,
    server: TestServer,
    key: String,
    sent: Arc<Mutex<Vec<Value>>>,
    _telegram: FakeServer,
}

const MASTER: &str = "0202020202020202020202020202020202020202020202020202020202020202";

async fn connected() -> Bot {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let telegram = fake_telegram(sent.clone()).await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_CHATAPP_API_BASE", &telegram.base)
        .with_env("AGENT_HOST_MASTER_KEY", MASTER);
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&manifest("alpha"), "alice");
    let connected = env.cli_json(&["chatapp", "connect", "--agent", "alpha", "--token", TOKEN]);
    assert_eq!(connected["bot_username"], "helper_bot");
    let server = env.serve();
    Bot {
        env,
        server,
        key,
        sent,
        _telegram: telegram,
    }
}

async fn send_msg(bot: &Bot, agent: &str, body: Value) -> Reply {
    post_json(
        &bot.server.url(&format!("/v1/agents/{agent}/chatapp/send")),
        Some(&bot.key),
        &body,
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn sends_through_the_bot_with_the_real_wire_format() {
    let bot = connected().await;
    let reply = send_msg(&bot, "alpha", json!({
        "chatId": "-1001234567890",
        "text": "Hello <b>group</b>",
        "parseMode": "HTML",
        "replyToMessageId": 7,
        "inlineKeyboard": [[{"text": "Yes", "callback_data": "yes"}, {"text": "Docs", "url": "https://example.com"}]],
    }))
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        reply.json(),
        json!({ "success": true, "data": {
        "message_id": 42, "chat_id": "-1001234567890", "text": "Hello <b>group</b>", "sent_at": "2026-11-22T10:00:00.000Z" } })
    );
    let sent = bot.sent.lock().unwrap()[0].clone();
    assert_eq!(
        sent,
        json!({
            "chat_id": -1001234567890i64,
            "text": "Hello <b>group</b>",
            "parse_mode": "HTML",
            "reply_parameters": { "message_id": 7, "allow_sending_without_reply": false },
            "reply_markup": { "inline_keyboard": [[{"text": "Yes", "callback_data": "yes"}, {"text": "Docs", "url": "https://example.com"}]] },
        })
    );
    // The token is stored sealed, never in the clear.
    assert!(!bot.env.database_contains(TOKEN.as_bytes()));
}

#[tokio::test(flavor = "multi_thread")]
async fn telegram_refusals_map_to_the_spec_codes() {
    let bot = connected().await;
    let cases = [
        (
            json!({"chatId": 404404, "text": "hi"}),
            404,
            "chat_not_found",
            "chat not found",
        ),
        (json!({"chatId": 403403, "text": "hi"}), 403, "bot_blocked", "blocked"),
        (
            json!({"chatId": 1, "text": "hi", "replyToMessageId": 999}),
            400,
            "validation_error",
            "replied not found",
        ),
        (
            json!({"chatId": 500500, "text": "<q>hi", "parseMode": "HTML"}),
            500,
            "chatapp_send_failed",
            "can't parse entities",
        ),
    ];
    for (body, status, code, words) in cases {
        let reply = send_msg(&bot, "alpha", body.clone()).await;
        assert_eq!((reply.status, reply.error_code()), (status, code.to_string()), "{body}");
        assert!(
            reply.error_message().contains(words.split(' ').next().unwrap()),
            "{}",
            reply.error_message()
        );
    }
    let limited = send_msg(&bot, "alpha", json!({"chatId": 429429, "text": "hi"})).await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.error_code(), "rate_limit_exceeded");
    assert_eq!(limited.header("retry-after"), Some("7"));
    assert!(limited.error_message().contains("retry after 7"));
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_disabled_and_undecryptable_bots() {
    let bot = connected().await;
    bot.env.apply_agent(&manifest("botless"), "alice");
    for agent in ["botless", "nobody"] {
        let reply = send_msg(&bot, agent, json!({"chatId": 1, "text": "hi"})).await;
        assert_eq!(reply.status, 404, "{agent}");
        assert_eq!(reply.error_code(), "chatapp_not_configured");
    }
    assert_eq!(
        bot.env.cli_json(&["chatapp", "disable", "--agent", "alpha"])["enabled"],
        false
    );
    let disabled = send_msg(&bot, "alpha", json!({"chatId": 1, "text": "hi"})).await;
    assert_eq!(
        (disabled.status, disabled.error_code()),
        (403, "chatapp_disabled".to_string())
    );
    bot.env.cli_json(&["chatapp", "enable", "--agent", "alpha"]);
    // The manifest can switch it too, and re-applying it keeps the connection.
    bot.env
        .apply_agent(&format!("{}\n[chatapp]\nenabled = false\n", manifest("alpha")), "alice");
    let by_manifest = send_msg(&bot, "alpha", json!({"chatId": 1, "text": "hi"})).await;
    assert_eq!(by_manifest.error_code(), "chatapp_disabled");
    bot.env
        .apply_agent(&format!("{}\n[chatapp]\nenabled = true\n", manifest("alpha")), "alice");
    assert_eq!(
        send_msg(&bot, "alpha", json!({"chatId": 1, "text": "hi"})).await.status,
        200
    );
    assert!(bot.sent.lock().unwrap().len() == 1, "nothing was sent while disabled");

    // The same data dir under another master key does not start: it could open none of
    // the secrets sealed before.
    let mut env = TestEnv::new()
        .with_env("AGENT_HOST_CHATAPP_API_BASE", &bot._telegram.base)
        .with_env("AGENT_HOST_MASTER_KEY", MASTER);
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&manifest("alpha"), "alice");
    env.cli_json(&["chatapp", "connect", "--agent", "alpha", "--token", TOKEN]);
    env.set_env("AGENT_HOST_MASTER_KEY", &"ab".repeat(32));
    let refused = env.cli(&["serve", "--listen", "127.0.0.1:0"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(refused.stderr.contains("master key differs"), "{}", refused.stderr);
    // A stored token damaged at rest (one bit of its authentication tag) cannot be opened.
    env.set_env("AGENT_HOST_MASTER_KEY", MASTER);
    let sealed = env.sql("SELECT secret FROM agent_integrations WHERE kind = 'chatapp'")[0][0]
        .clone()
        .unwrap();
    let mut sealed = hex::decode(sealed).unwrap();
    *sealed.last_mut().unwrap() ^= 1;
    env.sql(&format!(
        "UPDATE agent_integrations SET secret = {} WHERE kind = 'chatapp'",
        env.blob_literal(&sealed)
    ));
    let server = env.serve();
    let reply = post_json(
        &server.url("/v1/agents/alpha/chatapp/send"),
        Some(&key),
        &json!({"chatId": 1, "text": "hi"}),
    )
    .await;
    assert_eq!(reply.status, 500);
    assert_eq!(reply.error_code(), "internal_error");
    assert!(
        reply.error_message().contains("could not be decrypted"),
        "{}",
        reply.error_message()
    );
    assert_eq!(
        get(&server.url("/health"), None).await.status,
        200,
        "nothing else breaks"
    );
}

#[test]
fn connecting_checks_the_token_with_telegram() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sent = Arc::new(Mutex::new(Vec::new()));
    let telegram = rt.block_on(fake_telegram(sent));
    let env = TestEnv::new().with_env("AGENT_HOST_CHATAPP_API_BASE", &telegram.base);
    env.create_account("alice", "free");
    env.apply_agent(&manifest("alpha"), "alice");
    let wrong = env.cli(&["chatapp", "connect", "--agent", "alpha", "--token", "999:WRONG"]);
    assert_eq!(wrong.status.code(), Some(1));
    assert!(
        wrong.stderr.contains("Telegram refused the token: Unauthorized"),
        "{}",
        wrong.stderr
    );
    let malformed = env.cli(&["chatapp", "connect", "--agent", "alpha", "--token", "nonsense"]);
    assert_eq!(malformed.status.code(), Some(1));
    assert!(malformed.stderr.contains("@BotFather"));
    drop(rt);
}

fn inbound_manifest() -> String {
    format!(
        r#"
username = "alpha"
name = "Alpha"

[[commands]]
command = "hello"
handler_type = "simple_text"
integrations = ["chatapp"]
parameters = [{{ name = "name", type = "string", required = true }}]
config = {{ text = "Hello, {{{{name}}}}!" }}

[[commands]]
command = "long"
handler_type = "simple_text"
integrations = ["chatapp"]
config = {{ text = "{}" }}

[[commands]]
command = "private"
handler_type = "simple_text"
config = {{ text = "not offered on the chat-app" }}
"#,
        "a".repeat(5000)
    )
}

/// Sends `text` as Telegram would, and waits for the bot's sendMessage calls that follow.
async fn deliver(
    bot: &Bot,
    secret: &str,
    update_id: i64,
    chat_id: i64,
    text: &str,
    expect_sends: usize,
) -> (u16, Vec<Value>) {
    let before = bot.sent.lock().unwrap().len();
    let update = json!({ "update_id": update_id, "message": {
        "message_id": 10 + update_id, "date": 1795341600, "text": text,
        "from": { "id": chat_id, "is_bot": false, "first_name": "Ann" },
        "chat": { "id": chat_id, "type": "private" } } });
    let reply = send(
        client()
            .post(bot.server.url("/chatapp/alpha/webhook"))
            .header("x-telegram-bot-api-secret-token", secret)
            .json(&update),
    )
    .await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let sent: Vec<Value> = bot.sent.lock().unwrap()[before..].to_vec();
        // A send past the expected ones would land in the next delivery's window, whose
        // assertions name what it must hold.
        if sent.len() >= expect_sends || std::time::Instant::now() > deadline {
            return (reply.status, sent);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn inbound_updates_run_commands_and_reply_in_the_chat() {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let telegram = fake_telegram(sent.clone()).await;
    let env = TestEnv::new().with_env("AGENT_HOST_CHATAPP_API_BASE", &telegram.base);
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&inbound_manifest(), "alice");
    let server = env.serve();
    let hook = PUBLIC_HOOK;
    let connected = env.cli_json(&[
        "chatapp",
        "connect",
        "--agent",
        "alpha",
        "--token",
        TOKEN,
        "--webhook-url",
        hook,
    ]);
    assert_eq!(connected["webhook_url"], hook);
    let registered = sent.lock().unwrap()[0]["setWebhook"].clone();
    assert_eq!(registered["url"], hook);
    assert_eq!(registered["allowed_updates"], json!(["message"]));
    let secret = registered["secret_token"].as_str().unwrap().to_string();
    assert!(secret.len() >= 32);
    let bot = Bot {
        env,
        server,
        key,
        sent,
        _telegram: telegram,
    };

    let (status, replies) = deliver(&bot, &secret, 1, 5001, "/hello@helper_bot Ann", 1).await;
    assert_eq!(status, 200);
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0]["chat_id"], 5001);
    assert_eq!(replies[0]["text"], "Hello, Ann!");
    assert_eq!(replies[0]["reply_parameters"]["message_id"], 11);

    let (_, replies) = deliver(&bot, &secret, 2, 5001, "/private", 1).await;
    assert!(
        replies[0]["text"].as_str().unwrap().contains("I don't know /private"),
        "only chat-app commands run"
    );
    let (_, replies) = deliver(&bot, &secret, 3, 5001, "What can you do?", 1).await;
    assert!(
        replies[0]["text"].as_str().unwrap().contains("cannot answer right now"),
        "free text goes to chat: {:?}",
        replies[0]
    );

    let (_, replies) = deliver(&bot, &secret, 4, 5001, "/long", 2).await;
    let texts: Vec<usize> = replies
        .iter()
        .map(|r| r["text"].as_str().unwrap().chars().count())
        .collect();
    assert_eq!(texts, vec![4096, 904], "split over Telegram's limit, nothing lost");

    let (_, replies) = deliver(&bot, &secret, 5, 777777, "/hello Bo", 2).await;
    assert_eq!(replies.len(), 2, "refused once with 429, sent again after retry_after");
    assert_eq!(replies[1]["text"], "Hello, Bo!");

    // Telegram re-sends an update it thinks was lost: acknowledged, answered once.
    let resent = json!({ "update_id": 5, "message": {
        "message_id": 15, "date": 1795341600, "text": "/hello Bo",
        "from": { "id": 777777, "is_bot": false, "first_name": "Bo" },
        "chat": { "id": 777777, "type": "private" } } });
    let reply = send(
        client()
            .post(bot.server.url("/chatapp/alpha/webhook"))
            .header("x-telegram-bot-api-secret-token", &secret)
            .json(&resent),
    )
    .await;
    assert_eq!(
        reply.json(),
        json!({ "ok": true, "duplicate": true }),
        "a re-sent update is answered once"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn inbound_updates_need_the_secret_token() {
    let bot = connected().await;
    bot.env.cli_json(&[
        "chatapp",
        "connect",
        "--agent",
        "alpha",
        "--token",
        TOKEN,
        "--webhook-url",
        PUBLIC_HOOK,
    ]);
    for secret in ["", "wrong-secret"] {
        let (status, replies) = deliver(&bot, secret, 9, 5001, "/hello Ann", 0).await;
        assert_eq!(status, 401, "secret {secret:?}");
        assert!(
            replies.iter().all(|r| r.get("chat_id").is_none()),
            "nothing was sent: {replies:?}"
        );
    }
    let unknown = send(
        client()
            .post(bot.server.url("/chatapp/nobody/webhook"))
            .header("x-telegram-bot-api-secret-token", "x")
            .json(&json!({})),
    )
    .await;
    assert_eq!(unknown.status, 404);
}

/// The account holder connects, disables, enables and disconnects the bot over the
/// management API, as the CLI does, and the keyed send follows each step.
#[tokio::test(flavor = "multi_thread")]
async fn the_owner_manages_the_bot_over_the_api() {
    use reqwest::Method;
    let bot = connected().await;
    let bob = bot.env.account_with_key("bob", "free");
    let at = |path: &str| bot.server.url(&format!("/v1/account/agents/alpha/integrations{path}"));
    let hello = json!({ "chatId": "42", "text": "hi" });

    let gone = keyed(Method::DELETE, &at("/chatapp"), &bot.key, None).await;
    assert_eq!(gone.json()["data"], json!({ "disconnected": true }));
    assert_eq!(
        send_msg(&bot, "alpha", hello.clone()).await.error_code(),
        "chatapp_not_configured"
    );
    let view = keyed(Method::GET, &at(""), &bot.key, None).await;
    assert_eq!(view.json()["data"], json!({ "chatapp": null, "social": null }));

    let wrong = keyed(
        Method::PUT,
        &at("/chatapp"),
        &bot.key,
        Some(&json!({ "token": "999:WRONG" })),
    )
    .await;
    assert_eq!((wrong.status, wrong.error_code()), (400, "validation_error".into()));
    assert!(
        wrong
            .error_message()
            .contains("Telegram refused the token: Unauthorized"),
        "{}",
        wrong.text
    );

    // The token goes into Telegram's path: nothing in it may change the address called.
    for odd in ["123:abc/../../getUpdates", "123:abc?x=1", "123:é", ":abc", "123:"] {
        let refused = keyed(Method::PUT, &at("/chatapp"), &bot.key, Some(&json!({ "token": odd }))).await;
        assert_eq!(
            (refused.status, refused.error_code()),
            (400, "validation_error".into()),
            "{odd}"
        );
        assert!(refused.error_message().contains("@BotFather"), "{}", refused.text);
    }
    let body = json!({ "token": TOKEN, "webhook_url": "https://agents.example/chatapp/alpha/webhook" });
    let made = keyed(Method::PUT, &at("/chatapp"), &bot.key, Some(&body)).await;
    assert_eq!(made.status, 200, "{}", made.text);
    assert_eq!(made.json()["data"]["bot_username"], "helper_bot");
    let registered = bot
        .sent
        .lock()
        .unwrap()
        .iter()
        .any(|s| s["setWebhook"]["url"] == "https://agents.example/chatapp/alpha/webhook");
    assert!(registered, "the webhook is registered with Telegram");
    assert_eq!(send_msg(&bot, "alpha", hello.clone()).await.status, 200);
    assert!(!bot.env.database_contains(TOKEN.as_bytes()), "the token is kept sealed");

    let off = keyed(
        Method::PATCH,
        &at("/chatapp"),
        &bot.key,
        Some(&json!({ "enabled": false })),
    )
    .await;
    assert_eq!(off.status, 200, "{}", off.text);
    let refused = send_msg(&bot, "alpha", hello.clone()).await;
    assert_eq!((refused.status, refused.error_code()), (403, "chatapp_disabled".into()));
    let view = keyed(Method::GET, &at(""), &bot.key, None).await.json();
    assert_eq!(view["data"]["chatapp"]["enabled"], false);
    assert_eq!(view["data"]["chatapp"]["bot_username"], "helper_bot");
    assert!(!view.to_string().contains(TOKEN), "the token is never shown");

    // Another account's manage key finds no such agent, and changes nothing.
    for (method, body) in [
        (Method::GET, None),
        (Method::PATCH, Some(json!({ "enabled": true }))),
        (Method::DELETE, None),
    ] {
        let path = if method == Method::GET { "" } else { "/chatapp" };
        let reply = keyed(method.clone(), &at(path), &bob, body.as_ref()).await;
        assert_eq!(
            (reply.status, reply.error_code()),
            (404, "not_found".into()),
            "{method}"
        );
    }
    let put = keyed(Method::PUT, &at("/chatapp"), &bob, Some(&json!({ "token": TOKEN }))).await;
    assert_eq!(put.status, 404);
    assert_eq!(
        send_msg(&bot, "alpha", hello.clone()).await.error_code(),
        "chatapp_disabled"
    );

    let on = keyed(
        Method::PATCH,
        &at("/chatapp"),
        &bot.key,
        Some(&json!({ "enabled": true })),
    )
    .await;
    assert_eq!(on.status, 200);
    assert_eq!(send_msg(&bot, "alpha", hello.clone()).await.status, 200);
    let bad = keyed(
        Method::PATCH,
        &at("/chatapp"),
        &bot.key,
        Some(&json!({ "enabled": "yes" })),
    )
    .await;
    assert_eq!((bad.status, bad.error_code()), (400, "validation_error".into()));
    keyed(Method::DELETE, &at("/chatapp"), &bot.key, None).await;
    let none = keyed(
        Method::PATCH,
        &at("/chatapp"),
        &bot.key,
        Some(&json!({ "enabled": true })),
    )
    .await;
    assert_eq!((none.status, none.error_code()), (404, "not_found".into()));
    assert!(none.error_message().contains("connect one first"), "{}", none.text);
}

/// The bot of an agent applied from `inbound_manifest`, connected with a webhook; the
/// account `owner` is created with `account_args`. Returns the bot and its secret.
async fn inbound_bot(env: TestEnv, account_args: &[&str]) -> (Bot, String) {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let telegram = fake_telegram(sent.clone()).await;
    let env = env.with_env("AGENT_HOST_CHATAPP_API_BASE", &telegram.base);
    let mut args = vec!["account", "create", "owner"];
    args.extend_from_slice(account_args);
    env.cli_json(&args);
    let key = env.create_key("owner");
    env.apply_agent(&inbound_manifest(), "owner");
    let server = env.serve();
    env.cli_json(&[
        "chatapp",
        "connect",
        "--agent",
        "alpha",
        "--token",
        TOKEN,
        "--webhook-url",
        PUBLIC_HOOK,
    ]);
    let secret = sent.lock().unwrap()[0]["setWebhook"]["secret_token"]
        .as_str()
        .unwrap()
        .to_string();
    let bot = Bot {
        env,
        server,
        key,
        sent,
        _telegram: telegram,
    };
    (bot, secret)
}

/// Each chat has its limits, and the owner's plan limits count its bots'
/// updates too; past them the chat is told once to slow down, not left in silence.
#[tokio::test(flavor = "multi_thread")]
async fn inbound_updates_count_against_the_chat_and_the_owner() {
    let env = TestEnv::new().with_env("AGENT_HOST_CHATAPP_CHAT_LIMIT_PER_MINUTE", "3");
    let (bot, secret) = inbound_bot(env, &["--plan", "enterprise", "--rpm", "6", "--rpd", "100"]).await;
    for id in 1..=3 {
        let (status, replies) = deliver(&bot, &secret, id, 6001, "/hello Ann", 1).await;
        assert_eq!((status, replies[0]["text"].as_str()), (200, Some("Hello, Ann!")));
    }
    // The chat's fourth message this minute: asked to slow down, once.
    let (status, replies) = deliver(&bot, &secret, 4, 6001, "/hello Ann", 1).await;
    assert_eq!(status, 200, "Telegram must not re-send it");
    assert_eq!(replies.len(), 1);
    let notice = replies[0]["text"].as_str().unwrap();
    assert!(notice.contains("Please wait about"), "{notice}");
    let (_, replies) = deliver(&bot, &secret, 5, 6001, "/hello Ann", 0).await;
    assert!(
        replies.is_empty(),
        "told once a minute, not at every message: {replies:?}"
    );
    // Another chat has its own limit, until the owner's plan (6 a minute) is spent.
    let (_, replies) = deliver(&bot, &secret, 6, 6002, "/hello Bo", 1).await;
    assert_eq!(replies[0]["text"], "Hello, Bo!");
    let (_, replies) = deliver(&bot, &secret, 7, 6002, "/hello Bo", 1).await;
    assert_eq!(replies[0]["text"], "Hello, Bo!");
    let (_, replies) = deliver(&bot, &secret, 8, 6003, "/hello Cy", 1).await;
    assert_eq!(replies[0]["text"], "Hello, Cy!");
    let (_, replies) = deliver(&bot, &secret, 9, 6004, "/hello Di", 1).await;
    assert!(
        replies[0]["text"].as_str().unwrap().contains("Please wait about"),
        "the owner's plan counts every chat: {replies:?}"
    );
    // Keyed requests share the owner's limit with its bots.
    let listed = get(&bot.server.url("/v1/agents/alpha/commands"), Some(&bot.key)).await;
    assert_eq!(listed.status, 429, "{}", listed.text);
}

/// A disabled bot's updates are dropped before any work (no command, no
/// chat with the model), and the secret is checked before the body is read.
#[tokio::test(flavor = "multi_thread")]
async fn a_disabled_bots_updates_are_dropped_and_the_secret_comes_first() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let llm = crate::support::fake_llm::fake_openai(
        Arc::new(|_, _| crate::support::fake_llm::text("Hi from the model")),
        seen.clone(),
    )
    .await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "m");
    let (bot, secret) = inbound_bot(env, &["--plan", "pro"]).await;
    let (_, replies) = deliver(&bot, &secret, 1, 7001, "Hello there", 1).await;
    assert_eq!(replies[0]["text"], "Hi from the model");
    assert_eq!(seen.lock().unwrap().len(), 1);

    // The bot's state is read at each update: the CLI's change holds at once.
    bot.env.cli_json(&["chatapp", "disable", "--agent", "alpha"]);
    let (status, replies) = deliver(&bot, &secret, 2, 7001, "Hello again", 0).await;
    assert_eq!(status, 200, "acknowledged, so Telegram does not re-send it");
    assert!(replies.is_empty(), "{replies:?}");
    assert_eq!(seen.lock().unwrap().len(), 1, "the model was not asked");

    // A wrong secret with a body that is not even JSON: refused for the secret.
    let reply = send(
        client()
            .post(bot.server.url("/chatapp/alpha/webhook"))
            .header("x-telegram-bot-api-secret-token", "wrong")
            .header("content-type", "application/json")
            .body("{not json"),
    )
    .await;
    assert_eq!(reply.status, 401, "{}", reply.text);
    bot.env.cli_json(&["chatapp", "enable", "--agent", "alpha"]);
    let reply = send(
        client()
            .post(bot.server.url("/chatapp/alpha/webhook"))
            .header("x-telegram-bot-api-secret-token", &secret)
            .header("content-type", "application/json")
            .body("{not json"),
    )
    .await;
    assert_eq!(reply.status, 400, "{}", reply.text);

    // Enabled again, the next update is answered; the one sent while disabled never was.
    let (_, replies) = deliver(&bot, &secret, 3, 7001, "Hello once more", 1).await;
    assert_eq!(replies[0]["text"], "Hi from the model");
    let asked = seen.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(!format!("{asked:?}").contains("Hello again"), "{asked:?}");
}

/// A provider's own words (they can carry the operator's account
/// details) never reach a chat's user; the reply says what kind of failure it was.
#[tokio::test(flavor = "multi_thread")]
async fn a_providers_words_never_reach_the_chat() {
    let llm = crate::support::fake_llm::fake_openai(
        Arc::new(|_, _| {
            (
                429,
                json!({ "error": { "message": "Rate limit reached for org-Secret123 on tokens" } }),
            )
        }),
        Arc::new(Mutex::new(Vec::new())),
    )
    .await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "m");
    let (bot, secret) = inbound_bot(env, &["--plan", "pro"]).await;
    let (_, replies) = deliver(&bot, &secret, 1, 7101, "Hello there", 1).await;
    let text = replies[0]["text"].as_str().unwrap();
    assert!(text.contains("cannot answer right now"), "{text}");
    assert!(!text.contains("org-Secret123"), "{text}");
    assert!(bot.server.log().contains("org-Secret123"), "the operator's log has it");
}

/// Telegram takes only an HTTPS webhook; its refusal reaches the owner in its own words,
/// the bot stays connected without a webhook, and an HTTPS address then registers.
#[tokio::test(flavor = "multi_thread")]
async fn a_webhook_telegram_refuses_is_reported_and_not_kept() {
    let bot = connected().await;
    let manage = bot.env.create_key("alice");
    let url = bot.server.url("/v1/account/agents/alpha/integrations/chatapp");
    let plain = json!({ "token": TOKEN, "webhook_url": "http://agents.example.com/chatapp/alpha/webhook" });
    let refused = keyed(reqwest::Method::PUT, &url, &manage, Some(&plain)).await;
    assert_eq!(
        (refused.status, refused.error_code()),
        (400, "validation_error".to_string()),
        "{}",
        refused.text
    );
    assert_eq!(
        refused.error_message(),
        "Telegram refused the webhook: Bad Request: bad webhook: An HTTPS URL must be provided for webhook"
    );
    let shown = get(&bot.server.url("/v1/account/agents/alpha/integrations"), Some(&manage)).await;
    assert_eq!(
        shown.json()["data"]["chatapp"]["webhook_url"],
        Value::Null,
        "{}",
        shown.text
    );
    assert!(bot.sent.lock().unwrap().iter().all(|s| s.get("setWebhook").is_none()));

    let secure = json!({ "token": TOKEN, "webhook_url": PUBLIC_HOOK });
    let connected = keyed(reqwest::Method::PUT, &url, &manage, Some(&secure)).await;
    assert_eq!(connected.status, 200, "{}", connected.text);
    let shown = get(&bot.server.url("/v1/account/agents/alpha/integrations"), Some(&manage)).await;
    assert_eq!(
        shown.json()["data"]["chatapp"]["webhook_url"],
        PUBLIC_HOOK,
        "{}",
        shown.text
    );
}
