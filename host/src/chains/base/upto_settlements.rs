//! Finding on chain the settlement of an `upto` authorization that someone else sent (a
//! facilitator): its word is not enough. A settlement counts when a landed transaction
//! called the upto proxy's `settle` for this payer's authorization (its Permit2 nonce), for
//! the amount charged, to the agent, and USDC logged that transfer.

use std::str::FromStr;

use alloy::primitives::{Address, U256};
use alloy::sol_types::{SolCall, SolEvent};
use serde_json::{Value, json};

use super::authorizations::Transfer;
use super::permit2::{IUptoProxy, UPTO_PROXY};
use super::{AuthorizationTransfer, BaseChain, quantity_u64};
use crate::chains::ChainError;

/// What a settlement must have taken: `value` USDC from `from` to `to`, under the Permit2
/// `nonce` of `from`.
#[derive(Debug, Clone, Copy)]
pub struct UptoPaid {
    pub from: Address,
    pub nonce: U256,
    pub to: Address,
    pub value: U256,
}

impl BaseChain {
    /// The landed settlement of `paid`: the `claimed` transaction when it is one, else
    /// searched among USDC's transfers of that value from the payer to the agent since
    /// `not_before` (at most `MAX_LOG_BLOCKS` back, counting a block a second), once Permit2
    /// shows the nonce used. `None`: none shows. `Undecidable`: more candidates than are
    /// looked at.
    pub async fn upto_settlement(
        &self,
        paid: &UptoPaid,
        claimed: Option<&str>,
        not_before: u64,
    ) -> Result<Option<AuthorizationTransfer>, ChainError> {
        // A facilitator's word may be anything: only a transaction hash is asked about, and
        // a node that cannot find it is no answer.
        if let Some(hash) = claimed.filter(|h| is_tx_hash(h))
            && let Ok(Some(found)) = self.settles(hash, paid).await
        {
            return Ok(Some(found));
        }
        // Unused, it settled nothing: no search.
        if !self.permit2_nonce_used(paid.from, paid.nonce).await? {
            return Ok(None);
        }
        const MAX_CANDIDATES: usize = 20;
        let topics = [Transfer::SIGNATURE_HASH, paid.from.into_word(), paid.to.into_word()];
        let logs = self.usdc_logs_since(topics, not_before).await?;
        // Only transfers of the amount charged can be its settlement.
        let mut candidates: Vec<&str> = logs
            .iter()
            .filter(|log| log["removed"] != Value::Bool(true))
            .filter(|log| log["data"].as_str().and_then(|d| U256::from_str(d).ok()) == Some(paid.value))
            .filter_map(|log| log["transactionHash"].as_str())
            .collect();
        candidates.dedup();
        if candidates.len() > MAX_CANDIDATES {
            return Err(ChainError::Undecidable(format!(
                "{} transfers of {} from the payer to the agent to look through",
                candidates.len(),
                paid.value
            )));
        }
        for hash in candidates {
            if let Some(found) = self.settles(hash, paid).await? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// Whether transaction `hash` landed and settled `paid`: its call is the proxy's
    /// `settle` of this authorization for this amount, and its receipt logs the transfer.
    async fn settles(&self, hash: &str, paid: &UptoPaid) -> Result<Option<AuthorizationTransfer>, ChainError> {
        let tx: Value = self.rpc.call("eth_getTransactionByHash", json!([hash])).await?;
        let to = tx["to"].as_str().and_then(|a| Address::from_str(a).ok());
        let input = tx["input"]
            .as_str()
            .and_then(|hex| alloy::primitives::hex::decode(hex).ok());
        let (Some(UPTO_PROXY), Some(input)) = (to, input) else {
            return Ok(None);
        };
        // `settle`, or `settleWithPermit` (the payer's permit for Permit2 first).
        let settled = match IUptoProxy::settleCall::abi_decode(&input) {
            Ok(call) => (call.owner, call.permit.nonce, call.amount, call.witness.to),
            Err(_) => match IUptoProxy::settleWithPermitCall::abi_decode(&input) {
                Ok(call) => (call.owner, call.permit.nonce, call.amount, call.witness.to),
                Err(_) => return Ok(None),
            },
        };
        // For this payer's authorization, this amount and this recipient.
        if settled != (paid.from, paid.nonce, paid.value, paid.to) {
            return Ok(None);
        }
        let receipt: Value = self.rpc.call("eth_getTransactionReceipt", json!([hash])).await?;
        if receipt.is_null() || quantity_u64(&receipt["status"], "eth_getTransactionReceipt")? != 1 {
            return Ok(None);
        }
        Ok(
            transfer_in(&receipt, self.usdc, paid).map(|log_index| AuthorizationTransfer {
                transaction: hash.to_string(),
                log_index,
            }),
        )
    }
}

fn is_tx_hash(text: &str) -> bool {
    text.len() == 66 && text.starts_with("0x") && text[2..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// The index of USDC's `Transfer(from → to, value)` log in the receipt.
fn transfer_in(receipt: &Value, usdc: Address, paid: &UptoPaid) -> Option<u64> {
    let wanted = [Transfer::SIGNATURE_HASH, paid.from.into_word(), paid.to.into_word()];
    receipt["logs"].as_array()?.iter().find_map(|log| {
        let emitter = log["address"].as_str().and_then(|a| Address::from_str(a).ok());
        let topics: Vec<_> = log["topics"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t.as_str().and_then(|t| alloy::primitives::B256::from_str(t).ok()))
            .collect();
        let value = log["data"].as_str().and_then(|d| U256::from_str(d).ok());
        (emitter == Some(usdc) && topics == wanted && value == Some(paid.value))
            .then(|| log["logIndex"].as_str())
            .flatten()
            .and_then(|q| u64::from_str_radix(q.trim_start_matches("0x"), 16).ok())
    })
}
