//! The shapes of the discovery lists an origin serves: `/discovery/resources` (the x402 v2
//! specification's, §8), `/.well-known/x402.json` (the foundation's draft) and
//! `/.well-known/x402` (the addresses, as older indexers read them).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::wire::{RequirementsV1, RequirementsV2, ResourceInfo};

/// A requirement in either version (the discovery list shows whichever the resource takes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Requirements {
    V2(RequirementsV2),
    V1(RequirementsV1),
}

/// One entry of a discovery list, as the facilitators' `GET /discovery/resources` gives it
/// (x402 v2 specification, §8); served by the origin itself at `/.well-known/x402`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveredResource {
    pub resource: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub x402_version: u64,
    pub accepts: Vec<Requirements>,
    /// Unix seconds.
    pub last_updated: i64,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pagination {
    pub limit: usize,
    pub offset: usize,
    pub total: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveryList {
    pub x402_version: u64,
    pub items: Vec<DiscoveredResource>,
    pub pagination: Pagination,
}

/// A paid route as the foundation's draft for an origin's `/.well-known/x402.json` lists
/// it: its resource, its kind (`http`), what it costs, its request and its answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WellKnownItem {
    pub resource: ResourceInfo,
    #[serde(rename = "type")]
    pub kind: String,
    pub accepts: Vec<RequirementsV2>,
    pub input: Value,
    pub output: Value,
}

/// `/.well-known/x402.json`: one page of the origin's paid routes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WellKnownDocument {
    pub x402_version: u64,
    /// When this page was written (Unix seconds).
    pub last_updated: i64,
    pub items: Vec<WellKnownItem>,
    pub pagination: Pagination,
}

/// `/.well-known/x402` as indexers that predate the draft read it: the paid resources'
/// addresses (each takes a `POST`), and how to use them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WellKnownIndex {
    pub version: u64,
    pub resources: Vec<String>,
    /// The A2A cards of the agents on this page: each sells as an A2A agent too.
    #[serde(rename = "agentCards", skip_serializing_if = "Vec::is_empty")]
    pub agent_cards: Vec<String>,
    pub instructions: String,
}
