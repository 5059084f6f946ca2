//! A2A's JSON (version 1.0): the protocol's messages as the ProtoJSON mapping writes them
//! (lowerCamelCase names, enums by their names, `oneof` members as optional fields), read
//! into the A2A service's types and written from them. Readers accept the proto's own
//! snake_case names too, as ProtoJSON parsers do.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::services::a2a::push::PushConfig;
use crate::services::a2a::tasks::{Ask, Said, Task, TaskState};
use crate::services::a2a::{PAYLOAD_FIELD, PaymentAnswer, TaskPayment, media_type};
use crate::services::commands::Answer;

/// The most parts one message may carry.
const PARTS_MAX: usize = 32;
/// The most characters of text one message may carry, all its parts together.
const TEXT_MAX_CHARS: usize = 10_000;
/// The largest data part (a skill's arguments), as JSON.
const DATA_MAX_BYTES: usize = 32 * 1024;

/// Why a request's params cannot be read: the JSON-RPC error it gets.
pub enum Unreadable {
    InvalidParams(String),
    /// A part of a kind no skill takes (files, by bytes or address).
    ContentType(String),
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    pub message: Option<Message>,
    #[serde(default)]
    pub configuration: Option<SendConfiguration>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct SendConfiguration {
    #[serde(default, alias = "return_immediately")]
    pub return_immediately: bool,
    #[serde(default, alias = "history_length")]
    pub history_length: Option<u32>,
    #[serde(default, alias = "task_push_notification_config")]
    pub task_push_notification_config: Option<PushConfigRequest>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    #[serde(default, alias = "message_id")]
    message_id: String,
    #[serde(default, alias = "context_id")]
    context_id: Option<String>,
    #[serde(default, alias = "task_id")]
    task_id: Option<String>,
    #[serde(default)]
    role: String,
    #[serde(default)]
    parts: Vec<Part>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    raw: Option<Value>,
    #[serde(default)]
    url: Option<Value>,
    #[serde(default)]
    data: Option<Value>,
}

/// A message as the service takes it; what the protocol allows but no skill can use is
/// refused here.
pub fn ask(message: Option<Message>) -> Result<Ask, Unreadable> {
    let invalid = |m: &str| Unreadable::InvalidParams(m.to_string());
    let message = message.ok_or_else(|| invalid("params.message is missing"))?;
    if message.message_id.trim().is_empty() {
        return Err(invalid("message.messageId is missing"));
    }
    if !matches!(message.role.as_str(), "ROLE_USER" | "user") {
        return Err(invalid("message.role must be ROLE_USER: a client's message"));
    }
    if message.parts.is_empty() {
        return Err(invalid("message.parts is empty: send text or data"));
    }
    if message.parts.len() > PARTS_MAX {
        return Err(Unreadable::InvalidParams(format!(
            "message.parts holds more than {PARTS_MAX} parts"
        )));
    }
    let mut texts = Vec::new();
    let mut data = None;
    for part in message.parts {
        match (part.text, part.data, part.raw.or(part.url)) {
            (Some(text), None, None) => texts.push(text),
            (None, Some(Value::Object(object)), None) => {
                if data.is_some() {
                    return Err(invalid(
                        "a message carries at most one data part (the skill's arguments)",
                    ));
                }
                if serde_json::to_vec(&object).map_or(usize::MAX, |b| b.len()) > DATA_MAX_BYTES {
                    return Err(Unreadable::InvalidParams(format!(
                        "a data part is at most {} KiB of JSON",
                        DATA_MAX_BYTES / 1024
                    )));
                }
                data = Some(whole_numbers(object));
            }
            (None, Some(_), None) => return Err(invalid("a data part must be a JSON object")),
            (None, None, Some(_)) => {
                return Err(Unreadable::ContentType(
                    "Files are not taken: send text, or a data part with the skill's arguments".into(),
                ));
            }
            _ => return Err(invalid("each part is exactly one of text, raw, url or data")),
        }
    }
    let text = texts.join("\n");
    if text.chars().count() > TEXT_MAX_CHARS {
        return Err(Unreadable::InvalidParams(format!(
            "the message's text is longer than {TEXT_MAX_CHARS} characters"
        )));
    }
    let skill = match message.metadata.as_ref().and_then(|m| m.get("skill")) {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(name.clone()),
        Some(_) => return Err(invalid("message.metadata.skill must be a skill's id")),
    };
    let payment = payment_answer(message.metadata.as_ref())?;
    let nonempty = |id: Option<String>| id.filter(|i| !i.is_empty());
    Ok(Ask {
        said: Said {
            message_id: message.message_id,
            text,
            data,
        },
        skill,
        context_id: nonempty(message.context_id),
        task_id: nonempty(message.task_id),
        payment,
    })
}

/// What a message's metadata says of a payment (x402's A2A extension).
fn payment_answer(metadata: Option<&Map<String, Value>>) -> Result<Option<PaymentAnswer>, Unreadable> {
    let Some(metadata) = metadata else {
        return Ok(None);
    };
    let status = match metadata.get(STATUS_KEY) {
        None | Some(Value::Null) => None,
        Some(Value::String(status)) => Some(status.clone()),
        Some(_) => {
            return Err(Unreadable::InvalidParams(format!(
                "message.metadata[\"{STATUS_KEY}\"] must be a string"
            )));
        }
    };
    let payload = metadata.get(PAYLOAD_FIELD).filter(|p| !p.is_null()).cloned();
    Ok((status.is_some() || payload.is_some()).then_some(PaymentAnswer { status, payload }))
}

/// x402's A2A extension's metadata keys.
const STATUS_KEY: &str = "x402.payment.status";
const REQUIRED_KEY: &str = "x402.payment.required";
const RECEIPTS_KEY: &str = "x402.payment.receipts";
const ERROR_KEY: &str = "x402.payment.error";
/// Not the extension's: a paid task that failed by the agent's fault was refunded.
const REFUND_KEY: &str = "x402.payment.refund";

/// A paid task's state as its status message's metadata.
fn payment_metadata(payment: &TaskPayment) -> Value {
    let mut metadata = json!({ STATUS_KEY: payment.status.as_str() });
    if let Some(required) = &payment.required {
        metadata[REQUIRED_KEY] = json!(required);
    }
    if !payment.receipts.is_empty() {
        metadata[RECEIPTS_KEY] = json!(payment.receipts);
    }
    if let Some(error) = &payment.error {
        metadata[ERROR_KEY] = json!(error);
    }
    if let Some(refunded) = &payment.refunded {
        metadata[REFUND_KEY] = json!({ "transaction": refunded.transaction });
    }
    metadata
}

/// A data part's numbers as their values: ProtoJSON carries a data part as a `Struct`,
/// whose every number is a double (`1200.0`), so a whole number comes back whole, as the
/// client meant it and a command's integer parameter takes it.
fn whole_numbers(object: Map<String, Value>) -> Map<String, Value> {
    fn whole(value: Value) -> Value {
        match value {
            Value::Number(n) => match n.as_f64() {
                Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 => Value::from(f as i64),
                _ => Value::Number(n),
            },
            Value::Array(items) => Value::Array(items.into_iter().map(whole).collect()),
            Value::Object(object) => Value::Object(whole_numbers(object)),
            other => other,
        }
    }
    object.into_iter().map(|(k, v)| (k, whole(v))).collect()
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct TaskRequest {
    #[serde(default)]
    pub id: String,
    #[serde(default, alias = "history_length")]
    pub history_length: Option<u32>,
}

/// A push config as the wire gives it (`TaskPushNotificationConfig`), and the requests
/// that name one.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PushConfigRequest {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default, alias = "task_id")]
    pub task_id: String,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default)]
    pub authentication: Option<Authentication>,
}

