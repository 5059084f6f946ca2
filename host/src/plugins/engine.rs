//! The wasmtime engine (component model, async, pooling allocator, epoch interruption),
//! its epoch ticker, and the component cache: compiled artifacts on disk keyed by the
//! component's SHA-256 and the engine's compatibility hash, and `InstancePre`s in memory.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OnceCell;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};

use super::bindings::types::{CommandError, Invocation, Output, PluginManifest};
use super::bindings::{v0_1_0, v0_2_0};
use super::state::HostState;

/// How often the epoch advances: a busy guest yields its thread at every tick, so other
/// tenants' requests wait at most about this long per guest ahead of them; deadlines are
/// exact to about this much.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

pub fn build_engine(max_memory_bytes: usize, max_instances: u32) -> wasmtime::Result<Engine> {
    let mut pooling = PoolingAllocationConfig::new();
    pooling
        .total_component_instances(max_instances)
        .total_core_instances(max_instances * 20)
        .total_memories(max_instances * 4)
        .total_tables(max_instances * 8)
        .total_stacks(max_instances)
        .max_core_instances_per_component(super::state::MAX_CORE_INSTANCES as u32)
        .max_memories_per_component(super::state::MAX_MEMORIES as u32)
        .max_tables_per_component(super::state::MAX_TABLES as u32)
        .max_memory_size(max_memory_bytes)
        // Keep a little of each slot resident: reusing a slot is then cheaper than zeroing
        // it again (runtime-notes: ~2x faster instantiation).
        .linear_memory_keep_resident(1 << 20)
        .table_keep_resident(1 << 20)
        .async_stack_keep_resident(1 << 20)
        .decommit_batch_size(16)
        .pagemap_scan(wasmtime::Enabled::Auto);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .max_wasm_stack(1 << 20)
        .async_stack_size(2 << 20)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    Engine::new(&config)
}

/// Advances the engine's epoch on its own thread; stops when the engine is dropped.
pub fn start_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("wasm-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .expect("spawn the epoch thread");
}

/// A component ready to instantiate, as the version of the world it was built against.
pub enum Pre {
    V0_1(v0_1_0::CommandPluginPre<HostState>),
    V0_2(v0_2_0::CommandPluginPre<HostState>),
}

impl Pre {
    fn new(pre: wasmtime::component::InstancePre<HostState>, version: &str) -> wasmtime::Result<Pre> {
        match version {
            "0.1.0" => Ok(Pre::V0_1(v0_1_0::CommandPluginPre::new(pre)?)),
            "0.2.0" => Ok(Pre::V0_2(v0_2_0::CommandPluginPre::new(pre)?)),
            other => Err(wasmtime::Error::msg(format!(
                "agent:plugin@{other} is not served by this host"
            ))),
        }
    }

    pub fn wit_version(&self) -> &'static str {
        match self {
            Pre::V0_1(_) => "0.1.0",
            Pre::V0_2(_) => "0.2.0",
        }
    }

    /// A fresh instance's `execute`.
    pub async fn execute(
        &self,
        store: &mut Store<HostState>,
        invocation: &Invocation,
    ) -> wasmtime::Result<Result<Output, CommandError>> {
        match self {
            Pre::V0_1(pre) => {
                let plugin = pre.instantiate_async(&mut *store).await?;
                plugin.agent_plugin_command().call_execute(store, invocation).await
            }
            Pre::V0_2(pre) => {
                let plugin = pre.instantiate_async(&mut *store).await?;
                plugin.agent_plugin_command().call_execute(store, invocation).await
            }
        }
    }

    /// A fresh instance's `manifest`.
    pub async fn manifest(&self, store: &mut Store<HostState>) -> wasmtime::Result<PluginManifest> {
        match self {
            Pre::V0_1(pre) => {
                let plugin = pre.instantiate_async(&mut *store).await?;
                plugin.agent_plugin_command().call_manifest(store).await
            }
            Pre::V0_2(pre) => {
                let plugin = pre.instantiate_async(&mut *store).await?;
                plugin.agent_plugin_command().call_manifest(store).await
            }
        }
    }
}

/// The version of `agent:plugin` a component targets: that of its `command` export.
pub fn world_version(component: &Component, engine: &Engine) -> Option<String> {
    component
        .component_type()
        .exports(engine)
        .find_map(|(name, _)| name.strip_prefix("agent:plugin/command@").map(str::to_string))
}

pub struct ComponentCache {
    engine: Engine,
    linker: Linker<HostState>,
    dir: PathBuf,
    engine_hash: String,
    loaded: Mutex<HashMap<String, Arc<OnceCell<Arc<Pre>>>>>,
    pub compiled: AtomicU64,
    pub from_disk: AtomicU64,
}

