//! Connections from the open internet. Each listener runs its own accept loop so that no
//! client takes more than its share: a connection is admitted under two caps (all clients
//! together, and one client address), has `header_read_timeout` to send each request's
//! headers (hyper's timer, which also bounds an idle keep-alive), `body_read_timeout` for
//! each body, and is closed when an answer stalls on a client that reads none of it.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::ServiceExt;

use super::client_stream::ClientStream;
use crate::config::{AddressRange, ServerSettings};
use crate::routes::body_deadline::BodyDeadline;
use crate::routes::client::client_address;

/// How long each stage of a connection may take, and how many may be open.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_connections: usize,
    pub max_per_address: usize,
    /// Addresses many clients share (a proxy, a NAT): held to the global cap only.
    pub shared: Vec<AddressRange>,
    pub header_read: Duration,
    pub body_read: Duration,
    pub response_stall: Duration,
    /// Whether a client may speak HTTP/2 without TLS (prior knowledge).
    pub http2: bool,
    pub http2_keep_alive: Duration,
}

impl Limits {
    pub fn public(server: &ServerSettings) -> Limits {
        let mut shared = server.connection_shared_addresses.clone();
        // Behind a proxy (`client_ip_header`), every client comes through the proxy's own
        // address: unless told which that is, the private and loopback ranges are taken for
        // it, rather than hold the proxy to one client's share.
        if server.client_ip_header.is_some() && shared.is_empty() {
            shared = AddressRange::parse_list(PROXY_RANGES).unwrap_or_default();
        }
        Limits {
            max_connections: server.max_connections,
            max_per_address: server.max_connections_per_address,
            shared,
            header_read: Duration::from_secs(server.header_read_timeout_secs),
            body_read: Duration::from_secs(server.body_read_timeout_secs),
            response_stall: Duration::from_secs(server.response_stall_timeout_secs),
            http2: server.http2_cleartext,
            http2_keep_alive: Duration::from_secs(server.http2_keep_alive_secs),
        }
    }

    /// The metrics listener's: a few scrapers, never a crowd.
    pub fn metrics(server: &ServerSettings) -> Limits {
        Limits {
            max_connections: 64,
            max_per_address: 64,
            shared: Vec::new(),
            ..Limits::public(server)
        }
    }
}

/// Where a proxy in front usually connects from: loopback and the private ranges.
const PROXY_RANGES: &str = "127.0.0.0/8, 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, ::1/128, fc00::/7";

/// Why a connection was closed as soon as it was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `max_connections` were open.
    Full,
    /// Its address held `max_connections_per_address`.
    Address,
}

impl Refusal {
    fn label(self) -> &'static str {
        match self {
            Refusal::Full => "cap",
            Refusal::Address => "address",
        }
    }
}

/// The connections open on one or more listeners, counted in total and by client address.
pub struct Connections {
    limits: Arc<Limits>,
    open: Mutex<Open>,
    started: Instant,
    /// When a refusal was last logged (seconds since `started`), so a flood logs one line
    /// every ten seconds, not one per connection.
    last_logged: AtomicU64,
    /// Whether the metrics count these connections (the public ones; not the scrapers').
    measured: bool,
}

#[derive(Default)]
struct Open {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
}

/// An open connection's place; dropping it frees the place.
pub struct Admitted {
    connections: Arc<Connections>,
    address: Option<IpAddr>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.connections.open.lock().unwrap_or_else(|e| e.into_inner());
        open.total -= 1;
        if let Some(address) = self.address
            && let Some(count) = open.by_address.get_mut(&address)
        {
            *count -= 1;
            if *count == 0 {
                open.by_address.remove(&address);
            }
        }
        if let Some(metrics) = self.connections.metrics() {
            metrics.connections_open.dec();
        }
    }
}

impl Connections {
    /// The public listeners' connections, counted in the metrics.
    pub fn new(limits: Limits) -> Arc<Connections> {
        Connections::make(limits, true)
    }

    /// The metrics listener's: a scrape does not count itself.
    pub fn unmeasured(limits: Limits) -> Arc<Connections> {
        Connections::make(limits, false)
    }

