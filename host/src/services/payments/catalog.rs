//! What is for sale here: every agent that takes x402 payments, on each network it takes
//! them on, as a discovery list a crawler or a buyer agent reads without knowing usernames.

use super::offer::Offer;
use crate::services::{ServiceError, Services};
use serde_json::json;

use crate::x402::discovery::{DiscoveredResource, Requirements, WellKnownItem};
use crate::x402::wire::ResourceInfo;

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
    /// The agent's A2A endpoint: its skills bought as tasks.
    A2a,
}

impl Transport {
    pub const ALL: [Transport; 3] = [Transport::Http, Transport::Mcp, Transport::A2a];

    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Mcp => "mcp",
            Transport::A2a => "a2a",
        }
    }

    pub fn parse(text: &str) -> Option<Transport> {
        Transport::ALL.into_iter().find(|t| t.as_str() == text)
    }
}

/// The entries `offset..offset + limit` of the given transports, in username then network
/// order (each listing's transports together), in the facilitators' discovery shape.
pub async fn catalog(
    services: &Services,
    transports: &[Transport],
    limit: usize,
    offset: usize,
) -> Result<Catalog, ServiceError> {
    let (items, total) = listed(services, transports, limit, offset, |offer, transport| {
        Some(entry(services, offer, transport))
    })
    .await?;
    Ok(Catalog { items, total })
}

/// The paid HTTP routes `offset..offset + limit`: their addresses only.
pub async fn addresses(services: &Services, limit: usize, offset: usize) -> Result<(Vec<String>, usize), ServiceError> {
    listed(services, &[Transport::Http], limit, offset, |offer, _| {
        Some(offer.resource_url(services))
    })
    .await
}

/// The first `limit` agents for sale on a network each (in the list's order), each as
/// `write` describes its offer.
pub async fn offers<T>(services: &Services, limit: usize, write: impl Fn(&Offer) -> T) -> Result<Vec<T>, ServiceError> {
    let (items, _) = listed(services, &[Transport::Http], limit, 0, |offer, _| Some(write(offer))).await?;
    Ok(items)
}

/// The paid HTTP routes `offset..offset + limit` as the origin's `/.well-known/x402.json`
/// lists them (a network where version 2 is not offered now is left out of its page).
pub async fn well_known(
    services: &Services,
    limit: usize,
    offset: usize,
) -> Result<(Vec<WellKnownItem>, usize), ServiceError> {
    listed(services, &[Transport::Http], limit, offset, |offer, _| {
        well_known_item(services, offer)
    })
    .await
}

/// The listings `offset..offset + limit` (times their transports), each written by
/// `write`, and how many there are in all. An agent is on sale on a network when its
/// manifest enables x402 there and it has a wallet to be paid in. The list is one query,
/// kept in the read cache (as fresh as the command lists); each page's agents come from
/// that cache too. Nothing here asks per agent what the list knows.
async fn listed<T>(
    services: &Services,
    transports: &[Transport],
    limit: usize,
    offset: usize,
    write: impl Fn(&Offer, Transport) -> Option<T>,
) -> Result<(Vec<T>, usize), ServiceError> {
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
        // Its facilitator cannot be used now: nothing is for sale there meanwhile.
        if offer.facilitator_down.is_some() {
            continue;
        }
        items.extend(wanted.iter().filter_map(|transport| write(&offer, *transport)));
    }
    Ok((items, total))
}

/// The agent's paid route on one network, as the foundation's draft for an origin's
/// `/.well-known/x402.json` describes a route: where, what it costs (the message price, and
/// by use where it is priced so; a paid command's is in its 402), and the request and
/// answer (the v2 `bazaar`'s).
fn well_known_item(services: &Services, offer: &Offer) -> Option<WellKnownItem> {
    let requirement = offer.requirement_v2(services, offer.default_price)?;
    let bazaar = offer.listing().bazaar(None);
    Some(WellKnownItem {
        resource: ResourceInfo {
            url: offer.resource_url(services),
            description: Some(offer.description(None)),
            mime_type: Some("application/json".into()),
        },
        kind: Transport::Http.as_str().into(),
        accepts: std::iter::once(requirement)
            .chain(offer.requirement_upto(services, None))
            .collect(),
        input: json!({
            "method": "POST",
            "bodyType": "json",
            "body": bazaar["schema"]["properties"]["input"]["properties"]["body"],
        }),
        output: json!({ "mimeType": "application/json", "example": bazaar["info"]["output"]["example"] }),
    })
}

/// The agent on one network: its message price as the requirement (and by use, where it is
/// priced so), and each paid command with its price and its request's description (the v2
/// `bazaar` extension's content).
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
        Transport::A2a => format!("{}/a2a/{}", services.public_base_url, offer.agent.id),
    };
    DiscoveredResource {
        resource,
        kind: transport.as_str().into(),
        x402_version: version,
        accepts: std::iter::once(requirement)
            .chain(
                offer
                    .requirement_upto(services, None)
                    .filter(|_| version == 2)
                    .map(Requirements::V2),
            )
            .collect(),
        last_updated: offer.agent.updated_at / 1000,
        metadata,
    }
}
