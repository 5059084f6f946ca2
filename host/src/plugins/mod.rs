//! The WebAssembly plugin runtime. Every command runs as a component of the
//! `agent:plugin` world in a fresh instance, with a deadline, a memory budget, an output cap
//! and only the capabilities its grants allow. The host knows nothing of what a command
//! does: only its component, its manifest and its limits.
//!
//! The parts, one job each: `sources` (where a component's bytes are), `engine` (compiling,
//! the cache, linking), `inspect` (checking a component before it is kept), `guests` (the
//! guests' own threads), `state` and `budget` (one run's context and memory), `host/` (the
//! interfaces a guest imports), `failure` (why a run gave no output); this file runs them.

pub mod bindings;
pub(crate) mod budget;
mod engine;
mod failure;
pub mod grants;
mod guests;
mod host;
mod inspect;
pub mod slots;
mod sources;
pub mod state;

pub use bindings::types::{Capability, Invocation, Origin, Output, PluginManifest, ResponseFormat};
/// The agent as built-in plugins see it (`agent-info`), in the newest version's records.
pub use bindings::v0_2_0::agent::plugin::agent_info::{AgentProfile, CommandInfo};
pub use failure::{ExecError, Limit};
pub use grants::{Grants, PluginKind};
pub use inspect::{InspectError, Inspection, check_manifest, describe, manifest_from_json, manifest_json};
pub use slots::Tenant;
pub use sources::{ComponentRef, content_hash};
pub use state::{AgentSnapshot, CallContext, HostServices, LlmBudget, LlmRunLimits, ProgressSink, UnlimitedLlm};

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::{Store, UpdateDeadline};

use crate::domain::HandlerType;
use crate::store::PluginRun;
use engine::{ComponentCache, Pre};
use guests::GuestThreads;
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
    /// Components compiled at once; uploads beyond a short queue are refused.
    pub max_compiles: usize,
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

/// Runs kept per agent and command for their owner (`agent-host logs`); older ones go.
pub const RUNS_KEPT_PER_COMMAND: u32 = 100;

/// Deadline for calling `manifest()`, which should do nothing but return data.
const MANIFEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The host's own components (the built-in handlers) are asked for their manifest under
/// this tenant's share; an upload's under its account's.
const HOST: &str = "(host)";

pub struct PluginRuntime {
    cache: ComponentCache,
    guests: GuestThreads,
    services: Arc<HostServices>,
    limits: RuntimeLimits,
    slots: Slots,
    builtins: Vec<(HandlerType, ComponentRef)>,
    manifests: Mutex<HashMap<String, Arc<PluginManifest>>>,
}

