//! x402 payment verification without the chain round trip (DESIGN §5: under 1 ms):
//! decode the `X-PAYMENT` header, then every local rule and signature check, for a Base
//! EIP-3009 authorization and for a Solana transaction in the standard x402 form.

// Benchmarks: a failed unwrap stops the run with its reason.
#![allow(clippy::unwrap_used)]

use agent_host::money::MicroUsdc;
use agent_host::x402::{decode_header, evm, svm};
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

fn header(network: &str, payload: serde_json::Value) -> String {
    let envelope = json!({ "x402Version": 1, "scheme": "exact", "network": network, "payload": payload });
    base64::engine::general_purpose::STANDARD.encode(envelope.to_string())
}

fn base_payment() -> (String, evm::Expected) {
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
        signature: alloy::primitives::Signature::test_signature(),
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
    (header("base", payload), expected)
}

fn solana_payment() -> (String, svm::Expected) {
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
    (header("solana", json!({ "transaction": encoded })), expected)
}

fn payments(c: &mut Criterion) {
    let (base_header, base_expected) = base_payment();
    c.bench_function("verify base (EIP-3009)", |b| {
        b.iter(|| {
            let decoded = decode_header(&base_header, "base").unwrap();
            let auth = evm::decode(&decoded.payload).unwrap();
            evm::verify(&auth, &base_expected, 1_800_000_000).unwrap();
        })
    });
    let (solana_header, solana_expected) = solana_payment();
    c.bench_function("verify solana (x402 exact)", |b| {
        b.iter(|| {
            let decoded = decode_header(&solana_header, "solana").unwrap();
            let tx = svm::decode(&decoded.payload).unwrap();
            svm::verify(tx, &solana_expected).unwrap();
        })
    });
}

criterion_group!(benches, payments);
criterion_main!(benches);
