//! The real, published x402 clients paying the service: `tests/node/pay.mjs` drives
//! `x402-fetch` 1.2.0 (x402 version 1) or `@x402/fetch` 2.x as its README's Quick Start
//! sets it up (version 2 only) through one paid request.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

#[derive(Clone, Copy, Debug)]
pub enum X402Client {
    /// `x402-fetch` 1.2.0, x402 version 1.
    Fetch1,
    /// `@x402/fetch` 2.x with `ExactEvmScheme` / `ExactSvmScheme` on one CAIP-2 network:
    /// x402 version 2 only.
    Fetch2,
}

impl X402Client {
    pub const ALL: [X402Client; 2] = [X402Client::Fetch1, X402Client::Fetch2];

    fn package(self) -> &'static str {
        match self {
            X402Client::Fetch1 => "x402-fetch",
            X402Client::Fetch2 => "@x402/fetch",
        }
    }

    /// The header its answer's settlement comes in.
    pub fn response_header(self) -> &'static str {
        match self {
            X402Client::Fetch1 => "x-payment-response",
            X402Client::Fetch2 => "payment-response",
        }
    }
}

/// The CAIP-2 ids the test server names its chains by: the local chains stand in for
/// mainnet (Anvil runs chain id 8453; the Solana chain is given mainnet's id).
pub fn network_id(network: &str) -> &'static str {
    match network {
        "base" => "eip155:8453",
        _ => super::chains::SOLANA_MAINNET_ID,
    }
}

/// The payer's side of one request.
#[derive(Clone)]
pub struct Payer<'a> {
    pub network: &'a str,
    /// Base: 0x-hex private key; Solana: base58 64-byte keypair.
    pub key: String,
    /// The chain's RPC, for the clients that read it (Solana: mint, blockhash, simulation).
    pub rpc_url: String,
}

impl Payer<'static> {
    /// A new Base payer holding `micro` USDC on `chain`; with its address.
    pub async fn on_base(chain: &super::chains::LocalBase, micro: u64) -> (Payer<'static>, String) {
        let key = alloy::signers::local::PrivateKeySigner::random();
        let address = key.address().to_string();
        chain.mint_usdc(&address, micro).await;
        let payer = Payer {
            network: "base",
            key: format!("0x{}", hex::encode(key.to_bytes())),
            rpc_url: chain.rpc_url.clone(),
        };
        (payer, address)
    }

    /// A new Solana payer holding `micro` USDC on `chain`; with its address.
    pub async fn on_solana(chain: &super::chains::LocalSolana, micro: u64) -> (Payer<'static>, String) {
        use solana_signer::Signer;
        let key = solana_keypair::Keypair::new();
        let address = key.pubkey().to_string();
        chain.set_usdc(&address, micro).await;
        let payer = Payer {
            network: "solana",
            key: key.to_base58_string(),
            rpc_url: chain.rpc_url.clone(),
        };
        (payer, address)
    }
}

/// What the client got back after paying.
#[derive(Debug)]
pub struct Paid {
    pub status: u16,
    pub body: Value,
    /// The decoded `PAYMENT-RESPONSE` or `X-PAYMENT-RESPONSE` header; `Null` when absent.
    pub payment_response: Value,
    /// Which of the two it was.
    pub payment_response_header: Option<String>,
    /// Why the attempts before the last one threw (a retrying client's).
    pub failures: Vec<String>,
}

/// Lets `client` pay for one `POST url` with `body`: it reads our 402, signs a payment and
/// retries with `X-PAYMENT`, exactly as it does against any x402 server.
pub async fn pay_with(client: X402Client, payer: &Payer<'_>, url: &str, body: &Value) -> Paid {
    try_pay_with(client, payer, url, body)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// As `pay_with`, for a request that may not get an answer (the server is killed).
pub async fn try_pay_with(client: X402Client, payer: &Payer<'_>, url: &str, body: &Value) -> Result<Paid, String> {
    run_client(client, payer, url, body, json!({})).await
}

/// As `pay_with`, by a client that names its payment `payment_id` (x402's
/// payment-identifier) and asks again, up to `attempts` times, while its request throws
/// (a connection dropped before the answer). Version 2 clients only.
pub async fn pay_retrying(
    client: X402Client,
    payer: &Payer<'_>,
    url: &str,
    body: &Value,
    payment_id: &str,
    attempts: u32,
) -> Paid {
    let asking = json!({ "paymentId": payment_id, "attempts": attempts });
    run_client(client, payer, url, body, asking)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `tests/node/pay.mjs` for `client` with the request's fields and `extra` ones.
async fn run_client(
    client: X402Client,
    payer: &Payer<'_>,
    url: &str,
    body: &Value,
    extra: Value,
) -> Result<Paid, String> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/node/pay.mjs");
    let mut request = json!({
        "client": client.package(), "network": payer.network, "key": payer.key,
        "rpcUrl": payer.rpc_url, "url": url, "body": body, "networkId": network_id(payer.network),
    });
    if let (Some(request), Value::Object(extra)) = (request.as_object_mut(), extra) {
        request.extend(extra);
    }
    let run = tokio::process::Command::new("node")
        .arg(&script)
        .arg(request.to_string())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(90), run)
        .await
        .map_err(|_| format!("{client:?} did not finish paying within 90 s"))?
        .expect("run node (scripts/test.sh installs tests/node)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "{client:?} failed: {}{stdout}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let reply: Value = serde_json::from_str(stdout.trim()).map_err(|_| format!("{client:?} printed {stdout:?}"))?;
    Ok(Paid {
        status: reply["status"].as_u64().unwrap() as u16,
        body: reply["body"].clone(),
        payment_response: reply["paymentResponse"].clone(),
        payment_response_header: reply["paymentResponseHeader"].as_str().map(str::to_string),
        failures: serde_json::from_value(reply["failures"].clone()).unwrap_or_default(),
    })
}
