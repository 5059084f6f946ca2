//! A2A tasks: every message a client sends an agent becomes one, recorded before the work
//! starts. A chat turn answers in its task; a skill runs as the keyed API runs a command,
//! and a long-running one as its job, whose state the task follows (and keeps once the job
//! ends). A context is a conversation: an owner's chat turns in one context are the next
//! turn's history. A task belongs to the caller that made it: the owner's account, or, for
//! a caller without a key, whoever holds its id.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Desk;
use super::paid::{self, PaymentAnswer, TaskPayment};
use crate::domain::{Command, ResponseFormat};
use crate::llm::Role;
use crate::services::chat::{self, ChatEvents, ChatInput};
use crate::services::commands::{self, Answer, CommandCall, CommandOutcome};
use crate::services::jobs::{self, JobStatus};
use crate::services::usage::Channel;
use crate::services::{ServiceError, Services};
use crate::store::{A2aTaskRecord, JOB_CANCELLED};

/// A context id the client chose: at most this long.
const CONTEXT_ID_MAX_CHARS: usize = 128;
/// A chat turn still working after this long was cut off by a host that stopped.
const CHAT_STALE_MS: i64 = 15 * 60_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Waiting for the client: a paid task's payment.
    InputRequired,
    Working,
    Completed,
    Failed,
    Canceled,
    /// The agent would not do it as asked (the skill refused its input).
    Rejected,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::InputRequired => "input-required",
            TaskState::Working => "working",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Canceled => "canceled",
            TaskState::Rejected => "rejected",
        }
    }

    pub const ALL: [TaskState; 6] = [
        TaskState::InputRequired,
        TaskState::Working,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::Rejected,
    ];

    pub fn parse(text: &str) -> Option<TaskState> {
        TaskState::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Whether the task has ended (nothing changes it any more).
    pub fn ended(self) -> bool {
        !matches!(self, TaskState::Working | TaskState::InputRequired)
    }
}

/// What a client said: its text parts joined, its first data part.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Said {
    pub message_id: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Map<String, Value>>,
}

/// The agent's answer, as a task keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Reply {
    pub(super) response: String,
    format: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    media_url: Option<String>,
}

impl From<&Answer> for Reply {
    fn from(answer: &Answer) -> Reply {
        Reply {
            response: answer.response.clone(),
            format: answer.format.as_str().to_string(),
            media_url: answer.media_url.clone(),
        }
    }
}

impl From<Reply> for Answer {
    fn from(reply: Reply) -> Answer {
        Answer {
            response: reply.response,
            format: ResponseFormat::parse(&reply.format).unwrap_or_default(),
            media_url: reply.media_url,
            cut_short: false,
        }
    }
}

