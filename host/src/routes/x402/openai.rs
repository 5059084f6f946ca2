//! `/x402/{network}/{agentId}/openai/v1`: an agent as an OpenAI-compatible model for payers
//! without a key. The completion request is the order, bought as a message at the agent's
//! address is (its fixed price, or by use where the agent offers it), with an x402 version
//! 2 payment in `PAYMENT-SIGNATURE`: a payer's client sends it with the request, as x402's
//! fetch wrappers and HTTP hooks do. Answers and errors are OpenAI's; a 402 also carries
//! `PAYMENT-REQUIRED`, a plain answer `PAYMENT-RESPONSE`. The agent's commands are not its
//! tools here, as for any paid message.
//!
//! Every purchase runs on its own task: a reader that leaves does not stop it, so the answer
//! is generated to its end, paid for (by use: the model's own count of what it generated)
//! and kept for the payer's retry. A streamed answer at a fixed price, settled before any
//! text, streams as the model writes; one paid by use streams once charged (its text
//! before the charge would be the payer's to keep whatever became of the charge).

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{AgentPath, ClientAddress, insert_header, presented};
use crate::error::{ApiBody, ApiError, ApiPath};
use crate::routes::AppState;
use crate::routes::chat_stream::json_event;
use crate::routes::openai::wire::{Completion, CompletionRequest, OpenAiError};
use crate::services::chat::{ChatEvent, ChatEvents, ChatInput, MESSAGE_MAX_CHARS};
use crate::services::commands::Answer;
use crate::services::payments::{self, Offer, X402Error};
use crate::services::purchase::{self, Order, Sale, SaleOutcome};
use crate::services::{ServiceError, Services};
use crate::x402::wire::{self, PAYMENT_REQUIRED_HEADER, Payment, Version};

/// Whether a request to the paid API came to this address (its answers are OpenAI's).
pub(super) fn is_its_path(path: &str) -> bool {
    path.contains("/openai/v1/")
}

/// A refusal in OpenAI's shape (with its headers: Retry-After...).
pub(super) fn refusal(err: ApiError) -> Response {
    OpenAiError::from(err).into_response()
}

/// POST `chat/completions`: without a payment, a 402 priced for the conversation; with one,
/// the purchase, on its own task (a payer that goes away does not cut it off).
pub(super) async fn completions(
    State(state): State<AppState>,
    Extension(client): Extension<ClientAddress>,
    path: AgentPath,
    headers: HeaderMap,
    body: Result<ApiBody, ApiError>,
) -> Response {
    let lifecycle = state.services.lifecycle.clone();
    match lifecycle.spawn(completion(state, client, path, headers, body)).await {
        Ok(response) => response,
        Err(_) => OpenAiError::from(ApiError::internal("Internal server error")).into_response(),
    }
}

/// GET `models`: the agent, the one model this address serves (free to read).
pub(super) async fn models(State(state): State<AppState>, path: AgentPath) -> Response {
    match offer_at(&state.services, path).await {
        Ok(offer) => axum::Json(json!({ "object": "list", "data": [{
            "id": offer.agent.def.username, "object": "model", "created": offer.agent.created_at / 1000,
            "owned_by": offer.agent.id,
        }] }))
        .into_response(),
        Err(err) => err.into_response(),
    }
}

async fn offer_at(services: &Services, path: AgentPath) -> Result<Offer, OpenAiError> {
    let ApiPath((network, agent_id)) = path?;
    let network = crate::domain::Network::parse(&network).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "unsupported_network",
            format!("Network '{network}' is not served: use solana or base"),
        )
    })?;
    Ok(payments::offer(services, &agent_id, network)
        .await
        .map_err(ApiError::from)?)
}

