//! x402 payments: what a paid call costs (`offer`), the one pipeline that takes a payment
//! on any network (verify → limit → record once → settle → serve or refund), refunds, and
//! recovery of payments nobody is working on. Each network's rules live behind
//! [`scheme::Scheme`].

mod base;
pub mod breaker;
pub mod catalog;
mod facilitated;
pub mod guard;
mod identify;
mod offer;
pub mod recovery;
pub mod refund;
mod retry;
pub mod scheme;
mod settled;
mod solana;
pub mod upto;
mod upto_facilitated;

use std::time::Duration;

use serde_json::{Map, Value};

pub use guard::PaymentLocks;
pub use identify::{Known, identify};
pub use offer::{MAX_TIMEOUT_SECONDS, Offer, offer, offers_now};
pub use refund::{payers_fault, refund_failed_job};

#[cfg(test)]
pub(super) mod fake;
#[cfg(test)]
mod tests;

use super::{ServiceError, Services, wallets};
use crate::chains::{self, ChainError, Landing, SignedTx};
use crate::domain::Network;
use crate::money::MicroUsdc;
use crate::store::{NewPayment, SettledBy};
use crate::x402::wire::{self, Payment};
use crate::x402::{PaymentError, payment_identifier};
use retry::MetBy;
use scheme::{Attempt, Lookup, Scheme, Terms};

/// How far back a settlement by someone else's transaction is looked for, before the
/// payment was presented.
const ELSEWHERE_LOOKBACK_SECS: u64 = 3_600;

/// What the x402 side refuses or cannot finish; the route words it in its envelope.
#[derive(Debug, thiserror::Error)]
pub enum X402Error {
    #[error("no agent '{0}' takes x402 payments here")]
    AgentNotSelling(String),
    #[error("agent '{agent}' does not take payments on {network}")]
    UnsupportedNetwork { agent: String, network: Network },
    /// A payment refused before anything was taken from the payer.
    #[error(transparent)]
    Refused(PaymentError),
    /// A retry of a paid request whose first answer did not come in time.
    #[error("this payment's request is still being answered; retry shortly")]
    StillAnswering,
    /// Another payment of this payer is being settled, and did not end in time.
    #[error("another payment from this payer is being settled; retry when it has ended")]
    PayerBusy,
    /// This payer's last payment cost the agent a fee for nothing: its settlement failed
    /// on chain, or its paid call failed and was refunded.
    #[error(
        "this payer's last payment cost the agent a fee (its settlement failed on chain, or its call was refunded); it may pay again in {retry_after_secs} s"
    )]
    PayerCoolingOff { retry_after_secs: u64 },
    /// Sent, but not confirmed in time: the payment stays recorded and is resolved later.
    #[error("the settlement {transaction} was sent but not confirmed in time")]
    SettlementPending { transaction: String, payer: String },
    /// The request names a command the agent does not sell.
    #[error("the agent offers no paid command '/{0}'")]
    CommandNotOffered(String),
    /// The facilitator that settles this network's payments gave no usable answer.
    /// `recorded`: it was asked to settle, so the payment stays recorded for recovery.
    #[error("the payment facilitator gave no usable answer: {error}")]
    Facilitator {
        error: crate::clients::facilitator::FacilitatorError,
        recorded: bool,
    },
    /// The work answered, but the payment could not be marked served, so the answer is
    /// withheld and the payment refunded by recovery.
    #[error("the answer could not be recorded; the payment will be refunded")]
    AnswerNotRecorded,
}

/// A payment refused before anything was taken.
pub(crate) fn refused(code: &'static str, message: impl Into<String>) -> ServiceError {
    X402Error::Refused(PaymentError::new(code, message)).into()
}

fn refusal(err: PaymentError) -> ServiceError {
    X402Error::Refused(err).into()
}

fn already_used() -> ServiceError {
    if let Some(metrics) = crate::telemetry::metrics::metrics() {
        metrics.x402_replay();
    }
    refused("payment_already_used", "This payment has already been used")
}

