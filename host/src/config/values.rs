//! How a setting's text (from the environment, the file, or its default) becomes a typed
//! value: numbers, text, lists, and the settings that name one of a few choices.

use std::net::IpAddr;
use std::path::PathBuf;

use super::Secret;

/// How a setting's text (from the environment, the file, or its default) becomes a value.
pub(super) trait SettingValue: Sized {
    fn parse(text: &str) -> Result<Self, String>;
    /// Whether a number lies in `min..=max`; other values have no range.
    fn within(&self, _min: u64, _max: u64) -> bool {
        true
    }
}

macro_rules! numbers {
    ($($ty:ty),*) => {$(
        impl SettingValue for $ty {
            fn parse(text: &str) -> Result<Self, String> {
                text.trim().parse().map_err(|e| format!("'{text}' is not a whole number ({e})"))
            }
            fn within(&self, min: u64, max: u64) -> bool {
                (min..=max).contains(&(*self as u64))
            }
        }
    )*};
}
numbers!(u32, u64, usize);

impl SettingValue for String {
    fn parse(text: &str) -> Result<Self, String> {
        Ok(text.to_string())
    }
}

/// `true` or `false`.
impl SettingValue for bool {
    fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(format!("'{other}' is not true or false")),
        }
    }
}

/// Empty means unset.
impl SettingValue for Option<String> {
    fn parse(text: &str) -> Result<Self, String> {
        Ok(Some(text.trim().to_string()).filter(|t| !t.is_empty()))
    }
}

impl SettingValue for Option<Secret> {
    fn parse(text: &str) -> Result<Self, String> {
        Ok(Option::<String>::parse(text)?.map(Secret))
    }
}

impl SettingValue for Option<PathBuf> {
    fn parse(text: &str) -> Result<Self, String> {
        Ok(Option::<String>::parse(text)?.map(PathBuf::from))
    }
}

/// Empty means unset.
impl SettingValue for Option<u64> {
    fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "" => Ok(None),
            number => u64::parse(number).map(Some),
        }
    }
    fn within(&self, min: u64, max: u64) -> bool {
        self.is_none_or(|n| (min..=max).contains(&n))
    }
}

/// Comma-separated (a TOML array in the file).
impl SettingValue for Vec<String> {
    fn parse(text: &str) -> Result<Self, String> {
        Ok(text
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect())
    }
}

/// Comma-separated port numbers (a TOML array of numbers or strings in the file).
impl SettingValue for Vec<u16> {
    fn parse(text: &str) -> Result<Self, String> {
        Vec::<String>::parse(text)?
            .iter()
            .map(|p| match p.parse::<u16>() {
                Ok(port) if port > 0 => Ok(port),
                _ => Err(format!("'{p}' is not a port number (1 to 65535)")),
            })
            .collect()
    }
}

/// Comma-separated whole numbers (a TOML array in the file); the range holds for each.
impl SettingValue for Vec<u32> {
    fn parse(text: &str) -> Result<Self, String> {
        let numbers = Vec::<String>::parse(text)?
            .iter()
            .map(|n| n.parse::<u32>().map_err(|_| format!("'{n}' is not a whole number")))
            .collect::<Result<Vec<_>, _>>()?;
        if numbers.is_empty() {
            return Err("give at least one number".into());
        }
        Ok(numbers)
    }
    fn within(&self, min: u64, max: u64) -> bool {
        self.iter().all(|n| (min..=max).contains(&u64::from(*n)))
    }
}

/// An address, or a range of them in CIDR form (`10.0.0.0/8`, `2001:db8::/32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressRange {
    first: IpAddr,
    prefix: u8,
}

