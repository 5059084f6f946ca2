//! The real, published x402 clients paying the service: `tests/node/pay.mjs` drives
//! `x402-fetch` 1.2.0 (x402 version 1) or `@x402/fetch` 2.x as its README's Quick Start
//! sets it up (version 2 only) through one paid request.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
    /// Base: `{factory, salt}` when the payer pays from the tests' smart wallet that the key
    /// owns (see `tests/node/pay.mjs`).
    pub smart_wallet: Option<Value>,
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
            smart_wallet: None,
        };
        (payer, address)
    }

    /// A new Base payer paying from a smart wallet (ERC-1271) that holds `micro` USDC,
    /// deployed or not yet (then it signs with ERC-6492); with the wallet's address.
    pub async fn smart_wallet_on_base(
        chain: &super::chains::LocalBase,
        micro: u64,
        deployed: bool,
    ) -> (Payer<'static>, String) {
        let owner = alloy::signers::local::PrivateKeySigner::random();
        let wallet = match deployed {
            true => chain.deploy_smart_wallet(owner.address(), 0).await,
            false => chain.smart_wallet_address(owner.address(), 0).await,
        };
        let address = wallet.to_string();
        chain.mint_usdc(&address, micro).await;
        let payer = Payer {
            network: "base",
            key: format!("0x{}", hex::encode(owner.to_bytes())),
            rpc_url: chain.rpc_url.clone(),
            smart_wallet: Some(json!({ "factory": chain.wallet_factory().await.to_string(), "salt": 0 })),
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
            smart_wallet: None,
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

/// As `pay_with`, by `@x402/fetch` with `@x402/evm`'s `upto` client (Base): it authorizes
/// the maximum offered and is charged for what the request used.
pub async fn pay_by_use(payer: &Payer<'_>, url: &str, body: &Value) -> Paid {
    run_client(X402Client::Fetch2, payer, url, body, json!({ "scheme": "upto" }))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
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

/// Runs one request on the payer process (`tests/node/pay.mjs --serve`) for `client` with the
/// request's fields and `extra` ones. An `Err` is the client's own failure (a connection cut,
/// a refused payment it threw on); the payer process failing panics, so that no test can
/// take it for a cut.
async fn run_client(
    client: X402Client,
    payer: &Payer<'_>,
    url: &str,
    body: &Value,
    extra: Value,
) -> Result<Paid, String> {
    let mut request = json!({
        "client": client.package(), "network": payer.network, "key": payer.key,
        "rpcUrl": payer.rpc_url, "url": url, "body": body, "networkId": network_id(payer.network),
        "smartWallet": payer.smart_wallet,
    });
    if let (Some(request), Value::Object(extra)) = (request.as_object_mut(), extra) {
        request.extend(extra);
    }
    let reply = match tokio::time::timeout(Duration::from_secs(90), PayerProcess::pay(request)).await {
        Err(_) => return Err(format!("{client:?} did not finish paying within 90 s")),
        Ok(Err(Failure::Client(e))) => return Err(format!("{client:?} failed: {e}")),
        Ok(Err(Failure::Process(e))) => panic!("the payer process (tests/node/pay.mjs) failed: {e}"),
        Ok(Ok(reply)) => reply,
    };
    Ok(Paid {
        status: reply["status"].as_u64().unwrap() as u16,
        body: reply["body"].clone(),
        payment_response: reply["paymentResponse"].clone(),
        payment_response_header: reply["paymentResponseHeader"].as_str().map(str::to_string),
        failures: serde_json::from_value(reply["failures"].clone()).unwrap_or_default(),
    })
}

enum Failure {
    /// The client threw: its message, with its cause.
    Client(String),
    /// The process ended or took no request.
    Process(String),
}

type Answer = tokio::sync::oneshot::Sender<Result<Value, Failure>>;

/// The requests not yet answered; `None` once the process ended.
type Waiting = Option<HashMap<u64, Answer>>;

/// One Node process that every test of the binary pays through, each request with clients
/// of its own: loading the x402 and chain modules costs a Node process about 3 s of CPU,
/// which the 200-payment crash test paid 200 times over. Plain threads and pipes, not
/// tokio's: each test has a runtime of its own, and the process outlives them all.
struct PayerProcess {
    stdin: Mutex<std::process::ChildStdin>,
    waiting: Arc<Mutex<Waiting>>,
    next_id: AtomicU64,
}

impl PayerProcess {
    /// Runs `request` on the running process; on one that ended, on a new one.
    async fn pay(request: Value) -> Result<Value, Failure> {
        let pending = match PayerProcess::shared().send(&request) {
            Err(Failure::Process(_)) => PayerProcess::shared().send(&request)?,
            sent => sent?,
        };
        pending.answer().await
    }

    fn shared() -> Arc<PayerProcess> {
        static CURRENT: Mutex<Option<Arc<PayerProcess>>> = Mutex::new(None);
        // A start that panicked (no node) must not poison the others' next try.
        let mut current = CURRENT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*current {
            Some(process) if !process.ended() => process.clone(),
            _ => current.insert(Arc::new(PayerProcess::start())).clone(),
        }
    }

    fn start() -> PayerProcess {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/node/pay.mjs");
        let mut child = std::process::Command::new("node")
            .arg(&script)
            .arg("--serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run node (scripts/test.sh installs tests/node)");
        let waiting: Arc<Mutex<Waiting>> = Arc::new(Mutex::new(Some(HashMap::new())));
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let stdin = Mutex::new(child.stdin.take().unwrap());
        let answers = waiting.clone();
        std::thread::spawn(move || {
            let mut why = "it ended".to_string();
            let mut line = Vec::new();
            while stdout.read_until(b'\n', &mut line).is_ok_and(|read| read > 0) {
                let reply: Value = serde_json::from_slice(&line).unwrap_or_else(|_| {
                    eprintln!("pay.mjs: {}", String::from_utf8_lossy(&line).trim_end());
                    Value::Null
                });
                line.clear();
                if let Some(fatal) = reply["fatal"].as_str() {
                    why = fatal.to_string();
                }
                let id = reply["id"].as_u64().unwrap_or(u64::MAX);
                let Some(answer) = answers.lock().unwrap().as_mut().and_then(|waiting| waiting.remove(&id)) else {
                    continue;
                };
                let _ = answer.send(match reply.get("error") {
                    Some(error) => Err(Failure::Client(error.as_str().unwrap_or_default().to_string())),
                    None => Ok(reply["paid"].clone()),
                });
            }
            // Ended: whoever still waits is told why, and the next request starts a new one.
            for (_, answer) in answers.lock().unwrap().take().into_iter().flatten() {
                let _ = answer.send(Err(Failure::Process(why.clone())));
            }
            let _ = child.wait();
        });
        PayerProcess {
            stdin,
            waiting,
            next_id: AtomicU64::new(0),
        }
    }

    fn ended(&self) -> bool {
        self.waiting.lock().unwrap().is_none()
    }

    fn send(self: Arc<Self>, request: &Value) -> Result<Pending, Failure> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, answered) = tokio::sync::oneshot::channel();
        match self.waiting.lock().unwrap().as_mut() {
            Some(waiting) => waiting.insert(id, answer),
            None => return Err(Failure::Process("it ended".into())),
        };
        if let Err(e) = self.write(&json!({ "id": id, "request": request })) {
            // Gone before its end was read: the next request starts a new one.
            *self.waiting.lock().unwrap() = None;
            return Err(Failure::Process(format!("it took no request: {e}")));
        }
        Ok(Pending {
            process: self,
            id,
            answered: Some(answered),
        })
    }

    fn write(&self, line: &Value) -> std::io::Result<()> {
        let mut stdin = self.stdin.lock().unwrap();
        stdin.write_all(format!("{line}\n").as_bytes())?;
        stdin.flush()
    }
}

/// A request sent and not yet answered. Dropped before its answer (the test timed out or
/// ended), it is cancelled: the client stops, as a killed client process did.
struct Pending {
    process: Arc<PayerProcess>,
    id: u64,
    answered: Option<tokio::sync::oneshot::Receiver<Result<Value, Failure>>>,
}

impl Pending {
    async fn answer(mut self) -> Result<Value, Failure> {
        let answered = self.answered.as_mut().expect("answered once");
        let answer = answered
            .await
            .unwrap_or_else(|_| Err(Failure::Process("it ended".into())));
        self.answered = None;
        answer
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.answered.is_some() {
            if let Some(waiting) = self.process.waiting.lock().unwrap().as_mut() {
                waiting.remove(&self.id);
            }
            let _ = self.process.write(&json!({ "id": self.id, "cancel": true }));
        }
    }
}
