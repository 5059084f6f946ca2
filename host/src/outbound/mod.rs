//! Outbound HTTP for anything a third party controls (plugin requests, later media URLs).
//! The one choke point: every hop of every request is checked against the caller's grant
//! and against the address it really resolves to. Loopback, private, link-local (cloud
//! metadata), CGNAT, multicast and unspecified addresses are refused unless the operator
//! lists the host as an exception, and so are this server's own addresses (a plugin must not
//! call the host's other listeners) and ports the operator did not allow. Redirects are followed here, hop by hop, under the
//! same rules; sizes and times are capped.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

mod addresses;
mod patterns;
mod unit_test_guard;

pub use addresses::{is_refused_ip, own_addresses};
pub use patterns::HostPattern;

/// The origin of an http(s) URL, as a browser writes it: `scheme://host[:port]`, the host in
/// lower case (IDNA), the port left out when it is the scheme's. `None` for anything else.
pub fn origin_of(url: &str) -> Option<String> {
    let url = Url::parse(url).ok()?;
    let origin = url.origin();
    (origin.is_tuple() && matches!(url.scheme(), "http" | "https")).then(|| origin.ascii_serialization())
}

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::{Method, Url};

/// The operator's rules, from settings.
#[derive(Debug, Clone)]
pub struct OutboundPolicy {
    /// Hosts third-party URLs may reach at all (`*` = any public host).
    pub allowed_hosts: Vec<HostPattern>,
    /// Hosts that may resolve to private or loopback addresses (e.g. an internal API).
    pub private_exceptions: Vec<HostPattern>,
    /// Ports a host may be reached on; another port needs the operator to name it
    /// (`host:port` in `allowed_hosts`, or the host in `private_exceptions`).
    pub allowed_ports: Vec<u16>,
    /// This server's own addresses (every interface's, and its public address): a public
    /// address on one of its interfaces is refused like a private one.
    pub own_addresses: Vec<IpAddr>,
    /// This server's own public host name (from its public base URL), refused the same way.
    pub own_names: Vec<String>,
    pub max_response_bytes: u64,
    pub max_timeout: Duration,
    pub max_redirects: usize,
    /// Signs the recursion-guard marker each request carries (see `marker`).
    pub marker: Option<crate::marker::MarkerKey>,
}

impl OutboundPolicy {
    fn private_allowed(&self, host: &str, port: Option<u16>) -> bool {
        self.private_exceptions.iter().any(|p| match port {
            Some(port) => p.matches(host, port),
            // DNS resolution does not know the port: a host-level exception is enough there;
            // the port is checked before the request is sent.
            None => p.host == host.to_ascii_lowercase() || p.host == "*",
        })
    }

    /// Whether the operator allowed this port for this host: one of the allowed ports, a
    /// `host:port` they listed, or a host they listed as a private exception.
    fn port_allowed(&self, host: &str, port: u16) -> bool {
        self.allowed_ports.contains(&port)
            || self.private_exceptions.iter().any(|p| p.matches(host, port))
            || self
                .allowed_hosts
                .iter()
                .any(|p| p.port == Some(port) && p.matches(host, port))
    }

    /// One of this server's own addresses, in any of its forms (an IPv4-mapped IPv6 too).
    pub fn is_own_address(&self, ip: IpAddr) -> bool {
        let canonical = |ip: IpAddr| match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let ip = canonical(ip);
        self.own_addresses.iter().any(|own| canonical(*own) == ip)
    }

    /// Whether an address is refused for this host: private, loopback and the like, or
    /// this server's own, unless the operator made the host an exception.
    fn refuses(&self, host: &str, port: Option<u16>, ip: IpAddr) -> bool {
        (is_refused_ip(ip) || self.is_own_address(ip)) && !self.private_allowed(host, port)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum OutboundError {
    Denied(String),
    InvalidRequest(String),
    Timeout,
    TooLarge(u64),
    /// The caller's memory budget does not hold the response (see `ByteBudget`).
    OverBudget,
    Transport(String),
}

impl std::fmt::Display for OutboundError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OutboundError::Denied(m) => write!(f, "refused: {m}"),
            OutboundError::InvalidRequest(m) => write!(f, "invalid request: {m}"),
            OutboundError::Timeout => write!(f, "timed out"),
            OutboundError::TooLarge(n) => write!(f, "response larger than {n} bytes"),
            OutboundError::OverBudget => write!(f, "the response does not fit in the caller's memory limit"),
            OutboundError::Transport(m) => write!(f, "{m}"),
        }
    }
}

