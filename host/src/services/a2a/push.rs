//! A2A push notifications: a client leaves a URL for a task (with a token, and credentials
//! for its endpoint), and the task's changes are posted there until it ends, so a client
//! need not hold a stream open or poll through a long skill. Sent as the signed webhooks
//! are: through the webhooks' outbound guard (the operator's rules on private addresses),
//! without following redirects, retried on their schedule, and signed the Standard
//! Webhooks way with the client's token as the key, beside A2A's own token header.
//!
//! The host that took the config (or the message carrying it) watches the task; a host that
//! stops drops its watches: the client then reads the task, which is kept as long as ever.
//!
//! Pushes are the owner's: a caller with the owner's key or token. A stranger's task is held
//! by its id alone, which every push to every URL carries; and a stranger could make the
//! host post, for hours, to what the operator opened to the owner's webhooks.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Desk;
use super::tasks::{self, A2aError, Task, TaskState};
use crate::outbound::{HostPattern, OutboundRequest};
use crate::services::{ServiceError, Services, webhooks};
use crate::store::{A2aPushRecord, push_secret_label};

/// Push configs one task keeps at most.
const PER_TASK: u32 = 5;
/// Longest token, scheme and credentials a config may carry.
const TOKEN_MAX_CHARS: usize = 512;
const SCHEME_MAX_CHARS: usize = 64;
const CREDENTIALS_MAX_CHARS: usize = 4_096;
/// Attempts of one notification at most, the first included: the webhooks' first three
/// waits between them.
const ATTEMPTS: usize = 4;

/// A push config as the client gives it and reads it back.
#[derive(Debug, Clone)]
pub struct PushConfig {
    pub task_id: String,
    /// Its id; one is made when the client gives none.
    pub id: Option<String>,
    pub url: String,
    pub token: Option<String>,
    /// `Authorization: <scheme> <credentials>` on every notification.
    pub scheme: Option<String>,
    pub credentials: Option<String>,
}

/// What is sealed of a config.
#[derive(Serialize, Deserialize)]
struct Sealed {
    token: Option<String>,
    credentials: Option<String>,
}

/// Whether this caller may leave push configs: the owner only.
pub fn allowed(desk: &Desk) -> Result<(), A2aError> {
    match desk.account_id() {
        Some(_) => Ok(()),
        None => Err(A2aError::PushNotSupported(
            "Push notifications are for the agent's owner (a key or an OAuth token); read or subscribe to the task instead"
                .into(),
        )),
    }
}

fn invalid(message: String) -> A2aError {
    A2aError::InvalidParams(message)
}

fn bounded(value: Option<String>, field: &str, most: usize) -> Result<Option<String>, A2aError> {
    match value.filter(|v| !v.is_empty()) {
        Some(v) if v.chars().count() > most || v.chars().any(char::is_control) => Err(invalid(format!(
            "{field}: at most {most} characters, no control characters"
        ))),
        other => Ok(other),
    }
}

/// A config as it would be kept: this caller may leave one, its URL is one the webhooks
/// may call (checked now, as theirs are), its fields within their bounds. Checked before a
/// message that carries one is recorded, and again when it is kept.
pub async fn check(services: &Services, desk: &Desk, config: PushConfig) -> Result<PushConfig, A2aError> {
    allowed(desk)?;
    let url = webhooks::checked_url(services, &config.url)
        .await
        .map_err(|err| invalid(err.to_string()))?;
    Ok(PushConfig {
        task_id: config.task_id,
        id: bounded(config.id, "id", 64)?,
        url,
        token: bounded(config.token, "token", TOKEN_MAX_CHARS)?,
        scheme: bounded(config.scheme, "authentication.scheme", SCHEME_MAX_CHARS)?,
        credentials: bounded(config.credentials, "authentication.credentials", CREDENTIALS_MAX_CHARS)?,
    })
}

/// Keeps a config for one of this caller's tasks; a working task is watched from now on.
pub async fn create(
    services: &Services,
    desk: Arc<Desk>,
    config: PushConfig,
    render: Render,
) -> Result<PushConfig, A2aError> {
    allowed(&desk)?;
    // The task first: a config for no task of this caller's costs no look-up of its URL.
    let task = tasks::get(services, &desk, &config.task_id).await?;
    let PushConfig {
        id,
        url,
        token,
        scheme,
        credentials,
        ..
    } = check(services, &desk, config).await?;
    let id = id.unwrap_or_else(|| format!("pnc_{}", crate::random::hex_token(8)));
    let sealed = serde_json::to_vec(&Sealed {
        token: token.clone(),
        credentials: credentials.clone(),
    })
    .unwrap_or_default();
    let now = crate::clock::now_ms();
    let record = A2aPushRecord {
        task_id: task.id.clone(),
        id: id.clone(),
        url: url.clone(),
        scheme: scheme.clone(),
        secret: services.secrets.seal(&push_secret_label(&task.id, &id), &sealed),
        created_at: now,
        expires_at: now + tasks::retention_ms(services),
    };
    services
        .store
        .put_a2a_push(record, PER_TASK, services.sealing_key_check())
        .await
        .map_err(ServiceError::from)?;
    if !task.state.ended() {
        watch(services, desk, task.clone(), render);
    }
    Ok(PushConfig {
        task_id: task.id,
        id: Some(id),
        url,
        token,
        scheme,
        credentials,
    })
}

/// A task's configs, as their client gave them.
pub async fn list(services: &Services, desk: &Desk, task_id: &str) -> Result<Vec<PushConfig>, A2aError> {
    allowed(desk)?;
    let task = tasks::get(services, desk, task_id).await?;
    let mut configs = Vec::new();
    for record in services.store.a2a_pushes(&task.id).await? {
        configs.push(config_of(services, record)?);
    }
    Ok(configs)
}

