//! Paying a payer back when the agent could not deliver what was paid for.
//!
//! The rules:
//! - At most once: the payment moves to `refunding`, naming the refund's transfer, before
//!   that transfer is written.
//! - Only the agent's failures are refunded (a command that failed, timed out or could not
//!   run; a model that was down; a service that stopped before answering). The payer's own
//!   invalid input, which a command refuses after its parameters were checked, is not: the
//!   work ran and answered, so the payment counts as served. Refunding it would let anyone
//!   make the agent pay two network fees per request for nothing.
//! - The agent's wallet pays the refund's fee: the failure was the agent's.
//! - A refund never creates the payer's token account (Solana): a payer could close it
//!   after each refund and keep its rent. When the payer has no account, the refund is
//!   `refund_owed` and is paid once the account exists again.

use crate::chains::{Landing, SignedTx};
use crate::domain::Network;
use crate::money::MicroUsdc;
use crate::services::{ServiceError, Services, wallets};
use crate::store::{
    JobState, PaymentRecord, PaymentState, RefundFailure, Store, TransferKind, TransferRecord, TransferState,
};

/// Whether a failure after payment was the payer's own doing (its input), not the agent's.
pub fn payers_fault(err: &ServiceError) -> bool {
    matches!(err, ServiceError::Validation(_))
}

/// Joins a refund's reason and why it did not go out (yet) in the payment's error.
const REFUND_NOT_OUT: &str = "; the refund did not go out yet: ";

pub struct Refund<'a> {
    pub payment_id: &'a str,
    pub agent_id: &'a str,
    pub network: Network,
    pub payer: &'a str,
    pub amount: MicroUsdc,
    /// The paid work failed (not this service stopping before it answered): the payer
    /// waits out the refund cool-off, and the refund counts against its limits.
    pub failed_work: bool,
}

