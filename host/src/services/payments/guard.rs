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

/// A payer whose last settlement landed and failed (the agent paid its fee) waits out the
/// cool-off before it may present another payment on that network.
pub async fn not_cooling_off(services: &Services, network: Network, payer: &str) -> Result<(), ServiceError> {
    let Some(failed_at) = services.store.last_failure_on_chain(network, payer).await? else {
        return Ok(());
    };
    let cooloff_ms = services.settings.x402.x402_payer_cooloff_secs as i64 * 1000;
    let left_ms = failed_at + cooloff_ms - crate::clock::now_ms();
    if left_ms > 0 {
        if let Some(metrics) = crate::telemetry::metrics::metrics() {
            metrics.x402_cooling_off(network.as_str());
        }
        return Err(X402Error::PayerCoolingOff {
            retry_after_secs: (left_ms as u64).div_ceil(1000),
        }
        .into());
    }
    Ok(())
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