pub(crate) fn chain_unavailable(network: Network, err: ChainError) -> ServiceError {
    wallets::chain_error(network, err).into()
}

/// The payer's balance must cover the price, or nothing is attempted.
fn covers(balance: MicroUsdc, price: MicroUsdc) -> Result<(), ServiceError> {
    if balance < price {
        return Err(refused(
            "insufficient_funds",
            format!("The payer holds {balance} USDC; the payment needs {price}"),
        ));
    }
    Ok(())
}

/// What was asked, recorded with the payment.
pub struct Purchase<'a> {
    pub price: MicroUsdc,
    pub command: Option<&'a str>,
    pub request: &'a Value,
    /// The client address that presented it (none from the CLI or a test): a settlement
    /// that fails on chain is charged to it too.
    pub client: Option<&'a str>,
    /// The v2 extensions offered with the price on the surface it was bought on: what a
    /// payment echoes of them must be what was offered.
    pub extensions: &'a Map<String, Value>,
}

/// A reservation of what a paid call's work needs, made by [`settle`] once the payment
/// passed its checks and is no retry: what cannot be served is refused before anything is
/// recorded or sent.
pub type Reserve<'a> = scheme::BoxFuture<'a, Result<Reserved, ServiceError>>;

/// What a reservation took for the work.
pub enum Reserved {
    /// A plugin slot, for a command that answers now.
    Slot(crate::plugins::SlotPermit),
    /// The first round of a chat, taken from its owner's token budget (this many tokens).
    ChatTokens(u32),
}

pub use retry::{Bought, Earlier};
pub use settled::{ByUse, Settled};

/// Who settles a payment: the agent's wallet (its key opened), or the operator's facilitator.
enum Settler<'a> {
    Wallet(Box<crate::chains::WalletKey>),
    Facilitator(&'a crate::clients::facilitator::Facilitator),
}

/// A payment settled now, or one made before for the same request (a retry).
pub enum Settlement {
    Now(Settled),
    Before(Earlier),
}

/// The agent's payments, newest first, with their receipts and states, for its owner.
pub async fn list(
    store: &crate::store::Store,
    agent_id: &str,
    limit: u32,
) -> Result<Vec<crate::store::PaymentRecord>, ServiceError> {
    Ok(store.payments_of(agent_id, limit).await?)
}

/// What a payment moves on: the network's way of taking it, and its chain. In service,
/// the network's own ([`Rails::of`]); in unit tests, a fake.
#[derive(Clone, Copy)]
pub struct Rails<'a> {
    pub scheme: &'a dyn Scheme,
    pub chain: &'a dyn chains::UsdcChain,
}

