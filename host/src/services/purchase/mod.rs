//! A paid request, from the offer to the answer it bought: price what was asked, refuse
//! before any money moves what cannot run (an unknown command, a paused one, bad
//! parameters), settle the payment, run the command or answer the message, and leave the
//! payment `served` or refunded. Every paid surface (the x402 HTTP route, paid MCP tool
//! calls, paid A2A tasks) goes through here; none moves a payment's state itself.
//!
//! The order of the steps is what keeps a payer whole: nothing runs before the payment is
//! on chain and recorded; nothing is answered before the payment is marked served (a
//! payment left `settled` is refunded by recovery as never answered); a failure by the
//! agent's fault is refunded at once, a refusal of the payer's own input is not.

use serde_json::{Map, Value};
use tracing::Instrument;

use super::chat::{self, ChatInput};
use super::commands::{self, Answer, CommandCall, CommandOutcome};
use super::payments::{self, Bought, Offer, Purchase, Rails, Settled, Settlement, X402Error, breaker};
use super::{ServiceError, Services, params, runs, sign_in};
use crate::domain::Command;
use crate::money::MicroUsdc;
use crate::services::usage::Channel;
use crate::telemetry::traces::part_span;
use crate::x402::wire::Payment;

mod access;
mod by_use;
mod in_message;
mod kept;
mod measured;
#[cfg(test)]
mod tests;

pub use access::Access;
pub use in_message::{Sold, payment_required, read_payment};
use measured::Measured;

/// What a payer asks for.
#[derive(Debug, Clone)]
pub enum Order {
    /// A plain message: it buys the agent's reply. The paid commands are not offered to it
    /// as tools, or a cheap message could run an expensive command.
    Message(String),
    /// A conversation (the OpenAI-compatible endpoint's): it buys the reply to its last
    /// message, with the caller's earlier turns and instructions; its text goes to
    /// `events` as it comes, when they are set (a stream). No tools, as for a message.
    Chat(Box<ChatInput>),
    /// One of the agent's paid commands.
    Command {
        name: String,
        /// Named parameters.
        parameters: Map<String, Value>,
        /// The `/command ...` text, parsed into parameters when it was sent as a message.
        raw_text: Option<String>,
    },
}

/// A request priced against the agent's offer: what a payment must cover.
pub struct Quote<'a> {
    pub offer: &'a Offer,
    pub price: MicroUsdc,
    ordered: Ordered<'a>,
    /// The request as the payer sent it, recorded with its payment.
    request: Value,
    /// The command had a breaker when priced. Without one (the usual case) the breaker is
    /// not read again to admit the call or to close it after an answer: nothing opened it
    /// in between that a request arriving a moment earlier would not also have missed.
    had_breaker: bool,
    /// The v2 extensions the surface offered with this price (MCP: the tool's own
    /// bazaar); `None`: the HTTP route's.
    extensions: Option<Map<String, Value>>,
}

/// An order matched to what the agent sells.
enum Ordered<'a> {
    /// A message or a conversation: the chat that answers it.
    Message(Box<ChatInput>),
    Command {
        command: &'a Command,
        parameters: Map<String, Value>,
        raw_text: Option<String>,
    },
}

/// A quote whose input the command takes: the only thing [`buy`] accepts, so a request
/// that cannot run is refused before any money moves, and checked once.
pub struct Checked<'a>(Quote<'a>);

