//! The wasmtime engine (component model, async, pooling allocator, epoch interruption),
//! its epoch ticker, and the component cache: compiled artifacts on disk keyed by the
//! component's SHA-256 and the engine's compatibility hash, and `InstancePre`s in memory.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};

use super::bindings::types::{CommandError, Invocation, Output, PluginManifest};
use super::bindings::{v0_1_0, v0_2_0, v0_3_0, v0_4_0};
use super::loaded::Loaded;
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
        // it again (measured about twice as fast to instantiate).
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
    V0_3(v0_3_0::CommandPluginPre<HostState>),
    V0_4(v0_4_0::CommandPluginPre<HostState>),
}

impl Pre {
    fn new(pre: wasmtime::component::InstancePre<HostState>, version: &str) -> wasmtime::Result<Pre> {
        match version {
            "0.1.0" => Ok(Pre::V0_1(v0_1_0::CommandPluginPre::new(pre)?)),
            "0.2.0" => Ok(Pre::V0_2(v0_2_0::CommandPluginPre::new(pre)?)),
            "0.3.0" => Ok(Pre::V0_3(v0_3_0::CommandPluginPre::new(pre)?)),
            "0.4.0" => Ok(Pre::V0_4(v0_4_0::CommandPluginPre::new(pre)?)),
            other => Err(wasmtime::Error::msg(format!(
                "agent:plugin@{other} is not served by this host"
            ))),
        }
    }

    pub fn wit_version(&self) -> &'static str {
        match self {
            Pre::V0_1(_) => "0.1.0",
            Pre::V0_2(_) => "0.2.0",
            Pre::V0_3(_) => "0.3.0",
            Pre::V0_4(_) => "0.4.0",
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
            Pre::V0_3(pre) => {
                let plugin = pre.instantiate_async(&mut *store).await?;
                plugin.agent_plugin_command().call_execute(store, invocation).await
            }
            Pre::V0_4(pre) => {
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
            Pre::V0_3(pre) => {
                let plugin = pre.instantiate_async(&mut *store).await?;
                plugin.agent_plugin_command().call_manifest(store).await
            }
            Pre::V0_4(pre) => {
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
    loaded: Mutex<Loaded>,
    compiles: Compiles,
    pub compiled: AtomicU64,
    pub from_disk: AtomicU64,
}

/// Compiling takes every core for up to seconds, so only so many at once; uploads queue
/// behind them up to `QUEUE_PER_COMPILE` each and are refused beyond, while a run whose
/// component must be compiled (a cold cache) always waits its turn. An account's uploads
/// take that queue one at a time (the others wait behind their own, up to
/// `WAITING_PER_ACCOUNT`): one account's many uploads hold one place, so another account's
/// upload is queued, not refused, and the queue is first come first served between accounts.
struct Compiles {
    turns: Arc<Semaphore>,
    queued: AtomicUsize,
    max_queued: usize,
    accounts: Arc<Mutex<HashMap<String, Arc<AccountTurn>>>>,
}

const QUEUE_PER_COMPILE: usize = 4;
const WAITING_PER_ACCOUNT: usize = 4;

/// One account's turn at the compile queue, and how many of its uploads hold or want it.
struct AccountTurn {
    turn: Arc<Semaphore>,
    wanting: AtomicUsize,
}

/// An upload's place in its account's line; dropping it gives the turn back.
struct AccountPlace {
    accounts: Arc<Mutex<HashMap<String, Arc<AccountTurn>>>>,
    account: String,
    entry: Arc<AccountTurn>,
    turn: Option<OwnedSemaphorePermit>,
}

impl Drop for AccountPlace {
    fn drop(&mut self) {
        drop(self.turn.take());
        let mut accounts = self.accounts.lock().unwrap_or_else(|e| e.into_inner());
        if self.entry.wanting.fetch_sub(1, Ordering::Relaxed) == 1 {
            accounts.remove(&self.account);
        }
    }
}

/// Why a component was not compiled.
#[derive(Debug, Clone, PartialEq)]
pub enum CompileError {
    /// Too many compiles are waiting; try again in a few seconds.
    Busy { retry_after_secs: u64 },
    /// The bytes are not a component this engine accepts.
    Invalid(String),
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompileError::Busy { retry_after_secs } => write!(
                f,
                "this server is compiling as many components as it may; retry in {retry_after_secs} s"
            ),
            CompileError::Invalid(m) => f.write_str(m),
        }
    }
}

/// Whether a compile may be refused when the queue is full (an upload) or must wait (a run).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Queueing {
    RefuseWhenFull,
    Wait,
}

impl Compiles {
    /// A compile's turn; an upload (`Some(account)`) first takes its account's.
    async fn turn(
        &self,
        queueing: Queueing,
        account: Option<&str>,
    ) -> Result<(Option<AccountPlace>, OwnedSemaphorePermit), CompileError> {
        let account_turn = match account {
            Some(account) => Some(self.account_turn(account).await?),
            None => None,
        };
        Ok((account_turn, self.queue_turn(queueing).await?))
    }