async fn completion(
    state: AppState,
    client: ClientAddress,
    path: AgentPath,
    headers: HeaderMap,
    body: Result<ApiBody, ApiError>,
) -> Response {
    let services = &state.services;
    let read = async {
        let offer = offer_at(services, path).await?;
        let bytes = body?.json_bytes()?;
        let request = CompletionRequest::parse(&bytes)?;
        let input = request.chat_input()?;
        // A conversation is bought at a message's price: it holds what a paid message may.
        let chars = input.message.chars().count()
            + input
                .history
                .iter()
                .map(|(_, turn)| turn.chars().count())
                .sum::<usize>()
            + input.instructions.iter().map(|i| i.chars().count()).sum::<usize>();
        if chars > MESSAGE_MAX_CHARS {
            return Err(OpenAiError::invalid(
                "messages",
                format!(
                    "A paid conversation holds at most {MESSAGE_MAX_CHARS} characters in all (its price is a \
                     message's); this one has {chars}"
                ),
            ));
        }
        // Recorded with the payment: a retry must ask for the same.
        let recorded: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok::<_, OpenAiError>((offer, request, input, recorded))
    };
    let (offer, request, input, recorded) = match read.await {
        Ok(read) => read,
        Err(err) => return err.into_response(),
    };
    let header = match presented(&headers).0 {
        Some((Version::V2, header)) => header,
        Some((Version::V1, _)) => {
            let err = ApiError::new(
                StatusCode::PAYMENT_REQUIRED,
                "unsupported_x402_version",
                "This endpoint takes x402 version 2: send the payment in PAYMENT-SIGNATURE",
            );
            return priced(services, &offer, err);
        }
        // What could not be bought anyway is refused before a price is named.
        None => {
            let quoted = purchase::quote(services, &offer, Order::Chat(Box::new(input)), recorded, false).await;
            return match quoted.and_then(|quote| quote.check_input()) {
                Ok(_) => priced(
                    services,
                    &offer,
                    ApiError::new(
                        StatusCode::PAYMENT_REQUIRED,
                        "payment_required",
                        "Payment required: pay with x402 version 2 in PAYMENT-SIGNATURE, as PAYMENT-REQUIRED says",
                    ),
                ),
                Err(err) => OpenAiError::from(ApiError::from(err)).into_response(),
            };
        }
    };
    let payment = match wire::decode_payment(Version::V2, &header, offer.network_names()) {
        Ok(payment) => payment,
        Err(refusal) => return refused(services, &offer, X402Error::Refused(refusal).into()),
    };
    let with_usage = request.include_usage();
    // Paid by use, the text goes out once it is charged, as a plain answer's does: streamed
    // before, it would be the payer's to keep whatever became of the charge (an approval
    // revoked, funds moved meanwhile). It is then sent as a stream, all at once.
    if request.stream && payment.is_upto() {
        return match buy(services, &offer, input, recorded, &payment, &client).await {
            Ok(sale) => charged_stream(services, &offer, sale, with_usage).await,
            Err(err) => refused(services, &offer, err),
        };
    }
    if request.stream {
        return streamed(
            state.services.clone(),
            offer,
            input,
            recorded,
            payment,
            client,
            with_usage,
        )
        .await;
    }
    match buy(services, &offer, input, recorded, &payment, &client).await {
        Ok(sale) => answered(services, &offer, sale).await,
        Err(err) => refused(services, &offer, err),
    }
}

/// Prices the conversation and buys its answer with `payment`.
async fn buy(
    services: &Services,
    offer: &Offer,
    input: ChatInput,
    recorded: Value,
    payment: &Payment,
    client: &ClientAddress,
) -> Result<Sale, ServiceError> {
    let checked = purchase::quote(services, offer, Order::Chat(Box::new(input)), recorded, true)
        .await?
        .check_input()?;
    purchase::buy(services, checked, payment, Some(&client.0)).await
}

