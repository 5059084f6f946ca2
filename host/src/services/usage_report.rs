//! The owners' view of the usage counters (`services::usage`): a range cut in steps, with
//! what each step and each command added up to, and run-time percentiles read from the
//! counters' buckets as Prometheus's `histogram_quantile` reads them.

use std::collections::BTreeMap;

use serde::Serialize;

use super::ServiceError;
use super::usage::BUCKET_BOUNDS_MS;
use crate::rate_window::DAY_MS;
use crate::store::Store;
use crate::store::usage::{HOUR_MS, UsageSum};
/// Most steps one answer holds (a month of hours, or years of days).
pub const MAX_POINTS: i64 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub from: i64,
    pub to: i64,
    pub step: i64,
}

/// `from`, `to` (RFC 3339 times, or `YYYY-MM-DD` UTC dates with `to`'s day included) and `step` (`hour` or `day`),
/// each optional: by default the last 7 days by day, or the last 24 hours by hour. Both
/// ends are rounded out to whole steps.
pub fn range(from: Option<&str>, to: Option<&str>, step: Option<&str>, now: i64) -> Result<Range, ServiceError> {
    let step = match step.unwrap_or("day") {
        "hour" => HOUR_MS,
        "day" => DAY_MS,
        other => {
            return Err(ServiceError::Validation(format!(
                "Invalid query parameter 'step': '{other}' is not hour or day"
            )));
        }
    };
    // A date is its whole day: `to=2026-11-02` includes the 2nd.
    let read = |name: &str, text: Option<&str>, day_end: bool| -> Result<Option<i64>, ServiceError> {
        let Some(text) = text.map(str::trim) else {
            return Ok(None);
        };
        let date = text.len() == 10;
        let dated = date.then(|| format!("{text}T00:00:00Z"));
        crate::clock::parse_iso(dated.as_deref().unwrap_or(text))
            .map(|at| Some(if date && day_end { at + DAY_MS } else { at }))
            .ok_or_else(|| {
                ServiceError::Validation(format!(
                    "Invalid query parameter '{name}': use an RFC 3339 time or a date such as 2026-11-01"
                ))
            })
    };
    let floor = |ms: i64| ms.div_euclid(step) * step;
    let to = read("to", to, true)?
        .map(|t| floor(t + step - 1))
        .unwrap_or(floor(now) + step);
    let from = read("from", from, false)?
        .map(floor)
        .unwrap_or(to - if step == HOUR_MS { 24 * HOUR_MS } else { 7 * DAY_MS });
    if from >= to {
        return Err(ServiceError::Validation(
            "Invalid query parameters: 'from' must be before 'to'".into(),
        ));
    }
    if (to - from) / step > MAX_POINTS {
        return Err(ServiceError::Validation(format!(
            "Invalid query parameters: at most {MAX_POINTS} steps from 'from' to 'to'"
        )));
    }
    Ok(Range { from, to, step })
}

/// Runs by how they ended.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Calls {
    pub calls: i64,
    /// Ended other than `succeeded` or `invalid_input` (the caller's mistake).
    pub failed: i64,
}

impl Calls {
    fn add(&mut self, outcome: &str, n: i64) {
        self.calls += n;
        if super::usage::is_failure(outcome) {
            self.failed += n;
        }
    }
}

/// What a step, a command or the whole range added up to. Money is micro-USDC.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Totals {
    #[serde(flatten)]
    pub calls: Calls,
    /// Settled x402 payments and their micro-USDC, by network.
    pub payments: BTreeMap<String, i64>,
    pub revenue_micro_usdc: BTreeMap<String, i64>,
    /// The same, by x402 version (`v1`, `v2`).
    pub revenue_by_version: BTreeMap<String, i64>,
    pub refunds: i64,
    pub refunded_micro_usdc: i64,
    /// Price lists (402 answers) given.
    pub offers: i64,
    /// What the agent's wallets paid in fees: `solana_lamports`, `base_wei`; and in how
    /// many transactions (settlements and refunds).
    pub fees: BTreeMap<String, i64>,
    pub fee_transactions: i64,
    pub chats: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    /// What the agent paid for the services its commands called (signed payments), and
    /// their micro-USDC, by network.
    pub purchases: BTreeMap<String, i64>,
    pub spent_micro_usdc: BTreeMap<String, i64>,
}

