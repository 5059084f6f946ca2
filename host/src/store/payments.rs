use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError};
use crate::domain::Network;
use crate::money::MicroUsdc;

/// A verified payment about to be settled.
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
}

#[derive(Debug, Clone)]
pub struct PaymentRecord {
    pub id: String,
    pub agent_id: String,
    pub network: String,
    pub payer: String,
    pub pay_to: String,
    pub amount: MicroUsdc,
    pub command: Option<String>,
    pub state: String,
    pub transaction_signature: Option<String>,
    /// The signed settlement transaction, to check or re-send after a crash.
    pub raw_tx: Option<String>,
    pub job_id: Option<String>,
    pub refund_transfer_id: Option<String>,
    pub error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

const PAYMENT_COLUMNS: &str = "id, agent_id, network, payer, pay_to, amount, command, state, transaction_signature, \
                               raw_tx, job_id, refund_transfer_id, error, created_at, updated_at";

fn payment_row(r: &rusqlite::Row<'_>) -> Result<PaymentRecord, rusqlite::Error> {
    Ok(PaymentRecord {
        id: r.get(0)?,
        agent_id: r.get(1)?,
        network: r.get(2)?,
        payer: r.get(3)?,
        pay_to: r.get(4)?,
        amount: MicroUsdc(r.get::<_, i64>(5)? as u64),
        command: r.get(6)?,
        state: r.get(7)?,
        transaction_signature: r.get(8)?,
        raw_tx: r.get(9)?,
        job_id: r.get(10)?,
        refund_transfer_id: r.get(11)?,
        error: r.get(12)?,
        created_at: r.get(13)?,
        updated_at: r.get(14)?,
    })
}

impl Store {
    /// Records a payment; `Conflict` when its identity was ever recorded before.
    pub async fn insert_payment(&self, payment: NewPayment) -> Result<(), StoreError> {
        self.write(move |tx| {
            let now = crate::clock::now_ms();
            let inserted = tx.execute(
                "INSERT INTO payments (id, identity, agent_id, network, payer, pay_to, amount, command, request, state, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'verified', ?10, ?10)
                 ON CONFLICT (identity) DO NOTHING",
                params![
                    payment.id,
                    payment.identity,
                    payment.agent_id,
                    payment.network.as_str(),
                    payment.payer,
                    payment.pay_to,
                    payment.amount.0 as i64,
                    payment.command,
                    payment.request,
                    now
                ],
            )?;
            if inserted == 0 {
                return Err(StoreError::Conflict("this payment has already been used".into()));
            }
            Ok(())
        })
        .await
    }

    pub async fn payment_identity_used(&self, identity: &str) -> Result<bool, StoreError> {
        let identity = identity.to_string();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached("SELECT 1 FROM payments WHERE identity = ?1")?
                .query_row(params![identity], |_| Ok(()))
                .optional()?
                .is_some())
        })
        .await
    }

    /// Records the settlement transaction before it is sent.
    pub async fn set_payment_transaction(&self, id: &str, signature: &str, raw_tx: &str) -> Result<(), StoreError> {
        let (id, signature, raw_tx) = (id.to_string(), signature.to_string(), raw_tx.to_string());
        self.write(move |tx| {
            tx.execute(
                "UPDATE payments SET transaction_signature = ?2, raw_tx = ?3, updated_at = ?4 WHERE id = ?1",
                params![id, signature, raw_tx, crate::clock::now_ms()],
            )?;
            Ok(())
        })
        .await
    }

    /// Moves a payment forward; `from` guards against going back.
    pub async fn advance_payment(
        &self,
        id: &str,
        from: &'static [&'static str],
        to: &'static str,
        error: Option<String>,
    ) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.write(move |tx| {
            let placeholders = from.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(", ");
            Ok(tx.execute(
                &format!(
                    "UPDATE payments SET state = ?2, error = COALESCE(?3, error), updated_at = ?4
                     WHERE id = ?1 AND state IN ({placeholders})"
                ),
                params![id, to, error, crate::clock::now_ms()],
            )? == 1)
        })
        .await
    }

    pub async fn set_payment_job(&self, id: &str, job_id: &str) -> Result<(), StoreError> {
        let (id, job_id) = (id.to_string(), job_id.to_string());
        self.write(move |tx| {
            tx.execute(
                "UPDATE payments SET job_id = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, job_id, crate::clock::now_ms()],
            )?;
            Ok(())
        })
        .await
    }

    /// Starts a refund: `settled`/`served` → `refunding`, naming the transfer that will
    /// pay it before that transfer exists. False when the payment is not refundable (a
    /// refund already started, or it was never settled): this is what makes it once only.
    pub async fn start_refund(&self, id: &str, transfer_id: &str, why: &str) -> Result<bool, StoreError> {
        let (id, transfer_id, why) = (id.to_string(), transfer_id.to_string(), why.to_string());
        self.write(move |tx| {
            Ok(tx.execute(
                "UPDATE payments SET state = 'refunding', refund_transfer_id = ?2, error = ?3, updated_at = ?4
                 WHERE id = ?1 AND state IN ('settled', 'served')",
                params![id, transfer_id, why, crate::clock::now_ms()],
            )? == 1)
        })
        .await
    }

    /// Names a new transfer for a refund whose transfer `previous` failed or was never
    /// written; false when another attempt got there first.
    pub async fn retry_refund(&self, id: &str, previous: Option<&str>, transfer_id: &str) -> Result<bool, StoreError> {
        let (id, previous, transfer_id) = (id.to_string(), previous.map(str::to_string), transfer_id.to_string());
        self.write(move |tx| {
            Ok(tx.execute(
                "UPDATE payments SET refund_transfer_id = ?3, updated_at = ?4
                 WHERE id = ?1 AND state = 'refunding' AND refund_transfer_id IS ?2",
                params![id, previous, transfer_id, crate::clock::now_ms()],
            )? == 1)
        })
        .await
    }

    /// Notes why a payment is stuck (a refund that did not go out) without moving it.
    pub async fn note_payment_error(&self, id: &str, error: &str) -> Result<(), StoreError> {
        let (id, error) = (id.to_string(), error.to_string());
        self.write(move |tx| {
            tx.execute(
                "UPDATE payments SET error = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, error, crate::clock::now_ms()],
            )?;
            Ok(())
        })
        .await
    }

    /// Payments left unfinished by a previous run: `verified`, `settled` or `refunding`
    /// and last touched before `before` (rows of requests in flight now are not ours).
    pub async fn unfinished_payments(&self, before: i64) -> Result<Vec<PaymentRecord>, StoreError> {
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {PAYMENT_COLUMNS} FROM payments
                 WHERE state IN ('verified', 'settled', 'refunding') AND updated_at < ?1 ORDER BY created_at"
            ))?;
            let rows = stmt.query_map(params![before], payment_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    pub async fn payment_by_job(&self, job_id: &str) -> Result<Option<PaymentRecord>, StoreError> {
        let job_id = job_id.to_string();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(&format!("SELECT {PAYMENT_COLUMNS} FROM payments WHERE job_id = ?1"))?
                .query_row(params![job_id], payment_row)
                .optional()?)
        })
        .await
    }

    /// An agent's payments, newest first.
    pub async fn payments_of(&self, agent_id: &str, limit: u32) -> Result<Vec<PaymentRecord>, StoreError> {
        let agent_id = agent_id.to_string();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {PAYMENT_COLUMNS} FROM payments WHERE agent_id = ?1 ORDER BY created_at DESC, id LIMIT ?2"
            ))?;
            let rows = stmt.query_map(params![agent_id, limit], payment_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }
}
