//! Base payments: an EIP-3009 `transferWithAuthorization` signed by the payer, checked
//! here against exactly what was asked before the relayer pays gas to settle it.

use alloy::primitives::{Address, B256, U256};
use alloy::sol_types::Eip712Domain;
use serde_json::Value;

use super::PaymentError;
pub use crate::chains::base::Authorization;
use crate::chains::base::parse_address;
pub use crate::chains::smart_wallets::PayerSignature;
use crate::money::MicroUsdc;

/// An authorization must stay valid at least this long, to be settled in time.
pub const SETTLE_MARGIN_SECS: u64 = 6;

/// What the payment must be: chosen by the server for the request, never by the payer.
#[derive(Debug, Clone)]
pub struct Expected {
    pub pay_to: Address,
    pub amount: MicroUsdc,
    pub usdc: Address,
    pub chain_id: u64,
    /// The token's EIP-712 domain name and version (`USD Coin`, `2`).
    pub domain_name: String,
    pub domain_version: String,
}

impl Expected {
    /// The token's EIP-712 domain on this chain: what the payer signed for.
    pub fn domain(&self) -> Eip712Domain {
        Eip712Domain::new(
            Some(self.domain_name.clone().into()),
            Some(self.domain_version.clone().into()),
            Some(U256::from(self.chain_id)),
            Some(self.usdc),
            None,
        )
    }
}

fn field<'a>(auth: &'a Value, name: &str) -> Result<&'a str, PaymentError> {
    auth.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| PaymentError::new("invalid_payment", format!("payload.authorization.{name} is missing")))
}

fn uint(auth: &Value, name: &str) -> Result<U256, PaymentError> {
    let text = field(auth, name)?;
    text.parse::<U256>().map_err(|_| {
        PaymentError::new(
            "invalid_payment",
            format!("payload.authorization.{name} is not an integer"),
        )
    })
}

fn address(auth: &Value, name: &str) -> Result<Address, PaymentError> {
    parse_address(field(auth, name)?)
        .map_err(|e| PaymentError::new("invalid_payment", format!("payload.authorization.{name}: {e}")))
}

/// Reads `{signature, authorization: {from, to, value, validAfter, validBefore, nonce}}`.
pub fn decode(payload: &Value) -> Result<Authorization, PaymentError> {
    let auth = payload
        .get("authorization")
        .filter(|a| a.is_object())
        .ok_or_else(|| PaymentError::new("invalid_payment", "payload.authorization is missing"))?;
    let signature_hex = payload
        .get("signature")
        .and_then(Value::as_str)
        .ok_or_else(|| PaymentError::new("invalid_payment", "payload.signature is missing"))?;
    let signature_bytes = hex::decode(signature_hex.trim_start_matches("0x"))
        .map_err(|_| PaymentError::new("invalid_payment", "payload.signature is not hex"))?;
    let signature = PayerSignature::parse(&signature_bytes)
        .map_err(|e| PaymentError::new("invalid_signature", format!("payload.signature: {e}")))?;
    let nonce_hex = field(auth, "nonce")?;
    let nonce_bytes = hex::decode(nonce_hex.trim_start_matches("0x"))
        .ok()
        .filter(|b| b.len() == 32)
        .ok_or_else(|| PaymentError::new("invalid_payment", "payload.authorization.nonce must be 32 bytes of hex"))?;
    Ok(Authorization {
        from: address(auth, "from")?,
        to: address(auth, "to")?,
        value: uint(auth, "value")?,
        valid_after: uint(auth, "validAfter")?,
        valid_before: uint(auth, "validBefore")?,
        nonce: B256::from_slice(&nonce_bytes),
        signature,
    })
}

/// Who vouches for a payer's signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignedBy {
    /// It recovers to the payer: checked here.
    Key,
    /// The payer's wallet contract decides (ERC-1271, ERC-6492): asked on chain before
    /// anything is settled.
    Wallet,
}

/// Every rule that needs no chain: recipient, exact amount, time window, and the signature
/// when it is a key's. (Nonce reuse, the payer's balance and a wallet's own check of its
/// signature are asked of the store and chain.)
pub fn verify(auth: &Authorization, expected: &Expected, now_secs: u64) -> Result<SignedBy, PaymentError> {
    if auth.to != expected.pay_to {
        return Err(PaymentError::new(
            "payment_recipient_mismatch",
            format!(
                "the authorization pays {}, not the agent's wallet {}",
                auth.to, expected.pay_to
            ),
        ));
    }
    let price = U256::from(expected.amount.0);
    if auth.value != price {
        return Err(PaymentError::new(
            "payment_amount_mismatch",
            format!(
                "the authorization is for {} micro-USDC; this request costs exactly {}",
                auth.value, price
            ),
        ));
    }
    if auth.valid_after > U256::from(now_secs) {
        return Err(PaymentError::new(
            "payment_not_yet_valid",
            "the authorization's validAfter is in the future",
        ));
    }
    if auth.valid_before < U256::from(now_secs + SETTLE_MARGIN_SECS) {
        return Err(PaymentError::new(
            "payment_expired",
            format!("the authorization expires (validBefore) in under {SETTLE_MARGIN_SECS} seconds"),
        ));
    }
    let PayerSignature::Ecdsa { signature, .. } = &auth.signature else {
        return Ok(SignedBy::Wallet);
    };
    // One that recovers to someone else may still be the payer's if the payer is a wallet
    // contract whose owner signs the digest as it is.
    match signature.recover_address_from_prehash(&auth.signing_hash(&expected.domain())) {
        Ok(signer) if signer == auth.from => Ok(SignedBy::Key),
        _ => Ok(SignedBy::Wallet),
    }
}

