//! A local Solana chain for the tests: Surfpool (real SVM, real SPL Token and
//! Associated Token programs, the standard JSON-RPC) on 127.0.0.1, with a
//! 6-decimal USDC-like mint preloaded.
//!
//! Prints one JSON line `{"rpcUrl", "wsUrl", "mint"}` when ready, then runs
//! until its stdin closes (the test process that started it went away) or it
//! gets SIGTERM/SIGINT.
//!
//! Usage: solana-chain [--mint ADDRESS]   (default: mainnet USDC's address)

use std::io::Read;

use surfpool_sdk::{Pubkey, Surfnet};

const MAINNET_USDC: &str = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";
const TOKEN_PROGRAM: &str = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA";
/// Rent-exempt minimum for an 82-byte account.
const MINT_RENT_LAMPORTS: u64 = 1_461_600;

#[tokio::main]
async fn main() {
    if let Err(message) = run().await {
        eprintln!("solana-chain: {message}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), String> {
    let mint = mint_arg()?;
    let mut surfnet = Surfnet::builder()
        .offline(true)
        .start()
        .await
        .map_err(|e| format!("surfnet did not start: {e}"))?;
    let token_program: Pubkey = TOKEN_PROGRAM.parse().expect("constant");
    surfnet
        .cheatcodes()
        .set_account(&mint, MINT_RENT_LAMPORTS, &mint_account_data(6), &token_program)
        .map_err(|e| format!("could not create the mint: {e}"))?;

    println!(
        "{}",
        serde_json::json!({
            "rpcUrl": surfnet.rpc_url(),
            "wsUrl": surfnet.ws_url(),
            "mint": mint.to_string(),
        })
    );

    let stdin_closed = tokio::task::spawn_blocking(|| {
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    });
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(|e| e.to_string())?;
    tokio::select! {
        _ = stdin_closed => {}
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    let _ = surfnet.stop();
    Ok(())
}

fn mint_arg() -> Result<Pubkey, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let address = match args.as_slice() {
        [] => MAINNET_USDC,
        [flag, value] if flag == "--mint" => value.as_str(),
        _ => return Err("usage: solana-chain [--mint ADDRESS]".into()),
    };
    address.parse().map_err(|_| format!("not a Solana address: {address}"))
}

/// The SPL Token `Mint` layout (82 bytes): no mint authority (supply only
/// moves through the chain's `surfnet_setTokenAccount` cheat), no freeze
/// authority, initialized, with the given decimals.
fn mint_account_data(decimals: u8) -> Vec<u8> {
    let mut data = vec![0u8; 82];
    // [0..4] mint_authority option tag = 0 (none), [4..36] key, [36..44] supply
    data[44] = decimals;
    data[45] = 1; // is_initialized
    // [46..50] freeze_authority option tag = 0 (none), [50..82] key
    data
}
