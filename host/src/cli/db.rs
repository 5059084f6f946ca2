//! `agent-host db ...`

use anyhow::Context;
use clap::Subcommand;
use serde_json::{Value, json};

use super::Ctx;
use crate::store::Store;

#[derive(Subcommand)]
pub enum DbCmd {
    /// Copy every row of this database (the data dir's SQLite file, or database_url) into
    /// an empty PostgreSQL database, which is migrated first: how a single host moves to a
    /// database several hosts share. Stop the server first.
    Copy {
        /// The target, postgres://user:password@host:port/name
        #[arg(long, value_name = "URL")]
        to: String,
    },
}

pub async fn run(ctx: &Ctx, command: DbCmd) -> anyhow::Result<()> {
    match command {
        DbCmd::Copy { to } => {
            let target = Store::connect(&to, 4)
                .await
                .context("cannot open the target database (--to)")?;
            let copied = ctx.store.copy_into(&target).await?;
            let rows: u64 = copied.iter().map(|(_, n)| *n as u64).sum();
            let tables: serde_json::Map<String, Value> =
                copied.iter().map(|(table, n)| (table.to_string(), json!(n))).collect();
            ctx.out.print(
                &json!({ "copied": tables, "rows": rows }),
                &format!(
                    "Copied {rows} rows in {} tables. Give every host this database_url and the same master key.",
                    copied.len()
                ),
            );
        }
    }
    Ok(())
}
