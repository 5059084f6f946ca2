//! A fake network for the payment pipeline and the purchase service: a scheme and a chain
//! whose answers each test scripts, so every branch (confirmed, landed and failed, dropped,
//! still pending, settled by someone else) is checked without a node. The store, the
//! wallet and its sealed key are the real ones, in a temp dir.

#![cfg(test)]
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::scheme::{Attempt, BoxFuture, Lookup, Scheme, SettledBy, Terms};
use super::*;
use crate::chains::{Balances, ChainFuture, UsdcChain, WalletKey};
use crate::domain::Plan;
use crate::x402::wire::Version;

pub const PRICE: MicroUsdc = MicroUsdc(10_000);
/// The client address the fixture's payments come from.
pub const CLIENT: &str = "192.0.2.7";

/// A Base-like chain: every sent transaction lands as `landing` says (a test may change it
/// between steps); refund transfers are signed by it, and counted.
pub struct FakeChain {
    pub landing: Mutex<Landing>,
    /// Transactions that land otherwise than `landing` says, by id.
    pub landings: Mutex<std::collections::HashMap<String, Landing>>,
    /// `submit` answers that the node refused it (the wallet cannot pay the gas).
    pub refuse: AtomicBool,
    /// `submit` answers "nonce too low": the transaction is mined already, or replaced.
    pub nonce_used: AtomicBool,
    pub sent: AtomicUsize,
    /// Transfers signed (refunds): each one would pay the payer.
    pub signed: AtomicUsize,
    /// `sign_transfer` cannot reach the node (nothing is signed or sent).
    pub unreachable: AtomicBool,
}

impl FakeChain {
    pub fn landing(landing: Landing) -> FakeChain {
        FakeChain {
            landing: Mutex::new(landing),
            landings: Mutex::default(),
            refuse: AtomicBool::new(false),
            nonce_used: AtomicBool::new(false),
            sent: AtomicUsize::new(0),
            signed: AtomicUsize::new(0),
            unreachable: Default::default(),
        }
    }

    /// From now on, every transaction lands as `landing` says.
    pub fn lands(&self, landing: Landing) {
        *self.landing.lock().unwrap() = landing;
    }

    /// A chain whose node refuses every transaction sent (the wallet cannot pay the gas).
    pub fn refusing(landing: Landing) -> FakeChain {
        let chain = FakeChain::landing(landing);
        chain.refuse.store(true, Ordering::SeqCst);
        chain
    }
}

fn not_here<'a, T: Send + 'a>() -> ChainFuture<'a, T> {
    Box::pin(async { Err(ChainError::Unavailable("not used by the pipeline".into())) })
}

impl UsdcChain for FakeChain {
    fn network(&self) -> Network {
        Network::Base
    }
    fn usdc_asset(&self) -> &str {
        "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
    }
    fn network_id(&self) -> ChainFuture<'_, String> {
        Box::pin(async { Ok("eip155:8453".to_string()) })
    }
    fn funding_uri(&self, _: &str) -> String {
        unreachable!("not used by the pipeline")
    }
    fn balances<'a>(&'a self, _: &'a str) -> ChainFuture<'a, Balances> {
        not_here()
    }
    fn sign_transfer<'a>(&'a self, _: &'a WalletKey, _: &'a str, _: MicroUsdc, _: bool) -> ChainFuture<'a, SignedTx> {
        if self.unreachable.load(Ordering::SeqCst) {
            return Box::pin(async { Err(ChainError::Unavailable("the node is down".into())) });
        }
        let n = self.signed.fetch_add(1, Ordering::SeqCst) + 1;
        Box::pin(async move {
            Ok(SignedTx {
                id: format!("0xtransfer{n}"),
                raw: "0x00".into(),
                valid_until: None,
            })
        })
    }
    fn can_receive<'a>(&'a self, _: &'a str) -> ChainFuture<'a, bool> {
        Box::pin(async { Ok(true) })
    }
    fn submit<'a>(&'a self, _: &'a SignedTx) -> ChainFuture<'a, ()> {
        self.sent.fetch_add(1, Ordering::SeqCst);
        let refuse = self.refuse.load(Ordering::SeqCst);
        let nonce_used = self.nonce_used.load(Ordering::SeqCst);
        Box::pin(async move {
            if refuse {
                Err(ChainError::Refused("insufficient funds for gas * price + value".into()))
            } else if nonce_used {
                Err(ChainError::NonceUsed("nonce too low".into()))
            } else {
                Ok(())
            }
        })
    }
    fn landing<'a>(&'a self, tx: &'a SignedTx) -> ChainFuture<'a, Landing> {
        let landing = match self.landings.lock().unwrap().get(&tx.id) {
            Some(own) => own.clone(),
            None => self.landing.lock().unwrap().clone(),
        };
        Box::pin(async move { Ok(landing) })
    }
    fn fee_paid<'a>(&'a self, _: &'a str) -> ChainFuture<'a, Option<u128>> {
        Box::pin(async { Ok(Some(5_000)) })
    }
}

