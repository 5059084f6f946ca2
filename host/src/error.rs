//! The keyed API's error envelope `{"error":{"message","code"}}`, and the extractors
//! that turn every malformed input into it (never a plain-text framework rejection).

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::{CONTENT_TYPE, HeaderName};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::llm::LlmError;
use crate::services::chatapp::ChatappError;
use crate::services::payments::X402Error;
use crate::services::rate_limit::RateDecision;
use crate::services::social::SocialError;
use crate::services::wallets::WalletError;
use crate::services::{ServiceError, capitalized};

/// The rate-limit headers every limited response carries: the binding window's size,
/// what is left of it, and when it starts afresh (Unix seconds).
pub const RATE_HEADERS: [&str; 3] = ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"];

pub fn rate_headers(decision: &RateDecision) -> [(HeaderName, HeaderValue); 3] {
    let values = [decision.limit as i64, decision.remaining as i64, decision.reset_unix];
    [0, 1, 2].map(|i| (HeaderName::from_static(RATE_HEADERS[i]), HeaderValue::from(values[i])))
}

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            headers: Vec::new(),
        }
    }

    /// The keyed API's error body.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({ "error": { "message": self.message, "code": self.code } })
    }

    pub fn validation(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "validation_error", message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", message)
    }

    /// 429 `rate_limit_exceeded`, with `Retry-After` and the rate-limit headers.
    pub fn rate_limited(decision: &RateDecision) -> ApiError {
        let error = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_exceeded",
            format!(
                "Rate limit of {} requests exceeded; retry in {} s",
                decision.limit, decision.retry_after_secs
            ),
        );
        error.with_header(
            axum::http::header::RETRY_AFTER,
            HeaderValue::from(decision.retry_after_secs),
        )
    }

    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> ApiError {
        self.headers.push((name, value));
        self
    }
}

impl From<ServiceError> for ApiError {
    /// The one place a service's outcome becomes a status, a code and words. Detail that
    /// came from upstream (an RPC node's URL, a provider's own text) is logged, not answered.
    fn from(err: ServiceError) -> ApiError {
        use StatusCode as S;
        match err {
            ServiceError::Validation(m) => ApiError::validation(m),
            ServiceError::NotFound(m) => ApiError::not_found(m),
            ServiceError::Conflict(m) => ApiError::new(S::CONFLICT, "conflict", m),
            ServiceError::Unauthorized(m) => ApiError::unauthorized(m),
            ServiceError::Forbidden(m) => ApiError::new(S::FORBIDDEN, "insufficient_scope", m),
            ServiceError::Execution(m) => ApiError::new(S::INTERNAL_SERVER_ERROR, "execution_error", m),
            ServiceError::Model(e) => model_error(e),
            ServiceError::RateLimited(decision) => {
                let mut error = ApiError::rate_limited(&decision);
                error.headers.extend(rate_headers(&decision));
                error
            }
            // Retry-After only: the rate-limit headers count the key's requests, not tokens.
            ServiceError::OverBudget { message, decision } => {
                ApiError::new(S::TOO_MANY_REQUESTS, "rate_limit_exceeded", message).with_header(
                    axum::http::header::RETRY_AFTER,
                    HeaderValue::from(decision.retry_after_secs.max(1)),
                )
            }
            ServiceError::Busy(m) => ApiError::new(S::TOO_MANY_REQUESTS, "rate_limit_exceeded", m)
                .with_header(axum::http::header::RETRY_AFTER, HeaderValue::from(1)),
            ServiceError::Unavailable {
                message,
                retry_after_secs,
            } => ApiError::new(S::SERVICE_UNAVAILABLE, "service_unavailable", message)
                .with_header(axum::http::header::RETRY_AFTER, HeaderValue::from(retry_after_secs)),
            ServiceError::QuotaExceeded(m) => ApiError::new(S::FORBIDDEN, "quota_exceeded", m),
            ServiceError::SecretUnusable(m) => ApiError::internal(m),
            ServiceError::Wallet(e) => wallet_error(e),
            ServiceError::Chatapp(e) => chatapp_error(e),
            ServiceError::Social(e) => social_error(e),
            ServiceError::X402(e) => x402_error(e),
            ServiceError::Store(e) => {
                tracing::error!(error = %e, "store failure");
                ApiError::internal("Internal server error")
            }
        }
    }
}

