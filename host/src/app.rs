//! The one place that wires things together: settings → store → state → router →
//! listeners, plus background tasks and graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::Settings;
use crate::secrets::MasterKey;
use crate::services::rate_limit::RateLimiter;
use crate::store::Store;

#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub limiter: Arc<RateLimiter>,
    pub settings: Arc<Settings>,
    pub started: Instant,
}

/// Prepares the data dir and opens the store (applying migrations).
pub fn open_store(settings: &Settings) -> anyhow::Result<Store> {
    std::fs::create_dir_all(&settings.data_dir)
        .with_context(|| format!("cannot create the data dir {}", settings.data_dir.display()))?;
    let path = settings.database_path();
    Store::open(&path, Duration::from_millis(settings.db_busy_timeout_ms))
        .with_context(|| format!("cannot open the database {}", path.display()))
}

/// A server whose listeners are bound and which is ready to run.
pub struct Server {
    state: AppState,
    listeners: Vec<TcpListener>,
}

impl Server {
    pub async fn bind(settings: Settings, store: Store, listen: &[String]) -> anyhow::Result<Server> {
        // Secrets at rest need the master key; create it now rather than on first use
        // deep inside a request.
        MasterKey::load_or_create(&settings.data_dir).context("master key")?;
        let limiter = Arc::new(RateLimiter::default());
        limiter.restore(store.load_rate_usage().await?);
        let mut listeners = Vec::with_capacity(listen.len());
        for address in listen {
            let listener = TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen on {address}"))?;
            listeners.push(listener);
        }
        let state = AppState {
            store,
            limiter,
            settings: Arc::new(settings),
            started: Instant::now(),
        };
        Ok(Server { state, listeners })
    }

    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners.iter().filter_map(|l| l.local_addr().ok()).collect()
    }

    /// Serves until SIGINT or SIGTERM, then lets requests in flight finish (up to the
    /// grace period) and saves the rate-limit counters.
    pub async fn run(self) -> anyhow::Result<()> {
        let Server { state, listeners } = self;
        let (stop_tx, stop_rx) = watch::channel(false);
        let router = crate::routes::router(state.clone());

        let flusher = tokio::spawn(flush_rate_usage(state.clone(), stop_rx.clone()));
        let mut servers = tokio::task::JoinSet::new();
        for listener in listeners {
            let router = router.clone();
            let mut stop = stop_rx.clone();
            servers.spawn(async move {
                axum::serve(listener, router)
                    .with_graceful_shutdown(async move {
                        let _ = stop.wait_for(|s| *s).await;
                    })
                    .await
            });
        }

        shutdown_signal().await;
        tracing::info!("shutting down");
        let _ = stop_tx.send(true);
        let grace = Duration::from_secs(state.settings.shutdown_grace_secs);
        let drained = tokio::time::timeout(grace, async {
            while let Some(result) = servers.join_next().await {
                if let Ok(Err(e)) = result {
                    tracing::warn!(error = %e, "listener ended with an error");
                }
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!("requests still in flight after {} s; stopping anyway", grace.as_secs());
        }
        let _ = flusher.await;
        state.store.save_rate_usage(state.limiter.snapshot()).await?;
        Ok(())
    }
}

async fn flush_rate_usage(state: AppState, mut stop: watch::Receiver<bool>) {
    let every = Duration::from_secs(state.settings.rate_limit_flush_secs);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        if let Err(e) = state.store.save_rate_usage(state.limiter.snapshot()).await {
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
