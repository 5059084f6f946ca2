//! An account's webhook endpoints, and the events written for them (migration 24).
//!
//! `emit_in` is called inside the write that changes what the event reports, so an event
//! exists exactly when its change does: once (its `dedup_key` is unique), with a delivery
//! to each endpoint that was subscribed then. Sending is `webhook_deliveries.rs`'s.

use serde_json::{Value, json};

use super::sql::{Db, Row, args};
use super::{KeyCheck, Store, StoreError};

/// Deliveries one endpoint may have waiting; a new one past it drops the oldest (failed,
/// saying why), so a receiver that is down for long costs a bounded backlog.
pub const MAX_PENDING_PER_ENDPOINT: i64 = 1_000;

/// The events an endpoint may subscribe to.
pub const EVENT_TYPES: [&str; 13] = [
    "payment.settled",
    "payment.refunded",
    "payment.needs_operator",
    "job.succeeded",
    "job.failed",
    "command.failing",
    "schedule.ran",
    "schedule.stopped",
    "spending.payment_made",
    "wallet.low_balance",
    "key.created",
    "key.updated",
    "key.revoked",
];

#[derive(Debug, Clone, PartialEq)]
pub struct WebhookEndpoint {
    pub id: String,
    pub account_id: String,
    pub url: String,
    pub description: Option<String>,
    pub events: Vec<String>,
    pub secret: Vec<u8>,
    pub created_at: i64,
    pub disabled_at: Option<i64>,
    pub disabled_reason: Option<String>,
    pub failing_since: Option<i64>,
    pub consecutive_failures: i64,
    pub last_success_at: Option<i64>,
}

/// What an owner may change on an endpoint; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct EndpointChange {
    pub url: Option<String>,
    pub description: Option<Option<String>>,
    pub events: Option<Vec<String>>,
    /// `Some(true)` enables a disabled endpoint (its failures forgotten); `Some(false)`
    /// disables it, with the owner as the reason.
    pub enabled: Option<bool>,
}

pub(super) const ENDPOINT_COLUMNS: &str = "id, account_id, url, description, events, secret, created_at, disabled_at, \
     disabled_reason, failing_since, consecutive_failures, last_success_at";

pub(super) fn endpoint_from_row(row: &Row) -> Result<WebhookEndpoint, StoreError> {
    let events: String = row.get(4)?;
    Ok(WebhookEndpoint {
        id: row.get(0)?,
        account_id: row.get(1)?,
        url: row.get(2)?,
        description: row.get(3)?,
        events: events
            .split(',')
            .filter(|e| !e.is_empty())
            .map(str::to_string)
            .collect(),
        secret: row.get(5)?,
        created_at: row.get(6)?,
        disabled_at: row.get(7)?,
        disabled_reason: row.get(8)?,
        failing_since: row.get(9)?,
        consecutive_failures: row.get(10)?,
        last_success_at: row.get(11)?,
    })
}

/// Writes an event of `account_id`'s and a delivery to each enabled endpoint subscribed to
/// it, unless an event with `dedup_key` was written before. An event no endpoint wants is
/// not written (nothing would ever read it). True when this call wrote it.
pub fn emit_in(
    db: &dyn Db,
    account_id: &str,
    event_type: &str,
    dedup_key: &str,
    data: Value,
) -> Result<bool, StoreError> {
    let mut subscribed = Vec::new();
    for row in db.query(
        "SELECT id, events FROM webhook_endpoints WHERE account_id = ?1 AND disabled_at IS NULL",
        args![account_id],
    )? {
        let events: String = row.get(1)?;
        if events.split(',').any(|e| e == event_type) {
            subscribed.push(row.get::<String>(0)?);
        }
    }
    if subscribed.is_empty() {
        return Ok(false);
    }
    let now = crate::clock::now_ms();
    let id = format!("msg_{}", crate::random::alphanumeric(24));
    // Standard Webhooks' payload: the type, when it happened, and thin data (ids, amounts).
    let body = json!({ "type": event_type, "timestamp": crate::clock::iso(now), "data": data }).to_string();
    let written = db.execute(
        "INSERT INTO webhook_events (id, account_id, type, dedup_key, body, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (dedup_key) DO NOTHING",
        args![&id, account_id, event_type, dedup_key, body, now],
    )? == 1;
    if !written {
        return Ok(false);
    }
    for endpoint_id in subscribed {
        super::webhook_deliveries::drop_oldest_beyond(db, &endpoint_id, MAX_PENDING_PER_ENDPOINT - 1)?;
        db.execute(
            "INSERT INTO webhook_deliveries (id, event_id, endpoint_id, account_id, state, attempts, next_attempt_at,
                 created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, 'pending', 0, ?5, ?5, ?5)",
            args![
                format!("dlv_{}", crate::random::hex_token(12)),
                &id,
                endpoint_id,
                account_id,
                now
            ],
        )?;
    }
    Ok(true)
}

