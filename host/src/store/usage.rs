//! Usage counters per agent and UTC hour (migration 23): added to, never rewritten, so any
//! host and any transaction can add without a lock, and read back summed over a range.

use super::sql::{Db, args};
use super::{Store, StoreError};

pub const HOUR_MS: i64 = 3_600_000;

/// The start of `ms`'s UTC hour.
pub fn hour_of(ms: i64) -> i64 {
    ms.div_euclid(HOUR_MS) * HOUR_MS
}

/// One addition to a counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageAdd {
    pub account_id: String,
    pub agent_id: String,
    pub hour: i64,
    pub command: String,
    pub metric: &'static str,
    pub dim: String,
    pub n: i64,
    pub total: i64,
}

/// A counter summed over one step of a range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageSum {
    pub agent_id: String,
    /// The step's start (Unix ms).
    pub at: i64,
    pub command: String,
    pub metric: String,
    pub dim: String,
    pub n: i64,
    pub total: i64,
}

/// Every write adds to what is there: writes commute, so no host waits for another's.
macro_rules! adding {
    ($insert:literal) => {
        concat!(
            "INSERT INTO usage_counters (account_id, agent_id, hour, command, metric, dim, n, total) ",
            $insert,
            " ON CONFLICT (agent_id, hour, command, metric, dim) DO UPDATE
              SET n = usage_counters.n + excluded.n, total = usage_counters.total + excluded.total"
        )
    };
}

const ADD: &str = adding!("VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
const ADD_FOR_AGENT: &str = adding!("SELECT account_id, id, ?2, '', ?3, ?4, 1, ?5 FROM agents WHERE id = ?1");

/// Adds inside a write that is already open (a payment's own transaction).
pub fn add_in(db: &dyn Db, add: &UsageAdd) -> Result<(), StoreError> {
    db.execute(
        ADD,
        args![
            &add.account_id,
            &add.agent_id,
            add.hour,
            &add.command,
            add.metric,
            &add.dim,
            add.n,
            add.total
        ],
    )?;
    Ok(())
}

/// A payment's amount (micro-USDC) added to its agent's counters, from the payment's row.
const ADD_REVENUE: &str = adding!(
    "SELECT a.account_id, p.agent_id, ?2, COALESCE(p.command, ''), 'revenue', p.network || '/v' || p.x402_version, 1, p.amount
     FROM payments p JOIN agents a ON a.id = p.agent_id WHERE p.id = ?1"
);
const ADD_REFUND: &str = adding!(
    "SELECT a.account_id, p.agent_id, ?2, COALESCE(p.command, ''), 'refunds', p.network, 1, p.amount
     FROM payments p JOIN agents a ON a.id = p.agent_id WHERE p.id = ?1"
);

/// Counts a payment just settled as its agent's revenue, in the write that settled it.
pub fn add_revenue_in(db: &dyn Db, payment_id: &str) -> Result<(), StoreError> {
    db.execute(ADD_REVENUE, args![payment_id, hour_of(crate::clock::now_ms())])?;
    Ok(())
}

/// Counts a payment just refunded, in the write that marked it refunded.
pub fn add_refund_in(db: &dyn Db, payment_id: &str) -> Result<(), StoreError> {
    db.execute(ADD_REFUND, args![payment_id, hour_of(crate::clock::now_ms())])?;
    Ok(())
}

impl Store {
    /// Adds one event of `agent_id`'s (its account looked up in the same write); an agent
    /// deleted meanwhile adds nothing.
    pub async fn add_agent_usage(
        &self,
        agent_id: &str,
        metric: &'static str,
        dim: String,
        total: i64,
    ) -> Result<(), StoreError> {
        let agent_id = agent_id.to_string();
        let hour = hour_of(crate::clock::now_ms());
        self.write(move |db| {
            db.execute(ADD_FOR_AGENT, args![agent_id, hour, metric, dim, total])?;
            Ok(())
        })
        .await
    }

    /// Adds every row in one transaction.
    pub async fn add_usage(&self, adds: Vec<UsageAdd>) -> Result<(), StoreError> {
        if adds.is_empty() {
            return Ok(());
        }
        self.write(move |db| adds.iter().try_for_each(|add| add_in(db, add)))
            .await
    }

    /// The counters of `account_id` (one agent's, when named) from `from` to before `to`,
    /// summed per `step` ms (a whole number of hours), oldest first. For the whole account
    /// the agents are summed together (`agent_id` is empty): `usage_by_agent` tells them apart.
    pub async fn usage(
        &self,
        account_id: &str,
        agent_id: Option<&str>,
        from: i64,
        to: i64,
        step: i64,
    ) -> Result<Vec<UsageSum>, StoreError> {
        let (account_id, agent_id) = (account_id.to_string(), agent_id.map(str::to_string));
        self.read(move |db| {
            // `hour - (hour - from) % step` keeps steps aligned to `from`, on both dialects.
            let (agent, args) = match &agent_id {
                Some(agent_id) => (
                    "AND agent_id = ?5",
                    args![account_id, from, to, step, agent_id].to_vec(),
                ),
                None => ("", args![account_id, from, to, step].to_vec()),
            };
            db.query(
                &format!(
                    "SELECT hour - ((hour - ?2) % ?4) AS step_at, command, metric, dim,
                        CAST(SUM(n) AS BIGINT), CAST(SUM(total) AS BIGINT)
                     FROM usage_counters
                     WHERE account_id = ?1 AND hour >= ?2 AND hour < ?3 {agent}
                     GROUP BY step_at, command, metric, dim ORDER BY step_at"
                ),
                &args,
            )?
            .iter()
            .map(|row| {
                Ok(UsageSum {
                    agent_id: agent_id.clone().unwrap_or_default(),
                    at: row.get(0)?,
                    command: row.get(1)?,
                    metric: row.get(2)?,
                    dim: row.get(3)?,
                    n: row.get(4)?,
                    total: row.get(5)?,
                })
            })
            .collect()
        })
        .await
    }

    /// Each agent's counters of the account over the range, summed (no steps, no commands).
    pub async fn usage_by_agent(&self, account_id: &str, from: i64, to: i64) -> Result<Vec<UsageSum>, StoreError> {
        let account_id = account_id.to_string();
        self.read(move |db| {
            db.query(
                "SELECT agent_id, metric, dim, CAST(SUM(n) AS BIGINT), CAST(SUM(total) AS BIGINT)
                 FROM usage_counters WHERE account_id = ?1 AND hour >= ?2 AND hour < ?3
                 GROUP BY agent_id, metric, dim",
                args![account_id, from, to],
            )?
            .iter()
            .map(|row| {
                Ok(UsageSum {
                    agent_id: row.get(0)?,
                    at: from,
                    command: String::new(),
                    metric: row.get(1)?,
                    dim: row.get(2)?,
                    n: row.get(3)?,
                    total: row.get(4)?,
                })
            })
            .collect()
        })
        .await
    }

    /// Drops counters of hours before `before`; how many rows went.
    pub async fn prune_usage(&self, before: i64) -> Result<u64, StoreError> {
        self.write(move |db| db.execute("DELETE FROM usage_counters WHERE hour < ?1", args![before]))
            .await
    }
}
