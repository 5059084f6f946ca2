//! Which addresses a third party's URL may not reach: internal ones by their kind, and
//! this server's own, found at start.

use std::net::{IpAddr, Ipv4Addr};

use reqwest::Url;

/// True for addresses no third party's URL may reach by default.
pub fn is_refused_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_refused_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_refused_v4(v4);
            }
            let segments = v6.segments();
            let first = segments[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || segments[..6] == [0; 6] // ::/96, IPv4-compatible (::127.0.0.1 and the like)
                || (first & 0xfe00) == 0xfc00 // unique local (incl. fd00:ec2::254 metadata)
                || (first & 0xffc0) == 0xfe80 // link-local
                || (first & 0xffc0) == 0xfec0 // site-local (deprecated, still routed by some)
                || first == 0x2002 // 6to4: carries any IPv4 address, private ones included
                || (first == 0x0064 && segments[1] == 0xff9b) // NAT64 of anything
                || first == 0x2001 && segments[1] == 0x0db8 // documentation
        }
    }
}

fn is_refused_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // 169.254.0.0/16, the cloud metadata service among them
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // CGNAT
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || a >= 240 // reserved
}

/// This machine's interface addresses, and those of the public base URL's host when it has
/// one: what [`OutboundPolicy::own_addresses`] and `own_names` hold. Read once at start.
pub fn own_addresses(public_base_url: Option<&str>) -> (Vec<IpAddr>, Vec<String>) {
    let mut addresses: Vec<IpAddr> = if_addrs::get_if_addrs()
        .map(|list| list.iter().map(|i| i.ip()).collect())
        .unwrap_or_default();
    let mut names = Vec::new();
    if let Some(url) = public_base_url.and_then(|u| Url::parse(u).ok())
        && let Some(host) = url.host_str()
    {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        match host.parse::<IpAddr>() {
            Ok(ip) => addresses.push(ip),
            Err(_) => {
                use std::net::ToSocketAddrs;
                let port = url.port_or_known_default().unwrap_or(80);
                // Once, at start: a name that does not resolve yet is still refused by name.
                if let Ok(found) = (host.as_str(), port).to_socket_addrs() {
                    addresses.extend(found.map(|a| a.ip()));
                }
                names.push(host);
            }
        }
    }
    addresses.sort();
    addresses.dedup();
    (addresses, names)
}
