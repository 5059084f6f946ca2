//! `/x402/{network}/{agentId}`: the pay-per-use API. No key: the payment authorizes.
//! Its bodies differ from the keyed API's: errors are `{success: false, error, code,
//! x402Version}`, and a missing payment is a 402 with what to pay.
//!
//! Each paid command also has its own address, `/x402/{network}/{agentId}/commands/{name}`,
//! whose body holds the parameters alone: one address, one price, one input schema, as
//! indexers list a paid resource.

use crate::services::usage::Owner;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde_json::{Value, json};

use super::AppState;
use super::client::client_key;
use crate::domain::{Command, ResponseFormat};
use crate::error::{ApiBody, ApiError, ApiPath, rate_headers};
use crate::money::MicroUsdc;
use crate::services::payments::{self, Offer, Settled};
use crate::services::purchase::{self, Order, Sale, SaleOutcome};
use crate::services::{ServiceError, Services, jobs};
use crate::x402::sign_in::SIGN_IN_WITH_X;
use crate::x402::wire::{self, PAYMENT_REQUIRED_HEADER, Payment, Version};

mod openai;
mod sign_in;
use sign_in::{offer_sign_in, signed_in};

pub fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/x402/{network}/{agent_id}", get(requirements).post(invoke))
        .route(
            "/x402/{network}/{agent_id}/commands/{command}",
            get(command_requirements).post(invoke_command),
        )
        .route(
            "/x402/{network}/{agent_id}/openai/v1/chat/completions",
            axum::routing::post(openai::completions),
        )
        .route("/x402/{network}/{agent_id}/openai/v1/models", get(openai::models))
        .route(
            "/x402/solana/{agent_id}/payment-transaction",
            axum::routing::post(super::x402_transaction::payment_transaction),
        )
        .route_layer(axum::middleware::from_fn_with_state(state, limit_clients))
}

/// No key here, so every request counts against its client address; each answer carries
/// that address's rate-limit headers (a payer's own limit, when it binds, replaces them).
pub(super) async fn limit_clients(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    // The paid OpenAI-compatible address answers in OpenAI's shapes, its refusals too.
    let refusal = match openai::is_its_path(parts.uri.path()) {
        true => |err: ApiError| openai::refusal(err),
        false => |err: ApiError| x402_error(err, Version::V1),
    };
    let client = client_key(&parts, state.services.settings.server.client_ip_header.as_deref());
    let mut request = Request::from_parts(parts, body);
    request.extensions_mut().insert(ClientAddress(client.clone()));
    let decision = match state
        .services
        .x402_limiter
        .client(&client, crate::clock::now_ms())
        .await
    {
        Ok(decision) => decision,
        Err(err) => return refusal(ServiceError::from(err).into()),
    };
    let mut response = if decision.allowed {
        next.run(request).await
    } else {
        crate::telemetry::metrics::note_rate_limited("x402_client");
        refusal(ServiceError::RateLimited(decision).into())
    };
    if !response.headers().contains_key("x-ratelimit-limit") {
        response.headers_mut().extend(rate_headers(&decision));
    }
    response
}

/// The client address a paid request came from (as its limits count it).
#[derive(Clone)]
pub(super) struct ClientAddress(String);

/// Any failure, in the paid API's envelope (with the error's headers: Retry-After...),
/// in the version the payer spoke.
pub(super) fn x402_error(err: ApiError, version: Version) -> Response {
    let body = json!({ "success": false, "error": err.message, "code": err.code, "x402Version": version.number() });
    let mut response = (err.status, axum::Json(body)).into_response();
    response.headers_mut().extend(err.headers);
    response
}

