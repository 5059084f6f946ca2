//! `agent-host key ...`

use clap::Subcommand;
use serde_json::json;

use super::{Ctx, service};
use crate::clock::iso;
use crate::services::{accounts, keys};
use crate::views;

#[derive(Subcommand)]
pub enum KeyCmd {
    /// Create a key; it is printed this once and stored only as a hash.
    Create {
        #[arg(long)]
        account: String,
        /// What the key may do: use (the agent endpoints), spend (also USDC transfers) or
        /// manage (also the account: keys, agents, plugins, wallets). The operator's key
        /// for an account holder manages.
        #[arg(long, default_value = "manage", value_parser = ["use", "spend", "manage"])]
        scope: String,
        /// A label to tell the key apart from the account's others.
        #[arg(long)]
        name: Option<String>,
    },
    /// List an account's keys (ids, scopes, times; never secrets).
    List {
        #[arg(long)]
        account: String,
    },
    /// Revoke a key by its id.
    Revoke { key_id: String },
}

pub async fn run(ctx: &Ctx, command: KeyCmd) -> anyhow::Result<()> {
    match command {
        KeyCmd::Create { account, scope, name } => {
            let scope = keys::parse_scope(&scope).map_err(service)?;
            let name = keys::parse_name(name.as_deref()).map_err(service)?;
            let account = accounts::by_name(&ctx.store, &account).await.map_err(service)?;
            let issued = keys::issue(&ctx.store, &account, scope, name).await.map_err(service)?;
            ctx.out.print(&views::issued_key(&issued, &account), &issued.key);
            if !ctx.out.json {
                eprintln!(
                    "Key {} ({}) for account '{}': shown only this once; store it now.",
                    issued.info.id,
                    scope.as_str(),
                    account.name
                );
            }
        }
        KeyCmd::List { account } => {
            let account = accounts::by_name(&ctx.store, &account).await.map_err(service)?;
            let list = keys::list(&ctx.store, &account).await.map_err(service)?;
            let value = json!({ "account": account.name, "keys": list.iter().map(views::key).collect::<Vec<_>>() });
            ctx.out.list(
                &value,
                &list,
                |k| {
                    format!(
                        "{}  {:<6}  created {}  last used {}  {}",
                        k.id,
                        k.scope.as_str(),
                        iso(k.created_at),
                        k.last_used_at.map(iso).unwrap_or_else(|| "never".into()),
                        if k.revoked_at.is_some() { "REVOKED" } else { "active" }
                    )
                },
                "no keys",
            );
        }
        KeyCmd::Revoke { key_id } => {
            let key = keys::revoke(&ctx.store, &key_id, None).await.map_err(service)?;
            ctx.out.print(
                &json!({ "id": key.id, "revoked": true, "revoked_at": key.revoked_at.map(iso) }),
                &format!("revoked key {}", key.id),
            );
        }
    }
    Ok(())
}
