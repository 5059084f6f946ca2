//! Chat tokens per agent and UTC day, added to as chats end.

use super::sql::args;
use super::usage::UsageAdd;
use super::{Store, StoreError};
use crate::llm::Usage;

/// One agent's chats of one day.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatUsageDay {
    pub agent_id: String,
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    pub chats: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Store {
    /// Adds one chat and its tokens to the agent's day, and to its hour's usage counters.
    pub async fn add_chat_usage(
        &self,
        account_id: &str,
        agent_id: &str,
        day: &str,
        usage: Usage,
    ) -> Result<(), StoreError> {
        let (account_id, agent_id, day) = (account_id.to_string(), agent_id.to_string(), day.to_string());
        let hour = super::usage::hour_of(crate::clock::now_ms());
        self.write(move |db| {
            for (dim, tokens) in [("prompt", usage.input_tokens), ("completion", usage.output_tokens)] {
                let add = UsageAdd {
                    account_id: account_id.clone(),
                    agent_id: agent_id.clone(),
                    hour,
                    command: String::new(),
                    metric: "chat",
                    dim: dim.to_string(),
                    n: 1,
                    total: i64::try_from(tokens).unwrap_or(i64::MAX),
                };
                super::usage::add_in(db, &add)?;
            }
            db.execute(
                "INSERT INTO chat_usage (account_id, agent_id, day, chats, prompt_tokens, completion_tokens)
                 VALUES (?1, ?2, ?3, 1, ?4, ?5)
                 ON CONFLICT (agent_id, day) DO UPDATE SET chats = chat_usage.chats + 1,
                     prompt_tokens = chat_usage.prompt_tokens + ?4,
                     completion_tokens = chat_usage.completion_tokens + ?5",
                args![
                    account_id,
                    agent_id,
                    day,
                    i64::try_from(usage.input_tokens).unwrap_or(i64::MAX),
                    i64::try_from(usage.output_tokens).unwrap_or(i64::MAX)
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// The agent's days from `from` to `to` (both included), oldest first.
    pub async fn chat_usage(&self, agent_id: &str, from: &str, to: &str) -> Result<Vec<ChatUsageDay>, StoreError> {
        let (agent_id, from, to) = (agent_id.to_string(), from.to_string(), to.to_string());
        self.read(move |db| {
            db.query(
                "SELECT agent_id, day, chats, prompt_tokens, completion_tokens FROM chat_usage
                 WHERE agent_id = ?1 AND day >= ?2 AND day <= ?3 ORDER BY day",
                args![agent_id, from, to],
            )?
            .iter()
            .map(|row| {
                Ok(ChatUsageDay {
                    agent_id: row.get(0)?,
                    day: row.get(1)?,
                    chats: row.get::<i64>(2)? as u64,
                    prompt_tokens: row.get::<i64>(3)? as u64,
                    completion_tokens: row.get::<i64>(4)? as u64,
                })
            })
            .collect()
        })
        .await
    }
}
