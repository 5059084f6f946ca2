//! What one Base transaction of an agent's may cost it, and the checks that keep each
//! settlement and refund within that before anything is sent.

use super::ChainError;

/// What one transaction of an agent's may cost it: the agent pays the gas of every
/// settlement and refund, and a payer with code (a contract, an EIP-7702-delegated
/// account, whose signature USDC checks by calling it) decides how much gas the check
/// burns. Nothing over these is sent.
#[derive(Debug, Clone, Copy)]
pub struct GasCaps {
    /// The gas limit: an estimate over it is refused.
    pub gas: u64,
    /// Wei per gas, all in: while the base fee and the tip are over it, nothing is sent.
    pub fee_per_gas: u128,
    /// The tip per gas: a node's suggestion above it is cut.
    pub tip: u128,
    /// Wei for the whole transaction at its gas limit, the L1 data fee included.
    pub fee: u128,
}

impl GasCaps {
    /// The (max fee, tip) per gas to offer with the chain's `base_fee` and suggested `tip`.
    pub(super) fn fees(&self, base_fee: u128, tip: u128) -> Result<(u128, u128), ChainError> {
        let tip = tip.min(self.tip);
        if base_fee.saturating_add(tip) > self.fee_per_gas {
            return Err(ChainError::Refused(format!(
                "Base fees are over the cap now: {} wei per gas, the cap is {} (base_max_fee_per_gas_wei); try again later",
                base_fee.saturating_add(tip),
                self.fee_per_gas
            )));
        }
        // Twice the base fee survives several full blocks of base-fee growth, within the cap.
        Ok((
            base_fee.saturating_mul(2).saturating_add(tip).min(self.fee_per_gas),
            tip,
        ))
    }

    /// The gas limit for an estimate: a margin over it (state can change before inclusion),
    /// never above the cap; an estimate over the cap is refused.
    pub(super) fn gas_limit(&self, estimate: u64) -> Result<u64, ChainError> {
        if estimate > self.gas {
            return Err(over_gas_cap(self.gas));
        }
        Ok(estimate.saturating_mul(6).div_ceil(5).min(self.gas))
    }

    /// The transaction's most cost: `gas_limit` at `max_fee`, plus the L1 data fee.
    pub(super) fn within_fee(&self, gas_limit: u64, max_fee: u128, l1_fee: u128) -> Result<(), ChainError> {
        let most = u128::from(gas_limit).saturating_mul(max_fee).saturating_add(l1_fee);
        if most > self.fee {
            return Err(ChainError::Refused(format!(
                "the transaction could cost {most} wei in fees, over the cap of {} (base_max_fee_wei)",
                self.fee
            )));
        }
        Ok(())
    }
}

pub(super) fn over_gas_cap(cap: u64) -> ChainError {
    ChainError::Refused(format!(
        "it needs more than {cap} gas (base_max_gas): a payer whose signature is checked by code may make it cost more than the agent pays"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPS: GasCaps = GasCaps {
        gas: 300_000,
        fee_per_gas: 20_000_000_000,
        tip: 2_000_000_000,
        fee: 1_000_000_000_000_000,
    };

    #[test]
    fn gas_is_limited_by_the_cap_and_an_estimate_over_it_is_refused() {
        assert_eq!(CAPS.gas_limit(60_000).unwrap(), 72_000);
        assert_eq!(CAPS.gas_limit(290_000).unwrap(), 300_000, "the margin stops at the cap");
        assert!(matches!(CAPS.gas_limit(300_001), Err(ChainError::Refused(_))));
    }

    #[test]
    fn fees_per_gas_stay_under_the_cap() {
        // A greedy tip is cut; twice the base fee, within the cap.
        assert_eq!(
            CAPS.fees(1_000_000_000, 50_000_000_000).unwrap(),
            (4_000_000_000, 2_000_000_000)
        );
        assert_eq!(CAPS.fees(15_000_000_000, 1).unwrap(), (20_000_000_000, 1));
        // The base fee alone over the cap: nothing is sent.
        assert!(matches!(
            CAPS.fees(19_000_000_000, 2_000_000_000),
            Err(ChainError::Refused(_))
        ));
    }

    #[test]
    fn the_whole_fee_counts_the_l1_data_fee() {
        assert!(CAPS.within_fee(100_000, 5_000_000_000, 0).is_ok());
        assert!(CAPS.within_fee(100_000, 5_000_000_000, 500_000_000_000_000).is_ok());
        assert!(matches!(
            CAPS.within_fee(100_000, 5_000_000_000, 500_000_000_000_001),
            Err(ChainError::Refused(_))
        ));
    }
}
