//! An agent paying for the x402 services its commands call, within what its owner allows
//! (`[payments]`: docs/spending.md). The plugin runtime
//! shows this payer every `402` a run's request meets (`plugins/paying.rs`); it decides,
//! records the payment (checking the daily maximum in the same write, across hosts), signs
//! it from the agent's wallet, and records how the payee answered.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::ServiceError;
use crate::chains::{Chains, WalletKey};
use crate::domain::Network;
use crate::domain::spending::SpendingPolicy;
use crate::money::MicroUsdc;
use crate::outbound::{OutboundError, OutboundRequest, OutboundResponse};
use crate::plugins::{PayDecision, Payer, PayingRun};
use crate::secrets::MasterKey;
use crate::store::{NewSpend, SpendState, Store, WalletRecord};
use crate::x402::payer::{self, EvmToken, Offered};
use crate::x402::wire::Version;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Pays from agents' wallets: the host's one [`Payer`].
pub struct AgentPayer {
    store: Store,
    secrets: Arc<MasterKey>,
    chains: Arc<Chains>,
}

impl AgentPayer {
    pub fn new(store: Store, secrets: Arc<MasterKey>, chains: Arc<Chains>) -> AgentPayer {
        AgentPayer { store, secrets, chains }
    }
}

/// What the payer decided about an x402 offer, wherever it came from.
pub enum Decision {
    /// Not this agent's to pay: the caller gets the offer as it came.
    PassOn,
    /// Not allowed (or not possible): nothing was paid, and this says why.
    Refused(String),
    /// Signed: send `envelope` (`x402/payment` in MCP, base64 in a header over HTTP).
    Pay(Signed),
}

/// A payment recorded and signed, not yet sent.
pub struct Signed {
    pub id: String,
    pub version: Version,
    pub envelope: serde_json::Value,
}

impl Payer for AgentPayer {
    fn pay<'a>(
        &'a self,
        run: &'a PayingRun,
        request: &'a OutboundRequest,
        answer: &'a OutboundResponse,
    ) -> BoxFuture<'a, PayDecision> {
        Box::pin(async move {
            let Some(offers) = payer::offers_in(&answer.headers, &answer.body) else {
                return PayDecision::PassOn;
            };
            match self.consider(run, &request.url, offers).await {
                Decision::PassOn => PayDecision::PassOn,
                Decision::Refused(reason) => PayDecision::Refused(reason),
                Decision::Pay(signed) => {
                    let (name, value) = payer::header(signed.version, &signed.envelope);
                    PayDecision::Pay {
                        payment_id: signed.id,
                        header: (name.to_string(), value),
                    }
                }
            }
        })
    }

    fn paid<'a>(
        &'a self,
        payment_id: &'a str,
        answer: Result<&'a OutboundResponse, &'a OutboundError>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let (state, transaction, error) = outcome(answer);
            self.ended(payment_id, state, transaction, error).await;
        })
    }
}

/// How a payee's answer to the paid request leaves the payment.
fn outcome(answer: Result<&OutboundResponse, &OutboundError>) -> (SpendState, Option<String>, Option<String>) {
    match answer {
        Ok(response) if (200..300).contains(&response.status) => match payer::settlement_in(&response.headers) {
            Some(settled) if !settled.success => (SpendState::Unknown, settled.transaction, settled.error),
            Some(settled) => (SpendState::Settled, settled.transaction, None),
            // Served without saying how it settled: paid, as far as the payee tells.
            None => (SpendState::Settled, None, None),
        },
        Ok(response) if response.status == 402 => {
            let why = payer::refusal_in(&response.headers, &response.body)
                .unwrap_or_else(|| "the payee answered 402 again".into());
            (SpendState::Refused, None, Some(why))
        }
        Ok(response) => (
            SpendState::Unknown,
            None,
            Some(format!("the payee answered HTTP {}", response.status)),
        ),
        Err(err) => (SpendState::Unknown, None, Some(err.to_string())),
    }
}

/// An offer this agent could pay: on a network it pays on and holds a wallet on, in the
/// chain's USDC, by the `exact` scheme.
struct Payable {
    offer: Offered,
    network: Network,
    wallet: WalletRecord,
}

impl AgentPayer {
    /// Whether `run` pays one of `offers`, made for what it asked at `url`; when it does, the
    /// payment is recorded (within the day's maximum) and signed.
    pub async fn consider(&self, run: &PayingRun, url: &str, offers: Vec<Offered>) -> Decision {
        match self.decide(run, url, offers).await {
            Ok(decision) => decision,
            // A node's or the database's own words stay in the log.
            Err(err) => {
                tracing::warn!(
                    agent = run.agent_id,
                    command = run.command,
                    "a payment could not be made: {err}"
                );
                Decision::Refused(format!("payment not made: {}", err.public_text()))
            }
        }
    }

    /// How a payment ended, once its payee answered (or did not).
    pub async fn ended(&self, id: &str, state: SpendState, transaction: Option<String>, error: Option<String>) {
        if let Err(err) = self.store.finish_spend(id, state, transaction, error).await {
            // The row stays `sent`, and counts against the day as any signed payment does.
            tracing::error!(payment = id, "could not record how a payment ended: {err}");
        }
    }