    async fn account_turn(&self, account: &str) -> Result<AccountPlace, CompileError> {
        // Counted in under the map's lock, and out when the place is dropped: an entry is
        // forgotten only when no upload of the account holds or wants its turn.
        let (entry, wanting) = {
            let mut accounts = self.accounts.lock().unwrap_or_else(|e| e.into_inner());
            let entry = accounts
                .entry(account.to_string())
                .or_insert_with(|| {
                    Arc::new(AccountTurn {
                        turn: Arc::new(Semaphore::new(1)),
                        wanting: AtomicUsize::new(0),
                    })
                })
                .clone();
            let wanting = entry.wanting.fetch_add(1, Ordering::Relaxed);
            (entry, wanting)
        };
        let mut place = AccountPlace {
            accounts: self.accounts.clone(),
            account: account.to_string(),
            entry,
            turn: None,
        };
        if wanting > WAITING_PER_ACCOUNT {
            return Err(CompileError::Busy { retry_after_secs: 5 });
        }
        let turn = place.entry.turn.clone().acquire_owned().await;
        place.turn = Some(turn.map_err(|_| CompileError::Invalid("the compiler is shutting down".into()))?);
        Ok(place)
    }

    async fn queue_turn(&self, queueing: Queueing) -> Result<OwnedSemaphorePermit, CompileError> {
        if let Ok(turn) = self.turns.clone().try_acquire_owned() {
            return Ok(turn);
        }
        let queued = self.queued.fetch_add(1, Ordering::Relaxed);
        let _leave = scopeguard(|| {
            self.queued.fetch_sub(1, Ordering::Relaxed);
        });
        if queueing == Queueing::RefuseWhenFull && queued >= self.max_queued {
            return Err(CompileError::Busy { retry_after_secs: 5 });
        }
        self.turns
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| CompileError::Invalid("the compiler is shutting down".into()))
    }
}

/// Runs `f` when dropped.
fn scopeguard<F: FnOnce()>(f: F) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

