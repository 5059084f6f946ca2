//! Solana payments: a wire transaction carrying one SPL `TransferChecked` to the agent.
//! Nothing in it is trusted: every instruction, account and signature is checked here,
//! locally, before the service co-signs (as fee payer) or sends it.

use base64::Engine;
use serde_json::Value;
use solana_pubkey::Pubkey;
use solana_signature::Signature;
use solana_transaction::versioned::VersionedTransaction;

use super::PaymentError;
use crate::chains::solana::associated_token_address_with_program;
use crate::money::MicroUsdc;

const COMPUTE_BUDGET: Pubkey = Pubkey::from_str_const("ComputeBudget111111111111111111111111111111");
const TOKEN_2022: Pubkey = Pubkey::from_str_const("TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb");
const MEMO: Pubkey = Pubkey::from_str_const("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr");
const MEMO_V1: Pubkey = Pubkey::from_str_const("Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo");
/// Lighthouse, the assertion program Phantom and Solflare add guard instructions of.
pub const LIGHTHOUSE: Pubkey = Pubkey::from_str_const("L2TExMFKdjpN9kozasaurPirfHy9P8sbXoAN1qA3S95");
/// The most Lighthouse guards a payment may carry, wherever they stand (wallets add one to
/// three: a snapshot before the transfer, assertions after it).
pub const MAX_GUARDS: usize = 3;
/// SPL Token instruction tag of `TransferChecked`.
const TRANSFER_CHECKED: u8 = 12;
/// What the chain charges per signature, in lamports.
pub const LAMPORTS_PER_SIGNATURE: u64 = 5_000;
/// The compute-unit limit the runtime grants a transaction that sets none (the most it allows).
const MAX_COMPUTE_UNITS: u64 = 1_400_000;

/// What the payment must be, chosen by the server for this request.
#[derive(Debug, Clone)]
pub struct Expected {
    pub pay_to: Pubkey,
    pub mint: Pubkey,
    pub amount: MicroUsdc,
    /// The service's fee payer: a transaction whose fee payer it is gets co-signed.
    pub fee_payer: Option<Pubkey>,
    /// The most a co-signed transaction may cost the fee payer, signatures and priority fee
    /// together, in lamports: the chain charges it even when the transaction fails.
    pub max_fee_lamports: u64,
}

/// A transaction that passed every local check.
#[derive(Debug, Clone)]
pub struct Verified {
    pub transaction: VersionedTransaction,
    /// The transfer's authority: who pays.
    pub payer: Pubkey,
    /// The service must add the fee payer's signature before sending.
    pub needs_fee_payer_signature: bool,
    /// What the fee payer will be charged for it, in lamports, at most.
    pub fee_lamports: u64,
}

/// The fee a message costs its fee payer: every signature, plus the priority fee, which is
/// the unit price times the *requested* limit (or the runtime's maximum when none is set),
/// whether or not the transaction succeeds.
pub fn fee_lamports(signatures: usize, unit_limit: Option<u32>, unit_price_micro_lamports: Option<u64>) -> u64 {
    let limit = unit_limit.map_or(MAX_COMPUTE_UNITS, u64::from);
    let price = u128::from(unit_price_micro_lamports.unwrap_or(0));
    let priority = (u128::from(limit) * price).div_ceil(1_000_000);
    let total = u128::from(LAMPORTS_PER_SIGNATURE) * signatures as u128 + priority;
    u64::try_from(total).unwrap_or(u64::MAX)
}

fn refuse(code: &'static str, message: impl Into<String>) -> PaymentError {
    PaymentError::new(code, message)
}

