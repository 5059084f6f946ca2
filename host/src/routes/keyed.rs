//! `/v1`: the keyed API.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value, json};

use super::AppState;
use super::chat_stream::{self, Frame, json_event};
use super::guard;
use super::requests::{self, ChatRequest, ChatappSendRequest, ExecuteRequest, SocialPostRequest, TransferRequest};
use crate::chains;
use crate::domain::{Integration, KeyScope, ResponseFormat};
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery};
use crate::services::chat::{self, ChatEvent, ChatInput};
use crate::services::commands::{CommandCall, CommandOutcome};
use crate::services::keys::Caller;
use crate::services::payments::breaker;
use crate::services::usage::Channel;
use crate::services::{ServiceError, agents, chatapp, commands, jobs, runs, social, social_text, wallets};
use crate::store::TransferKind;
use crate::views;

pub fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/v1/agents/{agent_id}/chat", post(chat))
        .route("/v1/agents/{agent_id}/commands", get(list_commands))
        .route("/v1/agents/{agent_id}/commands/{command_name}/execute", post(execute))
        .route("/v1/agents/{agent_id}/chatapp/send", post(chatapp_send))
        .route("/v1/agents/{agent_id}/social/post", post(social_post))
        .route("/v1/agents/{agent_id}/wallet/{network}/balance", get(wallet_balance))
        .route("/v1/agents/{agent_id}/wallet/{network}/transfer", post(wallet_transfer))
        .route_layer(middleware::from_fn_with_state(state, guard::require_key))
}

/// The authenticated caller, put in place by the key guard.
impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| ApiError::internal("Internal server error"))
    }
}

/// A caller whose key may move money (scope `spend` or `manage`). As an extractor it runs
/// before the body is read, so a key without the scope learns nothing else.
pub struct Spender(pub Caller);

impl<S: Send + Sync> FromRequestParts<S> for Spender {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        caller.require(KeyScope::Spend)?;
        Ok(Spender(caller))
    }
}

fn success(data: Value) -> axum::Json<Value> {
    axum::Json(json!({ "success": true, "data": data }))
}

async fn list_commands(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(agent_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let integration = match query.get("integration") {
        None => None,
        Some(text) => Some(Integration::parse(text).ok_or_else(|| {
            ApiError::validation(format!(
                "Invalid query parameter 'integration': '{text}' is not one of chatapp, social, x402, mcp, a2a"
            ))
        })?),
    };
    let services = &state.services;
    let found = agents::owned_with_commands(&services.store, &caller.account.id, &agent_id).await?;
    let listing = || views::command_listing(&found, integration, &services.public_base_url);
    // The listing is kept with the agent; a paused paid command (rare) is marked on a fresh
    // one. Nothing is paused of an agent that sells nothing.
    let paused: &[_] = match found.agent.def.x402.enabled {
        true => &found.open_breakers,
        false => &[],
    };
    let body = if paused.is_empty() {
        services
            .store
            .command_listing(&found, integration, || views::success_body(listing()))
    } else {
        let mut data = listing();
        let rules = breaker::Rules::of(&services.settings.x402);
        views::mark_paused(&mut data, paused, &rules, crate::clock::now_ms());
        Bytes::from(json!({ "success": true, "data": data }).to_string())
    };
    Ok((
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body,
    )
        .into_response())
}

async fn chat(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(agent_id): ApiPath<String>,
    ApiJson(body): ApiJson<ChatRequest>,
) -> Result<Response, ApiError> {
    body.validate()?;
    let services = &state.services;
    let found = agents::owned_with_commands(&services.store, &caller.account.id, &agent_id).await?;
    let from_our_plugin = guard::from_our_plugin(&state, &headers);
    let streamed = body.stream || accepts_event_stream(&headers);
    let max_tool_calls = body.max_tool_calls();
    let input = ChatInput {
        history: body
            .conversation_history
            .into_iter()
            .map(|turn| {
                let role = match turn.role {
                    requests::Role::User => crate::llm::Role::User,
                    requests::Role::Assistant => crate::llm::Role::Assistant,
                };
                (role, turn.content)
            })
            .collect(),
        tools_enabled: body.tools_enabled && !from_our_plugin,
        max_tool_calls,
        // A key of the agent's own account: its remote MCP servers' tools may be offered.
        owner_tools: true,
        ..ChatInput::new(body.message)
    };
    let agent = found.agent.clone();
    if streamed {
        let render = move |frame| chat_event(&agent.id, frame);
        return chat_stream::serve(
            state.services.clone(),
            found.agent.clone(),
            found.commands.clone(),
            input,
            render,
        )
        .await;
    }
    let reply = chat::chat(services, &agent, found.commands.clone(), input).await?;
    Ok(success(json!({
        "response": reply.response,
        "agentId": agent.id,
        "timestamp": crate::clock::now_iso(),
    }))
    .into_response())
}

/// Whether `Accept` prefers an event stream to JSON (by its `q` weights; a tie is JSON,
/// the answer's default), as a client sending only `text/event-stream` does.
fn accepts_event_stream(headers: &HeaderMap) -> bool {
    let mut stream = 0.0f32;
    let mut json = 0.0f32;
    for kind in headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        let mut parts = kind.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let weight = parts
            .find_map(|p| p.strip_prefix("q="))
            .and_then(|q| q.parse::<f32>().ok())
            .unwrap_or(1.0);
        match media.as_str() {
            "text/event-stream" => stream = stream.max(weight),
            "application/json" | "application/*" | "*/*" => json = json.max(weight),
            _ => {}
        }
    }
    stream > json
}

