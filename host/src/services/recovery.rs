//! Recovery, started from one place: what a crash or an unreachable chain left unfinished
//! is taken up at start and then every `recovery_interval_secs`. Jobs first (queued ones
//! run, cut-off ones fail), then transfers, then payments, whose refunds may need both.

use std::time::Duration;

use tokio::sync::watch;

use super::{Services, jobs, payments, wallets};

/// At start: the jobs this host's store holds. The only host serving from its store knows
/// that every running job was cut off; hosts sharing a store wait for the job's lease.
pub async fn at_start(services: &Services) {
    match jobs::recover(services, true).await {
        Ok((0, 0)) => {}
        Ok((resumed, failed)) => tracing::info!(resumed, failed, "jobs recovered after a restart"),
        Err(e) => tracing::error!(error = %e, "could not recover jobs"),
    }
    match super::schedules::runner::recover(services, true).await {
        Ok(0) => {}
        Ok(failed) => tracing::info!(failed, "scheduled runs cut off by a stop failed"),
        Err(e) => tracing::error!(error = %e, "could not recover scheduled runs"),
    }
}

/// One pass now, then one every `recovery_interval_secs`, until `stop` turns true. Hosts
/// sharing a store take turns: a pass runs on one host at a time (the others skip it), so
/// work cut off by a host that died is finished by another.
pub async fn run_periodically(services: Services, mut stop: watch::Receiver<bool>) {
    let every = Duration::from_secs(services.settings.server.recovery_interval_secs);
    loop {
        match services.store.try_turn("recovery").await {
            Ok(Some(_pass)) => pass(&services).await,
            Ok(None) => tracing::debug!("another host is running recovery"),
            Err(e) => tracing::error!(error = %e, "could not take the recovery turn"),
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

async fn pass(services: &Services) {
    let mut whole = true;
    match jobs::recover(services, false).await {
        Ok((0, 0)) => {}
        Ok((queued, cut_off)) => tracing::info!(queued, cut_off, "jobs taken up"),
        Err(e) => {
            whole = false;
            tracing::error!(error = %e, "could not take up jobs");
        }
    }
    match super::schedules::runner::recover(services, false).await {
        Ok(0) => {}
        Ok(failed) => tracing::info!(failed, "scheduled runs cut off by a stop failed"),
        Err(e) => {
            whole = false;
            tracing::error!(error = %e, "could not recover scheduled runs");
        }
    }
    match wallets::reconcile(services).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(transfers = n, "pending transfers reconciled"),
        Err(e) => {
            whole = false;
            tracing::error!(error = %e, "could not reconcile pending transfers");
        }
    }
    match payments::recovery::recover(services).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(payments = n, "unfinished payments taken up"),
        Err(e) => {
            whole = false;
            tracing::error!(error = %e, "could not take up unfinished payments");
        }
    }
    // Counted when it ends having looked at everything: once two more such passes have
    // ended, all that was unfinished before some moment has been taken up (an operator or
    // a test can wait on that). A pass cut short by an error is not counted.
    if whole && let Some(metrics) = crate::telemetry::metrics::metrics() {
        metrics.recovery_pass();
    }
}
