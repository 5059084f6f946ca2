//! Finishing payments nobody is working on: cut off by a crash, or stuck (a settlement not
//! confirmed in time, a refund that did not go out). Each recovery pass
//! (services/recovery.rs) calls [`recover`]; a payment that some request, job or earlier
//! pass holds is left to it.
//!
//! - `verified`: its stored settlement is looked up on chain and sent again while the chain
//!   has not seen it (the payer signed it; the record makes it once only). One a
//!   facilitator was asked to settle is only looked up (see `facilitated.rs`). Landed: `settled`,
//!   and on to the next rule. Failed, expired or never signed: `failed`, nothing was taken,
//!   unless the payer's money reached the agent by another transaction (Base).
//! - `settled`: the paid answer never reached the payer, so the payer is refunded.
//! - `refunding`: the refund is finished or retried (see `Refund::resume`), within its
//!   bounds; past them, it is handed to the operator and left alone.
//! - `refund_owed`: every `OWED_RETRY_PASSES` passes (10 minutes by default), paid if the
//!   payer can receive it again.
//! - `served` for a job that then failed by the agent's fault: the refund was cut off before
//!   it started, and starts now.

use std::time::Duration;

use super::refund::Refund;
use super::scheme::{self, Terms};
use super::{ELSEWHERE_LOOKBACK_SECS, Sent, conclude};
use crate::chains::{ChainError, Landing, SignedTx};
use crate::domain::Network;
use crate::services::{ServiceError, Services};
use crate::store::{PaymentRecord, PaymentState};

/// An owed refund looks again for the payer's account every this many passes.
const OWED_RETRY_PASSES: u32 = 20;

/// One pass: every unfinished payment nobody holds is taken up, in the background (a
/// settlement may take a while to confirm). Returns how many were taken up.
pub async fn recover(services: &Services) -> Result<usize, ServiceError> {
    let owed_retry = Duration::from_secs(services.settings.server.recovery_interval_secs) * OWED_RETRY_PASSES;
    let owed_before = crate::clock::now_ms() - owed_retry.as_millis() as i64;
    let unfinished = services.store.unfinished_payments(owed_before).await?;
    let mut taken = take_up_unfinished(services, unfinished).await?;
    // A paid job that failed, whose refund a crash (or an unreachable database) cut off
    // before it started: the payment still says `served`.
    for (payment, why) in services.store.served_for_failed_jobs().await? {
        let Some(network) = Network::parse(&payment.network) else {
            continue;
        };
        taken += usize::from(
            take_up(services, payment, move |services, payment| async move {
                Refund::of(&payment, network)
                    .for_failed_work()
                    .start(&services, &why)
                    .await;
            })
            .await?,
        );
    }
    Ok(taken)
}

/// Resumes each of `unfinished` (as listed a moment ago) that nobody holds; how many.
pub(super) async fn take_up_unfinished(
    services: &Services,
    unfinished: Vec<PaymentRecord>,
) -> Result<usize, ServiceError> {
    let mut taken = 0;
    for payment in unfinished {
        taken += usize::from(
            take_up(services, payment, |services, payment| async move {
                if let Err(err) = resume(&services, &payment).await {
                    tracing::warn!(payment = payment.id, "could not finish the payment yet: {err}");
                }
            })
            .await?,
        );
    }
    Ok(taken)
}

/// Runs `work` on the payment in the background, holding its claim, unless someone holds
/// it already or it moved on since it was listed; true when taken.
async fn take_up<F, Work>(services: &Services, listed: PaymentRecord, work: F) -> Result<bool, ServiceError>
where
    F: FnOnce(Services, PaymentRecord) -> Work + Send + 'static,
    Work: std::future::Future<Output = ()> + Send + 'static,
{
    let Some(claim) = services.payment_locks.claims.try_lock(listed.id.clone()).await? else {
        return Ok(false);
    };
    // Read again under the claim: whoever held it may have finished with the payment since
    // the list was read (a request that served a `settled` one; refunding that as never
    // answered would pay the payer back for an answer it got).
    let Some(payment) = services.store.payment(&listed.id).await? else {
        return Ok(false);
    };
    if payment.state != listed.state {
        return Ok(false);
    }
    let services = services.clone();
    let lifecycle = services.lifecycle.clone();
    lifecycle.spawn(async move {
        let _claim = claim;
        work(services, payment).await;
    });
    Ok(true)
}