/// A task as its caller sees it.
#[derive(Debug, Clone)]
pub struct Task {
    pub id: String,
    pub context_id: String,
    /// The skill it runs; `None` for a chat turn.
    pub skill: Option<String>,
    pub state: TaskState,
    pub said: Said,
    /// The agent's answer, once completed.
    pub answer: Option<Answer>,
    /// Why it failed, was rejected or was cancelled.
    pub error: Option<String>,
    /// A long-running skill's last progress report, in percent.
    pub progress: Option<u8>,
    /// A paid task's x402 state.
    pub payment: Option<TaskPayment>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A message to an agent, as the wire gave it.
pub struct Ask {
    pub said: Said,
    /// The skill its metadata names.
    pub skill: Option<String>,
    pub context_id: Option<String>,
    /// The task it continues.
    pub task_id: Option<String>,
    /// What it says of a payment the task asked for.
    pub payment: Option<PaymentAnswer>,
}

/// Why a task could not be made, read or changed: A2A's own errors.
#[derive(Debug, thiserror::Error)]
pub enum A2aError {
    #[error("Task '{0}' not found")]
    TaskNotFound(String),
    #[error("Task '{0}' is {1} and cannot be canceled")]
    NotCancelable(String, &'static str),
    #[error("{0}")]
    Unsupported(String),
    #[error("{0}")]
    PushNotSupported(String),
    #[error("{0}")]
    InvalidParams(String),
    #[error(transparent)]
    Service(#[from] ServiceError),
}

impl From<crate::store::StoreError> for A2aError {
    fn from(err: crate::store::StoreError) -> A2aError {
        A2aError::Service(err.into())
    }
}

/// The work a task was recorded for, to run next.
pub struct Begun {
    pub task: Task,
    work: Work,
}

impl Begun {
    /// A task that waits for its client (a payment asked for): nothing to run.
    fn waiting(task: Task) -> Begun {
        Begun {
            task,
            work: Work::Nothing,
        }
    }
}

enum Work {
    /// Nothing runs: the task waits for its client, or has ended.
    Nothing,
    /// A payment sent for the task: settle it, then do what was bought.
    Pay(Value),
    Chat {
        message: String,
        history: Vec<(Role, String)>,
    },
    Skill {
        command: Box<Command>,
        parameters: Option<Map<String, Value>>,
        raw_text: Option<String>,
    },
}

/// Records the task a message asks for (a skill's call or a chat turn), after checking
/// that this caller may ask it; [`run`] then does the work.
pub async fn begin(services: &Services, desk: &Desk, ask: Ask) -> Result<Begun, A2aError> {
    if let Some(id) = &ask.task_id {
        let task = get(services, desk, id).await?;
        if task.state != TaskState::InputRequired {
            return Err(A2aError::Unsupported(format!(
                "Task '{id}' is {}: it takes no more messages; send a new message without a taskId",
                task.state.as_str()
            )));
        }
        let work = match paid::answer(services, &task, ask.payment).await? {
            Some(payload) => Work::Pay(payload),
            None => Work::Nothing,
        };
        let task = get(services, desk, id).await?;
        return Ok(Begun { task, work });
    }
    let skill = match &ask.skill {
        // The chat as the card lists it, unless a command took its name.
        Some(name) if name == super::CHAT_SKILL && desk.skill(name).is_none() => None,
        Some(name) => Some(desk.skill(name).ok_or_else(|| {
            A2aError::InvalidParams(format!("No skill '{name}' here: the agent card lists the skills"))
        })?),
        None => typed_skill(desk, &ask.said.text),
    };
    let (work, price) = match skill {
        Some(skill) => (
            Work::Skill {
                command: Box::new(skill.command.clone()),
                parameters: ask.said.data.clone(),
                raw_text: Some(ask.said.text.clone()).filter(|t| !t.trim().is_empty()),
            },
            skill.price,
        ),
        None => {
            let Some(price) = desk.chat_price() else {
                return Err(A2aError::InvalidParams(
                    "Chat with this agent is not offered without a key: name a skill in the message's metadata".into(),
                ));
            };
            let work = Work::Chat {
                message: chat_message(&ask.said.text)?,
                history: Vec::new(),
            };
            (work, price)
        }
    };
    let context_id = match ask.context_id {
        Some(id) => checked_context_id(id)?,
        None => uuid::Uuid::new_v4().to_string(),
    };
    let skill = match &work {
        Work::Skill { command, .. } => Some(command.def.name.clone()),
        _ => None,
    };
    if let Some(price) = price {
        let required = paid::ask(services, desk, skill.as_deref(), &ask.said, price).await?;
        let mut record = new_record(services, desk, context_id, skill, &ask.said, TaskState::InputRequired);
        record.payment = serde_json::to_value(required).ok();
        record.expires_at = record.created_at + paid::WAITING_MS;
        services.store.insert_a2a_task(record.clone()).await?;
        return Ok(Begun::waiting(view(record, None)?));
    }
    desk.charge(services).await?;
    let work = match work {
        Work::Chat { message, .. } => Work::Chat {
            history: super::conversation::history(services, desk, &context_id).await?,
            message,
        },
        skill => skill,
    };
    let record = new_record(services, desk, context_id, skill, &ask.said, TaskState::Working);
    services.store.insert_a2a_task(record.clone()).await?;
    Ok(Begun {
        task: view(record, None)?,
        work,
    })
}

fn new_record(
    services: &Services,
    desk: &Desk,
    context_id: String,
    skill: Option<String>,
    said: &Said,
    state: TaskState,
) -> A2aTaskRecord {
    let now = crate::clock::now_ms();
    A2aTaskRecord {
        id: uuid::Uuid::new_v4().to_string(),
        agent_id: desk.found.agent.id.clone(),
        account_id: desk.account_id().map(str::to_string),
        context_id,
        skill,
        state: state.as_str().to_string(),
        job_id: None,
        request: serde_json::to_value(said).unwrap_or_default(),
        reply: None,
        error: None,
        payment: None,
        created_at: now,
        updated_at: now,
        expires_at: now + retention_ms(services),
    }
}

/// A text that starts with `/name` of a skill this caller may use calls it, as in a chat app.
fn typed_skill<'a>(desk: &'a Desk, text: &str) -> Option<super::Skill<'a>> {
    let word = text.trim_start().strip_prefix('/')?.split_whitespace().next()?;
    desk.skill(word)
}

fn chat_message(text: &str) -> Result<String, A2aError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(A2aError::InvalidParams(
            "The message has no text: say something, or name a skill".into(),
        ));
    }
    if text.chars().count() > chat::MESSAGE_MAX_CHARS {
        return Err(A2aError::InvalidParams(format!(
            "The message's text is longer than {} characters",
            chat::MESSAGE_MAX_CHARS
        )));
    }
    Ok(text.to_string())
}

