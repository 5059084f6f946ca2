//! x402 `exact` on Solana: the payer signs a `TransferChecked` to the agent; the agent's
//! wallet is the fee payer, completes the signatures and sends it.

use base64::Engine;
use serde_json::Value;
use solana_pubkey::Pubkey;

use super::scheme::{Attempt, BoxFuture, Lookup, Scheme, SettledBy, Terms};
use crate::chains::solana::parse_address;
use crate::chains::solana_history::{Wanted, Window, message_hash};
use crate::chains::{ChainError, Landing, SignedTx, WalletKey};
use crate::domain::Network;
use crate::services::{ServiceError, Services};
use crate::x402::{PaymentError, svm};

pub struct SolanaExact;

struct SolanaAttempt {
    verified: svm::Verified,
    /// A facilitator's fee payer signs it (`Terms::fee_payer`): the payer's signature
    /// names it, whatever the fee payer's slot holds meanwhile.
    facilitated: bool,
}

impl Scheme for SolanaExact {
    fn network(&self) -> Network {
        Network::Solana
    }

    fn verify(&self, services: &Services, payload: &Value, terms: &Terms) -> Result<Box<dyn Attempt>, PaymentError> {
        let pay_to: Pubkey =
            parse_address(&terms.pay_to).map_err(|e| PaymentError::new("invalid_payment", format!("payTo: {e}")))?;
        let fee_payer = match &terms.fee_payer {
            Some(other) => {
                parse_address(other).map_err(|e| PaymentError::new("invalid_payment", format!("feePayer: {e}")))?
            }
            None => pay_to,
        };
        let expected = svm::Expected {
            pay_to,
            mint: services.chains.solana.mint(),
            amount: terms.price,
            fee_payer: Some(fee_payer),
            max_fee_lamports: services.settings.x402.x402_solana_max_fee_lamports,
        };
        let verified = svm::verify(svm::decode(payload)?, &expected)?;
        let facilitated = terms.fee_payer.is_some();
        if facilitated && !verified.needs_fee_payer_signature {
            return Err(PaymentError::new(
                "invalid_payment",
                format!("the transaction's fee payer must be {fee_payer}, as offered"),
            ));
        }
        Ok(Box::new(SolanaAttempt { verified, facilitated }))
    }

    fn settled_elsewhere<'a>(
        &'a self,
        services: &'a Services,
        identity: &'a str,
        _: &'a Terms,
        lookup: Lookup<'a>,
    ) -> BoxFuture<'a, Result<Option<SettledBy>, ChainError>> {
        Box::pin(async move {
            // Our own settlement is looked up by its own id. One a facilitator's fee payer
            // signs is known by its message: the transaction the facilitator names, else
            // one among those of the payer's token account where it could have landed.
            let Some((payer, wanted)) = payer_signed(identity) else {
                return Ok(None);
            };
            let solana = &services.chains.solana;
            // One transfer to the agent a transaction: the transaction names it.
            let by = |transaction: String| SettledBy {
                transaction,
                transfer_log_index: None,
            };
            if let Some(claimed) = lookup.claimed
                && solana.landed_as_wanted(claimed, &wanted).await?
            {
                return Ok(Some(by(claimed.to_string())));
            }
            let last_slot = match lookup.valid_until {
                Some(height) => solana.last_slot_at_height(height).await?,
                None => None,
            };
            let window = Window {
                since_secs: lookup.since_secs,
                last_slot,
            };
            // The payer's own token account, which the payment draws on: only the payer's
            // own transfers crowd it, unlike the agent's, which anyone may send dust to.
            let account = crate::chains::solana::associated_token_address(&payer, &solana.mint());
            Ok(solana.find_landed(&account, &wanted, window).await?.map(by))
        })
    }

    fn expired<'a>(&'a self, services: &'a Services, valid_until: u64) -> BoxFuture<'a, Result<bool, ChainError>> {
        Box::pin(async move { Ok(services.chains.solana.block_height().await? > valid_until) })
    }
}

/// The identity of a payment whose fee payer someone else signs: `…<payer>:<SHA-256 of
/// the message, hex>` (recorded before 0026: the payer's signature, base58).
const PAYER_SIGNED: &str = "solana:payer:";
/// The identity of a payment the agent's wallet settles: `…<SHA-256 of the message, hex>`.
const MESSAGE: &str = "solana:message:";

/// A payer-signed identity's payer, and what finds its transaction.
fn payer_signed(identity: &str) -> Option<(Pubkey, Wanted)> {
    let (payer, key) = identity.strip_prefix(PAYER_SIGNED)?.split_once(':')?;
    let payer = parse_address(payer).ok()?;
    let wanted = match <[u8; 32]>::try_from(hex::decode(key).unwrap_or_default()) {
        Ok(hash) => Wanted::Message(hash),
        Err(_) => Wanted::Signature(key.to_string()),
    };
    Some((payer, wanted))
}

