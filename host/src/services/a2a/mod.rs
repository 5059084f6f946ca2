//! A2A: every agent is an Agent2Agent server. Its skills are its commands with `a2a` in
//! their integrations, and a message that names none is a turn of a chat with it. Every
//! message becomes a task (`tasks`), kept as long as a job's status; a long-running skill's
//! task follows its job. This folder owns who may use what (`Desk`) and the tasks' rules;
//! the wire (JSON-RPC, the card's JSON, SSE) is `routes/a2a`'s.
//!
//! The agent's owner uses every skill free, with a key or an OAuth token. Anyone else,
//! without a key, buys what the owner sells over x402 (the task asks for the payment, x402's
//! A2A extension), and uses free what the owner opened (`[a2a] open`): the skills and the
//! chat that have no price, counted against the owner's plan.

use std::sync::Arc;

use super::keys::Caller;
use super::payments::{Offer, X402Error};
use super::purchase::Access;
use super::{ServiceError, Services, agents};
use crate::domain::{Command, Integration, ResponseFormat};
use crate::money::MicroUsdc;
use crate::store::AgentWithCommands;

pub mod cancel;
mod conversation;
pub mod listing;
mod paid;
pub mod push;
pub mod tasks;

pub use paid::{PAYLOAD_FIELD, PaymentAnswer, PaymentStatus, TaskPayment};

/// The id under which the card lists the chat with the agent.
pub const CHAT_SKILL: &str = "chat";

/// The x402 extension for A2A that paid tasks follow (version 0.2 of its specification).
pub const X402_EXTENSION: &str = "https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.2";

/// An agent as one A2A caller may use it.
pub struct Desk {
    pub found: Arc<AgentWithCommands>,
    access: Access,
    /// The client address of a caller without a key: a paid task's settlement that fails on
    /// chain is charged to it.
    client: Option<String>,
}

/// One skill as a caller sees it on the card.
pub struct Skill<'a> {
    pub command: &'a Command,
    /// What a call costs this caller; `None` when it is free to it.
    pub price: Option<MicroUsdc>,
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
/// Opens the agent `agent_ref` (its id or username) for `caller`: the owner's credential,
/// or nobody's, calling from `client`. Without one, only an agent that sells on some network
/// now, or whose owner opened it, is found.
pub async fn open(
    services: &Services,
    agent_ref: &str,
    caller: Option<&Caller>,
    client: Option<String>,
) -> Result<Desk, ServiceError> {
    if let Some(caller) = caller {
        let found = agents::owned_with_commands(&services.store, &caller.account.id, agent_ref).await?;
        return Ok(Desk {
            found,
            access: Access::Owner,
            client: None,
        });
    }
    let closed = || ServiceError::from(X402Error::AgentNotSelling(agent_ref.to_string()));
    let found = services
        .store
        .agent_with_commands(agent_ref)
        .await?
        .ok_or_else(closed)?;
    let desk = public_desk(services, found, client).await;
    if desk.access.closed() {
        return Err(closed());
    }
    Ok(desk)
}

/// The agent whose card anyone may read: one its owner listed or opened, or one that sells
/// now. Others' cards are read with the owner's credential, through [`open`].
pub async fn public(services: &Services, agent_ref: &str) -> Result<Option<Desk>, ServiceError> {
    let Some(found) = services.store.agent_with_commands(agent_ref).await? else {
        return Ok(None);
    };
    let listed = found.agent.def.a2a.listed;
    let desk = public_desk(services, found, None).await;
    Ok((listed || !desk.access.closed()).then_some(desk))
}

async fn public_desk(services: &Services, found: Arc<AgentWithCommands>, client: Option<String>) -> Desk {
    let access = Access::public(services, &found.agent, found.agent.def.a2a.open).await;
    Desk { found, access, client }
}

impl Desk {
    /// The account whose tasks this caller's are; `None` for a caller without a key.
    pub fn account_id(&self) -> Option<&str> {
        self.access.is_owner().then_some(self.found.agent.account_id.as_str())
    }

    /// The client address of a caller without a key.
    pub fn client(&self) -> Option<&str> {
        self.client.as_deref()
    }

    /// The offers a payment may be made on: one per network the agent is paid on now.
    pub fn offers(&self) -> &[Offer] {
        self.access.offers()
    }

    /// The skills this caller may use, in manifest order, each with its price.
    pub fn skills(&self) -> impl Iterator<Item = Skill<'_>> {
        agents::offered(&self.found.commands, Some(Integration::A2a))
            // A command whose parameters need a file cannot be called from a message.
            .filter(|c| !crate::schema::needs_file(c))
            .filter_map(|command| {
                let price = self.access.price_of(&self.found.agent, Some(command))?;
                Some(Skill { command, price })
            })
    }

    /// The skill called `name`, if this caller may use it.
    pub fn skill(&self, name: &str) -> Option<Skill<'_>> {
        self.skills().find(|s| s.name() == name)
    }

    /// What a chat turn costs this caller: `None` when the chat is not offered to it,
    /// `Some(None)` when it is free.
    pub fn chat_price(&self) -> Option<Option<MicroUsdc>> {
        self.access.price_of(&self.found.agent, None)
    }

    /// A keyless use counts against the owner's plan; the owner's own were counted at the
    /// gate.
    async fn charge(&self, services: &Services) -> Result<(), ServiceError> {
        if self.access.is_owner() {
            return Ok(());
        }
        agents::charge_owner_for_keyless(services, &self.found.agent, "a2a_open").await
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
