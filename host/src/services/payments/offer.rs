//! What a paid call to an agent costs on a network, and the payment requirement a standard
//! x402 client reads to pay it.
//!
//! The agent's own wallet on that network is `payTo`, and it is also the fee payer of
//! Solana payments and the relayer of Base ones: the service holds its key, so no
//! separate service wallet needs funding, and the fees come out of what the agent earns.

use serde_json::{Map, Value};

use super::X402Error;
use crate::domain::{Agent, Command, Integration, Network, Rates};
use crate::money::MicroUsdc;
use crate::services::{ServiceError, Services, agents, wallets};
use crate::store::AgentWithCommands;
use crate::x402::describe::{self, Listing};
use crate::x402::wire::{
    NetworkNames, PaymentRequiredV1, PaymentRequiredV2, RequirementsV1, RequirementsV2, ResourceInfo, SCHEME,
    SettleResponse, Version,
};
use crate::x402::{gas_sponsoring, offer_receipt, payment_identifier};

/// How long a signed payment may take to reach us.
pub const MAX_TIMEOUT_SECONDS: u64 = 60;

/// How long an `upto` authorization is asked to last: the work runs before it is settled.
pub const UPTO_MAX_TIMEOUT_SECONDS: u64 = 300;

/// An agent that takes x402 payments on a network, with its paid commands.
pub struct Offer {
    pub agent: Agent,
    pub network: Network,
    /// The network's CAIP-2 id, as x402 v2 names it; `None` while the chain cannot tell
    /// (Solana asks its RPC once): then only version 1 is offered.
    pub network_id: Option<String>,
    pub pay_to: String,
    /// Enabled commands offered on x402, in manifest order.
    pub commands: Vec<Command>,
    pub default_price: MicroUsdc,
    /// Solana, settled through a facilitator: its fee payer, which the payer's transaction
    /// names (otherwise the agent's wallet, `pay_to`, is the fee payer).
    pub fee_payer: Option<String>,
    /// Why the facilitator that settles here cannot be used now (its fee payer unknown):
    /// nothing is sold on this network until it can.
    pub facilitator_down: Option<crate::clients::facilitator::FacilitatorError>,
    /// Base, for what is priced by use: the one address that may settle an `upto` payment
    /// (the payer's witness names it): the agent's wallet, or the facilitator's settling
    /// address. `None`: `upto` is not offered here.
    pub upto_settler: Option<String>,
    /// The command whose own address the request came to, if it did: the resource a 402
    /// names is then that address.
    routed: Option<String>,
}

fn agent_not_found(id_or_username: &str) -> ServiceError {
    X402Error::AgentNotSelling(id_or_username.to_string()).into()
}

/// The agent's offers on each network its manifest names that can take a payment now: a
/// network without a wallet, or an agent not selling, offers nothing.
pub async fn offers_now(services: &Services, agent: &crate::domain::Agent) -> Vec<Offer> {
    let mut offers = Vec::new();
    for network in &agent.def.x402.networks {
        if let Ok(offer) = offer(services, &agent.id, *network).await {
            offers.push(offer);
        }
    }
    offers
}

pub async fn offer(services: &Services, id_or_username: &str, network: Network) -> Result<Offer, ServiceError> {
    let found = services
        .store
        .agent_with_commands(id_or_username)
        .await?
        .ok_or_else(|| agent_not_found(id_or_username))?;
    let x402 = &found.agent.def.x402;
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
    let pay_to = wallets::address(services, &found.agent.id, network).await?;
    let offer = Offer::of(services, &found, network, pay_to.to_string(), default_price).await;
    if let Some(error) = offer.facilitator_down.clone() {
        return Err(X402Error::Facilitator { error, recorded: false }.into());
    }
    Ok(offer)
}

/// What a request priced by use costs, as its `upto` requirement states it (micro-USDC as
/// decimal text, as x402 writes amounts).
fn by_use_terms(rates: &Rates) -> Value {
    match rates {
        Rates::Chat(chat) => serde_json::json!({
            "perThousandInputTokens": chat.per_1k_input.0.to_string(),
            "perThousandOutputTokens": chat.per_1k_output.0.to_string(),
        }),
        Rates::Units(units) => serde_json::json!({ "perUnit": units.per_unit.0.to_string(), "unit": units.unit }),
    }
}

