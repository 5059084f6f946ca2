//! Prometheus metrics: one registry for the process, names and units after the
//! OpenTelemetry semantic conventions where they exist (`http_server_request_duration_seconds`,
//! `db_client_operation_duration_seconds`, `rpc_client_call_duration_seconds`), the rest
//! under `agent_host_`. Nothing is recorded unless the operator serves them
//! (`metrics_listen`): every recording starts with one relaxed load.
//!
//! Labels are bounded: no payer, key or address ever; agents and commands by name for the
//! first `metrics_max_agents` / `metrics_max_commands` seen, the rest folded into `other`.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use super::hot_path;
use super::labels::LabelNames;

static ENABLED: AtomicBool = AtomicBool::new(false);
static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The metrics, when the operator serves them; `None` costs one relaxed load.
#[inline]
pub fn metrics() -> Option<&'static Metrics> {
    ENABLED.load(Ordering::Relaxed).then(|| &*METRICS)
}

/// Starts recording, with the label caps of the settings; with `named` agents, only they
/// get labels of their own.
pub fn enable(max_agents: usize, max_commands: usize, named: &[String]) {
    METRICS.labels.set_caps(max_agents, max_commands);
    METRICS.labels.name_only(named);
    ENABLED.store(true, Ordering::Relaxed);
}

/// The exposition, in the OpenMetrics text format (what Prometheus asks for first).
pub fn encode() -> String {
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, &METRICS.registry);
    text
}

type Labels<const N: usize> = [(&'static str, &'static str); N];
type Histograms<const N: usize> = Family<Labels<N>, Histogram, fn() -> Histogram>;

/// Latencies from 0.25 ms to about 8 s (doubling).
fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.000_25, 2.0, 16))
}

/// Slow work (plugin runs, settlements, LLM calls): 5 ms to about 5 min.
fn slow() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 17))
}

/// Memory from 64 KiB to 4 GiB.
fn bytes() -> Histogram {
    Histogram::new(exponential_buckets(65_536.0, 2.0, 17))
}

