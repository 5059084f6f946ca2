//! `[x402]` of a manifest: whether the agent sells, on which networks, the price of a plain
//! message, and `[x402.chat_by_use]`, a message priced by its tokens instead; and a
//! command's `by_use`, the command priced by the units its plugin reports.

use serde::Deserialize;
use toml::Spanned;

use super::{Checker, ManifestError, dedup, price};
use crate::domain::{ChatRates, HandlerType, Network, UnitRates, X402Settings};
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

/// `by_use = { per_unit_usd, unit, max_usd }` of a command.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawByUse {
    per_unit_usd: Spanned<toml::Value>,
    #[serde(default)]
    unit: Option<String>,
    max_usd: Spanned<toml::Value>,
}

/// What a command sold by use needs of the rest of the manifest.
pub(super) struct CommandSold<'a> {
    pub x402: &'a X402Settings,
    pub sold: bool,
    pub handler: HandlerType,
    pub long_running: bool,
}

/// A command's `by_use`: a custom command sold over x402 on Base, answering at once (its
/// units are charged before it answers), with a price per unit and a maximum that covers
/// at least one unit. (That its plugin can report units is checked when it is applied.)
pub(super) fn command_rates(
    check: &Checker<'_>,
    raw: Spanned<RawByUse>,
    at: &dyn Fn(&str) -> String,
    command: CommandSold<'_>,
) -> Result<UnitRates, ManifestError> {
    let span = raw.span();
    let raw = raw.into_inner();
    let fail = |message: &str| Err(check.err(Some(&span), at("by_use"), message));
    if !command.sold {
        return fail("needs \"x402\" in integrations: by_use is a price");
    }
    if !command.x402.networks.contains(&Network::Base) {
        return fail(
            "is paid with x402's `upto` scheme, which this server takes on Base only: add \"base\" to x402.networks",
        );
    }
    if command.handler != HandlerType::Custom {
        return fail("is for a custom command: its plugin reports the units it worked (meter.add)");
    }
    if command.long_running {
        return fail(
            "cannot be on a long-running command: its units are charged before it answers, within the payment's five minutes",
        );
    }
    let unit = raw.unit.unwrap_or_else(|| "unit".into());
    let unit_ok = (1..=32).contains(&unit.chars().count())
        && unit
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == ' ' || c == '-' || c == '_');
    if !unit_ok {
        return Err(check.err(
            Some(&span),
            at("by_use.unit"),
            "is 1 to 32 of a-z 0-9 space _ - (what one unit is, as a buyer reads it: \"page\")",
        ));
    }
    let per_unit = price(check, &raw.per_unit_usd, &at("by_use.per_unit_usd"))?;
    let max = price(check, &raw.max_usd, &at("by_use.max_usd"))?;
    if max < per_unit {
        return Err(check.err(
            Some(&raw.max_usd.span()),
            at("by_use.max_usd"),
            "is less than one unit's price: nothing could ever be charged",
        ));
    }
    Ok(UnitRates { per_unit, unit, max })
}
