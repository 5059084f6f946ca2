//! `upto` settled through the operator's facilitator (`x402_base_facilitator_url`) rather
//! than the agent's wallet: the payer's witness names the facilitator's settling address
//! (from its `/supported`), the facilitator verifies the authorization at its maximum before
//! the work (beside our own checks on chain), and settles the charge after it. Its word is
//! not enough: the settlement counts once the chain shows the proxy's `settle` of this
//! authorization, for this amount, to the agent. An answer lost on the way is looked up on
//! chain by recovery, never asked for again.

use alloy::primitives::U256;
use serde_json::{Value, json};

use super::scheme::SettledBy;
use super::{Offer, X402Error, chain_unavailable, refused};
use crate::chains::base::{Eip2612Approval, UptoPaid, parse_address};
use crate::clients::facilitator::{self, Facilitator, FacilitatorError};
use crate::domain::Network;
use crate::money::MicroUsdc;
use crate::services::{ServiceError, Services};
use crate::store::PaymentRecord;
use crate::x402::gas_sponsoring;
use crate::x402::wire::{Payment, RequirementsV2};

/// How much later than an authorization's deadline (by our clock) its settlement may still
/// land (the chain's clock may run behind ours).
const CLOCK_MARGIN_SECS: u64 = 30;

/// How often the chain is asked while waiting for the facilitator's settlement to show.
const ON_CHAIN_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// What the facilitator is sent: the payment as the payer made it (for the maximum), and
/// the requirement it answers: at the maximum to verify, at the charge to settle.
/// `with_permit`: the payer's permit for Permit2 goes along, for the facilitator to submit.
pub(super) fn request(
    services: &Services,
    offer: &Offer,
    payment: &Payment,
    offered: &RequirementsV2,
    with_permit: bool,
) -> Value {
    let resource = json!({ "url": offer.resource_url(services), "mimeType": "application/json" });
    let mut request = facilitator::request(&payment.payload, offered, &resource);
    if with_permit && let Some(permit) = payment.extensions.get(gas_sponsoring::NAME) {
        request["paymentPayload"]["extensions"] = json!({ gas_sponsoring::NAME: permit });
    }
    request
}

/// Has the facilitator settle `charge` (recorded with the payment before this is called)
/// and waits for the chain to show it; the settlement's transaction. `Err`: not shown (yet):
/// the payment stays recorded, for recovery to find on chain or fail once it cannot land.
pub(super) async fn settle(
    services: &Services,
    facilitator: &Facilitator,
    request: &Value,
    payment_id: &str,
    paid: &UptoPaid,
    approval: Option<&Eip2612Approval>,
    since_secs: u64,
) -> Result<String, ServiceError> {
    let mut request = request.clone();
    request["paymentRequirements"]["amount"] = Value::String(paid.value.to_string());
    let answer = facilitator.settle(&request).await;
    crate::faults::crash_point("x402:after_send");
    let claimed = match answer {
        Ok(settled) if settled.success => settled.transaction,
        Ok(unsettled) => {
            tracing::warn!(
                payment = payment_id,
                facilitator = facilitator.label(),
                "upto settle not confirmed: {}",
                unsettled.reason()
            );
            payers_doing(services, payment_id, paid, approval).await?;
            let error = FacilitatorError::BadAnswer(format!("settle: {}", unsettled.reason()));
            return Err(X402Error::Facilitator { error, recorded: true }.into());
        }
        Err(error) => {
            tracing::warn!(
                payment = payment_id,
                facilitator = facilitator.label(),
                "upto settle: {error}"
            );
            return Err(X402Error::Facilitator { error, recorded: true }.into());
        }
    };
    // The facilitator's node may be ahead of ours: its settlement is waited for a while.
    let timeout = std::time::Duration::from_secs(services.settings.x402.x402_settle_timeout_secs);
    let deadline = tokio::time::Instant::now() + timeout;
    let base = &services.chains.base;
    loop {
        let found = base
            .upto_settlement(paid, Some(&claimed), since_secs)
            .await
            .map_err(|e| chain_unavailable(Network::Base, e))?;
        if let Some(found) = found {
            let by = SettledBy {
                transaction: found.transaction,
                transfer_log_index: Some(found.log_index),
            };
            return super::settle_by(services, payment_id, by).await;
        }
        if tokio::time::Instant::now() >= deadline {
            payers_doing(services, payment_id, paid, approval).await?;
            tracing::warn!(
                payment = payment_id,
                facilitator = facilitator.label(),
                claimed,
                "the facilitator claims an upto settlement the chain does not show (yet)"
            );
            let error = FacilitatorError::BadAnswer(format!("settle: {claimed} does not settle this payment on chain"));
            return Err(X402Error::Facilitator { error, recorded: true }.into());
        }
        tokio::time::sleep(ON_CHAIN_POLL).await;
    }
}

