//! x402 offers: what a paid call to an agent costs on a network, and the payment
//! requirement a standard x402 client reads to pay it.
//!
//! The agent's own wallet on that network is `payTo`, and it is also the fee payer of
//! Solana payments and the relayer of Base ones: the service holds its key, so no
//! separate service wallet needs funding, and the fees come out of what the agent earns.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{ServiceError, Services, agents, wallets};
use crate::chains::WalletKey;
use crate::chains::{self, ChainError, Landing};
use crate::domain::{Agent, Command, Integration, Network, ParamType};
use crate::money::MicroUsdc;
use crate::store::{NewPayment, PaymentRecord, TransferKind, TransferState};
use crate::x402::{evm, svm};

/// How long a request waits for its payment's settlement.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);

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
    ServiceError::Api {
        status: 404,
        code: "agent_not_found",
        message: format!("No agent '{id_or_username}' takes x402 payments here"),
        retry_after: None,
    }
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
        return Err(ServiceError::Api {
            status: 400,
            code: "unsupported_network",
            message: format!("Agent '{id_or_username}' does not take payments on {network}"),
            retry_after: None,
        });
    }
    let wallet = super::wallets::wallet(services, &agent.id, network).await?;
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

/// A payment refused before anything was taken: 402 with its own code.
fn refused(err: crate::x402::PaymentError) -> ServiceError {
    let status = if err.code == "payment_already_used" { 409 } else { 402 };
    ServiceError::Api {
        status,
        code: err.code,
        message: err.message,
        retry_after: None,
    }
}

fn already_used() -> ServiceError {
    refused(crate::x402::PaymentError::new(
        "payment_already_used",
        "This payment has already been used",
    ))
}

fn settlement_error(network: Network, err: ChainError) -> ServiceError {
    match err {
        ChainError::Refused(message) => ServiceError::Api {
            status: 402,
            code: "settlement_failed",
            message: format!("The payment could not be settled: {message}"),
            retry_after: None,
        },
        ChainError::Unavailable(message) => ServiceError::Api {
            status: 500,
            code: "internal_error",
            message: format!("The {network} RPC node failed while settling: {message}"),
            retry_after: None,
        },
    }
}

/// A payer whose signature checked out counts one payment against its limit here, before
/// any chain call; past the limit: 429.
fn within_payer_limit(services: &Services, network: Network, payer: &str) -> Result<(), ServiceError> {
    let decision = services
        .x402_limiter
        .payer(network.as_str(), payer, crate::clock::now_ms());
    if decision.allowed {
        Ok(())
    } else {
        Err(ServiceError::RateLimited(decision))
    }
}

/// The payer's balance must cover the price, or nothing is attempted.
fn covers(balance: MicroUsdc, price: MicroUsdc) -> Result<(), ServiceError> {
    if balance < price {
        return Err(refused(crate::x402::PaymentError::new(
            "insufficient_funds",
            format!("The payer holds {balance} USDC; the payment needs {price}"),
        )));
    }
    Ok(())
}

/// Records a verified payment before settlement; its identity can be recorded once, ever.
async fn record(
    services: &Services,
    offer: &Offer,
    identity: String,
    payer: &str,
    purchase: &Purchase<'_>,
) -> Result<String, ServiceError> {
    let payment_id = format!("pay_{}", crate::random::hex_token(12));
    services
        .store
        .insert_payment(NewPayment {
            id: payment_id.clone(),
            identity,
            agent_id: offer.agent.id.clone(),
            network: offer.network,
            payer: payer.to_string(),
            pay_to: offer.pay_to.clone(),
            amount: purchase.price,
            command: purchase.command.map(str::to_string),
            request: purchase.request.to_string(),
        })
        .await
        .map_err(|e| match ServiceError::from(e) {
            ServiceError::Conflict(_) => already_used(),
            other => other,
        })?;
    Ok(payment_id)
}

/// A payment that is on chain: the work it paid for may now be done.
#[derive(Debug, Clone)]
pub struct Settled {
    pub payment_id: String,
    pub payer: String,
    pub pay_to: String,
    pub amount: MicroUsdc,
    pub transaction: String,
    pub settled_at: i64,
}

/// What was asked, recorded with the payment.
pub struct Purchase<'a> {
    pub price: MicroUsdc,
    pub command: Option<&'a str>,
    pub request: &'a Value,
}

