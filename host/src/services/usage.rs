//! What each agent did and earned, kept per hour for its owner's dashboards (migration 23).
//!
//! Payments, refunds, fees and chat tokens are added in the write that records them, so
//! they are exact. Runs and price lists are many and on the hot path: they are summed in
//! memory here and added every `usage_flush_ms` (and at shutdown) in one transaction.
//! Additions commute, so every host flushes its own sums without a lock.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::domain::Network;
use crate::plugins::Origin;
use crate::store::Store;
use crate::store::usage::{UsageAdd, hour_of};

/// Where a call came from: the plugin's `origin`, told apart further for the owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Api,
    /// A tool call over MCP (keyed); paid MCP calls are `X402`.
    Mcp,
    /// A message or skill call over A2A (keyed or open); paid ones are `X402`.
    A2a,
    ChatTool,
    X402,
    Chatapp,
    Social,
    /// A schedule its owner made (docs/schedules.md).
    Schedule,
    /// The operator's own `agent-host` run: not the agent's business, so not counted.
    Cli,
}

impl Channel {
    pub const ALL: [Channel; 9] = [
        Channel::Api,
        Channel::Mcp,
        Channel::A2a,
        Channel::ChatTool,
        Channel::X402,
        Channel::Chatapp,
        Channel::Social,
        Channel::Schedule,
        Channel::Cli,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Api => "api",
            Channel::Mcp => "mcp",
            Channel::A2a => "a2a",
            Channel::ChatTool => "chat_tool",
            Channel::X402 => "x402",
            Channel::Chatapp => "chatapp",
            Channel::Social => "social",
            Channel::Schedule => "schedule",
            Channel::Cli => "cli",
        }
    }

    /// Reads a stored name (a job's origin); anything unknown is the keyed API.
    pub fn parse(text: &str) -> Channel {
        Channel::ALL
            .into_iter()
            .find(|c| c.as_str() == text)
            .unwrap_or(Channel::Api)
    }

    /// What the plugin is told: MCP, A2A and the CLI reach it as the API does.
    pub fn origin(self) -> Origin {
        match self {
            Channel::Api | Channel::Mcp | Channel::A2a | Channel::Schedule | Channel::Cli => Origin::Api,
            Channel::ChatTool => Origin::ChatTool,
            Channel::X402 => Origin::X402,
            Channel::Chatapp => Origin::Chatapp,
            Channel::Social => Origin::Social,
        }
    }
}

/// Upper bounds (ms) of the run-time buckets: 5 ms doubling to 327,680 ms, as the
/// `plugin_run_duration_seconds` metric's, then one bucket for anything longer.
pub const BUCKET_BOUNDS_MS: [i64; 17] = {
    let mut bounds = [0; 17];
    let mut i = 0;
    while i < 17 {
        bounds[i] = 5 << i;
        i += 1;
    }
    bounds
};

/// The bucket a run of `ms` falls in: `b00`..`b17`.
pub fn bucket_of(ms: i64) -> usize {
    BUCKET_BOUNDS_MS
        .iter()
        .position(|&bound| ms <= bound)
        .unwrap_or(BUCKET_BOUNDS_MS.len())
}

/// Distinct counters one host sums between flushes; past it, new ones are dropped (and
/// counted), so a flood of price-list requests cannot grow memory without bound.
const MAX_PENDING: usize = 20_000;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    agent_id: String,
    hour: i64,
    command: String,
    metric: &'static str,
    dim: String,
}

#[derive(Debug, Clone)]
struct Sum {
    account_id: String,
    n: i64,
    total: i64,
}

/// One host's sums not yet added to the store, and its runs of each command this hour.
#[derive(Default)]
pub struct Recorder {
    pending: Mutex<HashMap<Key, Sum>>,
    dropped: AtomicU64,
    hourly: Mutex<HashMap<(String, String), HourOfRuns>>,
    /// When a command counts as failing (`webhook_failing_min_runs`, `_percent`).
    failing_min_runs: i64,
    failing_percent: i64,
}

/// A command's runs on this host in one hour.
#[derive(Debug, Default)]
struct HourOfRuns {
    hour: i64,
    runs: i64,
    failed: i64,
    raised: bool,
}

/// A command whose runs this hour failed often enough to tell its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    pub hour: i64,
    pub runs: i64,
    pub failed: i64,
}

/// Whether a run's outcome is a failure of the command (not the caller's mistake).
pub fn is_failure(outcome: &str) -> bool {
    outcome != "succeeded" && outcome != "invalid_input"
}

