//! Starts the two local chains the tests use, funds the given wallet addresses with
//! 1 SOL / 0.1 ETH and 100 USDC each, prints the settings that point agent-host at them,
//! and runs until Ctrl-C. Base also has Permit2 and x402's upto proxy at their addresses
//! (paying by use). With `--payer`, also makes a funded payer on each chain and prints its
//! key, for paying an agent over x402 (README, "Pay an agent"); the Base payer has approved
//! Permit2 once. Needs what `scripts/test.sh` installs (tests/node, the tests/solana-chain
//! helper).
//!
//!     cargo run -p agent-host --example local_chains -- [--fund ADDRESS]... [--payer]

// A developer tool: a failed unwrap stops it with the reason, and it talks to servers with their own
// HTTP clients, outside the agent's guarded egress.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

#[path = "../../tests/support/chains.rs"]
#[allow(dead_code)]
mod chains;

use agent_host::domain::Network;

#[tokio::main]
async fn main() {
    let mut fund = Vec::new();
    let mut payer = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--payer" => payer = true,
            "--fund" if let Some(address) = args.next() => fund.push(address),
            _ => {
                eprintln!("usage: local-chains [--fund ADDRESS]... [--payer]");
                std::process::exit(2);
            }
        }
    }
    let solana = chains::LocalSolana::start();
    let base = chains::LocalBase::start().await;
    base.deploy_permit2().await;
    for address in &fund {
        if agent_host::chains::validate_address(Network::Base, address).is_ok() {
            base.set_eth(address, 100_000_000_000_000_000).await;
            base.mint_usdc(address, 100_000_000).await;
        } else if agent_host::chains::validate_address(Network::Solana, address).is_ok() {
            solana.set_sol(address, 1_000_000_000).await;
            solana.set_usdc(address, 100_000_000).await;
        } else {
            eprintln!("not a Solana or Base address: {address}");
            std::process::exit(2);
        }
        println!("funded {address}");
    }
    let mut exports: Vec<String> = solana
        .env()
        .into_iter()
        .chain(base.env())
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    if payer {
        use solana_signer::Signer;
        let base_payer = alloy::signers::local::PrivateKeySigner::random();
        base.mint_usdc(&base_payer.address().to_string(), 100_000_000).await;
        base.approve_permit2(&base_payer.address().to_string(), u64::MAX).await;
        let solana_payer = solana_keypair::Keypair::new();
        solana.set_sol(&solana_payer.pubkey().to_string(), 1_000_000_000).await;
        solana.set_usdc(&solana_payer.pubkey().to_string(), 100_000_000).await;
        println!(
            "payers with 100 USDC each: base {}, solana {}",
            base_payer.address(),
            solana_payer.pubkey()
        );
        exports.push(format!("PAYER_BASE_KEY=0x{}", hex::encode(base_payer.to_bytes())));
        exports.push(format!("PAYER_SOLANA_KEY={}", solana_payer.to_base58_string()));
    }
    println!("export {}", exports.join(" "));
    println!("(Ctrl-C stops both chains)");
    let _ = tokio::signal::ctrl_c().await;
}
