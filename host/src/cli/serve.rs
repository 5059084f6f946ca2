//! `agent-host serve` and `agent-host demo`.

use std::path::Path;

use anyhow::Context;
use serde_json::{Value, json};

use super::{Ctx, service};
use crate::app::Server;
use crate::domain::{KeyScope, Network, Plan};
use crate::services::{accounts, agents, keys, wallets};

pub async fn serve(ctx: Ctx, listen: Vec<String>, demo: Option<Value>) -> anyhow::Result<()> {
    let Ctx { settings, store, out } = ctx;
    let listen = if listen.is_empty() {
        settings.server.listen.clone()
    } else {
        listen
    };
    let server = Server::bind(settings, store, &listen).await?;
    let urls: Vec<String> = server.local_addrs().iter().map(|a| format!("http://{a}")).collect();
    let knowledge = server.knowledge_ranking();
    tracing::info!("knowledge is chosen {knowledge}");
    match demo {
        Some(mut value) => {
            let first = urls.first().cloned().unwrap_or_default();
            let key = value["key"].as_str().unwrap_or_default().to_string();
            let username = value["agent"]["username"].as_str().unwrap_or_default().to_string();
            value["listening"] = json!(urls);
            value["knowledge"] = json!(knowledge);
            let text = format!(
                "Demo account 'demo', agent '{username}'.\nAPI key: {key}\n  (also saved in {})\nWallets: solana {}, base {}\nTry:\n  curl -s -H \"x-api-key: {key}\" {first}/v1/agents/{username}/commands\n  curl -s {first}/x402/base/{username}\nKnowledge is chosen {knowledge}.\nlistening on {}",
                value["key_file"].as_str().unwrap_or_default(),
                value["wallets"]["solana"].as_str().unwrap_or_default(),
                value["wallets"]["base"].as_str().unwrap_or_default(),
                urls.join(", ")
            );
            out.print(&value, &text);
        }
        None => {
            let mut ready = json!({ "listening": urls, "knowledge": knowledge });
            let mut text = format!(
                "agent-host listening on {}; knowledge is chosen {knowledge}",
                urls.join(", ")
            );
            if let Some(metrics) = server.metrics_addr() {
                ready["metrics"] = json!(format!("http://{metrics}/metrics"));
                text.push_str(&format!("; metrics at http://{metrics}/metrics"));
            }
            out.print(&ready, &text);
        }
    }
    server.run().await
}

/// The demo agent's manifest, also a worked example of the format.
const DEMO_MANIFEST: &str = include_str!("../../../examples/helper.toml");
const DEMO_ACCOUNT: &str = "demo";
const DEMO_KEY_FILE: &str = "demo-api-key";

pub async fn demo(ctx: Ctx, listen: Vec<String>) -> anyhow::Result<()> {
    let store = &ctx.store;
    let account = match store.account_by_name(DEMO_ACCOUNT).await? {
        Some(account) => account,
        None => accounts::create(store, DEMO_ACCOUNT, Plan::Pro, None, None)
            .await
            .map_err(service)?,
    };
    let manifest = crate::manifest::parse(
        DEMO_MANIFEST,
        "examples/helper.toml",
        crate::manifest::PluginSource::Files(Path::new(".")),
    )?;
    let agent_id = match store.agent(&manifest.agent.username).await? {
        Some(agent) => agent.id,
        None => {
            agents::apply(&ctx.services()?, &manifest, Some(DEMO_ACCOUNT))
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
        let services = ctx.services()?;
        for network in missing {
            let address = wallets::add(&services, &agent_id, network, None)
                .await
                .map_err(service)?;
            wallets.insert(network.as_str().to_string(), json!(address));
        }
    }
    // The demo's key is kept in a 0600 file so the README's curl line works as printed;
    // real keys are only ever shown once. It manages the account, so the console opens
    // with it too.
    let key_file = ctx.settings.data_dir.join(DEMO_KEY_FILE);
    let saved = std::fs::read_to_string(&key_file).ok().map(|k| k.trim().to_string());
    let still_good = match &saved {
        Some(key) => keys::authenticate(store, key)
            .await
            .is_ok_and(|caller| caller.scope == KeyScope::Manage),
        None => false,
    };
    let key = match saved {
        Some(key) if still_good => key,
        _ => {
            let issued = keys::issue(store, &account, KeyScope::Manage, Some("demo".into()), None)
                .await
                .map_err(service)?;
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
    serve(ctx, listen, Some(summary)).await
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