impl ComponentCache {
    /// `max_compiles`: components compiled at once; `max_loaded_bytes`: compiled images held
    /// ready in memory.
    pub fn new(
        engine: Engine,
        dir: &Path,
        max_compiles: usize,
        max_loaded_bytes: usize,
    ) -> wasmtime::Result<ComponentCache> {
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
        // Since 0.4.0: the units of work a run reports.
        v0_4_0::agent::plugin::meter::add_to_linker::<_, HasSelf<HostState>>(&mut linker, |s| s)?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        std::fs::create_dir_all(dir)?;
        Ok(ComponentCache {
            engine,
            linker,
            dir: dir.to_path_buf(),
            engine_hash: format!("{:016x}", hasher.finish()),
            loaded: Mutex::new(Loaded::new(max_loaded_bytes)),
            compiles: Compiles {
                turns: Arc::new(Semaphore::new(max_compiles.max(1))),
                queued: AtomicUsize::new(0),
                max_queued: max_compiles.max(1) * QUEUE_PER_COMPILE,
                accounts: Arc::default(),
            },
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
        let cell = self.loaded().cell(hash);
        let pre = cell
            .get_or_try_init(|| async {
                let component = self.component(hash, bytes).await?;
                let pre = Arc::new(self.link(&component)?);
                self.loaded().count(hash, &cell, image_bytes(&component));
                Ok::<_, String>(pre)
            })
            .await
            .cloned();
        if pre.is_err() {
            self.loaded().drop_failed(hash, &cell);
        }
        pre
    }

    fn loaded(&self) -> std::sync::MutexGuard<'_, Loaded> {
        self.loaded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps a built-in handler's component held whatever else is run (its hash).
    pub fn pin(&self, hash: &str) {
        self.loaded().pin(hash);
    }

    /// Links a compiled component against the host, as the version of the world it targets.
    pub fn link(&self, component: &Component) -> Result<Pre, String> {
        let version = world_version(component, &self.engine)
            .ok_or_else(|| "the component does not export agent:plugin/command".to_string())?;
        let pre = self
            .linker
            .instantiate_pre(component)
            .map_err(|e| format!("cannot link the component: {e:#}"))?;
        Pre::new(pre, &version).map_err(|e| format!("the component does not fit the command-plugin world: {e:#}"))
    }

    /// Uploads compiling or waiting for their turn to.
    pub fn uploads_in_line(&self) -> usize {
        let accounts = self.compiles.accounts.lock().unwrap_or_else(|e| e.into_inner());
        accounts.values().map(|a| a.wanting.load(Ordering::Relaxed)).sum()
    }

    /// Compiles `bytes` and keeps nothing: for a component that may yet be refused. An
    /// upload names its account, which takes the queue one upload at a time.
    pub async fn compile(
        &self,
        bytes: Arc<Vec<u8>>,
        queueing: Queueing,
        account: Option<&str>,
    ) -> Result<Component, CompileError> {
        let _turns = self.compiles.turn(queueing, account).await?;
        let engine = self.engine.clone();
        let component = tokio::task::spawn_blocking(move || compile(&engine, &bytes))
            .await
            .map_err(|e| CompileError::Invalid(format!("compilation task failed: {e}")))?
            .map_err(CompileError::Invalid)?;
        self.compiled.fetch_add(1, Ordering::Relaxed);
        Ok(component)
    }

    /// Keeps an accepted component: its artifact on disk, ready to run in memory.
    pub async fn keep(&self, hash: &str, component: Component) -> Result<(), String> {
        let path = self.artifact_path(hash);
        let to_save = component.clone();
        tokio::task::spawn_blocking(move || save_artifact(&path, &to_save))
            .await
            .map_err(|e| format!("saving the compiled component failed: {e}"))?;
        let pre = Arc::new(self.link(&component)?);
        let cell = self.loaded().cell(hash);
        if cell.set(pre).is_ok() {
            self.loaded().count(hash, &cell, image_bytes(&component));
        }
        Ok(())
    }

    /// Forgets a component: its artifact and what memory held of it.
    pub fn forget(&self, hash: &str) {
        self.loaded().forget(hash);
        let _ = std::fs::remove_file(self.artifact_path(hash));
    }

    /// The compiled component: from the disk cache, or compiled now (waiting its turn)
    /// and saved there.
    pub async fn component(
        &self,
        hash: &str,
        bytes: impl FnOnce() -> Result<Vec<u8>, String> + Send + 'static,
    ) -> Result<Component, String> {
        let engine = self.engine.clone();
        let path = self.artifact_path(hash);
        let cached = tokio::task::spawn_blocking(move || {
            if !path.is_file() {
                return None;
            }
            // SAFETY: the artifact was written by agent-host (save_artifact) into a cache
            // folder only its user writes (the data dir's, the operator's
            // `plugin_cache_dir`, or that user's own cache folder for `plugin run`), whole
            // (renamed into place), and its name carries the engine's hash.
            match unsafe { Component::deserialize_file(&engine, &path) } {
                Ok(component) => Some(component),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "stale component cache entry; recompiling");
                    None
                }
            }
        })
        .await
        .map_err(|e| format!("loading task failed: {e}"))?;
        if let Some(component) = cached {
            self.from_disk.fetch_add(1, Ordering::Relaxed);
            return Ok(component);
        }
        let bytes = tokio::task::spawn_blocking(bytes)
            .await
            .map_err(|e| format!("reading task failed: {e}"))??;
        let component = self
            .compile(Arc::new(bytes), Queueing::Wait, None)
            .await
            .map_err(|e| e.to_string())?;
        let path = self.artifact_path(hash);
        let to_save = component.clone();
        let _ = tokio::task::spawn_blocking(move || save_artifact(&path, &to_save)).await;
        Ok(component)
    }

    /// Cache files this cache would not use: of hashes not in `keep`, of another engine,
    /// or half-written, and older than `grace` (a compile in progress is left alone).
    /// Returns how many were removed.
    pub fn sweep(&self, keep: &std::collections::HashSet<String>, grace: Duration) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let suffix = format!("-{}.cwasm", self.engine_hash);
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let ours = name.strip_suffix(&suffix).is_some_and(|hash| keep.contains(hash));
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= grace);
            let artifact = name.ends_with(".cwasm") || name.ends_with(".tmp");
            if artifact && !ours && old && std::fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }
}

/// The size of a compiled component's image in memory: what holding it costs.
fn image_bytes(component: &Component) -> usize {
    let range = component.image_range();
    (range.end as usize).saturating_sub(range.start as usize)
}

fn compile(engine: &Engine, bytes: &[u8]) -> Result<Component, String> {
    let started = std::time::Instant::now();
    let component = Component::new(engine, bytes).map_err(|e| format!("not a valid component: {e:#}"))?;
    tracing::info!(ms = started.elapsed().as_millis() as u64, "compiled a component");
    Ok(component)
}

/// Writes the artifact whole: a name of its own first (processes sharing the cache never
/// write one file), then renamed into place.
fn save_artifact(path: &Path, component: &Component) {
    let Ok(artifact) = component.serialize() else {
        return;
    };
    let tmp = path.with_extension(format!("{}-{}.tmp", std::process::id(), crate::random::hex_token(4)));
    if std::fs::write(&tmp, artifact)
        .and_then(|_| std::fs::rename(&tmp, path))
        .is_err()
    {
        let _ = std::fs::remove_file(&tmp);
        tracing::warn!(path = %path.display(), "could not save the compiled component");
    }
}
