//! Who may run how many plugin instances at once. Runs are shared out so that no tenant can
//! starve the others:
//! - every account (all its agents together) has at most `per_account` runs going;
//! - long runs (a deadline longer than the default one: jobs, slow commands) may take at
//!   most half the slots, so short commands are never queued behind long jobs;
//! - an account's run waits for its own turn before it takes a shared slot, so a tenant's
//!   backlog never holds slots others could use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Whose run, and how it waits.
#[derive(Debug, Clone)]
pub struct Tenant {
    /// The account the run is for; its share is counted across its agents.
    pub account: String,
    /// How long the run may wait for a slot before it is refused (`None`: as long as it
    /// takes, for jobs, whose callers are polling).
    pub wait: Option<Duration>,
}

pub struct Slots {
    short: Arc<Semaphore>,
    long: Arc<Semaphore>,
    /// How many permits each semaphore started with.
    totals: (usize, usize),
    per_account: usize,
    accounts: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// A run's slots, released when dropped.
#[derive(Debug)]
pub struct SlotPermit {
    _shared: OwnedSemaphorePermit,
    _account: OwnedSemaphorePermit,
}

/// No slot came within the run's wait: which limit held it back.
#[derive(Debug, Clone, PartialEq)]
pub struct Busy(pub String);

impl Slots {
    /// `total` runs at once: half for long runs, the rest kept for short ones.
    pub fn new(total: usize, per_account: usize) -> Slots {
        let long = (total / 2).max(1);
        let short = total.saturating_sub(long).max(1);
        Slots {
            short: Arc::new(Semaphore::new(short)),
            long: Arc::new(Semaphore::new(long)),
            totals: (short, long),
            per_account: per_account.max(1),
            accounts: Mutex::new(HashMap::new()),
        }
    }

    fn account(&self, account: &str) -> Arc<Semaphore> {
        let mut accounts = self.accounts.lock().unwrap_or_else(|p| p.into_inner());
        // Forget accounts with nothing running or waiting, so the map stays small.
        if accounts.len() > 1024 {
            accounts.retain(|_, s| Arc::strong_count(s) > 1);
        }
        accounts
            .entry(account.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_account)))
            .clone()
    }

    pub async fn acquire(&self, tenant: &Tenant, long: bool) -> Result<SlotPermit, Busy> {
        let shared = if long { &self.long } else { &self.short };
        let account = within(tenant.wait, self.account(&tenant.account).acquire_owned())
            .await
            .and_then(Result::ok)
            .ok_or_else(|| {
                refused("account");
                Busy(format!(
                    "this account already has {} command runs going; retry when one ends",
                    self.per_account
                ))
            })?;
        let shared = within(tenant.wait, shared.clone().acquire_owned())
            .await
            .and_then(Result::ok)
            .ok_or_else(|| {
                refused("host");
                Busy("every plugin slot of this server is busy; retry shortly".into())
            })?;
        Ok(SlotPermit {
            _shared: shared,
            _account: account,
        })
    }
}

impl Slots {
    /// Runs the host allows at once, and how many run now.
    pub fn usage(&self) -> (usize, usize) {
        let total = self.totals.0 + self.totals.1;
        let free = self.short.available_permits() + self.long.available_permits();
        (total, total.saturating_sub(free))
    }
}

fn refused(reason: &'static str) {
    if let Some(metrics) = crate::telemetry::metrics::metrics() {
        metrics.plugin_refused(reason);
    }
}

/// `future`, waiting at most `wait` for it.
async fn within<F: std::future::Future>(wait: Option<Duration>, future: F) -> Option<F::Output> {
    match wait {
        Some(wait) => tokio::time::timeout(wait, future).await.ok(),
        None => Some(future.await),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(account: &str, wait_ms: u64) -> Tenant {
        Tenant {
            account: account.into(),
            wait: Some(Duration::from_millis(wait_ms)),
        }
    }

    #[tokio::test]
    async fn an_account_cannot_take_more_than_its_share() {
        let slots = Slots::new(8, 2);
        let a = tenant("a", 10);
        let _one = slots.acquire(&a, false).await.unwrap();
        let _two = slots.acquire(&a, false).await.unwrap();
        let refused = slots.acquire(&a, false).await.unwrap_err();
        assert!(refused.0.contains("this account"), "{refused:?}");
        assert!(
            slots.acquire(&tenant("b", 10), false).await.is_ok(),
            "another account runs"
        );
    }

    #[tokio::test]
    async fn long_runs_leave_the_short_slots_free() {
        let slots = Slots::new(4, 10);
        let long = tenant("a", 10);
        let _l1 = slots.acquire(&long, true).await.unwrap();
        let _l2 = slots.acquire(&long, true).await.unwrap();
        assert!(
            slots.acquire(&long, true).await.is_err(),
            "half the slots for long runs"
        );
        let _s1 = slots.acquire(&tenant("b", 10), false).await.unwrap();
        let _s2 = slots.acquire(&tenant("b", 10), false).await.unwrap();
        let busy = slots.acquire(&tenant("c", 10), false).await.unwrap_err();
        assert!(busy.0.contains("every plugin slot"), "{busy:?}");
    }
}
