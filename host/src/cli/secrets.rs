//! `agent-host secrets ...`: the master key over the secrets it seals.

use std::sync::Arc;

use anyhow::{Context, anyhow};
use clap::Subcommand;
use serde_json::json;

use super::{Ctx, read_stdin_line, service};
use crate::secrets::{KeySource, MasterKey, key_file};
use crate::services::master_key;

#[derive(Subcommand)]
pub enum SecretsCmd {
    /// Open every sealed secret (wallet keys, bot and social tokens) with the master key:
    /// after a restore, proof that the key and the database belong together.
    Check,
    /// Reseal every secret under a new master key, in one transaction. Stop every host
    /// first. With the key in DATA_DIR/master.key, a new one is made and replaces it (the
    /// old one is kept as master.key.retired-<time>, for older backups); with
    /// AGENT_HOST_MASTER_KEY, give the new key on standard input and then to every host.
    Rotate {
        /// Read the new key (64 hex digits or base64) from standard input.
        #[arg(long)]
        new_key_stdin: bool,
    },
    /// Reseal under the current master key the secrets that open only with a retired one
    /// (written by a host still running the old key after a rotation, or restored from an
    /// older backup), in one transaction. Secrets that open already are left as they are.
    Reseal {
        /// The retired key's file (e.g. DATA_DIR/master.key.retired-<time>).
        #[arg(long, value_name = "PATH", conflicts_with = "retired_key_stdin")]
        retired_key_file: Option<std::path::PathBuf>,
        /// Read the retired key (64 hex digits or base64) from standard input.
        #[arg(long)]
        retired_key_stdin: bool,
    },
}

pub async fn run(ctx: &Ctx, command: SecretsCmd) -> anyhow::Result<()> {
    let data_dir = &ctx.settings.data_dir;
    let current = MasterKey::load_or_create(data_dir).context("master key")?;
    match command {
        SecretsCmd::Check => {
            let opened = master_key::check(&ctx.store, &current).await.map_err(service)?;
            ctx.out.print(
                &json!({ "opened": opened }),
                &format!("All {opened} sealed secrets open with this master key."),
            );
        }
        SecretsCmd::Reseal {
            retired_key_file,
            retired_key_stdin,
        } => {
            let text = match (retired_key_file, retired_key_stdin) {
                (Some(path), false) => std::fs::read_to_string(&path)
                    .with_context(|| format!("cannot read the retired key {}", path.display()))?,
                (None, true) => read_stdin_line("the retired master key")?,
                _ => {
                    return Err(anyhow!(
                        "give the retired key: --retired-key-file PATH or --retired-key-stdin"
                    ));
                }
            };
            let retired = crate::secrets::decode(text.trim())
                .ok_or_else(|| anyhow!("the retired master key must be 32 bytes as 64 hex digits or base64"))?;
            let resealed = master_key::reseal_from(&ctx.store, Arc::new(retired), Arc::new(current))
                .await
                .map_err(service)?;
            ctx.out.print(
                &json!({ "resealed": resealed }),
                &format!("Resealed {resealed} secrets from the retired key under the current one."),
            );
        }
        SecretsCmd::Rotate { new_key_stdin } => {
            let source = KeySource::of(data_dir);
            let new = match (new_key_stdin, &source) {
                (true, _) => {
                    let text = read_stdin_line("the new master key")?;
                    crate::secrets::decode(&text)
                        .ok_or_else(|| anyhow!("the new master key must be 32 bytes as 64 hex digits or base64"))?
                }
                (false, KeySource::File(_)) => MasterKey::generate(),
                (false, KeySource::Environment) => {
                    return Err(anyhow!(
                        "the master key comes from AGENT_HOST_MASTER_KEY: give the new key with --new-key-stdin \
                         (e.g. from `openssl rand -hex 32`), then set it on every host"
                    ));
                }
            };
            if new.bytes() == current.bytes() {
                return Err(anyhow!("the new master key is the current one"));
            }
            // Checked before the key file is written: a refusal leaves nothing behind.
            master_key::check(&ctx.store, &current).await.map_err(service)?;
            // Another process of this data dir starting now waits until the new key is in
            // place (or forgotten), rather than judge a rotation half done.
            let _lock = match source {
                KeySource::File(_) => {
                    let lock = key_file::lock(data_dir).context("locking the master key")?;
                    new.write_pending(data_dir).context("writing the new master key")?;
                    Some(lock)
                }
                KeySource::Environment => None,
            };
            let rotated = master_key::rotate(&ctx.store, Arc::new(current), Arc::new(new)).await;
            let resealed = match rotated {
                Ok(resealed) => resealed,
                Err(err) => {
                    if let KeySource::File(_) = source {
                        key_file::forget_pending(data_dir).context("forgetting the new master key")?;
                    }
                    return Err(service(err));
                }
            };
            crate::faults::crash_point("secrets:after_commit");
            let (key, text) = match source {
                KeySource::File(path) => {
                    let retired = key_file::promote_pending(data_dir).context("replacing the master key file")?;
                    (
                        json!({ "file": path, "retired": retired }),
                        format!(
                            "Resealed {resealed} secrets. The new key is in {}; the old one is kept as {} for older backups.",
                            path.display(),
                            retired.display()
                        ),
                    )
                }
                KeySource::Environment => (
                    json!({ "environment": "AGENT_HOST_MASTER_KEY" }),
                    format!("Resealed {resealed} secrets. Set AGENT_HOST_MASTER_KEY to the new key on every host."),
                ),
            };
            ctx.out.print(&json!({ "resealed": resealed, "key": key }), &text);
        }
    }
    Ok(())
}
