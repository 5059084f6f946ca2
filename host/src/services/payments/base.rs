//! x402 `exact` on Base: the payer signs an EIP-3009 authorization to the agent; the
//! agent's wallet relays it (`transferWithAuthorization`) and pays the gas.

use alloy::primitives::{Address, B256, U256};
use serde_json::Value;

use super::scheme::{Attempt, BoxFuture, Lookup, Scheme, SettledBy, Terms};
use crate::chains::base::{WalletVerdict, parse_address};
use crate::chains::{ChainError, SignedTx, WalletKey};
use crate::domain::Network;
use crate::services::{ServiceError, Services};
use crate::x402::{PaymentError, evm};

pub struct BaseExact;

/// How much longer than the offer's `maxTimeoutSeconds` a payer may let an authorization
/// live (clients sign for that long from their own clock, which may run ahead of ours).
const LONGEST_EXTRA_LIFE_SECS: u64 = 300;

/// The token refuses an authorization in a block stamped at or after its `validBefore`;
/// this much more allows for the chain's clock and ours to differ.
const CLOCK_MARGIN_SECS: u64 = 30;

struct BaseAttempt {
    auth: evm::Authorization,
    signed_by: evm::SignedBy,
    domain: alloy::sol_types::Eip712Domain,
}

/// `base:<payer lowercase>:<nonce>`: an authorization is usable once per payer and nonce.
fn identity_of(from: Address, nonce: B256) -> String {
    format!("base:{}:{nonce}", from.to_string().to_lowercase())
}

fn parse_identity(identity: &str) -> Option<(Address, B256)> {
    let mut parts = identity.strip_prefix("base:")?.split(':');
    let from = parts.next()?.parse().ok()?;
    let nonce = parts.next()?.parse().ok()?;
    Some((from, nonce))
}

impl Scheme for BaseExact {
    fn network(&self) -> Network {
        Network::Base
    }

    fn verify(&self, services: &Services, payload: &Value, terms: &Terms) -> Result<Box<dyn Attempt>, PaymentError> {
        let base = &services.chains.base;
        let mut auth = evm::decode(payload)?;
        let expected = evm::Expected {
            pay_to: parse_address(&terms.pay_to)
                .map_err(|e| PaymentError::new("invalid_payment", format!("payTo: {e}")))?,
            amount: terms.price,
            usdc: base.usdc(),
            chain_id: base.chain_id(),
            domain_name: base.usdc_domain().0.to_string(),
            domain_version: base.usdc_domain().1.to_string(),
        };
        let now = crate::clock::now_ms() as u64 / 1000;
        let signed_by = evm::verify(&auth, &expected, now)?;
        if signed_by == evm::SignedBy::Wallet {
            auth.signature = auth.signature.for_wallet();
        }
        // An authorization that outlives the offer is one anyone who copies it (from our
        // relay's calldata, or the request) may present later, and one recovery must wait for.
        let latest = now + super::MAX_TIMEOUT_SECONDS + LONGEST_EXTRA_LIFE_SECS;
        if auth.valid_before > U256::from(latest) {
            return Err(PaymentError::new(
                "invalid_payment",
                format!(
                    "the authorization must expire (validBefore) within {} seconds",
                    super::MAX_TIMEOUT_SECONDS + LONGEST_EXTRA_LIFE_SECS
                ),
            ));
        }
        Ok(Box::new(BaseAttempt {
            auth,
            signed_by,
            domain: expected.domain(),
        }))
    }

