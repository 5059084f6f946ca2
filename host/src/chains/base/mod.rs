//! Base (an EVM chain): ETH and USDC (an ERC-20 with EIP-3009) balances, and USDC
//! `transfer` calls sent as EIP-1559 transactions signed here with alloy.

use std::str::FromStr;
use std::time::Duration;

use alloy::consensus::transaction::SignerRecoverable;
use alloy::consensus::{SignableTransaction, Transaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::{Decodable2718, Encodable2718};
use alloy::primitives::{Address, Bytes, TxKind, U256};
use alloy::signers::SignerSync;
use alloy::sol_types::SolCall;
use serde_json::{Value, json};

mod authorization_logs;
mod authorizations;
mod permit2;
mod upto_settlements;

pub use super::gas_caps::GasCaps;
use super::gas_caps::over_gas_cap;
use super::rpc::JsonRpc;
use super::{Balances, ChainError, ChainFuture, Landing, SignedTx, UsdcChain, WalletKey, decimal_text};
use crate::domain::Network;
use crate::money::MicroUsdc;
pub use authorization_logs::AuthorizationTransfer;
pub use authorizations::{Authorization, AuthorizationUsed, Transfer, WalletVerdict};
pub use permit2::{Eip2612Approval, PERMIT2, PermitAuthorization, UPTO_PROXY};
pub use upto_settlements::UptoPaid;

alloy::sol! {
    /// The part of USDC (Circle's FiatToken) this service calls.
    interface IUsdc {
        function balanceOf(address account) external view returns (uint256);
        function transfer(address to, uint256 value) external returns (bool);
    }
}

pub struct BaseConfig {
    pub rpc_url: String,
    pub chain_id: u64,
    pub usdc_address: String,
    /// The USDC contract's EIP-712 domain name and version (what payers sign over).
    pub usdc_domain: (String, String),
    /// Blocks on top of the one holding a transaction before it counts as done (1 = mined).
    pub confirmations: u64,
    pub caps: GasCaps,
    pub rpc_timeout: Duration,
}

/// OP Stack's GasPriceOracle predeploy (Base): the L1 data fee a transaction adds.
const GAS_PRICE_ORACLE: Address = alloy::primitives::address!("0x420000000000000000000000000000000000000F");

alloy::sol! {
    interface IGasPriceOracle {
        function getL1Fee(bytes data) external view returns (uint256);
    }
}

pub struct BaseChain {
    rpc: JsonRpc,
    chain_id: u64,
    usdc: Address,
    usdc_text: String,
    usdc_domain: (String, String),
    confirmations: u64,
    caps: GasCaps,
}

/// How many blocks a transaction's nonce must have been used by another before the
/// transaction counts as dropped (a receipt index lagging by fewer blocks cannot mislead).
const DROPPED_AFTER_BLOCKS: u64 = 10;

/// A chain whose latest block is this old mines nothing now: its latest state is as settled
/// as `DROPPED_AFTER_BLOCKS` would make it.
const IDLE_SECS: u64 = 30;

/// Whether a node's error says a call ran out of the gas it was given.
pub(super) fn out_of_gas(message: &str) -> bool {
    let message = message.to_lowercase();
    message.contains("gas required exceeds") || message.contains("out of gas") || message.contains("outofgas")
}

/// `0x` and 40 hex digits; mixed case must be a valid EIP-55 checksum; not the zero address.
pub fn parse_address(text: &str) -> Result<Address, String> {
    let digits = text
        .strip_prefix("0x")
        .ok_or_else(|| "not a Base address: it must start with 0x".to_string())?;
    if digits.len() != 40 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err("not a Base address: it must be 0x followed by 40 hex digits".into());
    }
    let mixed_case = digits.chars().any(|c| c.is_ascii_lowercase()) && digits.chars().any(|c| c.is_ascii_uppercase());
    let address = if mixed_case {
        Address::parse_checksummed(text, None)
            .map_err(|_| "not a Base address: its EIP-55 checksum (the mixed case) is wrong".to_string())?
    } else {
        Address::from_str(text).map_err(|e| format!("not a Base address: {e}"))?
    };
    if address.is_zero() {
        return Err("the zero address cannot receive USDC".into());
    }
    Ok(address)
}

