//! `agent-host schedule`: the work an agent does on its own (docs/schedules.md), as the
//! account API's `/schedules` and the console manage it.

use anyhow::anyhow;
use clap::{Args, Subcommand};
use serde_json::json;

use super::{Ctx, service};
use crate::domain::schedule::{Delivery, Missed, ScheduleSpec};
use crate::services::schedules;
use crate::store::{ScheduleRecord, ScheduleRun};
use crate::views;

#[derive(Subcommand)]
pub enum ScheduleCmd {
    /// Schedule a command run or a prompt; prints the schedule and its next time.
    Add(Box<AddArgs>),
    /// The agent's schedules, with their next and last runs.
    List {
        #[arg(long)]
        agent: String,
    },
    /// A schedule's runs, newest first.
    Runs {
        #[arg(long)]
        agent: String,
        /// Its name or id.
        schedule: String,
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=500))]
        limit: u32,
    },
    /// Stop it running until it is resumed.
    Pause {
        #[arg(long)]
        agent: String,
        schedule: String,
    },
    /// Run it again from now (a schedule stopped by failures too).
    Resume {
        #[arg(long)]
        agent: String,
        schedule: String,
    },
    Remove {
        #[arg(long)]
        agent: String,
        schedule: String,
    },
}

#[derive(Args)]
pub struct AddArgs {
    #[arg(long)]
    agent: String,
    /// a-z, 0-9, '-' and '_'; unique on the agent.
    #[arg(long)]
    name: String,
    /// When: a cron expression (`0 9 * * *`), read in --timezone (UTC by default)...
    #[arg(long, group = "when")]
    cron: Option<String>,
    #[arg(long, requires = "cron")]
    timezone: Option<String>,
    /// ...or every this many seconds (at least 60)...
    #[arg(long, group = "when")]
    every: Option<u64>,
    /// ...or once, at this RFC 3339 time...
    #[arg(long, group = "when")]
    at: Option<String>,
    /// ...or once, this many seconds from now.
    #[arg(long, group = "when")]
    after: Option<u64>,
    /// What: one of the agent's commands...
    #[arg(long, group = "what")]
    command: Option<String>,
    /// ...with these parameters (a JSON object)...
    #[arg(long, requires = "command")]
    parameters: Option<String>,
    /// ...or a prompt to the agent's chat.
    #[arg(long, group = "what")]
    prompt: Option<String>,
    /// Where the answer goes: log, social, webhook, or telegram:CHAT_ID.
    #[arg(long, default_value = "log")]
    deliver: String,
    /// What a time missed while no host ran becomes: catch_up (run once, late) or skip.
    #[arg(long, default_value = "catch_up")]
    missed: String,
    /// Make it paused.
    #[arg(long)]
    paused: bool,
}

pub async fn run(ctx: &Ctx, command: ScheduleCmd) -> anyhow::Result<()> {
    let services = ctx.services()?;
    match command {
        ScheduleCmd::Add(args) => {
            let agent = ctx.agent(&args.agent).await?;
            let commands = ctx.store.commands(&agent.id).await?;
            let spec = spec_of(*args)?;
            let made = schedules::create(&services, &agent, &commands, spec)
                .await
                .map_err(service)?;
            ctx.out.print(&views::schedule(&made), &line(&made));
        }
        ScheduleCmd::List { agent } => {
            let agent = ctx.agent(&agent).await?;
            let list = schedules::list(&services, &agent).await.map_err(service)?;
            let rows: Vec<_> = list.iter().map(views::schedule).collect();
            ctx.out.list(&json!({ "schedules": rows }), &list, line, "no schedules");
        }
        ScheduleCmd::Runs { agent, schedule, limit } => {
            let agent = ctx.agent(&agent).await?;
            let (schedule, runs) = schedules::runs(&services, &agent, &schedule, limit)
                .await
                .map_err(service)?;
            let value = json!({
                "schedule": views::schedule(&schedule),
                "runs": runs.iter().map(views::schedule_run).collect::<Vec<_>>(),
            });
            ctx.out.list(&value, &runs, run_line, "no runs yet");
        }
        ScheduleCmd::Pause { agent, schedule } => set_enabled(ctx, &services, &agent, &schedule, false).await?,
        ScheduleCmd::Resume { agent, schedule } => set_enabled(ctx, &services, &agent, &schedule, true).await?,
        ScheduleCmd::Remove { agent, schedule } => {
            let agent = ctx.agent(&agent).await?;
            let removed = schedules::delete(&services, &agent, &schedule).await.map_err(service)?;
            ctx.out.print(
                &json!({ "id": removed.id, "name": removed.def.name, "deleted": true }),
                &format!("deleted schedule {}", removed.def.name),
            );
        }
    }
    Ok(())
}

