//! `agent-host logs`: the plugin runs kept for an agent's owner, with their log lines.

use std::collections::HashSet;
use std::time::Duration;

use clap::Args;
use serde_json::json;

use super::{Ctx, service};
use crate::services::plugins;
use crate::store::PluginRun;
use crate::views;

#[derive(Args)]
pub struct LogsArgs {
    #[arg(long)]
    agent: String,
    /// Only this command's runs.
    #[arg(long)]
    command: Option<String>,
    /// How many runs, newest (1 to 500).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=500))]
    limit: u32,
    /// Keep printing runs as they are kept, until stopped (with --json, one object per line).
    #[arg(long)]
    follow: bool,
}

pub async fn run(ctx: &Ctx, args: LogsArgs) -> anyhow::Result<()> {
    let agent = ctx.agent(&args.agent).await?;
    let command = args.command.as_deref().map(|c| c.trim_start_matches('/'));
    let newest = plugins::runs(&ctx.store, &agent.id, command, None, args.limit)
        .await
        .map_err(service)?;
    if !args.follow {
        let rows: Vec<_> = newest.iter().map(views::plugin_run).collect();
        ctx.out
            .list(&json!({ "runs": rows }), &newest, text, "no runs kept yet");
        return Ok(());
    }
    // Oldest first from here on, as a log reads.
    let mut seen: HashSet<String> = HashSet::new();
    let mut last = show_new(ctx, newest, &mut seen, i64::MIN);
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        // From the last one shown (inclusive: another may have started in the same ms).
        let after = (last != i64::MIN).then_some(last - 1);
        let runs = plugins::runs(&ctx.store, &agent.id, command, after, 500)
            .await
            .map_err(service)?;
        last = show_new(ctx, runs, &mut seen, last);
    }
}

/// Prints the runs not shown yet, oldest first; answers the latest start shown.
fn show_new(ctx: &Ctx, runs: Vec<PluginRun>, seen: &mut HashSet<String>, mut last: i64) -> i64 {
    for run in runs.into_iter().rev() {
        if seen.insert(run.id.clone()) {
            last = last.max(run.started_at);
            if ctx.out.json {
                println!("{}", views::plugin_run(&run));
            } else {
                println!("{}", text(&run));
            }
        }
    }
    last
}

fn text(run: &PluginRun) -> String {
    let mut out = format!(
        "{}  /{}  {}  {} ms  ({}, run {})",
        crate::clock::iso(run.started_at),
        run.command,
        run.outcome,
        run.duration_ms,
        run.origin,
        run.id
    );
    if let Some(error) = &run.error {
        out.push_str(&format!("\n  error: {error}"));
    }
    for line in &run.lines {
        out.push_str(&format!(
            "\n  {} {:<5} {}",
            crate::clock::iso(line.at),
            line.level,
            line.message
        ));
    }
    out
}
