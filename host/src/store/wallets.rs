use std::sync::Arc;

use super::sql::{Row, args};
use super::{KeyCheck, Store, StoreError};
use crate::domain::Network;
use crate::money::MicroUsdc;

/// An agent for sale over x402 on one network: what the discovery list starts from.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    pub agent_id: String,
    pub username: String,
    pub network: Network,
    /// Its wallet's address there: where payments go.
    pub address: String,
}

impl Store {
    /// Every agent for sale, on every network it sells on (its manifest enables x402 and
    /// names the network, and it has a wallet there), in username then network order: one
    /// query, the agents' texts left out, kept in the read cache.
    pub async fn x402_listings(&self) -> Result<Arc<Vec<Listing>>, StoreError> {
        if let Some(found) = self.cache.listings() {
            return Ok(found);
        }
        let ticket = self.cache.ticket();
        let listings = self
            .read(|db| {
                let rows = db.query(
                    "SELECT g.id, g.username, g.x402_networks, w.network, w.address
                     FROM agents g JOIN wallets w ON w.agent_id = g.id
                     WHERE g.x402_enabled = ?1 AND g.x402_default_price IS NOT NULL
                     ORDER BY g.username",
                    args![true],
                )?;
                // Per agent, in its manifest's order of networks.
                let mut listings: Vec<Listing> = Vec::with_capacity(rows.len());
                let mut agent: Option<(String, Vec<Network>, usize)> = None;
                for row in rows {
                    let agent_id: String = row.get(0)?;
                    if agent.as_ref().is_none_or(|(id, _, _)| *id != agent_id) {
                        let networks = super::json_column(&row.get::<String>(2)?, "agent x402 networks")?;
                        agent = Some((agent_id.clone(), networks, listings.len()));
                    }
                    let Some((_, networks, first)) = &agent else { continue };
                    let network = Network::parse(&row.get::<String>(3)?)
                        .ok_or_else(|| StoreError::Corrupt("a wallet's network".into()))?;
                    let Some(rank) = networks.iter().position(|n| *n == network) else {
                        continue;
                    };
                    let listing = Listing {
                        agent_id,
                        username: row.get(1)?,
                        network,
                        address: row.get(4)?,
                    };
                    let at = listings[*first..]
                        .iter()
                        .position(|l| networks.iter().position(|n| *n == l.network) > Some(rank))
                        .map_or(listings.len(), |i| first + i);
                    listings.insert(at, listing);
                }
                Ok(Arc::new(listings))
            })
            .await?;
        self.cache.keep_listings(ticket, &listings);
        Ok(listings)
    }
}

/// An agent's wallet on one network. `secret` is sealed by the caller.
#[derive(Debug, Clone)]
pub struct WalletRecord {
    pub agent_id: String,
    pub network: Network,
    pub address: String,
    pub secret: Vec<u8>,
    pub created_at: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferState {
    Pending,
    Confirmed,
    Failed,
}

impl TransferState {
    pub fn as_str(self) -> &'static str {
        match self {
            TransferState::Pending => "pending",
            TransferState::Confirmed => "confirmed",
            TransferState::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferKind {
    /// Asked for through the API.
    Transfer,
    /// Paid back to an x402 payer whose paid run failed.
    Refund,
}

impl TransferKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TransferKind::Transfer => "transfer",
            TransferKind::Refund => "refund",
        }
    }
}

