use serde_json::json;

use crate::support::*;

/// The settings file applies, and an environment variable wins over it.
#[tokio::test]
async fn file_settings_apply_and_env_wins() {
    let env = TestEnv::new();
    std::fs::write(env.path("agent-host.toml"), "max_body_bytes = 1000\n").unwrap();
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&manifest("alpha"), "alice");
    let body = json!({"message": "x".repeat(2000)});
    let server = env.serve();
    let reply = post_json(&server.url("/v1/agents/alpha/chat"), Some(&key), &body).await;
    assert_eq!(reply.status, 413, "the file's limit applies");
    drop(server);

    let env = env.with_env("AGENT_HOST_MAX_BODY_BYTES", "100000");
    let server = env.serve();
    let reply = post_json(&server.url("/v1/agents/alpha/chat"), Some(&key), &body).await;
    assert_eq!(
        reply.status, 503,
        "the environment's limit wins (the body passed): {}",
        reply.text
    );
}

#[test]
fn a_bad_settings_file_is_one_clear_error() {
    let env = TestEnv::new();
    std::fs::write(env.path("agent-host.toml"), "max_body_bytez = 5\n").unwrap();
    let out = env.cli(&["agent", "list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stderr.contains("agent-host.toml") && out.stderr.contains("max_body_bytez"),
        "{}",
        out.stderr
    );
}

#[test]
fn the_docs_document_every_setting_and_the_readme_starts_with_the_two_commands() {
    let reference = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/configuration.md")).unwrap();
    for setting in agent_host::config::reference() {
        // Listed in its group's section: after its heading, before the next one.
        let heading = format!("(`{}`)\n", setting.section);
        let section = reference
            .split("\n### ")
            .find(|part| {
                part.lines()
                    .next()
                    .is_some_and(|line| line.ends_with(heading.trim_end()))
            })
            .unwrap_or_else(|| panic!("docs/configuration.md has no section for `{}`", setting.section));
        assert!(
            section.contains(&format!("`{}`", setting.env)),
            "docs/configuration.md lists {} outside the `{}` section",
            setting.env,
            setting.section
        );
        if !setting.file_key.is_empty() {
            assert!(
                reference.contains(&format!("`{}`", setting.file_key)),
                "docs/configuration.md lacks `{}`",
                setting.file_key
            );
        }
    }
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    assert!(readme.lines().count() <= 150, "the README grew past 150 lines");
    let head: String = readme.lines().take(12).collect::<Vec<_>>().join("\n");
    assert!(
        head.contains("scripts/demo.sh") && head.contains("scripts/test.sh"),
        "{head}"
    );
}

/// A named network fixes the chain: a node that serves another one stops the start, and
/// a value that contradicts the network is refused before anything is reached.
#[tokio::test]
async fn a_node_serving_another_chain_than_the_named_network_stops_the_start() {
    let solana = crate::support::chains::LocalSolana::start();
    let base = crate::support::chains::LocalBase::start().await;
    let serve = ["serve", "--listen", "127.0.0.1:0"];

    // Anvil answers chain id 8453: Base mainnet, not Sepolia.
    let env = TestEnv::new()
        .with_env("AGENT_HOST_BASE_NETWORK", "sepolia")
        .with_env("AGENT_HOST_BASE_RPC_URL", &base.rpc_url);
    let refused = env.cli(&serve);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        refused
            .stderr
            .contains("serves chain id 8453, not 84532 as base_network says"),
        "{}",
        refused.stderr
    );

    // Surfpool has a genesis of its own: not Solana mainnet's.
    let env = TestEnv::new().with_env("AGENT_HOST_SOLANA_RPC_URL", &solana.rpc_url);
    let refused = env.cli(&serve);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        refused
            .stderr
            .contains("not 5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d as solana_network says"),
        "{}",
        refused.stderr
    );

    let env = TestEnv::new().with_env("AGENT_HOST_BASE_CHAIN_ID", "84532");
    let refused = env.cli(&serve);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        refused
            .stderr
            .contains("base_chain_id = 84532 contradicts base_network = mainnet"),
        "{}",
        refused.stderr
    );
}

/// The data dir and the database hold every secret sealed and every account's records: a
/// new data dir is the service user's alone (0700), and the database files are 0600.
#[cfg(unix)]
#[tokio::test]
async fn the_data_dir_and_database_are_the_service_users_alone() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::sqlite();
    let dir = env.data_dir().to_path_buf();
    std::fs::remove_dir_all(&dir).unwrap();
    let key = env.account_with_key("alice", "free");
    let server = env.serve();
    assert_eq!(get(&server.url("/v1/account"), Some(&key)).await.status, 200);
    let mode = |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700, "the data dir");
    for name in ["agent-host.db", "agent-host.db-wal", "agent-host.db-shm", "master.key"] {
        let path = dir.join(name);
        assert!(path.exists(), "{name} exists");
        assert_eq!(mode(&path), 0o600, "{name}");
    }
    // A database made before (by an older version, or another umask) is narrowed at start.
    drop(server);
    std::fs::set_permissions(dir.join("agent-host.db"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let server = env.serve();
    assert_eq!(get(&server.url("/v1/account"), Some(&key)).await.status, 200);
    assert_eq!(mode(&dir.join("agent-host.db")), 0o600);
}
