//! An x402 facilitator's HTTP API (x402 v2 specification, §7): `POST /verify` and
//! `POST /settle`, each with `{x402Version, paymentPayload, paymentRequirements}`,
//! answering `{isValid, invalidReason?, payer?}` and `{success, errorReason?, transaction,
//! network, payer?}`; and `GET /supported`, whose kinds name a Solana fee payer. Only what the operator configured is called, with its
//! `Authorization` header when one is set.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::{Secret, Settings};
use crate::domain::Network;
use crate::x402::wire::RequirementsV2;

/// The facilitator each network settles through, if any.
#[derive(Clone, Default)]
pub struct Facilitators {
    base: Option<Facilitator>,
    solana: Option<Facilitator>,
}

impl Facilitators {
    pub fn from_settings(settings: &Settings) -> Facilitators {
        let x402 = &settings.x402;
        let timeout = Duration::from_secs(x402.x402_settle_timeout_secs);
        let of = |url: &Option<String>, auth: &Option<Secret>| {
            url.as_deref().map(|url| Facilitator::new(url, auth.clone(), timeout))
        };
        Facilitators {
            base: of(&x402.x402_base_facilitator_url, &x402.x402_base_facilitator_auth),
            solana: of(&x402.x402_solana_facilitator_url, &x402.x402_solana_facilitator_auth),
        }
    }

    pub fn of(&self, network: Network) -> Option<&Facilitator> {
        match network {
            Network::Base => self.base.as_ref(),
            Network::Solana => self.solana.as_ref(),
        }
    }
}

/// How long the facilitator's list of what it supports (its fee payers) is trusted; how
/// long a failure to read it is, so that a facilitator down is not asked on every request;
/// and how long reading it may take (it is asked while a price list waits).
const SUPPORTED_TTL: Duration = Duration::from_secs(300);
const SUPPORTED_FAILURE_TTL: Duration = Duration::from_secs(15);
const SUPPORTED_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub struct Facilitator {
    http: reqwest::Client,
    url: String,
    /// Its origin: what logs and payment records name (a key in its URL stays out).
    label: String,
    auth: Option<Secret>,
    /// `GET /supported`'s answer (or why there is none), and when it was asked.
    supported: std::sync::Arc<tokio::sync::Mutex<Option<Asked>>>,
}

/// `/supported`'s answer, and when it was asked.
type Asked = (Result<Value, FacilitatorError>, std::time::Instant);

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FacilitatorError {
    /// Not reached, or no answer in time.
    #[error("the facilitator could not be reached: {0}")]
    Unreachable(String),
    /// An answer that is not the API's: an HTTP error, or a body of another shape.
    #[error("the facilitator answered something unusable: {0}")]
    BadAnswer(String),
}

/// `/verify`'s answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    pub is_valid: bool,
    #[serde(default)]
    pub invalid_reason: Option<String>,
    #[serde(default)]
    pub invalid_message: Option<String>,
}

/// `/settle`'s answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settlement {
    pub success: bool,
    #[serde(default)]
    pub error_reason: Option<String>,
    #[serde(default)]
    pub error_message: Option<String>,
    #[serde(default)]
    pub transaction: String,
}

impl Verdict {
    /// Why the payment was found invalid, in the facilitator's words.
    pub fn reason(&self) -> String {
        why(&self.invalid_reason, &self.invalid_message)
    }
}

impl Settlement {
    pub fn reason(&self) -> String {
        why(&self.error_reason, &self.error_message)
    }
}

fn why(reason: &Option<String>, message: &Option<String>) -> String {
    match (reason, message) {
        (Some(reason), Some(message)) => format!("{reason}: {message}"),
        (Some(text), None) | (None, Some(text)) => text.clone(),
        (None, None) => "no reason given".into(),
    }
}

/// What both calls send: the payment as version 2 states it (a version-1 payment of the
/// `exact` scheme carries the same payload), and the requirement it was made for.
pub fn request(payload: &Value, accepted: &RequirementsV2, resource: &Value) -> Value {
    json!({
        "x402Version": 2,
        "paymentPayload": {
            "x402Version": 2,
            "resource": resource,
            "accepted": accepted,
            "payload": payload,
        },
        "paymentRequirements": accepted,
    })
}

impl Facilitator {
    /// `timeout` bounds each call; a settlement waits for the chain at the facilitator.
    pub fn new(url: &str, auth: Option<Secret>, timeout: Duration) -> Facilitator {
        Facilitator {
            http: crate::outbound::operator_client(Some(timeout)),
            url: url.trim_end_matches('/').to_string(),
            label: reqwest::Url::parse(url)
                .map(|u| u.origin().ascii_serialization())
                .unwrap_or_else(|_| "(unparsable facilitator URL)".into()),
            auth,
            supported: Default::default(),
        }
    }

