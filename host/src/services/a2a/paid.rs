//! Paid tasks: x402's A2A extension (version 0.2, its standalone flow). A task for a priced
//! skill or chat waits `input-required`, its price list in its status message
//! (`x402.payment.status: payment-required`, `x402.payment.required`, x402 version 2); the
//! client answers with a message naming the task, the signed payment in
//! `x402.payment.payload`. The payment goes through the purchase service as on every paid
//! surface (one use per payment across HTTP, MCP and A2A, the same caps, cool-offs and
//! refunds), and the task ends with `x402.payment.receipts`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::Desk;
use super::tasks::{A2aError, Said, Task, TaskState};
use crate::money::MicroUsdc;
use crate::services::commands::CommandOutcome;
use crate::services::payments::X402Error;
use crate::services::purchase::{self, Order, SaleOutcome, Sold};
use crate::services::{ServiceError, Services};
use crate::store::A2aTaskMove;
use crate::x402::wire::{PaymentRequiredV2, ResourceInfo, SettleResponse, Version};

/// Where a client's message carries its payment.
pub const PAYLOAD_FIELD: &str = "x402.payment.payload";

/// How long a task waits for its payment: strangers make such tasks for free, so they are
/// not kept as long as the tasks that were paid for.
pub const WAITING_MS: i64 = 3_600_000;

/// Where a paid task is, as the extension names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PaymentStatus {
    PaymentRequired,
    /// A payment was taken for the task, and is being settled.
    PaymentSubmitted,
    PaymentRejected,
    PaymentFailed,
    PaymentCompleted,
}

impl PaymentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentStatus::PaymentRequired => "payment-required",
            PaymentStatus::PaymentSubmitted => "payment-submitted",
            PaymentStatus::PaymentRejected => "payment-rejected",
            PaymentStatus::PaymentFailed => "payment-failed",
            PaymentStatus::PaymentCompleted => "payment-completed",
        }
    }
}

/// A paid task's x402 state, kept with the task.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskPayment {
    pub status: PaymentStatus,
    /// The price list to pay from, while the task waits for a payment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<PaymentRequiredV2>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub receipts: Vec<SettleResponse>,
    /// Why the last payment was refused, as a short code (`DUPLICATE_NONCE`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The paid work failed by the agent's fault and the payment went back: the refund's
    /// transaction, once on chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refunded: Option<Refunded>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Refunded {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction: Option<String>,
}

/// What a client's message says of the payment its task asked for.
pub struct PaymentAnswer {
    /// `x402.payment.status`: `payment-submitted`, or `payment-rejected` to decline.
    pub status: Option<String>,
    pub payload: Option<Value>,
}

/// What a payer signs for: the skill (or the chat) by name.
fn resource(desk: &Desk, skill: Option<&str>) -> ResourceInfo {
    let name = skill.unwrap_or(super::CHAT_SKILL);
    let description = match skill.and_then(|s| desk.skill(s)) {
        Some(skill) => skill.command.def.description.clone(),
        None => format!("A chat turn with {}", desk.found.agent.def.name),
    };
    ResourceInfo {
        url: format!("a2a://skill/{name}"),
        description: Some(description),
        mime_type: Some("application/json".into()),
    }
}

fn order(skill: Option<&str>, said: &Said) -> Order {
    match skill {
        Some(name) => Order::Command {
            name: name.to_string(),
            parameters: said.data.clone().unwrap_or_default(),
            raw_text: Some(said.text.clone()).filter(|t| !t.trim().is_empty()),
        },
        None => Order::Message(said.text.trim().to_string()),
    }
}

/// The request as a payment records it.
fn request(task_id: Option<&str>, skill: Option<&str>, said: &Said) -> Value {
    json!({ "a2a": { "task": task_id, "skill": skill, "message": said } })
}

fn price_list(
    services: &Services,
    desk: &Desk,
    skill: Option<&str>,
    price: MicroUsdc,
    error: String,
) -> PaymentRequiredV2 {
    let sold = Sold {
        offers: desk.offers(),
        price,
        command: skill,
        resource: resource(desk, skill),
        extensions: Map::new(),
    };
    purchase::payment_required(services, &sold, error)
}

