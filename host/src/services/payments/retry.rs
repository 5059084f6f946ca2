//! A payment met again. A payer whose connection dropped after it paid retries: with a
//! new payment carrying the same id of its own (x402's `payment-identifier`), or with the
//! same signed payment. Either way, for the same request it gets the answer its first
//! payment bought, kept with that payment, and pays nothing more; for another request it
//! is refused, since a payment (or an id) buys one request.
//!
//! The same signed payment is answered again only within the payment's own time limit
//! (`MAX_TIMEOUT_SECONDS` from when it was recorded): once settled, a payment is public on
//! its chain, and after that minute a copy of it is more likely anyone's than the payer's.
//! An id is the payer's own (it never reaches the chain) and comes with a new signature of
//! the payer's, so it is answered for as long as the answer is kept.
//!
//! While the first request is still being answered (the retry came early, or on another
//! host), the retry waits for its answer, as long as a settlement may take.

use std::time::Duration;

use super::{MAX_TIMEOUT_SECONDS, Purchase, Settled, X402Error, already_used, refused};
use crate::domain::Network;
use crate::money::MicroUsdc;
use crate::services::{ServiceError, Services};
use crate::store::{EarlierPayment, PaymentRecord, PaymentState, StoreError};

/// How the payment was recognised.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum MetBy {
    /// The same signed payment.
    Identity,
    /// The payer's id for it (a new signature, a new authorization).
    PaymentRef,
}

/// A payment made before for the same request: its receipt, and the answer it bought.
pub struct Earlier {
    pub settled: Settled,
    pub answer: Bought,
}

/// What an earlier payment bought.
pub enum Bought {
    /// The answer as the purchase service kept it.
    Kept(String),
    /// A long-running command's job (its payment served when the job was recorded).
    Job(String),
}

/// What a retry gets: the earlier answer; `None` when the earlier payment under this id
/// took nothing (its id is free again, and the retry pays as a new payment would).
pub(super) async fn recognise(
    services: &Services,
    mut earlier: EarlierPayment,
    agent_id: &str,
    purchase: &Purchase<'_>,
    met_by: MetBy,
) -> Result<Option<Earlier>, ServiceError> {
    let same_request = earlier.record.agent_id == agent_id
        && earlier.record.command.as_deref() == purchase.command
        && serde_json::from_str::<serde_json::Value>(&earlier.request).is_ok_and(|asked| asked == *purchase.request);
    if !same_request {
        return Err(match met_by {
            MetBy::Identity => already_used(),
            MetBy::PaymentRef => refused(
                "payment_identifier_conflict",
                "This payment identifier was used for another request; give a new request a new id",
            ),
        });
    }
    let now = crate::clock::now_ms();
    if met_by == MetBy::Identity && now - earlier.record.created_at > MAX_TIMEOUT_SECONDS as i64 * 1000 {
        return Err(already_used());
    }
    let retention = services.settings.x402.x402_answer_retention_hours as i64 * 3_600_000;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(services.settings.x402.x402_settle_timeout_secs);
    let identity = earlier.record.identity.clone();
    loop {
        let record = &earlier.record;
        match record.state {
            PaymentState::Failed if met_by == MetBy::PaymentRef => {
                services.store.release_payment_ref(&record.id).await?;
                return Ok(None);
            }
            PaymentState::Failed => return Err(already_used()),
            // Refunded (a job that failed after it was answered too): the refund tells it.
            PaymentState::RefundOwed | PaymentState::Refunding | PaymentState::Refunded => {
                return Err(refused(
                    "payment_already_used",
                    "This payment's request failed and the payment is refunded (see the first answer's refund)",
                ));
            }
            PaymentState::Served => {
                let kept = earlier
                    .answer
                    .take()
                    .filter(|_| earlier.answer_expires_at.is_none_or(|at| at > now));
                let answer = match (kept, &record.job_id) {
                    (Some(kept), _) => Bought::Kept(kept),
                    // Its job's address, should keeping it have failed.
                    (None, Some(job_id)) if now - record.updated_at < retention => Bought::Job(job_id.clone()),
                    _ => {
                        return Err(refused(
                            "payment_already_used",
                            "This payment was answered; its answer is not kept (any more)",
                        ));
                    }
                };
                return Ok(Some(Earlier {
                    settled: settled_of(record)?,
                    answer,
                }));
            }
            // Still being settled or answered.
            PaymentState::Verified | PaymentState::Settled => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(X402Error::StillAnswering.into());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        earlier = match services.store.earlier_payment_by_identity(&identity).await? {
            Some(again) => again,
            None => return Err(already_used()),
        };
    }
}

/// A payment presented under the payer's id for an earlier one proves the payer asks
/// again only while it is fresh: still valid on its chain (Solana: its blockhash; Base: its
/// `validBefore`, bounded when verified), and not itself a payment recorded more than the
/// copy window ago (an original, public on its chain, copied from there).
pub(super) async fn fresh(services: &Services, attempt: &dyn super::scheme::Attempt) -> Result<(), ServiceError> {
    attempt.still_valid(services).await?;
    let recorded = services.store.earlier_payment_by_identity(&attempt.identity()).await?;
    if let Some(own) = recorded
        && crate::clock::now_ms() - own.record.created_at > MAX_TIMEOUT_SECONDS as i64 * 1000
    {
        return Err(already_used());
    }
    Ok(())
}

/// The receipt of a payment met again (its settlement, as recorded).
fn settled_of(record: &PaymentRecord) -> Result<Settled, ServiceError> {
    Ok(Settled {
        payment_id: record.id.clone(),
        agent_id: record.agent_id.clone(),
        network: Network::parse(&record.network).ok_or_else(|| {
            ServiceError::Store(StoreError::Corrupt(format!(
                "payment {} on an unknown network",
                record.id
            )))
        })?,
        payer: record.payer.clone(),
        pay_to: record.pay_to.clone(),
        amount: MicroUsdc(record.amount.0),
        transaction: record.transaction_signature.clone().unwrap_or_default(),
        settled_at: record.created_at,
        _claim: None,
        slot: None,
        prepaid_tokens: 0,
        by_use: record.max_amount.map(|max| super::settled::ByUse {
            max,
            used: record.used.unwrap_or_default(),
            command: record.command.is_some(),
        }),
    })
}