impl AddressRange {
    /// Comma-separated addresses or CIDR ranges.
    pub fn parse_list(text: &str) -> Result<Vec<AddressRange>, String> {
        Vec::<String>::parse(text)?
            .iter()
            .map(|item| {
                let refused = || format!("'{item}' is not an address or a CIDR range (e.g. 10.0.0.0/8)");
                let (address, prefix) = item.split_once('/').unwrap_or((item, ""));
                let first: IpAddr = address.parse().map_err(|_| refused())?;
                let bits = if first.is_ipv4() { 32 } else { 128 };
                let prefix = match prefix {
                    "" => bits,
                    digits => digits.parse::<u8>().ok().filter(|p| *p <= bits).ok_or_else(refused)?,
                };
                Ok(AddressRange { first, prefix })
            })
            .collect()
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.first, ip) {
            (IpAddr::V4(first), IpAddr::V4(ip)) => {
                same_prefix(first.to_bits().into(), ip.to_bits().into(), 32, self.prefix)
            }
            (IpAddr::V6(first), IpAddr::V6(ip)) => same_prefix(first.to_bits(), ip.to_bits(), 128, self.prefix),
            _ => false,
        }
    }
}

/// Whether two addresses of `bits` bits agree on their first `prefix` bits.
fn same_prefix(a: u128, b: u128, bits: u8, prefix: u8) -> bool {
    let ignored = u32::from(bits - prefix);
    a.checked_shr(ignored).unwrap_or(0) == b.checked_shr(ignored).unwrap_or(0)
}

/// Comma-separated addresses or CIDR ranges.
impl SettingValue for Vec<AddressRange> {
    fn parse(text: &str) -> Result<Self, String> {
        AddressRange::parse_list(text)
    }
}

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One human-readable line per event (coloured on a terminal).
    Text,
    /// One JSON object per line, for a log collector.
    Json,
}

impl SettingValue for LogFormat {
    fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("'{other}' is not a log format: text or json")),
        }
    }
}

/// Which Solana network the service pays and is paid on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SolanaNetworkName {
    Mainnet,
    Devnet,
    Testnet,
    /// Every chain value set alone (a local chain, a fork).
    Custom,
}

impl SettingValue for SolanaNetworkName {
    fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "mainnet" => Ok(SolanaNetworkName::Mainnet),
            "devnet" => Ok(SolanaNetworkName::Devnet),
            "testnet" => Ok(SolanaNetworkName::Testnet),
            "custom" => Ok(SolanaNetworkName::Custom),
            other => Err(format!("'{other}' is not mainnet, devnet, testnet or custom")),
        }
    }
}

/// Which Base network the service pays and is paid on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaseNetworkName {
    Mainnet,
    Sepolia,
    /// Every chain value set alone (a local chain, a fork).
    Custom,
}

impl SettingValue for BaseNetworkName {
    fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "mainnet" => Ok(BaseNetworkName::Mainnet),
            "sepolia" => Ok(BaseNetworkName::Sepolia),
            "custom" => Ok(BaseNetworkName::Custom),
            other => Err(format!("'{other}' is not mainnet, sepolia or custom")),
        }
    }
}

/// A share of requests, from 0 to 1 (`0.05` is one in twenty).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio(pub f64);

impl SettingValue for Ratio {
    fn parse(text: &str) -> Result<Self, String> {
        match text.trim().parse::<f64>() {
            Ok(ratio) if (0.0..=1.0).contains(&ratio) => Ok(Ratio(ratio)),
            _ => Err(format!("'{text}' is not a ratio from 0 to 1 (e.g. 0.05)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_ranges_match_by_prefix() {
        let ranges = Vec::<AddressRange>::parse("10.0.0.0/8, 192.0.2.7, 2001:db8::/32, ::/0").unwrap();
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        assert!(ranges[0].contains(ip("10.200.3.4")));
        assert!(!ranges[0].contains(ip("11.0.0.1")));
        assert!(ranges[1].contains(ip("192.0.2.7")));
        assert!(!ranges[1].contains(ip("192.0.2.8")), "a bare address is a /32");
        assert!(ranges[2].contains(ip("2001:db8:ffff::1")));
        assert!(!ranges[2].contains(ip("2001:db9::1")));
        assert!(!ranges[2].contains(ip("10.0.0.1")), "families never match");
        assert!(
            ranges[3].contains(ip("2a00::1")),
            "a /0 holds every address of its family"
        );
        for bad in ["10.0.0.0/33", "example.com", "10.0.0.0/x", "::/129"] {
            assert!(Vec::<AddressRange>::parse(bad).is_err(), "{bad} refused");
        }
    }
}
