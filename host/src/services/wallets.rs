//! Agent wallets: keys created or imported and sealed at rest, balances read from the
//! chain, USDC transfers that are a store row before they are sent and move forward
//! in one place (pending → confirmed | failed), one at a time per wallet.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::{ServiceError, Services, integrations};
use crate::chains::{self, Balances, ChainError, Landing, SignedTx, WalletKey};
use crate::domain::Network;
use crate::money::MicroUsdc;
use crate::store::{NewTransfer, TransferKind, TransferRecord, TransferState, WalletRecord};

/// How long a transfer request waits for its confirmation before answering.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(90);

/// One lock per wallet: its transfers go out one after another, so two requests
/// cannot both spend the same balance.
#[derive(Default)]
pub struct WalletLocks {
    locks: Mutex<HashMap<(String, Network), Arc<tokio::sync::Mutex<()>>>>,
}

impl WalletLocks {
    pub(crate) fn of(&self, agent_id: &str, network: Network) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry((agent_id.to_string(), network)).or_default().clone()
    }
}

/// The sealing purpose binds the agent and the network.
fn secret_kind(network: Network) -> String {
    format!("wallet:{network}")
}

fn not_configured(network: Network) -> ServiceError {
    ServiceError::Api {
        status: 400,
        code: "wallet_not_configured",
        message: format!(
            "The agent has no {network} wallet; create one with `agent-host wallet create --agent ID --network {network}`"
        ),
        retry_after: None,
    }
}

/// A chain failure as the API reports it: refusals are the caller's to fix (400),
/// anything else is ours, naming the network (500).
fn chain_error(network: Network, err: ChainError) -> ServiceError {
    match err {
        ChainError::Refused(message) => ServiceError::Api {
            status: 400,
            code: "transfer_failed",
            message,
            retry_after: None,
        },
        ChainError::Unavailable(message) => ServiceError::Api {
            status: 500,
            code: "internal_error",
            message: format!("The {network} RPC node failed: {message}"),
            retry_after: None,
        },
    }
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
    let sealed = integrations::seal(services, agent_id, &secret_kind(network), &key.secret());
    services
        .store
        .insert_wallet(WalletRecord {
            agent_id: agent_id.to_string(),
            network,
            address: address.clone(),
            secret: sealed,
            created_at: crate::clock::now_ms(),
        })
        .await?;
    Ok(address)
}

pub async fn wallet(services: &Services, agent_id: &str, network: Network) -> Result<WalletRecord, ServiceError> {
    services
        .store
        .wallet(agent_id, network)
        .await?
        .ok_or_else(|| not_configured(network))
}

/// The wallet's key, opened only for as long as a signature takes.
pub(crate) fn open_key(services: &Services, wallet: &WalletRecord) -> Result<WalletKey, ServiceError> {
    let secret = integrations::unseal(services, &wallet.agent_id, &secret_kind(wallet.network), &wallet.secret)
        .map_err(|_| ServiceError::Api {
            status: 500,
            code: "internal_error",
            message: format!(
                "The agent's {} wallet key cannot be decrypted: the master key is not the one it was sealed with, or the record was altered",
                wallet.network
            ),
            retry_after: None,
        })?;
    WalletKey::from_secret(wallet.network, &secret).map_err(|e| ServiceError::Api {
        status: 500,
        code: "internal_error",
        message: format!("The agent's stored {} wallet key is unusable: {e}", wallet.network),
        retry_after: None,
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
            ChainError::Refused(m) | ChainError::Unavailable(m) => chain_error(network, ChainError::Unavailable(m)),
        })?;
    Ok(WalletBalance { wallet, balances })
}

/// The agent's balances as facts for the `balance` built-in: one entry per wallet (or
/// for `only`), with decimal text amounts, or what went wrong reading it.
pub async fn facts(services: &Services, agent_id: &str, only: Option<Network>) -> Result<Value, ServiceError> {
    let networks = match only {
        Some(network) => vec![network],
        None => vec![Network::Solana, Network::Base],
    };
    let mut entries = Vec::new();
    for network in networks {
        let Some(wallet) = services.store.wallet(agent_id, network).await? else {
            if only.is_some() {
                entries.push(json!({ "network": network.as_str(), "missing": true }));
            }
            continue;
        };
        let mut entry = json!({
            "network": network.as_str(),
            "address": wallet.address,
            "nativeToken": network.native_token(),
        });
        match services.chains.get(network).balances(&wallet.address).await {
            Ok(balances) => {
                entry["usdc"] = json!(balances.usdc.to_string());
                entry["native"] = json!(chains::decimal_text(balances.native, network.native_decimals()));
            }
            Err(err) => {
                tracing::warn!(%network, agent = agent_id, "balance for the built-in failed: {err}");
                entry["error"] = json!(format!("the {network} node did not answer"));
            }
        }
        entries.push(entry);
    }
    Ok(Value::Array(entries))
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

    let lock = services.wallet_locks.of(&order.agent_id, network);
    let _one_at_a_time = lock.lock().await;

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

    let chain = services.chains.get(network);
    let fail = |reason: String| store.finish_transfer(&id, TransferState::Failed, Some(reason));
    let signed = match chain.sign_transfer(&key, &order.recipient, order.amount).await {
        Ok(signed) => signed,
        Err(err) => {
            fail(err.to_string()).await?;
            return Err(chain_error(network, err));
        }
    };
    drop(key);
    store
        .set_transfer_signed(&id, &signed.id, &signed.raw, signed.valid_until)
        .await?;
    if let Err(err) = chain.submit(&signed).await {
        if let ChainError::Refused(reason) = &err {
            fail(reason.clone()).await?;
        }
        // Unavailable: it may have gone out; the row stays pending for reconciliation.
        return Err(chain_error(network, err));
    }
    settle(services, network, &id, &signed).await?;
    let record = store
        .transfer(&id)
        .await?
        .ok_or_else(|| ServiceError::NotFound(format!("transfer {id} vanished")))?;
    match record.state {
        TransferState::Confirmed => Ok(record),
        TransferState::Failed => Err(ServiceError::Api {
            status: 400,
            code: "transfer_failed",
            message: record.error.unwrap_or_else(|| "the transfer failed".into()),
            retry_after: None,
        }),
        TransferState::Pending => Err(ServiceError::Api {
            status: 500,
            code: "internal_error",
            message: format!(
                "The {network} transfer {} was sent but not confirmed within {} s; it stays recorded as pending and is checked again at the next start",
                signed.id,
                CONFIRM_TIMEOUT.as_secs()
            ),
            retry_after: None,
        }),
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
        Ok(Landing::Failed(reason)) => {
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

/// After a restart: every transfer left pending is checked against its chain. One never
/// signed is failed (nothing went out); a signed one is re-sent (harmless if it landed)
/// and awaited. Returns how many rows were looked at.
pub async fn reconcile(services: &Services) -> Result<usize, ServiceError> {
    let pending = services.store.pending_transfers().await?;
    for row in &pending {
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
                if let Err(ChainError::Refused(reason)) = chain.submit(&signed).await {
                    services
                        .store
                        .finish_transfer(&row.id, TransferState::Failed, Some(reason))
                        .await?;
                    continue;
                }
                let services = services.clone();
                let (network, id) = (row.network, row.id.clone());
                tokio::spawn(async move {
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
            Ok(Landing::Failed(reason)) => {
                services
                    .store
                    .finish_transfer(&row.id, TransferState::Failed, Some(reason))
                    .await?;
            }
            Err(err) => tracing::warn!(transfer = row.id, network = %row.network, "cannot reconcile yet: {err}"),
        }
    }
    Ok(pending.len())
}
