//! `agent-host wallet ...` and `agent-host payments ...`: the agent's money.

use anyhow::anyhow;
use clap::Subcommand;
use serde_json::{Value, json};

use super::{Ctx, read_stdin_line, service};
use crate::domain::{Agent, Network};
use crate::services::wallets;
use crate::views;

#[derive(Subcommand)]
pub enum WalletCmd {
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
pub enum PaymentsCmd {
    /// The agent's payments, newest first, with their receipts and state.
    List {
        #[arg(long)]
        agent: String,
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Takes back a payment the service handed to the operator (a refund past its bounds,
    /// a settlement the chain could not decide): recovery works on it again, its refund
    /// with a fresh count of attempts and fees.
    Resume {
        /// The payment's id, as `payments list` shows it.
        payment: String,
    },
}

fn network_of(text: &str) -> anyhow::Result<Network> {
    Network::parse(text).ok_or_else(|| anyhow!("unknown network '{text}': use solana or base"))
}

pub async fn wallet(ctx: &Ctx, command: WalletCmd) -> anyhow::Result<()> {
    match command {
        WalletCmd::Create { agent, network } => {
            let network = network_of(&network)?;
            let found = ctx.agent(&agent).await?;
            let address = wallets::add(&ctx.services()?, &found.id, network, None)
                .await
                .map_err(service)?;
            print_wallet(ctx, &found, network, &address, "created");
        }
        WalletCmd::Import { agent, network } => {
            let network = network_of(&network)?;
            let found = ctx.agent(&agent).await?;
            let secret = read_stdin_line("the secret key")?;
            let address = wallets::add(&ctx.services()?, &found.id, network, Some(&secret))
                .await
                .map_err(service)?;
            print_wallet(ctx, &found, network, &address, "imported");
        }
        WalletCmd::List { agent } => {
            let found = ctx.agent(&agent).await?;
            let list = wallets::list(&ctx.store, &found.id).await.map_err(service)?;
            let chains = &ctx.services()?.chains;
            let rows: Vec<Value> = list.iter().map(|w| views::wallet(w, chains)).collect();
            ctx.out.list(
                &json!(rows),
                &list,
                |w| format!("{:<7} {}", w.network.as_str(), w.address),
                "no wallets",
            );
        }
        WalletCmd::Transfers { agent, limit } => {
            let found = ctx.agent(&agent).await?;
            let services = ctx.services()?;
            let list = wallets::transfers(&ctx.store, &found.id, limit)
                .await
                .map_err(service)?;
            let rows: Vec<Value> = list.iter().map(|t| views::transfer(t, &services.chains)).collect();
            ctx.out.list(
                &json!(rows),
                &list,
                |t| {
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
                },
                "no transfers",
            );
        }
    }
    Ok(())
}

fn print_wallet(ctx: &Ctx, agent: &Agent, network: Network, address: &str, verb: &str) {
    ctx.out.print(
        &json!({ "agent": agent.def.username, "agent_id": agent.id, "network": network.as_str(), "address": address }),
        &format!("{verb} the {network} wallet of '{}': {address}", agent.def.username),
    );
}

pub async fn payments(ctx: &Ctx, command: PaymentsCmd) -> anyhow::Result<()> {
    match command {
        PaymentsCmd::List { agent, limit } => {
            let found = ctx.agent(&agent).await?;
            let services = ctx.services()?;
            let list = crate::services::payments::list(&ctx.store, &found.id, limit)
                .await
                .map_err(service)?;
            let rows: Vec<Value> = list.iter().map(|p| views::payment(p, &services.chains)).collect();
            ctx.out.list(
                &json!(rows),
                &list,
                |p| {
                    format!(
                        "{} {:<8} {:<7} {} USDC from {} for {} {}{}{}",
                        p.id,
                        p.state.as_str(),
                        p.network,
                        p.amount,
                        p.payer,
                        p.command
                            .as_deref()
                            .map(|c| format!("/{c}"))
                            .unwrap_or_else(|| "a message".into()),
                        p.transaction_signature.as_deref().unwrap_or("(not settled)"),
                        p.error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default(),
                        p.needs_operator
                            .as_deref()
                            .filter(|_| p.needs_operator_at.is_some())
                            .map(|why| format!(
                                "\n    NEEDS THE OPERATOR: {why}; `agent-host payments resume {}` tries again",
                                p.id
                            ))
                            .unwrap_or_default()
                    )
                },
                "no payments",
            );
        }
        PaymentsCmd::Resume { payment } => {
            let resumed = ctx.store.resume_for_operator(&payment).await?;
            if !resumed {
                anyhow::bail!("payment {payment} is not waiting for the operator");
            }
            ctx.out.print(
                &json!({ "payment_id": payment, "resumed": true }),
                &format!("payment {payment} resumed: the next recovery pass works on it again"),
            );
        }
    }
    Ok(())
}