/// What the request costs, in both versions at once: the v1 body `{x402Version, error,
/// accepts}` and the v2 `PAYMENT-REQUIRED` header. A v2 client reads the header, a v1
/// client the body; neither has anything to configure.
/// A 402 for a command that takes sign-ins also offers a sign-in challenge (v2 only).
async fn payment_required(
    state: &AppState,
    status: StatusCode,
    offer: &Offer,
    price: MicroUsdc,
    command: Option<&Command>,
) -> Response {
    let (v1, mut v2) = offer.payment_required(&state.services, price, command, None);
    if status == StatusCode::PAYMENT_REQUIRED
        && let Some(v2) = v2.as_mut()
    {
        offer_sign_in(&state.services, offer, command, v2).await;
    }
    if status == StatusCode::PAYMENT_REQUIRED {
        if let Some(metrics) = crate::telemetry::metrics::metrics() {
            metrics.x402_offer(offer.network.as_str(), if v2.is_some() { "1,2" } else { "1" });
        }
        let owner = Owner {
            account_id: &offer.agent.account_id,
            agent_id: &offer.agent.id,
        };
        let command = command.map(|c| c.def.name.as_str());
        state.services.usage.offer(owner, command, Some(offer.network));
    }
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

/// The payment header a request carries, and its version (none is a request for the
/// price); and whether it carries both, a payment that cannot be read (refused once the
/// price is known, with it, as any other). Version 2 answers for both.
fn presented(headers: &HeaderMap) -> (Option<(Version, String)>, bool) {
    let read = |version: Version| {
        headers
            .get(version.payment_header())
            .map(|v| (version, v.to_str().unwrap_or_default().to_string()))
    };
    match (read(Version::V1), read(Version::V2)) {
        (Some(_), Some(v2)) => (Some(v2), true),
        (one, other) => (one.or(other), false),
    }
}

/// The paid address a request came to: the agent's, or one of its commands'.
pub(super) struct Address {
    pub network: String,
    pub agent_id: String,
    pub command: Option<String>,
}

type AgentPath = Result<ApiPath<(String, String)>, ApiError>;
type CommandPath = Result<ApiPath<(String, String, String)>, ApiError>;

impl Address {
    fn of_agent(path: AgentPath) -> Result<Address, ApiError> {
        let ApiPath((network, agent_id)) = path?;
        Ok(Address {
            network,
            agent_id,
            command: None,
        })
    }

    fn of_command(path: CommandPath) -> Result<Address, ApiError> {
        let ApiPath((network, agent_id, command)) = path?;
        Ok(Address {
            network,
            agent_id,
            command: Some(command),
        })
    }
}

/// The agent's offer on the address's network, naming the address's command (if any) as
/// the resource its 402s describe.
pub(super) async fn find_offer(state: &AppState, address: &Address, version: Version) -> Result<Offer, Response> {
    let network = crate::domain::Network::parse(&address.network).ok_or_else(|| {
        x402_error(
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "unsupported_network",
                format!("Network '{}' is not served: use solana or base", address.network),
            ),
            version,
        )
    })?;
    let offer = payments::offer(&state.services, &address.agent_id, network)
        .await
        .map_err(|e| x402_error(e.into(), version))?;
    match &address.command {
        None => Ok(offer),
        Some(name) if offer.command(name).is_some() => Ok(offer.at_command(name)),
        Some(name) => Err(x402_error(
            ServiceError::from(payments::X402Error::CommandNotOffered(name.clone())).into(),
            version,
        )),
    }
}

/// GET: the agent's price list, as a payment requirement for a plain message.
async fn requirements(State(state): State<AppState>, path: AgentPath, headers: HeaderMap) -> Response {
    price_list(state, Address::of_agent(path), &headers).await
}

/// GET of a command's address: what that command costs.
async fn command_requirements(State(state): State<AppState>, path: CommandPath, headers: HeaderMap) -> Response {
    price_list(state, Address::of_command(path), &headers).await
}

/// The price list, or for a person's browser the payment page that reads it.
async fn price_list(state: AppState, address: Result<Address, ApiError>, headers: &HeaderMap) -> Response {
    let address = match address {
        Ok(address) => address,
        Err(err) => return x402_error(err, Version::V1),
    };
    let offer = match find_offer(&state, &address, Version::V1).await {
        Ok(offer) => offer,
        Err(response) => return response,
    };
    let mut response = if wants_a_page(headers) {
        super::console::payment_page()
    } else {
        let (price, command) = offer.sold_at_address();
        payment_required(&state, StatusCode::OK, &offer, price, command).await
    };
    response
        .headers_mut()
        .insert(axum::http::header::VARY, axum::http::HeaderValue::from_static("accept"));
    response
}

