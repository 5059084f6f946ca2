//! One run of a component's `execute`: a fresh instance under the run's limits (time,
//! memory, output), its call's context, and what it logged. The runtime only runs; keeping
//! a run's log for its owner is the caller's (services/runs.rs).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use wasmtime::{Store, UpdateDeadline};

use super::state::{CallContext, HostState};
use super::{
    AgentSnapshot, ComponentRef, ExecError, Grants, Invocation, Origin, Output, PluginRuntime, ProgressSink, Tenant,
    budget, failure,
};
use crate::store::LogLine;

/// One run: the component, its invocation and what it may reach.
pub struct Run {
    pub component: ComponentRef,
    pub invocation: Invocation,
    pub agent_id: String,
    /// The agent's username, as its runs are measured.
    pub agent_name: String,
    pub grants: Grants,
    pub agent: Option<AgentSnapshot>,
    pub progress: Option<ProgressSink>,
    pub timeout: Option<Duration>,
    /// Whose run: decides its share of the slots.
    pub tenant: Tenant,
    /// A slot its caller reserved before taking anything for it (a paid run): used instead
    /// of waiting for one.
    pub slot: Option<super::slots::SlotPermit>,
    /// The key-value store this run sees, within its agent's: the command's, named by the
    /// agent manifest, never by the component.
    pub kv_scope: String,
    /// Counts the units of work the run reports, for its caller to charge (a command sold
    /// by use); `None`: counted for the run alone.
    pub meter: Option<super::Meter>,
}

/// How a run ended, and its log when the owner should see it.
pub struct Ran {
    pub result: Result<Output, ExecError>,
    /// Kept when the run logged lines or did not succeed.
    pub log: Option<RunLog>,
}

impl Ran {
    /// A run that never reached its component (no slot, no compiled component).
    fn unlogged(err: ExecError) -> Ran {
        Ran {
            result: Err(err),
            log: None,
        }
    }
}

/// What the owner sees of one run (`agent-host logs`, the console's Logs tab).
#[derive(Debug)]
pub struct RunLog {
    pub agent_id: String,
    pub command: String,
    pub origin: Origin,
    pub started_at: i64,
    pub duration_ms: i64,
    /// `succeeded`, `invalid_input`, `failed`, `unavailable` or `crashed`.
    pub outcome: &'static str,
    pub error: Option<String>,
    pub lines: Vec<LogLine>,
}

/// A run's outcome as a metric label.
pub fn outcome_label(result: &Result<Output, ExecError>) -> &'static str {
    match result {
        Ok(_) => "succeeded",
        Err(ExecError::InvalidInput(_)) => "invalid_input",
        Err(ExecError::Failed(_)) => "failed",
        Err(ExecError::Unavailable(_)) => "unavailable",
        Err(ExecError::Exceeded(super::Limit::Time, _)) => "timeout",
        Err(ExecError::Exceeded(..)) => "limit_exceeded",
        Err(_) => "crashed",
    }
}

impl PluginRuntime {
    pub(super) fn new_store(&self, call: CallContext, timeout: Duration) -> Store<HostState> {
        let budget = budget::MemoryBudget::new(self.limits.max_memory_bytes);
        let overdrawn = budget.clone();
        let mut store = Store::new(self.cache.engine(), HostState::new(call, budget));
        store.limiter(|state| &mut state.limiter);
        let deadline = Instant::now() + timeout;
        store.set_epoch_deadline(1);
        // Yield to the async runtime every tick, so a busy guest never holds a thread, and
        // interrupt it once its time is spent, or once it made the host hold more for it
        // than its memory budget allows.
        store.epoch_deadline_callback(move |ctx| {
            Ok(if Instant::now() >= deadline || overdrawn.overdrawn() {
                UpdateDeadline::Interrupt
            } else {
                ctx.data().sliced.store(true, Ordering::Relaxed);
                UpdateDeadline::Yield(1)
            })
        });
        store
    }

    /// A slot for a run of `tenant`'s that may take `timeout`, waited for as the tenant
    /// says: for a caller that must know a run can start before it takes anything for it.
    pub async fn reserve(&self, tenant: &Tenant, timeout: Duration) -> Result<super::slots::SlotPermit, ExecError> {
        let long = timeout > self.limits.default_timeout;
        self.slots
            .acquire(tenant, long)
            .await
            .map_err(|busy| ExecError::Busy(busy.0))
    }

    /// Runs `execute` in a fresh instance under the run's limits, once its tenant's share
    /// of the slots allows. A run that logged or did not succeed comes back with its log,
    /// for the caller to keep for the owner.
    pub async fn execute(&self, mut run: Run) -> Ran {
        let timeout = run.timeout.unwrap_or(self.limits.default_timeout);
        let slot = match run.slot.take() {
            Some(reserved) => Ok(reserved),
            None => self.reserve(&run.tenant, timeout).await,
        };
        let slot = match slot {
            Ok(slot) => slot,
            Err(err) => return Ran::unlogged(err),
        };
        let pre = match self.cache.get(&run.component.hash, run.component.bytes()).await {
            Ok(pre) => pre,
            Err(err) => return Ran::unlogged(ExecError::Load(err)),
        };
        // What a record of the run needs beyond its context: nothing more on the hot path.
        let (started_at, started, origin) = (crate::clock::now_ms(), Instant::now(), run.invocation.origin);
        let agent_name = run.agent_name;
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
        if let Some(meter) = run.meter {
            call.meter = meter;
        }
        let mut store = self.new_store(call, timeout);
        let sliced = store.data().sliced.clone();
        let invocation = run.invocation;
        // Holding its slot; if the caller goes away, the run is dropped (at once while it runs
        // on the caller's task, at its next yield on the guest threads) and the slot freed.
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
        let (outcome, mut store) = match self.guests.finish(run, &sliced).await {
            Ok(finished) => finished,
            Err(e) => return Ran::unlogged(ExecError::Crashed(format!("the plugin's run ended abnormally: {e}"))),
        };
        let result = failure::judge(outcome, &store, timeout, self.limits.max_output_bytes);
        if let Some(metrics) = crate::telemetry::metrics::metrics() {
            let data = store.data();
            metrics.plugin_run(
                &agent_name,
                &data.call.command,
                outcome_label(&result),
                started.elapsed().as_secs_f64(),
                data.budget.linear_bytes() as u64,
            );
        }
        for note in store.data_mut().take_http_notes() {
            store.data_mut().host_note(&note);
        }
        let call = &mut store.data_mut().call;
        let log = (!call.kept_log.is_empty() || result.is_err()).then(|| {
            let (outcome, error) = match &result {
                Ok(_) => ("succeeded", None),
                Err(ExecError::InvalidInput(m)) => ("invalid_input", Some(m.clone())),
                Err(ExecError::Failed(m)) => ("failed", Some(m.clone())),
                Err(ExecError::Unavailable(m)) => ("unavailable", Some(m.clone())),
                Err(other) => ("crashed", Some(other.to_string())),
            };
            RunLog {
                agent_id: std::mem::take(&mut call.agent_id),
                command: std::mem::take(&mut call.command),
                origin,
                started_at,
                duration_ms: started.elapsed().as_millis() as i64,
                outcome,
                error,
                lines: std::mem::take(&mut call.kept_log),
            }
        });
        // The instance goes back to the pool before anyone writes the log down.
        drop(store);
        Ran { result, log }
    }
}
