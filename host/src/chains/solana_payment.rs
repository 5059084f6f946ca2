//! A Solana payment transaction for a payer's wallet to sign, in the form the standard x402
//! clients build (compute unit limit and price, the `TransferChecked`, a random memo), with
//! the seller's fee payer left unsigned. A browser page cannot build one itself: it can
//! reach no Solana node (its policy allows this origin only) to read a recent blockhash.

use base64::Engine;
use solana_instruction::Instruction;
use solana_message::{VersionedMessage, v0};
use solana_pubkey::Pubkey;
use solana_transaction::versioned::VersionedTransaction;

use super::ChainError;
use super::solana::{SolanaChain, associated_token_address};
use crate::money::MicroUsdc;

const COMPUTE_BUDGET: Pubkey = Pubkey::from_str_const("ComputeBudget111111111111111111111111111111");
const MEMO: Pubkey = Pubkey::from_str_const("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr");
/// What the x402 clients ask: enough for a token transfer, priced at one micro-lamport a
/// unit (a fee of 10,001 lamports with the two signatures).
const UNIT_LIMIT: u32 = 20_000;
const UNIT_PRICE_MICRO_LAMPORTS: u64 = 1;

/// An unsigned payment of `amount` from `payer` to `pay_to`, `fee_payer` paying the fee:
/// the wire transaction (base64, its signatures empty) and the block height past which it
/// can no longer land.
pub async fn unsigned_payment(
    chain: &SolanaChain,
    fee_payer: &Pubkey,
    payer: &Pubkey,
    pay_to: &Pubkey,
    amount: MicroUsdc,
) -> Result<(String, u64), ChainError> {
    let mint = chain.mint();
    let mut limit = vec![2];
    limit.extend_from_slice(&UNIT_LIMIT.to_le_bytes());
    let mut price = vec![3];
    price.extend_from_slice(&UNIT_PRICE_MICRO_LAMPORTS.to_le_bytes());
    let transfer = spl_token_interface::instruction::transfer_checked(
        &spl_token_interface::ID,
        &associated_token_address(payer, &mint),
        &mint,
        &associated_token_address(pay_to, &mint),
        payer,
        &[],
        amount.0,
        6,
    )
    .map_err(|e| ChainError::Refused(e.to_string()))?;
    // Two payments of one price by one payer within a blockhash's life would otherwise be
    // one message, and a payment is known by its message.
    let memo = crate::random::hex_token(16);
    let instructions = [
        Instruction::new_with_bytes(COMPUTE_BUDGET, &limit, vec![]),
        Instruction::new_with_bytes(COMPUTE_BUDGET, &price, vec![]),
        transfer,
        Instruction::new_with_bytes(MEMO, memo.as_bytes(), vec![]),
    ];
    let (blockhash, last_valid) = chain.latest_blockhash().await?;
    let message = v0::Message::try_compile(fee_payer, &instructions, &[], blockhash)
        .map_err(|e| ChainError::Refused(format!("the payment does not compile: {e}")))?;
    let message = VersionedMessage::V0(message);
    let signers = usize::from(message.header().num_required_signatures);
    let tx = VersionedTransaction {
        signatures: vec![Default::default(); signers],
        message,
    };
    let wire = bincode::serialize(&tx).map_err(|e| ChainError::Unavailable(e.to_string()))?;
    Ok((base64::engine::general_purpose::STANDARD.encode(wire), last_valid))
}
