//! Sending deliveries: every host looks for deliveries due every `webhook_poll_ms`, claims
//! each under a lease (so one host sends it at a time, and another takes over if that host
//! dies), signs it at the attempt's time, posts it through the outbound guard without
//! following redirects, and records how it went. A failure is retried on the schedule; an
//! endpoint that keeps failing, or answers 410 Gone, is disabled with the reason.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, watch};

use super::{open_secret, sign};
use crate::outbound::{HostPattern, OutboundError, OutboundRequest};
use crate::services::Services;
use crate::store::usage::HOUR_MS;
use crate::store::{AttemptResult, ClaimedDelivery, DisableRule, DueDelivery, WebhookAttempt};

/// Deliveries sent at once by one host, to one endpoint, and for one account: an endpoint
/// that never answers holds two of a host's slots at most, and one account's endpoints half
/// of them at most, never everyone's.
const SENDING_AT_ONCE: usize = 8;
const PER_ENDPOINT: usize = 2;
const PER_ACCOUNT: usize = SENDING_AT_ONCE / 2;
/// Due deliveries looked at per pass (at most `PER_ENDPOINT` of each endpoint, the
/// accounts taking turns).
const LOOK_AT: u32 = 200;
/// How much of a receiver's answer is kept with the attempt.
const EXCERPT_BYTES: u64 = 1024;
/// Longest wait a receiver's `Retry-After` may ask for.
const MAX_RETRY_AFTER_SECS: i64 = 86_400;

/// Sends in flight on this host, per endpoint and per account (counted under their ids).
type InFlight = Arc<Mutex<HashMap<String, usize>>>;

pub async fn run_periodically(services: Services, mut stop: watch::Receiver<bool>) {
    let settings = &services.settings.webhooks;
    let every = Duration::from_millis(settings.webhook_poll_ms);
    let timeout = Duration::from_millis(settings.webhook_timeout_ms);
    // A claim outlives its send: twice the longest request, and a margin.
    let lease_ms = i64::try_from(timeout.as_millis() * 2).unwrap_or(i64::MAX / 2) + 30_000;
    let keep_ms = i64::try_from(settings.webhook_retention_days).unwrap_or(3650) * 24 * HOUR_MS;
    let sending = Arc::new(Semaphore::new(SENDING_AT_ONCE));
    let in_flight: InFlight = Arc::default();
    let mut last_prune = 0;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        if services.lifecycle.is_stopping() {
            return;
        }
        let now = crate::clock::now_ms();
        if now - last_prune >= HOUR_MS {
            last_prune = now;
            prune(&services, now - keep_ms).await;
        }
        let due = match services
            .store
            .due_webhook_deliveries(now, LOOK_AT, PER_ENDPOINT as u32)
            .await
        {
            Ok(due) => due,
            Err(err) => {
                tracing::warn!(error = %err, "could not look for webhook deliveries");
                continue;
            }
        };
        for DueDelivery {
            id,
            endpoint_id,
            account_id,
        } in due
        {
            if services.lifecycle.is_stopping() {
                return;
            }
            let turn = Turn {
                endpoint: endpoint_id,
                account: account_id,
            };
            // Every slot busy: the pass ends here, and the next one looks again at what is
            // due then (waiting for a slot while walking this list would serve, minutes
            // later, rows that others' newer deliveries should have come before).
            let Ok(permit) = sending.clone().try_acquire_owned() else {
                break;
            };
            if !take_turn(&in_flight, &turn) {
                continue;
            }
            // A token per claim: a claim this host lost and took again is a new one.
            let claim = crate::random::hex_token(12);
            let now = crate::clock::now_ms();
            let claimed = match services.store.claim_webhook_delivery(&id, &claim, now, lease_ms).await {
                Ok(Some(claimed)) => claimed,
                Ok(None) => {
                    give_turn(&in_flight, &turn);
                    continue;
                }
                Err(err) => {
                    tracing::warn!(error = %err, delivery = %id, "could not claim a webhook delivery");
                    give_turn(&in_flight, &turn);
                    continue;
                }
            };
            let (services, in_flight) = (services.clone(), in_flight.clone());
            // Counted as work in flight: a stopping host finishes its sends first.
            services.clone().lifecycle.spawn(async move {
                let _permit = permit;
                deliver(&services, claimed, &claim, timeout).await;
                give_turn(&in_flight, &turn);
            });
        }
    }
}

/// A send's place on this host: one of its endpoint's turns and one of its account's.
struct Turn {
    endpoint: String,
    account: String,
}

impl Turn {
    fn keys(&self) -> [(String, usize); 2] {
        [
            (format!("endpoint:{}", self.endpoint), PER_ENDPOINT),
            (format!("account:{}", self.account), PER_ACCOUNT),
        ]
    }
}

/// Takes a sending turn of the endpoint and of its account on this host, if both have one
/// left.
fn take_turn(in_flight: &InFlight, turn: &Turn) -> bool {
    let mut in_flight = in_flight.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let keys = turn.keys();
    if keys
        .iter()
        .any(|(key, most)| in_flight.get(key).is_some_and(|sending| sending >= most))
    {
        return false;
    }
    for (key, _) in keys {
        *in_flight.entry(key).or_default() += 1;
    }
    true
}

fn give_turn(in_flight: &InFlight, turn: &Turn) {
    let mut in_flight = in_flight.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for (key, _) in turn.keys() {
        if let Some(sending) = in_flight.get_mut(&key) {
            *sending = sending.saturating_sub(1);
            if *sending == 0 {
                in_flight.remove(&key);
            }
        }
    }
}

