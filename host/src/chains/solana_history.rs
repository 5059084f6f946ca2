//! Finding a Solana transaction by something other than its first signature: a payment
//! whose fee payer a facilitator signed is known by its message (what the payer signed),
//! never by an id we can compute. Recovery and the facilitator check use it.
//!
//! The search is bounded by where the settlement can be, not by how many transactions the
//! account has: a settlement lands within its blockhash's life (150 blocks), so once that
//! has passed, nothing in a later slot is read (it is passed over in the listing), and
//! nothing from before the payment was made. Anyone can send dust to an account, so the
//! listing and the reading are bounded too; what cannot be decided within the bounds is a
//! [`ChainError::Undecidable`], for the operator, never a "not found".

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use solana_pubkey::Pubkey;
use solana_transaction::versioned::VersionedTransaction;

use super::ChainError;
use super::solana::SolanaChain;

/// Pages of the account's history read (each one call, up to `PAGE` entries).
const MOST_PAGES: usize = 20;
/// Transactions inside the window fetched and compared.
const MOST_LOOKED_AT: usize = 300;
const PAGE: usize = 1_000;
/// Slots added to the computed last slot: nodes behind a balancer may answer the height
/// and the slot from different views, and `valid_until` is our node's estimate.
const SLOT_MARGIN: u64 = 150;

/// What identifies the transaction sought.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    /// The SHA-256 of its message: whoever signed it, and however.
    Message([u8; 32]),
    /// One of its signatures (payments recorded before messages identified them).
    Signature(String),
}

/// Where a settlement can be: not before `since_secs` (Unix), not after `last_slot`.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub since_secs: u64,
    /// `None` while its blockhash is still valid: it may land any time now.
    pub last_slot: Option<u64>,
}

/// The SHA-256 of a transaction's message: what its signers signed.
pub fn message_hash(tx: &VersionedTransaction) -> [u8; 32] {
    Sha256::digest(tx.message.serialize()).into()
}

impl SolanaChain {
    /// The last slot a transaction whose blockhash is valid up to block height `valid_until`
    /// can have landed in; `None` while that height is not passed. Each block since then
    /// took a slot of its own, so it is at most the current slot less the blocks since.
    pub async fn last_slot_at_height(&self, valid_until: u64) -> Result<Option<u64>, ChainError> {
        // Height first: a slot read later is only larger, and the bound only looser.
        let height = self.block_height().await?;
        if height <= valid_until {
            return Ok(None);
        }
        let slot: u64 = self
            .rpc()
            .call("getSlot", json!([{ "commitment": self.commitment() }]))
            .await?;
        Ok(Some(
            slot.saturating_sub(height - valid_until).saturating_add(SLOT_MARGIN),
        ))
    }

    /// Transaction `id`, if it landed, succeeded and is the one `wanted`.
    pub async fn landed_as_wanted(&self, id: &str, wanted: &Wanted) -> Result<bool, ChainError> {
        let found: Value = self
            .rpc()
            .call(
                "getTransaction",
                json!([id, { "encoding": "base64", "commitment": self.history_commitment(), "maxSupportedTransactionVersion": 0 }]),
            )
            .await?;
        if found.is_null() || !found["meta"]["err"].is_null() {
            return Ok(false);
        }
        let Some(tx) = found["transaction"][0].as_str().and_then(decode) else {
            return Err(ChainError::Unavailable(format!(
                "the node answered transaction {id} in a form not understood"
            )));
        };
        Ok(match wanted {
            Wanted::Message(hash) => message_hash(&tx) == *hash,
            Wanted::Signature(signature) => tx.signatures.iter().any(|s| s.to_string() == *signature),
        })
    }

