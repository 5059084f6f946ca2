//! x402 `exact` on Solana: the payer signs a `TransferChecked` to the agent; the agent's
//! wallet is the fee payer, completes the signatures and sends it.

use base64::Engine;
use serde_json::Value;
use solana_pubkey::Pubkey;

use super::scheme::{Attempt, BoxFuture, Scheme, Terms};
use crate::chains::solana::parse_address;
use crate::chains::{ChainError, SignedTx, WalletKey};
use crate::domain::Network;
use crate::services::{ServiceError, Services};
use crate::x402::{PaymentError, svm};

pub struct SolanaExact;

struct SolanaAttempt {
    verified: svm::Verified,
}

impl Scheme for SolanaExact {
    fn network(&self) -> Network {
        Network::Solana
    }

    fn verify(&self, services: &Services, payload: &Value, terms: &Terms) -> Result<Box<dyn Attempt>, PaymentError> {
        let pay_to: Pubkey =
            parse_address(&terms.pay_to).map_err(|e| PaymentError::new("invalid_payment", format!("payTo: {e}")))?;
        let expected = svm::Expected {
            pay_to,
            mint: services.chains.solana.mint(),
            amount: terms.price,
            fee_payer: Some(pay_to),
            max_fee_lamports: services.settings.x402.x402_solana_max_fee_lamports,
        };
        let verified = svm::verify(svm::decode(payload)?, &expected)?;
        Ok(Box::new(SolanaAttempt { verified }))
    }

    fn settled_elsewhere<'a>(
        &'a self,
        _: &'a Services,
        _: &'a str,
        _: &'a Terms,
        _: u64,
    ) -> BoxFuture<'a, Result<Option<String>, ChainError>> {
        // The transaction is the payment: whoever sends it, its signature is the one we
        // recorded and look up.
        Box::pin(async { Ok(None) })
    }
}

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
        // ed25519 is deterministic: a message always completes to the same signature.
        format!("solana:{}", self.verified.transaction.signatures[0])
    }

    fn expires_at_secs(&self) -> Option<u64> {
        // A blockhash's life is counted in blocks, not seconds.
        None
    }

    fn check<'a>(
        &'a self,
        services: &'a Services,
        terms: &'a Terms,
    ) -> BoxFuture<'a, Result<Option<String>, ServiceError>> {
        Box::pin(async move {
            let solana = &services.chains.solana;
            let unavailable = |e| super::chain_unavailable(Network::Solana, e);
            let blockhash = self.verified.transaction.message.recent_blockhash();
            if !solana.blockhash_is_valid(blockhash).await.map_err(unavailable)? {
                return Err(super::refused(
                    "payment_expired",
                    "the transaction's blockhash has expired; sign a new one",
                ));
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
                valid_until: Some(height + 150),
            })
        })
    }

    fn uses_wallet_nonce(&self) -> bool {
        false
    }
}
