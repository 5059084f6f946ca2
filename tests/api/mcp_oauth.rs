//! OAuth 2.1 for the agents' MCP endpoints (`mcp_oauth = true`): the official TypeScript
//! SDK's OAuth client signs in through the consent page in a real browser, by dynamic
//! registration and by a Client ID Metadata Document served over HTTPS; and the
//! authorization server refuses, with OAuth's own errors, what an attacker would try.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::mcp::*;
use crate::support::*;

const AGENTS: &str = r#"
username = "toolsmith"
name = "Toolsmith"
personality = "Terse."

[[commands]]
command = "hello"
description = "Greets someone"
handler_type = "simple_text"
integrations = ["mcp"]
parameters = [{ name = "name", type = "string", required = true, description = "Who" }]
config = { text = "Hello, {{name}}!" }
"#;

const OTHER: &str = r#"
username = "other"
name = "Other"
personality = "Quiet."
"#;

/// A server with OAuth on, Alice's two agents, Alice's key and Mallory's.
fn oauth_env(env: TestEnv) -> (TestEnv, String, String) {
    let env = env.with_env("AGENT_HOST_MCP_OAUTH", "true");
    let alice = env.account_with_key("alice", "free");
    env.apply_agent(AGENTS, "alice");
    env.apply_agent(OTHER, "alice");
    let mallory = env.account_with_key("mallory", "free");
    (env, alice, mallory)
}

async fn oauth_client(request: &Value) -> Value {
    client_script("node", "node/oauth.mjs", request, "the MCP SDK's OAuth client").await
}

async fn ping(url: &str, token: &str) -> Reply {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }).to_string();
    post_message(url, &[("authorization", &format!("Bearer {token}"))], body).await
}

#[tokio::test]
async fn a_connector_signs_in_with_oauth_by_dynamic_registration() {
    let (env, alice, _) = oauth_env(TestEnv::new());
    let server = env.serve();
    let url = server.url("/mcp/toolsmith");
    let run = oauth_client(&json!({ "url": url, "key": alice, "registration": "dcr" })).await;

    assert_eq!(run["pageErrors"], json!([]), "{run}");
    assert_eq!(
        run["refusedStays"], true,
        "a refused request waits for the person: {run}"
    );
    assert_eq!(run["consent"]["allowAsleep"], true, "{run}");
    assert_eq!(run["consent"]["client"], "agent-host OAuth test client", "{run}");
    assert_eq!(run["consent"]["agent"], "toolsmith");
    assert!(
        run["consent"]["framing"]
            .as_str()
            .unwrap()
            .contains("frame-ancestors 'none'"),
        "{run}"
    );
    assert!(run["clientId"].as_str().unwrap().starts_with("ahcl_"), "{run}");
    assert_eq!(run["tools"], json!(["chat", "hello"]));
    assert_eq!(run["hello"], "Hello, OAuth!");
    assert_eq!(run["refreshed"], "AUTHORIZED");
    assert_eq!(run["helloAgain"], "Hello, again!");
    let (first, refreshed) = (&run["tokens"]["first"], &run["tokens"]["refreshed"]);
    assert_eq!(first["token_type"], "Bearer");
    assert_eq!(first["scope"], "mcp:tools");
    assert_eq!(first["expires_in"], 3600);
    assert_ne!(
        first["refresh_token"], refreshed["refresh_token"],
        "refresh tokens rotate"
    );
    // Revoked: the token is refused, and the 401 says where to sign in again.
    assert_eq!(run["revokeStatus"], 200);
    assert_eq!(run["afterRevoke"], 401);
    let challenge = run["afterRevokeChallenge"].as_str().unwrap();
    assert!(
        challenge.contains(&format!(
            "resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp/toolsmith\"",
            server.base
        )),
        "{challenge}"
    );
    // Nothing is left of the grant, and the key works as it did.
    let grants = get(&server.url("/v1/account/oauth/grants"), Some(&alice)).await;
    assert_eq!(grants.json()["data"]["grants"], json!([]), "{}", grants.text);
    assert_eq!(ping(&url, &alice).await.status, 200);
}