    /// The transaction that touched `account` within `window`, is the one `wanted` and
    /// succeeded: its id (first signature).
    pub async fn find_landed(
        &self,
        account: &Pubkey,
        wanted: &Wanted,
        window: Window,
    ) -> Result<Option<String>, ChainError> {
        let undecidable = |what: String| {
            Err(ChainError::Undecidable(format!(
                "{what} of {account} where the payment could have landed; not searched further"
            )))
        };
        let mut before: Option<String> = None;
        let (mut pages, mut looked_at) = (0, 0);
        loop {
            pages += 1;
            if pages > MOST_PAGES {
                return undecidable(format!("more than {} transactions", MOST_PAGES * PAGE));
            }
            let mut options = json!({ "limit": PAGE, "commitment": self.history_commitment() });
            if let Some(before) = &before {
                options["before"] = json!(before);
            }
            let page: Vec<Value> = self
                .rpc()
                .call("getSignaturesForAddress", json!([account.to_string(), options]))
                .await?;
            for entry in &page {
                let Some(id) = entry["signature"].as_str() else {
                    continue;
                };
                before = Some(id.to_string());
                // Newest first: past `since`, nothing older can be it.
                if entry["blockTime"].as_u64().is_some_and(|t| t < window.since_secs) {
                    return Ok(None);
                }
                let slot = entry["slot"].as_u64().unwrap_or(u64::MAX);
                if window.last_slot.is_some_and(|last| slot > last) {
                    continue; // after its blockhash expired: not it
                }
                if !entry["err"].is_null() {
                    continue;
                }
                looked_at += 1;
                if looked_at > MOST_LOOKED_AT {
                    return undecidable(format!("more than {MOST_LOOKED_AT} transactions"));
                }
                if self.landed_as_wanted(id, wanted).await? {
                    return Ok(Some(id.to_string()));
                }
            }
            if page.len() < PAGE {
                return Ok(None);
            }
        }
    }

    /// The node keeps no address index at `processed`.
    fn history_commitment(&self) -> &str {
        match self.commitment() {
            "processed" => "confirmed",
            other => other,
        }
    }
}

fn decode(base64_tx: &str) -> Option<VersionedTransaction> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD.decode(base64_tx).ok()?;
    bincode::deserialize(&bytes).ok()
}

#[cfg(test)]
mod tests {
    //! The search's bounds, against a node answering the two calls it makes in their wire
    //! form: a history far longer than any real chain here could fill in a test's time.
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::{Value, json};
    use solana_hash::Hash;
    use solana_message::{Message, VersionedMessage};
    use solana_transaction::versioned::VersionedTransaction;

    use super::*;

    /// One history entry: its slot, and whether it is the payment sought.
    #[derive(Clone, Copy)]
    struct Entry {
        slot: u64,
        sought: bool,
    }

    /// A transaction per entry: the payment's own message, or a memo of its index.
    fn transaction(sought: bool, index: usize) -> VersionedTransaction {
        let memo = Pubkey::from_str_const("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr");
        let data = if sought {
            b"pay".to_vec()
        } else {
            index.to_le_bytes().to_vec()
        };
        let payer = Pubkey::new_from_array([1; 32]);
        let instruction = solana_instruction::Instruction::new_with_bytes(memo, &data, vec![]);
        let message = Message::new_with_blockhash(&[instruction], Some(&payer), &Hash::new_from_array([2; 32]));
        VersionedTransaction {
            signatures: vec![solana_signature::Signature::default()],
            message: VersionedMessage::Legacy(message),
        }
    }

