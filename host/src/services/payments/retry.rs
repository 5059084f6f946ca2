//! A payment met again. A payer whose connection dropped after it paid retries: with the
//! same signed payment, or with a new one carrying the same id of its own (x402's
//! `payment-identifier`). Either way, for the same request it gets the answer its first
//! payment bought, kept with that payment, and pays nothing more; for another request it
//! is refused, since a payment (or an id) buys one request.
//!
//! While the first request is still being answered (the retry came early, or on another
//! host), the retry waits for its answer, as long as a settlement may take.

use std::time::Duration;

use super::{Purchase, Settled, X402Error, already_used, refused};
use crate::domain::Network;
use crate::money::MicroUsdc;
use crate::services::{ServiceError, Services};
use crate::store::{EarlierPayment, PaymentState, StoreError};

/// How the payment was recognised.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum MetBy {
    /// The same signed payment.
    Identity,
    /// The payer's id for it (a new signature, a new authorization).
    PaymentRef,
}

/// A payment made before for the same request: its receipt, and the answer it bought as
/// the purchase service kept it.
pub struct Earlier {
    pub settled: Settled,
    pub answer: String,
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
    let deadline = tokio::time::Instant::now() + Duration::from_secs(services.settings.x402.x402_settle_timeout_secs);
    loop {
        let record = &earlier.record;
        if let Some(answer) = earlier.answer.take() {
            let settled = Settled {
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
            };
            return Ok(Some(Earlier { settled, answer }));
        }
        match record.state {
            PaymentState::Failed if met_by == MetBy::PaymentRef => {
                services.store.release_payment_ref(&record.id).await?;
                return Ok(None);
            }
            PaymentState::Failed => return Err(already_used()),
            PaymentState::RefundOwed | PaymentState::Refunding | PaymentState::Refunded => {
                return Err(refused(
                    "payment_already_used",
                    "This payment's request failed and the payment is refunded (see the first answer's refund)",
                ));
            }
            _ if earlier.answer_expires_at.is_some() => {
                return Err(refused(
                    "payment_already_used",
                    "This payment was answered; its answer is no longer kept",
                ));
            }
            // Still being settled or answered.
            _ => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(X402Error::StillAnswering.into());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        earlier = match services.store.earlier_payment_by_identity(&record.identity).await? {
            Some(again) => again,
            None => return Err(already_used()),
        };
    }
}
