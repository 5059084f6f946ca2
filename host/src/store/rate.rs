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

/// A share of a key's two windows granted to one host (see services/rate_limit.rs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Claimed {
    /// Requests granted, counted in both windows already; 0 when a window is full.
    pub granted: u32,
    /// The windows' counts after this claim (or as they stand, when nothing was granted).
    pub minute_count: u32,
    pub day_count: u32,
    /// Until when (Unix ms) some host may still hold granted requests it has not used.
    pub lease_until: i64,
}

/// What a host hands back: requests it was granted in these windows and did not use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unused {
    pub windows: (i64, i64),
    pub count: u32,
}

/// What one claim asks: `want` more requests, after handing back `unused`, held by this
/// host until `lease_until` (Unix ms).
#[derive(Debug, Clone, Copy)]
pub struct Claim {
    pub want: u32,
    pub unused: Option<Unused>,
    pub lease_until: i64,
}

/// At most this share of what is left goes to one claim, so no host sits on the rest.
const SHARE_DIVISOR: u32 = 4;

impl Store {
    /// Hands back `unused` (if any), then grants up to `want` requests of `key` in `scope`
    /// for the windows starting at `windows`, as both windows' room allows (and never more
    /// than a quarter of it, but at least one), recording that this host may hold them
    /// until `lease_until`. One transaction, taken in turn with every host's claims on this
    /// key. A host whose clock is behind counts into the newer window it finds.
    pub async fn claim_requests(
        &self,
        scope: &'static str,
        key: &str,
        (minute_start, day_start): (i64, i64),
        (per_minute, per_day): (u32, u32),
        Claim {
            want,
            unused,
            lease_until,
        }: Claim,
    ) -> Result<Claimed, StoreError> {
        let key = key.to_string();
        self.write(move |db| {
            db.serialize(&format!("rate:{scope}:{key}"))?;
            if let Some(Unused { windows: (m, d), count }) = unused.filter(|u| u.count > 0) {
                db.execute(
                    "UPDATE rate_counters SET
                        minute_count = CASE WHEN minute_start = ?3 AND minute_count >= ?5 THEN minute_count - ?5 ELSE minute_count END,
                        day_count = CASE WHEN day_start = ?4 AND day_count >= ?5 THEN day_count - ?5 ELSE day_count END
                     WHERE scope = ?1 AND key = ?2",
                    args![scope, &key, m, d, count],
                )?;
            }
            let row = db.query_opt(
                "SELECT minute_start, minute_count, day_start, day_count, lease_until FROM rate_counters
                 WHERE scope = ?1 AND key = ?2",
                args![scope, &key],
            )?;
            let (mut minute, mut day, mut until) = ((minute_start, 0u32), (day_start, 0u32), 0i64);
            if let Some(row) = row {
                let stored_minute: i64 = row.get(0)?;
                if stored_minute >= minute_start {
                    minute = (stored_minute, row.get(1)?);
                }
                let stored_day: i64 = row.get(2)?;
                if stored_day >= day_start {
                    day = (stored_day, row.get(3)?);
                }
                until = row.get::<Option<i64>>(4)?.unwrap_or(0);
            }
            let room = per_minute.saturating_sub(minute.1).min(per_day.saturating_sub(day.1));
            let granted = want.min((room / SHARE_DIVISOR).max(1)).min(room);
            if granted > 0 {
                minute.1 += granted;
                day.1 += granted;
                until = until.max(lease_until);
                db.execute(
                    "INSERT INTO rate_counters (scope, key, minute_start, minute_count, day_start, day_count, lease_until)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT (scope, key) DO UPDATE SET minute_start = ?3, minute_count = ?4,
                        day_start = ?5, day_count = ?6, lease_until = ?7",
                    args![scope, &key, minute.0, minute.1, day.0, day.1, until],
                )?;
            }
            Ok(Claimed {
                granted,
                minute_count: minute.1,
                day_count: day.1,
                lease_until: until,
            })
        })
        .await
    }
}
