//! The operator's model, shared by every account's chats: an account may spend so many
//! tokens a minute and a UTC day (`account_chat_tokens_per_minute`, `_per_day`), every
//! surface together: keyed chat, the OpenAI-compatible endpoint, MCP's chat tool, paid chat
//! and Telegram. A round is charged at its worst case (its prompt's characters / 4 and its
//! answer limit) before it runs; what the provider reports beyond that is charged after.
//! Several hosts share the counts (on PostgreSQL); a single host's start afresh when it
//! restarts.

use super::rate_limit::Usage;
use super::{ServiceError, Services};
use crate::domain::RateLimits;
use crate::llm::{CompletionRequest, Usage as TokenUsage};
use crate::rate_window::{DAY_MS, MINUTE_MS};

fn key(account_id: &str) -> String {
    format!("chat_tokens:{account_id}")
}

pub fn limits(services: &Services) -> RateLimits {
    let llm = &services.settings.llm;
    RateLimits {
        per_minute: llm.account_chat_tokens_per_minute,
        per_day: llm.account_chat_tokens_per_day,
    }
}

/// The answer limit a round asks the model for: the caller's, within `chat_max_tokens`.
pub fn answer_limit(services: &Services, asked: Option<u32>) -> u32 {
    let most = services.settings.llm.chat_max_tokens;
    asked.unwrap_or(most).min(most)
}

/// A round's worst case in tokens: a token is rarely under four characters, so the prompt's
/// characters (messages, tool calls, tool definitions) / 4, plus the answer limit.
pub fn worst_case(request: &CompletionRequest) -> u32 {
    let messages: usize = request
        .messages
        .iter()
        .map(|m| {
            m.content.len()
                + m.tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.len())
                    .sum::<usize>()
        })
        .sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
        .sum();
    let prompt = u32::try_from((messages + tools).div_ceil(4)).unwrap_or(u32::MAX);
    prompt.saturating_add(request.max_tokens.unwrap_or_default())
}

/// Charges a round of `tokens` to the account, or refuses it (429, with when to retry)
/// when its budget has no room for all of them.
pub async fn charge(services: &Services, account_id: &str, tokens: u32) -> Result<(), ServiceError> {
    let limits = limits(services);
    let decision = services
        .budgets
        .check_n(&key(account_id), limits, crate::clock::now_ms(), tokens)
        .await?;
    if decision.allowed {
        return Ok(());
    }
    crate::telemetry::metrics::note_rate_limited("chat_tokens");
    Err(over_budget(limits, tokens, decision))
}

/// Charges what the provider reported a round used beyond the `charged` worst case.
pub async fn charge_beyond(services: &Services, account_id: &str, charged: u32, used: Option<TokenUsage>) {
    let Some(used) = used else {
        return;
    };
    let total = used.input_tokens.saturating_add(used.output_tokens);
    let beyond = u32::try_from(total.saturating_sub(u64::from(charged))).unwrap_or(u32::MAX);
    if beyond == 0 {
        return;
    }
    let charged = services
        .budgets
        .charge(&key(account_id), limits(services), crate::clock::now_ms(), beyond)
        .await;
    if let Err(e) = charged {
        tracing::warn!(error = %e, "could not charge a chat's tokens beyond its estimate");
    }
}

/// The budget and what is left of it, for the account's own view.
pub struct Standing {
    pub limits: RateLimits,
    pub left_this_minute: u32,
    pub left_today: u32,
}

pub async fn standing(services: &Services, account_id: &str) -> Result<Standing, ServiceError> {
    let limits = limits(services);
    let now = crate::clock::now_ms();
    let usage: Usage = services.budgets.usage(&key(account_id), limits, now).await?;
    Ok(Standing {
        limits,
        left_this_minute: usage.minute.room(limits.per_minute, MINUTE_MS, now),
        left_today: usage.day.room(limits.per_day, DAY_MS, now),
    })
}

fn over_budget(limits: RateLimits, tokens: u32, decision: super::rate_limit::RateDecision) -> ServiceError {
    let message = if tokens > limits.per_minute.min(limits.per_day) {
        format!(
            "This chat round may use up to {tokens} tokens, more than the account's chat budget allows at once \
             ({} a minute, {} a day): send a shorter history or ask for fewer tokens (max_tokens)",
            limits.per_minute, limits.per_day
        )
    } else {
        format!(
            "This account's chats have used their token budget ({} a minute, {} a day); retry in {} s",
            limits.per_minute, limits.per_day, decision.retry_after_secs
        )
    };
    ServiceError::OverBudget { message, decision }
}
