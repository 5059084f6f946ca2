//! `agent-host agent ...`

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use super::{Ctx, service};
use crate::services::agents;
use crate::views;

#[derive(Subcommand)]
pub enum AgentCmd {
    /// Create or update an agent from its manifest; prints the agent id.
    Apply {
        file: PathBuf,
        /// Owner of a new agent.
        #[arg(long)]
        account: Option<String>,
    },
    /// List all agents.
    List,
    /// Show one agent and its commands.
    Show { id_or_username: String },
}

pub async fn run(ctx: &Ctx, command: AgentCmd) -> anyhow::Result<()> {
    match command {
        AgentCmd::Apply { file, account } => {
            let services = ctx.services()?;
            let (manifest, outcome) = agents::apply_file(&services, &file, account.as_deref())
                .await
                .map_err(service)?;
            ctx.out.print(&views::applied(&manifest, &outcome), &outcome.agent_id);
        }
        AgentCmd::List => {
            let all = agents::list(&ctx.store, None).await.map_err(service)?;
            ctx.out.list(
                &json!({ "agents": all.iter().map(views::agent_summary).collect::<Vec<_>>() }),
                &all,
                |s| {
                    format!(
                        "{}  {}  {}  ({} commands, account {})",
                        s.agent.id, s.agent.def.username, s.agent.def.name, s.command_count, s.account_name
                    )
                },
                "no agents",
            );
        }
        AgentCmd::Show { id_or_username } => {
            let agent = ctx.agent(&id_or_username).await?;
            let account = ctx
                .store
                .account_by_id(&agent.account_id)
                .await?
                .map(|a| a.name)
                .unwrap_or_default();
            let commands = ctx.store.commands(&agent.id).await?;
            let mut text = format!(
                "{} ({})  id {}  account {}\n",
                agent.def.name, agent.def.username, agent.id, account
            );
            for c in &commands {
                text.push_str(&format!(
                    "  /{}  [{}]  {}\n",
                    c.def.name,
                    c.def.handler_type.as_str(),
                    c.def.description
                ));
            }
            ctx.out
                .print(&views::agent(&agent, &account, &commands), text.trim_end());
        }
    }
    Ok(())
}
