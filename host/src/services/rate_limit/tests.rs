//! The limiter's tests: windows, restarts, contention, and the shares hosts lease.
use super::*;
use crate::store::Claim;

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
    // The next minute, once a third of this full one has slid out of the last minute.
    assert_eq!(refused.retry_after_secs, 50 + 20);
    assert_eq!(refused.reset_unix, (T0 + MINUTE_MS + 20_000) / 1000);
    assert!(!limiter.check("a", LIMITS, T0 + MINUTE_MS + 19_999).allowed);
    assert!(limiter.check("a", LIMITS, T0 + MINUTE_MS + 20_000).allowed);
    // Another account is unaffected.
    assert!(limiter.check("b", LIMITS, T0).allowed);
    // Peeking counts nothing.
    assert!(limiter.peek("c", LIMITS, T0).allowed);
    assert_eq!(limiter.peek("c", LIMITS, T0).remaining, 3);
}

#[test]
fn the_day_binds_when_it_has_less_left_than_the_minute() {
    let limiter = RateLimiter::default();
    for i in 0..3 {
        assert!(limiter.check("a", LIMITS, T0 + i).allowed);
    }
    // Two minutes on, the minute is free again; the day has 2 of 5 left.
    let next = limiter.check("a", LIMITS, T0 + 2 * MINUTE_MS);
    assert!(next.allowed);
    assert_eq!((next.limit, next.remaining), (5, 1));
    assert!(limiter.check("a", LIMITS, T0 + 2 * MINUTE_MS + 1).allowed);
    let refused = limiter.check("a", LIMITS, T0 + 2 * MINUTE_MS + 2);
    assert!(!refused.allowed);
    assert_eq!(refused.limit, 5);
    // Tomorrow, once a fifth of today has slid out.
    let tomorrow = T0 - T0 % DAY_MS + DAY_MS;
    assert_eq!(refused.reset_unix, (tomorrow + DAY_MS / 5) / 1000);
}

/// A refusal decided a moment ago (from a share's memory) may find room back in both
/// windows by the time it is answered: it names the fuller window, not the day's.
#[test]
fn a_refusal_with_room_back_names_the_fuller_window() {
    let refused = decide(LIMITS, T0, false, Usage::default().at(T0));
    assert_eq!((refused.limit, refused.remaining), (LIMITS.per_minute, 0));
    assert_eq!(refused.retry_after_secs, 1);
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

/// A cost charged after requests were admitted together (before any of them failed)
/// is counted in full, past the limit, on one host or shared: the next windows carry it.
#[tokio::test]
async fn a_cost_charged_past_the_limit_carries_into_the_next_window() {
    let (_dir, store) = temp_store();
    let limiters = [
        Limiter {
            local: RateLimiter::default(),
            shared: None,
        },
        Limiter {
            local: RateLimiter::default(),
            shared: Some(Leases::new(store, "account")),
        },
    ];
    for limiter in limiters {
        for at in 0..3 {
            assert!(limiter.check("a", LIMITS, T0 + at).await.unwrap().allowed);
        }
        // The three failed: each is charged 10 more.
        for at in 0..3 {
            limiter.charge("a", LIMITS, T0 + 10 + at, 10).await.unwrap();
        }
        // A minute on, the last minute's 33 still weigh: nothing fits.
        let next = limiter.check("a", LIMITS, T0 + MINUTE_MS + 1).await.unwrap();
        assert!(!next.allowed, "{next:?}");
        // With the day's 5 used, that day is over for it.
        let later = limiter.check("a", LIMITS, T0 + 10 * MINUTE_MS).await.unwrap();
        assert!(!later.allowed, "{later:?}");
    }
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
        MINUTE_MS + 25_000,
        MINUTE_MS + 45_000,
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

/// A burst across a minute's edge: requests stamped just before the turn reach the
/// limiter after others claimed in the new minute. They count in the new minute, as
/// the store counts them, and are answered at once instead of each claiming and
/// waiting for shares in turn (which held forty concurrent requests past 30 s).
#[tokio::test]
async fn requests_stamped_before_a_window_turned_are_answered_without_queueing() {
    let (_dir, store) = temp_store();
    let limits = RateLimits {
        per_minute: 7,
        per_day: 1000,
    };
    let shared = Limiter {
        local: RateLimiter::default(),
        shared: Some(Leases::new(store, "account")),
    };
    let local = RateLimiter::default();
    let edge = T0 + MINUTE_MS;
    let stamps = [
        edge - 90,
        edge - 80,
        edge - 70,
        edge + 10,
        edge + 11,
        edge + 12,
        edge + 13,
    ];
    for at in stamps {
        assert!(shared.check("a", limits, at).await.unwrap().allowed, "at {at}");
        assert!(local.check("a", limits, at).allowed);
    }
    let started = std::time::Instant::now();
    for i in 0..10 {
        let stale = shared.check("a", limits, edge - 60 + i).await.unwrap();
        assert!(!stale.allowed, "the limit is spent: {stale:?}");
        assert_eq!((stale.limit, stale.remaining), (7, 0));
        assert!(!local.check("a", limits, edge - 60 + i).allowed);
    }
    // At most one wait for shares that might come back (our own, just ended); before,
    // each of the ten waited for it in turn.
    let bound = 2 * (leases::LEASE_MS as u64 + 2 * 250);
    assert!(
        started.elapsed() < std::time::Duration::from_millis(bound),
        "ten refusals took {:?}",
        started.elapsed()
    );
}

/// Counters of a day before yesterday go when pruned; today's stay.
#[tokio::test]
async fn old_shared_counters_are_pruned() {
    let (_dir, store) = temp_store();
    let claim = |now_ms| Claim {
        want: 1,
        need: 1,
        unused: None,
        now_ms,
        lease_until: now_ms + 1_000,
        force: false,
    };
    store
        .claim_requests("account", "old", (10, 10), claim(T0 - 3 * DAY_MS))
        .await
        .unwrap();
    store
        .claim_requests("account", "new", (10, 10), claim(T0))
        .await
        .unwrap();
    store
        .claim_requests("x402_client", "old", (10, 10), claim(T0 - 3 * DAY_MS))
        .await
        .unwrap();
    assert_eq!(store.prune_rate_counters("account", T0 + 2_000).await.unwrap(), 1);
    assert_eq!(store.prune_rate_counters("account", T0 + 2_000).await.unwrap(), 0);
    assert_eq!(store.prune_rate_counters("x402_client", T0 + 2_000).await.unwrap(), 1);
    let kept = store
        .claim_requests("account", "new", (10, 10), claim(T0 + 3_000))
        .await
        .unwrap();
    assert_eq!(kept.minute.count, 2, "today's counter was kept");
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
