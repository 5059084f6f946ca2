//! `POST /v1/agents/:agentId/social/post` against a local server speaking the X API v2
//! wire format: users/me, the OAuth 2.0 token refresh, media upload (simple and chunked with
//! processing status), posts, and X's error documents.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get as route_get, post};
use serde_json::{Value, json};

use crate::support::*;

/// What the X API stand-in was asked (the schedules' tests read it too).
#[derive(Default)]
pub(crate) struct XLog {
    pub(crate) posts: Vec<(String, Value)>,
    refreshes: u32,
    image_uploads: u32,
    appends: u32,
    status_polls: u32,
}

fn bearer(headers: &HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim_start_matches("Bearer ")
        .to_string()
}

fn problem(status: u16, title: &str, detail: &str) -> Response {
    let body = json!({ "title": title, "detail": detail, "type": "about:blank", "status": status });
    (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
}

pub(crate) async fn fake_x(log: Arc<Mutex<XLog>>) -> FakeServer {
    let valid = |token: &str| ["good-access", "new-access", "expired-access", "readonly-access"].contains(&token);
    let (l1, l2, l3, l4, l5) = (log.clone(), log.clone(), log.clone(), log.clone(), log.clone());
    let router = axum::Router::new()
        .route(
            "/2/users/me",
            route_get(move |headers: HeaderMap| async move {
                if valid(&bearer(&headers)) {
                    axum::Json(json!({ "data": { "id": "4242", "name": "Helper", "username": "helper_x" } })).into_response()
                } else {
                    problem(401, "Unauthorized", "Unauthorized")
                }
            }),
        )
        .route(
            "/2/oauth2/token",
            post(move |body: String| {
                let log = l1.clone();
                async move {
                    log.lock().unwrap().refreshes += 1;
                    if body.contains("grant_type=refresh_token") && body.contains("refresh_token=good-refresh") {
                        axum::Json(json!({ "token_type": "bearer", "expires_in": 7200, "access_token": "new-access",
                            "scope": "tweet.read tweet.write users.read offline.access", "refresh_token": "new-refresh" }))
                            .into_response()
                    } else {
                        (StatusCode::BAD_REQUEST, axum::Json(json!({ "error": "invalid_request", "error_description": "Value passed for the token was invalid." })))
                            .into_response()
                    }
                }
            }),
        )
        .route(
            "/2/media/upload",
            post(move |headers: HeaderMap, body: Bytes| {
                let log = l2.clone();
                async move {
                    let multipart = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").starts_with("multipart/form-data");
                    if !multipart || !body.windows(11).any(|w| w == b"tweet_image") {
                        return problem(400, "Invalid Request", "One or more parameters to your request was invalid.");
                    }
                    log.lock().unwrap().image_uploads += 1;
                    axum::Json(json!({ "data": { "id": "m1", "media_key": "3_m1", "size": body.len(), "expires_after_secs": 86400 } })).into_response()
                }
            })
            .get(move |Query(q): Query<std::collections::HashMap<String, String>>| {
                let log = l3.clone();
                async move {
                    let mut log = log.lock().unwrap();
                    log.status_polls += 1;
                    let state = if log.status_polls < 2 { "in_progress" } else { "succeeded" };
                    axum::Json(json!({ "data": { "id": q.get("media_id"), "processing_info": { "state": state, "check_after_secs": 1, "progress_percent": 50 } } }))
                }
            }),
        )
        .route("/2/media/upload/initialize", post(|axum::Json(body): axum::Json<Value>| async move {
            assert_eq!(body["media_category"], "tweet_video");
            axum::Json(json!({ "data": { "id": "v1", "media_key": "7_v1", "expires_after_secs": 86400 } }))
        }))
        .route(
            "/2/media/upload/{id}/{step}",
            post(move |Path((id, step)): Path<(String, String)>, chunk: Bytes| {
                let log = l4.clone();
                async move {
                    assert!(step != "append" || !chunk.is_empty(), "an append carries its chunk");
                    if step == "append" {
                        log.lock().unwrap().appends += 1;
                        return axum::Json(json!({ "data": { "expires_at": 1795428000 } }));
                    }
                    axum::Json(json!({ "data": { "id": id, "processing_info": { "state": "pending", "check_after_secs": 1 } } }))
                }
            }),
        )
        .route(
            "/2/tweets",
            post(move |headers: HeaderMap, axum::Json(body): axum::Json<Value>| {
                let log = l5.clone();
                async move {
                    let token = bearer(&headers);
                    match token.as_str() {
                        "expired-access" => return problem(401, "Unauthorized", "Unauthorized"),
                        "readonly-access" => return problem(403, "Forbidden", "You are not permitted to perform this action."),
                        _ => {}
                    }
                    if body["text"] == "rate me" {
                        let mut response = problem(429, "Too Many Requests", "Too Many Requests");
                        response.headers_mut().insert("x-rate-limit-reset", "9999999999".parse().unwrap());
                        return response;
                    }
                    log.lock().unwrap().posts.push((token, body.clone()));
                    (StatusCode::CREATED, axum::Json(json!({ "data": { "id": "1880000000000000001", "text": body["text"],
                        "edit_history_tweet_ids": ["1880000000000000001"] } }))).into_response()
                }
            }),
        )
        // X takes media chunks of up to 5 MB.
        .layer(axum::extract::DefaultBodyLimit::max(16 * 1024 * 1024));
    FakeServer::start(router).await
}

async fn media_server() -> FakeServer {
    let png = || {
        let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
        b.extend(vec![0u8; 1000]);
        b
    };
    let mp4 = || {
        let mut b = b"\0\0\0\x18ftypmp42".to_vec();
        b.extend(vec![7u8; 5 * 1024 * 1024]);
        b
    };
    let router = axum::Router::new()
        .route("/cat.png", route_get(move || async move { png() }))
        .route("/clip.mp4", route_get(move || async move { mp4() }))
        .route("/anim.gif", route_get(|| async { b"GIF89a-------".to_vec() }))
        .route("/page.png", route_get(|| async { "<html>not really a png</html>" }));
    FakeServer::start(router).await
}

struct Social {
    env: TestEnv,
    server: TestServer,
    key: String,
    log: Arc<Mutex<XLog>>,
    media: FakeServer,
    _x: FakeServer,
}

async fn setup(access: &str, refresh: &str, with_client: bool) -> Social {
    setup_with(access, refresh, with_client, &[]).await
}

async fn setup_with(access: &str, refresh: &str, with_client: bool, settings: &[(&str, &str)]) -> Social {
    let log = Arc::new(Mutex::new(XLog::default()));
    let x = fake_x(log.clone()).await;
    let media = media_server().await;
    let mut env = TestEnv::new().with_env("AGENT_HOST_SOCIAL_API_BASE", &x.base).with_env(
        "AGENT_HOST_OUTBOUND_ALLOW_PRIVATE",
        &format!("127.0.0.1:{}", media.port),
    );
    for (name, value) in settings {
        env = env.with_env(name, value);
    }
    if with_client {
        env = env
            .with_env("AGENT_HOST_SOCIAL_CLIENT_ID", "client-1")
            .with_env("AGENT_HOST_SOCIAL_CLIENT_SECRET", "shh");
    }
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&manifest("alpha"), "alice");
    let connected = env.cli_json(&[
        "social",
        "connect",
        "--agent",
        "alpha",
        "--access-token",
        access,
        "--refresh-token",
        refresh,
    ]);
    assert_eq!(connected["username"], "helper_x");
    let server = env.serve();
    Social {
        env,
        server,
        key,
        log,
        media,
        _x: x,
    }
}

