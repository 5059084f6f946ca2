//! `[[mcp_servers]]`: remote MCP servers whose tools the agent's chat may call.

use toml::Spanned;

use super::{Checker, ManifestError};
use crate::domain::remote_mcp::{McpServerDef, SEPARATOR};

/// Most remote servers one agent names.
pub const MAX_SERVERS: usize = 10;
/// The longest wait a manifest may give one server's answer.
const MAX_TIMEOUT_MS: u64 = 60_000;
/// Most calls of one server's tools in one chat.
const MAX_CALLS: u32 = 20;
/// Headers the client sets itself, or that would change where or how a request goes.
const RESERVED_HEADERS: [&str; 9] = [
    "host",
    "content-type",
    "content-length",
    "accept",
    "connection",
    "transfer-encoding",
    "mcp-session-id",
    "mcp-protocol-version",
    "cookie",
];

pub(super) fn check(check: &Checker<'_>, raw: Vec<Spanned<McpServerDef>>) -> Result<Vec<McpServerDef>, ManifestError> {
    if raw.len() > MAX_SERVERS {
        return Err(check.err(
            Some(&raw[MAX_SERVERS].span()),
            "mcp_servers",
            format!("an agent uses at most {MAX_SERVERS} remote servers"),
        ));
    }
    let mut servers: Vec<McpServerDef> = Vec::with_capacity(raw.len());
    for (i, spanned) in raw.into_iter().enumerate() {
        let span = spanned.span();
        let mut server = spanned.into_inner();
        let at = |field: &str| format!("mcp_servers[{i}].{field}");
        let wrong = |field: &str, why: String| check.err(Some(&span), at(field), why);
        server.name = server.name.trim().to_string();
        let good_name = (1..=24).contains(&server.name.len())
            && server
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
            && !server.name.contains(SEPARATOR);
        if !good_name {
            return Err(wrong(
                "name",
                format!("1 to 24 characters of a-z, 0-9, '-' and '_', without '{SEPARATOR}'"),
            ));
        }
        if servers.iter().any(|s| s.name == server.name) {
            return Err(wrong("name", format!("another server is named '{}'", server.name)));
        }
        let url = reqwest::Url::parse(server.url.trim()).map_err(|e| wrong("url", format!("not a URL ({e})")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(wrong("url", "an http or https address".into()));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(wrong(
                "url",
                "no credentials in the URL; name a 'header' and set its value apart".into(),
            ));
        }
        server.url = url.to_string();
        // A credential travels encrypted, but to this machine itself.
        let local = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
        if server.oauth {
            if server.header.is_some() {
                return Err(wrong(
                    "oauth",
                    "a server signs in with OAuth or takes a 'header' credential, not both".into(),
                ));
            }
            if url.scheme() != "https" && !local {
                return Err(wrong("url", "https, to sign in to it with OAuth".into()));
            }
        }
        if let Some(header) = &server.header {
            if url.scheme() != "https" && !local {
                return Err(wrong("url", "https, to send a credential ('header') to it".into()));
            }
            let header = header.trim();
            let token = !header.is_empty()
                && header
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token || RESERVED_HEADERS.contains(&header.to_ascii_lowercase().as_str()) {
                return Err(wrong(
                    "header",
                    format!("'{header}' is not a header a credential may go in"),
                ));
            }
            server.header = Some(header.to_string());
        }
        if !(100..=MAX_TIMEOUT_MS).contains(&server.timeout_ms) {
            return Err(wrong("timeout_ms", format!("between 100 and {MAX_TIMEOUT_MS}")));
        }
        if !(1..=MAX_CALLS).contains(&server.max_calls) {
            return Err(wrong("max_calls", format!("between 1 and {MAX_CALLS}")));
        }
        for (field, names) in [("include", &server.include), ("exclude", &server.exclude)] {
            if names.iter().any(|n| n.trim().is_empty() || n.len() > 64) {
                return Err(wrong(field, "tool names of 1 to 64 characters".into()));
            }
        }
        servers.push(server);
    }
    Ok(servers)
}
