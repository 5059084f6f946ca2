//! The `PAYMENT-SIGNATURE` header (x402 version 2) as a payer sends it, arbitrary bytes.
//! Invariants: never panics; every refusal carries one of the documented codes; what is
//! accepted survives a round trip (encoded again, it decodes to the same payment); and the
//! `accepted` requirement passes the offer check only when it is exactly the one offered,
//! so no partial match (a lower amount, another payTo, another asset) is ever taken.

#![no_main]

use agent_host::x402::wire::{self, NetworkNames, RequirementsV2, Version};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

const CODES: &[&str] = &[
    "invalid_payment",
    "unsupported_x402_version",
    "unsupported_scheme",
    "wrong_network",
    "payment_requirement_mismatch",
];

const BASE: NetworkNames<'static> = NetworkNames {
    v1: "base",
    v2: "eip155:8453",
};

/// What the server offers for the seed's request (`fuzz/seeds/payment_signature/base.txt`).
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
            .expect("an object"),
    }
}

fuzz_target!(|data: &[u8]| {
    let header = String::from_utf8_lossy(data);
    let payment = match wire::decode_payment(Version::V2, &header, BASE) {
        Ok(payment) => payment,
        Err(err) => {
            assert!(
                CODES.contains(&err.code),
                "undocumented code {} ({})",
                err.code,
                err.message
            );
            return;
        }
    };
    let accepted = payment.accepted.clone().expect("a v2 payment keeps what it accepted");
    assert_eq!(accepted.network, BASE.v2, "only this endpoint's network is accepted");
    assert_eq!(accepted.scheme, "exact");

    let again = wire::encode_header(&json!({
        "x402Version": 2,
        "accepted": accepted,
        "payload": payment.payload,
    }));
    let decoded = wire::decode_payment(Version::V2, &again, BASE).expect("what was accepted decodes again");
    assert_eq!(decoded, payment, "the round trip keeps the payment");

    let offer = offered();
    match accepted.must_match(&offer) {
        Ok(()) => assert_eq!(accepted, offer, "only the offered requirement passes"),
        Err(err) => {
            assert_eq!(err.code, "payment_requirement_mismatch");
            assert_ne!(accepted, offer);
        }
    }
});
