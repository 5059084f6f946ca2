//! A circuit breaker per paid command. A command that keeps failing costs every payer a
//! settlement and a refund, and its owner hears nothing: after `x402_breaker_failures`
//! refunded failures within `x402_breaker_window_secs`, the breaker opens and paid calls
//! are refused before any money moves (503 with the reason and `Retry-After`). After
//! `x402_breaker_cooldown_secs`, one paid call is let through as a trial (half-open): its
//! success closes the breaker, its failure opens it again for another cooldown.
//!
//! One payer cannot pause a command for everyone: a window counts at most one failure per
//! payer (so it takes that many distinct payers to open it), and the trial is never given
//! to a payer whose failure opened it. The trial is taken only once the payment's own
//! checks passed, and a retry of a payment made before reaches its kept answer while the
//! breaker is open (see `purchase`).
//!
//! The state lives in the store, so every host sees the same breaker and a restart keeps it.

use crate::config::X402Settings;
use crate::services::ServiceError;
use crate::store::{Breaker, Store, StoreError};

/// Most characters of the last failure's reason a refusal repeats.
const MAX_REASON_CHARS: usize = 200;

/// What the breaker says to a paid call about to be settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Closed: the command is well.
    Closed,
    /// Half-open: this call is the one trial; its outcome decides.
    Trial,
    /// Open: refused, with why and for how long.
    Open { reason: String, retry_after_secs: u64 },
}

impl Admission {
    /// The refusal of an open breaker, for the payer: when to come back, not why (the
    /// last failure's words may hold another payer's input or an upstream's answer; they
    /// are the owner's to read).
    pub fn refusal(&self, command: &str) -> Option<ServiceError> {
        match self {
            Admission::Open { retry_after_secs, .. } => Some(ServiceError::Unavailable {
                message: format!("/{command} is paused after repeated failures; no payment was taken, try again later"),
                retry_after_secs: *retry_after_secs,
            }),
            _ => None,
        }
    }
}

/// The breaker's rules, from settings.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    pub failures: u32,
    pub window_ms: i64,
    pub cooldown_ms: i64,
}

impl Rules {
    pub fn of(x402: &X402Settings) -> Rules {
        Rules {
            failures: x402.x402_breaker_failures,
            window_ms: x402.x402_breaker_window_secs as i64 * 1000,
            cooldown_ms: x402.x402_breaker_cooldown_secs as i64 * 1000,
        }
    }

    /// What the breaker lets a call do now, without changing it: `payer`'s call, or, for a
    /// price request (`None`), anyone's.
    pub fn look(&self, breaker: Option<&Breaker>, now: i64, payer: Option<&str>) -> Admission {
        let Some((breaker, opened_at)) = breaker.and_then(|b| Some((b, b.opened_at?))) else {
            return Admission::Closed;
        };
        // A trial under way blocks others for a cooldown; a trial that never reported
        // back (its host died) does not block for ever.
        let until = match breaker.trial_at {
            Some(trial) if trial + self.cooldown_ms > now => trial + self.cooldown_ms,
            _ => opened_at + self.cooldown_ms,
        };
        // Those who opened it do not try it: they wait for another payer's trial, for a
        // window after it last opened; after that, anyone may (it must not stay paused for
        // good when only they call).
        let opener =
            now - opened_at < self.window_ms && payer.is_some_and(|payer| breaker.payers.iter().any(|p| p == payer));
        if now >= until && !opener {
            return Admission::Trial;
        }
        // An opener past the cooldown waits for another payer's trial: a cooldown more.
        let wait_ms = if now < until { until - now } else { self.cooldown_ms };
        Admission::Open {
            reason: breaker.reason.clone(),
            retry_after_secs: ((wait_ms + 999) / 1000).max(1) as u64,
        }
    }

    /// The breaker once `payer`'s call was admitted: a trial is marked as under way.
    fn admitted(&self, breaker: Option<Breaker>, now: i64, payer: &str) -> Option<Breaker> {
        match self.look(breaker.as_ref(), now, Some(payer)) {
            Admission::Trial => breaker.map(|b| Breaker {
                trial_at: Some(now),
                ..b
            }),
            _ => breaker,
        }
    }

