//! Per-invocation state: one per fresh Store, dropped with it. It holds the WASI context
//! (no files, no environment, no sockets; stderr captured in a small memory pipe), the
//! limits, and what this call may reach.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::store::LogLine;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::budget::{self, MemoryBudget};
use super::grants::Grants;
use super::host::GuardedHttp;
use super::{AgentProfile, CommandInfo};
use crate::llm::LlmProvider;
use crate::outbound::Outbound;
use crate::store::Store;
use wasmtime_wasi_http::WasiHttpCtx;

/// Charges an account's plugins' use of the language model to its budget across runs.
pub trait LlmBudget: Send + Sync {
    /// Takes `tokens` from `account`'s budget; if they do not fit, says why and when to
    /// retry.
    fn charge<'a>(
        &'a self,
        account: &'a str,
        tokens: u32,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;
}

/// A budget that takes everything: for `plugin run` and benches, where no account pays.
pub struct UnlimitedLlm;

impl LlmBudget for UnlimitedLlm {
    fn charge<'a>(
        &'a self,
        _account: &'a str,
        _tokens: u32,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>> {
        Box::pin(async { Ok(()) })
    }
}

/// What one run may ask of the language model, all its calls together.
#[derive(Debug, Clone, Copy)]
pub struct LlmRunLimits {
    pub calls: u32,
    pub prompt_chars: u64,
    /// Tokens asked for: each call's answer limit, summed.
    pub tokens: u64,
}

/// What a run has asked of the language model so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct LlmSpent {
    pub calls: u32,
    pub prompt_chars: u64,
    pub tokens: u64,
}

/// Shared by every call: the edges host functions reach.
pub struct HostServices {
    pub store: Store,
    pub outbound: Outbound,
    pub llm: Arc<dyn LlmProvider>,
    /// Most tokens one plugin completion may ask for.
    pub llm_max_tokens: u32,
    pub llm_run_limits: LlmRunLimits,
    pub llm_budget: Arc<dyn LlmBudget>,
    /// The embedding model behind `llm.embed`, when the host has one.
    pub embedder: Option<Arc<dyn crate::llm::Embedder>>,
    /// Bytes all of one account's key-value stores may hold.
    pub kv_max_account_bytes: u64,
    /// Pays the x402 services a run's requests are answered `402` by, within what the
    /// agent's owner allows; `None` (`plugin run`, benches): nothing is paid.
    pub payer: Option<Arc<dyn super::Payer>>,
}

/// Called with (percent, message) when a long run reports progress.
pub type ProgressSink = Arc<dyn Fn(u8, Option<String>) + Send + Sync>;

/// The agent as built-in plugins see it through `agent-info`.
#[derive(Clone)]
pub struct AgentSnapshot {
    pub profile: AgentProfile,
    pub commands: Vec<CommandInfo>,
}

/// What this call is and may reach.
pub struct CallContext {
    /// The account the run is for.
    pub account_id: String,
    pub agent_id: String,
    pub command: String,
    /// The key-value scope within the agent's: its command's (see `Run::kv_scope`).
    pub plugin_scope: String,
    pub grants: Grants,
    pub agent: Option<AgentSnapshot>,
    pub progress: Option<ProgressSink>,
    pub services: Arc<HostServices>,
    /// Log lines written so far (capped per call).
    pub log_lines: u32,
    /// The lines kept for the run's record, up to `KEPT_LOG_BYTES` of messages.
    pub kept_log: Vec<LogLine>,
    pub kept_log_bytes: usize,
    pub llm_spent: LlmSpent,
    /// The units of work the run reports (`meter.add`).
    pub meter: super::Meter,
}

impl CallContext {
    /// A call with nothing logged yet, no agent snapshot and no progress sink.
    pub fn new(
        account_id: &str,
        agent_id: &str,
        command: &str,
        plugin_scope: String,
        grants: Grants,
        services: Arc<HostServices>,
    ) -> CallContext {
        CallContext {
            account_id: account_id.to_string(),
            agent_id: agent_id.to_string(),
            command: command.to_string(),
            plugin_scope,
            grants,
            agent: None,
            progress: None,
            services,
            log_lines: 0,
            kept_log: Vec::new(),
            kept_log_bytes: 0,
            llm_spent: LlmSpent::default(),
            meter: super::Meter::new(),
        }
    }

