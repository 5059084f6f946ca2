use super::sql::args;
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
        self.read(|db| {
            db.query(
                r#"SELECT account_id, "window", window_start, count FROM rate_usage"#,
                args![],
            )?
            .iter()
            .map(|row| {
                let window: String = row.get(1)?;
                Ok(UsageRow {
                    account_id: row.get(0)?,
                    window: if window == "day" { "day" } else { "minute" },
                    window_start: row.get(2)?,
                    count: row.get(3)?,
                })
            })
            .collect()
        })
        .await
    }

    pub async fn save_rate_usage(&self, rows: Vec<UsageRow>) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        self.write(move |db| {
            for row in rows {
                db.execute(
                    r#"INSERT INTO rate_usage (account_id, "window", window_start, count) VALUES (?1, ?2, ?3, ?4)
                       ON CONFLICT (account_id, "window") DO UPDATE SET window_start = ?3, count = ?4"#,
                    args![row.account_id, row.window, row.window_start, row.count],
                )?;
            }
            Ok(())
        })
        .await
    }
}

/// One request counted against a key's two windows in the shared counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Counted {
    /// False when a window was full: nothing was counted.
    pub allowed: bool,
    /// The windows' counts after this request (or as they stand, when refused).
    pub minute_count: u32,
    pub day_count: u32,
}

impl Store {
    /// Counts one request of `key` in `scope` if both windows have room, in one statement
    /// every host's requests go through. A host whose clock is behind counts into the
    /// newer window it finds rather than reopening an old one.
    pub async fn count_request(
        &self,
        scope: &'static str,
        key: &str,
        (minute_start, day_start): (i64, i64),
        (per_minute, per_day): (u32, u32),
    ) -> Result<Counted, StoreError> {
        let key = key.to_string();
        self.write(move |db| {
            let counted = db.query_opt(
                "INSERT INTO rate_counters AS r (scope, key, minute_start, minute_count, day_start, day_count)
                 VALUES (?1, ?2, ?3, 1, ?4, 1)
                 ON CONFLICT (scope, key) DO UPDATE SET
                    minute_start = CASE WHEN r.minute_start >= ?3 THEN r.minute_start ELSE ?3 END,
                    minute_count = CASE WHEN r.minute_start >= ?3 THEN r.minute_count ELSE 0 END + 1,
                    day_start = CASE WHEN r.day_start >= ?4 THEN r.day_start ELSE ?4 END,
                    day_count = CASE WHEN r.day_start >= ?4 THEN r.day_count ELSE 0 END + 1
                 WHERE (CASE WHEN r.minute_start >= ?3 THEN r.minute_count ELSE 0 END) < ?5
                   AND (CASE WHEN r.day_start >= ?4 THEN r.day_count ELSE 0 END) < ?6
                 RETURNING minute_count, day_count",
                args![scope, &key, minute_start, day_start, per_minute, per_day],
            )?;
            if let Some(row) = counted {
                return Ok(Counted {
                    allowed: true,
                    minute_count: row.get(0)?,
                    day_count: row.get(1)?,
                });
            }
            let row = db.query_one(
                "SELECT CASE WHEN minute_start >= ?3 THEN minute_count ELSE 0 END,
                        CASE WHEN day_start >= ?4 THEN day_count ELSE 0 END
                 FROM rate_counters WHERE scope = ?1 AND key = ?2",
                args![scope, key, minute_start, day_start],
            )?;
            Ok(Counted {
                allowed: false,
                minute_count: row.get(0)?,
                day_count: row.get(1)?,
            })
        })
        .await
    }
}