/// A CA and a certificate for 127.0.0.1 signed by it, made with openssl: (ca, cert, key).
fn tls_files(dir: &Path) -> (String, String, String) {
    let run = |args: &[&str]| {
        let status = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl");
        assert!(status.success(), "openssl {args:?}");
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    run(&[
        &["req", "-x509"][..],
        &ec,
        &[
            "-days",
            "1",
            "-subj",
            "/CN=agent-host test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ],
    ]
    .concat());
    run(&[
        &["req"][..],
        &ec,
        &["-subj", "/CN=127.0.0.1", "-keyout", "server.key", "-out", "server.csr"],
    ]
    .concat());
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "server.ext",
        "-out",
        "server.crt",
    ]);
    let at = |name: &str| dir.join(name).to_string_lossy().into_owned();
    (at("ca.crt"), at("server.crt"), at("server.key"))
}

#[tokio::test]
async fn a_client_named_by_its_metadata_document_signs_in() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = tls_files(dir.path());
    let (env, alice, _) = oauth_env(
        TestEnv::new()
            .with_env("AGENT_HOST_OUTBOUND_CA_FILE", &ca)
            .with_env("AGENT_HOST_MCP_OAUTH_ALLOW_PRIVATE", "127.0.0.1"),
    );
    let server = env.serve();
    let url = server.url("/mcp/toolsmith");
    let run = oauth_client(&json!({
        "url": url, "key": alice, "registration": "document", "tls": { "cert": cert, "key": key },
    }))
    .await;
    let client_id = run["clientId"].as_str().unwrap();
    assert!(client_id.starts_with("https://127.0.0.1:"), "{run}");
    // The person is shown whose document it is.
    assert_eq!(
        run["consent"]["client"], "agent-host OAuth test client (127.0.0.1)",
        "{run}"
    );
    assert_eq!(run["documentWithoutRedirect"], 400, "{run}");
    assert_eq!(run["hello"], "Hello, OAuth!", "{run}");
    assert_eq!(run["helloAgain"], "Hello, again!", "{run}");
    assert_eq!(run["afterRevoke"], 401, "{run}");
}

/// The authorization server's side, by hand: what a client sends, and what an attacker
/// would try instead.
struct As<'a> {
    server: &'a TestServer,
}

const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
const REDIRECT: &str = "http://127.0.0.1:9/callback";

impl As<'_> {
    async fn register(&self, body: &Value) -> Reply {
        post_json(&self.server.url("/oauth/register"), None, body).await
    }

    fn query(&self, client_id: &str, changes: &[(&str, Option<&str>)]) -> String {
        let resource = self.server.url("/mcp/toolsmith");
        let mut params: Vec<(&str, Option<String>)> = vec![
            ("response_type", Some("code".into())),
            ("client_id", Some(client_id.into())),
            ("redirect_uri", Some(REDIRECT.into())),
            ("code_challenge", Some(CHALLENGE.into())),
            ("code_challenge_method", Some("S256".into())),
            ("state", Some("st4te".into())),
            ("resource", Some(resource)),
        ];
        for (name, value) in changes {
            match params.iter_mut().find(|(n, _)| n == name) {
                Some(slot) => slot.1 = value.map(str::to_string),
                None => params.push((name, value.map(str::to_string))),
            }
        }
        let kept: Vec<(&str, String)> = params.into_iter().filter_map(|(n, v)| v.map(|v| (n, v))).collect();
        serde_urlencoded::to_string(kept).unwrap()
    }

    async fn describe(&self, query: &str) -> Reply {
        get(&self.server.url(&format!("/oauth/authorize/request?{query}")), None).await
    }

    /// The consent page's answer: the address the browser is sent to.
    async fn decide(&self, query: &str, key: Option<&str>, allow: bool) -> Reply {
        let body = json!({ "query": query, "allow": allow });
        post_json(&self.server.url("/oauth/authorize/decision"), key, &body).await
    }

    /// A code for `client_id`, allowed with `key`.
    async fn code(&self, client_id: &str, key: &str) -> String {
        let reply = self.decide(&self.query(client_id, &[]), Some(key), true).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        let to = reqwest::Url::parse(reply.json()["redirect"].as_str().unwrap()).unwrap();
        let params: std::collections::HashMap<_, _> = to.query_pairs().into_owned().collect();
        assert_eq!(params["state"], "st4te");
        assert_eq!(params["iss"], self.server.base);
        params["code"].clone()
    }

    async fn token(&self, form: &[(&str, &str)]) -> Reply {
        send(client().post(self.server.url("/oauth/token")).form(form)).await
    }

    async fn exchange(&self, client_id: &str, code: &str) -> Reply {
        self.token(&[
            ("grant_type", "authorization_code"),
            ("client_id", client_id),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", VERIFIER),
        ])
        .await
    }
}