#[derive(Debug, Clone)]
pub struct TransferRecord {
    pub id: String,
    pub agent_id: String,
    pub network: Network,
    pub kind: String,
    pub sender: String,
    pub recipient: String,
    pub amount: MicroUsdc,
    pub memo: Option<String>,
    pub state: TransferState,
    pub signature: Option<String>,
    pub raw_tx: Option<String>,
    pub valid_until: Option<u64>,
    pub error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A transfer about to be attempted.
#[derive(Debug, Clone)]
pub struct NewTransfer {
    pub id: String,
    pub agent_id: String,
    pub network: Network,
    pub kind: TransferKind,
    pub sender: String,
    pub recipient: String,
    pub amount: MicroUsdc,
    pub memo: Option<String>,
}

fn network_column(text: &str) -> Result<Network, StoreError> {
    Network::parse(text).ok_or_else(|| StoreError::Corrupt(format!("unknown network {text}")))
}

const TRANSFER_COLUMNS: &str = "id, agent_id, network, kind, sender, recipient, amount, memo, state, signature, \
                                raw_tx, valid_until, error, created_at, updated_at";

fn transfer_row(row: &Row) -> Result<TransferRecord, StoreError> {
    let state: String = row.get(8)?;
    Ok(TransferRecord {
        id: row.get(0)?,
        agent_id: row.get(1)?,
        network: network_column(&row.get::<String>(2)?)?,
        kind: row.get(3)?,
        sender: row.get(4)?,
        recipient: row.get(5)?,
        amount: MicroUsdc(row.get(6)?),
        memo: row.get(7)?,
        state: match state.as_str() {
            "confirmed" => TransferState::Confirmed,
            "failed" => TransferState::Failed,
            _ => TransferState::Pending,
        },
        signature: row.get(9)?,
        raw_tx: row.get(10)?,
        valid_until: row.get(11)?,
        error: row.get(12)?,
        created_at: row.get(13)?,
        updated_at: row.get(14)?,
    })
}

impl Store {
    /// Creates the agent's wallet on a network; an existing one is a conflict.
    pub async fn insert_wallet(&self, wallet: WalletRecord, sealed_with: KeyCheck) -> Result<(), StoreError> {
        self.write(move |db| {
            super::sealed::fence(db, &sealed_with)?;
            let inserted = db.execute(
                "INSERT INTO wallets (agent_id, network, address, secret, created_at) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (agent_id, network) DO NOTHING",
                args![
                    wallet.agent_id,
                    wallet.network.as_str(),
                    wallet.address,
                    wallet.secret,
                    wallet.created_at
                ],
            )?;
            if inserted == 0 {
                return Err(StoreError::Conflict(format!(
                    "the agent already has a {} wallet",
                    wallet.network
                )));
            }
            Ok(())
        })
        .await
    }

    pub async fn wallet(&self, agent_id: &str, network: Network) -> Result<Option<WalletRecord>, StoreError> {
        let agent_id = agent_id.to_string();
        self.read(move |db| {
            db.query_opt(
                "SELECT address, secret, created_at FROM wallets WHERE agent_id = ?1 AND network = ?2",
                args![&agent_id, network.as_str()],
            )?
            .map(|r| {
                Ok(WalletRecord {
                    agent_id: agent_id.clone(),
                    network,
                    address: r.get(0)?,
                    secret: r.get(1)?,
                    created_at: r.get(2)?,
                })
            })
            .transpose()
        })
        .await
    }

    /// The address of the agent's wallet on `network`, from the read cache when it holds it.
    pub async fn wallet_address(&self, agent_id: &str, network: Network) -> Result<Option<Arc<String>>, StoreError> {
        let name = format!("{agent_id}/{network}");
        if let Some(address) = self.cache.wallet_address(&name) {
            return Ok(Some(address));
        }
        let ticket = self.cache.ticket();
        let agent_id = agent_id.to_string();
        let address = self
            .read(move |db| {
                db.query_opt(
                    "SELECT address FROM wallets WHERE agent_id = ?1 AND network = ?2",
                    args![&agent_id, network.as_str()],
                )?
                .map(|r| r.get::<String>(0).map(Arc::new))
                .transpose()
            })
            .await?;
        if let Some(address) = &address {
            self.cache.keep_wallet_address(ticket, &name, address);
        }
        Ok(address)
    }