    /// The fee payer it signs Solana payments with on `network` (CAIP-2), as its
    /// `/supported` names it (`kinds[].extra.feePayer` of version 2's `exact`).
    pub async fn fee_payer(&self, network: &str) -> Result<String, FacilitatorError> {
        self.named("exact", network, "feePayer").await
    }

    /// The address it settles `upto` payments from on `network` (CAIP-2), the one a payer's
    /// witness must name: `kinds[].extra.facilitatorAddress` of version 2's `upto`. An error
    /// when it does not settle `upto` there.
    pub async fn upto_address(&self, network: &str) -> Result<String, FacilitatorError> {
        self.named("upto", network, "facilitatorAddress").await
    }

    /// `extra[field]` of the version-2 `scheme` on `network` in `/supported` (kept for a
    /// while: a facilitator changes it seldom).
    async fn named(&self, scheme: &str, network: &str, field: &str) -> Result<String, FacilitatorError> {
        let mut cached = self.supported.lock().await;
        let fresh = |(answer, at): &Asked| match answer {
            Ok(_) => at.elapsed() < SUPPORTED_TTL,
            Err(_) => at.elapsed() < SUPPORTED_FAILURE_TTL,
        };
        let supported = match cached.as_ref().filter(|c| fresh(c)) {
            Some((answer, _)) => answer.clone(),
            None => {
                let answer = self.get("supported").await;
                *cached = Some((answer.clone(), std::time::Instant::now()));
                answer
            }
        }?;
        let kinds = supported["kinds"].as_array().into_iter().flatten();
        kinds
            .filter(|k| k["x402Version"] == 2 && k["scheme"] == scheme && k["network"] == network)
            .find_map(|k| k["extra"][field].as_str().map(str::to_string))
            .ok_or_else(|| {
                FacilitatorError::BadAnswer(format!("/supported names no {field} for {scheme} on {network}"))
            })
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    pub async fn verify(&self, request: &Value) -> Result<Verdict, FacilitatorError> {
        self.call("verify", request).await
    }

    pub async fn settle(&self, request: &Value) -> Result<Settlement, FacilitatorError> {
        self.call("settle", request).await
    }

    /// A facilitator answers a refused payment with 200 or with 400 and the same body, as
    /// implementations differ; anything else is no answer.
    async fn call<T: serde::de::DeserializeOwned>(&self, path: &str, request: &Value) -> Result<T, FacilitatorError> {
        self.send(self.http.post(format!("{}/{path}", self.url)).json(request), path)
            .await
    }

    async fn get(&self, path: &str) -> Result<Value, FacilitatorError> {
        let call = self.http.get(format!("{}/{path}", self.url)).timeout(SUPPORTED_TIMEOUT);
        self.send(call, path).await
    }

    async fn send<T: serde::de::DeserializeOwned>(
        &self,
        call: reqwest::RequestBuilder,
        path: &str,
    ) -> Result<T, FacilitatorError> {
        super::measured("facilitator", self.send_unmeasured(call, path)).await
    }

    async fn send_unmeasured<T: serde::de::DeserializeOwned>(
        &self,
        mut call: reqwest::RequestBuilder,
        path: &str,
    ) -> Result<T, FacilitatorError> {
        if let Some(auth) = &self.auth {
            // Marked sensitive: kept out of any debug output of the request.
            match reqwest::header::HeaderValue::from_str(auth.expose()) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    call = call.header(reqwest::header::AUTHORIZATION, value);
                }
                Err(_) => {
                    return Err(FacilitatorError::BadAnswer(
                        "the configured Authorization is not a header value".into(),
                    ));
                }
            }
        }
        let response = crate::telemetry::traces::propagate(call)
            .send()
            .await
            .map_err(|e| FacilitatorError::Unreachable(format!("/{path}: {e}")))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| FacilitatorError::Unreachable(format!("/{path}: {e}")))?;
        if !(status.is_success() || status == reqwest::StatusCode::BAD_REQUEST) {
            return Err(FacilitatorError::BadAnswer(format!("/{path} answered HTTP {status}")));
        }
        serde_json::from_slice(&body).map_err(|e| FacilitatorError::BadAnswer(format!("/{path}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_with_and_without_their_optional_fields() {
        let refused: Verdict = serde_json::from_value(
            json!({ "isValid": false, "invalidReason": "insufficient_funds", "payer": "0xabc" }),
        )
        .unwrap();
        assert!(!refused.is_valid);
        assert_eq!(refused.reason(), "insufficient_funds");
        let settled: Settlement =
            serde_json::from_value(json!({ "success": true, "transaction": "0x12", "network": "eip155:8453" }))
                .unwrap();
        assert!(settled.success && settled.transaction == "0x12");
        let failed: Settlement = serde_json::from_value(
            json!({ "success": false, "errorReason": "transaction_failed", "errorMessage": "reverted", "transaction": "" }),
        )
        .unwrap();
        assert_eq!(failed.reason(), "transaction_failed: reverted");
        assert!(serde_json::from_value::<Verdict>(json!({ "valid": true })).is_err());
    }
}
