//! `/x402/{network}/{agentId}`: the pay-per-use API. No key: the payment authorizes.
//! Its bodies differ from the keyed API's: errors are `{success: false, error, code,
//! x402Version}`, and a missing payment is a 402 with what to pay.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::AppState;
use super::client::client_key;
use crate::domain::Command;
use crate::error::{ApiError, ApiPath, ApiQuery, rate_headers};
use crate::money::MicroUsdc;
use crate::plugins::Origin;
use crate::services::chat::{self, ChatInput};
use crate::services::payments::{self, Offer, breaker};
use crate::services::{ServiceError, commands, params};
use crate::x402::wire::{self, PAYMENT_REQUIRED_HEADER, Payment, SettleResponse, Version};

pub fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/x402/{network}/{agent_id}", get(requirements).post(invoke))
        .route("/.well-known/x402", get(discovery))
        .route_layer(axum::middleware::from_fn_with_state(state, limit_clients))
}

/// No key here, so every request counts against its client address; each answer carries
/// that address's rate-limit headers (a payer's own limit, when it binds, replaces them).
async fn limit_clients(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let client = client_key(&parts, state.services.settings.client_ip_header.as_deref());
    let request = Request::from_parts(parts, body);
    let decision = match state
        .services
        .x402_limiter
        .client(&client, crate::clock::now_ms())
        .await
    {
        Ok(decision) => decision,
        Err(err) => return x402_error(ServiceError::from(err).into(), Version::V1),
    };
    let mut response = if decision.allowed {
        next.run(request).await
    } else {
        x402_error(ServiceError::RateLimited(decision).into(), Version::V1)
    };
    if !response.headers().contains_key("x-ratelimit-limit") {
        response.headers_mut().extend(rate_headers(&decision));
    }
    response
}

/// Any failure, in the paid API's envelope (with the error's headers: Retry-After...),
/// in the version the payer spoke.
fn x402_error(err: ApiError, version: Version) -> Response {
    let body = json!({ "success": false, "error": err.message, "code": err.code, "x402Version": version.number() });
    let mut response = (err.status, axum::Json(body)).into_response();
    response.headers_mut().extend(err.headers);
    response
}

/// What the request costs, in both versions at once: the v1 body `{x402Version, error,
/// accepts}` and the v2 `PAYMENT-REQUIRED` header. A v2 client reads the header, a v1
/// client the body; neither has anything to configure.
fn payment_required(
    state: &AppState,
    status: StatusCode,
    offer: &Offer,
    price: MicroUsdc,
    command: Option<&Command>,
) -> Response {
    let (v1, v2) = offer.payment_required(&state.services, price, command, None);
    let mut response = (status, axum::Json(v1)).into_response();
    if let Some(v2) = v2 {
        insert_header(&mut response, PAYMENT_REQUIRED_HEADER, &wire::encode_header(&v2));
    }
    response
}

fn insert_header(response: &mut Response, name: &'static str, value: &str) {
    if let Ok(value) = axum::http::HeaderValue::from_str(value) {
        response.headers_mut().insert(name, value);
    }
}

/// The payment header a request carries, and its version; none is a request for the price.
fn presented(headers: &HeaderMap) -> Result<Option<(Version, String)>, ApiError> {
    let read = |version: Version| {
        headers
            .get(version.payment_header())
            .map(|v| (version, v.to_str().unwrap_or_default().to_string()))
    };
    match (read(Version::V1), read(Version::V2)) {
        (Some(_), Some(_)) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_payment",
            "Send one payment: X-PAYMENT (x402 version 1) or PAYMENT-SIGNATURE (version 2), not both",
        )),
        (one, other) => Ok(one.or(other)),
    }
}

async fn find_offer(state: &AppState, network: &str, agent_id: &str, version: Version) -> Result<Offer, Response> {
    let network = crate::domain::Network::parse(network).ok_or_else(|| {
        x402_error(
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "unsupported_network",
                format!("Network '{network}' is not served: use solana or base"),
            ),
            version,
        )
    })?;
    payments::offer(&state.services, agent_id, network)
        .await
        .map_err(|e| x402_error(e.into(), version))
}