pub struct Metrics {
    registry: Registry,
    labels: LabelNames,
    // HTTP
    http_duration: Histograms<3>,
    http_active: Gauge,
    pub connections_open: Gauge,
    connections_refused: Family<Labels<1>, Counter>,
    // Plugins
    plugin_runs: Family<Labels<3>, Counter>,
    plugin_duration: Histograms<1>,
    plugin_memory: Histograms<0>,
    /// The duration histogram of each outcome, and the memory one, resolved once.
    plugin_duration_by_outcome: Vec<Histogram>,
    plugin_peak_memory: Histogram,
    plugin_refused: Family<Labels<1>, Counter>,
    pub plugin_slots: Gauge,
    pub plugin_slots_in_use: Gauge,
    // x402
    x402_offers: Family<Labels<2>, Counter>,
    x402_payments: Family<Labels<3>, Counter>,
    x402_settlement: Histograms<1>,
    x402_revenue: Family<Labels<1>, Counter>,
    x402_refunds: Family<Labels<1>, Counter>,
    x402_refunded: Family<Labels<1>, Counter>,
    x402_fee_lamports: Counter,
    x402_fee_wei: Counter<f64, AtomicU64>,
    x402_replays: Counter,
    x402_cooling_off: Family<Labels<1>, Counter>,
    // Jobs and recovery
    jobs_finished: Family<Labels<1>, Counter>,
    recovery_passes: Counter,
    pub jobs_queued: Gauge,
    pub jobs_running: Gauge,
    pub jobs_oldest_queued_seconds: Gauge<f64, AtomicU64>,
    // Chains and upstreams
    rpc_duration: Histograms<3>,
    llm_duration: Histograms<1>,
    llm_tokens: Family<Labels<1>, Counter>,
    chat_tokens: Family<Labels<2>, Counter>,
    pub llm_embedded_generations: Gauge,
    llm_embedded_stopped: Family<Labels<1>, Counter>,
    upstream_duration: Histograms<2>,
    webhook_duration: Histograms<1>,
    // Store and limits
    db_duration: Histograms<2>,
    pub db_connections_max: Gauge,
    pub db_connections_used: Gauge,
    pub db_connections_idle: Gauge,
    pub db_pending_requests: Gauge,
    rate_limited: Family<Labels<1>, Counter>,
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::default();
        let metrics = Metrics {
            registry: Registry::default(),
            labels: LabelNames::default(),
            http_duration: Family::new_with_constructor(latency),
            http_active: Gauge::default(),
            connections_open: Gauge::default(),
            connections_refused: Family::default(),
            plugin_runs: Family::default(),
            plugin_duration: Family::new_with_constructor(slow),
            plugin_memory: Family::new_with_constructor(bytes),
            plugin_duration_by_outcome: Vec::new(),
            plugin_peak_memory: bytes(),
            plugin_refused: Family::default(),
            plugin_slots: Gauge::default(),
            plugin_slots_in_use: Gauge::default(),
            x402_offers: Family::default(),
            x402_payments: Family::default(),
            x402_settlement: Family::new_with_constructor(slow),
            x402_revenue: Family::default(),
            x402_refunds: Family::default(),
            x402_refunded: Family::default(),
            x402_fee_lamports: Counter::default(),
            x402_fee_wei: Counter::default(),
            x402_replays: Counter::default(),
            x402_cooling_off: Family::default(),
            jobs_finished: Family::default(),
            recovery_passes: Counter::default(),
            jobs_queued: Gauge::default(),
            jobs_running: Gauge::default(),
            jobs_oldest_queued_seconds: Gauge::default(),
            rpc_duration: Family::new_with_constructor(latency),
            llm_duration: Family::new_with_constructor(slow),
            llm_tokens: Family::default(),
            chat_tokens: Family::default(),
            llm_embedded_generations: Gauge::default(),
            llm_embedded_stopped: Family::default(),
            upstream_duration: Family::new_with_constructor(latency),
            webhook_duration: Family::new_with_constructor(latency),
            db_duration: Family::new_with_constructor(latency),
            db_connections_max: Gauge::default(),
            db_connections_used: Gauge::default(),
            db_connections_idle: Gauge::default(),
            db_pending_requests: Gauge::default(),
            rate_limited: Family::default(),
        };
        let m = &metrics;
        let seconds = || Unit::Seconds;
        let r = &mut registry;
        r.register_with_unit(
            "http_server_request_duration",
            "Duration of HTTP server requests, by route template, method and status class",
            seconds(),
            m.http_duration.clone(),
        );
        r.register(
            "http_server_active_requests",
            "HTTP server requests in flight",
            m.http_active.clone(),
        );
        r.register(
            "http_server_open_connections",
            "Client connections open, on every listener",
            m.connections_open.clone(),
        );
        r.register(
            "http_server_refused_connections",
            "Connections closed as soon as accepted, by reason (cap: max_connections; address: max_connections_per_address)",
            m.connections_refused.clone(),
        );
        let host = r.sub_registry_with_prefix("agent_host");
        host.register(
            "plugin_runs",
            "Command runs, by agent, command and outcome",
            m.plugin_runs.clone(),
        );
        host.register_with_unit(
            "plugin_run_duration",
            "Duration of command runs, by outcome",
            seconds(),
            m.plugin_duration.clone(),
        );
        host.register_with_unit(
            "plugin_run_peak_memory",
            "Peak linear memory of one command run",
            Unit::Bytes,
            m.plugin_memory.clone(),
        );
        host.register(
            "plugin_runs_refused",
            "Command runs refused for lack of a slot, by reason",
            m.plugin_refused.clone(),
        );
        host.register(
            "plugin_slots",
            "Command runs the host allows at once",
            m.plugin_slots.clone(),
        );
        host.register(
            "plugin_slots_in_use",
            "Command runs in progress",
            m.plugin_slots_in_use.clone(),
        );
        host.register(
            "x402_offers",
            "Payment requirements (402) answered, by network and version",
            m.x402_offers.clone(),
        );
        host.register(
            "x402_payments",
            "Payments ended, by network, version and final state",
            m.x402_payments.clone(),
        );
        host.register_with_unit(
            "x402_settlement_duration",
            "From a verified payment to its confirmed settlement, by network",
            seconds(),
            m.x402_settlement.clone(),
        );
        host.register(
            "x402_revenue_micro_usdc",
            "USDC settled into the agents' wallets, in micro-USDC, by network",
            m.x402_revenue.clone(),
        );
        host.register("x402_refunds", "Payments refunded, by network", m.x402_refunds.clone());
        host.register(
            "x402_refunded_micro_usdc",
            "USDC refunded to payers, in micro-USDC, by network",
            m.x402_refunded.clone(),
        );
        host.register(
            "x402_fee_lamports",
            "Solana fees the agents' wallets paid to settle and refund payments, in lamports",
            m.x402_fee_lamports.clone(),
        );
        host.register(
            "x402_fee_wei",
            "Base gas the agents' wallets paid to settle and refund payments, in wei",
            m.x402_fee_wei.clone(),
        );
        host.register(
            "x402_replays_refused",
            "Payments refused because they were used already",
            m.x402_replays.clone(),
        );
        host.register(
            "x402_payers_cooling_off",
            "Payments refused because their payer is cooling off after a failed settlement, by network",
            m.x402_cooling_off.clone(),
        );
        host.register("jobs_finished", "Jobs ended, by state", m.jobs_finished.clone());
        host.register(
            "recovery_passes",
            "Recovery passes this host finished (jobs, transfers and payments taken up)",
            m.recovery_passes.clone(),
        );
        host.register(
            "jobs_queued",
            "Jobs waiting to run (the whole store)",
            m.jobs_queued.clone(),
        );
        host.register("jobs_running", "Jobs running (the whole store)", m.jobs_running.clone());
        host.register_with_unit(
            "jobs_oldest_queued_age",
            "Age of the oldest queued job",
            seconds(),
            m.jobs_oldest_queued_seconds.clone(),
        );
        host.register_with_unit(
            "llm_request_duration",
            "Duration of chat model calls, by outcome",
            seconds(),
            m.llm_duration.clone(),
        );
        host.register(
            "llm_tokens",
            "Chat model tokens, by type (input, output)",
            m.llm_tokens.clone(),
        );
        host.register(
            "chat_tokens",
            "Tokens of agents' chats, by agent and type (prompt, completion)",
            m.chat_tokens.clone(),
        );
        host.register(
            "llm_embedded_generations",
            "Embedded model generations waiting or running",
            m.llm_embedded_generations.clone(),
        );
        host.register(
            "llm_embedded_stopped",
            "Embedded model generations stopped before their end, by reason (caller_gone, deadline)",
            m.llm_embedded_stopped.clone(),
        );
        host.register_with_unit(
            "webhook_attempt_duration",
            "Webhook delivery attempts and how long each took, by outcome (succeeded, failed)",
            seconds(),
            m.webhook_duration.clone(),
        );
        host.register_with_unit(
            "upstream_request_duration",
            "Duration of calls to Telegram, X and x402 facilitators, by service and outcome",
            seconds(),
            m.upstream_duration.clone(),
        );
        host.register(
            "rate_limited",
            "Requests refused by a rate limit, by limit",
            m.rate_limited.clone(),
        );
        let r = &mut registry;
        r.register_with_unit(
            "rpc_client_call_duration",
            "Duration of JSON-RPC calls to chain nodes, by network, method and outcome",
            seconds(),
            m.rpc_duration.clone(),
        );
        r.register_with_unit(
            "db_client_operation_duration",
            "Duration of database reads and writes (each a transaction), by system and kind",
            seconds(),
            m.db_duration.clone(),
        );
        r.register(
            "db_client_connection_max",
            "PostgreSQL connections the pool may open",
            m.db_connections_max.clone(),
        );
        r.register(
            "db_client_connection_used",
            "PostgreSQL connections in use",
            m.db_connections_used.clone(),
        );
        r.register(
            "db_client_connection_idle",
            "PostgreSQL connections open and idle",
            m.db_connections_idle.clone(),
        );
        r.register(
            "db_client_connection_pending_requests",
            "Database calls waiting for a PostgreSQL connection",
            m.db_pending_requests.clone(),
        );
        let plugin_duration_by_outcome = hot_path::OUTCOMES
            .iter()
            .map(|outcome| metrics.plugin_duration.get_or_create(&[("outcome", outcome)]).clone())
            .collect();
        let plugin_peak_memory = metrics.plugin_memory.get_or_create(&[]).clone();
        Metrics {
            registry,
            plugin_duration_by_outcome,
            plugin_peak_memory,
            ..metrics
        }
    }

    /// One more request in flight, until the guard is dropped.
    pub fn http_in_flight(&'static self) -> InFlight {
        self.http_active.inc();
        InFlight(&self.http_active)
    }

    pub fn http_finished(&self, method: &'static str, route: Option<&str>, status: u16, seconds: f64) {
        let route = route.unwrap_or("(none)");
        let class = (usize::from(status / 100)).clamp(1, 5) - 1;
        let method_index = hot_path::index_of(&hot_path::METHODS, method);
        let histogram = hot_path::http(route, method_index, class, || {
            self.http_duration
                .get_or_create(&[
                    ("http_request_method", hot_path::METHODS[method_index]),
                    ("http_route", self.labels.route(route)),
                    ("http_response_status_class", hot_path::CLASSES[class]),
                ])
                .clone()
        });
        histogram.observe(seconds);
    }

    pub fn plugin_run(&self, agent: &str, command: &str, outcome: &'static str, seconds: f64, peak_memory: u64) {
        let outcome_index = hot_path::index_of(&hot_path::OUTCOMES, outcome);
        let runs = hot_path::runs(agent, command, outcome_index, || {
            let labels = [
                ("agent", self.labels.agent(agent)),
                ("command", self.labels.command(agent, command)),
                ("outcome", hot_path::OUTCOMES[outcome_index]),
            ];
            self.plugin_runs.get_or_create(&labels).clone()
        });
        runs.inc();
        self.plugin_duration_by_outcome[outcome_index].observe(seconds);
        if peak_memory > 0 {
            self.plugin_peak_memory.observe(peak_memory as f64);
        }
    }

    pub fn plugin_refused(&self, reason: &'static str) {
        self.plugin_refused.get_or_create(&[("reason", reason)]).inc();
    }

    pub fn x402_offer(&self, network: &'static str, version: &'static str) {
        self.x402_offers
            .get_or_create(&[("network", network), ("version", version)])
            .inc();
    }

    pub fn x402_payment(&self, network: &'static str, version: &'static str, state: &'static str) {
        self.x402_payments
            .get_or_create(&[("network", network), ("version", version), ("state", state)])
            .inc();
    }

    pub fn x402_settled(&self, network: &'static str, micro_usdc: u64, seconds: f64) {
        self.x402_revenue
            .get_or_create(&[("network", network)])
            .inc_by(micro_usdc);
        self.x402_settlement
            .get_or_create(&[("network", network)])
            .observe(seconds);
    }

    pub fn x402_refunded(&self, network: &'static str, micro_usdc: u64) {
        self.x402_refunds.get_or_create(&[("network", network)]).inc();
        self.x402_refunded
            .get_or_create(&[("network", network)])
            .inc_by(micro_usdc);
    }

    pub fn webhook_attempt(&self, outcome: &'static str, latency_ms: i64) {
        self.webhook_duration
            .get_or_create(&[("outcome", outcome)])
            .observe(latency_ms as f64 / 1000.0);
    }

    pub fn x402_fee_lamports(&self, lamports: u64) {
        self.x402_fee_lamports.inc_by(lamports);
    }

    pub fn x402_fee_wei(&self, wei: u128) {
        self.x402_fee_wei.inc_by(wei as f64);
    }

    pub fn x402_replay(&self) {
        self.x402_replays.inc();
    }

    pub fn x402_cooling_off(&self, network: &'static str) {
        self.x402_cooling_off.get_or_create(&[("network", network)]).inc();
    }

    pub fn job_finished(&self, state: &'static str) {
        self.jobs_finished.get_or_create(&[("state", state)]).inc();
    }

    pub fn recovery_pass(&self) {
        self.recovery_passes.inc();
    }

    pub fn rpc_call(&self, network: &'static str, method: &'static str, outcome: &'static str, seconds: f64) {
        self.rpc_duration
            .get_or_create(&[("network", network), ("rpc_method", method), ("outcome", outcome)])
            .observe(seconds);
    }

    pub fn llm_call(&self, outcome: &'static str, seconds: f64, input_tokens: u64, output_tokens: u64) {
        self.llm_duration
            .get_or_create(&[("outcome", outcome)])
            .observe(seconds);
        self.llm_tokens.get_or_create(&[("type", "input")]).inc_by(input_tokens);
        self.llm_tokens
            .get_or_create(&[("type", "output")])
            .inc_by(output_tokens);
    }

    pub fn chat_tokens(&self, agent: &str, prompt: u64, completion: u64) {
        let agent = self.labels.agent(agent);
        self.chat_tokens
            .get_or_create(&[("agent", agent), ("type", "prompt")])
            .inc_by(prompt);
        self.chat_tokens
            .get_or_create(&[("agent", agent), ("type", "completion")])
            .inc_by(completion);
    }

    pub fn llm_embedded_stopped(&self, reason: &'static str) {
        self.llm_embedded_stopped.get_or_create(&[("reason", reason)]).inc();
    }

    pub fn upstream_call(&self, service: &'static str, outcome: &'static str, seconds: f64) {
        self.upstream_duration
            .get_or_create(&[("service", service), ("outcome", outcome)])
            .observe(seconds);
    }

    pub fn db_operation(&self, system: &'static str, kind: &'static str, seconds: f64) {
        self.db_duration
            .get_or_create(&[("db_system_name", system), ("db_operation_name", kind)])
            .observe(seconds);
    }

    pub fn connection_refused(&self, reason: &'static str) {
        self.connections_refused.get_or_create(&[("reason", reason)]).inc();
    }

    pub fn rate_limited(&self, limit: &'static str) {
        self.rate_limited.get_or_create(&[("limit", limit)]).inc();
    }
}