/// A scheme whose payload is `{payer, nonce, amount}`; `elsewhere` is a settlement someone
/// else made, as the chain would show it.
#[derive(Default)]
pub struct FakeScheme {
    /// Found before anything is signed (`Attempt::check`).
    pub settled_before: Option<String>,
    /// Found after ours failed (`Scheme::settled_elsewhere`).
    pub settled_after: Mutex<Option<String>>,
    /// The payer signed the settlement whole (`Attempt::signed_whole_by_payer`).
    pub signed_whole: bool,
    /// Its time is up (`Attempt::still_valid` refuses it `payment_expired`).
    pub expired: bool,
}

/// A transaction of someone else's that settled a payment with one transfer, log 0.
fn by_someone_else(transaction: String) -> SettledBy {
    SettledBy {
        transaction,
        transfer_log_index: Some(0),
    }
}

struct FakeAttempt {
    payer: String,
    nonce: u64,
    settled_before: Option<String>,
    signed_whole: bool,
    expired: bool,
}

impl Scheme for FakeScheme {
    fn network(&self) -> Network {
        Network::Base
    }

    fn verify(&self, _: &Services, payload: &Value, terms: &Terms) -> Result<Box<dyn Attempt>, PaymentError> {
        if payload["amount"].as_u64() != Some(terms.price.0) {
            return Err(PaymentError::new("payment_amount_mismatch", "not the price"));
        }
        Ok(Box::new(FakeAttempt {
            payer: payload["payer"].as_str().unwrap_or_default().to_string(),
            nonce: payload["nonce"].as_u64().unwrap_or_default(),
            settled_before: self.settled_before.clone(),
            signed_whole: self.signed_whole,
            expired: self.expired,
        }))
    }

    fn settled_elsewhere<'a>(
        &'a self,
        _: &'a Services,
        _: &'a str,
        _: &'a Terms,
        _: Lookup<'a>,
    ) -> BoxFuture<'a, Result<Option<SettledBy>, ChainError>> {
        let found = self.settled_after.lock().unwrap().clone().map(by_someone_else);
        Box::pin(async move { Ok(found) })
    }

    fn expired<'a>(&'a self, _: &'a Services, _: u64) -> BoxFuture<'a, Result<bool, ChainError>> {
        Box::pin(async { Ok(true) })
    }
}

impl Attempt for FakeAttempt {
    fn payer(&self) -> String {
        self.payer.clone()
    }
    fn complete(&mut self, _: &WalletKey) -> Result<(), PaymentError> {
        Ok(())
    }
    fn identity(&self) -> String {
        format!("{}:{}", self.payer, self.nonce)
    }
    fn valid_until<'a>(&'a self, _: &'a Services) -> BoxFuture<'a, Result<Option<u64>, ChainError>> {
        Box::pin(async { Ok(None) })
    }

    fn still_valid<'a>(&'a self, _: &'a Services) -> BoxFuture<'a, Result<(), ServiceError>> {
        let expired = self.expired;
        Box::pin(async move {
            match expired {
                true => Err(super::refused("payment_expired", "its time is up")),
                false => Ok(()),
            }
        })
    }

    fn check<'a>(&'a self, _: &'a Services, _: &'a Terms) -> BoxFuture<'a, Result<Option<SettledBy>, ServiceError>> {
        let found = self.settled_before.clone().map(by_someone_else);
        Box::pin(async move { Ok(found) })
    }
    fn prepare<'a>(&'a self, _: &'a Services, _: &'a WalletKey) -> BoxFuture<'a, Result<SignedTx, ChainError>> {
        let id = format!("0xours{}", self.nonce);
        Box::pin(async move {
            Ok(SignedTx {
                id,
                raw: "0x00".into(),
                valid_until: None,
            })
        })
    }
    fn uses_wallet_nonce(&self) -> bool {
        false
    }
    fn signed_whole_by_payer(&self) -> bool {
        self.signed_whole
    }
}

pub struct Fixture {
    _dir: tempfile::TempDir,
    pub services: Services,
    pub offer: Offer,
    /// The Base chain the services reach through [`crate::chains::Chains::get`]: refunds,
    /// transfers, reconciliation and fee look-ups. A settlement's own rails are the test's.
    pub chain: Arc<FakeChain>,
}

