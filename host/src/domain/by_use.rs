//! Pricing by use (x402's `upto` scheme): the payer authorizes a maximum, and is charged
//! what its request used, measured after the work: a chat's tokens, as the model reported
//! them, or a command's units, as its plugin reported them. The charge is rounded down to the micro-USDC and never more than the maximum, so
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

/// A command priced by the units of work its plugin reports (`meter.add`): `by_use` of a
/// command in a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitRates {
    /// Micro-USDC per unit.
    pub per_unit: MicroUsdc,
    /// What a unit is, as its buyers read it (`page`, `image`).
    pub unit: String,
    /// What one request may be charged at most: the amount the payer authorizes.
    pub max: MicroUsdc,
}

/// How a request sold by use is priced: a message by its tokens, a command by its units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rates {
    Chat(ChatRates),
    Units(UnitRates),
}

/// What a request used, as measured when its work ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Used {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub input_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub output_tokens: u64,
    /// The units a command's plugin reported.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub units: u64,
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

impl UnitRates {
    /// What `units` cost: at most the maximum.
    pub fn charge(&self, units: u64) -> MicroUsdc {
        let owed = u128::from(units) * u128::from(self.per_unit.0);
        MicroUsdc(u64::try_from(owed).unwrap_or(u64::MAX).min(self.max.0))
    }
}

impl Rates {
    /// What `used` costs under these rates (a chat's tokens, a command's units).
    pub fn charge(&self, used: &Used) -> MicroUsdc {
        match self {
            Rates::Chat(rates) => rates.charge(used),
            Rates::Units(rates) => rates.charge(used.units),
        }
    }

    /// The most one request may be charged: what its payer authorizes.
    pub fn max(&self) -> MicroUsdc {
        match self {
            Rates::Chat(rates) => rates.max,
            Rates::Units(rates) => rates.max,
        }
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
            units: 0,
        }
    }

    fn pages(per_unit: u64, max: u64) -> Rates {
        Rates::Units(UnitRates {
            per_unit: MicroUsdc(per_unit),
            unit: "page".into(),
            max: MicroUsdc(max),
        })
    }

    #[test]
    fn a_command_is_charged_by_its_units_up_to_the_maximum() {
        let rates = pages(2_500, 50_000);
        let units = |units| Used {
            units,
            ..Used::default()
        };
        assert_eq!(rates.charge(&units(7)), MicroUsdc(17_500));
        assert_eq!(rates.charge(&units(20)), MicroUsdc(50_000));
        assert_eq!(rates.charge(&units(u64::MAX)), MicroUsdc(50_000));
        assert_eq!(rates.charge(&units(0)), MicroUsdc(0));
        // A command's rates charge its units, never a chat's tokens.
        assert_eq!(rates.charge(&tokens(1_000, 1_000)), MicroUsdc(0));
        assert_eq!(rates.max(), MicroUsdc(50_000));
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