/// A 402 (or another refusal of the payment) in OpenAI's shape, with what to pay in
/// `PAYMENT-REQUIRED` and the reason in its `error`.
fn priced(services: &Services, offer: &Offer, err: ApiError) -> Response {
    let reason = err.message.clone();
    let mut response = OpenAiError::from(err).into_response();
    if let (_, Some(v2)) = offer.payment_required(services, offer.default_price, None, Some(reason)) {
        insert_header(&mut response, PAYMENT_REQUIRED_HEADER, &wire::encode_header(&v2));
    }
    response
}

/// A purchase that did not go through: a refused payment is priced again (402); anything
/// else is its own error.
fn refused(services: &Services, offer: &Offer, err: ServiceError) -> Response {
    let err = ApiError::from(err);
    match err.status {
        StatusCode::PAYMENT_REQUIRED => priced(services, offer, err),
        _ => OpenAiError::from(err).into_response(),
    }
}

/// The tokens a sale charged for, as OpenAI's `usage` counts them (none known for a fixed
/// price).
fn tokens_of(sale: &Sale) -> (u64, u64) {
    sale.settled
        .by_use
        .map_or((0, 0), |by_use| (by_use.used.input_tokens, by_use.used.output_tokens))
}

/// Why the model stopped, as OpenAI says it: at its length limit, or its own end.
fn finish_reason(answer: &Answer) -> &'static str {
    if answer.cut_short { "length" } else { "stop" }
}

/// A plain answer: the completion and its `PAYMENT-RESPONSE`, or why nothing was answered.
async fn answered(services: &Services, offer: &Offer, sale: Sale) -> Response {
    let delivered = matches!(sale.outcome, SaleOutcome::Answered(_));
    let resource = offer.resource_url(services);
    let settlement = offer
        .settle_response(services, &sale.settled, Version::V2, &resource, delivered)
        .await;
    let tokens = tokens_of(&sale);
    let mut response = match sale.outcome {
        SaleOutcome::Answered(answer) => {
            let completion = Completion::new(&offer.agent.def.username);
            axum::Json(completion.answer_text(&answer.response, tokens, finish_reason(&answer))).into_response()
        }
        SaleOutcome::Failed { error, .. } => OpenAiError::from(ApiError::from(error)).into_response(),
        // A message never queues a job.
        SaleOutcome::Queued { .. } => OpenAiError::from(ApiError::internal("Internal server error")).into_response(),
    };
    insert_header(
        &mut response,
        Version::V2.response_header(),
        &wire::encode_header(&settlement),
    );
    response
}

/// The chat's events, through a relay that keeps taking them when the reader has gone: a
/// paid answer is generated to its end whoever still reads it.
fn relay(to_reader: mpsc::UnboundedSender<ChatEvent>) -> ChatEvents {
    let (chat_side, mut from_chat) = mpsc::unbounded_channel::<ChatEvent>();
    tokio::spawn(async move {
        while let Some(event) = from_chat.recv().await {
            let _ = to_reader.send(event);
        }
    });
    chat_side
}

/// What the stream carries: the chat's events, then how the purchase ended.
enum Frame {
    Event(ChatEvent),
    Done(Box<Result<Sale, ServiceError>>),
}

