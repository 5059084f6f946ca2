//! The tokens of agents' chats, per agent and UTC day: a chat's tally is kept as its rounds
//! come back and added to its day when the chat ends, however it ends (an answer, a failure,
//! or its caller gone in the middle of a stream).

use super::{ServiceError, Services};
use crate::domain::Agent;
use crate::llm::Usage;
use crate::store::{ChatUsageDay, Store};

/// One chat's tokens so far.
pub struct Tally {
    store: Store,
    account_id: String,
    agent_id: String,
    agent_name: String,
    usage: Usage,
    /// A round came back without the provider's count of its tokens.
    unreported: bool,
    asked: bool,
    recorded: bool,
}

impl Tally {
    pub fn new(services: &Services, agent: &Agent) -> Tally {
        Tally {
            store: services.store.clone(),
            account_id: agent.account_id.clone(),
            agent_id: agent.id.clone(),
            agent_name: agent.def.username.clone(),
            usage: Usage::default(),
            unreported: false,
            asked: false,
            recorded: false,
        }
    }

    /// Counts the chat from its first question to the model, answered or not.
    pub fn asking(&mut self) {
        self.asked = true;
    }

    /// Adds one round's tokens, when the provider told them.
    pub fn add(&mut self, round: Option<Usage>) {
        self.unreported |= round.is_none();
        let round = round.unwrap_or_default();
        self.usage.input_tokens = self.usage.input_tokens.saturating_add(round.input_tokens);
        self.usage.output_tokens = self.usage.output_tokens.saturating_add(round.output_tokens);
    }

    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// Whether the provider told every round's tokens: only then is `usage` what was used.
    pub fn fully_reported(&self) -> bool {
        !self.unreported
    }

    /// Adds the chat to its agent's day, if it asked the model at all.
    pub async fn record(mut self) {
        self.recorded = true;
        if self.asked {
            write(self.store.clone(), self.ids(), self.usage).await;
        }
    }

    fn ids(&self) -> Ids {
        Ids {
            account_id: self.account_id.clone(),
            agent_id: self.agent_id.clone(),
            agent_name: self.agent_name.clone(),
        }
    }
}

impl Drop for Tally {
    /// A chat dropped before its end (its caller went away) is recorded all the same.
    fn drop(&mut self) {
        if self.recorded || !self.asked {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(write(self.store.clone(), self.ids(), self.usage));
        }
    }
}

struct Ids {
    account_id: String,
    agent_id: String,
    agent_name: String,
}

async fn write(store: Store, ids: Ids, usage: Usage) {
    if let Some(metrics) = crate::telemetry::metrics::metrics() {
        metrics.chat_tokens(&ids.agent_name, usage.input_tokens, usage.output_tokens);
    }
    let day = day_of(crate::clock::now_ms());
    if let Err(err) = store.add_chat_usage(&ids.account_id, &ids.agent_id, &day, usage).await {
        tracing::warn!(error = %err, agent = %ids.agent_id, "could not record a chat's tokens");
    }
}

/// The UTC day of an instant, `YYYY-MM-DD`.
fn day_of(ms: i64) -> String {
    let iso = crate::clock::iso(ms);
    iso.get(..10).unwrap_or(&iso).to_string()
}

/// The agent's chats and tokens of the last `days` UTC days (today included), oldest first.
pub async fn by_day(services: &Services, agent: &Agent, days: u32) -> Result<Vec<ChatUsageDay>, ServiceError> {
    let now = crate::clock::now_ms();
    let from = day_of(now - i64::from(days.saturating_sub(1)) * crate::rate_window::DAY_MS);
    Ok(services.store.chat_usage(&agent.id, &from, &day_of(now)).await?)
}
