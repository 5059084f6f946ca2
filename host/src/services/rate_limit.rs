//! Rate limits: a fixed per-minute and a fixed per-day window (UTC) per key. Counting
//! happens under one lock, so N parallel requests never let more than the limit through.
//! A single host counts in memory: keyed-API counters (per account) are saved periodically
//! and at shutdown, and loaded at start; the x402 abuse limits (per client address, per
//! payer) live in memory only. Hosts sharing a store count in it instead, each from shares
//! it leases ahead of use (rate_leases.rs), so together they let through exactly the limit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::rate_leases::Leases;
use crate::domain::RateLimits;
use crate::store::{Store, StoreError, UsageRow};

const MINUTE_MS: i64 = 60_000;
const DAY_MS: i64 = 86_400_000;
/// Keys tracked at once before ended windows are dropped: many client addresses cannot
/// grow memory without bound (past it, day counts of idle keys are forgotten first).
const MAX_TRACKED: usize = 100_000;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Usage {
    minute_start: i64,
    minute_count: u32,
    day_start: i64,
    day_count: u32,
}

/// What the headers report: the window that binds now (the one with fewer requests left).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateDecision {
    pub allowed: bool,
    pub limit: u32,
    pub remaining: u32,
    /// Unix seconds when the reported window starts afresh.
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
    /// Counts one request for the account at `now_ms` if both windows have room.
    pub fn check(&self, account_id: &str, limits: RateLimits, now_ms: i64) -> RateDecision {
        let minute_start = now_ms - now_ms.rem_euclid(MINUTE_MS);
        let day_start = now_ms - now_ms.rem_euclid(DAY_MS);
        let mut tracked = self.usage.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if tracked.keys.len() >= MAX_TRACKED
            && tracked.pruned_minute != minute_start
            && !tracked.keys.contains_key(account_id)
        {
            tracked.pruned_minute = minute_start;
            tracked.keys.retain(|_, u| u.day_start == day_start);
            if tracked.keys.len() >= MAX_TRACKED {
                tracked.keys.retain(|_, u| u.minute_start == minute_start);
            }
        }
        let usage = tracked.keys.entry(account_id.to_string()).or_default();
        if usage.minute_start != minute_start {
            usage.minute_start = minute_start;
            usage.minute_count = 0;
        }
        if usage.day_start != day_start {
            usage.day_start = day_start;
            usage.day_count = 0;
        }
        let minute_full = usage.minute_count >= limits.per_minute;
        let day_full = usage.day_count >= limits.per_day;
        let allowed = !(minute_full || day_full);
        if allowed {
            usage.minute_count += 1;
            usage.day_count += 1;
        }
        decide(limits, now_ms, allowed, usage.minute_count, usage.day_count)
    }

    /// Current counters, for saving.
    pub fn snapshot(&self) -> Vec<UsageRow> {
        let tracked = self.usage.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut rows = Vec::with_capacity(tracked.keys.len() * 2);
        for (account_id, usage) in tracked.keys.iter() {
            rows.push(UsageRow {
                account_id: account_id.clone(),
                window: "minute",
                window_start: usage.minute_start,
                count: usage.minute_count,
            });
            rows.push(UsageRow {
                account_id: account_id.clone(),
                window: "day",
                window_start: usage.day_start,
                count: usage.day_count,
            });
        }
        rows
    }

    /// Loads saved counters; windows that have ended are reset on first use anyway.
    pub fn restore(&self, rows: Vec<UsageRow>) {
        let mut tracked = self.usage.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for row in rows {
            let usage = tracked.keys.entry(row.account_id).or_default();
            if row.window == "day" {
                usage.day_start = row.window_start;
                usage.day_count = row.count;
            } else {
                usage.minute_start = row.window_start;
                usage.minute_count = row.count;
            }
        }
    }
}

