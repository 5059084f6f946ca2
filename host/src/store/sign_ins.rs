//! Sign-ins let in (x402's `sign-in-with-x`): each one by its challenge's nonce, so a
//! nonce is used once, ever; and what wallets have used of a command's pass and free
//! allowance, counted and recorded in one write, one sign-in of a command at a time, so
//! racing sign-ins cannot use more than the terms give.

use super::sql::{Db, args};
use super::{Store, StoreError};
use crate::domain::{Network, SignInTerms};

const HOUR_MS: i64 = 3_600_000;

/// A sign-in to let in.
#[derive(Debug, Clone)]
pub struct SignInUse {
    pub nonce: String,
    pub agent_id: String,
    pub command: String,
    pub network: Network,
    /// As payments name their payer.
    pub wallet: String,
    pub now: i64,
}

/// Let in: under the wallet's pass (bought by a payment) or the free allowance, and how
/// many calls are left of it (`None`: as many as fit in its time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInGrant {
    Pass { left: Option<u32> },
    Free { left: u32 },
}

/// Not let in: nothing was recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignInRefusal {
    NonceUsed,
    /// No pass (the wallet has not paid, or its pass is used up or over) and no free
    /// calls left; `free_again_at`: when the free allowance has room again, if offered;
    /// `all_free_used`: all wallets together used the free calls of the window.
    NothingLeft {
        paid: bool,
        free_again_at: Option<i64>,
        all_free_used: bool,
    },
}

impl Store {
    /// Lets the sign-in in under `terms` if the wallet has calls left, recording it (and
    /// so its nonce); refuses it otherwise, recording nothing.
    pub async fn admit_sign_in(
        &self,
        sign_in: SignInUse,
        terms: SignInTerms,
    ) -> Result<Result<SignInGrant, SignInRefusal>, StoreError> {
        self.write(move |db| {
            let SignInUse {
                nonce,
                agent_id,
                command,
                network,
                wallet,
                now,
            } = &sign_in;
            let network = network.as_str();
            // One at a time per command: a nonce is bound to its command's address, and the
            // free calls' total is the command's.
            db.serialize(&format!("sign-in:{agent_id}:{command}"))?;
            if nonce_used(db, nonce)? {
                return Ok(Err(SignInRefusal::NonceUsed));
            }
            let used_since = |kind: &str, since: i64| -> Result<u32, StoreError> {
                let count: i64 = db
                    .query_one(
                        "SELECT COUNT(*) FROM sign_in_uses WHERE agent_id = ?1 AND command = ?2 AND network = ?3
                           AND wallet = ?4 AND kind = ?5 AND counted = ?6 AND used_at >= ?7",
                        args![agent_id, command, network, wallet, kind, true, since],
                    )?
                    .get(0)?;
                Ok(u32::try_from(count).unwrap_or(u32::MAX))
            };
            let record = |kind: &str| -> Result<(), StoreError> {
                db.execute(
                    "INSERT INTO sign_in_uses (nonce, agent_id, command, network, wallet, kind, used_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (nonce) DO NOTHING",
                    args![nonce, agent_id, command, network, wallet, kind, *now],
                )?;
                Ok(())
            };
            let mut paid = false;
            if let Some(pass) = terms.pass {
                // A pass runs from the wallet's last payment for the command that was served.
                let bought: Option<i64> = db
                    .query_one(
                        "SELECT MAX(created_at) FROM payments WHERE agent_id = ?1 AND network = ?2 AND payer = ?3
                           AND command = ?4 AND state = 'served'",
                        args![agent_id, network, wallet, command],
                    )?
                    .get(0)?;
                if let Some(bought) = bought {
                    paid = true;
                    let in_time = pass.hours.is_none_or(|h| *now - bought < i64::from(h) * HOUR_MS);
                    let used = used_since("pass", bought)?;
                    if in_time && pass.calls.is_none_or(|calls| used < calls) {
                        record("pass")?;
                        return Ok(Ok(SignInGrant::Pass {
                            left: pass.calls.map(|calls| calls - used - 1),
                        }));
                    }
                }
            }
            let (mut free_again_at, mut all_free_used) = (None, false);
            if let Some(free) = terms.free
                && let (Some(calls), Some(hours)) = (free.calls, free.hours)
            {
                let window = i64::from(hours) * HOUR_MS;
                let since = *now - window;
                let used = used_since("free", since + 1)?;
                let everyone: i64 = db
                    .query_one(
                        "SELECT COUNT(*) FROM sign_in_uses WHERE agent_id = ?1 AND command = ?2 AND kind = 'free'
                           AND counted = ?3 AND used_at > ?4",
                        args![agent_id, command, true, since],
                    )?
                    .get(0)?;
                all_free_used = free.total.is_some_and(|total| everyone >= i64::from(total));
                if used < calls && !all_free_used {
                    record("free")?;
                    return Ok(Ok(SignInGrant::Free { left: calls - used - 1 }));
                }
                // Room comes back when the oldest call counted in the window leaves it.
                let oldest: Option<i64> = db
                    .query_one(
                        "SELECT MIN(used_at) FROM sign_in_uses WHERE agent_id = ?1 AND command = ?2 AND network = ?3
                           AND wallet = ?4 AND kind = 'free' AND counted = ?5 AND used_at > ?6",
                        args![agent_id, command, network, wallet, true, since],
                    )?
                    .get(0)?;
                free_again_at = oldest.filter(|_| !all_free_used).map(|at| at + window);
            }
            Ok(Err(SignInRefusal::NothingLeft {
                paid,
                free_again_at,
                all_free_used,
            }))
        })
        .await
    }

    /// Whether a sign-in with this nonce was let in: read before anything costly is done
    /// for a sign-in (a contract wallet's check on chain).
    pub async fn sign_in_nonce_used(&self, nonce: &str) -> Result<bool, StoreError> {
        let nonce = nonce.to_string();
        self.read(move |db| nonce_used(db, &nonce)).await
    }

    /// Gives a sign-in's call back (the work failed by the agent's fault); its nonce stays
    /// used.
    pub async fn release_sign_in(&self, nonce: &str) -> Result<(), StoreError> {
        let nonce = nonce.to_string();
        self.write(move |db| {
            db.execute(
                "UPDATE sign_in_uses SET counted = ?2 WHERE nonce = ?1",
                args![&nonce, false],
            )?;
            Ok(())
        })
        .await
    }
}

fn nonce_used(db: &dyn Db, nonce: &str) -> Result<bool, StoreError> {
    Ok(db
        .query_opt("SELECT 1 FROM sign_in_uses WHERE nonce = ?1", args![nonce])?
        .is_some())
}
