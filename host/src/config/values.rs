//! How a setting's text (from the environment, the file, or its default) becomes a typed
//! value: numbers, text, lists, and the settings that name one of a few choices.

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
