//! Settling through the operator's x402 facilitator instead of the agent's wallet
//! (`x402_{network}_facilitator_url`; on Solana the facilitator's fee payer then signs and
//! pays the fee, and the offer names it). The rest of the pipeline is the same: the local
//! checks and limits before anything, the payment recorded once before the facilitator is
//! asked to settle, the same receipts, and recovery. The facilitator is asked to settle a
//! payment once: an answer lost on the way is looked up on chain (Base: the
//! authorization's use and its transfer to the agent; Solana: the transaction carrying the
//! payment's message among those of the payer's token account), never asked for again;
//! once the payment can no longer land, it is failed (or, when the chain cannot tell,
//! handed to the operator). Refunds still go out from the agent's wallet, which then needs
//! gas; without it a refund waits, `refunding`, each recovery pass trying it again until
//! the refund's bounds hand it to the operator.

use serde_json::json;

use super::scheme::{self, Lookup, SettledBy, Terms};
use super::{Offer, X402Error, chain_unavailable, record_once, refused};
use crate::chains::ChainError;
use crate::clients::facilitator::{self, Facilitator, FacilitatorError};
use crate::domain::Network;
use crate::money::MicroUsdc;
use crate::services::{ServiceError, Services};
use crate::store::{NewPayment, PaymentRecord};
use crate::x402::wire::Payment;

/// Verifies `payment` with the facilitator, records it (`record`, once, ever) and has the
/// facilitator settle it. `Some(transaction)`: settled. `None`: recorded before by a
/// request that raced this one (a retry).
pub(super) async fn settle(
    services: &Services,
    facilitator: &Facilitator,
    offer: &Offer,
    payment: &Payment,
    price: MicroUsdc,
    record: &NewPayment,
) -> Result<Option<String>, ServiceError> {
    // The facilitator speaks version 2: a version-1 payment of `exact` carries the same
    // payload, for the requirement it was made for.
    offer.takes(crate::x402::wire::Version::V2)?;
    let accepted = offer.requirement_v2(services, price).ok_or_else(|| {
        refused(
            "wrong_network",
            "x402 version 2 is not offered on this network right now",
        )
    })?;
    let resource = json!({ "url": offer.resource_url(services), "mimeType": "application/json" });
    let request = facilitator::request(&payment.payload, &accepted, &resource);
    verify(facilitator, &request).await?;
    // Where the agent's own settlement is signed: checked, nothing recorded yet.
    crate::faults::crash_point("x402:after_sign");
    if !record_once(services, record).await? {
        return Ok(None);
    }
    crate::faults::crash_point("x402:after_record");
    let answer = facilitator.settle(&request).await;
    crate::faults::crash_point("x402:after_send");
    match answer {
        // Its word is not enough: the chain must show this payment's own transfer to the
        // agent (Base: the authorization's; Solana: the payer's signed transaction, landed).
        Ok(settled) if settled.success => match on_chain(services, record, &settled.transaction).await? {
            Some(by) => {
                if !by.transaction.eq_ignore_ascii_case(&settled.transaction) {
                    tracing::warn!(
                        payment = record.id,
                        facilitator = facilitator.label(),
                        claimed = settled.transaction,
                        found = by.transaction,
                        "the facilitator named another transaction than the one that settled the payment"
                    );
                }
                let transaction = super::settle_by(services, &record.id, by).await?;
                crate::faults::crash_point("x402:after_confirm");
                Ok(Some(transaction))
            }
            None => {
                tracing::warn!(
                    payment = record.id,
                    facilitator = facilitator.label(),
                    claimed = settled.transaction,
                    "the facilitator claims a settlement the chain does not show (yet)"
                );
                let error = FacilitatorError::BadAnswer(format!(
                    "settle: {} does not settle this payment on chain",
                    settled.transaction
                ));
                Err(X402Error::Facilitator { error, recorded: true }.into())
            }
        },
        // Not confirmed, whatever the words: a facilitator may answer `success: false` after
        // its transaction went out (a confirmation that timed out, say). The payment stays
        // recorded; recovery finds it on chain, or fails it once it can no longer land.
        Ok(unconfirmed) => {
            tracing::warn!(
                payment = record.id,
                facilitator = facilitator.label(),
                "settle not confirmed: {}",
                unconfirmed.reason()
            );
            let error = FacilitatorError::BadAnswer(format!("settle: {}", unconfirmed.reason()));
            Err(X402Error::Facilitator { error, recorded: true }.into())
        }
        Err(error) => {
            tracing::warn!(
                payment = record.id,
                facilitator = facilitator.label(),
                "settle: {error}"
            );
            Err(X402Error::Facilitator { error, recorded: true }.into())
        }
    }
}

