//! What an operator does to a whole deployment: rotate the master key over every sealed
//! secret (a crash at any point leaves one key that opens them all), and back the
//! database up and restore it elsewhere.

use std::time::Duration;

use serde_json::json;

use crate::support::api::*;
use crate::support::chains::LocalBase;
use crate::support::payers::{Payer, X402Client, try_pay_with};
use crate::support::x402::*;
use crate::support::*;

const ETH: u128 = 10u128.pow(18);

fn key_file(env: &TestEnv) -> String {
    std::fs::read_to_string(env.path("master.key")).expect("master.key")
}

fn retired_keys(env: &TestEnv) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(env.path(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with("master.key.retired-"))
        .map(|name| std::fs::read_to_string(env.path(&name)).unwrap())
        .collect();
    found.sort();
    found
}

/// Sends `usdc` from the agent's Base wallet: its sealed key must open.
async fn spend_from_the_wallet(server: &TestServer, key: &str, agent: &str, usdc: f64) -> Reply {
    let url = server.url(&format!("/v1/agents/{agent}/wallet/base/transfer"));
    let recipient = "0x000000000000000000000000000000000000dEaD";
    post_json(
        &url,
        Some(key),
        &json!({ "recipientAddress": recipient, "amountUsdc": usdc }),
    )
    .await
}

