//! What agents paid for the x402 services their commands call (migration 36): each payment
//! recorded before it is signed, in the write that checks the agent's daily maximum, then
//! moved on once to how it ended.

use serde_json::json;

use super::sql::{Row, args};
use super::{Store, StoreError};
use crate::domain::Network;
use crate::money::MicroUsdc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpendState {
    /// Recorded; its signature is being made.
    Signing,
    /// Signed and sent with the retried request.
    Sent,
    /// The payee answered with success.
    Settled,
    /// The payee answered 402 again.
    Refused,
    /// Another answer, or none: it may still be settled.
    Unknown,
    /// Nothing was signed.
    Void,
}

impl SpendState {
    pub fn as_str(self) -> &'static str {
        match self {
            SpendState::Signing => "signing",
            SpendState::Sent => "sent",
            SpendState::Settled => "settled",
            SpendState::Refused => "refused",
            SpendState::Unknown => "unknown",
            SpendState::Void => "void",
        }
    }

    fn parse(text: &str) -> Option<SpendState> {
        Some(match text {
            "signing" => SpendState::Signing,
            "sent" => SpendState::Sent,
            "settled" => SpendState::Settled,
            "refused" => SpendState::Refused,
            "unknown" => SpendState::Unknown,
            "void" => SpendState::Void,
            _ => return None,
        })
    }
}

/// A payment about to be signed.
#[derive(Debug, Clone)]
pub struct NewSpend {
    pub id: String,
    pub account_id: String,
    pub agent_id: String,
    pub command: String,
    pub network: Network,
    pub x402_version: u64,
    pub amount: MicroUsdc,
    pub pay_to: String,
    /// What was bought: the request's URL without its query.
    pub resource: String,
    /// The agent's wallet address that pays.
    pub payer: String,
}

#[derive(Debug, Clone)]
pub struct SpendRecord {
    pub spend: NewSpend,
    pub state: SpendState,
    pub transaction: Option<String>,
    pub error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

const COLUMNS: &str = "id, account_id, agent_id, command, network, x402_version, amount, pay_to, resource, payer, \
     state, transaction_id, error, created_at, updated_at";

fn spend_from_row(row: &Row) -> Result<SpendRecord, StoreError> {
    let network: String = row.get(4)?;
    let state: String = row.get(10)?;
    Ok(SpendRecord {
        spend: NewSpend {
            id: row.get(0)?,
            account_id: row.get(1)?,
            agent_id: row.get(2)?,
            command: row.get(3)?,
            network: Network::parse(&network)
                .ok_or_else(|| StoreError::Corrupt(format!("agent_spending.network '{network}'")))?,
            x402_version: row.get::<i64>(5)? as u64,
            amount: MicroUsdc(row.get::<i64>(6)? as u64),
            pay_to: row.get(7)?,
            resource: row.get(8)?,
            payer: row.get(9)?,
        },
        state: SpendState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("agent_spending.state '{state}'")))?,
        transaction: row.get(11)?,
        error: row.get(12)?,
        created_at: row.get(13)?,
        updated_at: row.get(14)?,
    })
}

/// What the agent's payments of the day before `now` add up to (every one signed or being
/// signed: a signed payment can be settled until it expires, whatever its payee answered).
fn spent_in(db: &dyn super::sql::Db, agent_id: &str, now: i64) -> Result<MicroUsdc, StoreError> {
    let since = now - crate::domain::spending::DAY_MS;
    let spent: i64 = db
        .query_one(
            "SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) FROM agent_spending
             WHERE agent_id = ?1 AND created_at > ?2 AND state <> 'void'",
            args![agent_id, since],
        )?
        .get(0)?;
    Ok(MicroUsdc(spent.max(0) as u64))
}

