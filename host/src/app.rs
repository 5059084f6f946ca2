//! The one place that wires things together: settings → store → state → router →
//! listeners, plus background tasks and graceful shutdown.

mod client_stream;
pub mod connections;
mod outbound;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::chains::base::{BaseChain, BaseConfig, GasCaps};
use crate::chains::solana::{SolanaChain, SolanaConfig};
use crate::chains::{Chains, Explorer, networks};
use crate::clients::telegram::Telegram;
use crate::clients::x::X;
use crate::config::{ChainSettings, Settings};
use crate::domain::RateLimits;
use crate::llm::{LlmProvider, NoProvider, OpenAiProvider};
use crate::marker::MarkerKey;
use crate::plugins::{HostServices, PluginRuntime, RuntimeLimits};
use crate::routes::AppState;
use crate::secrets::MasterKey;
use crate::services::rate_limit::{AuthThrottle, Limiter, X402Limiter};
use crate::services::{Services, jobs, recovery};
use crate::store::Store;
use connections::{Connections, Limits};

/// The remote provider when one is configured, else the embedded model when its file is
/// there, else none; measured.
pub fn llm_provider(settings: &Settings) -> Arc<dyn LlmProvider> {
    Arc::new(crate::llm::Measured(unmeasured_llm_provider(settings)))
}

fn unmeasured_llm_provider(settings: &Settings) -> Arc<dyn LlmProvider> {
    match (&settings.llm.llm_base_url, &settings.llm.llm_model) {
        (Some(base), Some(model)) => Arc::new(OpenAiProvider::new(
            base,
            model,
            settings.llm.llm_api_key.as_ref().map(|k| k.expose().to_string()),
            Duration::from_millis(settings.llm.llm_timeout_ms),
        )),
        #[cfg(feature = "embedded-model")]
        _ if settings.embedded_model_file().is_file() => Arc::new(crate::llm::EmbeddedProvider::new(
            &settings.embedded_model_file(),
            settings.llm.embedded_max_tokens,
            Duration::from_millis(settings.llm.llm_timeout_ms),
        )),
        _ => Arc::new(NoProvider),
    }
}

/// The embedding model when its files are there; without it knowledge is ranked by words.
pub fn embedder(settings: &Settings) -> Option<Arc<dyn crate::llm::Embedder>> {
    #[cfg(feature = "embedded-model")]
    if let Some(model) = crate::llm::MiniLm::open(&settings.embedding_model_dir()) {
        return Some(Arc::new(model));
    }
    let _ = settings;
    None
}

/// The plugin runtime over this data dir, with the settings' limits and the plugins' guard.
pub fn plugin_runtime(
    settings: &Settings,
    store: &Store,
    llm: Arc<dyn LlmProvider>,
    embedder: Option<Arc<dyn crate::llm::Embedder>>,
    outbound: crate::outbound::Outbound,
    payer: Option<Arc<dyn crate::plugins::Payer>>,
) -> anyhow::Result<Arc<PluginRuntime>> {
    let limits = RuntimeLimits {
        default_timeout: Duration::from_millis(settings.plugins.plugin_timeout_ms),
        max_memory_bytes: (settings.plugins.plugin_memory_mib as usize) << 20,
        max_output_bytes: settings.plugins.plugin_max_output_bytes,
        max_concurrency: settings.plugins.plugin_max_concurrency,
        max_concurrency_per_account: settings.plugins.plugin_max_concurrency_per_account,
        max_component_bytes: settings.plugins.plugin_max_component_bytes,
        max_compiles: settings.plugins.plugin_max_compiles,
        max_loaded_bytes: (settings.plugins.plugin_loaded_components_mib as usize) << 20,
    };
    let services = HostServices {
        store: store.clone(),
        outbound,
        llm,
        llm_max_tokens: settings.plugins.plugin_llm_max_tokens,
        llm_run_limits: crate::plugins::LlmRunLimits {
            calls: settings.plugins.plugin_llm_calls_per_run,
            prompt_chars: settings.plugins.plugin_llm_prompt_chars_per_run,
            tokens: settings.plugins.plugin_llm_tokens_per_run,
        },
        llm_budget: Arc::new(crate::services::rate_limit::PluginLlmBudget::new(
            store,
            RateLimits {
                per_minute: settings.plugins.account_plugin_llm_tokens_per_minute,
                per_day: settings.plugins.account_plugin_llm_tokens_per_day,
            },
        )),
        embedder,
        kv_max_account_bytes: settings.quotas.account_max_kv_bytes,
        payer,
    };
    let cache_dir = match &settings.plugins.plugin_cache_dir {
        Some(dir) => std::path::PathBuf::from(dir),
        None => settings.data_dir.join("cache"),
    };
    Ok(Arc::new(PluginRuntime::new(&cache_dir, limits, services)?))
}