    fn settled_elsewhere<'a>(
        &'a self,
        services: &'a Services,
        identity: &'a str,
        terms: &'a Terms,
        lookup: Lookup<'a>,
    ) -> BoxFuture<'a, Result<Option<SettledBy>, ChainError>> {
        Box::pin(async move {
            let (Some((from, nonce)), Ok(to)) = (parse_identity(identity), parse_address(&terms.pay_to)) else {
                return Ok(None);
            };
            let found = services
                .chains
                .base
                .authorization_settlement(from, nonce, to, U256::from(terms.price.0), lookup.since_secs)
                .await?;
            Ok(found.map(|transfer| SettledBy {
                transaction: transfer.transaction,
                transfer_log_index: Some(transfer.log_index),
            }))
        })
    }

    fn expired<'a>(&'a self, _: &'a Services, valid_until: u64) -> BoxFuture<'a, Result<bool, ChainError>> {
        let now = crate::clock::now_ms() as u64 / 1000;
        Box::pin(async move { Ok(now > valid_until.saturating_add(CLOCK_MARGIN_SECS)) })
    }
}

impl Attempt for BaseAttempt {
    fn payer(&self) -> String {
        self.auth.from.to_checksum(None)
    }

    /// A signature that does not recover to the payer is its wallet's to accept: asked of
    /// the chain, with the wallet deployed first in the simulation if it is not yet.
    fn authenticate<'a>(&'a self, services: &'a Services) -> BoxFuture<'a, Result<(), ServiceError>> {
        Box::pin(async move {
            if self.signed_by == evm::SignedBy::Key {
                return Ok(());
            }
            let base = &services.chains.base;
            let unavailable = |e| super::chain_unavailable(Network::Base, e);
            let digest = self.auth.signing_hash(&self.domain);
            match base
                .wallet_accepts(self.auth.from, digest, &self.auth.signature)
                .await
                .map_err(unavailable)?
            {
                WalletVerdict::Accepts => Ok(()),
                WalletVerdict::Refuses => Err(super::refused(
                    "invalid_signature",
                    format!(
                        "the signature is not the payer's for this authorization, token and chain: it does not recover \
                         to {} and no wallet there accepts it (ERC-1271)",
                        self.payer()
                    ),
                )),
                WalletVerdict::OverGasCap(cap) => Err(super::refused(
                    "invalid_payment",
                    format!(
                        "the payer's wallet needs more than {cap} gas (base_max_gas) to check its signature; \
                         settling it would cost the agent more than a settlement may"
                    ),
                )),
            }
        })
    }

    fn complete(&mut self, _: &WalletKey) -> Result<(), PaymentError> {
        Ok(())
    }

    fn identity(&self) -> String {
        identity_of(self.auth.from, self.auth.nonce)
    }

    fn valid_until<'a>(&'a self, _: &'a Services) -> BoxFuture<'a, Result<Option<u64>, ChainError>> {
        let valid_before = u64::try_from(self.auth.valid_before).unwrap_or(u64::MAX);
        Box::pin(async move { Ok(Some(valid_before)) })
    }

    fn still_valid<'a>(&'a self, _: &'a Services) -> BoxFuture<'a, Result<(), ServiceError>> {
        // Its validBefore was found in the future, and within the offer's time, when verified.
        Box::pin(async { Ok(()) })
    }

    fn check<'a>(
        &'a self,
        services: &'a Services,
        terms: &'a Terms,
    ) -> BoxFuture<'a, Result<Option<SettledBy>, ServiceError>> {
        Box::pin(async move {
            let base = &services.chains.base;
            let unavailable = |e| super::chain_unavailable(Network::Base, e);
            if base
                .authorization_used(self.auth.from, self.auth.nonce)
                .await
                .map_err(unavailable)?
            {
                // Used on chain, though never by us: if its own transfer paid the agent
                // exactly this, the payer (or someone holding its authorization) settled it
                // for us. A nonce burned paying anything else is used, whatever else its
                // transaction paid the agent.
                let since = (crate::clock::now_ms() as u64 / 1000).saturating_sub(super::ELSEWHERE_LOOKBACK_SECS);
                let elsewhere = BaseExact
                    .settled_elsewhere(services, &self.identity(), terms, Lookup::since(since))
                    .await
                    .map_err(unavailable)?;
                return match elsewhere {
                    Some(tx) => Ok(Some(tx)),
                    None => Err(super::already_used()),
                };
            }
            let balance = base.usdc_of(self.auth.from).await.map_err(unavailable)?;
            super::covers(balance, terms.price)?;
            if self.signed_by == evm::SignedBy::Wallet && services.facilitators.of(Network::Base).is_none() {
                self.within_the_agents_means(services, terms).await?;
            }
            Ok(None)
        })
    }

    fn prepare<'a>(
        &'a self,
        services: &'a Services,
        key: &'a WalletKey,
    ) -> BoxFuture<'a, Result<SignedTx, ChainError>> {
        Box::pin(services.chains.base.sign_settlement(key, &self.auth))
    }

    fn uses_wallet_nonce(&self) -> bool {
        true
    }
}

