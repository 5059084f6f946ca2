//! Deliveries of webhook events: claimed by one host at a time under a lease (as jobs
//! are), each attempt recorded, the endpoint's failures counted, and what the owner sees.

use super::sql::{Db, Row, args};
use super::webhooks::{ENDPOINT_COLUMNS, WebhookEndpoint, endpoint_from_row};
use super::{Store, StoreError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookDelivery {
    pub id: String,
    pub event_id: String,
    pub event_type: String,
    pub endpoint_id: String,
    pub state: String,
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub last_latency_ms: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookAttempt {
    pub n: i64,
    pub at: i64,
    pub status: Option<i64>,
    pub error: Option<String>,
    pub latency_ms: i64,
    pub excerpt: Option<String>,
}

/// A delivery a host claimed: what it sends, and where.
#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    pub delivery: WebhookDelivery,
    pub body: String,
    pub endpoint: WebhookEndpoint,
}

/// How an attempt went, and what follows it.
#[derive(Debug, Clone)]
pub struct AttemptResult {
    pub attempt: WebhookAttempt,
    pub succeeded: bool,
    /// When to try again; `None`: the delivery failed for good.
    pub retry_at: Option<i64>,
    /// The receiver answered 410 Gone: its endpoint is disabled at once.
    pub gone: bool,
    /// No answer came within the timeout.
    pub timed_out: bool,
}

/// A delivery due now, and whose it is.
#[derive(Debug, Clone, PartialEq)]
pub struct DueDelivery {
    pub id: String,
    pub endpoint_id: String,
    pub account_id: String,
}

/// Attempts in a row without an answer in time after which an endpoint is backed off as a
/// whole; each one more doubles the pause, from `FIRST_PAUSE_MS` up to `LONGEST_PAUSE_MS`.
const PAUSE_AFTER_TIMEOUTS: i64 = 3;
const FIRST_PAUSE_MS: i64 = 30_000;
const LONGEST_PAUSE_MS: i64 = 3_600_000;

/// How long an endpoint with `timeouts` attempts in a row unanswered is paused, if at all.
fn pause_ms(timeouts: i64) -> Option<i64> {
    let beyond = timeouts - PAUSE_AFTER_TIMEOUTS;
    (beyond >= 0).then(|| (FIRST_PAUSE_MS << beyond.min(20)).min(LONGEST_PAUSE_MS))
}

/// When an endpoint that keeps failing is disabled: this many failed attempts in a row,
/// over at least this long since its last success.
#[derive(Debug, Clone, Copy)]
pub struct DisableRule {
    pub failures: i64,
    pub after_ms: i64,
}

const DELIVERY_COLUMNS: &str = "d.id, d.event_id, e.type, d.endpoint_id, d.state, d.attempts, d.next_attempt_at, \
     d.last_status, d.last_error, d.last_latency_ms, d.created_at, d.updated_at";
const FROM_DELIVERIES: &str = "webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id";

fn delivery_from_row(row: &Row) -> Result<WebhookDelivery, StoreError> {
    Ok(WebhookDelivery {
        id: row.get(0)?,
        event_id: row.get(1)?,
        event_type: row.get(2)?,
        endpoint_id: row.get(3)?,
        state: row.get(4)?,
        attempts: row.get(5)?,
        next_attempt_at: row.get(6)?,
        last_status: row.get(7)?,
        last_error: row.get(8)?,
        last_latency_ms: row.get(9)?,
        created_at: row.get(10)?,
        updated_at: row.get(11)?,
    })
}

/// Fails every delivery of the endpoint not sent yet, saying why.
pub(super) fn fail_pending_in(db: &dyn Db, endpoint_id: &str, why: &str) -> Result<(), StoreError> {
    db.execute(
        "UPDATE webhook_deliveries SET state = 'failed', last_error = ?2, updated_at = ?3, claim = NULL
         WHERE endpoint_id = ?1 AND state = 'pending'",
        args![endpoint_id, why, crate::clock::now_ms()],
    )?;
    Ok(())
}

/// Fails the endpoint's oldest waiting deliveries beyond its newest `keep`, saying why: the
/// owner sees them dropped in the endpoint's deliveries.
pub(super) fn drop_oldest_beyond(db: &dyn Db, endpoint_id: &str, keep: i64) -> Result<(), StoreError> {
    let waiting: i64 = db
        .query_one(
            "SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = ?1 AND state = 'pending'",
            args![endpoint_id],
        )?
        .get(0)?;
    if waiting <= keep {
        return Ok(());
    }
    let oldest = db.query(
        "SELECT id FROM webhook_deliveries WHERE endpoint_id = ?1 AND state = 'pending'
         ORDER BY created_at, id LIMIT ?2",
        args![endpoint_id, waiting - keep],
    )?;
    let why = format!(
        "dropped: the endpoint had {waiting} deliveries waiting, more than the {} kept",
        super::webhooks::MAX_PENDING_PER_ENDPOINT
    );
    for row in oldest {
        db.execute(
            "UPDATE webhook_deliveries SET state = 'failed', last_error = ?2, updated_at = ?3 WHERE id = ?1 AND state = 'pending'",
            args![row.get::<String>(0)?, &why, crate::clock::now_ms()],
        )?;
    }
    Ok(())
}

impl Store {
    /// Deliveries due at `now` (pending, or sending under a lease that ran out) of endpoints
    /// not backed off, fairly: at most `per_endpoint` of each endpoint, oldest first, and
    /// the accounts taking turns (every account's oldest, then every account's second...),
    /// so one account's backlog never stands before another's next delivery.
    pub async fn due_webhook_deliveries(
        &self,
        now: i64,
        limit: u32,
        per_endpoint: u32,
    ) -> Result<Vec<DueDelivery>, StoreError> {
        self.read(move |db| {
            db.query(
                "WITH due AS (
                     SELECT d.id, d.endpoint_id, d.account_id, d.next_attempt_at,
                            ROW_NUMBER() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at, d.id) AS nth
                     FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
                     WHERE ((d.state = 'pending' AND d.next_attempt_at <= ?1) OR (d.state = 'sending' AND d.lease_until < ?1))
                       AND (w.paused_until IS NULL OR w.paused_until <= ?1)
                 ), bounded AS (
                     SELECT id, endpoint_id, account_id, next_attempt_at,
                            ROW_NUMBER() OVER (PARTITION BY account_id ORDER BY nth, next_attempt_at, id) AS turn
                     FROM due WHERE nth <= ?3
                 )
                 SELECT id, endpoint_id, account_id FROM bounded ORDER BY turn, next_attempt_at, id LIMIT ?2",
                args![now, i64::from(limit), i64::from(per_endpoint)],
            )?
            .iter()
            .map(|row| {
                Ok(DueDelivery {
                    id: row.get(0)?,
                    endpoint_id: row.get(1)?,
                    account_id: row.get(2)?,
                })
            })
            .collect()
        })
        .await
    }

    /// Claims a due delivery for `lease_ms` under `claim`; None if another host has it (or
    /// it is no longer due), else what to send.
    pub async fn claim_webhook_delivery(
        &self,
        id: &str,
        claim: &str,
        now: i64,
        lease_ms: i64,
    ) -> Result<Option<ClaimedDelivery>, StoreError> {
        let (id, claim) = (id.to_string(), claim.to_string());
        self.write(move |db| {
            let won = db.execute(
                // The endpoint is checked again here: a pass that read the due list before
                // another send paused it must not send after the pause.
                "UPDATE webhook_deliveries SET state = 'sending', claim = ?2, lease_until = ?4, updated_at = ?3
                 WHERE id = ?1 AND ((state = 'pending' AND next_attempt_at <= ?3) OR (state = 'sending' AND lease_until < ?3))
                   AND NOT EXISTS (SELECT 1 FROM webhook_endpoints w
                                   WHERE w.id = webhook_deliveries.endpoint_id AND w.paused_until > ?3)",
                args![&id, &claim, now, now + lease_ms],
            )? == 1;
            if !won {
                return Ok(None);
            }
            let row = db.query_one(
                &format!("SELECT {DELIVERY_COLUMNS}, e.body FROM {FROM_DELIVERIES} WHERE d.id = ?1"),
                args![&id],
            )?;
            let delivery = delivery_from_row(&row)?;
            let body: String = row.get(12)?;
            let endpoint = db.query_opt(
                &format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = ?1"),
                args![&delivery.endpoint_id],
            )?;
            let Some(endpoint) = endpoint.as_ref().map(endpoint_from_row).transpose()? else {
                db.execute("DELETE FROM webhook_deliveries WHERE id = ?1", args![&id])?;
                return Ok(None);
            };
            if endpoint.disabled_at.is_some() {
                // Nothing is sent to a disabled endpoint, and nothing is counted against it.
                db.execute(
                    "UPDATE webhook_deliveries SET state = 'failed', claim = NULL, lease_until = NULL,
                         last_error = 'the endpoint is disabled', updated_at = ?2 WHERE id = ?1",
                    args![&id, now],
                )?;
                return Ok(None);
            }
            Ok(Some(ClaimedDelivery { delivery, body, endpoint }))
        })
        .await
    }

    /// Records an attempt of a delivery this host holds under `claim`, and its endpoint's
    /// success or failure, disabling the endpoint when `rule` (or a 410) says so, with the
    /// counts as this write leaves them. False when the claim was lost.
    pub async fn finish_webhook_attempt(
        &self,
        id: &str,
        claim: &str,
        result: AttemptResult,
        rule: DisableRule,
    ) -> Result<bool, StoreError> {
        let (id, claim) = (id.to_string(), claim.to_string());
        self.write(move |db| {
            let now = crate::clock::now_ms();
            let a = &result.attempt;
            let (state, next) = match (result.succeeded, result.retry_at) {
                (true, _) => ("succeeded", now),
                (false, Some(at)) => ("pending", at),
                (false, None) => ("failed", now),
            };
            let held = db.execute(
                "UPDATE webhook_deliveries SET state = ?3, attempts = ?4, next_attempt_at = ?5, claim = NULL,
                     lease_until = NULL, last_status = ?6, last_error = ?7, last_latency_ms = ?8, updated_at = ?9
                 WHERE id = ?1 AND claim = ?2 AND state = 'sending'",
                args![&id, &claim, state, a.n, next, a.status, &a.error, a.latency_ms, now],
            )? == 1;
            if !held {
                return Ok(false);
            }
            db.execute(
                "INSERT INTO webhook_attempts (delivery_id, n, at, status, error, latency_ms, excerpt)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (delivery_id, n) DO NOTHING",
                args![&id, a.n, a.at, a.status, &a.error, a.latency_ms, &a.excerpt],
            )?;
            let endpoint_id: String = db
                .query_one("SELECT endpoint_id FROM webhook_deliveries WHERE id = ?1", args![&id])?
                .get(0)?;
            if result.succeeded {
                db.execute(
                    "UPDATE webhook_endpoints SET failing_since = NULL, consecutive_failures = 0, last_success_at = ?2,
                         consecutive_timeouts = 0, paused_until = NULL
                     WHERE id = ?1",
                    args![&endpoint_id, now],
                )?;
            } else {
                db.execute(
                    "UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, ?2),
                         consecutive_failures = consecutive_failures + 1,
                         consecutive_timeouts = CASE WHEN ?3 THEN consecutive_timeouts + 1 ELSE 0 END
                     WHERE id = ?1",
                    args![&endpoint_id, a.at, result.timed_out],
                )?;
                // A receiver that keeps not answering holds a sending slot per attempt for
                // the whole timeout: it is left alone for a while, all its deliveries.
                let timeouts: i64 = db
                    .query_one(
                        "SELECT consecutive_timeouts FROM webhook_endpoints WHERE id = ?1",
                        args![&endpoint_id],
                    )?
                    .get(0)?;
                if let Some(pause) = pause_ms(timeouts) {
                    db.execute(
                        "UPDATE webhook_endpoints SET paused_until = ?2 WHERE id = ?1",
                        args![&endpoint_id, now + pause],
                    )?;
                }
            }
            let (failures, since): (i64, Option<i64>) = {
                let row = db.query_one(
                    "SELECT consecutive_failures, failing_since FROM webhook_endpoints WHERE id = ?1",
                    args![&endpoint_id],
                )?;
                (row.get(0)?, row.get(1)?)
            };
            let reason = if result.gone {
                Some("the endpoint answered 410 Gone".to_string())
            } else {
                since
                    .filter(|since| !result.succeeded && failures >= rule.failures && now - since >= rule.after_ms)
                    .map(|since| {
                        format!(
                            "{failures} attempts in a row failed since {} (the last: {})",
                            crate::clock::iso(since),
                            a.error.as_deref().unwrap_or("failed")
                        )
                    })
            };
            if let Some(reason) = &reason {
                let disabled = db.execute(
                    "UPDATE webhook_endpoints SET disabled_at = ?2, disabled_reason = ?3 WHERE id = ?1 AND disabled_at IS NULL",
                    args![&endpoint_id, now, reason],
                )? == 1;
                if disabled {
                    fail_pending_in(db, &endpoint_id, "the endpoint was disabled")?;
                }
            }
            Ok(true)
        })
        .await
    }

    /// The endpoint's deliveries, newest first.
    pub async fn webhook_deliveries(
        &self,
        account_id: &str,
        endpoint_id: &str,
        limit: u32,
    ) -> Result<Vec<WebhookDelivery>, StoreError> {
        let (account_id, endpoint_id) = (account_id.to_string(), endpoint_id.to_string());
        self.read(move |db| {
            db.query(
                &format!(
                    "SELECT {DELIVERY_COLUMNS} FROM {FROM_DELIVERIES}
                     WHERE d.endpoint_id = ?1 AND d.account_id = ?2 ORDER BY d.created_at DESC, d.id LIMIT ?3"
                ),
                args![endpoint_id, account_id, i64::from(limit)],
            )?
            .iter()
            .map(delivery_from_row)
            .collect()
        })
        .await
    }

    /// One of the account's deliveries, with its event's body and its attempts in order.
    pub async fn webhook_delivery(
        &self,
        account_id: &str,
        id: &str,
    ) -> Result<Option<(WebhookDelivery, String, Vec<WebhookAttempt>)>, StoreError> {
        let (account_id, id) = (account_id.to_string(), id.to_string());
        self.read(move |db| {
            let Some(row) = db.query_opt(
                &format!("SELECT {DELIVERY_COLUMNS}, e.body FROM {FROM_DELIVERIES} WHERE d.id = ?1 AND d.account_id = ?2"),
                args![&id, &account_id],
            )?
            else {
                return Ok(None);
            };
            let attempts = db
                .query(
                    "SELECT n, at, status, error, latency_ms, excerpt FROM webhook_attempts WHERE delivery_id = ?1 ORDER BY n",
                    args![&id],
                )?
                .iter()
                .map(|a| {
                    Ok(WebhookAttempt {
                        n: a.get(0)?,
                        at: a.get(1)?,
                        status: a.get(2)?,
                        error: a.get(3)?,
                        latency_ms: a.get(4)?,
                        excerpt: a.get(5)?,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok(Some((delivery_from_row(&row)?, row.get(12)?, attempts)))
        })
        .await
    }

    /// Sends one of the account's deliveries again, now (one more attempt past its
    /// schedule), unless it is being sent. Its endpoint must be enabled. The delivery as it
    /// now stands, or None if unknown.
    pub async fn resend_webhook_delivery(
        &self,
        account_id: &str,
        id: &str,
    ) -> Result<Option<WebhookDelivery>, StoreError> {
        let (account_id, id) = (account_id.to_string(), id.to_string());
        self.write(move |db| {
            let now = crate::clock::now_ms();
            let select =
                format!("SELECT {DELIVERY_COLUMNS} FROM {FROM_DELIVERIES} WHERE d.id = ?1 AND d.account_id = ?2");
            let Some(row) = db.query_opt(&select, args![&id, &account_id])? else {
                return Ok(None);
            };
            let delivery = delivery_from_row(&row)?;
            let enabled = db
                .query_opt(
                    "SELECT id FROM webhook_endpoints WHERE id = ?1 AND disabled_at IS NULL",
                    args![&delivery.endpoint_id],
                )?
                .is_some();
            if !enabled {
                return Err(StoreError::Conflict(
                    "the endpoint is disabled: enable it before sending again".into(),
                ));
            }
            let queued = db.execute(
                "UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = ?2, updated_at = ?2
                 WHERE id = ?1 AND state <> 'sending'",
                args![&id, now],
            )? == 1;
            if !queued {
                return Err(StoreError::Conflict("it is being sent now".into()));
            }
            let row = db.query_one(&select, args![&id, &account_id])?;
            Ok(Some(delivery_from_row(&row)?))
        })
        .await
    }

    /// Drops events (with their deliveries and attempts) older than `before`.
    pub async fn prune_webhook_events(&self, before: i64) -> Result<u64, StoreError> {
        self.write(move |db| {
            db.execute(
                "DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT d.id FROM webhook_deliveries d
                     JOIN webhook_events e ON e.id = d.event_id WHERE e.created_at < ?1 AND d.state IN ('succeeded', 'failed'))",
                args![before],
            )?;
            db.execute(
                "DELETE FROM webhook_deliveries WHERE state IN ('succeeded', 'failed')
                     AND event_id IN (SELECT id FROM webhook_events WHERE created_at < ?1)",
                args![before],
            )?;
            db.execute(
                "DELETE FROM webhook_events WHERE created_at < ?1
                     AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = webhook_events.id)",
                args![before],
            )
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pass reads the due list, another send pauses the endpoint, then the pass claims
    /// what it read: the claim must see the pause (a flaky end-to-end test found this).
    #[tokio::test]
    async fn a_delivery_of_an_endpoint_paused_since_the_list_was_read_is_not_claimed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db"), std::time::Duration::from_secs(5)).unwrap();
        store
            .write(|db| {
                db.execute(
                    "INSERT INTO webhook_endpoints (id, account_id, url, events, secret, created_at)
                     VALUES ('we_1', 'acc_1', 'http://127.0.0.1:9/hook', 'key.created', x'00', 0)",
                    args![],
                )?;
                db.execute(
                    "INSERT INTO webhook_events (id, account_id, type, dedup_key, body, created_at)
                     VALUES ('msg_1', 'acc_1', 'key.created', 'k1', '{}', 0)",
                    args![],
                )?;
                db.execute(
                    "INSERT INTO webhook_deliveries (id, event_id, endpoint_id, account_id, state, next_attempt_at, created_at, updated_at)
                     VALUES ('dlv_1', 'msg_1', 'we_1', 'acc_1', 'pending', 0, 0, 0)",
                    args![],
                )?;
                Ok(())
            })
            .await
            .unwrap();
        let due = store.due_webhook_deliveries(1_000, 10, 2).await.unwrap();
        assert_eq!(due.len(), 1, "due before the pause");
        store
            .write(|db| {
                db.execute(
                    "UPDATE webhook_endpoints SET paused_until = 31000 WHERE id = 'we_1'",
                    args![],
                )?;
                Ok(())
            })
            .await
            .unwrap();
        let claimed = store
            .claim_webhook_delivery("dlv_1", "c1", 1_001, 60_000)
            .await
            .unwrap();
        assert!(claimed.is_none(), "claimed while its endpoint is paused");
        let after = store
            .claim_webhook_delivery("dlv_1", "c2", 31_001, 60_000)
            .await
            .unwrap();
        assert!(after.is_some(), "claimed once the pause is over");
    }
}
