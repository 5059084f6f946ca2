//! Rate limits: a per-minute and a per-day (UTC) limit per key, each a sliding window
//! (`rate_window.rs`), so no burst at a window's edge gets twice the limit. Counting happens
//! under one lock, so N parallel requests never let more than the limit through.
//! A single host counts in memory: keyed-API counters (per account) are saved periodically
//! and at shutdown, and loaded at start; the x402 abuse limits (per client address, per
//! payer) live in memory only. Hosts sharing a store count in it instead, each from shares
//! it leases ahead of use (leases.rs), so together they let through exactly the limit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

mod leases;
mod plugin_llm;
mod x402;

use crate::domain::RateLimits;
use crate::rate_window::{DAY_MS, MINUTE_MS, WindowCount};
use crate::store::{Store, StoreError, UsageRow};
use leases::Leases;
pub use plugin_llm::PluginLlmBudget;
pub use x402::X402Limiter;

/// Keys tracked at once before idle ones are dropped: many client addresses cannot grow
/// memory without bound (past it, keys idle for two days go first, then for two minutes).
const MAX_TRACKED: usize = 100_000;

/// One key's counts in both kinds of window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub minute: WindowCount,
    pub day: WindowCount,
}

impl Usage {
    /// These counts as they stand at `now_ms`.
    pub fn at(self, now_ms: i64) -> Usage {
        Usage {
            minute: self.minute.at(now_ms, MINUTE_MS),
            day: self.day.at(now_ms, DAY_MS),
        }
    }

    /// Whether both windows have room for `n` more at `now_ms`.
    pub fn has_room(&self, limits: RateLimits, now_ms: i64, n: u32) -> bool {
        self.minute.room(limits.per_minute, MINUTE_MS, now_ms) >= n
            && self.day.room(limits.per_day, DAY_MS, now_ms) >= n
    }
}

/// What the headers report: the window that binds now (the one with fewer requests left).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateDecision {
    pub allowed: bool,
    pub limit: u32,
    pub remaining: u32,
    /// Unix seconds when the reported window's count starts to slide out (refused: when
    /// one more request fits).
    pub reset_unix: i64,
    /// Seconds to wait before retrying (when refused).
    pub retry_after_secs: u64,
}

#[derive(Default)]
pub struct RateLimiter {
    usage: Mutex<Tracked>,
}

#[derive(Default)]
struct Tracked {
    keys: HashMap<String, Usage>,
    /// The minute of the last pruning: at most one pass over the keys per minute, so a
    /// flood of new keys cannot make every request walk the whole map.
    pruned_minute: i64,
}

impl RateLimiter {
    /// Counts one request for `key` at `now_ms` if both windows have room.
    pub fn check(&self, key: &str, limits: RateLimits, now_ms: i64) -> RateDecision {
        self.count(key, limits, now_ms, 1)
    }

    /// What `check` would answer, counting nothing.
    pub fn peek(&self, key: &str, limits: RateLimits, now_ms: i64) -> RateDecision {
        self.count(key, limits, now_ms, 0)
    }

    /// Counts `n` units (tokens, bytes) for `key` at once if both windows have room for all.
    pub fn check_n(&self, key: &str, limits: RateLimits, now_ms: i64, n: u32) -> RateDecision {
        self.count(key, limits, now_ms, n)
    }

    /// `key`'s counts as they stand at `now_ms`, counting nothing.
    pub fn usage(&self, key: &str, now_ms: i64) -> Usage {
        let tracked = self.usage.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        tracked.keys.get(key).copied().unwrap_or_default().at(now_ms)
    }

    /// Counts `n` units for `key` whatever room is left (a cost already incurred): past the
    /// limit, the windows carry it into the next ones' room.
    pub fn force(&self, key: &str, now_ms: i64, n: u32) {
        let mut tracked = self.usage.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Looked up before inserting: the key is copied only the first time it is counted.
        if !tracked.keys.contains_key(key) {
            tracked.keys.insert(key.to_string(), Usage::default());
        }
        let usage = tracked.keys.get_mut(key).expect("inserted above");
        *usage = usage.at(now_ms);
        usage.minute.count += n;
        usage.day.count += n;
    }

    fn count(&self, key: &str, limits: RateLimits, now_ms: i64, n: u32) -> RateDecision {
        let mut tracked = self.usage.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let minute_start = WindowCount::start_of(now_ms, MINUTE_MS);
        if tracked.keys.len() >= MAX_TRACKED && tracked.pruned_minute != minute_start && !tracked.keys.contains_key(key)
        {
            tracked.pruned_minute = minute_start;
            let day_start = WindowCount::start_of(now_ms, DAY_MS);
            tracked.keys.retain(|_, u| u.day.start >= day_start - DAY_MS);
            if tracked.keys.len() >= MAX_TRACKED {
                tracked.keys.retain(|_, u| u.minute.start >= minute_start - MINUTE_MS);
            }
        }
        if n == 0 && !tracked.keys.contains_key(key) {
            return decide(limits, now_ms, true, Usage::default().at(now_ms));
        }
        // Looked up before inserting: the key is copied only the first time it is counted.
        if !tracked.keys.contains_key(key) {
            tracked.keys.insert(key.to_string(), Usage::default());
        }
        let usage = tracked.keys.get_mut(key).expect("inserted above");
        *usage = usage.at(now_ms);
        let allowed = usage.has_room(limits, now_ms, n.max(1));
        if allowed {
            usage.minute.count += n;
            usage.day.count += n;
        }
        decide(limits, now_ms, allowed, *usage)
    }

