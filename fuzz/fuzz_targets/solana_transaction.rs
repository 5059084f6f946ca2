//! The Solana payment rules, on transactions built from a fuzzed plan (compute budget,
//! transfers from and to the right or wrong accounts, memos, programs a payment has no need
//! for, missing and forged signatures).
//! Invariants: never panics; a refusal has a documented code; and every transaction that is
//! accepted really is a payment of exactly the price to the agent, signed by its payer,
//! costing the fee payer no more than the cap (checked here independently of `verify`).

#![no_main]

use agent_host::chains::solana::associated_token_address_with_program;
use agent_host::money::MicroUsdc;
use agent_host::x402::svm;
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use solana_instruction::{AccountMeta, Instruction};
use solana_keypair::Keypair;
use solana_message::{VersionedMessage, v0};
use solana_pubkey::Pubkey;
use solana_signer::Signer;
use solana_transaction::versioned::VersionedTransaction;

const PRICE: u64 = 50_000;
const MAX_FEE: u64 = 20_000;
const COMPUTE_BUDGET: Pubkey = Pubkey::from_str_const("ComputeBudget111111111111111111111111111111");
const TOKEN_2022: Pubkey = Pubkey::from_str_const("TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb");
const MEMO: Pubkey = Pubkey::from_str_const("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr");

#[derive(Arbitrary, Debug)]
enum Who {
    Payer,
    Service,
    Stranger,
}

#[derive(Arbitrary, Debug)]
enum Step {
    Limit(u32),
    Price(u64),
    Transfer {
        authority: Who,
        from: Who,
        to: Who,
        other_mint: bool,
        token_2022: bool,
        amount_off_by: i8,
        decimals: u8,
    },
    Memo {
        text: Vec<u8>,
        naming: Option<Who>,
    },
    Other {
        program: [u8; 4],
        data: Vec<u8>,
        accounts: Vec<(bool, bool)>,
    },
}

#[derive(Arbitrary, Debug)]
struct Plan {
    fee_payer: Who,
    steps: Vec<Step>,
    payer_signs: bool,
    stranger_signs: bool,
    forge: Option<u8>,
}

struct Keys {
    payer: Keypair,
    service: Keypair,
    stranger: Keypair,
    mint: Pubkey,
    pay_to: Pubkey,
}

impl Keys {
    fn of(&self, who: &Who) -> Pubkey {
        match who {
            Who::Payer => self.payer.pubkey(),
            Who::Service => self.service.pubkey(),
            Who::Stranger => self.stranger.pubkey(),
        }
    }
}

fn instruction(keys: &Keys, step: &Step) -> Instruction {
    match step {
        Step::Limit(units) => {
            let mut data = vec![2];
            data.extend_from_slice(&units.to_le_bytes());
            Instruction::new_with_bytes(COMPUTE_BUDGET, &data, vec![])
        }
        Step::Price(price) => {
            let mut data = vec![3];
            data.extend_from_slice(&price.to_le_bytes());
            Instruction::new_with_bytes(COMPUTE_BUDGET, &data, vec![])
        }
        Step::Transfer {
            authority,
            from,
            to,
            other_mint,
            token_2022,
            amount_off_by,
            decimals,
        } => {
            let program = if *token_2022 {
                TOKEN_2022
            } else {
                spl_token_interface::ID
            };
            let mint = if *other_mint {
                Pubkey::new_from_array([9; 32])
            } else {
                keys.mint
            };
            let to_owner = match to {
                Who::Service => keys.pay_to,
                other => keys.of(other),
            };
            let mut data = vec![12];
            data.extend_from_slice(&PRICE.wrapping_add_signed(i64::from(*amount_off_by)).to_le_bytes());
            data.push(*decimals % 8);
            Instruction::new_with_bytes(
                program,
                &data,
                vec![
                    AccountMeta::new(
                        associated_token_address_with_program(&keys.of(from), &mint, &program),
                        false,
                    ),
                    AccountMeta::new_readonly(mint, false),
                    AccountMeta::new(associated_token_address_with_program(&to_owner, &mint, &program), false),
                    AccountMeta::new_readonly(keys.of(authority), true),
                ],
            )
        }
        Step::Memo { text, naming } => {
            let accounts = naming
                .iter()
                .map(|who| AccountMeta::new_readonly(keys.of(who), false))
                .collect();
            Instruction::new_with_bytes(MEMO, text, accounts)
        }
        Step::Other {
            program,
            data,
            accounts,
        } => {
            let mut id = [0; 32];
            id[..4].copy_from_slice(program);
            let accounts = accounts
                .iter()
                .take(4)
                .enumerate()
                .map(|(i, (signer, writable))| {
                    let key = [
                        keys.payer.pubkey(),
                        keys.service.pubkey(),
                        keys.stranger.pubkey(),
                        keys.pay_to,
                    ][i];
                    if *writable {
                        AccountMeta::new(key, *signer)
                    } else {
                        AccountMeta::new_readonly(key, *signer)
                    }
                })
                .collect();
            Instruction::new_with_bytes(Pubkey::new_from_array(id), data, accounts)
        }
    }
}

