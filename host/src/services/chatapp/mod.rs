//! The agent's chat-app bot (Telegram): connect it, and send through it. Errors follow the
//! API's table; where the API leaves a status open: `chatapp_disabled` 403,
//! `chat_not_found` 404, `bot_blocked` 403, a missing reply target 400 `validation_error`,
//! Telegram's 429 → 429 `rate_limit_exceeded` with its `retry_after`.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::commands::{self, CommandCall, CommandOutcome};
use super::integrations::{self, IntegrationKind};
use super::jobs::{self, JobStatus};
use super::rate_limit::{Limiter, RateLimiter};
use super::{ServiceError, Services};
use crate::clients::telegram::{
    ApiError, CallError, InlineKeyboard, NoParameters, ReplyParameters, SendMessage, SetWebhook,
};
use crate::config::ChatappSettings;
use crate::domain::{Agent, RateLimits};
use crate::store::Store;

pub const KIND: IntegrationKind = IntegrationKind::Chatapp;

/// What to send, already validated by the route.
pub struct Outgoing {
    pub chat_id: i64,
    pub text: String,
    pub parse_mode: Option<&'static str>,
    pub reply_to: Option<i64>,
    /// Rows of `{text, callback_data | url}` buttons.
    pub keyboard: Option<Value>,
}

/// The bot's token, and once its webhook is registered the secret Telegram sends back:
/// sealed at rest.
#[derive(Serialize, Deserialize)]
struct BotSecret {
    bot_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    webhook_secret: Option<String>,
}

/// What the owner sees of the bot.
#[derive(Serialize, Deserialize)]
struct BotPublic {
    bot_username: String,
    bot_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    webhook_url: Option<String>,
}

/// Why a message could not go out through the agent's bot. Telegram's own description
/// (never a URL: the bot token is part of Telegram's) says what it refused.
#[derive(Debug, thiserror::Error)]
pub enum ChatappError {
    #[error("agent '{0}' was not found or has no chat-app bot set up")]
    NotConfigured(String),
    #[error("the chat-app bot of agent '{0}' is disabled")]
    Disabled(String),
    #[error("Telegram: {0}")]
    ChatNotFound(String),
    #[error("Telegram: {0}")]
    BotBlocked(String),
    #[error("replyToMessageId: {0}")]
    ReplyTargetMissing(String),
    #[error("Telegram rate limit: retry after {retry_after} s ({description})")]
    RateLimited { retry_after: u64, description: String },
    #[error("Telegram: {0}")]
    Refused(String),
    #[error("Telegram could not be reached: {0}")]
    Unreachable(String),
}

pub fn not_configured(agent_ref: &str) -> ServiceError {
    ChatappError::NotConfigured(agent_ref.to_string()).into()
}

/// Checks the token with `getMe`, then stores it sealed. Returns the bot's username.
pub async fn connect(services: &Services, agent: &Agent, token: &str) -> Result<String, ServiceError> {
    let token = token.trim();
    // `<bot id>:<secret>`, the secret in URL-safe characters: the token goes into the
    // request's path, so anything else could change which address is called.
    let valid = token.split_once(':').is_some_and(|(id, secret)| {
        !id.is_empty()
            && id.bytes().all(|b| b.is_ascii_digit())
            && !secret.is_empty()
            && secret
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    });
    if !valid {
        return Err(ServiceError::Validation(
            "a bot token looks like 123456:ABC-DEF... (from @BotFather)".into(),
        ));
    }
    let me = services
        .telegram
        .call(token, "getMe", &NoParameters {})
        .await
        .map_err(|e| match e {
            CallError::Api(api) => ServiceError::Validation(format!("Telegram refused the token: {}", api.description)),
            CallError::Transport(m) => ChatappError::Unreachable(m).into(),
        })?;
    let username = me["username"].as_str().unwrap_or_default().to_string();
    let public = BotPublic {
        bot_username: username.clone(),
        bot_id: me["id"].as_i64(),
        webhook_url: None,
    };
    let secret = BotSecret {
        bot_token: token.to_string(),
        webhook_secret: None,
    };
    integrations::save(services, &agent.id, KIND, &secret, &public).await?;
    Ok(username)
}