impl BaseAttempt {
    /// A wallet's settlement costs the agent what the wallet's check (and, for one not yet
    /// deployed, its deployment) burns: refused before anything is signed when that is over
    /// the gas cap, and a deployment unless the price covers it.
    async fn within_the_agents_means(&self, services: &Services, terms: &Terms) -> Result<(), ServiceError> {
        let base = &services.chains.base;
        let unavailable = |e| super::chain_unavailable(Network::Base, e);
        let deployment = match self.auth.signature.deployment() {
            Some(deployment) if !base.has_code(self.auth.from).await.map_err(unavailable)? => Some(deployment),
            _ => None,
        };
        let settings = &services.settings.x402;
        if let Some(deployment) = deployment
            && !factory_allowed(&settings.x402_base_wallet_factories, deployment.factory)
        {
            // Its code runs in the agent's own transaction, on the agent's gas.
            return Err(super::refused(
                "invalid_payment",
                format!(
                    "the payer's wallet is not deployed yet (ERC-6492) and its factory {} is not one this server \
                     deploys wallets through (x402_base_wallet_factories); deploy the wallet first",
                    deployment.factory
                ),
            ));
        }
        let deploys = deployment.is_some();
        let least = settings.x402_base_deploy_min_micro_usdc;
        if deploys && terms.price.0 < least {
            return Err(super::refused(
                "invalid_payment",
                format!(
                    "the payer's wallet is not deployed yet (ERC-6492): settling would deploy it at the agent's cost, \
                     which only a request of at least {} USDC covers; deploy the wallet first",
                    crate::money::MicroUsdc(least)
                ),
            ));
        }
        let relayer = parse_address(&terms.pay_to).map_err(|e| super::refused("invalid_payment", e))?;
        match base.estimate_settlement(relayer, &self.auth).await {
            Ok(_) => Ok(()),
            Err(ChainError::Refused(reason)) => Err(super::refused(
                "invalid_payment",
                format!("the payer's wallet cannot be settled from: {reason}"),
            )),
            Err(other) => Err(unavailable(other)),
        }
    }
}

/// Whether `factory` is on the operator's list (`*`: any).
fn factory_allowed(allowed: &[String], factory: Address) -> bool {
    allowed
        .iter()
        .any(|entry| entry == "*" || entry.parse::<Address>().is_ok_and(|a| a == factory))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_factories_deploy_wallets() {
        let coinbase: Address = "0x0BA5ED0c6AA8c49038F819E587E2633c4A9F428a".parse().unwrap();
        let listed = vec!["0x0ba5ed0c6aa8c49038f819e587e2633c4a9f428a".to_string()];
        assert!(factory_allowed(&listed, coinbase), "any case");
        assert!(!factory_allowed(&listed, Address::repeat_byte(1)));
        assert!(factory_allowed(&["*".to_string()], Address::repeat_byte(1)));
        assert!(!factory_allowed(&[], coinbase));
    }

    #[test]
    fn an_identity_names_payer_and_nonce_and_reads_back() {
        let from: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8".parse().unwrap();
        let nonce = B256::repeat_byte(7);
        let identity = identity_of(from, nonce);
        assert!(identity.starts_with("base:0x70997970c51812dc3a010c7d01b50e0d17dc79c8:0x0707"));
        assert_eq!(parse_identity(&identity), Some((from, nonce)));
        assert_eq!(parse_identity("solana:abc"), None);
    }
}
