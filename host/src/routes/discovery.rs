//! How indexers and buyer agents find what is for sale here, without knowing usernames,
//! in each shape they read:
//!
//! - `GET /.well-known/x402`: the paid resources' addresses, `{version: 1, resources,
//!   instructions}`, as x402 indexers have read an origin's file;
//! - `GET /.well-known/x402.json`: the foundation's draft for an origin's list, `{x402Version:
//!   2, items: [{resource, type, accepts, input, output}]}`;
//! - `GET /discovery/resources`: the facilitators' discovery list (x402 v2 specification §8),
//!   where a client of a facilitator looks, with the MCP servers and A2A endpoints too
//!   (`type=mcp`, `type=a2a`).
//!
//! Each is paged (`limit`, `offset`), comes from the read cache, and counts against the
//! client's limit like the paid routes. Nothing in them is an agent's personality or
//! knowledge: names, descriptions, prices and the requests' shapes only.

use std::collections::HashMap;
use std::ops::RangeInclusive;

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::AppState;
use super::x402::{limit_clients, x402_error};
use crate::error::{ApiError, ApiQuery};
use crate::services::payments::catalog::{self, Transport};
use crate::x402::discovery;
use crate::x402::wire::Version;

pub fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/.well-known/x402", get(index))
        .route("/.well-known/x402.json", get(well_known))
        .route("/discovery/resources", get(resources))
        .route_layer(axum::middleware::from_fn_with_state(state, limit_clients))
}

type Query = Result<ApiQuery<HashMap<String, String>>, ApiError>;

/// A discovery query: its fields, its `limit` (up to `most`, `default` when absent) and
/// its `offset`.
fn paging(query: Query, default: usize, most: usize) -> Result<(HashMap<String, String>, usize, usize), ApiError> {
    let ApiQuery(query) = query?;
    let number = |name: &str, default: usize, range: RangeInclusive<usize>| match query.get(name) {
        None => Ok(default),
        Some(text) => text.parse::<usize>().ok().filter(|n| range.contains(n)).ok_or_else(|| {
            ApiError::validation(format!(
                "Invalid query parameter '{name}': must be an integer from {} to {}",
                range.start(),
                range.end()
            ))
        }),
    };
    let (limit, offset) = (number("limit", default, 1..=most)?, number("offset", 0, 0..=1_000_000)?);
    Ok((query, limit, offset))
}

/// `GET /.well-known/x402?limit=&offset=`: up to 100 addresses a page (each is an agent
/// read and priced, so a page stays small).
async fn index(State(state): State<AppState>, query: Query) -> Response {
    let services = &state.services;
    // Refusals in the paid API's envelope, not the keyed API's.
    let (_, limit, offset) = match paging(query, 100, 100) {
        Ok(page) => page,
        Err(err) => return x402_error(err, Version::V2),
    };
    let cards = catalog::catalog(services, &[Transport::A2a], limit, offset).await;
    match (catalog::addresses(services, limit, offset).await, cards) {
        (Ok((resources, _)), Ok(cards)) => {
            // One card an agent, however many networks it is paid on.
            let mut agent_cards: Vec<String> = Vec::new();
            for item in cards.items {
                let card = format!("{}/.well-known/agent-card.json", item.resource);
                if !agent_cards.contains(&card) {
                    agent_cards.push(card);
                }
            }
            axum::Json(discovery::WellKnownIndex {
                version: 1,
                resources,
                agent_cards,
                instructions: format!(
                    "Each resource is an agent for sale on one network: POST a JSON body {{\"message\": ...}} or \
                     {{\"command\": ..., <parameters>}} to get its price (402, x402 versions 1 and 2), then again \
                     with the payment. Each agent is an A2A agent too (agentCards), its skills paid as tasks \
                     (x402's A2A extension). More at {}/.well-known/x402.json and {}/discovery/resources.",
                    services.public_base_url, services.public_base_url
                ),
            })
            .into_response()
        }
        (Err(err), _) | (_, Err(err)) => x402_error(err.into(), Version::V2),
    }
}

/// `GET /.well-known/x402.json?limit=&offset=`: up to 100 routes a page (20 by default).
async fn well_known(State(state): State<AppState>, query: Query) -> Response {
    let (_, limit, offset) = match paging(query, 20, 100) {
        Ok(page) => page,
        Err(err) => return x402_error(err, Version::V2),
    };
    match catalog::well_known(&state.services, limit, offset).await {
        Ok((items, total)) => axum::Json(discovery::WellKnownDocument {
            x402_version: 2,
            last_updated: crate::clock::now_ms() / 1000,
            items,
            pagination: discovery::Pagination { limit, offset, total },
        })
        .into_response(),
        Err(err) => x402_error(err.into(), Version::V2),
    }
}

/// `GET /discovery/resources?limit=&offset=&type=`: up to 100 entries a page (20 by
/// default). Each agent is sold over HTTP, MCP and A2A: the HTTP entries by default, as a
/// client that reads this list may post to each resource; `type=mcp` lists the MCP servers,
/// `type=a2a` the A2A endpoints (another type: nothing).
async fn resources(State(state): State<AppState>, query: Query) -> Response {
    let (query, limit, offset) = match paging(query, 20, 100) {
        Ok(page) => page,
        Err(err) => return x402_error(err, Version::V2),
    };
    let transports: Vec<Transport> = match query.get("type") {
        None => vec![Transport::Http],
        Some(kind) => Transport::parse(kind).into_iter().collect(),
    };
    match catalog::catalog(&state.services, &transports, limit, offset).await {
        Ok(catalog) => axum::Json(discovery::DiscoveryList {
            x402_version: 2,
            items: catalog.items,
            pagination: discovery::Pagination {
                limit,
                offset,
                total: catalog.total,
            },
        })
        .into_response(),
        Err(err) => x402_error(err.into(), Version::V2),
    }
}
