//! Solana: SOL and USDC (an SPL Token mint) balances, `TransferChecked` transfers that
//! create the recipient's associated token account when it is missing.

use std::str::FromStr;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};
use solana_hash::Hash;
use solana_message::Message;
use solana_pubkey::Pubkey;
use solana_transaction::Transaction;
use spl_associated_token_account_interface::address::get_associated_token_address_with_program_id;
use spl_associated_token_account_interface::instruction::create_associated_token_account_idempotent;

use super::rpc::JsonRpc;
use super::{Balances, ChainError, ChainFuture, Landing, SignedTx, UsdcChain, WalletKey, decimal_text};
use crate::domain::Network;
use crate::money::MicroUsdc;

/// USDC's decimals; the configured mint must have them.
const USDC_DECIMALS: u8 = 6;
/// Size of an SPL token account, for its rent.
const TOKEN_ACCOUNT_LEN: u64 = 165;
/// The API's minimum SOL for a transfer's fee: 0.00001 SOL.
pub const MIN_FEE_LAMPORTS: u64 = 10_000;

pub struct SolanaConfig {
    pub rpc_url: String,
    pub usdc_mint: String,
    /// `processed`, `confirmed` or `finalized`: when a transfer counts as done.
    pub commitment: String,
    pub rpc_timeout: Duration,
    /// The CAIP-2 id to use instead of the one derived from the genesis hash: for a fork
    /// that stands in for another chain (a local Surfpool standing in for mainnet).
    pub network_id: Option<String>,
}

pub struct SolanaChain {
    rpc: JsonRpc,
    mint: Pubkey,
    mint_text: String,
    commitment: String,
    /// Asked of the chain once: a chain's genesis never changes.
    network_id: tokio::sync::OnceCell<String>,
    /// When asking last failed: not asked again for a while, so a chain that is down does
    /// not slow every price list.
    network_id_failed: std::sync::Mutex<Option<std::time::Instant>>,
}

/// How long the genesis hash is waited for, and how long after a failure it is not asked.
const NETWORK_ID_WAIT: Duration = Duration::from_secs(3);
const NETWORK_ID_RETRY: Duration = Duration::from_secs(10);

/// CAIP-2 names a Solana chain by the first 32 characters of its genesis hash.
pub fn caip2_of_genesis(genesis_hash: &str) -> String {
    format!("solana:{}", genesis_hash.get(..32).unwrap_or(genesis_hash))
}

/// `solana:` and 1 to 32 base58 characters, as CAIP-2 allows.
fn check_network_id(id: &str) -> Result<(), String> {
    let reference = id.strip_prefix("solana:").unwrap_or_default();
    let base58 = |c: char| c.is_ascii_alphanumeric() && !matches!(c, '0' | 'O' | 'I' | 'l');
    if reference.is_empty() || reference.len() > 32 || !reference.chars().all(base58) {
        return Err(format!(
            "solana_network_id: '{id}' is not a CAIP-2 Solana id (solana: and up to 32 base58 characters of the genesis hash)"
        ));
    }
    Ok(())
}

/// A base58 public key of 32 bytes.
pub fn parse_address(text: &str) -> Result<Pubkey, String> {
    let bytes = bs58::decode(text)
        .into_vec()
        .map_err(|_| "not a Solana address: it must be base58".to_string())?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|b: Vec<u8>| format!("not a Solana address: it decodes to {} bytes, not 32", b.len()))?;
    Ok(Pubkey::new_from_array(bytes))
}

/// The owner's associated token account for `mint` under the classic Token program.
pub fn associated_token_address(owner: &Pubkey, mint: &Pubkey) -> Pubkey {
    associated_token_address_with_program(owner, mint, &spl_token_interface::ID)
}

/// The same under a given token program (Token or Token-2022).
pub fn associated_token_address_with_program(owner: &Pubkey, mint: &Pubkey, program: &Pubkey) -> Pubkey {
    get_associated_token_address_with_program_id(owner, mint, program)
}

