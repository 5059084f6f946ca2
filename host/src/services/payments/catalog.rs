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

/// The entries `offset..offset + limit`, in username then network order. An agent is on
/// sale on a network when its manifest enables x402 there and it has a wallet to be paid in.
/// The list is one query, kept in the read cache (as fresh as the command lists); each
/// page's agents come from that cache too. Nothing here asks per agent what the list knows.
pub async fn catalog(services: &Services, limit: usize, offset: usize) -> Result<Catalog, ServiceError> {
    let listings = services.store.x402_listings().await?;
    let mut items = Vec::new();
    for listing in listings.iter().skip(offset).take(limit) {
        // Changed or gone since the list was read: left out of this page.
        let Some(found) = services.store.agent_with_commands(&listing.agent_id).await? else {
            continue;
        };
        let x402 = &found.agent.def.x402;
        let Some(price) = x402.default_price.filter(|_| x402.enabled) else {
            continue;
        };
        let offer = Offer::of(services, &found, listing.network, listing.address.clone(), price).await;
        items.push(entry(services, &offer));
    }
    Ok(Catalog {
        items,
        total: listings.len(),
    })
}

/// The agent on one network: its message price as the requirement, and each paid command
/// with its price and its request's description (the v2 `bazaar` extension's content).
fn entry(services: &Services, offer: &Offer) -> DiscoveredResource {
    let price = offer.default_price;
    let (version, requirement) = match offer.requirement_v2(services, price) {
        Some(v2) => (2, Requirements::V2(v2)),
        None => (1, Requirements::V1(offer.requirement_v1(services, price, None))),
    };
    let metadata = offer.listing().discovery_metadata();
    DiscoveredResource {
        resource: offer.resource_url(services),
        kind: "http".into(),
        x402_version: version,
        accepts: vec![requirement],
        last_updated: offer.agent.updated_at / 1000,
        metadata,
    }
}