/// A streamed chat's events: `delta`, `tool_call_started`, `tool_call_finished`, then
/// `done` with the answer's envelope, or `error` with the error's.
fn chat_event(agent_id: &str, frame: Frame) -> Vec<Event> {
    let (name, data) = match frame {
        Frame::Event(ChatEvent::Text(text)) => ("delta", json!({ "text": text })),
        Frame::Event(ChatEvent::ToolStarted { id, name, arguments }) => (
            "tool_call_started",
            json!({ "id": id, "name": name,
                    "arguments": serde_json::from_str::<Value>(&arguments).unwrap_or(Value::String(arguments)) }),
        ),
        Frame::Event(ChatEvent::ToolFinished { id, name, ok, summary }) => (
            "tool_call_finished",
            json!({ "id": id, "name": name, "ok": ok, "summary": summary }),
        ),
        Frame::Done(Ok(reply)) => (
            "done",
            json!({
                "success": true,
                "data": { "response": reply.response, "agentId": agent_id, "timestamp": crate::clock::now_iso() },
                "usage": { "promptTokens": reply.usage.input_tokens, "completionTokens": reply.usage.output_tokens },
            }),
        ),
        Frame::Done(Err(err)) => ("error", err.body()),
    };
    vec![json_event(Some(name), &data)]
}

/// The execute answer, written straight from the result (no JSON tree in between).
#[derive(Serialize)]
struct Executed<'a> {
    success: bool,
    data: ExecutedData<'a>,
}

#[derive(Serialize)]
struct ExecutedData<'a> {
    command: &'a str,
    result: ExecutedResult,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExecutedResult {
    success: bool,
    response: String,
    format: ResponseFormat,
    media_url: Option<String>,
    status_url: Option<String>,
}

async fn execute(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((agent_id, command_name)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<ExecuteRequest>,
) -> Result<Response, ApiError> {
    let services = &state.services;
    let found = agents::owned_with_commands(&services.store, &caller.account.id, &agent_id).await?;
    let agent = &found.agent;
    let command = runs::pick(&found.commands, agent, &command_name)?;
    let call = CommandCall {
        agent,
        command,
        parameters: body.parameters,
        raw_text: body.raw_text,
        channel: Channel::Api,
        paid_by: None,
        slot: None,
        metered: None,
    };
    let result = match commands::execute(services, call).await? {
        CommandOutcome::Answered(answer) => ExecutedResult {
            success: true,
            response: answer.response,
            format: answer.format,
            media_url: answer.media_url,
            status_url: None,
        },
        CommandOutcome::Queued { job_id } => ExecutedResult {
            success: true,
            response: commands::accepted(command),
            format: command.def.response_format,
            media_url: None,
            status_url: Some(jobs::status_url(&services.public_base_url, &job_id)),
        },
    };
    Ok(axum::Json(Executed {
        success: true,
        data: ExecutedData {
            command: &command.def.name,
            result,
        },
    })
    .into_response())
}

async fn chatapp_send(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(agent_id): ApiPath<String>,
    ApiJson(body): ApiJson<ChatappSendRequest>,
) -> Result<axum::Json<Value>, ApiError> {
    body.validate()?;
    let services = &state.services;
    // The API answers a missing agent like a missing bot: chatapp_not_configured.
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id)
        .await
        .map_err(|e| match e {
            ServiceError::NotFound(_) => chatapp::not_configured(&agent_id),
            other => other,
        })?;
    let keyboard = body.inline_keyboard.as_ref().map(|rows| {
        Value::Array(
            rows.iter()
                .map(|row| {
                    Value::Array(
                        row.iter()
                            .map(|b| match (&b.callback_data, &b.url) {
                                (Some(data), _) => json!({ "text": b.text, "callback_data": data }),
                                (_, url) => json!({ "text": b.text, "url": url }),
                            })
                            .collect(),
                    )
                })
                .collect(),
        )
    });
    let outgoing = chatapp::Outgoing {
        chat_id: body.chat_id()?,
        text: body.text.clone(),
        parse_mode: body.parse_mode.map(requests::ParseMode::as_str),
        reply_to: body.reply_to_message_id,
        keyboard,
    };
    let message = chatapp::send(services, &agent, &agent_id, outgoing).await?;
    let chat_id = match &message["chat"]["id"] {
        Value::Number(n) => n.to_string(),
        _ => body.chat_id()?.to_string(),
    };
    let sent_at = message["date"]
        .as_i64()
        .map(|secs| crate::clock::iso(secs * 1000))
        .unwrap_or_else(crate::clock::now_iso);
    Ok(success(json!({
        "message_id": message["message_id"],
        "chat_id": chat_id,
        "text": message["text"].as_str().unwrap_or(&body.text),
        "sent_at": sent_at,
    })))
}

