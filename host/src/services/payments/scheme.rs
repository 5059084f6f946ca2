//! One network's way of taking an x402 `exact` payment, behind one trait, so that the
//! pipeline (verify → limit → record once → settle → serve or refund) is written once.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use crate::chains::{ChainError, SignedTx, WalletKey};
use crate::domain::Network;
use crate::money::MicroUsdc;
use crate::services::{ServiceError, Services};
pub use crate::store::SettledBy;
use crate::x402::PaymentError;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where to look for a payment's own settlement on chain.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lookup<'a> {
    /// Nothing before this (Unix seconds) counts.
    pub since_secs: u64,
    /// The payment's `valid_until` (see [`Attempt::valid_until`]): once it has passed,
    /// nothing later can be its settlement.
    pub valid_until: Option<u64>,
    /// The transaction a facilitator says settled it: looked at first.
    pub claimed: Option<&'a str>,
}

impl Lookup<'_> {
    pub fn since(since_secs: u64) -> Self {
        Lookup {
            since_secs,
            ..Lookup::default()
        }
    }
}

/// What a request costs and who is paid: chosen by the server, never by the payer.
#[derive(Debug, Clone)]
pub struct Terms {
    pub pay_to: String,
    pub price: MicroUsdc,
    /// Solana: who pays the transaction's fee, when not `pay_to` (a facilitator's fee payer).
    pub fee_payer: Option<String>,
}

pub trait Scheme: Send + Sync {
    fn network(&self) -> Network;

    /// Decodes and checks a payload against the terms, locally: no store, no chain.
    fn verify(&self, services: &Services, payload: &Value, terms: &Terms) -> Result<Box<dyn Attempt>, PaymentError>;

    /// A settlement that someone else's transaction made (Base: the payer, or anyone
    /// holding its authorization, relayed it before us; a facilitator): that transaction,
    /// when the chain shows that this payment itself (`identity`, the payment's) paid
    /// `terms` to `terms.pay_to`, where `lookup` says it can be. Money that reached the
    /// agent by any other transfer in the same transaction never counts.
    fn settled_elsewhere<'a>(
        &'a self,
        services: &'a Services,
        identity: &'a str,
        terms: &'a Terms,
        lookup: Lookup<'a>,
    ) -> BoxFuture<'a, Result<Option<SettledBy>, ChainError>>;

    /// Whether a payment recorded with `valid_until` (see [`Attempt::valid_until`]) can no
    /// longer land.
    fn expired<'a>(&'a self, services: &'a Services, valid_until: u64) -> BoxFuture<'a, Result<bool, ChainError>>;
}

/// A payment that passed the local checks, on its way to the chain.
pub trait Attempt: Send + Sync {
    /// Who pays, as the network writes addresses.
    fn payer(&self) -> String;

    /// Proves the payer signed, where only the chain can tell (Base: a smart wallet's own
    /// check of its signature). Asked before anything is looked up or counted by payer, so
    /// nobody can act in a payer's name with a signature that is not the payer's.
    fn authenticate<'a>(&'a self, _services: &'a Services) -> BoxFuture<'a, Result<(), ServiceError>> {
        Box::pin(async { Ok(()) })
    }

    /// Adds what only the agent's key can, locally (Solana: the fee payer's signature,
    /// when the payer left it to us). After this, `identity` is final.
    fn complete(&mut self, key: &WalletKey) -> Result<(), PaymentError>;

    /// What makes the payment usable once, ever, from what the payer signed alone (Solana:
    /// its message; Base: payer + nonce): the same before and after [`Attempt::complete`].
    fn identity(&self) -> String;

    /// After what the payment can no longer land, for a settlement someone else sends (a
    /// facilitator): Base, the authorization's `validBefore` (Unix seconds); Solana, the
    /// blockhash's last valid block height.
    fn valid_until<'a>(&'a self, services: &'a Services) -> BoxFuture<'a, Result<Option<u64>, ChainError>>;

    /// Whether the payment could still be settled as far as time goes (Solana: its
    /// blockhash is valid), asked of a payment presented as a retry: an expired one is a
    /// copy, not the payer asking again. Refused with why.
    fn still_valid<'a>(&'a self, services: &'a Services) -> BoxFuture<'a, Result<(), ServiceError>>;

    /// The chain checks before anything is signed: still valid, not used, covered by the
    /// payer's balance. `Some` when it is already settled on chain by someone else.
    fn check<'a>(
        &'a self,
        services: &'a Services,
        terms: &'a Terms,
    ) -> BoxFuture<'a, Result<Option<SettledBy>, ServiceError>>;

    /// The settlement, ready to send, made sure to succeed now (Solana: simulated with every
    /// signature checked; Base: the relayer's transaction, signed by the agent's key after
    /// its gas estimate). Nothing is sent.
    fn prepare<'a>(&'a self, services: &'a Services, key: &'a WalletKey)
    -> BoxFuture<'a, Result<SignedTx, ChainError>>;

    /// The settlement spends the agent wallet's next nonce (Base): the wallet is held from
    /// `prepare` until it is sent.
    fn uses_wallet_nonce(&self) -> bool;

    /// The payer signed the settlement whole (Solana's specification form, the payer its
    /// own fee payer): its wallet may send it too, and its fee is the payer's, not the
    /// agent's.
    fn signed_whole_by_payer(&self) -> bool {
        false
    }
}

pub fn of(network: Network) -> &'static dyn Scheme {
    match network {
        Network::Solana => &super::solana::SolanaExact,
        Network::Base => &super::base::BaseExact,
    }
}
