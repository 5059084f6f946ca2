//! An agent's A2A card: who it is, where and how to reach it, what it can do, how to sign
//! in. Written for one caller: its owner sees every skill, anyone else what is open.

use serde_json::{Value, json};

use crate::routes::AppState;
use crate::services::a2a::{CHAT_SKILL, Desk, X402_EXTENSION};
use crate::services::oauth::SCOPE;

/// The A2A version this server speaks.
pub const PROTOCOL_VERSION: &str = "1.0";

/// The agent's A2A endpoint, by its id.
pub fn endpoint(state: &AppState, agent_id: &str) -> String {
    format!("{}/a2a/{agent_id}", base(state))
}

/// Where the agent's card is read.
pub fn card_url(state: &AppState, agent_id: &str) -> String {
    format!("{}/.well-known/agent-card.json", endpoint(state, agent_id))
}

fn base(state: &AppState) -> &str {
    state.services.public_base_url.trim_end_matches('/')
}

pub fn card(state: &AppState, desk: &Desk) -> Value {
    let agent = &desk.found.agent;
    let def = &agent.def;
    let base = base(state);
    let mut skills = Vec::new();
    if let (Some(price), None) = (desk.chat_price(), desk.skill(CHAT_SKILL)) {
        let about = format!(
            "Talk with {}: any message that names no skill is a turn of this conversation (its contextId keeps the history).",
            def.name
        );
        skills.push(json!({
            "id": CHAT_SKILL,
            "name": "Chat",
            "description": priced(about, price),
            "tags": ["chat"],
            "examples": ["Hello! What can you do?"],
            "inputModes": ["text/plain"],
            "outputModes": ["text/plain"],
        }));
    }
    for skill in desk.skills() {
        let command = skill.command;
        skills.push(json!({
            "id": skill.name(),
            "name": skill.name(),
            "description": priced(command.def.description.clone(), skill.price),
            "tags": [command.def.handler_type.as_str()],
            "examples": [skill.example()],
            "inputModes": ["application/json", "text/plain"],
            "outputModes": [skill.output_type()],
        }));
    }
    let oauth = state.services.settings.mcp.mcp_oauth;
    let mut schemes = json!({
        "apiKey": { "apiKeySecurityScheme": {
            "description": "The agent owner's API key",
            "location": "header",
            "name": "x-api-key",
        }},
        "bearer": { "httpAuthSecurityScheme": {
            "description": "The agent owner's API key, or an OAuth access token for this agent",
            "scheme": "Bearer",
        }},
    });
    let mut requirements = vec![
        json!({ "schemes": { "apiKey": { "list": [] } } }),
        json!({ "schemes": { "bearer": { "list": [] } } }),
    ];
    if oauth {
        schemes["oauth"] = json!({ "oauth2SecurityScheme": {
            "description": "Sign in as the agent's owner (authorization code with PKCE)",
            "oauth2MetadataUrl": format!("{base}/.well-known/oauth-authorization-server"),
            "flows": { "authorizationCode": {
                "authorizationUrl": format!("{base}/oauth/authorize"),
                "tokenUrl": format!("{base}/oauth/token"),
                "refreshUrl": format!("{base}/oauth/token"),
                "scopes": { SCOPE: "Use the agent's tools and skills as its owner" },
                "pkceRequired": true,
            }},
        }});
        requirements.push(json!({ "schemes": { "oauth": { "list": [SCOPE] } } }));
    }
    let mut card = json!({
        "name": def.name,
        "description": description(desk),
        "supportedInterfaces": [{
            "url": endpoint(state, &agent.id),
            "protocolBinding": "JSONRPC",
            "protocolVersion": PROTOCOL_VERSION,
        }],
        "provider": { "organization": host_name(base), "url": base },
        "version": crate::clock::iso(agent.updated_at),
        "capabilities": {
            "streaming": true,
            // The owner's alone.
            "pushNotifications": desk.account_id().is_some(),
            "extensions": extensions(desk),
        },
        "securitySchemes": schemes,
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
    });
    // A card whose skills all need the owner says so; one that sells, or is open, is used
    // without any.
    if !def.a2a.open && desk.offers().is_empty() {
        card["securityRequirements"] = Value::Array(requirements);
    }
    if let Some(key) = &state.services.card_key {
        sign(&mut card, key, &keys_url(state));
    }
    card
}

/// Where the key that signs the cards is published.
pub fn keys_url(state: &AppState) -> String {
    format!("{}/.well-known/jwks.json", base(state))
}

/// Signs the card as A2A's SDKs check it: a JWS over its canonical JSON, the signature
/// itself left out, in `signatures`. Nothing in the card may be `false` or `0`: the SDKs
/// read a card into their types, which drop such values, before they canonicalize it.
fn sign(card: &mut Value, key: &crate::jws::DocumentKey, jku: &str) {
    let payload = crate::jws::canonical(card);
    let (protected, signature) = key.sign(payload.as_bytes(), jku);
    card["signatures"] = json!([{ "protected": protected, "signature": signature }]);
}

/// A description with what a call costs this caller, when it costs anything.
fn priced(description: String, price: Option<crate::money::MicroUsdc>) -> String {
    match price {
        Some(price) => format!("{description} ({price} USDC a call, paid with x402: the task asks for the payment)"),
        None => description,
    }
}

/// x402's A2A extension, when something is for sale to this caller: where it is paid.
fn extensions(desk: &Desk) -> Value {
    let offers = desk.offers();
    if offers.is_empty() {
        return json!([]);
    }
    let networks: Vec<&str> = offers.iter().filter_map(|o| o.network_id.as_deref()).collect();
    json!([{
        "uri": X402_EXTENSION,
        "description": "Paid skills: a task for one asks for an x402 payment (version 2, scheme exact, USDC) in its status message, and takes it in the client's next message",
        "params": { "x402Version": 2, "networks": networks },
    }])
}

/// The agent's personality is its description on its owner's card; a stranger's card says
/// less, as the other public documents do: a personality is the model's instructions,
/// shown only where its owner said so (MCP's `personality`).
fn description(desk: &Desk) -> String {
    let def = &desk.found.agent.def;
    let shown = desk.account_id().is_some() || def.mcp.personality;
    let personality = def.personality.trim();
    if personality.is_empty() || !shown {
        format!("{}, an agent you can message or hand a task", def.name)
    } else {
        personality.chars().take(1_000).collect()
    }
}

fn host_name(base: &str) -> &str {
    let rest = base.split_once("://").map_or(base, |(_, rest)| rest);
    rest.split(['/', ':']).next().unwrap_or(rest)
}
