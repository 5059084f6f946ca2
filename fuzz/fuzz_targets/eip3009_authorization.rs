//! The EIP-3009 authorization of a Base payment, from fuzzed fields: well-formed or not,
//! signed by the payer, by someone else, for another token, chain or amount, or not at all.
//! Invariants: never panics; a refusal has a documented code; an accepted authorization pays
//! the agent exactly the price, is valid now, and recovers to its `from`.

#![no_main]

use agent_host::money::MicroUsdc;
use agent_host::x402::evm::{self, Authorization, Expected};
use alloy::primitives::{Address, B256, U256};
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

const NOW: u64 = 1_800_000_000;
const PRICE: u64 = 50_000;

#[derive(Arbitrary, Debug)]
enum Field {
    Right,
    Number(u64),
    Text(String),
    Missing,
}

#[derive(Arbitrary, Debug)]
struct Plan {
    from: Field,
    to: Field,
    value: Field,
    valid_after: Field,
    valid_before: Field,
    nonce: Field,
    /// Who signs: 0 the payer, 1 someone else, 2 the payer for another chain, else garbage.
    signer: u8,
    signature: Option<String>,
}

fn field(f: &Field, right: Value) -> Option<Value> {
    match f {
        Field::Right => Some(right),
        Field::Number(n) => Some(json!(n.to_string())),
        Field::Text(t) => Some(json!(t)),
        Field::Missing => None,
    }
}

fuzz_target!(|plan: Plan| {
    let payer = PrivateKeySigner::from_bytes(&B256::repeat_byte(1)).expect("key");
    let pay_to: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8".parse().expect("address");
    let expected = Expected {
        pay_to,
        amount: MicroUsdc(PRICE),
        usdc: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913".parse().expect("address"),
        chain_id: 8453,
        domain_name: "USD Coin".into(),
        domain_version: "2".into(),
    };
    let mut auth = serde_json::Map::new();
    let rights = [
        ("from", &plan.from, json!(payer.address().to_string())),
        ("to", &plan.to, json!(pay_to.to_string())),
        ("value", &plan.value, json!(PRICE.to_string())),
        ("validAfter", &plan.valid_after, json!((NOW - 600).to_string())),
        ("validBefore", &plan.valid_before, json!((NOW + 60).to_string())),
        ("nonce", &plan.nonce, json!(B256::repeat_byte(7).to_string())),
    ];
    for (name, f, right) in rights {
        if let Some(value) = field(f, right) {
            auth.insert(name.into(), value);
        }
    }
    // Sign what the fields say, when they parse (else a test signature).
    let parsed = evm::decode(&json!({ "authorization": auth, "signature": format!("0x{}", "11".repeat(65)) }));
    let signature = match (&plan.signature, parsed) {
        (Some(text), _) => text.clone(),
        (None, Ok(signed)) => {
            let mut domain_for = expected.clone();
            let key = match plan.signer % 4 {
                0 => payer.clone(),
                1 => PrivateKeySigner::from_bytes(&B256::repeat_byte(2)).expect("key"),
                _ => {
                    domain_for.chain_id = 84532;
                    payer.clone()
                }
            };
            let signature = key
                .sign_hash_sync(&signed.signing_hash(&domain_for.domain()))
                .expect("sign");
            format!("0x{}", hex_of(&signature.as_bytes()))
        }
        (None, Err(_)) => "0x00".into(),
    };
    let payload = json!({ "authorization": auth, "signature": signature });
    let decoded: Authorization = match evm::decode(&payload) {
        Ok(decoded) => decoded,
        Err(err) => {
            assert!(["invalid_payment", "invalid_signature"].contains(&err.code), "{err:?}");
            return;
        }
    };
    match evm::verify(&decoded, &expected, NOW) {
        Ok(signed_by) => {
            assert_eq!(decoded.to, pay_to);
            assert_eq!(decoded.value, U256::from(PRICE));
            assert!(decoded.valid_after <= U256::from(NOW) && decoded.valid_before >= U256::from(NOW + 6));
            // A key's signature recovers to the payer; any other is the payer's wallet's to
            // accept, on chain.
            if signed_by == evm::SignedBy::Key {
                let evm::PayerSignature::Ecdsa { signature, .. } = &decoded.signature else {
                    panic!("a key's signature is 65 bytes");
                };
                let signer = signature
                    .recover_address_from_prehash(&decoded.signing_hash(&expected.domain()))
                    .expect("recovers");
                assert_eq!(signer, decoded.from);
            }
        }
        Err(err) => assert!(
            [
                "payment_recipient_mismatch",
                "payment_amount_mismatch",
                "payment_not_yet_valid",
                "payment_expired",
                "invalid_signature"
            ]
            .contains(&err.code),
            "{err:?}"
        ),
    }
});

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