/// Memory a response's body is charged to as it arrives, beyond the size limit: a
/// plugin's run holds several responses at once, all within its own memory budget.
pub trait ByteBudget: Send + Sync {
    /// Takes `bytes` from the budget; false if they do not fit (nothing is taken then).
    fn take(&self, bytes: usize) -> bool;
    /// Gives back `bytes` of a body the host dropped before handing it over.
    fn give_back(&self, _bytes: usize) {}
}

#[derive(Clone)]
pub struct OutboundRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    pub timeout: Option<Duration>,
    /// A larger body limit than the policy's, for the host's own downloads (never a plugin's).
    pub max_bytes: Option<u64>,
    /// Where the response body's bytes are charged, if anywhere.
    pub budget: Option<Arc<dyn ByteBudget>>,
    /// Whether a redirect is followed (each hop checked) or answered as it is.
    pub follow_redirects: bool,
    /// Keep the body's first bytes up to the limit rather than fail past it (a webhook's
    /// receiver answering at length still answered).
    pub truncate_body: bool,
}

#[derive(Debug)]
pub struct OutboundResponse {
    /// The request that was answered: the one sent, or the last redirect's (whose method
    /// may have become GET).
    pub method: String,
    pub url: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// A client for the endpoints the operator configured (chain nodes, Telegram, X, the LLM
/// provider): their addresses are the operator's, never a tenant's, so no address guard, and
/// an operator's proxy settings apply. Every HTTP client is built in this module (clippy's
/// `disallowed_methods` keeps it so): anything a third party controls goes through [`Outbound`].
#[allow(clippy::disallowed_methods)]
pub fn operator_client(timeout: Option<Duration>) -> reqwest::Client {
    let builder = unit_test_guard::loopback_only(reqwest::Client::builder());
    let builder = match timeout {
        Some(timeout) => builder.timeout(timeout),
        None => builder,
    };
    builder.build().unwrap_or_default()
}

/// The guarded client. Cheap to clone.
#[derive(Clone)]
pub struct Outbound {
    client: reqwest::Client,
    policy: Arc<OutboundPolicy>,
}

impl Outbound {
    /// Fails rather than fall back to a default client, which would have neither the
    /// guarded resolver nor the redirect policy: the guard must never quietly go missing.
    pub fn new(policy: OutboundPolicy) -> Result<Outbound, reqwest::Error> {
        Outbound::trusting(policy, &[])
    }

    /// The guarded client, trusting `roots` besides the system's certificate authorities.
    #[allow(clippy::disallowed_methods)] // the one guarded client
    pub fn trusting(policy: OutboundPolicy, roots: &[reqwest::Certificate]) -> Result<Outbound, reqwest::Error> {
        let policy = Arc::new(policy);
        let mut client = reqwest::Client::builder();
        for root in roots {
            client = client.add_root_certificate(root.clone());
        }
        let client = client
            // Never the operator's HTTP_PROXY/HTTPS_PROXY: a proxy resolves names itself, and
            // the address check below would never see where a request really goes.
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(GuardedResolver { policy: policy.clone() }))
            .user_agent(concat!("agent-host/", env!("CARGO_PKG_VERSION")));
        let client = unit_test_guard::loopback_only(client).build()?;
        Ok(Outbound { client, policy })
    }

    pub fn policy(&self) -> &OutboundPolicy {
        &self.policy
    }