    /// Who pays for what this run buys.
    pub fn paying_run(&self) -> super::PayingRun {
        super::PayingRun {
            account_id: self.account_id.clone(),
            agent_id: self.agent_id.clone(),
            command: self.command.clone(),
            mcp_server: None,
        }
    }
}

/// Of a run's log, what its record keeps: enough to debug a run, bounded per run.
pub const KEPT_LOG_BYTES: usize = 16 * 1024;

/// Stderr kept per call: enough for a panic message.
pub const STDERR_CAPACITY: usize = 8 * 1024;

pub struct HostState {
    wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    /// `wasi:http` (WIT 0.2.0): its context, and its hooks once a request is made.
    pub(crate) http_ctx: WasiHttpCtx,
    pub(crate) http_hooks: Option<GuardedHttp>,
    pub limiter: Limiter,
    /// The run's memory: its linear memories and what the host holds for it.
    pub budget: Arc<MemoryBudget>,
    pub(crate) resources: budget::ResourceMeter,
    pub call: CallContext,
    pub stderr: MemoryOutputPipe,
    /// Set once the guest ran past an epoch tick: its run is no longer a cheap one.
    pub(crate) sliced: Arc<AtomicBool>,
}

impl HostState {
    pub fn new(call: CallContext, budget: Arc<MemoryBudget>) -> HostState {
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        // Nothing is inherited: no preopened dirs, no env, no args, no network.
        let wasi = WasiCtxBuilder::new()
            .stderr(stderr.clone())
            .allow_ip_name_lookup(false)
            .allow_tcp(false)
            .allow_udp(false)
            .build();
        let mut table = ResourceTable::new();
        table.set_max_capacity(budget::MAX_HANDLES);
        let mut http_ctx = WasiHttpCtx::new();
        http_ctx.set_field_size_limit(budget::FIELD_BYTES);
        HostState {
            wasi,
            table,
            http_ctx,
            http_hooks: None,
            limiter: Limiter::new(budget.clone()),
            budget,
            resources: budget::ResourceMeter::default(),
            call,
            stderr,
            sliced: Arc::default(),
        }
    }

    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.contents()).into_owned()
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Caps linear memory and tables for the whole instance: every memory and every table it
/// has counts against one budget (a component may hold several of each), and remembers
/// which cap was hit so the error can say so (an out-of-memory guest otherwise looks like
/// any other `unreachable` trap). Memory shares its budget with what the host holds for
/// the run (`budget.rs`).
pub struct Limiter {
    memory: Arc<MemoryBudget>,
    table_elements_in_use: usize,
    pub tables_exceeded: Option<String>,
}

/// Table elements of one instance, all tables together.
const MAX_TABLE_ELEMENTS: usize = 100_000;

impl Limiter {
    pub fn new(memory: Arc<MemoryBudget>) -> Limiter {
        Limiter {
            memory,
            table_elements_in_use: 0,
            tables_exceeded: None,
        }
    }
}

impl wasmtime::ResourceLimiter for Limiter {
    // Called when a memory is created (current = 0) and each time it grows.
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(self.memory.grow_linear(current, desired))
    }

    fn table_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let total = self.table_elements_in_use - current.min(self.table_elements_in_use) + desired;
        if total > MAX_TABLE_ELEMENTS {
            self.tables_exceeded = Some(format!(
                "the table limit of {MAX_TABLE_ELEMENTS} elements (all of the instance's tables together)"
            ));
            return Ok(false);
        }
        self.table_elements_in_use = total;
        Ok(true)
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn instances(&self) -> usize {
        MAX_CORE_INSTANCES
    }
}

/// Memories, tables and core instances one component instance may create: enough for the
/// toolchains we know (Rust: 1 memory; componentize-py and -js: a handful), few enough
/// that one run cannot take a large share of the pool's slots.
pub const MAX_MEMORIES: usize = 4;
pub const MAX_TABLES: usize = 16;
pub const MAX_CORE_INSTANCES: usize = 50;

#[cfg(test)]
mod tests {
    use wasmtime::ResourceLimiter;

    use super::*;

    #[test]
    fn every_table_counts_against_one_budget() {
        let mut limiter = Limiter::new(MemoryBudget::new(1 << 20));
        assert!(limiter.table_growing(0, 60_000, None).unwrap());
        assert!(!limiter.table_growing(0, 60_000, None).unwrap());
        assert!(limiter.tables_exceeded.is_some());
    }
}
