//! The local rules of a Solana payment, each with its code, on crafted transactions.
use solana_hash::Hash;
use solana_instruction::Instruction;
use solana_keypair::Keypair;
use solana_message::{VersionedMessage, v0};
use solana_signer::Signer;

use super::*;
use crate::chains::solana::associated_token_address;

const PRICE: u64 = 50_000;

struct Setup {
    payer: Keypair,
    service: Keypair,
    expected: Expected,
}

fn setup() -> Setup {
    let service = Keypair::new();
    Setup {
        payer: Keypair::new(),
        expected: Expected {
            pay_to: Pubkey::new_unique(),
            mint: Pubkey::new_unique(),
            amount: MicroUsdc(PRICE),
            fee_payer: Some(service.pubkey()),
            max_fee_lamports: 20_000,
        },
        service,
    }
}

fn limit(units: u32) -> Instruction {
    let mut data = vec![2];
    data.extend_from_slice(&units.to_le_bytes());
    Instruction::new_with_bytes(COMPUTE_BUDGET, &data, vec![])
}

fn price(micro_lamports: u64) -> Instruction {
    let mut data = vec![3];
    data.extend_from_slice(&micro_lamports.to_le_bytes());
    Instruction::new_with_bytes(COMPUTE_BUDGET, &data, vec![])
}

fn transfer(s: &Setup, mint: &Pubkey, to_owner: &Pubkey, amount: u64, authority: &Pubkey) -> Instruction {
    spl_token_interface::instruction::transfer_checked(
        &spl_token_interface::ID,
        &associated_token_address(authority, mint),
        mint,
        &associated_token_address(to_owner, &s.expected.mint),
        authority,
        &[],
        amount,
        6,
    )
    .unwrap()
}

/// The x402 client's form: fee payer = the service (left unsigned), payer signs.
fn build(fee_payer: &Pubkey, signers: &[&Keypair], instructions: &[Instruction]) -> VersionedTransaction {
    let message = v0::Message::try_compile(fee_payer, instructions, &[], Hash::new_from_array([7; 32])).unwrap();
    let message = VersionedMessage::V0(message);
    let bytes = message.serialize();
    let required = message.header().num_required_signatures as usize;
    let signatures = message.static_account_keys()[..required]
        .iter()
        .map(|key| {
            signers
                .iter()
                .find(|k| k.pubkey() == *key)
                .map(|k| k.sign_message(&bytes))
                .unwrap_or_default()
        })
        .collect();
    VersionedTransaction { signatures, message }
}

fn standard(s: &Setup) -> Vec<Instruction> {
    let payer = s.payer.pubkey();
    vec![
        limit(20_000),
        price(1),
        transfer(s, &s.expected.mint, &s.expected.pay_to, PRICE, &payer),
    ]
}

fn check(tx: VersionedTransaction, s: &Setup) -> Result<bool, &'static str> {
    verify(tx, &s.expected)
        .map(|v| v.needs_fee_payer_signature)
        .map_err(|e| e.code)
}

#[test]
fn both_accepted_forms_pass() {
    let s = setup();
    // Standard x402: the service pays the fee and co-signs.
    let tx = build(&s.service.pubkey(), &[&s.payer], &standard(&s));
    let payload = serde_json::json!({ "transaction": base64::engine::general_purpose::STANDARD.encode(bincode::serialize(&tx).unwrap()) });
    let decoded = decode(&payload).unwrap();
    assert_eq!(check(decoded, &s), Ok(true));
    // With a memo, as @x402/svm adds.
    let mut with_memo = standard(&s);
    with_memo.push(Instruction::new_with_bytes(MEMO, b"a1b2", vec![]));
    assert_eq!(check(build(&s.service.pubkey(), &[&s.payer], &with_memo), &s), Ok(true));
    // The x402 specification's form: the payer pays the fee and signs everything.
    assert_eq!(
        check(build(&s.payer.pubkey(), &[&s.payer], &standard(&s)), &s),
        Ok(false)
    );
}