    /// Current counters, for saving.
    pub fn snapshot(&self) -> Vec<UsageRow> {
        let tracked = self.usage.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut rows = Vec::with_capacity(tracked.keys.len() * 2);
        for (account_id, usage) in tracked.keys.iter() {
            rows.push(UsageRow {
                account_id: account_id.clone(),
                window: "minute",
                counts: usage.minute,
            });
            rows.push(UsageRow {
                account_id: account_id.clone(),
                window: "day",
                counts: usage.day,
            });
        }
        rows
    }

    /// Loads saved counters; windows that have ended turn on first use anyway.
    pub fn restore(&self, rows: Vec<UsageRow>) {
        let mut tracked = self.usage.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for row in rows {
            let usage = tracked.keys.entry(row.account_id).or_default();
            if row.window == "day" {
                usage.day = row.counts;
            } else {
                usage.minute = row.counts;
            }
        }
    }
}

/// The headers' view of a request that was counted (`allowed`, with the windows' counts
/// after it) or refused (with the counts as they stand).
pub fn decide(limits: RateLimits, now_ms: i64, allowed: bool, usage: Usage) -> RateDecision {
    let windows = [
        (limits.per_minute, MINUTE_MS, usage.minute),
        (limits.per_day, DAY_MS, usage.day),
    ];
    if !allowed {
        // Both must have room again: wait for the later of the full windows (on a tie, the
        // fuller one: a refusal made a moment ago may see room come back in both).
        let (limit, wait, _) = windows
            .iter()
            .map(|(limit, len, counts)| {
                let room = counts.room(*limit, *len, now_ms);
                (*limit, counts.wait_ms(*limit, *len, now_ms), room)
            })
            .max_by_key(|(_, wait, room)| (*wait, std::cmp::Reverse(*room)))
            .unwrap_or((limits.per_minute, MINUTE_MS, 0));
        let wait = wait.max(1);
        return RateDecision {
            allowed: false,
            limit,
            remaining: 0,
            reset_unix: (now_ms + wait + 999).div_euclid(1000),
            retry_after_secs: (wait as u64).div_ceil(1000).max(1),
        };
    }
    let (limit, remaining, reset) = windows
        .iter()
        .map(|(limit, len, counts)| (*limit, counts.room(*limit, *len, now_ms), counts.start + len))
        .min_by_key(|(_, remaining, _)| *remaining)
        .unwrap_or((limits.per_minute, 0, now_ms));
    RateDecision {
        allowed: true,
        limit,
        remaining,
        reset_unix: reset.div_euclid(1000),
        retry_after_secs: 0,
    }
}

/// One kind of key's limits: counted in this process, or, when several hosts share the
/// store, in shares of the store's counters each host leases (leases.rs).
pub struct Limiter {
    local: RateLimiter,
    shared: Option<Arc<Leases>>,
}

impl Limiter {
    pub fn new(store: &Store, scope: &'static str) -> Limiter {
        Limiter {
            local: RateLimiter::default(),
            shared: store.is_shared().then(|| Leases::new(store.clone(), scope)),
        }
    }

    /// Counts one request of `key` at `now_ms` if both windows have room.
    pub async fn check(&self, key: &str, limits: RateLimits, now_ms: i64) -> Result<RateDecision, StoreError> {
        self.check_n(key, limits, now_ms, 1).await
    }

    /// Counts `n` units of `key` at once if both windows have room for all of them.
    pub async fn check_n(
        &self,
        key: &str,
        limits: RateLimits,
        now_ms: i64,
        n: u32,
    ) -> Result<RateDecision, StoreError> {
        let Some(leases) = &self.shared else {
            return Ok(self.local.check_n(key, limits, now_ms, n));
        };
        let counted = leases.count(key, limits, now_ms, n.max(1)).await?;
        Ok(decide(limits, now_ms, counted.allowed, counted.usage))
    }

    /// Counts `n` units of `key` whatever room is left: a cost already incurred (requests
    /// admitted together, before any of them failed, are each charged in full).
    pub async fn charge(&self, key: &str, limits: RateLimits, now_ms: i64, n: u32) -> Result<(), StoreError> {
        match &self.shared {
            Some(leases) => leases.force(key, limits, now_ms, n).await,
            None => {
                self.local.force(key, now_ms, n);
                Ok(())
            }
        }
    }

    /// `key`'s counts as they stand, counting nothing (across hosts: every host's, the
    /// shares they hold unused included).
    pub async fn usage(&self, key: &str, limits: RateLimits, now_ms: i64) -> Result<Usage, StoreError> {
        match &self.shared {
            Some(leases) => leases.standing(key, limits, now_ms).await,
            None => Ok(self.local.usage(key, now_ms)),
        }
    }

    /// The in-process counters (saved and restored by a single host).
    pub fn local(&self) -> &RateLimiter {
        &self.local
    }
}

/// Failed authentications per client address (a wrong API key, a wrong webhook secret),
/// counted in this process: a client past its limit is refused before its key is looked
/// up, so guessing keys costs the database nothing. Each host protects itself.
pub struct AuthThrottle {
    failures: RateLimiter,
    limits: RateLimits,
}

impl AuthThrottle {
    pub fn new(limits: RateLimits) -> AuthThrottle {
        AuthThrottle {
            failures: RateLimiter::default(),
            limits,
        }
    }

    /// Whether `client` may try to authenticate now; if not, the refusal to answer.
    pub fn may_try(&self, client: &str, now_ms: i64) -> Result<(), RateDecision> {
        let decision = self.failures.peek(client, self.limits, now_ms);
        if decision.allowed { Ok(()) } else { Err(decision) }
    }

    /// Counts a failed attempt of `client`.
    pub fn failed(&self, client: &str, now_ms: i64) {
        self.failures.check(client, self.limits, now_ms);
    }
}

#[cfg(test)]
mod tests;
