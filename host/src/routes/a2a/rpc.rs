//! A2A's JSON-RPC binding: one POST per call, its method's params read into the service's
//! terms, its result or A2A's own error written back. Streaming methods answer in SSE.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::stream;
use super::wire::{self, Shown, Unreadable};
use crate::error::ApiError;
use crate::services::Services;
use crate::services::a2a::Desk;
use crate::services::a2a::listing::{self, ListFilter};
use crate::services::a2a::push::{self, PushConfig};
use crate::services::a2a::tasks::{self, A2aError};

/// A JSON-RPC error: its code, its words, and A2A's reason for it.
pub struct RpcError {
    pub code: i64,
    pub message: String,
    reason: &'static str,
    /// The API's own code, when the service refused it.
    api_code: Option<String>,
}

impl RpcError {
    pub fn new(code: i64, reason: &'static str, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            reason,
            api_code: None,
        }
    }

    /// A refusal at the gate (a credential, a rate limit), as A2A words it.
    pub fn refused(err: &ApiError) -> RpcError {
        let reason = match err.status {
            StatusCode::UNAUTHORIZED => "UNAUTHENTICATED",
            StatusCode::FORBIDDEN => "PERMISSION_DENIED",
            StatusCode::TOO_MANY_REQUESTS => "RESOURCE_EXHAUSTED",
            _ => "INVALID_REQUEST",
        };
        RpcError {
            code: -32600,
            message: err.message.clone(),
            reason,
            api_code: Some(err.code.to_string()),
        }
    }

    pub fn parse(message: impl Into<String>) -> RpcError {
        RpcError::new(-32700, "PARSE_ERROR", message)
    }

    pub fn invalid_request(message: impl Into<String>) -> RpcError {
        RpcError::new(-32600, "INVALID_REQUEST", message)
    }

    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(-32602, "INVALID_PARAMS", message)
    }

    /// The error object, with A2A's `google.rpc.ErrorInfo` detail.
    pub fn object(&self) -> Value {
        let mut metadata = serde_json::Map::new();
        if let Some(code) = &self.api_code {
            metadata.insert("code".into(), json!(code));
        }
        json!({
            "code": self.code,
            "message": self.message,
            "data": [{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": self.reason,
                "domain": "a2a-protocol.org",
                "metadata": metadata,
            }],
        })
    }

    /// A whole JSON-RPC answer carrying this error.
    pub fn reply(&self, id: &Value) -> Value {
        json!({ "jsonrpc": "2.0", "id": id, "error": self.object() })
    }
}

impl From<Unreadable> for RpcError {
    fn from(err: Unreadable) -> RpcError {
        match err {
            Unreadable::InvalidParams(message) => RpcError::invalid_params(message),
            Unreadable::ContentType(message) => RpcError::new(-32005, "CONTENT_TYPE_NOT_SUPPORTED", message),
        }
    }
}

impl From<A2aError> for RpcError {
    fn from(err: A2aError) -> RpcError {
        let message = err.to_string();
        match err {
            A2aError::TaskNotFound(_) => RpcError::new(-32001, "TASK_NOT_FOUND", message),
            A2aError::NotCancelable(..) => RpcError::new(-32002, "TASK_NOT_CANCELABLE", message),
            A2aError::Unsupported(_) => RpcError::new(-32004, "UNSUPPORTED_OPERATION", message),
            A2aError::PushNotSupported(_) => RpcError::new(-32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", message),
            A2aError::InvalidParams(_) => RpcError::invalid_params(message),
            A2aError::Service(err) => {
                let api = ApiError::from(err);
                // The caller's side first: what it may change or wait out is an invalid
                // request, its reason saying which; the server's, an internal error.
                let (code, reason) = match api.status {
                    StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => (-32602, "INVALID_PARAMS"),
                    StatusCode::NOT_FOUND => (-32001, "TASK_NOT_FOUND"),
                    StatusCode::UNAUTHORIZED => (-32600, "UNAUTHENTICATED"),
                    StatusCode::FORBIDDEN => (-32600, "PERMISSION_DENIED"),
                    StatusCode::CONFLICT => (-32600, "ABORTED"),
                    StatusCode::TOO_MANY_REQUESTS | StatusCode::PAYMENT_REQUIRED => (-32600, "RESOURCE_EXHAUSTED"),
                    StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT => (-32603, "UNAVAILABLE"),
                    _ => (-32603, "INTERNAL_ERROR"),
                };
                RpcError {
                    code,
                    message: api.message,
                    reason,
                    api_code: Some(api.code.to_string()),
                }
            }
        }
    }
}

/// One JSON-RPC call, already read as a request object.
pub struct Call {
    pub id: Value,
    pub method: String,
    pub params: Value,
}

/// Answers a call: JSON for most methods, SSE for the streaming ones.
/// The protocol version a call came in: 1.0, or 0.3 translated (`v03`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    V1,
    V03,
}

