//! Settings: defaults, then `agent-host.toml` in the data dir, then `AGENT_HOST_*`
//! environment variables (env wins), then command-line flags. The README lists each one.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Deserialize;

pub const SETTINGS_FILE: &str = "agent-host.toml";
pub const ENV_PREFIX: &str = "AGENT_HOST_";

/// Every setting: (name in agent-host.toml, environment variable, default, meaning).
/// The README's reference is checked against this list by a test.
pub const REFERENCE: &[(&str, &str, &str, &str)] = &[
    (
        "",
        "AGENT_HOST_DATA_DIR",
        "./data",
        "the data directory (also --data-dir)",
    ),
    (
        "",
        "AGENT_HOST_MASTER_KEY",
        "generated into DATA_DIR/master.key",
        "32-byte master key, hex or base64; encrypts secrets at rest",
    ),
    (
        "listen",
        "AGENT_HOST_LISTEN",
        "127.0.0.1:8080",
        "addresses to serve on; comma-separated in env (also --listen, repeatable)",
    ),
    (
        "max_body_bytes",
        "AGENT_HOST_MAX_BODY_BYTES",
        "1048576",
        "largest request body accepted; more answers 413",
    ),
    (
        "db_busy_timeout_ms",
        "AGENT_HOST_DB_BUSY_TIMEOUT_MS",
        "5000",
        "how long a database write waits for another process's lock",
    ),
    (
        "rate_limit_flush_secs",
        "AGENT_HOST_RATE_LIMIT_FLUSH_SECS",
        "10",
        "how often rate-limit counters are saved (also saved at shutdown)",
    ),
    (
        "shutdown_grace_secs",
        "AGENT_HOST_SHUTDOWN_GRACE_SECS",
        "30",
        "how long shutdown waits for requests in flight",
    ),
    (
        "log",
        "AGENT_HOST_LOG",
        "info",
        "log filter (tracing EnvFilter syntax), written to stderr",
    ),
];

#[derive(Debug, Clone)]
pub struct Settings {
    pub data_dir: PathBuf,
    pub listen: Vec<String>,
    pub max_body_bytes: usize,
    pub db_busy_timeout_ms: u64,
    pub rate_limit_flush_secs: u64,
    pub shutdown_grace_secs: u64,
    pub log: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSettings {
    listen: Option<Vec<String>>,
    max_body_bytes: Option<usize>,
    db_busy_timeout_ms: Option<u64>,
    rate_limit_flush_secs: Option<u64>,
    shutdown_grace_secs: Option<u64>,
    log: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{file}: {message}")]
    File { file: String, message: String },
    #[error("{name}: {message}")]
    Env { name: String, message: String },
}

impl Settings {
    /// Resolves the data dir (flag, then env, then `./data`) and loads every setting.
    pub fn load(data_dir_flag: Option<&Path>) -> Result<Settings, SettingsError> {
        let data_dir = data_dir_flag
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("AGENT_HOST_DATA_DIR").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("./data"));
        let file_path = data_dir.join(SETTINGS_FILE);
        let file: FileSettings = match std::fs::read_to_string(&file_path) {
            Ok(text) => toml::from_str(&text).map_err(|e| SettingsError::File {
                file: file_path.display().to_string(),
                message: e.message().trim().replace('\n', " "),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileSettings::default(),
            Err(e) => {
                return Err(SettingsError::File {
                    file: file_path.display().to_string(),
                    message: e.to_string(),
                });
            }
        };
        warn_unknown_env();
        let listen = match std::env::var("AGENT_HOST_LISTEN") {
            Ok(text) => text
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            Err(_) => file.listen.unwrap_or_else(|| vec!["127.0.0.1:8080".to_string()]),
        };
        Ok(Settings {
            data_dir,
            listen,
            max_body_bytes: env_parse("AGENT_HOST_MAX_BODY_BYTES")?
                .or(file.max_body_bytes)
                .unwrap_or(1024 * 1024),
            db_busy_timeout_ms: env_parse("AGENT_HOST_DB_BUSY_TIMEOUT_MS")?
                .or(file.db_busy_timeout_ms)
                .unwrap_or(5_000),
            rate_limit_flush_secs: env_parse("AGENT_HOST_RATE_LIMIT_FLUSH_SECS")?
                .or(file.rate_limit_flush_secs)
                .unwrap_or(10)
                .max(1),
            shutdown_grace_secs: env_parse("AGENT_HOST_SHUTDOWN_GRACE_SECS")?
                .or(file.shutdown_grace_secs)
                .unwrap_or(30),
            log: env_string("AGENT_HOST_LOG")
                .or(file.log)
                .unwrap_or_else(|| "info".to_string()),
        })
    }

    pub fn database_path(&self) -> PathBuf {
        self.data_dir.join("agent-host.db")
    }
}

fn env_string(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn env_parse<T: FromStr>(name: &str) -> Result<Option<T>, SettingsError>
where
    T::Err: std::fmt::Display,
{
    match env_string(name) {
        None => Ok(None),
        Some(text) => text.parse().map(Some).map_err(|e| SettingsError::Env {
            name: name.to_string(),
            message: format!("'{text}': {e}"),
        }),
    }
}

/// A misspelt variable would otherwise be silently ignored.
fn warn_unknown_env() {
    for (name, _) in std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v))) {
        if name.starts_with(ENV_PREFIX) && !REFERENCE.iter().any(|(_, env, _, _)| *env == name) {
            eprintln!("warning: unknown setting {name} is ignored");
        }
    }
}