/// A blockhash is valid for 150 blocks after the one it names.
const BLOCKHASH_LIFE: u64 = 150;

impl SolanaAttempt {
    fn wire(&self) -> Result<String, ChainError> {
        let bytes =
            bincode::serialize(&self.verified.transaction).map_err(|e| ChainError::Unavailable(e.to_string()))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    }
}

impl Attempt for SolanaAttempt {
    fn payer(&self) -> String {
        self.verified.payer.to_string()
    }

    fn complete(&mut self, key: &WalletKey) -> Result<(), PaymentError> {
        if !self.verified.needs_fee_payer_signature {
            return Ok(());
        }
        let WalletKey::Solana(keypair) = key else {
            return Err(PaymentError::new(
                "invalid_payment",
                "the agent's Solana key is not an ed25519 key",
            ));
        };
        let tx = &mut self.verified.transaction;
        tx.signatures[0] = solana_signer::Signer::sign_message(keypair, &tx.message.serialize());
        Ok(())
    }

    /// The message, never a signature: a payer may sign one message many ways (a signer
    /// need not be deterministic), and each way would otherwise be another payment.
    fn identity(&self) -> String {
        let hash = hex::encode(message_hash(&self.verified.transaction));
        if self.facilitated {
            return format!("{PAYER_SIGNED}{}:{hash}", self.verified.payer);
        }
        format!("{MESSAGE}{hash}")
    }

    fn valid_until<'a>(&'a self, services: &'a Services) -> BoxFuture<'a, Result<Option<u64>, ChainError>> {
        Box::pin(async move { Ok(Some(services.chains.solana.block_height().await? + BLOCKHASH_LIFE)) })
    }

    fn still_valid<'a>(&'a self, services: &'a Services) -> BoxFuture<'a, Result<(), ServiceError>> {
        Box::pin(async move {
            let solana = &services.chains.solana;
            let blockhash = self.verified.transaction.message.recent_blockhash();
            let valid = solana
                .blockhash_is_valid(blockhash)
                .await
                .map_err(|e| super::chain_unavailable(Network::Solana, e))?;
            if !valid {
                return Err(super::refused(
                    "payment_expired",
                    "the transaction's blockhash has expired; sign a new one",
                ));
            }
            Ok(())
        })
    }

    fn check<'a>(
        &'a self,
        services: &'a Services,
        terms: &'a Terms,
    ) -> BoxFuture<'a, Result<Option<SettledBy>, ServiceError>> {
        Box::pin(async move {
            let solana = &services.chains.solana;
            let unavailable = |e| super::chain_unavailable(Network::Solana, e);
            // Expired, it can never land by us, and one that landed is no longer the
            // payer's to present: its copy on chain would be anyone's.
            self.still_valid(services).await?;
            if self.signed_whole_by_payer() {
                // Signed in full (the specification's form, the payer its own fee payer):
                // its wallet may have sent it already. Landed, the money reached the agent
                // and the payer's balance no longer shows it.
                let signature = self.verified.transaction.signatures[0].to_string();
                // Its signature names the message verified here (strict ed25519); should it
                // not, the transaction still pays one payment only (`insert_payment`).
                match solana.status_of(&signature, None).await.map_err(unavailable)? {
                    Landing::Confirmed => {
                        return Ok(Some(SettledBy {
                            transaction: signature,
                            transfer_log_index: None,
                        }));
                    }
                    Landing::Failed(reason) => {
                        return Err(super::refused(
                            "invalid_payment",
                            format!("this transaction already landed and failed ({reason}); sign a new one"),
                        ));
                    }
                    Landing::Dropped(_) | Landing::Pending => {}
                }
            }
            let (balance, _) = solana.usdc_of(&self.verified.payer).await.map_err(unavailable)?;
            super::covers(balance, terms.price)?;
            Ok(None)
        })
    }

    fn prepare<'a>(&'a self, services: &'a Services, _: &'a WalletKey) -> BoxFuture<'a, Result<SignedTx, ChainError>> {
        Box::pin(async move {
            let solana = &services.chains.solana;
            // A blockhash valid now lands within 150 blocks or never: past that height, a
            // stuck settlement is known to have failed without a restart.
            let height = solana.block_height().await?;
            let raw = self.wire()?;
            // Signatures were checked locally; the simulation checks them again, and the rest.
            if let Some(reason) = solana.simulate(&raw).await? {
                return Err(ChainError::Refused(format!("the transaction would fail: {reason}")));
            }
            Ok(SignedTx {
                id: self.verified.transaction.signatures[0].to_string(),
                raw,
                valid_until: Some(height + BLOCKHASH_LIFE),
            })
        })
    }

    fn uses_wallet_nonce(&self) -> bool {
        false
    }

    fn signed_whole_by_payer(&self) -> bool {
        !self.verified.needs_fee_payer_signature
    }
}