/// Verifies an `X-PAYMENT` header for `purchase`, records it (once, ever), settles it on
/// chain and waits for the settlement. Nothing is served before this returns.
pub async fn settle(
    services: &Services,
    offer: &Offer,
    header: &str,
    purchase: Purchase<'_>,
) -> Result<Settled, ServiceError> {
    let decoded = crate::x402::decode_header(header, offer.network.as_str()).map_err(refused)?;
    match offer.network {
        Network::Base => settle_base(services, offer, &decoded.payload, purchase).await,
        Network::Solana => settle_solana(services, offer, &decoded.payload, purchase).await,
    }
}

/// Highest compute-unit price a Solana payment may set: it is the fee payer's money.
const MAX_COMPUTE_UNIT_PRICE: u64 = 5_000_000;

async fn settle_solana(
    services: &Services,
    offer: &Offer,
    payload: &Value,
    purchase: Purchase<'_>,
) -> Result<Settled, ServiceError> {
    use base64::Engine;
    let solana = &services.chains.solana;
    let chain_error = |e| settlement_error(Network::Solana, e);
    let pay_to = crate::chains::solana::parse_address(&offer.pay_to).map_err(ServiceError::Validation)?;
    let expected = svm::Expected {
        pay_to,
        mint: solana.mint(),
        amount: purchase.price,
        fee_payer: Some(pay_to),
        max_compute_unit_price: MAX_COMPUTE_UNIT_PRICE,
    };
    let verified = svm::verify(svm::decode(payload).map_err(refused)?, &expected).map_err(refused)?;
    within_payer_limit(services, Network::Solana, &verified.payer.to_string())?;
    let mut tx = verified.transaction;
    let wallet = wallets::wallet(services, &offer.agent.id, Network::Solana).await?;
    if verified.needs_fee_payer_signature {
        let WalletKey::Solana(keypair) = wallets::open_key(services, &wallet)? else {
            return Err(ServiceError::Validation(
                "the agent's Solana key is not an ed25519 key".into(),
            ));
        };
        tx.signatures[0] = solana_signer::Signer::sign_message(&keypair, &tx.message.serialize());
    }
    // ed25519 is deterministic: a message always completes to the same signature.
    let signature = tx.signatures[0].to_string();
    let identity = format!("solana:{signature}");
    if services.store.payment_identity_used(&identity).await? {
        return Err(already_used());
    }
    if !solana
        .blockhash_is_valid(tx.message.recent_blockhash())
        .await
        .map_err(chain_error)?
    {
        return Err(refused(crate::x402::PaymentError::new(
            "payment_expired",
            "the transaction's blockhash has expired; sign a new one",
        )));
    }
    let (balance, _) = solana.usdc_of(&verified.payer).await.map_err(chain_error)?;
    covers(balance, purchase.price)?;
    let wire = bincode::serialize(&tx).map_err(|e| ServiceError::Validation(e.to_string()))?;
    let raw = base64::engine::general_purpose::STANDARD.encode(wire);
    // Signatures were checked locally above; the simulation checks them again, and the rest.
    if let Some(reason) = solana.simulate(&raw).await.map_err(chain_error)? {
        return Err(chain_error(ChainError::Refused(format!(
            "the transaction would fail: {reason}"
        ))));
    }

    let payer = verified.payer.to_string();
    let payment_id = record(services, offer, identity, &payer, &purchase).await?;
    services
        .store
        .set_payment_transaction(&payment_id, &signature, &raw)
        .await?;
    if let Err(err) = solana.send_raw(&raw).await {
        if let ChainError::Refused(reason) = &err {
            services
                .store
                .advance_payment(&payment_id, &["verified"], "failed", Some(reason.clone()))
                .await?;
        }
        return Err(chain_error(err));
    }
    let sent = chains::SignedTx {
        id: signature.clone(),
        raw,
        valid_until: None,
    };
    finish_settlement(services, Network::Solana, &payment_id, &sent).await?;
    Ok(Settled {
        payment_id,
        payer,
        pay_to: offer.pay_to.clone(),
        amount: purchase.price,
        transaction: signature,
        settled_at: crate::clock::now_ms(),
    })
}