/// Who settles `upto` payments for this agent on `network` (see [`Offer::upto_settler`]).
/// A facilitator that does not settle `upto` there, or cannot be asked now, leaves it
/// unoffered; the fixed price is sold all the same.
async fn upto_settler(
    services: &Services,
    found: &AgentWithCommands,
    network: Network,
    network_id: &Option<String>,
    pay_to: &str,
) -> Option<String> {
    let priced_by_use =
        found.agent.def.x402.chat_by_use.is_some() || found.commands.iter().any(|c| c.def.by_use.is_some());
    if network != Network::Base || !priced_by_use {
        return None;
    }
    let Some(facilitator) = services.facilitators.of(network) else {
        return Some(pay_to.to_string());
    };
    match facilitator.upto_address(network_id.as_deref()?).await {
        // An address a payer could not sign for would only get every payment refused.
        Ok(address) if crate::chains::base::parse_address(&address).is_ok() => Some(address),
        Ok(address) => {
            tracing::warn!(
                facilitator = facilitator.label(),
                "upto is not offered: /supported names {address:?}"
            );
            None
        }
        Err(error) => {
            tracing::debug!(facilitator = facilitator.label(), "upto is not offered: {error}");
            None
        }
    }
}

impl Offer {
    /// The offer of an agent for sale on `network`, paid to `pay_to`.
    pub async fn of(
        services: &Services,
        found: &AgentWithCommands,
        network: Network,
        pay_to: String,
        default_price: MicroUsdc,
    ) -> Offer {
        let network_id = match services.chains.get(network).network_id().await {
            Ok(id) => Some(id),
            // The chain logs why, when it asks (at most every few seconds): not every request.
            Err(err) => {
                tracing::debug!(%network, "x402 version 2 is not offered until the chain names itself: {err}");
                None
            }
        };
        let commands = agents::offered(&found.commands, Some(Integration::X402))
            .cloned()
            .collect();
        // A facilitator's fee payer signs Solana payments: the offer must name it.
        let (mut fee_payer, mut facilitator_down) = (None, None);
        if let (Network::Solana, Some(facilitator)) = (network, services.facilitators.of(network)) {
            let named = match &network_id {
                Some(id) => facilitator.fee_payer(id).await,
                None => Err(crate::clients::facilitator::FacilitatorError::Unreachable(
                    "the chain's CAIP-2 id is not known yet".into(),
                )),
            };
            match named {
                Ok(named) => fee_payer = Some(named),
                Err(error) => {
                    tracing::warn!(facilitator = facilitator.label(), "its fee payer is unknown: {error}");
                    facilitator_down = Some(error);
                }
            }
        }
        let upto_settler = upto_settler(services, found, network, &network_id, &pay_to).await;
        Offer {
            fee_payer,
            facilitator_down,
            upto_settler,
            network_id,
            pay_to,
            agent: found.agent.clone(),
            network,
            commands,
            default_price,
            routed: None,
        }
    }

    /// The offer as a command's own address makes it (`name` is one of its commands).
    pub fn at_command(mut self, name: &str) -> Offer {
        self.routed = Some(name.to_string());
        self
    }

    /// What the address asked sells, and its price: the command whose own address it is,
    /// or (`None`) a message at the agent's.
    pub fn sold_at_address(&self) -> (MicroUsdc, Option<&Command>) {
        match self.routed.as_deref().and_then(|name| self.command(name)) {
            Some(command) => (self.price_of(command), Some(command)),
            None => (self.default_price, None),
        }
    }

    pub fn price_of(&self, command: &Command) -> MicroUsdc {
        self.listing().price_of(command)
    }

    pub fn command(&self, name: &str) -> Option<&Command> {
        self.commands.iter().find(|c| c.def.name == name)
    }

