//! `agent-host agent ...`

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use super::{Ctx, service};
use crate::services::{agents, knowledge};
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
    /// Which knowledge entries messages would bring into the agent's prompt, best first,
    /// with their scores by words (BM25) and by meaning (cosine, with the embedding model).
    Knowledge {
        id_or_username: String,
        /// One or more messages.
        #[arg(required = true)]
        messages: Vec<String>,
        /// Entries shown per message at most.
        #[arg(long, default_value_t = 5)]
        top: usize,
    },
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
        AgentCmd::Knowledge {
            id_or_username,
            messages,
            top,
        } => {
            let agent = ctx.agent(&id_or_username).await?;
            let services = ctx.services()?;
            let entries = &agent.def.knowledge;
            let by_meaning = services.embedder.as_ref().map(|e| e.model().to_string());
            // Embedded now, however long it takes, so the ranking is the one a chat gets.
            if let Err(err) = knowledge::vectors(&services, entries).await {
                anyhow::bail!("the embedding model failed: {err}");
            }
            let mut asked = Vec::new();
            let mut text = format!(
                "{} entries, ranked by {}\n",
                entries.len(),
                by_meaning
                    .as_deref()
                    .map_or("words alone".into(), |m| format!("words and meaning ({m})"))
            );
            for message in &messages {
                let meaning = knowledge::cosines(&services, entries, message).await;
                let ranked = knowledge::rank(entries, message, meaning.as_deref());
                text.push_str(&format!("{message}\n"));
                for r in ranked.iter().take(top) {
                    let cosine = r.meaning.map(|c| format!(" cosine {c:.2}")).unwrap_or_default();
                    text.push_str(&format!(
                        "  #{} (bm25 {:.2}{cosine}) {}\n",
                        r.index, r.words, entries[r.index]
                    ));
                }
                asked.push(views::knowledge_ranking(
                    message,
                    entries,
                    &ranked[..ranked.len().min(top)],
                ));
            }
            ctx.out.print(
                &json!({ "embedding_model": by_meaning, "messages": asked }),
                text.trim_end(),
            );
        }
    }
    Ok(())
}