/// Drops old events, on one host at a time.
async fn prune(services: &Services, before: i64) {
    match services.store.try_turn("webhook-prune").await {
        Ok(Some(_turn)) => {
            if let Err(err) = services.store.prune_webhook_events(before).await {
                tracing::warn!(error = %err, "could not prune old webhook events");
            }
        }
        Ok(None) => {}
        Err(err) => tracing::warn!(error = %err, "could not take the webhook-prune turn"),
    }
}

/// One attempt of a claimed delivery, recorded.
async fn deliver(services: &Services, claimed: ClaimedDelivery, claim: &str, timeout: Duration) {
    let ClaimedDelivery {
        delivery,
        body,
        endpoint,
    } = claimed;
    let n = delivery.attempts + 1;
    let at = crate::clock::now_ms();
    let started = Instant::now();
    let mut timed_out = false;
    let sent = match open_secret(services, &endpoint) {
        Err(err) => Err(err.to_string()),
        Ok(secret) => {
            let timestamp = at / 1000;
            let signature = sign::signature(&secret, &delivery.event_id, timestamp, body.as_bytes());
            let request = OutboundRequest {
                method: "POST".into(),
                url: endpoint.url.clone(),
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("webhook-id".into(), delivery.event_id.clone()),
                    ("webhook-timestamp".into(), timestamp.to_string()),
                    ("webhook-signature".into(), signature),
                ],
                body: Some(body.into_bytes()),
                timeout: Some(timeout),
                max_bytes: Some(EXCERPT_BYTES),
                budget: None,
                follow_redirects: false,
                truncate_body: true,
            };
            services
                .webhook_outbound
                .send(request, &[HostPattern::anywhere()])
                .await
                .map_err(|e| match e {
                    OutboundError::Denied(why) => format!("refused by this server: {why}"),
                    OutboundError::Timeout => {
                        timed_out = true;
                        OutboundError::Timeout.to_string()
                    }
                    other => other.to_string(),
                })
        }
    };
    let latency_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    let (status, error, excerpt, retry_after) = match &sent {
        Ok(response) => {
            let ok = (200..300).contains(&response.status);
            let error = (!ok).then(|| format!("HTTP {}", response.status));
            // An internal receiver's answer is not the owner's to read: it may be anything
            // the operator's network says.
            let excerpt = Some(String::from_utf8_lossy(&response.body).into_owned())
                .filter(|e| !e.is_empty() && !services.webhook_outbound.is_private_exception(&endpoint.url));
            (
                Some(i64::from(response.status)),
                error,
                excerpt,
                retry_after(&response.headers),
            )
        }
        Err(error) => (None, Some(error.clone()), None, None),
    };
    let succeeded = error.is_none();
    let settings = &services.settings.webhooks;
    let gone = status == Some(410);
    let retry_at = (!succeeded && !gone)
        .then(|| {
            settings
                .webhook_retry_schedule_secs
                .get(usize::try_from(n - 1).unwrap_or(usize::MAX))
        })
        .flatten()
        .map(|&wait| at + next_wait_ms(wait, retry_after));
    if let Some(metrics) = crate::telemetry::metrics::metrics() {
        metrics.webhook_attempt(if succeeded { "succeeded" } else { "failed" }, latency_ms);
    }
    let result = AttemptResult {
        attempt: WebhookAttempt {
            n,
            at,
            status,
            error,
            latency_ms,
            excerpt,
        },
        succeeded,
        retry_at,
        gone,
        timed_out,
    };
    let rule = DisableRule {
        failures: i64::try_from(settings.webhook_disable_after_failures).unwrap_or(i64::MAX),
        after_ms: i64::try_from(settings.webhook_disable_after_secs).unwrap_or(i64::MAX / 1000) * 1000,
    };
    match services
        .store
        .finish_webhook_attempt(&delivery.id, claim, result, rule)
        .await
    {
        Ok(true) => {}
        Ok(false) => tracing::warn!(delivery = %delivery.id, "a webhook delivery's claim ran out while it was sent"),
        Err(err) => tracing::warn!(error = %err, delivery = %delivery.id, "could not record a webhook attempt"),
    }
}

/// A receiver's `Retry-After` in seconds (the HTTP-date form is not honoured).
fn retry_after(headers: &[(String, String)]) -> Option<i64> {
    headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("retry-after"))
        .and_then(|(_, value)| value.trim().parse::<i64>().ok())
        .filter(|secs| *secs >= 0)
}

/// The wait before the next attempt: the schedule's, ±10 % so retries of many deliveries
/// spread out, or longer when the receiver asked for it.
fn next_wait_ms(scheduled_secs: u32, retry_after: Option<i64>) -> i64 {
    let base = i64::from(scheduled_secs) * 1000;
    let mut byte = [0u8; 1];
    crate::random::fill(&mut byte);
    let jitter = base / 10 * (i64::from(byte[0]) - 128) / 128;
    let asked = retry_after.map_or(0, |secs| secs.min(MAX_RETRY_AFTER_SECS) * 1000);
    (base + jitter).max(asked).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_follow_the_schedule_within_a_tenth_or_what_the_receiver_asked() {
        for _ in 0..200 {
            let wait = next_wait_ms(300, None);
            assert!((270_000..=330_000).contains(&wait), "{wait}");
        }
        assert_eq!(next_wait_ms(5, Some(3600)), 3_600_000);
        assert_eq!(next_wait_ms(5, Some(10_000_000)), 86_400_000);
        let headers = vec![("Retry-After".to_string(), "120".to_string())];
        assert_eq!(retry_after(&headers), Some(120));
        let date = vec![("retry-after".to_string(), "Wed, 21 Oct 2026 07:28:00 GMT".to_string())];
        assert_eq!(retry_after(&date), None);
    }
}
