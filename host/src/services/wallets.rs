//! Agent wallets: keys created or imported and sealed at rest, balances read from the
//! chain, USDC transfers that are a store row before they are sent and move forward
//! in one place (pending → confirmed | failed), one at a time per wallet.

use std::sync::Arc;
use std::time::Duration;

use super::{ServiceError, Services};
use crate::chains::{self, Balances, ChainError, Landing, SignedTx, WalletKey};
use crate::domain::Network;
use crate::money::MicroUsdc;
use crate::store::{NewTransfer, TransferKind, TransferRecord, TransferState, WalletRecord};

/// How long a transfer request waits for its confirmation before answering.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(90);

/// One lock per wallet (agent, network): its transfers go out one after another, so two
/// requests cannot both spend the same balance, and a Base nonce is never used twice.
pub type WalletLocks = super::locks::KeyedLocks<(String, Network)>;

/// The sealing purpose binds the agent and the network (a stored network name reseals alike).
pub(super) fn secret_kind(network: impl std::fmt::Display) -> String {
    format!("wallet:{network}")
}

/// What can go wrong with an agent's wallet. `ChainUnavailable` carries the node's own
/// words for the log; clients are told only which network failed ([`node_failed`]).
#[derive(Debug, thiserror::Error)]
pub enum WalletError {
    #[error("the agent has no {0} wallet")]
    NotConfigured(Network),
    #[error("the {network} RPC node failed: {detail}")]
    ChainUnavailable { network: Network, detail: String },
    /// The chain refused the transfer for a reason the caller can fix (funds, fees, address).
    #[error("{0}")]
    TransferFailed(String),
    #[error("the {network} transfer {id} was sent but not confirmed within {waited_secs} s")]
    NotConfirmed {
        network: Network,
        id: String,
        waited_secs: u64,
    },
}

/// A chain failure as a wallet error: refusals are the caller's to fix, anything else is
/// the node's.
pub(crate) fn chain_error(network: Network, err: ChainError) -> WalletError {
    match err {
        ChainError::Refused(message) | ChainError::NonceUsed(message) => WalletError::TransferFailed(message),
        ChainError::Unavailable(detail) | ChainError::Undecidable(detail) => {
            WalletError::ChainUnavailable { network, detail }
        }
    }
}

/// The agent's wallets (addresses; the sealed keys never leave the store's record).
pub async fn list(store: &crate::store::Store, agent_id: &str) -> Result<Vec<WalletRecord>, ServiceError> {
    Ok(store.wallets_of(agent_id).await?)
}

/// The agent's transfers, newest first.
pub async fn transfers(
    store: &crate::store::Store,
    agent_id: &str,
    limit: u32,
) -> Result<Vec<crate::store::TransferRecord>, ServiceError> {
    Ok(store.transfers_of(agent_id, limit).await?)
}

/// Creates (`secret` = None) or imports the agent's wallet on `network`; its address.
pub async fn add(
    services: &Services,
    agent_id: &str,
    network: Network,
    secret: Option<&str>,
) -> Result<String, ServiceError> {
    let key = match secret {
        None => WalletKey::generate(network),
        Some(text) => WalletKey::import(network, text)
            .map_err(|e| ServiceError::Validation(format!("Invalid {network} key: {e}")))?,
    };
    let address = key.address();
    let sealed = services
        .secrets
        .seal_for_agent(agent_id, &secret_kind(network), &key.secret());
    services
        .store
        .insert_wallet(
            WalletRecord {
                agent_id: agent_id.to_string(),
                network,
                address: address.clone(),
                secret: sealed,
                created_at: crate::clock::now_ms(),
            },
            services.sealing_key_check(),
        )
        .await?;
    Ok(address)
}

pub async fn wallet(services: &Services, agent_id: &str, network: Network) -> Result<WalletRecord, ServiceError> {
    services
        .store
        .wallet(agent_id, network)
        .await?
        .ok_or(ServiceError::Wallet(WalletError::NotConfigured(network)))
}

