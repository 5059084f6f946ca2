//! What stands between a test's clients and its servers, as a network would:
//! - `CuttingProxy` loses a paid answer: it passes a client's connections to the server,
//!   and the first time an answer starting `200` comes back it drops the connection
//!   instead, as a network does when it fails after the server settled and before the
//!   client read;
//! - `Front`, a fixed address for a server that restarts on new ports;
//! - `ClosedPort`, an address where nothing will ever answer;
//! - `NodeRelay`, a chain node that is slow to take transactions, or refuses them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub struct CuttingProxy {
    /// `http://127.0.0.1:PORT`, standing in for the server's base URL.
    pub base: String,
    cut: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl CuttingProxy {
    /// In front of `upstream` (`http://host:port`).
    pub async fn start(upstream: &str) -> CuttingProxy {
        CuttingProxy::across(&[upstream]).await
    }

    /// In front of several hosts of one service, as a load balancer: each new connection
    /// goes to the next, in turn (so a client's retry, on a new connection, reaches
    /// another host than its first attempt).
    pub async fn across(upstreams: &[&str]) -> CuttingProxy {
        let upstreams: Vec<String> = upstreams
            .iter()
            .map(|u| u.trim_start_matches("http://").trim_end_matches('/').to_string())
            .collect();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let cut = Arc::new(AtomicUsize::new(0));
        let cuts = cut.clone();
        let task = tokio::spawn(async move {
            for turn in 0.. {
                let Ok((client, _)) = listener.accept().await else {
                    break;
                };
                let Ok(server) = TcpStream::connect(&upstreams[turn % upstreams.len()]).await else {
                    continue;
                };
                tokio::spawn(relay(client, server, cuts.clone()));
            }
        });
        CuttingProxy { base, cut, task }
    }

    /// How many answers it dropped (at most one).
    pub fn cuts(&self) -> usize {
        self.cut.load(Ordering::SeqCst)
    }
}

impl Drop for CuttingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies both ways; drops both sides at the first `HTTP/1.1 200` while no cut was made.
/// (A response's status line opens the first read of it: these answers are small.)
async fn relay(client: TcpStream, server: TcpStream, cut: Arc<AtomicUsize>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let upward = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
    });
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = match server_read.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        let chunk = &buffer[..read];
        if chunk.starts_with(b"HTTP/1.1 200") && cut.compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst).is_ok()
        {
            break;
        }
        if client_write.write_all(chunk).await.is_err() {
            break;
        }
    }
    upward.abort();
}

/// A fixed address in front of a server that is restarted on a new port each time: the
/// clients keep one URL across crashes, and no other process can take it between a crash
/// and the restart (a server restarted on its old port could find it taken).
pub struct Front {
    /// `http://127.0.0.1:PORT`, standing in for the server's base URL.
    pub base: String,
    upstream: Arc<std::sync::Mutex<String>>,
    task: tokio::task::JoinHandle<()>,
}

impl Front {
    pub async fn start(first: &str) -> Front {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the front");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let upstream = Arc::new(std::sync::Mutex::new(String::new()));
        let current = upstream.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let address = current.lock().unwrap().clone();
                tokio::spawn(async move {
                    // A server that is down refuses: the client sees its connection closed.
                    if let Ok(mut server) = TcpStream::connect(&address).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        let front = Front { base, upstream, task };
        front.point_at(first);
        front
    }

    /// New connections go to `upstream` (`http://host:port`) from now on.
    pub fn point_at(&self, upstream: &str) {
        *self.upstream.lock().unwrap() = upstream_address(upstream).to_string();
    }
}

fn upstream_address(url: &str) -> &str {
    url.trim_start_matches("http://").trim_end_matches('/')
}

impl Drop for Front {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A loopback port held by a socket that never listens: every connection to it is refused,
/// as by a node that is down, and no other process can start listening there meanwhile.
pub struct ClosedPort {
    pub address: std::net::SocketAddr,
    _held: tokio::net::TcpSocket,
}

impl ClosedPort {
    pub fn new() -> ClosedPort {
        let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
        socket.bind("127.0.0.1:0".parse().unwrap()).expect("bind a port");
        let address = socket.local_addr().expect("its address");
        ClosedPort { address, _held: socket }
    }
}

/// A JSON-RPC relay in front of a chain node: every call goes through unchanged, except
/// the transactions sent (Base's `eth_sendRawTransaction`, Solana's `sendTransaction`). It
/// holds each of those for `send_delay` first, as a slower node would, and refuses the
/// first `refusals` of them as a node that will not take them does: Base's pool
/// ("replacement transaction underpriced"), Solana's preflight (a blockhash it has not seen
/// yet, as a node behind the cluster answers).
pub struct NodeRelay {
    pub rpc_url: String,
    /// Sends that arrived, held or not yet.
    arrived: Arc<AtomicUsize>,
    sends: Arc<AtomicUsize>,
    refusals: usize,
    _server: super::FakeServer,
}

impl NodeRelay {
    pub async fn start(node: &str, send_delay: std::time::Duration, refusals: usize) -> NodeRelay {
        let (arrived, sends) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (seen, counted, node) = (arrived.clone(), sends.clone(), node.to_string());
        let router = axum::Router::new().route(
            "/",
            axum::routing::post(move |axum::Json(call): axum::Json<serde_json::Value>| {
                let (seen, counted, node) = (seen.clone(), counted.clone(), node.clone());
                async move {
                    let refusal = match call["method"].as_str() {
                        Some("eth_sendRawTransaction") => Some((-32000, "replacement transaction underpriced")),
                        Some("sendTransaction") => Some((-32002, "Transaction simulation failed: Blockhash not found")),
                        _ => None,
                    };
                    if let Some((code, message)) = refusal {
                        seen.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(send_delay).await;
                        if counted.fetch_add(1, Ordering::SeqCst) < refusals {
                            return axum::Json(serde_json::json!({ "jsonrpc": "2.0", "id": call["id"],
                                "error": { "code": code, "message": message } }));
                        }
                    }
                    axum::Json(super::post_for_json(&node, &call).await)
                }
            }),
        );
        let server = super::FakeServer::start(router).await;
        NodeRelay {
            rpc_url: server.base.clone(),
            arrived,
            sends,
            refusals,
            _server: server,
        }
    }

    /// How many transactions were sent to it, including those it still holds.
    pub fn arrived(&self) -> usize {
        self.arrived.load(Ordering::SeqCst)
    }

    /// How many transactions it refused.
    pub fn refused(&self) -> usize {
        self.sends.load(Ordering::SeqCst).min(self.refusals)
    }
}
