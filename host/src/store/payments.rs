use super::sql::{Row, args};
use super::{Store, StoreError};
use crate::domain::Network;
use crate::money::MicroUsdc;

/// A verified payment, recorded with the transaction that settles it (signed, not yet
/// sent), or, when someone else's transaction already settled it, as `settled`.
#[derive(Debug, Clone)]
pub struct NewPayment {
    pub id: String,
    pub identity: String,
    pub agent_id: String,
    pub network: Network,
    pub payer: String,
    pub pay_to: String,
    pub amount: MicroUsdc,
    pub command: Option<String>,
    pub request: String,
    /// The settlement's transaction; `None` while a facilitator has not named it.
    pub transaction: Option<String>,
    /// The signed settlement, to send again or look up after a crash; `None` when the
    /// payment is already on chain, or a facilitator settles it.
    pub raw_tx: Option<String>,
    pub valid_until: Option<u64>,
    /// The x402 version it arrived in.
    pub x402_version: u64,
    /// The payer's own id for it (x402's payment-identifier extension), one use per payer.
    pub payment_ref: Option<String>,
    /// The facilitator that settles it (its origin, never a key in its URL); `None`: the
    /// agent's wallet does.
    pub facilitator: Option<String>,
    /// Settled by a transaction we did not send (Base): the index of the `Transfer` log its
    /// own authorization made. One transfer pays one payment: unique with the transaction.
    pub transfer_log_index: Option<u64>,
    /// x402 `upto`: `amount` is the maximum the payer authorized, held (`verified`, nothing
    /// signed yet) while the work runs; what it charges is metered after (see
    /// `Store::meter_payment`).
    pub upto: bool,
}

/// A settlement someone else's transaction made, as the chain shows it: the transaction,
/// and on Base the index of the `Transfer` log the payment's own authorization made (a
/// transaction may settle several payments; each transfer pays one, once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettledBy {
    pub transaction: String,
    pub transfer_log_index: Option<u64>,
}

/// A log index as stored (the column is a signed integer).
fn log_index(index: Option<u64>) -> Option<i64> {
    index.map(|i| i64::try_from(i).unwrap_or(i64::MAX))
}

/// Where a payment is in its life. `verified` → `settled` → `served`, or `failed` when
/// nothing was taken; a refund goes `refund_owed` (waiting for funds) → `refunding` (its
/// transfer named) → `refunded`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaymentState {
    /// Recorded with its signed settlement, not yet known to be on chain.
    Verified,
    Settled,
    Served,
    RefundOwed,
    Refunding,
    Refunded,
    Failed,
}

