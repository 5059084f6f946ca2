//! Signed receipts: x402's `offer-receipt` extension, receipt side. A payer who was served
//! gets, beside the settlement, a statement signed by the agent's own wallet key (the key
//! behind `payTo`, so a verifier needs nothing but the receipt and the address it paid):
//! EIP-712 typed data on Base, a JWS (EdDSA, the key named by a `did:key`) on Solana.
//! Pure code: the caller opens the key.

use alloy::primitives::U256;
use alloy::signers::SignerSync;
use alloy::sol_types::{Eip712Domain, SolStruct};
use base64::Engine;
use serde_json::{Value, json};
use solana_signer::Signer;

use crate::chains::WalletKey;

/// The extension's key in `extensions`.
pub const OFFER_RECEIPT: &str = "offer-receipt";

/// The receipt payload's version (the extension's, not x402's).
const RECEIPT_VERSION: u64 = 1;

alloy::sol! {
    /// The extension's canonical EIP-712 type for receipts.
    struct Receipt {
        uint256 version;
        string network;
        string resourceUrl;
        string payer;
        uint256 issuedAt;
        string transaction;
    }
}

/// What a receipt states: who paid for which resource, on which chain, when, and the
/// settlement's transaction (included so that the amount can be checked on chain: the
/// settlement header names the transaction anyway).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptFacts<'a> {
    /// CAIP-2, whichever x402 version was paid with.
    pub network: &'a str,
    pub resource_url: &'a str,
    pub payer: &'a str,
    /// Unix seconds.
    pub issued_at: u64,
    pub transaction: &'a str,
}

/// The receipt signed with `key`: `{format: "eip712", payload, signature}` with a Base key,
/// `{format: "jws", signature}` with a Solana one.
pub fn sign(key: &WalletKey, facts: &ReceiptFacts) -> Value {
    match key {
        WalletKey::Base(signer) => {
            let digest = typed_receipt(facts).eip712_signing_hash(&receipt_domain());
            // A local key signing a 32-byte digest cannot fail.
            let signature = signer.sign_hash_sync(&digest).expect("a local key signs");
            json!({
                "format": "eip712",
                "payload": payload(facts, true),
                "signature": format!("0x{}", hex::encode(signature.as_bytes())),
            })
        }
        WalletKey::Solana(keypair) => {
            let key_id = did_key(&keypair.pubkey().to_bytes());
            // `alg` then `kid`, as the extension's own signer writes its header.
            let header = json!({"alg": "EdDSA", "kid": format!("{key_id}#{}", &key_id["did:key:".len()..])});
            let signing_input = format!("{}.{}", b64url(&header), b64url(&payload(facts, false)));
            let signature = keypair.sign_message(signing_input.as_bytes());
            json!({
                "format": "jws",
                "signature": format!("{signing_input}.{}", base64url(signature.as_ref())),
            })
        }
    }
}

/// `extensions["offer-receipt"]` of a settlement: the receipt and its schema.
pub fn extension(receipt: Value) -> Value {
    let eip712 = receipt["format"] == "eip712";
    let mut properties = json!({
        "format": {"type": "string", "const": if eip712 { "eip712" } else { "jws" }},
        "signature": {"type": "string"},
    });
    let mut required = vec!["format", "signature"];
    if eip712 {
        properties["payload"] = json!({
            "type": "object",
            "properties": {
                "version": {"type": "integer"},
                "network": {"type": "string"},
                "resourceUrl": {"type": "string"},
                "payer": {"type": "string"},
                "issuedAt": {"type": "integer"},
                "transaction": {"type": "string"},
            },
            "required": ["version", "network", "resourceUrl", "payer", "issuedAt"],
        });
        required.insert(1, "payload");
    }
    json!({
        "info": {"receipt": receipt},
        "schema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"receipt": {"type": "object", "properties": properties, "required": required}},
            "required": ["receipt"],
        },
    })
}

/// `name: "x402 receipt", version: "1", chainId: 1`: fixed by the extension whatever the
/// chain paid on (it is an off-chain signing format).
fn receipt_domain() -> Eip712Domain {
    Eip712Domain::new(
        Some("x402 receipt".into()),
        Some("1".into()),
        Some(U256::from(1)),
        None,
        None,
    )
}

fn typed_receipt(facts: &ReceiptFacts) -> Receipt {
    Receipt {
        version: U256::from(RECEIPT_VERSION),
        network: facts.network.to_string(),
        resourceUrl: facts.resource_url.to_string(),
        payer: facts.payer.to_string(),
        issuedAt: U256::from(facts.issued_at),
        transaction: facts.transaction.to_string(),
    }
}

