//! A payment on chain, while the work it paid for is done: served (its answer kept for a
//! retry) or refunded.

use super::refund;
use crate::domain::Network;
use crate::money::MicroUsdc;
use crate::services::locks::KeyGuard;
use crate::services::{ServiceError, Services};

/// A payment that is on chain: the work it paid for may now be done. While it lives, no
/// job's refund or recovery pass touches the payment.
pub struct Settled {
    pub payment_id: String,
    pub agent_id: String,
    pub network: Network,
    pub payer: String,
    pub pay_to: String,
    pub amount: MicroUsdc,
    pub transaction: String,
    pub settled_at: i64,
    /// `None` for a payment met again by a retry: its own request holds it, or is done.
    pub(super) _claim: Option<KeyGuard<String>>,
    /// What the purchase reserved for the work (see [`super::Reserve`]): a plugin slot, or
    /// the tokens of a chat's first round already taken from its owner's budget.
    pub slot: Option<crate::plugins::SlotPermit>,
    pub prepaid_tokens: u32,
    /// Paid by use (`upto`): the maximum authorized and what was used; `amount` is then
    /// the charge for that use, and `transaction` empty when it was 0.
    pub by_use: Option<ByUse>,
}

/// What a payment charged by use authorized and measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByUse {
    pub max: MicroUsdc,
    pub used: crate::domain::Used,
    /// A command's units were charged (a message's tokens otherwise).
    pub command: bool,
}

impl Settled {
    /// The paid work was done: `settled` → `served`. Until this succeeds, the answer must
    /// not go out (a payment left `settled` is refunded as never answered).
    pub async fn served(&self, services: &Services, answer: Option<String>) -> Result<(), ServiceError> {
        let answer = answer.filter(|answer| self.may_keep(services, answer));
        let expires_at = self.answer_expires_at(services);
        if services
            .store
            .serve_payment(&self.payment_id, answer, expires_at)
            .await?
        {
            Ok(())
        } else {
            Err(ServiceError::Conflict(format!(
                "payment {} is no longer settled",
                self.payment_id
            )))
        }
    }

    /// Keeps the answer of a payment already served (a job's address), for a retry.
    pub async fn keep(&self, services: &Services, answer: Option<String>) {
        let Some(answer) = answer.filter(|answer| self.may_keep(services, answer)) else {
            return;
        };
        let expires_at = self.answer_expires_at(services);
        if let Err(err) = services.store.keep_answer(&self.payment_id, answer, expires_at).await {
            tracing::warn!(
                payment = self.payment_id,
                "could not keep the answer for a retry: {err}"
            );
        }
    }

    /// An answer over the size limit is not kept (a retry is then told it is not).
    fn may_keep(&self, services: &Services, answer: &str) -> bool {
        let fits = answer.len() <= services.settings.x402.x402_kept_answer_max_bytes;
        if !fits {
            tracing::warn!(
                payment = self.payment_id,
                bytes = answer.len(),
                "an answer too large to keep"
            );
        }
        fits
    }

    fn answer_expires_at(&self, services: &Services) -> i64 {
        crate::clock::now_ms() + services.settings.x402.x402_answer_retention_hours as i64 * 3_600_000
    }

    /// The paid work failed after settlement, by the agent's fault: the payer gets the
    /// amount back from the agent's wallet. Returns the refund's transaction signature, if
    /// it went out.
    pub async fn refund(&self, services: &Services, why: &str) -> Option<String> {
        let refund = refund::Refund {
            payment_id: &self.payment_id,
            agent_id: &self.agent_id,
            network: self.network,
            payer: &self.payer,
            amount: self.amount,
            failed_work: true,
        };
        refund.start(services, why).await
    }
}
