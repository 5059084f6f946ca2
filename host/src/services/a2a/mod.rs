//! A2A: every agent is an Agent2Agent server. Its skills are its commands with `a2a` in
//! their integrations, and a message that names none is a turn of a chat with it. Every
//! message becomes a task (`tasks`), kept as long as a job's status; a long-running skill's
//! task follows its job. This folder owns who may use what (`Desk`) and the tasks' rules;
//! the wire (JSON-RPC, the card's JSON, SSE) is `routes/a2a`'s.
//!
//! The agent's owner uses every skill free, with a key or an OAuth token. Anyone else
//! uses, without a key, what the owner opened (`[a2a] open`): the skills and the chat
//! that have no price, counted against the owner's plan.

use std::sync::Arc;

use super::keys::Caller;
use super::payments::X402Error;
use super::{ServiceError, Services, agents};
use crate::domain::{Command, Integration, ResponseFormat};
use crate::store::AgentWithCommands;

pub mod tasks;

/// The id under which the card lists the chat with the agent.
pub const CHAT_SKILL: &str = "chat";

/// An agent as one A2A caller may use it.
pub struct Desk {
    pub found: Arc<AgentWithCommands>,
    access: Access,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// The agent's owner: every skill, free; tasks are the account's.
    Owner,
    /// Anyone, without a key: what the owner opened, and no price.
    Open,
}

/// One skill as a caller sees it on the card.
pub struct Skill<'a> {
    pub command: &'a Command,
}

impl Skill<'_> {
    pub fn name(&self) -> &str {
        &self.command.def.name
    }

    /// The media type of its answers.
    pub fn output_type(&self) -> &'static str {
        media_type(self.command.def.response_format)
    }

    /// A line that calls it as text, as a person would type it: `/name param=<param>`
    /// for the parameters it needs.
    pub fn example(&self) -> String {
        let mut line = format!("/{}", self.name());
        for param in self.command.def.parameters.iter().filter(|p| p.required) {
            line += &format!(" {}=<{}>", param.name, param.name);
        }
        line
    }
}

/// The media type of an answer in this format.
pub fn media_type(format: ResponseFormat) -> &'static str {
    match format {
        ResponseFormat::Text => "text/plain",
        ResponseFormat::Markdown => "text/markdown",
        ResponseFormat::Image => "image/*",
        ResponseFormat::Video => "video/*",
    }
}

/// Opens the agent `agent_ref` (its id or username) for `caller`: the owner's credential,
/// or nobody's. Without one, only an agent whose owner opened it is found.
pub async fn open(services: &Services, agent_ref: &str, caller: Option<&Caller>) -> Result<Desk, ServiceError> {
    if let Some(caller) = caller {
        let found = agents::owned_with_commands(&services.store, &caller.account.id, agent_ref).await?;
        return Ok(Desk {
            found,
            access: Access::Owner,
        });
    }
    let closed = || ServiceError::from(X402Error::AgentNotSelling(agent_ref.to_string()));
    let found = services
        .store
        .agent_with_commands(agent_ref)
        .await?
        .ok_or_else(closed)?;
    if !found.agent.def.a2a.open {
        return Err(closed());
    }
    Ok(Desk {
        found,
        access: Access::Open,
    })
}

/// The agent whose card anyone may read: one its owner listed or opened. Others' cards are
/// read with the owner's credential, through [`open`].
pub async fn public(services: &Services, agent_ref: &str) -> Result<Option<Desk>, ServiceError> {
    let Some(found) = services.store.agent_with_commands(agent_ref).await? else {
        return Ok(None);
    };
    let a2a = found.agent.def.a2a;
    if !(a2a.listed || a2a.open) {
        return Ok(None);
    }
    Ok(Some(Desk {
        found,
        access: Access::Open,
    }))
}

impl Desk {
    /// The account whose tasks this caller's are; `None` for a caller without a key.
    pub fn account_id(&self) -> Option<&str> {
        (self.access == Access::Owner).then_some(self.found.agent.account_id.as_str())
    }

    /// The skills this caller may use, in manifest order.
    pub fn skills(&self) -> impl Iterator<Item = Skill<'_>> {
        agents::offered(&self.found.commands, Some(Integration::A2a))
            // A command whose parameters need a file cannot be called from a message.
            .filter(|c| !crate::schema::needs_file(c))
            .filter(|c| self.access == Access::Owner || !self.for_sale(Some(c)))
            .map(|command| Skill { command })
    }

    /// The skill called `name`, if this caller may use it.
    pub fn skill(&self, name: &str) -> Option<Skill<'_>> {
        self.skills().find(|s| s.name() == name)
    }

    /// Whether this caller may chat with the agent: its owner always; anyone else when the
    /// chat has no price.
    pub fn may_chat(&self) -> bool {
        self.access == Access::Owner || !self.for_sale(None)
    }

    /// Whether the owner sells this command (`None`: the chat) over x402: such a skill is
    /// never given away to a caller without a key.
    fn for_sale(&self, command: Option<&Command>) -> bool {
        let x402 = &self.found.agent.def.x402;
        x402.enabled
            && x402.default_price.is_some()
            && command.is_none_or(|c| c.def.integrations.contains(&Integration::X402))
    }

    /// A keyless use counts against the owner's plan; the owner's own were counted at the
    /// gate.
    async fn charge(&self, services: &Services) -> Result<(), ServiceError> {
        match self.access {
            Access::Owner => Ok(()),
            Access::Open => agents::charge_owner_for_keyless(services, &self.found.agent, "a2a_open").await,
        }
    }
}

/// The agents whose owners list their cards, by username: a page of at most `limit` after
/// the username `after`.
pub async fn listed(
    services: &Services,
    after: Option<&str>,
    limit: u32,
) -> Result<Vec<crate::domain::Agent>, ServiceError> {
    Ok(services.store.a2a_listed_agents(after, limit).await?)
}
