//! x402 `exact` on Solana: the payer signs a `TransferChecked` to the agent; the agent's
//! wallet is the fee payer, completes the signatures and sends it.

use base64::Engine;
use serde_json::Value;
use solana_pubkey::Pubkey;

use super::scheme::{Attempt, BoxFuture, Scheme, SettledBy, Terms};
use crate::chains::solana::parse_address;
use crate::chains::{ChainError, SignedTx, WalletKey};
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
        since_secs: u64,
    ) -> BoxFuture<'a, Result<Option<SettledBy>, ChainError>> {
        Box::pin(async move {
            // Our own settlement's signature is its identity, and is looked up as such. One a
            // facilitator's fee payer signs is known by the payer's signature: found among
            // the transactions of the payer's token account.
            let Some((payer, signature)) = identity
                .strip_prefix(PAYER_SIGNED)
                .and_then(|rest| rest.split_once(':'))
            else {
                return Ok(None);
            };
            let Ok(payer) = parse_address(payer) else {
                return Ok(None);
            };
            // The payer's own token account, which the payment draws on: only the payer's
            // own transfers crowd it, unlike the agent's, which anyone may send dust to.
            let solana = &services.chains.solana;
            let account = crate::chains::solana::associated_token_address(&payer, &solana.mint());
            let found = solana.succeeded_with_signature(&account, signature, since_secs).await?;
            // One transfer to the agent a transaction: the transaction names it.
            Ok(found.map(|transaction| SettledBy {
                transaction,
                transfer_log_index: None,
            }))
        })
    }

    fn expired<'a>(&'a self, services: &'a Services, valid_until: u64) -> BoxFuture<'a, Result<bool, ChainError>> {
        Box::pin(async move { Ok(services.chains.solana.block_height().await? > valid_until) })
    }
}

/// The identity of a payment whose fee payer someone else signs: `…<payer>:<payer's
/// signature>`.
const PAYER_SIGNED: &str = "solana:payer:";

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

    fn identity(&self) -> String {
        let tx = &self.verified.transaction;
        if self.facilitated {
            // Verified: the payer signs the transaction, so its signature is there.
            let payer = self.verified.payer;
            let at = tx.message.static_account_keys().iter().position(|k| *k == payer);
            let signed = at.and_then(|i| tx.signatures.get(i)).copied().unwrap_or_default();
            return format!("{PAYER_SIGNED}{payer}:{signed}");
        }
        // ed25519 is deterministic: a message always completes to the same signature.
        format!("solana:{}", tx.signatures[0])
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
            self.still_valid(services).await?;
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
}
