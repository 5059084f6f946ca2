//! The price list and the payment of the surfaces where a payment travels inside a message
//! (MCP's `_meta`, A2A's metadata) rather than in an HTTP header: both speak x402 version 2.

use serde_json::{Map, Value};

use crate::money::MicroUsdc;
use crate::services::Services;
use crate::services::payments::Offer;
use crate::services::usage::Owner;
use crate::x402::gas_sponsoring;
use crate::x402::wire::{self, PaymentRequiredV2, ResourceInfo, Version};

/// A priced call: on which offers, for how much, and the resource a payer signs for.
pub struct Sold<'a> {
    pub offers: &'a [Offer],
    pub price: MicroUsdc,
    /// The command sold; `None` for a chat.
    pub command: Option<&'a str>,
    /// What the surface names the call (`mcp://tool/{name}`, `a2a://skill/{name}`).
    pub resource: ResourceInfo,
    /// The v2 extensions offered with it (a tool's bazaar entry, payment-identifier).
    pub extensions: Map<String, Value>,
}

/// What the call costs, on every network the agent is paid on now; `error` says why a
/// payment is asked for (again).
pub fn payment_required(services: &Services, sold: &Sold<'_>, error: String) -> PaymentRequiredV2 {
    if let Some(metrics) = crate::telemetry::metrics::metrics() {
        for offer in sold.offers {
            metrics.x402_offer(offer.network.as_str(), "2");
        }
    }
    // One price list names every network: counted once, under none.
    if let Some(agent) = sold.offers.first().map(|o| &o.agent) {
        let owner = Owner {
            account_id: &agent.account_id,
            agent_id: &agent.id,
        };
        services.usage.offer(owner, sold.command, None);
    }
    // What is priced by use is also offered by use (`upto`), after its fixed price.
    let accepts: Vec<_> = sold
        .offers
        .iter()
        .flat_map(|o| {
            let command = sold.command.and_then(|name| o.command(name));
            [
                o.requirement_v2(services, sold.price),
                o.requirement_upto(services, command)
                    .filter(|_| sold.command.is_none() || command.is_some()),
            ]
        })
        .flatten()
        .collect();
    let mut extensions = sold.extensions.clone();
    if accepts.iter().any(|a| a.scheme == crate::x402::upto::SCHEME) {
        // By use, a payer that has not approved Permit2 may sign a permit for it instead.
        extensions.insert(gas_sponsoring::NAME.into(), gas_sponsoring::declaration());
    }
    PaymentRequiredV2 {
        x402_version: 2,
        error: Some(error),
        resource: sold.resource.clone(),
        accepts,
        extensions,
    }
}

/// The payment a message carries under `field` (the object, or base64 of it), on the offer
/// of its network; or why it cannot be taken.
pub fn read_payment<'a>(sent: Value, offers: &'a [Offer], field: &str) -> Result<(&'a Offer, wire::Payment), String> {
    let json = match sent {
        Value::String(encoded) => {
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .map_err(|_| format!("{field} is neither an object nor base64 of one"))?;
            serde_json::from_slice(&bytes).map_err(|_| format!("{field} is not base64 of a JSON object"))?
        }
        object @ Value::Object(_) => object,
        _ => return Err(format!("{field} must be the payment object")),
    };
    if json.get("x402Version").and_then(Value::as_u64) != Some(2) {
        return Err(format!("{field} must be an x402 version 2 payment"));
    }
    let network = json["accepted"]["network"].as_str().unwrap_or_default();
    let offer = offers
        .iter()
        .find(|o| !network.is_empty() && o.network_id.as_deref() == Some(network))
        .ok_or_else(|| format!("No matching payment requirements: the agent is not paid on '{network}' here"))?;
    let payment = wire::read_payment(Version::V2, json, field, offer.network_names()).map_err(|e| e.to_string())?;
    Ok((offer, payment))
}
