//! `agent-host plugin ...`: what a plugin author does on their own machine. None of it
//! needs a server or the server's database: each command gets a local workspace (a
//! throwaway one, or the `--kv-dir` the author keeps between runs).

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use clap::Subcommand;
use serde_json::{Map, Value, json};

use super::{AlreadyReported, Output, service, watch};
use crate::app;
use crate::config::Settings;
use crate::scaffold::Lang;
use crate::services::Services;
use crate::services::local_run::{self, LocalSetup};
use crate::services::plugin_cases;
use crate::views;

#[derive(Subcommand)]
pub enum PluginCmd {
    /// Check a component and print its manifest.
    Inspect { file: PathBuf },
    /// Create a plugin project that builds as is, with cases for `plugin test`.
    New {
        /// The plugin's name (a-z, 0-9, _ and -); also its folder.
        name: String,
        /// Its language: rust (the agent-plugin-sdk crate), js (plugin-sdk/js and
        /// componentize-js) or python (componentize-py).
        #[arg(long, value_enum, default_value = "rust")]
        lang: Lang,
        /// Where to create it (default: the current directory).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The language's SDK: the agent-plugin-sdk crate, or plugin-sdk/js (default: the
        /// ones this binary was built from).
        #[arg(long, value_name = "DIR")]
        sdk_path: Option<PathBuf>,
    },
    /// Run the component's `execute` once, in the server's sandbox (its limits, its outbound
    /// guard), and print the answer or the error. No server or database is needed.
    Run {
        file: PathBuf,
        /// A parameter, read as the plugin declares its type; repeat for more.
        #[arg(long = "param", value_name = "NAME=VALUE")]
        params: Vec<String>,
        /// The command's `config` table as a JSON object.
        #[arg(long, value_name = "JSON")]
        config: Option<String>,
        /// A host the plugin may reach (as `allowed_hosts` in an agent manifest); repeat for more.
        #[arg(long = "allow-host", value_name = "HOST")]
        allow_hosts: Vec<String>,
        /// Let the plugin use the language model (`allow_llm`).
        #[arg(long)]
        allow_llm: bool,
        /// The run's deadline (default: the server's plugin_timeout_ms, or job_timeout_ms
        /// for a plugin that calls itself long-running).
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
        /// Keep the plugin's key-value store in DIR between runs (default: forgotten).
        #[arg(long, value_name = "DIR")]
        kv_dir: Option<PathBuf>,
        #[command(flatten)]
        watch: WatchArgs,
    },
    /// Run the cases of a TOML file (default plugin-tests.toml) against the component it
    /// names, in order, on one fresh key-value store; exit 1 if any fails.
    Test {
        /// The cases file.
        #[arg(default_value = plugin_cases::DEFAULT_FILE)]
        cases: PathBuf,
        /// The component, instead of the one the file names.
        #[arg(long, value_name = "FILE.wasm")]
        plugin: Option<PathBuf>,
        #[command(flatten)]
        watch: WatchArgs,
    },
}

#[derive(clap::Args)]
pub struct WatchArgs {
    /// Rebuild and run again whenever a source in the current folder (or the component)
    /// changes, until stopped.
    #[arg(long)]
    watch: bool,
    /// The build `--watch` runs (default: the folder's own: cargo for wasm32-wasip2,
    /// `npm run build`, or ./build.sh).
    #[arg(long, value_name = "COMMAND", requires = "watch")]
    build: Option<String>,
}

impl WatchArgs {
    /// Runs `once`, or keeps running it as the sources change.
    async fn run<F, Fut>(&self, component: &Path, once: F) -> anyhow::Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<()>>,
    {
        let mut once = once;
        if !self.watch {
            return once().await;
        }
        let folder = std::env::current_dir().context("cannot read the current folder")?;
        let build = watch::build_command(&folder, self.build.as_deref());
        watch::watch(&folder, component, build, once).await
    }
}

pub async fn run(settings: Settings, out: &Output, command: PluginCmd) -> anyhow::Result<()> {
    match command {
        PluginCmd::Inspect { file } => {
            let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            let workspace = Workspace::new(None)?;
            let services = workspace.services(settings).await?;
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
            out.print(&value, &text);
        }
        PluginCmd::New {
            name,
            lang,
            dir,
            sdk_path,
        } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from("."));
            let repo = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
            let sdk = sdk_path.unwrap_or_else(|| match lang {
                Lang::Js => repo.join("plugin-sdk/js"),
                Lang::Rust | Lang::Python => repo.join("plugin-sdk"),
            });
            // A new plugin targets the newest world this host serves.
            let wit = repo.join(format!("wit/v{}", crate::plugins::bindings::WIT_VERSIONS[0]));
            let created = crate::scaffold::create(&dir, &name, lang, &sdk, &wit)?;
            let build = match lang {
                Lang::Rust => "cargo build --release --target wasm32-wasip2",
                Lang::Js => "npm run build",
                Lang::Python => "./build.sh",
            };
            out.print(
                &json!({ "path": created.display().to_string(), "name": name }),
                &format!(
                    "created {}\nbuild it: cd {} && {build}\ntry it: agent-host plugin test",
                    created.display(),
                    created.display()
                ),
            );
        }
        PluginCmd::Test { cases, plugin, watch } => {
            let component = plugin_cases::read(&cases, plugin.as_deref())
                .map_err(service)?
                .setup
                .file;
            watch
                .run(&component, || {
                    test_cases(settings.clone(), out, &cases, plugin.as_deref())
                })
                .await?
        }
        PluginCmd::Run {
            file,
            params,
            config,
            allow_hosts,
            allow_llm,
            timeout_ms,
            kv_dir,
            watch,
        } => {
            let setup = LocalSetup {
                file: std::path::absolute(&file).with_context(|| format!("cannot find {}", file.display()))?,
                config: match config {
                    Some(text) => config_object(&text)?,
                    None => Map::new(),
                },
                allowed_hosts: allow_hosts,
                allow_llm,
                timeout_ms,
            };
            let parameters = params
                .iter()
                .map(|p| name_value(p))
                .collect::<anyhow::Result<Map<String, Value>>>()?;
            let component = setup.file.clone();
            watch
                .run(&component, || {
                    run_once(settings.clone(), out, &setup, parameters.clone(), kv_dir.as_deref())
                })
                .await?;
        }
    }
    Ok(())
}

