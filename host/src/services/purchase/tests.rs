//! The purchase service on the fake network the payment pipeline's tests use: what a payer
//! gets for a settled payment, and what the ledger, the command's breaker and its run log
//! show afterwards. The commands are real (the built-in handlers, run as components).

#![allow(clippy::unwrap_used)]

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::chains::Landing;
use crate::services::jobs::{self, JobStatus};
use crate::services::payments::fake::CLIENT;
use crate::services::payments::fake::{FakeChain, FakeScheme, Fixture, SELLER, address_of, fixture, payment};

/// The seller with three paid commands: one that answers, one that runs as a job, and one
/// whose webhook nobody answers (port 9), so it fails by the agent's fault.
fn seller() -> String {
    format!(
        r#"{SELLER}
[[commands]]
command = "greet"
handler_type = "simple_text"
integrations = ["x402"]
price_usd = 0.02
parameters = [{{ name = "name", type = "string", required = true, description = "Who" }}]
config = {{ text = "Hello, {{{{name}}}}!" }}

[[commands]]
command = "report"
handler_type = "simple_text"
integrations = ["x402"]
price_usd = 0.03
long_running = true
config = {{ text = "The report is ready." }}

[[commands]]
command = "broken"
handler_type = "webhook"
integrations = ["x402"]
price_usd = 0.04
config = {{ url = "http://127.0.0.1:9/hook" }}
"#
    )
}

fn command(name: &str, parameters: Value) -> Order {
    let Value::Object(parameters) = parameters else {
        panic!("parameters are an object")
    };
    Order::Command {
        name: name.into(),
        parameters,
        raw_text: None,
    }
}

/// Quotes and checks `order`, then buys it with a payment of the quoted price on `chain`.
async fn buy_with(f: &Fixture, chain: &FakeChain, order: Order, nonce: u64) -> Result<Sale, ServiceError> {
    buy_as(f, chain, order, "ann", nonce).await
}

/// [`buy_with`], paid by the payer called `payer` (from an address of its own).
async fn buy_as(f: &Fixture, chain: &FakeChain, order: Order, payer: &str, nonce: u64) -> Result<Sale, ServiceError> {
    let quote = quote(&f.services, &f.offer, order, Value::Null, true).await?;
    let paid = payment(&address_of(payer), nonce, quote.price.0);
    let checked = quote.check_input()?;
    let scheme = FakeScheme::default();
    let rails = Rails { scheme: &scheme, chain };
    buy_on(&f.services, rails, checked, &paid, Some(CLIENT)).await
}

/// The runs of `command` kept in its log: a failed run always is.
async fn runs_of(f: &Fixture, command: &str) -> usize {
    let store = &f.services.store;
    crate::services::plugins::runs(store, &f.offer.agent.id, Some(command), None, 100)
        .await
        .unwrap()
        .len()
}

#[tokio::test]
async fn a_paid_command_is_settled_then_run_and_its_payment_served() {
    let f = fixture(&seller()).await;
    let chain = FakeChain::landing(Landing::Confirmed);
    let sale = buy_with(&f, &chain, command("greet", json!({"name": "Ann"})), 1)
        .await
        .unwrap();
    assert_eq!(sale.settled.amount, MicroUsdc(20_000), "the command's own price");
    match sale.outcome {
        SaleOutcome::Answered(answer) => assert_eq!(answer.response, "Hello, Ann!"),
        other => panic!("not answered: {other:?}"),
    }
    assert_eq!(f.ledger().await, vec![("served".into(), Some("0xours1".into()))]);
    assert_eq!(chain.sent.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn what_cannot_run_is_refused_before_it_can_be_bought() {
    let f = fixture(&seller()).await;
    let unknown = quote(&f.services, &f.offer, command("nope", json!({})), Value::Null, false).await;
    assert!(
        matches!(unknown, Err(ServiceError::X402(X402Error::CommandNotOffered(ref name))) if name == "nope"),
        "{:?}",
        unknown.err()
    );
    let quoted = quote(&f.services, &f.offer, command("greet", json!({})), Value::Null, false)
        .await
        .unwrap();
    assert_eq!(quoted.price, MicroUsdc(20_000));
    let missing = quoted.check_input().err().unwrap();
    assert!(
        matches!(&missing, ServiceError::Validation(text) if text.contains("name")),
        "{missing:?}"
    );
    assert!(f.ledger().await.is_empty());
}

#[tokio::test]
async fn a_settlement_that_fails_runs_nothing() {
    let f = fixture(&seller()).await;
    let chain = FakeChain::landing(Landing::Failed("transfer amount exceeds balance".into()));
    let err = buy_with(&f, &chain, command("broken", json!({})), 1)
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&err, ServiceError::X402(X402Error::Refused(refusal)) if refusal.code == "settlement_failed"),
        "{err:?}"
    );
    assert_eq!(f.ledger().await[0].0, "failed");
    assert_eq!(runs_of(&f, "broken").await, 0, "a run that had failed would be logged");
}