/// A browser opening the address: it lists HTML first. An x402 client or indexer asks
/// for JSON or anything (`*/*`), and gets the price list.
fn wants_a_page(headers: &HeaderMap) -> bool {
    let accept = headers.get(axum::http::header::ACCEPT).and_then(|v| v.to_str().ok());
    accept
        .and_then(|a| a.split(',').next())
        .is_some_and(|first| first.trim().starts_with("text/html"))
}

/// Reads what a paid request asks for. At the agent's address: a message (a leading
/// `/command` runs it) or a command, every other body field being the command's
/// parameters. At a command's address: that command, the body being its parameters. No
/// body at all is `None`: an indexer's probe, told the price of what the address sells.
fn read_order(body: &[u8], command: Option<&str>) -> Result<Option<(Order, Value)>, ApiError> {
    crate::error::refuse_nul(body)?;
    if body.is_empty() {
        return Ok(None);
    }
    let mut value: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::validation(format!("The body is not valid JSON: {e}")))?;
    let Some(fields) = value.as_object_mut() else {
        return Err(ApiError::validation("The body must be a JSON object"));
    };
    let text = |name: &str| match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
        Some(_) => Err(ApiError::validation(format!(
            "Invalid field '{name}': must be a string"
        ))),
    };
    if let Some(routed) = command {
        if text("command")?.is_some_and(|named| named.trim_start_matches('/') != routed) {
            return Err(ApiError::validation(format!(
                "This address sells /{routed}; the body names another command"
            )));
        }
        fields.remove("command");
        let parameters = fields.clone();
        // Recorded as the agent's address would take it, so a retry at either matches.
        fields.insert("command".into(), json!(routed));
        let order = Order::Command {
            name: routed.to_string(),
            parameters,
            raw_text: None,
        };
        return Ok(Some((order, value)));
    }
    let message = text("message")?;
    let parameters: serde_json::Map<String, Value> = fields
        .iter()
        .filter(|(k, _)| k.as_str() != "message" && k.as_str() != "command")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let order = match (text("command")?.filter(|c| !c.is_empty()), message) {
        (Some(command), _) => Order::Command {
            name: command.trim_start_matches('/').to_string(),
            parameters,
            raw_text: None,
        },
        (None, Some(m)) if m.starts_with('/') => Order::Command {
            name: m[1..].split_whitespace().next().unwrap_or_default().to_string(),
            parameters,
            raw_text: Some(m),
        },
        (None, Some(m)) if !m.is_empty() => Order::Message(m),
        _ => return Err(ApiError::validation("Give a 'message' or a 'command'")),
    };
    Ok(Some((order, value)))
}

/// POST: without a payment, a 402 priced for exactly what was asked; with one, the
/// purchase, answered in the version the payer spoke. It runs on its own task: a payer
/// that goes away does not cut the purchase off between its settlement and its answer
/// (which is kept for the payer's retry), and shutdown waits for it.
async fn invoke(
    State(state): State<AppState>,
    Extension(client): Extension<ClientAddress>,
    path: AgentPath,
    headers: HeaderMap,
    body: Result<ApiBody, ApiError>,
) -> Response {
    purchase_on_own_task(state, client, Address::of_agent(path), headers, body).await
}

/// POST to a command's address: that command, bought as at the agent's address.
async fn invoke_command(
    State(state): State<AppState>,
    Extension(client): Extension<ClientAddress>,
    path: CommandPath,
    headers: HeaderMap,
    body: Result<ApiBody, ApiError>,
) -> Response {
    purchase_on_own_task(state, client, Address::of_command(path), headers, body).await
}

async fn purchase_on_own_task(
    state: AppState,
    client: ClientAddress,
    address: Result<Address, ApiError>,
    headers: HeaderMap,
    body: Result<ApiBody, ApiError>,
) -> Response {
    let lifecycle = state.services.lifecycle.clone();
    match lifecycle
        .spawn(purchase_of(state, client, address, headers, body))
        .await
    {
        Ok(response) => response,
        Err(_) => x402_error(ApiError::internal("Internal server error"), Version::V1),
    }
}