impl Store {
    /// Records `new` as being signed, unless it and the agent's payments of the day before
    /// would pass `max_per_day`: then what those payments add up to. Two payments at once
    /// (two hosts) take turns, so the second counts the first.
    pub async fn reserve_spend(
        &self,
        new: NewSpend,
        max_per_day: MicroUsdc,
    ) -> Result<Result<(), MicroUsdc>, StoreError> {
        self.write(move |db| {
            db.serialize(&format!("agent-spending:{}", new.agent_id))?;
            let now = crate::clock::now_ms();
            let spent = spent_in(db, &new.agent_id, now)?;
            if spent.0.saturating_add(new.amount.0) > max_per_day.0 {
                return Ok(Err(spent));
            }
            db.execute(
                &format!("INSERT INTO agent_spending ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'signing', NULL, NULL, ?11, ?11)"),
                args![
                    &new.id,
                    &new.account_id,
                    &new.agent_id,
                    &new.command,
                    new.network.as_str(),
                    new.x402_version as i64,
                    new.amount.0 as i64,
                    &new.pay_to,
                    &new.resource,
                    &new.payer,
                    now
                ],
            )?;
            Ok(Ok(()))
        })
        .await
    }

    /// The signed payment went out with the retried request.
    pub async fn spend_sent(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            db.execute(
                "UPDATE agent_spending SET state = 'sent', updated_at = ?2 WHERE id = ?1 AND state = 'signing'",
                args![&id, crate::clock::now_ms()],
            )?;
            Ok(())
        })
        .await
    }

    /// How the payment ended, once. A payment that was signed (not `void`) is counted in
    /// its agent's usage as spent and raises `spending.payment_made` for its owner's
    /// webhooks, in the same write.
    pub async fn finish_spend(
        &self,
        id: &str,
        state: SpendState,
        transaction: Option<String>,
        error: Option<String>,
    ) -> Result<(), StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            let changed = db.execute(
                "UPDATE agent_spending SET state = ?2, transaction_id = ?3, error = ?4, updated_at = ?5
                 WHERE id = ?1 AND state IN ('signing', 'sent')",
                args![
                    &id,
                    state.as_str(),
                    transaction.clone(),
                    error.clone(),
                    crate::clock::now_ms()
                ],
            )?;
            if changed == 0 || state == SpendState::Void {
                return Ok(());
            }
            let record = spend_from_row(&db.query_one(
                &format!("SELECT {COLUMNS} FROM agent_spending WHERE id = ?1"),
                args![&id],
            )?)?;
            let spend = &record.spend;
            // Counted as spent once signed, as the day's maximum counts it.
            super::usage::add_in(
                db,
                &super::usage::UsageAdd {
                    account_id: spend.account_id.clone(),
                    agent_id: spend.agent_id.clone(),
                    hour: super::usage::hour_of(record.created_at),
                    command: spend.command.clone(),
                    metric: "spent",
                    dim: spend.network.as_str().to_string(),
                    n: 1,
                    total: spend.amount.0 as i64,
                },
            )?;
            super::webhooks::emit_in(
                db,
                &spend.account_id,
                "spending.payment_made",
                &format!("spending.payment_made:{id}"),
                json!({
                    "payment_id": id,
                    "agent_id": spend.agent_id,
                    "command": spend.command,
                    "state": state.as_str(),
                    "network": spend.network.as_str(),
                    "amount_micro_usdc": spend.amount.0,
                    "pay_to": spend.pay_to,
                    "resource": spend.resource,
                    "transaction": transaction,
                    "error": error,
                }),
            )?;
            Ok(())
        })
        .await
    }

    /// The agent's payments, newest first.
    pub async fn spending_of(&self, agent_id: &str, limit: u32) -> Result<Vec<SpendRecord>, StoreError> {
        let agent_id = agent_id.to_string();
        self.read(move |db| {
            db.query(
                &format!("SELECT {COLUMNS} FROM agent_spending WHERE agent_id = ?1 ORDER BY created_at DESC, id DESC LIMIT ?2"),
                args![&agent_id, i64::from(limit)],
            )?
            .iter()
            .map(spend_from_row)
            .collect()
        })
        .await
    }

    /// What the agent's payments of the last 24 hours add up to.
    pub async fn spent_today(&self, agent_id: &str) -> Result<MicroUsdc, StoreError> {
        let agent_id = agent_id.to_string();
        self.read(move |db| spent_in(db, &agent_id, crate::clock::now_ms()))
            .await
    }
}