    /// A node whose account history is `entries`, newest first; counts `getTransaction`.
    async fn node(entries: Vec<Entry>) -> (SolanaChain, Arc<AtomicUsize>) {
        let fetched = Arc::new(AtomicUsize::new(0));
        let counter = fetched.clone();
        let entries = Arc::new(entries);
        let answer = move |axum::Json(call): axum::Json<Value>| {
            let (entries, fetched) = (entries.clone(), counter.clone());
            async move {
                let params = &call["params"];
                let result = match call["method"].as_str().unwrap() {
                    "getSignaturesForAddress" => {
                        let limit = params[1]["limit"].as_u64().unwrap() as usize;
                        let from = params[1]["before"]
                            .as_str()
                            .map_or(0, |id| id.parse::<usize>().unwrap() + 1);
                        let page: Vec<Value> = (from..entries.len().min(from + limit))
                            .map(|i| json!({ "signature": i.to_string(), "slot": entries[i].slot, "blockTime": 2_000_000_000u64, "err": null }))
                            .collect();
                        json!(page)
                    }
                    "getTransaction" => {
                        fetched.fetch_add(1, Ordering::SeqCst);
                        let i: usize = params[0].as_str().unwrap().parse().unwrap();
                        let tx = transaction(entries[i].sought, i);
                        use base64::Engine;
                        let raw = base64::engine::general_purpose::STANDARD.encode(bincode::serialize(&tx).unwrap());
                        json!({ "slot": entries[i].slot, "meta": { "err": null }, "transaction": [raw, "base64"] })
                    }
                    other => panic!("not asked here: {other}"),
                };
                axum::Json(json!({ "jsonrpc": "2.0", "id": call["id"], "result": result }))
            }
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(listener, axum::Router::new().route("/", axum::routing::post(answer)))
                .await
                .unwrap();
        });
        let chain = SolanaChain::new(&super::super::solana::SolanaConfig {
            rpc_url: url,
            usdc_mint: "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v".into(),
            commitment: "confirmed".into(),
            rpc_timeout: std::time::Duration::from_secs(10),
            network_id: Some("solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp".into()),
        })
        .unwrap();
        (chain, fetched)
    }

    fn sought() -> Wanted {
        Wanted::Message(message_hash(&transaction(true, 0)))
    }

    fn window(last_slot: Option<u64>) -> Window {
        Window {
            since_secs: 1_000_000_000,
            last_slot,
        }
    }

    /// Dust sent after the payment's window closed is passed over unread, however much.
    #[tokio::test]
    async fn dust_after_the_window_is_passed_over_unread() {
        let later = Entry {
            slot: 900,
            sought: false,
        };
        let mut entries = vec![later; 5 * PAGE];
        entries.extend([
            Entry {
                slot: 150,
                sought: false,
            },
            Entry {
                slot: 140,
                sought: true,
            },
        ]);
        let (chain, fetched) = node(entries).await;
        let found = chain
            .find_landed(&Pubkey::new_unique(), &sought(), window(Some(200)))
            .await
            .unwrap();
        assert_eq!(found.as_deref(), Some((5 * PAGE + 1).to_string().as_str()));
        assert_eq!(fetched.load(Ordering::SeqCst), 2, "only the window's two were read");
    }

    /// Past the bounds, the answer is "cannot tell", never "not found".
    #[tokio::test]
    async fn a_history_past_the_bounds_is_undecidable_not_absent() {
        let later = vec![
            Entry {
                slot: 900,
                sought: false
            };
            MOST_PAGES * PAGE + 1
        ];
        let (chain, fetched) = node(later).await;
        let passed = chain
            .find_landed(&Pubkey::new_unique(), &sought(), window(Some(200)))
            .await;
        assert!(matches!(passed, Err(ChainError::Undecidable(_))), "{passed:?}");
        assert_eq!(fetched.load(Ordering::SeqCst), 0);

        let crowded = vec![
            Entry {
                slot: 100,
                sought: false
            };
            MOST_LOOKED_AT + 1
        ];
        let (chain, fetched) = node(crowded).await;
        let looked = chain.find_landed(&Pubkey::new_unique(), &sought(), window(None)).await;
        assert!(matches!(looked, Err(ChainError::Undecidable(_))), "{looked:?}");
        assert_eq!(fetched.load(Ordering::SeqCst), MOST_LOOKED_AT);

        let (chain, _) = node(vec![
            Entry {
                slot: 100,
                sought: false
            };
            3
        ])
        .await;
        let absent = chain.find_landed(&Pubkey::new_unique(), &sought(), window(None)).await;
        assert_eq!(absent.unwrap(), None, "a short history without it: not found");
    }
}