async fn social_post(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(agent_id): ApiPath<String>,
    ApiJson(body): ApiJson<SocialPostRequest>,
) -> Result<axum::Json<Value>, ApiError> {
    body.validate()?;
    if let Some(text) = &body.text {
        let weighted = social_text::weighted_length(text);
        if weighted > social_text::MAX_WEIGHTED {
            return Err(ApiError::validation(format!(
                "Invalid field 'text': {weighted} characters as X counts them (URLs 23, wide characters 2), the maximum is {}",
                social_text::MAX_WEIGHTED
            )));
        }
    }
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let post = social::Post {
        text: body.text,
        media_urls: body.media_urls.unwrap_or_default(),
        reply_to: body.reply_to_tweet_id,
    };
    let (tweet_id, username) = social::post(services, &agent, &agent_id, post).await?;
    Ok(success(json!({
        "ok": true,
        "tweet_id": tweet_id,
        "tweet_url": format!("https://x.com/{username}/status/{tweet_id}"),
        "agent_id": agent.id,
        "username": username,
    })))
}

/// The wallet routes answer `{data}` without `success`, as the API's samples show.
async fn wallet_balance(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((agent_id, network)): ApiPath<(String, String)>,
) -> Result<axum::Json<Value>, ApiError> {
    let network = requests::network(&network)?;
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let found = wallets::balance(services, &agent.id, network).await?;
    let address = &found.wallet.address;
    Ok(axum::Json(json!({ "data": {
        "network": network.as_str(),
        "walletAddress": address,
        "balanceUsdc": found.balances.usdc.to_json_number(),
        "balanceNative": crate::money::json_number(&chains::decimal_text(found.balances.native, network.native_decimals())),
        "nativeToken": network.native_token(),
        "explorerUrl": services.chains.explorer(network).address(address),
    }})))
}

async fn wallet_transfer(
    State(state): State<AppState>,
    Spender(caller): Spender,
    ApiPath((agent_id, network)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<TransferRequest>,
) -> Result<axum::Json<Value>, ApiError> {
    let network = requests::network(&network)?;
    let transfer = body.validate()?;
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let record = wallets::transfer(
        services,
        wallets::TransferOrder {
            id: None,
            agent_id: agent.id,
            network,
            kind: TransferKind::Transfer,
            recipient: transfer.recipient,
            amount: transfer.amount,
            memo: transfer.memo,
            // The account holder's own transfer: paying the recipient's account is theirs to do.
            create_account: true,
        },
    )
    .await?;
    let signature = record.signature.unwrap_or_default();
    Ok(axum::Json(json!({ "data": {
        "transactionSignature": signature,
        "network": network.as_str(),
        "amount": record.amount.to_json_number(),
        "recipient": record.recipient,
        "sender": record.sender,
        "explorerUrl": services.chains.explorer(network).tx(&signature),
        "memo": record.memo,
    }})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_sent_only_to_a_client_that_prefers_it() {
        let accepts = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT, HeaderValue::from_str(value).unwrap());
            accepts_event_stream(&headers)
        };
        assert!(accepts("text/event-stream"));
        assert!(accepts("text/event-stream, application/json;q=0.5"));
        assert!(!accepts("application/json, text/event-stream"), "a tie is JSON");
        assert!(!accepts("*/*"));
        assert!(!accepts("text/event-stream;q=0.2, */*"));
        assert!(!accepts_event_stream(&HeaderMap::new()));
    }
}
