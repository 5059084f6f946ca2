//! The x402 reference facilitator (tests/node/facilitator.mjs) on the local Base chain:
//! what an operator settles through in facilitator mode.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::chains::LocalBase;

pub struct RefFacilitator {
    child: Child,
    pub url: String,
    /// The account that relays the settlements (and pays their gas).
    pub address: String,
}

impl Drop for RefFacilitator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RefFacilitator {
    /// Starts it with a new key holding gas on `chain`; `auth`, the Authorization header it
    /// requires, if any.
    pub async fn start(chain: &LocalBase, auth: Option<&str>) -> RefFacilitator {
        let key = alloy::signers::local::PrivateKeySigner::random();
        chain.set_eth(&key.address().to_string(), 10u128.pow(18)).await;
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/node/facilitator.mjs");
        let mut command = Command::new("node");
        command
            .arg(script)
            .env("FACILITATOR_KEY", format!("0x{}", hex::encode(key.to_bytes())))
            .env("EVM_RPC_URL", &chain.rpc_url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
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
        RefFacilitator {
            child,
            url: started["url"].as_str().unwrap().to_string(),
            address: started["address"].as_str().unwrap().to_string(),
        }
    }

    /// The settings that settle a server's Base payments through it.
    pub fn env(&self, auth: Option<&str>) -> Vec<(&'static str, String)> {
        let mut env = vec![("AGENT_HOST_X402_BASE_FACILITATOR_URL", self.url.clone())];
        if let Some(auth) = auth {
            env.push(("AGENT_HOST_X402_BASE_FACILITATOR_AUTH", auth.to_string()));
        }
        env
    }
}