#[cfg(test)]
mod tests {
    use alloy::signers::SignerSync;
    use alloy::signers::local::PrivateKeySigner;
    use serde_json::json;

    use super::*;

    const NOW: u64 = 1_800_000_000;

    fn expected(pay_to: Address) -> Expected {
        Expected {
            pay_to,
            amount: MicroUsdc(50_000),
            usdc: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913".parse().unwrap(),
            chain_id: 8453,
            domain_name: "USD Coin".into(),
            domain_version: "2".into(),
        }
    }

    /// A payload as x402 clients build it, signed by `payer` for `exp`.
    fn payload(payer: &PrivateKeySigner, exp: &Expected, edit: impl FnOnce(&mut Authorization)) -> Value {
        let mut auth = Authorization {
            from: payer.address(),
            to: exp.pay_to,
            value: U256::from(exp.amount.0),
            valid_after: U256::from(NOW - 600),
            valid_before: U256::from(NOW + 60),
            nonce: B256::repeat_byte(7),
            signature: PayerSignature::Ecdsa {
                signature: alloy::primitives::Signature::test_signature(),
                raw: Default::default(),
            },
        };
        edit(&mut auth);
        let signature = payer.sign_hash_sync(&auth.signing_hash(&exp.domain())).unwrap();
        json!({
            "signature": format!("0x{}", hex::encode(signature.as_bytes())),
            "authorization": {
                "from": auth.from.to_string(), "to": auth.to.to_string(), "value": auth.value.to_string(),
                "validAfter": auth.valid_after.to_string(), "validBefore": auth.valid_before.to_string(),
                "nonce": auth.nonce.to_string(),
            }
        })
    }

    fn check(payload: &Value, exp: &Expected) -> Result<SignedBy, &'static str> {
        decode(payload).and_then(|a| verify(&a, exp, NOW)).map_err(|e| e.code)
    }

    #[test]
    fn an_exact_signed_authorization_passes() {
        let payer = PrivateKeySigner::random();
        let exp = expected(PrivateKeySigner::random().address());
        assert_eq!(check(&payload(&payer, &exp, |_| {}), &exp), Ok(SignedBy::Key));
    }

    #[test]
    fn every_rule_has_its_code() {
        let payer = PrivateKeySigner::random();
        let exp = expected(PrivateKeySigner::random().address());
        let other = PrivateKeySigner::random().address();
        let cases: Vec<(&str, Value)> = vec![
            ("payment_recipient_mismatch", payload(&payer, &exp, |a| a.to = other)),
            (
                "payment_amount_mismatch",
                payload(&payer, &exp, |a| a.value = U256::from(49_999)),
            ),
            (
                "payment_amount_mismatch",
                payload(&payer, &exp, |a| a.value = U256::from(50_001)),
            ),
            (
                "payment_not_yet_valid",
                payload(&payer, &exp, |a| a.valid_after = U256::from(NOW + 1)),
            ),
            (
                "payment_expired",
                payload(&payer, &exp, |a| a.valid_before = U256::from(NOW + 5)),
            ),
        ];
        for (code, p) in cases {
            assert_eq!(check(&p, &exp), Err(code), "{p}");
        }
        // A signature that does not recover to the payer may still be its wallet's: the
        // payer's wallet contract decides, on chain (an account without code refuses).
        let wallets_to_decide: Vec<Value> = vec![
            // Signed by the payer but claiming another payer.
            payload(&payer, &exp, |a| a.from = other),
            // Signed for another chain, or another token: the digest differs.
            payload(
                &payer,
                &Expected {
                    chain_id: 84532,
                    ..exp.clone()
                },
                |_| {},
            ),
            payload(
                &payer,
                &Expected {
                    usdc: other,
                    ..exp.clone()
                },
                |_| {},
            ),
            // A field changed after signing.
            {
                let mut tampered = payload(&payer, &exp, |_| {});
                tampered["authorization"]["validBefore"] = json!((NOW + 3600).to_string());
                tampered
            },
            // A smart wallet's own form.
            {
                let mut long_sig = payload(&payer, &exp, |_| {});
                long_sig["signature"] = json!(format!("0x{}", "ab".repeat(100)));
                long_sig
            },
        ];
        for p in wallets_to_decide {
            assert_eq!(check(&p, &exp), Ok(SignedBy::Wallet), "{p}");
        }
        // Malformed payloads.
        let mut huge_sig = payload(&payer, &exp, |_| {});
        huge_sig["signature"] = json!(format!("0x{}", "ab".repeat(9000)));
        assert_eq!(check(&huge_sig, &exp), Err("invalid_signature"));
        assert_eq!(check(&json!({ "signature": "0x00" }), &exp), Err("invalid_payment"));
        let mut bad_nonce = payload(&payer, &exp, |_| {});
        bad_nonce["authorization"]["nonce"] = json!("0x1234");
        assert_eq!(check(&bad_nonce, &exp), Err("invalid_payment"));
    }
}