/// The payload as JSON. Its keys serialize sorted, with no spaces, which is the canonical
/// form (JCS) the extension asks of a JWS payload for these plain fields. EIP-712 has every
/// field (an absent transaction is `""`); the JWS form leaves an empty one out.
fn payload(facts: &ReceiptFacts, every_field: bool) -> Value {
    let mut payload = json!({
        "version": RECEIPT_VERSION,
        "network": facts.network,
        "resourceUrl": facts.resource_url,
        "payer": facts.payer,
        "issuedAt": facts.issued_at,
    });
    if every_field || !facts.transaction.is_empty() {
        payload["transaction"] = json!(facts.transaction);
    }
    payload
}

/// `did:key` of an ed25519 public key: multibase base58btc of the multicodec `0xed 0x01`
/// and the key, which resolves to the key with no lookup.
pub fn did_key(public_key: &[u8; 32]) -> String {
    let mut bytes = Vec::with_capacity(34);
    bytes.extend_from_slice(&[0xed, 0x01]);
    bytes.extend_from_slice(public_key);
    format!("did:key:z{}", bs58::encode(bytes).into_string())
}

fn b64url(value: &Value) -> String {
    base64url(value.to_string().as_bytes())
}

fn base64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use alloy::primitives::Signature;
    use solana_keypair::Keypair;

    use super::*;
    use crate::domain::Network;

    fn facts() -> ReceiptFacts<'static> {
        ReceiptFacts {
            network: "eip155:8453",
            resource_url: "https://agents.example/x402/base/agent_1",
            payer: "0x857b06519E91e3A54538791bDbb0E22373e36b66",
            issued_at: 1_703_123_456,
            transaction: "0xabc",
        }
    }

    #[test]
    fn an_eip712_receipt_recovers_to_the_agents_address() {
        let key = WalletKey::generate(Network::Base);
        let receipt = sign(&key, &facts());
        assert_eq!(receipt["payload"]["resourceUrl"], facts().resource_url);
        let bytes = hex::decode(receipt["signature"].as_str().unwrap().trim_start_matches("0x")).unwrap();
        let signature = Signature::try_from(bytes.as_slice()).unwrap();
        let digest = typed_receipt(&facts()).eip712_signing_hash(&receipt_domain());
        let signer = signature.recover_address_from_prehash(&digest).unwrap();
        assert_eq!(signer.to_string(), key.address());
        // Another payer in the payload no longer recovers to the agent.
        let forged = ReceiptFacts {
            payer: "0x0000000000000000000000000000000000000001",
            ..facts()
        };
        let digest = typed_receipt(&forged).eip712_signing_hash(&receipt_domain());
        assert_ne!(
            signature.recover_address_from_prehash(&digest).unwrap().to_string(),
            key.address()
        );
    }

    #[test]
    fn a_jws_receipt_names_the_agents_key_and_verifies_with_it() {
        let keypair = Keypair::new();
        let address = keypair.pubkey();
        let receipt = sign(&WalletKey::Solana(keypair), &facts());
        let jws = receipt["signature"].as_str().unwrap();
        let parts: Vec<&str> = jws.split('.').collect();
        assert_eq!(parts.len(), 3);
        let decode = |part: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).unwrap();
        let header: Value = serde_json::from_slice(&decode(parts[0])).unwrap();
        assert_eq!(header["alg"], "EdDSA");
        let kid = header["kid"].as_str().unwrap();
        assert!(kid.starts_with(&did_key(&address.to_bytes())), "{kid}");
        let payload = String::from_utf8(decode(parts[1])).unwrap();
        assert_eq!(
            payload,
            r#"{"issuedAt":1703123456,"network":"eip155:8453","payer":"0x857b06519E91e3A54538791bDbb0E22373e36b66","resourceUrl":"https://agents.example/x402/base/agent_1","transaction":"0xabc","version":1}"#,
            "canonical: sorted keys, no spaces"
        );
        let signature = solana_signature::Signature::try_from(decode(parts[2]).as_slice()).unwrap();
        assert!(signature.verify(address.as_ref(), format!("{}.{}", parts[0], parts[1]).as_bytes()));
    }

    #[test]
    fn did_key_of_an_ed25519_key_starts_as_every_one_does() {
        // Every ed25519 did:key starts `z6Mk` (the multicodec prefix in base58btc).
        assert!(did_key(&[7u8; 32]).starts_with("did:key:z6Mk"));
    }
}
