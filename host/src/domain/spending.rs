//! What an agent's owner lets it spend on the paid (x402) services its commands call
//! (`[payments]` of its manifest, docs/spending.md): how much
//! one payment and one day may take, to whom, and for which commands.

use serde::{Deserialize, Serialize};

use super::Network;
use crate::money::MicroUsdc;

/// One day, for the daily maximum: the 24 hours before a payment, not a calendar day, so
/// that no midnight lets twice the maximum through in an hour.
pub const DAY_MS: i64 = 24 * 60 * 60 * 1000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendingPolicy {
    /// Most one payment may be.
    pub max_per_payment: MicroUsdc,
    /// Most all payments in any 24 hours may add up to, counted across hosts.
    pub max_per_day: MicroUsdc,
    /// Who may be paid: a server's origin (`https://api.example.com`, any address it names),
    /// or an address to pay (`payTo`), on any server.
    pub payees: Vec<String>,
    /// The commands whose outbound requests may pay.
    pub commands: Vec<String>,
    /// The remote MCP servers (`[[mcp_servers]]` names) whose paid tools its chat may buy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<String>,
    /// The networks it pays on (of those it holds a wallet on).
    pub networks: Vec<Network>,
}

impl SpendingPolicy {
    /// Whether `command`'s requests may pay.
    pub fn covers(&self, command: &str) -> bool {
        self.commands.iter().any(|c| c == command)
    }

    /// Whether the tools of the remote MCP server `server` may be paid for.
    pub fn covers_server(&self, server: &str) -> bool {
        self.mcp_servers.iter().any(|s| s == server)
    }

    /// Whether paying `pay_to` for something at a server of `origin` (`scheme://host[:port]`)
    /// is allowed: the server's origin, or the address itself, is listed.
    pub fn allows_payee(&self, pay_to: &str, origin: Option<&str>) -> bool {
        self.payees.iter().any(|payee| {
            if payee.contains("://") {
                origin == Some(payee.as_str())
            } else if payee.starts_with("0x") {
                // EVM addresses: the checksum's case is not part of the address.
                payee.eq_ignore_ascii_case(pay_to)
            } else {
                payee == pay_to
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(payees: &[&str]) -> SpendingPolicy {
        SpendingPolicy {
            max_per_payment: MicroUsdc(100_000),
            max_per_day: MicroUsdc(1_000_000),
            payees: payees.iter().map(|p| p.to_string()).collect(),
            commands: vec!["buy".into()],
            mcp_servers: vec!["shop".into()],
            networks: vec![Network::Base],
        }
    }

    fn at(url: &str) -> Option<String> {
        crate::outbound::origin_of(url)
    }

    #[test]
    fn a_payee_is_an_origin_or_an_address() {
        let by_origin = policy(&["https://api.example.com", "http://127.0.0.1:4021"]);
        assert!(by_origin.allows_payee("0xabc", at("https://api.example.com/v1/quote?x=1").as_deref()));
        assert!(by_origin.allows_payee("0xabc", at("https://API.example.com:443/other").as_deref()));
        assert!(by_origin.allows_payee("any", at("http://127.0.0.1:4021/x402/base/seller").as_deref()));
        // Another port, scheme or host is another server.
        assert!(!by_origin.allows_payee("0xabc", at("http://api.example.com/v1/quote").as_deref()));
        assert!(!by_origin.allows_payee("0xabc", at("http://127.0.0.1:4022/x").as_deref()));
        assert!(!by_origin.allows_payee("0xabc", at("https://api.example.com.evil.io/").as_deref()));

        let by_address = policy(&[
            "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
            "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
        ]);
        assert!(by_address.allows_payee(
            "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913",
            at("https://x.io/").as_deref()
        ));
        assert!(by_address.allows_payee(
            "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
            at("https://y.io/").as_deref()
        ));
        // Solana addresses are case-sensitive.
        assert!(!by_address.allows_payee(
            "epjfwdd5aufqssqem2qn1xzybapc8g4wegGkZwyTDt1v",
            at("https://y.io/").as_deref()
        ));
        assert!(!by_address.allows_payee(
            "0x0000000000000000000000000000000000000001",
            at("https://x.io/").as_deref()
        ));
    }

    #[test]
    fn only_named_commands_pay() {
        let p = policy(&[]);
        assert!(p.covers("buy"));
        assert!(!p.covers("buy_more"));
        assert!(p.covers_server("shop") && !p.covers_server("buy") && !p.covers("shop"));
    }
}