    /// Every wallet of an agent, without their secrets' meaning (still sealed).
    pub async fn wallets_of(&self, agent_id: &str) -> Result<Vec<WalletRecord>, StoreError> {
        let agent_id = agent_id.to_string();
        self.read(move |db| {
            db.query(
                "SELECT network, address, secret, created_at FROM wallets WHERE agent_id = ?1 ORDER BY network",
                args![&agent_id],
            )?
            .iter()
            .map(|r| {
                Ok(WalletRecord {
                    agent_id: agent_id.clone(),
                    network: network_column(&r.get::<String>(0)?)?,
                    address: r.get(1)?,
                    secret: r.get(2)?,
                    created_at: r.get(3)?,
                })
            })
            .collect()
        })
        .await
    }

    pub async fn insert_transfer(&self, transfer: NewTransfer) -> Result<(), StoreError> {
        self.write(move |db| {
            let now = crate::clock::now_ms();
            db.execute(
                "INSERT INTO transfers (id, agent_id, network, kind, sender, recipient, amount, memo, state, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9, ?9)",
                args![
                    transfer.id,
                    transfer.agent_id,
                    transfer.network.as_str(),
                    transfer.kind.as_str(),
                    transfer.sender,
                    transfer.recipient,
                    transfer.amount.0 as i64,
                    transfer.memo,
                    now
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// Records the signed transaction of a pending transfer, before it is sent.
    pub async fn set_transfer_signed(
        &self,
        id: &str,
        signature: &str,
        raw_tx: &str,
        valid_until: Option<u64>,
    ) -> Result<(), StoreError> {
        let (id, signature, raw_tx) = (id.to_string(), signature.to_string(), raw_tx.to_string());
        self.write(move |db| {
            db.execute(
                "UPDATE transfers SET signature = ?2, raw_tx = ?3, valid_until = ?4, updated_at = ?5
                 WHERE id = ?1 AND state = 'pending'",
                args![
                    id,
                    signature,
                    raw_tx,
                    valid_until.map(|v| v as i64),
                    crate::clock::now_ms()
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// Moves a pending transfer to its end state; an ended one stays as it is.
    pub async fn finish_transfer(
        &self,
        id: &str,
        state: TransferState,
        error: Option<String>,
    ) -> Result<(), StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            db.execute(
                "UPDATE transfers SET state = ?2, error = ?3, updated_at = ?4 WHERE id = ?1 AND state = 'pending'",
                args![id, state.as_str(), error, crate::clock::now_ms()],
            )?;
            Ok(())
        })
        .await
    }

    /// `failed` → `confirmed`: a transfer recorded failed that the chain shows landed after
    /// all (a verdict from a node whose index lagged). False when it was not `failed`.
    pub async fn transfer_landed_after_all(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            Ok(db.execute(
                "UPDATE transfers SET state = 'confirmed', error = NULL, updated_at = ?2 WHERE id = ?1 AND state = 'failed'",
                args![id, crate::clock::now_ms()],
            )? == 1)
        })
        .await
    }

    pub async fn transfer(&self, id: &str) -> Result<Option<TransferRecord>, StoreError> {
        let id = id.to_string();
        self.read(move |db| {
            db.query_opt(
                &format!("SELECT {TRANSFER_COLUMNS} FROM transfers WHERE id = ?1"),
                args![id],
            )?
            .map(|row| transfer_row(&row))
            .transpose()
        })
        .await
    }

    /// An agent's transfers, newest first.
    pub async fn transfers_of(&self, agent_id: &str, limit: u32) -> Result<Vec<TransferRecord>, StoreError> {
        let agent_id = agent_id.to_string();
        self.read(move |db| {
            db.query(
                &format!(
                    "SELECT {TRANSFER_COLUMNS} FROM transfers WHERE agent_id = ?1 ORDER BY created_at DESC, id LIMIT ?2"
                ),
                args![agent_id, limit],
            )?
            .iter()
            .map(transfer_row)
            .collect()
        })
        .await
    }

    pub async fn pending_transfers(&self) -> Result<Vec<TransferRecord>, StoreError> {
        self.read(move |db| {
            db.query(
                &format!("SELECT {TRANSFER_COLUMNS} FROM transfers WHERE state = 'pending' ORDER BY created_at"),
                args![],
            )?
            .iter()
            .map(transfer_row)
            .collect()
        })
        .await
    }
}