#[tokio::test]
async fn a_long_running_command_is_queued_and_its_job_serves_the_payment() {
    let f = fixture(&seller()).await;
    let chain = FakeChain::landing(Landing::Confirmed);
    let sale = buy_with(&f, &chain, command("report", json!({})), 1).await.unwrap();
    let SaleOutcome::Queued { job_id } = sale.outcome else {
        panic!("not queued: {:?}", sale.outcome)
    };
    // The job's record served the payment before the payer was told where to look.
    assert_eq!(f.ledger().await[0].0, "served");
    drop(sale.settled);
    for _ in 0..100 {
        match jobs::status(&f.services.store, &job_id).await.unwrap() {
            JobStatus::Succeeded { response, .. } => {
                assert_eq!(response, "The report is ready.");
                return;
            }
            JobStatus::Processing { .. } => tokio::time::sleep(Duration::from_millis(50)).await,
            other => panic!("the job did not succeed: {other:?}"),
        }
    }
    panic!("the job did not end in 5 s");
}

#[tokio::test]
async fn failures_by_the_agents_fault_are_refunded_and_pause_the_command() {
    let f = fixture(&seller()).await;
    let chain = FakeChain::landing(Landing::Confirmed);
    let failures = f.services.settings.x402.x402_breaker_failures as u64;
    let fails = |sale: Sale| {
        let SaleOutcome::Failed { error, refund } = sale.outcome else {
            panic!("the broken command answered: {:?}", sale.outcome)
        };
        assert!(breaker::counts(&error), "{error:?}");
        assert!(refund.is_some(), "refunded at once");
    };
    // A refunded payer waits out a cool-off before it may pay again: nothing is settled.
    fails(
        buy_as(&f, &chain, command("broken", json!({})), "mallory", 1)
            .await
            .unwrap(),
    );
    // The refund went out on the agent's chain (the fixture's), and landed.
    assert_eq!(f.chain.signed.load(Ordering::SeqCst), 1, "one refund transfer signed");
    assert_eq!(f.chain.sent.load(Ordering::SeqCst), 1, "and sent");
    assert_eq!(f.ledger().await[0].0, "refunded");
    let sent = chain.sent.load(Ordering::SeqCst);
    let again = buy_as(&f, &chain, command("broken", json!({})), "mallory", 2).await;
    assert!(
        matches!(again, Err(ServiceError::X402(X402Error::PayerCoolingOff { .. }))),
        "{:?}",
        again.err()
    );
    assert_eq!(chain.sent.load(Ordering::SeqCst), sent);
    // One payer cannot pause the command for all; distinct payers' failures do.
    let open = quote(&f.services, &f.offer, command("broken", json!({})), Value::Null, false).await;
    assert!(open.is_ok(), "paused by one payer: {:?}", open.err());
    for n in 1..failures {
        fails(
            buy_as(&f, &chain, command("broken", json!({})), &format!("payer{n}"), 100 + n)
                .await
                .unwrap(),
        );
    }
    // Every payment left the served path; none is left settled for recovery to guess at.
    let states: Vec<String> = f.ledger().await.into_iter().map(|(state, _)| state).collect();
    assert_eq!(states.len() as u64, failures);
    assert_eq!(runs_of(&f, "broken").await as u64, failures);
    assert!(states.iter().all(|s| s == "refunded"), "{states:?}");
    assert_eq!(
        f.chain.signed.load(Ordering::SeqCst) as u64,
        failures,
        "one refund each"
    );
    // The next payer is refused before signing anything; other commands still sell.
    let paused = quote(&f.services, &f.offer, command("broken", json!({})), Value::Null, false).await;
    assert!(
        matches!(paused.err(), Some(ServiceError::Unavailable { retry_after_secs, .. }) if retry_after_secs > 0),
        "the broken command is paused"
    );
    let sent = chain.sent.load(Ordering::SeqCst);
    buy_with(&f, &chain, command("greet", json!({"name": "Bo"})), 1_000)
        .await
        .unwrap();
    assert_eq!(chain.sent.load(Ordering::SeqCst), sent + 1);
}

