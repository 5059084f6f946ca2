//! Pricing by use (x402's `upto` scheme): the payer authorizes a maximum, and is charged
//! what its request used, measured after the work: a chat's tokens, as the model reported
//! them. The charge is rounded down to the micro-USDC and never more than the maximum, so
//! nobody is charged for use that was not measured.

use serde::{Deserialize, Serialize};

use crate::money::MicroUsdc;

/// A chat priced by its tokens: `[x402.chat_by_use]` of a manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatRates {
    /// Micro-USDC per 1,000 input (prompt) tokens.
    pub per_1k_input: MicroUsdc,
    /// Micro-USDC per 1,000 output (generated) tokens.
    pub per_1k_output: MicroUsdc,
    /// What one request may be charged at most: the amount the payer authorizes.
    pub max: MicroUsdc,
}

/// What a request used, as measured when its work ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Used {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub input_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub output_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ChatRates {
    /// What `used` costs: rounded down to the micro-USDC, at most the maximum.
    pub fn charge(&self, used: &Used) -> MicroUsdc {
        let milli = u128::from(used.input_tokens) * u128::from(self.per_1k_input.0)
            + u128::from(used.output_tokens) * u128::from(self.per_1k_output.0);
        MicroUsdc(u64::try_from(milli / 1_000).unwrap_or(u64::MAX).min(self.max.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(input: u64, output: u64, max: u64) -> ChatRates {
        ChatRates {
            per_1k_input: MicroUsdc(input),
            per_1k_output: MicroUsdc(output),
            max: MicroUsdc(max),
        }
    }

    fn tokens(input_tokens: u64, output_tokens: u64) -> Used {
        Used {
            input_tokens,
            output_tokens,
        }
    }

    #[test]
    fn a_chat_is_charged_by_its_tokens_rounded_down() {
        // $0.002 per 1k in, $0.006 per 1k out: 1,234 in and 567 out is 2,468 + 3,402 milli-micro.
        let rates = chat(2_000, 6_000, 1_000_000);
        assert_eq!(rates.charge(&tokens(1_234, 567)), MicroUsdc(2_468 + 3_402));
        // A fraction of a micro-USDC is not charged.
        let cheap = chat(1, 1, 1_000_000);
        assert_eq!(cheap.charge(&tokens(999, 0)), MicroUsdc(0));
        assert_eq!(cheap.charge(&tokens(1_000, 999)), MicroUsdc(1));
    }

    #[test]
    fn a_charge_never_passes_the_maximum() {
        let rates = chat(1_000_000, 1_000_000, 50_000);
        assert_eq!(rates.charge(&tokens(10_000, 10_000)), MicroUsdc(50_000));
        assert_eq!(rates.charge(&tokens(u64::MAX, u64::MAX)), MicroUsdc(50_000));
    }

    #[test]
    fn nothing_used_costs_nothing() {
        assert_eq!(chat(5, 5, 10).charge(&Used::default()), MicroUsdc(0));
    }
}
