//! The Telegram Bot API: `POST {base}/bot<token>/<method>` with a JSON body; answers are
//! `{"ok": true, "result": ...}` or `{"ok": false, "error_code", "description",
//! "parameters": {"retry_after"}}`.

use std::time::Duration;

use serde_json::Value;

#[derive(Clone)]
pub struct Telegram {
    http: reqwest::Client,
    base: String,
}

/// Telegram's own refusal.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub error_code: i64,
    pub description: String,
    pub retry_after: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    Api(ApiError),
    /// No usable answer: network, timeout, not JSON.
    Transport(String),
}

impl Telegram {
    pub fn new(base: &str, timeout: Duration) -> Telegram {
        let http = crate::outbound::operator_client(Some(timeout));
        Telegram {
            http,
            base: base.trim_end_matches('/').to_string(),
        }
    }

    /// Calls a method; the token travels only in the path, as the API requires.
    pub async fn call(&self, token: &str, method: &str, body: &Value) -> Result<Value, CallError> {
        let url = format!("{}/bot{token}/{method}", self.base);
        // The URL holds the token: never let it reach an error message.
        let response = self.http.post(&url).json(body).send().await.map_err(|e| {
            CallError::Transport(if e.is_timeout() {
                "timed out".into()
            } else {
                e.without_url().to_string()
            })
        })?;
        let status = response.status().as_u16();
        let value: Value = response
            .json()
            .await
            .map_err(|e| CallError::Transport(format!("not a Bot API answer (HTTP {status}): {}", e.without_url())))?;
        if value["ok"] == Value::Bool(true) {
            return Ok(value["result"].clone());
        }
        Err(CallError::Api(ApiError {
            status,
            error_code: value["error_code"].as_i64().unwrap_or(status as i64),
            description: value["description"].as_str().unwrap_or("no description").to_string(),
            retry_after: value["parameters"]["retry_after"].as_u64(),
        }))
    }
}