/// Has the facilitator verify a payment (`request`, as [`facilitator::request`] makes it),
/// before anything is recorded: its refusal is the payer's `invalid_payment`.
pub(super) async fn verify(facilitator: &Facilitator, request: &serde_json::Value) -> Result<(), ServiceError> {
    let verdict = facilitator.verify(request).await.map_err(|error| {
        tracing::warn!(facilitator = facilitator.label(), "verify: {error}");
        X402Error::Facilitator { error, recorded: false }
    })?;
    if !verdict.is_valid {
        return Err(refused(
            "invalid_payment",
            format!("The facilitator refused the payment: {}", verdict.reason()),
        ));
    }
    Ok(())
}

/// How often the chain is asked, while waiting for a facilitator's settlement to show.
const ON_CHAIN_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// The settlement of `record` as our own node shows it (the facilitator's `claimed`
/// transaction first), waited for up to the settle timeout (the facilitator's node may be
/// ahead of ours); `None` when it did not show.
async fn on_chain(services: &Services, record: &NewPayment, claimed: &str) -> Result<Option<SettledBy>, ServiceError> {
    let network = record.network;
    let terms = Terms {
        pay_to: record.pay_to.clone(),
        price: record.amount,
        fee_payer: None,
    };
    let lookup = Lookup {
        since_secs: (crate::clock::now_ms() as u64 / 1000).saturating_sub(super::MAX_TIMEOUT_SECONDS),
        valid_until: record.valid_until,
        claimed: Some(claimed),
    };
    let timeout = std::time::Duration::from_secs(services.settings.x402.x402_settle_timeout_secs);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let found = match scheme::of(network)
            .settled_elsewhere(services, &record.identity, &terms, lookup)
            .await
        {
            Ok(found) => found,
            // Not found among too much else: the named transaction may still show.
            Err(ChainError::Undecidable(why)) => {
                tracing::debug!(payment = record.id, "not decided yet: {why}");
                None
            }
            Err(other) => return Err(chain_unavailable(network, other)),
        };
        if found.is_some() || tokio::time::Instant::now() >= deadline {
            return Ok(found);
        }
        tokio::time::sleep(ON_CHAIN_POLL).await;
    }
}

/// A `verified` payment the facilitator was asked to settle, whose answer never came:
/// true once found on chain (now `settled`), false once it can no longer land (`failed`,
/// nothing was taken). Until then it stays as it is, for the next pass.
pub(super) async fn resume(
    services: &Services,
    payment: &PaymentRecord,
    network: Network,
) -> Result<bool, ServiceError> {
    let terms = Terms {
        pay_to: payment.pay_to.clone(),
        price: payment.amount,
        fee_payer: None,
    };
    let scheme = scheme::of(network);
    let unavailable = |e| chain_unavailable(network, e);
    // Expired first, then looked up: a settlement that lands in between is still found.
    let expired = match payment.valid_until {
        Some(until) => scheme.expired(services, until).await.map_err(unavailable)?,
        None => true,
    };
    // Asked to settle after the payment was recorded: nothing before that counts.
    let lookup = Lookup {
        since_secs: ((payment.created_at / 1000) as u64).saturating_sub(super::MAX_TIMEOUT_SECONDS),
        valid_until: payment.valid_until,
        claimed: None,
    };
    let found = match scheme
        .settled_elsewhere(services, &payment.identity, &terms, lookup)
        .await
    {
        Ok(found) => found,
        // Past its time, the answer will never be easier to find: the operator decides.
        Err(ChainError::Undecidable(why)) if expired => {
            let why = format!("whether the facilitator settled it cannot be told from the chain: {why}");
            if services
                .store
                .hand_to_operator(&payment.id, None, Default::default(), &why)
                .await?
            {
                tracing::error!(payment = payment.id, "handed to the operator: {why}");
            }
            return Ok(false);
        }
        Err(other) => return Err(unavailable(other)),
    };
    if let Some(by) = found {
        return match super::settle_by(services, &payment.id, by).await {
            Ok(_) => Ok(true),
            Err(ServiceError::X402(X402Error::Refused(_))) => Ok(false),
            Err(other) => Err(other),
        };
    }
    let store = &services.store;
    if !expired {
        return Err(X402Error::SettlementPending {
            transaction: payment.id.clone(),
            payer: payment.payer.clone(),
        }
        .into());
    }
    store
        .fail_payment(
            &payment.id,
            "the facilitator did not settle it before the payment expired; nothing was taken",
            false,
        )
        .await?;
    Ok(false)
}
