//! x402 `upto` on Base: a Permit2 witness transfer the payer signs for a maximum, checked
//! here against what the server asked before any work is done (the x402 specification's
//! `upto` EVM scheme, verification steps that need no chain).

use alloy::primitives::{Address, U256};
use serde_json::Value;

use super::PaymentError;
use crate::chains::base::{PermitAuthorization, UPTO_PROXY, parse_address};
use crate::chains::smart_wallets::PayerSignature;
use crate::money::MicroUsdc;

pub use super::evm::SignedBy;

/// The scheme's name on the wire.
pub const SCHEME: &str = "upto";

/// What the authorization must be: chosen by the server, never by the payer.
#[derive(Debug, Clone)]
pub struct Expected {
    pub pay_to: Address,
    /// The maximum offered: the authorization must be for exactly this.
    pub max: MicroUsdc,
    pub usdc: Address,
    pub chain_id: u64,
    /// Who settles it: the agent's wallet, or the facilitator's signer.
    pub facilitator: Address,
    /// The earliest deadline taken: the work runs, and is settled, before it.
    pub earliest_deadline: u64,
    /// The latest deadline taken (an authorization that outlives it is one a copy of it
    /// could be presented with long after).
    pub latest_deadline: u64,
}

struct Fields<'a> {
    object: &'a Value,
    path: &'static str,
}

impl Fields<'_> {
    fn text(&self, name: &str) -> Result<&str, PaymentError> {
        self.object
            .get(name)
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(format!("{}.{name} is missing", self.path)))
    }

    fn uint(&self, name: &str) -> Result<U256, PaymentError> {
        let text = self.text(name)?;
        let parsed = match text.strip_prefix("0x") {
            Some(hex) => U256::from_str_radix(hex, 16).ok(),
            None => text.parse::<U256>().ok(),
        };
        parsed.ok_or_else(|| invalid(format!("{}.{name} is not an integer", self.path)))
    }

    fn address(&self, name: &str) -> Result<Address, PaymentError> {
        parse_address(self.text(name)?).map_err(|e| invalid(format!("{}.{name}: {e}", self.path)))
    }

    fn object(&self, name: &str, path: &'static str) -> Result<Fields<'_>, PaymentError> {
        let object = self
            .object
            .get(name)
            .filter(|o| o.is_object())
            .ok_or_else(|| invalid(format!("{path} is missing")))?;
        Ok(Fields { object, path })
    }
}

fn invalid(message: String) -> PaymentError {
    PaymentError::new("invalid_payment", message)
}

/// Reads `{signature, permit2Authorization: {from, permitted: {token, amount}, spender,
/// nonce, deadline, witness: {to, facilitator, validAfter}}}`.
pub fn decode(payload: &Value) -> Result<PermitAuthorization, PaymentError> {
    let root = Fields {
        object: payload,
        path: "payload",
    };
    let auth = root.object("permit2Authorization", "payload.permit2Authorization")?;
    let permitted = auth.object("permitted", "payload.permit2Authorization.permitted")?;
    let witness = auth.object("witness", "payload.permit2Authorization.witness")?;
    let signature_hex = root.text("signature")?;
    let signature_bytes = hex::decode(signature_hex.trim_start_matches("0x"))
        .map_err(|_| invalid("payload.signature is not hex".into()))?;
    let signature = PayerSignature::parse(&signature_bytes)
        .map_err(|e| PaymentError::new("invalid_signature", format!("payload.signature: {e}")))?;
    Ok(PermitAuthorization {
        from: auth.address("from")?,
        token: permitted.address("token")?,
        max: permitted.uint("amount")?,
        spender: auth.address("spender")?,
        nonce: auth.uint("nonce")?,
        deadline: auth.uint("deadline")?,
        to: witness.address("to")?,
        facilitator: witness.address("facilitator")?,
        valid_after: witness.uint("validAfter")?,
        signature,
        approval: None,
    })
}

