//! Owners' low-balance alerts on their agents' wallets (migration 24).

use super::sql::args;
use super::{Store, StoreError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalletAlert {
    pub agent_id: String,
    pub network: String,
    /// micro-USDC
    pub below: i64,
    /// Since when the balance has been below, if it is.
    pub low_since: Option<i64>,
    pub checked_at: Option<i64>,
}

fn alert_from_row(row: &super::sql::Row) -> Result<WalletAlert, StoreError> {
    Ok(WalletAlert {
        agent_id: row.get(0)?,
        network: row.get(1)?,
        below: row.get(2)?,
        low_since: row.get(3)?,
        checked_at: row.get(4)?,
    })
}

impl Store {
    /// Sets (or with `None`, removes) the agent's alert on `network`; a new amount is
    /// checked anew.
    pub async fn set_wallet_alert(&self, agent_id: &str, network: &str, below: Option<i64>) -> Result<(), StoreError> {
        let (agent_id, network) = (agent_id.to_string(), network.to_string());
        self.write(move |db| {
            match below {
                Some(below) => db.execute(
                    "INSERT INTO wallet_alerts (agent_id, network, below) VALUES (?1, ?2, ?3)
                     ON CONFLICT (agent_id, network) DO UPDATE SET below = ?3, low_since = NULL, checked_at = NULL",
                    args![agent_id, network, below],
                )?,
                None => db.execute(
                    "DELETE FROM wallet_alerts WHERE agent_id = ?1 AND network = ?2",
                    args![agent_id, network],
                )?,
            };
            Ok(())
        })
        .await
    }

    /// Every alert (all agents, or one agent's).
    pub async fn wallet_alerts(&self, agent_id: Option<&str>) -> Result<Vec<WalletAlert>, StoreError> {
        let agent_id = agent_id.map(str::to_string);
        self.read(move |db| {
            let rows = match &agent_id {
                Some(agent_id) => db.query(
                    "SELECT agent_id, network, below, low_since, checked_at FROM wallet_alerts WHERE agent_id = ?1
                     ORDER BY network",
                    args![agent_id],
                )?,
                None => db.query(
                    "SELECT agent_id, network, below, low_since, checked_at FROM wallet_alerts ORDER BY agent_id, network",
                    args![],
                )?,
            };
            rows.iter().map(alert_from_row).collect()
        })
        .await
    }

    /// Records a check of the alert: the balance `low` or not. When it just went low (it
    /// was not before, and the amount is the one checked), writes `wallet.low_balance` in
    /// the same transaction; true then.
    pub async fn note_wallet_check(
        &self,
        alert: &WalletAlert,
        low: bool,
        data: serde_json::Value,
    ) -> Result<bool, StoreError> {
        let alert = alert.clone();
        self.write(move |db| {
            let now = crate::clock::now_ms();
            if !low {
                db.execute(
                    "UPDATE wallet_alerts SET low_since = NULL, checked_at = ?3 WHERE agent_id = ?1 AND network = ?2",
                    args![&alert.agent_id, &alert.network, now],
                )?;
                return Ok(false);
            }
            let went_low = db.execute(
                "UPDATE wallet_alerts SET low_since = ?4, checked_at = ?4
                 WHERE agent_id = ?1 AND network = ?2 AND below = ?3 AND low_since IS NULL",
                args![&alert.agent_id, &alert.network, alert.below, now],
            )? == 1;
            if went_low {
                let dedup = format!("wallet.low_balance:{}:{}:{now}", alert.agent_id, alert.network);
                super::webhooks::emit_for_agent_in(db, &alert.agent_id, "wallet.low_balance", &dedup, data)?;
            }
            Ok(went_low)
        })
        .await
    }
}