    /// The breaker after `payer`'s paid call failed.
    pub fn failed(&self, breaker: Option<Breaker>, key: (&str, &str), payer: &str, reason: &str, now: i64) -> Breaker {
        // The payer reads it in the refusal: a line, not a plugin's whole message.
        let reason: String = reason.chars().take(MAX_REASON_CHARS).collect();
        let with_payer = |mut payers: Vec<String>| {
            if !payers.iter().any(|p| p == payer) && payers.len() < MAX_PAYERS {
                payers.push(payer.to_string());
            }
            payers
        };
        match breaker {
            // A failed trial (or a failure finishing while open): open for another cooldown.
            Some(b) if b.opened_at.is_some() => Breaker {
                opened_at: Some(now),
                trial_at: None,
                reason,
                payers: with_payer(b.payers),
                ..b
            },
            // This payer's failure in this window counted already.
            Some(b) if now - b.window_start < self.window_ms && b.payers.iter().any(|p| p == payer) => b,
            Some(b) if now - b.window_start < self.window_ms => {
                let failures = b.failures + 1;
                Breaker {
                    failures,
                    opened_at: (failures >= self.failures).then_some(now),
                    reason,
                    payers: with_payer(b.payers),
                    ..b
                }
            }
            _ => Breaker {
                agent_id: key.0.to_string(),
                command: key.1.to_string(),
                failures: 1,
                window_start: now,
                opened_at: (self.failures <= 1).then_some(now),
                trial_at: None,
                reason,
                payers: vec![payer.to_string()],
            },
        }
    }
}

/// The most payers a breaker remembers (those of its window, then those who opened it).
const MAX_PAYERS: usize = 64;

/// Before `payer`'s payment is settled (its own checks passed): admits the call (taking
/// the one trial of a half-open breaker) or says why not.
/// A trial is marked with the time it was let through, which releases it.
pub async fn admit(
    store: &Store,
    rules: Rules,
    agent_id: &str,
    command: &str,
    payer: &str,
) -> Result<(Admission, i64), StoreError> {
    let now = crate::clock::now_ms();
    let before = store.breaker(agent_id, command).await?;
    if before.as_ref().is_none_or(|b| b.opened_at.is_none()) {
        return Ok((Admission::Closed, now));
    }
    let payer = payer.to_string();
    let admission = store
        .update_breaker(agent_id, command, move |breaker| {
            let admission = rules.look(breaker.as_ref(), now, Some(&payer));
            (rules.admitted(breaker, now, &payer), admission)
        })
        .await?;
    Ok((admission, now))
}

/// Whether a paid call's failure is the command's, so its breaker counts it: it failed,
/// timed out or its model was down. A run that never started (no plugin slot free) or a
/// fault of this host is not the command's, and must not let anyone pause it by load.
pub fn counts(err: &ServiceError) -> bool {
    matches!(err, ServiceError::Execution(_) | ServiceError::Model(_))
}

/// What a price request sees: the breaker as it stands, `None` when the command has none
/// (it never failed, or an answer since closed it: the usual case).
pub async fn look(store: &Store, rules: Rules, agent_id: &str, command: &str) -> Result<Option<Admission>, StoreError> {
    let breaker = store.breaker(agent_id, command).await?;
    Ok(breaker.map(|b| rules.look(Some(&b), crate::clock::now_ms(), None)))
}

/// A paid call's command answered: its breaker, if any, closes. (A read first: a well
/// command, the usual case, costs no write.)
pub async fn succeeded(store: &Store, agent_id: &str, command: &str) {
    let closed = match store.breaker(agent_id, command).await {
        Ok(None) => return,
        Ok(Some(_)) => store.update_breaker(agent_id, command, |_| (None, ())).await,
        Err(err) => Err(err),
    };
    if let Err(err) = closed {
        tracing::error!(agent = agent_id, command, "could not close a command's breaker: {err}");
    }
}

/// `payer`'s paid call failed by its command (the payer is refunded): counted, perhaps
/// opening it.
pub async fn failed(store: &Store, rules: Rules, agent_id: &str, command: &str, payer: &str, reason: &str) {
    let now = crate::clock::now_ms();
    let key = (agent_id.to_string(), command.to_string());
    let (payer, reason) = (payer.to_string(), reason.to_string());
    let result = store
        .update_breaker(agent_id, command, move |breaker| {
            let next = rules.failed(breaker, (&key.0, &key.1), &payer, &reason, now);
            (Some(next.clone()), next)
        })
        .await;
    match result {
        Ok(b) if b.opened_at == Some(now) => tracing::warn!(
            agent = agent_id,
            command,
            failures = b.failures,
            "a paid command's breaker opened: {}",
            b.reason
        ),
        Ok(_) => {}
        Err(err) => tracing::error!(
            agent = agent_id,
            command,
            "could not count a paid command's failure: {err}"
        ),
    }
}

/// The account's paused paid commands, for its owner.
pub async fn paused(store: &Store, account_id: &str) -> Result<Vec<Breaker>, ServiceError> {
    Ok(store.open_breakers(account_id).await?)
}