#[tokio::test]
async fn rotating_the_master_key_reseals_every_secret_and_a_crash_leaves_one_key() {
    let chain = LocalBase::start().await;
    let env = TestEnv::new().with_env("AGENT_HOST_BASE_RPC_URL", &chain.rpc_url);
    let key = env.account_with_key("acme", "pro");
    let agent = env.apply_agent(&manifest("keeper"), "acme");
    let wallet = env.create_wallet("keeper", "base");
    env.create_wallet("keeper", "solana");
    chain.set_eth(&wallet, ETH / 100).await;
    chain.mint_usdc(&wallet, 10_000_000).await;
    let first = key_file(&env);
    // Two wallet keys and the deployment's check value.
    assert_eq!(env.cli_json(&["secrets", "check"])["opened"], 3);

    // Killed halfway through resealing: the transaction never committed, the old key stays
    // and the new one is forgotten.
    let crashed = env.cli_with_env("AGENT_HOST_TEST_FAULT", "secrets:mid_rotation", &["secrets", "rotate"]);
    assert!(!crashed.status.success(), "{}", crashed.stderr);
    assert!(
        env.path("master.key.next").exists(),
        "the new key was written before the database changed"
    );
    assert_eq!(env.cli_json(&["secrets", "check"])["opened"], 3);
    assert_eq!(key_file(&env), first);
    assert!(
        !env.path("master.key.next").exists(),
        "the unfinished rotation is forgotten"
    );

    // Killed after the commit, before the key file was replaced: the next start finishes it.
    let crashed = env.cli_with_env("AGENT_HOST_TEST_FAULT", "secrets:after_commit", &["secrets", "rotate"]);
    assert!(!crashed.status.success(), "{}", crashed.stderr);
    let second = std::fs::read_to_string(env.path("master.key.next")).unwrap();
    assert_eq!(env.cli_json(&["secrets", "check"])["opened"], 3);
    assert_eq!(key_file(&env), second);
    assert_eq!(retired_keys(&env), vec![first.clone()]);

    // A rotation that finishes.
    let rotated = env.cli_json(&["secrets", "rotate"]);
    assert_eq!(rotated["resealed"], 3, "{rotated}");
    let third = key_file(&env);
    assert!(third != second && third != first);
    assert_eq!(retired_keys(&env).len(), 2);

    // The server opens the wallet's key under the new master key.
    let server = env.serve();
    let sent = spend_from_the_wallet(&server, &key, &agent, 1.0).await;
    assert_eq!(sent.status, 200, "{}", sent.text);
    assert_eq!(chain.usdc_of(&wallet).await, 9_000_000);
    drop(server);

    // A host given a key from before the rotation refuses to start.
    let stale = env.cli_with_env("AGENT_HOST_MASTER_KEY", &second, &["agent", "list"]);
    assert_eq!(stale.status.code(), Some(1));
    assert!(stale.stderr.contains("master key differs"), "{}", stale.stderr);

    // With the key in the environment, the operator brings the new one.
    let mut env = env;
    env.set_env("AGENT_HOST_MASTER_KEY", &third);
    let refused = env.cli(&["secrets", "rotate"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(refused.stderr.contains("--new-key-stdin"), "{}", refused.stderr);
    let fourth = "cd".repeat(32);
    let rotated = env.cli_with_stdin(
        &["--json", "secrets", "rotate", "--new-key-stdin"],
        &format!("{fourth}\n"),
    );
    assert!(rotated.status.success(), "{}", rotated.stderr);
    assert_eq!(rotated.json()["resealed"], 3);
    assert_eq!(key_file(&env), third, "the file is not the key's home then");
    assert_eq!(
        env.cli(&["secrets", "check"]).status.code(),
        Some(1),
        "the old key no longer opens them"
    );
    env.set_env("AGENT_HOST_MASTER_KEY", &fourth);
    assert_eq!(env.cli_json(&["secrets", "check"])["opened"], 3);
}

/// Where a backup of `env`'s database is written, and how it is restored into `into`:
/// `agent-host db backup` on SQLite; `pg_dump` and `pg_restore` on PostgreSQL, as the
/// operations guide says.
fn back_up(env: &TestEnv) -> std::path::PathBuf {
    let file = env.path("backup.db");
    match env.postgres_url() {
        None => {
            let out = env.cli_json(&["db", "backup", file.to_str().unwrap()]);
            assert!(out["bytes"].as_u64().unwrap() > 0, "{out}");
            let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
            assert_eq!(mode & 0o777, 0o600, "the copy is private");
            let again = env.cli(&["db", "backup", file.to_str().unwrap()]);
            assert_eq!(again.status.code(), Some(1), "an existing file is never overwritten");
        }
        Some(url) => {
            let refused = env.cli(&["db", "backup", file.to_str().unwrap()]);
            assert_eq!(refused.status.code(), Some(1));
            assert!(refused.stderr.contains("pg_dump"), "{}", refused.stderr);
            let out = std::process::Command::new("pg_dump")
                .args(["--format=custom", "--file", file.to_str().unwrap(), url])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
    }
    file
}

fn restore(file: &std::path::Path, into: &TestEnv) {
    match into.postgres_url() {
        None => {
            std::fs::copy(file, into.path("agent-host.db")).unwrap();
        }
        Some(url) => {
            let out = std::process::Command::new("pg_restore")
                .args(["--no-owner", "--exit-on-error", "--dbname", url, file.to_str().unwrap()])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

#[tokio::test]
async fn a_backup_restored_elsewhere_serves_the_same_key_agent_wallet_and_ledger() {
    let chain = LocalBase::start().await;
    let env = TestEnv::new().with_env("AGENT_HOST_BASE_RPC_URL", &chain.rpc_url);
    let key = env.account_with_key("acme", "pro");
    let agent = env.apply_agent(
        &format!(
            "{}\n[[commands]]\ncommand = \"nap\"\nhandler_type = \"custom\"\nplugin = \"{}\"\nlong_running = true\n",
            paid_manifest("seller"),
            plugin_path("probe")
        ),
        "acme",
    );
    let wallet = env.create_wallet("seller", "base");
    chain.set_eth(&wallet, ETH / 100).await;
    let (payer, _) = Payer::on_base(&chain, 1_000_000).await;
    let server = env.serve();
    let paid = try_pay_with(
        X402Client::Fetch2,
        &payer,
        &server.url("/x402/base/seller"),
        &json!({ "command": "hello", "name": "Ann" }),
    )
    .await
    .unwrap();
    assert_eq!(paid.status, 200, "{}", paid.body);
    let job = execute_with(&server, &key, "seller", "nap", json!({"mode": "sleep", "n": 10})).await;
    let job_url = job.json()["data"]["result"]["statusUrl"].as_str().unwrap().to_string();
    let job_path = format!("/jobs/{}", job_url.rsplit_once("/jobs/").unwrap().1);
    assert_eq!(poll_job(&job_url, Duration::from_secs(10)).await["state"], "succeeded");

    // Taken while the server runs.
    let file = back_up(&env);
    let master_key = key_file(&env);
    drop(server);

    let restored = TestEnv::new()
        .with_env("AGENT_HOST_BASE_RPC_URL", &chain.rpc_url)
        .with_env("AGENT_HOST_MASTER_KEY", master_key.trim());
    restore(&file, &restored);
    assert_eq!(restored.cli_json(&["secrets", "check"])["opened"], 2);
    let server = restored.serve();
    let commands = get(&server.url(&format!("/v1/agents/{agent}/commands")), Some(&key)).await;
    assert_eq!(commands.status, 200, "the same key and agent: {}", commands.text);
    let wallets = restored.cli_json(&["wallet", "list", "--agent", "seller"]);
    assert_eq!(wallets[0]["address"], wallet.as_str(), "{wallets}");
    let payments = restored.cli_json(&["payments", "list", "--agent", "seller"]);
    assert_eq!(payments[0]["state"], "served", "{payments}");
    let job = get(&server.url(&job_path), None).await;
    assert_eq!(job.json()["response"], "slept 10 ms", "{}", job.text);
    // The wallet spends with the restored key: the payment's 0.05 USDC is there.
    let sent = spend_from_the_wallet(&server, &key, &agent, 0.01).await;
    assert_eq!(sent.status, 200, "{}", sent.text);
    assert_eq!(chain.usdc_of(&wallet).await, 40_000);
}

/// A host still running after a rotation holds the retired key: every write that would seal
/// a secret with it is refused (no host could open it again), and a secret that did end up
/// under a retired key (an older backup's) is brought back by `secrets reseal`.
#[tokio::test]
async fn a_host_left_on_a_retired_key_cannot_seal_and_strays_are_resealed() {
    let env = TestEnv::new();
    let key = env.account_with_key("acme", "pro");
    env.apply_agent(&manifest("keeper"), "acme");
    env.create_wallet("keeper", "base");
    let server = env.serve();
    async fn create_endpoint(server: &TestServer, key: &str) -> Reply {
        let endpoint = json!({ "url": "https://93.184.216.34/hook", "events": ["*"] });
        post_json(&server.url("/v1/account/webhooks"), Some(key), &endpoint).await
    }
    assert_eq!(create_endpoint(&server, &key).await.status, 201, "before the rotation");
    let before = env.sql("SELECT secret FROM wallets")[0][0].clone().unwrap();
    let rotated = env.cli_json(&["secrets", "rotate"]);
    assert_eq!(rotated["resealed"], 3, "{rotated}");

    // The running host still has the old key: it may not seal with it.
    let refused = create_endpoint(&server, &key).await;
    assert_eq!(refused.status, 503, "{}", refused.text);
    assert!(
        refused.error_message().contains("master key was replaced"),
        "{}",
        refused.text
    );
    assert_eq!(
        env.cli_json(&["secrets", "check"])["opened"],
        3,
        "every secret opens with the new key"
    );
    drop(server);

    // A wallet key restored from before the rotation opens only with the retired key.
    let restored = env.blob_literal(&hex::decode(&before).unwrap());
    env.sql(&format!("UPDATE wallets SET secret = {restored}"));
    let check = env.cli(&["secrets", "check"]);
    assert!(
        !check.status.success() && check.stderr.contains("wallet key"),
        "{}",
        check.stderr
    );
    let retired = std::fs::read_dir(env.data_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("master.key.retired-")
        })
        .unwrap();
    let resealed = env.cli_json(&["secrets", "reseal", "--retired-key-file", retired.to_str().unwrap()]);
    assert_eq!(resealed["resealed"], 1, "{resealed}");
    assert_eq!(env.cli_json(&["secrets", "check"])["opened"], 3);
    let server = env.serve();
    assert_eq!(
        create_endpoint(&server, &key).await.status,
        201,
        "a host on the current key seals"
    );
}