async fn set_enabled(
    ctx: &Ctx,
    services: &crate::services::Services,
    agent: &str,
    schedule: &str,
    enabled: bool,
) -> anyhow::Result<()> {
    let agent = ctx.agent(agent).await?;
    let changed = schedules::set_enabled(services, &agent, schedule, enabled)
        .await
        .map_err(service)?;
    ctx.out.print(&views::schedule(&changed), &line(&changed));
    Ok(())
}

fn spec_of(args: AddArgs) -> anyhow::Result<ScheduleSpec> {
    let deliver = match args.deliver.as_str() {
        "log" => Delivery::Log,
        "social" => Delivery::Social,
        "webhook" => Delivery::Webhook,
        other => match other.strip_prefix("telegram:").map(str::parse::<i64>) {
            Some(Ok(chat_id)) => Delivery::Telegram { chat_id },
            _ => {
                return Err(anyhow!(
                    "--deliver: log, social, webhook or telegram:CHAT_ID, not '{other}'"
                ));
            }
        },
    };
    let missed = match args.missed.as_str() {
        "catch_up" => Missed::CatchUp,
        "skip" => Missed::Skip,
        other => return Err(anyhow!("--missed: catch_up or skip, not '{other}'")),
    };
    let parameters = match &args.parameters {
        None => None,
        Some(text) => match serde_json::from_str(text) {
            Ok(serde_json::Value::Object(map)) => Some(map),
            _ => return Err(anyhow!("--parameters: a JSON object, such as '{{\"name\": \"Ada\"}}'")),
        },
    };
    Ok(ScheduleSpec {
        name: args.name,
        cron: args.cron,
        timezone: args.timezone,
        every_seconds: args.every,
        at: args.at,
        after_seconds: args.after,
        command: args.command,
        parameters,
        prompt: args.prompt,
        deliver: Some(deliver),
        missed: Some(missed),
        enabled: Some(!args.paused),
    })
}

fn line(s: &ScheduleRecord) -> String {
    let view = views::schedule(s);
    let when = match (&view["cron"], &view["every_seconds"], &view["at"]) {
        (serde_json::Value::String(cron), _, _) => {
            format!("cron '{cron}' {}", view["timezone"].as_str().unwrap_or("UTC"))
        }
        (_, serde_json::Value::Number(n), _) => format!("every {n} s"),
        (_, _, serde_json::Value::String(at)) => format!("once at {at}"),
        _ => String::new(),
    };
    let next = view["next_run_at"].as_str().unwrap_or("-");
    let last = match (&view["last_run_at"], &view["last_outcome"]) {
        (serde_json::Value::String(at), serde_json::Value::String(outcome)) => format!("{outcome} at {at}"),
        _ => "never ran".into(),
    };
    format!(
        "{}  {}  {}  next {}  last {}  ({}, {})",
        s.def.name,
        s.status.as_str(),
        when,
        next,
        last,
        s.def.delivery.as_str(),
        s.id
    )
}

fn run_line(r: &ScheduleRun) -> String {
    let mut out = format!("{}  {}  ({})", crate::clock::iso(r.due_at), r.state.as_str(), r.id);
    if let Some(error) = &r.error {
        out.push_str(&format!("\n  error: {error}"));
    }
    if let Some(output) = &r.output {
        out.push_str(&format!("\n  {}", output.replace('\n', "\n  ")));
    }
    out
}
