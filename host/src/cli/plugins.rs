//! `agent-host plugin ...`

use std::path::PathBuf;

use anyhow::{Context, anyhow};
use clap::Subcommand;
use serde_json::json;

use super::Ctx;
use crate::views;

#[derive(Subcommand)]
pub enum PluginCmd {
    /// Check a component and print its manifest.
    Inspect { file: PathBuf },
    /// Create a plugin crate that builds as is (cargo build --release --target wasm32-wasip2).
    New {
        /// The plugin's name (a-z, 0-9, _ and -); also its folder.
        name: String,
        /// Where to create it (default: the current directory).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Path of the agent-plugin-sdk crate (default: the one this binary was built from).
        #[arg(long, value_name = "DIR")]
        sdk_path: Option<PathBuf>,
    },
}

pub async fn run(ctx: &Ctx, command: PluginCmd) -> anyhow::Result<()> {
    match command {
        PluginCmd::Inspect { file } => {
            let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            let services = ctx.services()?;
            let inspection = services
                .plugins
                .inspect(bytes, crate::plugins::PluginKind::Custom)
                .await
                .map_err(|e| anyhow!("{}: {e}", file.display()))?;
            let value = views::inspection(&inspection);
            let m = &inspection.manifest;
            let text = format!(
                "{} {} — {}\nagent:plugin@{}  sha256 {}  {} bytes\ncapabilities: {}\nparameters: {}",
                m.name,
                m.version,
                m.description,
                inspection.wit_version,
                inspection.hash,
                inspection.size,
                value["manifest"]["capabilities"],
                value["manifest"]["parameters"]
            );
            ctx.out.print(&value, &text);
        }
        PluginCmd::New { name, dir, sdk_path } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from("."));
            let sdk = sdk_path.unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../plugin-sdk")));
            let created = crate::scaffold::create(&dir, &name, &sdk)?;
            ctx.out.print(
                &json!({ "path": created.display().to_string(), "name": name }),
                &format!(
                    "created {}\nbuild it: cd {} && cargo build --release --target wasm32-wasip2",
                    created.display(),
                    created.display()
                ),
            );
        }
    }
    Ok(())
}