/// Everything services need, for this data dir and settings.
pub fn services(settings: Settings, store: Store, public_base_url: String) -> anyhow::Result<Services> {
    // Secrets at rest need the master key; create it now rather than on first use
    // deep inside a request.
    let master = MasterKey::load_or_create(&settings.data_dir).context("master key")?;
    let llm = llm_provider(&settings);
    let embedder = embedder(&settings);
    let guards = outbound::guards(&settings, &master)?;
    let chains = Arc::new(chains(&settings.chains).context("chain settings")?);
    let marker = MarkerKey::derive(master.bytes());
    let sign_in_nonces = crate::x402::sign_in::NonceKey::derive(master.bytes());
    let secrets = Arc::new(master);
    let payer = Arc::new(crate::services::spending::AgentPayer::new(
        store.clone(),
        secrets.clone(),
        chains.clone(),
    ));
    let plugins = plugin_runtime(
        &settings,
        &store,
        llm.clone(),
        embedder.clone(),
        guards.plugins.clone(),
        Some(payer.clone()),
    )?;
    let x = X::new(
        &settings.social.social_api_base,
        Duration::from_millis(settings.social.social_timeout_ms),
    );
    let telegram = Telegram::new(
        &settings.chatapp.chatapp_api_base,
        Duration::from_millis(settings.outbound.outbound_timeout_ms),
    );
    let account_limiter = Arc::new(Limiter::new(&store, "account"));
    let budgets = Arc::new(Limiter::new(&store, "budgets"));
    let auth_throttle = Arc::new(AuthThrottle::new(RateLimits {
        per_minute: settings.server.auth_failure_limit_per_minute,
        per_day: settings.server.auth_failure_limit_per_day,
    }));
    let chatapp_inbound = Arc::new(crate::services::chatapp::Inbound::new(&store, &settings.chatapp));
    let x402_limiter = Arc::new(X402Limiter::new(
        &store,
        settings.x402.client_limits(),
        settings.x402.payer_limits(),
    ));
    let wallet_locks = Arc::new(crate::services::locks::KeyedLocks::across(&store, "wallet"));
    let payment_locks = Arc::new(crate::services::payments::PaymentLocks::across(&store));
    let oauth_refreshes = Arc::new(crate::services::locks::KeyedLocks::across(&store, "remote-oauth"));
    let facilitators = crate::clients::facilitator::Facilitators::from_settings(&settings);
    let usage = Arc::new(crate::services::usage::Recorder::new(&settings.webhooks));
    let card_key = match &settings.a2a.a2a_card_signing_key_file {
        Some(file) => Some(Arc::new(
            crate::jws::DocumentKey::load(file).map_err(|e| anyhow::anyhow!("a2a_card_signing_key_file {e}"))?,
        )),
        None => None,
    };
    Ok(Services {
        store,
        plugins,
        llm,
        embedder,
        marker,
        sign_in_nonces,
        secrets,
        card_key,
        telegram,
        x,
        outbound: guards.plugins,
        webhook_outbound: guards.webhooks,
        client_documents: guards.client_documents,
        settings: Arc::new(settings),
        public_base_url,
        chains,
        facilitators,
        x402_limiter,
        account_limiter,
        budgets,
        embedding: Arc::default(),
        auth_throttle,
        chatapp_inbound,
        wallet_locks,
        payment_locks,
        lifecycle: Arc::default(),
        usage,
        remote_listings: Arc::default(),
        payer,
        oauth_refreshes,
    })
}

