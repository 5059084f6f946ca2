//! A request bought by use (x402 `upto`): the payment is held at its maximum, the work runs
//! (the agent answers a message, or a command's plugin runs and reports its units), and
//! what it used is charged before the answer is given. The order keeps the payer whole:
//! nothing runs before the hold is recorded; the answer goes out only once its charge is
//! settled and the payment marked served; a failure by the agent's fault charges nothing.

use std::time::Duration;

use serde_json::{Map, Value};

use super::{Measured, Ordered, Sale, SaleOutcome, kept};
use crate::domain::{Command, Used};
use crate::plugins::Meter;
use crate::services::chat::{self, ChatInput};
use crate::services::commands::{self, Answer, CommandCall, CommandOutcome, Metered};
use crate::services::payments::upto::{self, Held, Hold};
use crate::services::payments::{self, Offer, Purchase, Reserve, Reserved, X402Error, breaker};
use crate::services::usage::Channel;
use crate::services::{ServiceError, Services, runs};
use crate::x402::wire::Payment;

/// Holds `payment` for what was ordered, has the work done within the authorization's
/// time, and charges what it used. `had_breaker`: the command had a breaker when priced.
/// `Err`: refused before anything was held, or the charge could not be settled (then
/// nothing was taken, and the answer is withheld).
pub(super) async fn buy(
    services: &Services,
    offer: &Offer,
    ordered: Ordered<'_>,
    payment: &Payment,
    purchase: Purchase<'_>,
    had_breaker: bool,
) -> Result<Sale, ServiceError> {
    let measured = Measured {
        network: "base",
        version: "2",
    };
    let started = std::time::Instant::now();
    let sale = match ordered {
        Ordered::Message(message) => sell_message(services, offer, *message, payment, purchase).await,
        Ordered::Command {
            command,
            parameters,
            raw_text,
        } => {
            let order = CommandOrder {
                command,
                parameters,
                raw_text,
                had_breaker,
            };
            sell_command(services, offer, order, payment, purchase).await
        }
    };
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

async fn sell_message(
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
    let reserve: Reserve<'_> = Box::pin(async move {
        crate::services::chat_budget::charge(services, account, worst).await?;
        Ok(Reserved::ChatTokens(worst))
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
    match answered {
        Ok((answer, Some(usage))) => {
            let used = Used {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                units: 0,
            };
            charge(services, *held, used, Ok(answer)).await
        }
        // Nothing can be charged for use that was not measured, and nothing is given for free.
        Ok((_, None)) => {
            let why = "the model did not report the tokens it used, so the answer cannot be charged";
            let error = ServiceError::Model(crate::llm::LlmError::BadAnswer(why.into()));
            charge(services, *held, Used::default(), Err(error)).await
        }
        // Refused for the payer's own input before the model ran (nothing was used), or
        // failed by the agent's fault (nothing is charged).
        Err(error) => charge(services, *held, Used::default(), Err(error)).await,
    }
}

/// A command ordered by use.
struct CommandOrder<'a> {
    command: &'a Command,
    parameters: Map<String, Value>,
    raw_text: Option<String>,
    had_breaker: bool,
}

