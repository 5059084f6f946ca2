//! `agent-host db ...`

use anyhow::Context;
use clap::Subcommand;
use serde_json::{Value, json};

use super::Ctx;
use crate::store::Store;

#[derive(Subcommand)]
pub enum DbCmd {
    /// Write a consistent copy of the SQLite database to FILE while the server runs (a new
    /// file, private to its owner). Keep the master key apart from it. On PostgreSQL, use
    /// pg_dump.
    Backup {
        /// Where to write the copy; it must not exist.
        #[arg(value_name = "FILE")]
        file: std::path::PathBuf,
    },
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
        DbCmd::Backup { file } => {
            ctx.store.backup_to(&file).await?;
            let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
            ctx.out.print(
                &json!({ "file": file, "bytes": bytes }),
                &format!(
                    "Backed up the database to {} ({bytes} bytes). Restore it as DATA_DIR/agent-host.db and start with the same master key.",
                    file.display()
                ),
            );
        }
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