/// The program log lines of a simulation that say what went wrong.
fn telling_logs(simulation: &Value) -> String {
    simulation["logs"]
        .as_array()
        .map(|logs| {
            logs.iter()
                .filter_map(Value::as_str)
                .filter(|l| l.contains("rror") || l.contains("insufficient"))
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default()
}

impl SolanaChain {
    pub fn new(config: &SolanaConfig) -> Result<SolanaChain, String> {
        let mint = parse_address(&config.usdc_mint).map_err(|e| format!("solana_usdc_mint: {e}"))?;
        if !matches!(config.commitment.as_str(), "processed" | "confirmed" | "finalized") {
            return Err(format!(
                "solana_commitment: '{}' is not processed, confirmed or finalized",
                config.commitment
            ));
        }
        let network_id = tokio::sync::OnceCell::new();
        if let Some(id) = &config.network_id {
            check_network_id(id)?;
            let _ = network_id.set(id.clone());
        }
        Ok(SolanaChain {
            rpc: JsonRpc::new(&config.rpc_url, config.rpc_timeout, "solana"),
            mint,
            mint_text: config.usdc_mint.clone(),
            commitment: config.commitment.clone(),
            network_id,
            network_id_failed: std::sync::Mutex::new(None),
        })
    }

    pub fn rpc(&self) -> &JsonRpc {
        &self.rpc
    }

    pub fn commitment(&self) -> &str {
        &self.commitment
    }

    pub fn mint(&self) -> Pubkey {
        self.mint
    }

    pub async fn blockhash_is_valid(&self, blockhash: &Hash) -> Result<bool, ChainError> {
        let reply: Value = self
            .rpc
            .call(
                "isBlockhashValid",
                json!([blockhash.to_string(), { "commitment": self.commitment }]),
            )
            .await?;
        Ok(reply["value"].as_bool().unwrap_or(false))
    }

    /// Simulates a fully signed wire transaction with signature checks on; the chain's
    /// reason (and the relevant log lines) when it would fail.
    pub async fn simulate(&self, raw_base64: &str) -> Result<Option<String>, ChainError> {
        let reply: Value = self
            .rpc
            .call(
                "simulateTransaction",
                json!([raw_base64, { "encoding": "base64", "sigVerify": true, "commitment": self.commitment }]),
            )
            .await?;
        let err = &reply["value"]["err"];
        if err.is_null() {
            return Ok(None);
        }
        let logs = telling_logs(&reply["value"]);
        Ok(Some(if logs.is_empty() {
            err.to_string()
        } else {
            format!("{err} ({logs})")
        }))
    }

    pub async fn lamports(&self, owner: &Pubkey) -> Result<u64, ChainError> {
        let reply: Value = self
            .rpc
            .call(
                "getBalance",
                json!([owner.to_string(), { "commitment": self.commitment }]),
            )
            .await?;
        reply["value"]
            .as_u64()
            .ok_or_else(|| ChainError::Unavailable(format!("getBalance: unexpected answer {reply}")))
    }

    /// The raw data of an account, or `None` when it does not exist.
    pub async fn account_data(&self, address: &Pubkey) -> Result<Option<(Pubkey, Vec<u8>)>, ChainError> {
        let reply: Value = self
            .rpc
            .call(
                "getAccountInfo",
                json!([address.to_string(), { "encoding": "base64", "commitment": self.commitment }]),
            )
            .await?;
        let value = &reply["value"];
        if value.is_null() {
            return Ok(None);
        }
        let bad = || ChainError::Unavailable(format!("getAccountInfo: unexpected answer {reply}"));
        let owner = value["owner"]
            .as_str()
            .and_then(|o| Pubkey::from_str(o).ok())
            .ok_or_else(bad)?;
        let data = value["data"][0]
            .as_str()
            .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
            .ok_or_else(bad)?;
        Ok(Some((owner, data)))
    }

    /// The USDC held in `owner`'s associated token account; none is zero.
    pub async fn usdc_of(&self, owner: &Pubkey) -> Result<(MicroUsdc, bool), ChainError> {
        let ata = associated_token_address(owner, &self.mint);
        match self.account_data(&ata).await? {
            None => Ok((MicroUsdc::ZERO, false)),
            Some((program, data)) => {
                // SPL token account: mint [0..32], owner [32..64], amount [64..72] (LE).
                if program != spl_token_interface::ID || data.len() < 72 || data[..32] != self.mint.to_bytes() {
                    return Err(ChainError::Unavailable(format!(
                        "{ata} is not a token account of the USDC mint {}",
                        self.mint_text
                    )));
                }
                let amount = u64::from_le_bytes(data[64..72].try_into().expect("8 bytes"));
                Ok((MicroUsdc(amount), true))
            }
        }
    }

    async fn rent_for_token_account(&self) -> Result<u64, ChainError> {
        let lamports: u64 = self
            .rpc
            .call("getMinimumBalanceForRentExemption", json!([TOKEN_ACCOUNT_LEN]))
            .await?;
        Ok(lamports)
    }

    pub async fn latest_blockhash(&self) -> Result<(Hash, u64), ChainError> {
        let reply: Value = self
            .rpc
            .call("getLatestBlockhash", json!([{ "commitment": self.commitment }]))
            .await?;
        let bad = || ChainError::Unavailable(format!("getLatestBlockhash: unexpected answer {reply}"));
        let hash = reply["value"]["blockhash"]
            .as_str()
            .and_then(|h| Hash::from_str(h).ok())
            .ok_or_else(bad)?;
        let last_valid = reply["value"]["lastValidBlockHeight"].as_u64().ok_or_else(bad)?;
        Ok((hash, last_valid))
    }

    /// The fee the chain charges for `message`, in lamports.
    async fn fee_for(&self, message: &Message) -> Result<u64, ChainError> {
        let wire = bincode::serialize(message).map_err(|e| ChainError::Unavailable(e.to_string()))?;
        let encoded = base64::engine::general_purpose::STANDARD.encode(wire);
        let reply: Value = self
            .rpc
            .call("getFeeForMessage", json!([encoded, { "commitment": self.commitment }]))
            .await?;
        // Null when the blockhash is unknown to the node: count the signature fee.
        Ok(reply["value"]
            .as_u64()
            .unwrap_or(5_000 * u64::from(message.header.num_required_signatures)))
    }

    async fn sign(
        &self,
        key: &WalletKey,
        recipient: &str,
        amount: MicroUsdc,
        create_account: bool,
    ) -> Result<SignedTx, ChainError> {
        let WalletKey::Solana(keypair) = key else {
            return Err(ChainError::Refused("not a Solana wallet key".into()));
        };
        let from = solana_signer::Signer::pubkey(keypair);
        let to = parse_address(recipient).map_err(ChainError::Refused)?;
        let source = associated_token_address(&from, &self.mint);
        let destination = associated_token_address(&to, &self.mint);

        let (available, _) = self.usdc_of(&from).await?;
        if available < amount {
            return Err(ChainError::Refused(format!(
                "Insufficient USDC: the transfer needs {amount} USDC, the wallet has {available} USDC"
            )));
        }
        let creates_account = self.account_data(&destination).await?.is_none();
        if creates_account && !create_account {
            return Err(ChainError::Refused(format!(
                "{recipient} has no USDC account, and this transfer does not create one"
            )));
        }
        let mut instructions = Vec::with_capacity(2);
        if creates_account {
            instructions.push(create_associated_token_account_idempotent(
                &from,
                &to,
                &self.mint,
                &spl_token_interface::ID,
            ));
        }
        instructions.push(
            spl_token_interface::instruction::transfer_checked(
                &spl_token_interface::ID,
                &source,
                &self.mint,
                &destination,
                &from,
                &[],
                amount.0,
                USDC_DECIMALS,
            )
            .map_err(|e| ChainError::Refused(e.to_string()))?,
        );
        let (blockhash, last_valid) = self.latest_blockhash().await?;
        let message = Message::new_with_blockhash(&instructions, Some(&from), &blockhash);

        let fee = self.fee_for(&message).await?.max(MIN_FEE_LAMPORTS);
        let rent = if creates_account {
            self.rent_for_token_account().await?
        } else {
            0
        };
        let lamports = self.lamports(&from).await?;
        if lamports < fee + rent {
            let sol = |l: u64| decimal_text(l.into(), 9);
            let mut reason = format!(
                "Insufficient SOL for the fee: at least {} SOL is needed",
                sol(MIN_FEE_LAMPORTS)
            );
            if creates_account {
                reason.push_str(&format!(
                    ", plus {} SOL of rent to create the recipient's USDC token account ({} SOL in all)",
                    sol(rent),
                    sol(fee + rent)
                ));
            }
            reason.push_str(&format!("; the wallet has {} SOL", sol(lamports)));
            return Err(ChainError::Refused(reason));
        }

        let mut tx = Transaction::new_unsigned(message);
        tx.try_sign(&[keypair], blockhash)
            .map_err(|e| ChainError::Refused(format!("signing failed: {e}")))?;
        let wire = bincode::serialize(&tx).map_err(|e| ChainError::Unavailable(e.to_string()))?;
        Ok(SignedTx {
            id: tx.signatures[0].to_string(),
            raw: base64::engine::general_purpose::STANDARD.encode(wire),
            valid_until: Some(last_valid),
        })
    }

    /// Sends a wire transaction after the node's own simulation (preflight).
    pub async fn send_raw(&self, raw_base64: &str) -> Result<String, ChainError> {
        let sent = self
            .rpc
            .call::<String>(
                "sendTransaction",
                json!([raw_base64, {
                    "encoding": "base64",
                    "preflightCommitment": self.commitment,
                    "maxRetries": 5,
                }]),
            )
            .await;
        match sent {
            Ok(signature) => Ok(signature),
            Err(err) => match err.node_error() {
                Some((_, message, _)) if message.contains("already been processed") => {
                    // Sent before (a retry after a crash): its status tells the rest.
                    Ok(String::new())
                }
                // A refusal by the chain: preflight simulation failed (-32002), which is
                // also how an expired blockhash shows, or a signature did not verify (-32003).
                Some((-32002 | -32003, message, data)) => {
                    let logs = data.map(telling_logs).unwrap_or_default();
                    Err(ChainError::Refused(if logs.is_empty() {
                        format!("the chain refused the transaction: {message}")
                    } else {
                        format!("the chain refused the transaction: {message} ({logs})")
                    }))
                }
                _ => Err(err.into()),
            },
        }
    }

    /// The current block height, as blockhash expiry counts it.
    pub async fn block_height(&self) -> Result<u64, ChainError> {
        Ok(self
            .rpc
            .call("getBlockHeight", json!([{ "commitment": self.commitment }]))
            .await?)
    }

    pub async fn status_of(&self, signature: &str, valid_until: Option<u64>) -> Result<Landing, ChainError> {
        let reply: Value = self
            .rpc
            .call(
                "getSignatureStatuses",
                json!([[signature], { "searchTransactionHistory": true }]),
            )
            .await?;
        let status = &reply["value"][0];
        if status.is_null() {
            if let Some(last_valid) = valid_until {
                let height = self.block_height().await?;
                if height > last_valid {
                    return Ok(Landing::Dropped(
                        "the transaction expired without landing (its blockhash is too old)".into(),
                    ));
                }
            }
            return Ok(Landing::Pending);
        }
        if !status["err"].is_null() {
            return Ok(Landing::Failed(format!(
                "the transaction failed on chain: {}",
                status["err"]
            )));
        }
        let reached = |level: &str| match level {
            "processed" => 0,
            "confirmed" => 1,
            "finalized" => 2,
            _ => -1,
        };
        let level = status["confirmationStatus"].as_str().unwrap_or("processed");
        Ok(if reached(level) >= reached(&self.commitment) {
            Landing::Confirmed
        } else {
            Landing::Pending
        })
    }
}

impl UsdcChain for SolanaChain {
    fn network(&self) -> Network {
        Network::Solana
    }

    fn usdc_asset(&self) -> &str {
        &self.mint_text
    }

    /// A Solana Pay transfer request for the USDC mint.
    fn funding_uri(&self, address: &str) -> String {
        format!("solana:{address}?spl-token={}", self.mint_text)
    }

    fn network_id(&self) -> ChainFuture<'_, String> {
        Box::pin(async move {
            if let Some(id) = self.network_id.get() {
                return Ok(id.clone());
            }
            let failed = || self.network_id_failed.lock().unwrap_or_else(|p| p.into_inner());
            if failed().is_some_and(|at| at.elapsed() < NETWORK_ID_RETRY) {
                return Err(ChainError::Unavailable(
                    "the chain's genesis hash is not known yet".into(),
                ));
            }
            let ask = self.network_id.get_or_try_init(|| async {
                let genesis: String = self.rpc.call("getGenesisHash", json!([])).await?;
                Ok::<_, ChainError>(caip2_of_genesis(&genesis))
            });
            let err = match tokio::time::timeout(NETWORK_ID_WAIT, ask).await {
                Ok(Ok(id)) => return Ok(id.clone()),
                Ok(Err(err)) => err,
                Err(_) => ChainError::Unavailable("getGenesisHash did not answer in time".into()),
            };
            *failed() = Some(std::time::Instant::now());
            tracing::warn!("the Solana chain's genesis hash is unknown, so x402 version 2 is not offered: {err}");
            Err(err)
        })
    }

    fn balances<'a>(&'a self, owner: &'a str) -> ChainFuture<'a, Balances> {
        Box::pin(async move {
            let owner = parse_address(owner).map_err(ChainError::Refused)?;
            let lamports = self.lamports(&owner).await?;
            let (usdc, _) = self.usdc_of(&owner).await?;
            Ok(Balances {
                usdc,
                native: lamports.into(),
            })
        })
    }

    fn sign_transfer<'a>(
        &'a self,
        key: &'a WalletKey,
        recipient: &'a str,
        amount: MicroUsdc,
        create_account: bool,
    ) -> ChainFuture<'a, SignedTx> {
        Box::pin(self.sign(key, recipient, amount, create_account))
    }

    fn can_receive<'a>(&'a self, recipient: &'a str) -> ChainFuture<'a, bool> {
        Box::pin(async move {
            let owner = parse_address(recipient).map_err(ChainError::Refused)?;
            let account = associated_token_address(&owner, &self.mint);
            Ok(self.account_data(&account).await?.is_some())
        })
    }

    fn submit<'a>(&'a self, tx: &'a SignedTx) -> ChainFuture<'a, ()> {
        Box::pin(async move { self.send_raw(&tx.raw).await.map(|_| ()) })
    }

    fn fee_paid<'a>(&'a self, transaction: &'a str) -> ChainFuture<'a, Option<u128>> {
        Box::pin(async move {
            let found: Value = self
                .rpc
                .call(
                    "getTransaction",
                    // getTransaction takes confirmed or finalized only.
                    json!([transaction, { "encoding": "json", "commitment": if self.commitment == "finalized" { "finalized" } else { "confirmed" }, "maxSupportedTransactionVersion": 0 }]),
                )
                .await?;
            Ok(found["meta"]["fee"].as_u64().map(u128::from))
        })
    }

    fn landing<'a>(&'a self, tx: &'a SignedTx) -> ChainFuture<'a, Landing> {
        Box::pin(self.status_of(&tx.id, tx.valid_until))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_is_named_by_its_genesis_hash() {
        // Mainnet's and devnet's genesis hashes, as getGenesisHash returns them.
        assert_eq!(
            caip2_of_genesis("5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d"),
            "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"
        );
        assert_eq!(
            caip2_of_genesis("EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG"),
            "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"
        );
        assert_eq!(check_network_id("solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"), Ok(()));
        for wrong in [
            "solana",
            "solana:",
            "mainnet",
            "solana:devnet0",
            "eip155:8453",
            "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpX",
        ] {
            assert!(check_network_id(wrong).is_err(), "{wrong}");
        }
    }
}
