//! The payment pipeline on the fake network (`fake.rs`): every branch (confirmed, landed
//! and failed, dropped, still pending, settled by someone else, replayed, a v2 requirement
//! other than the offer) checked without a node, beside the end-to-end tests on the local
//! chains.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::Ordering;

use serde_json::json;

use super::fake::*;
use super::*;
use crate::x402::wire::{RequirementsV2, Version};

mod refunds;

/// The error of a payment that must not settle.
fn refused(result: Result<Settled, ServiceError>) -> ServiceError {
    match result {
        Ok(settled) => panic!("settled by {}", settled.transaction),
        Err(err) => err,
    }
}

fn refusal_code(err: ServiceError) -> &'static str {
    match err {
        ServiceError::X402(X402Error::Refused(refusal)) => refusal.code,
        other => panic!("not a refusal: {other:?}"),
    }
}

#[tokio::test]
async fn a_confirmed_settlement_is_recorded_once_and_never_used_again() {
    let f = fixture(SELLER).await;
    let (scheme, chain) = (FakeScheme::default(), FakeChain::landing(Landing::Confirmed));
    let settled = f.settle(&scheme, &chain, &payment("ann", 1, 10_000)).await.unwrap();
    assert_eq!(settled.transaction, "0xours1");
    assert_eq!(settled.amount, PRICE);
    assert_eq!(f.ledger().await, vec![("settled".into(), Some("0xours1".into()))]);
    settled.served(&f.services, Some("the answer".into())).await.unwrap();
    drop(settled);
    // The same payment for another request: refused from the record, nothing sent again.
    let other = json!({ "message": "something else" });
    let again = f
        .settle_request(&scheme, &chain, &payment("ann", 1, 10_000), &other)
        .await;
    assert_eq!(refusal_code(again.err().expect("refused")), "payment_already_used");
    assert_eq!(chain.sent.load(Ordering::SeqCst), 1);
}

/// A payment `payer` names `id` (x402's payment-identifier), in version 2.
fn named(f: &Fixture, payer: &str, nonce: u64, id: &str) -> Payment {
    let mut v2 = payment(payer, nonce, 10_000);
    v2.version = Version::V2;
    v2.accepted = f.offer.requirement_v2(&f.services, PRICE);
    let mut extension = crate::x402::payment_identifier::declaration();
    extension["info"]["id"] = json!(id);
    v2.extensions
        .insert(crate::x402::payment_identifier::NAME.into(), extension);
    v2
}

/// The kept answer a payment met again gives.
fn earlier(met: Result<Settlement, ServiceError>) -> (String, Settled) {
    match met {
        Ok(Settlement::Before(Earlier {
            answer: Bought::Kept(answer),
            settled,
        })) => (answer, settled),
        Ok(Settlement::Before(_)) => panic!("met again without a kept answer"),
        Ok(Settlement::Now(settled)) => panic!("settled again by {}", settled.transaction),
        Err(err) => panic!("refused: {err:?}"),
    }
}

/// Ann's payment, named `pay_0123456789abcdef`, settled and served for `ask` with the
/// answer "sunny": the fixture, its rails, the request and the payment.
async fn answered_sunny() -> (Fixture, FakeScheme, FakeChain, Value, Payment) {
    let f = fixture(SELLER).await;
    let (scheme, chain) = (FakeScheme::default(), FakeChain::landing(Landing::Confirmed));
    let ask = json!({ "message": "weather?" });
    let first = named(&f, "ann", 1, "pay_0123456789abcdef");
    let Settlement::Now(settled) = f.settle_request(&scheme, &chain, &first, &ask).await.unwrap() else {
        panic!("met again");
    };
    settled.served(&f.services, Some("sunny".into())).await.unwrap();
    (f, scheme, chain, ask, first)
}

