//! Connections from strangers: a client that holds a connection without finishing its
//! request is cut off within the stated bound, and a full host refuses new connections at
//! once while the requests it is serving, paid ones included, complete.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::chains::LocalBase;
use crate::support::x402::*;
use crate::support::*;

async fn connect(server: &TestServer) -> TcpStream {
    let address = server
        .url("")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    TcpStream::connect(address).await.unwrap()
}

/// Reads until the server closes the connection; what it sent, and when it closed.
async fn until_closed(stream: &mut TcpStream, limit: Duration) -> (String, Instant) {
    let mut received = Vec::new();
    let read = tokio::time::timeout(limit, async {
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server still holds the connection after {limit:?}");
    (String::from_utf8_lossy(&received).into_owned(), Instant::now())
}

/// Waits until the server holds exactly `n` client connections (its metrics listener's
/// are counted apart).
async fn until_open(server: &TestServer, n: usize) {
    let what = format!("{n} connections open");
    time_until(Duration::from_secs(30), &what, || async {
        server.metric("http_server_open_connections").await == n as f64
    })
    .await;
}

/// Whether the server closes a fresh connection before answering anything: it was refused.
async fn refused_at_once(server: &TestServer) -> bool {
    let mut stream = connect(server).await;
    let _ = stream.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let mut buffer = [0u8; 64];
    matches!(
        tokio::time::timeout(Duration::from_secs(2), stream.read(&mut buffer)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn a_client_that_never_finishes_its_request_is_cut_off() {
    let env = TestEnv::new()
        .with_env("AGENT_HOST_HEADER_READ_TIMEOUT_SECS", "2")
        .with_env("AGENT_HOST_BODY_READ_TIMEOUT_SECS", "2");
    let server = env.serve();

    // Headers that never end (a slowloris, one header line at a time).
    let mut slow = connect(&server).await;
    let opened = Instant::now();
    slow.write_all(b"POST /x402/base/seller HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    slow.write_all(b"X-Padding: 1\r\n").await.unwrap();
    let (answer, closed) = until_closed(&mut slow, Duration::from_secs(10)).await;
    let held = closed - opened;
    assert!(
        held >= Duration::from_secs(2),
        "closed after {held:?}, before its bound"
    );
    // The first bytes are read under the bound, then hyper's own timer runs: at most twice.
    assert!(held < Duration::from_secs(5), "held {held:?}");
    assert!(!answer.contains("200 OK"), "{answer}");

    // A connection that sends nothing, and one idle after its answer: closed alike.
    let mut silent = connect(&server).await;
    let opened = Instant::now();
    let (_, closed) = until_closed(&mut silent, Duration::from_secs(10)).await;
    assert!(closed - opened >= Duration::from_secs(2) && closed - opened < Duration::from_secs(5));
    let mut idle = connect(&server).await;
    idle.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answered = Instant::now();
    let (answer, closed) = until_closed(&mut idle, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(closed - answered >= Duration::from_secs(2) && closed - answered < Duration::from_secs(5));

    // A body that trickles: 408 in the API's envelope once its bound has passed.
    let key = env.account_with_key("acme", "free");
    let mut trickle = connect(&server).await;
    let started = Instant::now();
    let head = format!(
        "POST /v1/account/keys HTTP/1.1\r\nHost: x\r\nx-api-key: {key}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"name\""
    );
    trickle.write_all(head.as_bytes()).await.unwrap();
    let (answer, _) = until_closed(&mut trickle, Duration::from_secs(10)).await;
    assert!(started.elapsed() >= Duration::from_secs(2));
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"request_timeout\""), "{answer}");
}

#[tokio::test]
async fn a_full_host_refuses_new_connections_and_finishes_a_paid_request() {
    let chain = LocalBase::start().await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_MAX_CONNECTIONS", "3")
        .with_env("AGENT_HOST_MAX_CONNECTIONS_PER_ADDRESS", "100")
        .with_metrics();
    let (env, _) = base_shop(&chain, env, "").await;
    let server = env.serve();
    let (payer, payer_address) = base_payer(&chain, 1_000_000).await;
    let url = server.url("/x402/base/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let offered = payment_required(&post_x402(&url, &hello).await)["accepts"][0].clone();
    let payment = base_payment(&payer, &offered, 50_000, 1, 60);
    until_open(&server, 0).await;

    // A paid request in flight: its headers and half its body are in.
    let body = hello.to_string();
    let (first, rest) = body.split_at(body.len() / 2);
    let mut paying = connect(&server).await;
    let head = format!(
        "POST /x402/base/seller HTTP/1.1\r\nHost: x\r\nx-payment: {payment}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{first}",
        body.len()
    );
    paying.write_all(head.as_bytes()).await.unwrap();
    // Two idle connections fill the host.
    let idle = [connect(&server).await, connect(&server).await];
    until_open(&server, 3).await;
    let asked = Instant::now();
    assert!(refused_at_once(&server).await, "a fourth connection is closed");
    assert!(asked.elapsed() < Duration::from_secs(1), "at once, not after a timeout");

    // The paid request completes and is charged once.
    paying.write_all(rest.as_bytes()).await.unwrap();
    let (answer, _) = until_closed(&mut paying, Duration::from_secs(30)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("Hello, Ann!"), "{answer}");
    assert_eq!(chain.usdc_of(&payer_address).await, 950_000);
    server
        .until_metric("http_server_refused_connections_total{reason=\"cap\"}", 1.0)
        .await;
    drop(idle);
    // Places are freed as connections close.
    until_open(&server, 0).await;
    let health = get(&server.url("/health"), None).await;
    assert_eq!(health.status, 200);
}

#[tokio::test]
async fn one_address_cannot_take_every_connection() {
    let env = TestEnv::new()
        .with_env("AGENT_HOST_MAX_CONNECTIONS_PER_ADDRESS", "4")
        .with_metrics();
    let server = env.serve();
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(connect(&server).await);
    }
    until_open(&server, 4).await;
    assert!(
        refused_at_once(&server).await,
        "a fifth from the same address is closed"
    );
    server
        .until_metric("http_server_refused_connections_total{reason=\"address\"}", 1.0)
        .await;
    held.pop();
    until_open(&server, 3).await;
    assert_eq!(
        get(&server.url("/health"), None).await.status,
        200,
        "one closed: one more admitted"
    );
}

/// Latencies' p50 and p99, in ms.
fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1];
    (at(0.5).as_secs_f64() * 1000.0, at(0.99).as_secs_f64() * 1000.0)
}

/// A flood of idle connections and a slowloris from many addresses: paid requests and
/// keyed executes are still answered. The suite holds a few hundred connections;
/// `bench/connection-flood.sh` holds 10,000 (`FLOOD_IDLE`) and prints the latencies with
/// and without the flood (`FLOOD_SAMPLES` of each kind).
#[tokio::test(flavor = "multi_thread")]
async fn paid_and_keyed_requests_are_answered_under_a_connection_flood() {
    let number = |name: &str, default: usize| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let (idle, samples) = (number("FLOOD_IDLE", 300), number("FLOOD_SAMPLES", 10));
    let chain = LocalBase::start().await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_X402_PAYER_LIMIT_PER_MINUTE", "100000")
        .with_env("AGENT_HOST_X402_CLIENT_LIMIT_PER_MINUTE", "100000")
        .with_metrics()
        .with_envs(chain.env());
    // A plan with room for the samples' executes.
    let key = env.account_with_key("acme", "pro");
    env.apply_agent(&paid_manifest("seller"), "acme");
    let wallet = env.create_wallet("seller", "base");
    chain.set_eth(&wallet, 10u128.pow(18)).await;
    let server = env.serve();
    let (payer, _) = base_payer(&chain, 100_000_000).await;
    let url = server.url("/x402/base/seller");
    let hello = json!({ "command": "hello", "name": "Ann" });
    let offered = payment_required(&post_x402(&url, &hello).await)["accepts"][0].clone();
    let execute = server.url("/v1/agents/seller/commands/hello/execute");
    let mut nonce = 0u8;
    let mut measure = async |what: &str| {
        let (mut paid_times, mut keyed_times) = (Vec::new(), Vec::new());
        for _ in 0..samples {
            nonce += 1;
            let payment = base_payment(&payer, &offered, 50_000, nonce, 60);
            let started = Instant::now();
            let reply = paid(&url, &hello, &payment).await;
            paid_times.push(started.elapsed());
            assert_eq!(reply.status, 200, "{what}: {}", reply.text);
            let started = Instant::now();
            let reply = post_json(&execute, Some(&key), &json!({ "parameters": { "name": "Ann" } })).await;
            keyed_times.push(started.elapsed());
            assert_eq!(reply.status, 200, "{what}: {}", reply.text);
        }
        let (paid, keyed) = (percentiles(paid_times), percentiles(keyed_times));
        println!(
            "{what:>12}: paid p50 {:.1} ms p99 {:.1} ms | keyed execute p50 {:.1} ms p99 {:.1} ms",
            paid.0, paid.1, keyed.0, keyed.1
        );
    };
    measure("quiet").await;

    // The flood, from a process of its own (bench/flood.py): idle connections from
    // addresses of 127.0.1.0/24, 200 each (the per-address cap is 256), and a slowloris of
    // 100 more from 127.0.2.0/24; each opened again whenever the server closes it.
    let target = server
        .url("")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/flood.py");
    let mut flood = tokio::process::Command::new("python3")
        .args([script, &target, &idle.to_string(), "100"])
        .kill_on_drop(true)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("python3 runs the flood");
    // Each is closed by the header timer and opened again, so the count hovers just under
    // the flood's size: nine tenths of it count as there.
    let what = format!("{idle} idle connections and 100 slow ones open");
    let wanted = (idle + 100) as f64 * 0.9;
    time_until(Duration::from_secs(180), &what, || async {
        server.metric("http_server_open_connections").await >= wanted
    })
    .await;
    measure("under flood").await;
    let open_now = server.metric("http_server_open_connections").await;
    let _ = flood.kill().await;
    println!(
        "{:>12}: {} connections open, {} refused",
        "flood",
        open_now,
        server
            .metric("http_server_refused_connections_total{reason=\"cap\"}")
            .await
            + server
                .metric("http_server_refused_connections_total{reason=\"address\"}")
                .await
    );
}

/// With `http2_cleartext`, a client that speaks HTTP/2 from its first byte (prior knowledge,
/// as gRPC-style clients and some proxies do) is served HTTP/2: the first bytes read to tell
/// the protocol are given back. Without it, the same client is refused.
#[tokio::test]
async fn http2_with_prior_knowledge_is_served() {
    // Each environment is kept while its server runs (on PostgreSQL its database goes with it).
    let env = TestEnv::new().with_env("AGENT_HOST_HTTP2_CLEARTEXT", "true");
    let server = env.serve();
    let (answer, stderr) = http2_prior_knowledge(&server.url("/openapi.json")).await;
    assert_eq!(answer, "2 200", "{stderr}");

    let plain = TestEnv::new();
    let http1_only = plain.serve();
    let (answer, stderr) = http2_prior_knowledge(&http1_only.url("/openapi.json")).await;
    assert!(!answer.starts_with("2 200"), "{answer} {stderr}");
}

/// curl speaking HTTP/2 from its first byte: "<http version> <status>", and its stderr.
async fn http2_prior_knowledge(url: &str) -> (String, String) {
    let output = tokio::process::Command::new("curl")
        .args([
            "-sS",
            "--http2-prior-knowledge",
            "-o",
            "/dev/null",
            "-w",
            "%{http_version} %{http_code}",
            url,
        ])
        .output()
        .await
        .expect("curl runs");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (text(&output.stdout), text(&output.stderr))
}
