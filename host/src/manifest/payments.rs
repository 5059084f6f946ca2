//! `[payments]`: what the agent may spend on the paid services its commands call.

use serde::Deserialize;
use toml::Spanned;

use super::{Checker, ManifestError, dedup, price};
use crate::domain::remote_mcp::McpServerDef;
use crate::domain::spending::SpendingPolicy;
use crate::domain::{CommandDef, Network};
use crate::outbound::origin_of;

/// Most payees one agent lists.
const MAX_PAYEES: usize = 50;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPayments {
    max_per_payment: Spanned<toml::Value>,
    max_per_day: Spanned<toml::Value>,
    payees: Spanned<Vec<String>>,
    #[serde(default)]
    commands: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    mcp_servers: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    networks: Option<Vec<Network>>,
}

pub(super) fn check(
    check: &Checker<'_>,
    raw: Spanned<RawPayments>,
    commands: &[CommandDef],
    mcp_servers: &[McpServerDef],
) -> Result<SpendingPolicy, ManifestError> {
    let span = raw.span();
    let raw = raw.into_inner();
    let max_per_payment = price(check, &raw.max_per_payment, "payments.max_per_payment")?;
    let max_per_day = price(check, &raw.max_per_day, "payments.max_per_day")?;
    if max_per_payment > max_per_day {
        return Err(check.err(
            Some(&raw.max_per_payment.span()),
            "payments.max_per_payment",
            format!("is more than max_per_day ({max_per_day} USDC)"),
        ));
    }
    let payees_span = raw.payees.span();
    let wrong_payees = |why: String| check.err(Some(&payees_span), "payments.payees", why);
    let given = raw.payees.into_inner();
    if given.is_empty() {
        return Err(wrong_payees(
            "name who may be paid: a server's origin (https://api.example.com) or an address".into(),
        ));
    }
    if given.len() > MAX_PAYEES {
        return Err(wrong_payees(format!("at most {MAX_PAYEES}")));
    }
    let mut payees = Vec::with_capacity(given.len());
    for payee in given {
        let payee = payee.trim();
        let normal = if payee.contains("://") {
            let url = reqwest::Url::parse(payee).map_err(|e| wrong_payees(format!("'{payee}' is not a URL ({e})")))?;
            let bare = url.path() == "/" && url.query().is_none() && url.username().is_empty();
            if !matches!(url.scheme(), "http" | "https") || !bare {
                return Err(wrong_payees(format!(
                    "'{payee}': a server is named by its origin alone (https://host[:port])"
                )));
            }
            origin_of(payee).ok_or_else(|| wrong_payees(format!("'{payee}' names no host")))?
        } else if [Network::Base, Network::Solana]
            .iter()
            .any(|n| crate::chains::validate_address(*n, payee).is_ok())
        {
            payee.to_string()
        } else {
            return Err(wrong_payees(format!(
                "'{payee}' is neither a server's origin nor a Base or Solana address"
            )));
        };
        if !payees.contains(&normal) {
            payees.push(normal);
        }
    }
    let named = |list: Option<Spanned<Vec<String>>>| match list {
        Some(list) => (Some(list.span()), list.into_inner()),
        None => (None, Vec::new()),
    };
    let (commands_span, mut paying) = named(raw.commands);
    let (servers_span, mut servers) = named(raw.mcp_servers);
    dedup(&mut paying);
    dedup(&mut servers);
    if paying.is_empty() && servers.is_empty() {
        return Err(check.err(
            Some(&span),
            "payments.commands",
            "name the commands whose requests may pay (or mcp_servers, the remote servers whose tools may be bought)",
        ));
    }
    if let Some(unknown) = paying.iter().find(|name| !commands.iter().any(|c| &c.name == *name)) {
        return Err(check.err(
            commands_span.as_ref(),
            "payments.commands",
            format!("'{unknown}' is not one of this agent's commands"),
        ));
    }
    if let Some(unknown) = servers
        .iter()
        .find(|name| !mcp_servers.iter().any(|s| &s.name == *name))
    {
        return Err(check.err(
            servers_span.as_ref(),
            "payments.mcp_servers",
            format!("'{unknown}' is not one of this agent's [[mcp_servers]]"),
        ));
    }
    let mut networks = raw.networks.unwrap_or_else(|| vec![Network::Base, Network::Solana]);
    dedup(&mut networks);
    if networks.is_empty() {
        return Err(check.err(Some(&span), "payments.networks", "name at least one network"));
    }
    Ok(SpendingPolicy {
        max_per_payment,
        max_per_day,
        payees,
        commands: paying,
        mcp_servers: servers,
        networks,
    })
}