/// The address of the agent's wallet on `network` (what an offer names as `payTo`).
pub async fn address(services: &Services, agent_id: &str, network: Network) -> Result<Arc<String>, ServiceError> {
    services
        .store
        .wallet_address(agent_id, network)
        .await?
        .ok_or(ServiceError::Wallet(WalletError::NotConfigured(network)))
}

/// The wallet's key, opened only for as long as a signature takes.
pub(crate) fn open_key(services: &Services, wallet: &WalletRecord) -> Result<WalletKey, ServiceError> {
    open_key_with(&services.secrets, wallet)
}

/// [`open_key`], for a part of the host that holds the master key but not the services.
pub(crate) fn open_key_with(
    secrets: &crate::secrets::MasterKey,
    wallet: &WalletRecord,
) -> Result<WalletKey, ServiceError> {
    let secret = secrets
        .open_for_agent(&wallet.agent_id, &secret_kind(wallet.network), &wallet.secret)
        .map_err(|_| {
            ServiceError::SecretUnusable(format!(
                "The agent's {} wallet key cannot be decrypted: the master key is not the one it was sealed with, or the record was altered",
                wallet.network
            ))
        })?;
    WalletKey::from_secret(wallet.network, &secret).map_err(|e| {
        ServiceError::SecretUnusable(format!(
            "The agent's stored {} wallet key is unusable: {e}",
            wallet.network
        ))
    })
}

pub struct WalletBalance {
    pub wallet: WalletRecord,
    pub balances: Balances,
}

pub async fn balance(services: &Services, agent_id: &str, network: Network) -> Result<WalletBalance, ServiceError> {
    let wallet = wallet(services, agent_id, network).await?;
    let balances = services
        .chains
        .get(network)
        .balances(&wallet.address)
        .await
        .map_err(|e| match e {
            // A balance read has nothing to refuse: any failure is the node's.
            ChainError::Refused(detail)
            | ChainError::NonceUsed(detail)
            | ChainError::Unavailable(detail)
            | ChainError::Undecidable(detail) => WalletError::ChainUnavailable { network, detail },
        })?;
    Ok(WalletBalance { wallet, balances })
}

/// One wallet as the `balance` built-in is told of it (the plugin words the answer).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WalletFact {
    pub network: Network,
    /// The agent has no wallet on this network (listed only when it was asked for).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub native_token: Option<&'static str>,
    /// Decimal text, as the chain holds it exactly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usdc: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub native: Option<String>,
    /// Why the balances could not be read, in words fit for the agent's user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The agent's balances for the `balance` built-in: one fact per wallet (or for `only`),
/// or what went wrong reading it.
pub async fn facts(
    services: &Services,
    agent_id: &str,
    only: Option<Network>,
) -> Result<Vec<WalletFact>, ServiceError> {
    let networks = match only {
        Some(network) => vec![network],
        None => vec![Network::Solana, Network::Base],
    };
    let mut facts = Vec::new();
    for network in networks {
        let mut fact = WalletFact {
            network,
            missing: false,
            address: None,
            native_token: None,
            usdc: None,
            native: None,
            error: None,
        };
        let Some(wallet) = services.store.wallet(agent_id, network).await? else {
            if only.is_some() {
                facts.push(WalletFact { missing: true, ..fact });
            }
            continue;
        };
        fact.native_token = Some(network.native_token());
        match services.chains.get(network).balances(&wallet.address).await {
            Ok(balances) => {
                fact.usdc = Some(balances.usdc.to_string());
                fact.native = Some(chains::decimal_text(balances.native, network.native_decimals()));
            }
            Err(err) => {
                tracing::warn!(%network, agent = agent_id, "balance for the built-in failed: {err}");
                fact.error = Some(format!("the {network} node did not answer"));
            }
        }
        fact.address = Some(wallet.address);
        facts.push(fact);
    }
    Ok(facts)
}

