//! `built_in`: the system commands every agent has. `config.builtin` names one (default:
//! the command's own name): `help`, `start`, `about`, `balance`.
//!
//! `balance` words the wallet facts the host puts in `config.wallets` (the host reads the
//! chains; this plugin has no network access).

use agent_plugin_sdk::{Capability, Error, Invocation, Manifest, Output, Plugin, Result, agent};

struct BuiltIn;

impl Plugin for BuiltIn {
    fn manifest() -> Manifest {
        Manifest::new("built_in", env!("CARGO_PKG_VERSION"))
            .describe("System commands: help, start, about, balance")
            .capability(Capability::AgentInfo)
    }

    fn execute(call: Invocation) -> Result<Output> {
        let which = call
            .opt_config::<String>("builtin")?
            .unwrap_or_else(|| call.command.clone());
        let profile = agent::profile();
        let text = match which.as_str() {
            "help" => help(),
            "start" => format!(
                "Hi, I'm {}. {}\nSend /help to see what I can do.",
                profile.name,
                profile.personality.trim()
            ),
            "about" => {
                let mut text = format!("{} (@{})", profile.name, profile.username);
                if !profile.personality.trim().is_empty() {
                    text.push_str(&format!("\n{}", profile.personality.trim()));
                }
                let facts = profile.knowledge.len();
                if facts > 0 {
                    text.push_str(&format!("\nI know {facts} fact{}.", if facts == 1 { "" } else { "s" }));
                }
                text
            }
            "balance" => balance(&call.opt_config::<Vec<WalletFacts>>("wallets")?.unwrap_or_default()),
            other => return Err(Error::unavailable(format!("there is no built-in command '{other}'"))),
        };
        Ok(Output::text(text).with_format(call.format))
    }
}

/// One wallet as the host reports it: amounts are exact decimal text.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct WalletFacts {
    network: String,
    #[serde(default)]
    address: String,
    #[serde(default)]
    missing: bool,
    usdc: Option<String>,
    native: Option<String>,
    #[serde(default)]
    native_token: String,
    error: Option<String>,
}

fn balance(wallets: &[WalletFacts]) -> String {
    if wallets.is_empty() {
        return "I have no wallet yet.".into();
    }
    let lines: Vec<String> = wallets
        .iter()
        .map(|w| match (w.missing, &w.usdc, &w.native, &w.error) {
            (true, ..) => format!("I have no {} wallet.", w.network),
            (_, Some(usdc), Some(native), _) => format!(
                "My {} wallet {} holds {usdc} USDC and {native} {}.",
                w.network, w.address, w.native_token
            ),
            (_, _, _, error) => format!(
                "I could not read my {} wallet {} right now ({}).",
                w.network,
                w.address,
                error.as_deref().unwrap_or("no answer")
            ),
        })
        .collect();
    lines.join("\n")
}

fn help() -> String {
    let commands: Vec<_> = agent::commands().into_iter().filter(|c| c.enabled).collect();
    if commands.is_empty() {
        return "No commands are available.".into();
    }
    let mut lines = vec!["Commands:".to_string()];
    for command in commands {
        let params: Vec<String> = command
            .parameters
            .iter()
            .map(|p| {
                if p.required {
                    format!("<{}>", p.name)
                } else {
                    format!("[{}]", p.name)
                }
            })
            .collect();
        let usage = if params.is_empty() {
            String::new()
        } else {
            format!(" {}", params.join(" "))
        };
        let description = if command.description.is_empty() {
            String::new()
        } else {
            format!(" — {}", command.description)
        };
        lines.push(format!("/{}{usage}{description}", command.name));
    }
    lines.join("\n")
}

agent_plugin_sdk::export_plugin!(BuiltIn);
