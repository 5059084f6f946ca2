//! Every record sealed with the master key, in one place: what a key rotation rewrites and
//! what a key check opens.

use std::sync::Arc;

use super::sql::{Db, args};
use super::{Store, StoreError};

/// The deployment fact sealed with the master key that every host checks its key against.
pub const KEY_CHECK: &str = "master-key-check";

/// Whether a value of [`KEY_CHECK`] opens with the key a write sealed its secret with.
pub type KeyCheck = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// Inside a write that stores a sealed secret: waits out a rotation in progress (it holds
/// the check row from its start to its commit), then refuses the write if the check no
/// longer opens with the writer's key. A host still running after a rotation would
/// otherwise seal new secrets with the retired key, which no host could open again.
pub(super) fn fence(db: &dyn Db, opens: &KeyCheck) -> Result<(), StoreError> {
    hold_key_check(db)?;
    match db.query_opt("SELECT value FROM deployment_facts WHERE name = ?1", args![KEY_CHECK])? {
        Some(row) if !opens(&row.get::<Vec<u8>>(0)?) => Err(StoreError::KeyRetired),
        // No check yet (a CLI on a database no server has opened): nothing to fence.
        _ => Ok(()),
    }
}

/// Takes the check row's write lock (an update that changes nothing): sealing writes and a
/// rotation then run one after the other, on PostgreSQL too.
fn hold_key_check(db: &dyn Db) -> Result<(), StoreError> {
    db.execute(
        "UPDATE deployment_facts SET value = value WHERE name = ?1",
        args![KEY_CHECK],
    )?;
    Ok(())
}

/// Where a sealed record lives; its associated data is derived from it by its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealedAt {
    Wallet { agent_id: String, network: String },
    Integration { agent_id: String, kind: String },
    Fact { name: String },
    Webhook { endpoint_id: String },
    A2aPush { task_id: String, id: String },
}

#[derive(Debug, Clone)]
pub struct SealedRecord {
    pub at: SealedAt,
    pub sealed: Vec<u8>,
}

fn all_sealed(db: &dyn Db) -> Result<Vec<SealedRecord>, StoreError> {
    let mut records = Vec::new();
    for row in db.query(
        "SELECT agent_id, network, secret FROM wallets ORDER BY agent_id, network",
        args![],
    )? {
        records.push(SealedRecord {
            at: SealedAt::Wallet {
                agent_id: row.get(0)?,
                network: row.get(1)?,
            },
            sealed: row.get(2)?,
        });
    }
    for row in db.query(
        "SELECT agent_id, kind, secret FROM agent_integrations ORDER BY agent_id, kind",
        args![],
    )? {
        records.push(SealedRecord {
            at: SealedAt::Integration {
                agent_id: row.get(0)?,
                kind: row.get(1)?,
            },
            sealed: row.get(2)?,
        });
    }
    for row in db.query("SELECT id, secret FROM webhook_endpoints ORDER BY id", args![])? {
        records.push(SealedRecord {
            at: SealedAt::Webhook {
                endpoint_id: row.get(0)?,
            },
            sealed: row.get(1)?,
        });
    }
    for row in db.query(
        "SELECT task_id, id, secret FROM a2a_push_configs ORDER BY task_id, id",
        args![],
    )? {
        records.push(SealedRecord {
            at: SealedAt::A2aPush {
                task_id: row.get(0)?,
                id: row.get(1)?,
            },
            sealed: row.get(2)?,
        });
    }
    for row in db.query("SELECT name, value FROM deployment_facts ORDER BY name", args![])? {
        records.push(SealedRecord {
            at: SealedAt::Fact { name: row.get(0)? },
            sealed: row.get(1)?,
        });
    }
    Ok(records)
}

impl Store {
    pub async fn sealed_records(&self) -> Result<Vec<SealedRecord>, StoreError> {
        self.read(all_sealed).await
    }

    /// Replaces every sealed record with what `reseal` makes of it, in one transaction: a
    /// refusal, a failure or a crash anywhere leaves every record as it was.
    pub async fn reseal_all<F>(&self, reseal: F) -> Result<usize, StoreError>
    where
        F: Fn(&SealedRecord) -> Result<Vec<u8>, String> + Send + 'static,
    {
        self.write_cached(move |db| {
            // First: a sealing write that began before waits to be read (and resealed) here.
            hold_key_check(db)?;
            let records = all_sealed(db)?;
            for (done, record) in records.iter().enumerate() {
                let sealed = reseal(record).map_err(StoreError::Conflict)?;
                let changed = match &record.at {
                    SealedAt::Wallet { agent_id, network } => db.execute(
                        "UPDATE wallets SET secret = ?3 WHERE agent_id = ?1 AND network = ?2",
                        args![agent_id, network, sealed],
                    )?,
                    SealedAt::Integration { agent_id, kind } => db.execute(
                        "UPDATE agent_integrations SET secret = ?3 WHERE agent_id = ?1 AND kind = ?2",
                        args![agent_id, kind, sealed],
                    )?,
                    SealedAt::Fact { name } => db.execute(
                        "UPDATE deployment_facts SET value = ?2 WHERE name = ?1",
                        args![name, sealed],
                    )?,
                    SealedAt::Webhook { endpoint_id } => db.execute(
                        "UPDATE webhook_endpoints SET secret = ?2 WHERE id = ?1",
                        args![endpoint_id, sealed],
                    )?,
                    SealedAt::A2aPush { task_id, id } => db.execute(
                        "UPDATE a2a_push_configs SET secret = ?3 WHERE task_id = ?1 AND id = ?2",
                        args![task_id, id, sealed],
                    )?,
                };
                if changed != 1 {
                    return Err(StoreError::Conflict(format!(
                        "{:?} changed during the rotation",
                        record.at
                    )));
                }
                if done + 1 == records.len() / 2 {
                    crate::faults::crash_point("secrets:mid_rotation");
                }
            }
            Ok(records.len())
        })
        .await
    }
}