/// Prices `order`, or says why it cannot be bought now: a command the agent does not sell,
/// or, asked for its price (not `paying`), one its breaker paused after repeated failures
/// (refused before anyone signs). A payment for a paused command is refused by [`buy`]
/// once the payment is known, unless it is a retry of one made before.
pub async fn quote<'a>(
    services: &Services,
    offer: &'a Offer,
    order: Order,
    request: Value,
    paying: bool,
) -> Result<Quote<'a>, ServiceError> {
    let ordered = match order {
        Order::Message(message) => Ordered::Message(Box::new(ChatInput::new(message))),
        Order::Chat(input) => Ordered::Message(input),
        Order::Command {
            name,
            parameters,
            raw_text,
        } => Ordered::Command {
            command: offer.command(&name).ok_or(X402Error::CommandNotOffered(name))?,
            parameters,
            raw_text,
        },
    };
    let mut quote = Quote {
        offer,
        price: offer.default_price,
        ordered,
        request,
        had_breaker: false,
        extensions: None,
    };
    if let Some(command) = quote.command() {
        let rules = breaker::Rules::of(&services.settings.x402);
        let admission = breaker::look(&services.store, rules, &offer.agent.id, &command.def.name).await?;
        if let Some(refusal) = admission.as_ref().and_then(|a| a.refusal(&command.def.name))
            && !paying
        {
            return Err(refusal);
        }
        quote.had_breaker = admission.is_some();
        quote.price = offer.price_of(command);
    }
    Ok(quote)
}

impl<'a> Quote<'a> {
    /// The command ordered; `None` for a message.
    pub fn command(&self) -> Option<&'a Command> {
        match self.ordered {
            Ordered::Command { command, .. } => Some(command),
            Ordered::Message(_) => None,
        }
    }

    /// The quote as priced on a surface that offered its own v2 `extensions`: a payment
    /// that echoes them is held to them.
    pub fn offered_with(self, extensions: Map<String, Value>) -> Quote<'a> {
        Quote {
            extensions: Some(extensions),
            ..self
        }
    }

    /// Whether the command takes the order's parameters.
    pub fn check_input(self) -> Result<Checked<'a>, ServiceError> {
        if let Ordered::Command {
            command,
            parameters,
            raw_text,
        } = &self.ordered
        {
            params::resolve(
                &command.def.name,
                &command.def.parameters,
                Some(parameters.clone()),
                raw_text.as_deref(),
            )
            .map_err(ServiceError::Validation)?;
        }
        Ok(Checked(self))
    }
}

/// A settled payment and what it bought.
pub struct Sale {
    /// The payment on chain; while it lives, no refund or recovery pass touches it.
    pub settled: Settled,
    pub outcome: SaleOutcome,
}

impl Sale {
    /// What a payment met again (a retry) bought before: its answer, kept, or its job.
    fn met_again(earlier: payments::Earlier) -> Result<Sale, ServiceError> {
        let outcome = match earlier.answer {
            Bought::Kept(kept) => kept::recall(&kept)?,
            Bought::Job(job_id) => SaleOutcome::Queued { job_id },
        };
        Ok(Sale {
            settled: earlier.settled,
            outcome,
        })
    }
}

/// What a settled payment gave the payer.
#[derive(Debug)]
pub enum SaleOutcome {
    /// The command or the agent answered; the payment is served.
    Answered(Answer),
    /// A long-running command: its job was recorded (which served the payment) and started.
    Queued { job_id: String },
    /// No answer. `refund` is `Some` when the payment was refunded now (the payer's own
    /// input refused by the command is not: the work ran; an answer that could not be
    /// recorded is refunded by the recovery pass).
    Failed {
        error: ServiceError,
        refund: Option<RefundStarted>,
    },
}

/// A refund sent back to the payer from the agent's wallet.
#[derive(Debug)]
pub struct RefundStarted {
    /// Its transaction, once it went out; `None` while it is on its way.
    pub transaction: Option<String>,
}

impl<'a> Checked<'a> {
    pub fn price(&self) -> MicroUsdc {
        self.0.price
    }

    pub fn command(&self) -> Option<&'a Command> {
        self.0.command()
    }
}

/// Settles `payment` for the quoted request and does the work it pays for. An `Err` is a
/// refusal before anything was taken from the payer (or a settlement left pending, to be
/// settled or refunded by recovery); once settled, every outcome is a [`Sale`]. `client`:
/// the address that presented it, charged when its settlement fails on chain.
pub async fn buy(
    services: &Services,
    checked: Checked<'_>,
    payment: &Payment,
    client: Option<&str>,
) -> Result<Sale, ServiceError> {
    let rails = Rails::of(services, checked.0.offer.network);
    buy_on(services, rails, checked, payment, client).await
}

