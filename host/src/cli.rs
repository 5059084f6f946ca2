//! The `agent-host` command line (DESIGN.md §3). Every command prints one JSON object
//! with `--json`; errors are one line on stderr (or `{"error": ...}` with `--json`) and a
//! non-zero exit.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use clap::{Parser, Subcommand};
use serde_json::{Value, json};

use crate::app::{self, Server};
use crate::config::Settings;
use crate::domain::{Network, Plan};
use crate::services::{ServiceError, accounts, agents, keys, wallets};
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
    Account(AccountCmd),
    /// API keys for the keyed API.
    #[command(subcommand)]
    Key(KeyCmd),
    /// Agents, defined by TOML manifests.
    #[command(subcommand)]
    Agent(AgentCmd),
    /// Command plugins (WebAssembly components).
    #[command(subcommand)]
    Plugin(PluginCmd),
    /// The agent's chat-app bot (Telegram).
    #[command(subcommand)]
    Chatapp(ChatappCmd),
    /// The agent's social account (X).
    #[command(subcommand)]
    Social(SocialCmd),
    /// The agent's USDC wallets on Solana and Base.
    #[command(subcommand)]
    Wallet(WalletCmd),
    /// x402 payments the agent received.
    #[command(subcommand)]
    Payments(PaymentsCmd),
    /// The database itself.
    #[command(subcommand)]
    Db(DbCmd),
}

#[derive(Subcommand)]
enum DbCmd {
    /// Copy every row of this database (the data dir's SQLite file, or database_url) into
    /// an empty PostgreSQL database, which is migrated first: how a single host moves to a
    /// database several hosts share. Stop the server first.
    Copy {
        /// The target, postgres://user:password@host:port/name
        #[arg(long, value_name = "URL")]
        to: String,
    },
}