fn oauth_error(reply: &Reply) -> (u16, String) {
    (
        reply.status,
        reply.json()["error"].as_str().unwrap_or_default().to_string(),
    )
}

fn redirected_error(reply: &Reply) -> String {
    let to = reqwest::Url::parse(reply.json()["redirect"].as_str().unwrap_or("x:")).unwrap();
    assert!(to.as_str().starts_with(REDIRECT), "{to}");
    to.query_pairs()
        .find(|(k, _)| k == "error")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_authorization_server_refuses_what_an_attacker_tries() {
    let (env, alice, mallory) = oauth_env(TestEnv::new());
    let server = env.serve();
    let auth = As { server: &server };
    let (toolsmith, other) = (server.url("/mcp/toolsmith"), server.url("/mcp/other"));

    // Discovery: the endpoint's metadata names this server, whose metadata names the rest.
    let resource = get(&server.url("/.well-known/oauth-protected-resource/mcp/toolsmith"), None)
        .await
        .json();
    assert_eq!(resource["resource"], toolsmith);
    assert_eq!(resource["authorization_servers"], json!([server.base]));
    let metadata = get(&server.url("/.well-known/oauth-authorization-server"), None)
        .await
        .json();
    assert_eq!(metadata["issuer"], server.base);
    assert_eq!(metadata["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(metadata["client_id_metadata_document_supported"], true);
    let unsigned = post_message(
        &toolsmith,
        &[],
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string(),
    )
    .await;
    assert_eq!(unsigned.status, 401);
    assert!(
        unsigned
            .header("www-authenticate")
            .unwrap()
            .contains("scope=\"mcp:tools\"")
    );

    // Registration: only addresses a code may safely go to.
    let long = format!("https://a.example/{}", "x".repeat(600));
    for bad in [
        "http://example.com/cb",
        "javascript:alert(1)",
        "https://example.com/cb#x",
        "search-ms:query=x",
        &long,
    ] {
        let reply = auth
            .register(&json!({ "redirect_uris": [bad], "token_endpoint_auth_method": "none" }))
            .await;
        assert_eq!(
            oauth_error(&reply),
            (400, "invalid_redirect_uri".into()),
            "{bad}: {}",
            reply.text
        );
    }
    let reply = auth
        .register(&json!({ "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", "client_name": "Probe" }))
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let client_id = reply.json()["client_id"].as_str().unwrap().to_string();
    assert!(
        reply.json().get("client_secret").is_none(),
        "a public client has no secret"
    );

    // A redirect address one character off is never sent anything: the person is told.
    let off_by_one = auth.query(&client_id, &[("redirect_uri", Some("http://127.0.0.1:9/callbacK"))]);
    let reply = auth.describe(&off_by_one).await;
    assert_eq!(oauth_error(&reply), (400, "invalid_request".into()), "{}", reply.text);
    assert!(reply.json().get("redirect").is_none());
    let reply = auth.decide(&off_by_one, Some(&alice), true).await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    // Errors the client may hear go back to it: no PKCE, plain PKCE, another server's resource.
    let cases = [
        (vec![("code_challenge", None)], "invalid_request"),
        (vec![("code_challenge_method", Some("plain"))], "invalid_request"),
        (
            vec![("resource", Some("https://elsewhere.example/mcp/toolsmith"))],
            "invalid_target",
        ),
        (vec![("scope", Some("admin"))], "invalid_scope"),
        (vec![("response_type", Some("token"))], "unsupported_response_type"),
    ];
    for (changes, error) in cases {
        let reply = auth.describe(&auth.query(&client_id, &changes)).await;
        assert_eq!(redirected_error(&reply), error, "{changes:?}: {}", reply.text);
    }
    // A decision is JSON only: a form another site posts is not one.
    let form = send(
        client()
            .post(server.url("/oauth/authorize/decision"))
            .header("content-type", "text/plain")
            .body(json!({ "query": auth.query(&client_id, &[]), "allow": false }).to_string()),
    )
    .await;
    assert_eq!(form.status, 415, "{}", form.text);
    // Declining sends access_denied; another account's key may not allow Alice's agent.
    let reply = auth.decide(&auth.query(&client_id, &[]), None, false).await;
    assert_eq!(redirected_error(&reply), "access_denied");
    let reply = auth.decide(&auth.query(&client_id, &[]), Some(&mallory), true).await;
    assert_eq!(reply.status, 404, "{}", reply.text);

    // A code: without its verifier, with another's, for another resource, refused.
    let code = auth.code(&client_id, &alice).await;
    let base = [
        ("grant_type", "authorization_code"),
        ("client_id", client_id.as_str()),
        ("code", code.as_str()),
        ("redirect_uri", REDIRECT),
    ];
    let reply = auth.token(&base).await;
    assert_eq!(oauth_error(&reply), (400, "invalid_request".into()), "{}", reply.text);
    let another = "x".repeat(43);
    let wrong_verifier = [&base[..], &[("code_verifier", another.as_str())]].concat();
    assert_eq!(
        oauth_error(&auth.token(&wrong_verifier).await),
        (400, "invalid_grant".into())
    );
    let elsewhere = [&base[..], &[("code_verifier", VERIFIER), ("resource", other.as_str())]].concat();
    assert_eq!(
        oauth_error(&auth.token(&elsewhere).await),
        (400, "invalid_target".into())
    );
    let redirect_off = [
        ("grant_type", "authorization_code"),
        ("client_id", client_id.as_str()),
        ("code", code.as_str()),
        ("redirect_uri", "http://127.0.0.1:9/callbacK"),
        ("code_verifier", VERIFIER),
    ];
    assert_eq!(
        oauth_error(&auth.token(&redirect_off).await),
        (400, "invalid_grant".into())
    );
    // The code, properly: tokens for Toolsmith's endpoint only.
    let reply = auth.exchange(&client_id, &code).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    let tokens = reply.json();
    let access = tokens["access_token"].as_str().unwrap().to_string();
    assert_eq!(ping(&toolsmith, &access).await.status, 200);
    let elsewhere = ping(&other, &access).await;
    assert_eq!(
        elsewhere.status, 401,
        "a token for Toolsmith opens no other agent: {}",
        elsewhere.text
    );
    let keyed = get(&server.url("/v1/account"), None).await;
    assert_eq!(keyed.status, 401);
    let keyed = send(client().get(server.url("/v1/account")).header("x-api-key", &access)).await;
    assert_eq!(keyed.status, 401, "a token is not a key: {}", keyed.text);
    // Another client replaying the code changes nothing: it is refused as not its own.
    let other_client = auth
        .register(&json!({ "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none" }))
        .await
        .json()["client_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        oauth_error(&auth.exchange(&other_client, &code).await),
        (400, "invalid_grant".into())
    );
    assert_eq!(ping(&toolsmith, &access).await.status, 200, "the real grant stands");
    // Replayed: refused, and what the first exchange gave is revoked.
    assert_eq!(
        oauth_error(&auth.exchange(&client_id, &code).await),
        (400, "invalid_grant".into())
    );
    assert_eq!(
        ping(&toolsmith, &access).await.status,
        401,
        "the replay revoked the grant"
    );

    // Refresh tokens rotate; one used twice revokes the whole grant.
    let code = auth.code(&client_id, &alice).await;
    let tokens = auth.exchange(&client_id, &code).await.json();
    let refresh = tokens["refresh_token"].as_str().unwrap();
    let refresh_form = [
        ("grant_type", "refresh_token"),
        ("client_id", client_id.as_str()),
        ("refresh_token", refresh),
    ];
    let renewed = auth.token(&refresh_form).await;
    assert_eq!(renewed.status, 200, "{}", renewed.text);
    let renewed_access = renewed.json()["access_token"].as_str().unwrap().to_string();
    assert_eq!(ping(&toolsmith, &renewed_access).await.status, 200);
    assert_eq!(
        oauth_error(&auth.token(&refresh_form).await),
        (400, "invalid_grant".into())
    );
    assert_eq!(
        ping(&toolsmith, &renewed_access).await.status,
        401,
        "the reuse revoked the grant"
    );

    // The owner sees a live grant and revokes it.
    let code = auth.code(&client_id, &alice).await;
    let access = auth.exchange(&client_id, &code).await.json()["access_token"]
        .as_str()
        .unwrap()
        .to_string();
    let grants = get(&server.url("/v1/account/oauth/grants"), Some(&alice)).await.json();
    let grant = &grants["data"]["grants"][0];
    assert_eq!(grant["client_name"], "Probe");
    assert_eq!(grant["resource"], toolsmith);
    let theirs = get(&server.url("/v1/account/oauth/grants"), Some(&mallory))
        .await
        .json();
    assert_eq!(theirs["data"]["grants"], json!([]));
    let path = format!("/v1/account/oauth/grants/{}", grant["id"].as_str().unwrap());
    let by_mallory = send(client().delete(server.url(&path)).header("x-api-key", &mallory)).await;
    assert_eq!(by_mallory.status, 404);
    let revoked = send(client().delete(server.url(&path)).header("x-api-key", &alice)).await;
    assert_eq!(revoked.status, 200, "{}", revoked.text);
    assert_eq!(ping(&toolsmith, &access).await.status, 401);

    // A grant works only while the key that allowed it does.
    let deputy = env.cli_json(&["key", "create", "--account", "alice"])["key"]
        .as_str()
        .unwrap()
        .to_string();
    let code = auth.code(&client_id, &deputy).await;
    let tokens = auth.exchange(&client_id, &code).await.json();
    let access = tokens["access_token"].as_str().unwrap().to_string();
    assert_eq!(ping(&toolsmith, &access).await.status, 200);
    let deputy_id: String = deputy.split('_').take(2).collect::<Vec<_>>().join("_");
    let gone = send(
        client()
            .delete(server.url(&format!("/v1/account/keys/{deputy_id}")))
            .header("x-api-key", &alice),
    )
    .await;
    assert_eq!(gone.status, 200, "{}", gone.text);
    assert_eq!(
        ping(&toolsmith, &access).await.status,
        401,
        "the key's revocation ends its grants"
    );
    let refresh = tokens["refresh_token"].as_str().unwrap();
    let again = auth
        .token(&[
            ("grant_type", "refresh_token"),
            ("client_id", client_id.as_str()),
            ("refresh_token", refresh),
        ])
        .await;
    assert_eq!(oauth_error(&again), (400, "invalid_grant".into()));

    // A path cannot write into the challenge.
    let injected = server.url("/mcp/x%22,%20resource_metadata=%22https:%2F%2Fevil%2Fprm");
    let reply = post_message(
        &injected,
        &[],
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string(),
    )
    .await;
    assert_eq!(reply.status, 401, "{}", reply.text);
    assert_eq!(
        reply.header("www-authenticate"),
        Some("Bearer"),
        "no metadata for a name no endpoint has"
    );

    // The token endpoint reads forms, and names what it does not do.
    let json_body = post_json(
        &server.url("/oauth/token"),
        None,
        &json!({ "grant_type": "authorization_code" }),
    )
    .await;
    assert_eq!(oauth_error(&json_body), (400, "invalid_request".into()));
    let implicit = auth
        .token(&[("grant_type", "password"), ("client_id", client_id.as_str())])
        .await;
    assert_eq!(oauth_error(&implicit), (400, "unsupported_grant_type".into()));
    let unknown = auth
        .token(&[
            ("grant_type", "refresh_token"),
            ("client_id", "ahcl_0000000000000000"),
            ("refresh_token", refresh),
        ])
        .await;
    assert_eq!(oauth_error(&unknown), (401, "invalid_client".into()));
}

#[tokio::test]
async fn without_the_setting_there_is_no_oauth() {
    let env = TestEnv::new();
    let alice = env.account_with_key("alice", "free");
    env.apply_agent(AGENTS, "alice");
    let server = env.serve();
    for path in [
        "/.well-known/oauth-authorization-server",
        "/.well-known/oauth-protected-resource/mcp/toolsmith",
        "/oauth/authorize",
    ] {
        assert_eq!(get(&server.url(path), None).await.status, 404, "{path}");
    }
    let reply = ping(&server.url("/mcp/toolsmith"), "ahat_0123456789abcdef_AAAA").await;
    assert_eq!(reply.status, 401);
    assert_eq!(
        reply.header("www-authenticate"),
        Some("Bearer"),
        "no metadata a client would follow"
    );
    assert_eq!(ping(&server.url("/mcp/toolsmith"), &alice).await.status, 200);
}