pub fn new_transfer_id() -> String {
    format!("tr_{}", crate::random::hex_token(12))
}

pub struct TransferOrder {
    /// The transfer's id, when the caller must be able to find it after a crash (a
    /// refund names it before it exists); a fresh one otherwise.
    pub id: Option<String>,
    pub agent_id: String,
    pub network: Network,
    pub kind: TransferKind,
    pub recipient: String,
    pub amount: MicroUsdc,
    pub memo: Option<String>,
    /// Pay for the recipient's USDC account when it has none (Solana). Never for a refund:
    /// a payer could close it and keep the rent, again and again.
    pub create_account: bool,
}

/// Sends USDC and waits for the configured confirmation. The row exists before anything
/// is signed; the signature is stored before the transaction is sent.
pub async fn transfer(services: &Services, order: TransferOrder) -> Result<TransferRecord, ServiceError> {
    let network = order.network;
    chains::validate_address(network, &order.recipient)
        .map_err(|e| ServiceError::Validation(format!("Invalid field 'recipientAddress': {e}")))?;
    let wallet = wallet(services, &order.agent_id, network).await?;
    let key = open_key(services, &wallet)?;
    if wallet.address == order.recipient {
        return Err(ServiceError::Validation(
            "Invalid field 'recipientAddress': it is the agent's own wallet".into(),
        ));
    }

    let _one_at_a_time = services.wallet_locks.lock((order.agent_id.clone(), network)).await?;

    let id = order.id.clone().unwrap_or_else(new_transfer_id);
    let store = &services.store;
    store
        .insert_transfer(NewTransfer {
            id: id.clone(),
            agent_id: order.agent_id.clone(),
            network,
            kind: order.kind,
            sender: wallet.address.clone(),
            recipient: order.recipient.clone(),
            amount: order.amount,
            memo: order.memo.clone(),
        })
        .await?;
    crate::faults::crash_point("transfer:after_record");

    let chain = services.chains.get(network);
    let fail = |reason: String| store.finish_transfer(&id, TransferState::Failed, Some(reason));
    let signed = match chain
        .sign_transfer(&key, &order.recipient, order.amount, order.create_account)
        .await
    {
        Ok(signed) => signed,
        Err(err) => {
            fail(err.to_string()).await?;
            return Err(chain_error(network, err).into());
        }
    };
    drop(key);
    store
        .set_transfer_signed(&id, &signed.id, &signed.raw, signed.valid_until)
        .await?;
    crate::faults::crash_point("transfer:after_sign");
    match chain.submit(&signed).await {
        // "Nonce too low": its landing tells whether it was this transaction's own.
        Ok(()) | Err(ChainError::NonceUsed(_)) => {}
        Err(ChainError::Refused(reason)) => {
            fail(reason.clone()).await?;
            return Err(chain_error(network, ChainError::Refused(reason)).into());
        }
        // Unavailable: it may have gone out; the row stays pending for reconciliation.
        Err(err) => return Err(chain_error(network, err).into()),
    }
    crate::faults::crash_point("transfer:after_send");
    settle(services, network, &id, &signed).await?;
    crate::faults::crash_point("transfer:after_confirm");
    let record = store
        .transfer(&id)
        .await?
        .ok_or_else(|| ServiceError::NotFound(format!("transfer {id} vanished")))?;
    match record.state {
        TransferState::Confirmed => Ok(record),
        TransferState::Failed => {
            Err(WalletError::TransferFailed(record.error.unwrap_or_else(|| "the transfer failed".into())).into())
        }
        TransferState::Pending => Err(WalletError::NotConfirmed {
            network,
            id: signed.id,
            waited_secs: CONFIRM_TIMEOUT.as_secs(),
        }
        .into()),
    }
}