async fn purchase_of(
    state: AppState,
    client: ClientAddress,
    address: Result<Address, ApiError>,
    headers: HeaderMap,
    body: Result<ApiBody, ApiError>,
) -> Response {
    let address = match address {
        Ok(address) => address,
        Err(err) => return x402_error(err, Version::V1),
    };
    let (presented, both_headers) = presented(&headers);
    let version = presented.as_ref().map(|(v, _)| *v).unwrap_or(Version::V1);
    // Over the size limit or not JSON: refused in the paid API's envelope, not the
    // framework's plain text.
    let body: Bytes = match body.and_then(ApiBody::json_bytes) {
        Ok(body) => body,
        Err(err) => return x402_error(err, version),
    };
    let offer = match find_offer(&state, &address, version).await {
        Ok(offer) => offer,
        Err(response) => return response,
    };
    let services = &state.services;
    let quoted = match read_order(&body, address.command.as_deref()) {
        Ok(Some((order, request))) => purchase::quote(services, &offer, order, request, presented.is_some())
            .await
            .map_err(ApiError::from),
        // No body at a command's address with a sign-in: the command without parameters,
        // as the sign-in client sends it again after a probe.
        Ok(None) if presented.is_none() && headers.contains_key(SIGN_IN_WITH_X) && address.command.is_some() => {
            let order = Order::Command {
                name: address.command.clone().unwrap_or_default(),
                parameters: serde_json::Map::new(),
                raw_text: None,
            };
            purchase::quote(services, &offer, order, json!({}), false)
                .await
                .map_err(ApiError::from)
        }
        // No body: a probe is told the address's price; a payment needs an order.
        Ok(None) if presented.is_none() => {
            let (price, command) = offer.sold_at_address();
            return payment_required(&state, StatusCode::PAYMENT_REQUIRED, &offer, price, command).await;
        }
        Ok(None) => Err(ApiError::validation(match address.command {
            Some(_) => "Send the command's parameters as a JSON object",
            None => "Give a 'message' or a 'command'",
        })),
        Err(err) => Err(err),
    };
    let quote = match quoted {
        Ok(quote) => quote,
        Err(err) => return x402_error(err, version),
    };
    let (price, command) = (quote.price, quote.command());
    // Parameters the command would refuse are refused before anyone signs for them.
    let checked = match quote.check_input() {
        Ok(checked) => checked,
        Err(err) => return x402_error(err.into(), version),
    };
    let Some((version, header)) = presented else {
        if let Some(signed) = headers.get(SIGN_IN_WITH_X) {
            return signed_in(services, &offer, checked, signed).await;
        }
        return payment_required(&state, StatusCode::PAYMENT_REQUIRED, &offer, price, command).await;
    };
    let refused = async |err: ApiError| refused_with_price(services, &offer, (price, command), err, version).await;
    if both_headers {
        return refused(ApiError::new(
            StatusCode::PAYMENT_REQUIRED,
            "invalid_payment",
            "Send one payment: X-PAYMENT (x402 version 1) or PAYMENT-SIGNATURE (version 2), not both",
        ))
        .await;
    }
    let ready = offer.takes(version).and_then(|()| {
        wire::decode_payment(version, &header, offer.network_names())
            .map_err(|err| ServiceError::from(payments::X402Error::Refused(err)))
    });
    let payment: Payment = match ready {
        Ok(payment) => payment,
        Err(err @ ServiceError::X402(payments::X402Error::Refused(_))) => return refused(err.into()).await,
        Err(err) => return x402_error(err.into(), version),
    };
    let sale = match purchase::buy(services, checked, &payment, Some(&client.0)).await {
        Ok(sale) => sale,
        Err(err) => return refused(err.into()).await,
    };
    sold(services, &offer, sale, version).await
}