/// One of a task's configs.
pub async fn get(services: &Services, desk: &Desk, task_id: &str, id: &str) -> Result<PushConfig, A2aError> {
    list(services, desk, task_id)
        .await?
        .into_iter()
        .find(|c| c.id.as_deref() == Some(id))
        .ok_or_else(|| invalid(format!("Task '{task_id}' has no push config '{id}'")))
}

/// Forgets one of a task's configs.
pub async fn delete(services: &Services, desk: &Desk, task_id: &str, id: &str) -> Result<(), A2aError> {
    allowed(desk)?;
    let task = tasks::get(services, desk, task_id).await?;
    if !services.store.delete_a2a_push(&task.id, id).await? {
        return Err(invalid(format!("Task '{task_id}' has no push config '{id}'")));
    }
    Ok(())
}

fn config_of(services: &Services, record: A2aPushRecord) -> Result<PushConfig, A2aError> {
    let opened = services
        .secrets
        .open(&push_secret_label(&record.task_id, &record.id), &record.secret)
        .map_err(|_| ServiceError::SecretUnusable("A push config's secret does not open".into()))?;
    let sealed: Sealed = serde_json::from_slice(&opened)
        .map_err(|_| ServiceError::SecretUnusable("A push config's secret is not one".into()))?;
    Ok(PushConfig {
        task_id: record.task_id,
        id: Some(record.id),
        url: record.url,
        token: sealed.token,
        scheme: record.scheme,
        credentials: sealed.credentials,
    })
}

/// How a notification's body is written: the wire's business.
pub type Render = Arc<dyn Fn(&Task) -> Vec<u8> + Send + Sync>;

/// The tasks this host watches: one watch a task, however many configs it has.
fn watched() -> &'static Mutex<HashSet<String>> {
    static WATCHED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    WATCHED.get_or_init(Default::default)
}

/// Watches a working task until it ends (or waits for its client), then notifies each of
/// its configs of where it is.
pub fn watch(services: &Services, desk: Arc<Desk>, task: Task, render: Render) {
    if !watched()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(task.id.clone())
    {
        return;
    }
    let services = services.clone();
    services.clone().lifecycle.spawn(async move {
        let id = task.id.clone();
        let within = Duration::from_millis(services.settings.jobs.job_timeout_ms + 5_000);
        let mut task = task;
        // A job waits in the queue and runs within its timeout: a few waits at most.
        for _ in 0..4 {
            task = match tasks::wait(&services, &desk, task, within, |_| {}).await {
                Ok(task) => task,
                Err(err) => {
                    tracing::warn!(error = %err, task = %id, "a watched A2A task could not be read");
                    break;
                }
            };
            if task.state != TaskState::Working {
                notify(&services, &desk, &task, &render).await;
                break;
            }
        }
        watched().lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    });
}

/// Posts the task's state to each of its configs, retried on the webhooks' schedule.
async fn notify(services: &Services, desk: &Desk, task: &Task, render: &Render) {
    let configs = match list(services, desk, &task.id).await {
        Ok(configs) => configs,
        Err(err) => {
            tracing::warn!(error = %err, task = %task.id, "an A2A task's push configs could not be read");
            return;
        }
    };
    let body = render(task);
    let event_id = format!("{}:{}", task.id, task.state.as_str());
    let sends = configs
        .into_iter()
        .map(|config| send(services, config, &event_id, &body));
    futures_util::future::join_all(sends).await;
}

async fn send(services: &Services, config: PushConfig, event_id: &str, body: &[u8]) {
    let settings = &services.settings.webhooks;
    let timeout = Duration::from_millis(settings.webhook_timeout_ms);
    for attempt in 0..ATTEMPTS {
        let at = crate::clock::now_ms() / 1000;
        let mut headers = vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("webhook-id".to_string(), event_id.to_string()),
            ("webhook-timestamp".to_string(), at.to_string()),
        ];
        if let Some(token) = &config.token {
            headers.push(("x-a2a-notification-token".into(), token.clone()));
            let signature = webhooks::sign::signature(token.as_bytes(), event_id, at, body);
            headers.push(("webhook-signature".into(), signature));
        }
        if let (Some(scheme), Some(credentials)) = (&config.scheme, &config.credentials) {
            headers.push(("authorization".into(), format!("{scheme} {credentials}")));
        }
        let request = OutboundRequest {
            method: "POST".into(),
            url: config.url.clone(),
            headers,
            body: Some(body.to_vec()),
            timeout: Some(timeout),
            max_bytes: Some(1024),
            budget: None,
            follow_redirects: false,
            truncate_body: true,
        };
        let sent = services
            .webhook_outbound
            .send(request, &[HostPattern::anywhere()])
            .await;
        match sent {
            Ok(response) if (200..300).contains(&response.status) || response.status == 410 => return,
            Ok(response) => {
                tracing::debug!(status = response.status, url = %config.url, "an A2A push was refused");
            }
            Err(err) => tracing::debug!(error = %err, url = %config.url, "an A2A push failed"),
        }
        // No wait after the last attempt.
        let last = attempt + 1 == ATTEMPTS;
        let Some(wait) = settings.webhook_retry_schedule_secs.get(attempt).filter(|_| !last) else {
            return;
        };
        if services.lifecycle.is_stopping() {
            return;
        }
        tokio::time::sleep(Duration::from_secs(u64::from(*wait))).await;
    }
}