/// Waits for a sent settlement; marks the payment settled, or failed (nothing was taken).
async fn finish_settlement(
    services: &Services,
    network: Network,
    payment_id: &str,
    sent: &chains::SignedTx,
) -> Result<(), ServiceError> {
    let chain = services.chains.get(network);
    let chain_error = |e| settlement_error(network, e);
    match chains::wait_for_landing(chain, sent, SETTLE_TIMEOUT)
        .await
        .map_err(chain_error)?
    {
        Landing::Confirmed => {
            services
                .store
                .advance_payment(payment_id, &["verified"], "settled", None)
                .await?;
            Ok(())
        }
        Landing::Failed(reason) => {
            services
                .store
                .advance_payment(payment_id, &["verified"], "failed", Some(reason.clone()))
                .await?;
            Err(chain_error(ChainError::Refused(reason)))
        }
        Landing::Pending => Err(ServiceError::Api {
            status: 500,
            code: "internal_error",
            message: format!(
                "The settlement {} was sent but not confirmed in time; the payment is recorded and will be resolved",
                sent.id
            ),
            retry_after: None,
        }),
    }
}

async fn settle_base(
    services: &Services,
    offer: &Offer,
    payload: &Value,
    purchase: Purchase<'_>,
) -> Result<Settled, ServiceError> {
    let base = &services.chains.base;
    let auth = evm::decode(payload).map_err(refused)?;
    let expected = evm::Expected {
        pay_to: crate::chains::base::parse_address(&offer.pay_to).map_err(ServiceError::Validation)?,
        amount: purchase.price,
        usdc: base.usdc(),
        chain_id: base.chain_id(),
        domain_name: services.settings.base_usdc_eip712_name.clone(),
        domain_version: services.settings.base_usdc_eip712_version.clone(),
    };
    auth.verify(&expected, crate::clock::now_ms() as u64 / 1000)
        .map_err(refused)?;
    within_payer_limit(services, Network::Base, &auth.from.to_string().to_lowercase())?;
    let identity = format!("base:{}:{}", auth.from.to_string().to_lowercase(), auth.nonce);
    if services.store.payment_identity_used(&identity).await? {
        return Err(already_used());
    }
    let chain_error = |e| settlement_error(Network::Base, e);
    if base
        .authorization_used(auth.from, auth.nonce)
        .await
        .map_err(chain_error)?
    {
        return Err(already_used());
    }
    let balance = base.usdc_of(auth.from).await.map_err(chain_error)?;
    covers(balance, purchase.price)?;

    let payer = auth.from.to_checksum(None);
    let payment_id = record(services, offer, identity, &payer, &purchase).await?;

    // The agent's wallet relays: its transactions go out one at a time.
    let wallet = wallets::wallet(services, &offer.agent.id, Network::Base).await?;
    let key = wallets::open_key(services, &wallet)?;
    let lock = services.wallet_locks.of(&offer.agent.id, Network::Base);
    let _one_at_a_time = lock.lock().await;
    let fail = |reason: String| {
        services
            .store
            .advance_payment(&payment_id, &["verified"], "failed", Some(reason))
    };
    let signed = match base.sign_settlement(&key, &auth).await {
        Ok(signed) => signed,
        Err(err) => {
            fail(err.to_string()).await?;
            return Err(chain_error(err));
        }
    };
    services
        .store
        .set_payment_transaction(&payment_id, &signed.id, &signed.raw)
        .await?;
    if let Err(err) = base.send_raw(&signed.raw).await {
        if let ChainError::Refused(reason) = &err {
            fail(reason.clone()).await?;
        }
        return Err(chain_error(err));
    }
    finish_settlement(services, Network::Base, &payment_id, &signed).await?;
    Ok(Settled {
        payment_id,
        payer,
        pay_to: offer.pay_to.clone(),
        amount: purchase.price,
        transaction: signed.id,
        settled_at: crate::clock::now_ms(),
    })
}

impl Settled {
    /// The spec's receipt.
    pub fn receipt(&self) -> Value {
        json!({
            "amountPaidMicroUsdc": self.amount.0,
            "amountPaidUsdc": self.amount.to_json_number(),
            "transactionSignature": self.transaction,
            "timestamp": crate::clock::iso(self.settled_at),
            "payer": self.payer,
            "payTo": self.pay_to,
        })
    }