/// `emit_in` for an event of an agent's, written to the agent's account (none if the agent
/// is gone).
pub fn emit_for_agent_in(
    db: &dyn Db,
    agent_id: &str,
    event_type: &str,
    dedup_key: &str,
    data: Value,
) -> Result<bool, StoreError> {
    let Some(row) = db.query_opt("SELECT account_id FROM agents WHERE id = ?1", args![agent_id])? else {
        return Ok(false);
    };
    let account_id: String = row.get(0)?;
    emit_in(db, &account_id, event_type, dedup_key, data)
}

/// `payment.settled`, `payment.refunded` or `payment.needs_operator`, described from the
/// payment's row.
pub fn emit_payment_in(db: &dyn Db, payment_id: &str, event_type: &str) -> Result<bool, StoreError> {
    emit_payment_keyed_in(db, payment_id, event_type, &format!("{event_type}:{payment_id}"))
}

/// The same, once per `dedup_key` (an event that may happen to a payment more than once).
pub fn emit_payment_keyed_in(
    db: &dyn Db,
    payment_id: &str,
    event_type: &str,
    dedup_key: &str,
) -> Result<bool, StoreError> {
    let Some(row) = db.query_opt(
        "SELECT p.agent_id, a.account_id, p.network, p.amount, p.command, p.x402_version, p.payer,
             p.transaction_signature, p.refund_transfer_id, p.needs_operator
         FROM payments p JOIN agents a ON a.id = p.agent_id WHERE p.id = ?1",
        args![payment_id],
    )?
    else {
        return Ok(false);
    };
    let account_id: String = row.get(1)?;
    let mut data = json!({
        "payment_id": payment_id,
        "agent_id": row.get::<String>(0)?,
        "network": row.get::<String>(2)?,
        "amount_micro_usdc": row.get::<i64>(3)?,
        "command": row.get::<Option<String>>(4)?,
        "x402_version": row.get::<i64>(5)?,
        "payer": row.get::<String>(6)?,
        "transaction": row.get::<Option<String>>(7)?,
        "refund_transfer_id": row.get::<Option<String>>(8)?,
    });
    if event_type == "payment.needs_operator" {
        data["why"] = json!(row.get::<Option<String>>(9)?);
    }
    emit_in(db, &account_id, event_type, dedup_key, data)
}

impl Store {
    /// An event not tied to another write (a command failing, a wallet running low).
    pub async fn emit_event(
        &self,
        account_id: &str,
        event_type: &'static str,
        dedup_key: String,
        data: Value,
    ) -> Result<bool, StoreError> {
        let account_id = account_id.to_string();
        self.write(move |db| emit_in(db, &account_id, event_type, &dedup_key, data))
            .await
    }

