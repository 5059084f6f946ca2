//! Refunds on the fake network: a refund's transfer resent, recorded failed that landed,
//! failed for good, failing every time up to its attempts and its fee bound, or waiting
//! for its node; each paid once.

use super::*;

/// A payer with a real Base address: a refund is paid to it.
const PAYER: &str = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

/// A payment of `PAYER`'s, settled, whose refund went out as transfer `tr_first` and was
/// not seen confirmed in time: the state a refund is left in for recovery.
async fn refund_sent_unconfirmed(f: &Fixture) -> crate::store::PaymentRecord {
    let confirmed = FakeChain::landing(Landing::Confirmed);
    let settled = f
        .settle(&FakeScheme::default(), &confirmed, &payment(PAYER, 1, 10_000))
        .await
        .unwrap();
    let store = &f.services.store;
    assert!(
        store
            .start_refund(&settled.payment_id, "tr_first", "the command failed", true)
            .await
            .unwrap()
    );
    let wallet = wallets::wallet(&f.services, &settled.agent_id, Network::Base)
        .await
        .unwrap();
    store
        .insert_transfer(crate::store::NewTransfer {
            id: "tr_first".into(),
            agent_id: settled.agent_id.clone(),
            network: Network::Base,
            kind: crate::store::TransferKind::Refund,
            sender: wallet.address.clone(),
            recipient: PAYER.into(),
            amount: PRICE,
            memo: None,
        })
        .await
        .unwrap();
    store
        .set_transfer_signed("tr_first", "0xtransfer0", "0x00", None)
        .await
        .unwrap();
    store.payment(&settled.payment_id).await.unwrap().unwrap()
}

async fn resume_refund(f: &Fixture, payment_id: &str) {
    let payment = f.services.store.payment(payment_id).await.unwrap().unwrap();
    refund::Refund::of(&payment, Network::Base)
        .resume(&f.services, &payment)
        .await
        .unwrap();
}

async fn transfer_state(f: &Fixture, id: &str) -> crate::store::TransferState {
    f.services.store.transfer(id).await.unwrap().unwrap().state
}

