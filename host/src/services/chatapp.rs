//! The agent's chat-app bot (Telegram): connect it, and send through it. Errors follow the
//! spec's table; where the spec leaves a status open: `chatapp_disabled` 403,
//! `chat_not_found` 404, `bot_blocked` 403, a missing reply target 400 `validation_error`,
//! Telegram's 429 → 429 `rate_limit_exceeded` with its `retry_after`.

use serde_json::{Value, json};

use super::{ServiceError, Services};
use crate::clients::telegram::{ApiError, CallError};
use crate::domain::Agent;
use crate::store::Integration;

pub const KIND: &str = "chatapp";

fn purpose(agent_id: &str) -> String {
    format!("agent:{agent_id}:{KIND}")
}

/// What to send, already validated by the route.
pub struct Outgoing {
    pub chat_id: i64,
    pub text: String,
    pub parse_mode: Option<&'static str>,
    pub reply_to: Option<i64>,
    /// Rows of `{text, callback_data | url}` buttons.
    pub keyboard: Option<Value>,
}

pub fn not_configured(agent_ref: &str) -> ServiceError {
    ServiceError::Api {
        status: 404,
        code: "chatapp_not_configured",
        message: format!("Agent '{agent_ref}' was not found or has no chat-app bot set up"),
        retry_after: None,
    }
}

/// Checks the token with `getMe`, then stores it sealed. Returns the bot's username.
pub async fn connect(services: &Services, agent: &Agent, token: &str) -> Result<String, ServiceError> {
    let token = token.trim();
    let valid = token
        .split_once(':')
        .is_some_and(|(id, rest)| id.bytes().all(|b| b.is_ascii_digit()) && !rest.is_empty());
    if !valid {
        return Err(ServiceError::Validation(
            "a bot token looks like 123456:ABC-DEF... (from @BotFather)".into(),
        ));
    }
    let me = services
        .telegram
        .call(token, "getMe", &json!({}))
        .await
        .map_err(|e| match e {
            CallError::Api(api) => ServiceError::Validation(format!("Telegram refused the token: {}", api.description)),
            CallError::Transport(m) => ServiceError::Execution(format!("Telegram could not be reached: {m}")),
        })?;
    let username = me["username"].as_str().unwrap_or_default().to_string();
    let secret = json!({ "bot_token": token }).to_string();
    services
        .store
        .put_integration(Integration {
            agent_id: agent.id.clone(),
            kind: KIND,
            enabled: true,
            secret: services.secrets.seal(&purpose(&agent.id), secret.as_bytes()),
            public: json!({ "bot_username": username, "bot_id": me["id"] }),
        })
        .await?;
    Ok(username)
}

pub async fn disconnect(services: &Services, agent: &Agent) -> Result<bool, ServiceError> {
    Ok(services.store.delete_integration(&agent.id, KIND).await?)
}

/// The bot token, if the bot is set up and enabled.
async fn token(services: &Services, agent: &Agent, agent_ref: &str) -> Result<String, ServiceError> {
    let integration = services
        .store
        .integration(&agent.id, KIND)
        .await?
        .ok_or_else(|| not_configured(agent_ref))?;
    if !integration.enabled {
        return Err(ServiceError::Api {
            status: 403,
            code: "chatapp_disabled",
            message: format!("The chat-app bot of agent '{agent_ref}' is disabled"),
            retry_after: None,
        });
    }
    let opened = services
        .secrets
        .open(&purpose(&agent.id), &integration.secret)
        .map_err(|e| ServiceError::Api {
            status: 500,
            code: "internal_error",
            message: e.to_string(),
            retry_after: None,
        })?;
    let secret: Value = serde_json::from_slice(&opened).unwrap_or_default();
    secret["bot_token"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| ServiceError::Api {
            status: 500,
            code: "internal_error",
            message: "the stored bot token is unreadable".into(),
            retry_after: None,
        })
}

/// Sends a message; returns Telegram's `Message`.
pub async fn send(services: &Services, agent: &Agent, agent_ref: &str, out: Outgoing) -> Result<Value, ServiceError> {
    let token = token(services, agent, agent_ref).await?;
    let mut body = json!({ "chat_id": out.chat_id, "text": out.text });
    if let Some(mode) = out.parse_mode {
        body["parse_mode"] = json!(mode);
    }
    if let Some(id) = out.reply_to {
        body["reply_parameters"] = json!({ "message_id": id, "allow_sending_without_reply": false });
    }
    if let Some(keyboard) = out.keyboard {
        body["reply_markup"] = json!({ "inline_keyboard": keyboard });
    }
    services
        .telegram
        .call(&token, "sendMessage", &body)
        .await
        .map_err(send_error)
}

fn send_error(err: CallError) -> ServiceError {
    let api = match err {
        CallError::Transport(m) => {
            return ServiceError::Api {
                status: 500,
                code: "chatapp_send_failed",
                message: format!("Telegram could not be reached: {m}"),
                retry_after: None,
            };
        }
        CallError::Api(api) => api,
    };
    let ApiError {
        error_code,
        description,
        retry_after,
        ..
    } = api;
    let lower = description.to_lowercase();
    let (status, code) = if error_code == 429 {
        (429, "rate_limit_exceeded")
    } else if lower.contains("chat not found") {
        (404, "chat_not_found")
    } else if lower.contains("bot was blocked by the user") {
        (403, "bot_blocked")
    } else if lower.contains("message to be replied not found") || lower.contains("replied message not found") {
        (400, "validation_error")
    } else {
        (500, "chatapp_send_failed")
    };
    let message = match code {
        "rate_limit_exceeded" => format!(
            "Telegram rate limit: retry after {} s ({description})",
            retry_after.unwrap_or(1)
        ),
        "validation_error" => format!("replyToMessageId: {description}"),
        _ => format!("Telegram: {description}"),
    };
    ServiceError::Api {
        status,
        code,
        message,
        retry_after: if code == "rate_limit_exceeded" {
            retry_after.or(Some(1))
        } else {
            None
        },
    }
}
