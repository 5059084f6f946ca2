//! The WebAssembly plugin runtime. Every command runs as a component of the
//! `agent:plugin` world in a fresh instance, with a deadline, a memory cap, an output cap
//! and only the capabilities its grants allow. The host knows nothing of what a command
//! does: only its component, its manifest and its limits.

pub mod bindings;
mod engine;
pub mod grants;
mod host;
mod inspect;
pub mod slots;
pub mod state;

pub use bindings::types::{Capability, Invocation, Origin, Output, PluginManifest, ResponseFormat};
/// The agent as built-in plugins see it (`agent-info`), in the newest version's records.
pub use bindings::v0_2_0::agent::plugin::agent_info::{AgentProfile, CommandInfo};
pub use grants::{Grants, PluginKind};
pub use inspect::{InspectError, Inspection, check_manifest, describe, manifest_from_json, manifest_json};
pub use slots::Tenant;
pub use state::{AgentSnapshot, CallContext, HostServices, ProgressSink};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::{Store, Trap, UpdateDeadline};

use crate::domain::HandlerType;
use crate::store::PluginRun;
use bindings::types::CommandError;
use engine::ComponentCache;
use slots::Slots;
use state::HostState;

#[derive(Debug, Clone)]
pub struct RuntimeLimits {
    pub default_timeout: Duration,
    pub max_memory_bytes: usize,
    pub max_output_bytes: usize,
    /// Runs at once; more wait for a slot.
    pub max_concurrency: usize,
    /// Runs one account may have at once.
    pub max_concurrency_per_account: usize,
    /// Largest component accepted.
    pub max_component_bytes: usize,
}

/// A component to run: where its bytes are, and what kind of plugin it is.
#[derive(Debug, Clone)]
pub struct ComponentRef {
    pub hash: String,
    pub kind: PluginKind,
    source: Source,
}

#[derive(Clone)]
enum Source {
    Embedded(&'static [u8]),
    Memory(Arc<Vec<u8>>),
    /// An uploaded component: the data dir's copy, or else the database's bytes (which
    /// then become the copy), as when another host installed it.
    Stored {
        copy: PathBuf,
        store: crate::store::Store,
    },
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Embedded(_) => f.write_str("Embedded"),
            Source::Memory(_) => f.write_str("Memory"),
            Source::Stored { copy, .. } => write!(f, "Stored({})", copy.display()),
        }
    }
}

impl ComponentRef {
    /// Its bytes, read only when neither memory nor the compiled cache has the component
    /// (on the blocking pool: see `ComponentCache::component`).
    fn bytes(&self) -> impl FnOnce() -> Result<Vec<u8>, String> + Send + 'static {
        let (source, hash) = (self.source.clone(), self.hash.clone());
        move || match source {
            Source::Embedded(bytes) => Ok(bytes.to_vec()),
            Source::Memory(bytes) => Ok(bytes.to_vec()),
            Source::Stored { copy, store } => stored_bytes(&hash, &copy, &store),
        }
    }
}

/// The data dir's copy of an uploaded component, or the database's bytes, checked against
/// the content hash and kept as the copy.
fn stored_bytes(hash: &str, copy: &Path, store: &crate::store::Store) -> Result<Vec<u8>, String> {
    if let Ok(bytes) = std::fs::read(copy) {
        return Ok(bytes);
    }
    let stored = tokio::runtime::Handle::current()
        .block_on(store.plugin_component(hash))
        .map_err(|e| format!("cannot read component {hash} from the database: {e}"))?
        .ok_or_else(|| {
            format!("component {hash} is neither in the data dir nor in the database; apply its agent again")
        })?;
    if content_hash(&stored) != hash {
        return Err(format!(
            "the database's bytes of component {hash} do not match its hash"
        ));
    }
    let tmp = copy.with_extension("tmp");
    if std::fs::write(&tmp, &stored)
        .and_then(|_| std::fs::rename(&tmp, copy))
        .is_err()
    {
        tracing::warn!(path = %copy.display(), "could not keep a copy of the component");
    }
    Ok(stored)
}

