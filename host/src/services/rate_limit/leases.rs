//! Rate limits shared by several hosts, without a database round trip per request.
//!
//! Each host claims a share of a key's windows ahead of use (a lease: a number of requests,
//! counted in the shared counters at once) and lets requests through from it in memory. A
//! lease grows while it is used up quickly and shrinks while it is not, takes at most a
//! quarter of what is left, and lives `LEASE_MS`; what a host did not use is handed back
//! when its lease ends (with its next claim, or by the sweeper). So together the hosts never
//! let more than the limit through, and a busy key costs one claim per lease, not one per
//! request.
//!
//! Exact at the edge too: when a claim finds the windows full while some host may still
//! hold an unused share, the request waits until those shares end (at most `LEASE_MS`
//! plus two sweeps) and asks once more, so it is refused only if the limit really is spent.
//! A key refused with no share outstanding is refused in memory until its window turns.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Mutex as AsyncMutex;

use super::Usage;
use crate::domain::RateLimits;
use crate::rate_window::{DAY_MS, MINUTE_MS, WindowCount};
use crate::store::{Claim, Claimed, Store, StoreError, Unused};

/// How long a host may hold a share before handing back what it did not use.
pub const LEASE_MS: i64 = 1_000;
/// How often unused shares of idle keys are handed back.
const SWEEP_EVERY: Duration = Duration::from_millis(250);
/// Largest share one claim asks for.
const MAX_SHARE: u32 = 1_024;

/// One key's share on this host.
#[derive(Debug, Default)]
struct Lease {
    left: u32,
    /// The windows' counts (every host's) once the share was granted; their starts are
    /// the windows the share was granted in.
    usage: Usage,
    expires_ms: i64,
    /// How many the next claim asks for.
    size: u32,
    /// Refused without asking until then (ms): the limit is spent and nobody holds a share.
    refused_until: i64,
}

/// What one request gets from the shared counters.
pub struct Counted {
    pub allowed: bool,
    /// The windows' counts after this request, as far as this host knows.
    pub usage: Usage,
}

/// One key on this host: its share, read and taken from under a plain mutex (never held
/// across an await), and a turn for claiming, so one request at a time asks the store.
#[derive(Default)]
struct KeyState {
    lease: Mutex<Lease>,
    claiming: AsyncMutex<()>,
}

impl KeyState {
    fn lease(&self) -> std::sync::MutexGuard<'_, Lease> {
        self.lease.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `n` from the share, if it has them for `now_ms`'s windows. A share of newer windows
    /// serves too: a request stamped just before a window turned, that waited its turn
    /// while another claimed in the new window, counts in the newer one, as the store
    /// counts a host whose clock is behind (else each such request would claim and wait
    /// for shares in turn, and a burst at a minute's edge would queue for seconds).
    fn take(&self, now_ms: i64, n: u32) -> Option<Counted> {
        let mut lease = self.lease();
        let current = lease.usage.minute.start >= WindowCount::start_of(now_ms, MINUTE_MS)
            && lease.usage.day.start >= WindowCount::start_of(now_ms, DAY_MS);
        if current && lease.left >= n && now_ms < lease.expires_ms {
            lease.left -= n;
            return Some(lease.counted(true));
        }
        (current && now_ms < lease.refused_until).then(|| lease.counted(false))
    }
}

pub struct Leases {
    store: Store,
    scope: &'static str,
    keys: Mutex<HashMap<String, Arc<KeyState>>>,
}