impl Totals {
    fn add(&mut self, sum: &UsageSum) {
        let (n, total) = (sum.n, sum.total);
        match sum.metric.as_str() {
            "calls" => self.calls.add(sum.dim.split_once('/').map_or("", |(_, o)| o), n),
            "revenue" => {
                let (network, version) = sum.dim.split_once('/').unwrap_or((&sum.dim, ""));
                *self.payments.entry(network.into()).or_default() += n;
                *self.revenue_micro_usdc.entry(network.into()).or_default() += total;
                *self.revenue_by_version.entry(version.into()).or_default() += total;
            }
            "refunds" => {
                self.refunds += n;
                self.refunded_micro_usdc += total;
            }
            "offers" => self.offers += n,
            "fees" => {
                *self.fees.entry(sum.dim.replace('/', "_")).or_default() += total;
                self.fee_transactions += n;
            }
            "chat" if sum.dim == "prompt" => {
                self.chats += n;
                self.prompt_tokens += total;
            }
            "chat" => self.completion_tokens += total,
            "spent" => {
                *self.purchases.entry(sum.dim.clone()).or_default() += n;
                *self.spent_micro_usdc.entry(sum.dim.clone()).or_default() += total;
            }
            _ => {}
        }
    }
}

/// One step of the range.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub at: String,
    #[serde(flatten)]
    pub totals: Totals,
}

/// Run-time percentiles (ms) of some runs.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Latency {
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub mean_ms: Option<f64>,
}

/// Runs by channel, then by outcome.
type ByChannel = BTreeMap<String, BTreeMap<String, i64>>;

/// One command over the whole range.
#[derive(Debug, Clone, Serialize)]
pub struct CommandUsage {
    pub command: String,
    #[serde(flatten)]
    pub totals: Totals,
    /// Runs by channel (`api`, `mcp`, `x402`, `chat_tool`, `chatapp`) and how they ended.
    pub by_channel: ByChannel,
    #[serde(flatten)]
    pub latency: Latency,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub from: String,
    pub to: String,
    pub step: &'static str,
    pub totals: Totals,
    pub latency: Latency,
    pub points: Vec<Point>,
    /// Per command; `""` is what belongs to no command (paid messages, chats, fees).
    pub commands: Vec<CommandUsage>,
    /// Per agent, when the report covers an account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agents: Option<BTreeMap<String, Totals>>,
}

/// The counters of `account_id` (one agent's, when named) over `range`.
pub async fn report(
    store: &Store,
    account_id: &str,
    agent_id: Option<&str>,
    range: Range,
) -> Result<Report, ServiceError> {
    let sums = store
        .usage(account_id, agent_id, range.from, range.to, range.step)
        .await?;
    let by_agent = match agent_id {
        Some(_) => None,
        None => Some(store.usage_by_agent(account_id, range.from, range.to).await?),
    };
    Ok(build(&sums, range, by_agent.as_deref()))
}

/// The report of `sums`; with `by_agent` (each agent's sums), one with each agent's totals.
fn build(sums: &[UsageSum], range: Range, by_agent: Option<&[UsageSum]>) -> Report {
    let steps = ((range.to - range.from) / range.step) as usize;
    let mut points: Vec<Totals> = vec![Totals::default(); steps];
    let mut totals = Totals::default();
    let mut commands: BTreeMap<&str, (Totals, ByChannel, Buckets)> = BTreeMap::new();
    let mut all_runs = Buckets::default();
    for sum in sums {
        let index = ((sum.at - range.from) / range.step) as usize;
        if let Some(point) = points.get_mut(index) {
            point.add(sum);
        }
        totals.add(sum);
        let (command_totals, channels, buckets) = commands.entry(&sum.command).or_default();
        command_totals.add(sum);
        match sum.metric.as_str() {
            "calls" => {
                let (channel, outcome) = sum.dim.split_once('/').unwrap_or((&sum.dim, ""));
                *channels
                    .entry(channel.into())
                    .or_default()
                    .entry(outcome.into())
                    .or_default() += sum.n;
            }
            "duration" => {
                if let Some(bucket) = sum.dim.strip_prefix('b').and_then(|b| b.parse::<usize>().ok()) {
                    buckets.add(bucket, sum.n, sum.total);
                    all_runs.add(bucket, sum.n, sum.total);
                }
            }
            _ => {}
        }
    }
    let step_name = if range.step == HOUR_MS { "hour" } else { "day" };
    Report {
        from: crate::clock::iso(range.from),
        to: crate::clock::iso(range.to),
        step: step_name,
        latency: all_runs.latency(),
        totals,
        points: points
            .into_iter()
            .enumerate()
            .map(|(i, totals)| Point {
                at: crate::clock::iso(range.from + i as i64 * range.step),
                totals,
            })
            .collect(),
        commands: commands
            .into_iter()
            .map(|(command, (totals, by_channel, buckets))| CommandUsage {
                command: command.to_string(),
                totals,
                by_channel,
                latency: buckets.latency(),
            })
            .collect(),
        agents: by_agent.map(|sums| {
            let mut agents: BTreeMap<String, Totals> = BTreeMap::new();
            for sum in sums {
                agents.entry(sum.agent_id.clone()).or_default().add(sum);
            }
            agents
        }),
    }
}

