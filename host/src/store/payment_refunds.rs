//! A payment's refund as the store keeps it: started once (naming its transfer before the
//! transfer exists), owed while the payer cannot receive it, retried with what each failed
//! transfer cost, and handed to the operator past its bounds (and taken back).

use super::sql::args;
use super::{Store, StoreError};

/// What a refund's earlier transfer cost, once it is known never to pay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RefundFailure {
    /// It went out (was signed and sent) and failed: it counts against the refund's attempts.
    pub went_out: bool,
    /// Its fee (lamports, wei): nothing unless it landed and failed.
    pub fee: i64,
}

impl Store {
    /// Starts a refund: `settled`/`served`/`refund_owed` → `refunding`, naming the transfer
    /// that will pay it before that transfer exists. False when the payment is not
    /// refundable (a refund already started, or it was never settled): this is what makes it
    /// once only.
    /// `failed_work`: the paid work failed, so the refund's start is noted for its payer's
    /// cool-off (see `last_costs_of`).
    pub async fn start_refund(
        &self,
        id: &str,
        transfer_id: &str,
        why: &str,
        failed_work: bool,
    ) -> Result<bool, StoreError> {
        let (id, transfer_id, why) = (id.to_string(), transfer_id.to_string(), why.to_string());
        self.write(move |db| {
            Ok(db.execute(
                "UPDATE payments SET state = 'refunding', refund_transfer_id = ?2, error = ?3, updated_at = ?4,
                    refund_started_at = CASE WHEN ?5 THEN COALESCE(refund_started_at, ?4) ELSE refund_started_at END
                 WHERE id = ?1 AND state IN ('settled', 'served', 'refund_owed')",
                args![id, transfer_id, why, crate::clock::now_ms(), failed_work],
            )? == 1)
        })
        .await
    }

    /// A refund that cannot be paid yet (the payer has no account to receive it):
    /// `settled`/`served`/`refunding` → `refund_owed`, with why. False when it is not refundable.
    pub async fn owe_refund(&self, id: &str, why: &str) -> Result<bool, StoreError> {
        let (id, why) = (id.to_string(), why.to_string());
        self.write(move |db| {
            Ok(db.execute(
                "UPDATE payments SET state = 'refund_owed', refund_transfer_id = NULL, error = ?2, updated_at = ?3
                 WHERE id = ?1 AND state IN ('settled', 'served', 'refund_owed', 'refunding')",
                args![id, why, crate::clock::now_ms()],
            )? == 1)
        })
        .await
    }

    /// Names a new transfer for a refund whose transfer `previous` failed or was never
    /// written, adding what `previous` cost (`failed`: one more transfer that went out and
    /// failed, and its fee); false when another attempt got there first.
    pub async fn retry_refund(
        &self,
        id: &str,
        previous: Option<&str>,
        failed: RefundFailure,
        transfer_id: &str,
    ) -> Result<bool, StoreError> {
        let (id, previous, transfer_id) = (id.to_string(), previous.map(str::to_string), transfer_id.to_string());
        self.write(move |db| {
            Ok(db.execute(
                "UPDATE payments SET refund_transfer_id = ?3, updated_at = ?4,
                    refund_attempts = refund_attempts + ?6, refund_fees = refund_fees + ?5
                 WHERE id = ?1 AND state = 'refunding' AND refund_transfer_id IS NOT DISTINCT FROM ?2
                    AND needs_operator_at IS NULL",
                args![
                    id,
                    previous,
                    transfer_id,
                    crate::clock::now_ms(),
                    failed.fee,
                    failed.went_out as i64
                ],
            )? == 1)
        })
        .await
    }

    /// Stops working on a payment and hands it to the operator, with why (and what the
    /// refund transfer `previous` cost, for a refund given up): `payment.needs_operator`
    /// is written with it. False when it was handed over already, or when another
    /// attempt replaced `previous` first.
    pub async fn hand_to_operator(
        &self,
        id: &str,
        previous: Option<&str>,
        failed: RefundFailure,
        why: &str,
    ) -> Result<bool, StoreError> {
        let (id, previous, why) = (id.to_string(), previous.map(str::to_string), why.to_string());
        self.write(move |db| {
            let now = crate::clock::now_ms();
            let handed = db.execute(
                "UPDATE payments SET needs_operator_at = ?4, needs_operator = ?3, updated_at = ?4,
                    refund_fees = refund_fees + ?5, refund_attempts = refund_attempts + ?6
                 WHERE id = ?1 AND needs_operator_at IS NULL AND refund_transfer_id IS NOT DISTINCT FROM ?2",
                args![&id, previous, why, now, failed.fee, failed.went_out as i64],
            )? == 1;
            if handed {
                // Once per hand-over: one resumed and handed over again is told again.
                let key = format!("payment.needs_operator:{id}:{now}");
                super::webhooks::emit_payment_keyed_in(db, &id, "payment.needs_operator", &key)?;
            }
            Ok(handed)
        })
        .await
    }

    /// The operator takes a payment back from the operator's list: recovery works on it
    /// again, its refund with a fresh count of attempts and fees. False when it was not
    /// waiting for the operator.
    pub async fn resume_for_operator(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            Ok(db.execute(
                "UPDATE payments SET needs_operator_at = NULL, refund_attempts = 0, refund_fees = 0, updated_at = ?2
                 WHERE id = ?1 AND needs_operator_at IS NOT NULL",
                args![id, crate::clock::now_ms()],
            )? == 1)
        })
        .await
    }
}