    /// The paid work was done and answered.
    pub async fn served(&self, services: &Services) -> Result<(), ServiceError> {
        services
            .store
            .advance_payment(&self.payment_id, &["settled"], "served", None)
            .await?;
        Ok(())
    }

    /// The paid work failed after settlement: the payer gets the amount back from the
    /// agent's wallet. Returns the refund's transaction signature, if it went out.
    pub async fn refund(&self, services: &Services, agent_id: &str, network: Network, why: &str) -> Option<String> {
        let refund = Refund {
            payment_id: &self.payment_id,
            agent_id,
            network,
            payer: &self.payer,
            amount: self.amount,
        };
        refund.start(services, why).await
    }

    /// A 202: the job that does the paid work. If it already failed, refund now (the
    /// job's own end may have come before this link existed).
    pub async fn attach_job(&self, services: &Services, agent_id: &str, network: Network, job_id: &str) {
        if let Err(err) = services.store.set_payment_job(&self.payment_id, job_id).await {
            tracing::error!(payment = self.payment_id, "could not link the job: {err}");
            return;
        }
        if let Ok(Some(job)) = services.store.job(job_id).await
            && job.state == crate::store::JobState::Failed
        {
            let why = job.error.unwrap_or_else(|| "the job failed".into());
            self.refund(services, agent_id, network, &why).await;
        }
    }
}

/// Joins a refund's reason and why it did not go out (yet) in the payment's error.
const REFUND_NOT_OUT: &str = "; the refund did not go out yet: ";

/// Paying a payer back, at most once: the payment moves to `refunding`, naming the
/// refund's transfer, before that transfer is written.
struct Refund<'a> {
    payment_id: &'a str,
    agent_id: &'a str,
    network: Network,
    payer: &'a str,
    amount: MicroUsdc,
}