impl<'a> Rails<'a> {
    pub fn of(services: &'a Services, network: Network) -> Rails<'a> {
        Rails {
            scheme: scheme::of(network),
            chain: services.chains.get(network),
        }
    }
}

/// Verifies a payment (either version, its envelope already decoded) for `purchase`,
/// records it (once, ever) with the transaction that settles it, settles it on chain and
/// waits for the settlement. Nothing is served before this returns.
pub async fn settle(
    services: &Services,
    rails: Rails<'_>,
    offer: &Offer,
    payment: &Payment,
    purchase: Purchase<'_>,
    reserve: Option<Reserve<'_>>,
) -> Result<Settlement, ServiceError> {
    let network = offer.network;
    if let Some(accepted) = &payment.accepted {
        let offered = offer.requirement_v2(services, purchase.price).ok_or_else(|| {
            refused(
                "wrong_network",
                "x402 version 2 is not offered on this network right now",
            )
        })?;
        accepted.must_match(&offered).map_err(refusal)?;
        wire::echoes_offered_extensions(&payment.extensions, purchase.extensions).map_err(refusal)?;
    }
    let Rails { scheme, chain } = rails;
    debug_assert!(
        scheme.network() == network && chain.network() == network,
        "rails of another network"
    );
    let terms = Terms {
        pay_to: offer.pay_to.clone(),
        price: purchase.price,
        fee_payer: offer.fee_payer.clone(),
    };
    let mut attempt = scheme.verify(services, &payment.payload, &terms).map_err(refusal)?;
    attempt.authenticate(services).await?;
    let payer = attempt.payer();
    // A retry under the payer's id for an earlier payment: its answer, nothing settled.
    let payment_ref = payment_identifier::read(&payment.extensions).map_err(refusal)?;
    if let Some(reference) = &payment_ref
        && let Some(earlier) = services.store.earlier_payment_by_ref(&payer, reference).await?
    {
        retry::fresh(services, attempt.as_ref()).await?;
        if let Some(earlier) =
            retry::recognise(services, earlier, &offer.agent.id, &purchase, MetBy::PaymentRef).await?
        {
            return Ok(Settlement::Before(earlier));
        }
    }
    guard::within_payer_limit(services, network, &payer).await?;
    let identity = attempt.identity();
    // A payer cooling off may still be a retry of a payment met before (the refund of that
    // very payment is what cooled it off): it is told how that payment ended. Only then is
    // the store read for it here; the common path reads it once, under the turn.
    if let Some(retry_after_secs) = guard::cooling_off_for(services, network, &payer).await? {
        let Some(earlier) = services.store.earlier_payment_by_identity(&identity).await? else {
            return Err(guard::cooling_off(network, retry_after_secs));
        };
        let earlier = retry::recognise(services, earlier, &offer.agent.id, &purchase, MetBy::Identity).await?;
        return earlier.map(Settlement::Before).ok_or_else(already_used);
    }
    let payer_turn = guard::payer_turn(services, network, &payer).await?;
    // The same signed payment again (perhaps recorded while this one waited for the turn):
    // the answer it bought, for the same request only. A retry may wait for that answer;
    // the payer's other payments need not wait with it.
    if let Some(earlier) = services.store.earlier_payment_by_identity(&identity).await? {
        drop(payer_turn);
        let earlier = retry::recognise(services, earlier, &offer.agent.id, &purchase, MetBy::Identity).await?;
        return earlier.map(Settlement::Before).ok_or_else(already_used);
    }
    // Again with the turn: the payer's settlement before this one may have just failed on
    // chain, or its call been refunded, while this one waited.
    guard::not_cooling_off(services, network, &payer).await?;

    // The agent's wallet settles, and first adds what only its key can (Solana: the fee
    // payer's signature); or the operator's facilitator settles.
    let settler = match services.facilitators.of(network) {
        Some(facilitator) => Settler::Facilitator(facilitator),
        None => {
            let wallet = wallets::wallet(services, &offer.agent.id, network).await?;
            let key = wallets::open_key(services, &wallet)?;
            attempt.complete(&key).map_err(refusal)?;
            Settler::Wallet(Box::new(key))
        }
    };
    let (mut slot, prepaid_tokens) = match reserve {
        Some(reserve) => match reserve.await? {
            Reserved::Slot(slot) => (Some(slot), 0),
            Reserved::ChatTokens(tokens) => (None, tokens),
        },
        None => (None, 0),
    };
    let payment_id = format!("pay_{}", crate::random::hex_token(12));
    let claim = services.payment_locks.claims.lock(payment_id.clone()).await?;
    let record = |transaction: Option<&str>, signed: Option<&SignedTx>| NewPayment {
        id: payment_id.clone(),
        identity: identity.clone(),
        agent_id: offer.agent.id.clone(),
        network,
        payer: payer.clone(),
        pay_to: offer.pay_to.clone(),
        amount: purchase.price,
        command: purchase.command.map(str::to_string),
        request: purchase.request.to_string(),
        transaction: transaction.map(str::to_string),
        raw_tx: signed.map(|s| s.raw.clone()),
        valid_until: signed.and_then(|s| s.valid_until),
        x402_version: payment.version.number(),
        payment_ref: payment_ref.clone(),
        facilitator: None,
        transfer_log_index: None,
        upto: false,
    };
    // Settled by someone else's transaction: recorded `settled`, with the transfer that paid it.
    let record_elsewhere = |by: &SettledBy| NewPayment {
        transfer_log_index: by.transfer_log_index,
        ..record(Some(&by.transaction), None)
    };
    let mut settled = |transaction: String, claim| Settled {
        payment_id: payment_id.clone(),
        agent_id: offer.agent.id.clone(),
        network,
        payer: payer.clone(),
        pay_to: offer.pay_to.clone(),
        amount: purchase.price,
        transaction,
        settled_at: crate::clock::now_ms(),
        _claim: Some(claim),
        slot: slot.take(),
        prepaid_tokens,
        by_use: None,
    };
    let now_secs = crate::clock::now_ms() as u64 / 1000;

    if let Some(elsewhere) = attempt.check(services, &terms).await? {
        let payment = record_elsewhere(&elsewhere);
        if !record_once(services, &payment).await? {
            drop(payer_turn);
            return met_again(services, &payment, &purchase).await.map(Settlement::Before);
        }
        return Ok(Settlement::Now(settled(elsewhere.transaction, claim)));
    }
    let key = match settler {
        // Kept boxed: the key is not copied out of the memory it is wiped from.
        Settler::Wallet(key) => key,
        Settler::Facilitator(facilitator) => {
            let valid_until = attempt
                .valid_until(services)
                .await
                .map_err(|e| chain_unavailable(network, e))?;
            let record = NewPayment {
                facilitator: Some(facilitator.label().to_string()),
                valid_until,
                ..record(None, None)
            };
            return match facilitated::settle(services, facilitator, offer, payment, purchase.price, &record).await? {
                Some(transaction) => Ok(Settlement::Now(settled(transaction, claim))),
                None => {
                    drop(payer_turn);
                    met_again(services, &record, &purchase).await.map(Settlement::Before)
                }
            };
        }
    };
    // Base: the settlement spends the wallet's next nonce, so the wallet is ours until sent.
    let wallet_turn = match attempt.uses_wallet_nonce() {
        true => Some(services.wallet_locks.lock((offer.agent.id.clone(), network)).await?),
        false => None,
    };
    let signed = match attempt.prepare(services, &key).await {
        Ok(signed) => signed,
        Err(ChainError::Refused(reason)) => {
            // The relay would fail when someone else executed the authorization first.
            let since = now_secs.saturating_sub(ELSEWHERE_LOOKBACK_SECS);
            let elsewhere = scheme
                .settled_elsewhere(services, &identity, &terms, Lookup::since(since))
                .await
                .map_err(|e| chain_unavailable(network, e))?;
            let Some(elsewhere) = elsewhere else {
                return Err(refused(
                    "settlement_failed",
                    format!("The payment could not be settled: {reason}"),
                ));
            };
            let payment = record_elsewhere(&elsewhere);
            if !record_once(services, &payment).await? {
                drop((wallet_turn, payer_turn));
                return met_again(services, &payment, &purchase).await.map(Settlement::Before);
            }
            return Ok(Settlement::Now(settled(elsewhere.transaction, claim)));
        }
        Err(other) => return Err(chain_unavailable(network, other)),
    };
    drop(key);
    crate::faults::crash_point("x402:after_sign");
    let payment = record(Some(&signed.id), Some(&signed));
    if !record_once(services, &payment).await? {
        drop((wallet_turn, payer_turn));
        return met_again(services, &payment, &purchase).await.map(Settlement::Before);
    }
    crate::faults::crash_point("x402:after_record");
    let submitted = chain.submit(&signed).await;
    drop(wallet_turn);
    crate::faults::crash_point("x402:after_send");
    let payer_may_send = attempt.signed_whole_by_payer();
    let landing = match submitted {
        // Refused, ours never reached the chain; unless the payer's wallet sent the very
        // transaction (the node refuses ours for having it).
        Err(ChainError::Refused(reason)) if !payer_may_send => Landing::Dropped(reason),
        Err(ChainError::Refused(reason)) => landing_after_refusal(services, &*attempt, chain, &signed, reason).await?,
        // Sent, or perhaps sent (the node did not answer): its landing tells.
        _ => wait_for_landing(services, chain, &signed).await?,
    };
    let sent = Sent {
        payment_id: &payment_id,
        agent_id: &offer.agent.id,
        network,
        payer: &payer,
        client: purchase.client,
        identity: &identity,
        terms: terms.clone(),
        since_secs: now_secs.saturating_sub(ELSEWHERE_LOOKBACK_SECS),
        agent_pays_fee: !payer_may_send,
        tx: signed,
    };
    let transaction = conclude(services, scheme, &sent, landing).await?;
    crate::faults::crash_point("x402:after_confirm");
    Ok(Settlement::Now(settled(transaction, claim)))
}

async fn wait_for_landing(
    services: &Services,
    chain: &dyn chains::UsdcChain,
    tx: &SignedTx,
) -> Result<Landing, ServiceError> {
    let timeout = Duration::from_secs(services.settings.x402.x402_settle_timeout_secs);
    chains::wait_for_landing(chain, tx, timeout)
        .await
        .map_err(|e| chain_unavailable(chain.network(), e))
}

/// A settlement the payer signed whole that the node refused: the payer's own copy may be
/// why, so that one's landing tells; once its blockhash has expired, one look does.
async fn landing_after_refusal(
    services: &Services,
    attempt: &dyn Attempt,
    chain: &dyn chains::UsdcChain,
    signed: &SignedTx,
    reason: String,
) -> Result<Landing, ServiceError> {
    match attempt.still_valid(services).await {
        Err(ServiceError::X402(X402Error::Refused(expired))) if expired.code == "payment_expired" => {
            Ok(match chain.landing(signed).await {
                Ok(landed @ (Landing::Confirmed | Landing::Failed(_))) => landed,
                _ => Landing::Dropped(reason),
            })
        }
        _ => wait_for_landing(services, chain, signed).await,
    }
}

/// Records a payment once, ever: false when it was recorded before (see [`met_again`]).
async fn record_once(services: &Services, payment: &NewPayment) -> Result<bool, ServiceError> {
    match services.store.insert_payment(payment.clone()).await {
        Ok(()) => Ok(true),
        Err(crate::store::StoreError::Conflict(_)) => Ok(false),
        Err(other) => Err(other.into()),
    }
}

/// A payment a request that raced this one recorded first (the same payment, or another
/// under the payer's id for it): this one is a retry, and gets the answer that one bought.
async fn met_again(
    services: &Services,
    payment: &NewPayment,
    purchase: &Purchase<'_>,
) -> Result<Earlier, ServiceError> {
    let store = &services.store;
    let (earlier, met_by) = match store.earlier_payment_by_identity(&payment.identity).await? {
        Some(earlier) => (earlier, MetBy::Identity),
        None => {
            let reference = payment.payment_ref.as_deref().ok_or_else(already_used)?;
            let earlier = store.earlier_payment_by_ref(&payment.payer, reference).await?;
            (earlier.ok_or_else(already_used)?, MetBy::PaymentRef)
        }
    };
    let earlier = retry::recognise(services, earlier, &payment.agent_id, purchase, met_by).await?;
    earlier.ok_or_else(already_used)
}

/// A recorded payment whose settlement went out (or may have).
struct Sent<'a> {
    payment_id: &'a str,
    agent_id: &'a str,
    network: Network,
    payer: &'a str,
    /// Who presented it, when a request did (not recovery).
    client: Option<&'a str>,
    identity: &'a str,
    terms: Terms,
    /// From when a settlement by someone else's transaction would count.
    since_secs: u64,
    /// The agent's wallet pays the fee: a settlement that lands and fails cost the agent.
    agent_pays_fee: bool,
    tx: SignedTx,
}

