//! x402's `eip2612GasSponsoring` extension, for `upto` on Base: a payer that has not yet
//! approved Permit2 signs USDC's EIP-2612 permit for it instead, and whoever settles submits
//! that permit in the settlement's own transaction (the proxy's `settleWithPermit`), paying
//! its gas. The payer needs no ETH and no transaction of its own.
//!
//! The server declares it among a 402's `extensions`; the client answers with its signed
//! permit as the extension's `info` (not an echo of the declaration).

use alloy::primitives::{Address, B256, U256};
use serde_json::{Map, Value, json};

use super::PaymentError;
use crate::chains::base::{Eip2612Approval, PERMIT2, parse_address};

pub const NAME: &str = "eip2612GasSponsoring";

/// What a 402 offers: the permit's fields, as the extension's schema names them.
pub fn declaration() -> Value {
    let address = json!({ "type": "string", "pattern": "^0x[a-fA-F0-9]{40}$" });
    let number = json!({ "type": "string", "pattern": "^[0-9]+$" });
    json!({
        "info": {
            "description": "A payer that has not approved Permit2 may sign USDC's EIP-2612 permit for it instead; the settlement submits it and pays its gas.",
            "version": "1",
        },
        "schema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "from": address, "asset": address, "spender": address,
                "amount": number, "nonce": number, "deadline": number,
                "signature": { "type": "string", "pattern": "^0x[a-fA-F0-9]+$" },
                "version": { "type": "string", "pattern": "^[0-9]+(\\.[0-9]+)*$" },
            },
            "required": ["from", "asset", "spender", "amount", "nonce", "deadline", "signature", "version"],
        },
    })
}

/// What a payment's permit must be for: its payer, the token, the authorization's maximum
/// (the proxy refuses any other value) and a deadline no sooner than the authorization's.
pub struct Expected {
    pub from: Address,
    pub usdc: Address,
    pub max: U256,
    pub deadline: U256,
}

/// The permit a payment carries, checked against what it must be for; `None` when it
/// carries none. Its signature and nonce are the token's to judge: the settlement is
/// simulated before any work, and a permit that would not pass makes it fail there.
pub fn read(extensions: &Map<String, Value>, expected: &Expected) -> Result<Option<Eip2612Approval>, PaymentError> {
    let Some(info) = extensions.get(NAME).map(|extension| &extension["info"]) else {
        return Ok(None);
    };
    // A client that signs no permit (its payer approved Permit2) echoes the declaration.
    if info.get("signature").is_none() && info.get("from").is_none() {
        return Ok(None);
    }
    let bad = |why: &str| PaymentError::new("invalid_payment", format!("extensions.{NAME}.info: {why}"));
    let text = |field: &str| info[field].as_str().ok_or_else(|| bad(&format!("{field} is missing")));
    let address = |field: &str| parse_address(text(field)?).map_err(|_| bad(&format!("{field} is not an address")));
    let number = |field: &str| {
        U256::from_str_radix(text(field)?, 10).map_err(|_| bad(&format!("{field} is not a whole number")))
    };
    if address("from")? != expected.from {
        return Err(bad("from is not the payer"));
    }
    if address("asset")? != expected.usdc {
        return Err(bad("asset is not USDC"));
    }
    if address("spender")? != PERMIT2 {
        return Err(bad("spender is not Permit2"));
    }
    let value = number("amount")?;
    if value != expected.max {
        return Err(bad("amount must be the authorization's maximum"));
    }
    let deadline = number("deadline")?;
    if deadline < expected.deadline {
        return Err(bad("deadline comes before the authorization's"));
    }
    let signature = alloy::primitives::hex::decode(text("signature")?).map_err(|_| bad("signature is not hex"))?;
    if signature.len() != 65 {
        return Err(bad("signature is not 65 bytes"));
    }
    let v = match signature[64] {
        v @ (27 | 28) => v,
        v @ (0 | 1) => v + 27,
        _ => return Err(bad("signature's v is not 27 or 28")),
    };
    Ok(Some(Eip2612Approval {
        value,
        deadline,
        v,
        r: B256::from_slice(&signature[..32]),
        s: B256::from_slice(&signature[32..64]),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const USDC: Address = alloy::primitives::address!("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913");
    const PAYER: Address = alloy::primitives::address!("0x1111111111111111111111111111111111111111");

    fn expected() -> Expected {
        Expected {
            from: PAYER,
            usdc: USDC,
            max: U256::from(50_000),
            deadline: U256::from(1_000),
        }
    }

    fn carrying(changes: Value) -> Map<String, Value> {
        let mut info = json!({
            "from": PAYER.to_string(), "asset": USDC.to_string(), "spender": PERMIT2.to_string(),
            "amount": "50000", "nonce": "0", "deadline": "1000",
            "signature": format!("0x{}{}1b", "aa".repeat(32), "bb".repeat(32)), "version": "1",
        });
        for (key, value) in changes.as_object().unwrap() {
            info[key] = value.clone();
        }
        Map::from_iter([(NAME.to_string(), json!({ "info": info }))])
    }

    #[test]
    fn a_permit_for_the_payments_terms_is_read() {
        let approval = read(&carrying(json!({})), &expected()).unwrap().unwrap();
        assert_eq!(approval.value, U256::from(50_000));
        assert_eq!(
            (approval.v, approval.r, approval.s),
            (27, B256::repeat_byte(0xaa), B256::repeat_byte(0xbb))
        );
        assert_eq!(read(&Map::new(), &expected()).unwrap(), None);
        // The declaration echoed back carries no permit.
        let echoed = Map::from_iter([(NAME.to_string(), declaration())]);
        assert_eq!(read(&echoed, &expected()).unwrap(), None);
    }

    #[test]
    fn a_permit_for_anything_else_is_refused() {
        let refused = [
            (json!({ "from": USDC.to_string() }), "from is not the payer"),
            (json!({ "asset": PAYER.to_string() }), "asset is not USDC"),
            (json!({ "spender": PAYER.to_string() }), "spender is not Permit2"),
            (json!({ "amount": "49999" }), "the authorization's maximum"),
            (json!({ "deadline": "999" }), "deadline comes before"),
            (json!({ "signature": "0x1234" }), "65 bytes"),
            (json!({ "amount": 50000 }), "amount is missing"),
        ];
        for (change, why) in refused {
            let err = read(&carrying(change.clone()), &expected()).unwrap_err();
            assert!(err.to_string().contains(why), "{change}: {err}");
        }
    }
}