/// One `plugin run`: install the component in the workspace, run it, print its answer.
async fn run_once(
    settings: Settings,
    out: &Output,
    setup: &LocalSetup,
    parameters: Map<String, Value>,
    kv_dir: Option<&Path>,
) -> anyhow::Result<()> {
    let workspace = Workspace::new(kv_dir)?;
    let services = workspace.services(settings).await?;
    let plugin = local_run::install(&services, setup).await.map_err(service)?;
    let (result, units) = local_run::run_metered(&services, &plugin, parameters)
        .await
        .map_err(service)?;
    let media = result
        .media_url
        .as_deref()
        .map(|u| format!("\nmedia: {u}"))
        .unwrap_or_default();
    // What a payer would be charged for, were the command sold by use (shown when reported).
    let metered = match units {
        0 => String::new(),
        n => format!("\nunits: {n}"),
    };
    let mut printed =
        json!({ "response": result.response, "format": result.format.as_str(), "mediaUrl": result.media_url });
    if units > 0 {
        printed["units"] = json!(units);
    }
    out.print(&printed, &format!("{}{media}{metered}", result.response));
    Ok(())
}

/// `name=value` from `--param`: text, read as the parameter's type when the run starts.
fn name_value(text: &str) -> anyhow::Result<(String, Value)> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| anyhow!("--param {text}: write it as NAME=VALUE"))?;
    Ok((name.trim().to_string(), Value::String(value.to_string())))
}

/// `plugin test`: every case in order, each reported; the summary last.
async fn test_cases(settings: Settings, out: &Output, cases: &Path, plugin: Option<&Path>) -> anyhow::Result<()> {
    let file = plugin_cases::read(cases, plugin).map_err(service)?;
    let workspace = Workspace::new(None)?;
    let services = workspace.services(settings).await?;
    let installed = local_run::install(&services, &file.setup).await.map_err(service)?;
    let mut reports = Vec::with_capacity(file.cases.len());
    let mut lines = Vec::with_capacity(file.cases.len() + 1);
    for case in &file.cases {
        let outcome = local_run::run(&services, &installed, case.params.clone()).await;
        let verdict = plugin_cases::check(case, &outcome);
        lines.push(match &verdict {
            Ok(()) => format!("ok    {}", case.name),
            Err(why) => format!("FAIL  {}: {why}", case.name),
        });
        reports.push(json!({ "name": case.name, "passed": verdict.is_ok(), "detail": verdict.err() }));
    }
    let failed = reports.iter().filter(|r| r["passed"] == false).count();
    let passed = reports.len() - failed;
    lines.push(format!("{passed} passed, {failed} failed"));
    out.print(
        &json!({ "passed": passed, "failed": failed, "cases": reports }),
        &lines.join("\n"),
    );
    if failed > 0 {
        Err(AlreadyReported.into())
    } else {
        Ok(())
    }
}

fn config_object(text: &str) -> anyhow::Result<Map<String, Value>> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(anyhow!("--config must be a JSON object")),
        Err(e) => Err(anyhow!("--config is not JSON: {e}")),
    }
}

/// Where a local command keeps its database, master key and compiled components: the
/// author's `--kv-dir`, or a folder of its own that is removed afterwards.
struct Workspace {
    dir: PathBuf,
    throwaway: bool,
}

impl Workspace {
    fn new(kept: Option<&Path>) -> anyhow::Result<Workspace> {
        let (dir, throwaway) = match kept {
            Some(dir) => (dir.to_path_buf(), false),
            None => {
                let unique = format!(
                    "agent-host-plugin-{}-{}",
                    std::process::id(),
                    crate::random::hex_token(8)
                );
                (std::env::temp_dir().join(unique), true)
            }
        };
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(Workspace { dir, throwaway })
    }

    /// The server's services, with its limits and outbound rules, over a local SQLite
    /// store in this workspace.
    async fn services(&self, mut settings: Settings) -> anyhow::Result<Services> {
        settings.data_dir = self.dir.clone();
        settings.database.database_url = None;
        // Compiled components outlive the workspace: a large one (JavaScript, Python)
        // compiles once, not on every run.
        if settings.plugins.plugin_cache_dir.is_none() {
            settings.plugins.plugin_cache_dir = user_cache_dir().map(|d| d.join("agent-host").display().to_string());
        }
        let store = app::open_store(&settings).await?;
        app::cli_services(settings, store)
    }
}

/// `$XDG_CACHE_HOME`, else `~/.cache`.
fn user_cache_dir() -> Option<PathBuf> {
    let from = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    from("XDG_CACHE_HOME").or_else(|| from("HOME").map(|home| home.join(".cache")))
}

impl Drop for Workspace {
    fn drop(&mut self) {
        if self.throwaway {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