/// GET: the agent's price list, as a payment requirement for a plain message.
async fn requirements(
    State(state): State<AppState>,
    ApiPath((network, agent_id)): ApiPath<(String, String)>,
) -> Response {
    match find_offer(&state, &network, &agent_id, Version::V1).await {
        Ok(offer) => payment_required(&state, StatusCode::OK, &offer, offer.default_price, None),
        Err(response) => response,
    }
}

/// `GET /.well-known/x402?limit=&offset=&type=`: every agent for sale here, in the shape
/// of the facilitators' discovery list (x402 v2 specification §8), served by the origin
/// itself as proposed in x402-foundation/x402#2582.
async fn discovery(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<std::collections::HashMap<String, String>>,
) -> Response {
    let number = |name: &str, default: usize, range: std::ops::RangeInclusive<usize>| match query.get(name) {
        None => Ok(default),
        Some(text) => text.parse::<usize>().ok().filter(|n| range.contains(n)).ok_or_else(|| {
            ApiError::validation(format!(
                "Invalid query parameter '{name}': must be an integer from {} to {}",
                range.start(),
                range.end()
            ))
        }),
    };
    let page = number("limit", 20, 1..=100).and_then(|limit| Ok((limit, number("offset", 0, 0..=1_000_000)?)));
    let (limit, offset) = match page {
        Ok(page) => page,
        Err(err) => return x402_error(err, Version::V2),
    };
    // Every resource here is an HTTP one.
    let wanted = query.get("type").is_none_or(|kind| kind == "http");
    let catalog = match payments::catalog::catalog(&state.services, if wanted { limit } else { 0 }, offset).await {
        Ok(catalog) => catalog,
        Err(err) => return x402_error(err.into(), Version::V2),
    };
    let list = wire::DiscoveryList {
        x402_version: 2,
        items: catalog.items,
        pagination: wire::Pagination {
            limit,
            offset,
            total: if wanted { catalog.total } else { 0 },
        },
    };
    axum::Json(list).into_response()
}

/// What a paid request asks for: a message (a leading `/command` runs it) or a command.
struct Asked {
    command: Option<String>,
    /// The `/command ...` text, parsed into parameters like `rawText`.
    raw_text: Option<String>,
    message: Option<String>,
    /// Every other body field: the command's parameters.
    parameters: serde_json::Map<String, Value>,
    body: Value,
}

fn read_request(body: &[u8]) -> Result<Asked, ApiError> {
    let value: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(body).map_err(|e| ApiError::validation(format!("The body is not valid JSON: {e}")))?
    };
    let Some(fields) = value.as_object() else {
        return Err(ApiError::validation("The body must be a JSON object"));
    };
    let text = |name: &str| match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
        Some(_) => Err(ApiError::validation(format!(
            "Invalid field '{name}': must be a string"
        ))),
    };
    let message = text("message")?;
    let parameters: serde_json::Map<String, Value> = fields
        .iter()
        .filter(|(k, _)| k.as_str() != "message" && k.as_str() != "command")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut asked = Asked {
        command: None,
        raw_text: None,
        message: None,
        parameters,
        body: value.clone(),
    };
    if let Some(command) = text("command")?.filter(|c| !c.is_empty()) {
        asked.command = Some(command.trim_start_matches('/').to_string());
        return Ok(asked);
    }
    match message {
        Some(m) if m.starts_with('/') => {
            asked.command = Some(m[1..].split_whitespace().next().unwrap_or_default().to_string());
            asked.raw_text = Some(m);
            Ok(asked)
        }
        Some(m) if !m.is_empty() => {
            asked.message = Some(m);
            Ok(asked)
        }
        _ => Err(ApiError::validation("Give a 'message' or a 'command'")),
    }
}

