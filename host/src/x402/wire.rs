//! The x402 wire format, versions 1 and 2, as typed objects: what a 402 offers, what a payer
//! sends back and what the answer reports. One route speaks both: the v1 objects travel in
//! the JSON body and `X-PAYMENT` / `X-PAYMENT-RESPONSE`, the v2 ones in the
//! `PAYMENT-REQUIRED`, `PAYMENT-SIGNATURE` and `PAYMENT-RESPONSE` headers (base64 of JSON).
//!
//! | v1 | v2 |
//! |---|---|
//! | `X-PAYMENT` | `PAYMENT-SIGNATURE` |
//! | `X-PAYMENT-RESPONSE` | `PAYMENT-RESPONSE` |
//! | 402 body `{x402Version, error, accepts}` | `PAYMENT-REQUIRED` header |
//! | `maxAmountRequired` | `amount` |
//! | `resource`, `description`, `mimeType` in each requirement | one `resource` object |
//! | `outputSchema` | the `bazaar` extension |
//! | network `base`, `solana` | CAIP-2: `eip155:8453`, `solana:5eykt4Us…` |

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::PaymentError;

/// The only scheme served: the payer pays exactly the price.
pub const SCHEME: &str = "exact";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    pub fn number(self) -> u64 {
        match self {
            Version::V1 => 1,
            Version::V2 => 2,
        }
    }

    /// The request header that carries a payment of this version.
    pub fn payment_header(self) -> &'static str {
        match self {
            Version::V1 => "x-payment",
            Version::V2 => "payment-signature",
        }
    }

    /// The answer header that reports its settlement.
    pub fn response_header(self) -> &'static str {
        match self {
            Version::V1 => "x-payment-response",
            Version::V2 => "payment-response",
        }
    }
}

/// The v2 header that carries a [`PaymentRequiredV2`].
pub const PAYMENT_REQUIRED_HEADER: &str = "payment-required";

/// x402's MCP transport: where a payment travels in a tool call's `_meta`, and where its
/// settlement is reported in the tool result's `_meta`.
pub const MCP_PAYMENT_META: &str = "x402/payment";
pub const MCP_PAYMENT_RESPONSE_META: &str = "x402/payment-response";

/// A network as each version names it: `base` and `eip155:8453`.
#[derive(Debug, Clone, Copy)]
pub struct NetworkNames<'a> {
    pub v1: &'a str,
    pub v2: &'a str,
}

/// One way to pay, in version 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequirementsV1 {
    pub scheme: String,
    pub network: String,
    /// Micro-USDC, as a decimal string.
    pub max_amount_required: String,
    pub resource: String,
    pub description: String,
    pub mime_type: String,
    pub pay_to: String,
    pub max_timeout_seconds: u64,
    pub asset: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default)]
    pub extra: Map<String, Value>,
}

/// The 402 body of version 1 (and the body of the `GET` price list).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PaymentRequiredV1 {
    pub x402_version: u64,
    pub error: String,
    pub accepts: Vec<RequirementsV1>,
}

/// One way to pay, in version 2. A payer echoes it back as `accepted`, so it is built the
/// same way every time and compared whole; a field we never offer is refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequirementsV2 {
    pub scheme: String,
    pub network: String,
    /// Micro-USDC, as a decimal string.
    pub amount: String,
    pub asset: String,
    pub pay_to: String,
    pub max_timeout_seconds: u64,
    #[serde(default)]
    pub extra: Map<String, Value>,
}

/// What is being paid for, in version 2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInfo {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// The `PAYMENT-REQUIRED` header's object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PaymentRequiredV2 {
    pub x402_version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub resource: ResourceInfo,
    pub accepts: Vec<RequirementsV2>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extensions: Map<String, Value>,
}

/// `X-PAYMENT`, decoded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PaymentPayloadV1 {
    pub x402_version: u64,
    pub scheme: String,
    pub network: String,
    pub payload: Map<String, Value>,
}

/// `PAYMENT-SIGNATURE`, decoded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PaymentPayloadV2 {
    pub x402_version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceInfo>,
    pub accepted: RequirementsV2,
    pub payload: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Map<String, Value>>,
}

/// `X-PAYMENT-RESPONSE` / `PAYMENT-RESPONSE`: how the payment was settled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SettleResponse {
    pub success: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_reason: Option<String>,
    pub transaction: String,
    /// As the payment's version names it.
    pub network: String,
    pub payer: String,
    /// What was charged, in atomic units (`upto`: the amount used, perhaps 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<String>,
    /// The signed receipt (`offer-receipt`), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Map<String, Value>>,
}

