//! `/v1/agents/{id}/openai/v1`: an agent as an OpenAI-compatible model, so OpenAI's
//! clients and the frameworks built on them talk to it by changing their base URL.
//! Chat completions (plain or streamed) run the same chat as `/chat`: the agent's
//! personality and knowledge, its enabled commands as its tools. `models` lists the agent.
//! The key comes as `Authorization: Bearer`, as those clients send it; every answer,
//! errors included, is in OpenAI's shape.

pub(super) mod wire;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use serde_json::{Value, json};

use super::AppState;
use super::chat_stream::{self, Frame, json_event};
use super::guard;
use crate::error::{ApiBody, ApiError, ApiPath};
use crate::services::agents;
use crate::services::chat::{self, ChatEvent};
use crate::services::keys::Caller;
use wire::{Completion, CompletionRequest, OpenAiError};

const BASE: &str = "/v1/agents/{agent_id}/openai/v1";

pub fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route(&format!("{BASE}/chat/completions"), post(completions))
        .route(&format!("{BASE}/models"), get(models))
        .route(&format!("{BASE}/models/{{model}}"), get(model))
        .route(&format!("{BASE}/{{*rest}}"), any(elsewhere))
        .route_layer(middleware::from_fn_with_state(state, require_key))
}

/// The keyed API's gate, with the key taken as OpenAI's clients send it.
async fn require_key(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let presented = guard::presented_key(request.headers());
    let missing = "Missing API key: send it as Authorization: Bearer <key>";
    guard::admit(&state, request, next, presented, missing, |refusal| {
        OpenAiError::from(refusal).into_response()
    })
    .await
}

async fn completions(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    path: Result<ApiPath<String>, ApiError>,
    body: Result<ApiBody, ApiError>,
) -> Result<Response, OpenAiError> {
    let ApiPath(agent_id) = path?;
    let request = CompletionRequest::parse(&body?.json_bytes()?)?;
    let mut input = request.chat_input()?;
    input.tools_enabled = !guard::from_our_plugin(&state, &headers);
    // A key of the agent's own account: its remote MCP servers' tools may be offered.
    input.owner_tools = true;
    let services = &state.services;
    let found = agents::owned_with_commands(&services.store, &caller.account.id, &agent_id)
        .await
        .map_err(ApiError::from)?;
    let completion = Completion::new(&found.agent.def.username);
    let commands = found.commands.clone();
    if !request.stream {
        let reply = chat::chat(services, &found.agent, commands, input)
            .await
            .map_err(ApiError::from)?;
        return Ok(axum::Json(completion.answer(&reply)).into_response());
    }
    let with_usage = request.include_usage();
    let mut started = false;
    let render = move |frame: Frame| {
        let mut chunks = Vec::new();
        if !std::mem::replace(&mut started, true) {
            chunks.push(completion.opening(with_usage));
        }
        match frame {
            Frame::Event(ChatEvent::Text(text)) => chunks.push(completion.text(&text, with_usage)),
            // The agent's own tool runs have no place in OpenAI's stream.
            Frame::Event(_) => {}
            Frame::Done(Ok(reply)) => {
                let tokens = (reply.usage.input_tokens, reply.usage.output_tokens);
                chunks.extend(completion.closing(wire::finish_reason(&reply), tokens, with_usage));
                let mut events: Vec<_> = chunks.iter().map(|c| json_event(None, c)).collect();
                events.push(axum::response::sse::Event::default().data("[DONE]"));
                return events;
            }
            // As OpenAI sends a failure mid-stream: an event holding `error`, and no more.
            Frame::Done(Err(err)) => chunks.push(OpenAiError::from(err).body()),
        }
        chunks.iter().map(|c| json_event(None, c)).collect()
    };
    Ok(chat_stream::serve(state.services.clone(), found.agent.clone(), commands, input, render).await?)
}

fn model_entry(agent: &crate::domain::Agent) -> Value {
    json!({ "id": agent.def.username, "object": "model", "created": agent.created_at / 1000, "owned_by": agent.account_id })
}

async fn models(
    State(state): State<AppState>,
    caller: Caller,
    path: Result<ApiPath<String>, ApiError>,
) -> Result<Response, OpenAiError> {
    let ApiPath(agent_id) = path?;
    let found = agents::owned_with_commands(&state.services.store, &caller.account.id, &agent_id)
        .await
        .map_err(ApiError::from)?;
    Ok(axum::Json(json!({ "object": "list", "data": [model_entry(&found.agent)] })).into_response())
}

async fn model(
    State(state): State<AppState>,
    caller: Caller,
    path: Result<ApiPath<(String, String)>, ApiError>,
) -> Result<Response, OpenAiError> {
    let ApiPath((agent_id, model)) = path?;
    let found = agents::owned_with_commands(&state.services.store, &caller.account.id, &agent_id)
        .await
        .map_err(ApiError::from)?;
    if model != found.agent.def.username && model != found.agent.id {
        return Err(ApiError::not_found(format!(
            "This endpoint serves one model, '{}'",
            found.agent.def.username
        ))
        .into());
    }
    Ok(axum::Json(model_entry(&found.agent)).into_response())
}

async fn elsewhere() -> OpenAiError {
    ApiError::not_found("This agent serves chat/completions and models only").into()
}