#[derive(Subcommand)]
enum PaymentsCmd {
    /// The agent's payments, newest first, with their receipts and state.
    List {
        #[arg(long)]
        agent: String,
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
}

#[derive(Subcommand)]
enum WalletCmd {
    /// Generate a new keypair for the agent on a network and print its address.
    Create {
        #[arg(long)]
        agent: String,
        /// solana or base
        #[arg(long)]
        network: String,
    },
    /// Import an existing secret key from standard input (Solana: base58 keypair or a
    /// solana-keygen JSON file's contents; Base: 0x-hex private key).
    Import {
        #[arg(long)]
        agent: String,
        #[arg(long)]
        network: String,
    },
    /// The agent's wallet addresses.
    List {
        #[arg(long)]
        agent: String,
    },
    /// The agent's transfers, newest first, with their state.
    Transfers {
        #[arg(long)]
        agent: String,
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
}

#[derive(Subcommand)]
enum SocialCmd {
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

#[derive(Subcommand)]
enum ChatappCmd {
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
enum PluginCmd {
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

#[derive(Subcommand)]
enum AccountCmd {
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

#[derive(Subcommand)]
enum KeyCmd {
    /// Create a key; it is printed this once and stored only as a hash.
    Create {
        #[arg(long)]
        account: String,
    },
    /// List an account's keys (ids, times; never secrets).
    List {
        #[arg(long)]
        account: String,
    },
    /// Revoke a key by its id.
    Revoke { key_id: String },
}

#[derive(Subcommand)]
enum AgentCmd {
    /// Create or update an agent from its manifest; prints the agent id.
    Apply {
        file: PathBuf,
        /// Owner of a new agent.
        #[arg(long)]
        account: Option<String>,
    },
    /// List all agents.
    List,
    /// Show one agent and its commands.
    Show { id_or_username: String },
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
    match runtime.block_on(run(cli)) {
        Ok(()) => 0,
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
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let settings = Settings::load(cli.data_dir.as_deref())?;
    let out = Output { json: cli.json };
    let serving = matches!(cli.command, Top::Serve { .. } | Top::Demo { .. });
    init_tracing(if serving { &settings.log } else { "warn" });
    let store = app::open_store(&settings).await?;
    match cli.command {
        Top::Serve { listen } => serve(settings, store, listen, &out, None).await,
        Top::Demo { listen } => demo(settings, store, listen, &out).await,
        Top::Account(AccountCmd::Create { name, plan, rpm, rpd }) => {
            let plan = Plan::parse(&plan).ok_or_else(|| anyhow!("unknown plan {plan}"))?;
            let account = accounts::create(&store, &name, plan, rpm, rpd).await.map_err(service)?;
            out.print(
                &json!({
                    "id": account.id, "name": account.name, "plan": account.plan,
                    "rpm": account.limits.per_minute, "rpd": account.limits.per_day,
                }),
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
        Top::Key(KeyCmd::Create { account }) => {
            let account = accounts::by_name(&store, &account).await.map_err(service)?;
            let issued = keys::issue(&store, &account).await.map_err(service)?;
            out.print(
                &json!({ "key": issued.key, "id": issued.info.id, "account": account.name }),
                &issued.key,
            );
            if !out.json {
                eprintln!(
                    "Key {} for account '{}': shown only this once; store it now.",
                    issued.info.id, account.name
                );
            }
            Ok(())
        }
        Top::Key(KeyCmd::List { account }) => {
            let account = accounts::by_name(&store, &account).await.map_err(service)?;
            let list = store.list_keys(&account.id).await?;
            let rows: Vec<Value> = list
                .iter()
                .map(|k| {
                    json!({
                        "id": k.id,
                        "created_at": crate::clock::iso(k.created_at),
                        "last_used_at": k.last_used_at.map(crate::clock::iso),
                        "revoked_at": k.revoked_at.map(crate::clock::iso),
                        "active": k.revoked_at.is_none(),
                    })
                })
                .collect();
            let text = list
                .iter()
                .map(|k| {
                    format!(
                        "{}  created {}  last used {}  {}",
                        k.id,
                        crate::clock::iso(k.created_at),
                        k.last_used_at.map(crate::clock::iso).unwrap_or_else(|| "never".into()),
                        if k.revoked_at.is_some() { "REVOKED" } else { "active" }
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            out.print(
                &json!({ "account": account.name, "keys": rows }),
                if text.is_empty() { "no keys" } else { &text },
            );
            Ok(())
        }
        Top::Key(KeyCmd::Revoke { key_id }) => {
            let id = keys::normalise_key_id(&key_id);
            let key = store
                .revoke_key(&id)
                .await?
                .ok_or_else(|| anyhow!("no key with id {key_id}"))?;
            out.print(
                &json!({ "id": key.id, "revoked": true, "revoked_at": key.revoked_at.map(crate::clock::iso) }),
                &format!("revoked key {}", key.id),
            );
            Ok(())
        }
        Top::Agent(AgentCmd::Apply { file, account }) => {
            let services = app::cli_services(settings, store)?;
            let (manifest, outcome) = agents::apply_file(&services, &file, account.as_deref())
                .await
                .map_err(service)?;
            out.print(
                &json!({
                    "id": outcome.agent_id,
                    "username": manifest.agent.username,
                    "created": outcome.created,
                    "commands": outcome.command_ids.iter().map(|(name, id)| json!({ "command": name, "id": id })).collect::<Vec<_>>(),
                    "removed_commands": outcome.removed_commands,
                }),
                &outcome.agent_id,
            );
            Ok(())
        }
        Top::Plugin(PluginCmd::Inspect { file }) => {
            let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            let services = app::cli_services(settings, store)?;
            let inspection = services
                .plugins
                .inspect(bytes, crate::plugins::PluginKind::Custom)
                .await
                .map_err(|e| anyhow!("{}: {e}", file.display()))?;
            let value = crate::plugins::describe(&inspection);
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
            Ok(())
        }
        Top::Plugin(PluginCmd::New { name, dir, sdk_path }) => {
            let dir = dir.unwrap_or_else(|| PathBuf::from("."));
            let sdk = sdk_path.unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../plugin-sdk")));
            let created = crate::scaffold::create(&dir, &name, &sdk)?;
            out.print(
                &json!({ "path": created.display().to_string(), "name": name }),
                &format!(
                    "created {}\nbuild it: cd {} && cargo build --release --target wasm32-wasip2",
                    created.display(),
                    created.display()
                ),
            );
            Ok(())
        }
        Top::Wallet(command) => wallet(settings, store, command, &out).await,
        Top::Db(DbCmd::Copy { to }) => {
            let target = crate::store::Store::connect(&to, 4)
                .await
                .context("cannot open the target database (--to)")?;
            let copied = store.copy_into(&target).await?;
            let rows: u64 = copied.iter().map(|(_, n)| *n as u64).sum();
            let tables: serde_json::Map<String, Value> =
                copied.iter().map(|(table, n)| (table.to_string(), json!(n))).collect();
            out.print(
                &json!({ "copied": tables, "rows": rows }),
                &format!(
                    "Copied {rows} rows in {} tables. Give every host this database_url and the same master key.",
                    copied.len()
                ),
            );
            Ok(())
        }
        Top::Payments(PaymentsCmd::List { agent, limit }) => {
            let found = find_agent(&store, &agent).await?;
            let list = store.payments_of(&found.id, limit).await?;
            let rows: Vec<Value> = list
                .iter()
                .map(|p| {
                    json!({
                        "id": p.id, "network": p.network, "state": p.state, "command": p.command,
                        "x402Version": p.x402_version,
                        "receipt": {
                            "amountPaidMicroUsdc": p.amount.0,
                            "amountPaidUsdc": p.amount.to_json_number(),
                            "transactionSignature": p.transaction_signature,
                            "timestamp": crate::clock::iso(p.created_at),
                            "payer": p.payer,
                            "payTo": p.pay_to,
                        },
                        "job_id": p.job_id, "refund_transfer_id": p.refund_transfer_id, "error": p.error,
                        "updated_at": crate::clock::iso(p.updated_at),
                    })
                })
                .collect();
            let text = list
                .iter()
                .map(|p| {
                    format!(
                        "{} {:<8} {:<7} {} USDC from {} for {} {}{}",
                        p.id,
                        p.state,
                        p.network,
                        p.amount,
                        p.payer,
                        p.command
                            .as_deref()
                            .map(|c| format!("/{c}"))
                            .unwrap_or_else(|| "a message".into()),
                        p.transaction_signature.as_deref().unwrap_or("(not settled)"),
                        p.error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            out.print(&json!(rows), if text.is_empty() { "no payments" } else { &text });
            Ok(())
        }
        Top::Chatapp(ChatappCmd::Connect {
            agent,
            token,
            webhook_url,
        }) => {
            let services = app::cli_services(settings, store)?;
            let found = find_agent(&services.store, &agent).await?;
            let token = match token {
                Some(token) => token,
                None => read_stdin_line("the bot token")?,
            };
            let username = crate::services::chatapp::connect(&services, &found, &token)
                .await
                .map_err(service)?;
            if let Some(url) = &webhook_url {
                crate::services::chatapp::register_webhook(&services, &found, url)
                    .await
                    .map_err(service)?;
            }
            out.print(
                &json!({ "agent": found.def.username, "bot_username": username, "enabled": true, "webhook_url": webhook_url }),
                &format!("connected @{username} to agent '{}'", found.def.username),
            );
            Ok(())
        }
        Top::Chatapp(ChatappCmd::Disconnect { agent }) => {
            let services = app::cli_services(settings, store)?;
            let found = find_agent(&services.store, &agent).await?;
            let removed = crate::services::chatapp::disconnect(&services, &found)
                .await
                .map_err(service)?;
            out.print(
                &json!({ "agent": found.def.username, "disconnected": removed }),
                &if removed {
                    format!("disconnected the bot of '{}'", found.def.username)
                } else {
                    "no bot was connected".into()
                },
            );
            Ok(())
        }
        Top::Chatapp(ChatappCmd::Enable { agent }) => set_chatapp_enabled(&store, &agent, true, &out).await,
        Top::Chatapp(ChatappCmd::Disable { agent }) => set_chatapp_enabled(&store, &agent, false, &out).await,
        Top::Social(SocialCmd::Connect {
            agent,
            access_token,
            refresh_token,
            expires_in,
        }) => {
            let services = app::cli_services(settings, store)?;
            let found = find_agent(&services.store, &agent).await?;
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
            let username = crate::services::social::connect(&services, &found, &access, refresh.as_deref(), expires_in)
                .await
                .map_err(service)?;
            out.print(
                &json!({ "agent": found.def.username, "username": username, "refreshable": refresh.is_some() }),
                &format!("connected @{username} to agent '{}'", found.def.username),
            );
            Ok(())
        }
        Top::Social(SocialCmd::Disconnect { agent }) => {
            let services = app::cli_services(settings, store)?;
            let found = find_agent(&services.store, &agent).await?;
            let removed = crate::services::social::disconnect(&services, &found)
                .await
                .map_err(service)?;
            out.print(
                &json!({ "agent": found.def.username, "disconnected": removed }),
                if removed {
                    "disconnected"
                } else {
                    "no account was connected"
                },
            );
            Ok(())
        }
        Top::Agent(AgentCmd::List) => {
            let all = store.list_agents().await?;
            let rows: Vec<Value> = all
                .iter()
                .map(|s| {
                    json!({
                        "id": s.agent.id, "username": s.agent.def.username, "name": s.agent.def.name,
                        "account": s.account_name, "commands": s.command_count,
                    })
                })
                .collect();
            let text = all
                .iter()
                .map(|s| {
                    format!(
                        "{}  {}  {}  ({} commands, account {})",
                        s.agent.id, s.agent.def.username, s.agent.def.name, s.command_count, s.account_name
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            out.print(
                &json!({ "agents": rows }),
                if text.is_empty() { "no agents" } else { &text },
            );
            Ok(())
        }
        Top::Agent(AgentCmd::Show { id_or_username }) => {
            let agent = store
                .agent(&id_or_username)
                .await?
                .ok_or_else(|| anyhow!("no agent '{id_or_username}'"))?;
            let account = store
                .account_by_id(&agent.account_id)
                .await?
                .map(|a| a.name)
                .unwrap_or_default();
            let commands = store.commands(&agent.id).await?;
            let value = json!({
                "id": agent.id,
                "username": agent.def.username,
                "name": agent.def.name,
                "account": account,
                "personality": agent.def.personality,
                "knowledge": agent.def.knowledge,
                "x402": {
                    "enabled": agent.def.x402.enabled,
                    "default_price_usd": agent.def.x402.default_price.map(|p| p.to_json_number()),
                    "networks": agent.def.x402.networks,
                },
                "created_at": crate::clock::iso(agent.created_at),
                "updated_at": crate::clock::iso(agent.updated_at),
                "commands": commands.iter().map(|c| json!({
                    "id": c.id, "command": c.def.name, "handler_type": c.def.handler_type.as_str(),
                    "description": c.def.description, "enabled": c.def.enabled, "integrations": c.def.integrations,
                    "price_usd": c.def.price.map(|p| p.to_json_number()), "parameters": c.def.parameters,
                })).collect::<Vec<_>>(),
            });
            let mut text = format!(
                "{} ({})  id {}  account {}\n",
                agent.def.name, agent.def.username, agent.id, account
            );
            for c in &commands {
                text.push_str(&format!(
                    "  /{}  [{}]  {}\n",
                    c.def.name,
                    c.def.handler_type.as_str(),
                    c.def.description
                ));
            }
            out.print(&value, text.trim_end());
            Ok(())
        }
    }
}

async fn set_chatapp_enabled(store: &Store, agent: &str, enabled: bool, out: &Output) -> anyhow::Result<()> {
    let found = store.agent(agent).await?.ok_or_else(|| anyhow!("no agent '{agent}'"))?;
    if !store
        .set_integration_enabled(&found.id, crate::services::chatapp::KIND, enabled)
        .await?
    {
        return Err(anyhow!("agent '{agent}' has no chat-app bot; connect one first"));
    }
    out.print(
        &json!({ "agent": found.def.username, "enabled": enabled }),
        &format!(
            "the bot of '{}' is {}",
            found.def.username,
            if enabled { "enabled" } else { "disabled" }
        ),
    );
    Ok(())
}

fn service(err: ServiceError) -> anyhow::Error {
    anyhow!(err.to_string())
}

async fn serve(
    settings: Settings,
    store: Store,
    listen: Vec<String>,
    out: &Output,
    demo: Option<Value>,
) -> anyhow::Result<()> {
    let listen = if listen.is_empty() {
        settings.listen.clone()
    } else {
        listen
    };
    let server = Server::bind(settings, store, &listen).await?;
    let urls: Vec<String> = server.local_addrs().iter().map(|a| format!("http://{a}")).collect();
    match demo {
        Some(mut value) => {
            let first = urls.first().cloned().unwrap_or_default();
            let key = value["key"].as_str().unwrap_or_default().to_string();
            let username = value["agent"]["username"].as_str().unwrap_or_default().to_string();
            value["listening"] = json!(urls);
            let text = format!(
                "Demo account 'demo', agent '{username}'.\nAPI key: {key}\n  (also saved in {})\nWallets: solana {}, base {}\nTry:\n  curl -s -H \"x-api-key: {key}\" {first}/v1/agents/{username}/commands\n  curl -s {first}/x402/base/{username}\nlistening on {}",
                value["key_file"].as_str().unwrap_or_default(),
                value["wallets"]["solana"].as_str().unwrap_or_default(),
                value["wallets"]["base"].as_str().unwrap_or_default(),
                urls.join(", ")
            );
            out.print(&value, &text);
        }
        None => out.print(
            &json!({ "listening": urls }),
            &format!("agent-host listening on {}", urls.join(", ")),
        ),
    }
    server.run().await
}

/// The demo agent's manifest, also a worked example of the format.
const DEMO_MANIFEST: &str = include_str!("../../examples/helper.toml");
const DEMO_ACCOUNT: &str = "demo";
const DEMO_KEY_FILE: &str = "demo-api-key";

async fn demo(settings: Settings, store: Store, listen: Vec<String>, out: &Output) -> anyhow::Result<()> {
    let account = match store.account_by_name(DEMO_ACCOUNT).await? {
        Some(account) => account,
        None => accounts::create(&store, DEMO_ACCOUNT, Plan::Pro, None, None)
            .await
            .map_err(service)?,
    };
    let manifest = crate::manifest::parse(DEMO_MANIFEST, "examples/helper.toml", Path::new("."))?;
    let agent_id = match store.agent(&manifest.agent.username).await? {
        Some(agent) => agent.id,
        None => {
            let services = app::cli_services(settings.clone(), store.clone())?;
            agents::apply(&services, &manifest, Some(DEMO_ACCOUNT))
                .await
                .map_err(service)?
                .agent_id
        }
    };
    // Its wallets (keys sealed locally; no chain needed to create them), so it can sell
    // over x402 and hold USDC once funded.
    let mut wallets = serde_json::Map::new();
    let mut missing = Vec::new();
    for network in [Network::Solana, Network::Base] {
        match store.wallet(&agent_id, network).await? {
            Some(wallet) => {
                wallets.insert(network.as_str().to_string(), json!(wallet.address));
            }
            None => missing.push(network),
        }
    }
    if !missing.is_empty() {
        let services = app::cli_services(settings.clone(), store.clone())?;
        for network in missing {
            let address = wallets::add(&services, &agent_id, network, None)
                .await
                .map_err(service)?;
            wallets.insert(network.as_str().to_string(), json!(address));
        }
    }
    // The demo's key is kept in a 0600 file so the README's curl line works as printed;
    // real keys are only ever shown once.
    let key_file = settings.data_dir.join(DEMO_KEY_FILE);
    let saved = std::fs::read_to_string(&key_file).ok().map(|k| k.trim().to_string());
    let key = match saved {
        Some(key) if keys::authenticate(&store, &key).await.is_ok() => key,
        _ => {
            let issued = keys::issue(&store, &account).await.map_err(service)?;
            write_private(&key_file, &issued.key)?;
            issued.key
        }
    };
    let summary = json!({
        "key": key,
        "key_file": key_file.display().to_string(),
        "account": DEMO_ACCOUNT,
        "agent": { "id": agent_id, "username": manifest.agent.username },
        "wallets": wallets,
    });
    serve(settings, store, listen, out, Some(summary)).await
}

fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(contents.as_bytes())?;
    Ok(())
}

fn init_tracing(filter: &str) {
    let filter =
        tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour only on a terminal: a log file or journal gets plain lines.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

async fn find_agent(store: &Store, id_or_username: &str) -> anyhow::Result<crate::domain::Agent> {
    store
        .agent(id_or_username)
        .await?
        .ok_or_else(|| anyhow!("no agent '{id_or_username}'"))
}

/// One line from standard input: secrets come this way to stay out of `ps`.
fn read_stdin_line(what: &str) -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .with_context(|| format!("reading {what} from standard input"))?;
    Ok(line.trim().to_string())
}

async fn wallet(settings: Settings, store: Store, command: WalletCmd, out: &Output) -> anyhow::Result<()> {
    let network_of =
        |text: &str| Network::parse(text).ok_or_else(|| anyhow!("unknown network '{text}': use solana or base"));
    match command {
        WalletCmd::Create { agent, network } => {
            let network = network_of(&network)?;
            let services = app::cli_services(settings, store)?;
            let found = find_agent(&services.store, &agent).await?;
            let address = wallets::add(&services, &found.id, network, None)
                .await
                .map_err(service)?;
            print_wallet(out, &found, network, &address, "created");
        }
        WalletCmd::Import { agent, network } => {
            let network = network_of(&network)?;
            let services = app::cli_services(settings, store)?;
            let found = find_agent(&services.store, &agent).await?;
            let secret = read_stdin_line("the secret key")?;
            let address = wallets::add(&services, &found.id, network, Some(&secret))
                .await
                .map_err(service)?;
            print_wallet(out, &found, network, &address, "imported");
        }
        WalletCmd::List { agent } => {
            let found = find_agent(&store, &agent).await?;
            let list = store.wallets_of(&found.id).await?;
            let rows: Vec<Value> = list
                .iter()
                .map(|w| json!({ "network": w.network.as_str(), "address": w.address, "created_at": crate::clock::iso(w.created_at) }))
                .collect();
            let text = list
                .iter()
                .map(|w| format!("{:<7} {}", w.network.as_str(), w.address))
                .collect::<Vec<_>>()
                .join("\n");
            out.print(&json!(rows), if text.is_empty() { "no wallets" } else { &text });
        }
        WalletCmd::Transfers { agent, limit } => {
            let found = find_agent(&store, &agent).await?;
            let list = store.transfers_of(&found.id, limit).await?;
            let rows: Vec<Value> = list
                .iter()
                .map(|t| {
                    json!({
                        "id": t.id, "network": t.network.as_str(), "kind": t.kind, "state": t.state.as_str(),
                        "amount_usdc": t.amount.to_json_number(), "amount_micro_usdc": t.amount.0,
                        "sender": t.sender, "recipient": t.recipient, "memo": t.memo,
                        "signature": t.signature, "error": t.error,
                        "created_at": crate::clock::iso(t.created_at), "updated_at": crate::clock::iso(t.updated_at),
                    })
                })
                .collect();
            let text = list
                .iter()
                .map(|t| {
                    format!(
                        "{} {:<9} {:<7} {} USDC -> {} {}{}",
                        t.id,
                        t.state.as_str(),
                        t.network.as_str(),
                        t.amount,
                        t.recipient,
                        t.signature.as_deref().unwrap_or("(not signed)"),
                        t.error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            out.print(&json!(rows), if text.is_empty() { "no transfers" } else { &text });
        }
    }
    Ok(())
}

fn print_wallet(out: &Output, agent: &crate::domain::Agent, network: Network, address: &str, verb: &str) {
    out.print(
        &json!({ "agent": agent.def.username, "agent_id": agent.id, "network": network.as_str(), "address": address }),
        &format!("{verb} the {network} wallet of '{}': {address}", agent.def.username),
    );
}
