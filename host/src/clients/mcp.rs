//! The client side of MCP's Streamable HTTP transport, for the remote servers an agent uses
//! as tools: `initialize`, `tools/list` and `tools/call`, each a JSON-RPC request POSTed to
//! the server's one address and answered as JSON or as a short event stream. Every request
//! goes through the outbound guard ([`Outbound`]) with the server's own host as the grant,
//! under a time and size limit: a server that hangs or floods is cut, never waited for.

use std::time::Duration;

use serde_json::{Value, json};

use crate::outbound::{HostPattern, Outbound, OutboundError, OutboundRequest};

/// The protocol versions this client speaks, newest first.
pub const PROTOCOL_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// Most pages of tools one listing reads.
const MAX_PAGES: usize = 5;

/// How to reach one server.
#[derive(Clone)]
pub struct Remote {
    pub url: String,
    /// Headers every request carries (the owner's credential).
    pub headers: Vec<(String, String)>,
    /// Longest wait for one answer.
    pub timeout: Duration,
    /// Largest answer read.
    pub max_bytes: u64,
}

/// A session with a server: what `initialize` gave.
#[derive(Debug, Clone, Default)]
pub struct Session {
    pub id: Option<String>,
    pub protocol_version: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RemoteTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// What a tool call gave: its text, and whether the server called it an error.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    pub text: String,
    pub is_error: bool,
    /// Its `structuredContent` (an x402 payment-required object, when the tool is paid).
    pub structured: Value,
    /// Its `_meta` (`x402/payment-response`, when a payment was settled).
    pub meta: Value,
}

#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("the server could not be reached: {0}")]
    Unreachable(String),
    #[error("the server took longer than {0} ms")]
    Timeout(u128),
    #[error("the server's answer was larger than {0} bytes")]
    TooLarge(u64),
    #[error("the server refused: {0}")]
    Refused(String),
    #[error("the server's answer is not MCP: {0}")]
    Malformed(String),
    /// The server asks for authorization (401): its `WWW-Authenticate` header, if any.
    #[error("the server asks for authorization")]
    Unauthorized(Option<String>),
}