/// The payment a new task for a priced skill (`None`: the chat) asks for. What could not
/// be bought anyway (the skill refuses the input) is refused before a price is named.
pub async fn ask(
    services: &Services,
    desk: &Desk,
    skill: Option<&str>,
    said: &Said,
    price: MicroUsdc,
) -> Result<TaskPayment, A2aError> {
    let offer = desk
        .offers()
        .first()
        .ok_or_else(|| ServiceError::from(X402Error::AgentNotSelling(desk.found.agent.def.username.clone())))?;
    purchase::quote(services, offer, order(skill, said), request(None, skill, said), false)
        .await?
        .check_input()?;
    let words = format!("Payment required: answer with {PAYLOAD_FIELD} in a message naming this task");
    Ok(TaskPayment {
        status: PaymentStatus::PaymentRequired,
        required: Some(price_list(services, desk, skill, price, words)),
        receipts: Vec::new(),
        error: None,
        refunded: None,
    })
}

/// A client's answer to a task waiting for its payment: the payment to settle (the task is
/// claimed for it: of two sent at once, one is taken), or `None` when the client declined
/// and the task ended.
pub async fn answer(
    services: &Services,
    task: &Task,
    answer: Option<PaymentAnswer>,
) -> Result<Option<Value>, A2aError> {
    let asked = || {
        A2aError::InvalidParams(format!(
            "Task '{}' waits for its payment: send {PAYLOAD_FIELD} in the message's metadata (or x402.payment.status: payment-rejected)",
            task.id
        ))
    };
    let answer = answer.ok_or_else(asked)?;
    let now = crate::clock::now_ms();
    let store = &services.store;
    if answer.status.as_deref() == Some(PaymentStatus::PaymentRejected.as_str()) {
        // Only a task still waiting: a payment that claimed it meanwhile stands.
        let declined = unpaid(PaymentStatus::PaymentRejected);
        let change = A2aTaskMove {
            from: TaskState::InputRequired.as_str(),
            to: TaskState::Canceled.as_str(),
            payment: serde_json::to_value(declined).ok(),
            error: Some("The client declined to pay".into()),
            expires_at: None,
        };
        if !store.move_a2a_task(&task.id, change, now).await? {
            return Err(A2aError::Unsupported(format!(
                "Task '{}' is being paid already",
                task.id
            )));
        }
        return Ok(None);
    }
    let payload = answer.payload.ok_or_else(asked)?;
    // A paid task is kept as long as any task; one waiting for its payment, an hour.
    // The price list goes: what the task shows now is the payment being settled.
    let claim = A2aTaskMove {
        from: TaskState::InputRequired.as_str(),
        to: TaskState::Working.as_str(),
        payment: serde_json::to_value(unpaid(PaymentStatus::PaymentSubmitted)).ok(),
        error: None,
        expires_at: Some(now + super::tasks::retention_ms(services)),
    };
    let claimed = store.move_a2a_task(&task.id, claim, now).await?;
    if !claimed {
        return Err(A2aError::Unsupported(format!(
            "Task '{}' is being paid already",
            task.id
        )));
    }
    Ok(Some(payload))
}

/// A waiting task's payment state once its client cancelled it: no price list left.
pub fn cancelled() -> Option<Value> {
    serde_json::to_value(unpaid(PaymentStatus::PaymentRejected)).ok()
}

fn unpaid(status: PaymentStatus) -> TaskPayment {
    TaskPayment {
        status,
        required: None,
        receipts: Vec::new(),
        error: None,
        refunded: None,
    }
}

