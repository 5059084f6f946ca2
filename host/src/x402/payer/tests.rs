//! The payments this host signs pass the checks this host makes of the payments it is
//! sent: the payer's side tested against the payee's.

use base64::Engine;
use serde_json::{Value, json};
use solana_signer::Signer;

use super::*;
use crate::x402::{evm, svm};

const USDC: &str = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
const PAY_TO: &str = "0x1111111111111111111111111111111111111111";

fn b64(value: &Value) -> String {
    base64::engine::general_purpose::STANDARD.encode(value.to_string())
}

fn decoded(header: &str) -> Value {
    serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(header).unwrap()).unwrap()
}

fn v1_body(accepts: Value) -> Vec<u8> {
    json!({ "x402Version": 1, "error": "X-PAYMENT header is required", "accepts": accepts })
        .to_string()
        .into_bytes()
}

fn base_requirement_v1(amount: &str) -> Value {
    json!({
        "scheme": "exact", "network": "base", "maxAmountRequired": amount,
        "resource": "http://127.0.0.1:1/x402/base/seller", "description": "", "mimeType": "application/json",
        "payTo": PAY_TO, "maxTimeoutSeconds": 60, "asset": USDC,
        "extra": { "name": "USD Coin", "version": "2" }
    })
}

#[test]
fn a_v1_body_and_a_v2_header_are_read_and_anything_else_is_not_a_402_to_pay() {
    let offers = offers_in(&[], &v1_body(json!([base_requirement_v1("10000")]))).unwrap();
    assert_eq!(offers.len(), 1);
    assert_eq!(
        (offers[0].version, offers[0].amount, offers[0].network.as_str()),
        (Version::V1, MicroUsdc(10_000), "base")
    );

    let v2 = json!({
        "x402Version": 2, "error": "payment required",
        "resource": { "url": "http://127.0.0.1:1/paid" },
        "accepts": [
            { "scheme": "exact", "network": "eip155:8453", "amount": "2500", "asset": USDC, "payTo": PAY_TO,
              "maxTimeoutSeconds": 30, "extra": { "name": "USD Coin", "version": "2" } },
            { "scheme": "exact", "network": "eip155:8453", "amount": "not a number", "asset": USDC, "payTo": PAY_TO },
            { "scheme": "exact", "network": "eip155:8453", "amount": "0", "asset": USDC, "payTo": PAY_TO },
            { "scheme": "exact", "network": "eip155:8453", "amount": "1e6", "asset": USDC, "payTo": PAY_TO }
        ]
    });
    let headers = vec![("Payment-Required".to_string(), b64(&v2))];
    let offers = offers_in(&headers, b"{}").unwrap();
    assert_eq!(offers.len(), 1, "offers of nothing, or unreadable, are left out");
    assert_eq!((offers[0].version, offers[0].amount), (Version::V2, MicroUsdc(2_500)));

    // A v2 payment echoes the offer whole, and the resource.
    let (name, value) = header(Version::V2, &offers[0].envelope(json!({ "k": 1 })));
    assert_eq!(name, "payment-signature");
    let sent = decoded(&value);
    assert_eq!(sent["accepted"], v2["accepts"][0]);
    assert_eq!(sent["resource"], v2["resource"]);
    assert_eq!(sent["payload"], json!({ "k": 1 }));

    assert!(offers_in(&[], b"payment required").is_none());
    assert!(offers_in(&[], br#"{"error":"pay up"}"#).is_none());
    assert!(offers_in(&[("payment-required".into(), "%%%".into())], b"").is_none());
}

#[test]
fn a_signed_authorization_passes_the_payees_checks_for_exactly_what_was_offered() {
    let key = PrivateKeySigner::random();
    let offer = offers_in(&[], &v1_body(json!([base_requirement_v1("10000")])))
        .unwrap()
        .remove(0);
    let token = EvmToken {
        chain_id: 8453,
        usdc: USDC.parse().unwrap(),
        name: "USD Coin".into(),
        version: "2".into(),
    };
    let now = 1_800_000_000;
    let payload = evm_payload(&key, &offer, &token, now).unwrap();
    let auth = evm::decode(&payload).unwrap();
    assert_eq!(auth.from, key.address());
    let expected = evm::Expected {
        pay_to: PAY_TO.parse().unwrap(),
        amount: MicroUsdc(10_000),
        usdc: token.usdc,
        chain_id: 8453,
        domain_name: "USD Coin".into(),
        domain_version: "2".into(),
    };
    assert_eq!(evm::verify(&auth, &expected, now).unwrap(), evm::SignedBy::Key);
    // Valid for the offer's 60 s, not longer; another amount or chain does not pass.
    assert!(evm::verify(&auth, &expected, now + 61).is_err());
    let more = evm::Expected {
        amount: MicroUsdc(10_001),
        ..expected.clone()
    };
    assert!(evm::verify(&auth, &more, now).is_err());
    // On another chain the key's signature is not the payer's (only a wallet contract's
    // could be, asked of the chain).
    let elsewhere = evm::Expected {
        chain_id: 84532,
        ..expected
    };
    assert_eq!(evm::verify(&auth, &elsewhere, now).unwrap(), evm::SignedBy::Wallet);

    // Two payments of the same offer never share a nonce.
    let again = evm::decode(&evm_payload(&key, &offer, &token, now).unwrap()).unwrap();
    assert_ne!(again.nonce, auth.nonce);
}

#[test]
fn a_long_timeout_is_cut_to_ten_minutes() {
    let key = PrivateKeySigner::random();
    let mut requirement = base_requirement_v1("1");
    requirement["maxTimeoutSeconds"] = json!(86_400);
    let offer = offers_in(&[], &v1_body(json!([requirement]))).unwrap().remove(0);
    let token = EvmToken {
        chain_id: 8453,
        usdc: USDC.parse().unwrap(),
        name: "USD Coin".into(),
        version: "2".into(),
    };
    let payload = evm_payload(&key, &offer, &token, 1_000_000).unwrap();
    assert_eq!(
        payload["authorization"]["validBefore"],
        json!((1_000_000 + MAX_VALID_SECS).to_string())
    );
}

#[test]
fn a_solana_payment_passes_the_payees_checks_with_the_fee_left_to_the_fee_payer() {
    let key = Keypair::new();
    let (pay_to, fee_payer, mint) = (Pubkey::new_unique(), Pubkey::new_unique(), Pubkey::new_unique());
    let requirement = json!({
        "scheme": "exact", "network": "solana", "maxAmountRequired": "7500",
        "resource": "http://127.0.0.1:1/x", "description": "", "mimeType": "",
        "payTo": pay_to.to_string(), "maxTimeoutSeconds": 60, "asset": mint.to_string(),
        "extra": { "feePayer": fee_payer.to_string() }
    });
    let offer = offers_in(&[], &v1_body(json!([requirement]))).unwrap().remove(0);
    let payload = svm_payload(&key, &offer, &mint, Hash::new_unique()).unwrap();
    let tx = svm::decode(&payload).unwrap();
    let expected = svm::Expected {
        pay_to,
        mint,
        amount: MicroUsdc(7_500),
        fee_payer: Some(fee_payer),
        max_fee_lamports: 100_000,
    };
    let verified = svm::verify(tx.clone(), &expected).unwrap();
    assert_eq!(verified.payer, key.pubkey());
    assert!(verified.needs_fee_payer_signature);
    let less = svm::Expected {
        amount: MicroUsdc(7_501),
        ..expected
    };
    assert!(svm::verify(tx, &less).is_err());

    // An offer that names no fee payer, or the payer itself as one, is not paid.
    let mut no_fee_payer = offer.clone();
    no_fee_payer.extra.clear();
    assert!(
        svm_payload(&key, &no_fee_payer, &mint, Hash::new_unique())
            .unwrap_err()
            .contains("fee payer")
    );
    let mut itself = offer;
    itself.extra.insert("feePayer".into(), json!(key.pubkey().to_string()));
    assert!(svm_payload(&key, &itself, &mint, Hash::new_unique()).is_err());
}

#[test]
fn the_settlement_and_the_refusal_are_read_from_either_version() {
    let settled = json!({ "success": true, "transaction": "0xabc", "network": "base", "payer": "0x1" });
    let v1 = vec![("X-PAYMENT-RESPONSE".to_string(), b64(&settled))];
    assert_eq!(
        settlement_in(&v1),
        Some(Settlement {
            success: true,
            transaction: Some("0xabc".into()),
            error: None
        })
    );
    let failed = json!({ "success": false, "transaction": "", "errorReason": "insufficient_funds", "network": "x", "payer": "" });
    let v2 = vec![("payment-response".to_string(), b64(&failed))];
    assert_eq!(
        settlement_in(&v2),
        Some(Settlement {
            success: false,
            transaction: None,
            error: Some("insufficient_funds".into())
        })
    );
    assert_eq!(settlement_in(&[("payment-response".into(), "???".into())]), None);
    assert_eq!(
        refusal_in(&[], &v1_body(json!([]))).as_deref(),
        Some("X-PAYMENT header is required")
    );
}