fn model_error(e: LlmError) -> ApiError {
    use StatusCode as S;
    // A provider's own words can carry the operator's account details: logged only.
    tracing::warn!(error = %e, "language model failure");
    let (status, code) = match &e {
        LlmError::NotConfigured | LlmError::Busy | LlmError::RateLimited { .. } => {
            (S::SERVICE_UNAVAILABLE, "model_unavailable")
        }
        LlmError::Timeout(_) => (S::GATEWAY_TIMEOUT, "generation_timeout"),
        LlmError::Refused { .. } | LlmError::Unreachable(_) | LlmError::BadAnswer(_) => {
            (S::BAD_GATEWAY, "model_unavailable")
        }
    };
    let error = ApiError::new(status, code, capitalized(e.public_text()));
    match e {
        // Its queue empties within a generation or two.
        LlmError::Busy => error.with_header(axum::http::header::RETRY_AFTER, HeaderValue::from(2)),
        LlmError::RateLimited { retry_after_secs, .. } => {
            error.with_header(axum::http::header::RETRY_AFTER, HeaderValue::from(retry_after_secs))
        }
        _ => error,
    }
}

fn wallet_error(e: WalletError) -> ApiError {
    use StatusCode as S;
    match e {
        WalletError::NotConfigured(network) => ApiError::new(
            S::BAD_REQUEST,
            "wallet_not_configured",
            format!(
                "The agent has no {network} wallet; create one with `agent-host wallet create --agent ID --network {network}`"
            ),
        ),
        WalletError::ChainUnavailable { network, detail } => {
            // The node's URL often holds a provider's API key: never in an answer.
            tracing::warn!("the {network} RPC node failed: {detail}");
            ApiError::internal(crate::services::wallets::node_failed(network))
        }
        WalletError::TransferFailed(m) => ApiError::new(S::BAD_REQUEST, "transfer_failed", m),
        e @ WalletError::NotConfirmed { .. } => ApiError::internal(format!(
            "{}; it stays recorded as pending and is checked again shortly",
            capitalized(e)
        )),
    }
}

fn chatapp_error(e: ChatappError) -> ApiError {
    use StatusCode as S;
    let message = capitalized(&e);
    match e {
        ChatappError::NotConfigured(_) => ApiError::new(S::NOT_FOUND, "chatapp_not_configured", message),
        ChatappError::Disabled(_) => ApiError::new(S::FORBIDDEN, "chatapp_disabled", message),
        ChatappError::ChatNotFound(_) => ApiError::new(S::NOT_FOUND, "chat_not_found", message),
        ChatappError::BotBlocked(_) => ApiError::new(S::FORBIDDEN, "bot_blocked", message),
        ChatappError::ReplyTargetMissing(_) => ApiError::validation(message),
        ChatappError::RateLimited { retry_after, .. } => {
            ApiError::new(S::TOO_MANY_REQUESTS, "rate_limit_exceeded", message)
                .with_header(axum::http::header::RETRY_AFTER, HeaderValue::from(retry_after))
        }
        ChatappError::Refused(_) => ApiError::new(S::INTERNAL_SERVER_ERROR, "chatapp_send_failed", message),
        ChatappError::Unreachable(detail) => {
            tracing::warn!(detail, "Telegram could not be reached");
            ApiError::new(
                S::INTERNAL_SERVER_ERROR,
                "chatapp_send_failed",
                "Telegram could not be reached; try again later",
            )
        }
    }
}