pub(super) fn quantity_u64(value: &Value, what: &str) -> Result<u64, ChainError> {
    value
        .as_str()
        .and_then(|q| u64::from_str_radix(q.trim_start_matches("0x"), 16).ok())
        .ok_or_else(|| ChainError::Unavailable(format!("{what}: unexpected answer {value}")))
}

fn quantity_u256(value: &Value, what: &str) -> Result<U256, ChainError> {
    value
        .as_str()
        .and_then(|q| U256::from_str(q).ok())
        .ok_or_else(|| ChainError::Unavailable(format!("{what}: unexpected answer {value}")))
}

impl BaseChain {
    pub fn new(config: &BaseConfig) -> Result<BaseChain, String> {
        let usdc = parse_address(&config.usdc_address).map_err(|e| format!("base_usdc_address: {e}"))?;
        Ok(BaseChain {
            rpc: JsonRpc::new(&config.rpc_url, config.rpc_timeout, "base"),
            chain_id: config.chain_id,
            usdc,
            usdc_text: usdc.to_checksum(None),
            usdc_domain: config.usdc_domain.clone(),
            confirmations: config.confirmations.max(1),
            caps: config.caps,
        })
    }

    pub fn rpc(&self) -> &JsonRpc {
        &self.rpc
    }

    pub fn chain_id(&self) -> u64 {
        self.chain_id
    }

    pub fn usdc(&self) -> Address {
        self.usdc
    }

    /// The USDC contract's EIP-712 domain: name and version.
    pub fn usdc_domain(&self) -> (&str, &str) {
        (&self.usdc_domain.0, &self.usdc_domain.1)
    }

    /// `eth_call` against the latest block; the raw return data.
    pub async fn call(&self, to: Address, data: Vec<u8>) -> Result<Vec<u8>, ChainError> {
        let reply: String = self
            .rpc
            .call(
                "eth_call",
                json!([{ "to": to.to_string(), "data": Bytes::from(data).to_string() }, "latest"]),
            )
            .await?;
        hex::decode(reply.trim_start_matches("0x"))
            .map_err(|_| ChainError::Unavailable(format!("eth_call: not hex: {reply}")))
    }

    pub async fn usdc_of(&self, owner: Address) -> Result<MicroUsdc, ChainError> {
        let data = self
            .call(self.usdc, IUsdc::balanceOfCall { account: owner }.abi_encode())
            .await?;
        if data.len() != 32 {
            return Err(ChainError::Unavailable(format!(
                "balanceOf on {} answered {} bytes; is it the USDC contract?",
                self.usdc_text,
                data.len()
            )));
        }
        let amount = U256::from_be_slice(&data);
        u64::try_from(amount)
            .map(MicroUsdc)
            .map_err(|_| ChainError::Unavailable(format!("balanceOf: {amount} does not fit")))
    }

    pub async fn wei_of(&self, owner: Address) -> Result<U256, ChainError> {
        let reply: Value = self
            .rpc
            .call("eth_getBalance", json!([owner.to_string(), "latest"]))
            .await?;
        quantity_u256(&reply, "eth_getBalance")
    }

    /// The latest base fee and the node's suggested tip, per gas.
    pub async fn fees(&self) -> Result<(u128, u128), ChainError> {
        let block: Value = self.rpc.call("eth_getBlockByNumber", json!(["latest", false])).await?;
        let base_fee = u128::from(quantity_u64(&block["baseFeePerGas"], "eth_getBlockByNumber")?);
        let priority = match self.rpc.call::<Value>("eth_maxPriorityFeePerGas", json!([])).await {
            Ok(tip) => u128::from(quantity_u64(&tip, "eth_maxPriorityFeePerGas")?),
            // Nodes without the method: a small tip, as Base's sequencer needs little.
            Err(_) => 1_000_000,
        };
        Ok((base_fee, priority))
    }