/// A Lighthouse assertion on `account`, as wallets add them (its data is Lighthouse's own
/// and not read here).
fn guard(account: &Pubkey) -> Instruction {
    Instruction::new_with_bytes(
        LIGHTHOUSE,
        &[9, 0, 1],
        vec![solana_instruction::AccountMeta::new_readonly(*account, false)],
    )
}

#[test]
fn wallet_guards_pass_before_and_after_the_transfer() {
    let s = setup();
    let payer = s.payer.pubkey();
    // As Phantom signs: a snapshot before the transfer, assertions after it, beside a memo.
    let mut guarded = standard(&s);
    guarded.insert(2, guard(&payer));
    guarded.push(Instruction::new_with_bytes(MEMO, b"a1b2", vec![]));
    guarded.push(guard(&payer));
    guarded.push(guard(&s.expected.pay_to));
    let tx = build(&s.service.pubkey(), &[&s.payer], &guarded);
    assert_eq!(tx.message.instructions().len(), 7);
    assert_eq!(check(tx, &s), Ok(true));
    // The fee cap still holds with guards: they change nothing the fee payer pays.
    guarded[1] = price(5_000_000);
    assert_eq!(
        check(build(&s.service.pubkey(), &[&s.payer], &guarded), &s),
        Err("invalid_payment")
    );
}

#[test]
fn only_the_exact_wire_bytes_of_one_transaction_decode() {
    let s = setup();
    let tx = build(&s.service.pubkey(), &[&s.payer], &standard(&s));
    let mut bytes = bincode::serialize(&tx).unwrap();
    let encode = |b: &[u8]| serde_json::json!({ "transaction": base64::engine::general_purpose::STANDARD.encode(b) });
    assert!(decode(&encode(&bytes)).is_ok());
    bytes.push(0);
    assert_eq!(
        decode(&encode(&bytes)).unwrap_err().code,
        "invalid_payment",
        "a trailing byte"
    );
    // The first compact length (the signature count, 2) spelled in two bytes.
    let mut padded = vec![0x82, 0x00];
    padded.extend_from_slice(&bytes[1..bytes.len() - 1]);
    assert!(decode(&encode(&padded)).is_err(), "a non-minimal length");
}

#[test]
fn the_fee_counts_signatures_and_the_requested_priority() {
    assert_eq!(
        fee_lamports(2, Some(20_000), Some(1)),
        10_001,
        "@x402/svm's stock payment"
    );
    assert_eq!(
        fee_lamports(2, Some(1_400_000), Some(5_000_000)),
        7_010_000,
        "the issue's abuse"
    );
    assert_eq!(fee_lamports(1, None, None), 5_000);
    assert_eq!(fee_lamports(2, None, Some(1)), 10_002, "no limit: 1.4M units");
    assert_eq!(fee_lamports(2, Some(u32::MAX), Some(u64::MAX)), u64::MAX, "saturates");
}

#[test]
fn the_payer_may_spend_its_own_fee_freely() {
    let s = setup();
    let mut expensive = standard(&s);
    expensive[1] = price(5_000_000);
    let tx = build(&s.payer.pubkey(), &[&s.payer], &expensive);
    assert_eq!(
        check(tx, &s),
        Ok(false),
        "the x402 specification's form: the payer pays its own fee"
    );
}