fn social_error(e: SocialError) -> ApiError {
    use StatusCode as S;
    let message = capitalized(&e);
    match e {
        SocialError::NotConnected(_) => ApiError::new(S::BAD_REQUEST, "social_not_connected", message),
        SocialError::Disabled(_) | SocialError::Forbidden(_) => {
            ApiError::new(S::FORBIDDEN, "social_forbidden", message)
        }
        SocialError::Unauthorized => ApiError::new(S::UNAUTHORIZED, "social_unauthorized", message),
        SocialError::RateLimited { reset_at, .. } => {
            let now = crate::clock::now_ms() / 1000;
            let when = reset_at
                .map(|at| format!("; the limit resets at {}", crate::clock::iso(at * 1000)))
                .unwrap_or_default();
            let error = ApiError::new(S::TOO_MANY_REQUESTS, "social_rate_limit", format!("{message}{when}"));
            match reset_at {
                Some(at) => error.with_header(
                    axum::http::header::RETRY_AFTER,
                    HeaderValue::from((at - now).max(1) as u64),
                ),
                None => error,
            }
        }
        SocialError::NotConfigured => ApiError::new(S::INTERNAL_SERVER_ERROR, "social_not_configured", message),
        SocialError::MediaUploadFailed(_) => ApiError::new(S::BAD_GATEWAY, "social_media_upload_failed", message),
        SocialError::Invalid(_) => ApiError::new(S::BAD_REQUEST, "social_api_error", message),
        SocialError::Upstream(_) => ApiError::new(S::BAD_GATEWAY, "social_api_error", message),
        SocialError::Unreachable(detail) => {
            tracing::warn!(detail, "X could not be reached");
            ApiError::new(
                S::BAD_GATEWAY,
                "social_api_error",
                "X could not be reached; try again later",
            )
        }
    }
}

fn x402_error(e: X402Error) -> ApiError {
    use crate::clients::facilitator::FacilitatorError;
    use StatusCode as S;
    let message = capitalized(&e);
    match e {
        X402Error::AgentNotSelling(_) => ApiError::new(S::NOT_FOUND, "agent_not_found", message),
        X402Error::UnsupportedNetwork { .. } => ApiError::new(S::BAD_REQUEST, "unsupported_network", message),
        X402Error::Refused(refusal) => {
            // Used once already: the payment, or the payer's id for it, on another request.
            let status = if ["payment_already_used", "payment_identifier_conflict"].contains(&refusal.code) {
                S::CONFLICT
            } else {
                S::PAYMENT_REQUIRED
            };
            ApiError::new(status, refusal.code, refusal.message)
        }
        X402Error::PayerBusy | X402Error::StillAnswering => {
            ApiError::new(S::TOO_MANY_REQUESTS, "payment_in_progress", message)
                .with_header(axum::http::header::RETRY_AFTER, HeaderValue::from(5))
        }
        X402Error::PayerCoolingOff { retry_after_secs } => {
            ApiError::new(S::TOO_MANY_REQUESTS, "payer_cooling_off", message)
                .with_header(axum::http::header::RETRY_AFTER, HeaderValue::from(retry_after_secs))
        }
        X402Error::CommandNotOffered(_) => ApiError::new(S::NOT_FOUND, "command_not_found", message),
        X402Error::AnswerNotRecorded => ApiError::internal(message),
        X402Error::SettlementPending { .. } => ApiError::internal(format!(
            "{message}; the payment is recorded and will be settled or refunded shortly"
        )),
        // The facilitator's words stay in the log; the payer learns whether to retry.
        X402Error::Facilitator { error, recorded } => {
            let (status, code) = match error {
                FacilitatorError::Unreachable(_) => (S::SERVICE_UNAVAILABLE, "facilitator_unavailable"),
                FacilitatorError::BadAnswer(_) => (S::BAD_GATEWAY, "facilitator_error"),
            };
            let message = match recorded {
                false => "The payment facilitator of this network cannot be used right now; no payment was taken. \
                          Retry shortly"
                    .to_string(),
                true => "The payment facilitator did not confirm the settlement; the payment is recorded, and if it \
                         was settled it is refunded shortly"
                    .to_string(),
            };
            ApiError::new(status, code, message).with_header(axum::http::header::RETRY_AFTER, HeaderValue::from(5))
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = self.body();
        let mut response = (self.status, axum::Json(body)).into_response();
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

/// A JSON object body. A wrong content type, malformed JSON, another kind of JSON value or
/// a field of the wrong type is a 400 `validation_error` naming the field; a body over the limit is a 413. An empty
/// body without a content type reads as `{}`, for endpoints whose fields are optional.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let content_type = req.headers().get(CONTENT_TYPE).cloned();
        let body = Bytes::from_request(req, state).await.map_err(body_rejection)?;
        let body: &[u8] = match (&content_type, body.is_empty()) {
            (None, true) => b"{}",
            (Some(value), _) if is_json(value) => &body,
            _ => {
                return Err(ApiError::validation("Content-Type must be application/json"));
            }
        };
        // Every body of the API is an object; serde would also read a struct from an
        // array of its fields in order (`[null, null]`), which no client means.
        if body
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|b| *b != b'{')
        {
            return Err(ApiError::validation("Invalid request body: must be a JSON object"));
        }
        decode_json(body).map(ApiJson)
    }
}