/// Records how a settlement ended and returns the transaction that settled the payment.
/// Failed or dropped: unless the payer's money reached the agent by another transaction,
/// the payment is `failed` (nothing was taken), and when ours landed and failed (the agent
/// paid its fee), the payer's cool-off starts.
async fn conclude(
    services: &Services,
    scheme: &dyn Scheme,
    sent: &Sent<'_>,
    landing: Landing,
) -> Result<String, ServiceError> {
    let store = &services.store;
    let reason = match &landing {
        Landing::Confirmed => {
            // Another worker that settled it first counted the fee.
            if store.settle_payment(sent.payment_id, None).await? && sent.agent_pays_fee {
                note_fee(services, sent.agent_id, sent.network, &sent.tx.id);
            }
            return Ok(sent.tx.id.clone());
        }
        Landing::Pending => {
            return Err(X402Error::SettlementPending {
                transaction: sent.tx.id.clone(),
                payer: sent.payer.to_string(),
            }
            .into());
        }
        Landing::Failed(reason) | Landing::Dropped(reason) => reason,
    };
    let elsewhere = scheme
        .settled_elsewhere(services, sent.identity, &sent.terms, Lookup::since(sent.since_secs))
        .await
        .map_err(|e| chain_unavailable(sent.network, e))?;
    if let Some(by) = elsewhere {
        return settle_by(services, sent.payment_id, by).await;
    }
    // Landed and failed: a fee was paid, the agent's unless the payer signed it whole.
    let charged = matches!(landing, Landing::Failed(_)) && sent.agent_pays_fee;
    if charged {
        note_fee(services, sent.agent_id, sent.network, &sent.tx.id);
    }
    store.fail_payment(sent.payment_id, reason, charged).await?;
    if charged {
        guard::charge_failed_settlement(services, sent.network, sent.payer, sent.client).await;
    }
    Err(refused(
        "settlement_failed",
        format!("The payment could not be settled: {reason}"),
    ))
}