/// Why a run produced no output. The first three are the plugin's own answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecError {
    InvalidInput(String),
    Failed(String),
    Unavailable(String),
    /// Trapped, timed out, hit a limit or panicked; the message says which.
    Crashed(String),
    /// The component could not be loaded or instantiated.
    Load(String),
    /// No slot came free in time: the account's share, or the whole server, is busy.
    Busy(String),
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecError::InvalidInput(m) => write!(f, "invalid input: {m}"),
            ExecError::Failed(m) => write!(f, "{m}"),
            ExecError::Unavailable(m) => write!(f, "unavailable: {m}"),
            ExecError::Crashed(m) => write!(f, "{m}"),
            ExecError::Load(m) => write!(f, "the plugin could not be loaded: {m}"),
            ExecError::Busy(m) => write!(f, "{m}"),
        }
    }
}

/// One run: the component, its invocation and what it may reach.
pub struct Run {
    pub component: ComponentRef,
    pub invocation: Invocation,
    pub agent_id: String,
    pub grants: Grants,
    pub agent: Option<AgentSnapshot>,
    pub progress: Option<ProgressSink>,
    pub timeout: Option<Duration>,
    /// Whose run: decides its share of the slots.
    pub tenant: Tenant,
    /// The key-value store this run sees, within its agent's: the command's, named by the
    /// agent manifest, never by the component.
    pub kv_scope: String,
}

const BUILTIN_COMPONENTS: &[(HandlerType, &[u8])] = &[
    (
        HandlerType::SimpleText,
        include_bytes!(env!("BUILT_PLUGIN_SIMPLE_TEXT")),
    ),
    (HandlerType::Prompt, include_bytes!(env!("BUILT_PLUGIN_PROMPT"))),
    (HandlerType::Webhook, include_bytes!(env!("BUILT_PLUGIN_WEBHOOK"))),
    (HandlerType::BuiltIn, include_bytes!(env!("BUILT_PLUGIN_BUILT_IN"))),
];

/// Runs kept per agent and command for their owner (`agent-host logs`); older ones go.
pub const RUNS_KEPT_PER_COMMAND: u32 = 100;

/// Deadline for calling `manifest()`, which should do nothing but return data.
const MANIFEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Components are inspected (their `manifest()` called) under this tenant's share.
const INSPECTION: &str = "(inspection)";

/// Threads of the guests' own. A run starts where it is called; one that is not done after
/// its first slice (it yielded at an epoch tick, or waits on a host call) goes on here. So a
/// command of a few microseconds never changes threads, and however busy long runs keep
/// these, the server's threads stay free to accept requests, read the store and answer other
/// tenants.
struct GuestThreads(Option<tokio::runtime::Runtime>);

impl GuestThreads {
    fn new() -> std::io::Result<GuestThreads> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get()))
            .thread_name("wasm-guest")
            .enable_all()
            .build()?;
        Ok(GuestThreads(Some(runtime)))
    }

    /// Polls `run` once here, and finishes it on the guest threads if that was not enough.
    async fn finish<F>(&self, run: F) -> Result<F::Output, tokio::task::JoinError>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let mut run = Box::pin(run);
        let first = std::future::poll_fn(|cx| std::task::Poll::Ready(run.as_mut().poll(cx))).await;
        if let std::task::Poll::Ready(done) = first {
            return Ok(done);
        }
        // Each poll registers the waker it is given, so the run may move to another task.
        let runtime = self.0.as_ref().expect("guest threads run until dropped");
        AbortOnDrop(runtime.spawn(run)).await
    }
}

