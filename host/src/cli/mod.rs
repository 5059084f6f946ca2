//! The `agent-host` command line: one module per resource, each a thin layer
//! over the services the management API calls too, printing the JSON of `views`. Every
//! command prints one JSON object with `--json`; errors are one line on stderr (or
//! `{"error": ...}` with `--json`) and a non-zero exit.

mod accounts;
mod agents;
mod db;
mod integrations;
mod keys;
mod logs;
mod plugins;
mod remote_mcp;
mod schedules;
mod secrets;
mod serve;
mod wallets;
mod watch;

use std::path::PathBuf;

use anyhow::{Context, anyhow};
use clap::{Parser, Subcommand};
use serde_json::{Value, json};

use crate::app;
use crate::config::Settings;
use crate::domain::Agent;
use crate::services::{ServiceError, Services};
use crate::store::Store;

#[derive(Parser)]
#[command(
    name = "agent-host",
    version,
    about = "Agent interaction service and WebAssembly plugin host"
)]
pub struct Cli {
    /// Data directory: database, component cache, master key, agent-host.toml.
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand)]
enum Top {
    /// Run the server (migrations first).
    Serve {
        /// Address to listen on; repeat for more (default 127.0.0.1:8080).
        #[arg(long, value_name = "ADDR")]
        listen: Vec<String>,
    },
    /// Seed a demo account, key and agent (once), print the key, and serve.
    Demo {
        #[arg(long, value_name = "ADDR")]
        listen: Vec<String>,
    },
    /// Accounts own agents and API keys.
    #[command(subcommand)]
    Account(accounts::AccountCmd),
    /// API keys for the keyed API.
    #[command(subcommand)]
    Key(keys::KeyCmd),
    /// Agents, defined by TOML manifests.
    #[command(subcommand)]
    Agent(agents::AgentCmd),
    /// Command plugins (WebAssembly components).
    #[command(subcommand)]
    Plugin(plugins::PluginCmd),
    /// The agent's chat-app bot (Telegram).
    #[command(subcommand)]
    Chatapp(integrations::ChatappCmd),
    /// The agent's social account (X).
    #[command(subcommand)]
    Social(integrations::SocialCmd),
    /// The agent's USDC wallets on Solana and Base.
    #[command(subcommand)]
    Wallet(wallets::WalletCmd),
    /// x402 payments the agent received.
    #[command(subcommand)]
    Payments(wallets::PaymentsCmd),
    /// The database itself.
    #[command(subcommand)]
    Db(db::DbCmd),
    /// The master key and the secrets it seals.
    #[command(subcommand)]
    Secrets(secrets::SecretsCmd),
    /// Remote MCP servers whose tools an agent's chat calls, and their credentials.
    #[command(subcommand)]
    McpServer(remote_mcp::McpServerCmd),
    /// Work an agent does on its own: command runs and prompts on a schedule.
    #[command(subcommand)]
    Schedule(schedules::ScheduleCmd),
    /// An agent's plugin runs that logged or failed, with their lines (newest first).
    Logs(logs::LogsArgs),
}

/// What every command gets: the settings, the opened store, and how to print.
struct Ctx {
    settings: Settings,
    store: Store,
    out: Output,
}

impl Ctx {
    /// The full service set, for commands that reach plugins, chains or secrets.
    fn services(&self) -> anyhow::Result<Services> {
        app::cli_services(self.settings.clone(), self.store.clone())
    }

    async fn agent(&self, id_or_username: &str) -> anyhow::Result<Agent> {
        self.store
            .agent(id_or_username)
            .await?
            .ok_or_else(|| anyhow!("no agent '{id_or_username}'"))
    }
}

/// Runs the CLI and returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    let json_output = cli.json;
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let result = runtime.block_on(run(cli));
    // Whatever is still running (a plugin past the shutdown grace) is not waited for.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(()) => 0,
        Err(err) if err.is::<AlreadyReported>() => 1,
        Err(err) => {
            let message = one_line(&err);
            if json_output {
                println!("{}", json!({ "error": message }));
            } else {
                eprintln!("error: {message}");
            }
            1
        }
    }
}

/// A failure the command has printed itself (failed plugin cases): exit 1, print nothing more.
#[derive(Debug)]
struct AlreadyReported;

impl std::fmt::Display for AlreadyReported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("reported above")
    }
}

impl std::error::Error for AlreadyReported {}

/// `context: cause: cause` on one line.
fn one_line(err: &anyhow::Error) -> String {
    err.chain()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(": ")
        .replace('\n', " ")
}

struct Output {
    json: bool,
}

impl Output {
    /// Prints the JSON object, or the text lines.
    fn print(&self, value: &Value, text: &str) {
        if self.json {
            println!("{value}");
        } else {
            println!("{text}");
        }
    }

    /// A list: the JSON, or one line per item (`empty` when there are none).
    fn list<T>(&self, value: &Value, items: &[T], line: impl Fn(&T) -> String, empty: &str) {
        let text = items.iter().map(line).collect::<Vec<_>>().join("\n");
        self.print(value, if text.is_empty() { empty } else { &text });
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let settings = Settings::load(cli.data_dir.as_deref())?;
    let serving = matches!(cli.command, Top::Serve { .. } | Top::Demo { .. });
    crate::telemetry::init(
        if serving { &settings.server.log } else { "warn" },
        settings.server.log_format,
        settings
            .telemetry
            .otlp_endpoint
            .as_deref()
            .filter(|_| serving)
            .map(|endpoint| crate::telemetry::traces::Export {
                endpoint,
                sample_ratio: settings.telemetry.otlp_sample_ratio.0,
                trusted_peers: &settings.telemetry.otlp_trusted_peers,
            }),
    );
    let out = Output { json: cli.json };
    match cli.command {
        // A plugin author's commands need neither the server nor its database.
        Top::Plugin(command) => plugins::run(settings, &out, command).await,
        command => with_store(settings, out, command).await,
    }
}

async fn with_store(settings: Settings, out: Output, command: Top) -> anyhow::Result<()> {
    let store = app::open_store(&settings).await?;
    let ctx = Ctx { settings, store, out };
    match command {
        Top::Serve { listen } => serve::serve(ctx, listen, None).await,
        Top::Demo { listen } => serve::demo(ctx, listen).await,
        Top::Account(command) => accounts::run(&ctx, command).await,
        Top::Key(command) => keys::run(&ctx, command).await,
        Top::Agent(command) => agents::run(&ctx, command).await,
        Top::Plugin(command) => plugins::run(ctx.settings, &ctx.out, command).await,
        Top::Chatapp(command) => integrations::chatapp(&ctx, command).await,
        Top::Social(command) => integrations::social(&ctx, command).await,
        Top::Wallet(command) => wallets::wallet(&ctx, command).await,
        Top::Payments(command) => wallets::payments(&ctx, command).await,
        Top::Db(command) => db::run(&ctx, command).await,
        Top::Secrets(command) => secrets::run(&ctx, command).await,
        Top::Schedule(command) => schedules::run(&ctx, command).await,
        Top::McpServer(command) => remote_mcp::run(&ctx, command).await,
        Top::Logs(args) => logs::run(&ctx, args).await,
    }
}

fn service(err: ServiceError) -> anyhow::Error {
    anyhow!(err.to_string())
}

/// One line from standard input: secrets come this way to stay out of `ps`.
fn read_stdin_line(what: &str) -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .with_context(|| format!("reading {what} from standard input"))?;
    Ok(line.trim().to_string())
}
