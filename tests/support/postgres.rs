//! Databases for the end-to-end tests in the PostgreSQL cluster scripts/test.sh starts:
//! one fresh database per test environment, dropped with it.

use std::process::Command;

/// The cluster's admin address, when the run is against PostgreSQL.
pub fn cluster() -> Option<String> {
    std::env::var("TEST_POSTGRES_URL").ok().filter(|url| !url.is_empty())
}

pub struct Database {
    pub name: String,
    pub url: String,
    admin: String,
}

impl Database {
    /// A new empty database when the run is against PostgreSQL.
    pub fn for_tests() -> Option<Database> {
        let admin = cluster()?;
        Some(Database::create(&admin))
    }

    pub fn create(admin: &str) -> Database {
        let name = format!("t_{}_{}", std::process::id(), super::unique());
        psql(admin, &format!("CREATE DATABASE {name}"));
        // postgres://user@host:port/DATABASE?sslmode=...: the same address, another database.
        let (address, query) = admin.split_once('?').map_or((admin, None), |(a, q)| (a, Some(q)));
        let base = address.rsplit_once('/').map_or(address, |(base, _)| base);
        let query = query.map(|q| format!("?{q}")).unwrap_or_default();
        Database {
            url: format!("{base}/{name}{query}"),
            name,
            admin: admin.to_string(),
        }
    }

    /// The rows of `sql` as text (bytea as lowercase hex, NULL as None).
    pub fn rows(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        const NULL: &str = "\u{1}NULL";
        let out = psql_with(
            &self.url,
            sql,
            &["-F", "\u{1f}", "-R", "\u{1e}", "-P", &format!("null={NULL}")],
        );
        out.trim_end_matches('\n')
            .split('\u{1e}')
            .filter(|row| !row.is_empty())
            .map(|row| {
                row.split('\u{1f}')
                    .map(|cell| match cell {
                        NULL => None,
                        hex if hex.starts_with("\\x") => Some(hex[2..].to_string()),
                        text => Some(text.to_string()),
                    })
                    .collect()
            })
            .collect()
    }

    /// Everything the database holds, as `pg_dump` writes it.
    pub fn dump(&self) -> Vec<u8> {
        let out = Command::new("pg_dump")
            .args(["--data-only", &self.url])
            .output()
            .expect("run pg_dump");
        assert!(
            out.status.success(),
            "pg_dump: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args([
                &self.admin,
                "-qAtc",
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            ])
            .output();
    }
}

fn psql(url: &str, sql: &str) -> String {
    psql_with(url, sql, &[])
}

fn psql_with(url: &str, sql: &str, options: &[&str]) -> String {
    let out = Command::new("psql")
        .args([url, "-v", "ON_ERROR_STOP=1", "-qAt"])
        .args(options)
        .args(["-c", sql])
        .output()
        .expect("run psql");
    assert!(
        out.status.success(),
        "psql failed: {sql}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
