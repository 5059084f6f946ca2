//! `[x402]` of a manifest: whether the agent sells, on which networks, the price of a plain
//! message, and `[x402.chat_by_use]`, a message priced by its tokens instead.

use serde::Deserialize;
use toml::Spanned;

use super::{Checker, ManifestError, dedup, price};
use crate::domain::{ChatRates, Network, X402Settings};
use crate::money::MicroUsdc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawX402 {
    #[serde(default)]
    enabled: bool,
    #[serde(default)]
    default_price_usd: Option<Spanned<toml::Value>>,
    #[serde(default)]
    networks: Vec<Network>,
    #[serde(default)]
    chat_by_use: Option<Spanned<RawChatByUse>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChatByUse {
    #[serde(default)]
    per_1k_input_tokens_usd: Option<Spanned<toml::Value>>,
    #[serde(default)]
    per_1k_output_tokens_usd: Option<Spanned<toml::Value>>,
    max_usd: Spanned<toml::Value>,
}

pub(super) fn settings(check: &Checker<'_>, raw: Option<Spanned<RawX402>>) -> Result<X402Settings, ManifestError> {
    let Some(section) = raw else {
        return Ok(X402Settings {
            enabled: false,
            default_price: None,
            networks: Vec::new(),
            chat_by_use: None,
        });
    };
    let span = section.span();
    let section = section.into_inner();
    let default_price = section
        .default_price_usd
        .map(|p| price(check, &p, "x402.default_price_usd"))
        .transpose()?;
    let mut networks = section.networks;
    dedup(&mut networks);
    if section.enabled && networks.is_empty() {
        networks = vec![Network::Solana, Network::Base];
    }
    if section.enabled && default_price.is_none() {
        return Err(check.err(
            Some(&span),
            "x402.default_price_usd",
            "is required when x402 is enabled (the price of a plain message)",
        ));
    }
    let chat_by_use = section.chat_by_use.map(|raw| chat_rates(check, raw)).transpose()?;
    if chat_by_use.is_some() && !networks.contains(&Network::Base) {
        return Err(check.err(
            Some(&span),
            "x402.chat_by_use",
            "is paid with x402's `upto` scheme, which this server takes on Base only: add \"base\" to x402.networks",
        ));
    }
    Ok(X402Settings {
        enabled: section.enabled,
        default_price,
        networks,
        chat_by_use,
    })
}

fn chat_rates(check: &Checker<'_>, raw: Spanned<RawChatByUse>) -> Result<ChatRates, ManifestError> {
    let span = raw.span();
    let raw = raw.into_inner();
    // A rate may be 0 (only output charged, say), unlike a price: what is owed is summed.
    let rate = |value: Option<Spanned<toml::Value>>, field: &str| -> Result<MicroUsdc, ManifestError> {
        match value {
            None => Ok(MicroUsdc::ZERO),
            Some(value) if value.get_ref().as_integer() == Some(0) || value.get_ref().as_float() == Some(0.0) => {
                Ok(MicroUsdc::ZERO)
            }
            Some(value) => price(check, &value, field),
        }
    };
    let per_1k_input = rate(raw.per_1k_input_tokens_usd, "x402.chat_by_use.per_1k_input_tokens_usd")?;
    let per_1k_output = rate(
        raw.per_1k_output_tokens_usd,
        "x402.chat_by_use.per_1k_output_tokens_usd",
    )?;
    if per_1k_input == MicroUsdc::ZERO && per_1k_output == MicroUsdc::ZERO {
        return Err(check.err(
            Some(&span),
            "x402.chat_by_use",
            "prices nothing: set per_1k_input_tokens_usd or per_1k_output_tokens_usd",
        ));
    }
    Ok(ChatRates {
        per_1k_input,
        per_1k_output,
        max: price(check, &raw.max_usd, "x402.chat_by_use.max_usd")?,
    })
}
