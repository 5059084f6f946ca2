//! The Telegram Bot API: `POST {base}/bot<token>/<method>` with a JSON body; answers are
//! `{"ok": true, "result": ...}` or `{"ok": false, "error_code", "description",
//! "parameters": {"retry_after"}}`.

use std::time::Duration;

use serde::Serialize;
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

/// A method that takes no parameters (`getMe`): `{}`.
#[derive(Serialize)]
pub struct NoParameters {}

/// `sendMessage`'s parameters, named as the Bot API names them.
#[derive(Serialize)]
pub struct SendMessage<'a> {
    pub chat_id: i64,
    pub text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parse_mode: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_parameters: Option<ReplyParameters>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_markup: Option<InlineKeyboard<'a>>,
}

#[derive(Serialize)]
pub struct ReplyParameters {
    pub message_id: i64,
    /// Whether the message still goes out when the one it answers is gone.
    pub allow_sending_without_reply: bool,
}

/// Rows of `{text, callback_data | url}` buttons, as the caller gave them (checked by the
/// API's request rules).
#[derive(Serialize)]
pub struct InlineKeyboard<'a> {
    pub inline_keyboard: &'a Value,
}

/// `setWebhook`'s parameters: Telegram sends `secret_token` back with every update.
#[derive(Serialize)]
pub struct SetWebhook<'a> {
    pub url: &'a str,
    pub secret_token: &'a str,
    pub allowed_updates: &'a [&'a str],
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
    pub async fn call<B: Serialize + ?Sized>(&self, token: &str, method: &str, body: &B) -> Result<Value, CallError> {
        super::measured("telegram", self.send(token, method, body)).await
    }

    async fn send<B: Serialize + ?Sized>(&self, token: &str, method: &str, body: &B) -> Result<Value, CallError> {
        let url = format!("{}/bot{token}/{method}", self.base);
        // The URL holds the token: never let it reach an error message.
        let call = crate::telemetry::traces::propagate(self.http.post(&url).json(body));
        let response = call.send().await.map_err(|e| {
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