/// The refund was mined, but the node's receipt index lags: sent again, it is refused
/// "nonce too low". That is no verdict: the transfer stays pending until its receipt shows,
/// and the payer is paid back once.
#[tokio::test]
async fn a_refund_resent_as_nonce_too_low_stays_pending_and_is_paid_once() {
    use crate::store::{PaymentState, TransferState};
    let f = fixture(SELLER).await;
    let chain = &f.chain;
    chain.lands(Landing::Pending);
    chain.nonce_used.store(true, Ordering::SeqCst);
    let payment = refund_sent_unconfirmed(&f).await;

    wallets::reconcile(&f.services).await.unwrap();
    assert_eq!(chain.sent.load(Ordering::SeqCst), 1, "sent again");
    assert_eq!(transfer_state(&f, "tr_first").await, TransferState::Pending);
    resume_refund(&f, &payment.id).await;
    assert_eq!(
        chain.signed.load(Ordering::SeqCst),
        0,
        "no second refund while one may land"
    );

    // Its receipt shows: the reconciliation that waits for it records it, and the refund ends.
    chain.lands(Landing::Confirmed);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while transfer_state(&f, "tr_first").await != TransferState::Confirmed {
        assert!(std::time::Instant::now() < deadline, "the transfer was never confirmed");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    resume_refund(&f, &payment.id).await;
    let payment = f.services.store.payment(&payment.id).await.unwrap().unwrap();
    assert_eq!(payment.state, PaymentState::Refunded);
    assert_eq!(chain.signed.load(Ordering::SeqCst), 0, "paid back once");
}

/// A reconciliation pass lists a refund's transfer before it is signed, and reaches it
/// after its sender signed and sent it and let go of the wallet, still pending: it looks
/// for it on chain instead of failing it as never sent (which would pay the refund again).
#[tokio::test]
async fn a_transfer_signed_after_reconciliation_listed_it_is_not_failed_as_never_sent() {
    use crate::store::TransferState;
    let f = fixture(SELLER).await;
    f.chain.lands(Landing::Confirmed);
    let payment = refund_sent_unconfirmed(&f).await;
    let mut listed = f.services.store.pending_transfers().await.unwrap();
    assert_eq!(listed.len(), 1);
    // As listed a moment before its sender signed it.
    listed[0].signature = None;
    listed[0].raw_tx = None;

    wallets::reconcile_listed(&f.services, listed).await.unwrap();
    assert_eq!(transfer_state(&f, "tr_first").await, TransferState::Confirmed);
    resume_refund(&f, &payment.id).await;
    assert_eq!(f.chain.signed.load(Ordering::SeqCst), 0, "paid back once");
}

/// A refund's transfer recorded failed (a node whose index lagged called it dropped) that
/// landed after all: the chain is asked before another is paid, and none is.
#[tokio::test]
async fn a_refund_recorded_failed_that_landed_is_not_paid_again() {
    use crate::store::{PaymentState, TransferState};
    let f = fixture(SELLER).await;
    let chain = &f.chain;
    let payment = refund_sent_unconfirmed(&f).await;
    f.services
        .store
        .finish_transfer("tr_first", TransferState::Failed, Some("dropped".into()))
        .await
        .unwrap();

    resume_refund(&f, &payment.id).await;
    assert_eq!(chain.signed.load(Ordering::SeqCst), 0, "not paid a second time");
    assert_eq!(transfer_state(&f, "tr_first").await, TransferState::Confirmed);
    let payment = f.services.store.payment(&payment.id).await.unwrap().unwrap();
    assert_eq!(payment.state, PaymentState::Refunded);
}

/// A refund's transfer that truly failed (it reverted) is paid by one new transfer.
#[tokio::test]
async fn a_refund_whose_transfer_failed_is_paid_by_one_new_transfer() {
    use crate::store::{PaymentState, TransferState};
    let f = fixture(SELLER).await;
    let chain = &f.chain;
    chain
        .landings
        .lock()
        .unwrap()
        .insert("0xtransfer0".into(), Landing::Failed("reverted".into()));
    let payment = refund_sent_unconfirmed(&f).await;
    f.services
        .store
        .finish_transfer("tr_first", TransferState::Failed, Some("reverted".into()))
        .await
        .unwrap();

    resume_refund(&f, &payment.id).await;
    resume_refund(&f, &payment.id).await;
    let payment = f.services.store.payment(&payment.id).await.unwrap().unwrap();
    assert_eq!(payment.state, PaymentState::Refunded);
    assert_eq!(chain.signed.load(Ordering::SeqCst), 1, "one new transfer");
}

/// A refund whose every transfer fails on chain (a fee each time) until `x402_refund_max_attempts`.
async fn refund_failing_every_time(f: &Fixture) -> (std::sync::Arc<FakeChain>, crate::store::PaymentRecord) {
    let chain = f.chain.clone();
    chain.lands(Landing::Failed("reverted".into()));
    let payment = refund_sent_unconfirmed(f).await;
    f.services
        .store
        .finish_transfer("tr_first", crate::store::TransferState::Failed, Some("reverted".into()))
        .await
        .unwrap();
    for _ in 0..10 {
        resume_refund(f, &payment.id).await;
    }
    let payment = f.services.store.payment(&payment.id).await.unwrap().unwrap();
    (chain, payment)
}

/// Each failed refund transfer costs the agent a fee: after `x402_refund_max_attempts`
/// transfers the refund stops, handed to the operator, and recovery leaves it until the
/// operator resumes it.
#[tokio::test]
async fn a_refund_that_keeps_failing_stops_at_its_attempts_and_waits_for_the_operator() {
    use crate::store::PaymentState;
    let f = fixture_with(SELLER, |s| s.x402.x402_refund_max_attempts = 3).await;
    let account = f.services.store.account_by_name("acme").await.unwrap().unwrap().id;
    let endpoint = crate::store::webhooks::WebhookEndpoint {
        id: "we_operator".into(),
        account_id: account.clone(),
        url: "https://hooks.example/".into(),
        description: None,
        events: vec!["payment.needs_operator".into()],
        secret: vec![7; 32],
        created_at: 0,
        disabled_at: None,
        disabled_reason: None,
        failing_since: None,
        consecutive_failures: 0,
        last_success_at: None,
    };
    f.services
        .store
        .insert_webhook_endpoint(endpoint, 20, f.services.sealing_key_check())
        .await
        .unwrap();
    let (chain, payment) = refund_failing_every_time(&f).await;
    let told = f
        .services
        .store
        .webhook_deliveries(&account, "we_operator", 10)
        .await
        .unwrap();
    assert_eq!(told.len(), 1, "the operator is told once");
    assert_eq!(told[0].event_type, "payment.needs_operator");
    assert_eq!(
        chain.signed.load(Ordering::SeqCst),
        2,
        "two transfers after the first, no more"
    );
    assert_eq!(payment.state, PaymentState::Refunding);
    assert_eq!(payment.refund_attempts, 3);
    assert_eq!(payment.refund_fees, 3 * 5_000, "each failed transfer's fee");
    let why = payment.needs_operator.clone().unwrap();
    assert!(payment.needs_operator_at.is_some());
    assert!(why.contains("3 transfers of the refund went out and failed"), "{why}");
    let store = &f.services.store;
    let unfinished = store.unfinished_payments(i64::MAX).await.unwrap();
    assert!(unfinished.iter().all(|p| p.id != payment.id), "recovery leaves it");

    assert!(store.resume_for_operator(&payment.id).await.unwrap());
    assert!(!store.resume_for_operator(&payment.id).await.unwrap(), "once");
    let unfinished = store.unfinished_payments(i64::MAX).await.unwrap();
    assert!(unfinished.iter().any(|p| p.id == payment.id), "recovery takes it again");
    // The failed transfers stay failed; the next one lands.
    for n in 0..3 {
        let failed = Landing::Failed("reverted".into());
        chain.landings.lock().unwrap().insert(format!("0xtransfer{n}"), failed);
    }
    chain.lands(Landing::Confirmed);
    resume_refund(&f, &payment.id).await;
    let payment = store.payment(&payment.id).await.unwrap().unwrap();
    assert_eq!(payment.state, PaymentState::Refunded);
    assert_eq!(
        chain.signed.load(Ordering::SeqCst),
        3,
        "one more transfer, which landed"
    );
}

/// A node that cannot be reached signs nothing and sends nothing: however many recovery
/// passes that lasts, no attempt is spent, and the refund goes out once it is back.
#[tokio::test]
async fn a_refund_waiting_for_its_node_spends_no_attempt() {
    use crate::store::PaymentState;
    let f = fixture_with(SELLER, |s| s.x402.x402_refund_max_attempts = 2).await;
    let chain = &f.chain;
    let failed = Landing::Failed("reverted".into());
    chain.landings.lock().unwrap().insert("0xtransfer0".into(), failed);
    let payment = refund_sent_unconfirmed(&f).await;
    f.services
        .store
        .finish_transfer("tr_first", crate::store::TransferState::Failed, Some("reverted".into()))
        .await
        .unwrap();
    chain.unreachable.store(true, Ordering::SeqCst);
    for _ in 0..6 {
        resume_refund(&f, &payment.id).await;
    }
    let waiting = f.services.store.payment(&payment.id).await.unwrap().unwrap();
    assert_eq!(waiting.needs_operator_at, None, "{:?}", waiting.needs_operator);
    assert_eq!(waiting.refund_attempts, 1, "only the transfer that went out and failed");

    chain.unreachable.store(false, Ordering::SeqCst);
    resume_refund(&f, &payment.id).await;
    let refunded = f.services.store.payment(&payment.id).await.unwrap().unwrap();
    assert_eq!(refunded.state, PaymentState::Refunded);
    assert_eq!(chain.signed.load(Ordering::SeqCst), 1);
}

/// The fees of a refund's failed transfers are bounded too, whatever attempts are left.
#[tokio::test]
async fn a_refund_stops_once_its_failed_transfers_cost_the_fee_bound() {
    let f = fixture_with(SELLER, |s| s.x402.x402_refund_max_fee_wei = 10_000).await;
    let (chain, payment) = refund_failing_every_time(&f).await;
    assert_eq!(
        chain.signed.load(Ordering::SeqCst),
        1,
        "stopped once two fees reached 10,000 wei"
    );
    assert_eq!(payment.refund_fees, 10_000);
    let why = payment.needs_operator.unwrap();
    assert!(why.contains("x402_refund_max_fee_wei"), "{why}");
}
