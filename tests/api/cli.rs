use serde_json::json;

use crate::support::*;

#[test]
fn accounts_take_plans_and_refuse_bad_input() {
    let env = TestEnv::new();
    let free = env.create_account("alice", "free");
    assert_eq!(
        (free["plan"].as_str(), free["rpm"].as_u64(), free["rpd"].as_u64()),
        (Some("free"), Some(60), Some(1000))
    );
    let pro = env.create_account("paul", "pro");
    assert_eq!((pro["rpm"].as_u64(), pro["rpd"].as_u64()), (Some(300), Some(10_000)));
    let ent = env.cli_json(&[
        "account",
        "create",
        "erin",
        "--plan",
        "enterprise",
        "--rpm",
        "1000",
        "--rpd",
        "50000",
    ]);
    assert_eq!((ent["rpm"].as_u64(), ent["rpd"].as_u64()), (Some(1000), Some(50_000)));

    let dup = env.cli(&["account", "create", "alice"]);
    assert_eq!(dup.status.code(), Some(1));
    assert!(dup.stderr.contains("already exists"), "{}", dup.stderr);
    let no_limits = env.cli(&["account", "create", "ent2", "--plan", "enterprise"]);
    assert_eq!(no_limits.status.code(), Some(1));
    assert!(no_limits.stderr.contains("--rpm"), "{}", no_limits.stderr);
    let free_custom = env.cli(&["account", "create", "f2", "--rpm", "5", "--rpd", "5"]);
    assert_eq!(free_custom.status.code(), Some(1));
    let json_error = env.cli(&["--json", "account", "create", "alice"]);
    assert_eq!(json_error.status.code(), Some(1));
    assert!(json_error.json()["error"].as_str().unwrap().contains("already exists"));
}

