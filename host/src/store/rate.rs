use super::sql::args;
use super::{Store, StoreError};
use crate::rate_window::{DAY_MS, MINUTE_MS, WindowCount};

/// One saved rate-limit window of one account.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRow {
    pub account_id: String,
    /// `minute` or `day`.
    pub window: &'static str,
    pub counts: WindowCount,
}

impl Store {
    pub async fn load_rate_usage(&self) -> Result<Vec<UsageRow>, StoreError> {
        self.read(|db| {
            db.query(
                r#"SELECT account_id, "window", window_start, count, previous FROM rate_usage"#,
                args![],
            )?
            .iter()
            .map(|row| {
                let window: String = row.get(1)?;
                Ok(UsageRow {
                    account_id: row.get(0)?,
                    window: if window == "day" { "day" } else { "minute" },
                    counts: WindowCount {
                        start: row.get(2)?,
                        count: row.get(3)?,
                        previous: row.get(4)?,
                    },
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
                    r#"INSERT INTO rate_usage (account_id, "window", window_start, count, previous) VALUES (?1, ?2, ?3, ?4, ?5)
                       ON CONFLICT (account_id, "window") DO UPDATE SET window_start = ?3, count = ?4, previous = ?5"#,
                    args![row.account_id, row.window, row.counts.start, row.counts.count, row.counts.previous],
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
    pub minute: WindowCount,
    pub day: WindowCount,
    /// Until when (Unix ms) some host may still hold granted requests it has not used.
    pub lease_until: i64,
}

/// What a host hands back: requests it was granted in these windows (their starts) and
/// did not use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unused {
    pub windows: (i64, i64),
    pub count: u32,
}

/// What one claim asks: `want` more requests at `now_ms` (at least `need`, or none), after
/// handing back `unused`, held by this host until `lease_until` (Unix ms).
#[derive(Debug, Clone, Copy)]
pub struct Claim {
    pub want: u32,
    pub need: u32,
    pub unused: Option<Unused>,
    pub now_ms: i64,
    pub lease_until: i64,
    /// Counts `need` whatever room is left: a cost already incurred, which the windows
    /// carry (past the limit, into the next windows' room).
    pub force: bool,
}

/// At most this share of what is left goes to one claim, so no host sits on the rest.
const SHARE_DIVISOR: u32 = 4;

impl Store {
    /// Hands back `unused` (if any), then grants up to `want` requests of `key` in `scope`
    /// at `now_ms`, as both sliding windows' room allows (and never more than a quarter of
    /// it, but at least one), recording that this host may hold them until `lease_until`.
    /// One transaction, taken in turn with every host's claims on this key. A host whose
    /// clock is behind counts into the newer window it finds.
    pub async fn claim_requests(
        &self,
        scope: &'static str,
        key: &str,
        (per_minute, per_day): (u32, u32),
        Claim {
            want,
            need,
            unused,
            now_ms,
            lease_until,
            force,
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
                "SELECT minute_start, minute_count, minute_previous, day_start, day_count, day_previous, lease_until
                 FROM rate_counters WHERE scope = ?1 AND key = ?2",
                args![scope, &key],
            )?;
            let (mut minute, mut day, mut until) = (WindowCount::default(), WindowCount::default(), 0i64);
            if let Some(row) = row {
                minute = WindowCount { start: row.get(0)?, count: row.get(1)?, previous: row.get(2)? };
                day = WindowCount { start: row.get(3)?, count: row.get(4)?, previous: row.get(5)? };
                until = row.get::<Option<i64>>(6)?.unwrap_or(0);
            }
            // Windows only move forward: a host whose clock is behind counts in the newer.
            let minute_now = if minute.start > WindowCount::start_of(now_ms, MINUTE_MS) {
                minute
            } else {
                minute.at(now_ms, MINUTE_MS)
            };
            let day_now = if day.start > WindowCount::start_of(now_ms, DAY_MS) {
                day
            } else {
                day.at(now_ms, DAY_MS)
            };
            let (mut minute, mut day) = (minute_now, day_now);
            let at = now_ms.max(minute.start);
            let room = minute
                .room(per_minute, MINUTE_MS, at)
                .min(day.room(per_day, DAY_MS, now_ms.max(day.start)));
            let granted = if force {
                need
            } else if room < need {
                0
            } else {
                want.min((room / SHARE_DIVISOR).max(need).max(1)).min(room)
            };
            if granted > 0 {
                minute.count += granted;
                day.count += granted;
                until = until.max(lease_until);
                db.execute(
                    "INSERT INTO rate_counters (scope, key, minute_start, minute_count, minute_previous,
                        day_start, day_count, day_previous, lease_until)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                     ON CONFLICT (scope, key) DO UPDATE SET minute_start = ?3, minute_count = ?4,
                        minute_previous = ?5, day_start = ?6, day_count = ?7, day_previous = ?8, lease_until = ?9",
                    args![scope, &key, minute.start, minute.count, minute.previous, day.start, day.count, day.previous, until],
                )?;
            }
            Ok(Claimed {
                granted,
                minute,
                day,
                lease_until: until,
            })
        })
        .await
    }

    /// Deletes `scope`'s counters whose day ended before yesterday and that no host holds
    /// a share of: they can no longer limit anything. Returns how many went.
    pub async fn prune_rate_counters(&self, scope: &'static str, now_ms: i64) -> Result<u64, StoreError> {
        let before = WindowCount::start_of(now_ms, DAY_MS) - DAY_MS;
        self.write(move |db| {
            db.execute(
                "DELETE FROM rate_counters WHERE scope = ?1 AND day_start < ?2 AND COALESCE(lease_until, 0) < ?3",
                args![scope, before, now_ms],
            )
        })
        .await
    }
}
