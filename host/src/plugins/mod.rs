//! The WebAssembly plugin runtime. Every command runs as a component of the
//! `agent:plugin` world in a fresh instance, with a deadline, a memory cap, an output cap
//! and only the capabilities its grants allow. The host knows nothing of what a command
//! does: only its component, its manifest and its limits.

pub mod bindings;
mod engine;
pub mod grants;
mod host;
mod inspect;
pub mod state;

pub use bindings::types::{Capability, Invocation, Origin, Output, PluginManifest, ResponseFormat};
pub use grants::{Grants, PluginKind};
pub use inspect::{InspectError, Inspection, describe};
pub use state::{AgentSnapshot, CallContext, HostServices, ProgressSink};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use wasmtime::{Store, Trap, UpdateDeadline};

use crate::domain::HandlerType;
use bindings::types::CommandError;
use engine::ComponentCache;
use state::HostState;

#[derive(Debug, Clone)]
pub struct RuntimeLimits {
    pub default_timeout: Duration,
    pub max_memory_bytes: usize,
    pub max_output_bytes: usize,
    /// Runs at once; more wait for a slot.
    pub max_concurrency: usize,
}

/// A component to run: where its bytes are, and what kind of plugin it is.
#[derive(Debug, Clone)]
pub struct ComponentRef {
    pub hash: String,
    pub kind: PluginKind,
    source: Source,
}

#[derive(Debug, Clone)]
enum Source {
    Embedded(&'static [u8]),
    Memory(Arc<Vec<u8>>),
    File(PathBuf),
}

impl ComponentRef {
    fn bytes(&self) -> impl FnOnce() -> Result<Vec<u8>, String> + Send + 'static {
        let source = self.source.clone();
        move || match source {
            Source::Embedded(bytes) => Ok(bytes.to_vec()),
            Source::Memory(bytes) => Ok(bytes.to_vec()),
            Source::File(path) => std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display())),
        }
    }
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
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecError::InvalidInput(m) => write!(f, "invalid input: {m}"),
            ExecError::Failed(m) => write!(f, "{m}"),
            ExecError::Unavailable(m) => write!(f, "unavailable: {m}"),
            ExecError::Crashed(m) => write!(f, "{m}"),
            ExecError::Load(m) => write!(f, "the plugin could not be loaded: {m}"),
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

/// Deadline for calling `manifest()`, which should do nothing but return data.
const MANIFEST_TIMEOUT: Duration = Duration::from_secs(2);

pub struct PluginRuntime {
    cache: ComponentCache,
    services: Arc<HostServices>,
    limits: RuntimeLimits,
    permits: Semaphore,
    builtins: Vec<(HandlerType, ComponentRef)>,
    plugin_dir: PathBuf,
    manifests: Mutex<HashMap<String, Arc<PluginManifest>>>,
}

pub fn content_hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl PluginRuntime {
    /// `data_dir/plugins` holds uploaded components by content hash; `data_dir/cache`
    /// their compiled artifacts.
    pub fn new(data_dir: &Path, limits: RuntimeLimits, services: HostServices) -> anyhow::Result<PluginRuntime> {
        let max_instances = (limits.max_concurrency as u32 + 8).max(16);
        let engine = engine::build_engine(limits.max_memory_bytes, max_instances)
            .map_err(|e| anyhow::anyhow!("cannot configure the WebAssembly engine: {e:#}"))?;
        engine::start_epoch_ticker(&engine);
        let cache = ComponentCache::new(engine, &data_dir.join("cache"))
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
            permits: Semaphore::new(limits.max_concurrency.max(1)),
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
            source: Source::File(self.plugin_dir.join(format!("{hash}.wasm"))),
        }
    }

    /// (compiled, loaded from the disk cache) since start.
    pub fn cache_stats(&self) -> (u64, u64) {
        (
            self.cache.compiled.load(Ordering::Relaxed),
            self.cache.from_disk.load(Ordering::Relaxed),
        )
    }

    /// Checks an uploaded component and stores it content-addressed, compiled and cached.
    pub async fn install(&self, bytes: Vec<u8>) -> Result<Inspection, InspectError> {
        let inspection = self.inspect(bytes.clone(), PluginKind::Custom).await?;
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

    /// The component's own manifest (what it declares), asked once per process.
    pub async fn manifest(&self, component: &ComponentRef) -> Result<Arc<PluginManifest>, ExecError> {
        if let Some(found) = self
            .manifests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&component.hash)
        {
            return Ok(found.clone());
        }
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
        };
        let mut store = self.new_store(call, MANIFEST_TIMEOUT);
        let result = tokio::time::timeout(MANIFEST_TIMEOUT + Duration::from_secs(1), async {
            let plugin = pre.instantiate_async(&mut store).await?;
            plugin.agent_plugin_command().call_manifest(&mut store).await
        })
        .await;
        let manifest = match result {
            Ok(Ok(manifest)) => Arc::new(manifest),
            Ok(Err(e)) => return Err(ExecError::Crashed(describe_failure(&e, &store, MANIFEST_TIMEOUT))),
            Err(_) => {
                return Err(ExecError::Crashed(format!(
                    "manifest() did not return within {MANIFEST_TIMEOUT:?}"
                )));
            }
        };
        self.manifests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(component.hash.clone(), manifest.clone());
        Ok(manifest)
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

    /// Runs `execute` in a fresh instance under the run's limits.
    pub async fn execute(&self, run: Run) -> Result<Output, ExecError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| ExecError::Load("the runtime is shutting down".into()))?;
        let manifest = self.manifest(&run.component).await?;
        let pre = self
            .cache
            .get(&run.component.hash, run.component.bytes())
            .await
            .map_err(ExecError::Load)?;
        let timeout = run.timeout.unwrap_or(self.limits.default_timeout);
        let call = CallContext {
            agent_id: run.agent_id,
            command: run.invocation.command.clone(),
            plugin_scope: manifest.name.clone(),
            grants: run.grants,
            agent: run.agent,
            progress: run.progress,
            services: self.services.clone(),
            log_lines: 0,
        };
        let mut store = self.new_store(call, timeout);
        let invocation = run.invocation;
        // The epoch deadline stops a busy guest; this outer timeout also bounds time a
        // guest spends waiting inside host calls.
        let outcome = tokio::time::timeout(timeout + Duration::from_millis(500), async {
            let plugin = pre.instantiate_async(&mut store).await?;
            plugin
                .agent_plugin_command()
                .call_execute(&mut store, &invocation)
                .await
        })
        .await;
        let result = match outcome {
            Err(_) => {
                return Err(ExecError::Crashed(format!(
                    "the command timed out after {} ms",
                    timeout.as_millis()
                )));
            }
            Ok(Err(trap)) => return Err(ExecError::Crashed(describe_failure(&trap, &store, timeout))),
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

/// Says in words why a guest stopped: which limit, which trap, or its panic message.
fn describe_failure(err: &wasmtime::Error, store: &Store<HostState>, timeout: Duration) -> String {
    let state = store.data();
    if let Some(limit) = &state.limiter.exceeded {
        return format!("the command exceeded {limit}");
    }
    let stderr = state.stderr_text();
    let panic_line = stderr.lines().find(|l| l.contains("panicked")).map(str::to_string);
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
            Some(line) => format!("the plugin panicked: {}", line.trim()),
            None => "the plugin crashed (it reached an unreachable instruction)".into(),
        },
        Some(trap) => format!("the plugin trapped: {trap}"),
        None => {
            let text = format!("{err:#}");
            format!("the plugin failed: {}", text.lines().next().unwrap_or("unknown error"))
        }
    }
}