/// Where the fixture's real chain clients and SaaS bases point: a closed loopback port, so
/// anything that escapes the fakes fails at once on this machine (and a request anywhere
/// else ends the test binary: see the outbound module's unit-test guard).
pub const NOWHERE: &str = "http://127.0.0.1:9";

/// An agent selling on Base at 0.01 USDC, commands none.
pub const SELLER: &str = r#"
username = "seller"
name = "Seller"
personality = "Sells."

[x402]
enabled = true
default_price_usd = 0.01
networks = ["base"]
"#;

/// The agent `manifest` describes (named `seller`), with a real Base wallet, in a temp
/// data dir, and its offer.
pub async fn fixture(manifest: &str) -> Fixture {
    fixture_with(manifest, |_| {}).await
}

/// A fixture whose settings `change` adjusts first.
pub async fn fixture_with(manifest: &str, change: impl FnOnce(&mut crate::config::Settings)) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = crate::config::Settings::load(Some(dir.path())).unwrap();
    settings.x402.x402_settle_timeout_secs = 1;
    settings.chains.base_rpc_url = Some(NOWHERE.into());
    settings.chains.solana_rpc_url = Some(NOWHERE.into());
    settings.chatapp.chatapp_api_base = NOWHERE.into();
    settings.social.social_api_base = NOWHERE.into();
    change(&mut settings);
    let store = crate::app::open_store(&settings).await.unwrap();
    let services = crate::app::services(settings, store, "http://test".into()).unwrap();
    crate::services::accounts::create(&services.store, "acme", Plan::Free, None, None)
        .await
        .unwrap();
    let manifest = crate::manifest::parse(manifest, "seller.toml", crate::manifest::PluginSource::Uploaded).unwrap();
    let applied = crate::services::agents::apply(&services, &manifest, Some("acme"))
        .await
        .unwrap();
    wallets::add(&services, &applied.agent_id, Network::Base, None)
        .await
        .unwrap();
    let offer = offer(&services, "seller", Network::Base).await.unwrap();
    let chain = Arc::new(FakeChain::landing(Landing::Confirmed));
    let stand_in: Arc<dyn UsdcChain> = chain.clone();
    assert!(services.chains.stand_in.set(stand_in).is_ok());
    Fixture {
        _dir: dir,
        services,
        offer,
        chain,
    }
}

/// A Base address of its own for the payer called `name` (a refund must reach an address).
pub fn address_of(name: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(name.as_bytes());
    format!("0x{}", hex::encode(&digest[..20]))
}

/// A v1 payment of `amount` by `payer`; `nonce` tells payments of one payer apart.
pub fn payment(payer: &str, nonce: u64, amount: u64) -> Payment {
    Payment {
        version: Version::V1,
        payload: json!({ "payer": payer, "nonce": nonce, "amount": amount }),
        accepted: None,
        extensions: serde_json::Map::new(),
    }
}

impl Fixture {
    /// Settles `payment` for a message at the default price, on the fake rails; a payment
    /// met again is a panic (see [`Fixture::settle_request`]).
    pub async fn settle(
        &self,
        scheme: &FakeScheme,
        chain: &FakeChain,
        payment: &Payment,
    ) -> Result<Settled, ServiceError> {
        match self
            .settle_request(scheme, chain, payment, &json!({ "message": "hi" }))
            .await?
        {
            Settlement::Now(settled) => Ok(settled),
            Settlement::Before(earlier) => panic!("met again: payment {}", earlier.settled.payment_id),
        }
    }

    /// Settles `payment` for `request`, a message at the default price, on the fake rails.
    pub async fn settle_request(
        &self,
        scheme: &FakeScheme,
        chain: &FakeChain,
        payment: &Payment,
        request: &Value,
    ) -> Result<Settlement, ServiceError> {
        let extensions = self.offer.extensions(None);
        let purchase = Purchase {
            price: PRICE,
            command: None,
            request,
            client: Some(CLIENT),
            extensions: &extensions,
        };
        let rails = Rails { scheme, chain };
        settle(&self.services, rails, &self.offer, payment, purchase, None).await
    }

    /// Each recorded payment: (state, transaction).
    pub async fn ledger(&self) -> Vec<(String, Option<String>)> {
        let mut rows = self
            .services
            .store
            .payments_of(&self.offer.agent.id, 100)
            .await
            .unwrap();
        rows.sort_by(|a, b| a.identity.cmp(&b.identity));
        rows.into_iter()
            .map(|p| (p.state.as_str().to_string(), p.transaction_signature))
            .collect()
    }
}