#[tokio::test]
async fn a_retry_of_the_same_request_gets_the_kept_answer_and_pays_nothing_more() {
    let (f, scheme, chain, ask, first) = answered_sunny().await;
    // The same signed payment, and a new one under the same id: the kept answer, the
    // first payment's receipt, and nothing more sent.
    let (answer, receipt) = earlier(f.settle_request(&scheme, &chain, &first, &ask).await);
    assert_eq!((answer.as_str(), receipt.transaction.as_str()), ("sunny", "0xours1"));
    let renamed = named(&f, "ann", 2, "pay_0123456789abcdef");
    let (answer, _) = earlier(f.settle_request(&scheme, &chain, &renamed, &ask).await);
    assert_eq!(answer, "sunny");
    assert_eq!(chain.sent.load(Ordering::SeqCst), 1);
    // The id on another request is refused; another payer's same id is its own.
    let other = json!({ "message": "something else" });
    let conflict = f.settle_request(&scheme, &chain, &renamed, &other).await;
    assert_eq!(
        refusal_code(conflict.err().expect("refused")),
        "payment_identifier_conflict"
    );
    let bob = named(&f, "bob", 1, "pay_0123456789abcdef");
    assert!(matches!(
        f.settle_request(&scheme, &chain, &bob, &ask).await,
        Ok(Settlement::Now(_))
    ));
    assert_eq!(chain.sent.load(Ordering::SeqCst), 2);
}