/// Whether the agent's wallet pays a recorded settlement's fee: it is its fee payer (the
/// first account), as in the standard form; in the specification's form the payer is.
pub(super) fn agent_pays_fee(raw_base64: &str, pay_to: &str) -> bool {
    let fee_payer = base64::engine::general_purpose::STANDARD
        .decode(raw_base64)
        .ok()
        .and_then(|bytes| bincode::deserialize::<solana_transaction::versioned::VersionedTransaction>(&bytes).ok())
        .and_then(|tx| tx.message.static_account_keys().first().copied());
    // Unreadable, it is taken as the agent's: the cool-off errs on the agent's side.
    fee_payer.is_none_or(|key| key.to_string() == pay_to)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use solana_hash::Hash;
    use solana_instruction::{AccountMeta, Instruction};
    use solana_keypair::Keypair;
    use solana_message::{VersionedMessage, v0};
    use solana_signature::Signature;
    use solana_signer::Signer;
    use solana_transaction::versioned::VersionedTransaction;

    use super::*;

    /// A payer may sign one message many ways (nothing makes a signer deterministic): each
    /// way is the same payment, in either mode.
    #[test]
    fn a_payment_is_its_message_however_it_was_signed() {
        let payer = Keypair::new();
        let fee_payer = Pubkey::new_unique();
        let pays =
            Instruction::new_with_bytes(Pubkey::new_unique(), &[1], vec![AccountMeta::new(payer.pubkey(), true)]);
        let compiled = v0::Message::try_compile(&fee_payer, &[pays], &[], Hash::new_from_array([7; 32])).unwrap();
        let message = VersionedMessage::V0(compiled);
        let signed = payer.sign_message(&message.serialize());
        let transaction = |by_payer: Signature| VersionedTransaction {
            signatures: vec![Signature::default(), by_payer],
            message: message.clone(),
        };
        let attempt = |by_payer: Signature, facilitated: bool| SolanaAttempt {
            verified: svm::Verified {
                transaction: transaction(by_payer),
                payer: payer.pubkey(),
                needs_fee_payer_signature: true,
                fee_lamports: 5_000,
            },
            facilitated,
        };
        let resigned = Signature::from([9; 64]);
        for facilitated in [true, false] {
            assert_eq!(
                attempt(signed, facilitated).identity(),
                attempt(resigned, facilitated).identity()
            );
        }

        // A facilitated payment's identity finds its transaction by its message...
        let (found_payer, wanted) = payer_signed(&attempt(signed, true).identity()).unwrap();
        assert_eq!(found_payer, payer.pubkey());
        assert_eq!(wanted, Wanted::Message(message_hash(&transaction(resigned))));
        // ...and one recorded before, by the payer's signature.
        let recorded_before = format!("{PAYER_SIGNED}{}:{signed}", payer.pubkey());
        assert_eq!(
            payer_signed(&recorded_before).unwrap().1,
            Wanted::Signature(signed.to_string())
        );
        assert_eq!(payer_signed(&attempt(signed, false).identity()), None);
    }

    /// The fee payer of a stored settlement, read back in recovery: the agent's wallet in
    /// the standard form, the payer in the specification's; unreadable counts as the agent.
    #[test]
    fn who_pays_a_stored_settlements_fee() {
        let (agent, payer) = (Keypair::new(), Keypair::new());
        let stored = |fee_payer: &Keypair| {
            let pays =
                Instruction::new_with_bytes(Pubkey::new_unique(), &[1], vec![AccountMeta::new(payer.pubkey(), true)]);
            let compiled =
                v0::Message::try_compile(&fee_payer.pubkey(), &[pays], &[], Hash::new_from_array([7; 32])).unwrap();
            let tx = VersionedTransaction {
                signatures: vec![Signature::default(); 2],
                message: VersionedMessage::V0(compiled),
            };
            base64::engine::general_purpose::STANDARD.encode(bincode::serialize(&tx).unwrap())
        };
        let agent_address = agent.pubkey().to_string();
        assert!(agent_pays_fee(&stored(&agent), &agent_address));
        assert!(!agent_pays_fee(&stored(&payer), &agent_address));
        assert!(agent_pays_fee("not a transaction", &agent_address));
    }
}
