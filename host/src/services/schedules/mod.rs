//! Schedules: work an agent does on its own (docs/schedules.md). Here, what owners do with
//! them (through the account API, the CLI and the console; a manifest's are kept in step by
//! `agent apply`, in `agents`); `runner` runs them when they come due.

pub mod runner;

use super::{ServiceError, Services};
use crate::domain::schedule::{Action, ScheduleSpec, Timing};
use crate::domain::{Agent, Command};
use crate::store::{ScheduleRecord, ScheduleRun, ScheduleStatus};

/// Makes a schedule of `spec` for the agent, through the API or the CLI.
pub async fn create(
    services: &Services,
    agent: &Agent,
    commands: &[Command],
    spec: ScheduleSpec,
) -> Result<ScheduleRecord, ServiceError> {
    let now = crate::clock::controllable_now_ms();
    let def = spec.check(now).map_err(|e| ServiceError::Validation(e.to_string()))?;
    if let Action::Command { command, parameters } = &def.action {
        let Some(found) = commands.iter().find(|c| &c.def.name == command) else {
            return Err(ServiceError::Validation(format!(
                "Invalid field 'command': the agent has no command '{command}'"
            )));
        };
        // Checked now as each run will check them, not found wrong at every run.
        super::params::resolve(&found.def.name, &found.def.parameters, Some(parameters.clone()), None)
            .map_err(|why| ServiceError::Validation(format!("Invalid field 'parameters': {why}")))?;
    }
    let next_run_at = def.timing.next_after(now);
    let record = ScheduleRecord::new(&agent.account_id, &agent.id, "api", def, next_run_at);
    services
        .store
        .insert_schedule(record.clone(), services.settings.schedules.schedule_max_per_account)
        .await?;
    Ok(record)
}

pub async fn list(services: &Services, agent: &Agent) -> Result<Vec<ScheduleRecord>, ServiceError> {
    Ok(services.store.schedules_of(&agent.id).await?)
}

/// The agent's schedule, by id or name.
pub async fn find(services: &Services, agent: &Agent, id_or_name: &str) -> Result<ScheduleRecord, ServiceError> {
    services
        .store
        .schedule(&agent.id, id_or_name)
        .await?
        .ok_or_else(|| ServiceError::NotFound(format!("no schedule '{id_or_name}' on this agent")))
}

/// Pauses it, or resumes it from now (a stopped one too, its failures forgotten).
pub async fn set_enabled(
    services: &Services,
    agent: &Agent,
    id_or_name: &str,
    enabled: bool,
) -> Result<ScheduleRecord, ServiceError> {
    let schedule = find(services, agent, id_or_name).await?;
    if schedule.status == ScheduleStatus::Done {
        return Err(ServiceError::Conflict(format!(
            "schedule '{}' ran once as it was made to; make a new one",
            schedule.def.name
        )));
    }
    // A one-off that has not run runs at its time, or late if that has passed (as its
    // `missed` says); the others from now.
    let next_run_at = match schedule.def.timing {
        Timing::Once { at } => Some(at),
        _ => schedule.def.timing.next_after(crate::clock::controllable_now_ms()),
    };
    services
        .store
        .set_schedule_enabled(&agent.id, &schedule.id, enabled, next_run_at)
        .await?
        .ok_or_else(|| ServiceError::NotFound(format!("no schedule '{id_or_name}' on this agent")))
}

pub async fn delete(services: &Services, agent: &Agent, id_or_name: &str) -> Result<ScheduleRecord, ServiceError> {
    let schedule = find(services, agent, id_or_name).await?;
    services.store.delete_schedule(&agent.id, &schedule.id).await?;
    Ok(schedule)
}

/// Its runs, newest first.
pub async fn runs(
    services: &Services,
    agent: &Agent,
    id_or_name: &str,
    limit: u32,
) -> Result<(ScheduleRecord, Vec<ScheduleRun>), ServiceError> {
    let schedule = find(services, agent, id_or_name).await?;
    let runs = services.store.schedule_runs(&schedule.id, limit).await?;
    Ok((schedule, runs))
}