    /// `limits.max_connections` is lowered, with a warning, to what the open-file limit
    /// leaves room for: a connection past it would fail the database and chain calls.
    fn make(mut limits: Limits, measured: bool) -> Arc<Connections> {
        let room = room_within_open_files();
        if limits.max_connections > room {
            tracing::warn!(
                max_connections = limits.max_connections,
                room,
                "the open-file limit leaves room for fewer connections than max_connections; serving at most {room}"
            );
            limits.max_connections = room;
        }
        Arc::new(Connections {
            limits: Arc::new(limits),
            open: Mutex::new(Open::default()),
            started: Instant::now(),
            last_logged: AtomicU64::new(u64::MAX),
            measured,
        })
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// A place for a connection from `peer`, or why there is none.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Admitted, Refusal> {
        let client = client_address(peer);
        let shared = self
            .limits
            .shared
            .iter()
            .any(|range| range.contains(client) || range.contains(peer));
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.total >= self.limits.max_connections {
            return Err(Refusal::Full);
        }
        let address = match shared {
            true => None,
            false => {
                let count = open.by_address.entry(client).or_default();
                if *count >= self.limits.max_per_address {
                    return Err(Refusal::Address);
                }
                *count += 1;
                Some(client)
            }
        };
        open.total += 1;
        if let Some(metrics) = self.metrics() {
            metrics.connections_open.inc();
        }
        Ok(Admitted {
            connections: self.clone(),
            address,
        })
    }

    /// How many connections are open.
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).total
    }

    fn metrics(&self) -> Option<&'static crate::telemetry::metrics::Metrics> {
        crate::telemetry::metrics::metrics().filter(|_| self.measured)
    }

    fn note_refused(&self, refusal: Refusal, peer: SocketAddr) {
        if let Some(metrics) = self.metrics() {
            metrics.connection_refused(refusal.label());
        }
        let now = self.started.elapsed().as_secs();
        let last = self.last_logged.load(Ordering::Relaxed);
        if (last == u64::MAX || now >= last + 10)
            && self
                .last_logged
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            match refusal {
                Refusal::Full => tracing::warn!(
                    max_connections = self.limits.max_connections,
                    %peer,
                    "connection cap reached: new connections are closed at once"
                ),
                Refusal::Address => tracing::warn!(
                    max_connections_per_address = self.limits.max_per_address,
                    %peer,
                    "a client address holds its share of connections: its new ones are closed at once"
                ),
            }
        }
    }
}

/// Connections the open-file limit leaves room for, after raising its soft limit to the hard
/// one: an eighth of it (at least 512 files) stays for the database, chains and plugins.
fn room_within_open_files() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write only the struct passed to them.
    let files = unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return usize::MAX;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
        limit.rlim_cur
    };
    if files == libc::RLIM_INFINITY {
        return usize::MAX;
    }
    let files = usize::try_from(files).unwrap_or(usize::MAX);
    files.saturating_sub((files / 8).max(512)).max(1)
}

/// Serves `router` on `listener` until `stop` turns true, then lets the open connections
/// finish what they are answering (each told to close after it) and returns.
pub async fn serve(
    listener: TcpListener,
    router: impl crate::routes::Api,
    connections: Arc<Connections>,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    // Every connection's task holds a receiver; `closed()` resolves when the last is gone.
    let (all_closed, open) = watch::channel(());
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    wait_after_accept_error(error).await;
                    continue;
                }
            },
            () = stopped(&mut stop) => break,
        };
        let admitted = match connections.admit(peer.ip()) {
            Ok(admitted) => admitted,
            Err(refusal) => {
                connections.note_refused(refusal, peer);
                drop(tcp);
                continue;
            }
        };
        // Streamed answers are many small writes: without TCP_NODELAY, one would wait on
        // the client's delayed ACK (40 ms) each time the previous is unacknowledged.
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "TCP_NODELAY not set on a connection");
        }
        let router = router.clone();
        let limits = connections.limits.clone();
        let stop = stop.clone();
        let open = open.clone();
        tokio::spawn(async move {
            serve_connection(tcp, peer, router, &limits, stop).await;
            drop(admitted);
            drop(open);
        });
    }
    drop(listener);
    drop(open);
    all_closed.closed().await;
    Ok(())
}

/// Resolves once `stop` turns true (or its sender is gone). Holds nothing of the channel
/// after, so the futures that wait on it stay `Send`.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// Out of file descriptors, or a connection reset before it was accepted: the first passes
/// as connections close, so the loop waits a little rather than spin.
async fn wait_after_accept_error(error: io::Error) {
    if matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionRefused
    ) {
        return;
    }
    tracing::warn!(%error, "could not accept a connection");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

async fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    router: impl crate::routes::Api,
    limits: &Limits,
    stop: watch::Receiver<bool>,
) {
    let mut stream = ClientStream::new(tcp, limits.response_stall);
    // hyper starts its header timer once it knows the protocol; the bytes that tell it are
    // read here, under the same bound. Without HTTP/2, hyper's HTTP/1 timer runs at once.
    let http2 = limits.http2
        && match tokio::time::timeout(limits.header_read, stream.starts_http2()).await {
            Ok(Ok(http2)) => http2,
            Ok(Err(_)) | Err(_) => return,
        };
    let body_read = limits.body_read;
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let mut request = request.map(|body| axum::body::Body::new(BodyDeadline::new(body, body_read)));
        // The peer address: the x402 endpoints and the auth throttle count clients by it.
        request.extensions_mut().insert(ConnectInfo(peer));
        router.clone().oneshot(request)
    });
    let io = TokioIo::new(stream);
    let outcome = if http2 {
        // Streams at once and header sizes bounded: one connection's many streams must not
        // hold what a crowd of HTTP/1 connections may not.
        let connection = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .keep_alive_interval(Some(limits.http2_keep_alive))
            .keep_alive_timeout(limits.http2_keep_alive)
            .max_concurrent_streams(HTTP2_STREAMS)
            .max_header_list_size(HTTP2_HEADER_BYTES)
            .serve_connection(io, service);
        until_stopped(connection, stop, |c| c.graceful_shutdown()).await
    } else {
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read)
            .serve_connection(io, service);
        until_stopped(connection, stop, |c| c.graceful_shutdown()).await
    };
    if let Err(error) = outcome {
        tracing::debug!(%error, %peer, "connection ended");
    }
}

/// Drives a connection to its end; once `stop` turns true, it finishes the request it is
/// answering and closes.
async fn until_stopped<C>(
    connection: C,
    mut stop: watch::Receiver<bool>,
    shut_down: impl FnOnce(Pin<&mut C>),
) -> Result<(), hyper::Error>
where
    C: Future<Output = Result<(), hyper::Error>>,
{
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        outcome = connection.as_mut() => return outcome,
        () = stopped(&mut stop) => shut_down(connection.as_mut()),
    }
    connection.await
}

/// Requests one HTTP/2 connection may have open at once, and the most header bytes each.
const HTTP2_STREAMS: u32 = 32;
const HTTP2_HEADER_BYTES: u32 = 16 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_connections: usize, max_per_address: usize, shared: &str) -> Limits {
        Limits {
            max_connections,
            max_per_address,
            shared: AddressRange::parse_list(shared).unwrap(),
            header_read: Duration::from_secs(1),
            body_read: Duration::from_secs(1),
            response_stall: Duration::from_secs(1),
            http2: false,
            http2_keep_alive: Duration::from_secs(1),
        }
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn behind_a_proxy_its_private_ranges_are_shared_unless_named() {
        let settings = crate::config::Settings::load(Some(std::path::Path::new("/nonexistent"))).unwrap();
        let mut server = settings.server.clone();
        assert!(
            Limits::public(&server).shared.is_empty(),
            "no proxy: every address counted"
        );
        server.client_ip_header = Some("x-forwarded-for".into());
        let behind = Limits::public(&server);
        assert!(behind.shared.iter().any(|r| r.contains(ip("10.1.2.3"))));
        assert!(!behind.shared.iter().any(|r| r.contains(ip("203.0.113.9"))));
        server.connection_shared_addresses = AddressRange::parse_list("198.51.100.7").unwrap();
        let named = Limits::public(&server);
        assert!(
            !named.shared.iter().any(|r| r.contains(ip("10.1.2.3"))),
            "the operator's own list stands"
        );
    }

    #[test]
    fn each_address_holds_its_share_and_all_together_the_cap() {
        let connections = Connections::new(limits(5, 2, "10.0.0.0/8"));
        let a1 = connections.admit(ip("192.0.2.1")).unwrap();
        let _a2 = connections.admit(ip("192.0.2.1")).unwrap();
        assert_eq!(connections.admit(ip("192.0.2.1")).err(), Some(Refusal::Address));
        // An IPv6 client is its /64.
        let _b1 = connections.admit(ip("2001:db8:1:2::1")).unwrap();
        let _b2 = connections.admit(ip("2001:db8:1:2::ffff")).unwrap();
        assert_eq!(connections.admit(ip("2001:db8:1:2:9::9")).err(), Some(Refusal::Address));
        // A shared address (a proxy) is held to the cap only.
        let _p1 = connections.admit(ip("10.1.1.1")).unwrap();
        assert_eq!(connections.open(), 5);
        assert_eq!(connections.admit(ip("10.1.1.1")).err(), Some(Refusal::Full));
        drop(a1);
        assert_eq!(connections.open(), 4);
        assert!(
            connections.admit(ip("192.0.2.1")).is_ok(),
            "a closed connection frees its place"
        );
    }
}
