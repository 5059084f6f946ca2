use rusqlite::params;

use super::{Store, StoreError};

/// One saved rate-limit window of one account.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRow {
    pub account_id: String,
    /// `minute` or `day`.
    pub window: &'static str,
    pub window_start: i64,
    pub count: u32,
}

impl Store {
    pub async fn load_rate_usage(&self) -> Result<Vec<UsageRow>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn.prepare("SELECT account_id, window, window_start, count FROM rate_usage")?;
            let rows = stmt.query_map([], |row| {
                let window: String = row.get(1)?;
                Ok(UsageRow {
                    account_id: row.get(0)?,
                    window: if window == "day" { "day" } else { "minute" },
                    window_start: row.get(2)?,
                    count: row.get(3)?,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    pub async fn save_rate_usage(&self, rows: Vec<UsageRow>) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        self.write(move |tx| {
            let mut stmt = tx.prepare(
                "INSERT INTO rate_usage (account_id, window, window_start, count) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (account_id, window) DO UPDATE SET window_start = ?3, count = ?4",
            )?;
            for row in rows {
                stmt.execute(params![row.account_id, row.window, row.window_start, row.count])?;
            }
            Ok(())
        })
        .await
    }
}