/// [`buy`], the payment moving on `rails`.
async fn buy_on(
    services: &Services,
    rails: Rails<'_>,
    checked: Checked<'_>,
    payment: &Payment,
    client: Option<&str>,
) -> Result<Sale, ServiceError> {
    let Quote {
        offer,
        price,
        ordered,
        request,
        had_breaker,
        extensions,
    } = checked.0;
    let command = match &ordered {
        Ordered::Command { command, .. } => Some(*command),
        Ordered::Message(_) => None,
    };
    // Only a version-2 payment echoes extensions: the route's are built for it alone.
    let extensions = match (extensions, &payment.accepted) {
        (Some(offered), _) => offered,
        (None, Some(_)) => offer.extensions(command),
        (None, None) => Map::new(),
    };
    if payment.is_upto() {
        let purchase = Purchase {
            price: offer.rates_by_use(command).map_or(price, |rates| rates.max()),
            command: command.map(|c| c.def.name.as_str()),
            request: &request,
            client,
            extensions: &extensions,
        };
        return by_use::buy(services, offer, ordered, payment, purchase, had_breaker).await;
    }
    // What the work needs is taken before the payment: a plugin slot for a command that
    // answers now (reserved by the settlement once the payment passed its checks and is no
    // retry), a model that can start for a message. What cannot be served is refused
    // before anyone pays, and nobody is refunded for it at the agent's cost.
    let reserve: Option<payments::Reserve<'_>> = match &ordered {
        Ordered::Command { command, .. } if !command.def.long_running => Some(Box::pin(async {
            runs::reserve_slot(services, &offer.agent, command)
                .await
                .map(payments::Reserved::Slot)
        })),
        Ordered::Command { .. } => None,
        Ordered::Message(message) => {
            services.llm.ready().map_err(ServiceError::Model)?;
            // The answer's first round is taken from the owner's chat budget once the payment
            // passed its checks, before it settles: a budget spent is refused before anyone
            // pays, and two payments cannot both count on the same room.
            let worst = super::chat::worst_first_round(services, &offer.agent, message);
            let account = offer.agent.account_id.as_str();
            Some(Box::pin(async move {
                super::chat_budget::charge(services, account, worst).await?;
                Ok(payments::Reserved::ChatTokens(worst))
            }))
        }
    };
    let purchase = Purchase {
        price,
        command: command.map(|c| c.def.name.as_str()),
        request: &request,
        client,
        extensions: &extensions,
    };
    // Admitted by the command's breaker (a half-open one lets this call through as its
    // trial), so its outcome below counts. Only a payment that passes its own checks is
    // admitted: it is known by its payer, and a retry of one made before is let through to
    // the answer it bought.
    let mut trial = None;
    if let Some(command) = command.filter(|_| had_breaker) {
        let known = payments::identify(services, rails, offer, payment, purchase.price).await?;
        trial = admit(services, offer, command, known).await?;
    }
    let started = std::time::Instant::now();
    let measured = Measured {
        network: offer.network.as_str(),
        version: match payment.version.number() {
            1 => "1",
            _ => "2",
        },
    };
    let settling = part_span!(
        "settlement",
        network = offer.network.as_str(),
        version = measured.version
    );
    let mut settled = match payments::settle(services, rails, offer, payment, purchase, reserve)
        .instrument(settling)
        .await
    {
        Ok(Settlement::Now(settled)) => {
            measured.settled(settled.amount.0, started);
            settled
        }
        // A retry of a request this payment (or the payer's id for it) already bought.
        Ok(Settlement::Before(earlier)) => {
            measured.ended("retried");
            if let (Some(command), Some(at)) = (command, trial) {
                breaker::release_trial(&services.store, &offer.agent.id, &command.def.name, at).await;
            }
            return Sale::met_again(earlier);
        }
        Err(err) => {
            measured.ended(Measured::not_settled(&err));
            if let (Some(command), Some(at)) = (command, trial) {
                breaker::release_trial(&services.store, &offer.agent.id, &command.def.name, at).await;
            }
            return Err(err);
        }
    };
    let slot = settled.slot.take();
    let prepaid_tokens = settled.prepaid_tokens;
    let worked = work(services, offer, ordered, &settled, slot, prepaid_tokens).await;
    let outcome = conclude(services, offer, command, had_breaker, &settled, worked).await;
    measured.ended(match &outcome {
        SaleOutcome::Failed { refund: Some(_), .. } => "refunded",
        SaleOutcome::Failed { refund: None, error } if payments::payers_fault(error) => "served",
        SaleOutcome::Failed { .. } => "unanswered",
        _ => "served",
    });
    Ok(Sale { settled, outcome })
}