/// POST: without a payment, a 402 priced for exactly what was asked.
async fn invoke(
    State(state): State<AppState>,
    ApiPath((network, agent_id)): ApiPath<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let presented = match presented(&headers) {
        Ok(presented) => presented,
        Err(err) => return x402_error(err, Version::V1),
    };
    let version = presented.as_ref().map(|(v, _)| *v).unwrap_or(Version::V1);
    let offer = match find_offer(&state, &network, &agent_id, version).await {
        Ok(offer) => offer,
        Err(response) => return response,
    };
    let asked = match read_request(&body) {
        Ok(asked) => asked,
        Err(err) => return x402_error(err, version),
    };
    let command = match &asked.command {
        None => None,
        Some(name) => match offer.command(name) {
            Some(command) => Some(command),
            None => {
                return x402_error(
                    ApiError::new(
                        StatusCode::NOT_FOUND,
                        "command_not_found",
                        format!("The agent offers no paid command '/{name}'"),
                    ),
                    version,
                );
            }
        },
    };
    let price = command.map(|c| offer.price_of(c)).unwrap_or(offer.default_price);
    // A paused command is refused before anyone signs or pays for it.
    let rules = breaker::Rules::of(&state.services.settings);
    if let Some(command) = command {
        match breaker::look(&state.services.store, rules, &offer.agent.id, &command.def.name).await {
            Ok(admission) => {
                if let Some(refusal) = admission.refusal(&command.def.name) {
                    return x402_error(refusal.into(), version);
                }
            }
            Err(err) => return x402_error(ServiceError::from(err).into(), version),
        }
    }
    let Some((version, header)) = presented else {
        return payment_required(&state, StatusCode::PAYMENT_REQUIRED, &offer, price, command);
    };
    // A request that cannot run is refused before any money moves.
    if let Some(command) = command
        && let Err(message) = params::resolve(
            &command.def.name,
            &command.def.parameters,
            Some(asked.parameters.clone()),
            asked.raw_text.as_deref(),
        )
    {
        return x402_error(ApiError::validation(message), version);
    }
    let refused = |err: ServiceError| {
        let err: ApiError = err.into();
        let (status, reason) = (err.status, err.message.clone());
        let mut response = x402_error(err, version);
        // A v2 client reads why in the PAYMENT-REQUIRED header of the 402, as the
        // reference servers send it.
        if version == Version::V2
            && status == StatusCode::PAYMENT_REQUIRED
            && let (_, Some(v2)) = offer.payment_required(&state.services, price, command, Some(reason))
        {
            insert_header(&mut response, PAYMENT_REQUIRED_HEADER, &wire::encode_header(&v2));
        }
        response
    };
    if version == Version::V2 && offer.network_id.is_none() {
        // The chain has not told us its id yet, so no v2 payment can be checked.
        let unknown = crate::services::wallets::WalletError::ChainUnavailable {
            network: offer.network,
            detail: "its CAIP-2 id (genesis hash) is not known yet".into(),
        };
        return x402_error(ServiceError::from(unknown).into(), version);
    }
    let payment: Payment = match wire::decode_payment(version, &header, offer.network_names()) {
        Ok(payment) => payment,
        Err(err) => return refused(payments::X402Error::Refused(err).into()),
    };
    let services = &state.services;
    let purchase = payments::Purchase {
        price,
        command: command.map(|c| c.def.name.as_str()),
        request: &asked.body,
    };
    // Admitted by the command's breaker (a half-open one lets this call through as its
    // trial), so its outcome below counts.
    let mut trial = None;
    if let Some(command) = command {
        match breaker::admit(&services.store, rules, &offer.agent.id, &command.def.name).await {
            Ok((breaker::Admission::Trial, at)) => trial = Some(at),
            Ok((admission, _)) => {
                if let Some(refusal) = admission.refusal(&command.def.name) {
                    return x402_error(refusal.into(), version);
                }
            }
            Err(err) => return x402_error(ServiceError::from(err).into(), version),
        }
    }
    let settled = match payments::settle(services, &offer, &payment, purchase).await {
        Ok(settled) => settled,
        Err(err) => {
            if let (Some(command), Some(at)) = (command, trial) {
                breaker::release_trial(&services.store, &offer.agent.id, &command.def.name, at).await;
            }
            return refused(err);
        }
    };
    let agent = &offer.agent;
    let outcome = match command {
        Some(command) => commands::execute(
            services,
            agent,
            command,
            Some(asked.parameters),
            asked.raw_text,
            Origin::X402,
            Some(&settled.payment_id),
        )
        .await
        .map(|r| (r.response, r.format.as_str().to_string(), r.media_url, r.status_url)),
        None => {
            // A paid message buys a reply: the paid commands are not offered to it as
            // tools, or a cheap message could run an expensive command.
            let input = ChatInput {
                message: asked.message.unwrap_or_default(),
                history: Vec::new(),
                tools_enabled: false,
                max_tool_calls: 0,
            };
            chat::chat(services, agent, Vec::new(), input)
                .await
                .map(|r| (r.response, "text".to_string(), None, None))
        }
    };
    let payment_response = payment_response_header(&settled, &offer, version);
    let response_header = version.response_header();
    let now = crate::clock::iso(crate::clock::now_ms());
    // `refund`: Some for a failure that is refunded (its signature, or null while it is on its way).
    let failed = |err: ApiError, refund: Option<Option<String>>| {
        let mut body = json!({
            "success": false,
            "error": err.message,
            "code": err.code,
            "x402Version": version.number(),
            "receipt": settled.receipt(),
        });
        if let Some(signature) = refund {
            body["refundTransactionSignature"] = json!(signature);
        }
        (
            err.status,
            [(response_header, payment_response.clone())],
            axum::Json(body),
        )
            .into_response()
    };
    // The command's breaker hears how it went: answered (its own refusal of the payer's
    // input included) closes it, a failure counts; a queued job tells it when it ends.
    let command_name = command.map(|c| c.def.name.as_str());
    let counted = matches!(&outcome, Err(err) if breaker::counts(err));
    match &outcome {
        Ok((.., Some(_))) => {}
        Err(err) if !payments::payers_fault(err) => {}
        _ => {
            if let Some(name) = command_name {
                breaker::succeeded(&services.store, &agent.id, name).await;
            }
        }
    }
    match outcome {
        Ok((response, format, media_url, status_url)) => {
            // A paid job served its payment when it was recorded. Anything else is marked
            // served before the answer goes out: a payment left `settled` is refunded as
            // never answered, so an answer must never leave without the mark.
            crate::faults::crash_point("x402:after_work");
            if status_url.is_none()
                && let Err(err) = settled.served(services).await
            {
                tracing::error!(payment = settled.payment_id, "could not mark the payment served: {err}");
                return failed(
                    ApiError::internal("The answer could not be recorded; the payment will be refunded"),
                    None,
                );
            }
            crate::faults::crash_point("x402:after_served");
            let (status, mut body) = match status_url {
                Some(status_url) => (
                    StatusCode::ACCEPTED,
                    json!({
                        "success": true,
                        "jobId": status_url.rsplit('/').next().unwrap_or_default(),
                        "statusUrl": status_url,
                        "etaSeconds": 10,
                        "retryAfterSeconds": 2,
                    }),
                ),
                None => (
                    StatusCode::OK,
                    json!({ "success": true, "response": response, "format": format }),
                ),
            };
            body["receipt"] = settled.receipt();
            body["agentId"] = json!(agent.id);
            body["timestamp"] = json!(now);
            body["x402Version"] = json!(version.number());
            if let Some(url) = media_url.filter(|_| format == "image") {
                body["imageUrl"] = json!(url);
            }
            (status, [(response_header, payment_response)], axum::Json(body)).into_response()
        }
        // The payer's own input, refused by the command after its parameters were checked:
        // the work ran and answered, so the payment counts as served (see payments::refund).
        Err(err) if payments::payers_fault(&err) => {
            if let Err(mark) = settled.served(services).await {
                tracing::error!(
                    payment = settled.payment_id,
                    "could not mark the payment served: {mark}"
                );
            }
            failed(err.into(), None)
        }
        Err(err) => {
            let err: ApiError = err.into();
            if let Some(name) = command_name.filter(|_| counted) {
                breaker::failed(&services.store, rules, &agent.id, name, &err.message).await;
            }
            let refund = settled.refund(services, &err.message).await;
            failed(err, Some(refund))
        }
    }
}

/// `X-PAYMENT-RESPONSE` (v1) or `PAYMENT-RESPONSE` (v2): base64 of `{success,
/// transaction, network, payer}`, the network named as the payment's version names it.
fn payment_response_header(settled: &payments::Settled, offer: &Offer, version: Version) -> String {
    let names = offer.network_names();
    let response = SettleResponse {
        success: true,
        error_reason: None,
        transaction: settled.transaction.clone(),
        network: match version {
            Version::V1 => names.v1,
            Version::V2 => names.v2,
        }
        .to_string(),
        payer: settled.payer.clone(),
    };
    wire::encode_header(&response)
}
