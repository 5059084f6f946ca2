//! Starts the two local chains the tests use, funds the given wallet addresses with
//! 1 SOL / 0.1 ETH and 100 USDC each, prints the settings that point agent-host at them,
//! and runs until Ctrl-C. Needs what `scripts/test.sh` installs (tests/node, the
//! tests/solana-chain helper).
//!
//!     cargo run -p agent-host --example local_chains -- --fund ADDRESS [--fund ADDRESS]...

#[path = "../../tests/support/chains.rs"]
#[allow(dead_code)]
mod chains;

use agent_host::domain::Network;

#[tokio::main]
async fn main() {
    let mut fund = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--fund", Some(address)) => fund.push(address),
            _ => {
                eprintln!("usage: local-chains [--fund ADDRESS]...");
                std::process::exit(2);
            }
        }
    }
    let solana = chains::LocalSolana::start();
    let base = chains::LocalBase::start().await;
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
    let exports: Vec<String> = solana
        .env()
        .into_iter()
        .chain(base.env())
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    println!("export {}", exports.join(" "));
    println!("(Ctrl-C stops both chains)");
    let _ = tokio::signal::ctrl_c().await;
}