#[test]
fn every_rule_has_its_code() {
    let s = setup();
    let payer = s.payer.pubkey();
    let service = s.service.pubkey();
    let with = |edit: &dyn Fn(&mut Vec<Instruction>)| {
        let mut ixs = standard(&s);
        edit(&mut ixs);
        build(&service, &[&s.payer], &ixs)
    };
    let other_mint = Pubkey::new_unique();
    let cases: Vec<(&str, VersionedTransaction)> = vec![
        (
            "wrong_asset",
            with(&|ixs| ixs[2] = transfer(&s, &other_mint, &s.expected.pay_to, PRICE, &payer)),
        ),
        (
            "payment_recipient_mismatch",
            with(&|ixs| ixs[2] = transfer(&s, &s.expected.mint, &Pubkey::new_unique(), PRICE, &payer)),
        ),
        (
            "payment_amount_mismatch",
            with(&|ixs| ixs[2] = transfer(&s, &s.expected.mint, &s.expected.pay_to, PRICE - 1, &payer)),
        ),
        (
            "payment_amount_mismatch",
            with(&|ixs| ixs[2] = transfer(&s, &s.expected.mint, &s.expected.pay_to, PRICE + 1, &payer)),
        ),
        // The stock clients' fee is 10,001 lamports; these make the fee payer pay more.
        ("invalid_payment", with(&|ixs| ixs[1] = price(5_000_000))),
        (
            "invalid_payment",
            with(&|ixs| {
                ixs[0] = limit(1_400_000);
                ixs[1] = price(5_000_000)
            }),
        ),
        ("invalid_payment", with(&|ixs| ixs[1] = price(1_000_000_000))),
        // No limit: the runtime's maximum counts.
        ("invalid_payment", with(&|ixs| ixs[0] = price(20))),
        ("invalid_payment", with(&|ixs| ixs.insert(0, limit(20_000)))),
        // Guards: more than three, or one that names the service's fee payer.
        (
            "invalid_payment",
            with(&|ixs| {
                for _ in 0..=MAX_GUARDS {
                    ixs.push(guard(&payer));
                }
            }),
        ),
        ("invalid_payment", with(&|ixs| ixs.push(guard(&s.service.pubkey())))),
        // A program a payment has no need for, beside a guard.
        (
            "invalid_payment",
            with(&|ixs| {
                ixs.push(guard(&payer));
                ixs.push(Instruction::new_with_bytes(Pubkey::new_unique(), &[0], vec![]))
            }),
        ),
        // A delegate's transfer from someone else's account.
        (
            "invalid_payment",
            with(&|ixs| {
                ixs[2] = spl_token_interface::instruction::transfer_checked(
                    &spl_token_interface::ID,
                    &associated_token_address(&Pubkey::new_unique(), &s.expected.mint),
                    &s.expected.mint,
                    &associated_token_address(&s.expected.pay_to, &s.expected.mint),
                    &payer,
                    &[],
                    PRICE,
                    6,
                )
                .unwrap()
            }),
        ),
        ("invalid_payment", with(&|ixs| ixs.truncate(2))),
        (
            "invalid_payment",
            with(&|ixs| {
                let extra = transfer(&s, &s.expected.mint, &s.expected.pay_to, PRICE, &payer);
                ixs.push(extra)
            }),
        ),
        (
            "invalid_payment",
            with(&|ixs| ixs.push(solana_system_transfer(&payer, &Pubkey::new_unique()))),
        ),
        // The fee payer moving its own funds, or named in an instruction.
        (
            "invalid_payment",
            with(&|ixs| ixs[2] = transfer(&s, &s.expected.mint, &s.expected.pay_to, PRICE, &service)),
        ),
        (
            "invalid_payment",
            with(&|ixs| {
                ixs.push(Instruction::new_with_bytes(
                    MEMO,
                    b"x",
                    vec![solana_instruction::AccountMeta::new_readonly(service, false)],
                ))
            }),
        ),
        // The payer never signed.
        ("invalid_signature", build(&service, &[], &standard(&s))),
    ];
    for (code, tx) in cases {
        assert_eq!(check(tx, &s), Err(code));
    }
    // A signature over another message.
    let mut tampered = build(&service, &[&s.payer], &standard(&s));
    let other = build(&service, &[&s.payer], &{
        let mut ixs = standard(&s);
        ixs[1] = price(2);
        ixs
    });
    tampered.signatures[1] = other.signatures[1];
    assert_eq!(check(tampered, &s), Err("invalid_signature"));
}

/// A system-program transfer: something a payment never needs.
fn solana_system_transfer(from: &Pubkey, to: &Pubkey) -> Instruction {
    let mut data = vec![2, 0, 0, 0];
    data.extend_from_slice(&1_000u64.to_le_bytes());
    Instruction::new_with_bytes(
        Pubkey::default(),
        &data,
        vec![
            solana_instruction::AccountMeta::new(*from, true),
            solana_instruction::AccountMeta::new(*to, false),
        ],
    )
}