/// The bot token, if the bot is set up and enabled.
async fn token(services: &Services, agent: &Agent, agent_ref: &str) -> Result<String, ServiceError> {
    let integration = services
        .store
        .integration(&agent.id, KIND.as_str())
        .await?
        .ok_or_else(|| not_configured(agent_ref))?;
    if !integration.enabled {
        return Err(ChatappError::Disabled(agent_ref.to_string()).into());
    }
    let secret: BotSecret = integrations::open(services, &integration)?;
    Ok(secret.bot_token)
}

/// Sends a message; returns Telegram's `Message`.
pub async fn send(services: &Services, agent: &Agent, agent_ref: &str, out: Outgoing) -> Result<Value, ServiceError> {
    let token = token(services, agent, agent_ref).await?;
    let body = SendMessage {
        chat_id: out.chat_id,
        text: &out.text,
        parse_mode: out.parse_mode,
        reply_parameters: out.reply_to.map(|message_id| ReplyParameters {
            message_id,
            allow_sending_without_reply: false,
        }),
        reply_markup: out
            .keyboard
            .as_ref()
            .map(|rows| InlineKeyboard { inline_keyboard: rows }),
    };
    services
        .telegram
        .call(&token, "sendMessage", &body)
        .await
        .map_err(send_error)
}

fn send_error(err: CallError) -> ServiceError {
    let api = match err {
        CallError::Transport(m) => return ChatappError::Unreachable(m).into(),
        CallError::Api(api) => api,
    };
    let ApiError {
        error_code,
        description,
        retry_after,
        ..
    } = api;
    let lower = description.to_lowercase();
    let error = if error_code == 429 {
        ChatappError::RateLimited {
            retry_after: retry_after.unwrap_or(1),
            description,
        }
    } else if lower.contains("chat not found") {
        ChatappError::ChatNotFound(description)
    } else if lower.contains("bot was blocked by the user") {
        ChatappError::BotBlocked(description)
    } else if lower.contains("message to be replied not found") || lower.contains("replied message not found") {
        ChatappError::ReplyTargetMissing(description)
    } else {
        ChatappError::Refused(description)
    };
    error.into()
}

/// Telegram's limit on one message's text.
pub const MAX_MESSAGE_CHARS: usize = 4_096;
/// Attempts for one reply when Telegram answers 429.
const SEND_ATTEMPTS: u32 = 3;

/// Registers `url` with `setWebhook`; Telegram will send the secret in
/// `X-Telegram-Bot-Api-Secret-Token`, which `handle_update` checks.
pub async fn register_webhook(services: &Services, agent: &Agent, url: &str) -> Result<(), ServiceError> {
    let token = token(services, agent, &agent.def.username).await?;
    let secret = crate::random::hex_token(24);
    let body = SetWebhook {
        url,
        secret_token: &secret,
        allowed_updates: &["message"],
    };
    services
        .telegram
        .call(&token, "setWebhook", &body)
        .await
        .map_err(|e| match e {
            CallError::Api(api) => {
                ServiceError::Validation(format!("Telegram refused the webhook: {}", api.description))
            }
            CallError::Transport(m) => ChatappError::Unreachable(m).into(),
        })?;
    // Called right after `connect`, so the bot is there and enabled.
    let integration = services
        .store
        .integration(&agent.id, KIND.as_str())
        .await?
        .ok_or_else(|| not_configured(&agent.def.username))?;
    let mut public: BotPublic = integrations::public(&integration)?;
    public.webhook_url = Some(url.to_string());
    let secret = BotSecret {
        bot_token: token,
        webhook_secret: Some(secret),
    };
    integrations::save(services, &agent.id, KIND, &secret, &public).await
}

/// What the agents' bots receive, across requests: the updates seen lately (Telegram
/// re-sends one it thinks was not received, and each is answered once) and the limits of
/// each chat.
pub struct Inbound {
    recent: Mutex<HashMap<String, VecDeque<i64>>>,
    chats: Limiter,
    chat_limits: RateLimits,
    /// One "slow down" reply per chat a minute: a chat past its limit is told once, not
    /// answered at every message.
    notices: RateLimiter,
}