    async fn decide(&self, run: &PayingRun, url: &str, offers: Vec<Offered>) -> Result<Decision, ServiceError> {
        let Some(agent) = self.store.agent(&run.agent_id).await? else {
            return Ok(Decision::PassOn);
        };
        let covered = |p: &SpendingPolicy| match &run.mcp_server {
            Some(server) => p.covers_server(server),
            None => p.covers(&run.command),
        };
        let Some(policy) = agent.def.payments.filter(|p| covered(p)) else {
            return Ok(Decision::PassOn);
        };
        let resource = without_query(url);
        let origin = crate::outbound::origin_of(url);
        let mut payable = self.payable(&policy, &run.agent_id, offers.clone()).await?;
        if payable.is_empty() {
            return Ok(Decision::Refused(format!(
                "payment not made: {resource} asks for {}, and this agent pays USDC by the 'exact' scheme on {} only",
                asked(&offers),
                networks_text(&policy.networks)
            )));
        }
        payable.sort_by_key(|p| p.offer.amount);
        let Some(chosen) = payable.iter().position(|p| {
            p.offer.amount <= policy.max_per_payment && policy.allows_payee(&p.offer.pay_to, origin.as_deref())
        }) else {
            let cheapest = &payable[0].offer;
            let reason = if cheapest.amount > policy.max_per_payment {
                format!(
                    "{} USDC is more than this agent's maximum per payment ({} USDC)",
                    cheapest.amount, policy.max_per_payment
                )
            } else {
                format!(
                    "neither {} nor the address it pays ({}) is among this agent's payees",
                    origin.clone().unwrap_or_default(),
                    cheapest.pay_to
                )
            };
            return Ok(Decision::Refused(format!("payment not made for {resource}: {reason}")));
        };
        let Payable { offer, network, wallet } = payable.swap_remove(chosen);

        let chain = self.chains.get(network);
        let balances = chain
            .balances(&wallet.address)
            .await
            .map_err(|e| super::wallets::chain_error(network, e))?;
        if balances.usdc < offer.amount {
            return Ok(Decision::Refused(format!(
                "payment not made for {resource}: it costs {} USDC and the agent's {network} wallet holds {} USDC",
                offer.amount, balances.usdc
            )));
        }

        let id = format!("spend_{}", crate::random::hex_token(12));
        let new = NewSpend {
            id: id.clone(),
            account_id: run.account_id.clone(),
            agent_id: run.agent_id.clone(),
            command: run.command.clone(),
            network,
            x402_version: offer.version.number(),
            amount: offer.amount,
            pay_to: offer.pay_to.clone(),
            resource: resource.clone(),
            payer: wallet.address.clone(),
        };
        if let Err(spent) = self.store.reserve_spend(new, policy.max_per_day).await? {
            return Ok(Decision::Refused(format!(
                "payment not made for {resource}: {} USDC more would pass this agent's maximum of {} USDC a day ({spent} USDC paid in the last 24 hours)",
                offer.amount, policy.max_per_day
            )));
        }
        crate::faults::crash_point("spending:after_record");
        match self.sign(&wallet, network, &offer).await {
            Ok(payload) => {
                self.store.spend_sent(&id).await?;
                tracing::info!(payment = id, agent = run.agent_id, %network, amount = %offer.amount, pay_to = offer.pay_to, "paying for {resource}");
                Ok(Decision::Pay(Signed {
                    id,
                    version: offer.version,
                    envelope: offer.envelope(payload),
                }))
            }
            Err(err) => {
                let reason = err.public_text();
                self.store
                    .finish_spend(&id, SpendState::Void, None, Some(reason.clone()))
                    .await?;
                Err(err)
            }
        }
    }

    /// The offers the agent could pay, by what its owner allows and the wallets it holds.
    async fn payable(
        &self,
        policy: &SpendingPolicy,
        agent_id: &str,
        offers: Vec<Offered>,
    ) -> Result<Vec<Payable>, ServiceError> {
        let wallets = self.store.wallets_of(agent_id).await?;
        let mut payable = Vec::new();
        for offer in offers.into_iter().filter(Offered::is_exact) {
            let Some(network) = self.network_of(&offer).await else {
                continue;
            };
            if !policy.networks.contains(&network) || !self.is_usdc(network, &offer.asset) {
                continue;
            }
            if let Some(wallet) = wallets.iter().find(|w| w.network == network) {
                payable.push(Payable {
                    offer,
                    network,
                    wallet: wallet.clone(),
                });
            }
        }
        Ok(payable)
    }

    /// The configured chain an offer names: `base` / `solana` in version 1, the chain's
    /// CAIP-2 id in version 2.
    async fn network_of(&self, offer: &Offered) -> Option<Network> {
        for network in [Network::Base, Network::Solana] {
            let named = match offer.version {
                Version::V1 => offer.network == network.as_str(),
                Version::V2 => self
                    .chains
                    .get(network)
                    .network_id()
                    .await
                    .is_ok_and(|id| id == offer.network),
            };
            if named {
                return Some(network);
            }
        }
        None
    }