    /// The L1 data fee an OP Stack chain adds for `raw` (the signed transaction); none on a
    /// chain without the oracle (a local node).
    async fn l1_fee(&self, raw: &[u8]) -> Result<u128, ChainError> {
        let data = IGasPriceOracle::getL1FeeCall {
            data: Bytes::copy_from_slice(raw),
        }
        .abi_encode();
        match self.call(GAS_PRICE_ORACLE, data).await {
            Ok(fee) if fee.len() == 32 => Ok(u128::try_from(U256::from_be_slice(&fee)).unwrap_or(u128::MAX)),
            Ok(_) => Ok(0),
            Err(ChainError::Unavailable(reason)) => Err(ChainError::Unavailable(reason)),
            // Reverted or refused: not an OP Stack chain.
            Err(_) => Ok(0),
        }
    }

    pub async fn pending_nonce(&self, address: Address) -> Result<u64, ChainError> {
        let reply: Value = self
            .rpc
            .call("eth_getTransactionCount", json!([address.to_string(), "pending"]))
            .await?;
        quantity_u64(&reply, "eth_getTransactionCount")
    }

    /// Estimates gas for a call from `from`, at most `cap`: a revert is the chain refusing
    /// it, and so is a call that needs more than the cap (the node stops looking there).
    pub async fn estimate_gas(&self, from: Address, to: TxKind, data: &[u8], cap: u64) -> Result<u64, ChainError> {
        let mut call = json!({ "from": from.to_string(), "data": Bytes::copy_from_slice(data).to_string(),
                               "gas": format!("0x{cap:x}") });
        if let TxKind::Call(to) = to {
            call["to"] = json!(to.to_string());
        }
        let estimate = self.rpc.call::<Value>("eth_estimateGas", json!([call])).await;
        match estimate {
            Ok(gas) => quantity_u64(&gas, "eth_estimateGas"),
            Err(err) => match err.node_error() {
                Some((_, message, _)) if message.contains("revert") => {
                    Err(ChainError::Refused(format!("the USDC contract refuses it: {message}")))
                }
                Some((_, message, _)) if out_of_gas(message) => Err(over_gas_cap(cap)),
                _ => Err(err.into()),
            },
        }
    }

    /// Signs a call as an EIP-1559 transaction from `key`, within the gas caps, checking it
    /// can pay for gas.
    pub async fn sign_call(
        &self,
        signer: &alloy::signers::local::PrivateKeySigner,
        to: Address,
        data: Vec<u8>,
    ) -> Result<SignedTx, ChainError> {
        self.sign_tx(signer, TxKind::Call(to), data).await
    }

    /// Signs a call or a contract creation as [`BaseChain::sign_call`] does.
    async fn sign_tx(
        &self,
        signer: &alloy::signers::local::PrivateKeySigner,
        to: TxKind,
        data: Vec<u8>,
    ) -> Result<SignedTx, ChainError> {
        let from = signer.address();
        let caps = &self.caps;
        let gas_limit = caps.gas_limit(self.estimate_gas(from, to, &data, caps.gas).await?)?;
        let (base_fee, tip) = self.fees().await?;
        let (max_fee, priority) = caps.fees(base_fee, tip)?;
        let needed = U256::from(gas_limit) * U256::from(max_fee);
        let wei = self.wei_of(from).await?;
        if wei < needed {
            let eth = |w: U256| decimal_text(u128::try_from(w).unwrap_or(u128::MAX), 18);
            return Err(ChainError::Refused(format!(
                "Insufficient ETH for gas: at least {} ETH is needed, the wallet has {} ETH",
                eth(needed),
                eth(wei)
            )));
        }
        let tx = TxEip1559 {
            chain_id: self.chain_id,
            nonce: self.pending_nonce(from).await?,
            gas_limit,
            max_fee_per_gas: max_fee,
            max_priority_fee_per_gas: priority,
            to,
            value: U256::ZERO,
            access_list: Default::default(),
            input: data.into(),
        };
        let signature = signer
            .sign_hash_sync(&tx.signature_hash())
            .map_err(|e| ChainError::Refused(format!("signing failed: {e}")))?;
        let envelope = TxEnvelope::Eip1559(tx.into_signed(signature));
        let raw = envelope.encoded_2718();
        caps.within_fee(gas_limit, max_fee, self.l1_fee(&raw).await?)?;
        Ok(SignedTx {
            id: envelope.tx_hash().to_string(),
            raw: Bytes::from(raw).to_string(),
            valid_until: None,
        })
    }