/// Whose work a sum is.
pub struct Owner<'a> {
    pub account_id: &'a str,
    pub agent_id: &'a str,
}

impl Recorder {
    pub fn new(settings: &crate::config::WebhookSettings) -> Recorder {
        Recorder {
            failing_min_runs: i64::try_from(settings.webhook_failing_min_runs).unwrap_or(i64::MAX),
            failing_percent: i64::try_from(settings.webhook_failing_percent).unwrap_or(100),
            ..Recorder::default()
        }
    }

    /// A run of `command` that ended with `outcome` (`plugins::outcome_label`) after `ms`.
    /// Answers when this run made the command's hour on this host a failing one (once per
    /// hour; each host judges by its own runs).
    pub fn run(&self, owner: Owner<'_>, command: &str, channel: Channel, outcome: &str, ms: i64) -> Option<Failing> {
        if channel == Channel::Cli {
            return None;
        }
        let hour = hour_of(crate::clock::now_ms());
        {
            let mut pending = self.lock();
            let calls = format!("{}/{outcome}", channel.as_str());
            self.add(&mut pending, &owner, hour, command, "calls", calls, ms);
            self.add(
                &mut pending,
                &owner,
                hour,
                command,
                "duration",
                format!("b{:02}", bucket_of(ms)),
                ms,
            );
        }
        self.judge(owner.agent_id, command, hour, is_failure(outcome))
    }

    fn judge(&self, agent_id: &str, command: &str, hour: i64, failed: bool) -> Option<Failing> {
        if self.failing_min_runs == 0 {
            return None;
        }
        let mut hourly = self.hourly.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if hourly.len() >= MAX_PENDING {
            // A new hour forgets the last: what counts is this one.
            hourly.retain(|_, runs| runs.hour == hour);
        }
        let key = (agent_id.to_string(), command.to_string());
        if hourly.len() >= MAX_PENDING && !hourly.contains_key(&key) {
            return None;
        }
        let runs = hourly.entry(key).or_default();
        if runs.hour != hour {
            *runs = HourOfRuns {
                hour,
                ..HourOfRuns::default()
            };
        }
        runs.runs += 1;
        runs.failed += i64::from(failed);
        let failing = runs.runs >= self.failing_min_runs && runs.failed * 100 >= self.failing_percent * runs.runs;
        if failing && !runs.raised {
            runs.raised = true;
            return Some(Failing {
                hour,
                runs: runs.runs,
                failed: runs.failed,
            });
        }
        None
    }

    /// A price list (402) given for `command` (None: the agent's paid message).
    pub fn offer(&self, owner: Owner<'_>, command: Option<&str>, network: Option<Network>) {
        let hour = hour_of(crate::clock::now_ms());
        let dim = network.map(|n| n.as_str().to_string()).unwrap_or_default();
        let mut pending = self.lock();
        self.add(&mut pending, &owner, hour, command.unwrap_or(""), "offers", dim, 0);
    }

    #[allow(clippy::too_many_arguments)]
    fn add(
        &self,
        pending: &mut HashMap<Key, Sum>,
        owner: &Owner<'_>,
        hour: i64,
        command: &str,
        metric: &'static str,
        dim: String,
        total: i64,
    ) {
        let key = Key {
            agent_id: owner.agent_id.to_string(),
            hour,
            command: command.to_string(),
            metric,
            dim,
        };
        let sum = Sum {
            account_id: owner.account_id.to_string(),
            n: 1,
            total,
        };
        self.merge(pending, key, sum);
    }

