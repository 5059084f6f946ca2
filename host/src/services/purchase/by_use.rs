//! A message bought by use (x402 `upto`): the payment is held at its maximum, the agent
//! answers, and the tokens the answer took are charged before it is given. The order keeps
//! the payer whole: nothing runs before the hold is recorded; the answer goes out only once
//! its charge is settled and the payment marked served; a failure by the agent's fault
//! charges nothing.

use std::time::Duration;

use super::{Measured, Sale, SaleOutcome, kept};
use crate::domain::Used;
use crate::services::chat::{self, ChatInput};
use crate::services::payments::upto::{self, Hold};
use crate::services::payments::{self, Offer, Purchase, X402Error};
use crate::services::{ServiceError, Services};
use crate::x402::wire::Payment;

/// Holds `payment` for `message`, has the agent answer it within the authorization's time,
/// and charges the tokens it took. `Err`: refused before anything was held, or the charge
/// could not be settled (then nothing was taken, and the answer is withheld).
pub(super) async fn buy(
    services: &Services,
    offer: &Offer,
    message: ChatInput,
    payment: &Payment,
    purchase: Purchase<'_>,
) -> Result<Sale, ServiceError> {
    let measured = Measured {
        network: "base",
        version: "2",
    };
    let started = std::time::Instant::now();
    let sale = sell(services, offer, message, payment, purchase).await;
    match &sale {
        Ok(Sale {
            outcome: SaleOutcome::Failed { error, .. },
            ..
        }) if !payments::payers_fault(error) => measured.ended(match error {
            ServiceError::X402(X402Error::AnswerNotRecorded) => "unanswered",
            _ => "released",
        }),
        Ok(sale) => {
            measured.settled(sale.settled.amount.0, started);
            measured.ended("served");
        }
        Err(err) => measured.ended(Measured::not_settled(err)),
    }
    sale
}

async fn sell(
    services: &Services,
    offer: &Offer,
    message: ChatInput,
    payment: &Payment,
    purchase: Purchase<'_>,
) -> Result<Sale, ServiceError> {
    services.llm.ready().map_err(ServiceError::Model)?;
    // The answer's first round is taken from its owner's chat budget once the payment
    // passed its checks, as for a message at a fixed price.
    let worst = chat::worst_first_round(services, &offer.agent, &message);
    let account = offer.agent.account_id.as_str();
    let reserve: payments::Reserve<'_> = Box::pin(async move {
        crate::services::chat_budget::charge(services, account, worst).await?;
        Ok(payments::Reserved::ChatTokens(worst))
    });
    let held = match upto::hold(services, offer, payment, purchase, reserve).await? {
        Hold::Now(held) => held,
        Hold::Before(earlier) => return Sale::met_again(*earlier),
    };
    let time_left = held.time_left();
    let prepaid = held.prepaid_tokens;
    let answered = tokio::time::timeout(
        time_left,
        chat::reply_measured(services, &offer.agent, message, prepaid),
    )
    .await
    .unwrap_or_else(|_| Err(out_of_time(time_left)));
    let (answer, usage) = match answered {
        Ok((answer, Some(usage))) => (answer, usage),
        // Nothing can be charged for use that was not measured, and nothing is given for free.
        Ok((_, None)) => {
            let why = "the model did not report the tokens it used, so the answer cannot be charged";
            let settled = held.release(services, Used::default(), why).await;
            let error = ServiceError::Model(crate::llm::LlmError::BadAnswer(why.into()));
            return Ok(Sale {
                settled,
                outcome: SaleOutcome::Failed { error, refund: None },
            });
        }
        // Refused for the payer's own input before the model ran: nothing was used.
        Err(error) if payments::payers_fault(&error) => {
            let settled = held.charge(services, Used::default()).await?;
            let outcome = SaleOutcome::Failed { error, refund: None };
            if let Err(err) = settled.served(services, kept::keep(&outcome)).await {
                tracing::error!(payment = settled.payment_id, "could not mark the payment served: {err}");
            }
            return Ok(Sale { settled, outcome });
        }
        Err(error) => {
            let settled = held.release(services, Used::default(), &error.public_text()).await;
            return Ok(Sale {
                settled,
                outcome: SaleOutcome::Failed { error, refund: None },
            });
        }
    };
    let used = Used {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
    };
    let settled = held.charge(services, used).await?;
    crate::faults::crash_point("x402:after_work");
    let outcome = SaleOutcome::Answered(answer);
    if let Err(err) = settled.served(services, kept::keep(&outcome)).await {
        tracing::error!(payment = settled.payment_id, "could not mark the payment served: {err}");
        return Ok(Sale {
            settled,
            outcome: SaleOutcome::Failed {
                error: X402Error::AnswerNotRecorded.into(),
                refund: None,
            },
        });
    }
    Ok(Sale { settled, outcome })
}

/// The answer did not come while the authorization could still be settled.
fn out_of_time(time_left: Duration) -> ServiceError {
    ServiceError::Model(crate::llm::LlmError::Timeout(time_left.as_millis() as u64))
}