/// What `verify` promises about an accepted transaction, checked from the message alone.
fn assert_is_a_payment(keys: &Keys, verified: &svm::Verified) {
    let message = &verified.transaction.message;
    let static_keys = message.static_account_keys();
    let at = |i: u8| static_keys[i as usize];
    let mut transfers = 0;
    let (mut limit, mut price) = (None, None);
    for ix in message.instructions() {
        let program = at(ix.program_id_index);
        let allowed = [COMPUTE_BUDGET, spl_token_interface::ID, TOKEN_2022, MEMO, svm_memo_v1()];
        assert!(allowed.contains(&program), "accepted a call to {program}");
        if verified.needs_fee_payer_signature {
            assert!(
                !ix.accounts
                    .iter()
                    .chain([&ix.program_id_index])
                    .any(|i| at(*i) == keys.service.pubkey()),
                "the fee payer appears in an instruction"
            );
        }
        if program == COMPUTE_BUDGET {
            match ix.data[0] {
                2 => limit = Some(u32::from_le_bytes(ix.data[1..5].try_into().unwrap())),
                _ => price = Some(u64::from_le_bytes(ix.data[1..9].try_into().unwrap())),
            }
        }
        if program == spl_token_interface::ID || program == TOKEN_2022 {
            transfers += 1;
            assert_eq!(ix.data[0], 12);
            assert_eq!(
                u64::from_le_bytes(ix.data[1..9].try_into().unwrap()),
                PRICE,
                "the price exactly"
            );
            assert_eq!(ix.data[9], 6);
            let authority = at(ix.accounts[3]);
            assert_eq!(at(ix.accounts[1]), keys.mint, "USDC");
            assert_eq!(
                at(ix.accounts[2]),
                associated_token_address_with_program(&keys.pay_to, &keys.mint, &program)
            );
            assert_eq!(
                at(ix.accounts[0]),
                associated_token_address_with_program(&authority, &keys.mint, &program)
            );
            assert_eq!(authority, verified.payer);
        }
    }
    assert_eq!(transfers, 1, "exactly one transfer");
    let required = message.header().num_required_signatures as usize;
    let bytes = message.serialize();
    let signer = static_keys[..required]
        .iter()
        .position(|k| *k == verified.payer)
        .expect("the payer signs");
    assert!(
        verified.transaction.signatures[signer].verify(verified.payer.as_ref(), &bytes),
        "its signature"
    );
    if verified.needs_fee_payer_signature {
        assert_eq!(static_keys[0], keys.service.pubkey());
        assert!(
            svm::fee_lamports(required, limit, price) <= MAX_FEE,
            "the fee is capped"
        );
    }
}

fn svm_memo_v1() -> Pubkey {
    Pubkey::from_str_const("Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo")
}

fuzz_target!(|plan: Plan| {
    let keys = Keys {
        payer: Keypair::new_from_array([1; 32]),
        service: Keypair::new_from_array([2; 32]),
        stranger: Keypair::new_from_array([3; 32]),
        mint: Pubkey::new_from_array([4; 32]),
        pay_to: Pubkey::new_from_array([5; 32]),
    };
    let instructions: Vec<Instruction> = plan.steps.iter().take(8).map(|s| instruction(&keys, s)).collect();
    let fee_payer = keys.of(&plan.fee_payer);
    let Ok(message) = v0::Message::try_compile(
        &fee_payer,
        &instructions,
        &[],
        solana_hash::Hash::new_from_array([7; 32]),
    ) else {
        return;
    };
    let message = VersionedMessage::V0(message);
    let bytes = message.serialize();
    let required = message.header().num_required_signatures as usize;
    let mut signers = Vec::new();
    if plan.payer_signs {
        signers.push(&keys.payer);
    }
    if plan.stranger_signs {
        signers.push(&keys.stranger);
    }
    let mut signatures: Vec<_> = message.static_account_keys()[..required]
        .iter()
        .map(|key| {
            signers
                .iter()
                .find(|s| s.pubkey() == *key)
                .map(|s| s.sign_message(&bytes))
                .unwrap_or_default()
        })
        .collect();
    if let Some(at) = plan.forge
        && !signatures.is_empty()
    {
        let i = at as usize % signatures.len();
        let mut forged = <[u8; 64]>::from(signatures[i]);
        forged[0] ^= 1;
        signatures[i] = forged.into();
    }
    let expected = svm::Expected {
        pay_to: keys.pay_to,
        mint: keys.mint,
        amount: MicroUsdc(PRICE),
        fee_payer: Some(keys.service.pubkey()),
        max_fee_lamports: MAX_FEE,
    };
    match svm::verify(VersionedTransaction { signatures, message }, &expected) {
        Ok(verified) => assert_is_a_payment(&keys, &verified),
        Err(err) => assert!(!err.code.is_empty()),
    }
});