impl Drop for GuestThreads {
    fn drop(&mut self) {
        // Dropping a runtime inside another one's task would panic: let it wind down alone.
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// A spawned run that is aborted when whoever awaits it goes away.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> std::future::Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub struct PluginRuntime {
    cache: ComponentCache,
    guests: GuestThreads,
    services: Arc<HostServices>,
    limits: RuntimeLimits,
    slots: Slots,
    builtins: Vec<(HandlerType, ComponentRef)>,
    plugin_dir: PathBuf,
    manifests: Mutex<HashMap<String, Arc<PluginManifest>>>,
}

pub fn content_hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl PluginRuntime {
    /// `data_dir/plugins` holds uploaded components by content hash; `cache_dir` their
    /// compiled artifacts (by the same hash and this engine's settings).
    pub fn new(
        data_dir: &Path,
        cache_dir: &Path,
        limits: RuntimeLimits,
        services: HostServices,
    ) -> anyhow::Result<PluginRuntime> {
        let max_instances = (limits.max_concurrency as u32 + 8).max(16);
        let engine = engine::build_engine(limits.max_memory_bytes, max_instances)
            .map_err(|e| anyhow::anyhow!("cannot configure the WebAssembly engine: {e:#}"))?;
        engine::start_epoch_ticker(&engine);
        let cache = ComponentCache::new(engine, cache_dir)
            .map_err(|e| anyhow::anyhow!("cannot prepare the component cache: {e:#}"))?;
        let plugin_dir = data_dir.join("plugins");
        std::fs::create_dir_all(&plugin_dir)?;
        let builtins = BUILTIN_COMPONENTS
            .iter()
            .map(|(handler, bytes)| {
                let component = ComponentRef {
                    hash: content_hash(bytes),
                    kind: PluginKind::BuiltIn,
                    source: Source::Embedded(bytes),
                };
                (*handler, component)
            })
            .collect();
        Ok(PluginRuntime {
            cache,
            services: Arc::new(services),
            slots: Slots::new(limits.max_concurrency, limits.max_concurrency_per_account),
            guests: GuestThreads::new()?,
            limits,
            builtins,
            plugin_dir,
            manifests: Mutex::new(HashMap::new()),
        })
    }

    pub fn limits(&self) -> &RuntimeLimits {
        &self.limits
    }

    /// The component a handler type runs, for the four built-in types.
    pub fn builtin(&self, handler: HandlerType) -> Option<ComponentRef> {
        self.builtins
            .iter()
            .find(|(h, _)| *h == handler)
            .map(|(_, c)| c.clone())
    }

    /// An uploaded component, by its content hash.
    pub fn custom(&self, hash: &str) -> ComponentRef {
        ComponentRef {
            hash: hash.to_string(),
            kind: PluginKind::Custom,
            source: Source::Stored {
                copy: self.plugin_dir.join(format!("{hash}.wasm")),
                store: self.services.store.clone(),
            },
        }
    }

    /// (compiled, loaded from the disk cache) since start.
    pub fn cache_stats(&self) -> (u64, u64) {
        (
            self.cache.compiled.load(Ordering::Relaxed),
            self.cache.from_disk.load(Ordering::Relaxed),
        )
    }

    /// Checks an uploaded component and stores it content-addressed, compiled and cached,
    /// with the manifest it declared: requests read that and never call `manifest()`.
    pub async fn install(&self, bytes: Vec<u8>) -> Result<Inspection, InspectError> {
        let inspection = self.inspect(bytes.clone(), PluginKind::Custom).await?;
        self.services
            .store
            .put_plugin(
                &inspection.hash,
                &manifest_json(&inspection.manifest),
                &inspection.wit_version,
                &bytes,
            )
            .await
            .map_err(|e| InspectError(format!("cannot record the component: {e}")))?;
        self.remember(&inspection.hash, Arc::new(inspection.manifest.clone()));
        let path = self.plugin_dir.join(format!("{}.wasm", inspection.hash));
        if !path.is_file() {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, &bytes)
                .and_then(|_| std::fs::rename(&tmp, &path))
                .map_err(|e| InspectError(format!("cannot store the component: {e}")))?;
        }
        Ok(inspection)
    }

    /// Validates a component without storing it: a component, of our world, of a served
    /// version, whose manifest agrees with what it imports.
    pub async fn inspect(&self, bytes: Vec<u8>, kind: PluginKind) -> Result<Inspection, InspectError> {
        inspect::inspect(self, bytes, kind).await
    }