impl Leases {
    /// Leases of `scope`'s keys in `store`, with a sweeper handing back idle keys' unused
    /// shares for as long as the leases live.
    pub fn new(store: Store, scope: &'static str) -> Arc<Leases> {
        let leases = Arc::new(Leases {
            store,
            scope,
            keys: Mutex::new(HashMap::new()),
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(sweep(Arc::downgrade(&leases)));
        }
        leases
    }

    fn key(&self, key: &str) -> Arc<KeyState> {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = keys.get(key) {
            return found.clone();
        }
        let state = Arc::new(KeyState::default());
        state.lease().size = 1;
        keys.insert(key.to_string(), state.clone());
        state
    }

    /// Counts `n` units of `key` at `now_ms` whatever room is left, straight in the shared
    /// counters (a cost already incurred; this host's share is left as it is).
    pub async fn force(&self, key: &str, limits: RateLimits, now_ms: i64, n: u32) -> Result<(), StoreError> {
        let claim = Claim {
            want: n,
            need: n,
            unused: None,
            now_ms,
            lease_until: 0,
            force: true,
        };
        self.store
            .claim_requests(self.scope, key, (limits.per_minute, limits.per_day), claim)
            .await?;
        Ok(())
    }

    /// `key`'s counts in the shared counters, counting nothing.
    pub async fn standing(&self, key: &str, limits: RateLimits, now_ms: i64) -> Result<Usage, StoreError> {
        let claim = Claim {
            want: 0,
            need: 0,
            unused: None,
            now_ms,
            lease_until: 0,
            force: true,
        };
        let claimed = self
            .store
            .claim_requests(self.scope, key, (limits.per_minute, limits.per_day), claim)
            .await?;
        Ok(Usage {
            minute: claimed.minute,
            day: claimed.day,
        }
        .at(now_ms))
    }

    /// Counts `n` units (one request, or a weight) of `key` at `now_ms`, from this host's
    /// share if it has them, else from a new claim.
    pub async fn count(&self, key: &str, limits: RateLimits, now_ms: i64, n: u32) -> Result<Counted, StoreError> {
        let state = self.key(key);
        if let Some(counted) = state.take(now_ms, n) {
            return Ok(counted);
        }
        let _turn = state.claiming.lock().await;
        // Whoever claimed while this request waited may have left enough for it.
        if let Some(counted) = state.take(now_ms, n) {
            return Ok(counted);
        }
        // A share used up before it ended asks for twice as much next time; one that ended
        // with requests left over, for half.
        let size = {
            let mut lease = state.lease();
            lease.size = if lease.left == 0 && now_ms < lease.expires_ms {
                (lease.size * 2).min(MAX_SHARE)
            } else if lease.left > 0 {
                (lease.size / 2).max(1)
            } else {
                lease.size
            };
            lease.size
        };
        let mut claimed = self.claim(key, limits, &state, size.max(n), n, now_ms).await?;
        let mut at = now_ms;
        if claimed.granted == 0 && claimed.lease_until > now_ms {
            // Full, but shares may still come back: wait for them, then ask once more. A
            // share ends `LEASE_MS` after it was granted whatever the granting host's clock
            // said, so a clock ahead of ours cannot hold this request longer.
            let wait = (claimed.lease_until - now_ms).min(LEASE_MS) + 2 * SWEEP_EVERY.as_millis() as i64;
            tokio::time::sleep(Duration::from_millis(wait as u64)).await;
            at = now_ms + wait;
            claimed = self.claim(key, limits, &state, n, n, at).await?;
        }
        let mut lease = state.lease();
        if claimed.granted == 0 {
            // Nothing outstanding: spent until one more fits. Else look again shortly.
            lease.refused_until = if claimed.lease_until > at {
                at + SWEEP_EVERY.as_millis() as i64
            } else {
                let usage = lease.usage;
                at + usage
                    .minute
                    .wait_ms(limits.per_minute, MINUTE_MS, at)
                    .max(usage.day.wait_ms(limits.per_day, DAY_MS, at))
            };
            return Ok(lease.counted(false));
        }
        lease.left -= n;
        Ok(lease.counted(true))
    }

    /// Hands back the share's unused requests and asks for `want` more, of which at least
    /// `need` or none; the caller holds the key's claiming turn.
    async fn claim(
        &self,
        key: &str,
        limits: RateLimits,
        state: &KeyState,
        want: u32,
        need: u32,
        now_ms: i64,
    ) -> Result<Claimed, StoreError> {
        // Taken out of the share now: requests meanwhile find it empty and wait their turn.
        let unused = {
            let mut lease = state.lease();
            let unused = (lease.left > 0).then_some(lease.unused());
            lease.left = 0;
            unused
        };
        let expires_ms = now_ms + LEASE_MS;
        let claimed = self
            .store
            .claim_requests(
                self.scope,
                key,
                (limits.per_minute, limits.per_day),
                Claim {
                    want,
                    need,
                    unused,
                    now_ms,
                    lease_until: expires_ms,
                    force: false,
                },
            )
            .await;
        let mut lease = state.lease();
        let claimed = match claimed {
            Ok(claimed) => claimed,
            Err(e) => {
                // Not handed back after all: keep them.
                if let Some(unused) = unused {
                    lease.left = unused.count;
                }
                return Err(e);
            }
        };
        let size = lease.size;
        *lease = Lease {
            left: claimed.granted,
            usage: Usage {
                minute: claimed.minute,
                day: claimed.day,
            },
            expires_ms,
            size,
            refused_until: 0,
        };
        Ok(claimed)
    }

    /// Hands back the unused requests of shares that ended (keys idle on this host), and
    /// forgets keys with nothing held.
    async fn sweep_once(&self, now_ms: i64) {
        let keys: Vec<(String, Arc<KeyState>)> = {
            let keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
            keys.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        for (key, state) in keys {
            let Ok(_turn) = state.claiming.try_lock() else { continue };
            let (unused, forget) = {
                let mut lease = state.lease();
                if lease.expires_ms > now_ms {
                    continue;
                }
                let unused = (lease.left > 0).then_some(lease.unused());
                lease.left = 0;
                (unused, unused.is_none() && lease.refused_until <= now_ms)
            };
            if let Some(unused) = unused {
                // Asking for nothing: only the hand-back happens.
                let handed = self
                    .store
                    .claim_requests(
                        self.scope,
                        &key,
                        (0, 0),
                        Claim {
                            want: 0,
                            need: 0,
                            unused: Some(unused),
                            now_ms,
                            lease_until: 0,
                            force: false,
                        },
                    )
                    .await;
                if let Err(e) = handed {
                    tracing::warn!(error = %e, "could not hand back an unused rate-limit share");
                    state.lease().left = unused.count;
                }
            } else if forget {
                let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
                // Nobody else holds it (the map's, ours): forget it.
                if keys.get(&key).is_some_and(|s| Arc::strong_count(s) == 2) {
                    keys.remove(&key);
                }
            }
        }
    }
}

impl Lease {
    /// This request's view: the counts at the claim, less what this host has not used.
    fn counted(&self, allowed: bool) -> Counted {
        let mut usage = self.usage;
        usage.minute.count -= self.left;
        usage.day.count -= self.left;
        Counted { allowed, usage }
    }

    /// The share's unused requests, to hand back.
    fn unused(&self) -> Unused {
        Unused {
            windows: (self.usage.minute.start, self.usage.day.start),
            count: self.left,
        }
    }
}

/// Counters of keys idle for two days are deleted this often (every host does it).
const PRUNE_EVERY: Duration = Duration::from_secs(3_600);

async fn sweep(leases: Weak<Leases>) {
    let mut ticks = tokio::time::interval(SWEEP_EVERY);
    let mut last_prune = tokio::time::Instant::now();
    loop {
        ticks.tick().await;
        let Some(leases) = leases.upgrade() else { return };
        leases.sweep_once(crate::clock::now_ms()).await;
        if last_prune.elapsed() >= PRUNE_EVERY {
            last_prune = tokio::time::Instant::now();
            if let Err(e) = leases
                .store
                .prune_rate_counters(leases.scope, crate::clock::now_ms())
                .await
            {
                tracing::warn!(error = %e, "could not prune old rate-limit counters");
            }
        }
    }
}
