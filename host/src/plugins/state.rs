//! Per-invocation state: one per fresh Store, dropped with it. It holds the WASI context
//! (no files, no environment, no sockets; stderr captured in a small memory pipe), the
//! limits, and what this call may reach.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::bindings::agent::plugin::agent_info::{AgentProfile, CommandInfo};
use super::grants::Grants;
use crate::llm::LlmProvider;
use crate::outbound::Outbound;
use crate::store::Store;

/// Shared by every call: the edges host functions reach.
pub struct HostServices {
    pub store: Store,
    pub outbound: Outbound,
    pub llm: Arc<dyn LlmProvider>,
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
    pub agent_id: String,
    pub command: String,
    /// The key-value scope: the plugin's name.
    pub plugin_scope: String,
    pub grants: Grants,
    pub agent: Option<AgentSnapshot>,
    pub progress: Option<ProgressSink>,
    pub services: Arc<HostServices>,
    /// Log lines written so far (capped per call).
    pub log_lines: u32,
}

/// Stderr kept per call: enough for a panic message.
pub const STDERR_CAPACITY: usize = 8 * 1024;

pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub limiter: Limiter,
    pub call: CallContext,
    pub stderr: MemoryOutputPipe,
}

impl HostState {
    pub fn new(call: CallContext, max_memory_bytes: usize) -> HostState {
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        // Nothing is inherited: no preopened dirs, no env, no args, no network.
        let wasi = WasiCtxBuilder::new()
            .stderr(stderr.clone())
            .allow_ip_name_lookup(false)
            .allow_tcp(false)
            .allow_udp(false)
            .build();
        HostState {
            wasi,
            table: ResourceTable::new(),
            limiter: Limiter::new(max_memory_bytes),
            call,
            stderr,
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

/// Caps linear memory and tables, and remembers which cap was hit so the error can say so
/// (an out-of-memory guest otherwise looks like any other `unreachable` trap).
pub struct Limiter {
    max_memory: usize,
    pub exceeded: Option<String>,
}

const MAX_TABLE_ELEMENTS: usize = 100_000;

impl Limiter {
    pub fn new(max_memory: usize) -> Limiter {
        Limiter {
            max_memory,
            exceeded: None,
        }
    }
}

impl wasmtime::ResourceLimiter for Limiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            self.exceeded = Some(format!("the memory limit of {} MiB", self.max_memory >> 20));
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS {
            self.exceeded = Some(format!("the table limit of {MAX_TABLE_ELEMENTS} elements"));
            return Ok(false);
        }
        Ok(true)
    }
}
