//! The paid addresses of the agents for sale here, as concrete operations of
//! `/openapi.json`. x402 indexers read an origin's OpenAPI document and take each operation
//! carrying `x-payment-info` as one paid resource: they probe its exact path (a template
//! path such as `/x402/{network}/{agentId}` names nothing they can call), read its price
//! and take its request body's schema as the resource's input. So each agent on each
//! network is listed at its own address (a message, at the agent's price) and at each paid
//! command's (that command's price, its parameters as the body).

use serde_json::{Map, Value, json};

use crate::domain::Command;
use crate::money::MicroUsdc;
use crate::services::payments::{Offer, catalog};
use crate::services::{ServiceError, Services};
use crate::x402::describe;

use super::text_rules;

/// How many agents (on one network each) the document lists: an indexer reads it whole,
/// so it stays a size one request can carry.
pub const LISTED_OFFERS: usize = 200;

/// The template operations the concrete ones are copied from: at the agent's address and
/// at a command's.
struct Templates {
    agent: Value,
    command: Value,
}

/// Adds every paid address to `document`, each a copy of its template path item made
/// concrete (its price list and its paid request).
pub async fn add_paid_addresses(services: &Services, document: &mut Value) -> Result<(), ServiceError> {
    let templates = Templates {
        agent: document["paths"]["/x402/{network}/{agentId}"].clone(),
        command: document["paths"]["/x402/{network}/{agentId}/commands/{commandName}"].clone(),
    };
    let addresses = catalog::offers(services, LISTED_OFFERS, |offer| addresses(services, offer, &templates)).await?;
    let Some(paths) = document["paths"].as_object_mut() else {
        return Ok(());
    };
    for (path, item) in addresses.into_iter().flatten() {
        paths.insert(path, item);
    }
    Ok(())
}

/// The agent's address (a message) and each paid command's, as (path, path item).
fn addresses(services: &Services, offer: &Offer, templates: &Templates) -> Vec<(String, Value)> {
    let agent_path = format!("/x402/{}/{}", offer.network, offer.agent.id);
    let message = json!({ "type": "object", "required": ["message"], "additionalProperties": false, "properties": {
        "message": { "type": "string", "minLength": 1, "pattern": text_rules::NOT_BLANK,
            "description": "Free text for the agent (a leading /command runs that command, at its price)" },
    }});
    let mut listed = vec![(
        agent_path.clone(),
        path_item(
            &templates.agent,
            format!("x402_{}_{}", offer.network, offer.agent.id),
            offer.description(None),
            offer.default_price,
            message,
        ),
    )];
    for command in &offer.commands {
        let url = offer.command_url(services, command);
        let path = url.strip_prefix(&services.public_base_url).unwrap_or(&url).to_string();
        listed.push((path, command_item(offer, command, &templates.command)));
    }
    listed
}

fn command_item(offer: &Offer, command: &Command, template: &Value) -> Value {
    let mut summary = offer.description(Some(command));
    if !command.def.description.is_empty() {
        summary = format!("{summary}: {}", command.def.description);
    }
    path_item(
        template,
        format!("x402_{}_{}_{}", offer.network, offer.agent.id, command.def.name),
        summary,
        offer.price_of(command),
        describe::parameters_schema(command),
    )
}

/// The template path item at one price with one request body: the price list (`get`)
/// and the paid request (`post`, with the payment headers as its only parameters).
fn path_item(template: &Value, id: String, summary: String, price: MicroUsdc, mut body: Value) -> Value {
    text_rules::state_on(&mut body);
    let mut item = template.clone();
    for (method, operation) in item.as_object_mut().into_iter().flatten() {
        operation["operationId"] = json!(format!("{id}_{method}"));
        if let Some(parameters) = operation["parameters"].as_array_mut() {
            parameters.retain(|p| p["in"] != "path");
        }
    }
    let paid = &mut item["post"];
    paid["summary"] = json!(summary);
    paid["x-payment-info"] = payment_info(price);
    paid["requestBody"] = json!({ "required": true, "content": { "application/json": { "schema": body } } });
    item
}

/// The price as indexers read it: US dollars as a decimal string, paid over x402.
fn payment_info(price: MicroUsdc) -> Value {
    let mut info = Map::new();
    info.insert(
        "price".into(),
        json!({ "mode": "fixed", "currency": "USD", "amount": price.to_string() }),
    );
    info.insert("protocols".into(), json!([{ "x402": {} }]));
    Value::Object(info)
}