/// A raw body (a component, a manifest), with the same JSON errors as `ApiJson` when it
/// cannot be read or is over the limit, and its content type's essence (lowercase, without
/// parameters) when it has one.
pub struct ApiBody {
    pub bytes: Bytes,
    pub mime: Option<String>,
}

impl<S: Send + Sync> FromRequest<S> for ApiBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let mime = req.headers().get(CONTENT_TYPE).and_then(mime_essence);
        let bytes = Bytes::from_request(req, state).await.map_err(body_rejection)?;
        Ok(ApiBody { bytes, mime })
    }
}

impl ApiBody {
    /// The bytes of a body read as JSON by the route (an empty body is allowed: the route
    /// decides what it means). Clients of the open routes send JSON without saying so
    /// (`requests.post(data=...)`, `fetch` with a string body: none or `text/plain`), so
    /// those are read as JSON too; a body that says it is something else (a form, a file)
    /// is refused.
    pub fn json_bytes(self) -> Result<Bytes, ApiError> {
        let readable = match self.mime.as_deref() {
            None | Some("text/plain") => true,
            Some(mime) => is_json_mime(mime),
        };
        if !self.bytes.is_empty() && !readable {
            return Err(ApiError::validation("Content-Type must be application/json (or none)"));
        }
        Ok(self.bytes)
    }
}

/// A content type without its parameters, lowercase: `application/json`.
fn mime_essence(value: &HeaderValue) -> Option<String> {
    let text = value.to_str().ok()?;
    Some(text.split(';').next().unwrap_or_default().trim().to_ascii_lowercase())
}

fn is_json(value: &HeaderValue) -> bool {
    mime_essence(value).is_some_and(|mime| is_json_mime(&mime))
}

fn is_json_mime(mime: &str) -> bool {
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

/// Parses JSON, naming the field at fault: `maxToolCalls: invalid type: ...`.
pub fn decode_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    refuse_nul(body)?;
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    match serde_path_to_error::deserialize(&mut deserializer) {
        Ok(value) => {
            deserializer
                .end()
                .map_err(|e| ApiError::validation(format!("Malformed JSON body: {e}")))?;
            Ok(value)
        }
        Err(err) => {
            let path = err.path().to_string();
            let inner = err.into_inner();
            let message = if inner.is_syntax() || inner.is_eof() {
                format!("Malformed JSON body: {inner}")
            } else if path == "." || path.is_empty() {
                format!("Invalid request body: {}", strip_position(&inner.to_string()))
            } else {
                format!("Invalid field '{path}': {}", strip_position(&inner.to_string()))
            };
            Err(ApiError::validation(message))
        }
    }
}

/// PostgreSQL text cannot hold U+0000, and no field of the API means it: refused on the way
/// in, for every database alike.
const NUL_REFUSED: &str = "Text must not contain the NUL character (U+0000)";

/// Refuses a JSON document that spells U+0000 in any string, key or value.
pub fn refuse_nul(json: &[u8]) -> Result<(), ApiError> {
    if escapes_nul(json) {
        return Err(ApiError::validation(NUL_REFUSED));
    }
    Ok(())
}