/// The headers' view of a request that was counted (`allowed`, with the windows' counts
/// after it) or refused (with the counts as they stand).
fn decide(limits: RateLimits, now_ms: i64, allowed: bool, minute_count: u32, day_count: u32) -> RateDecision {
    let minute_reset = now_ms - now_ms.rem_euclid(MINUTE_MS) + MINUTE_MS;
    let day_reset = now_ms - now_ms.rem_euclid(DAY_MS) + DAY_MS;
    if !allowed {
        // Both must have room again; wait for the later of the full windows.
        let (limit, reset) = if day_count >= limits.per_day {
            (limits.per_day, day_reset)
        } else {
            (limits.per_minute, minute_reset)
        };
        return RateDecision {
            allowed: false,
            limit,
            remaining: 0,
            reset_unix: reset.div_euclid(1000),
            retry_after_secs: ((reset - now_ms).max(0) as u64).div_ceil(1000).max(1),
        };
    }
    let minute_left = limits.per_minute.saturating_sub(minute_count);
    let day_left = limits.per_day.saturating_sub(day_count);
    let (limit, remaining, reset) = if day_left < minute_left {
        (limits.per_day, day_left, day_reset)
    } else {
        (limits.per_minute, minute_left, minute_reset)
    };
    RateDecision {
        allowed: true,
        limit,
        remaining,
        reset_unix: reset.div_euclid(1000),
        retry_after_secs: 0,
    }
}

/// One kind of key's limits: counted in this process, or, when several hosts share the
/// store, in shares of the store's counters each host leases (services/rate_leases.rs).
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
        let Some(leases) = &self.shared else {
            return Ok(self.local.check(key, limits, now_ms));
        };
        let windows = (
            now_ms - now_ms.rem_euclid(MINUTE_MS),
            now_ms - now_ms.rem_euclid(DAY_MS),
        );
        let counted = leases.count(key, limits, windows, now_ms).await?;
        Ok(decide(
            limits,
            now_ms,
            counted.allowed,
            counted.minute_count,
            counted.day_count,
        ))
    }

    /// The in-process counters (saved and restored by a single host).
    pub fn local(&self) -> &RateLimiter {
        &self.local
    }
}

/// The unkeyed x402 endpoints' abuse limits: every request per client address, and every
/// signed payment per payer (counted after its signature checks, before any chain call,
/// so nobody can spend another payer's allowance).
pub struct X402Limiter {
    clients: Limiter,
    payers: Limiter,
    client_limits: RateLimits,
    payer_limits: RateLimits,
}

impl X402Limiter {
    pub fn new(store: &Store, client_limits: RateLimits, payer_limits: RateLimits) -> X402Limiter {
        X402Limiter {
            clients: Limiter::new(store, "x402_client"),
            payers: Limiter::new(store, "x402_payer"),
            client_limits,
            payer_limits,
        }
    }

    pub async fn client(&self, address: &str, now_ms: i64) -> Result<RateDecision, StoreError> {
        self.clients.check(address, self.client_limits, now_ms).await
    }

    pub async fn payer(&self, network: &str, payer: &str, now_ms: i64) -> Result<RateDecision, StoreError> {
        self.payers
            .check(&format!("{network}:{payer}"), self.payer_limits, now_ms)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: RateLimits = RateLimits {
        per_minute: 3,
        per_day: 5,
    };
    // 2026-11-22T10:00:00Z
    const T0: i64 = 1_795_341_600_000;

    #[test]
    fn counts_down_and_refuses_when_spent() {
        let limiter = RateLimiter::default();
        let remaining: Vec<u32> = (0..3).map(|i| limiter.check("a", LIMITS, T0 + i).remaining).collect();
        assert_eq!(remaining, vec![2, 1, 0]);
        let refused = limiter.check("a", LIMITS, T0 + 10_000);
        assert!(!refused.allowed);
        assert_eq!(refused.reset_unix, (T0 + MINUTE_MS) / 1000);
        assert_eq!(refused.retry_after_secs, 50);
        // Another account is unaffected.
        assert!(limiter.check("b", LIMITS, T0).allowed);
    }

    #[test]
    fn a_new_minute_frees_the_minute_window_but_not_the_day() {
        let limiter = RateLimiter::default();
        for i in 0..3 {
            assert!(limiter.check("a", LIMITS, T0 + i).allowed);
        }
        let next = limiter.check("a", LIMITS, T0 + MINUTE_MS);
        assert!(next.allowed);
        // 4 of 5 used today: the day window now binds (1 left vs 2 this minute).
        assert_eq!((next.limit, next.remaining), (5, 1));
        assert!(limiter.check("a", LIMITS, T0 + MINUTE_MS + 1).allowed);
        let refused = limiter.check("a", LIMITS, T0 + MINUTE_MS + 2);
        assert!(!refused.allowed);
        assert_eq!(refused.limit, 5);
        assert_eq!(refused.reset_unix, (T0 - T0 % DAY_MS + DAY_MS) / 1000);
    }

    #[test]
    fn ended_windows_are_forgotten_when_too_many_keys_are_tracked() {
        let limiter = RateLimiter::default();
        for i in 0..MAX_TRACKED {
            limiter.check(&format!("old{i}"), LIMITS, T0 - DAY_MS);
        }
        limiter.check("today", LIMITS, T0);
        assert_eq!(limiter.snapshot().len(), 2, "only today's key is left (two windows)");
    }

    fn temp_store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db"), std::time::Duration::from_secs(5)).unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn x402_clients_and_payers_count_apart() {
        let (_dir, store) = temp_store();
        let limiter = X402Limiter::new(
            &store,
            LIMITS,
            RateLimits {
                per_minute: 1,
                per_day: 1,
            },
        );
        assert!(limiter.payer("base", "0xabc", T0).await.unwrap().allowed);
        assert!(!limiter.payer("base", "0xabc", T0 + 1).await.unwrap().allowed);
        assert!(
            limiter.payer("solana", "0xabc", T0 + 1).await.unwrap().allowed,
            "per network"
        );
        assert_eq!(limiter.client("10.0.0.1", T0).await.unwrap().remaining, 2);
    }

