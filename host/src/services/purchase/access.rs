//! Who uses an agent's protocol endpoint (MCP, A2A) and what each of its commands costs
//! them: the owner uses everything free; anyone else buys what the owner sells over x402,
//! on the networks that can take a payment now, and uses free what the owner opened.

use crate::domain::{Agent, Command, Integration};
use crate::money::MicroUsdc;
use crate::services::Services;
use crate::services::payments::{self, Offer};

pub enum Access {
    /// The agent's owner, by key or OAuth token: everything, free.
    Owner,
    /// Anyone else: what is for sale, paid on any network the agent can be paid on now
    /// (`offers`), and, when the owner opened the surface, what has no price.
    Public { offers: Vec<Offer>, open: bool },
}

impl Access {
    /// A caller without a key, on a surface the owner opened or not.
    pub async fn public(services: &Services, agent: &Agent, open: bool) -> Access {
        Access::Public {
            offers: payments::offers_now(services, agent).await,
            open,
        }
    }

    pub fn is_owner(&self) -> bool {
        matches!(self, Access::Owner)
    }

    /// Whether a caller without a key finds nothing here: nothing sells now, nothing is open.
    pub fn closed(&self) -> bool {
        matches!(self, Access::Public { offers, open } if offers.is_empty() && !open)
    }

    /// The offers a payment may be made on: one per network the agent is paid on now.
    pub fn offers(&self) -> &[Offer] {
        match self {
            Access::Public { offers, .. } => offers,
            Access::Owner => &[],
        }
    }

    /// What `command` (`None`: the chat) of `agent` costs this caller: `None` when it is
    /// not offered to it, `Some(None)` when it is free. For sale is what the manifest says,
    /// not whether a network can take the payment now: a command for sale with no network
    /// to pay on is not offered, never free.
    pub fn price_of(&self, agent: &Agent, command: Option<&Command>) -> Option<Option<MicroUsdc>> {
        let Access::Public { offers, open } = self else {
            return Some(None);
        };
        if !for_sale(agent, command) {
            return open.then_some(None);
        }
        let offer = offers.first()?;
        let price = match command {
            None => offer.default_price,
            Some(c) => offer.price_of(offer.command(&c.def.name)?),
        };
        Some(Some(price))
    }
}

/// Whether the owner sells this command (`None`: the chat) over x402: such a command is
/// never given away to a caller without a key.
fn for_sale(agent: &Agent, command: Option<&Command>) -> bool {
    let x402 = &agent.def.x402;
    x402.enabled
        && x402.default_price.is_some()
        && command.is_none_or(|c| c.def.integrations.contains(&Integration::X402))
}
