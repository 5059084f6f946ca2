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
mod tests;
