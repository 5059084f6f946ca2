//! Sending deliveries: every host looks for deliveries due every `webhook_poll_ms`, claims
//! each under a lease (so one host sends it at a time, and another takes over if that host
//! dies), signs it at the attempt's time, posts it through the outbound guard without
//! following redirects, and records how it went. A failure is retried on the schedule; an
//! endpoint that keeps failing, or answers 410 Gone, is disabled with the reason.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, watch};

use super::{anywhere, open_secret, sign};
use crate::outbound::{OutboundError, OutboundRequest};
use crate::services::Services;
use crate::store::{AttemptResult, ClaimedDelivery, WebhookAttempt};

/// How long a claim holds a delivery: well past the longest request.
const LEASE_MS: i64 = 120_000;
/// Deliveries sent at once by one host.
const SENDING_AT_ONCE: usize = 8;
/// How much of a receiver's answer is kept with the attempt.
const EXCERPT_BYTES: u64 = 1024;
/// Longest wait a receiver's `Retry-After` may ask for.
const MAX_RETRY_AFTER_SECS: i64 = 86_400;

pub async fn run_periodically(services: Services, mut stop: watch::Receiver<bool>) {
    let every = Duration::from_millis(services.settings.webhooks.webhook_poll_ms);
    // One token per host run: a claim this host holds says so.
    let claim = format!("{}-{}", std::process::id(), crate::random::hex_token(8));
    let sending = Arc::new(Semaphore::new(SENDING_AT_ONCE));
    let keep_ms = i64::try_from(services.settings.webhooks.webhook_retention_days).unwrap_or(3650) * 86_400_000;
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
        if now - last_prune >= 3_600_000 {
            last_prune = now;
            if let Err(err) = services.store.prune_webhook_events(now - keep_ms).await {
                tracing::warn!(error = %err, "could not prune old webhook events");
            }
        }
        let due = match services.store.due_webhook_deliveries(now, 32).await {
            Ok(due) => due,
            Err(err) => {
                tracing::warn!(error = %err, "could not look for webhook deliveries");
                continue;
            }
        };
        for id in due {
            let Ok(permit) = sending.clone().acquire_owned().await else {
                return;
            };
            let claimed = match services.store.claim_webhook_delivery(&id, &claim, now, LEASE_MS).await {
                Ok(Some(claimed)) => claimed,
                Ok(None) => continue,
                Err(err) => {
                    tracing::warn!(error = %err, delivery = %id, "could not claim a webhook delivery");
                    continue;
                }
            };
            let (services, claim) = (services.clone(), claim.clone());
            // Counted as work in flight: a stopping host finishes its sends first.
            services.clone().lifecycle.spawn(async move {
                let _permit = permit;
                deliver(&services, claimed, &claim).await;
            });
        }
    }
}

/// One attempt of a claimed delivery, recorded.
async fn deliver(services: &Services, claimed: ClaimedDelivery, claim: &str) {
    let ClaimedDelivery {
        delivery,
        body,
        endpoint,
    } = claimed;
    let n = delivery.attempts + 1;
    let at = crate::clock::now_ms();
    let started = Instant::now();
    let sent = match (endpoint.disabled_at, open_secret(services, &endpoint)) {
        (Some(_), _) => Err("the endpoint is disabled".to_string()),
        (None, Err(err)) => Err(err.to_string()),
        (None, Ok(secret)) => {
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
                timeout: None,
                max_bytes: Some(EXCERPT_BYTES),
                budget: None,
                follow_redirects: false,
                truncate_body: true,
            };
            services.outbound.send(request, &anywhere()).await.map_err(|e| match e {
                OutboundError::Denied(why) => format!("refused by this server: {why}"),
                other => other.to_string(),
            })
        }
    };
    let latency_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    let (status, error, excerpt, retry_after) = match &sent {
        Ok(response) => {
            let ok = (200..300).contains(&response.status);
            let error = (!ok).then(|| format!("HTTP {}", response.status));
            let excerpt = Some(String::from_utf8_lossy(&response.body).into_owned()).filter(|e| !e.is_empty());
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
    let schedule = &settings.webhook_retry_schedule_secs;
    let gone = status == Some(410);
    let retry_at = (!succeeded && !gone && endpoint.disabled_at.is_none())
        .then(|| schedule.get(usize::try_from(n - 1).unwrap_or(usize::MAX)))
        .flatten()
        .map(|&wait| at + next_wait_ms(wait, retry_after));
    let disable = if gone {
        Some("the endpoint answered 410 Gone".to_string())
    } else if !succeeded {
        let failures = endpoint.consecutive_failures + 1;
        let since = endpoint.failing_since.unwrap_or(at);
        let long_enough = at - since >= i64::try_from(settings.webhook_disable_after_secs).unwrap_or(i64::MAX) * 1000;
        (failures >= i64::try_from(settings.webhook_disable_after_failures).unwrap_or(i64::MAX) && long_enough).then(
            || {
                format!(
                    "{failures} attempts in a row failed since {} (the last: {})",
                    crate::clock::iso(since),
                    error.as_deref().unwrap_or("failed")
                )
            },
        )
    } else {
        None
    };
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
        disable,
    };
    match services.store.finish_webhook_attempt(&delivery.id, claim, result).await {
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