    /// Whether `url` is reached only through one of the operator's private exceptions: an
    /// internal host, whose answers are not for the caller to read.
    pub fn is_private_exception(&self, url: &str) -> bool {
        let Ok(url) = Url::parse(url) else {
            return false;
        };
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return false;
        };
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        self.policy.private_allowed(&host, Some(port))
    }

    /// Whether `url`'s host is one the operator lets plugins reach though it is private
    /// (`outbound_allow_private`): a host no third party should point the host at.
    pub fn names_private_exception(&self, url: &str) -> bool {
        let Some(host) = Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
        else {
            return false;
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        self.policy.private_exceptions.iter().any(|p| p.host == host)
    }

    /// Sends the request, following redirects; `allowed` is the caller's grant, checked
    /// on every hop together with the operator's rules.
    pub async fn send(
        &self,
        request: OutboundRequest,
        allowed: &[HostPattern],
    ) -> Result<OutboundResponse, OutboundError> {
        let timeout = request
            .timeout
            .unwrap_or(self.policy.max_timeout)
            .min(self.policy.max_timeout);
        let method = Method::from_bytes(request.method.to_ascii_uppercase().as_bytes())
            .map_err(|_| OutboundError::InvalidRequest(format!("bad method '{}'", request.method)))?;
        let mut url = Url::parse(&request.url).map_err(|e| OutboundError::InvalidRequest(format!("bad URL: {e}")))?;
        let mut method = method;
        let mut body = request.body;
        let work = async {
            for _hop in 0..=self.policy.max_redirects {
                self.check(&url, allowed)?;
                let mut builder = self.client.request(method.clone(), url.clone());
                if let Some(key) = &self.policy.marker {
                    builder = builder.header(crate::marker::HEADER, key.sign(crate::clock::now_ms() / 1000));
                }
                for (name, value) in &request.headers {
                    if is_hop_header(name) || name.eq_ignore_ascii_case(crate::marker::HEADER) {
                        continue;
                    }
                    builder = builder.header(name.as_str(), value.as_str());
                }
                if let Some(body) = &body {
                    builder = builder.body(body.clone());
                }
                let response = builder.send().await.map_err(transport)?;
                let status = response.status();
                if request.follow_redirects
                    && status.is_redirection()
                    && let Some(location) = response.headers().get(reqwest::header::LOCATION)
                {
                    let location = location
                        .to_str()
                        .map_err(|_| OutboundError::Transport("bad redirect".into()))?;
                    url = url
                        .join(location)
                        .map_err(|e| OutboundError::Transport(format!("bad redirect: {e}")))?;
                    if status == reqwest::StatusCode::SEE_OTHER
                        || ((status == reqwest::StatusCode::MOVED_PERMANENTLY || status == reqwest::StatusCode::FOUND)
                            && method == Method::POST)
                    {
                        method = Method::GET;
                        body = None;
                    }
                    continue;
                }
                let limit = request.max_bytes.unwrap_or(self.policy.max_response_bytes);
                return self
                    .read(
                        response,
                        &method,
                        limit,
                        request.budget.as_deref(),
                        request.truncate_body,
                    )
                    .await;
            }
            Err(OutboundError::Transport(format!(
                "more than {} redirects",
                self.policy.max_redirects
            )))
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| OutboundError::Timeout)?
    }

    /// Whether `url` may be reached at all under `allowed`: every check a request's first
    /// hop gets, its name resolved as the guard resolves it. For addresses an owner gives
    /// to be called later (a webhook), so a refusal is said when they give it.
    pub async fn vet(&self, url: &str, allowed: &[HostPattern]) -> Result<(), OutboundError> {
        let url = Url::parse(url).map_err(|e| OutboundError::InvalidRequest(format!("bad URL: {e}")))?;
        self.check(&url, allowed)?;
        if let Some(name) = url.domain() {
            let resolver = GuardedResolver {
                policy: self.policy.clone(),
            };
            let name: Name = name
                .parse()
                .map_err(|_| OutboundError::InvalidRequest(format!("bad host name '{name}'")))?;
            if let Err(err) = resolver.resolve(name).await {
                return Err(match err.downcast_ref::<RefusedAddress>() {
                    Some(refused) => OutboundError::Denied(refused.0.clone()),
                    None => OutboundError::Transport(format!("the name does not resolve: {err}")),
                });
            }
        }
        Ok(())
    }

    /// The grant and operator checks for one hop; the address check of names happens in
    /// the resolver, of literal addresses here.
    fn check(&self, url: &Url, allowed: &[HostPattern]) -> Result<(), OutboundError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(OutboundError::Denied(format!(
                "scheme '{}' is not allowed",
                url.scheme()
            )));
        }
        let host = url
            .host_str()
            .ok_or_else(|| OutboundError::InvalidRequest("URL without a host".into()))?;
        // `name.` is the same host as `name`: one spelling for every rule below.
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let port = url.port_or_known_default().unwrap_or(80);
        if !allowed.iter().any(|p| p.matches(&host, port)) {
            return Err(OutboundError::Denied(format!(
                "{host} is not among the hosts granted to this command"
            )));
        }
        if !self.policy.allowed_hosts.iter().any(|p| p.matches(&host, port)) {
            return Err(OutboundError::Denied(format!("{host} is not allowed by this server")));
        }
        if let Ok(ip) = host.parse::<IpAddr>()
            && self.policy.refuses(&host, Some(port), ip)
        {
            let what = if is_refused_ip(ip) {
                "a private, loopback or link-local address"
            } else {
                "this server's own address"
            };
            return Err(OutboundError::Denied(format!("{ip} is {what}")));
        }
        if self.policy.own_names.contains(&host) && !self.policy.private_allowed(&host, Some(port)) {
            return Err(OutboundError::Denied(format!("{host} is this server's own name")));
        }
        if host == "localhost" || host.ends_with(".localhost") {
            if !self.policy.private_allowed(&host, Some(port)) {
                return Err(OutboundError::Denied(format!("{host} is a loopback name")));
            }
        } else if url.domain().is_some()
            && self.policy.private_exceptions.iter().any(|p| p.host == host)
            && !self.policy.private_allowed(&host, Some(port))
        {
            return Err(OutboundError::Denied(format!(
                "{host}:{port} is not an allowed private address"
            )));
        }
        // After the address checks: an internal address is refused for what it is.
        if !self.policy.port_allowed(&host, port) {
            return Err(OutboundError::Denied(format!(
                "port {port} is not allowed by this server"
            )));
        }
        Ok(())
    }

    async fn read(
        &self,
        mut response: reqwest::Response,
        method: &Method,
        limit: u64,
        budget: Option<&dyn ByteBudget>,
        truncate: bool,
    ) -> Result<OutboundResponse, OutboundError> {
        if !truncate && response.content_length().is_some_and(|n| n > limit) {
            return Err(OutboundError::TooLarge(limit));
        }
        let status = response.status().as_u16();
        let url = response.url().to_string();
        let headers = response
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            if body.len() as u64 + chunk.len() as u64 > limit {
                if truncate {
                    let room = usize::try_from(limit).unwrap_or(usize::MAX).saturating_sub(body.len());
                    body.extend_from_slice(&chunk[..room.min(chunk.len())]);
                    break;
                }
                return Err(OutboundError::TooLarge(limit));
            }
            if budget.is_some_and(|b| !b.take(chunk.len())) {
                return Err(OutboundError::OverBudget);
            }
            body.extend_from_slice(&chunk);
        }
        Ok(OutboundResponse {
            method: method.as_str().to_string(),
            url,
            status,
            headers,
            body,
        })
    }
}