async fn post_to(s: &Social, body: Value) -> Reply {
    post_json(&s.server.url("/v1/agents/alpha/social/post"), Some(&s.key), &body).await
}

#[tokio::test(flavor = "multi_thread")]
async fn posts_text_images_replies_and_chunked_video() {
    let s = setup("good-access", "good-refresh", true).await;
    let reply = post_to(&s, json!({"text": "Hello from the agent"})).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let data = reply.json()["data"].clone();
    assert_eq!(data["ok"], true);
    assert_eq!(data["tweet_id"], "1880000000000000001");
    assert_eq!(data["tweet_url"], "https://x.com/helper_x/status/1880000000000000001");
    assert_eq!(data["username"], "helper_x");
    assert!(data["agent_id"].as_str().unwrap().len() > 10);

    let images = post_to(&s, json!({"text": "two cats", "mediaUrls": [s.media.url("/cat.png"), s.media.url("/cat.png")], "replyToTweetId": "1879999"})).await;
    assert_eq!(images.status, 200, "{}", images.text);
    let video = post_to(&s, json!({"mediaUrls": [s.media.url("/clip.mp4")]})).await;
    assert_eq!(video.status, 200, "{}", video.text);

    let log = s.log.lock().unwrap();
    assert_eq!(log.posts[0].1, json!({"text": "Hello from the agent"}));
    assert_eq!(
        log.posts[1].1,
        json!({"text": "two cats", "media": {"media_ids": ["m1", "m1"]}, "reply": {"in_reply_to_tweet_id": "1879999"}})
    );
    assert_eq!(log.image_uploads, 2);
    assert_eq!(log.posts[2].1, json!({"media": {"media_ids": ["v1"]}}));
    assert_eq!(log.appends, 2, "5 MiB in 4 MiB chunks");
    assert!(log.status_polls >= 2, "waited for processing to succeed");
}

