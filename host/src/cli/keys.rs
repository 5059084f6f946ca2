//! `agent-host key ...`

use clap::Subcommand;
use serde_json::json;

use super::{Ctx, service};
use crate::clock::{iso, now_ms};
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
        /// When it stops working: `30d` (days from now) or an RFC 3339 time. Never, if not given.
        #[arg(long, value_name = "30d|TIME")]
        expires: Option<String>,
    },
    /// Rename a key, or change when it stops working.
    Update {
        key_id: String,
        /// A new label; an empty one removes it.
        #[arg(long)]
        name: Option<String>,
        /// A new end: `30d`, an RFC 3339 time, or `never`.
        #[arg(long, value_name = "30d|TIME|never")]
        expires: Option<String>,
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
        KeyCmd::Create {
            account,
            scope,
            name,
            expires,
        } => {
            let scope = keys::parse_scope(&scope).map_err(service)?;
            let name = keys::parse_name(name.as_deref()).map_err(service)?;
            let expires_at = expires
                .map(|text| keys::parse_expires(&text, now_ms()))
                .transpose()
                .map_err(service)?;
            let account = accounts::by_name(&ctx.store, &account).await.map_err(service)?;
            let issued = keys::issue(&ctx.store, &account, scope, name, expires_at)
                .await
                .map_err(service)?;
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
                    let state = if k.revoked_at.is_some() {
                        "REVOKED".to_string()
                    } else if k.expired(now_ms()) {
                        "EXPIRED".to_string()
                    } else {
                        match k.expires_at {
                            Some(at) => format!("active until {}", iso(at)),
                            None => "active".to_string(),
                        }
                    };
                    format!(
                        "{}  {:<6}  {}  created {}  last used {}  {state}",
                        k.id,
                        k.scope.as_str(),
                        k.name.as_deref().unwrap_or("-"),
                        iso(k.created_at),
                        k.last_used_at.map(iso).unwrap_or_else(|| "never".into()),
                    )
                },
                "no keys",
            );
        }
        KeyCmd::Update { key_id, name, expires } => {
            let name = name.map(|n| keys::parse_name(Some(&n))).transpose().map_err(service)?;
            let expires_at = match expires.as_deref().map(str::trim) {
                None => None,
                Some("never") => Some(None),
                Some(text) => Some(Some(keys::parse_expires(text, now_ms()).map_err(service)?)),
            };
            let key = keys::update(&ctx.store, &key_id, None, name, expires_at)
                .await
                .map_err(service)?;
            ctx.out.print(&views::key(&key), &format!("updated key {}", key.id));
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