impl<'a> Refund<'a> {
    fn of(payment: &'a PaymentRecord, network: Network) -> Refund<'a> {
        Refund {
            payment_id: &payment.id,
            agent_id: &payment.agent_id,
            network,
            payer: &payment.payer,
            amount: payment.amount,
        }
    }

    /// Starts the refund unless one already started; its signature once it landed.
    async fn start(&self, services: &Services, why: &str) -> Option<String> {
        let transfer_id = wallets::new_transfer_id();
        match services.store.start_refund(self.payment_id, &transfer_id, why).await {
            Ok(true) => self.pay(services, transfer_id, why).await,
            Ok(false) => None, // refunded or being refunded already, or never settled
            Err(err) => {
                tracing::error!(payment = self.payment_id, "could not start the refund: {err}");
                None
            }
        }
    }

    /// Sends the refund as transfer `transfer_id`. One that does not go out leaves the
    /// payment `refunding`, with why, for the next start to finish or retry.
    async fn pay(&self, services: &Services, transfer_id: String, why: &str) -> Option<String> {
        let order = wallets::TransferOrder {
            id: Some(transfer_id),
            agent_id: self.agent_id.to_string(),
            network: self.network,
            kind: TransferKind::Refund,
            recipient: self.payer.to_string(),
            amount: self.amount,
            memo: Some(format!("refund of {}: {why}", self.payment_id)),
        };
        match wallets::transfer(services, order).await {
            Ok(record) => {
                self.refunded(services).await;
                record.signature
            }
            Err(err) => {
                tracing::error!(payment = self.payment_id, "refund failed: {err}");
                let note = format!("{why}{REFUND_NOT_OUT}{err}");
                let _ = services.store.note_payment_error(self.payment_id, &note).await;
                None
            }
        }
    }

    async fn refunded(&self, services: &Services) {
        if let Err(err) = services
            .store
            .advance_payment(self.payment_id, &["refunding"], "refunded", None)
            .await
        {
            tracing::error!(payment = self.payment_id, "could not mark the refund: {err}");
        }
    }
}

/// Called when a job ends `failed`: a paid job's payer is refunded.
pub async fn refund_failed_job(services: &Services, job_id: &str, why: &str) {
    match services.store.payment_by_job(job_id).await {
        Ok(Some(payment)) => {
            let Some(network) = Network::parse(&payment.network) else {
                return;
            };
            Refund::of(&payment, network).start(services, why).await;
        }
        Ok(None) => {}
        Err(err) => tracing::error!(job = job_id, "could not look up the job's payment: {err}"),
    }
}

/// After a restart: each payment a previous run left unfinished is taken to its end, in
/// the background (a settlement may take a minute to confirm). Returns how many.
/// - `verified`: its settlement is looked up on chain, and sent again when the chain has
///   not seen it (the payer signed it; the record makes it once only). Landed: `settled`,
///   and on to the next rule; failed or never signed: `failed`, nothing was taken.
/// - `settled`: the paid answer never reached the payer, so the payer is refunded.
/// - `refunding`: the refund's transfer is looked up: confirmed → `refunded`; failed or
///   never written → sent again; pending → awaited (the transfer reconciliation re-sends it).
pub async fn recover(services: &Services, started_at: i64) -> Result<usize, ServiceError> {
    let unfinished = services.store.unfinished_payments(started_at).await?;
    for payment in &unfinished {
        let (services, payment) = (services.clone(), payment.clone());
        tokio::spawn(async move {
            if let Err(err) = resume(&services, payment.clone()).await {
                tracing::warn!(payment = payment.id, "could not finish the payment yet: {err}");
            }
        });
    }
    Ok(unfinished.len())
}

async fn resume(services: &Services, payment: PaymentRecord) -> Result<(), ServiceError> {
    let Some(network) = Network::parse(&payment.network) else {
        return Ok(());
    };
    let mut state = payment.state.as_str();
    if state == "verified" {
        if !resume_settlement(services, &payment, network).await? {
            return Ok(());
        }
        state = "settled";
    }
    let refund = Refund::of(&payment, network);
    match state {
        "settled" => {
            refund
                .start(services, "the service stopped before answering this paid request")
                .await;
        }
        "refunding" => resume_refund(services, &payment, &refund).await?,
        _ => {}
    }
    Ok(())
}

/// A `verified` payment: true once settled; false when it failed and nothing was taken.
async fn resume_settlement(
    services: &Services,
    payment: &PaymentRecord,
    network: Network,
) -> Result<bool, ServiceError> {
    let (Some(signature), Some(raw)) = (&payment.transaction_signature, &payment.raw_tx) else {
        services
            .store
            .advance_payment(
                &payment.id,
                &["verified"],
                "failed",
                Some("the service stopped before sending the settlement; nothing was taken".into()),
            )
            .await?;
        return Ok(false);
    };
    let sent = chains::SignedTx {
        id: signature.clone(),
        raw: raw.clone(),
        valid_until: None,
    };
    let chain = services.chains.get(network);
    let landing = chain.landing(&sent).await.map_err(|e| settlement_error(network, e))?;
    if landing == Landing::Pending
        && let Err(ChainError::Refused(reason)) = chain.submit(&sent).await
    {
        services
            .store
            .advance_payment(&payment.id, &["verified"], "failed", Some(reason))
            .await?;
        return Ok(false);
    }
    match finish_settlement(services, network, &payment.id, &sent).await {
        Ok(()) => Ok(true),
        // Refused on chain: finish_settlement marked it failed.
        Err(ServiceError::Api { status: 402, .. }) => Ok(false),
        Err(other) => Err(other),
    }
}

async fn resume_refund(services: &Services, payment: &PaymentRecord, refund: &Refund<'_>) -> Result<(), ServiceError> {
    // The original reason, without the notes of attempts that did not go out.
    let noted = payment.error.as_deref().unwrap_or("refund");
    let why = noted.split(REFUND_NOT_OUT).next().unwrap_or(noted).to_string();
    let previous = payment.refund_transfer_id.as_deref();
    let mut transfer = match previous {
        Some(id) => services.store.transfer(id).await?,
        None => None,
    };
    // A pending transfer is the reconciliation's to finish; wait for its end.
    let deadline = tokio::time::Instant::now() + SETTLE_TIMEOUT * 3;
    while let Some(record) = &transfer
        && record.state == TransferState::Pending
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_secs(1)).await;
        transfer = services.store.transfer(&record.id).await?;
    }
    match transfer.map(|t| t.state) {
        Some(TransferState::Confirmed) => refund.refunded(services).await,
        Some(TransferState::Pending) => {} // still undecided: the next start looks again
        Some(TransferState::Failed) | None => {
            let transfer_id = wallets::new_transfer_id();
            if services.store.retry_refund(&payment.id, previous, &transfer_id).await? {
                refund.pay(services, transfer_id, &why).await;
            }
        }
    }
    Ok(())
}
