//! A payment charged by use (x402 `upto`): held `verified` at its maximum while the work
//! runs, then metered: what the request used and what that costs are written with the
//! settlement that charges it, in one write, before anything is sent.

use super::sql::args;
use super::{Store, StoreError};
use crate::chains::SignedTx;
use crate::domain::Used;
use crate::money::MicroUsdc;

impl Store {
    /// Records what a held `upto` payment's request used, its charge (at most what was
    /// authorized) and the signed settlement that takes it (`None`: nothing to settle, a
    /// charge of 0). False when it is not held: metered before, or no longer `verified`.
    pub async fn meter_payment(
        &self,
        id: &str,
        used: Used,
        charge: MicroUsdc,
        settlement: Option<&SignedTx>,
    ) -> Result<bool, StoreError> {
        let id = id.to_string();
        let used = super::to_json(&used);
        let (transaction, raw, valid_until) = match settlement {
            Some(tx) => (Some(tx.id.clone()), Some(tx.raw.clone()), tx.valid_until),
            None => (None, None, None),
        };
        self.write(move |db| {
            Ok(db.execute(
                "UPDATE payments SET amount = ?2, used = ?3, transaction_signature = ?4, raw_tx = ?5,
                    valid_until = COALESCE(?6, valid_until), updated_at = ?7
                 WHERE id = ?1 AND state = 'verified' AND scheme = 'upto' AND used IS NULL
                   AND ?2 <= max_amount",
                args![
                    id,
                    charge.0 as i64,
                    used,
                    transaction,
                    raw,
                    valid_until.map(|v| i64::try_from(v).unwrap_or(i64::MAX)),
                    crate::clock::now_ms()
                ],
            )? == 1)
        })
        .await
    }

    /// Marks that `id`'s payer made its settlement fail: it cools off as after a refund,
    /// whatever becomes of the payment.
    pub async fn cool_off_payer_of(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            db.execute(
                "UPDATE payments SET released_at = ?2 WHERE id = ?1",
                args![id, crate::clock::now_ms()],
            )?;
            Ok(())
        })
        .await
    }

    /// Fails a held `upto` payment that charges nothing (its work failed by the agent's
    /// fault, or could not be settled in time). `cools_off`: the work ran, so its payer
    /// cools off as after a refund. False when it is not held.
    pub async fn release_payment(&self, id: &str, reason: &str, cools_off: bool) -> Result<bool, StoreError> {
        let (id, reason) = (id.to_string(), reason.to_string());
        self.write(move |db| {
            let now = crate::clock::now_ms();
            Ok(db.execute(
                "UPDATE payments SET state = 'failed', error = ?2, updated_at = ?3,
                    released_at = CASE WHEN ?4 THEN ?3 ELSE released_at END
                 WHERE id = ?1 AND state = 'verified' AND scheme = 'upto'",
                args![id, reason, now, cools_off],
            )? == 1)
        })
        .await
    }
}