impl<'a> Refund<'a> {
    pub fn of(payment: &'a PaymentRecord, network: Network) -> Refund<'a> {
        Refund {
            payment_id: &payment.id,
            agent_id: &payment.agent_id,
            network,
            payer: &payment.payer,
            amount: payment.amount,
            failed_work: false,
        }
    }

    /// The same refund, for paid work that failed.
    pub fn for_failed_work(self) -> Self {
        Refund {
            failed_work: true,
            ..self
        }
    }

    /// Starts the refund unless one already started; its signature once it landed.
    pub async fn start(&self, services: &Services, why: &str) -> Option<String> {
        if self.owed(services, why).await {
            return None;
        }
        let transfer_id = wallets::new_transfer_id();
        match services
            .store
            .start_refund(self.payment_id, &transfer_id, why, self.failed_work)
            .await
        {
            Ok(true) => {
                crate::faults::crash_point("refund:after_start");
                if self.failed_work {
                    super::guard::charge_refund(services, self.network, self.payer).await;
                }
                self.pay(services, transfer_id, why).await
            }
            Ok(false) => None, // refunded or being refunded already, or never settled
            Err(err) => {
                tracing::error!(payment = self.payment_id, "could not start the refund: {err}");
                None
            }
        }
    }

    /// True when the payer cannot receive the refund now; the payment is then `refund_owed`.
    /// When the chain cannot tell, the refund goes ahead (and is retried if it fails).
    async fn owed(&self, services: &Services, why: &str) -> bool {
        match services.chains.get(self.network).can_receive(self.payer).await {
            Ok(true) => false,
            Ok(false) => {
                let note = format!(
                    "{why}; owed: the payer has no USDC account to receive it, and a refund does not create one"
                );
                if let Err(err) = services.store.owe_refund(self.payment_id, &note).await {
                    tracing::error!(payment = self.payment_id, "could not record the owed refund: {err}");
                }
                true
            }
            Err(err) => {
                tracing::warn!(
                    payment = self.payment_id,
                    "cannot tell whether the payer can receive: {err}"
                );
                false
            }
        }
    }

    /// Sends the refund as transfer `transfer_id`. One that does not go out leaves the
    /// payment `refunding`, with why, for recovery to finish or retry.
    async fn pay(&self, services: &Services, transfer_id: String, why: &str) -> Option<String> {
        let order = wallets::TransferOrder {
            id: Some(transfer_id),
            agent_id: self.agent_id.to_string(),
            network: self.network,
            kind: TransferKind::Refund,
            recipient: self.payer.to_string(),
            amount: self.amount,
            memo: Some(format!("refund of {}: {why}", self.payment_id)),
            create_account: false,
        };
        match wallets::transfer(services, order).await {
            Ok(record) => {
                self.refunded(services).await;
                if let Some(metrics) = crate::telemetry::metrics::metrics() {
                    metrics.x402_refunded(self.network.as_str(), self.amount.0);
                }
                if let Some(signature) = &record.signature {
                    super::note_fee(services, self.agent_id, self.network, signature);
                }
                record.signature
            }
            Err(err) => {
                tracing::error!(payment = self.payment_id, "refund failed: {err}");
                let note = format!("{why}{REFUND_NOT_OUT}{err}");
                let _ = services.store.note_payment_error(self.payment_id, &note).await;
                None
            }
        }
    }

    async fn refunded(&self, services: &Services) {
        if let Err(err) = services
            .store
            .advance_payment(
                self.payment_id,
                &[PaymentState::Refunding],
                PaymentState::Refunded,
                None,
            )
            .await
        {
            tracing::error!(payment = self.payment_id, "could not mark the refund: {err}");
        }
    }

    /// A refund's transfer recorded `failed`, asked of the chain before another transfer
    /// is paid in its place: what it cost when it can never pay, `None` when it may still.
    /// One that landed after all is marked so, and the refund `refunded`; one the chain may
    /// still take is sent again (harmless: it is the same transaction) and waited for.
    async fn gone_for_good(
        &self,
        services: &Services,
        failed: &TransferRecord,
    ) -> Result<Option<RefundFailure>, ServiceError> {
        let (Some(id), Some(raw)) = (&failed.signature, &failed.raw_tx) else {
            // Never signed (the node could not be asked, say): nothing went out.
            return Ok(Some(RefundFailure::default()));
        };
        let went_out = |fee: i64| Some(RefundFailure { went_out: true, fee });
        let tx = SignedTx {
            id: id.clone(),
            raw: raw.clone(),
            valid_until: failed.valid_until,
        };
        let chain = services.chains.get(self.network);
        let landing = chain
            .landing(&tx)
            .await
            .map_err(|e| super::chain_unavailable(self.network, e))?;
        match landing {
            Landing::Dropped(_) => Ok(went_out(0)),
            // Failed on chain: the agent paid its fee.
            Landing::Failed(_) => {
                let fee = chain.fee_paid(id).await.unwrap_or_else(|err| {
                    tracing::warn!(transfer = failed.id, "could not read a failed refund's fee: {err}");
                    None
                });
                Ok(went_out(fee.map_or(0, |fee| i64::try_from(fee).unwrap_or(i64::MAX))))
            }
            Landing::Confirmed => {
                tracing::warn!(
                    payment = self.payment_id,
                    transfer = failed.id,
                    "a refund's transfer recorded failed landed after all"
                );
                services.store.transfer_landed_after_all(&failed.id).await?;
                self.refunded(services).await;
                Ok(None)
            }
            Landing::Pending => {
                if let Err(err) = chain.submit(&tx).await {
                    tracing::debug!(transfer = failed.id, "the earlier refund transfer, sent again: {err}");
                }
                Ok(None)
            }
        }
    }

    /// Why a refund must not send another transfer: as many of its transfers went out and
    /// failed as may, or they cost as much in fees as they may (with `last`, the latest
    /// one's part). `None`: it may.
    pub fn past_bounds(&self, services: &Services, payment: &PaymentRecord, last: RefundFailure) -> Option<String> {
        let x402 = &services.settings.x402;
        let attempts = payment.refund_attempts + i64::from(last.went_out);
        if attempts >= i64::from(x402.x402_refund_max_attempts) {
            return Some(format!(
                "{attempts} transfers of the refund went out and failed (x402_refund_max_attempts)"
            ));
        }
        let (most, unit, setting) = match self.network {
            Network::Solana => (
                x402.x402_refund_max_fee_lamports,
                "lamports",
                "x402_refund_max_fee_lamports",
            ),
            Network::Base => (x402.x402_refund_max_fee_wei, "wei", "x402_refund_max_fee_wei"),
        };
        let fees = payment.refund_fees.saturating_add(last.fee);
        (u64::try_from(fees).unwrap_or(0) >= most)
            .then(|| format!("the refund's failed transfers cost {fees} {unit} in fees ({setting})"))
    }

    /// Stops the refund and hands it to the operator (`payment.needs_operator`), with why.
    pub async fn hand_over(
        &self,
        services: &Services,
        previous: Option<&str>,
        last: RefundFailure,
        why: &str,
    ) -> Result<(), ServiceError> {
        if services
            .store
            .hand_to_operator(self.payment_id, previous, last, why)
            .await?
        {
            tracing::error!(
                payment = self.payment_id,
                "refund handed to the operator: {why}; `agent-host payments resume` tries it again"
            );
        }
        Ok(())
    }

    /// A refund left `refunding`: its transfer is looked up. Confirmed → `refunded`; still
    /// pending → left to the transfer reconciliation; failed or never written → sent again
    /// (or owed, when the payer's account is gone), within the refund's bounds; past them,
    /// handed to the operator.
    pub async fn resume(&self, services: &Services, payment: &PaymentRecord) -> Result<(), ServiceError> {
        // The original reason, without the notes of attempts that did not go out.
        let noted = payment.error.as_deref().unwrap_or("refund");
        let why = noted.split(REFUND_NOT_OUT).next().unwrap_or(noted).to_string();
        let previous = payment.refund_transfer_id.as_deref();
        let transfer = match previous {
            Some(id) => services.store.transfer(id).await?,
            None => None,
        };
        match transfer.as_ref().map(|t| t.state) {
            Some(TransferState::Confirmed) => self.refunded(services).await,
            Some(TransferState::Pending) => {}
            Some(TransferState::Failed) | None => {
                let last = match &transfer {
                    Some(failed) => match self.gone_for_good(services, failed).await? {
                        Some(last) => last,
                        None => return Ok(()),
                    },
                    None => RefundFailure::default(),
                };
                if let Some(stop) = self.past_bounds(services, payment, last) {
                    return self.hand_over(services, previous, last, &stop).await;
                }
                if self.owed(services, &why).await {
                    return Ok(());
                }
                let transfer_id = wallets::new_transfer_id();
                if services
                    .store
                    .retry_refund(&payment.id, previous, last, &transfer_id)
                    .await?
                {
                    self.pay(services, transfer_id, &why).await;
                }
            }
        }
        Ok(())
    }
}

/// Called when a job ends `failed`: a paid job's payer is refunded, unless the job failed
/// on the payer's own input (`invalid_input`).
/// A job that ended by the payer's doing (its input refused, or its own cancellation) is
/// neither refunded nor counted against the command.
fn payers_doing(code: &str) -> bool {
    code == "invalid_input" || code == crate::store::JOB_CANCELLED
}

pub async fn refund_failed_job(services: &Services, job_id: &str, why: &str, code: &str) {
    if payers_doing(code) {
        return;
    }
    let payment = match services.store.payment_by_job(job_id).await {
        Ok(Some(payment)) => payment,
        Ok(None) => return,
        Err(err) => {
            tracing::error!(job = job_id, "could not look up the job's payment: {err}");
            return;
        }
    };
    // A job that could not start or that this host failed is not the command's failure.
    if let Some(command) = payment.command.as_ref().filter(|_| code != "internal_error") {
        let rules = super::breaker::Rules::of(&services.settings.x402);
        super::breaker::failed(&services.store, rules, &payment.agent_id, command, &payment.payer, why).await;
    }
    let Some(network) = Network::parse(&payment.network) else {
        return;
    };
    // The request that queued the job may still hold the payment: wait for its answer.
    // If that fails, the payment stays `served` with a failed job, and the next recovery
    // pass starts its refund.
    let _claim = match services.payment_locks.claims.lock(payment.id.clone()).await {
        Ok(claim) => claim,
        Err(err) => {
            tracing::error!(
                job = job_id,
                payment = payment.id,
                "could not refund the failed job's payer: {err}"
            );
            return;
        }
    };
    // Read both again under the claim: only a job recorded failed by the agent's fault
    // refunds (a recovery pass that took a job for cut off may have lost to its host ending
    // it succeeded), and only a payment still `served` (a refund another pass started, or
    // owes, is that one's to finish).
    let still_owed = async {
        let job = services.store.job(job_id).await?;
        let failed = job.is_some_and(|j| j.state == JobState::Failed && !j.code.as_deref().is_some_and(payers_doing));
        let payment = services.store.payment(&payment.id).await?;
        Ok::<_, crate::store::StoreError>(payment.filter(|p| failed && p.state == PaymentState::Served))
    };
    let payment = match still_owed.await {
        Ok(Some(payment)) => payment,
        Ok(None) => return,
        Err(err) => {
            tracing::error!(job = job_id, "could not read the job's payment again: {err}");
            return;
        }
    };
    Refund::of(&payment, network)
        .for_failed_work()
        .start(services, why)
        .await;
}

/// The refund's transaction signature, once it is on chain.
pub async fn signature_of(store: &Store, payment: &PaymentRecord) -> Result<Option<String>, ServiceError> {
    let Some(transfer_id) = payment
        .refund_transfer_id
        .as_ref()
        .filter(|_| payment.state == PaymentState::Refunded)
    else {
        return Ok(None);
    };
    Ok(store.transfer(transfer_id).await?.and_then(|t| t.signature))
}