impl Remote {
    /// Opens a session: `initialize`, then `notifications/initialized`.
    pub async fn initialize(&self, outbound: &Outbound) -> Result<Session, McpError> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSIONS[0],
            "capabilities": {},
            "clientInfo": { "name": "agent-host", "version": env!("CARGO_PKG_VERSION") },
        });
        let (result, session_id) = self.request(outbound, None, "initialize", params).await?;
        let version = result["protocolVersion"].as_str().unwrap_or_default();
        if !PROTOCOL_VERSIONS.contains(&version) {
            return Err(McpError::Malformed(format!("it speaks protocol version '{version}'")));
        }
        let session = Session {
            id: session_id,
            protocol_version: version.to_string(),
        };
        let note = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        let answer = self.post(outbound, Some(&session), &note).await?;
        if !(200..300).contains(&answer.status) {
            return Err(McpError::Refused(format!(
                "HTTP {} to notifications/initialized",
                answer.status
            )));
        }
        Ok(session)
    }

    /// Every tool the server lists (up to a few pages).
    pub async fn list_tools(&self, outbound: &Outbound, session: &Session) -> Result<Vec<RemoteTool>, McpError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(cursor) => json!({ "cursor": cursor }),
                None => json!({}),
            };
            let (result, _) = self.request(outbound, Some(session), "tools/list", params).await?;
            let listed = result["tools"]
                .as_array()
                .ok_or_else(|| McpError::Malformed("tools/list gave no tools".into()))?;
            for tool in listed {
                let Some(name) = tool["name"].as_str() else { continue };
                tools.push(RemoteTool {
                    name: name.to_string(),
                    description: tool["description"].as_str().unwrap_or_default().to_string(),
                    input_schema: match &tool["inputSchema"] {
                        Value::Object(_) => tool["inputSchema"].clone(),
                        _ => json!({ "type": "object" }),
                    },
                });
            }
            cursor = result["nextCursor"].as_str().map(str::to_string);
            if cursor.is_none() {
                break;
            }
        }
        Ok(tools)
    }

    /// Calls one tool, with `meta` as the request's `_meta` when given (an x402 payment);
    /// its content's text parts, joined.
    pub async fn call_tool(
        &self,
        outbound: &Outbound,
        session: &Session,
        name: &str,
        arguments: Value,
        meta: Option<Value>,
    ) -> Result<CallResult, McpError> {
        let mut params = json!({ "name": name, "arguments": arguments });
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        let (result, _) = self.request(outbound, Some(session), "tools/call", params).await?;
        let mut parts = Vec::new();
        for item in result["content"].as_array().into_iter().flatten() {
            match item["type"].as_str() {
                Some("text") => parts.push(item["text"].as_str().unwrap_or_default().to_string()),
                Some("resource_link") | Some("resource") => {
                    let uri = item["uri"].as_str().or_else(|| item["resource"]["uri"].as_str());
                    parts.push(format!("[resource {}]", uri.unwrap_or("?")));
                }
                Some(other) => parts.push(format!("[{other} content]")),
                None => {}
            }
        }
        if parts.is_empty() && !result["structuredContent"].is_null() {
            parts.push(result["structuredContent"].to_string());
        }
        Ok(CallResult {
            text: parts.join("\n"),
            is_error: result["isError"] == json!(true),
            structured: result["structuredContent"].clone(),
            meta: result["_meta"].clone(),
        })
    }

    /// Ends the session, as a polite client does (its answer does not matter).
    pub async fn close(&self, outbound: &Outbound, session: &Session) {
        let Some(id) = &session.id else { return };
        let mut headers = self.headers.clone();
        headers.push(("Mcp-Session-Id".into(), id.clone()));
        let request = OutboundRequest {
            method: "DELETE".into(),
            url: self.url.clone(),
            headers,
            body: None,
            timeout: Some(self.timeout),
            max_bytes: Some(self.max_bytes),
            budget: None,
            follow_redirects: false,
            truncate_body: true,
        };
        let _ = outbound.send(request, &self.grant()).await;
    }

    /// One JSON-RPC request and its result (or its error, as `Refused`), with the session
    /// id the server gave, if it gave one.
    async fn request(
        &self,
        outbound: &Outbound,
        session: Option<&Session>,
        method: &str,
        params: Value,
    ) -> Result<(Value, Option<String>), McpError> {
        let id = crate::random::hex_token(6);
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let answer = self.post(outbound, session, &body).await?;
        let header = |name: &str| {
            answer
                .headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        match answer.status {
            200..=299 => {}
            401 => return Err(McpError::Unauthorized(header("www-authenticate"))),
            status => {
                let text = String::from_utf8_lossy(&answer.body);
                return Err(McpError::Refused(format!(
                    "HTTP {status} to {method}: {}",
                    text.chars().take(200).collect::<String>()
                )));
            }
        }
        let is_stream = header("content-type").is_some_and(|t| t.starts_with("text/event-stream"));
        let message = match is_stream {
            true => from_event_stream(&answer.body, &id)?,
            false => serde_json::from_slice(&answer.body).map_err(|e| McpError::Malformed(e.to_string()))?,
        };
        if message["id"] != json!(id) {
            return Err(McpError::Malformed(format!("no answer to {method}")));
        }
        if let Some(error) = message.get("error") {
            let text = error["message"].as_str().unwrap_or("an error");
            return Err(McpError::Refused(format!(
                "{method}: {}",
                text.chars().take(500).collect::<String>()
            )));
        }
        Ok((message["result"].clone(), header("mcp-session-id")))
    }

    async fn post(
        &self,
        outbound: &Outbound,
        session: Option<&Session>,
        body: &Value,
    ) -> Result<crate::outbound::OutboundResponse, McpError> {
        let mut headers = self.headers.clone();
        headers.push(("Content-Type".into(), "application/json".into()));
        headers.push(("Accept".into(), "application/json, text/event-stream".into()));
        if let Some(session) = session {
            headers.push(("MCP-Protocol-Version".into(), session.protocol_version.clone()));
            if let Some(id) = &session.id {
                headers.push(("Mcp-Session-Id".into(), id.clone()));
            }
        }
        let request = OutboundRequest {
            method: "POST".into(),
            url: self.url.clone(),
            headers,
            body: Some(body.to_string().into_bytes()),
            timeout: Some(self.timeout),
            max_bytes: Some(self.max_bytes),
            budget: None,
            follow_redirects: false,
            truncate_body: false,
        };
        outbound.send(request, &self.grant()).await.map_err(|e| match e {
            OutboundError::Timeout => McpError::Timeout(self.timeout.as_millis()),
            OutboundError::TooLarge(n) => McpError::TooLarge(n),
            other => McpError::Unreachable(other.to_string()),
        })
    }

    /// The server's own host (and port): the one place its requests may go.
    fn grant(&self) -> Vec<HostPattern> {
        grant_of(&self.url).into_iter().collect()
    }
}

/// The host pattern a server's URL grants: its host and port, nothing else.
pub fn grant_of(url: &str) -> Option<HostPattern> {
    let url = reqwest::Url::parse(url).ok()?;
    // An IPv6 literal keeps its brackets, so its port stays apart.
    let host = url.host_str()?;
    let port = url.port_or_known_default()?;
    HostPattern::parse(&format!("{host}:{port}"))
}

/// The JSON-RPC message answering request `id` in an event stream's `data` lines.
fn from_event_stream(body: &[u8], id: &str) -> Result<Value, McpError> {
    let text = String::from_utf8_lossy(body);
    let mut data = String::new();
    // Each event ends at a blank line; its data is its `data:` lines joined.
    for line in text.lines().chain(std::iter::once("")) {
        let line = line.trim_end_matches('\r');
        if let Some(rest) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
        } else if line.is_empty() && !data.is_empty() {
            if let Ok(message) = serde_json::from_str::<Value>(&data)
                && message["id"] == json!(id)
            {
                return Ok(message);
            }
            data.clear();
        }
    }
    Err(McpError::Malformed("the event stream held no answer".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_answer_among_the_streams_events() {
        let body = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n\
            id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"ab\",\n\
            data: \"result\":{\"ok\":true}}\n\n";
        let message = from_event_stream(body, "ab").unwrap();
        assert_eq!(message["result"]["ok"], true);
        assert!(from_event_stream(b"data: {\"id\":\"zz\"}\n\n", "ab").is_err());
    }

    #[test]
    fn a_servers_grant_is_its_host_and_port() {
        let grant = grant_of("https://mcp.example.com/mcp").unwrap();
        assert!(grant.matches("mcp.example.com", 443));
        assert!(!grant.matches("mcp.example.com", 8443));
        assert!(!grant.matches("other.example.com", 443));
        assert!(grant_of("not a url").is_none());
    }
}