    /// The network as each x402 version names it (v2: empty while unknown, so that no
    /// v2 payment matches).
    pub fn network_names(&self) -> NetworkNames<'_> {
        NetworkNames {
            v1: self.network.as_str(),
            v2: self.network_id.as_deref().unwrap_or_default(),
        }
    }

    /// Whether a payment of `version` can be checked here now: a v2 payment names the
    /// chain by its CAIP-2 id, which the chain may not have told us yet.
    pub fn takes(&self, version: Version) -> Result<(), ServiceError> {
        if version == Version::V2 && self.network_id.is_none() {
            let unknown = wallets::WalletError::ChainUnavailable {
                network: self.network,
                detail: "its CAIP-2 id (genesis hash) is not known yet".into(),
            };
            return Err(unknown.into());
        }
        Ok(())
    }

    /// What a settled payment reports to its payer (`success`, `transaction`, `network`,
    /// `payer`), the network named as the payment's version names it; with a receipt for
    /// `resource_url` signed by the agent's wallet (the `offer-receipt` extension) when the
    /// work was `delivered`.
    pub async fn settle_response(
        &self,
        services: &Services,
        settled: &super::Settled,
        version: Version,
        resource_url: &str,
        delivered: bool,
    ) -> SettleResponse {
        let names = self.network_names();
        let receipt = match delivered {
            true => self.signed_receipt(services, settled, resource_url).await,
            false => None,
        };
        SettleResponse {
            success: true,
            error_reason: None,
            transaction: settled.transaction.clone(),
            network: match version {
                Version::V1 => names.v1,
                Version::V2 => names.v2,
            }
            .to_string(),
            payer: settled.payer.clone(),
            amount: settled.by_use.map(|_| settled.amount.0.to_string()),
            extensions: receipt.map(|receipt| {
                Map::from_iter([(
                    offer_receipt::OFFER_RECEIPT.to_string(),
                    offer_receipt::extension(receipt),
                )])
            }),
        }
    }

    /// What a payment whose settlement was sent but not yet confirmed reports (`success:
    /// false`): the transaction to watch, and that the call was not served. Recovery
    /// settles or refunds it later.
    pub fn pending_response(&self, transaction: &str, payer: &str) -> SettleResponse {
        SettleResponse {
            success: false,
            error_reason: Some("settlement_pending".into()),
            transaction: transaction.to_string(),
            network: self.network_names().v2.to_string(),
            payer: payer.to_string(),
            amount: None,
            extensions: None,
        }
    }

    /// The payer's receipt, signed with the key behind `payTo`; `None` (and a warning) when
    /// the key cannot be opened or the chain's CAIP-2 id is not known yet: the payer was
    /// served all the same, and the settlement still names the transaction.
    async fn signed_receipt(&self, services: &Services, settled: &super::Settled, resource_url: &str) -> Option<Value> {
        let network = self.network_id.as_deref()?;
        let key = match wallets::wallet(services, &self.agent.id, self.network).await {
            Ok(wallet) => wallets::open_key(services, &wallet),
            Err(err) => Err(err),
        };
        let key = key
            .inspect_err(|err| tracing::warn!(agent = %self.agent.id, error = %err, "no receipt signed"))
            .ok()?;
        let facts = offer_receipt::ReceiptFacts {
            network,
            resource_url,
            payer: &settled.payer,
            issued_at: u64::try_from(crate::clock::now_ms() / 1000).unwrap_or_default(),
            transaction: &settled.transaction,
        };
        Some(offer_receipt::sign(&key, &facts))
    }

    /// The absolute URL a paid request is posted to: the agent's, or the command's whose
    /// address was asked.
    pub fn resource_url(&self, services: &Services) -> String {
        let agent = format!("{}/x402/{}/{}", services.public_base_url, self.network, self.agent.id);
        match &self.routed {
            Some(command) => format!("{agent}/commands/{command}"),
            None => agent,
        }
    }

    /// The absolute URL of a command's own address.
    pub fn command_url(&self, services: &Services, command: &Command) -> String {
        format!(
            "{}/x402/{}/{}/commands/{}",
            services.public_base_url, self.network, self.agent.id, command.def.name
        )
    }

    /// What is bought: a message (`None`) or one command.
    pub fn description(&self, command: Option<&Command>) -> String {
        let name = &self.agent.def.name;
        match command {
            Some(c) => match &c.def.by_use {
                // What a unit costs is told here: the requirement holds only the maximum.
                Some(rates) => format!(
                    "Run /{} of {name} (by use: {} USDC per {}, at most {} USDC)",
                    c.def.name, rates.per_unit, rates.unit, rates.max
                ),
                None => format!("Run /{} of {name}", c.def.name),
            },
            None => format!("A message to {name}, or one of its commands"),
        }
    }

    /// What a standard client needs to sign for this network, in both versions.
    fn signing_extra(&self, services: &Services) -> Map<String, Value> {
        let eip712 = services.chains.base.usdc_domain();
        describe::signing_extra(self.network, self.fee_payer.as_deref().unwrap_or(&self.pay_to), eip712)
    }

    /// The v1 `accepts` entry for a request that costs `price` (`command` when it names one).
    pub fn requirement_v1(&self, services: &Services, price: MicroUsdc, command: Option<&Command>) -> RequirementsV1 {
        let listing = self.listing();
        let mut extra = listing.v1_extra();
        extra.extend(self.signing_extra(services));
        RequirementsV1 {
            scheme: SCHEME.into(),
            network: self.network.as_str().into(),
            max_amount_required: price.0.to_string(),
            resource: self.resource_url(services),
            description: self.description(command),
            mime_type: "application/json".into(),
            pay_to: self.pay_to.clone(),
            max_timeout_seconds: MAX_TIMEOUT_SECONDS,
            asset: services.chains.get(self.network).usdc_asset().into(),
            output_schema: Some(listing.v1_output_schema()),
            extra,
        }
    }

    /// The v2 requirement for a request that costs `price`. A payer echoes it back, and it
    /// must come back identical: it holds only what pays (what describes the resource is
    /// in `resource` and the `bazaar` extension), so it depends on the price alone.
    pub fn requirement_v2(&self, services: &Services, price: MicroUsdc) -> Option<RequirementsV2> {
        Some(RequirementsV2 {
            scheme: SCHEME.into(),
            network: self.network_id.clone()?,
            amount: price.0.to_string(),
            asset: services.chains.get(self.network).usdc_asset().into(),
            pay_to: self.pay_to.clone(),
            max_timeout_seconds: MAX_TIMEOUT_SECONDS,
            extra: self.signing_extra(services),
        })
    }

    /// How a request is priced by use, when it is: a message (`None`) by its tokens
    /// (`[x402.chat_by_use]`), a command by the units its plugin reports (its `by_use`).
    pub fn rates_by_use(&self, command: Option<&Command>) -> Option<Rates> {
        match command {
            None => self.agent.def.x402.chat_by_use.map(Rates::Chat),
            Some(command) => command.def.by_use.clone().map(Rates::Units),
        }
    }

    /// The v2 `upto` requirement for a request priced by use ([`Offer::rates_by_use`]): its
    /// maximum, and the one address that may settle it, which calls the proxy with the
    /// amount owed: the agent's wallet, or the operator's facilitator's. Offered on Base;
    /// `None` elsewhere.
    pub fn requirement_upto(&self, services: &Services, command: Option<&Command>) -> Option<RequirementsV2> {
        let rates = self.rates_by_use(command)?;
        let settler = self.upto_settler.clone()?;
        let mut extra = self.signing_extra(services);
        extra.insert("facilitatorAddress".into(), Value::String(settler));
        // The rates travel with the maximum: a payment signed before they changed no longer
        // matches, and is refused before anything is held.
        extra.insert("byUse".into(), by_use_terms(&rates));
        Some(RequirementsV2 {
            scheme: crate::x402::upto::SCHEME.into(),
            network: self.network_id.clone()?,
            amount: rates.max().0.to_string(),
            asset: services.chains.get(self.network).usdc_asset().into(),
            pay_to: self.pay_to.clone(),
            max_timeout_seconds: UPTO_MAX_TIMEOUT_SECONDS,
            extra,
        })
    }

    /// The 402 (or price list) in both versions: the v1 body and the v2 header's object
    /// (while the network's id is known). `error` is the v2 reason; the v1 body keeps the
    /// API's wording.
    pub fn payment_required(
        &self,
        services: &Services,
        price: MicroUsdc,
        command: Option<&Command>,
        error: Option<String>,
    ) -> (PaymentRequiredV1, Option<PaymentRequiredV2>) {
        let v1 = PaymentRequiredV1 {
            x402_version: 1,
            error: "X-PAYMENT header is required".into(),
            accepts: vec![self.requirement_v1(services, price, command)],
        };
        let Some(requirement) = self.requirement_v2(services, price) else {
            return (v1, None);
        };
        let upto = self.requirement_upto(services, command);
        let mut extensions = self.extensions(command);
        if upto.is_some() {
            // By use, a payer that has not approved Permit2 may sign a permit for it instead.
            extensions.insert(gas_sponsoring::NAME.into(), gas_sponsoring::declaration());
        }
        let v2 = PaymentRequiredV2 {
            x402_version: 2,
            error: Some(error.unwrap_or_else(|| "PAYMENT-SIGNATURE header is required".into())),
            resource: ResourceInfo {
                url: self.resource_url(services),
                description: Some(self.description(command)),
                mime_type: Some("application/json".into()),
            },
            accepts: std::iter::once(requirement).chain(upto).collect(),
            extensions,
        };
        (v1, Some(v2))
    }

    /// The v2 extensions offered with a request's requirement: the bazaar's description.
    pub fn extensions(&self, command: Option<&Command>) -> Map<String, Value> {
        Map::from_iter([
            ("bazaar".to_string(), self.listing().bazaar(command)),
            (payment_identifier::NAME.to_string(), payment_identifier::declaration()),
        ])
    }

    /// The v2 extensions a tool call's 402 offers over MCP: the tool's own `bazaar`, and
    /// `payment-identifier`, as on HTTP.
    pub fn mcp_extensions(
        &self,
        tool: &str,
        description: &str,
        input_schema: &Value,
        format: &str,
    ) -> Map<String, Value> {
        Map::from_iter([
            (
                "bazaar".to_string(),
                self.listing().mcp_bazaar(tool, description, input_schema, format),
            ),
            (payment_identifier::NAME.to_string(), payment_identifier::declaration()),
        ])
    }

    /// The agent for sale here, as the x402 descriptions read it.
    pub fn listing(&self) -> Listing<'_> {
        Listing {
            agent: &self.agent,
            network: self.network,
            commands: &self.commands,
            default_price: self.default_price,
        }
    }
}