impl Dialect {
    /// A 1.0 stream event (`StreamResponse`) as this dialect writes it; `last` when the
    /// stream ends after it.
    pub fn event(self, event: Value, last: bool) -> Value {
        match self {
            Dialect::V1 => event,
            Dialect::V03 => super::v03::event(&event, last),
        }
    }
}

/// Answers a call in its dialect: JSON for most methods, SSE for the streaming ones.
pub async fn answer(services: Arc<Services>, desk: Arc<Desk>, call: Call, dialect: Dialect) -> Response {
    let id = call.id.clone();
    let method = call.method.clone();
    match dispatch(services, desk, call, dialect).await {
        Ok(Answer::Result(result)) => {
            let result = match dialect {
                Dialect::V1 => result,
                Dialect::V03 => super::v03::result(&method, result),
            };
            json_reply(json!({ "jsonrpc": "2.0", "id": id, "result": result }))
        }
        Ok(Answer::Stream(response)) => response,
        Err(err) => json_reply(err.reply(&id)),
    }
}

pub fn json_reply(body: Value) -> Response {
    (StatusCode::OK, axum::Json(body)).into_response()
}

enum Answer {
    Result(Value),
    Stream(Response),
}

async fn dispatch(services: Arc<Services>, desk: Arc<Desk>, call: Call, dialect: Dialect) -> Result<Answer, RpcError> {
    let Call { id, method, params } = call;
    let result = match method.as_str() {
        "SendMessage" => send(&services, &desk, params_of(params)?).await?,
        "SendStreamingMessage" => {
            let request: wire::SendMessageRequest = params_of(params)?;
            let ask = wire::ask(request.message)?;
            return Ok(Answer::Stream(stream::send(services, desk, id, ask, dialect)));
        }
        "GetTask" => {
            let request: wire::TaskRequest = params_of(params)?;
            let task = tasks::get(&services, &desk, &task_id(&request.id)?).await?;
            wire::task(&task, shown(request.history_length))
        }
        "CancelTask" => {
            let request: wire::TaskRequest = params_of(params)?;
            let task = crate::services::a2a::cancel::cancel(&services, &desk, &task_id(&request.id)?).await?;
            wire::task(&task, Shown::ALL)
        }
        "SubscribeToTask" => {
            let request: wire::TaskRequest = params_of(params)?;
            let task = tasks::get(&services, &desk, &task_id(&request.id)?).await?;
            if task.state.ended() {
                return Err(A2aError::Unsupported(format!(
                    "Task '{}' has ended ({}): read it with GetTask",
                    task.id,
                    task.state.as_str()
                ))
                .into());
            }
            return Ok(Answer::Stream(stream::follow(services, desk, id, task, dialect)));
        }
        "ListTasks" => list(&services, &desk, params_of(params)?).await?,
        "CreateTaskPushNotificationConfig" => {
            let request: wire::PushConfigRequest = params_of(params)?;
            let config = push::create(&services, desk, request.config(None), render()).await?;
            wire::push_config(&config)
        }
        "GetTaskPushNotificationConfig" => {
            let request: wire::PushConfigRequest = params_of(params)?;
            let id = request.id.clone().unwrap_or_default();
            wire::push_config(&push::get(&services, &desk, &request.task_id, &id).await?)
        }
        "ListTaskPushNotificationConfigs" => {
            let request: wire::PushConfigRequest = params_of(params)?;
            let configs = push::list(&services, &desk, &request.task_id).await?;
            let configs: Vec<Value> = configs.iter().map(wire::push_config).collect();
            json!({ "configs": configs, "nextPageToken": "" })
        }
        "DeleteTaskPushNotificationConfig" => {
            let request: wire::PushConfigRequest = params_of(params)?;
            let id = request.id.clone().unwrap_or_default();
            push::delete(&services, &desk, &request.task_id, &id).await?;
            json!({})
        }
        "GetExtendedAgentCard" => {
            return Err(RpcError::new(
                -32007,
                "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
                "This agent has no extended card: its card, read with a key, shows all it offers that caller",
            ));
        }
        other => {
            return Err(RpcError::new(
                -32601,
                "METHOD_NOT_FOUND",
                format!(
                    "Method '{other}' not found (this server speaks A2A {})",
                    super::card::PROTOCOL_VERSION
                ),
            ));
        }
    };
    Ok(Answer::Result(result))
}

fn params_of<T: DeserializeOwned + Default>(params: Value) -> Result<T, RpcError> {
    match params {
        Value::Null => Ok(T::default()),
        Value::Object(_) => {
            serde_json::from_value(params).map_err(|e| RpcError::invalid_params(format!("params: {e}")))
        }
        _ => Err(RpcError::invalid_params("params must be an object")),
    }
}

