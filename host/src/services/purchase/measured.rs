//! A purchase as the metrics count it: how it ended, and what it settled, by network and
//! x402 version.

use super::X402Error;
use crate::services::ServiceError;

/// A purchase as the metrics count it: its network and x402 version.
pub(super) struct Measured {
    pub network: &'static str,
    pub version: &'static str,
}

impl Measured {
    /// How a purchase that settled nothing ended, by its error.
    pub fn not_settled(err: &ServiceError) -> &'static str {
        match err {
            ServiceError::X402(X402Error::SettlementPending { .. }) => "pending",
            ServiceError::X402(
                X402Error::Refused(_)
                | X402Error::PayerBusy
                | X402Error::PayerCoolingOff { .. }
                | X402Error::CommandNotOffered(_),
            )
            | ServiceError::RateLimited(_)
            | ServiceError::OverBudget { .. }
            | ServiceError::Unavailable { .. } => "refused",
            // The chain or the store failed: recovery finds the payment if it was recorded.
            _ => "error",
        }
    }

    pub fn settled(&self, micro_usdc: u64, started: std::time::Instant) {
        if let Some(metrics) = crate::telemetry::metrics::metrics() {
            metrics.x402_settled(self.network, micro_usdc, started.elapsed().as_secs_f64());
        }
    }

    /// How the purchase ended: `served`, `refunded` (the work failed and the payer is paid
    /// back), `released` (paid by use, the work failed: nothing was charged), `unanswered`
    /// (recovery refunds it), `refused` (nothing was taken), `pending` (settling still;
    /// recovery ends it), `error` (a chain or store failure; recovery finishes a recorded
    /// payment) or `retried` (a payment met again).
    pub fn ended(&self, state: &'static str) {
        if let Some(metrics) = crate::telemetry::metrics::metrics() {
            metrics.x402_payment(self.network, self.version, state);
        }
    }
}