/// Lets a known payer's call through the command's breaker, or refuses it (a retry of a
/// payment made before is let through to what it bought). `Some(at)`: the call is the
/// half-open breaker's one trial, whose outcome must be told (or the trial released).
async fn admit(
    services: &Services,
    offer: &Offer,
    command: &Command,
    known: payments::Known,
) -> Result<Option<i64>, ServiceError> {
    let rules = breaker::Rules::of(&services.settings.x402);
    match breaker::admit(&services.store, rules, &offer.agent.id, &command.def.name, &known.payer).await? {
        (breaker::Admission::Trial, at) => Ok(Some(at)),
        (admission, _) => match admission.refusal(&command.def.name).filter(|_| !known.made_before) {
            Some(refusal) => Err(refusal),
            None => Ok(None),
        },
    }
}

/// A wallet that signed in (x402's sign-in-with-x) uses the quoted command without paying.
/// In order: the sign-in is verified (nothing held meanwhile), the wallet's rate limit as a
/// payer's, a plugin slot reserved (a busy agent turns it away before it uses anything),
/// the sign-in let in under the command's terms, and the command run as a paid one would.
/// A failure by the agent's fault gives the call back and counts in the command's breaker,
/// as a paid one does. `Err`: refused, or the command cannot run now; nothing was used.
pub async fn redeem(
    services: &Services,
    checked: Checked<'_>,
    asked: &sign_in::Asked<'_>,
    presented: &crate::x402::sign_in::SignIn,
) -> Result<(sign_in::SignedIn, SaleOutcome), ServiceError> {
    let Quote { offer, ordered, .. } = checked.0;
    let Ordered::Command {
        command,
        parameters,
        raw_text,
    } = ordered
    else {
        return Err(X402Error::Refused(crate::x402::PaymentError::new(
            "sign_in_refused",
            "Sign-in refused: a message is paid for; only commands are given to wallets that sign in",
        ))
        .into());
    };
    let verified = sign_in::verify(services, asked, presented).await?;
    payments::guard::within_payer_limit(services, verified.network(), verified.wallet()).await?;
    let slot = match command.def.long_running {
        false => Some(runs::reserve_slot(services, &offer.agent, command).await?),
        true => None,
    };
    let signed_in = sign_in::let_in(services, asked, verified).await?;
    let call = CommandCall {
        agent: &offer.agent,
        command,
        parameters: Some(parameters),
        raw_text,
        channel: Channel::X402,
        paid_by: None,
        slot,
        metered: None,
    };
    let outcome = match commands::execute(services, call).await {
        Ok(CommandOutcome::Answered(answer)) => SaleOutcome::Answered(answer),
        Ok(CommandOutcome::Queued { job_id }) => SaleOutcome::Queued { job_id },
        Err(error) => {
            if !payments::payers_fault(&error) {
                sign_in::give_back(services, &signed_in).await;
            }
            if breaker::counts(&error) {
                let rules = breaker::Rules::of(&services.settings.x402);
                let reason = error.public_text();
                breaker::failed(
                    &services.store,
                    rules,
                    &offer.agent.id,
                    &command.def.name,
                    &signed_in.wallet,
                    &reason,
                )
                .await;
            }
            SaleOutcome::Failed { error, refund: None }
        }
    };
    Ok((signed_in, outcome))
}