fn chains(settings: &ChainSettings) -> anyhow::Result<Chains> {
    let rpc_timeout = Duration::from_millis(settings.chain_rpc_timeout_ms);
    let solana_network = networks::solana(settings).map_err(anyhow::Error::msg)?;
    let base_network = networks::base(settings).map_err(anyhow::Error::msg)?;
    let solana = SolanaChain::new(&SolanaConfig {
        rpc_url: solana_network.rpc_url.clone(),
        usdc_mint: solana_network.usdc_mint.clone(),
        commitment: settings.solana_commitment.clone(),
        rpc_timeout,
        network_id: solana_network.network_id.clone(),
    })
    .map_err(anyhow::Error::msg)?;
    let base = BaseChain::new(&BaseConfig {
        rpc_url: base_network.rpc_url.clone(),
        chain_id: base_network.chain_id,
        usdc_address: base_network.usdc_address.clone(),
        usdc_domain: (base_network.eip712_name.clone(), base_network.eip712_version.clone()),
        confirmations: settings.base_confirmations,
        caps: GasCaps {
            gas: settings.base_max_gas,
            fee_per_gas: u128::from(settings.base_max_fee_per_gas_wei),
            tip: u128::from(settings.base_max_priority_fee_wei),
            fee: u128::from(settings.base_max_fee_wei),
        },
        rpc_timeout,
    })
    .map_err(anyhow::Error::msg)?;
    Ok(Chains {
        solana,
        base,
        solana_explorer: Explorer {
            address_url: solana_network.explorer_address_url.clone(),
            tx_url: solana_network.explorer_tx_url.clone(),
            cluster: solana_network.cluster.clone(),
        },
        base_explorer: Explorer {
            address_url: base_network.explorer_address_url.clone(),
            tx_url: base_network.explorer_tx_url.clone(),
            cluster: String::new(),
        },
        solana_network,
        base_network,
        #[cfg(test)]
        stand_in: std::sync::OnceLock::new(),
    })
}

/// Services for a command-line call (no server, no listeners).
pub fn cli_services(settings: Settings, store: Store) -> anyhow::Result<Services> {
    let public_base_url = settings.server.public_base_url.clone().unwrap_or_else(|| {
        format!(
            "http://{}",
            settings
                .server
                .listen
                .first()
                .map(String::as_str)
                .unwrap_or("127.0.0.1:8080")
        )
    });
    services(settings, store, public_base_url)
}

/// The data dir holds the master key and the database: made readable by the service's user
/// alone (an existing one is left as the operator set it).
fn create_data_dir(dir: &std::path::Path) -> anyhow::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .with_context(|| format!("cannot create the data dir {}", dir.display()))
}

/// Prepares the data dir and opens the store (applying migrations): the PostgreSQL
/// database when `database_url` names one, else SQLite in the data dir.
pub async fn open_store(settings: &Settings) -> anyhow::Result<Store> {
    create_data_dir(&settings.data_dir)?;
    let store = match &settings.database.database_url {
        Some(url) => Store::connect(url.expose(), settings.database.database_pool_size)
            .await
            .context("cannot open the PostgreSQL database (database_url)")?,
        None => {
            let path = settings.database_path();
            Store::open(&path, Duration::from_millis(settings.database.db_busy_timeout_ms))
                .with_context(|| format!("cannot open the database {}", path.display()))?
        }
    };
    same_master_key(settings, &store).await?;
    Ok(store)
}

/// Every process using one database must seal and open secrets with the same master key:
/// the first records a value sealed with its key, and one that cannot open it stops here
/// (rather than fail on each secret another host sealed). A key rotation cut off between
/// the database and the key file is finished or forgotten here, as the database says.
async fn same_master_key(settings: &Settings, store: &Store) -> anyhow::Result<()> {
    const FACT: &str = crate::store::KEY_CHECK;
    let data_dir = &settings.data_dir;
    // A rotation of this data dir's key file that runs now is waited for.
    let (_lock, pending) = match crate::secrets::KeySource::of(data_dir) {
        crate::secrets::KeySource::File(_) => {
            let lock = crate::secrets::key_file::lock(data_dir).context("master key")?;
            (Some(lock), MasterKey::pending(data_dir).context("master key")?)
        }
        crate::secrets::KeySource::Environment => (None, None),
    };
    let master = MasterKey::load_or_create(data_dir).context("master key")?;
    let recorded = store.agree_on_fact(FACT, master.seal(FACT, b"agent-host")).await?;
    if master.open(FACT, &recorded).is_ok() {
        if pending.is_some() {
            tracing::warn!("a master key rotation stopped before the database changed; the old key stays");
            crate::secrets::key_file::forget_pending(data_dir)?;
        }
        return Ok(());
    }
    if pending.is_some_and(|next| next.open(FACT, &recorded).is_ok()) {
        let retired = crate::secrets::key_file::promote_pending(data_dir)?;
        tracing::warn!(retired = %retired.display(), "finished a master key rotation cut off after the database changed");
        return Ok(());
    }
    anyhow::bail!(
        "the master key differs from the one this database's secrets were sealed with; \
         give every host the same AGENT_HOST_MASTER_KEY"
    )
}