/// A job ended answered: if a payment bought it, its command's breaker closes.
pub async fn job_answered(store: &Store, job_id: &str) {
    match store.payment_by_job(job_id).await {
        Ok(Some(payment)) => {
            if let Some(command) = &payment.command {
                succeeded(store, &payment.agent_id, command).await;
            }
        }
        Ok(None) => {}
        Err(err) => tracing::error!(job = job_id, "could not look up the job's payment: {err}"),
    }
}

/// A trial that never ran (its payment was refused): the next call may try instead. Only
/// this trial's mark (`at`) is cleared, never a later trial's.
pub async fn release_trial(store: &Store, agent_id: &str, command: &str, at: i64) {
    let release = move |breaker: Option<Breaker>| {
        let released = breaker.map(|b| match b.trial_at {
            Some(mark) if mark == at => Breaker { trial_at: None, ..b },
            _ => b,
        });
        (released, ())
    };
    if let Err(err) = store.update_breaker(agent_id, command, release).await {
        tracing::error!(agent = agent_id, command, "could not release a breaker's trial: {err}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: Rules = Rules {
        failures: 3,
        window_ms: 60_000,
        cooldown_ms: 10_000,
    };
    const KEY: (&str, &str) = ("agent", "flaky");

    /// `n` failures, each by its own payer (`p0`, `p1`, ...), 1 ms apart from `at`.
    fn fail_times(n: usize, at: i64) -> Option<Breaker> {
        (0..n).fold(None, |b, i| {
            Some(RULES.failed(b, KEY, &format!("p{i}"), "boom", at + i as i64))
        })
    }

    #[test]
    fn opens_after_the_failures_of_distinct_payers_within_the_window() {
        let two = fail_times(2, 0);
        assert_eq!(RULES.look(two.as_ref(), 5, None), Admission::Closed);
        let three = fail_times(3, 0);
        assert_eq!(
            RULES.look(three.as_ref(), 1_002, None),
            Admission::Open {
                reason: "boom".into(),
                retry_after_secs: 9 // opened at 2 ms, for 10 s
            }
        );
        // Failures spread wider than the window never open it.
        let spread = (0..5).fold(None, |b, i| {
            Some(RULES.failed(b, KEY, &format!("p{i}"), "boom", i * 61_000))
        });
        assert_eq!(RULES.look(spread.as_ref(), 5 * 61_000, None), Admission::Closed);
    }

    /// One payer failing again and again counts once: it cannot pause the command for others.
    #[test]
    fn one_payers_failures_count_once() {
        let one = (0..20).fold(None, |b, i| Some(RULES.failed(b, KEY, "mallory", "boom", i)));
        assert_eq!(one.as_ref().map(|b| b.failures), Some(1));
        assert_eq!(RULES.look(one.as_ref(), 30, Some("bob")), Admission::Closed);
    }

    #[test]
    fn after_the_cooldown_one_trial_goes_through_never_to_an_opener() {
        let open = fail_times(3, 0);
        let now = 12_500;
        assert_eq!(RULES.look(open.as_ref(), now, None), Admission::Trial);
        // A payer whose failure opened it waits for someone else's trial.
        assert!(matches!(
            RULES.look(open.as_ref(), now, Some("p1")),
            Admission::Open { .. }
        ));
        assert_eq!(RULES.admitted(open.clone(), now, "p1"), open);
        let trying = RULES.admitted(open, now, "carol");
        // A second caller during the trial is refused for the trial's cooldown.
        assert!(matches!(
            RULES.look(trying.as_ref(), now + 1_000, Some("dave")),
            Admission::Open {
                retry_after_secs: 9,
                ..
            }
        ));
        // The trial fails: open again from now, and carol is one who opened it.
        let reopened = RULES.failed(trying, KEY, "carol", "still broken", now + 2_000);
        assert_eq!(
            RULES.look(Some(&reopened), now + 3_000, None),
            Admission::Open {
                reason: "still broken".into(),
                retry_after_secs: 9
            }
        );
        assert!(reopened.payers.iter().any(|p| p == "carol"));
        // A window after it last opened, an opener may try it too: it must not stay paused
        // for good when only those who paused it call.
        assert_eq!(
            RULES.look(Some(&reopened), now + 2_000 + RULES.window_ms, Some("carol")),
            Admission::Trial
        );
        // A trial whose host died stops blocking after a cooldown.
        let stuck = RULES.admitted(Some(reopened), now + 12_000, "erin");
        assert_eq!(
            RULES.look(stuck.as_ref(), now + 22_001, Some("frank")),
            Admission::Trial
        );
    }
}
