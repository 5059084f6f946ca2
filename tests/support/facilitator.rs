//! The x402 reference facilitator (tests/node/facilitator.mjs) on the local chains: what
//! an operator settles through in facilitator mode.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use axum::routing::post;
use serde_json::{Value, json};

use super::{FakeServer, client};

use super::chains::{LocalBase, LocalSolana, SOLANA_MAINNET_ID};

pub struct RefFacilitator {
    child: Child,
    pub url: String,
    /// Base: the account that relays the settlements (and pays their gas).
    pub evm: Option<String>,
    /// Solana: the fee payer that signs the payments (and pays their fees).
    pub svm: Option<String>,
}

impl Drop for RefFacilitator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RefFacilitator {
    /// Starts it on Base with a new key holding gas on `chain`; `auth`, the Authorization
    /// header it requires, if any.
    pub async fn start(chain: &LocalBase, auth: Option<&str>) -> RefFacilitator {
        RefFacilitator::on(Some(chain), None, auth).await
    }

    /// Starts it on the chains given, with a new funded key on each.
    pub async fn on(base: Option<&LocalBase>, solana: Option<&LocalSolana>, auth: Option<&str>) -> RefFacilitator {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/node/facilitator.mjs");
        let mut command = Command::new("node");
        command.arg(script).stdin(Stdio::null()).stdout(Stdio::piped());
        if let Some(chain) = base {
            let key = alloy::signers::local::PrivateKeySigner::random();
            chain.set_eth(&key.address().to_string(), 10u128.pow(18)).await;
            command
                .env("EVM_KEY", format!("0x{}", hex::encode(key.to_bytes())))
                .env("EVM_RPC_URL", &chain.rpc_url);
        }
        if let Some(chain) = solana {
            use solana_signer::Signer;
            let key = solana_keypair::Keypair::new();
            chain.set_sol(&key.pubkey().to_string(), 10_000_000_000).await;
            command
                .env("SVM_KEY", key.to_base58_string())
                .env("SVM_RPC_URL", &chain.rpc_url)
                .env("SVM_NETWORK", SOLANA_MAINNET_ID);
        }
        if let Some(auth) = auth {
            command.env("FACILITATOR_AUTH", auth);
        }
        let mut child = command.spawn().expect("start the facilitator (node)");
        let stdout = child.stdout.take().expect("its stdout");
        let first = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).map(|_| line)
        })
        .await
        .expect("read the facilitator's address")
        .expect("the facilitator's first line");
        let started: Value = serde_json::from_str(&first).unwrap_or_else(|e| panic!("{e}: {first:?}"));
        let account = |name: &str| started[name].as_str().map(str::to_string);
        RefFacilitator {
            child,
            url: started["url"].as_str().unwrap().to_string(),
            evm: account("evm"),
            svm: account("svm"),
        }
    }

    /// The settings that settle a server's payments on `network` through it.
    pub fn env(&self, network: &str, auth: Option<&str>) -> Vec<(&'static str, String)> {
        let (url, auth_name) = match network {
            "base" => (
                "AGENT_HOST_X402_BASE_FACILITATOR_URL",
                "AGENT_HOST_X402_BASE_FACILITATOR_AUTH",
            ),
            _ => (
                "AGENT_HOST_X402_SOLANA_FACILITATOR_URL",
                "AGENT_HOST_X402_SOLANA_FACILITATOR_AUTH",
            ),
        };
        let mut env = vec![(url, self.url.clone())];
        if let Some(auth) = auth {
            env.push((auth_name, auth.to_string()));
        }
        env
    }
}

/// In front of the reference facilitator at `upstream`: `/supported` and `/verify` pass
/// through. `/settle` either passes through and is answered "not confirmed" whatever
/// happened (`claim` = `None`), or never reaches it and is answered with a settlement
/// `claim` names that the facilitator never made.
pub async fn fronted(upstream: &str, claim: Option<String>) -> FakeServer {
    let pass = |upstream: String, path: &'static str| {
        move |body: Option<axum::Json<Value>>| {
            let upstream = upstream.clone();
            async move {
                let url = format!("{upstream}/{path}");
                let request = match body {
                    Some(axum::Json(body)) => client().post(url).json(&body),
                    None => client().get(url),
                };
                axum::Json(request.send().await.unwrap().json::<Value>().await.unwrap())
            }
        }
    };
    let forward = pass(upstream.to_string(), "settle");
    let settle = move |body: axum::Json<Value>| {
        let (claim, forward) = (claim.clone(), forward.clone());
        async move {
            match claim {
                Some(claimed) => axum::Json(json!({ "success": true, "transaction": claimed, "network": "solana" })),
                None => {
                    let _settled_anyway = forward(Some(body)).await;
                    axum::Json(json!({ "success": false, "errorReason": "confirmation_timeout", "transaction": "" }))
                }
            }
        }
    };
    FakeServer::start(
        axum::Router::new()
            .route(
                "/supported",
                axum::routing::get(pass(upstream.to_string(), "supported")),
            )
            .route("/verify", post(pass(upstream.to_string(), "verify")))
            .route("/settle", post(settle)),
    )
    .await
}
