//! A paid address's requests signed in with a wallet instead of paid (x402's
//! sign-in-with-x): the challenge a 402 offers, and the answer to a signed-in request.

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{delivered, refused_with_price, x402_error};
use crate::domain::Command;
use crate::services::payments::{self, Offer};
use crate::services::purchase;
use crate::services::{ServiceError, Services, sign_in};
use crate::store::SignInGrant;
use crate::x402::PaymentError;
use crate::x402::sign_in::{SIGN_IN_WITH_X, SignIn};
use crate::x402::wire::{PaymentRequiredV2, Version};

/// Adds the sign-in challenge to a v2 402 when the command takes sign-ins. It is kept out
/// of the extensions a payment is held to: each 402's challenge is new.
pub(super) async fn offer_sign_in(
    services: &Services,
    offer: &Offer,
    command: Option<&Command>,
    v2: &mut PaymentRequiredV2,
) {
    let Some(command) = command else {
        return;
    };
    let resource = offer.resource_url(services);
    let asked = sign_in::Asked {
        agent: &offer.agent,
        command,
        uri: &resource,
        resource: &resource,
    };
    if let Some(challenge) = sign_in::challenge(services, &asked).await {
        v2.extensions.insert(SIGN_IN_WITH_X.to_string(), challenge);
    }
}

/// A request signed in with a wallet instead of paid: the command, free to that wallet
/// under its terms; or a 402 saying why not, with a fresh challenge and the price.
pub(super) async fn signed_in(
    services: &Services,
    offer: &Offer,
    checked: purchase::Checked<'_>,
    header: &axum::http::HeaderValue,
) -> Response {
    let (price, command) = (checked.price(), checked.command());
    let resource = offer.resource_url(services);
    let refused =
        async |err: ServiceError| refused_with_price(services, offer, (price, command), err.into(), Version::V2).await;
    let presented = match SignIn::from_header(header.to_str().unwrap_or_default()) {
        Ok(presented) => presented,
        Err(reason) => return refused(sign_in_refused(reason)).await,
    };
    let Some(command) = command else {
        return refused(sign_in_refused(
            "a message is paid for; only commands are given to wallets that sign in".into(),
        ))
        .await;
    };
    let asked = sign_in::Asked {
        agent: &offer.agent,
        command,
        uri: &resource,
        resource: &resource,
    };
    let (signed_in, outcome) = match purchase::redeem(services, checked, &asked, &presented).await {
        Ok(done) => done,
        Err(err) => return refused(err).await,
    };
    let (status, mut body) = match delivered(services, offer, outcome, Version::V2) {
        Ok(delivered) => delivered,
        Err((error, _)) => return x402_error(error.into(), Version::V2),
    };
    body["signedIn"] = signed_in_view(&signed_in);
    (status, axum::Json(body)).into_response()
}

fn sign_in_refused(reason: String) -> ServiceError {
    payments::X402Error::Refused(PaymentError::new(
        "sign_in_refused",
        format!("Sign-in refused: {reason}"),
    ))
    .into()
}

/// `{wallet, network, under: "pass" | "free", callsLeft}`: what a sign-in was let in with.
fn signed_in_view(signed_in: &sign_in::SignedIn) -> Value {
    let (under, left) = match signed_in.grant {
        SignInGrant::Pass { left } => ("pass", left),
        SignInGrant::Free { left } => ("free", Some(left)),
    };
    json!({ "wallet": signed_in.wallet, "network": signed_in.network.as_str(), "under": under, "callsLeft": left })
}