/// Once settled, a payment is public on its chain: past its own time limit, the same
/// signed payment is anyone's copy, and is refused even for the same request. The payer's
/// id is not public, and still gets the answer.
#[tokio::test]
async fn the_same_signed_payment_is_answered_again_only_within_its_time_limit() {
    let (f, scheme, chain, ask, first) = answered_sunny().await;
    let past = crate::clock::now_ms() - (MAX_TIMEOUT_SECONDS as i64 + 1) * 1000;
    f.services
        .store
        .write(move |db| {
            db.execute("UPDATE payments SET created_at = ?1", crate::store::sql::args![past])?;
            Ok(())
        })
        .await
        .unwrap();
    // A copy from the chain carries no id: the id travels only to this server.
    let mut copy = first.clone();
    copy.extensions.clear();
    let copied = f.settle_request(&scheme, &chain, &copy, &ask).await;
    assert_eq!(refusal_code(copied.err().expect("refused")), "payment_already_used");
    let renamed = named(&f, "ann", 2, "pay_0123456789abcdef");
    assert_eq!(
        earlier(f.settle_request(&scheme, &chain, &renamed, &ask).await).0,
        "sunny"
    );
    assert_eq!(chain.sent.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_id_whose_payment_took_nothing_may_pay_again() {
    let f = fixture(SELLER).await;
    let scheme = FakeScheme::default();
    let ask = json!({ "message": "weather?" });
    let dropped = FakeChain::refusing(Landing::Pending);
    let first = named(&f, "ann", 1, "pay_0123456789abcdef");
    let err = f
        .settle_request(&scheme, &dropped, &first, &ask)
        .await
        .err()
        .expect("refused");
    assert_eq!(refusal_code(err), "settlement_failed");
    // Nothing was taken: the retry under the same id settles its own payment.
    let ok = FakeChain::landing(Landing::Confirmed);
    let retry = named(&f, "ann", 2, "pay_0123456789abcdef");
    assert!(matches!(
        f.settle_request(&scheme, &ok, &retry, &ask).await,
        Ok(Settlement::Now(_))
    ));
    assert_eq!(ok.sent.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_payment_that_does_not_pay_the_price_is_refused_before_anything_is_recorded() {
    let f = fixture(SELLER).await;
    let (scheme, chain) = (FakeScheme::default(), FakeChain::landing(Landing::Confirmed));
    let err = refused(f.settle(&scheme, &chain, &payment("ann", 1, 9_999)).await);
    assert_eq!(refusal_code(err), "payment_amount_mismatch");
    assert!(f.ledger().await.is_empty());
    assert_eq!(chain.sent.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_v2_payment_must_have_accepted_exactly_the_offer() {
    let f = fixture(SELLER).await;
    let (scheme, chain) = (FakeScheme::default(), FakeChain::landing(Landing::Confirmed));
    let offered: RequirementsV2 = f.offer.requirement_v2(&f.services, PRICE).unwrap();
    let mut cheaper = offered.clone();
    cheaper.amount = "1".into();
    let mut v2 = payment("ann", 1, 10_000);
    v2.version = Version::V2;
    v2.accepted = Some(cheaper);
    let err = refused(f.settle(&scheme, &chain, &v2).await);
    assert_eq!(refusal_code(err), "payment_requirement_mismatch");
    assert!(f.ledger().await.is_empty());

    v2.accepted = Some(offered);
    f.settle(&scheme, &chain, &v2).await.unwrap();
    // The identity is the payment's, not its version's: v1 cannot reuse it.
    let other = json!({ "message": "something else" });
    let err = f
        .settle_request(&scheme, &chain, &payment("ann", 1, 10_000), &other)
        .await;
    assert_eq!(refusal_code(err.err().expect("refused")), "payment_already_used");
}

#[tokio::test]
async fn a_settlement_that_lands_and_fails_costs_the_payer_its_cool_off() {
    let f = fixture(SELLER).await;
    let scheme = FakeScheme::default();
    let chain = FakeChain::landing(Landing::Failed("transfer amount exceeds balance".into()));
    let err = refused(f.settle(&scheme, &chain, &payment("ann", 1, 10_000)).await);
    assert_eq!(refusal_code(err), "settlement_failed");
    assert_eq!(f.ledger().await[0].0, "failed");
    // The agent paid the fee: the payer waits before it may present another payment.
    let next = refused(f.settle(&scheme, &chain, &payment("ann", 2, 10_000)).await);
    assert!(
        matches!(next, ServiceError::X402(X402Error::PayerCoolingOff { retry_after_secs }) if retry_after_secs > 500),
        "{next:?}"
    );
    // Another payer is not held back.
    let ok = FakeChain::landing(Landing::Confirmed);
    f.settle(&scheme, &ok, &payment("bob", 1, 10_000)).await.unwrap();
}

/// A fresh payer has no cool-off yet, so a stream of them from one address could each cost
/// the agent a failed settlement's fee: each one that lands and fails is charged to the
/// client address that presented it (and to its payer) as `x402_failed_settlement_weight`
/// requests. One dropped cost nothing and is charged nothing.
#[tokio::test]
async fn a_failed_settlement_is_charged_to_its_payer_and_client_address() {
    let f = fixture(SELLER).await;
    let limiter = &f.services.x402_limiter;
    let remaining = |decision: crate::services::rate_limit::RateDecision| decision.remaining;
    let now = crate::clock::now_ms;
    let scheme = FakeScheme::default();
    let dropped = FakeChain::landing(Landing::Dropped("expired".into()));
    refused(f.settle(&scheme, &dropped, &payment("bob", 1, 10_000)).await);
    assert_eq!(
        remaining(limiter.client(CLIENT, now()).await.unwrap()),
        59,
        "nothing charged"
    );

    let failing = FakeChain::landing(Landing::Failed("transfer amount exceeds balance".into()));
    refused(f.settle(&scheme, &failing, &payment("ann", 1, 10_000)).await);
    // 60 a minute: the check above, 10 for the failure, and this one.
    assert_eq!(remaining(limiter.client(CLIENT, now()).await.unwrap()), 48);
    // 20 a minute: the payment presented, 10 for its failure, and this one.
    assert_eq!(remaining(limiter.payer("base", "ann", now()).await.unwrap()), 8);
}

#[tokio::test]
async fn a_dropped_settlement_fails_without_a_cool_off() {
    let f = fixture(SELLER).await;
    let scheme = FakeScheme::default();
    let chain = FakeChain::refusing(Landing::Pending);
    let err = refused(f.settle(&scheme, &chain, &payment("ann", 1, 10_000)).await);
    assert_eq!(refusal_code(err), "settlement_failed");
    assert_eq!(f.ledger().await[0].0, "failed");
    // Nobody paid a fee, so the payer may pay again at once.
    let ok = FakeChain::landing(Landing::Confirmed);
    f.settle(&scheme, &ok, &payment("ann", 2, 10_000)).await.unwrap();
}

/// A settlement the node refused because it has the very transaction already (the payer
/// signed it whole and its wallet sent it too): the chain says it landed, so it is served.
/// One the payer could not have sent is failed at the refusal, as above.
#[tokio::test]
async fn a_refused_settlement_the_payer_sent_itself_is_served() {
    let f = fixture(SELLER).await;
    let chain = FakeChain::refusing(Landing::Confirmed);
    let whole = FakeScheme {
        signed_whole: true,
        ..FakeScheme::default()
    };
    let settled = f.settle(&whole, &chain, &payment("ann", 1, 10_000)).await.unwrap();
    assert_eq!(settled.transaction, "0xours1");
    drop(settled);
    let ours = refused(
        f.settle(&FakeScheme::default(), &chain, &payment("ann", 2, 10_000))
            .await,
    );
    assert_eq!(refusal_code(ours), "settlement_failed");
    let states: Vec<String> = f.ledger().await.into_iter().map(|(state, _)| state).collect();
    assert_eq!(states, ["settled", "failed"]);
}

/// A refused settlement the payer signed whole whose time is up is looked at once, not
/// waited on: not landed, it failed at once.
#[tokio::test]
async fn a_refused_settlement_past_its_time_is_failed_at_once() {
    let f = fixture(SELLER).await;
    let expired = FakeScheme {
        signed_whole: true,
        expired: true,
        ..FakeScheme::default()
    };
    let started = std::time::Instant::now();
    let err = refused(
        f.settle(
            &expired,
            &FakeChain::refusing(Landing::Pending),
            &payment("ann", 1, 10_000),
        )
        .await,
    );
    assert_eq!(refusal_code(err), "settlement_failed");
    assert!(
        started.elapsed() < std::time::Duration::from_millis(900),
        "not waited on for the settle timeout (1 s here)"
    );
}

/// A settlement the payer signed whole cost the payer its fee, not the agent: landed and
/// failed, no cool-off follows; landed or not, no fee is counted to the agent. Ours are.
#[tokio::test]
async fn a_settlement_the_payer_paid_the_fee_of_costs_the_agent_nothing() {
    let f = fixture(SELLER).await;
    let whole = FakeScheme {
        signed_whole: true,
        ..FakeScheme::default()
    };
    let chain = FakeChain::landing(Landing::Failed("insufficient funds".into()));
    let err = refused(f.settle(&whole, &chain, &payment("ann", 1, 10_000)).await);
    assert_eq!(refusal_code(err), "settlement_failed");
    assert_eq!(f.ledger().await[0].0, "failed");
    let ok = FakeChain::landing(Landing::Confirmed);
    drop(f.settle(&whole, &ok, &payment("ann", 2, 10_000)).await.unwrap());
    drop(
        f.settle(&FakeScheme::default(), &ok, &payment("ann", 3, 10_000))
            .await
            .unwrap(),
    );
    assert!(f.services.lifecycle.drain(std::time::Duration::from_secs(5)).await);
    let usage = f
        .services
        .store
        .usage_by_agent(&f.offer.agent.account_id, 0, i64::MAX)
        .await
        .unwrap();
    let fees: i64 = usage.iter().filter(|u| u.metric == "fees").map(|u| u.total).sum();
    assert_eq!(fees, 5_000, "the one fee the agent paid: {usage:?}");
}

#[tokio::test]
async fn a_settlement_still_pending_stays_recorded_for_recovery() {
    let f = fixture(SELLER).await;
    let (scheme, chain) = (FakeScheme::default(), FakeChain::landing(Landing::Pending));
    let err = refused(f.settle(&scheme, &chain, &payment("ann", 1, 10_000)).await);
    assert!(
        matches!(&err, ServiceError::X402(X402Error::SettlementPending { transaction, .. }) if transaction == "0xours1"),
        "{err:?}"
    );
    // Recorded with its signed settlement: recovery finds it, nothing was served.
    assert_eq!(f.ledger().await, vec![("verified".into(), Some("0xours1".into()))]);
}

/// A recovery pass lists a payment while its request is still at work (`settled`), and
/// reaches it after the request served it and let go: it leaves it alone. Before, it
/// refunded it as never answered, and the payer had the answer and its money back (found
/// by 2,880 paid requests through three hosts).
#[tokio::test]
async fn a_payment_served_after_recovery_listed_it_is_not_refunded() {
    let f = fixture(SELLER).await;
    let (scheme, chain) = (FakeScheme::default(), FakeChain::landing(Landing::Confirmed));
    let settled = f.settle(&scheme, &chain, &payment("ann", 1, 10_000)).await.unwrap();
    let listed = f.services.store.unfinished_payments(0).await.unwrap();
    assert_eq!(listed.len(), 1, "listed while its request holds it");
    settled.served(&f.services, Some("sunny".into())).await.unwrap();
    drop(settled);

    let taken = recovery::take_up_unfinished(&f.services, listed).await.unwrap();
    assert_eq!(taken, 0, "nothing left to finish");
    assert_eq!(f.ledger().await, vec![("served".into(), Some("0xours1".into()))]);
}

/// A recovery pass takes a paid job for cut off (its lease lapsed) while its host ends it
/// succeeded: the pass's refund of the job's payer finds the job succeeded and pays
/// nothing. Before, the payer had the job's result and its money back.
#[tokio::test]
async fn a_paid_job_that_succeeded_is_not_refunded_by_a_late_pass() {
    use crate::store::{JobOutcome, JobRecord, JobState};
    let f = fixture(SELLER).await;
    let (scheme, chain) = (FakeScheme::default(), FakeChain::landing(Landing::Confirmed));
    let settled = f.settle(&scheme, &chain, &payment("ann", 1, 10_000)).await.unwrap();
    let store = &f.services.store;
    let job = JobRecord {
        id: "job_paid".into(),
        agent_id: settled.agent_id.clone(),
        command: "report".into(),
        origin: "x402".into(),
        parameters: json!({}),
        raw_text: None,
        state: JobState::Queued,
        progress: None,
        response: None,
        format: None,
        artifact_url: None,
        error: None,
        code: None,
        created_at: crate::clock::now_ms(),
        expires_at: crate::clock::now_ms() + 3_600_000,
        finished_at: None,
    };
    store.insert_job(job, Some(settled.payment_id.clone())).await.unwrap();
    drop(settled);
    assert!(store.start_job("job_paid", 0).await.unwrap());
    assert_eq!(
        store.jobs_cut_off(crate::clock::now_ms()).await.unwrap().len(),
        1,
        "listed as cut off"
    );
    let succeeded = JobOutcome::Succeeded {
        response: "the report".into(),
        format: "text".into(),
        artifact_url: None,
    };
    assert!(store.finish_job("job_paid", succeeded).await.unwrap());

    refund_failed_job(&f.services, "job_paid", "cut off", "internal_error").await;
    assert_eq!(f.ledger().await, vec![("served".into(), Some("0xours1".into()))]);
    assert_eq!(f.chain.signed.load(Ordering::SeqCst), 0, "no refund went out");
}

#[tokio::test]
async fn money_that_arrived_by_someone_elses_transaction_is_served_once() {
    let f = fixture(SELLER).await;
    // Already on chain before we sign: served with that transaction, nothing sent.
    let before = FakeScheme {
        settled_before: Some("0xtheirs".into()),
        ..FakeScheme::default()
    };
    let chain = FakeChain::landing(Landing::Confirmed);
    let settled = f.settle(&before, &chain, &payment("ann", 1, 10_000)).await.unwrap();
    assert_eq!(settled.transaction, "0xtheirs");
    assert_eq!(chain.sent.load(Ordering::SeqCst), 0);
    drop(settled);

    // Ours failed because theirs won the race: served with theirs, and no cool-off.
    let after = FakeScheme::default();
    *after.settled_after.lock().unwrap() = Some("0xfront".into());
    let lost = FakeChain::landing(Landing::Failed("authorization is used".into()));
    let settled = f.settle(&after, &lost, &payment("ann", 2, 10_000)).await.unwrap();
    assert_eq!(settled.transaction, "0xfront");
    drop(settled);
    let ok = FakeChain::landing(Landing::Confirmed);
    f.settle(&FakeScheme::default(), &ok, &payment("ann", 3, 10_000))
        .await
        .unwrap();
}

/// The discovery list is one query, then served from memory until something changes: no
/// query per agent or per wallet, and none at all for a list already read.
#[tokio::test]
async fn the_discovery_list_is_one_query_then_served_from_memory() {
    let f = fixture(SELLER).await;
    let services = &f.services;
    for i in 0..11 {
        let manifest = crate::manifest::parse(
            &format!("username = \"seller{i}\"\nname = \"S\"\n[x402]\nenabled = true\ndefault_price_usd = 0.01\nnetworks = [\"base\"]\n"),
            "seller.toml",
            crate::manifest::PluginSource::Uploaded,
        )
        .unwrap();
        let applied = crate::services::agents::apply(services, &manifest, Some("acme"))
            .await
            .unwrap();
        wallets::add(services, &applied.agent_id, Network::Base, None)
            .await
            .unwrap();
    }
    // The read cache serves entries while a watcher checks for writes (here, once at start).
    let _watcher = services
        .store
        .watch_for_changes(std::time::Duration::from_secs(5), 64 << 20);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;

    let before = services.store.round_trips();
    let first = catalog::catalog(services, &[catalog::Transport::Http], 100, 0)
        .await
        .unwrap();
    assert_eq!((first.total, first.items.len()), (12, 12));
    let first_trips = services.store.round_trips() - before;
    assert!(
        first_trips <= 1 + 12,
        "one query for the list, one per agent not yet cached: {first_trips}"
    );
    let before = services.store.round_trips();
    let again = catalog::catalog(services, &[catalog::Transport::Http], 100, 0)
        .await
        .unwrap();
    assert_eq!(again.items.len(), 12);
    assert_eq!(services.store.round_trips() - before, 0, "served from memory");
    // A new wallet is a write the cache hears of: the list is read again, with it.
    let manifest = crate::manifest::parse(
        "username = \"late\"\nname = \"L\"\n[x402]\nenabled = true\ndefault_price_usd = 0.02\nnetworks = [\"base\"]\n",
        "late.toml",
        crate::manifest::PluginSource::Uploaded,
    )
    .unwrap();
    let applied = crate::services::agents::apply(services, &manifest, Some("acme"))
        .await
        .unwrap();
    wallets::add(services, &applied.agent_id, Network::Base, None)
        .await
        .unwrap();
    assert_eq!(
        catalog::catalog(services, &[catalog::Transport::Http], 100, 0)
            .await
            .unwrap()
            .total,
        13
    );
}

/// A transaction without a log index (every Solana settlement, our own Base relays) pays
/// one payment in all: a second payment naming it, whatever its identity, is not settled
/// by it (payments recorded under an earlier identity form cannot be paid twice), nor is
/// one recorded as settled by it already (presented in another form once it landed).
#[tokio::test]
async fn a_transaction_without_a_log_index_settles_one_payment() {
    let f = fixture(SELLER).await;
    let agent_id = f.offer.agent.id.clone();
    let store = &f.services.store;
    let payment = |id: &str, identity: &str| crate::store::NewPayment {
        id: id.into(),
        identity: identity.into(),
        agent_id: agent_id.clone(),
        network: Network::Solana,
        payer: "payer".into(),
        pay_to: "agent".into(),
        amount: PRICE,
        command: None,
        request: "{}".into(),
        transaction: None,
        raw_tx: None,
        valid_until: None,
        x402_version: 2,
        payment_ref: None,
        facilitator: Some("https://facilitator.example".into()),
        transfer_log_index: None,
        upto: false,
    };
    for (id, identity) in [("pay_old", "solana:old-form"), ("pay_new", "solana:message:new-form")] {
        store.insert_payment(payment(id, identity)).await.unwrap();
    }
    let by = || crate::store::SettledBy {
        transaction: "5igned".into(),
        transfer_log_index: None,
    };
    assert!(store.settle_payment("pay_old", Some(by())).await.unwrap());
    assert!(
        !store.settle_payment("pay_new", Some(by())).await.unwrap(),
        "one transfer, one payment"
    );
    let landed = crate::store::NewPayment {
        transaction: Some("5igned".into()),
        facilitator: None,
        ..payment("pay_landed", "solana:message:third-form")
    };
    assert!(
        matches!(
            store.insert_payment(landed).await,
            Err(crate::store::StoreError::Conflict(_))
        ),
        "a transfer that paid one payment is no other's"
    );
    let another = crate::store::NewPayment {
        transaction: Some("5igned-other".into()),
        facilitator: None,
        ..payment("pay_other", "solana:message:fourth-form")
    };
    store.insert_payment(another).await.unwrap();
}