/// Update ids remembered per agent.
const REMEMBERED_UPDATES: usize = 256;

impl Inbound {
    pub fn new(store: &Store, settings: &ChatappSettings) -> Inbound {
        Inbound {
            recent: Mutex::default(),
            chats: Limiter::new(store, "chatapp_chat"),
            chat_limits: RateLimits {
                per_minute: settings.chatapp_chat_limit_per_minute,
                per_day: settings.chatapp_chat_limit_per_day,
            },
            notices: RateLimiter::default(),
        }
    }

    /// Whether this is the first time the agent's bot receives update `id`.
    fn first_time(&self, agent_id: &str, id: i64) -> bool {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() > 10_000 {
            recent.clear();
        }
        let seen = recent.entry(agent_id.to_string()).or_default();
        if seen.contains(&id) {
            return false;
        }
        seen.push_back(id);
        if seen.len() > REMEMBERED_UPDATES {
            seen.pop_front();
        }
        true
    }
}

/// What became of an update Telegram delivered to an agent's bot.
#[derive(Debug, Clone, PartialEq)]
pub enum Received {
    /// Being answered in the background.
    Answering,
    /// Seen before: answered once already.
    Duplicate,
    /// Nothing to do: the bot is disabled, or the update is not a text message.
    Ignored,
    /// Over the chat's or the owner's limits: the chat is asked to slow down (`retry_after`
    /// seconds), once a minute at most.
    SlowedDown { retry_after_secs: u64 },
}

/// Takes one update for the agent's bot. The secret Telegram was given is checked first
/// (before the body is read as JSON); a disabled bot's updates are dropped before any work;
/// each text message counts against its chat's limits and the owner's plan limits.
pub async fn receive(
    services: &Services,
    agent_ref: &str,
    presented_secret: &str,
    body: &[u8],
) -> Result<Received, ServiceError> {
    let wrong_secret = || ServiceError::Unauthorized("Missing or wrong X-Telegram-Bot-Api-Secret-Token".into());
    let agent = services
        .store
        .agent(agent_ref)
        .await?
        .ok_or_else(|| ServiceError::NotFound(format!("Agent '{agent_ref}' not found")))?;
    let integration = services
        .store
        .integration(&agent.id, KIND.as_str())
        .await?
        .ok_or_else(wrong_secret)?;
    let secret: BotSecret = integrations::open(services, &integration).map_err(|_| wrong_secret())?;
    let expected = secret.webhook_secret.unwrap_or_default();
    let matches = !expected.is_empty()
        && expected.len() == presented_secret.len()
        && bool::from(subtle::ConstantTimeEq::ct_eq(
            expected.as_bytes(),
            presented_secret.as_bytes(),
        ));
    if !matches {
        return Err(wrong_secret());
    }
    if !integration.enabled {
        return Ok(Received::Ignored);
    }
    let update: Value =
        serde_json::from_slice(body).map_err(|e| ServiceError::Validation(format!("the update is not JSON: {e}")))?;
    let inbound = &services.chatapp_inbound;
    if let Some(id) = update["update_id"].as_i64()
        && !inbound.first_time(&agent.id, id)
    {
        return Ok(Received::Duplicate);
    }
    let Some(incoming) = read_update(&update) else {
        return Ok(Received::Ignored);
    };
    let now = crate::clock::now_ms();
    let chat_key = format!("{}:{}", agent.id, incoming.chat_id);
    let mut decision = inbound.chats.check(&chat_key, inbound.chat_limits, now).await?;
    if decision.allowed {
        let owner = services
            .store
            .account_by_id(&agent.account_id)
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("Agent '{agent_ref}' not found")))?;
        decision = services.account_limiter.check(&owner.id, owner.limits, now).await?;
    }
    if !decision.allowed {
        crate::telemetry::metrics::note_rate_limited("chatapp");
        let retry_after_secs = decision.retry_after_secs;
        let notice = RateLimits {
            per_minute: 1,
            per_day: u32::MAX,
        };
        if inbound.notices.check(&chat_key, notice, now).allowed {
            let (services, agent) = (services.clone(), agent.clone());
            let text = format!(
                "I'm getting more messages than I can answer right now. Please wait about {retry_after_secs} s and send yours again."
            );
            let lifecycle = services.lifecycle.clone();
            lifecycle.spawn(async move {
                if let Err(e) = reply(&services, &agent, incoming.chat_id, incoming.message_id, &text).await {
                    tracing::warn!(agent = %agent.id, error = %e, "could not ask a chat to slow down");
                }
            });
        }
        return Ok(Received::SlowedDown { retry_after_secs });
    }
    let services = services.clone();
    let lifecycle = services.lifecycle.clone();
    lifecycle.spawn(async move {
        if let Err(e) = handle_update(&services, &agent, incoming).await {
            tracing::warn!(agent = %agent.id, error = %e, "could not answer a chat-app update");
        }
    });
    Ok(Received::Answering)
}