/// Waits for a sent transaction and records how it ended (unless still undecided).
async fn settle(services: &Services, network: Network, id: &str, signed: &SignedTx) -> Result<(), ServiceError> {
    let chain = services.chains.get(network);
    match chains::wait_for_landing(chain, signed, CONFIRM_TIMEOUT).await {
        Ok(Landing::Confirmed) => {
            services
                .store
                .finish_transfer(id, TransferState::Confirmed, None)
                .await?
        }
        Ok(Landing::Failed(reason) | Landing::Dropped(reason)) => {
            services
                .store
                .finish_transfer(id, TransferState::Failed, Some(reason))
                .await?
        }
        Ok(Landing::Pending) => {}
        Err(err) => tracing::warn!(transfer = id, %network, "could not check the transfer: {err}"),
    }
    Ok(())
}

/// Every transfer left pending with no request of this process working on it (a crash,
/// or a confirmation that did not come in time) is checked against its chain: one never
/// signed is failed (nothing went out); a signed one is re-sent (harmless if it landed) and
/// awaited. Runs at start and then periodically. Returns how many rows were looked at.
pub async fn reconcile(services: &Services) -> Result<usize, ServiceError> {
    let pending = services.store.pending_transfers().await?;
    reconcile_listed(services, pending).await
}

/// Reconciles each of `pending` (as listed a moment ago) whose wallet nobody holds.
pub(crate) async fn reconcile_listed(services: &Services, pending: Vec<TransferRecord>) -> Result<usize, ServiceError> {
    let mut looked_at = 0;
    for listed in pending {
        // The wallet's lock is held for a transfer's whole life: free means nobody here is
        // signing or awaiting this row.
        let Some(turn) = services
            .wallet_locks
            .try_lock((listed.agent_id.clone(), listed.network))
            .await?
        else {
            continue;
        };
        // Read again under the lock: the request that held it may have signed and sent the
        // row since it was listed unsigned (failing it as never sent would let a refund be
        // paid twice).
        let Some(row) = services.store.transfer(&listed.id).await? else {
            continue;
        };
        if row.state != TransferState::Pending {
            continue;
        }
        looked_at += 1;
        let (Some(signature), Some(raw)) = (&row.signature, &row.raw_tx) else {
            services
                .store
                .finish_transfer(
                    &row.id,
                    TransferState::Failed,
                    Some("never sent: the service stopped before signing it".into()),
                )
                .await?;
            continue;
        };
        let signed = SignedTx {
            id: signature.clone(),
            raw: raw.clone(),
            valid_until: row.valid_until,
        };
        let chain = services.chains.get(row.network);
        match chain.landing(&signed).await {
            Ok(Landing::Pending) => {
                // Sent again. A refusal for its nonce ("nonce too low") is no verdict: this
                // very transaction may be mined, its receipt not yet indexed; only its
                // landing decides, or it would be failed and paid a second time.
                if let Err(ChainError::Refused(reason)) = chain.submit(&signed).await {
                    services
                        .store
                        .finish_transfer(&row.id, TransferState::Failed, Some(reason))
                        .await?;
                    continue;
                }
                let services = services.clone();
                let (network, id) = (row.network, row.id.clone());
                let lifecycle = services.lifecycle.clone();
                lifecycle.spawn(async move {
                    let _turn = turn;
                    if let Err(err) = settle(&services, network, &id, &signed).await {
                        tracing::warn!(transfer = id, "reconciliation failed: {err}");
                    }
                });
            }
            Ok(Landing::Confirmed) => {
                services
                    .store
                    .finish_transfer(&row.id, TransferState::Confirmed, None)
                    .await?;
            }
            Ok(Landing::Failed(reason) | Landing::Dropped(reason)) => {
                services
                    .store
                    .finish_transfer(&row.id, TransferState::Failed, Some(reason))
                    .await?;
            }
            Err(err) => tracing::warn!(transfer = row.id, network = %row.network, "cannot reconcile yet: {err}"),
        }
    }
    Ok(looked_at)
}

/// What a client is told when a network's node failed: the node's address and words
/// (they often hold a provider's API key) stay in the log.
pub fn node_failed(network: Network) -> String {
    format!("The {network} RPC node failed; try again later")
}
