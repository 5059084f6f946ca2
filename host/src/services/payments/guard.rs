//! What stands between a payer and the agent's wallet before anything is signed: a limit
//! on signed payments per payer, a cool-off after a settlement that failed on chain (the
//! agent paid its fee), and one settlement in flight per payer, so that a payer holding one
//! price cannot have twenty settlements pass the checks at once and nineteen fail on chain.

use std::sync::Arc;
use std::time::Duration;

use super::X402Error;
use crate::domain::Network;
use crate::services::locks::{KeyGuard, KeyedLocks};
use crate::services::{ServiceError, Services};

/// How long a payer's next payment waits for its previous one's settlement.
const PAYER_WAIT: Duration = Duration::from_secs(30);

/// Turns (across hosts when the store is shared): one settlement per payer, and one worker
/// per payment (a request, a job's refund, or recovery) at a time.
#[derive(Default)]
pub struct PaymentLocks {
    pub payers: Arc<KeyedLocks<(Network, String)>>,
    /// By payment id: whoever holds it is moving that payment forward.
    pub claims: Arc<KeyedLocks<String>>,
}

impl PaymentLocks {
    pub fn across(store: &crate::store::Store) -> PaymentLocks {
        PaymentLocks {
            payers: Arc::new(KeyedLocks::across(store, "payer")),
            claims: Arc::new(KeyedLocks::across(store, "payment")),
        }
    }
}

/// A payer whose signature checked out counts one payment against its limit here, before
/// any chain call; past the limit: 429.
pub async fn within_payer_limit(services: &Services, network: Network, payer: &str) -> Result<(), ServiceError> {
    let decision = services
        .x402_limiter
        .payer(network.as_str(), payer, crate::clock::now_ms())
        .await?;
    if decision.allowed {
        Ok(())
    } else {
        crate::telemetry::metrics::note_rate_limited("x402_payer");
        Err(ServiceError::RateLimited(decision))
    }
}

/// A payer that last cost the agent a fee for nothing waits out a cool-off before it may
/// present another payment on that network: `x402_payer_cooloff_secs` after a settlement
/// that landed and failed, `x402_refund_cooloff_secs` after a payment refunded (the agent's
/// failure, but each refund costs the agent a fee, and some failures a payer can provoke).
pub async fn not_cooling_off(services: &Services, network: Network, payer: &str) -> Result<(), ServiceError> {
    match cooling_off_for(services, network, payer).await? {
        Some(retry_after_secs) => Err(cooling_off(network, retry_after_secs)),
        None => Ok(()),
    }
}

/// How long `payer` still cools off, in seconds; `None` when it does not.
pub async fn cooling_off_for(services: &Services, network: Network, payer: &str) -> Result<Option<u64>, ServiceError> {
    let costs = services.store.last_costs_of(network, payer).await?;
    let x402 = &services.settings.x402;
    let until = |at: Option<i64>, secs: u64| at.map_or(i64::MIN, |at| at + secs as i64 * 1000);
    let until = until(costs.failed_on_chain_at, x402.x402_payer_cooloff_secs)
        .max(until(costs.refunded_at, x402.x402_refund_cooloff_secs));
    let left_ms = until.saturating_sub(crate::clock::now_ms());
    Ok((left_ms > 0).then(|| (left_ms as u64).div_ceil(1000)))
}

/// The refusal of a payment whose payer cools off (counted in the metrics).
pub fn cooling_off(network: Network, retry_after_secs: u64) -> ServiceError {
    if let Some(metrics) = crate::telemetry::metrics::metrics() {
        metrics.x402_cooling_off(network.as_str());
    }
    X402Error::PayerCoolingOff { retry_after_secs }.into()
}

/// A refund of `payer`'s payment costs the agent a fee: counted against the payer's limit
/// as one more payment presented.
pub async fn charge_refund(services: &Services, network: Network, payer: &str) {
    let counted = services
        .x402_limiter
        .payer(network.as_str(), payer, crate::clock::now_ms())
        .await;
    if let Err(err) = counted {
        tracing::warn!(payer, "could not count a refund against its payer's limit: {err}");
    }
}

/// A settlement that landed and failed cost the agent its fee: it counts as
/// `x402_failed_settlement_weight` payments against the payer and as many requests against
/// the client address that presented it. The payer's cool-off stops that payer; this stops
/// a stream of fresh payers from one address, each of which has no cool-off yet.
pub async fn charge_failed_settlement(services: &Services, network: Network, payer: &str, client: Option<&str>) {
    let (limiter, now) = (&services.x402_limiter, crate::clock::now_ms());
    let weight = services.settings.x402.x402_failed_settlement_weight;
    if let Err(err) = limiter.charge_payer(network.as_str(), payer, now, weight).await {
        tracing::warn!(payer, "could not charge a failed settlement to its payer: {err}");
    }
    if let Some(client) = client
        && let Err(err) = limiter.charge_client(client, now, weight).await
    {
        tracing::warn!(
            client,
            "could not charge a failed settlement to its client address: {err}"
        );
    }
}

/// Waits for the payer's previous settlement on this network to end (at most
/// `PAYER_WAIT`): the next one is then checked against the balance it left.
pub async fn payer_turn(
    services: &Services,
    network: Network,
    payer: &str,
) -> Result<KeyGuard<(Network, String)>, ServiceError> {
    services
        .payment_locks
        .payers
        .lock_within((network, payer.to_string()), PAYER_WAIT)
        .await?
        .ok_or_else(|| X402Error::PayerBusy.into())
}