/// A text message read from a Telegram update.
#[derive(Debug, Clone, PartialEq)]
pub struct IncomingText {
    pub chat_id: i64,
    pub message_id: Option<i64>,
    pub text: String,
    /// For `/name ...` or `/name@bot ...`: the command's name, lower case.
    pub command: Option<String>,
}

/// What an update asks, if it is a text message (anything else needs no answer).
pub fn read_update(update: &Value) -> Option<IncomingText> {
    let message = &update["message"];
    let chat_id = message["chat"]["id"].as_i64()?;
    let text = message["text"].as_str()?.to_string();
    let command = text.trim().strip_prefix('/').map(|rest| {
        let word = rest.split_whitespace().next().unwrap_or_default();
        word.split('@').next().unwrap_or(word).to_lowercase()
    });
    Some(IncomingText {
        chat_id,
        message_id: message["message_id"].as_i64(),
        text,
        command,
    })
}

/// Answers one text message: a `/command` offered on the chat-app runs through the plugin
/// runtime; other text goes to the agent's chat. The reply goes back to that chat.
async fn handle_update(services: &Services, agent: &Agent, incoming: IncomingText) -> Result<(), ServiceError> {
    let text = incoming.text.as_str();
    let answer = match &incoming.command {
        Some(name) => run_command(services, agent, name, text).await,
        None => chat_reply(services, agent, text).await,
    };
    reply(services, agent, incoming.chat_id, incoming.message_id, &answer).await
}

/// Sends `answer` to the chat, in as many messages as it takes, the first replying to
/// `reply_to`.
pub async fn reply(
    services: &Services,
    agent: &Agent,
    chat_id: i64,
    reply_to: Option<i64>,
    answer: &str,
) -> Result<(), ServiceError> {
    let token = token(services, agent, &agent.def.username).await?;
    for (i, part) in split_message(answer).into_iter().enumerate() {
        let body = SendMessage {
            chat_id,
            text: &part,
            parse_mode: None,
            reply_parameters: reply_to.filter(|_| i == 0).map(|message_id| ReplyParameters {
                message_id,
                allow_sending_without_reply: true,
            }),
            reply_markup: None,
        };
        send_with_retry(services, &token, &body).await?;
    }
    Ok(())
}

async fn run_command(services: &Services, agent: &Agent, name: &str, text: &str) -> String {
    let commands = match services.store.commands(&agent.id).await {
        Ok(commands) => commands,
        Err(e) => return format!("Sorry, something went wrong: {e}"),
    };
    let offered = commands.into_iter().find(|c| {
        c.def.name == name && c.def.enabled && c.def.integrations.contains(&crate::domain::Integration::Chatapp)
    });
    let Some(command) = offered else {
        return format!("I don't know /{name}. Send /help to see what I can do.");
    };
    let call = CommandCall {
        agent,
        command: &command,
        parameters: None,
        raw_text: Some(text.to_string()),
        channel: crate::services::usage::Channel::Chatapp,
        paid_by: None,
        slot: None,
        metered: None,
    };
    match commands::execute(services, call).await {
        Ok(CommandOutcome::Queued { job_id }) => await_job(services, &job_id).await,
        Ok(CommandOutcome::Answered(answer)) => match answer.media_url {
            Some(media) if answer.response.is_empty() => media,
            Some(media) => format!("{}\n{media}", answer.response),
            None => answer.response,
        },
        Err(ServiceError::Validation(m)) => m,
        Err(e) => format!("Sorry, /{name} failed: {e}"),
    }
}

