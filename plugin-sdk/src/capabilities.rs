//! Thin, typed helpers over the host capabilities. Each call fails with a clear error when
//! the command was not granted the capability.

use crate::bindings::agent::plugin as host;
use crate::{Error, Result};

/// Log lines, tagged with the agent and command by the host.
pub mod log {
    use super::host::log::{Level, log};

    pub fn debug(message: &str) {
        log(Level::Debug, message)
    }
    pub fn info(message: &str) {
        log(Level::Info, message)
    }
    pub fn warn(message: &str) {
        log(Level::Warn, message)
    }
    pub fn error(message: &str) {
        log(Level::Error, message)
    }
}

/// Outbound HTTP through the host's filter.
pub mod http {
    use super::*;
    use host::http as wit;

    /// A request to send; build with [`Request::get`] / [`Request::post_json`].
    #[derive(Debug, Clone)]
    pub struct Request {
        pub method: String,
        pub url: String,
        pub headers: Vec<(String, String)>,
        pub body: Option<Vec<u8>>,
        pub timeout_ms: Option<u32>,
    }

    impl Request {
        pub fn new(method: &str, url: &str) -> Request {
            Request {
                method: method.to_string(),
                url: url.to_string(),
                headers: Vec::new(),
                body: None,
                timeout_ms: None,
            }
        }

        pub fn get(url: &str) -> Request {
            Request::new("GET", url)
        }

        pub fn post_json(url: &str, body: &serde_json::Value) -> Request {
            Request::new("POST", url)
                .header("content-type", "application/json")
                .body(body.to_string().into_bytes())
        }

        pub fn header(mut self, name: &str, value: &str) -> Request {
            self.headers.push((name.to_string(), value.to_string()));
            self
        }

        pub fn body(mut self, body: Vec<u8>) -> Request {
            self.body = Some(body);
            self
        }

        pub fn timeout_ms(mut self, ms: u32) -> Request {
            self.timeout_ms = Some(ms);
            self
        }

        pub fn send(self) -> Result<Response> {
            let request = wit::Request {
                method: self.method,
                url: self.url.clone(),
                headers: self.headers,
                body: self.body,
                timeout_ms: self.timeout_ms,
            };
            match wit::fetch(&request) {
                Ok(r) => Ok(Response {
                    status: r.status,
                    headers: r.headers,
                    body: r.body,
                }),
                Err(wit::HttpError::Denied(m)) => Err(Error::failed(format!("request to {} refused: {m}", self.url))),
                Err(wit::HttpError::InvalidRequest(m)) => Err(Error::failed(format!("invalid request: {m}"))),
                Err(wit::HttpError::Timeout) => Err(Error::unavailable(format!("{} did not answer in time", self.url))),
                Err(wit::HttpError::TooLarge(limit)) => Err(Error::failed(format!(
                    "the answer from {} is larger than {limit} bytes",
                    self.url
                ))),
                Err(wit::HttpError::Transport(m)) => Err(Error::unavailable(format!("{}: {m}", self.url))),
            }
        }
    }

    #[derive(Debug, Clone)]
    pub struct Response {
        pub status: u16,
        pub headers: Vec<(String, String)>,
        pub body: Vec<u8>,
    }

    impl Response {
        pub fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        }

        pub fn text(&self) -> String {
            String::from_utf8_lossy(&self.body).into_owned()
        }

        pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T> {
            serde_json::from_slice(&self.body)
                .map_err(|e| Error::failed(format!("the answer is not the JSON expected: {e}")))
        }

        pub fn is_success(&self) -> bool {
            (200..300).contains(&self.status)
        }
    }

    pub fn get(url: &str) -> Result<Response> {
        Request::get(url).send()
    }
}

/// The key-value store of this agent's command (named by the agent manifest, so it survives
/// a new version of the plugin and no other plugin can claim it).
pub mod kv {
    use super::*;

    fn fail(message: String) -> Error {
        Error::failed(format!("storage: {message}"))
    }

    pub fn get(key: &str) -> Result<Option<Vec<u8>>> {
        host::kv::get(key).map_err(fail)
    }

    pub fn get_string(key: &str) -> Result<Option<String>> {
        Ok(get(key)?.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
    }

    pub fn set(key: &str, value: &[u8]) -> Result<()> {
        host::kv::set(key, value).map_err(fail)
    }

    pub fn set_string(key: &str, value: &str) -> Result<()> {
        set(key, value.as_bytes())
    }

    pub fn delete(key: &str) -> Result<()> {
        host::kv::delete(key).map_err(fail)
    }
}

/// Completions from the host's LLM provider, and embeddings from its embedding model.
pub mod llm {
    use super::*;
    pub use host::llm::Role;
    use host::llm::{CompletionRequest, Message, complete};

    /// The texts as unit vectors of the host's embedding model, one per text, in order: the
    /// dot product of two (see [`cosine`]) is near 1 for texts of like meaning. At most 64
    /// texts a call. Granted with `allow_llm`, like completions.
    pub fn embed(texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let texts: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        host::llm::embed(&texts).map_err(Error::unavailable)
    }

    /// The cosine of two vectors from [`embed`] (their dot product: they are unit vectors).
    pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    /// One user prompt, with an optional system prompt.
    pub fn prompt(system: Option<&str>, user: &str) -> Result<String> {
        let mut messages = Vec::new();
        if let Some(system) = system {
            messages.push((Role::System, system.to_string()));
        }
        messages.push((Role::User, user.to_string()));
        chat(&messages, None)
    }

    pub fn chat(messages: &[(Role, String)], max_tokens: Option<u32>) -> Result<String> {
        let request = CompletionRequest {
            messages: messages
                .iter()
                .map(|(role, content)| Message {
                    role: *role,
                    content: content.clone(),
                })
                .collect(),
            max_tokens,
            temperature: None,
        };
        complete(&request).map_err(Error::unavailable)
    }
}

/// Progress of a long run.
pub mod progress {
    pub fn report(percent: u8, message: Option<&str>) {
        super::host::progress::report(percent.min(100), message)
    }
}

/// The units of work a run did (WIT 0.4.0). For a command its agent sells by use
/// (`by_use` in the agent manifest), the payer is charged for the units reported, at the
/// manifest's price per unit and never past the maximum the payer authorized; elsewhere the
/// count charges nobody. Report as the work is done: a run that fails is charged nothing.
pub mod meter {
    /// Adds `units` to this run's count and returns the count so far.
    pub fn add(units: u64) -> u64 {
        super::host::meter::add(units)
    }
}

/// The agent this run belongs to (built-in plugins only).
pub mod agent {
    pub use super::host::agent_info::{AgentProfile, CommandInfo};

    pub fn profile() -> AgentProfile {
        super::host::agent_info::profile()
    }

    pub fn commands() -> Vec<CommandInfo> {
        super::host::agent_info::commands()
    }
}