fn task_id(id: &str) -> Result<String, RpcError> {
    if id.is_empty() {
        return Err(RpcError::invalid_params("params.id is missing: name the task"));
    }
    Ok(id.to_string())
}

fn shown(history_length: Option<u32>) -> Shown {
    Shown {
        history_length,
        ..Shown::ALL
    }
}

/// How long a blocking `SendMessage` waits for a long-running skill before answering with
/// the working task (the client then reads or subscribes to it).
fn blocking_wait(services: &Services) -> Duration {
    Duration::from_millis(services.settings.jobs.job_timeout_ms + 5_000)
}

/// How a push notification is written: the task, whole, as a `StreamResponse`.
pub fn render() -> push::Render {
    Arc::new(|task| json!({ "task": wire::task(task, Shown::ALL) }).to_string().into_bytes())
}

async fn send(
    services: &Arc<Services>,
    desk: &Arc<Desk>,
    request: wire::SendMessageRequest,
) -> Result<Value, RpcError> {
    let mut configuration = request.configuration.unwrap_or_default();
    let ask = wire::ask(request.message)?;
    // A push config sent with the message is the new task's: checked before anything is
    // recorded or claimed.
    let push_config = match configuration.task_push_notification_config.take() {
        Some(config) => Some(push::check(services, desk, config.config(None)).await?),
        None => None,
    };
    // The work (from recording the task, or claiming it for a payment, to the answer's
    // record) runs on its own task: a client that goes away stops waiting, never the work.
    let (begun_tx, begun_rx) = tokio::sync::oneshot::channel();
    let (work_services, work_desk) = (services.clone(), desk.clone());
    let work = services.lifecycle.spawn(async move {
        let begun = tasks::begin(&work_services, &work_desk, ask).await?;
        if let Some(config) = push_config {
            let config = PushConfig {
                task_id: begun.task.id.clone(),
                ..config
            };
            push::create(&work_services, work_desk.clone(), config, render()).await?;
        }
        let _ = begun_tx.send(begun.task.clone());
        tasks::run(&work_services, &work_desk, begun, None).await
    });
    let internal = || RpcError::new(-32603, "INTERNAL_ERROR", "Internal server error");
    let task = if configuration.return_immediately {
        // The work goes on after the answer; the client reads or subscribes to the task.
        match begun_rx.await {
            Ok(task) => task,
            // It stopped before its task was there: its result says why.
            Err(_) => {
                return Err(work
                    .await
                    .map_err(|_| internal())?
                    .err()
                    .map_or_else(internal, RpcError::from));
            }
        }
    } else {
        let task = work.await.map_err(|_| internal())??;
        tasks::wait(services, desk, task, blocking_wait(services), |_| {}).await?
    };
    Ok(json!({ "task": wire::task(&task, shown(configuration.history_length)) }))
}

async fn list(services: &Services, desk: &Desk, request: wire::ListTasksRequest) -> Result<Value, RpcError> {
    let state = match request.status.as_deref() {
        // No filter; `UNRECOGNIZED` is what the JavaScript SDK writes for a status left out.
        None | Some("" | "TASK_STATE_UNSPECIFIED" | "UNRECOGNIZED") => None,
        Some(name) => Some(
            wire::read_state(name)
                .ok_or_else(|| RpcError::invalid_params(format!("status '{name}' is not a task state")))?,
        ),
    };
    let updated_since = match request.status_timestamp_after.as_deref() {
        None | Some("") => None,
        Some(text) => Some(
            crate::clock::parse_iso(text)
                .ok_or_else(|| RpcError::invalid_params("statusTimestampAfter is not an RFC 3339 time"))?,
        ),
    };
    let page_size = request.page_size.unwrap_or(50);
    if page_size > listing::PAGE_MAX {
        return Err(RpcError::invalid_params(format!(
            "pageSize is at most {}",
            listing::PAGE_MAX
        )));
    }
    let filter = ListFilter {
        context_id: request.context_id.filter(|c| !c.is_empty()),
        state,
        updated_since,
        page_size: page_size.max(1),
        page_token: request.page_token,
    };
    let listing = listing::list(services, desk, filter).await?;
    let shown = Shown {
        history_length: request.history_length,
        artifacts: request.include_artifacts,
    };
    let tasks: Vec<Value> = listing.tasks.iter().map(|t| wire::task(t, shown)).collect();
    Ok(json!({
        "tasks": tasks,
        "nextPageToken": listing.next.unwrap_or_default(),
        "pageSize": page_size.max(1),
        "totalSize": listing.total,
    }))
}