/// Waits for a long-running command's job, so the chat gets its result, not an address.
async fn await_job(services: &Services, job_id: &str) -> String {
    let within = std::time::Duration::from_millis(services.settings.jobs.job_timeout_ms + 5_000);
    match jobs::wait(&services.store, job_id, within, async |_| {}).await {
        Ok(JobStatus::Succeeded {
            response, artifact_url, ..
        }) => match artifact_url {
            Some(url) => format!("{response}\n{url}").trim().to_string(),
            None => response,
        },
        Ok(JobStatus::Failed { error, .. }) => format!("Sorry, that failed: {error}"),
        Ok(JobStatus::Missing) => "Sorry, that failed: No job with this id (it may have expired)".into(),
        Ok(JobStatus::Processing { .. }) => "Sorry, that is taking too long.".into(),
        Err(e) => format!("Sorry, something went wrong: {e}"),
    }
}

async fn chat_reply(services: &Services, agent: &Agent, text: &str) -> String {
    let commands = match services.store.commands(&agent.id).await {
        Ok(commands) => super::agents::offered(&commands, Some(crate::domain::Integration::Chatapp))
            .cloned()
            .collect(),
        Err(e) => return format!("Sorry, something went wrong: {e}"),
    };
    let input = super::chat::ChatInput {
        tools_enabled: true,
        max_tool_calls: 3,
        ..super::chat::ChatInput::new(text.chars().take(super::chat::MESSAGE_MAX_CHARS).collect())
    };
    match super::chat::chat(services, agent, commands, input).await {
        Ok(reply) => reply.response,
        // A provider's own words can carry the operator's account details: the log has them.
        Err(ServiceError::Model(e)) => {
            tracing::warn!(agent = %agent.id, error = %e, "the language model failed in a chat-app chat");
            format!("Sorry, I cannot answer right now ({}).", e.public_text())
        }
        Err(e) => format!("Sorry, I cannot answer right now ({e})."),
    }
}

/// Sends, waiting out Telegram's 429s (its `retry_after`, at most 30 s each).
async fn send_with_retry(services: &Services, token: &str, body: &SendMessage<'_>) -> Result<(), ServiceError> {
    for attempt in 1..=SEND_ATTEMPTS {
        match services.telegram.call(token, "sendMessage", body).await {
            Ok(_) => return Ok(()),
            Err(CallError::Api(api)) if api.error_code == 429 && attempt < SEND_ATTEMPTS => {
                let wait = api.retry_after.unwrap_or(1).min(30);
                tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
            }
            Err(e) => return Err(send_error(e)),
        }
    }
    Ok(())
}

/// Splits text into Telegram-sized messages, preferring line breaks, then spaces. Telegram
/// refuses a message that is only whitespace, so such parts are left out (never all of them).
pub fn split_message(text: &str) -> Vec<String> {
    let text = if text.trim().is_empty() { "…" } else { text };
    let mut parts: Vec<String> = Vec::new();
    let mut rest: Vec<char> = text.chars().collect();
    while rest.len() > MAX_MESSAGE_CHARS {
        let window = &rest[..MAX_MESSAGE_CHARS];
        let cut = window
            .iter()
            .rposition(|c| *c == '\n')
            .or_else(|| window.iter().rposition(|c| *c == ' '))
            .filter(|at| *at > MAX_MESSAGE_CHARS / 2)
            .map(|at| at + 1)
            .unwrap_or(MAX_MESSAGE_CHARS);
        parts.push(rest[..cut].iter().collect::<String>().trim_end().to_string());
        rest.drain(..cut);
    }
    parts.push(rest.into_iter().collect());
    parts.retain(|part| !part.trim().is_empty());
    parts
}

#[cfg(test)]
mod tests;