    fn remember(&self, hash: &str, manifest: Arc<PluginManifest>) {
        self.manifests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(hash.to_string(), manifest);
    }

    /// What a component declared (name, parameters, capabilities). A custom component's
    /// was recorded when it was applied; a built-in one is asked once (it is our own code).
    /// A request never runs an uploaded component's `manifest()`.
    pub async fn declared(&self, component: &ComponentRef) -> Result<Arc<PluginManifest>, ExecError> {
        if let Some(found) = self
            .manifests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&component.hash)
        {
            return Ok(found.clone());
        }
        let manifest = match component.kind {
            PluginKind::BuiltIn => self.call_manifest(component).await?,
            PluginKind::Custom => {
                let stored = self
                    .services
                    .store
                    .plugin_manifest(&component.hash)
                    .await
                    .map_err(|e| ExecError::Load(e.to_string()))?;
                stored.as_ref().and_then(manifest_from_json).ok_or_else(|| {
                    ExecError::Load("its manifest was never recorded; apply the agent's manifest again".into())
                })?
            }
        };
        let manifest = Arc::new(manifest);
        self.remember(&component.hash, manifest.clone());
        Ok(manifest)
    }

    /// Records the manifest of an installed component that has none recorded (applied by an
    /// older version of this host): called at start, never on a request path.
    pub async fn record_manifest(&self, hash: &str) -> Result<Arc<PluginManifest>, ExecError> {
        let component = self.custom(hash);
        let manifest = self.call_manifest(&component).await?;
        let bytes = self.local_copy(hash).map_err(ExecError::Load)?;
        let pre = self.cache.get(hash, component.bytes()).await.map_err(ExecError::Load)?;
        self.services
            .store
            .put_plugin(hash, &manifest_json(&manifest), pre.wit_version(), &bytes)
            .await
            .map_err(|e| ExecError::Load(e.to_string()))?;
        let manifest = Arc::new(manifest);
        self.remember(hash, manifest.clone());
        Ok(manifest)
    }

    /// The data dir's copy of an uploaded component, checked against its hash.
    fn local_copy(&self, hash: &str) -> Result<Vec<u8>, String> {
        let path = self.plugin_dir.join(format!("{hash}.wasm"));
        let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if content_hash(&bytes) != hash {
            return Err(format!("{} does not match its hash", path.display()));
        }
        Ok(bytes)
    }

    /// Puts the bytes of a component recorded before the database kept them into the
    /// database, from the data dir's copy: called at start, never on a request path.
    pub async fn store_component(&self, hash: &str) -> Result<(), String> {
        let bytes = self.local_copy(hash)?;
        self.services
            .store
            .put_plugin_component(hash, bytes)
            .await
            .map_err(|e| e.to_string())
    }

    /// Calls a component's `manifest()` in a fresh instance under the limits: when it is
    /// installed or inspected, and once for each built-in.
    async fn call_manifest(&self, component: &ComponentRef) -> Result<PluginManifest, ExecError> {
        let inspection = Tenant {
            account: INSPECTION.into(),
            wait: Some(Duration::from_secs(30)),
        };
        let _slot = self
            .slots
            .acquire(&inspection, false)
            .await
            .map_err(|busy| ExecError::Busy(busy.0))?;
        let pre = self
            .cache
            .get(&component.hash, component.bytes())
            .await
            .map_err(ExecError::Load)?;
        let call = CallContext {
            agent_id: String::new(),
            command: "manifest".into(),
            plugin_scope: String::new(),
            grants: Grants::none(),
            agent: None,
            progress: None,
            services: self.services.clone(),
            log_lines: 0,
            kept_log: Vec::new(),
            kept_log_bytes: 0,
        };
        let mut store = self.new_store(call, MANIFEST_TIMEOUT);
        let result = tokio::time::timeout(MANIFEST_TIMEOUT + Duration::from_secs(1), pre.manifest(&mut store)).await;
        match result {
            Ok(Ok(manifest)) => Ok(manifest),
            Ok(Err(e)) => Err(ExecError::Crashed(describe_failure(&e, &store, MANIFEST_TIMEOUT))),
            Err(_) => Err(ExecError::Crashed(format!(
                "manifest() did not return within {MANIFEST_TIMEOUT:?}"
            ))),
        }
    }

    fn new_store(&self, call: CallContext, timeout: Duration) -> Store<HostState> {
        let mut store = Store::new(self.cache.engine(), HostState::new(call, self.limits.max_memory_bytes));
        store.limiter(|state| &mut state.limiter);
        let deadline = Instant::now() + timeout;
        store.set_epoch_deadline(1);
        // Yield to the async runtime every tick, so a busy guest never holds a thread, and
        // interrupt it once its time is spent.
        store.epoch_deadline_callback(move |_| {
            Ok(if Instant::now() >= deadline {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Yield(1)
            })
        });
        store
    }

    /// Runs `execute` in a fresh instance under the run's limits, once its tenant's share
    /// of the slots allows. A run that logged or did not succeed is kept for its owner.
    pub async fn execute(&self, run: Run) -> Result<Output, ExecError> {
        let timeout = run.timeout.unwrap_or(self.limits.default_timeout);
        let long = timeout > self.limits.default_timeout;
        let slot = self
            .slots
            .acquire(&run.tenant, long)
            .await
            .map_err(|busy| ExecError::Busy(busy.0))?;
        let pre = self
            .cache
            .get(&run.component.hash, run.component.bytes())
            .await
            .map_err(ExecError::Load)?;
        // What a record of the run needs beyond its context: nothing more on the hot path.
        let (started_at, started, origin) = (crate::clock::now_ms(), Instant::now(), run.invocation.origin);
        let call = CallContext {
            agent_id: run.agent_id,
            command: run.invocation.command.clone(),
            plugin_scope: run.kv_scope,
            grants: run.grants,
            agent: run.agent,
            progress: run.progress,
            services: self.services.clone(),
            log_lines: 0,
            kept_log: Vec::new(),
            kept_log_bytes: 0,
        };
        let mut store = self.new_store(call, timeout);
        let invocation = run.invocation;
        // Holding its slot; if the caller goes away, the run is stopped at its next yield
        // and the slot freed with it.
        let run = async move {
            let _slot = slot;
            // The epoch deadline stops a busy guest; this outer timeout also bounds time a
            // guest spends waiting inside host calls.
            let outcome = tokio::time::timeout(
                timeout + Duration::from_millis(500),
                pre.execute(&mut store, &invocation),
            )
            .await;
            (outcome, store)
        };
        let (outcome, mut store) = self
            .guests
            .finish(run)
            .await
            .map_err(|e| ExecError::Crashed(format!("the plugin's run ended abnormally: {e}")))?;
        let result = self.judge(outcome, &store, timeout);
        for note in store.data_mut().take_http_notes() {
            store.data_mut().host_note(&note);
        }
        let call = &mut store.data_mut().call;
        let record = (!call.kept_log.is_empty() || result.is_err()).then(|| {
            let (outcome, error) = match &result {
                Ok(_) => ("succeeded", None),
                Err(ExecError::InvalidInput(m)) => ("invalid_input", Some(m.clone())),
                Err(ExecError::Failed(m)) => ("failed", Some(m.clone())),
                Err(ExecError::Unavailable(m)) => ("unavailable", Some(m.clone())),
                Err(other) => ("crashed", Some(other.to_string())),
            };
            PluginRun {
                id: uuid::Uuid::new_v4().to_string(),
                agent_id: std::mem::take(&mut call.agent_id),
                command: std::mem::take(&mut call.command),
                origin: bindings::origin_name(origin).into(),
                started_at,
                duration_ms: started.elapsed().as_millis() as i64,
                outcome: outcome.into(),
                error,
                lines: std::mem::take(&mut call.kept_log),
            }
        });
        // The instance goes back to the pool before the record is written.
        drop(store);
        if let Some(record) = record {
            // A record the store cannot keep does not change the run's answer.
            if let Err(e) = self
                .services
                .store
                .record_plugin_run(record, RUNS_KEPT_PER_COMMAND)
                .await
            {
                tracing::warn!(error = %e, "could not keep a plugin run's record");
            }
        }
        result
    }

    /// What a finished run comes to: its output within the limits, or why not.
    fn judge(
        &self,
        outcome: Result<wasmtime::Result<Result<Output, CommandError>>, tokio::time::error::Elapsed>,
        store: &Store<HostState>,
        timeout: Duration,
    ) -> Result<Output, ExecError> {
        let result = match outcome {
            Err(_) => {
                return Err(ExecError::Crashed(format!(
                    "the command timed out after {} ms",
                    timeout.as_millis()
                )));
            }
            Ok(Err(trap)) => return Err(ExecError::Crashed(describe_failure(&trap, store, timeout))),
            Ok(Ok(result)) => result,
        };
        match result {
            Ok(output) => {
                let size = output.response.len() + output.media_url.as_ref().map_or(0, String::len);
                if size > self.limits.max_output_bytes {
                    return Err(ExecError::Crashed(format!(
                        "the command's output ({size} bytes) is larger than the limit of {} bytes",
                        self.limits.max_output_bytes
                    )));
                }
                Ok(output)
            }
            Err(CommandError::InvalidInput(m)) => Err(ExecError::InvalidInput(m)),
            Err(CommandError::Failed(m)) => Err(ExecError::Failed(m)),
            Err(CommandError::Unavailable(m)) => Err(ExecError::Unavailable(m)),
        }
    }
}

