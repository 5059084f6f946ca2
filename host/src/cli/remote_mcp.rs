//! `agent-host mcp-server`: the remote MCP servers an agent's manifest names, and their
//! credentials (read from standard input, to stay out of `ps`).

use clap::Subcommand;
use serde_json::json;

use super::{Ctx, read_stdin_line, service};
use crate::services::remote_tools;
use crate::views;

#[derive(Subcommand)]
pub enum McpServerCmd {
    /// The agent's remote servers, each listed now: the tools its chat is offered.
    List {
        #[arg(long)]
        agent: String,
    },
    /// Set a server's credential (the value of its manifest's `header`), read from standard
    /// input; `--remove` forgets it.
    Credential {
        #[arg(long)]
        agent: String,
        #[arg(long)]
        server: String,
        #[arg(long)]
        remove: bool,
    },
}

pub async fn run(ctx: &Ctx, command: McpServerCmd) -> anyhow::Result<()> {
    let services = ctx.services()?;
    match command {
        McpServerCmd::List { agent } => {
            let agent = ctx.agent(&agent).await?;
            let servers = remote_tools::status(&services, &agent).await.map_err(service)?;
            let rows: Vec<_> = servers.iter().map(views::remote_server).collect();
            ctx.out.list(
                &json!({ "servers": rows }),
                &servers,
                |s| match &s.tools {
                    Ok(tools) => format!("{}  {}  tools: {}", s.def.name, s.def.url, tools.join(", ")),
                    Err(why) => format!("{}  {}  unavailable: {why}", s.def.name, s.def.url),
                },
                "the agent's manifest names no MCP servers",
            );
        }
        McpServerCmd::Credential { agent, server, remove } => {
            let agent = ctx.agent(&agent).await?;
            if remove {
                let removed = remote_tools::remove_credential(&services, &agent, &server)
                    .await
                    .map_err(service)?;
                ctx.out.print(
                    &json!({ "server": server, "removed": removed }),
                    if removed {
                        "credential removed"
                    } else {
                        "no credential was set"
                    },
                );
            } else {
                let value = read_stdin_line("the credential")?;
                remote_tools::set_credential(&services, &agent, &server, &value)
                    .await
                    .map_err(service)?;
                ctx.out
                    .print(&json!({ "server": server, "credential_set": true }), "credential set");
            }
        }
    }
    Ok(())
}