impl PaymentState {
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentState::Verified => "verified",
            PaymentState::Settled => "settled",
            PaymentState::Served => "served",
            PaymentState::RefundOwed => "refund_owed",
            PaymentState::Refunding => "refunding",
            PaymentState::Refunded => "refunded",
            PaymentState::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<PaymentState> {
        Some(match text {
            "verified" => PaymentState::Verified,
            "settled" => PaymentState::Settled,
            "served" => PaymentState::Served,
            "refund_owed" => PaymentState::RefundOwed,
            "refunding" => PaymentState::Refunding,
            "refunded" => PaymentState::Refunded,
            "failed" => PaymentState::Failed,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone)]
pub struct PaymentRecord {
    pub id: String,
    /// What makes it usable once (Solana: its message's hash; Base: payer + nonce).
    pub identity: String,
    pub agent_id: String,
    pub network: String,
    pub payer: String,
    pub pay_to: String,
    pub amount: MicroUsdc,
    pub command: Option<String>,
    pub state: PaymentState,
    pub transaction_signature: Option<String>,
    /// The signed settlement transaction, to check or re-send after a crash.
    pub raw_tx: Option<String>,
    /// Solana: the last block height the settlement can land at. Settled through a
    /// facilitator on Base: the authorization's `validBefore` (Unix seconds).
    pub valid_until: Option<u64>,
    pub job_id: Option<String>,
    pub refund_transfer_id: Option<String>,
    pub error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    /// The x402 version it arrived in.
    pub x402_version: u64,
    /// The facilitator that settles it (its origin, never a key in its URL); `None`: the
    /// agent's wallet does.
    pub facilitator: Option<String>,
    /// Its refund's transfers that went out and failed, and what they cost in fees
    /// (lamports, wei).
    pub refund_attempts: i64,
    pub refund_fees: i64,
    /// When the service stopped working on it and handed it to the operator, and why.
    pub needs_operator_at: Option<i64>,
    pub needs_operator: Option<String>,
    /// x402 `upto`: the maximum the payer authorized (`amount` is then what it charges,
    /// once metered).
    pub max_amount: Option<MicroUsdc>,
    /// x402 `upto`: what the request used, recorded before its settlement was sent.
    pub used: Option<crate::domain::Used>,
}

/// When a payer last cost an agent a fee for nothing (ms), on one network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PayerCosts {
    /// Its settlement landed and failed: the agent paid the fee.
    pub failed_on_chain_at: Option<i64>,
    /// A refund of its payment started: the agent pays the refund's fee.
    pub refunded_at: Option<i64>,
}

/// A payment met again: a retry with the same signed payment, or with the payer's id for
/// it. What it was for (`request`) decides whether the retry is the same request.
#[derive(Debug, Clone)]
pub struct EarlierPayment {
    pub record: PaymentRecord,
    /// The request as recorded with the payment (JSON).
    pub request: String,
    pub payment_ref: Option<String>,
    /// The answer it bought, as the purchase service keeps it, while kept.
    pub answer: Option<String>,
    pub answer_expires_at: Option<i64>,
}

const PAYMENT_COLUMNS: &str = "id, agent_id, network, payer, pay_to, amount, command, state, transaction_signature, \
                               raw_tx, job_id, refund_transfer_id, error, created_at, updated_at, valid_until, identity, \
                               x402_version, facilitator, refund_attempts, refund_fees, needs_operator_at, needs_operator, \
                               max_amount, used";

fn payment_row(r: &Row) -> Result<PaymentRecord, StoreError> {
    let state: String = r.get(7)?;
    let Some(state) = PaymentState::parse(&state) else {
        return Err(StoreError::Corrupt(format!("payment in unknown state {state}")));
    };
    Ok(PaymentRecord {
        id: r.get(0)?,
        agent_id: r.get(1)?,
        network: r.get(2)?,
        payer: r.get(3)?,
        pay_to: r.get(4)?,
        amount: MicroUsdc(r.get(5)?),
        command: r.get(6)?,
        state,
        transaction_signature: r.get(8)?,
        raw_tx: r.get(9)?,
        job_id: r.get(10)?,
        refund_transfer_id: r.get(11)?,
        error: r.get(12)?,
        created_at: r.get(13)?,
        updated_at: r.get(14)?,
        valid_until: r.get(15)?,
        identity: r.get(16)?,
        x402_version: r.get(17)?,
        facilitator: r.get(18)?,
        refund_attempts: r.get(19)?,
        refund_fees: r.get(20)?,
        needs_operator_at: r.get(21)?,
        needs_operator: r.get(22)?,
        max_amount: r.get::<Option<u64>>(23)?.map(MicroUsdc),
        used: r
            .get::<Option<String>>(24)?
            .map(|text| super::json_column(&text, "payment used"))
            .transpose()?,
    })
}

/// What follows a payment becoming `settled`, in the same write: its revenue in the owner's
/// usage counters, and `payment.settled`. Called by the one write that settled it.
fn now_settled_in(db: &dyn super::sql::Db, id: &str) -> Result<(), StoreError> {
    super::usage::add_revenue_in(db, id)?;
    super::webhooks::emit_payment_in(db, id, "payment.settled")?;
    Ok(())
}

impl Store {
    /// Records a payment; `Conflict` when its identity was ever recorded before.
    pub async fn insert_payment(&self, payment: NewPayment) -> Result<(), StoreError> {
        self.write(move |db| {
            let now = crate::clock::now_ms();
            let state = if payment.raw_tx.is_some() || payment.facilitator.is_some() || payment.upto {
                "verified"
            } else {
                "settled"
            };
            if state == "settled"
                && let Some(transaction) = &payment.transaction
            {
                // Settled by a transaction already on chain: one transfer pays one payment,
                // whatever form it is presented in. Base's transfers have a log index, which
                // a unique index covers; a Solana transaction has none (and a payment
                // recorded in another form, or before 0026, has another identity).
                db.serialize("payments:settled-by-transfer")?;
                let used = db.query_opt(
                    "SELECT 1 FROM payments WHERE network = ?1 AND transaction_signature = ?2
                       AND transfer_log_index IS NOT DISTINCT FROM ?3",
                    args![
                        payment.network.as_str(),
                        transaction,
                        log_index(payment.transfer_log_index)
                    ],
                )?;
                if used.is_some() {
                    return Err(StoreError::Conflict("this payment's transfer has already paid".into()));
                }
            }
            // A conflict is its identity, the payer's id for it, or the transfer that paid it,
            // recorded before.
            let inserted = db.execute(
                "INSERT INTO payments (id, identity, agent_id, network, payer, pay_to, amount, command, request, state,
                    transaction_signature, raw_tx, valid_until, created_at, updated_at, x402_version, payment_ref,
                    facilitator, transfer_log_index, scheme, max_amount)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?14, ?15, ?16, ?17, ?18, ?19, ?20)
                 ON CONFLICT DO NOTHING",
                args![
                    &payment.id,
                    payment.identity,
                    payment.agent_id,
                    payment.network.as_str(),
                    payment.payer,
                    payment.pay_to,
                    payment.amount.0 as i64,
                    payment.command,
                    payment.request,
                    state,
                    payment.transaction,
                    payment.raw_tx,
                    payment.valid_until.map(|h| i64::try_from(h).unwrap_or(i64::MAX)),
                    now,
                    payment.x402_version as i64,
                    payment.payment_ref,
                    payment.facilitator,
                    log_index(payment.transfer_log_index),
                    if payment.upto { "upto" } else { "exact" },
                    payment.upto.then_some(payment.amount.0 as i64)
                ],
            )?;
            if inserted == 0 {
                return Err(StoreError::Conflict("this payment has already been used".into()));
            }
            if state == "settled" {
                // Settled before we recorded it (someone else relayed it): counted here.
                now_settled_in(db, &payment.id)?;
            }
            Ok(())
        })
        .await
    }

    /// The payment recorded with this identity, with what a retry is compared to.
    pub async fn earlier_payment_by_identity(&self, identity: &str) -> Result<Option<EarlierPayment>, StoreError> {
        let identity = identity.to_string();
        self.earlier_payment("identity = ?1", args![identity].to_vec()).await
    }

    /// The payment `payer` gave the id `payment_ref`, with what a retry is compared to.
    pub async fn earlier_payment_by_ref(
        &self,
        payer: &str,
        payment_ref: &str,
    ) -> Result<Option<EarlierPayment>, StoreError> {
        let (payer, payment_ref) = (payer.to_string(), payment_ref.to_string());
        self.earlier_payment("payer = ?1 AND payment_ref = ?2", args![payer, payment_ref].to_vec())
            .await
    }

    async fn earlier_payment(
        &self,
        condition: &'static str,
        args: Vec<super::sql::Value>,
    ) -> Result<Option<EarlierPayment>, StoreError> {
        self.read(move |db| {
            let sql = format!(
                "SELECT {PAYMENT_COLUMNS}, request, payment_ref, answer, answer_expires_at FROM payments WHERE {condition}"
            );
            // The columns after the record's.
            let at = PAYMENT_COLUMNS.split(',').count();
            db.query_opt(&sql, &args)?
                .map(|r| {
                    Ok(EarlierPayment {
                        record: payment_row(&r)?,
                        request: r.get(at)?,
                        payment_ref: r.get(at + 1)?,
                        answer: r.get(at + 2)?,
                        answer_expires_at: r.get(at + 3)?,
                    })
                })
                .transpose()
        })
        .await
    }

    /// `settled` → `served`, keeping the answer it bought until `expires_at`, in one write.
    /// A payment by use metered at 0 is served from `verified`: nothing was settled.
    pub async fn serve_payment(&self, id: &str, answer: Option<String>, expires_at: i64) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            Ok(db.execute(
                "UPDATE payments SET state = 'served', answer = ?2, answer_expires_at = ?3, updated_at = ?4
                 WHERE id = ?1 AND (state = 'settled'
                   OR (state = 'verified' AND scheme = 'upto' AND used IS NOT NULL AND amount = 0))",
                args![id, answer, expires_at, crate::clock::now_ms()],
            )? == 1)
        })
        .await
    }

    /// Keeps the answer a payment bought (a job's address), until `expires_at`.
    pub async fn keep_answer(&self, id: &str, answer: String, expires_at: i64) -> Result<(), StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            db.execute(
                "UPDATE payments SET answer = ?2, answer_expires_at = ?3 WHERE id = ?1",
                args![id, answer, expires_at],
            )?;
            Ok(())
        })
        .await
    }

    /// Frees the payer's id of a payment that took nothing (`failed`), so that the payer
    /// may pay again under it.
    pub async fn release_payment_ref(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            db.execute(
                "UPDATE payments SET payment_ref = NULL WHERE id = ?1 AND state = 'failed'",
                args![id],
            )?;
            Ok(())
        })
        .await
    }

    /// Forgets the answers kept past their time (the payments stay). Returns how many.
    pub async fn forget_expired_answers(&self, now: i64) -> Result<usize, StoreError> {
        self.write(move |db| {
            let forgotten = db.execute(
                "UPDATE payments SET answer = NULL WHERE answer IS NOT NULL AND answer_expires_at < ?1",
                args![now],
            )?;
            Ok(forgotten as usize)
        })
        .await
    }

    /// `verified` → `settled`; `by` names the settling transaction when it was not ours
    /// (someone else relayed the payer's authorization, or a facilitator did). False when
    /// it was not `verified`, or when the transfer `by` names already paid another payment
    /// (a transaction without a log index, as on Solana, pays one payment in all).
    pub async fn settle_payment(&self, id: &str, by: Option<SettledBy>) -> Result<bool, StoreError> {
        let id = id.to_string();
        let (transaction, index) = by.map_or((None, None), |by| (Some(by.transaction), by.transfer_log_index));
        self.write(move |db| {
            let settled = db.execute(
                "UPDATE payments SET state = 'settled', transaction_signature = COALESCE(?2, transaction_signature),
                    transfer_log_index = ?3, updated_at = ?4
                 WHERE id = ?1 AND state = 'verified'
                   AND NOT EXISTS (SELECT 1 FROM payments other
                                   WHERE other.network = payments.network AND other.transaction_signature = ?2
                                     AND other.transfer_log_index IS NOT DISTINCT FROM ?3
                                     AND other.id <> payments.id)",
                args![&id, transaction, log_index(index), crate::clock::now_ms()],
            )? == 1;
            if settled {
                // Counted once: only the write that settled it gets here.
                now_settled_in(db, &id)?;
            }
            Ok(settled)
        })
        .await
    }

    /// `verified` → `failed`: nothing was taken from the payer. `charged`: the settlement
    /// landed and failed, so the agent paid its fee (the payer's cool-off counts from it).
    pub async fn fail_payment(&self, id: &str, reason: &str, charged: bool) -> Result<bool, StoreError> {
        let (id, reason) = (id.to_string(), reason.to_string());
        self.write(move |db| {
            let now = crate::clock::now_ms();
            Ok(db.execute(
                "UPDATE payments SET state = 'failed', error = ?2, updated_at = ?3,
                    failed_on_chain_at = CASE WHEN ?4 THEN ?3 ELSE failed_on_chain_at END
                 WHERE id = ?1 AND state = 'verified'",
                args![id, reason, now, charged],
            )? == 1)
        })
        .await
    }

    /// When `payer` last cost an agent a fee for nothing on `network`, if ever: its last
    /// settlement that landed and failed, and its last payment refunded (or, paid by use,
    /// released after its work failed).
    pub async fn last_costs_of(&self, network: Network, payer: &str) -> Result<PayerCosts, StoreError> {
        let payer = payer.to_string();
        self.read(move |db| {
            let row = db.query_one(
                "SELECT (SELECT MAX(failed_on_chain_at) FROM payments
                         WHERE network = ?1 AND payer = ?2 AND failed_on_chain_at IS NOT NULL),
                        (SELECT MAX(refund_started_at) FROM payments
                         WHERE network = ?1 AND payer = ?2 AND refund_started_at IS NOT NULL),
                        (SELECT MAX(released_at) FROM payments
                         WHERE network = ?1 AND payer = ?2 AND released_at IS NOT NULL)",
                args![network.as_str(), payer],
            )?;
            // A payment by use released after failed work counts as a refund.
            let refunded: Option<i64> = row.get(1)?;
            let released: Option<i64> = row.get(2)?;
            Ok(PayerCosts {
                failed_on_chain_at: row.get(0)?,
                refunded_at: refunded.max(released),
            })
        })
        .await
    }

    /// Moves a payment forward; `from` guards against going back.
    pub async fn advance_payment(
        &self,
        id: &str,
        from: &'static [PaymentState],
        to: PaymentState,
        error: Option<String>,
    ) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            let placeholders = from
                .iter()
                .map(|s| format!("'{}'", s.as_str()))
                .collect::<Vec<_>>()
                .join(", ");
            let moved = db.execute(
                &format!(
                    "UPDATE payments SET state = ?2, error = COALESCE(?3, error), updated_at = ?4
                     WHERE id = ?1 AND state IN ({placeholders})"
                ),
                args![&id, to.as_str(), error, crate::clock::now_ms()],
            )? == 1;
            if moved && to == PaymentState::Refunded {
                super::usage::add_refund_in(db, &id)?;
                super::webhooks::emit_payment_in(db, &id, "payment.refunded")?;
            }
            Ok(moved)
        })
        .await
    }

    /// Notes why a payment is stuck (a refund that did not go out) without moving it.
    pub async fn note_payment_error(&self, id: &str, error: &str) -> Result<(), StoreError> {
        let (id, error) = (id.to_string(), error.to_string());
        self.write(move |db| {
            db.execute(
                "UPDATE payments SET error = ?2, updated_at = ?3 WHERE id = ?1",
                args![id, error, crate::clock::now_ms()],
            )?;
            Ok(())
        })
        .await
    }

    /// Payments not at an end: `verified`, `settled` or `refunding`, and `refund_owed`
    /// ones last tried before `owed_before` (those wait for the payer's account); none
    /// handed to the operator.
    pub async fn unfinished_payments(&self, owed_before: i64) -> Result<Vec<PaymentRecord>, StoreError> {
        self.read(move |db| {
            db.query(
                &format!(
                    "SELECT {PAYMENT_COLUMNS} FROM payments
                     WHERE (state IN ('verified', 'settled', 'refunding')
                            OR (state = 'refund_owed' AND updated_at < ?1))
                        AND needs_operator_at IS NULL
                     ORDER BY created_at"
                ),
                args![owed_before],
            )?
            .iter()
            .map(payment_row)
            .collect()
        })
        .await
    }

    /// Payments that paid for a job which then failed by the agent's fault, still `served`:
    /// their refund was cut off before it started (a crash between the job's end and its
    /// refund). With the job's error, the refund's reason.
    pub async fn served_for_failed_jobs(&self) -> Result<Vec<(PaymentRecord, String)>, StoreError> {
        self.read(move |db| {
            let columns: Vec<String> = PAYMENT_COLUMNS.split(',').map(|c| format!("p.{}", c.trim())).collect();
            db.query(
                &format!(
                    "SELECT {}, j.error FROM jobs j JOIN payments p ON p.job_id = j.id
                     WHERE j.state = 'failed' AND j.code <> 'invalid_input' AND p.state = 'served'
                     ORDER BY j.created_at",
                    columns.join(", ")
                ),
                args![],
            )?
            .iter()
            .map(|row| {
                let why: Option<String> = row.get(columns.len())?;
                Ok((payment_row(row)?, why.unwrap_or_else(|| "the paid job failed".into())))
            })
            .collect()
        })
        .await
    }

    pub async fn payment(&self, id: &str) -> Result<Option<PaymentRecord>, StoreError> {
        let id = id.to_string();
        self.read(move |db| {
            db.query_opt(
                &format!("SELECT {PAYMENT_COLUMNS} FROM payments WHERE id = ?1"),
                args![id],
            )?
            .map(|row| payment_row(&row))
            .transpose()
        })
        .await
    }

    pub async fn payment_by_job(&self, job_id: &str) -> Result<Option<PaymentRecord>, StoreError> {
        let job_id = job_id.to_string();
        self.read(move |db| {
            db.query_opt(
                &format!("SELECT {PAYMENT_COLUMNS} FROM payments WHERE job_id = ?1"),
                args![job_id],
            )?
            .map(|row| payment_row(&row))
            .transpose()
        })
        .await
    }

    /// An agent's payments, newest first.
    pub async fn payments_of(&self, agent_id: &str, limit: u32) -> Result<Vec<PaymentRecord>, StoreError> {
        let agent_id = agent_id.to_string();
        self.read(move |db| {
            db.query(
                &format!(
                    "SELECT {PAYMENT_COLUMNS} FROM payments WHERE agent_id = ?1 ORDER BY created_at DESC, id LIMIT ?2"
                ),
                args![agent_id, limit],
            )?
            .iter()
            .map(payment_row)
            .collect()
        })
        .await
    }
}
