//! Runs schedules when they come due. Every host looks for due schedules now and then; a
//! run is recorded as it is taken (one host takes each time, see `store::schedules`), then
//! it runs as its owner's request would, charged to the owner's plan and chat budget, and
//! its answer is delivered. A time missed by more than `schedule_late_after_secs` (no host
//! ran, or the last run still ran) runs late once or is skipped, as its schedule says. A run
//! holds a lease its host renews (as a job's, `job_lease_secs`): once it runs out, the host
//! stopped, and recovery fails the run rather than run it twice.

use std::time::Duration;

use tokio::sync::watch;

use crate::domain::ResponseFormat;
use crate::domain::schedule::{Action, Delivery, Missed};
use crate::services::chat::{self, ChatInput};
use crate::services::commands::{self, Answer, CommandCall, CommandOutcome};
use crate::services::jobs::{self, JobStatus};
use crate::services::usage::Channel;
use crate::services::{ServiceError, Services, agents, chatapp, runs, social};
use crate::store::{RunEnd, RunState, ScheduleRecord, ScheduleRun};

/// Due schedules one pass takes at most; the rest wait for the next pass.
const PER_PASS: u32 = 50;
/// Tool calls a scheduled prompt may make, as a chat-app message's may.
const MAX_TOOL_CALLS: u8 = 3;

