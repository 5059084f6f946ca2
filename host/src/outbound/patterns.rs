//! The hosts a command's grant or the operator's settings name.

/// A host a grant or the operator names: `api.example.com`, `*.example.com`, with an
/// optional `:port`; `*` alone matches every host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    pub(super) host: String,
    pub(super) port: Option<u16>,
}

impl HostPattern {
    /// `*`: any host the operator's rules allow, for the host's own requests to addresses
    /// an owner or a caller gave (media to post, webhooks).
    pub fn anywhere() -> HostPattern {
        HostPattern {
            host: "*".into(),
            port: None,
        }
    }

    pub fn parse(text: &str) -> Option<HostPattern> {
        let text = text.trim().to_ascii_lowercase();
        if text.is_empty() || text.contains('/') {
            return None;
        }
        // A bracketed IPv6 literal may carry a port after the bracket.
        let (host, port) = match text.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') || h.ends_with(']') => (h.to_string(), Some(p.parse().ok()?)),
            _ => (text.clone(), None),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
        if host.is_empty() {
            return None;
        }
        Some(HostPattern { host, port })
    }

    pub fn matches(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        match self.host.strip_prefix("*.") {
            _ if self.host == "*" => true,
            Some(suffix) => host.ends_with(&format!(".{suffix}")),
            None => self.host == host,
        }
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.host),
            None => write!(f, "{}", self.host),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_patterns() {
        let exact = HostPattern::parse("API.example.com").unwrap();
        assert!(exact.matches("api.example.com", 443));
        assert!(!exact.matches("evil.com", 443));
        assert!(!exact.matches("sub.api.example.com", 443));
        let wild = HostPattern::parse("*.example.com").unwrap();
        assert!(wild.matches("a.example.com", 80));
        assert!(!wild.matches("example.com", 80));
        assert!(!wild.matches("badexample.com", 80));
        let port = HostPattern::parse("127.0.0.1:8080").unwrap();
        assert!(port.matches("127.0.0.1", 8080));
        assert!(!port.matches("127.0.0.1", 8081));
        let v6 = HostPattern::parse("[::1]:9000").unwrap();
        assert!(v6.matches("[::1]", 9000));
        assert!(HostPattern::parse("*").unwrap().matches("anything.net", 1));
        assert_eq!(HostPattern::anywhere(), HostPattern::parse("*").unwrap());
        assert!(HostPattern::parse("http://x.com/").is_none());
        assert!(HostPattern::parse("x.com:notaport").is_none());
    }
}