    /// Records the endpoint unless the account has `max` already: counted and inserted in
    /// one write, one account's at a time, so racing requests cannot pass the limit.
    pub async fn insert_webhook_endpoint(
        &self,
        endpoint: WebhookEndpoint,
        max: u64,
        sealed_with: KeyCheck,
    ) -> Result<(), StoreError> {
        self.write(move |db| {
            super::sealed::fence(db, &sealed_with)?;
            db.serialize(&format!("webhook-endpoints:{}", endpoint.account_id))?;
            let count: i64 = db
                .query_one(
                    "SELECT COUNT(*) FROM webhook_endpoints WHERE account_id = ?1",
                    args![&endpoint.account_id],
                )?
                .get(0)?;
            if u64::try_from(count).unwrap_or(u64::MAX) >= max {
                return Err(StoreError::QuotaExceeded(format!(
                    "An account may register {max} webhook endpoints; delete one first"
                )));
            }
            db.execute(
                "INSERT INTO webhook_endpoints (id, account_id, url, description, events, secret, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                args![
                    endpoint.id,
                    endpoint.account_id,
                    endpoint.url,
                    endpoint.description,
                    endpoint.events.join(","),
                    endpoint.secret,
                    endpoint.created_at
                ],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn webhook_endpoints(&self, account_id: &str) -> Result<Vec<WebhookEndpoint>, StoreError> {
        let account_id = account_id.to_string();
        self.read(move |db| {
            db.query(
                &format!(
                    "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE account_id = ?1 ORDER BY created_at, id"
                ),
                args![account_id],
            )?
            .iter()
            .map(endpoint_from_row)
            .collect()
        })
        .await
    }

    /// The endpoint, if it is `account_id`'s.
    pub async fn webhook_endpoint(&self, account_id: &str, id: &str) -> Result<Option<WebhookEndpoint>, StoreError> {
        let (account_id, id) = (account_id.to_string(), id.to_string());
        self.read(move |db| {
            db.query_opt(
                &format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = ?1 AND account_id = ?2"),
                args![id, account_id],
            )?
            .as_ref()
            .map(endpoint_from_row)
            .transpose()
        })
        .await
    }

    /// Applies `change` to the account's endpoint; the endpoint as it now stands.
    pub async fn update_webhook_endpoint(
        &self,
        account_id: &str,
        id: &str,
        change: EndpointChange,
    ) -> Result<Option<WebhookEndpoint>, StoreError> {
        let (account_id, id) = (account_id.to_string(), id.to_string());
        self.write(move |db| {
            let select = format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = ?1 AND account_id = ?2");
            let Some(row) = db.query_opt(&select, args![&id, &account_id])? else {
                return Ok(None);
            };
            let mut endpoint = endpoint_from_row(&row)?;
            if let Some(url) = change.url {
                endpoint.url = url;
            }
            if let Some(description) = change.description {
                endpoint.description = description;
            }
            if let Some(events) = change.events {
                endpoint.events = events;
            }
            match change.enabled {
                Some(true) if endpoint.disabled_at.is_some() => {
                    endpoint.disabled_at = None;
                    endpoint.disabled_reason = None;
                    endpoint.failing_since = None;
                    endpoint.consecutive_failures = 0;
                }
                Some(false) if endpoint.disabled_at.is_none() => {
                    endpoint.disabled_at = Some(crate::clock::now_ms());
                    endpoint.disabled_reason = Some("disabled by its owner".into());
                }
                _ => {}
            }
            db.execute(
                "UPDATE webhook_endpoints SET url = ?2, description = ?3, events = ?4, disabled_at = ?5,
                     disabled_reason = ?6, failing_since = ?7, consecutive_failures = ?8 WHERE id = ?1",
                args![
                    &id,
                    &endpoint.url,
                    &endpoint.description,
                    endpoint.events.join(","),
                    endpoint.disabled_at,
                    &endpoint.disabled_reason,
                    endpoint.failing_since,
                    endpoint.consecutive_failures
                ],
            )?;
            if endpoint.disabled_at.is_some() {
                super::webhook_deliveries::fail_pending_in(db, &id, "the endpoint is disabled")?;
            }
            Ok(Some(endpoint))
        })
        .await
    }

    /// Deletes the account's endpoint and its deliveries; false if there was none.
    pub async fn delete_webhook_endpoint(&self, account_id: &str, id: &str) -> Result<bool, StoreError> {
        let (account_id, id) = (account_id.to_string(), id.to_string());
        self.write(move |db| {
            let deleted = db.execute(
                "DELETE FROM webhook_endpoints WHERE id = ?1 AND account_id = ?2",
                args![&id, &account_id],
            )? == 1;
            if deleted {
                db.execute(
                    "DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE endpoint_id = ?1)",
                    args![&id],
                )?;
                db.execute("DELETE FROM webhook_deliveries WHERE endpoint_id = ?1", args![&id])?;
            }
            Ok(deleted)
        })
        .await
    }

    /// How many endpoints the account has (they are limited per account).
    pub async fn count_webhook_endpoints(&self, account_id: &str) -> Result<u64, StoreError> {
        let account_id = account_id.to_string();
        self.read(move |db| {
            let count: i64 = db
                .query_one(
                    "SELECT COUNT(*) FROM webhook_endpoints WHERE account_id = ?1",
                    args![account_id],
                )?
                .get(0)?;
            Ok(count as u64)
        })
        .await
    }
}