#[derive(Deserialize, Default)]
pub struct Authentication {
    #[serde(default)]
    pub scheme: Option<String>,
    #[serde(default)]
    pub credentials: Option<String>,
}

impl PushConfigRequest {
    pub fn config(self, task_id: Option<&str>) -> PushConfig {
        let authentication = self.authentication.unwrap_or_default();
        PushConfig {
            task_id: task_id.map_or(self.task_id, str::to_string),
            id: self.id.filter(|i| !i.is_empty()),
            url: self.url,
            token: self.token,
            scheme: authentication.scheme,
            credentials: authentication.credentials,
        }
    }
}

/// A push config as the wire writes it.
pub fn push_config(config: &PushConfig) -> Value {
    let mut value = json!({ "id": config.id, "taskId": config.task_id, "url": config.url });
    if let Some(token) = &config.token {
        value["token"] = json!(token);
    }
    if let Some(scheme) = &config.scheme {
        value["authentication"] = json!({ "scheme": scheme, "credentials": config.credentials });
    }
    value
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    #[serde(default, alias = "context_id")]
    pub context_id: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default, alias = "page_size")]
    pub page_size: Option<u32>,
    #[serde(default, alias = "page_token")]
    pub page_token: Option<String>,
    #[serde(default, alias = "history_length")]
    pub history_length: Option<u32>,
    #[serde(default, alias = "status_timestamp_after")]
    pub status_timestamp_after: Option<String>,
    #[serde(default, alias = "include_artifacts")]
    pub include_artifacts: bool,
}

/// A task state as the wire names it.
pub fn state_name(state: TaskState) -> &'static str {
    match state {
        TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
        TaskState::Working => "TASK_STATE_WORKING",
        TaskState::Completed => "TASK_STATE_COMPLETED",
        TaskState::Failed => "TASK_STATE_FAILED",
        TaskState::Canceled => "TASK_STATE_CANCELED",
        TaskState::Rejected => "TASK_STATE_REJECTED",
    }
}