fn is_hop_header(name: &str) -> bool {
    matches!(
        name.to_ascii_lowercase().as_str(),
        "host" | "connection" | "content-length" | "transfer-encoding"
    )
}

fn transport(err: reqwest::Error) -> OutboundError {
    if err.is_timeout() {
        return OutboundError::Timeout;
    }
    // The resolver's refusal surfaces as a connect error; say it plainly.
    let mut source: Option<&dyn std::error::Error> = Some(&err);
    while let Some(e) = source {
        if let Some(refused) = e.downcast_ref::<RefusedAddress>() {
            return OutboundError::Denied(refused.0.clone());
        }
        source = e.source();
    }
    OutboundError::Transport(err.without_url().to_string())
}

#[derive(Debug)]
struct RefusedAddress(String);

impl std::fmt::Display for RefusedAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RefusedAddress {}

/// Resolves names and drops refused addresses, so the connection goes only to an address
/// that was checked (no second lookup an attacker could rebind).
struct GuardedResolver {
    policy: Arc<OutboundPolicy>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if policy.private_allowed(&host, None) {
                return Ok(Box::new(found.into_iter()) as Addrs);
            }
            let public: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| !policy.refuses(&host, None, a.ip()))
                .collect();
            if public.is_empty() {
                let err: Box<dyn std::error::Error + Send + Sync> = Box::new(RefusedAddress(format!(
                    "{host} resolves only to private, loopback, link-local or this server's own addresses"
                )));
                return Err(err);
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests;