/// Reads `{transaction: base64}` (the x402 specification's form may add `signature`; the signatures
/// inside the transaction are the ones checked).
pub fn decode(payload: &Value) -> Result<VersionedTransaction, PaymentError> {
    let encoded = payload
        .get("transaction")
        .and_then(Value::as_str)
        .ok_or_else(|| refuse("invalid_payment", "payload.transaction is missing"))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| refuse("invalid_payment", "payload.transaction is not base64"))?;
    let tx: VersionedTransaction = bincode::deserialize(&bytes).map_err(|_| {
        refuse(
            "invalid_payment",
            "payload.transaction is not a Solana wire transaction",
        )
    })?;
    // Exactly one transaction, canonically encoded: what is checked is what was sent (the
    // fuzzer found trailing bytes and non-minimal lengths accepted before).
    if bincode::serialize(&tx).ok().as_deref() != Some(bytes.as_slice()) {
        return Err(refuse(
            "invalid_payment",
            "payload.transaction has bytes beyond the transaction, or is not canonically encoded",
        ));
    }
    if let Some(signature) = payload.get("signature").and_then(Value::as_str) {
        let first = tx.signatures.first().map(Signature::to_string).unwrap_or_default();
        let claimed = base64::engine::general_purpose::STANDARD
            .decode(signature)
            .ok()
            .and_then(|b| <[u8; 64]>::try_from(b).ok())
            .map(|b| Signature::from(b).to_string());
        if claimed.as_deref() != Some(first.as_str()) && signature != first {
            return Err(refuse(
                "invalid_payment",
                "payload.signature is not the transaction's signature",
            ));
        }
    }
    Ok(tx)
}

