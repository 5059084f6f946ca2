//! What a paid call to an agent costs on a network, and the payment requirement a standard
//! x402 client reads to pay it.
//!
//! The agent's own wallet on that network is `payTo`, and it is also the fee payer of
//! Solana payments and the relayer of Base ones: the service holds its key, so no
//! separate service wallet needs funding, and the fees come out of what the agent earns.

use serde_json::{Map, Value, json};

use super::X402Error;
use crate::domain::{Agent, Command, Integration, Network, ParamType};
use crate::money::MicroUsdc;
use crate::services::{ServiceError, Services, agents, wallets};

/// Name given to clients in `extra.serviceName`.
const SERVICE_NAME: &str = "agent-host";
/// How long a signed payment may take to reach us.
pub const MAX_TIMEOUT_SECONDS: u64 = 60;

/// An agent that takes x402 payments on a network, with its paid commands.
pub struct Offer {
    pub agent: Agent,
    pub network: Network,
    pub pay_to: String,
    /// Enabled commands offered on x402, in manifest order.
    pub commands: Vec<Command>,
    pub default_price: MicroUsdc,
}

fn agent_not_found(id_or_username: &str) -> ServiceError {
    X402Error::AgentNotSelling(id_or_username.to_string()).into()
}

pub async fn offer(services: &Services, id_or_username: &str, network: Network) -> Result<Offer, ServiceError> {
    let (agent, mut commands) = services
        .store
        .agent_with_commands(id_or_username)
        .await?
        .ok_or_else(|| agent_not_found(id_or_username))?;
    let x402 = &agent.def.x402;
    let Some(default_price) = x402.default_price.filter(|_| x402.enabled) else {
        return Err(agent_not_found(id_or_username));
    };
    if !x402.networks.contains(&network) {
        return Err(X402Error::UnsupportedNetwork {
            agent: id_or_username.to_string(),
            network,
        }
        .into());
    }
    let wallet = wallets::wallet(services, &agent.id, network).await?;
    agents::offered_on(&mut commands, Integration::X402);
    Ok(Offer {
        pay_to: wallet.address,
        agent,
        network,
        commands,
        default_price,
    })
}

impl Offer {
    pub fn price_of(&self, command: &Command) -> MicroUsdc {
        command.def.price.unwrap_or(self.default_price)
    }

    pub fn command(&self, name: &str) -> Option<&Command> {
        self.commands.iter().find(|c| c.def.name == name)
    }

    /// The `accepts` entry for a request that costs `price` (`command` when it names one).
    pub fn requirement(&self, services: &Services, price: MicroUsdc, command: Option<&Command>) -> Value {
        let agent = &self.agent;
        let description = match command {
            Some(c) => format!("Run /{} of {}", c.def.name, agent.def.name),
            None => format!("A message to {}, or one of its commands", agent.def.name),
        };
        let mut extra = json!({
            "serviceName": SERVICE_NAME,
            "agentId": agent.id,
            "agentName": agent.def.name,
            "availableCommands": self.commands.iter().map(|c| c.def.name.clone()).collect::<Vec<_>>(),
            "commandPricing": self.commands.iter()
                .map(|c| (c.def.name.clone(), self.price_of(c).to_json_number()))
                .collect::<Map<_, _>>(),
        });
        match self.network {
            // Standard clients leave the fee payer's signature to us.
            Network::Solana => extra["feePayer"] = json!(self.pay_to),
            // Standard clients sign EIP-712 with the token's own domain.
            Network::Base => {
                extra["name"] = json!(services.settings.base_usdc_eip712_name);
                extra["version"] = json!(services.settings.base_usdc_eip712_version);
            }
        }
        json!({
            "scheme": "exact",
            "network": self.network.as_str(),
            "maxAmountRequired": price.0.to_string(),
            "resource": format!("{}/x402/{}/{}", services.public_base_url, self.network, agent.id),
            "description": description,
            "mimeType": "application/json",
            "payTo": self.pay_to,
            "maxTimeoutSeconds": MAX_TIMEOUT_SECONDS,
            "asset": services.chains.get(self.network).usdc_asset(),
            "outputSchema": { "input": {
                "type": "http",
                "method": "POST",
                "bodyType": "json",
                "bodyFields": self.body_fields(),
            }},
            "extra": extra,
        })
    }

    /// `message`, `command` (with the paid commands as its enum) and the union of their
    /// parameters (a parameter is required only by its own command, so none is here).
    fn body_fields(&self) -> Map<String, Value> {
        let mut fields = Map::new();
        fields.insert(
            "message".into(),
            json!({ "type": "string", "required": false, "description": "Free text for the agent; a leading /command runs that command" }),
        );
        let names: Vec<&str> = self.commands.iter().map(|c| c.def.name.as_str()).collect();
        fields.insert(
            "command".into(),
            json!({ "type": "string", "required": false, "description": "A command to run instead of a message", "enum": names }),
        );
        for command in &self.commands {
            for param in &command.def.parameters {
                if fields.contains_key(&param.name) {
                    continue;
                }
                let kind = match param.kind {
                    ParamType::File => "string",
                    other => other.as_str(),
                };
                let description = if param.description.is_empty() {
                    format!("Parameter of /{}", command.def.name)
                } else {
                    format!("{} (/{})", param.description, command.def.name)
                };
                fields.insert(
                    param.name.clone(),
                    json!({ "type": kind, "required": false, "description": description }),
                );
            }
        }
        fields
    }
}
