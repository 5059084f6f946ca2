//! What the host measures of itself when it is scraped: the job queue (every host's, from
//! the store), its plugin slots and its database pool.

use super::Services;

pub async fn refresh(services: &Services) {
    let Some(metrics) = crate::telemetry::metrics::metrics() else {
        return;
    };
    let (slots, in_use) = services.plugins.slot_usage();
    metrics.plugin_slots.set(slots as i64);
    metrics.plugin_slots_in_use.set(in_use as i64);
    if let Some(pool) = services.store.pool_status() {
        metrics.db_connections_max.set(pool.max as i64);
        metrics.db_connections_used.set(pool.used as i64);
        metrics.db_connections_idle.set(pool.idle as i64);
        metrics.db_pending_requests.set(pool.waiting as i64);
    }
    // A database in trouble must not stall the scrape (when the metrics matter most): the
    // job gauges then keep their last values.
    let counted = tokio::time::timeout(std::time::Duration::from_secs(1), services.store.job_counts()).await;
    match counted {
        Err(_) => tracing::warn!("the job counts took over a second; the metrics keep the last ones"),
        Ok(Ok((queued, running, oldest))) => {
            metrics.jobs_queued.set(queued as i64);
            metrics.jobs_running.set(running as i64);
            let age_ms = oldest.map_or(0, |created| crate::clock::now_ms().saturating_sub(created));
            metrics.jobs_oldest_queued_seconds.set(age_ms as f64 / 1000.0);
        }
        Ok(Err(e)) => tracing::warn!(error = %e, "could not count the jobs for the metrics"),
    }
}