/// Whether a JSON document spells U+0000 (`\u0000`) in one of its strings. Escapes occur
/// only inside strings, so walking them pairwise is exact: `\\u0000` is a backslash and text.
fn escapes_nul(json: &[u8]) -> bool {
    let mut rest = json;
    while let Some(at) = rest.iter().position(|b| *b == b'\\') {
        let escaped = &rest[at + 1..];
        if escaped.starts_with(b"u0000") {
            return true;
        }
        rest = escaped.get(1..).unwrap_or_default();
    }
    false
}

/// Whether a percent-encoded path or query carries U+0000 (`%00`). `%2500` is `%00` as text.
fn encodes_nul(uri_part: &str) -> bool {
    uri_part.contains("%00")
}

/// serde_json appends "at line 1 column 17" to data errors; the field name says more.
fn strip_position(message: &str) -> &str {
    message.split(" at line ").next().unwrap_or(message)
}

fn body_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "validation_error",
            "Request body is too large",
        )
    } else if let Some(timed_out) = crate::routes::body_deadline::timed_out(&rejection) {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!("The request body did not arrive within {} s", timed_out.0.as_secs()),
        )
    } else {
        ApiError::validation(format!("Could not read the request body: {}", rejection.body_text()))
    }
}

/// Path parameters, with a JSON 400 for undecodable ones.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        if encodes_nul(parts.uri.path()) {
            return Err(ApiError::validation(NUL_REFUSED));
        }
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| ApiPath(p.0))
            .map_err(|e: PathRejection| ApiError::validation(format!("Invalid path: {}", e.body_text())))
    }
}

/// Query parameters, with a JSON 400 naming the bad one.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        if parts.uri.query().is_some_and(encodes_nul) {
            return Err(ApiError::validation(NUL_REFUSED));
        }
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| ApiQuery(q.0))
            .map_err(|e: QueryRejection| ApiError::validation(format!("Invalid query: {}", e.body_text())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Body {
        message: String,
        #[serde(rename = "maxToolCalls")]
        max_tool_calls: Option<u8>,
    }

    #[test]
    fn names_the_field_at_fault() {
        let err = decode_json::<Body>(br#"{"message":"hi","maxToolCalls":"five"}"#).unwrap_err();
        assert_eq!(err.code, "validation_error");
        assert!(
            err.message
                .starts_with("Invalid field 'maxToolCalls': invalid type: string"),
            "{}",
            err.message
        );
        let err = decode_json::<Body>(br#"{}"#).unwrap_err();
        assert_eq!(err.message, "Invalid request body: missing field `message`");
        let err = decode_json::<Body>(br#"{"message":"#).unwrap_err();
        assert!(err.message.starts_with("Malformed JSON body"), "{}", err.message);
        let err = decode_json::<Body>(br#"{"message":"a"} trailing"#).unwrap_err();
        assert!(err.message.starts_with("Malformed JSON body"), "{}", err.message);
    }

    #[test]
    fn the_nul_character_is_refused_wherever_it_is_spelled() {
        let err = decode_json::<Body>(br#"{"message":"a\u0000b"}"#).unwrap_err();
        assert_eq!((err.code, err.message.as_str()), ("validation_error", NUL_REFUSED));
        // An escaped backslash followed by the letters is text, not the character.
        let text = decode_json::<Body>(br#"{"message":"a\\u0000b"}"#).unwrap();
        assert_eq!(text.message, "a\\u0000b");
        let err = decode_json::<Body>(br#"{"message":"\\\u0000"}"#).unwrap_err();
        assert_eq!(err.message, NUL_REFUSED);
        assert!(encodes_nul("command=L%18%00"));
        assert!(!encodes_nul("command=L%2500"));
    }

    #[test]
    fn accepts_json_content_types() {
        assert!(is_json(&HeaderValue::from_static("application/json")));
        assert!(is_json(&HeaderValue::from_static("application/json; charset=utf-8")));
        assert!(is_json(&HeaderValue::from_static("application/merge-patch+json")));
        assert!(!is_json(&HeaderValue::from_static("text/plain")));
    }
}
