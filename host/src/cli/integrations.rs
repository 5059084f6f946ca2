//! `agent-host chatapp ...` and `agent-host social ...`: the agent's third-party accounts.

use clap::Subcommand;
use serde_json::json;

use super::{Ctx, read_stdin_line, service};
use crate::services::{chatapp, integrations, social};

#[derive(Subcommand)]
pub enum ChatappCmd {
    /// Connect a bot: the token is checked with getMe and stored encrypted.
    Connect {
        #[arg(long)]
        agent: String,
        /// The bot token from @BotFather; read from standard input when absent (keeps it out of `ps`).
        #[arg(long)]
        token: Option<String>,
        /// Register this public URL with setWebhook, so the bot answers in its chats
        /// (normally PUBLIC_BASE_URL/chatapp/AGENT_ID/webhook).
        #[arg(long, value_name = "URL")]
        webhook_url: Option<String>,
    },
    /// Forget the agent's bot.
    Disconnect {
        #[arg(long)]
        agent: String,
    },
    /// Let the bot send again.
    Enable {
        #[arg(long)]
        agent: String,
    },
    /// Keep the bot connected but refuse to send (403 chatapp_disabled).
    Disable {
        #[arg(long)]
        agent: String,
    },
}

#[derive(Subcommand)]
pub enum SocialCmd {
    /// Connect an account with its OAuth 2.0 user tokens (checked with /2/users/me, stored
    /// encrypted). Without --access-token, reads the access token and then the refresh token
    /// from standard input, one per line.
    Connect {
        #[arg(long)]
        agent: String,
        #[arg(long)]
        access_token: Option<String>,
        #[arg(long)]
        refresh_token: Option<String>,
        /// Seconds until the access token expires (as the token endpoint said).
        #[arg(long)]
        expires_in: Option<i64>,
    },
    /// Forget the agent's social account.
    Disconnect {
        #[arg(long)]
        agent: String,
    },
}

pub async fn chatapp(ctx: &Ctx, command: ChatappCmd) -> anyhow::Result<()> {
    match command {
        ChatappCmd::Connect {
            agent,
            token,
            webhook_url,
        } => {
            let services = ctx.services()?;
            let found = ctx.agent(&agent).await?;
            let token = match token {
                Some(token) => token,
                None => read_stdin_line("the bot token")?,
            };
            let username = chatapp::connect(&services, &found, &token).await.map_err(service)?;
            if let Some(url) = &webhook_url {
                chatapp::register_webhook(&services, &found, url)
                    .await
                    .map_err(service)?;
            }
            ctx.out.print(
                &json!({ "agent": found.def.username, "bot_username": username, "enabled": true, "webhook_url": webhook_url }),
                &format!("connected @{username} to agent '{}'", found.def.username),
            );
        }
        ChatappCmd::Disconnect { agent } => {
            let services = ctx.services()?;
            let found = ctx.agent(&agent).await?;
            let removed = integrations::disconnect(&services, &found.id, chatapp::KIND)
                .await
                .map_err(service)?;
            ctx.out.print(
                &json!({ "agent": found.def.username, "disconnected": removed }),
                &if removed {
                    format!("disconnected the bot of '{}'", found.def.username)
                } else {
                    "no bot was connected".into()
                },
            );
        }
        ChatappCmd::Enable { agent } => set_chatapp_enabled(ctx, &agent, true).await?,
        ChatappCmd::Disable { agent } => set_chatapp_enabled(ctx, &agent, false).await?,
    }
    Ok(())
}

async fn set_chatapp_enabled(ctx: &Ctx, agent: &str, enabled: bool) -> anyhow::Result<()> {
    let services = ctx.services()?;
    let found = ctx.agent(agent).await?;
    integrations::set_enabled(&services, &found.id, chatapp::KIND, enabled)
        .await
        .map_err(service)?;
    ctx.out.print(
        &json!({ "agent": found.def.username, "enabled": enabled }),
        &format!(
            "the bot of '{}' is {}",
            found.def.username,
            if enabled { "enabled" } else { "disabled" }
        ),
    );
    Ok(())
}

pub async fn social(ctx: &Ctx, command: SocialCmd) -> anyhow::Result<()> {
    match command {
        SocialCmd::Connect {
            agent,
            access_token,
            refresh_token,
            expires_in,
        } => {
            let services = ctx.services()?;
            let found = ctx.agent(&agent).await?;
            let (access, refresh) = match access_token {
                Some(access) => (access, refresh_token),
                None => {
                    let mut lines = std::io::stdin().lines();
                    let access = lines.next().transpose()?.unwrap_or_default().trim().to_string();
                    let refresh = lines
                        .next()
                        .transpose()?
                        .map(|l| l.trim().to_string())
                        .filter(|l| !l.is_empty());
                    (access, refresh.or(refresh_token))
                }
            };
            let username = social::connect(&services, &found, &access, refresh.as_deref(), expires_in)
                .await
                .map_err(service)?;
            ctx.out.print(
                &json!({ "agent": found.def.username, "username": username, "refreshable": refresh.is_some() }),
                &format!("connected @{username} to agent '{}'", found.def.username),
            );
        }
        SocialCmd::Disconnect { agent } => {
            let services = ctx.services()?;
            let found = ctx.agent(&agent).await?;
            let removed = integrations::disconnect(&services, &found.id, social::KIND)
                .await
                .map_err(service)?;
            ctx.out.print(
                &json!({ "agent": found.def.username, "disconnected": removed }),
                if removed {
                    "disconnected"
                } else {
                    "no account was connected"
                },
            );
        }
    }
    Ok(())
}
