//! The edges to the two chains. Services see one narrow trait, [`UsdcChain`]: read
//! balances, sign a USDC transfer, send it, ask where it stands. Each chain speaks
//! JSON-RPC through [`rpc::JsonRpc`]; its own rules live in `solana.rs` and `base.rs`.

pub mod base;
mod gas_caps;
pub mod keys;
pub mod networks;
pub mod rpc;
pub mod smart_wallets;
pub mod solana;
pub mod solana_history;
pub mod solana_payment;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::domain::Network;
use crate::money::MicroUsdc;

pub use keys::WalletKey;

pub type ChainFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ChainError>> + Send + 'a>>;

#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// The chain could not be asked, or answered nonsense: a 500 naming the network.
    #[error("{0}")]
    Unavailable(String),
    /// The transfer cannot happen for a reason the caller can fix (funds, fees, address).
    #[error("{0}")]
    Refused(String),
    /// A send refused because the transaction's nonce is used (Base: "nonce too low"): by
    /// this very transaction, mined already, or by another. Never a verdict on its own:
    /// only the transaction's landing tells which.
    #[error("{0}")]
    NonceUsed(String),
    /// The chain holds the answer, but among more than a bounded search looks at (an
    /// account flooded with transactions): for the operator, never a "not found".
    #[error("{0}")]
    Undecidable(String),
}

impl From<rpc::RpcError> for ChainError {
    fn from(err: rpc::RpcError) -> Self {
        ChainError::Unavailable(err.to_string())
    }
}

/// What a wallet holds, in integer base units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Balances {
    pub usdc: MicroUsdc,
    /// Lamports on Solana, wei on Base.
    pub native: u128,
}

/// A signed USDC transfer, not necessarily sent. Its `id` (Solana signature, EVM
/// transaction hash) is known before sending, so it can be recorded first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedTx {
    pub id: String,
    /// The wire transaction (base64 on Solana, 0x-hex on Base), kept to re-send it.
    pub raw: String,
    /// Solana: the last block height at which it can still land. Base: none.
    pub valid_until: Option<u64>,
}

/// Where a sent transaction stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Landing {
    /// Reached the configured confirmation level and succeeded.
    Confirmed,
    /// Landed and failed: the signer paid its fee. The text says why.
    Failed(String),
    /// Can never land (expired, or its nonce went to another transaction): nobody paid.
    Dropped(String),
    /// Not decided yet.
    Pending,
}

impl Landing {
    /// Landed and failed, or never will land: why.
    pub fn failure(&self) -> Option<&str> {
        match self {
            Landing::Failed(why) | Landing::Dropped(why) => Some(why),
            Landing::Confirmed | Landing::Pending => None,
        }
    }
}

pub trait UsdcChain: Send + Sync {
    fn network(&self) -> Network;
    /// The USDC asset this chain is configured with (mint or contract address).
    fn usdc_asset(&self) -> &str;
    /// A payment request for USDC to `address` that wallets open (and scan as a QR code):
    /// Solana Pay on Solana, EIP-681 on an EVM chain.
    fn funding_uri(&self, address: &str) -> String;
    /// The chain's CAIP-2 id, read from the chain configured (`eip155:8453`,
    /// `solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp`), so a testnet is never named mainnet.
    fn network_id(&self) -> ChainFuture<'_, String>;
    fn balances<'a>(&'a self, owner: &'a str) -> ChainFuture<'a, Balances>;
    /// Checks funds and fees, then builds and signs a transfer of `amount` USDC from
    /// `key` to `recipient`. Nothing is sent. Where the recipient needs an account to hold
    /// USDC (Solana), it is created at the sender's expense only with `create_account`.
    fn sign_transfer<'a>(
        &'a self,
        key: &'a WalletKey,
        recipient: &'a str,
        amount: MicroUsdc,
        create_account: bool,
    ) -> ChainFuture<'a, SignedTx>;
    /// Whether `recipient` can receive USDC without anything being created for it.
    fn can_receive<'a>(&'a self, recipient: &'a str) -> ChainFuture<'a, bool>;
    /// Sends it; sending the same transaction again is harmless.
    fn submit<'a>(&'a self, tx: &'a SignedTx) -> ChainFuture<'a, ()>;
    fn landing<'a>(&'a self, tx: &'a SignedTx) -> ChainFuture<'a, Landing>;
    /// What the landed transaction cost its fee payer, in the chain's smallest unit
    /// (lamports, wei); `None` when the chain does not know the transaction.
    fn fee_paid<'a>(&'a self, transaction: &'a str) -> ChainFuture<'a, Option<u128>>;
}

