//! Finding a Solana transaction by a signature other than its first: the account's
//! history, page by page, back to a time. Recovery uses it for a payment whose fee payer a
//! facilitator signed, known only by the payer's signature.

use serde_json::{Value, json};
use solana_pubkey::Pubkey;

use super::ChainError;
use super::solana::SolanaChain;

impl SolanaChain {
    /// The transaction that touched `account` since `since_secs` (Unix), carries
    /// `signature` among its signers' and succeeded: its id (first signature). Finds a
    /// transaction whose fee payer someone else signed (a facilitator), knowing only the
    /// payer's signature. Every transaction of the account back to `since_secs` is looked
    /// at, up to `LOOKUP_LIMIT`: past that the answer is an error, never a "not found".
    pub async fn succeeded_with_signature(
        &self,
        account: &Pubkey,
        signature: &str,
        since_secs: u64,
    ) -> Result<Option<String>, ChainError> {
        const PAGE: usize = 100;
        const LOOKUP_LIMIT: usize = 1_000;
        // The node keeps no address index at `processed`.
        let commitment = match self.commitment() {
            "processed" => "confirmed",
            other => other,
        };
        let mut before: Option<String> = None;
        let mut looked = 0;
        loop {
            let mut options = json!({ "limit": PAGE, "commitment": commitment });
            if let Some(before) = &before {
                options["before"] = json!(before);
            }
            let page: Vec<Value> = self
                .rpc()
                .call("getSignaturesForAddress", json!([account.to_string(), options]))
                .await?;
            for entry in &page {
                // Newest first: past `since`, nothing older can be it.
                if entry["blockTime"].as_u64().is_some_and(|t| t < since_secs) {
                    return Ok(None);
                }
                let Some(id) = entry["signature"].as_str() else {
                    continue;
                };
                before = Some(id.to_string());
                looked += 1;
                if looked > LOOKUP_LIMIT {
                    return Err(ChainError::Unavailable(format!(
                        "more than {LOOKUP_LIMIT} transactions of {account} since the payment; not searched further"
                    )));
                }
                if !entry["err"].is_null() {
                    continue;
                }
                let found: Value = self
                    .rpc()
                    .call(
                        "getTransaction",
                        json!([id, { "encoding": "json", "commitment": commitment, "maxSupportedTransactionVersion": 0 }]),
                    )
                    .await?;
                let signed = found["transaction"]["signatures"]
                    .as_array()
                    .is_some_and(|all| all.iter().any(|s| s.as_str() == Some(signature)));
                if signed && found["meta"]["err"].is_null() {
                    return Ok(Some(id.to_string()));
                }
            }
            if page.len() < PAGE {
                return Ok(None);
            }
        }
    }
}