/// A refusal of a priced request; a v2 client also reads it in the PAYMENT-REQUIRED header
/// of the 402, as the reference servers send it, with a fresh sign-in challenge.
async fn refused_with_price(
    services: &Services,
    offer: &Offer,
    (price, command): (MicroUsdc, Option<&Command>),
    err: ApiError,
    version: Version,
) -> Response {
    let (status, reason) = (err.status, err.message.clone());
    let mut response = x402_error(err, version);
    if version == Version::V2
        && status == StatusCode::PAYMENT_REQUIRED
        && let (_, Some(mut v2)) = offer.payment_required(services, price, command, Some(reason))
    {
        offer_sign_in(services, offer, command, &mut v2).await;
        insert_header(&mut response, PAYMENT_REQUIRED_HEADER, &wire::encode_header(&v2));
    }
    response
}

/// The body of a call that was answered (200) or queued (202), whether paid or signed in
/// for; a failure is given back as it came.
fn delivered(
    services: &Services,
    offer: &Offer,
    outcome: SaleOutcome,
    version: Version,
) -> Result<(StatusCode, Value), (ServiceError, Option<purchase::RefundStarted>)> {
    let (status, mut body) = match outcome {
        SaleOutcome::Answered(answer) => {
            let mut body = json!({ "success": true, "response": answer.response, "format": answer.format });
            if let Some(url) = answer.media_url.filter(|_| answer.format == ResponseFormat::Image) {
                body["imageUrl"] = json!(url);
            }
            (StatusCode::OK, body)
        }
        SaleOutcome::Queued { job_id } => {
            let status_url = jobs::status_url(&services.public_base_url, &job_id);
            (
                StatusCode::ACCEPTED,
                json!({ "success": true, "jobId": job_id, "statusUrl": status_url, "etaSeconds": 10, "retryAfterSeconds": 2 }),
            )
        }
        SaleOutcome::Failed { error, refund } => return Err((error, refund)),
    };
    body["agentId"] = json!(offer.agent.id);
    body["timestamp"] = json!(crate::clock::iso(crate::clock::now_ms()));
    body["x402Version"] = json!(version.number());
    Ok((status, body))
}

/// The answer to a settled payment: what it bought, or why nothing, with its receipt and
/// the settlement's header. A signed receipt (`offer-receipt`) comes with an answer only:
/// it says the work was delivered, which a queued or failed call cannot say yet.
async fn sold(services: &Services, offer: &Offer, sale: Sale, version: Version) -> Response {
    let settled = &sale.settled;
    let settlement = offer
        .settle_response(
            services,
            settled,
            version,
            &offer.resource_url(services),
            matches!(sale.outcome, SaleOutcome::Answered(_)),
        )
        .await;
    let headers = [(version.response_header(), wire::encode_header(&settlement))];
    let (status, mut body) = match delivered(services, offer, sale.outcome, version) {
        Ok(delivered) => delivered,
        Err((error, refund)) => {
            let err = ApiError::from(error);
            let mut body = json!({
                "success": false,
                "error": err.message,
                "code": err.code,
                "x402Version": version.number(),
                "receipt": receipt(settled),
            });
            if let Some(refund) = refund {
                body["refundTransactionSignature"] = json!(refund.transaction);
            }
            // The error's own headers too: a busy or rate-limited model's Retry-After.
            let mut response = (err.status, headers, axum::Json(body)).into_response();
            response.headers_mut().extend(err.headers);
            return response;
        }
    };
    body["receipt"] = receipt(settled);
    (status, headers, axum::Json(body)).into_response()
}

/// The API's receipt of a settled payment.
pub fn receipt(settled: &Settled) -> Value {
    let mut receipt = json!({
        "amountPaidMicroUsdc": settled.amount.0,
        "amountPaidUsdc": settled.amount.to_json_number(),
        "transactionSignature": settled.transaction,
        "timestamp": crate::clock::iso(settled.settled_at),
        "payer": settled.payer,
        "payTo": settled.pay_to,
    });
    if let Some(by_use) = &settled.by_use {
        receipt["byUse"] = crate::views::by_use(by_use.max, by_use.used, by_use.command);
    }
    receipt
}
