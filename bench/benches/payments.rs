//! x402 payment verification without the chain round trip (target: under 1 ms, see BENCHMARKS.md):
//! decode the payment header, then every local rule and signature check, for a Base
//! EIP-3009 authorization and for a Solana transaction in the standard x402 form; each in
//! version 1 (`X-PAYMENT`) and version 2 (`PAYMENT-SIGNATURE`, whose `accepted`
//! requirement is also compared with the one offered). Beside them, what the x402
//! extensions add: a paid answer's signed receipt, and a sign-in's checks.

// Benchmarks: a failed unwrap stops the run with its reason.
#![allow(clippy::unwrap_used)]

use agent_host::money::MicroUsdc;
use agent_host::x402::wire::{self, NetworkNames, RequirementsV2, Version};
use agent_host::x402::{evm, svm};
use alloy::primitives::{B256, U256};
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use base64::Engine;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use solana_hash::Hash;
use solana_instruction::Instruction;
use solana_keypair::Keypair;
use solana_message::{VersionedMessage, v0};
use solana_pubkey::Pubkey;
use solana_signer::Signer;
use solana_transaction::versioned::VersionedTransaction;

const PRICE: u64 = 50_000;

const BASE: NetworkNames<'static> = NetworkNames {
    v1: "base",
    v2: "eip155:8453",
};
const SOLANA: NetworkNames<'static> = NetworkNames {
    v1: "solana",
    v2: "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
};

/// One payload in both envelopes: (`X-PAYMENT`, `PAYMENT-SIGNATURE`, the v2 requirement).
struct Headers {
    v1: String,
    v2: String,
    offered: RequirementsV2,
}

fn headers(
    network: NetworkNames<'_>,
    pay_to: String,
    asset: &str,
    extra: serde_json::Value,
    payload: serde_json::Value,
) -> Headers {
    let encode = |value: serde_json::Value| base64::engine::general_purpose::STANDARD.encode(value.to_string());
    let v1 = json!({ "x402Version": 1, "scheme": "exact", "network": network.v1, "payload": payload });
    let offered = RequirementsV2 {
        scheme: "exact".into(),
        network: network.v2.into(),
        amount: PRICE.to_string(),
        asset: asset.into(),
        pay_to,
        max_timeout_seconds: 60,
        extra: extra.as_object().cloned().unwrap(),
    };
    let v2 = json!({
        "x402Version": 2,
        "resource": { "url": "https://pay.example.com/x402/base/agent", "mimeType": "application/json" },
        "accepted": offered,
        "payload": payload,
    });
    Headers {
        v1: encode(v1),
        v2: encode(v2),
        offered,
    }
}

fn base_payment() -> (Headers, evm::Expected) {
    let payer = PrivateKeySigner::random();
    let expected = evm::Expected {
        pay_to: PrivateKeySigner::random().address(),
        amount: MicroUsdc(PRICE),
        usdc: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913".parse().unwrap(),
        chain_id: 8453,
        domain_name: "USD Coin".into(),
        domain_version: "2".into(),
    };
    let now = 1_800_000_000u64;
    let auth = evm::Authorization {
        from: payer.address(),
        to: expected.pay_to,
        value: U256::from(PRICE),
        valid_after: U256::from(now - 600),
        valid_before: U256::from(now + 60),
        nonce: B256::repeat_byte(9),
        signature: evm::PayerSignature::Ecdsa {
            signature: alloy::primitives::Signature::test_signature(),
            raw: Default::default(),
        },
    };
    let signature = payer.sign_hash_sync(&auth.signing_hash(&expected.domain())).unwrap();
    let payload = json!({
        "signature": format!("0x{}", hex::encode(signature.as_bytes())),
        "authorization": {
            "from": auth.from.to_string(), "to": auth.to.to_string(), "value": PRICE.to_string(),
            "validAfter": (now - 600).to_string(), "validBefore": (now + 60).to_string(),
            "nonce": auth.nonce.to_string(),
        }
    });
    let extra = json!({ "name": "USD Coin", "version": "2" });
    let asset = expected.usdc.to_string();
    (
        headers(BASE, expected.pay_to.to_string(), &asset, extra, payload),
        expected,
    )
}

fn solana_payment() -> (Headers, svm::Expected) {
    let payer = Keypair::new();
    let service = Keypair::new();
    let expected = svm::Expected {
        pay_to: Pubkey::new_unique(),
        mint: Pubkey::new_unique(),
        amount: MicroUsdc(PRICE),
        fee_payer: Some(service.pubkey()),
        max_fee_lamports: 20_000,
    };
    let ata = |owner: &Pubkey| agent_host::chains::solana::associated_token_address(owner, &expected.mint);
    let budget = Pubkey::from_str_const("ComputeBudget111111111111111111111111111111");
    let instructions = [
        Instruction::new_with_bytes(budget, &[2, 0x20, 0x4e, 0, 0], vec![]),
        Instruction::new_with_bytes(budget, &[3, 1, 0, 0, 0, 0, 0, 0, 0], vec![]),
        spl_token_interface::instruction::transfer_checked(
            &spl_token_interface::ID,
            &ata(&payer.pubkey()),
            &expected.mint,
            &ata(&expected.pay_to),
            &payer.pubkey(),
            &[],
            PRICE,
            6,
        )
        .unwrap(),
    ];
    let message =
        v0::Message::try_compile(&service.pubkey(), &instructions, &[], Hash::new_from_array([7; 32])).unwrap();
    let message = VersionedMessage::V0(message);
    let signature = payer.sign_message(&message.serialize());
    let tx = VersionedTransaction {
        signatures: vec![Default::default(), signature],
        message,
    };
    let encoded = base64::engine::general_purpose::STANDARD.encode(bincode::serialize(&tx).unwrap());
    let extra = json!({ "feePayer": service.pubkey().to_string() });
    let payload = json!({ "transaction": encoded });
    let asset = expected.mint.to_string();
    (
        headers(SOLANA, expected.pay_to.to_string(), &asset, extra, payload),
        expected,
    )
}