fn checked_context_id(id: String) -> Result<String, A2aError> {
    let fine = !id.is_empty() && id.chars().count() <= CONTEXT_ID_MAX_CHARS && id.chars().all(|c| !c.is_control());
    if fine {
        Ok(id)
    } else {
        Err(A2aError::InvalidParams(format!(
            "contextId must be 1 to {CONTEXT_ID_MAX_CHARS} printable characters"
        )))
    }
}

pub(super) fn retention_ms(services: &Services) -> i64 {
    i64::try_from(services.settings.jobs.job_retention_hours).unwrap_or(24) * 3_600_000
}

/// Does a begun task's work: a chat turn (its text told to `events` as it comes) or a
/// skill's run. Answers the task as it is after: ended, or working on its job.
pub async fn run(services: &Services, desk: &Desk, begun: Begun, events: Option<ChatEvents>) -> Result<Task, A2aError> {
    let Begun { task, work } = begun;
    let agent = &desk.found.agent;
    let outcome = match work {
        Work::Nothing => return Ok(task),
        Work::Pay(payload) => {
            paid::buy(services, desk, &task, payload).await?;
            return get(services, desk, &task.id).await;
        }
        Work::Chat { message, history } => {
            let input = ChatInput {
                history,
                events,
                ..ChatInput::new(message)
            };
            chat::chat(services, agent, Vec::new(), input).await.map(|reply| {
                CommandOutcome::Answered(Answer {
                    response: reply.response,
                    format: ResponseFormat::Text,
                    media_url: None,
                    cut_short: reply.cut_short,
                })
            })
        }
        Work::Skill {
            command,
            parameters,
            raw_text,
        } => {
            let call = CommandCall {
                agent,
                command: &command,
                parameters,
                raw_text,
                channel: Channel::A2a,
                paid_by: None,
                slot: None,
                metered: None,
            };
            commands::execute(services, call).await
        }
    };
    record_outcome(services, &task.id, outcome).await?;
    get(services, desk, &task.id).await
}

/// Writes what the work gave: an answer ends the task, a job carries it on, an error ends
/// it rejected (the input was refused) or failed.
pub(super) async fn record_outcome(
    services: &Services,
    id: &str,
    outcome: Result<CommandOutcome, ServiceError>,
) -> Result<(), A2aError> {
    let now = crate::clock::now_ms();
    let store = &services.store;
    match outcome {
        Ok(CommandOutcome::Answered(answer)) => {
            let reply = serde_json::to_value(Reply::from(&answer)).ok();
            store
                .end_a2a_task(id, TaskState::Completed.as_str(), reply, None, now)
                .await?;
        }
        Ok(CommandOutcome::Queued { job_id }) => store.set_a2a_task_job(id, &job_id, now).await?,
        Err(err) => {
            let state = match err {
                ServiceError::Validation(_) => TaskState::Rejected,
                _ => TaskState::Failed,
            };
            store
                .end_a2a_task(id, state.as_str(), None, Some(err.public_text()), now)
                .await?;
        }
    }
    Ok(())
}

/// The task `id` of this caller, as it is now.
pub async fn get(services: &Services, desk: &Desk, id: &str) -> Result<Task, A2aError> {
    let now = crate::clock::now_ms();
    let not_found = || A2aError::TaskNotFound(id.to_string());
    let record = services.store.a2a_task(id, now).await?.ok_or_else(not_found)?;
    if record.agent_id != desk.found.agent.id || record.account_id.as_deref() != desk.account_id() {
        return Err(not_found());
    }
    follow_job(services, record).await
}

