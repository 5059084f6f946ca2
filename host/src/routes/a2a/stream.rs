//! A task told as it happens, in SSE: each event a JSON-RPC answer carrying one
//! `StreamResponse` (the task, a change of its state, a piece of its answer). The work runs
//! on its own: a client that goes away stops reading, not the task, which it may read or
//! follow again later.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::rpc::{Dialect, RpcError};
use super::wire;
use crate::services::Services;
use crate::services::a2a::Desk;
use crate::services::a2a::tasks::{self, A2aError, Ask, Task, TaskState};
use crate::services::chat::ChatEvent;

/// Events waiting for a slow reader at most; the work does not wait for it.
const BACKLOG: usize = 256;

/// Where a stream's events go: each a whole JSON-RPC answer to the call `id`.
struct Sink {
    id: Value,
    events: mpsc::Sender<Value>,
    dialect: Dialect,
}

impl Sink {
    fn result(&self, result: Value) {
        self.send(result, false);
    }

    /// The stream's last event: the stream ends after it, whatever the task's state.
    fn last(&self, result: Value) {
        self.send(result, true);
    }

    fn send(&self, result: Value, last: bool) {
        let result = self.dialect.event(result, last);
        let _ = self
            .events
            .try_send(json!({ "jsonrpc": "2.0", "id": self.id, "result": result }));
    }

    fn error(&self, err: A2aError) {
        let _ = self.events.try_send(RpcError::from(err).reply(&self.id));
    }
}

/// `SendStreamingMessage`: the task as begun, its work as it goes, its end. The whole of it
/// runs on its own task, recording the task included.
pub fn send(services: Arc<Services>, desk: Arc<Desk>, id: Value, ask: Ask, dialect: Dialect) -> Response {
    let (events, receiver) = mpsc::channel(BACKLOG);
    let sink = Sink { id, events, dialect };
    services.clone().lifecycle.spawn(async move {
        let begun = match tasks::begin(&services, &desk, ask).await {
            Ok(begun) => begun,
            Err(err) => return sink.error(err),
        };
        let task = begun.task.clone();
        sink.result(json!({ "task": wire::task(&task, wire::Shown::ALL) }));
        let (chat_events, mut chat_receiver) = mpsc::unbounded_channel();
        let forward = async {
            // One piece held back, so that the last can say it is the last.
            let mut held: Option<String> = None;
            let mut sent = false;
            while let Some(event) = chat_receiver.recv().await {
                if let ChatEvent::Text(piece) = event
                    && let Some(previous) = held.replace(piece)
                {
                    sink.result(wire::text_chunk(&task, &previous, sent, false));
                    sent = true;
                }
            }
            held.map(|last| sink.result(wire::text_chunk(&task, &last, sent, true)))
                .is_some()
        };
        let (ran, streamed) = tokio::join!(tasks::run(&services, &desk, begun, Some(chat_events)), forward);
        match ran {
            Ok(task) => finish(&services, &desk, &sink, task, streamed).await,
            Err(err) => sink.error(err),
        }
    });
    respond(receiver)
}

/// `SubscribeToTask`: the task as it is, then its work as it goes, until its end.
pub fn follow(services: Arc<Services>, desk: Arc<Desk>, id: Value, task: Task, dialect: Dialect) -> Response {
    let (events, receiver) = mpsc::channel(BACKLOG);
    let sink = Sink { id, events, dialect };
    services.clone().lifecycle.spawn(async move {
        sink.result(json!({ "task": wire::task(&task, wire::Shown::ALL) }));
        finish(&services, &desk, &sink, task, false).await;
    });
    respond(receiver)
}

/// Tells a working task's progress until it ends, then its answer (unless its text was
/// streamed already) and its last state.
async fn finish(services: &Services, desk: &Desk, sink: &Sink, mut task: Task, streamed: bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(services.settings.jobs.job_timeout_ms + 5_000);
    // Short waits: a reader that went away stops the following within one of them.
    let within = Duration::from_secs(2);
    while task.state == TaskState::Working && tokio::time::Instant::now() < deadline {
        let progress = task.clone();
        let waited = tasks::wait(services, desk, task, within, |percent| {
            let working = Task {
                progress: Some(percent),
                updated_at: crate::clock::now_ms(),
                ..progress.clone()
            };
            sink.result(wire::status_update(&working));
        })
        .await;
        task = match waited {
            Ok(task) => task,
            Err(err) => return sink.error(err),
        };
        if sink.events.is_closed() {
            return;
        }
    }
    if let (TaskState::Completed, Some(answer), false) = (task.state, &task.answer, streamed) {
        sink.result(wire::answer_update(&task, answer));
    }
    sink.last(wire::status_update(&task));
}

fn respond(receiver: mpsc::Receiver<Value>) -> Response {
    let answers = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|answer| (answer, receiver))
    });
    let events = answers.map(|answer| Ok::<Event, Infallible>(Event::default().data(answer.to_string())));
    Sse::new(events).keep_alive(KeepAlive::default()).into_response()
}