    pub async fn send_raw(&self, raw: &str) -> Result<(), ChainError> {
        match self.rpc.call::<Value>("eth_sendRawTransaction", json!([raw])).await {
            Ok(_) => Ok(()),
            Err(err) => match err.node_error() {
                Some((_, message, _)) if message.contains("already known") => Ok(()),
                Some((_, message, _)) if message.contains("nonce too low") => Err(ChainError::NonceUsed(format!(
                    "the chain refused the transaction: {message}"
                ))),
                Some((_, message, _))
                    if message.contains("insufficient funds")
                        || message.contains("revert")
                        || message.contains("underpriced") =>
                {
                    Err(ChainError::Refused(format!(
                        "the chain refused the transaction: {message}"
                    )))
                }
                _ => Err(err.into()),
            },
        }
    }

    pub async fn status_of(&self, tx: &SignedTx) -> Result<Landing, ChainError> {
        let receipt: Value = self.rpc.call("eth_getTransactionReceipt", json!([tx.id])).await?;
        if receipt.is_null() {
            return self.unmined(tx).await;
        }
        if quantity_u64(&receipt["status"], "eth_getTransactionReceipt")? != 1 {
            return Ok(Landing::Failed("the transaction reverted on chain".into()));
        }
        let mined_in = quantity_u64(&receipt["blockNumber"], "eth_getTransactionReceipt")?;
        let head: Value = self.rpc.call("eth_blockNumber", json!([])).await?;
        let head = quantity_u64(&head, "eth_blockNumber")?;
        Ok(if head + 1 >= mined_in + self.confirmations {
            Landing::Confirmed
        } else {
            Landing::Pending
        })
    }

    /// Not mined: still waiting in the pool, or its nonce went to another transaction. A
    /// node's receipt index can lag its state, so a used nonce alone proves nothing: the
    /// transaction is dropped only when its nonce was used as of `DROPPED_AFTER_BLOCKS`
    /// blocks ago and no receipt shows now.
    async fn unmined(&self, tx: &SignedTx) -> Result<Landing, ChainError> {
        let known: Value = self.rpc.call("eth_getTransactionByHash", json!([tx.id])).await?;
        if !known.is_null() {
            return Ok(Landing::Pending);
        }
        let raw = hex::decode(tx.raw.trim_start_matches("0x"))
            .map_err(|_| ChainError::Unavailable("the stored transaction is not hex".into()))?;
        let envelope = TxEnvelope::decode_2718(&mut raw.as_slice())
            .map_err(|e| ChainError::Unavailable(format!("the stored transaction does not decode: {e}")))?;
        let sender = envelope
            .recover_signer()
            .map_err(|e| ChainError::Unavailable(format!("the stored transaction's signer: {e}")))?;
        // The state as of `DROPPED_AFTER_BLOCKS` ago; on a chain that mined nothing for
        // `IDLE_SECS` (a quiet devnet, a local node), the latest, which is that old already.
        let head: Value = self.rpc.call("eth_getBlockByNumber", json!(["latest", false])).await?;
        let (number, time) = (
            quantity_u64(&head["number"], "eth_getBlockByNumber")?,
            quantity_u64(&head["timestamp"], "eth_getBlockByNumber")?,
        );
        let idle = (crate::clock::now_ms() / 1000) as u64 >= time.saturating_add(IDLE_SECS);
        let settled_block = match number.checked_sub(DROPPED_AFTER_BLOCKS) {
            _ if idle => number,
            Some(block) => block,
            None => return Ok(Landing::Pending),
        };
        let used: Value = self
            .rpc
            .call(
                "eth_getTransactionCount",
                json!([sender.to_string(), format!("0x{settled_block:x}")]),
            )
            .await?;
        if quantity_u64(&used, "eth_getTransactionCount")? > envelope.nonce() {
            return Ok(Landing::Dropped(
                "the transaction was dropped: another transaction used its nonce".into(),
            ));
        }
        Ok(Landing::Pending)
    }
}

