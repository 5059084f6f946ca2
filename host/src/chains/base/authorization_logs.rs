//! Which transfer an executed EIP-3009 authorization made, read from a transaction's
//! receipt: one transaction may execute many authorizations, and each pays only its own.

use std::str::FromStr;

use alloy::primitives::{Address, B256, U256};
use alloy::sol_types::SolEvent;
use serde_json::Value;

use super::authorizations::{AuthorizationUsed, Transfer};

/// The `Transfer` an executed authorization made: its transaction, and its log's index in
/// the block (one transaction may execute many authorizations; each transfer pays once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationTransfer {
    pub transaction: String,
    pub log_index: u64,
}

/// What an authorization must have paid: `value` USDC from `from` to `to`, under `nonce`.
pub(super) struct Paid {
    pub usdc: Address,
    pub from: Address,
    pub nonce: B256,
    pub to: Address,
    pub value: U256,
}

/// The log index of the transfer that the authorization made in this receipt. USDC logs
/// `AuthorizationUsed(from, nonce)` and then, in the same call, the `Transfer` it makes, so
/// only the log right after that one counts: a `Transfer(from → to, value)` elsewhere in
/// the transaction was paid by another authorization (or another call), not by this one.
pub(super) fn authorization_transfer(receipt: &Value, paid: &Paid) -> Option<u64> {
    let logs = receipt["logs"].as_array()?;
    let of_usdc_with = |log: &Value, topics: [B256; 3]| {
        let emitter = log["address"].as_str().and_then(|a| Address::from_str(a).ok());
        let found: Vec<Option<B256>> = log["topics"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t.as_str().and_then(|t| B256::from_str(t).ok()))
            .collect();
        emitter == Some(paid.usdc) && found.len() == 3 && found.iter().zip(topics).all(|(f, t)| *f == Some(t))
    };
    let used = [AuthorizationUsed::SIGNATURE_HASH, paid.from.into_word(), paid.nonce];
    let at = logs.iter().position(|log| of_usdc_with(log, used))?;
    let transfer = logs.get(at + 1)?;
    let moved = [Transfer::SIGNATURE_HASH, paid.from.into_word(), paid.to.into_word()];
    let value = transfer["data"].as_str().and_then(|d| U256::from_str(d).ok());
    if !of_usdc_with(transfer, moved) || value != Some(paid.value) {
        return None;
    }
    transfer["logIndex"]
        .as_str()
        .and_then(|q| u64::from_str_radix(q.trim_start_matches("0x"), 16).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const USDC: &str = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";

    fn word(address: Address) -> String {
        address.into_word().to_string()
    }

    fn used_log(index: u64, from: Address, nonce: B256) -> Value {
        json!({ "address": USDC.to_lowercase(), "logIndex": format!("{index:#x}"),
                "topics": [AuthorizationUsed::SIGNATURE_HASH.to_string(), word(from), nonce.to_string()], "data": "0x" })
    }

    fn transfer_log(index: u64, emitter: &str, from: Address, to: Address, value: u64) -> Value {
        json!({ "address": emitter, "logIndex": format!("{index:#x}"),
                "topics": [Transfer::SIGNATURE_HASH.to_string(), word(from), word(to)],
                "data": B256::from(U256::from(value)).to_string() })
    }

    fn paid(from: Address, nonce: B256, to: Address, value: u64) -> Paid {
        Paid {
            usdc: USDC.parse().unwrap(),
            from,
            nonce,
            to,
            value: U256::from(value),
        }
    }

    /// The audit's attack: one transaction pays the agent with N1 and burns N2 paying the
    /// payer nothing. N1's transfer is found; N2 paid nothing, whatever else the transaction did.
    #[test]
    fn only_the_transfer_right_after_an_authorization_is_what_it_paid() {
        let (payer, agent) = (Address::repeat_byte(0x11), Address::repeat_byte(0x22));
        let (n1, n2) = (B256::repeat_byte(1), B256::repeat_byte(2));
        let receipt = json!({ "logs": [
            used_log(4, payer, n1), transfer_log(5, USDC, payer, agent, 10_000),
            used_log(6, payer, n2), transfer_log(7, USDC, payer, payer, 0),
        ]});
        assert_eq!(
            authorization_transfer(&receipt, &paid(payer, n1, agent, 10_000)),
            Some(5)
        );
        assert_eq!(authorization_transfer(&receipt, &paid(payer, n2, agent, 10_000)), None);
        assert_eq!(authorization_transfer(&receipt, &paid(payer, n1, agent, 9_999)), None);
    }

    /// A facilitator settles several payers in one transaction: each is its own transfer.
    #[test]
    fn a_batch_of_payers_pays_each_once_by_its_own_log() {
        let (ann, bob, agent) = (
            Address::repeat_byte(1),
            Address::repeat_byte(2),
            Address::repeat_byte(3),
        );
        let nonce = B256::repeat_byte(9);
        let receipt = json!({ "logs": [
            used_log(0, ann, nonce), transfer_log(1, USDC, ann, agent, 10_000),
            used_log(2, bob, nonce), transfer_log(3, USDC, bob, agent, 10_000),
        ]});
        assert_eq!(
            authorization_transfer(&receipt, &paid(ann, nonce, agent, 10_000)),
            Some(1)
        );
        assert_eq!(
            authorization_transfer(&receipt, &paid(bob, nonce, agent, 10_000)),
            Some(3)
        );
    }

    /// A `Transfer` logged by another contract (a look-alike token) pays nothing.
    #[test]
    fn a_transfer_logged_by_another_contract_pays_nothing() {
        let (payer, agent, nonce) = (Address::repeat_byte(1), Address::repeat_byte(2), B256::repeat_byte(3));
        let fake = "0x000000000000000000000000000000000000beef";
        let receipt = json!({ "logs": [used_log(0, payer, nonce), transfer_log(1, fake, payer, agent, 10_000)] });
        assert_eq!(
            authorization_transfer(&receipt, &paid(payer, nonce, agent, 10_000)),
            None
        );
    }
}