/// A payment as presented, either version: the network's payload and, for v2, the
/// requirement the payer says it accepted (to be checked against what we offer).
#[derive(Debug, Clone, PartialEq)]
pub struct Payment {
    pub version: Version,
    pub payload: Value,
    pub accepted: Option<RequirementsV2>,
    /// The extensions a v2 payment echoed (none in v1).
    pub extensions: Map<String, Value>,
}

impl Payment {
    /// Whether it pays with the `upto` scheme: a maximum, charged by use.
    pub fn is_upto(&self) -> bool {
        self.accepted.as_ref().is_some_and(|a| a.scheme == super::upto::SCHEME)
    }
}

/// base64 of the compact JSON, as every x402 header is.
pub fn encode_header<T: Serialize>(value: &T) -> String {
    // Serialising these plain structs cannot fail.
    let json = serde_json::to_vec(value).unwrap_or_default();
    base64::engine::general_purpose::STANDARD.encode(json)
}

/// Decodes a payment header of `version` and checks its envelope: the version, scheme
/// `exact`, the network of the endpoint it was sent to. The payload itself is the
/// network's to check.
pub fn decode_payment(version: Version, header: &str, network: NetworkNames<'_>) -> Result<Payment, PaymentError> {
    let name = version.payment_header().to_ascii_uppercase();
    let invalid = |why: String| PaymentError::new("invalid_payment", format!("{name} {why}"));
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(header.trim())
        .map_err(|_| invalid("is not base64".into()))?;
    let json: Value = serde_json::from_slice(&bytes).map_err(|_| invalid("is not base64 of a JSON object".into()))?;
    read_payment(version, json, &name, network)
}

/// Checks a payment's envelope, already read as JSON: the version, scheme `exact`, the
/// network it is for. `carrier` names where it came from, for the refusal's words.
pub fn read_payment(
    version: Version,
    json: Value,
    carrier: &str,
    network: NetworkNames<'_>,
) -> Result<Payment, PaymentError> {
    let invalid = |why: String| PaymentError::new("invalid_payment", format!("{carrier} {why}"));
    match json.get("x402Version").and_then(Value::as_u64) {
        Some(n) if n == version.number() => {}
        Some(other) => return Err(wrong_version(version, other)),
        None => return Err(invalid("lacks x402Version".into())),
    }
    let (scheme, paid_on, payload, accepted, extensions) = match version {
        Version::V1 => {
            let v1: PaymentPayloadV1 =
                serde_json::from_value(json).map_err(|e| invalid(format!("is malformed: {e}")))?;
            (v1.scheme, v1.network, v1.payload, None, Map::new())
        }
        Version::V2 => {
            let v2: PaymentPayloadV2 =
                serde_json::from_value(json).map_err(|e| invalid(format!("is malformed: {e}")))?;
            (
                v2.accepted.scheme.clone(),
                v2.accepted.network.clone(),
                v2.payload,
                Some(v2.accepted),
                v2.extensions.unwrap_or_default(),
            )
        }
    };
    match (version, scheme.as_str()) {
        (_, SCHEME) | (Version::V2, super::upto::SCHEME) => {}
        _ => {
            return Err(PaymentError::new(
                "unsupported_scheme",
                "only the 'exact' scheme is accepted, and 'upto' in x402 version 2 where it is offered",
            ));
        }
    }
    let expected = match version {
        Version::V1 => network.v1,
        Version::V2 => network.v2,
    };
    if paid_on != expected {
        return Err(PaymentError::new(
            "wrong_network",
            format!("the payment is for network '{paid_on}', this endpoint takes '{expected}'"),
        ));
    }
    Ok(Payment {
        version,
        payload: Value::Object(payload),
        accepted,
        extensions,
    })
}

fn wrong_version(header: Version, sent: u64) -> PaymentError {
    let message = match sent {
        1 => "x402Version 1 payments go in the X-PAYMENT header".to_string(),
        2 => "x402Version 2 payments go in the PAYMENT-SIGNATURE header".to_string(),
        other => format!(
            "x402Version {other} is not served here; use 1 (X-PAYMENT) or 2 (PAYMENT-SIGNATURE), not in {}",
            header.payment_header().to_ascii_uppercase()
        ),
    };
    PaymentError::new("unsupported_x402_version", message)
}

impl RequirementsV2 {
    /// Refuses an `accepted` requirement that is not exactly `offered`, naming the first
    /// field that differs: a payment signed for other terms is not taken.
    pub fn must_match(&self, offered: &RequirementsV2) -> Result<(), PaymentError> {
        let differs = [
            ("scheme", self.scheme != offered.scheme),
            ("network", self.network != offered.network),
            ("amount", self.amount != offered.amount),
            ("asset", self.asset != offered.asset),
            ("payTo", self.pay_to != offered.pay_to),
            (
                "maxTimeoutSeconds",
                self.max_timeout_seconds != offered.max_timeout_seconds,
            ),
            ("extra", self.extra != offered.extra),
        ];
        match differs.iter().find(|(_, different)| *different) {
            None => Ok(()),
            Some((field, _)) => Err(PaymentError::new(
                "payment_requirement_mismatch",
                format!(
                    "accepted.{field} is not what this request offers; pay one of the requirements in PAYMENT-REQUIRED"
                ),
            )),
        }
    }
}