/// The envelope of `version`; v2's `accepted` must be the requirement offered.
fn decode(version: Version, headers: &Headers, network: NetworkNames<'_>) -> wire::Payment {
    let header = match version {
        Version::V1 => &headers.v1,
        Version::V2 => &headers.v2,
    };
    let payment = wire::decode_payment(version, header, network).unwrap();
    if let Some(accepted) = &payment.accepted {
        accepted.must_match(&headers.offered).unwrap();
    }
    payment
}

fn payments(c: &mut Criterion) {
    let (base, base_expected) = base_payment();
    let (solana, solana_expected) = solana_payment();
    for (version, name) in [(Version::V1, "v1"), (Version::V2, "v2")] {
        c.bench_function(&format!("verify base (EIP-3009) {name}"), |b| {
            b.iter(|| {
                let payment = decode(version, &base, BASE);
                let auth = evm::decode(&payment.payload).unwrap();
                evm::verify(&auth, &base_expected, 1_800_000_000).unwrap();
            })
        });
        c.bench_function(&format!("verify solana (x402 exact) {name}"), |b| {
            b.iter(|| {
                let payment = decode(version, &solana, SOLANA);
                let tx = svm::decode(&payment.payload).unwrap();
                svm::verify(tx, &solana_expected).unwrap();
            })
        });
    }
}

/// What a paid answer adds (its receipt, signed with the agent's key) and what a sign-in
/// costs before any store or chain call (the challenge's checks and the signature's).
fn receipts_and_sign_ins(c: &mut Criterion) {
    use agent_host::chains::WalletKey;
    use agent_host::domain::Network;
    use agent_host::x402::offer_receipt::{self, ReceiptFacts};
    use agent_host::x402::sign_in::{self, Chain, NonceKey, Place, SignIn};

    let facts = ReceiptFacts {
        network: BASE.v2,
        resource_url: "https://agents.example/x402/base/agent_1",
        payer: "0x857b06519E91e3A54538791bDbb0E22373e36b66",
        issued_at: 1_800_000_000,
        transaction: "0x81b517e56885e10d0115a6fae23c4b8ec1fcb0ab999d78c7ab9310e184978963",
    };
    for (network, name) in [(Network::Base, "base (EIP-712)"), (Network::Solana, "solana (JWS)")] {
        let key = WalletKey::generate(network);
        c.bench_function(&format!("sign receipt {name}"), |b| {
            b.iter(|| offer_receipt::sign(&key, &facts))
        });
    }

    let nonces = NonceKey::derive(&[7; 32]);
    let place = Place {
        domain: "agents.example",
        uri: "https://agents.example/x402/base/agent_1/commands/weather",
        resource: "https://agents.example/x402/base/agent_1/commands/weather",
    };
    let chains = [
        Chain {
            network: Network::Base,
            id: BASE.v2.into(),
        },
        Chain {
            network: Network::Solana,
            id: SOLANA.v2.into(),
        },
    ];
    let now = agent_host::clock::now_ms();
    let challenge = sign_in::challenge(&nonces, &place, &chains, now);
    let evm_payer = PrivateKeySigner::random();
    let solana_payer = Keypair::new();
    for (chain, name) in [
        (&chains[0], "base (SIWE, EIP-191)"),
        (&chains[1], "solana (SIWS, ed25519)"),
    ] {
        let mut answer = challenge["info"].clone();
        answer["chainId"] = json!(chain.id);
        answer["type"] = json!(if chain.network == Network::Base {
            "eip191"
        } else {
            "ed25519"
        });
        answer["address"] = json!(match chain.network {
            Network::Base => evm_payer.address().to_string(),
            Network::Solana => solana_payer.pubkey().to_string(),
        });
        answer["signature"] = json!("");
        let mut presented: SignIn = serde_json::from_value(answer).unwrap();
        let message = sign_in::message_to_sign(&presented, chain).unwrap();
        presented.signature = match chain.network {
            Network::Base => format!(
                "0x{}",
                hex::encode(evm_payer.sign_message_sync(message.as_bytes()).unwrap().as_bytes())
            ),
            Network::Solana => solana_payer.sign_message(message.as_bytes()).to_string(),
        };
        c.bench_function(&format!("check sign-in {name}"), |b| {
            b.iter(|| sign_in::check(&nonces, &presented, &place, &chains, now).unwrap())
        });
    }
}

criterion_group!(benches, payments, receipts_and_sign_ins);
criterion_main!(benches);
