//! A tool call signed in with a wallet instead of paid (x402's sign-in-with-x over MCP:
//! `_meta["sign-in-with-x"]`).

use serde_json::Value;

use super::{Called, ToolOutcome, failed};
use crate::services::payments::{Offer, X402Error};
use crate::services::purchase::{self, Order};
use crate::services::{ServiceError, Services, sign_in};
use crate::x402::sign_in::SignIn;

/// A call signed in with a wallet instead of paid: the command, free to that wallet under
/// its terms; or the price again, saying why not.
pub(super) async fn signed_in(
    services: &Services,
    offer: &Offer,
    order: Order,
    request: Value,
    asked: &sign_in::Asked<'_>,
    presented: Value,
    required: impl Fn(Option<String>) -> Called,
) -> Result<Called, ServiceError> {
    let presented = match SignIn::from_value(presented) {
        Ok(presented) => presented,
        Err(reason) => return Ok(required(Some(format!("Sign-in refused: {reason}")))),
    };
    let checked = match purchase::quote(services, offer, order, request, false)
        .await?
        .check_input()
    {
        Ok(checked) => checked,
        Err(err) => {
            return Ok(Called::Done {
                outcome: failed(err),
                settlement: None,
            });
        }
    };
    let outcome = match purchase::redeem(services, checked, asked, &presented).await {
        Ok((_, outcome)) => outcome,
        Err(ServiceError::X402(X402Error::Refused(refusal))) => return Ok(required(Some(refusal.message))),
        Err(err) => return Err(err),
    };
    let outcome = ToolOutcome::from(outcome);
    Ok(Called::Done {
        outcome,
        settlement: None,
    })
}