/// A recorded payment that someone else's transaction settled: `settled` with it, unless
/// the transfer it names already paid another payment (then nothing paid this one, and it
/// is `failed`). The transaction that settled it.
async fn settle_by(services: &Services, payment_id: &str, by: SettledBy) -> Result<String, ServiceError> {
    let store = &services.store;
    let transaction = by.transaction.clone();
    if store.settle_payment(payment_id, Some(by)).await? {
        return Ok(transaction);
    }
    use crate::store::PaymentState::{Failed, Verified};
    match store.payment(payment_id).await? {
        // Another worker concluded it first.
        Some(now) if now.state == Failed => Err(refused(
            "settlement_failed",
            now.error.unwrap_or_else(|| "The payment could not be settled".into()),
        )),
        Some(now) if now.state != Verified => Ok(now.transaction_signature.unwrap_or(transaction)),
        _ => {
            let reason = format!("the transfer in {transaction} already paid another payment");
            store.fail_payment(payment_id, &reason, false).await?;
            Err(already_used())
        }
    }
}

/// Adds what the agent's wallet paid to land `transaction` to its usage (and the fee
/// metrics, when they are on): asked of the chain in the background, once it landed.
pub(super) fn note_fee(services: &Services, agent_id: &str, network: Network, transaction: &str) {
    let (chains, store) = (services.chains.clone(), services.store.clone());
    let (agent_id, transaction) = (agent_id.to_string(), transaction.to_string());
    services.lifecycle.spawn(async move {
        match chains.get(network).fee_paid(&transaction).await {
            Ok(Some(fee)) => {
                if let Some(metrics) = crate::telemetry::metrics::metrics() {
                    match network {
                        Network::Solana => metrics.x402_fee_lamports(u64::try_from(fee).unwrap_or(u64::MAX)),
                        Network::Base => metrics.x402_fee_wei(fee),
                    }
                }
                let unit = match network {
                    Network::Solana => "solana/lamports",
                    Network::Base => "base/wei",
                };
                let fee = i64::try_from(fee).unwrap_or(i64::MAX);
                if let Err(err) = store.add_agent_usage(&agent_id, "fees", unit.to_string(), fee).await {
                    tracing::warn!(error = %err, transaction, "could not count a transaction's fee");
                }
            }
            Ok(None) => tracing::debug!(transaction, "the chain does not know a landed transaction's fee yet"),
            Err(e) => tracing::debug!(transaction, "could not read a transaction's fee: {e}"),
        }
    });
}