/// Runs the ordered command, or has the agent answer the message.
async fn work(
    services: &Services,
    offer: &Offer,
    ordered: Ordered<'_>,
    settled: &Settled,
    slot: Option<crate::plugins::SlotPermit>,
    prepaid_tokens: u32,
) -> Result<CommandOutcome, ServiceError> {
    match ordered {
        Ordered::Command {
            command,
            parameters,
            raw_text,
        } => {
            let call = CommandCall {
                agent: &offer.agent,
                command,
                parameters: Some(parameters),
                raw_text,
                channel: Channel::X402,
                paid_by: Some(&settled.payment_id),
                slot,
                metered: None,
            };
            commands::execute(services, call).await
        }
        Ordered::Message(input) => chat::reply_measured(services, &offer.agent, *input, prepaid_tokens)
            .await
            .map(|(answer, _)| CommandOutcome::Answered(answer)),
    }
}

/// Tells the command's breaker how the work went and leaves the payment served or
/// refunded, before anything is answered.
async fn conclude(
    services: &Services,
    offer: &Offer,
    command: Option<&Command>,
    had_breaker: bool,
    settled: &Settled,
    worked: Result<CommandOutcome, ServiceError>,
) -> SaleOutcome {
    let agent_id = &offer.agent.id;
    let command = command.map(|c| c.def.name.as_str());
    // Answered (its own refusal of the payer's input included) closes the breaker; a
    // failure by the agent's fault counts; a queued job tells it when the job ends.
    match &worked {
        Ok(CommandOutcome::Queued { .. }) => {}
        Err(err) if !payments::payers_fault(err) => {}
        _ => {
            if let Some(name) = command.filter(|_| had_breaker) {
                breaker::succeeded(&services.store, agent_id, name).await;
            }
        }
    }
    match worked {
        // A paid job served its payment when it was recorded; its address is kept after.
        Ok(CommandOutcome::Queued { job_id }) => {
            crate::faults::crash_point("x402:after_work");
            crate::faults::crash_point("x402:after_served");
            let outcome = SaleOutcome::Queued { job_id };
            settled.keep(services, kept::keep(&outcome)).await;
            outcome
        }
        Ok(CommandOutcome::Answered(answer)) => {
            crate::faults::crash_point("x402:after_work");
            let outcome = SaleOutcome::Answered(answer);
            if let Err(err) = settled.served(services, kept::keep(&outcome)).await {
                tracing::error!(payment = settled.payment_id, "could not mark the payment served: {err}");
                return SaleOutcome::Failed {
                    error: X402Error::AnswerNotRecorded.into(),
                    refund: None,
                };
            }
            crate::faults::crash_point("x402:after_served");
            outcome
        }
        // The payer's own input, refused by the command after its parameters were checked:
        // the work ran and answered, so the payment counts as served (see payments::refund).
        Err(error) if payments::payers_fault(&error) => {
            let outcome = SaleOutcome::Failed { error, refund: None };
            if let Err(mark) = settled.served(services, kept::keep(&outcome)).await {
                tracing::error!(
                    payment = settled.payment_id,
                    "could not mark the payment served: {mark}"
                );
            }
            outcome
        }
        Err(error) => {
            if let Some(name) = command.filter(|_| breaker::counts(&error)) {
                let rules = breaker::Rules::of(&services.settings.x402);
                breaker::failed(
                    &services.store,
                    rules,
                    agent_id,
                    name,
                    &settled.payer,
                    &error.public_text(),
                )
                .await;
            }
            let transaction = settled.refund(services, &error.public_text()).await;
            SaleOutcome::Failed {
                error,
                refund: Some(RefundStarted { transaction }),
            }
        }
    }
}