/// Settles the payment for a claimed task and does what it bought, through the purchase
/// service. A payment refused before any money moved gives the task back to its client
/// with a new price list; a settled one ends the task with its receipt.
pub async fn buy(services: &Services, desk: &Desk, task: &Task, payload: Value) -> Result<(), A2aError> {
    let skill = task.skill.as_deref();
    let price = match skill {
        Some(name) => desk.skill(name).and_then(|s| s.price),
        None => desk.chat_price().flatten(),
    };
    let Some(price) = price else {
        return end_unpaid(services, task, "This skill is no longer for sale here".into()).await;
    };
    let (offer, payment) = match purchase::read_payment(payload, desk.offers(), PAYLOAD_FIELD) {
        Ok(found) => found,
        Err(reason) => return ask_again(services, desk, task, price, reason, "INVALID_PAYLOAD").await,
    };
    let quote = match purchase::quote(
        services,
        offer,
        order(skill, &task.said),
        request(Some(&task.id), skill, &task.said),
        true,
    )
    .await
    {
        Ok(quote) => quote,
        Err(err) => {
            give_back(services, task, None).await?;
            return Err(err.into());
        }
    };
    let checked = match quote.check_input() {
        Ok(checked) => checked,
        Err(err) => return end_unpaid(services, task, err.public_text()).await,
    };
    let store = &services.store;
    let sale = match purchase::buy(services, checked, &payment, desk.client()).await {
        Ok(sale) => sale,
        // Refused before anything was taken (a replay, a wrong amount): pay again.
        Err(ServiceError::X402(X402Error::Refused(refusal))) => {
            return ask_again(services, desk, task, price, refusal.message, error_code(refusal.code)).await;
        }
        // Sent but not confirmed: the payer is told which transaction to watch; recovery
        // refunds it if it lands and was never answered.
        Err(ServiceError::X402(X402Error::SettlementPending { transaction, payer })) => {
            let paid = TaskPayment {
                receipts: vec![offer.pending_response(&transaction, &payer)],
                error: Some("SETTLEMENT_PENDING".into()),
                ..unpaid(PaymentStatus::PaymentFailed)
            };
            keep_payment(services, &task.id, paid).await;
            let why = X402Error::SettlementPending { transaction, payer }.to_string();
            let now = crate::clock::now_ms();
            store
                .end_a2a_task(&task.id, TaskState::Failed.as_str(), None, Some(why), now)
                .await?;
            return Ok(());
        }
        Err(err) => {
            give_back(services, task, None).await?;
            return Err(err.into());
        }
    };
    let delivered = matches!(sale.outcome, SaleOutcome::Answered(_));
    let resource = resource(desk, skill).url;
    let receipt = offer
        .settle_response(services, &sale.settled, Version::V2, &resource, delivered)
        .await;
    let mut paid = TaskPayment {
        receipts: vec![receipt],
        ..unpaid(PaymentStatus::PaymentCompleted)
    };
    let outcome = match sale.outcome {
        SaleOutcome::Answered(answer) => Ok(CommandOutcome::Answered(answer)),
        SaleOutcome::Queued { job_id } => Ok(CommandOutcome::Queued { job_id }),
        SaleOutcome::Failed { error, refund } => {
            paid.refunded = refund.map(|r| Refunded {
                transaction: r.transaction,
            });
            Err(error)
        }
    };
    keep_payment(services, &task.id, paid).await;
    super::tasks::record_outcome(services, &task.id, outcome).await
}

/// Writes a settled task's receipts. The payment itself is recorded by the purchase
/// service; a receipt that could not be kept must not keep the answer from being kept.
async fn keep_payment(services: &Services, id: &str, paid: TaskPayment) {
    let paid = serde_json::to_value(paid).unwrap_or_default();
    if let Err(err) = services.store.set_a2a_task_payment(id, paid).await {
        tracing::error!(error = %err, task = %id, "a paid A2A task's receipt could not be kept");
    }
}

/// The extension's code for why a payment was refused.
fn error_code(code: &str) -> &'static str {
    match code {
        "payment_already_used" => "DUPLICATE_NONCE",
        "invalid_signature" => "INVALID_SIGNATURE",
        "payment_expired" => "EXPIRED_PAYMENT",
        "payment_amount_mismatch" => "INVALID_AMOUNT",
        _ => "INVALID_PAYMENT",
    }
}

/// A refused payment: the task waits for another, with a fresh price list saying why.
async fn ask_again(
    services: &Services,
    desk: &Desk,
    task: &Task,
    price: MicroUsdc,
    reason: String,
    code: &str,
) -> Result<(), A2aError> {
    let again = TaskPayment {
        required: Some(price_list(services, desk, task.skill.as_deref(), price, reason)),
        error: Some(code.to_string()),
        ..unpaid(PaymentStatus::PaymentFailed)
    };
    give_back(services, task, Some(again)).await
}

/// Returns a claimed task to its client.
async fn give_back(services: &Services, task: &Task, payment: Option<TaskPayment>) -> Result<(), A2aError> {
    let now = crate::clock::now_ms();
    let change = A2aTaskMove {
        from: TaskState::Working.as_str(),
        to: TaskState::InputRequired.as_str(),
        payment: payment.and_then(|p| serde_json::to_value(p).ok()),
        error: None,
        expires_at: Some(now + WAITING_MS),
    };
    services.store.move_a2a_task(&task.id, change, now).await?;
    Ok(())
}

/// Ends a claimed task that nothing was paid for: what it asked for cannot be bought.
async fn end_unpaid(services: &Services, task: &Task, why: String) -> Result<(), A2aError> {
    let refused = TaskPayment {
        error: Some("INPUT_REFUSED".into()),
        ..unpaid(PaymentStatus::PaymentFailed)
    };
    keep_payment(services, &task.id, refused).await;
    let now = crate::clock::now_ms();
    services
        .store
        .end_a2a_task(&task.id, TaskState::Rejected.as_str(), None, Some(why), now)
        .await?;
    Ok(())
}