async fn resume(services: &Services, payment: &PaymentRecord) -> Result<(), ServiceError> {
    let Some(network) = Network::parse(&payment.network) else {
        return Ok(());
    };
    let mut state = payment.state;
    if state == PaymentState::Verified {
        if !resume_settlement(services, payment, network).await? {
            return Ok(());
        }
        state = PaymentState::Settled;
    }
    let refund = Refund::of(payment, network);
    match state {
        PaymentState::Settled => {
            refund
                .start(services, "the service stopped before answering this paid request")
                .await;
        }
        PaymentState::Refunding => refund.resume(services, payment).await?,
        PaymentState::RefundOwed => {
            if let Some(stop) = refund.past_bounds(services, payment, Default::default()) {
                return refund.hand_over(services, None, Default::default(), &stop).await;
            }
            let why = payment.error.as_deref().unwrap_or("refund");
            let why = why.split("; owed:").next().unwrap_or(why);
            refund.start(services, why).await;
        }
        _ => {}
    }
    Ok(())
}

/// A `verified` payment: true once settled; false when it failed and nothing was taken.
async fn resume_settlement(
    services: &Services,
    payment: &PaymentRecord,
    network: Network,
) -> Result<bool, ServiceError> {
    if payment.facilitator.is_some() {
        if payment.max_amount.is_some() {
            return super::upto_facilitated::resume(services, payment).await;
        }
        return super::facilitated::resume(services, payment, network).await;
    }
    let (Some(signature), Some(raw)) = (&payment.transaction_signature, &payment.raw_tx) else {
        // Recorded before a signed settlement was (only rows from before 0007).
        services
            .store
            .fail_payment(
                &payment.id,
                "the service stopped before sending the settlement; nothing was taken",
                false,
            )
            .await?;
        return Ok(false);
    };
    let tx = SignedTx {
        id: signature.clone(),
        raw: raw.clone(),
        valid_until: payment.valid_until,
    };
    let chain = services.chains.get(network);
    let unavailable = |e| super::chain_unavailable(network, e);
    let agent_pays_fee = match network {
        Network::Solana => super::solana::agent_pays_fee(raw, &payment.pay_to),
        Network::Base => true,
    };
    let mut landing = chain.landing(&tx).await.map_err(unavailable)?;
    // A payment by use whose settlement was not seen by its authorization's deadline can no
    // longer land: sent now, it would fail at the agent's cost.
    let now_secs = crate::clock::now_ms() as u64 / 1000;
    if landing == Landing::Pending
        && payment.max_amount.is_some()
        && payment.valid_until.is_some_and(|deadline| deadline <= now_secs)
    {
        landing = Landing::Dropped("its authorization's deadline passed before it was seen on chain".into());
    }
    if landing == Landing::Pending {
        // Not seen, or seen and not final: sending the same transaction again is harmless.
        match chain.submit(&tx).await {
            // The node may refuse it for holding the payer's own copy: asked again next
            // pass, until the chain says it landed or can no longer land (which takes the
            // height it is valid until; a row without one is judged by the refusal).
            Err(ChainError::Refused(_)) if !agent_pays_fee && tx.valid_until.is_some() => {}
            Err(ChainError::Refused(reason)) => landing = Landing::Dropped(reason),
            Err(other @ (ChainError::Unavailable(_) | ChainError::Undecidable(_))) => return Err(unavailable(other)),
            // "Nonce too low" may be this very transaction, mined: its landing decides.
            Ok(()) | Err(ChainError::NonceUsed(_)) => {
                let timeout = Duration::from_secs(services.settings.x402.x402_settle_timeout_secs);
                landing = crate::chains::wait_for_landing(chain, &tx, timeout)
                    .await
                    .map_err(unavailable)?;
            }
        }
    }
    let sent = Sent {
        payment_id: &payment.id,
        agent_id: &payment.agent_id,
        network,
        payer: &payment.payer,
        client: None,
        identity: &payment.identity,
        terms: Terms {
            pay_to: payment.pay_to.clone(),
            price: payment.amount,
            fee_payer: None,
        },
        since_secs: ((payment.created_at / 1000) as u64).saturating_sub(ELSEWHERE_LOOKBACK_SECS),
        agent_pays_fee,
        tx,
    };
    match conclude(services, scheme::of(network), &sent, landing).await {
        Ok(_) => Ok(true),
        Err(ServiceError::X402(super::X402Error::Refused(_))) => Ok(false),
        Err(other) => Err(other),
    }
}