/// A server whose listeners are bound and which is ready to run.
pub struct Server {
    state: AppState,
    listeners: Vec<TcpListener>,
    /// `/metrics`, on the operator's own address.
    metrics: Option<TcpListener>,
}

impl Server {
    pub async fn bind(settings: Settings, store: Store, listen: &[String]) -> anyhow::Result<Server> {
        let saved_usage = store.load_rate_usage().await?;
        let mut listeners = Vec::with_capacity(listen.len());
        for address in listen {
            let listener = TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen on {address}"))?;
            listeners.push(listener);
        }
        let metrics = match &settings.telemetry.metrics_listen {
            Some(address) => {
                let listener = TcpListener::bind(address)
                    .await
                    .with_context(|| format!("metrics_listen: cannot listen on {address}"))?;
                let telemetry = &settings.telemetry;
                // Metrics name agents, commands, revenue and failure rates: a business's
                // figures, for the operator's network only unless they say otherwise.
                if !listener.local_addr()?.ip().is_loopback() && !telemetry.metrics_allow_remote {
                    anyhow::bail!(
                        "metrics_listen: {address} is not a loopback address; set metrics_allow_remote = true \
                         (and metrics_token) to serve metrics beyond this machine"
                    );
                }
                if telemetry.metrics_allow_remote && telemetry.metrics_token.is_none() {
                    tracing::warn!(
                        "metrics are served beyond loopback with no metrics_token: anyone who reaches {address} reads them"
                    );
                }
                crate::telemetry::metrics::enable(
                    telemetry.metrics_max_agents,
                    telemetry.metrics_max_commands,
                    &telemetry.metrics_agents,
                );
                Some(listener)
            }
            None => None,
        };
        let first = listeners.first().and_then(|l| l.local_addr().ok());
        let public_base_url = settings
            .server
            .public_base_url
            .clone()
            .unwrap_or_else(|| first.map(|a| format!("http://{a}")).unwrap_or_default());
        let services = services(settings, store, public_base_url)?;
        services.chains.check_networks().await.map_err(anyhow::Error::msg)?;
        services.account_limiter.local().restore(saved_usage);
        services.embedding.in_background();
        let state = AppState {
            services: Arc::new(services),
            started: Instant::now(),
        };
        Ok(Server {
            state,
            listeners,
            metrics,
        })
    }

