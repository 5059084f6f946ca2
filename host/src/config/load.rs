//! Where settings come from: the data dir's `agent-host.toml` and `AGENT_HOST_*`
//! variables (the environment first), each parsed and checked as the table in `mod.rs` says.

use std::path::{Path, PathBuf};

use super::values::SettingValue;
use super::{ENV_PREFIX, SETTINGS_FILE, Settings, SettingsError, reference};

/// An origin as a browser sends it (`https://app.example.com`, `http://localhost:3000`), or
/// `*`; anything else (a path, a missing scheme) could never match and is refused.
fn cors_origin(text: &str) -> Result<String, String> {
    if text == "*" {
        return Ok(text.to_string());
    }
    let refused = || format!("'{text}' is not an origin: scheme://host[:port], e.g. https://app.example.com");
    let url = reqwest::Url::parse(text).map_err(|_| refused())?;
    if !matches!(url.scheme(), "http" | "https")
        || url.host_str().is_none()
        || text.trim_end_matches('/') != url.origin().ascii_serialization()
    {
        return Err(refused());
    }
    Ok(url.origin().ascii_serialization())
}

/// The file's value of a key, as the text a setting parses: scalars as written, arrays
/// joined with commas.
fn file_text(value: &toml::Value) -> Result<String, String> {
    match value {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => Ok(value.to_string()),
        toml::Value::Array(items) => items
            .iter()
            .map(|item| match item {
                toml::Value::String(s) => Ok(s.clone()),
                toml::Value::Integer(n) => Ok(n.to_string()),
                other => Err(format!("{other} is not a string or a number")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|items| items.join(",")),
        other => Err(format!("{other} is not a value this setting takes")),
    }
}

/// Where the settings come from: the file's table and the environment.
pub(super) struct Sources {
    pub(super) file_path: PathBuf,
    pub(super) file: toml::Table,
}

impl Sources {
    /// The setting `key`: the environment's, else the file's, else `default`; parsed and
    /// checked against `range`.
    pub(super) fn get<T: SettingValue>(
        &self,
        key: &str,
        default: &str,
        range: Option<(u64, u64)>,
    ) -> Result<T, SettingsError> {
        let env = format!("{ENV_PREFIX}{}", key.to_ascii_uppercase());
        let (text, from_env) = match std::env::var(&env).ok().filter(|v| !v.is_empty()) {
            Some(text) => (text, true),
            None => match self.file.get(key) {
                Some(value) => (file_text(value).map_err(|m| self.file_error(key, m))?, false),
                None => (default.to_string(), false),
            },
        };
        let fail = |message: String| match from_env {
            true => SettingsError::Env {
                name: env.clone(),
                message,
            },
            false => self.file_error(key, message),
        };
        let value = T::parse(&text).map_err(&fail)?;
        if let Some((min, max)) = range
            && !value.within(min, max)
        {
            return Err(fail(format!("{} is outside {min}..={max}", text.trim())));
        }
        Ok(value)
    }

    pub(super) fn file_error(&self, key: &str, message: String) -> SettingsError {
        SettingsError::File {
            file: self.file_path.display().to_string(),
            message: format!("{key}: {message}"),
        }
    }
}

impl Settings {
    /// Resolves the data dir (flag, then env, then `./data`) and loads every setting.
    pub fn load(data_dir_flag: Option<&Path>) -> Result<Settings, SettingsError> {
        let data_dir = data_dir_flag
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("AGENT_HOST_DATA_DIR").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("./data"));
        let file_path = data_dir.join(SETTINGS_FILE);
        let file = match std::fs::read_to_string(&file_path) {
            Ok(text) => toml::from_str(&text).map_err(|e| SettingsError::File {
                file: file_path.display().to_string(),
                message: e.message().trim().replace('\n', " "),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => toml::Table::new(),
            Err(e) => {
                return Err(SettingsError::File {
                    file: file_path.display().to_string(),
                    message: e.to_string(),
                });
            }
        };
        warn_unknown_env();
        let mut settings = Settings::read(data_dir, &Sources { file_path, file })?;
        let server = &mut settings.server;
        server.public_base_url = server
            .public_base_url
            .take()
            .map(|u| u.trim_end_matches('/').to_string());
        server.client_ip_header = server.client_ip_header.take().map(|h| h.to_ascii_lowercase());
        for origin in &mut server.cors_allowed_origins {
            *origin = cors_origin(origin).map_err(|message| SettingsError::Env {
                name: format!("{ENV_PREFIX}CORS_ALLOWED_ORIGINS"),
                message,
            })?;
        }
        Ok(settings)
    }

    /// Settings from the text of a settings file alone, for unit tests elsewhere.
    #[cfg(test)]
    pub fn from_toml_for_tests(text: &str) -> Result<Settings, SettingsError> {
        let sources = Sources {
            file_path: PathBuf::from("agent-host.toml"),
            file: toml::from_str(text).expect("TOML"),
        };
        Settings::read(PathBuf::from("data"), &sources)
    }
}

/// A misspelt variable would otherwise be silently ignored.
fn warn_unknown_env() {
    let known: Vec<String> = reference().into_iter().map(|d| d.env).collect();
    for (name, _) in std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v))) {
        if name.starts_with(ENV_PREFIX)
            && !known.contains(&name)
            && name != crate::faults::VARIABLE
            && name != crate::clock::TEST_CLOCK
        {
            eprintln!("warning: unknown setting {name} is ignored");
        }
    }
}