impl ComponentCache {
    pub fn new(engine: Engine, dir: &Path) -> wasmtime::Result<ComponentCache> {
        // One linker for every served version: each imports its own `agent:plugin` interfaces.
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        // Interface by interface: the worlds' own `add_to_linker` would add the WASI ones again.
        macro_rules! add_agent_interfaces {
            ($v:ident) => {
                $v::agent::plugin::log::add_to_linker::<_, HasSelf<HostState>>(&mut linker, |s| s)?;
                $v::agent::plugin::kv::add_to_linker::<_, HasSelf<HostState>>(&mut linker, |s| s)?;
                $v::agent::plugin::http::add_to_linker::<_, HasSelf<HostState>>(&mut linker, |s| s)?;
                $v::agent::plugin::llm::add_to_linker::<_, HasSelf<HostState>>(&mut linker, |s| s)?;
                $v::agent::plugin::progress::add_to_linker::<_, HasSelf<HostState>>(&mut linker, |s| s)?;
                $v::agent::plugin::agent_info::add_to_linker::<_, HasSelf<HostState>>(&mut linker, |s| s)?;
            };
        }
        super::bindings::for_each_version!(add_agent_interfaces);
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        std::fs::create_dir_all(dir)?;
        Ok(ComponentCache {
            engine,
            linker,
            dir: dir.to_path_buf(),
            engine_hash: format!("{:016x}", hasher.finish()),
            loaded: Mutex::new(HashMap::new()),
            compiled: AtomicU64::new(0),
            from_disk: AtomicU64::new(0),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    fn artifact_path(&self, hash: &str) -> PathBuf {
        self.dir.join(format!("{hash}-{}.cwasm", self.engine_hash))
    }

    /// The ready-to-instantiate component with this content hash; `bytes` is read only
    /// when neither memory nor the disk cache has it.
    pub async fn get(
        &self,
        hash: &str,
        bytes: impl FnOnce() -> Result<Vec<u8>, String> + Send + 'static,
    ) -> Result<Arc<Pre>, String> {
        let cell = {
            let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
            loaded.entry(hash.to_string()).or_default().clone()
        };
        cell.get_or_try_init(|| async {
            let component = self.component(hash, bytes).await?;
            let version = world_version(&component, &self.engine)
                .ok_or_else(|| "the component does not export agent:plugin/command".to_string())?;
            let pre = self
                .linker
                .instantiate_pre(&component)
                .map_err(|e| format!("cannot link the component: {e:#}"))?;
            let pre = Pre::new(pre, &version)
                .map_err(|e| format!("the component does not fit the command-plugin world: {e:#}"))?;
            Ok(Arc::new(pre))
        })
        .await
        .cloned()
    }

    /// The compiled component: from the disk cache, or compiled now and saved there.
    pub async fn component(
        &self,
        hash: &str,
        bytes: impl FnOnce() -> Result<Vec<u8>, String> + Send + 'static,
    ) -> Result<Component, String> {
        let engine = self.engine.clone();
        let path = self.artifact_path(hash);
        let (component, from_disk) = tokio::task::spawn_blocking(move || {
            if path.is_file() {
                // SAFETY: the artifact was written by agent-host (serialize below) into a
                // cache folder only its user writes (the data dir's, the operator's
                // `plugin_cache_dir`, or that user's own cache folder for `plugin run`),
                // whole (renamed into place), and its name carries the engine's hash.
                match unsafe { Component::deserialize_file(&engine, &path) } {
                    Ok(component) => return Ok::<_, String>((component, true)),
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "stale component cache entry; recompiling")
                    }
                }
            }
            let bytes = bytes()?;
            let started = std::time::Instant::now();
            let component = Component::new(&engine, &bytes).map_err(|e| format!("not a valid component: {e:#}"))?;
            tracing::info!(ms = started.elapsed().as_millis() as u64, "compiled a component");
            if let Ok(artifact) = component.serialize() {
                // A name of its own: processes sharing the cache never write one file.
                let tmp = path.with_extension(format!("{}-{}.tmp", std::process::id(), crate::random::hex_token(4)));
                if std::fs::write(&tmp, artifact)
                    .and_then(|_| std::fs::rename(&tmp, &path))
                    .is_err()
                {
                    tracing::warn!(path = %path.display(), "could not save the compiled component");
                }
            }
            Ok((component, false))
        })
        .await
        .map_err(|e| format!("compilation task failed: {e}"))??;
        let counter = if from_disk { &self.from_disk } else { &self.compiled };
        counter.fetch_add(1, Ordering::Relaxed);
        Ok(component)
    }
}
