//! The `X-PAYMENT` header (x402 version 1) as a payer sends it, arbitrary bytes: the
//! envelope, then the network's payload (a Solana wire transaction, or an EIP-3009
//! authorization). Version 2's header has its own target, `payment_signature`.
//! Invariants: never panics; every refusal carries one of the documented codes; a Solana
//! transaction that decodes re-serialises to exactly the bytes that were sent.

#![no_main]

use agent_host::money::MicroUsdc;
use agent_host::x402::wire::{self, NetworkNames, Version};
use agent_host::x402::{self, evm, svm};
use base64::Engine;
use libfuzzer_sys::fuzz_target;
use solana_pubkey::Pubkey;

const CODES: &[&str] = &[
    "invalid_payment",
    "unsupported_x402_version",
    "unsupported_scheme",
    "wrong_network",
    "payment_amount_mismatch",
    "payment_recipient_mismatch",
    "payment_expired",
    "payment_not_yet_valid",
    "invalid_signature",
    "wrong_asset",
];

fn documented(err: x402::PaymentError) {
    assert!(
        CODES.contains(&err.code),
        "undocumented code {} ({})",
        err.code,
        err.message
    );
}

fuzz_target!(|data: &[u8]| {
    let header = String::from_utf8_lossy(data);
    for (network, v2) in [
        ("solana", "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"),
        ("base", "eip155:8453"),
    ] {
        let names = NetworkNames { v1: network, v2 };
        let decoded = match wire::decode_payment(Version::V1, &header, names) {
            Ok(decoded) => decoded,
            Err(err) => {
                documented(err);
                continue;
            }
        };
        if network == "solana" {
            match svm::decode(&decoded.payload) {
                Ok(tx) => {
                    let sent = base64::engine::general_purpose::STANDARD
                        .decode(decoded.payload["transaction"].as_str().unwrap_or_default())
                        .expect("it decoded once");
                    assert_eq!(bincode::serialize(&tx).expect("serialises"), sent, "accepted as sent");
                    let expected = svm::Expected {
                        pay_to: Pubkey::new_from_array([1; 32]),
                        mint: Pubkey::new_from_array([2; 32]),
                        amount: MicroUsdc(10_000),
                        fee_payer: Some(Pubkey::new_from_array([1; 32])),
                        max_fee_lamports: 20_000,
                    };
                    if let Err(err) = svm::verify(tx, &expected) {
                        documented(err);
                    }
                }
                Err(err) => documented(err),
            }
        } else {
            match evm::decode(&decoded.payload) {
                Ok(auth) => {
                    let expected = evm::Expected {
                        pay_to: auth.to,
                        amount: MicroUsdc(10_000),
                        usdc: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913".parse().expect("address"),
                        chain_id: 8453,
                        domain_name: "USD Coin".into(),
                        domain_version: "2".into(),
                    };
                    if let Err(err) = evm::verify(&auth, &expected, 1_800_000_000) {
                        documented(err);
                    }
                }
                Err(err) => documented(err),
            }
        }
    }
});