/// Runs counted per run-time bucket (`BUCKET_BOUNDS_MS`, then one past the last bound).
#[derive(Debug, Clone, Default)]
struct Buckets {
    counts: [i64; BUCKET_BOUNDS_MS.len() + 1],
    sum_ms: i64,
}

impl Buckets {
    fn add(&mut self, bucket: usize, n: i64, ms: i64) {
        if let Some(count) = self.counts.get_mut(bucket) {
            *count += n;
            self.sum_ms += ms;
        }
    }

    fn latency(&self) -> Latency {
        let runs: i64 = self.counts.iter().sum();
        if runs == 0 {
            return Latency::default();
        }
        Latency {
            p50_ms: Some(self.quantile(0.5)),
            p95_ms: Some(self.quantile(0.95)),
            p99_ms: Some(self.quantile(0.99)),
            mean_ms: Some(self.sum_ms as f64 / runs as f64),
        }
    }

    /// The `q` quantile, interpolated linearly within its bucket; in the last (unbounded)
    /// bucket, its lower bound, as Prometheus answers.
    fn quantile(&self, q: f64) -> f64 {
        let runs: i64 = self.counts.iter().sum();
        let rank = q * runs as f64;
        let mut below = 0i64;
        for (i, &count) in self.counts.iter().enumerate() {
            if count > 0 && (below + count) as f64 >= rank {
                let lower = if i == 0 { 0 } else { BUCKET_BOUNDS_MS[i - 1] } as f64;
                let Some(&upper) = BUCKET_BOUNDS_MS.get(i) else {
                    return lower;
                };
                let within = (rank - below as f64) / count as f64;
                return lower + (upper as f64 - lower) * within;
            }
            below += count;
        }
        BUCKET_BOUNDS_MS[BUCKET_BOUNDS_MS.len() - 1] as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::usage::hour_of;

    const NOW: i64 = 1_795_000_000_000;

    fn day_of(ms: i64) -> i64 {
        ms.div_euclid(DAY_MS) * DAY_MS
    }

    fn sum(at: i64, command: &str, metric: &str, dim: &str, n: i64, total: i64) -> UsageSum {
        UsageSum {
            agent_id: "agent".into(),
            at,
            command: command.into(),
            metric: metric.into(),
            dim: dim.into(),
            n,
            total,
        }
    }

    #[test]
    fn ranges_default_round_out_and_refuse_nonsense() {
        let week = range(None, None, None, NOW).unwrap();
        assert_eq!((week.to - week.from, week.step), (7 * DAY_MS, DAY_MS));
        assert_eq!(week.to, day_of(NOW) + DAY_MS, "today is the last step");
        let day = range(None, None, Some("hour"), NOW).unwrap();
        assert_eq!((day.to - day.from, day.to), (24 * HOUR_MS, hour_of(NOW) + HOUR_MS));
        let dated = range(Some("2026-11-01"), Some("2026-11-03T10:30:00Z"), None, NOW).unwrap();
        assert_eq!(crate::clock::iso(dated.from), "2026-11-01T00:00:00.000Z");
        assert_eq!(crate::clock::iso(dated.to), "2026-11-04T00:00:00.000Z");
        let days = range(Some("2026-11-01"), Some("2026-11-03"), None, NOW).unwrap();
        assert_eq!(
            crate::clock::iso(days.to),
            "2026-11-04T00:00:00.000Z",
            "to's day included"
        );
        assert!(range(None, None, Some("minute"), NOW).is_err());
        assert!(range(Some("2026-11-05"), Some("2026-11-01"), None, NOW).is_err());
        assert!(range(Some("yesterday"), None, None, NOW).is_err());
        assert!(
            range(Some("2026-01-01"), Some("2026-03-01"), Some("hour"), NOW).is_err(),
            "too many steps"
        );
    }

    #[test]
    fn percentiles_interpolate_within_buckets() {
        let mut buckets = Buckets::default();
        // 100 runs: 50 of at most 5 ms, 40 in (5, 10], 10 in (10, 20].
        buckets.add(0, 50, 150);
        buckets.add(1, 40, 300);
        buckets.add(2, 10, 150);
        let latency = buckets.latency();
        assert_eq!(latency.p50_ms, Some(5.0));
        assert_eq!(latency.p95_ms, Some(15.0));
        assert_eq!(latency.p99_ms, Some(19.0));
        assert_eq!(latency.mean_ms, Some(6.0));
        let mut slow = Buckets::default();
        slow.add(17, 1, 500_000);
        assert_eq!(slow.quantile(0.5), 327_680.0, "past the last bound: its lower bound");
        assert_eq!(Buckets::default().latency(), Latency::default());
    }

    #[test]
    fn sums_land_in_their_step_command_and_totals() {
        let r = range(Some("2026-11-01"), Some("2026-11-02"), None, NOW).unwrap();
        let day2 = r.from + DAY_MS;
        let sums = vec![
            sum(r.from, "hello", "calls", "api/succeeded", 3, 30),
            sum(r.from, "hello", "calls", "mcp/failed", 1, 10),
            sum(r.from, "hello", "calls", "x402/invalid_input", 2, 2),
            sum(day2, "hello", "revenue", "base/v2", 2, 20_000),
            sum(day2, "", "revenue", "solana/v1", 1, 5_000),
            sum(day2, "hello", "refunds", "base", 1, 10_000),
            sum(day2, "hello", "offers", "base", 4, 0),
            sum(day2, "", "fees", "solana/lamports", 2, 10_000),
            sum(day2, "", "chat", "prompt", 2, 120),
            sum(day2, "", "chat", "completion", 2, 40),
            sum(day2, "buy", "spent", "base", 2, 20_000),
            sum(day2, "buy", "spent", "solana", 1, 7_500),
        ];
        let report = build(&sums, r, None);
        assert_eq!(report.points.len(), 2);
        assert_eq!(report.points[0].totals.calls, Calls { calls: 6, failed: 1 });
        assert_eq!(report.points[1].totals.revenue_micro_usdc["base"], 20_000);
        let t = &report.totals;
        assert_eq!((t.payments["base"], t.payments["solana"]), (2, 1));
        assert_eq!(t.revenue_by_version["v2"], 20_000);
        assert_eq!((t.refunds, t.refunded_micro_usdc, t.offers), (1, 10_000, 4));
        assert_eq!((t.fees["solana_lamports"], t.fee_transactions), (10_000, 2));
        assert_eq!((t.chats, t.prompt_tokens, t.completion_tokens), (2, 120, 40));
        assert_eq!((t.purchases["base"], t.spent_micro_usdc["base"]), (2, 20_000));
        assert_eq!(t.spent_micro_usdc["solana"], 7_500);
        assert!(
            t.revenue_micro_usdc.get("solana") == Some(&5_000),
            "what it spent is not revenue"
        );
        let buy = report.commands.iter().find(|c| c.command == "buy").unwrap();
        assert_eq!(buy.totals.purchases["base"], 2);
        let hello = report.commands.iter().find(|c| c.command == "hello").unwrap();
        assert_eq!(hello.by_channel["api"]["succeeded"], 3);
        assert_eq!(hello.by_channel["mcp"]["failed"], 1);
        assert_eq!(hello.totals.offers, 4);
        assert!(report.agents.is_none());
    }
}