pub struct InFlight(&'static Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A request refused by the named limit: `auth_failures`, `account`, `x402_client`,
/// `x402_payer`, `chatapp`.
pub fn note_rate_limited(limit: &'static str) {
    if let Some(metrics) = metrics() {
        metrics.rate_limited(limit);
    }
}

/// A standard HTTP method as a label; any other is `_OTHER`, as OpenTelemetry says.
pub fn method_label(method: &http::Method) -> &'static str {
    match *method {
        http::Method::GET => "GET",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::PATCH => "PATCH",
        http::Method::DELETE => "DELETE",
        http::Method::HEAD => "HEAD",
        http::Method::OPTIONS => "OPTIONS",
        _ => "_OTHER",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_names_series_with_units_and_bounded_labels() {
        let metrics = Metrics::new();
        metrics.labels.set_caps(1, 10);
        metrics.http_active.inc();
        metrics.http_active.dec();
        metrics.http_finished("GET", Some("/v1/agents/{agent_id}/commands"), 200, 0.002);
        metrics.plugin_run("seller", "hello", "succeeded", 0.01, 1 << 20);
        metrics.plugin_run("buyer", "hello", "failed", 0.01, 0);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &metrics.registry).unwrap();
        assert!(
            text.contains("# UNIT http_server_request_duration_seconds seconds"),
            "{text}"
        );
        assert!(
            text.contains(
                "http_server_request_duration_seconds_count{http_request_method=\"GET\",http_route=\"/v1/agents/{agent_id}/commands\",http_response_status_class=\"2xx\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("agent_host_plugin_runs_total{agent=\"seller\",command=\"hello\",outcome=\"succeeded\"} 1")
        );
        assert!(text.contains("agent_host_plugin_runs_total{agent=\"other\",command=\"other\",outcome=\"failed\"} 1"));
        assert!(text.contains("http_server_active_requests 0"), "{text}");

        let older = super::super::text_format::from_openmetrics(&text);
        assert!(
            older.contains("# TYPE agent_host_plugin_runs_total counter\n"),
            "{older}"
        );
    }
}
