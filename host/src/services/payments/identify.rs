//! What a paid command's breaker must know of a payment before it admits it: who pays,
//! and whether it is a retry of a payment that bought something.

use super::scheme::Terms;
use super::{Offer, Rails, refusal};
use crate::money::MicroUsdc;
use crate::services::{ServiceError, Services};
use crate::x402::payment_identifier;
use crate::x402::wire::Payment;

/// A payment as known before it is settled: who pays, and whether it was recorded before
/// (a retry, under the payer's id for it or as the same signed payment).
pub struct Known {
    pub payer: String,
    pub made_before: bool,
}

/// Checks a payment locally (as [`settle`] does first) and tells who pays and whether it
/// is a retry; nothing is recorded or sent. A payment that fails its checks is refused.
pub async fn identify(
    services: &Services,
    rails: Rails<'_>,
    offer: &Offer,
    payment: &Payment,
    price: MicroUsdc,
) -> Result<Known, ServiceError> {
    let terms = Terms {
        pay_to: offer.pay_to.clone(),
        price,
        fee_payer: offer.fee_payer.clone(),
    };
    let attempt = rails
        .scheme
        .verify(services, &payment.payload, &terms)
        .map_err(refusal)?;
    attempt.authenticate(services).await?;
    let payer = attempt.payer();
    // Its identity is what the payer signed: nothing the agent's wallet adds changes it.
    known(services, payment, payer, &attempt.identity()).await
}

/// Whether the payment of `payer`, under its payment id or as `identity`, was made before.
pub(super) async fn known(
    services: &Services,
    payment: &Payment,
    payer: String,
    identity: &str,
) -> Result<Known, ServiceError> {
    let store = &services.store;
    let earlier = match payment_identifier::read(&payment.extensions).map_err(refusal)? {
        Some(reference) => store.earlier_payment_by_ref(&payer, &reference).await?,
        None => None,
    };
    let earlier = match earlier {
        Some(earlier) => Some(earlier),
        None => store.earlier_payment_by_identity(identity).await?,
    };
    // Only a payment that bought something (or is being settled) is answered again; one
    // that took nothing frees its id for a new payment, which is no retry.
    use crate::store::PaymentState::{Served, Settled as Paid, Verified};
    let made_before = earlier.is_some_and(|e| matches!(e.record.state, Verified | Paid | Served));
    Ok(Known { payer, made_before })
}
