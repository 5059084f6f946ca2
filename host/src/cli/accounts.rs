//! `agent-host account ...`

use anyhow::anyhow;
use clap::Subcommand;

use super::{Ctx, service};
use crate::domain::Plan;
use crate::services::accounts;
use crate::views;

#[derive(Subcommand)]
pub enum AccountCmd {
    /// Create an account.
    Create {
        name: String,
        #[arg(long, default_value = "free", value_parser = ["free", "pro", "enterprise"])]
        plan: String,
        /// Requests per minute (enterprise only).
        #[arg(long)]
        rpm: Option<u32>,
        /// Requests per day (enterprise only).
        #[arg(long)]
        rpd: Option<u32>,
    },
}

pub async fn run(ctx: &Ctx, command: AccountCmd) -> anyhow::Result<()> {
    match command {
        AccountCmd::Create { name, plan, rpm, rpd } => {
            let plan = Plan::parse(&plan).ok_or_else(|| anyhow!("unknown plan {plan}"))?;
            let account = accounts::create(&ctx.store, &name, plan, rpm, rpd)
                .await
                .map_err(service)?;
            ctx.out.print(
                &views::account(&account),
                &format!(
                    "created account '{}' ({}, {} requests/minute, {} requests/day)",
                    account.name,
                    account.plan.as_str(),
                    account.limits.per_minute,
                    account.limits.per_day
                ),
            );
            Ok(())
        }
    }
}