    /// How this host chooses an agent's knowledge, for its start line.
    pub fn knowledge_ranking(&self) -> String {
        let services = &self.state.services;
        match &services.embedder {
            Some(embedder) => format!("by meaning and words ({})", embedder.model()),
            None => format!(
                "by words alone (no embedding model in {})",
                services.settings.embedding_model_dir().display()
            ),
        }
    }

    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners.iter().filter_map(|l| l.local_addr().ok()).collect()
    }

    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Serves until SIGINT or SIGTERM. Then it stops accepting, lets requests in flight and
    /// the work they started (jobs, settlements, refunds) finish within the grace period,
    /// hands the jobs still running to recovery (another host's, or the next start's) and
    /// saves the rate-limit counters.
    pub async fn run(self) -> anyhow::Result<()> {
        let Server {
            state,
            listeners,
            metrics,
        } = self;
        let (stop_tx, stop_rx) = watch::channel(false);
        let router = crate::routes::router(state.clone());

        let database = &state.services.settings.database;
        let watcher = state.services.store.watch_for_changes(
            Duration::from_millis(database.cache_check_ms),
            (database.cache_max_mib as usize) << 20,
        );
        let flusher = tokio::spawn(flush_rate_usage(state.clone(), stop_rx.clone()));
        let cleaner = tokio::spawn(jobs::clean_up_periodically((*state.services).clone(), stop_rx.clone()));
        let usage = tokio::spawn(crate::services::usage::flush_periodically(
            (*state.services).clone(),
            stop_rx.clone(),
        ));
        let webhooks = tokio::spawn(crate::services::webhooks::dispatch::run_periodically(
            (*state.services).clone(),
            stop_rx.clone(),
        ));
        let wallet_alerts = tokio::spawn(crate::services::wallet_alerts::check_periodically(
            (*state.services).clone(),
            stop_rx.clone(),
        ));
        let collector = tokio::spawn(crate::services::plugins::collect_periodically(
            (*state.services).clone(),
            stop_rx.clone(),
        ));
        if let Err(e) = crate::services::plugins::upgrade(&state.services).await {
            tracing::error!(error = %e, "could not upgrade the recorded plugins");
        }
        recovery::at_start(&state.services).await;
        // After recovery: at the start of the only host, a run still `running` was cut off.
        let schedules = tokio::spawn(crate::services::schedules::runner::run_periodically(
            (*state.services).clone(),
            stop_rx.clone(),
        ));
        // Jobs, transfers and payments cut off by a crash or stuck: checked against the
        // chain now and then, in the background (an unreachable node must not delay serving).
        let recovery = tokio::spawn(recovery::run_periodically((*state.services).clone(), stop_rx.clone()));
        let mut servers = tokio::task::JoinSet::new();
        // One count for every public listener: the caps hold for the host, not per address.
        let settings = &state.services.settings.server;
        let public = Connections::new(Limits::public(settings));
        for listener in listeners {
            servers.spawn(connections::serve(
                listener,
                router.clone(),
                public.clone(),
                stop_rx.clone(),
            ));
        }

        // Scraped until the end: what shutdown does is worth seeing too.
        let metrics = metrics.map(|listener| {
            let router = crate::routes::metrics::router(state.clone());
            let connections = Connections::unmeasured(Limits::metrics(settings));
            // Never stopped: the task is aborted at the very end.
            let (keep_serving, not_stopped) = watch::channel(false);
            tokio::spawn(async move {
                let _keep_serving = keep_serving;
                connections::serve(listener, router, connections, not_stopped).await
            })
        });
        shutdown_signal().await;
        tracing::info!("shutting down");
        let lifecycle = &state.services.lifecycle;
        lifecycle.begin_stopping();
        // Still serving, /ready answering 503: the load balancer takes this host out first.
        let delay = Duration::from_secs(state.services.settings.server.shutdown_delay_secs);
        if !delay.is_zero() {
            tracing::info!("not ready; accepting for {} s more", delay.as_secs());
            tokio::time::sleep(delay).await;
        }
        let _ = stop_tx.send(true);
        let grace = Duration::from_secs(state.services.settings.server.shutdown_grace_secs);
        let deadline = tokio::time::Instant::now() + grace;
        let answered = tokio::time::timeout_at(deadline, async {
            while let Some(result) = servers.join_next().await {
                if let Ok(Err(e)) = result {
                    tracing::warn!(error = %e, "listener ended with an error");
                }
            }
        })
        .await
        .is_ok();
        let finished = lifecycle
            .drain(deadline.saturating_duration_since(tokio::time::Instant::now()))
            .await;
        if !answered || !finished {
            tracing::warn!("work still in flight after {} s; stopping anyway", grace.as_secs());
        }
        let cut_off = lifecycle.cut_jobs(Duration::from_secs(1)).await;
        if !cut_off.is_empty() {
            tracing::warn!(jobs = cut_off.len(), "jobs still running are left to recovery");
            if let Err(e) = state.services.store.release_job_leases(cut_off).await {
                tracing::warn!(error = %e, "could not release the leases of jobs still running");
            }
        }
        watcher.abort();
        let _ = flusher.await;
        let _ = cleaner.await;
        let _ = usage.await;
        let _ = webhooks.await;
        let _ = wallet_alerts.await;
        let _ = schedules.await;
        // What ran while the host drained is counted too.
        state.services.usage.flush(&state.services.store).await;
        let _ = collector.await;
        let _ = recovery.await;
        if let Some(metrics) = metrics {
            metrics.abort();
        }
        crate::telemetry::traces::flush();
        state
            .services
            .store
            .save_rate_usage(state.services.account_limiter.local().snapshot())
            .await?;
        Ok(())
    }
}

async fn flush_rate_usage(state: AppState, mut stop: watch::Receiver<bool>) {
    let every = Duration::from_secs(state.services.settings.database.rate_limit_flush_secs);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        if let Err(e) = state
            .services
            .store
            .save_rate_usage(state.services.account_limiter.local().snapshot())
            .await
        {
            tracing::warn!(error = %e, "could not save rate-limit counters");
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}