impl UsdcChain for BaseChain {
    fn network(&self) -> Network {
        Network::Base
    }

    fn usdc_asset(&self) -> &str {
        &self.usdc_text
    }

    /// EIP-681: a call of the token's `transfer` to `address`, on this chain id.
    fn funding_uri(&self, address: &str) -> String {
        format!(
            "ethereum:{}@{}/transfer?address={address}",
            self.usdc_text, self.chain_id
        )
    }

    fn network_id(&self) -> ChainFuture<'_, String> {
        let id = format!("eip155:{}", self.chain_id);
        Box::pin(async move { Ok(id) })
    }

    fn balances<'a>(&'a self, owner: &'a str) -> ChainFuture<'a, Balances> {
        Box::pin(async move {
            let owner = parse_address(owner).map_err(ChainError::Refused)?;
            let usdc = self.usdc_of(owner).await?;
            let wei = self.wei_of(owner).await?;
            Ok(Balances {
                usdc,
                native: u128::try_from(wei).unwrap_or(u128::MAX),
            })
        })
    }

    fn sign_transfer<'a>(
        &'a self,
        key: &'a WalletKey,
        recipient: &'a str,
        amount: MicroUsdc,
        _create_account: bool,
    ) -> ChainFuture<'a, SignedTx> {
        Box::pin(async move {
            let WalletKey::Base(signer) = key else {
                return Err(ChainError::Refused("not a Base wallet key".into()));
            };
            let to = parse_address(recipient).map_err(ChainError::Refused)?;
            let available = self.usdc_of(signer.address()).await?;
            if available < amount {
                return Err(ChainError::Refused(format!(
                    "Insufficient USDC: the transfer needs {amount} USDC, the wallet has {available} USDC"
                )));
            }
            let data = IUsdc::transferCall {
                to,
                value: U256::from(amount.0),
            }
            .abi_encode();
            self.sign_call(signer, self.usdc, data).await
        })
    }

    fn can_receive<'a>(&'a self, recipient: &'a str) -> ChainFuture<'a, bool> {
        // An EVM address holds any token as it is.
        Box::pin(async move { parse_address(recipient).map(|_| true).map_err(ChainError::Refused) })
    }

    fn submit<'a>(&'a self, tx: &'a SignedTx) -> ChainFuture<'a, ()> {
        Box::pin(self.send_raw(&tx.raw))
    }

    fn landing<'a>(&'a self, tx: &'a SignedTx) -> ChainFuture<'a, Landing> {
        Box::pin(self.status_of(tx))
    }

    /// Gas used at its effective price, plus the L1 data fee an OP Stack chain such as
    /// Base adds to its receipts.
    fn fee_paid<'a>(&'a self, transaction: &'a str) -> ChainFuture<'a, Option<u128>> {
        Box::pin(async move {
            let receipt: Value = self.rpc.call("eth_getTransactionReceipt", json!([transaction])).await?;
            if receipt.is_null() {
                return Ok(None);
            }
            let quantity = |field: &str| -> u128 {
                receipt[field]
                    .as_str()
                    .and_then(|q| u128::from_str_radix(q.trim_start_matches("0x"), 16).ok())
                    .unwrap_or(0)
            };
            let gas = quantity("gasUsed").saturating_mul(quantity("effectiveGasPrice"));
            Ok(Some(gas.saturating_add(quantity("l1Fee"))))
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn checksummed_addresses_parse() {
        // Anvil's second dev account, as wallets print it.
        assert!(super::parse_address("0x70997970C51812dc3A010C7d01b50e0d17dc79C8").is_ok());
        assert!(super::parse_address("0x70997970C51812dc3A010C7d01b50e0d17dc79c8").is_err());
    }
}
