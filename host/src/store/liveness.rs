//! Whether the database answers, as `/health` reports it: asked at most once per
//! `FRESH_FOR` however many probes come, so a crowd of probes (or a load balancer polling
//! hard) costs no database round trip each. One caller asks while the others read the last
//! answer; a rare probe (every few seconds, as load balancers send them) asks itself and
//! so sees the database as it is now. An answer older than `TRUSTED_FOR` is not passed on
//! while an ask is under way: a database that hangs the ask reads as unreachable to the
//! other probes, rather than as well as it was before it hung.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::Store;

/// How long an answer stands for the probes that follow it.
pub const FRESH_FOR: Duration = Duration::from_secs(1);
/// How old an answer may be and still stand for probes while another probe's ask is slow.
pub const TRUSTED_FOR: Duration = Duration::from_secs(3);

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
            // The store was just opened (and migrated): that is its first answer.
            answered_at_ms: AtomicU64::new(1),
            reachable: AtomicBool::new(true),
            asking: AtomicBool::new(false),
        }
    }
}

impl Liveness {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    fn younger_than(&self, age: Duration) -> bool {
        let at = self.answered_at_ms.load(Ordering::Acquire);
        at != 0 && self.now_ms().saturating_sub(at) < age.as_millis() as u64
    }

    /// The last answer, or `ask`'s when it is stale and nobody else is asking.
    async fn get(&self, ask: impl Future<Output = bool>) -> bool {
        if self.younger_than(FRESH_FOR) {
            return self.reachable.load(Ordering::Acquire);
        }
        if self
            .asking
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // Another probe is asking: its answer is on the way, unless the database hangs.
            return self.younger_than(TRUSTED_FOR) && self.reachable.load(Ordering::Acquire);
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
        liveness.answered_at_ms.store(0, Ordering::Release);
        assert!(!liveness.get(ask(false)).await, "the first probe after a second asks");
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
        liveness.answered_at_ms.store(liveness.now_ms(), Ordering::Release);
        tokio::time::sleep(FRESH_FOR).await;
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
    async fn while_an_ask_hangs_an_old_answer_is_not_passed_on() {
        let liveness = Liveness::default();
        liveness.answered_at_ms.store(0, Ordering::Release);
        let hanging = liveness.get(std::future::pending());
        tokio::pin!(hanging);
        assert!(hanging.as_mut().now_or_never().is_none());
        // The last answer said reachable, but it is older than TRUSTED_FOR.
        assert!(!liveness.get(async { unreachable!("a second ask") }).await);
    }

    #[tokio::test]
    async fn a_probe_dropped_mid_ask_lets_the_next_one_ask() {
        let liveness = Liveness::default();
        liveness.answered_at_ms.store(0, Ordering::Release);
        {
            let pending = liveness.get(std::future::pending());
            tokio::pin!(pending);
            assert!(pending.as_mut().now_or_never().is_none());
        }
        assert!(!liveness.get(async { false }).await, "the next probe asks itself");
    }
}
