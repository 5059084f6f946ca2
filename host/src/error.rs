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
use crate::services::ServiceError;
use crate::services::rate_limit::RateDecision;

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
    fn from(err: ServiceError) -> ApiError {
        match err {
            ServiceError::Validation(m) => ApiError::validation(m),
            ServiceError::NotFound(m) => ApiError::not_found(m),
            ServiceError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "conflict", m),
            ServiceError::Unauthorized(m) => ApiError::unauthorized(m),
            ServiceError::Execution(m) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "execution_error", m),
            ServiceError::Model(e) => {
                let (status, code) = match &e {
                    LlmError::NotConfigured => (StatusCode::SERVICE_UNAVAILABLE, "model_unavailable"),
                    LlmError::Timeout(_) => (StatusCode::GATEWAY_TIMEOUT, "generation_timeout"),
                    _ => (StatusCode::BAD_GATEWAY, "model_unavailable"),
                };
                ApiError::new(status, code, e.to_string())
            }
            ServiceError::Api {
                status,
                code,
                message,
                retry_after,
            } => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let error = ApiError::new(status, code, message);
                match retry_after {
                    Some(secs) => error.with_header(axum::http::header::RETRY_AFTER, HeaderValue::from(secs)),
                    None => error,
                }
            }
            ServiceError::RateLimited(decision) => {
                let mut error = ApiError::rate_limited(&decision);
                error.headers.extend(rate_headers(&decision));
                error
            }
            ServiceError::Store(e) => {
                // The detail goes to the log, not to the client.
                tracing::error!(error = %e, "store failure");
                ApiError::internal("Internal server error")
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": { "message": self.message, "code": self.code } });
        let mut response = (self.status, axum::Json(body)).into_response();
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

/// A JSON body. A wrong content type, malformed JSON or a field of the wrong type is a
/// 400 `validation_error` naming the field; a body over the limit is a 413. An empty
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
        decode_json(body).map(ApiJson)
    }
}

fn is_json(value: &HeaderValue) -> bool {
    let Ok(text) = value.to_str() else { return false };
    let mime = text.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

/// Parses JSON, naming the field at fault: `maxToolCalls: invalid type: ...`.
pub fn decode_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
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
    } else {
        ApiError::validation(format!("Could not read the request body: {}", rejection.body_text()))
    }
}

/// Path parameters, with a JSON 400 for undecodable ones.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
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
    fn accepts_json_content_types() {
        assert!(is_json(&HeaderValue::from_static("application/json")));
        assert!(is_json(&HeaderValue::from_static("application/json; charset=utf-8")));
        assert!(is_json(&HeaderValue::from_static("application/merge-patch+json")));
        assert!(!is_json(&HeaderValue::from_static("text/plain")));
    }
}
