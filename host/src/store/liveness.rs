//! Whether the database answers, as `/health` reports it: asked at most once per
//! `FRESH_FOR` however many probes come, so a crowd of probes (or a load balancer polling
//! hard) costs no database round trip each. One caller asks while the others read the last
//! answer; a rare probe (every few seconds, as load balancers send them) asks itself and
//! so sees the database as it is now.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::Store;

/// How long an answer stands for the probes that follow it.
pub const FRESH_FOR: Duration = Duration::from_secs(1);

pub struct Liveness {
    epoch: Instant,
    /// When the last answer arrived, in ms since `epoch` plus one (0: never asked).
    answered_at_ms: AtomicU64,
    reachable: AtomicBool,
    /// A caller is asking the database now.
    asking: AtomicBool,
}

impl Default for Liveness {
    fn default() -> Self {
        Liveness {
            epoch: Instant::now(),
            answered_at_ms: AtomicU64::new(0),
            // The store was opened (and migrated) before anyone could ask.
            reachable: AtomicBool::new(true),
            asking: AtomicBool::new(false),
        }
    }
}

impl Liveness {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    fn fresh(&self) -> bool {
        let at = self.answered_at_ms.load(Ordering::Acquire);
        at != 0 && self.now_ms().saturating_sub(at) < FRESH_FOR.as_millis() as u64
    }

    /// The last answer, or `ask`'s when it is stale and nobody else is asking.
    async fn get(&self, ask: impl Future<Output = bool>) -> bool {
        if self.fresh()
            || self
                .asking
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return self.reachable.load(Ordering::Acquire);
        }
        // Cleared even if the probe's request is dropped mid-ask (its caller hung up).
        let _asking = Asking(&self.asking);
        let reachable = ask.await;
        self.reachable.store(reachable, Ordering::Release);
        self.answered_at_ms.store(self.now_ms(), Ordering::Release);
        reachable
    }
}

struct Asking<'a>(&'a AtomicBool);

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Store {
    /// Whether the database answers, as of at most `FRESH_FOR` ago.
    pub async fn reachable(&self) -> bool {
        self.liveness.get(self.ping()).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use futures_util::FutureExt;

    use super::*;

    #[tokio::test]
    async fn one_probe_asks_and_the_next_within_the_second_reads_its_answer() {
        let liveness = Liveness::default();
        let asked = AtomicUsize::new(0);
        let ask = |answer: bool| {
            let asked = &asked;
            async move {
                asked.fetch_add(1, Ordering::Relaxed);
                answer
            }
        };
        assert!(!liveness.get(ask(false)).await, "the first probe asks");
        assert!(
            !liveness.get(ask(true)).await,
            "a second within the second reads the last answer"
        );
        assert_eq!(asked.load(Ordering::Relaxed), 1);
        // Once the answer is older than FRESH_FOR, the next probe asks again.
        liveness.answered_at_ms.store(0, Ordering::Release);
        assert!(liveness.get(ask(true)).await);
        assert_eq!(asked.load(Ordering::Relaxed), 2);
    }

    #[tokio::test]
    async fn while_one_asks_the_others_do_not_wait_on_the_database() {
        let liveness = Liveness::default();
        let (release, held) = tokio::sync::oneshot::channel::<bool>();
        let slow = liveness.get(async { held.await.unwrap_or(false) });
        tokio::pin!(slow);
        // The first caller is waiting on the database...
        assert!(slow.as_mut().now_or_never().is_none());
        // ...and another gets the last answer at once instead of a second round trip.
        assert!(liveness.get(async { unreachable!("a second ask") }).await);
        release.send(false).unwrap();
        assert!(!slow.await);
        assert!(!liveness.get(async { unreachable!("fresh") }).await);
    }

    #[tokio::test]
    async fn a_probe_dropped_mid_ask_lets_the_next_one_ask() {
        let liveness = Liveness::default();
        {
            let pending = liveness.get(std::future::pending());
            tokio::pin!(pending);
            assert!(pending.as_mut().now_or_never().is_none());
        }
        assert!(!liveness.get(async { false }).await, "the next probe asks itself");
    }
}