/// A streamed answer: the purchase on its own task, its text as server-sent chunks as it
/// comes, then the finish (and `usage` when asked). A purchase that ends before any text
/// (refused, failed) is answered as a plain request is.
async fn streamed(
    services: Arc<Services>,
    offer: Offer,
    mut input: ChatInput,
    recorded: Value,
    payment: Payment,
    client: ClientAddress,
    with_usage: bool,
) -> Response {
    let (to_reader, mut events) = mpsc::unbounded_channel();
    input.events = Some(relay(to_reader));
    let model = offer.agent.def.username.clone();
    let lifecycle = services.lifecycle.clone();
    let mut purchase = lifecycle.spawn({
        let services = services.clone();
        async move {
            let sale = buy(&services, &offer, input, recorded, &payment, &client).await;
            (offer, sale)
        }
    });
    let first = tokio::select! {
        Some(event) = events.recv() => Frame::Event(event),
        done = &mut purchase => {
            return match done {
                // Answered with no text on the way (a retry given the answer it bought).
                Ok((offer, Ok(sale))) => charged_stream(&services, &offer, sale, with_usage).await,
                Ok((offer, Err(err))) => refused(&services, &offer, err),
                Err(_) => OpenAiError::from(ApiError::internal("Internal server error")).into_response(),
            };
        }
    };
    let completion = Completion::new(&model);
    let frames = futures_util::stream::unfold(Some((events, purchase)), |state| async move {
        let (mut events, mut purchase) = state?;
        if let Some(event) = events.recv().await {
            return Some((Frame::Event(event), Some((events, purchase))));
        }
        let ended = match (&mut purchase).await {
            Ok((_, sale)) => sale,
            Err(_) => Err(ServiceError::Conflict("the purchase's task failed".into())),
        };
        Some((Frame::Done(Box::new(ended)), None))
    });
    let mut started = false;
    let mut render = move |frame: Frame| -> Vec<Event> {
        let mut chunks = Vec::new();
        if !std::mem::replace(&mut started, true) {
            chunks.push(completion.opening(with_usage));
        }
        match frame {
            Frame::Event(ChatEvent::Text(text)) => chunks.push(completion.text(&text, with_usage)),
            Frame::Event(_) => {}
            Frame::Done(ended) => match *ended {
                Ok(sale) => return finish(&completion, sale, with_usage, chunks),
                Err(err) => chunks.push(OpenAiError::from(ApiError::from(err)).body()),
            },
        }
        chunks.iter().map(|c| json_event(None, c)).collect()
    };
    let events = futures_util::stream::once(async { first })
        .chain(frames)
        .flat_map(move |frame| futures_util::stream::iter(render(frame)))
        .map(Ok::<Event, std::convert::Infallible>);
    Sse::new(events).keep_alive(KeepAlive::default()).into_response()
}

/// An answer whose payment is settled, sent as a stream in one go (its words in pieces, as
/// a reader of a stream takes them), with `PAYMENT-RESPONSE`; a failure is answered as a
/// plain request's is.
async fn charged_stream(services: &Services, offer: &Offer, sale: Sale, with_usage: bool) -> Response {
    let SaleOutcome::Answered(answer) = &sale.outcome else {
        return answered(services, offer, sale).await;
    };
    let completion = Completion::new(&offer.agent.def.username);
    let mut chunks = vec![completion.opening(with_usage)];
    for piece in answer.response.split_inclusive(' ') {
        chunks.push(completion.text(piece, with_usage));
    }
    let resource = offer.resource_url(services);
    let settlement = offer
        .settle_response(services, &sale.settled, Version::V2, &resource, true)
        .await;
    let events = finish(&completion, sale, with_usage, chunks);
    let mut response =
        Sse::new(futures_util::stream::iter(events).map(Ok::<Event, std::convert::Infallible>)).into_response();
    insert_header(
        &mut response,
        Version::V2.response_header(),
        &wire::encode_header(&settlement),
    );
    response
}

/// The stream's end after its text: the finish and usage of an answer, or the error of a
/// purchase that failed after it began.
fn finish(completion: &Completion, sale: Sale, with_usage: bool, mut chunks: Vec<Value>) -> Vec<Event> {
    let tokens = tokens_of(&sale);
    match sale.outcome {
        SaleOutcome::Answered(answer) => chunks.extend(completion.closing(finish_reason(&answer), tokens, with_usage)),
        SaleOutcome::Failed { error, .. } => chunks.push(OpenAiError::from(ApiError::from(error)).body()),
        SaleOutcome::Queued { .. } => {}
    }
    let mut events: Vec<Event> = chunks.iter().map(|c| json_event(None, c)).collect();
    events.push(Event::default().data("[DONE]"));
    events
}
