//! The paid API's abuse limits, counted as rate limits are.

use super::{Limiter, RateDecision};
use crate::domain::RateLimits;
use crate::store::{Store, StoreError};

/// The unkeyed x402 endpoints' abuse limits: every request per client address, and every
/// signed payment per payer (counted after its signature checks, before any chain call,
/// so nobody can spend another payer's allowance).
pub struct X402Limiter {
    clients: Limiter,
    payers: Limiter,
    client_limits: RateLimits,
    payer_limits: RateLimits,
}

impl X402Limiter {
    pub fn new(store: &Store, client_limits: RateLimits, payer_limits: RateLimits) -> X402Limiter {
        X402Limiter {
            clients: Limiter::new(store, "x402_client"),
            payers: Limiter::new(store, "x402_payer"),
            client_limits,
            payer_limits,
        }
    }

    pub async fn client(&self, address: &str, now_ms: i64) -> Result<RateDecision, StoreError> {
        self.clients.check(address, self.client_limits, now_ms).await
    }

    pub async fn payer(&self, network: &str, payer: &str, now_ms: i64) -> Result<RateDecision, StoreError> {
        self.payers
            .check(&format!("{network}:{payer}"), self.payer_limits, now_ms)
            .await
    }

    /// Charges `n` requests to a client address, whatever room is left.
    pub async fn charge_client(&self, address: &str, now_ms: i64, n: u32) -> Result<(), StoreError> {
        self.clients.charge(address, self.client_limits, now_ms, n).await
    }

    /// Charges `n` payments to a payer, whatever room is left.
    pub async fn charge_payer(&self, network: &str, payer: &str, now_ms: i64, n: u32) -> Result<(), StoreError> {
        self.payers
            .charge(&format!("{network}:{payer}"), self.payer_limits, now_ms, n)
            .await
    }
}