    fn is_usdc(&self, network: Network, asset: &str) -> bool {
        let ours = self.chains.get(network).usdc_asset();
        match network {
            Network::Base => ours.eq_ignore_ascii_case(asset),
            Network::Solana => ours == asset,
        }
    }

    /// The payment's `payload`, signed with the agent's key, opened for this alone.
    async fn sign(
        &self,
        wallet: &WalletRecord,
        network: Network,
        offer: &Offered,
    ) -> Result<serde_json::Value, ServiceError> {
        let key = super::wallets::open_key_with(&self.secrets, wallet)?;
        let failed = |why: String| ServiceError::Validation(format!("the payment could not be signed: {why}"));
        match (&key, network) {
            (WalletKey::Base(signer), Network::Base) => {
                let base = &self.chains.base;
                let (name, version) = base.usdc_domain();
                let token = EvmToken {
                    chain_id: base.chain_id(),
                    usdc: base.usdc(),
                    name: name.to_string(),
                    version: version.to_string(),
                };
                let now = (crate::clock::now_ms() / 1000) as u64;
                payer::evm_payload(signer, offer, &token, now).map_err(failed)
            }
            (WalletKey::Solana(keypair), Network::Solana) => {
                let solana = &self.chains.solana;
                let (blockhash, _) = solana
                    .latest_blockhash()
                    .await
                    .map_err(|e| super::wallets::chain_error(network, e))?;
                payer::svm_payload(keypair, offer, &solana.mint(), blockhash).map_err(failed)
            }
            _ => Err(failed(format!(
                "the agent's {network} wallet holds another chain's key"
            ))),
        }
    }
}

/// The request's URL without its query or user name and password, which may carry a key.
fn without_query(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut url) => {
            url.set_query(None);
            url.set_fragment(None);
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.to_string()
        }
        Err(_) => url.chars().take(200).collect(),
    }
}

/// What the offers ask, in short: `0.05 USDC (exact) on eip155:8453`, ….
fn asked(offers: &[Offered]) -> String {
    if offers.is_empty() {
        return "a payment it offers no way to make".into();
    }
    offers
        .iter()
        .take(4)
        .map(|o| format!("{} units ({}) on {}", o.amount.0, o.scheme, o.network))
        .collect::<Vec<_>>()
        .join(", ")
}

fn networks_text(networks: &[Network]) -> String {
    networks.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(" and ")
}

/// What the agent paid, newest first, and what it may still pay today.
pub struct Spending {
    pub policy: Option<SpendingPolicy>,
    pub spent_today: MicroUsdc,
    pub payments: Vec<crate::store::SpendRecord>,
}

/// The agent's payments and its owner's limits.
pub async fn of_agent(store: &Store, agent: &crate::domain::Agent, limit: u32) -> Result<Spending, ServiceError> {
    Ok(Spending {
        policy: agent.def.payments.as_deref().cloned(),
        spent_today: store.spent_today(&agent.id).await?,
        payments: store.spending_of(&agent.id, limit).await?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16, headers: Vec<(String, String)>, body: &str) -> OutboundResponse {
        OutboundResponse {
            method: "GET".into(),
            url: "https://api.example.com/paid".into(),
            status,
            headers,
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn the_payees_answer_decides_how_a_payment_is_recorded() {
        use base64::Engine;
        let b64 = |v: serde_json::Value| base64::engine::general_purpose::STANDARD.encode(v.to_string());
        let settled = vec![(
            "x-payment-response".to_string(),
            b64(serde_json::json!({"success": true, "transaction": "0xabc", "network": "base", "payer": "0x1"})),
        )];
        assert_eq!(
            outcome(Ok(&response(200, settled, "ok"))),
            (SpendState::Settled, Some("0xabc".into()), None)
        );
        assert_eq!(outcome(Ok(&response(200, vec![], "ok"))).0, SpendState::Settled);
        let refused = outcome(Ok(&response(
            402,
            vec![],
            r#"{"x402Version":1,"error":"payment_expired","accepts":[]}"#,
        )));
        assert_eq!(refused, (SpendState::Refused, None, Some("payment_expired".into())));
        let (state, _, error) = outcome(Ok(&response(500, vec![], "")));
        assert_eq!(
            (state, error.as_deref()),
            (SpendState::Unknown, Some("the payee answered HTTP 500"))
        );
        assert_eq!(outcome(Err(&OutboundError::Timeout)).0, SpendState::Unknown);
    }

    #[test]
    fn a_resource_is_recorded_without_its_query() {
        assert_eq!(
            without_query("https://api.example.com/v1/q?key=s3cret#x"),
            "https://api.example.com/v1/q"
        );
        assert_eq!(
            without_query("https://u:p@api.example.com/x?k=1"),
            "https://api.example.com/x"
        );
    }
}