/// A Rust guest's panic from its stderr: `panicked at FILE:LINE:COL: MESSAGE` (the message
/// is on the line after the location since Rust 1.73).
fn panic_message(stderr: &str) -> Option<String> {
    let mut lines = stderr.lines().skip_while(|l| !l.contains("panicked"));
    let first = lines.next()?.trim();
    let first = first.find("panicked").map_or(first, |at| &first[at..]);
    match lines.next().map(str::trim) {
        Some(message) if !message.is_empty() && !message.starts_with("note:") => Some(format!("{first} {message}")),
        _ => Some(first.to_string()),
    }
}

/// Says in words why a guest stopped: which limit, which trap, or its panic message.
fn describe_failure(err: &wasmtime::Error, store: &Store<HostState>, timeout: Duration) -> String {
    let state = store.data();
    if let Some(limit) = &state.limiter.exceeded {
        return format!("the command exceeded {limit}");
    }
    let stderr = state.stderr_text();
    let panic_line = panic_message(&stderr);
    match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => format!("the command timed out after {} ms", timeout.as_millis()),
        Some(Trap::StackOverflow) => "the command overflowed its stack (recursion too deep)".into(),
        // A Rust or C guest keeps its own stack in linear memory; overflowing it usually
        // shows up as an access outside that memory.
        Some(Trap::MemoryOutOfBounds) => {
            "the plugin crashed with an out-of-bounds memory access (often its own stack overflowing: recursion too deep)"
                .into()
        }
        Some(Trap::UnreachableCodeReached) => match panic_line {
            Some(message) => format!("the plugin {message}"),
            None => "the plugin crashed (it reached an unreachable instruction)".into(),
        },
        Some(trap) => format!("the plugin trapped: {trap}"),
        None => {
            let text = format!("{err:#}");
            format!("the plugin failed: {}", text.lines().next().unwrap_or("unknown error"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn a_panic_is_told_with_its_message() {
        let now = "thread '<unnamed>' (1) panicked at src/lib.rs:77:24:\nthe probe panicked on purpose\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            panic_message(now).as_deref(),
            Some("panicked at src/lib.rs:77:24: the probe panicked on purpose")
        );
        let older = "thread '<unnamed>' panicked at 'boom', src/lib.rs:3:5\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            panic_message(older).as_deref(),
            Some("panicked at 'boom', src/lib.rs:3:5")
        );
        assert_eq!(panic_message("nothing here"), None);
    }
}
