//! Who is calling, for the limits that apply before (or instead of) a key: the
//! connection's address, or behind a proxy the last entry of the header it sets (the one
//! the proxy itself added; earlier entries are the client's to forge). An IPv6 client is
//! its /64: one host is usually given a whole /64, so counting single addresses would give
//! it 2^64 allowances.

use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::http::request::Parts;

/// The key a client's requests are counted under.
pub fn client_key(parts: &Parts, header: Option<&str>) -> String {
    let forwarded = header.and_then(|header| {
        parts
            .headers
            .get_all(header)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .rfind(|v| !v.is_empty())
    });
    let address = match forwarded {
        Some(text) => text.parse::<IpAddr>().ok().map(Ok).unwrap_or(Err(text.to_string())),
        None => parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|info| Ok(info.0.ip()))
            .unwrap_or_else(|| Err("unknown".into())),
    };
    match address {
        Ok(ip) => key_of(ip),
        // A proxy header that is not an address is still the proxy's word: count by it.
        Err(text) => text,
    }
}

fn key_of(ip: IpAddr) -> String {
    match client_address(ip) {
        IpAddr::V6(prefix) => format!("{prefix}/64"),
        v4 => v4.to_string(),
    }
}

/// The address a client is counted as: an IPv4 address (mapped ones unwrapped), or an IPv6
/// /64 as its first address. The connection limits count by it too.
pub fn client_address(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(peer: &str, headers: &[(&str, &str)]) -> Parts {
        let mut request = axum::http::Request::builder();
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let (mut parts, ()) = request.body(()).unwrap().into_parts();
        parts
            .extensions
            .insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
        parts
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        let a = client_key(&parts("[2001:db8:1:2:aaaa::1]:5000", &[]), None);
        let b = client_key(&parts("[2001:db8:1:2:ffff:1:2:3]:6000", &[]), None);
        assert_eq!(a, "2001:db8:1:2::/64");
        assert_eq!(a, b, "one /64, one client");
        assert_ne!(a, client_key(&parts("[2001:db8:1:3::1]:1", &[]), None));
        assert_eq!(client_key(&parts("[::ffff:10.0.0.7]:1", &[]), None), "10.0.0.7");
        assert_eq!(client_key(&parts("192.0.2.9:80", &[]), None), "192.0.2.9");
    }

    #[test]
    fn behind_a_proxy_the_last_entry_counts() {
        let headers = [("x-forwarded-for", "203.0.113.5, 2001:db8:9:9:1::5")];
        let p = parts("127.0.0.1:1", &headers);
        assert_eq!(client_key(&p, Some("x-forwarded-for")), "2001:db8:9:9::/64");
        assert_eq!(client_key(&p, None), "127.0.0.1", "no header configured: the peer");
    }
}