/// Looks for due schedules every `schedule_poll_ms` until `stop` turns true.
pub async fn run_periodically(services: Services, mut stop: watch::Receiver<bool>) {
    let every = Duration::from_millis(services.settings.schedules.schedule_poll_ms);
    loop {
        if let Err(e) = take_due(&services).await {
            tracing::warn!(error = %e, "could not look for schedules due");
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Takes the runs due now and starts them; how many it started.
pub async fn take_due(services: &Services) -> Result<usize, ServiceError> {
    if services.lifecycle.is_stopping() {
        return Ok(0);
    }
    let settings = &services.settings.schedules;
    let now = crate::clock::controllable_now_ms();
    let late_after_ms = settings.schedule_late_after_secs as i64 * 1000;
    let mut started = 0;
    for schedule in services.store.due_schedules(now, PER_PASS).await? {
        let Some(due_at) = schedule.next_run_at else {
            continue;
        };
        let late_ms = now - due_at;
        let skip = late_ms > late_after_ms && schedule.def.missed == Missed::Skip;
        let began = crate::clock::now_ms();
        let run = ScheduleRun {
            id: format!("srn_{}", crate::random::hex_token(8)),
            schedule_id: schedule.id.clone(),
            due_at,
            state: if skip { RunState::Skipped } else { RunState::Running },
            started_at: began,
            deadline_at: began + lease(services).as_millis() as i64,
            finished_at: None,
            output: None,
            error: skip.then(|| format!("missed by {} s; the schedule skips missed times", late_ms / 1000)),
        };
        let next_run_at = schedule.def.timing.next_after(now);
        // One schedule's trouble is not the others': the pass goes on.
        match services
            .store
            .take_schedule_run(&schedule.id, next_run_at, run.clone())
            .await
        {
            Ok(true) if !skip => {}
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!(schedule = %schedule.id, error = %e, "could not take a scheduled run");
                continue;
            }
        }
        started += 1;
        services.lifecycle.spawn(perform(services.clone(), schedule, run));
    }
    Ok(started)
}

/// Runs one taken run to its end and records how it ended.
async fn perform(services: Services, schedule: ScheduleRecord, run: ScheduleRun) {
    let settings = &services.settings.schedules;
    let limit = Duration::from_secs(settings.schedule_run_timeout_secs);
    // Stopped however `perform` ends (a panic too): a lease renewed forever would block
    // the schedule for good.
    let _leased = jobs::StopOnDrop(keep_leased(&services, &run.id));
    let end = match tokio::time::timeout(limit, work(&services, &schedule)).await {
        Ok(Ok(output)) => RunEnd::Succeeded { output: kept(output) },
        Ok(Err(e)) => {
            tracing::info!(schedule = %schedule.id, error = %e, "a scheduled run failed");
            RunEnd::Failed { error: e.public_text() }
        }
        Err(_) => RunEnd::Failed {
            error: format!("it ran longer than {} s (schedule_run_timeout_secs)", limit.as_secs()),
        },
    };
    let stop_after = settings.schedule_stop_after_failures;
    if let Err(e) = services.store.finish_schedule_run(&run.id, end, stop_after).await {
        tracing::error!(schedule = %schedule.id, run = %run.id, error = %e, "could not record a scheduled run's end");
    }
}

/// Characters of a run's answer its log keeps and its `schedule.ran` event carries; the
/// delivery itself (a message, a post) had all of it.
const OUTPUT_KEPT_CHARS: usize = 16_000;

fn kept(output: String) -> String {
    match output.chars().count() > OUTPUT_KEPT_CHARS {
        true => format!(
            "{}… (cut at {OUTPUT_KEPT_CHARS} characters)",
            output.chars().take(OUTPUT_KEPT_CHARS).collect::<String>()
        ),
        false => output,
    }
}

/// How long a run's lease lasts; its host renews it every third of that.
fn lease(services: &Services) -> Duration {
    Duration::from_secs(services.settings.jobs.job_lease_secs)
}

/// Renews the run's lease until aborted, so other hosts know it still runs.
fn keep_leased(services: &Services, run_id: &str) -> tokio::task::JoinHandle<()> {
    let (services, run_id) = (services.clone(), run_id.to_string());
    tokio::spawn(async move {
        let mut every = tokio::time::interval(lease(&services) / 3);
        every.tick().await;
        loop {
            every.tick().await;
            let until = crate::clock::now_ms() + lease(&services).as_millis() as i64;
            match services.store.renew_schedule_run(&run_id, until).await {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => tracing::warn!(run = %run_id, error = %e, "could not renew a scheduled run's lease"),
            }
        }
    })
}

/// The run's work: its command or prompt, then its delivery. Its answer's text.
async fn work(services: &Services, schedule: &ScheduleRecord) -> Result<String, ServiceError> {
    let found = services
        .store
        .agent_with_commands(&schedule.agent_id)
        .await?
        .ok_or_else(|| ServiceError::NotFound("the agent no longer exists".into()))?;
    let agent = &found.agent;
    // A run is its owner's request, counted against the owner's plan as a keyed one is.
    agents::charge_owner(services, agent, "schedule", |retry_after_secs| {
        format!(
            "The account has used the requests its plan allows for now (a scheduled run counts as one); they come back in {retry_after_secs} s"
        )
    })
    .await?;
    let answer = match &schedule.def.action {
        Action::Command { command, parameters } => {
            let command = runs::pick(&found.commands, agent, command)?;
            if !command.def.enabled {
                return Err(ServiceError::Execution(format!("/{} is disabled", command.def.name)));
            }
            let call = CommandCall {
                agent,
                command,
                parameters: Some(parameters.clone()),
                raw_text: None,
                channel: Channel::Schedule,
                paid_by: None,
                slot: None,
                metered: None,
            };
            match commands::execute(services, call).await? {
                CommandOutcome::Answered(answer) => answer,
                CommandOutcome::Queued { job_id } => job_answer(services, &job_id).await?,
            }
        }
        Action::Prompt { prompt } => {
            let offered = agents::offered(&found.commands, None).cloned().collect();
            let mut input = ChatInput {
                tools_enabled: true,
                max_tool_calls: MAX_TOOL_CALLS,
                owner_tools: true,
                ..ChatInput::new(prompt.clone())
            };
            if schedule.def.delivery == Delivery::Social {
                input.instructions.push(format!(
                    "Your answer is posted as it is on the agent's social account: at most {} characters, no preamble.",
                    crate::services::social_text::MAX_WEIGHTED
                ));
            }
            let reply = chat::chat(services, agent, offered, input).await?;
            Answer {
                response: reply.response,
                format: ResponseFormat::Text,
                media_url: None,
                cut_short: reply.cut_short,
            }
        }
    };
    deliver(services, agent, &schedule.def.delivery, &answer).await?;
    Ok(answer.response)
}

/// A long-running command's answer, once its job ends (the run's own limit bounds the wait).
async fn job_answer(services: &Services, job_id: &str) -> Result<Answer, ServiceError> {
    let within = Duration::from_secs(services.settings.schedules.schedule_run_timeout_secs);
    match jobs::wait(&services.store, job_id, within, async |_| {}).await? {
        JobStatus::Succeeded {
            response, artifact_url, ..
        } => Ok(Answer {
            response,
            format: ResponseFormat::Text,
            media_url: artifact_url,
            cut_short: false,
        }),
        JobStatus::Failed { error, .. } => Err(ServiceError::Execution(error)),
        JobStatus::Processing { .. } | JobStatus::Missing => {
            Err(ServiceError::Execution(format!("job {job_id} did not end in time")))
        }
    }
}

/// Sends the answer where the schedule says. A webhook's event is written with the run's end.
async fn deliver(
    services: &Services,
    agent: &crate::domain::Agent,
    delivery: &Delivery,
    answer: &Answer,
) -> Result<(), ServiceError> {
    match delivery {
        Delivery::Log | Delivery::Webhook => Ok(()),
        Delivery::Telegram { chat_id } => {
            let text = match &answer.media_url {
                Some(url) => format!("{}\n{url}", answer.response),
                None => answer.response.clone(),
            };
            chatapp::reply(services, agent, *chat_id, None, &text).await
        }
        Delivery::Social => {
            let post = social::Post {
                text: Some(answer.response.clone()),
                media_urls: answer.media_url.iter().cloned().collect(),
                reply_to: None,
            };
            social::post(services, agent, &agent.def.username, post)
                .await
                .map(|_| ())
        }
    }
}

/// Fails the runs whose host stopped before they ended (their lease ran out; at the start
/// of the only host serving from its store, every one still running). They are not run
/// again: their command may have had its effect. How many.
pub async fn recover(services: &Services, at_start: bool) -> Result<usize, ServiceError> {
    let before = match at_start && !services.store.is_shared() {
        true => i64::MAX,
        false => crate::clock::now_ms(),
    };
    let stop_after = services.settings.schedules.schedule_stop_after_failures;
    let mut failed = 0;
    for run_id in services.store.schedule_runs_cut_off(before).await? {
        let end = RunEnd::Failed {
            error: "the server running it stopped before it finished; it was not run again".into(),
        };
        if services.store.finish_schedule_run(&run_id, end, stop_after).await? {
            failed += 1;
        }
    }
    Ok(failed)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_long_answer_is_kept_cut() {
        assert_eq!(super::kept("short".into()), "short");
        let long = "é".repeat(super::OUTPUT_KEPT_CHARS + 10);
        let cut = super::kept(long);
        assert!(cut.starts_with(&"é".repeat(super::OUTPUT_KEPT_CHARS)));
        assert!(cut.ends_with("(cut at 16000 characters)"), "{}", &cut[cut.len() - 40..]);
    }
}
