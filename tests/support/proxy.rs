//! A proxy that loses a paid answer: it passes a client's connections to the server, and
//! the first time an answer starting `200` comes back it drops the connection instead,
//! as a network does when it fails after the server settled and before the client read.

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