/// One post's media are held together within `social_media_max_bytes`,
/// not each of up to four.
#[tokio::test(flavor = "multi_thread")]
async fn one_posts_media_together_stay_within_the_media_limit() {
    let s = setup_with(
        "good-access",
        "good-refresh",
        true,
        &[("AGENT_HOST_SOCIAL_MEDIA_MAX_BYTES", "2500")],
    )
    .await;
    let cat = s.media.url("/cat.png"); // 1,008 bytes
    let two = post_to(&s, json!({"text": "two cats", "mediaUrls": [cat, cat]})).await;
    assert_eq!(two.status, 200, "{}", two.text);
    let three = post_to(&s, json!({"text": "three cats", "mediaUrls": [cat, cat, cat]})).await;
    assert_eq!(
        (three.status, three.error_code()),
        (400, "validation_error".to_string()),
        "{}",
        three.text
    );
    assert!(
        three
            .error_message()
            .contains("mediaUrls[2]: one post's media may hold 2500 bytes together"),
        "{}",
        three.error_message()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_token_is_refreshed_once_and_the_new_one_kept() {
    let s = setup("expired-access", "good-refresh", true).await;
    assert_eq!(post_to(&s, json!({"text": "first"})).await.status, 200);
    assert_eq!(post_to(&s, json!({"text": "second"})).await.status, 200);
    let log = s.log.lock().unwrap();
    assert_eq!(log.refreshes, 1, "refreshed once, then the stored new token was used");
    assert_eq!(
        log.posts.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(),
        ["new-access", "new-access"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn x_refusals_map_to_the_spec_codes() {
    let dead = setup("expired-access", "bad-refresh", true).await;
    let reply = post_to(&dead, json!({"text": "hi"})).await;
    assert_eq!(
        (reply.status, reply.error_code()),
        (401, "social_unauthorized".to_string())
    );
    assert_eq!(dead.log.lock().unwrap().refreshes, 1, "one refresh attempt");

    let readonly = setup("readonly-access", "good-refresh", true).await;
    let reply = post_to(&readonly, json!({"text": "hi"})).await;
    assert_eq!(
        (reply.status, reply.error_code()),
        (403, "social_forbidden".to_string())
    );

    let s = setup("good-access", "good-refresh", true).await;
    let limited = post_to(&s, json!({"text": "rate me"})).await;
    assert_eq!(
        (limited.status, limited.error_code()),
        (429, "social_rate_limit".to_string())
    );
    assert!(
        limited.error_message().contains("resets at"),
        "{}",
        limited.error_message()
    );
    assert!(limited.header("retry-after").is_some());

    let cases = [
        (json!({}), "mediaUrls"),
        (json!({"text": "a".repeat(281)}), "281 characters"),
        (
            json!({"text": format!("{} https://example.com/{}", "a".repeat(250), "b".repeat(100))}),
            "274",
        ),
        (json!({"mediaUrls": [s.media.url("/page.png")]}), "not a PNG"),
        (
            json!({"mediaUrls": [s.media.url("/anim.gif"), s.media.url("/cat.png")]}),
            "exactly 1 video or GIF",
        ),
        (
            json!({"mediaUrls": ["http://169.254.169.254/latest/meta-data/x.png"]}),
            "refused",
        ),
    ];
    for (body, words) in cases {
        let reply = post_to(&s, body.clone()).await;
        if words == "274" {
            assert_eq!(reply.status, 200, "a long URL counts 23: {}", reply.text);
            continue;
        }
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
        assert_eq!(reply.error_code(), "validation_error");
        assert!(
            reply.error_message().contains(words),
            "{body}: {}",
            reply.error_message()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unconnected_accounts_and_unconfigured_servers() {
    let s = setup("good-access", "good-refresh", false).await;
    let reply = post_to(&s, json!({"text": "hi"})).await;
    assert_eq!(
        (reply.status, reply.error_code()),
        (500, "social_not_configured".to_string())
    );
    s.env.cli_json(&["social", "disconnect", "--agent", "alpha"]);
    let reply = post_to(&s, json!({"text": "hi"})).await;
    assert_eq!(
        (reply.status, reply.error_code()),
        (400, "social_not_connected".to_string())
    );
}

/// The account holder connects, disables and disconnects the social account over the
/// management API, as the CLI does, and posting follows each step.
#[tokio::test(flavor = "multi_thread")]
async fn the_owner_manages_the_social_account_over_the_api() {
    use reqwest::Method;
    let s = setup("good-access", "good-refresh", true).await;
    let at = s.server.url("/v1/account/agents/alpha/integrations/social");
    let hello = json!({ "text": "Hello over the API" });

    let gone = keyed(Method::DELETE, &at, &s.key, None).await;
    assert_eq!(gone.json()["data"], json!({ "disconnected": true }));
    assert_eq!(post_to(&s, hello.clone()).await.error_code(), "social_not_connected");

    let refused = keyed(Method::PUT, &at, &s.key, Some(&json!({ "access_token": "stolen" }))).await;
    assert_eq!((refused.status, refused.error_code()), (400, "validation_error".into()));
    assert!(
        refused.error_message().contains("X refused the access token"),
        "{}",
        refused.text
    );

    // What cannot go in an Authorization header is refused here, not by the HTTP client.
    for odd in ["two words", "line\nbreak", "é", ""] {
        let refused = keyed(Method::PUT, &at, &s.key, Some(&json!({ "access_token": odd }))).await;
        assert_eq!(
            (refused.status, refused.error_code()),
            (400, "validation_error".into()),
            "{odd:?}"
        );
    }
    let body = json!({ "access_token": "good-access", "refresh_token": "good-refresh", "expires_in": 7200 });
    let made = keyed(Method::PUT, &at, &s.key, Some(&body)).await;
    assert_eq!(made.status, 200, "{}", made.text);
    assert_eq!(made.json()["data"]["username"], "helper_x");
    assert_eq!(post_to(&s, hello.clone()).await.status, 200);
    assert!(!s.env.database_contains(b"good-refresh"), "the tokens are kept sealed");

    let off = keyed(Method::PATCH, &at, &s.key, Some(&json!({ "enabled": false }))).await;
    assert_eq!(off.status, 200, "{}", off.text);
    let blocked = post_to(&s, hello.clone()).await;
    assert_eq!((blocked.status, blocked.error_code()), (403, "social_forbidden".into()));
    let view = keyed(
        Method::GET,
        &s.server.url("/v1/account/agents/alpha/integrations"),
        &s.key,
        None,
    )
    .await;
    let view = view.json();
    assert_eq!(view["data"]["social"]["username"], "helper_x");
    assert_eq!(view["data"]["social"]["enabled"], false);
    assert!(!view.to_string().contains("good-access"), "tokens are never shown");

    let on = keyed(Method::PATCH, &at, &s.key, Some(&json!({ "enabled": true }))).await;
    assert_eq!(on.status, 200);
    assert_eq!(post_to(&s, hello).await.status, 200);
}
