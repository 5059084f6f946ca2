//! Exact USDC amounts. USDC has 6 decimals, so every amount is an integer count of
//! micro-USDC; decimal text is parsed digit by digit and never goes through a float.

use std::fmt;

/// Micro-USDC per USDC.
pub const MICRO_PER_USDC: u64 = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct MicroUsdc(pub u64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    #[error("must be a decimal number such as 0.05")]
    NotANumber,
    #[error("must not be negative")]
    Negative,
    #[error("has more than 6 decimal places (USDC has 6)")]
    TooPrecise,
    #[error("is too large")]
    TooLarge,
}

impl MicroUsdc {
    pub const ZERO: MicroUsdc = MicroUsdc(0);

    /// Parses a plain decimal such as `12`, `0.05` or `1234.567891`.
    pub fn parse_decimal(text: &str) -> Result<MicroUsdc, AmountError> {
        let text = text.trim();
        if let Some(rest) = text.strip_prefix('-') {
            if rest.chars().all(|c| c.is_ascii_digit() || c == '.') && !rest.is_empty() {
                return Err(AmountError::Negative);
            }
            return Err(AmountError::NotANumber);
        }
        let (whole, frac) = match text.split_once('.') {
            Some((w, f)) => (w, f),
            None => (text, ""),
        };
        let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
        if (whole.is_empty() && frac.is_empty()) || !digits(whole) || !digits(frac) {
            return Err(AmountError::NotANumber);
        }
        let frac = frac.trim_end_matches('0');
        if frac.len() > 6 {
            return Err(AmountError::TooPrecise);
        }
        let whole: u64 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| AmountError::TooLarge)?
        };
        let frac_micro: u64 = format!("{frac:0<6}").parse().map_err(|_| AmountError::NotANumber)?;
        whole
            .checked_mul(MICRO_PER_USDC)
            .and_then(|w| w.checked_add(frac_micro))
            .map(MicroUsdc)
            .ok_or(AmountError::TooLarge)
    }

    /// Converts a number that arrived as a JSON or TOML float. Rust prints the shortest
    /// decimal that reads back as the same float, which is the literal the user wrote
    /// (for literals of up to 15 significant digits), so this stays exact.
    pub fn from_f64(value: f64) -> Result<MicroUsdc, AmountError> {
        if !value.is_finite() {
            return Err(AmountError::NotANumber);
        }
        if value < 0.0 {
            return Err(AmountError::Negative);
        }
        let text = format!("{value}");
        if text.contains('e') || text.contains('E') {
            // Only extreme magnitudes print in exponent form.
            return Err(if value < 1.0 {
                AmountError::TooPrecise
            } else {
                AmountError::TooLarge
            });
        }
        MicroUsdc::parse_decimal(&text)
    }

    /// The amount as a JSON number with exactly the digits it has (e.g. 0.05, 12, 1234.567891).
    pub fn to_json_number(self) -> serde_json::Value {
        json_number(&self.to_string())
    }

    pub fn checked_add(self, other: MicroUsdc) -> Option<MicroUsdc> {
        self.0.checked_add(other.0).map(MicroUsdc)
    }
}

impl fmt::Display for MicroUsdc {
    /// Decimal USDC without trailing zeros: 50000 → `0.05`, 12000000 → `12`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.0 / MICRO_PER_USDC;
        let frac = self.0 % MICRO_PER_USDC;
        if frac == 0 {
            write!(f, "{whole}")
        } else {
            let frac = format!("{frac:06}");
            write!(f, "{whole}.{}", frac.trim_end_matches('0'))
        }
    }
}

/// Exact decimal text (such as `1.500000001`) as a JSON number: the nearest double
/// beyond 15 significant digits, as any JSON number is.
pub fn json_number(decimal: &str) -> serde_json::Value {
    serde_json::from_str(decimal).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_decimals_exactly() {
        assert_eq!(MicroUsdc::parse_decimal("0.000001"), Ok(MicroUsdc(1)));
        assert_eq!(MicroUsdc::parse_decimal("1234.567891"), Ok(MicroUsdc(1_234_567_891)));
        assert_eq!(MicroUsdc::parse_decimal("12"), Ok(MicroUsdc(12_000_000)));
        assert_eq!(MicroUsdc::parse_decimal(".5"), Ok(MicroUsdc(500_000)));
        assert_eq!(MicroUsdc::parse_decimal("0.1000000"), Ok(MicroUsdc(100_000)));
    }

    #[test]
    fn rejects_bad_amounts() {
        assert_eq!(MicroUsdc::parse_decimal("0.0000001"), Err(AmountError::TooPrecise));
        assert_eq!(MicroUsdc::parse_decimal("-1"), Err(AmountError::Negative));
        assert_eq!(MicroUsdc::parse_decimal("abc"), Err(AmountError::NotANumber));
        assert_eq!(MicroUsdc::parse_decimal("1e3"), Err(AmountError::NotANumber));
        assert_eq!(MicroUsdc::parse_decimal(""), Err(AmountError::NotANumber));
        assert_eq!(MicroUsdc::parse_decimal("."), Err(AmountError::NotANumber));
        assert_eq!(
            MicroUsdc::parse_decimal("99999999999999999999"),
            Err(AmountError::TooLarge)
        );
    }

    #[test]
    fn floats_from_json_stay_exact() {
        // 0.1 + 0.2 style traps: these literals are not exact binary floats.
        assert_eq!(MicroUsdc::from_f64(0.05), Ok(MicroUsdc(50_000)));
        assert_eq!(MicroUsdc::from_f64(0.3), Ok(MicroUsdc(300_000)));
        assert_eq!(MicroUsdc::from_f64(1234.567891), Ok(MicroUsdc(1_234_567_891)));
        assert_eq!(MicroUsdc::from_f64(0.000001), Ok(MicroUsdc(1)));
        assert_eq!(MicroUsdc::from_f64(1e-7), Err(AmountError::TooPrecise));
        assert_eq!(MicroUsdc::from_f64(-0.5), Err(AmountError::Negative));
        assert_eq!(MicroUsdc::from_f64(f64::NAN), Err(AmountError::NotANumber));
    }

    #[test]
    fn displays_without_trailing_zeros() {
        assert_eq!(MicroUsdc(50_000).to_string(), "0.05");
        assert_eq!(MicroUsdc(12_000_000).to_string(), "12");
        assert_eq!(MicroUsdc(1).to_string(), "0.000001");
        assert_eq!(
            MicroUsdc(1_234_567_891).to_json_number(),
            serde_json::json!(1234.567891)
        );
    }
}