/// Every rule that needs no chain (blockhash validity and simulation come after).
pub fn verify(tx: VersionedTransaction, expected: &Expected) -> Result<Verified, PaymentError> {
    let message = &tx.message;
    if message.address_table_lookups().is_some_and(|l| !l.is_empty()) {
        return Err(refuse("invalid_payment", "address lookup tables are not accepted"));
    }
    let keys = message.static_account_keys();
    let instructions = message.instructions();
    let guards = instructions
        .iter()
        .filter(|i| keys.get(i.program_id_index as usize) == Some(&LIGHTHOUSE))
        .count();
    if guards > MAX_GUARDS {
        return Err(refuse(
            "invalid_payment",
            format!("the transaction has {guards} Lighthouse guard instructions; at most {MAX_GUARDS} are accepted"),
        ));
    }
    if !(3..=6).contains(&(instructions.len() - guards)) {
        return Err(refuse(
            "invalid_payment",
            format!(
                "the transaction has {} instructions besides its guards; 3 to 6 are accepted",
                instructions.len() - guards
            ),
        ));
    }
    let fee_payer = *keys
        .first()
        .ok_or_else(|| refuse("invalid_payment", "the transaction has no accounts"))?;
    let account = |index: u8| {
        keys.get(index as usize)
            .copied()
            .ok_or_else(|| refuse("invalid_payment", "an instruction names an account the message lacks"))
    };

    let mut transfer = None;
    let (mut unit_limit, mut unit_price) = (None, None);
    for instruction in instructions {
        let program = account(instruction.program_id_index)?;
        let data = &instruction.data;
        if program == COMPUTE_BUDGET {
            // Each at most once: the runtime refuses duplicates anyway.
            let duplicate = || refuse("invalid_payment", "a compute budget instruction appears twice");
            match data.first() {
                Some(2) if data.len() == 5 => {
                    let units = u32::from_le_bytes(data[1..5].try_into().expect("4 bytes"));
                    if unit_limit.replace(units).is_some() {
                        return Err(duplicate());
                    }
                }
                Some(3) if data.len() == 9 => {
                    let price = u64::from_le_bytes(data[1..9].try_into().expect("8 bytes"));
                    if unit_price.replace(price).is_some() {
                        return Err(duplicate());
                    }
                }
                _ => {
                    return Err(refuse(
                        "invalid_payment",
                        "only compute unit limit and price are accepted",
                    ));
                }
            }
        } else if program == spl_token_interface::ID || program == TOKEN_2022 {
            if data.first() != Some(&TRANSFER_CHECKED) || data.len() != 10 {
                return Err(refuse(
                    "invalid_payment",
                    "the only token instruction accepted is TransferChecked",
                ));
            }
            if transfer.is_some() {
                return Err(refuse("invalid_payment", "the transaction has more than one transfer"));
            }
            let accounts: Vec<Pubkey> = instruction
                .accounts
                .iter()
                .map(|i| account(*i))
                .collect::<Result<_, _>>()?;
            if accounts.len() != 4 {
                return Err(refuse(
                    "invalid_payment",
                    "multisig transfer authorities are not accepted",
                ));
            }
            transfer = Some((program, accounts, data.clone()));
        } else if program == MEMO || program == MEMO_V1 {
            // Harmless: moves no funds, and what it checks cannot change after simulation.
        } else if program == LIGHTHOUSE {
            // A wallet's guard: it asserts what the transaction leaves (or snapshots it in a
            // memory account the payer funds). It moves none of the fee payer's funds, who
            // may appear in no instruction (below); it can pass simulation and fail on chain,
            // costing the fee payer the fee, within the fee cap, and the payer its cool-off.
        } else {
            return Err(refuse(
                "invalid_payment",
                format!("the transaction calls {program}, which a payment has no need for"),
            ));
        }
        if let Some(service) = expected.fee_payer {
            let touches = std::iter::once(&instruction.program_id_index)
                .chain(&instruction.accounts)
                .any(|i| keys.get(*i as usize) == Some(&service));
            if touches {
                return Err(refuse(
                    "invalid_payment",
                    "the service's fee payer may not appear in any instruction",
                ));
            }
        }
    }

    let (program, accounts, data) =
        transfer.ok_or_else(|| refuse("invalid_payment", "the transaction has no TransferChecked"))?;
    let (source, mint, destination, authority) = (accounts[0], accounts[1], accounts[2], accounts[3]);
    if mint != expected.mint {
        return Err(refuse(
            "wrong_asset",
            format!("the transfer moves {mint}, not USDC ({})", expected.mint),
        ));
    }
    if destination != associated_token_address_with_program(&expected.pay_to, &expected.mint, &program) {
        return Err(refuse(
            "payment_recipient_mismatch",
            format!(
                "the transfer does not go to the USDC account of the agent's wallet {}",
                expected.pay_to
            ),
        ));
    }
    let amount = u64::from_le_bytes(data[1..9].try_into().expect("8 bytes"));
    if amount != expected.amount.0 || data[9] != 6 {
        return Err(refuse(
            "payment_amount_mismatch",
            format!(
                "the transfer is {amount} micro-USDC; this request costs exactly {}",
                expected.amount.0
            ),
        ));
    }

    // The payer's own token account: a delegate's authority could be revoked between the
    // simulation and the landing, failing the transfer at the fee payer's expense.
    if source != associated_token_address_with_program(&authority, &expected.mint, &program) {
        return Err(refuse(
            "invalid_payment",
            "the transfer must draw on the payer's own USDC account",
        ));
    }

    let service_pays_fee = expected.fee_payer == Some(fee_payer);
    if service_pays_fee && authority == fee_payer {
        return Err(refuse(
            "invalid_payment",
            "the service's fee payer cannot be the one paying",
        ));
    }
    let required = message.header().num_required_signatures as usize;
    let fee = fee_lamports(required, unit_limit, unit_price);
    if service_pays_fee && fee > expected.max_fee_lamports {
        return Err(refuse(
            "invalid_payment",
            format!(
                "the transaction would cost its fee payer {fee} lamports (signatures and priority fee: unit limit {} x price {} micro-lamports); at most {} are paid",
                unit_limit.map_or("unset".to_string(), |l| l.to_string()),
                unit_price.unwrap_or(0),
                expected.max_fee_lamports
            ),
        ));
    }
    if tx.signatures.len() != required || keys.len() < required {
        return Err(refuse(
            "invalid_signature",
            "the transaction's signatures do not match its signers",
        ));
    }
    if !keys[..required].contains(&authority) {
        return Err(refuse(
            "invalid_signature",
            "the transfer's authority does not sign the transaction",
        ));
    }
    let message_bytes = message.serialize();
    for (index, (signature, key)) in tx.signatures.iter().zip(keys).enumerate() {
        if index == 0 && service_pays_fee {
            continue; // ours to add
        }
        if !signature.verify(key.as_ref(), &message_bytes) {
            return Err(refuse(
                "invalid_signature",
                format!("the signature of {key} is missing or invalid"),
            ));
        }
    }
    Ok(Verified {
        transaction: tx,
        payer: authority,
        needs_fee_payer_signature: service_pays_fee,
        fee_lamports: fee,
    })
}

#[cfg(test)]
mod tests {
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
        let encode =
            |b: &[u8]| serde_json::json!({ "transaction": base64::engine::general_purpose::STANDARD.encode(b) });
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
}