async fn sell_command(
    services: &Services,
    offer: &Offer,
    order: CommandOrder<'_>,
    payment: &Payment,
    purchase: Purchase<'_>,
) -> Result<Sale, ServiceError> {
    let CommandOrder {
        command,
        parameters,
        raw_text,
        had_breaker,
    } = order;
    let (agent_id, name) = (offer.agent.id.as_str(), command.def.name.as_str());
    // A job would outlive its payment's authorization (the manifest refuses this too).
    if command.def.long_running {
        return Err(payments::refused(
            "unsupported_scheme",
            format!("/{name} runs as a job, which cannot be sold by use"),
        ));
    }
    // Admitted by the command's breaker as a call at its fixed price is, by who signed.
    let trial = match had_breaker {
        true => {
            super::admit(
                services,
                offer,
                command,
                upto::identify(services, offer, payment, &purchase).await?,
            )
            .await?
        }
        false => None,
    };
    // A slot is reserved once the payment passed its checks: a busy agent turns the payer
    // away before anything is held.
    let reserve: Reserve<'_> = Box::pin(async move {
        runs::reserve_slot(services, &offer.agent, command)
            .await
            .map(Reserved::Slot)
    });
    let held = upto::hold(services, offer, payment, purchase, reserve).await;
    if !matches!(held, Ok(Hold::Now(_)))
        && let Some(at) = trial
    {
        breaker::release_trial(&services.store, agent_id, name, at).await;
    }
    let mut held = match held? {
        Hold::Now(held) => held,
        Hold::Before(earlier) => return Sale::met_again(*earlier),
    };
    let meter = Meter::new();
    let payment_id = held.payment_id().to_string();
    let time_left = held.time_left();
    let call = CommandCall {
        agent: &offer.agent,
        command,
        parameters: Some(parameters),
        raw_text,
        channel: Channel::X402,
        paid_by: Some(&payment_id),
        slot: held.slot.take(),
        // The run's own deadline comes first (its log and error say so); the bound below is
        // for what surrounds it.
        metered: Some(Metered {
            meter: meter.clone(),
            within: Some(time_left.saturating_sub(Duration::from_secs(2))),
        }),
    };
    // The run's own deadline is within the time left; this bounds what comes before and
    // after it too (loading the component, keeping its log).
    let executed = tokio::time::timeout(time_left, commands::execute(services, call)).await;
    let worked = match executed {
        Ok(Ok(CommandOutcome::Answered(answer))) => Ok(answer),
        Ok(Ok(CommandOutcome::Queued { job_id })) => Err(ServiceError::Execution(format!(
            "/{name} started job {job_id}, but a command sold by use must answer at once"
        ))),
        Ok(Err(error)) => Err(error),
        Err(_) => Err(ServiceError::Execution(format!(
            "/{name} did not answer while its payment could still be settled"
        ))),
    };
    // The breaker hears of the work as for a call at a fixed price: a failure by the agent's
    // fault counts; anything answered (its refusal of the payer's input too) closes it.
    let failed_by_agent = matches!(&worked, Err(error) if !payments::payers_fault(error));
    match &worked {
        Err(error) if failed_by_agent && breaker::counts(error) => {
            let rules = breaker::Rules::of(&services.settings.x402);
            let payer = held.payer().to_string();
            breaker::failed(&services.store, rules, agent_id, name, &payer, &error.public_text()).await;
        }
        _ if failed_by_agent => {}
        _ if had_breaker => breaker::succeeded(&services.store, agent_id, name).await,
        _ => {}
    }
    let used = Used {
        units: meter.units(),
        ..Used::default()
    };
    charge(services, *held, used, worked).await
}

/// Ends a hold by how its work went: an answer, or the payer's own input refused, is
/// charged what was used and marked served (the answer kept for a retry); a failure by the
/// agent's fault charges nothing. `Err`: the charge could not be settled; nothing was taken.
async fn charge(
    services: &Services,
    held: Held,
    used: Used,
    worked: Result<Answer, ServiceError>,
) -> Result<Sale, ServiceError> {
    let outcome = match worked {
        Ok(answer) => SaleOutcome::Answered(answer),
        Err(error) if payments::payers_fault(&error) => SaleOutcome::Failed { error, refund: None },
        Err(error) => {
            let settled = held.release(services, used, &error.public_text()).await;
            return Ok(Sale {
                settled,
                outcome: SaleOutcome::Failed { error, refund: None },
            });
        }
    };
    let settled = held.charge(services, used).await?;
    crate::faults::crash_point("x402:after_work");
    if let Err(err) = settled.served(services, kept::keep(&outcome)).await {
        tracing::error!(payment = settled.payment_id, "could not mark the payment served: {err}");
        if let SaleOutcome::Answered(_) = outcome {
            return Ok(Sale {
                settled,
                outcome: SaleOutcome::Failed {
                    error: X402Error::AnswerNotRecorded.into(),
                    refund: None,
                },
            });
        }
    }
    Ok(Sale { settled, outcome })
}

/// The answer did not come while the authorization could still be settled.
fn out_of_time(time_left: Duration) -> ServiceError {
    ServiceError::Model(crate::llm::LlmError::Timeout(time_left.as_millis() as u64))
}
