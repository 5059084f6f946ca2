//! A conversation with an agent over A2A: the owner's earlier chat turns in one context,
//! given to the next turn as its history.

use super::Desk;
use super::tasks::{A2aError, Reply, Said};
use crate::llm::Role;
use crate::services::{ServiceError, Services};

/// Characters of earlier turns a chat turn is given at most, the newest kept.
const HISTORY_MAX_CHARS: usize = 8_000;
/// Earlier turns of a conversation read at most.
const HISTORY_MAX_TURNS: u32 = 20;

/// The owner's earlier turns in this conversation, oldest first, within the bound. A caller
/// without a key has no conversation to continue (its context ids are not its own).
pub(super) async fn history(
    services: &Services,
    desk: &Desk,
    context_id: &str,
) -> Result<Vec<(Role, String)>, A2aError> {
    let Some(account) = desk.account_id() else {
        return Ok(Vec::new());
    };
    let now = crate::clock::now_ms();
    let turns = services
        .store
        .a2a_context_turns(&desk.found.agent.id, account, context_id, HISTORY_MAX_TURNS, now)
        .await?;
    let mut kept = Vec::new();
    let mut chars = 0;
    for (request, reply) in turns.into_iter().rev() {
        let said: Said = serde_json::from_value(request).map_err(|e| ServiceError::Execution(e.to_string()))?;
        let reply: Reply = serde_json::from_value(reply).map_err(|e| ServiceError::Execution(e.to_string()))?;
        chars += said.text.chars().count() + reply.response.chars().count();
        if chars > HISTORY_MAX_CHARS {
            break;
        }
        kept.push((Role::Assistant, reply.response));
        kept.push((Role::User, said.text));
    }
    kept.reverse();
    Ok(kept)
}
