//! The master key over every secret it seals: a check that each one opens, and a rotation
//! that reseals them all under a new key in one transaction.

use super::ServiceError;
use crate::secrets::MasterKey;
use crate::store::{SealedAt, SealedRecord, Store};

/// Opens every sealed record with `key`; how many there are. The first that does not open
/// is named: it was sealed with another key, or altered.
pub async fn check(store: &Store, key: &MasterKey) -> Result<usize, ServiceError> {
    let records = store.sealed_records().await?;
    for record in &records {
        open(key, record).map_err(ServiceError::Conflict)?;
    }
    Ok(records.len())
}

/// Reseals every record from `old` to `new`, all in one transaction: nothing is resealed
/// unless everything opens with `old` (the first that does not is named). How many were
/// resealed.
pub async fn rotate(
    store: &Store,
    old: std::sync::Arc<MasterKey>,
    new: std::sync::Arc<MasterKey>,
) -> Result<usize, ServiceError> {
    let resealed = store
        .reseal_all(move |record| {
            let secret = open(&old, record)?;
            Ok(seal(&new, record, &secret))
        })
        .await?;
    Ok(resealed)
}

/// Reseals under `current` the records that open only with `retired` (a host that kept the
/// retired key after a rotation sealed them, or a backup restored them), in one transaction;
/// how many. A record that opens with neither is named, and nothing changes.
pub async fn reseal_from(
    store: &Store,
    retired: std::sync::Arc<MasterKey>,
    current: std::sync::Arc<MasterKey>,
) -> Result<usize, ServiceError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let moved = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = moved.clone();
    store
        .reseal_all(move |record| {
            if open(&current, record).is_ok() {
                return Ok(record.sealed.clone());
            }
            let secret =
                open(&retired, record).map_err(|_| format!("{} opens with neither key", describe(&record.at)))?;
            counted.fetch_add(1, Ordering::Relaxed);
            Ok(seal(&current, record, &secret))
        })
        .await?;
    Ok(moved.load(Ordering::Relaxed))
}

fn open(key: &MasterKey, record: &SealedRecord) -> Result<Vec<u8>, String> {
    let opened = match &record.at {
        SealedAt::Wallet { agent_id, network } => {
            key.open_for_agent(agent_id, &super::wallets::secret_kind(network), &record.sealed)
        }
        SealedAt::Integration { agent_id, kind } => key.open_for_agent(agent_id, kind, &record.sealed),
        SealedAt::Fact { name } => key.open(name, &record.sealed),
        SealedAt::Webhook { endpoint_id } => key.open(&super::webhooks::secret_label(endpoint_id), &record.sealed),
        SealedAt::A2aPush { task_id, id } => key.open(&crate::store::push_secret_label(task_id, id), &record.sealed),
    };
    opened.map_err(|_| format!("{} does not open with this master key", describe(&record.at)))
}

fn seal(key: &MasterKey, record: &SealedRecord, secret: &[u8]) -> Vec<u8> {
    match &record.at {
        SealedAt::Wallet { agent_id, network } => {
            key.seal_for_agent(agent_id, &super::wallets::secret_kind(network), secret)
        }
        SealedAt::Integration { agent_id, kind } => key.seal_for_agent(agent_id, kind, secret),
        SealedAt::Fact { name } => key.seal(name, secret),
        SealedAt::Webhook { endpoint_id } => key.seal(&super::webhooks::secret_label(endpoint_id), secret),
        SealedAt::A2aPush { task_id, id } => key.seal(&crate::store::push_secret_label(task_id, id), secret),
    }
}

fn describe(at: &SealedAt) -> String {
    match at {
        SealedAt::Wallet { agent_id, network } => format!("the {network} wallet key of agent {agent_id}"),
        SealedAt::Integration { agent_id, kind } => format!("the {kind} tokens of agent {agent_id}"),
        SealedAt::Fact { name } => format!("the deployment's {name}"),
        SealedAt::Webhook { endpoint_id } => format!("the signing secret of webhook endpoint {endpoint_id}"),
        SealedAt::A2aPush { task_id, id } => format!("the token of push config {id} of A2A task {task_id}"),
    }
}