/// Whether the payer made the settlement fail while the work ran (its approval taken back,
/// its funds moved): then it cools off, as after a settlement that failed on chain, and is
/// told so (`402 settlement_failed`). The payment stays recorded, for recovery to find on
/// chain should the facilitator land it after all.
async fn payers_doing(
    services: &Services,
    payment_id: &str,
    paid: &UptoPaid,
    approval: Option<&Eip2612Approval>,
) -> Result<(), ServiceError> {
    let base = &services.chains.base;
    let unavailable = |e| chain_unavailable(Network::Base, e);
    // Used, and not shown as this settlement: the caller goes on to say so.
    if base
        .permit2_nonce_used(paid.from, paid.nonce)
        .await
        .map_err(unavailable)?
    {
        return Ok(());
    }
    let why = if base.usdc_of(paid.from).await.map_err(unavailable)? < MicroUsdc(paid.value.saturating_to::<u64>()) {
        "the payer's balance no longer covers the charge"
    } else if approval.is_none() && base.permit2_allowance(paid.from).await.map_err(unavailable)? < paid.value {
        "the payer took back its approval of Permit2"
    } else {
        return Ok(());
    };
    services.store.cool_off_payer_of(payment_id).await?;
    let payer = paid.from.to_checksum(None);
    super::guard::charge_failed_settlement(services, Network::Base, &payer, None).await;
    Err(refused(
        "settlement_failed",
        format!("The payment could not be settled: {why}; nothing was taken"),
    ))
}

/// A held `upto` payment whose facilitator was, perhaps, asked to settle, and whose answer
/// never came: true once found on chain (now `settled`), false once it is failed (nothing
/// was taken). Until its deadline passes it stays as it is, for the next pass.
pub(super) async fn resume(services: &Services, payment: &PaymentRecord) -> Result<bool, ServiceError> {
    let store = &services.store;
    // Never charged (the work was cut off), or charged nothing: never sent.
    if payment.used.is_none() || payment.amount == MicroUsdc::ZERO {
        store
            .fail_payment(
                &payment.id,
                "nothing charged: the service stopped before this payment by use was settled",
                false,
            )
            .await?;
        return Ok(false);
    }
    let Some(paid) = paid_by(payment) else {
        let why = "its record does not say what was authorized; the operator decides";
        store
            .hand_to_operator(&payment.id, None, Default::default(), why)
            .await?;
        return Ok(false);
    };
    let unavailable = |e| chain_unavailable(Network::Base, e);
    let now_secs = crate::clock::now_ms() as u64 / 1000;
    // Past its deadline first (with room for a clock ahead of the chain's), then looked up:
    // a settlement that lands in between is found.
    let expired = payment
        .valid_until
        .is_none_or(|deadline| deadline.saturating_add(CLOCK_MARGIN_SECS) < now_secs);
    let since_secs = ((payment.created_at / 1000) as u64).saturating_sub(super::MAX_TIMEOUT_SECONDS);
    let base = &services.chains.base;
    let found = match base.upto_settlement(&paid, None, since_secs).await {
        Ok(found) => found,
        Err(crate::chains::ChainError::Undecidable(why)) if expired => {
            let why = format!("whether the facilitator settled it cannot be told from the chain: {why}");
            store
                .hand_to_operator(&payment.id, None, Default::default(), &why)
                .await?;
            return Ok(false);
        }
        Err(other) => return Err(unavailable(other)),
    };
    if let Some(found) = found {
        let by = SettledBy {
            transaction: found.transaction,
            transfer_log_index: Some(found.log_index),
        };
        return match super::settle_by(services, &payment.id, by).await {
            Ok(_) => Ok(true),
            Err(ServiceError::X402(X402Error::Refused(_))) => Ok(false),
            Err(other) => Err(other),
        };
    }
    if !expired {
        return Err(X402Error::SettlementPending {
            transaction: payment.id.clone(),
            payer: payment.payer.clone(),
        }
        .into());
    }
    // Used on chain, but not as charged: what moved is for the operator to see to.
    if base
        .permit2_nonce_used(paid.from, paid.nonce)
        .await
        .map_err(unavailable)?
    {
        let why = "the authorization was used on chain, but not to settle the amount charged to the agent";
        store
            .hand_to_operator(&payment.id, None, Default::default(), why)
            .await?;
        return Ok(false);
    }
    store
        .fail_payment(
            &payment.id,
            "the facilitator did not settle it before its authorization's deadline; nothing was taken",
            false,
        )
        .await?;
    Ok(false)
}

/// What a recorded `upto` payment's settlement must move, from its record: the identity
/// `base-upto:<payer>:<nonce>`, the agent's wallet and the charge.
fn paid_by(payment: &PaymentRecord) -> Option<UptoPaid> {
    let rest = payment.identity.strip_prefix("base-upto:")?;
    let (from, nonce) = rest.split_once(':')?;
    Some(UptoPaid {
        from: parse_address(from).ok()?,
        nonce: U256::from_str_radix(nonce, 10).ok()?,
        to: parse_address(&payment.pay_to).ok()?,
        value: U256::from(payment.amount.0),
    })
}
