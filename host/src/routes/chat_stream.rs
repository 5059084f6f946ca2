//! A chat answered as server-sent events. The chat runs beside its answer's body, which
//! carries its events as they happen; the body dropped (the client went away) stops the
//! chat, and with it the model's generation. A chat that fails before anything was sent
//! is answered as any request is, with its status.

use std::convert::Infallible;
use std::sync::Arc;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::domain::{Agent, Command};
use crate::error::ApiError;
use crate::services::chat::{self, ChatEvent, ChatInput, ChatReply};
use crate::services::{ServiceError, Services};

/// What a stream carries: the chat's events, then its end.
pub enum Frame {
    Event(ChatEvent),
    Done(Result<ChatReply, ApiError>),
}

/// Stops the chat's task when the body holding it is dropped.
struct AbortOnDrop(JoinHandle<Result<ChatReply, ServiceError>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct Running {
    events: mpsc::UnboundedReceiver<ChatEvent>,
    task: Option<AbortOnDrop>,
}

/// Runs the chat and answers with its frames, each written as `render` makes it; a chat
/// that fails before its first frame is that failure, for the caller to answer.
pub async fn serve<R>(
    services: Arc<Services>,
    agent: Agent,
    commands: Vec<Command>,
    mut input: ChatInput,
    mut render: R,
) -> Result<Response, ApiError>
where
    R: FnMut(Frame) -> Vec<Event> + Send + 'static,
{
    let (sender, events) = mpsc::unbounded_channel();
    input.events = Some(sender);
    let task = tokio::spawn(
        async move { chat::chat(&services, &agent, commands, input).await }.instrument(tracing::Span::current()),
    );
    let running = Running {
        events,
        task: Some(AbortOnDrop(task)),
    };
    let mut frames = Box::pin(futures_util::stream::unfold(running, |mut running| async move {
        // The events end when the chat does (it holds their sender); then its result.
        if let Some(event) = running.events.recv().await {
            return Some((Frame::Event(event), running));
        }
        let mut task = running.task.take()?;
        let result = match (&mut task.0).await {
            Ok(result) => result.map_err(ApiError::from),
            Err(err) => {
                tracing::error!(error = %err, "a streamed chat's task failed");
                Err(ApiError::internal("Internal server error"))
            }
        };
        Some((Frame::Done(result), running))
    }));
    let first = match frames.next().await {
        Some(Frame::Done(Err(err))) => return Err(err),
        Some(first) => first,
        None => return Err(ApiError::internal("Internal server error")),
    };
    let events = futures_util::stream::once(async { first })
        .chain(frames)
        .flat_map(move |frame| futures_util::stream::iter(render(frame)))
        .map(Ok::<Event, Infallible>);
    Ok(Sse::new(events).keep_alive(KeepAlive::default()).into_response())
}

/// An event whose data is JSON.
pub fn json_event(name: Option<&str>, data: &serde_json::Value) -> Event {
    let event = Event::default().data(data.to_string());
    match name {
        Some(name) => event.event(name),
        None => event,
    }
}
