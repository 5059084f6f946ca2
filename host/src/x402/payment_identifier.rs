//! x402's `payment-identifier` extension: a payer names its payment with an id of its
//! own, so that a retry of the same request (after a connection dropped before the answer
//! came) is recognised as the same purchase and answered again, not charged again.
//!
//! The server declares it in the `extensions` of a version-2 payment requirement; the
//! client echoes the declaration with `info.id` added.

use serde_json::{Map, Value, json};

use super::PaymentError;

pub const NAME: &str = "payment-identifier";

/// What a 402 offers: an optional id, 16 to 128 letters, digits, `-` or `_`.
pub fn declaration() -> Value {
    json!({
        "info": { "required": false },
        "schema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "required": { "type": "boolean" },
                "id": { "type": "string", "minLength": 16, "maxLength": 128, "pattern": "^[a-zA-Z0-9_-]+$" },
            },
        },
    })
}

/// The id a payment's echoed extensions carry; `None` when it gives none. An id that is
/// not one (wrong type, length or characters) is refused rather than ignored: the payer
/// meant its retries to be recognised.
pub fn read(extensions: &Map<String, Value>) -> Result<Option<String>, PaymentError> {
    let Some(id) = extensions.get(NAME).map(|extension| &extension["info"]["id"]) else {
        return Ok(None);
    };
    match id {
        Value::Null => Ok(None),
        Value::String(id) if is_valid(id) => Ok(Some(id.clone())),
        _ => Err(PaymentError::new(
            "invalid_payment",
            "extensions.payment-identifier.info.id must be 16 to 128 letters, digits, '-' or '_'",
        )),
    }
}

fn is_valid(id: &str) -> bool {
    (16..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echoed(id: Value) -> Map<String, Value> {
        let mut extension = declaration();
        extension["info"]["id"] = id;
        Map::from_iter([(NAME.to_string(), extension)])
    }

    #[test]
    fn an_echoed_id_is_read_and_a_malformed_one_refused() {
        let id = "pay_7d5d747be160e280504c099d984bcfe0";
        assert_eq!(read(&echoed(json!(id))).unwrap().as_deref(), Some(id));
        // Echoed without an id, or not echoed at all: no id.
        assert_eq!(read(&echoed(Value::Null)).unwrap(), None);
        assert_eq!(read(&Map::new()).unwrap(), None);
        for bad in [
            json!("short"),
            json!("x".repeat(129)),
            json!("pay_with spaces_0123456"),
            json!(42),
        ] {
            let refused = read(&echoed(bad.clone())).unwrap_err();
            assert_eq!(refused.code, "invalid_payment", "{bad}");
        }
    }
}