impl PluginRuntime {
    /// `cache_dir` holds compiled artifacts, by content hash and this engine's settings.
    pub fn new(cache_dir: &Path, limits: RuntimeLimits, services: HostServices) -> anyhow::Result<PluginRuntime> {
        let max_instances = (limits.max_concurrency as u32 + 8).max(16);
        let engine = engine::build_engine(limits.max_memory_bytes, max_instances)
            .map_err(|e| anyhow::anyhow!("cannot configure the WebAssembly engine: {e:#}"))?;
        engine::start_epoch_ticker(&engine);
        let cache = ComponentCache::new(engine, cache_dir, limits.max_compiles)
            .map_err(|e| anyhow::anyhow!("cannot prepare the component cache: {e:#}"))?;
        Ok(PluginRuntime {
            cache,
            services: Arc::new(services),
            slots: Slots::new(limits.max_concurrency, limits.max_concurrency_per_account),
            guests: GuestThreads::new()?,
            limits,
            builtins: sources::builtins(),
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
        ComponentRef::stored(hash, &self.services.store)
    }

    /// (compiled, loaded from the disk cache) since start.
    pub fn cache_stats(&self) -> (u64, u64) {
        (
            self.cache.compiled.load(Ordering::Relaxed),
            self.cache.from_disk.load(Ordering::Relaxed),
        )
    }

    /// Checks an uploaded component and keeps it: its bytes in the database (the one copy),
    /// its compiled artifact in the cache, the manifest it declared. Its `manifest()` runs
    /// under `tenant`'s share. A refused component leaves nothing behind. A component
    /// already kept is not compiled or asked again: its first record stands.
    pub async fn install(&self, bytes: Vec<u8>, tenant: &Tenant) -> Result<Inspection, InspectError> {
        let hash = content_hash(&bytes);
        if let Some(kept) = self.kept(&hash, &bytes).await? {
            return Ok(kept);
        }
        let bytes = Arc::new(bytes);
        let (inspection, component) = inspect::inspect(self, bytes.clone(), PluginKind::Custom, tenant).await?;
        self.services
            .store
            .put_plugin(
                &inspection.hash,
                &manifest_json(&inspection.manifest),
                &inspection.wit_version,
                &bytes,
            )
            .await
            .map_err(|e| InspectError::Refused(format!("cannot record the component: {e}")))?;
        self.cache.keep(&hash, component).await.map_err(InspectError::Refused)?;
        // Another upload of the same bytes may have been recorded first: its record stands.
        Ok(self.kept(&hash, &bytes).await?.unwrap_or(inspection))
    }

    /// The inspection of a component already kept, from its record (and its bytes' shape).
    async fn kept(&self, hash: &str, bytes: &[u8]) -> Result<Option<Inspection>, InspectError> {
        let record = self
            .services
            .store
            .plugin_record(hash)
            .await
            .map_err(|e| InspectError::Refused(format!("cannot read the component's record: {e}")))?;
        let Some(record) = record.filter(|r| r.has_component) else {
            return Ok(None);
        };
        let Some(manifest) = manifest_from_json(&record.manifest) else {
            return Ok(None);
        };
        let shape = inspect::read_shape(bytes, usize::MAX)?;
        self.remember(hash, Arc::new(manifest.clone()));
        Ok(Some(Inspection {
            hash: hash.to_string(),
            size: bytes.len(),
            wit_version: record.wit_version,
            manifest,
            imports: shape.imports,
        }))
    }

    /// Validates a component without keeping anything: a component, of our world, of a
    /// served version, whose manifest agrees with what it imports (`plugin inspect`,
    /// `plugin run`).
    pub async fn inspect(&self, bytes: Vec<u8>, kind: PluginKind) -> Result<Inspection, InspectError> {
        let tenant = Tenant {
            account: HOST.into(),
            wait: Some(Duration::from_secs(30)),
        };
        inspect::inspect(self, Arc::new(bytes), kind, &tenant)
            .await
            .map(|(i, _)| i)
    }

    fn remember(&self, hash: &str, manifest: Arc<PluginManifest>) {
        let mut manifests = self.manifests.lock().unwrap_or_else(|p| p.into_inner());
        manifests.entry(hash.to_string()).or_insert(manifest);
    }

    /// Forgets a component nobody uses any more: its compiled artifact and what memory
    /// held of it.
    pub fn forget(&self, hash: &str) {
        self.manifests.lock().unwrap_or_else(|p| p.into_inner()).remove(hash);
        self.cache.forget(hash);
    }

    /// Removes cache files of components not in `kept` (nor built in), older than `grace`.
    pub fn sweep_cache(&self, kept: &HashSet<String>, grace: Duration) -> usize {
        let mut keep = kept.clone();
        keep.extend(self.builtins.iter().map(|(_, c)| c.hash.clone()));
        self.cache.sweep(&keep, grace)
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
            PluginKind::BuiltIn => {
                let pre = self.pre(component).await?;
                self.call_manifest(&pre, &host_tenant()).await?
            }
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

    /// Records the manifest of a component kept without one (applied by an older version of
    /// this host, its bytes given): called at start, never on a request path.
    pub async fn record_manifest(&self, hash: &str, bytes: Vec<u8>) -> Result<Arc<PluginManifest>, ExecError> {
        if content_hash(&bytes) != hash {
            return Err(ExecError::Load(format!("the bytes given for {hash} do not match it")));
        }
        let component = ComponentRef {
            hash: hash.to_string(),
            kind: PluginKind::Custom,
            source: sources::Source::Memory(Arc::new(bytes.clone())),
        };
        let pre = self.pre(&component).await?;
        let manifest = self.call_manifest(&pre, &host_tenant()).await?;
        self.services
            .store
            .put_plugin(hash, &manifest_json(&manifest), pre.wit_version(), &bytes)
            .await
            .map_err(|e| ExecError::Load(e.to_string()))?;
        let manifest = Arc::new(manifest);
        self.remember(hash, manifest.clone());
        Ok(manifest)
    }

    async fn pre(&self, component: &ComponentRef) -> Result<Arc<Pre>, ExecError> {
        self.cache
            .get(&component.hash, component.bytes())
            .await
            .map_err(ExecError::Load)
    }

    /// Calls a component's `manifest()` in a fresh instance under the limits, on `tenant`'s
    /// share of the slots: when it is installed or inspected, and once for each built-in.
    async fn call_manifest(&self, pre: &Pre, tenant: &Tenant) -> Result<PluginManifest, ExecError> {
        let _slot = self
            .slots
            .acquire(tenant, false)
            .await
            .map_err(|busy| ExecError::Busy(busy.0))?;
        let call = CallContext::new(
            &tenant.account,
            "",
            "manifest",
            String::new(),
            Grants::none(),
            self.services.clone(),
        );
        let mut store = self.new_store(call, MANIFEST_TIMEOUT);
        let result = tokio::time::timeout(MANIFEST_TIMEOUT + Duration::from_secs(1), pre.manifest(&mut store)).await;
        match result {
            Ok(Ok(_)) if store.data().budget.overdrawn() => Err(failure::memory_exceeded(&store)),
            Ok(Ok(manifest)) => Ok(manifest),
            Ok(Err(e)) => Err(failure::describe_failure(&e, &store, MANIFEST_TIMEOUT)),
            Err(_) => Err(ExecError::Exceeded(
                Limit::Time,
                format!("manifest() did not return within {MANIFEST_TIMEOUT:?}"),
            )),
        }
    }

    fn new_store(&self, call: CallContext, timeout: Duration) -> Store<HostState> {
        let budget = budget::MemoryBudget::new(self.limits.max_memory_bytes);
        let overdrawn = budget.clone();
        let mut store = Store::new(self.cache.engine(), HostState::new(call, budget));
        store.limiter(|state| &mut state.limiter);
        let deadline = Instant::now() + timeout;
        store.set_epoch_deadline(1);
        // Yield to the async runtime every tick, so a busy guest never holds a thread, and
        // interrupt it once its time is spent, or once it made the host hold more for it
        // than its memory budget allows.
        store.epoch_deadline_callback(move |_| {
            Ok(if Instant::now() >= deadline || overdrawn.overdrawn() {
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
        let mut call = CallContext::new(
            &run.tenant.account,
            &run.agent_id,
            &run.invocation.command,
            run.kv_scope,
            run.grants,
            self.services.clone(),
        );
        call.agent = run.agent;
        call.progress = run.progress;
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
        let result = failure::judge(outcome, &store, timeout, self.limits.max_output_bytes);
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
}

fn host_tenant() -> Tenant {
    Tenant {
        account: HOST.into(),
        wait: Some(Duration::from_secs(30)),
    }
}