/// Every rule that needs no chain: token, maximum, spender, recipient, facilitator, time
/// window, and the signature when it is a key's. (The nonce, the payer's Permit2 approval
/// and balance, and a wallet's own check of its signature are asked of the store and chain.)
pub fn verify(auth: &PermitAuthorization, expected: &Expected, now_secs: u64) -> Result<SignedBy, PaymentError> {
    let mismatch = |code: &'static str, message: String| Err(PaymentError::new(code, message));
    if auth.token != expected.usdc {
        return mismatch(
            "invalid_payment",
            format!(
                "the authorization moves token {}, not USDC ({})",
                auth.token, expected.usdc
            ),
        );
    }
    if auth.spender != UPTO_PROXY {
        return mismatch(
            "invalid_payment",
            format!(
                "the authorization's spender is {}, not the x402 upto proxy {UPTO_PROXY}",
                auth.spender
            ),
        );
    }
    if auth.to != expected.pay_to {
        return mismatch(
            "payment_recipient_mismatch",
            format!(
                "the authorization pays {}, not the agent's wallet {}",
                auth.to, expected.pay_to
            ),
        );
    }
    if auth.facilitator != expected.facilitator {
        return mismatch(
            "invalid_payment",
            format!(
                "the authorization lets {} settle it; this server settles with {} (extra.facilitatorAddress)",
                auth.facilitator, expected.facilitator
            ),
        );
    }
    if auth.max != U256::from(expected.max.0) {
        return mismatch(
            "payment_amount_mismatch",
            format!(
                "the authorization is for at most {} micro-USDC; this request is offered at a maximum of exactly {}",
                auth.max, expected.max.0
            ),
        );
    }
    if auth.valid_after > U256::from(now_secs) {
        return mismatch(
            "payment_not_yet_valid",
            "the authorization's validAfter is in the future".into(),
        );
    }
    if auth.deadline < U256::from(expected.earliest_deadline) {
        return mismatch(
            "payment_expired",
            format!(
                "the authorization must last (deadline) at least {} seconds: the work runs before it is settled",
                expected.earliest_deadline.saturating_sub(now_secs)
            ),
        );
    }
    if auth.deadline > U256::from(expected.latest_deadline) {
        return mismatch(
            "invalid_payment",
            format!(
                "the authorization must expire (deadline) within {} seconds",
                expected.latest_deadline.saturating_sub(now_secs)
            ),
        );
    }
    let signature = match &auth.signature {
        PayerSignature::Ecdsa { signature, .. } => signature,
        PayerSignature::Contract(_) => return Ok(SignedBy::Wallet),
        // Permit2 checks a contract's signature only once it is deployed.
        PayerSignature::Counterfactual { .. } => {
            return mismatch(
                "invalid_payment",
                "the payer's wallet is not deployed yet (ERC-6492), and Permit2 checks only deployed wallets' \
                 signatures; deploy the wallet first"
                    .into(),
            );
        }
    };
    match signature.recover_address_from_prehash(&auth.signing_hash(expected.chain_id)) {
        Ok(signer) if signer == auth.from => Ok(SignedBy::Key),
        _ => Ok(SignedBy::Wallet),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::signers::SignerSync;
    use alloy::signers::local::PrivateKeySigner;
    use serde_json::json;

    const CHAIN_ID: u64 = 8453;

    fn expected(payer_now: u64) -> Expected {
        Expected {
            pay_to: Address::repeat_byte(0xa),
            max: MicroUsdc(50_000),
            usdc: Address::repeat_byte(0xc),
            chain_id: CHAIN_ID,
            facilitator: Address::repeat_byte(0xa),
            earliest_deadline: payer_now + 240,
            latest_deadline: payer_now + 600,
        }
    }

    /// A payload as `@x402/evm`'s upto client builds it, signed by `signer`.
    fn payload(signer: &PrivateKeySigner, now: u64, edit: impl FnOnce(&mut Value)) -> Value {
        let e = expected(now);
        let mut payload = json!({
            "signature": "0x",
            "permit2Authorization": {
                "from": signer.address().to_string(),
                "permitted": { "token": e.usdc.to_string(), "amount": "50000" },
                "spender": UPTO_PROXY.to_string(),
                "nonce": "0x1234",
                "deadline": (now + 300).to_string(),
                "witness": { "to": e.pay_to.to_string(), "facilitator": e.facilitator.to_string(),
                             "validAfter": (now - 600).to_string() }
            }
        });
        edit(&mut payload);
        let unsigned = decode(&json!({
            "signature": format!("0x{}", "11".repeat(65)),
            "permit2Authorization": payload["permit2Authorization"].clone()
        }))
        .unwrap();
        let signature = signer.sign_hash_sync(&unsigned.signing_hash(CHAIN_ID)).unwrap();
        payload["signature"] = json!(format!("0x{}", hex::encode(signature.as_bytes())));
        payload
    }

    #[test]
    fn a_payers_own_authorization_for_the_maximum_passes() {
        let signer = PrivateKeySigner::random();
        let now = 1_800_000_000;
        let auth = decode(&payload(&signer, now, |_| {})).unwrap();
        assert_eq!(auth.nonce, U256::from(0x1234));
        assert_eq!(verify(&auth, &expected(now), now), Ok(SignedBy::Key));
    }

    #[test]
    fn every_field_the_server_chose_is_held_to_it() {
        let signer = PrivateKeySigner::random();
        let now = 1_800_000_000;
        let cases: [(&str, Value, &str); 6] = [
            (
                "/permit2Authorization/permitted/amount",
                json!("49999"),
                "payment_amount_mismatch",
            ),
            (
                "/permit2Authorization/permitted/token",
                json!(Address::repeat_byte(1).to_string()),
                "invalid_payment",
            ),
            (
                "/permit2Authorization/spender",
                json!(Address::repeat_byte(2).to_string()),
                "invalid_payment",
            ),
            (
                "/permit2Authorization/witness/to",
                json!(Address::repeat_byte(3).to_string()),
                "payment_recipient_mismatch",
            ),
            (
                "/permit2Authorization/witness/facilitator",
                json!(Address::repeat_byte(4).to_string()),
                "invalid_payment",
            ),
            (
                "/permit2Authorization/deadline",
                json!((now + 239).to_string()),
                "payment_expired",
            ),
        ];
        for (path, value, code) in cases {
            let signed = payload(&signer, now, |p| *p.pointer_mut(path).unwrap() = value.clone());
            let auth = decode(&signed).unwrap();
            let refused = verify(&auth, &expected(now), now).unwrap_err();
            assert_eq!(refused.code, code, "{path}: {}", refused.message);
        }
        let late = payload(&signer, now, |p| {
            p["permit2Authorization"]["deadline"] = json!((now + 601).to_string())
        });
        assert!(
            verify(&decode(&late).unwrap(), &expected(now), now).is_err(),
            "outlives the offer"
        );
        let early = payload(&signer, now, |p| {
            p["permit2Authorization"]["witness"]["validAfter"] = json!((now + 5).to_string())
        });
        assert_eq!(
            verify(&decode(&early).unwrap(), &expected(now), now).unwrap_err().code,
            "payment_not_yet_valid"
        );
    }

    #[test]
    fn a_signature_over_other_terms_is_left_to_a_wallet_to_accept() {
        let signer = PrivateKeySigner::random();
        let now = 1_800_000_000;
        let mut signed = payload(&signer, now, |_| {});
        // Signed for one nonce, presented with another: it no longer recovers to the payer.
        signed["permit2Authorization"]["nonce"] = json!("0x1235");
        let auth = decode(&signed).unwrap();
        assert_eq!(verify(&auth, &expected(now), now), Ok(SignedBy::Wallet));
    }

    #[test]
    fn a_malformed_payload_says_which_field() {
        let refused = decode(&json!({ "signature": "0x00" })).unwrap_err();
        assert!(
            refused.message.contains("payload.permit2Authorization is missing"),
            "{}",
            refused.message
        );
        let refused = decode(&json!({ "signature": format!("0x{}", "11".repeat(65)),
                                      "permit2Authorization": { "from": "0x00" } }))
        .unwrap_err();
        assert!(
            refused.message.contains("permit2Authorization.permitted"),
            "{}",
            refused.message
        );
        let signer = PrivateKeySigner::random();
        let mut payload = payload(&signer, 1_800_000_000, |_| {});
        payload["signature"] = json!("0xzz");
        assert!(
            decode(&payload)
                .unwrap_err()
                .message
                .contains("payload.signature is not hex")
        );
    }
}
