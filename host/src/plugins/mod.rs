//! The WebAssembly plugin runtime. Every command runs as a component of the
//! `agent:plugin` world in a fresh instance, with a deadline, a memory budget, an output cap
//! and only the capabilities its grants allow. The host knows nothing of what a command
//! does: only its component, its manifest and its limits.
//!
//! The parts, one job each: `sources` (where a component's bytes are), `engine` (compiling,
//! the cache, linking), `inspect` (checking a component before it is kept), `guests` (the
//! guests' own threads), `state` and `budget` (one run's context and memory), `meter` (the units a run reports), `host/` (the
//! interfaces a guest imports), `run` (one run of `execute` and its log), `failure` (why a
//! run gave no output); this file holds them together and asks components what they
//! declare. What is kept of a component or a run is written by the services, not here.

pub mod bindings;
pub(crate) mod budget;
mod engine;
mod failure;
pub mod grants;
mod guests;
mod host;
mod inspect;
mod loaded;
mod meter;
pub mod paying;
mod run;
pub mod slots;
mod sources;
pub mod state;

pub use bindings::types::{Capability, Invocation, Origin, Output, PluginManifest, ResponseFormat};
/// The agent as built-in plugins see it (`agent-info`), in the newest version's records.
pub use bindings::v0_4_0::agent::plugin::agent_info::{AgentProfile, CommandInfo};
pub use failure::{ExecError, Limit};
pub use grants::{Grants, PluginKind};
pub use inspect::{InspectError, Inspection, check_manifest, describe, manifest_from_json, manifest_json};
pub use meter::Meter;
pub use paying::{PayDecision, Payer, PayingRun};
pub use run::{Ran, Run, RunLog, outcome_label};
pub use slots::{SlotPermit, Tenant};
pub use sources::{ComponentRef, content_hash};
pub use state::{AgentSnapshot, CallContext, HostServices, LlmBudget, LlmRunLimits, ProgressSink, UnlimitedLlm};

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::domain::HandlerType;
use engine::{ComponentCache, Pre};
use guests::GuestThreads;
use slots::Slots;

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
    /// Bytes of compiled components kept ready in memory; the least recently run beyond
    /// them are loaded again from the disk cache when next run.
    pub max_loaded_bytes: usize,
}

/// Deadline for calling `manifest()`, which should do nothing but return data.
const MANIFEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The host's own components (the built-in handlers) are asked for their manifest under
/// this tenant's share; an upload's under its account's.
const HOST: &str = "(host)";

/// A checked component, compiled, not yet kept.
pub struct Compiled {
    hash: String,
    component: wasmtime::component::Component,
}

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
        let cache = ComponentCache::new(engine, cache_dir, limits.max_compiles, limits.max_loaded_bytes)
            .map_err(|e| anyhow::anyhow!("cannot prepare the component cache: {e:#}"))?;
        let builtins = sources::builtins();
        for (_, component) in &builtins {
            cache.pin(&component.hash);
        }
        Ok(PluginRuntime {
            cache,
            services: Arc::new(services),
            slots: Slots::new(limits.max_concurrency, limits.max_concurrency_per_account),
            guests: GuestThreads::new()?,
            limits,
            builtins,
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

    /// Runs the host allows at once, and how many run now.
    pub fn slot_usage(&self) -> (usize, usize) {
        self.slots.usage()
    }

    /// Uploads compiling or waiting for their turn to, all accounts together.
    pub fn uploads_in_line(&self) -> usize {
        self.cache.uploads_in_line()
    }

    /// (compiled, loaded from the disk cache) since start.
    pub fn cache_stats(&self) -> (u64, u64) {
        (
            self.cache.compiled.load(Ordering::Relaxed),
            self.cache.from_disk.load(Ordering::Relaxed),
        )
    }

    /// Checks an uploaded component (its `manifest()` runs under `tenant`'s share) and
    /// compiles it, keeping nothing: the caller records it, then hands the compiled
    /// component to [`PluginRuntime::keep`].
    pub async fn check_upload(
        &self,
        bytes: Arc<Vec<u8>>,
        tenant: &Tenant,
    ) -> Result<(Inspection, Compiled), InspectError> {
        let (inspection, component) = inspect::inspect(self, bytes, PluginKind::Custom, tenant).await?;
        let compiled = Compiled {
            hash: inspection.hash.clone(),
            component,
        };
        Ok((inspection, compiled))
    }

    /// Keeps a recorded component ready to run: its compiled artifact in the cache, what
    /// it declared in memory.
    pub async fn keep(&self, compiled: Compiled, manifest: &PluginManifest) -> Result<(), InspectError> {
        self.cache
            .keep(&compiled.hash, compiled.component)
            .await
            .map_err(InspectError::Refused)?;
        self.remember(&compiled.hash, Arc::new(manifest.clone()));
        Ok(())
    }

    /// The inspection of a component kept already, from its recorded WIT version and
    /// manifest and its bytes' shape (nothing compiled, nothing run).
    pub fn kept(
        &self,
        hash: &str,
        bytes: &[u8],
        wit_version: String,
        manifest: PluginManifest,
    ) -> Result<Inspection, InspectError> {
        let shape = inspect::read_shape(bytes, usize::MAX)?;
        self.remember(hash, Arc::new(manifest.clone()));
        Ok(Inspection {
            hash: hash.to_string(),
            size: bytes.len(),
            wit_version,
            manifest,
            imports: shape.imports,
        })
    }

    /// Validates a component without keeping anything: a component, of our world, of a
    /// served version, whose manifest agrees with what it imports (`plugin inspect`,
    /// `plugin run`).
    pub async fn inspect(&self, bytes: Vec<u8>, kind: PluginKind) -> Result<Inspection, InspectError> {
        inspect::inspect(self, Arc::new(bytes), kind, &host_tenant())
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

    /// Asks a component kept without a recorded manifest (applied by an older version of
    /// this host, its bytes given) what it declares, and for its WIT version: called at
    /// start, never on a request path. The caller records both.
    pub async fn ask_manifest(&self, hash: &str, bytes: Vec<u8>) -> Result<(PluginManifest, &'static str), ExecError> {
        if content_hash(&bytes) != hash {
            return Err(ExecError::Load(format!("the bytes given for {hash} do not match it")));
        }
        let component = ComponentRef {
            hash: hash.to_string(),
            kind: PluginKind::Custom,
            source: sources::Source::Memory(Arc::new(bytes)),
        };
        let pre = self.pre(&component).await?;
        let manifest = self.call_manifest(&pre, &host_tenant()).await?;
        // Not remembered: a request reads it from its record, once that is written.
        Ok((manifest, pre.wit_version()))
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
}

fn host_tenant() -> Tenant {
    Tenant {
        account: HOST.into(),
        wait: Some(Duration::from_secs(30)),
    }
}