/// A state named on the wire; `None` for unknown names and `TASK_STATE_UNSPECIFIED`.
pub fn read_state(name: &str) -> Option<TaskState> {
    TaskState::ALL.into_iter().find(|s| state_name(*s) == name)
}

/// The id of a task's one artifact, the agent's answer.
const ANSWER_ARTIFACT: &str = "answer";

/// The parts of an answer: its text, and its media's address.
fn answer_parts(answer: &Answer) -> Vec<Value> {
    let mut parts = vec![json!({ "text": answer.response, "mediaType": text_type(answer) })];
    if let Some(url) = &answer.media_url {
        parts.push(json!({ "url": url, "mediaType": media_type(answer.format) }));
    }
    parts
}

fn text_type(answer: &Answer) -> &'static str {
    match media_type(answer.format) {
        text @ ("text/plain" | "text/markdown") => text,
        _ => "text/plain",
    }
}

/// A piece of a streamed answer's text.
pub fn text_chunk(task: &Task, text: &str, append: bool, last: bool) -> Value {
    json!({ "artifactUpdate": {
        "taskId": task.id,
        "contextId": task.context_id,
        "artifact": { "artifactId": ANSWER_ARTIFACT, "name": ANSWER_ARTIFACT, "parts": [{ "text": text, "mediaType": "text/plain" }] },
        "append": append,
        "lastChunk": last,
    }})
}

/// The whole answer as one artifact update.
pub fn answer_update(task: &Task, answer: &Answer) -> Value {
    json!({ "artifactUpdate": {
        "taskId": task.id,
        "contextId": task.context_id,
        "artifact": artifact(answer),
        "append": false,
        "lastChunk": true,
    }})
}

fn artifact(answer: &Answer) -> Value {
    json!({ "artifactId": ANSWER_ARTIFACT, "name": ANSWER_ARTIFACT, "parts": answer_parts(answer) })
}

/// A change of the task's state.
pub fn status_update(task: &Task) -> Value {
    json!({ "statusUpdate": {
        "taskId": task.id,
        "contextId": task.context_id,
        "status": status(task),
    }})
}

fn status(task: &Task) -> Value {
    let mut status = json!({
        "state": state_name(task.state),
        "timestamp": crate::clock::iso(task.updated_at),
    });
    let asked = task
        .payment
        .as_ref()
        .and_then(|p| p.required.as_ref())
        .and_then(|r| r.error.clone());
    let words = match (task.state, &task.error, task.progress) {
        (TaskState::Working, _, Some(progress)) => Some(format!("{progress}% done")),
        (TaskState::InputRequired, _, _) => Some(asked.unwrap_or_else(|| "Payment required".into())),
        (_, Some(error), _) => Some(error.clone()),
        _ => task.payment.as_ref().map(|p| p.status.as_str().replace('-', " ")),
    };
    if let Some(words) = words {
        let mut message = agent_message(task, "status", vec![json!({ "text": words })]);
        if let Some(payment) = &task.payment {
            message["metadata"] = payment_metadata(payment);
        }
        status["message"] = message;
    }
    status
}

fn agent_message(task: &Task, kind: &str, parts: Vec<Value>) -> Value {
    json!({
        "messageId": format!("{}-{kind}", task.id),
        "contextId": task.context_id,
        "taskId": task.id,
        "role": "ROLE_AGENT",
        "parts": parts,
    })
}

fn user_message(task: &Task) -> Value {
    let said = &task.said;
    let mut parts = Vec::new();
    if !said.text.is_empty() {
        parts.push(json!({ "text": said.text }));
    }
    if let Some(data) = &said.data {
        parts.push(json!({ "data": data }));
    }
    let mut message = json!({
        "messageId": said.message_id,
        "contextId": task.context_id,
        "taskId": task.id,
        "role": "ROLE_USER",
        "parts": parts,
    });
    if let Some(skill) = &task.skill {
        message["metadata"] = json!({ "skill": skill });
    }
    message
}

/// What to show of a task: its last `history_length` messages (all when `None`, none for
/// 0), and its artifact.
#[derive(Clone, Copy)]
pub struct Shown {
    pub history_length: Option<u32>,
    pub artifacts: bool,
}

impl Shown {
    pub const ALL: Shown = Shown {
        history_length: None,
        artifacts: true,
    };
}

/// A task as the wire writes it.
pub fn task(task: &Task, shown: Shown) -> Value {
    let mut history = vec![user_message(task)];
    if let Some(answer) = &task.answer {
        history.push(agent_message(task, "reply", answer_parts(answer)));
    }
    if let Some(length) = shown.history_length {
        let keep = (length as usize).min(history.len());
        history.drain(..history.len() - keep);
    }
    let mut value = json!({
        "id": task.id,
        "contextId": task.context_id,
        "status": status(task),
        "history": history,
    });
    if let (Some(answer), true) = (&task.answer, shown.artifacts) {
        value["artifacts"] = json!([artifact(answer)]);
    }
    if let Some(skill) = &task.skill {
        value["metadata"] = json!({ "skill": skill });
    }
    value
}