/// A paused command still gives a retry the answer its payment bought (the same signed
/// payment for the same request); a new payment is refused before anything is sent.
#[tokio::test]
async fn a_retry_reaches_its_kept_answer_while_the_command_is_paused() {
    let f = fixture(&seller()).await;
    let chain = FakeChain::landing(Landing::Confirmed);
    let greet = || command("greet", json!({"name": "Bo"}));
    let sale = buy_as(&f, &chain, greet(), "bo", 1).await.unwrap();
    let SaleOutcome::Answered(first) = sale.outcome else {
        panic!("greet did not answer: {:?}", sale.outcome)
    };
    drop(sale.settled);
    // Others' failures pause it.
    let rules = breaker::Rules::of(&f.services.settings.x402);
    for n in 0..f.services.settings.x402.x402_breaker_failures {
        breaker::failed(
            &f.services.store,
            rules,
            &f.offer.agent.id,
            "greet",
            &format!("p{n}"),
            "down",
        )
        .await;
    }
    let sent = chain.sent.load(Ordering::SeqCst);
    let again = buy_as(&f, &chain, greet(), "bo", 1).await.unwrap();
    assert!(
        matches!(&again.outcome, SaleOutcome::Answered(kept) if kept.response == first.response),
        "{:?}",
        again.outcome
    );
    let refused = buy_as(&f, &chain, greet(), "carol", 2).await;
    assert!(
        matches!(refused, Err(ServiceError::Unavailable { .. })),
        "{:?}",
        refused.err()
    );
    assert_eq!(chain.sent.load(Ordering::SeqCst), sent, "nothing settled while paused");
}

/// A paid command's plugin slot is taken only once its payment passed its checks and is no
/// retry: with every slot of the account held, a new payment is refused before anything is
/// sent, and a retry of a paid request still gets the answer it bought (it needs no slot).
#[tokio::test]
async fn a_busy_account_refuses_new_payments_before_settling_and_still_answers_retries() {
    let f = fixture(&seller()).await;
    let chain = FakeChain::landing(Landing::Confirmed);
    let greet = || command("greet", json!({"name": "Bo"}));
    let sale = buy_as(&f, &chain, greet(), "bo", 1).await.unwrap();
    let SaleOutcome::Answered(first) = sale.outcome else {
        panic!("greet did not answer: {:?}", sale.outcome)
    };
    drop(sale.settled);
    let tenant = crate::plugins::Tenant {
        account: f.offer.agent.account_id.clone(),
        wait: None,
    };
    let timeout = Duration::from_millis(f.services.settings.plugins.plugin_timeout_ms);
    let mut held = Vec::new();
    for _ in 0..f.services.settings.plugins.plugin_max_concurrency_per_account {
        held.push(f.services.plugins.reserve(&tenant, timeout).await.unwrap());
    }
    let sent = chain.sent.load(Ordering::SeqCst);
    let busy = buy_as(&f, &chain, greet(), "carol", 2).await;
    assert!(matches!(busy, Err(ServiceError::Busy(_))), "{:?}", busy.err());
    let again = buy_as(&f, &chain, greet(), "bo", 1).await.unwrap();
    assert!(
        matches!(&again.outcome, SaleOutcome::Answered(kept) if kept.response == first.response),
        "{:?}",
        again.outcome
    );
    assert_eq!(chain.sent.load(Ordering::SeqCst), sent, "nothing settled while busy");
    assert!(f.ledger().await.len() == 1, "only Bo's first payment is recorded");
}
