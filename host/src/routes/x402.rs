//! `/x402/{network}/{agentId}`: the pay-per-use API. No key: the payment authorizes.
//! Its bodies differ from the keyed API's: errors are `{success: false, error, code,
//! x402Version}`, and a missing payment is a 402 with what to pay.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::app::AppState;
use crate::error::{ApiError, ApiPath};
use crate::services::payments::{self, Offer};
pub use crate::x402::X402_VERSION;

pub fn routes() -> Router<AppState> {
    Router::new().route("/x402/{network}/{agent_id}", get(requirements).post(invoke))
}

/// Any failure, in the paid API's envelope.
fn x402_error(err: ApiError) -> Response {
    let body = json!({ "success": false, "error": err.message, "code": err.code, "x402Version": X402_VERSION });
    (err.status, axum::Json(body)).into_response()
}

/// `{x402Version, error, accepts}`: what the request costs.
fn payment_required(status: StatusCode, accepts: Value) -> Response {
    let body = json!({
        "x402Version": X402_VERSION,
        "error": "X-PAYMENT header is required",
        "accepts": [accepts],
    });
    (status, axum::Json(body)).into_response()
}

async fn find_offer(state: &AppState, network: &str, agent_id: &str) -> Result<Offer, Response> {
    let network = crate::domain::Network::parse(network).ok_or_else(|| {
        x402_error(ApiError::new(
            StatusCode::BAD_REQUEST,
            "unsupported_network",
            format!("Network '{network}' is not served: use solana or base"),
        ))
    })?;
    payments::offer(&state.services, agent_id, network)
        .await
        .map_err(|e| x402_error(e.into()))
}

/// GET: the agent's price list, as a payment requirement for a plain message.
async fn requirements(
    State(state): State<AppState>,
    ApiPath((network, agent_id)): ApiPath<(String, String)>,
) -> Response {
    match find_offer(&state, &network, &agent_id).await {
        Ok(offer) => payment_required(
            StatusCode::OK,
            offer.requirement(&state.services, offer.default_price, None),
        ),
        Err(response) => response,
    }
}

/// What a paid request asks for: a message (a leading `/command` runs it) or a command.
struct Asked {
    command: Option<String>,
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
    if let Some(command) = text("command")?.filter(|c| !c.is_empty()) {
        return Ok(Asked {
            command: Some(command.trim_start_matches('/').to_string()),
        });
    }
    match message {
        Some(m) if m.starts_with('/') => {
            let name = m[1..].split_whitespace().next().unwrap_or_default();
            Ok(Asked {
                command: Some(name.to_string()),
            })
        }
        Some(m) if !m.is_empty() => Ok(Asked { command: None }),
        _ => Err(ApiError::validation("Give a 'message' or a 'command'")),
    }
}

/// POST: without `X-PAYMENT`, a 402 priced for exactly what was asked.
async fn invoke(
    State(state): State<AppState>,
    ApiPath((network, agent_id)): ApiPath<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let offer = match find_offer(&state, &network, &agent_id).await {
        Ok(offer) => offer,
        Err(response) => return response,
    };
    let asked = match read_request(&body) {
        Ok(asked) => asked,
        Err(err) => return x402_error(err),
    };
    let command = match &asked.command {
        None => None,
        Some(name) => match offer.command(name) {
            Some(command) => Some(command),
            None => {
                return x402_error(ApiError::new(
                    StatusCode::NOT_FOUND,
                    "command_not_found",
                    format!("The agent offers no paid command '/{name}'"),
                ));
            }
        },
    };
    let price = command.map(|c| offer.price_of(c)).unwrap_or(offer.default_price);
    if !headers.contains_key("x-payment") {
        return payment_required(
            StatusCode::PAYMENT_REQUIRED,
            offer.requirement(&state.services, price, command),
        );
    }
    x402_error(ApiError::new(
        StatusCode::NOT_IMPLEMENTED,
        "not_implemented",
        "Paying is not available on this server yet: settlement lands with the rest of x402",
    ))
}