/// A task whose work is a job: the job's state, copied to the task once it ends.
pub(super) async fn follow_job(services: &Services, record: A2aTaskRecord) -> Result<Task, A2aError> {
    let store = &services.store;
    let now = crate::clock::now_ms();
    if record.state != TaskState::Working.as_str() {
        return view(record, None);
    }
    // A paid task being settled (claimed, not yet run) is a moment's work, as a chat turn.
    let Some(job_id) = record.job_id.clone() else {
        if now - record.updated_at > CHAT_STALE_MS {
            let why = "The agent stopped before it answered (its host restarted); send the message again";
            store
                .end_a2a_task(&record.id, TaskState::Failed.as_str(), None, Some(why.into()), now)
                .await?;
            return reread(services, &record.id).await;
        }
        return view(record, None);
    };
    let (state, reply, error) = match jobs::status(store, &job_id).await? {
        JobStatus::Processing { progress, .. } => return view(record, progress),
        JobStatus::Succeeded {
            response,
            format,
            artifact_url,
            ..
        } => {
            let reply = Reply {
                response,
                format: format.unwrap_or_else(|| "text".into()),
                media_url: artifact_url,
            };
            (TaskState::Completed, serde_json::to_value(reply).ok(), None)
        }
        JobStatus::Failed { code, error, .. } if code == JOB_CANCELLED => (TaskState::Canceled, None, Some(error)),
        JobStatus::Failed { error, .. } => (TaskState::Failed, None, Some(error)),
        JobStatus::Missing => (
            TaskState::Failed,
            None,
            Some("The skill's job is gone (its record expired)".into()),
        ),
    };
    store
        .end_a2a_task(&record.id, state.as_str(), reply, error, now)
        .await?;
    reread(services, &record.id).await
}

async fn reread(services: &Services, id: &str) -> Result<Task, A2aError> {
    view(record(services, id).await?, None)
}

/// The stored task `id`, whoever it is of (callers check that first, with [`get`]).
pub(super) async fn record(services: &Services, id: &str) -> Result<A2aTaskRecord, A2aError> {
    let now = crate::clock::now_ms();
    services
        .store
        .a2a_task(id, now)
        .await?
        .ok_or_else(|| A2aError::TaskNotFound(id.to_string()))
}

fn view(record: A2aTaskRecord, progress: Option<u8>) -> Result<Task, A2aError> {
    let corrupt = |what: &str| ServiceError::Store(crate::store::StoreError::Corrupt(format!("a2a task {what}")));
    let state = TaskState::parse(&record.state).ok_or_else(|| corrupt("state"))?;
    let said: Said = serde_json::from_value(record.request).map_err(|_| corrupt("request"))?;
    let answer = match record.reply {
        Some(reply) => Some(Answer::from(
            serde_json::from_value::<Reply>(reply).map_err(|_| corrupt("reply"))?,
        )),
        None => None,
    };
    let payment = match record.payment {
        Some(payment) => Some(serde_json::from_value(payment).map_err(|_| corrupt("payment"))?),
        None => None,
    };
    Ok(Task {
        id: record.id,
        context_id: record.context_id,
        skill: record.skill,
        state,
        said,
        answer,
        error: record.error,
        progress,
        payment,
        created_at: record.created_at,
        updated_at: record.updated_at,
    })
}

/// Waits, for at most `within`, for a working task to end, telling `on_progress` its job's
/// new progress reports; answers the task as it is then.
pub async fn wait(
    services: &Services,
    desk: &Desk,
    task: Task,
    within: Duration,
    mut on_progress: impl FnMut(u8),
) -> Result<Task, A2aError> {
    let deadline = tokio::time::Instant::now() + within;
    let mut told = task.progress;
    let mut task = task;
    while task.state == TaskState::Working && tokio::time::Instant::now() < deadline {
        // A job's progress is a row in the store, as the job's status address reads it.
        tokio::time::sleep(Duration::from_millis(250)).await;
        task = get(services, desk, &task.id).await?;
        if let Some(progress) = task.progress.filter(|p| told.is_none_or(|told| *p > told)) {
            told = Some(progress);
            on_progress(progress);
        }
    }
    Ok(task)
}