/// The extensions a v2 payment echoed, against those offered. The client echoes them and
/// "may append additional info but cannot delete or overwrite existing info" (x402 v2,
/// §5.1.2): an offered extension it echoes must hold every part of the offered `info`
/// unchanged. One it leaves out is simply not used (the bazaar's cataloguing); one never
/// offered has no meaning here and is ignored, as the specification defines none for it.
pub fn echoes_offered_extensions(
    echoed: &Map<String, Value>,
    offered: &Map<String, Value>,
) -> Result<(), PaymentError> {
    for (name, offer) in offered {
        // The payer's answer to gas sponsoring is its signed permit, not an echo.
        if name == super::gas_sponsoring::NAME {
            continue;
        }
        let Some(echo) = echoed.get(name) else { continue };
        let mut path = format!("extensions.{name}.info");
        if !holds(&echo["info"], &offer["info"], &mut path) {
            return Err(PaymentError::new(
                "invalid_payment",
                format!(
                    "{path} is not what this request offered; echo the offered extensions unchanged (adding to them is fine)"
                ),
            ));
        }
    }
    Ok(())
}

/// Whether `echo` holds everything of `offer` (objects may have more keys); on a
/// difference, `path` names where.
fn holds(echo: &Value, offer: &Value, path: &mut String) -> bool {
    match (echo, offer) {
        (Value::Object(echo), Value::Object(offer)) => offer.iter().all(|(key, value)| {
            let before = path.len();
            path.push('.');
            path.push_str(key);
            let same = echo.get(key).is_some_and(|e| holds(e, value, path));
            if same {
                path.truncate(before);
            }
            same
        }),
        _ => echo == offer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NAMES: NetworkNames<'static> = NetworkNames {
        v1: "base",
        v2: "eip155:8453",
    };

    fn encode(value: &Value) -> String {
        base64::engine::general_purpose::STANDARD.encode(value.to_string())
    }

    #[test]
    fn echoed_extensions_may_add_but_never_change_what_was_offered() {
        let offered = json!({ "bazaar": { "info": { "input": { "type": "http", "method": "POST" } }, "schema": {} } });
        let offered = offered.as_object().unwrap();
        let check = |echoed: Value| echoes_offered_extensions(echoed.as_object().unwrap(), offered);
        assert!(check(json!({})).is_ok(), "left out: not used");
        assert!(check(json!({ "bazaar": offered["bazaar"].clone() })).is_ok());
        let added = json!({ "bazaar": { "info": { "input": { "type": "http", "method": "POST", "note": "mine" } } },
            "payment-identifier": { "info": { "id": "pay_0123456789abcdef" } } });
        assert!(
            check(added).is_ok(),
            "appended info and an extension never offered are fine"
        );
        let changed = check(json!({ "bazaar": { "info": { "input": { "type": "http", "method": "GET" } } } }));
        let err = changed.unwrap_err();
        assert_eq!(err.code, "invalid_payment");
        assert!(
            err.message.contains("extensions.bazaar.info.input.method"),
            "{}",
            err.message
        );
        assert!(
            check(json!({ "bazaar": { "info": { "input": {} } } })).is_err(),
            "deleted info"
        );
        assert!(check(json!({ "bazaar": "nothing" })).is_err());
    }

    fn offered() -> RequirementsV2 {
        RequirementsV2 {
            scheme: "exact".into(),
            network: "eip155:8453".into(),
            amount: "10000".into(),
            asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913".into(),
            pay_to: "0x1111111111111111111111111111111111111111".into(),
            max_timeout_seconds: 60,
            extra: json!({ "name": "USD Coin", "version": "2" })
                .as_object()
                .cloned()
                .unwrap(),
        }
    }

    #[test]
    fn the_v1_envelope_is_checked() {
        let ok = json!({ "x402Version": 1, "scheme": "exact", "network": "base", "payload": { "a": 1 } });
        let payment = decode_payment(Version::V1, &encode(&ok), NAMES).unwrap();
        assert_eq!(payment.payload, json!({ "a": 1 }));
        assert_eq!(payment.accepted, None);
        let code = |v: Value| decode_payment(Version::V1, &encode(&v), NAMES).unwrap_err().code;
        let mut other = ok.clone();
        other["network"] = json!("solana");
        assert_eq!(code(other), "wrong_network");
        let mut v2 = ok.clone();
        v2["x402Version"] = json!(2);
        assert_eq!(code(v2), "unsupported_x402_version");
        let mut upto = ok.clone();
        upto["scheme"] = json!("upto");
        assert_eq!(code(upto), "unsupported_scheme");
        let mut bare = ok.clone();
        bare.as_object_mut().unwrap().remove("payload");
        assert_eq!(code(bare), "invalid_payment");
        let mut not_object = ok;
        not_object["payload"] = json!("text");
        assert_eq!(code(not_object), "invalid_payment");
        assert_eq!(
            decode_payment(Version::V1, "%%%", NAMES).unwrap_err().code,
            "invalid_payment"
        );
    }

    #[test]
    fn the_v2_envelope_is_checked_and_keeps_what_was_accepted() {
        let accepted = serde_json::to_value(offered()).unwrap();
        let ok = json!({
            "x402Version": 2,
            "resource": { "url": "http://x/x402/base/a" },
            "accepted": accepted,
            "payload": { "a": 1 },
        });
        let payment = decode_payment(Version::V2, &encode(&ok), NAMES).unwrap();
        assert_eq!(payment.version, Version::V2);
        assert_eq!(payment.payload, json!({ "a": 1 }));
        assert_eq!(payment.accepted, Some(offered()));

        let code = |v: Value| decode_payment(Version::V2, &encode(&v), NAMES).unwrap_err().code;
        let mut v1_name = ok.clone();
        v1_name["accepted"]["network"] = json!("base");
        assert_eq!(code(v1_name), "wrong_network", "v2 names networks in CAIP-2");
        let mut sepolia = ok.clone();
        sepolia["accepted"]["network"] = json!("eip155:84532");
        assert_eq!(code(sepolia), "wrong_network");
        // `upto` is read in version 2 (whether it is offered is the offer's to say).
        let mut upto = ok.clone();
        upto["accepted"]["scheme"] = json!("upto");
        assert!(decode_payment(Version::V2, &encode(&upto), NAMES).unwrap().is_upto());
        let mut batch = ok.clone();
        batch["accepted"]["scheme"] = json!("batch-settlement");
        assert_eq!(code(batch), "unsupported_scheme");
        let mut unknown = ok.clone();
        unknown["accepted"]["discount"] = json!("50%");
        assert_eq!(code(unknown), "invalid_payment", "a field we never offer");
        let mut no_accepted = ok.clone();
        no_accepted.as_object_mut().unwrap().remove("accepted");
        assert_eq!(code(no_accepted), "invalid_payment");
        // A v1 payment sent in the v2 header, and the other way round, is told where it goes.
        let v1 = json!({ "x402Version": 1, "scheme": "exact", "network": "base", "payload": {} });
        let err = decode_payment(Version::V2, &encode(&v1), NAMES).unwrap_err();
        assert_eq!(err.code, "unsupported_x402_version");
        assert!(err.message.contains("X-PAYMENT"), "{}", err.message);
        let err = decode_payment(Version::V1, &encode(&ok), NAMES).unwrap_err();
        assert!(err.message.contains("PAYMENT-SIGNATURE"), "{}", err.message);
    }

    #[test]
    fn an_accepted_requirement_must_be_the_offered_one() {
        let offer = offered();
        assert_eq!(offer.must_match(&offer), Ok(()));
        let field = |change: fn(&mut RequirementsV2)| {
            let mut accepted = offered();
            change(&mut accepted);
            let err = accepted.must_match(&offer).unwrap_err();
            assert_eq!(err.code, "payment_requirement_mismatch");
            err.message
        };
        assert!(field(|r| r.amount = "1".into()).contains("accepted.amount"));
        assert!(field(|r| r.pay_to = "0x2222222222222222222222222222222222222222".into()).contains("payTo"));
        assert!(field(|r| r.asset = "0x0".into()).contains("asset"));
        assert!(field(|r| r.max_timeout_seconds = 3600).contains("maxTimeoutSeconds"));
        assert!(
            field(|r| {
                r.extra.insert("name".into(), json!("Fake Coin"));
            })
            .contains("extra")
        );
    }

    #[test]
    fn headers_are_base64_of_compact_json() {
        let response = SettleResponse {
            success: true,
            error_reason: None,
            transaction: "0xabc".into(),
            network: "eip155:8453".into(),
            payer: "0xdef".into(),
            amount: None,
            extensions: None,
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encode_header(&response))
            .unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&decoded).unwrap(),
            json!({ "success": true, "transaction": "0xabc", "network": "eip155:8453", "payer": "0xdef" })
        );
    }
}