#[test]
fn keys_are_shown_once_listed_without_secrets_and_revocable() {
    let env = TestEnv::new();
    env.create_account("alice", "free");
    let created = env.cli_json(&["key", "create", "--account", "alice"]);
    let key = created["key"].as_str().unwrap();
    let id = created["id"].as_str().unwrap();
    assert!(key.starts_with("ahk_") && key.starts_with(id));
    assert!(key.len() >= 4 + 16 + 1 + 43, "at least 256 bits of secret: {key}");
    let second = env.create_key("alice");
    assert_ne!(second, key);

    let listed = env.cli(&["--json", "key", "list", "--account", "alice"]);
    let secret = key.rsplit_once('_').unwrap().1;
    assert!(!listed.stdout.contains(secret), "a listing never shows the secret");
    let listed = listed.ok();
    assert_eq!(listed["keys"].as_array().unwrap().len(), 2);
    assert_eq!(listed["keys"][0]["active"], true);

    // The secret is not in the database either, only its hash.
    assert!(!env.database_contains(secret.as_bytes()));

    let revoked = env.cli_json(&["key", "revoke", id.trim_start_matches("ahk_")]);
    assert_eq!(revoked["id"], id);
    let listed = env.cli_json(&["key", "list", "--account", "alice"]);
    let row = listed["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id)
        .unwrap()
        .clone();
    assert_eq!(row["active"], false);
    assert!(row["revoked_at"].as_str().is_some());

    let unknown = env.cli(&["key", "revoke", "ahk_ffffffffffffffff"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(unknown.stderr.contains("no key"));
    let no_account = env.cli(&["key", "create", "--account", "nobody"]);
    assert_eq!(no_account.status.code(), Some(1));
    assert!(
        no_account.stderr.contains("no account named 'nobody'"),
        "{}",
        no_account.stderr
    );
}

#[test]
fn applying_a_manifest_again_updates_in_place_with_stable_ids() {
    let env = TestEnv::new();
    env.create_account("alice", "free");
    let file = env.path("alpha.toml");
    std::fs::write(&file, manifest("alpha")).unwrap();
    let first = env.cli_json(&["agent", "apply", file.to_str().unwrap(), "--account", "alice"]);
    assert_eq!(first["created"], true);
    let hello_id = first["commands"][0]["id"].clone();

    // Rename, reprice, drop one command, add another; no --account needed for an update.
    let edited = manifest("alpha")
        .replace("name = \"Agent alpha\"", "name = \"Alpha Two\"")
        .replace("price_usd = 0.05", "price_usd = 0.07")
        .replace("command = \"secret\"", "command = \"fresh\"");
    std::fs::write(&file, edited).unwrap();
    let second = env.cli_json(&["agent", "apply", file.to_str().unwrap()]);
    assert_eq!(second["created"], false);
    assert_eq!(second["id"], first["id"]);
    assert_eq!(second["commands"][0]["id"], hello_id, "command ids stay stable");
    assert_eq!(second["removed_commands"], json!(["secret"]));

    let shown = env.cli_json(&["agent", "show", "alpha"]);
    assert_eq!(shown["name"], "Alpha Two");
    assert_eq!(shown["account"], "alice");
    let names: Vec<&str> = shown["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["command"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["hello", "fresh", "about"]);
    assert_eq!(shown["commands"][0]["price_usd"], json!(0.07));
    let by_id = env.cli_json(&["agent", "show", first["id"].as_str().unwrap()]);
    assert_eq!(by_id["username"], "alpha");

    let listed = env.cli_json(&["agent", "list"]);
    assert_eq!(listed["agents"].as_array().unwrap().len(), 1);
    assert_eq!(listed["agents"][0]["commands"], 3);
}

#[test]
fn an_invalid_manifest_names_the_line_and_field() {
    let env = TestEnv::new();
    env.create_account("alice", "free");
    let file = env.path("bad.toml");
    let bad = manifest("alpha").replace("price_usd = 0.05", "price_usd = 0.0000001");
    std::fs::write(&file, &bad).unwrap();
    let out = env.cli(&["agent", "apply", file.to_str().unwrap(), "--account", "alice"]);
    assert_eq!(out.status.code(), Some(1));
    let line = bad.lines().position(|l| l.starts_with("price_usd")).unwrap() + 1;
    let expected = format!("{}:{line}: commands[0].price_usd:", file.display());
    assert!(out.stderr.contains(&expected), "expected {expected} in {}", out.stderr);
    assert_eq!(out.stderr.trim().lines().count(), 1);

    std::fs::write(
        &file,
        manifest("alpha").replace("handler_type = \"built_in\"", "handler_type = \"magic\""),
    )
    .unwrap();
    let out = env.cli(&["agent", "apply", file.to_str().unwrap(), "--account", "alice"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stderr.contains("magic"), "{}", out.stderr);

    std::fs::write(&file, manifest("alpha")).unwrap();
    let out = env.cli(&["agent", "apply", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stderr.contains("--account"),
        "a new agent needs an owner: {}",
        out.stderr
    );
    let out = env.cli(&[
        "agent",
        "apply",
        env.path("missing.toml").to_str().unwrap(),
        "--account",
        "alice",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stderr.contains("cannot read"));
    assert_eq!(
        env.cli_json(&["agent", "list"])["agents"],
        json!([]),
        "nothing was half-applied"
    );
}

#[test]
fn an_agent_cannot_be_taken_over_by_another_account() {
    let env = TestEnv::new();
    env.create_account("alice", "free");
    env.create_account("bob", "free");
    env.apply_agent(&manifest("alpha"), "alice");
    let file = env.path("steal.toml");
    std::fs::write(&file, manifest("alpha")).unwrap();
    let out = env.cli(&["agent", "apply", file.to_str().unwrap(), "--account", "bob"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stderr.contains("belongs to another account"), "{}", out.stderr);
}

#[test]
fn bad_usage_is_refused() {
    let env = TestEnv::new();
    let out = env.cli(&["account", "create", "x", "--plan", "platinum"]);
    assert_ne!(out.status.code(), Some(0));
    let out = env.cli(&["agent", "show", "nobody"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stderr.contains("no agent"));
}

#[tokio::test]
async fn demo_seeds_once_and_its_key_works() {
    let env = TestEnv::new();
    let server = env.serve_with(&["demo", "--listen", "127.0.0.1:0"]);
    let key = server.ready["key"].as_str().unwrap().to_string();
    assert_eq!(server.ready["agent"]["username"], "helper");
    let reply = get(&server.url("/v1/agents/helper/commands"), Some(&key)).await;
    assert_eq!(reply.status, 200);
    let names: Vec<String> = reply.json()["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["command"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"hello".to_string()));
    // It sells over x402 from its own wallets, which the demo creates.
    let wallets = server.ready["wallets"].clone();
    let price_list = get(&server.url("/x402/base/helper"), None).await;
    assert_eq!(price_list.status, 200, "{}", price_list.text);
    assert_eq!(price_list.json()["accepts"][0]["payTo"], wallets["base"]);
    let price_list = get(&server.url("/x402/solana/helper"), None).await;
    assert_eq!(price_list.json()["accepts"][0]["payTo"], wallets["solana"]);
    let key_file = env.path("demo-api-key");
    assert_eq!(std::fs::read_to_string(&key_file).unwrap(), key);
    assert_eq!(mode(&key_file), 0o600);
    drop(server);

    let again = env.serve_with(&["demo", "--listen", "127.0.0.1:0"]);
    assert_eq!(
        again.ready["key"].as_str().unwrap(),
        key,
        "the same key on a second start"
    );
    assert_eq!(again.ready["wallets"], wallets, "the same wallets too");
    assert_eq!(
        env.cli_json(&["agent", "list"])["agents"].as_array().unwrap().len(),
        1,
        "seeded once"
    );
}

#[tokio::test]
async fn serve_listens_on_every_address_given_and_stops_on_sigterm() {
    let env = TestEnv::new();
    let server = env.serve_with(&["serve", "--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0"]);
    assert_eq!(server.urls.len(), 2);
    for url in &server.urls {
        assert_eq!(get(&format!("{url}/health"), None).await.status, 200);
    }
    let status = server.stop();
    assert!(status.success(), "graceful shutdown exits 0: {status:?}");
}

#[test]
fn the_master_key_file_is_created_private_unless_given() {
    let env = TestEnv::new();
    drop(env.serve());
    let file = env.path("master.key");
    assert_eq!(mode(&file), 0o600);
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim().len(), 64);

    let given = TestEnv::new().with_env("AGENT_HOST_MASTER_KEY", &"ab".repeat(32));
    drop(given.serve());
    assert!(
        !given.path("master.key").exists(),
        "a key from the environment is not written to disk"
    );

    let bad = TestEnv::new().with_env("AGENT_HOST_MASTER_KEY", "short");
    let out = bad.cli(&["serve", "--listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stderr.contains("AGENT_HOST_MASTER_KEY"), "{}", out.stderr);
}

fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}