    /// The shared counters (one statement in the store, as several hosts use them) decide
    /// exactly as the in-process ones: the same answers and headers, window after window.
    #[tokio::test]
    async fn shared_counters_decide_as_the_local_ones() {
        let (_dir, store) = temp_store();
        let shared = Limiter {
            local: RateLimiter::default(),
            shared: Some(Leases::new(store, "account")),
        };
        let local = RateLimiter::default();
        let times = [
            0,
            1,
            2,
            3,
            10_000,
            MINUTE_MS,
            MINUTE_MS + 1,
            MINUTE_MS + 2,
            2 * MINUTE_MS,
            DAY_MS,
            DAY_MS + 1,
        ];
        for (i, offset) in times.into_iter().enumerate() {
            let expected = local.check("a", LIMITS, T0 + offset);
            let got = shared.check("a", LIMITS, T0 + offset).await.unwrap();
            assert_eq!(got, expected, "request {i} at +{offset} ms");
        }
        // A host whose clock is a minute behind counts into the newer window it finds.
        let behind = shared.check("a", LIMITS, T0 + DAY_MS + 2 - MINUTE_MS).await.unwrap();
        assert_eq!(behind.remaining, 0, "the day's third request of the current minute");
        assert!(!shared.check("a", LIMITS, T0 + DAY_MS + 3).await.unwrap().allowed);
    }

    /// Two hosts leasing shares of one key let through exactly the limit, even when one of
    /// them sits on an unused share as the other runs out: the other waits for it.
    #[tokio::test]
    async fn hosts_leasing_shares_let_through_exactly_the_limit() {
        let (_dir, store) = temp_store();
        let limits = RateLimits {
            per_minute: 40,
            per_day: 1000,
        };
        let hosts = [
            Limiter {
                local: RateLimiter::default(),
                shared: Some(Leases::new(store.clone(), "account")),
            },
            Limiter {
                local: RateLimiter::default(),
                shared: Some(Leases::new(store, "account")),
            },
        ];
        let now = || T0 + (crate::clock::now_ms() % 1000);
        // The first host is busy for a while: its shares grow past what it then uses.
        let mut allowed = 0;
        for _ in 0..12 {
            allowed += usize::from(hosts[0].check("a", limits, now()).await.unwrap().allowed);
        }
        // The second asks for far more than is left.
        let mut last = None;
        for _ in 0..60 {
            let decision = hosts[1].check("a", limits, now()).await.unwrap();
            allowed += usize::from(decision.allowed);
            last = Some(decision);
        }
        assert_eq!(allowed, 40, "exactly the limit across both hosts");
        let last = last.unwrap();
        assert!(!last.allowed);
        assert_eq!((last.limit, last.remaining), (40, 0));
    }

    #[test]
    fn saved_counters_survive_a_restart() {
        let limiter = RateLimiter::default();
        limiter.check("a", LIMITS, T0);
        limiter.check("a", LIMITS, T0 + 1);
        let restarted = RateLimiter::default();
        restarted.restore(limiter.snapshot());
        assert_eq!(restarted.check("a", LIMITS, T0 + 2).remaining, 0);
    }

    #[test]
    fn exact_under_contention() {
        let limiter = std::sync::Arc::new(RateLimiter::default());
        let limits = RateLimits {
            per_minute: 100,
            per_day: 1000,
        };
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let limiter = limiter.clone();
                std::thread::spawn(move || (0..50).filter(|_| limiter.check("a", limits, T0).allowed).count())
            })
            .collect();
        let allowed: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(allowed, 100);
    }
}
