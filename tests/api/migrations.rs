use crate::support::*;

fn versions(env: &TestEnv) -> Vec<(i64, String)> {
    env.sql("SELECT version, name FROM schema_migrations ORDER BY version")
        .into_iter()
        .map(|row| (row[0].as_ref().unwrap().parse().unwrap(), row[1].clone().unwrap()))
        .collect()
}

#[test]
fn a_fresh_data_dir_gets_every_migration_once() {
    let env = TestEnv::new();
    env.create_account("alice", "free");
    let applied = versions(&env);
    let expected: Vec<(i64, String)> = agent_host::store::migrations::MIGRATIONS
        .iter()
        .map(|m| (m.version, m.name.to_string()))
        .collect();
    assert_eq!(applied, expected);
    assert!(expected.len() >= 2);
    if env.postgres_url().is_none() {
        assert_eq!(env.sql("PRAGMA journal_mode")[0][0].as_deref(), Some("wal"));
    }
}

#[test]
fn running_again_keeps_data_and_applies_nothing_twice() {
    let env = TestEnv::new();
    env.create_account("alice", "free");
    let server = env.serve();
    drop(server);
    let server = env.serve();
    drop(server);
    assert_eq!(versions(&env).len(), agent_host::store::migrations::MIGRATIONS.len());
    let keys = env.cli_json(&["key", "list", "--account", "alice"]);
    assert_eq!(keys["account"], "alice", "the account survived");
}

#[test]
fn a_database_newer_than_the_binary_is_refused() {
    let env = TestEnv::new();
    env.create_account("alice", "free");
    env.sql("INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (999, '0999_future', 'x', 0)");
    for args in [&["serve", "--listen", "127.0.0.1:0"][..], &["agent", "list"][..]] {
        let out = env.cli(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            out.stderr.contains("newer than this agent-host supports"),
            "{}",
            out.stderr
        );
        assert_eq!(out.stderr.trim().lines().count(), 1, "one clear line: {}", out.stderr);
    }
}

#[test]
fn an_edited_migration_is_noticed() {
    let env = TestEnv::new();
    env.create_account("alice", "free");
    env.sql("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1");
    let out = env.cli(&["agent", "list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stderr.contains("0001_init differs"), "{}", out.stderr);
}
