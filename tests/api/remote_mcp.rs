//! Remote MCP servers as an agent's tools (docs/mcp.md#remote-servers-as-the-agents-tools),
//! against a server on the official MCP Python SDK (tests/python/mcp_server.py, Streamable
//! HTTP), reached through the outbound guard.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::fake_llm::{Policy, calls_named_tools, fake_openai, text, tool_call};
use crate::support::*;

/// The Python SDK's server, on a free port of loopback, killed when dropped.
struct PyServer {
    _child: tokio::process::Child,
    url: String,
}

async fn py_server(token: Option<&str>) -> PyServer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/python/mcp_server.py");
    let mut command = tokio::process::Command::new(python());
    command
        .arg(script)
        .arg(port.to_string())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    if let Some(token) = token {
        command.env("REQUIRED_TOKEN", token);
    }
    let mut child = command.spawn().expect("the Python MCP server starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("listening") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(ready, Ok(true), "the Python MCP server did not start");
    PyServer {
        _child: child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}

fn manifest(url: &str, extra: &str) -> String {
    format!(
        "username = \"helper\"\nname = \"Helper\"\n\n[[commands]]\ncommand = \"hello\"\nhandler_type = \"simple_text\"\n\
         config = {{ text = \"Hello!\" }}\n\n[[mcp_servers]]\nname = \"calc\"\nurl = \"{url}\"\n{extra}"
    )
}

async fn chat(server: &TestServer, key: &str, message: &str) -> Value {
    let reply = post_json(
        &server.url("/v1/agents/helper/chat"),
        Some(key),
        &json!({ "message": message, "toolsEnabled": true, "maxToolCalls": 5 }),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()["data"].clone()
}

/// The tool messages the model was sent, in order.
fn tool_results(seen: &Arc<Mutex<Vec<Value>>>) -> Vec<String> {
    let seen = seen.lock().unwrap();
    let Some(last) = seen.last() else { return vec![] };
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chat_calls_a_remote_servers_tools_within_their_limits() {
    let remote = py_server(None).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let llm = fake_openai(calls_named_tools(), seen.clone()).await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model")
        .with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", "127.0.0.1")
        .with_env("AGENT_HOST_MCP_REMOTE_MAX_RESPONSE_BYTES", "65536");
    let key = env.account_with_key("alice", "pro");
    env.apply_agent(
        &manifest(
            &remote.url,
            "exclude = [\"delete_everything\"]\ntimeout_ms = 1500\nmax_calls = 2\n",
        ),
        "alice",
    );
    let server = env.serve();

    // The model is offered the agent's command and the server's tools, prefixed, but the one
    // its owner excluded.
    let answered = chat(&server, &key, "call calc__add {\"a\": 2, \"b\": 3}").await;
    assert_eq!(answered["response"], "The tool said: 5");
    let offered: Vec<String> = seen.lock().unwrap()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(offered, ["hello", "calc__add", "calc__slow", "calc__flood"]);
    let add = seen.lock().unwrap()[0]["tools"][1]["function"].clone();
    assert_eq!(add["description"], "Adds two whole numbers.");
    assert_eq!(add["parameters"]["required"], json!(["a", "b"]), "{add}");

    // A server that hangs is cut at the server's time limit; one that floods, at the size
    // limit; the model reads why, and the chat answers all the same.
    seen.lock().unwrap().clear();
    let started = Instant::now();
    let answered = chat(&server, &key, "call calc__slow {\"seconds\": 30}").await;
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    let said = tool_results(&seen);
    assert!(
        said[0].starts_with("Error: calc") && said[0].contains("1500 ms"),
        "{said:?}"
    );
    assert!(
        answered["response"]
            .as_str()
            .unwrap()
            .starts_with("The tool said: Error")
    );
    seen.lock().unwrap().clear();
    chat(&server, &key, "call calc__flood {\"kilobytes\": 200}").await;
    let said = tool_results(&seen);
    assert!(said[0].contains("larger than 65536 bytes"), "{said:?}");

    // An excluded tool cannot be called by name.
    seen.lock().unwrap().clear();
    chat(&server, &key, "call calc__delete_everything {}").await;
    assert_eq!(
        tool_results(&seen),
        ["Error: there is no tool named 'calc__delete_everything'."]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chat_makes_at_most_the_servers_calls() {
    let remote = py_server(None).await;
    // Calls `add` every round, until the chat's limit stops it.
    let policy: Policy = Arc::new(|request, n| {
        let tool_messages = request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .count();
        match tool_messages < 3 && request.get("tools").is_some() {
            true => tool_call(&format!("c{n}"), "calc__add", json!({ "a": n, "b": 1 })),
            false => text("Enough."),
        }
    });
    let seen = Arc::new(Mutex::new(Vec::new()));
    let llm = fake_openai(policy, seen.clone()).await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model")
        .with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", "127.0.0.1");
    let key = env.account_with_key("alice", "pro");
    env.apply_agent(&manifest(&remote.url, "max_calls = 2\n"), "alice");
    let server = env.serve();
    chat(&server, &key, "Add, again and again").await;
    let said = tool_results(&seen);
    assert_eq!(said.len(), 3, "{said:?}");
    assert_eq!(&said[..2], ["1", "2"]);
    assert!(said[2].contains("as many as its owner allows"), "{said:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_behind_a_credential_is_used_once_its_owner_sets_it() {
    let remote = py_server(Some("s3cret-token")).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let llm = fake_openai(calls_named_tools(), seen.clone()).await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model")
        .with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", "127.0.0.1")
        .with_env(
            "AGENT_HOST_MASTER_KEY",
            "0404040404040404040404040404040404040404040404040404040404040404",
        );
    let key = env.account_with_key("alice", "pro");
    env.apply_agent(&manifest(&remote.url, "header = \"Authorization\"\n"), "alice");
    let server = env.serve();
    let servers_url = server.url("/v1/account/agents/helper/mcp-servers");

    // Without its credential the server's tools are left out; the chat still answers.
    let answered = chat(&server, &key, "call calc__add {\"a\": 1, \"b\": 1}").await;
    assert_eq!(
        answered["response"],
        "The tool said: Error: there is no tool named 'calc__add'."
    );
    let listed = get(&servers_url, Some(&key)).await.json();
    let calc = &listed["data"]["servers"][0];
    assert_eq!(
        (&calc["credential_set"], &calc["tools"]),
        (&json!(false), &json!([])),
        "{listed}"
    );
    assert!(calc["error"].as_str().unwrap().contains("Authorization"), "{listed}");

    // A wrong one is refused by the server (its 401 said to the owner); the right one opens it.
    let credential = format!("{servers_url}/calc/credential");
    let set = keyed(
        reqwest::Method::PUT,
        &credential,
        &key,
        Some(&json!({ "value": "Bearer wrong" })),
    )
    .await;
    assert_eq!(set.status, 200, "{}", set.text);
    let listed = get(&servers_url, Some(&key)).await.json();
    assert!(
        listed["data"]["servers"][0]["error"]
            .as_str()
            .unwrap()
            .contains("authorization"),
        "{listed}"
    );
    let out = env.cli_with_stdin(
        &["mcp-server", "credential", "--agent", "helper", "--server", "calc"],
        "Bearer s3cret-token\n",
    );
    assert!(out.status.success(), "{}", out.stderr);
    let listed = get(&servers_url, Some(&key)).await.json();
    let calc = &listed["data"]["servers"][0];
    assert_eq!(calc["credential_set"], true, "{listed}");
    assert_eq!(
        calc["tools"],
        json!(["calc__add", "calc__slow", "calc__flood", "calc__delete_everything"]),
        "{listed}"
    );
    let answered = chat(&server, &key, "call calc__add {\"a\": 20, \"b\": 22}").await;
    assert_eq!(answered["response"], "The tool said: 42");
    // Sealed at rest: the database never holds it in the clear.
    assert!(!env.database_contains(b"s3cret-token"));

    // The credential was set for this address: a manifest that moves the server elsewhere
    // does not take it there.
    let elsewhere = py_server(None).await;
    // Applied through the server, whose own cache of the agent it clears.
    let apply = |text: String| {
        let (url, key) = (server.url("/v1/account/agents"), key.clone());
        async move {
            let reply = post_body(&url, &key, "application/toml", text.into_bytes()).await;
            assert!(reply.status == 200 || reply.status == 201, "{}", reply.text);
        }
    };
    apply(manifest(&elsewhere.url, "header = \"Authorization\"\n")).await;
    let listed = get(&servers_url, Some(&key)).await.json();
    let calc = &listed["data"]["servers"][0];
    assert_eq!(calc["tools"], json!([]), "{listed}");
    assert!(calc["error"].as_str().unwrap().contains("set it again"), "{listed}");
    // A server the manifest drops takes its credential with it.
    let without = manifest(&remote.url, "");
    apply(without.split("[[mcp_servers]]").next().unwrap().to_string()).await;
    apply(manifest(&remote.url, "header = \"Authorization\"\n")).await;
    let listed = get(&servers_url, Some(&key)).await.json();
    assert_eq!(listed["data"]["servers"][0]["credential_set"], false, "{listed}");
    let credential_gone = keyed(reqwest::Method::DELETE, &credential, &key, None).await;
    assert_eq!(
        credential_gone.json()["data"]["removed"],
        false,
        "{}",
        credential_gone.text
    );
    let restored = keyed(
        reqwest::Method::PUT,
        &credential,
        &key,
        Some(&json!({ "value": "Bearer s3cret-token" })),
    )
    .await;
    assert_eq!(restored.status, 200, "{}", restored.text);

    // Another account's key sees no such agent; a server the manifest does not name is refused.
    let other = env.account_with_key("bob", "free");
    assert_eq!(get(&servers_url, Some(&other)).await.status, 404);
    let unknown = keyed(
        reqwest::Method::PUT,
        &format!("{servers_url}/nope/credential"),
        &key,
        Some(&json!({ "value": "x" })),
    )
    .await;
    assert_eq!(unknown.status, 404, "{}", unknown.text);
    let removed = keyed(reqwest::Method::DELETE, &credential, &key, None).await;
    assert_eq!(removed.json()["data"]["removed"], true, "{}", removed.text);
}

#[tokio::test]
async fn the_manifest_says_what_a_remote_server_may_be() {
    let env = TestEnv::new();
    env.account_with_key("alice", "free");
    for (extra, field, words) in [
        ("", "", ""),
        ("header = \"Host\"\n", "mcp_servers[0].header", "not a header"),
        ("timeout_ms = 5\n", "mcp_servers[0].timeout_ms", "between 100"),
        ("max_calls = 0\n", "mcp_servers[0].max_calls", "between 1"),
    ] {
        let path = env.path("agent.toml");
        std::fs::write(&path, manifest("http://127.0.0.1:9/mcp", extra)).unwrap();
        let out = env.cli(&["agent", "apply", path.to_str().unwrap(), "--account", "alice"]);
        if field.is_empty() {
            assert!(out.status.success(), "{}", out.stderr);
        } else {
            assert!(
                out.stderr.contains(field) && out.stderr.contains(words),
                "{extra}: {}",
                out.stderr
            );
        }
    }
    let path = env.path("bad.toml");
    std::fs::write(&path, manifest("ftp://example.com/mcp", "")).unwrap();
    let out = env.cli(&["agent", "apply", path.to_str().unwrap(), "--account", "alice"]);
    assert!(out.stderr.contains("mcp_servers[0].url"), "{}", out.stderr);
    std::fs::write(&path, manifest("https://user:pw@example.com/mcp", "")).unwrap();
    let out = env.cli(&["agent", "apply", path.to_str().unwrap(), "--account", "alice"]);
    assert!(out.stderr.contains("no credentials in the URL"), "{}", out.stderr);
}

/// The remote servers' tools act with the owner's credentials: strangers who message the
/// agent's bot are never offered them, while the owner's keyed chat is.
#[tokio::test(flavor = "multi_thread")]
async fn strangers_chatting_with_the_bot_get_no_remote_tools() {
    let remote = py_server(None).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let llm = fake_openai(calls_named_tools(), seen.clone()).await;
    let sent = Arc::new(Mutex::new(Vec::new()));
    let telegram = crate::chatapp::fake_telegram(sent.clone()).await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model")
        .with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", "127.0.0.1")
        .with_env("AGENT_HOST_CHATAPP_API_BASE", &telegram.base)
        .with_env(
            "AGENT_HOST_MASTER_KEY",
            "0505050505050505050505050505050505050505050505050505050505050505",
        );
    let key = env.account_with_key("alice", "pro");
    env.apply_agent(&manifest(&remote.url, ""), "alice");
    env.cli_json(&[
        "chatapp",
        "connect",
        "--agent",
        "helper",
        "--token",
        crate::chatapp::TOKEN,
        "--webhook-url",
        "https://agents.example.com/chatapp/helper/webhook",
    ]);
    let secret = sent.lock().unwrap()[0]["setWebhook"]["secret_token"]
        .as_str()
        .unwrap()
        .to_string();
    let server = env.serve();
    let update = json!({ "update_id": 1, "message": {
        "message_id": 11, "date": 1795341600, "text": "call calc__add {\"a\": 1, \"b\": 2}",
        "from": { "id": 99, "is_bot": false, "first_name": "Ann" }, "chat": { "id": 99, "type": "private" } } });
    let reply = send(
        client()
            .post(server.url("/chatapp/helper/webhook"))
            .header("x-telegram-bot-api-secret-token", &secret)
            .json(&update),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !sent.lock().unwrap().iter().any(|m| m["chat_id"] == 99) {
        assert!(Instant::now() < deadline, "the bot never answered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let offered = |request: &Value| -> Vec<String> {
        request["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let first = seen.lock().unwrap()[0].clone();
    assert!(
        offered(&first).iter().all(|t| !t.starts_with("calc__")),
        "{:?}",
        offered(&first)
    );
    let answer = sent.lock().unwrap().iter().find(|m| m["chat_id"] == 99).unwrap()["text"].clone();
    // (The bot offers only commands made for it, none here: the model was offered no tool.)
    assert_eq!(answer, "No tool for that.");
    // The owner's own chat is offered them.
    seen.lock().unwrap().clear();
    let answered = chat(&server, &key, "call calc__add {\"a\": 1, \"b\": 2}").await;
    assert_eq!(answered["response"], "The tool said: 3");
}

/// A remote server behind OAuth: another account's agent on this host, whose MCP endpoint
/// takes an OAuth token from the host's own authorization server. Its owner grants the
/// helper access (the consent answered as the console's consent page answers it), the
/// grant is kept sealed, the chat uses the tools, and a token near its end is refreshed.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_behind_oauth_is_used_after_the_owners_grant() {
    use crate::support::clock::{Clock, now_ms};
    let llm = fake_openai(calls_named_tools(), Arc::default()).await;
    let clock = Clock::now();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let env = TestEnv::new()
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model")
        .with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", "127.0.0.1")
        .with_env("AGENT_HOST_MCP_OAUTH", "true")
        .with_env("AGENT_HOST_PUBLIC_BASE_URL", &base)
        .with_envs(clock.env());
    let alice = env.account_with_key("alice", "pro");
    let bob = env.account_with_key("bob", "pro");
    env.apply_agent(
        "username = \"tools\"\nname = \"Bob's tools\"\n\n[[commands]]\ncommand = \"greet\"\n\
         handler_type = \"simple_text\"\nintegrations = [\"mcp\"]\n\
         parameters = [{ name = \"name\", type = \"string\", required = true }]\nconfig = { text = \"Hello, {{name}}!\" }\n",
        "bob",
    );
    let helper = env.apply_agent(
        &format!(
            "username = \"helper\"\nname = \"Helper\"\n\n[[commands]]\ncommand = \"hello\"\nhandler_type = \"simple_text\"\n\
             config = {{ text = \"Hello!\" }}\n\n[[mcp_servers]]\nname = \"bobs\"\nurl = \"{base}/mcp/tools\"\noauth = true\n"
        ),
        "alice",
    );
    let server = env.serve_with(&["serve", "--listen", &format!("127.0.0.1:{port}")]);
    let servers_url = server.url("/v1/account/agents/helper/mcp-servers");

    // Until its owner grants it, the server's tools are left out, and the listing says why.
    let listed = get(&servers_url, Some(&alice)).await.json();
    let bobs = &listed["data"]["servers"][0];
    assert_eq!(
        (bobs["oauth"].as_bool(), bobs["credential_set"].as_bool()),
        (Some(true), Some(false))
    );
    assert!(
        bobs["error"]
            .as_str()
            .unwrap()
            .contains("needs its owner's OAuth grant"),
        "{listed}"
    );

    // The grant begins: the host found the server's authorization server and registered.
    let start = server.url("/v1/account/agents/helper/mcp-servers/bobs/oauth");
    let started = post_json(&start, Some(&alice), &json!({})).await;
    assert_eq!(started.status, 200, "{}", started.text);
    let authorize = reqwest::Url::parse(started.json()["data"]["authorization_url"].as_str().unwrap()).unwrap();
    assert_eq!(
        authorize.as_str().split('?').next(),
        Some(format!("{base}/oauth/authorize").as_str())
    );
    let asked: std::collections::HashMap<_, _> = authorize.query_pairs().into_owned().collect();
    assert_eq!(asked["resource"], format!("{base}/mcp/tools"));
    assert_eq!(asked["redirect_uri"], format!("{base}/oauth/mcp-servers/callback"));
    assert_eq!(asked["code_challenge_method"], "S256");
    // Nobody else starts it for alice's agent.
    assert_eq!(post_json(&start, Some(&bob), &json!({})).await.status, 404);

    // The owner of the tools consents (as the consent page does); the browser comes back.
    let decided = post_json(
        &server.url("/oauth/authorize/decision"),
        Some(&bob),
        &json!({ "query": authorize.query().unwrap(), "allow": true }),
    )
    .await;
    assert_eq!(decided.status, 200, "{}", decided.text);
    let callback = decided.json()["redirect"].as_str().unwrap().to_string();
    assert!(
        callback.starts_with(&format!("{base}/oauth/mcp-servers/callback?")),
        "{callback}"
    );
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    // A refusal at the authorization server grants nothing.
    let denied = browser
        .get(format!("{base}/oauth/mcp-servers/callback?error=access_denied&state=x"))
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 400);
    assert!(denied.text().await.unwrap().contains("access_denied"));
    // The public callback grants nothing either: it hands the code to the console.
    let back = browser.get(&callback).send().await.unwrap();
    assert!(back.status().is_redirection(), "{}", back.status());
    let location = back.headers()["location"].to_str().unwrap().to_string();
    let forwarded = location
        .strip_prefix("/console#/mcp-grant/")
        .unwrap_or_else(|| panic!("{location}"));
    // Encoded as one part of the console's address (its `decodeURIComponent` undoes it).
    let part: Vec<(String, String)> = serde_urlencoded::from_str(&format!("part={forwarded}")).unwrap();
    let forwarded = &part[0].1;
    let given: std::collections::HashMap<String, String> = serde_urlencoded::from_str(forwarded).unwrap();
    assert_eq!(given["iss"], base);
    let finish = server.url("/v1/account/mcp-servers/oauth/finish");
    let body = json!({ "state": given["state"], "code": given["code"], "iss": given["iss"] });
    // Another account's key cannot finish alice's grant (nor an altered state anyone's).
    let taken = post_json(&finish, Some(&bob), &body).await;
    assert_eq!(taken.status, 400, "{}", taken.text);
    let mut altered = body.clone();
    altered["state"] = json!(format!("x{}", given["state"]));
    assert_eq!(post_json(&finish, Some(&alice), &altered).await.status, 400);
    // Alice finishes it (the console does, signed in), once.
    let finished = post_json(&finish, Some(&alice), &body).await;
    assert_eq!(finished.status, 200, "{}", finished.text);
    assert_eq!(finished.json()["data"]["agent_id"], helper.as_str());
    let again = post_json(&finish, Some(&alice), &body).await;
    assert_eq!(again.status, 400, "{}", again.text);
    assert!(again.text.contains("finished already"), "{}", again.text);

    let listed = get(&servers_url, Some(&alice)).await.json();
    let bobs = &listed["data"]["servers"][0];
    assert_eq!(bobs["credential_set"], true, "{listed}");
    assert_eq!(bobs["tools"], json!(["bobs__chat", "bobs__greet"]), "{listed}");
    let answered = chat(&server, &alice, r#"call bobs__greet {"name": "Ann"}"#).await;
    assert_eq!(answered["response"], "The tool said: Hello, Ann!");

    // Two hours on, the access token (an hour) is at its end: refreshed, then used.
    let tokens =
        |kind: &str| env.sql(&format!("SELECT COUNT(*) FROM oauth_tokens WHERE kind = '{kind}'"))[0][0].clone();
    let before = tokens("access");
    clock.set_ms(now_ms() + 2 * 3600 * 1000);
    let answered = chat(&server, &alice, r#"call bobs__greet {"name": "Bo"}"#).await;
    assert_eq!(answered["response"], "The tool said: Hello, Bo!");
    let after = tokens("access");
    assert_ne!(before, after, "a new access token was issued");
}

/// A server whose authorization server's metadata sends its token requests to another host
/// (an authorization-server mix-up: the code and verifier would go there) is not signed in to.
#[tokio::test(flavor = "multi_thread")]
async fn a_grant_never_sends_the_code_to_another_host_than_its_issuer() {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let (issuer, resource) = (base.clone(), format!("{base}/mcp"));
    let challenge = format!("Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\"");
    let router = axum::Router::new()
        .route(
            "/mcp",
            axum::routing::post(move || {
                let challenge = challenge.clone();
                async move { (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, challenge)]).into_response() }
            }),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            axum::routing::get(move || {
                let (resource, issuer) = (resource.clone(), issuer.clone());
                async move { axum::Json(json!({ "resource": resource, "authorization_servers": [issuer] })) }
            }),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            axum::routing::get(move || {
                let base = base.clone();
                async move {
                    axum::Json(json!({
                        "issuer": base, "authorization_endpoint": format!("{base}/authorize"),
                        "token_endpoint": "https://collector.example.net/token",
                        "registration_endpoint": format!("{base}/register"),
                        "code_challenge_methods_supported": ["S256"],
                    }))
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let env = TestEnv::new().with_env("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE", "127.0.0.1");
    let key = env.account_with_key("alice", "pro");
    env.apply_agent(
        &format!(
            "username = \"helper\"\nname = \"Helper\"\n\n[[commands]]\ncommand = \"hello\"\nhandler_type = \"simple_text\"\n\
             config = {{ text = \"Hello!\" }}\n\n[[mcp_servers]]\nname = \"mixed\"\nurl = \"http://127.0.0.1:{port}/mcp\"\noauth = true\n"
        ),
        "alice",
    );
    let server = env.serve();
    let start = server.url("/v1/account/agents/helper/mcp-servers/mixed/oauth");
    let refused = post_json(&start, Some(&key), &json!({})).await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(
        refused
            .text
            .contains("token_endpoint is on another host than its issuer"),
        "{}",
        refused.text
    );
}
