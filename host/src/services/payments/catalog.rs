//! What is for sale here: every agent that takes x402 payments, on each network it takes
//! them on, as a discovery list a crawler or a buyer agent reads without knowing usernames.

use super::offer::Offer;
use crate::services::{ServiceError, Services};
use crate::x402::wire::{DiscoveredResource, Requirements};

/// One page of the list, and how many entries there are in all.
pub struct Catalog {
    pub items: Vec<DiscoveredResource>,
    pub total: usize,
}

/// How a resource is reached: the paid HTTP route, or the agent's MCP server (where the
/// chat tool is sold at the agent's price whenever the agent sells at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Http,
    Mcp,
}

impl Transport {
    pub const ALL: [Transport; 2] = [Transport::Http, Transport::Mcp];

    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Mcp => "mcp",
        }
    }

    pub fn parse(text: &str) -> Option<Transport> {
        Transport::ALL.into_iter().find(|t| t.as_str() == text)
    }
}

/// The entries `offset..offset + limit` of the given transports, in username then network
/// order (each listing's transports together). An agent is on sale on a network when its
/// manifest enables x402 there and it has a wallet to be paid in. The list is one query,
/// kept in the read cache (as fresh as the command lists); each page's agents come from
/// that cache too. Nothing here asks per agent what the list knows.
pub async fn catalog(
    services: &Services,
    transports: &[Transport],
    limit: usize,
    offset: usize,
) -> Result<Catalog, ServiceError> {
    let listings = services.store.x402_listings().await?;
    let per_listing = transports.len();
    let total = listings.len() * per_listing;
    let mut items = Vec::new();
    let mut index = offset;
    while index < total && items.len() < limit {
        let listing = &listings[index / per_listing];
        let first = index % per_listing;
        let wanted = &transports[first..(per_listing.min(first + limit - items.len()))];
        index += wanted.len();
        // Changed or gone since the list was read: left out of this page.
        let Some(found) = services.store.agent_with_commands(&listing.agent_id).await? else {
            continue;
        };
        let x402 = &found.agent.def.x402;
        let Some(price) = x402.default_price.filter(|_| x402.enabled) else {
            continue;
        };
        let offer = Offer::of(services, &found, listing.network, listing.address.clone(), price).await;
        items.extend(wanted.iter().map(|transport| entry(services, &offer, *transport)));
    }
    Ok(Catalog { items, total })
}

/// The agent on one network: its message price as the requirement, and each paid command
/// with its price and its request's description (the v2 `bazaar` extension's content).
fn entry(services: &Services, offer: &Offer, transport: Transport) -> DiscoveredResource {
    let price = offer.default_price;
    let (version, requirement) = match offer.requirement_v2(services, price) {
        Some(v2) => (2, Requirements::V2(v2)),
        None => (1, Requirements::V1(offer.requirement_v1(services, price, None))),
    };
    let metadata = offer.listing().discovery_metadata();
    let resource = match transport {
        Transport::Http => offer.resource_url(services),
        Transport::Mcp => format!("{}/mcp/{}", services.public_base_url, offer.agent.id),
    };
    DiscoveredResource {
        resource,
        kind: transport.as_str().into(),
        x402_version: version,
        accepts: vec![requirement],
        last_updated: offer.agent.updated_at / 1000,
        metadata,
    }
}