/// Explorer links: templates with `{address}` / `{signature}` and `{cluster}`.
#[derive(Debug, Clone)]
pub struct Explorer {
    pub address_url: String,
    pub tx_url: String,
    pub cluster: String,
}

impl Explorer {
    pub fn address(&self, address: &str) -> String {
        fill(&self.address_url, "address", address, &self.cluster)
    }

    pub fn tx(&self, signature: &str) -> String {
        fill(&self.tx_url, "signature", signature, &self.cluster)
    }
}

/// Both chains, as configured.
pub struct Chains {
    pub solana: solana::SolanaChain,
    pub base: base::BaseChain,
    pub solana_explorer: Explorer,
    pub base_explorer: Explorer,
    /// The networks as configured (what the nodes must serve).
    pub solana_network: networks::SolanaNetwork,
    pub base_network: networks::BaseNetwork,
    /// Unit tests: a scripted chain that stands in for its network wherever services ask
    /// [`Chains::get`] (refunds, transfers, reconciliation), so none reaches a real node.
    #[cfg(test)]
    pub stand_in: std::sync::OnceLock<std::sync::Arc<dyn UsdcChain>>,
}

impl Chains {
    pub fn get(&self, network: Network) -> &dyn UsdcChain {
        #[cfg(test)]
        if let Some(stand_in) = self.stand_in.get().filter(|chain| chain.network() == network) {
            return stand_in.as_ref();
        }
        match network {
            Network::Solana => &self.solana,
            Network::Base => &self.base,
        }
    }

    pub fn explorer(&self, network: Network) -> &Explorer {
        match network {
            Network::Solana => &self.solana_explorer,
            Network::Base => &self.base_explorer,
        }
    }
}

/// Polls until the transaction is decided or `timeout` passes (then `Pending`).
pub async fn wait_for_landing(chain: &dyn UsdcChain, tx: &SignedTx, timeout: Duration) -> Result<Landing, ChainError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut pause = Duration::from_millis(100);
    loop {
        match chain.landing(tx).await? {
            Landing::Pending if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            decided => return Ok(decided),
        }
    }
}

/// Checks that `text` is an address on `network`: base58 of 32 bytes on Solana; on Base
/// `0x` and 40 hex digits, with a valid EIP-55 checksum when the letters are mixed case.
pub fn validate_address(network: Network, text: &str) -> Result<(), String> {
    match network {
        Network::Solana => solana::parse_address(text).map(|_| ()),
        Network::Base => base::parse_address(text).map(|_| ()),
    }
}

/// `units` of a coin with `decimals` as exact decimal text (`1500000000`, 9 → `1.5`).
pub fn decimal_text(units: u128, decimals: u32) -> String {
    let scale = 10u128.pow(decimals);
    let (whole, frac) = (units / scale, units % scale);
    if frac == 0 {
        return whole.to_string();
    }
    let frac = format!("{frac:0width$}", width = decimals as usize);
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

fn fill(template: &str, key: &str, value: &str, cluster: &str) -> String {
    template
        .replace(&format!("{{{key}}}"), value)
        .replace("{cluster}", cluster)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_text_is_exact() {
        assert_eq!(decimal_text(0, 9), "0");
        assert_eq!(decimal_text(1, 9), "0.000000001");
        assert_eq!(decimal_text(1_500_000_000, 9), "1.5");
        assert_eq!(decimal_text(10_000_000_000_000_000_001, 18), "10.000000000000000001");
        assert_eq!(decimal_text(u128::from(u64::MAX), 6), "18446744073709.551615");
    }

    #[test]
    fn addresses_are_checked_per_network() {
        assert!(validate_address(Network::Solana, "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v").is_ok());
        assert!(validate_address(Network::Solana, "EPjFWdd5AufqSSqeM2qN1xzybapC8G4w").is_err());
        assert!(validate_address(Network::Solana, "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913").is_err());
        // Base: checksummed, all lower and all upper are fine; a broken checksum is not.
        assert!(validate_address(Network::Base, "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913").is_ok());
        assert!(validate_address(Network::Base, "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913").is_ok());
        assert!(validate_address(Network::Base, "0x833589FCD6EDB6E08F4C7C32D4F71B54BDA02913").is_ok());
        let err = validate_address(Network::Base, "0x833589fcD6eDb6E08f4c7C32D4f71b54bdA02913").unwrap_err();
        assert!(err.contains("checksum"), "{err}");
        let err = validate_address(Network::Base, "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA0291").unwrap_err();
        assert!(err.contains("40 hex"), "{err}");
        assert!(validate_address(Network::Base, "833589fcd6edb6e08f4c7c32d4f71b54bda02913").is_err());
        assert!(validate_address(Network::Base, "0x0000000000000000000000000000000000000000").is_err());
    }
}