    /// Adds `sum` to its counter; a new counter past `MAX_PENDING` is dropped.
    fn merge(&self, pending: &mut HashMap<Key, Sum>, key: Key, sum: Sum) {
        let room = pending.len() < MAX_PENDING;
        match pending.get_mut(&key) {
            Some(now) => {
                now.n = now.n.saturating_add(sum.n);
                now.total = now.total.saturating_add(sum.total);
            }
            None if room => {
                pending.insert(key, sum);
            }
            None => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Sum>> {
        // A panic while holding it left sums half added at worst: keep counting.
        self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds what was summed to the store. Sums the store refuses go back, to be tried at the
    /// next flush (merged with what came meanwhile).
    pub async fn flush(&self, store: &Store) {
        let taken = std::mem::take(&mut *self.lock());
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(dropped, "usage counters over the limit between flushes were dropped");
        }
        if taken.is_empty() {
            return;
        }
        // Added in one order on every host, so two hosts' flushes never wait on each other
        // in a cycle (PostgreSQL would end one as a deadlock).
        let mut taken: Vec<(Key, Sum)> = taken.into_iter().collect();
        taken.sort_by(|(a, _), (b, _)| {
            (&a.agent_id, a.hour, &a.command, a.metric, &a.dim).cmp(&(
                &b.agent_id,
                b.hour,
                &b.command,
                b.metric,
                &b.dim,
            ))
        });
        let adds = taken
            .iter()
            .map(|(key, sum)| UsageAdd {
                account_id: sum.account_id.clone(),
                agent_id: key.agent_id.clone(),
                hour: key.hour,
                command: key.command.clone(),
                metric: key.metric,
                dim: key.dim.clone(),
                n: sum.n,
                total: sum.total,
            })
            .collect();
        if let Err(err) = store.add_usage(adds).await {
            tracing::warn!(error = %err, "could not add usage counters; keeping them for the next try");
            let mut pending = self.lock();
            for (key, sum) in taken {
                self.merge(&mut pending, key, sum);
            }
        }
    }
}

/// Adds what was counted every `usage_flush_ms`, prunes old hours now and then, and adds
/// the last sums when the host stops (after its work drained).
pub async fn flush_periodically(services: super::Services, mut stop: tokio::sync::watch::Receiver<bool>) {
    let settings = &services.settings.usage;
    let every = std::time::Duration::from_millis(settings.usage_flush_ms);
    let keep_ms = i64::try_from(settings.usage_retention_days).unwrap_or(36_500) * crate::rate_window::DAY_MS;
    let mut last_prune = 0;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        services.usage.flush(&services.store).await;
        let now = crate::clock::now_ms();
        if now - last_prune >= crate::store::usage::HOUR_MS {
            last_prune = now;
            // One host at a time: they all prune the same rows.
            match services.store.try_turn("usage-prune").await {
                Ok(Some(_turn)) => {
                    if let Err(err) = services.store.prune_usage(hour_of(now - keep_ms)).await {
                        tracing::warn!(error = %err, "could not prune old usage counters");
                    }
                }
                Ok(None) => {}
                Err(err) => tracing::warn!(error = %err, "could not take the usage-prune turn"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_fall_in_the_metric_buckets() {
        assert_eq!(BUCKET_BOUNDS_MS[0], 5);
        assert_eq!(BUCKET_BOUNDS_MS[16], 327_680);
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(5), 0);
        assert_eq!(bucket_of(6), 1);
        assert_eq!(bucket_of(327_680), 16);
        assert_eq!(bucket_of(400_000), 17);
    }

    #[test]
    fn channels_read_back_and_tell_plugins_their_origin() {
        for channel in Channel::ALL {
            assert_eq!(Channel::parse(channel.as_str()), channel);
        }
        assert_eq!(Channel::Mcp.origin(), Origin::Api);
        assert_eq!(Channel::parse("unknown"), Channel::Api);
    }

    #[test]
    fn a_command_is_failing_once_an_hour_past_the_share() {
        let recorder = Recorder {
            failing_min_runs: 4,
            failing_percent: 50,
            ..Recorder::default()
        };
        let owner = || Owner {
            account_id: "acc",
            agent_id: "agent",
        };
        let outcomes = ["failed", "succeeded", "invalid_input", "timeout", "failed", "failed"];
        let raised: Vec<Option<Failing>> = outcomes
            .iter()
            .map(|o| recorder.run(owner(), "hook", Channel::Api, o, 10))
            .collect();
        // Four runs, two failed (50 %): raised at the fourth run, and only then.
        assert_eq!(raised.iter().position(Option::is_some), Some(3));
        assert_eq!(raised[3].as_ref().map(|f| (f.runs, f.failed)), Some((4, 2)));
        assert!(raised[4..].iter().all(Option::is_none));
        assert!(recorder.run(owner(), "fine", Channel::Cli, "failed", 1).is_none());
    }

    #[test]
    fn sums_stay_bounded() {
        let recorder = Recorder::default();
        for i in 0..MAX_PENDING + 10 {
            let agent_id = format!("agent-{i}");
            let owner = Owner {
                account_id: "acc",
                agent_id: &agent_id,
            };
            recorder.offer(owner, Some("hello"), None);
        }
        assert_eq!(recorder.lock().len(), MAX_PENDING);
        assert_eq!(recorder.dropped.load(Ordering::Relaxed), 10);
        let owner = Owner {
            account_id: "acc",
            agent_id: "agent-0",
        };
        recorder.offer(owner, Some("hello"), None);
        assert_eq!(
            recorder.dropped.load(Ordering::Relaxed),
            10,
            "a known counter still adds"
        );
    }
}
