//! MCP clients for the tests: the official TypeScript SDK (`tests/node/mcp.mjs`) as
//! agents' users run it, and single JSON-RPC messages over HTTP for what a real client
//! never sends.

use serde_json::{Value, json};

use super::{Reply, client, send};

/// The Accept header every Streamable HTTP client sends.
pub const ACCEPT: &str = "application/json, text/event-stream";

/// Runs the official SDK client with `request` (see `tests/node/mcp.mjs`): what it printed.
pub async fn sdk_client(request: &Value) -> Value {
    super::client_script("node", "node/mcp.mjs", request, "the MCP SDK client").await
}

/// The MCP Inspector's CLI (`@modelcontextprotocol/inspector-cli`) against `url`, with a key
/// as a bearer token when given: what it printed for `args` (`--method …`), as JSON.
pub async fn inspector(url: &str, key: Option<&str>, args: &[&str]) -> Value {
    let build = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/node/node_modules/@modelcontextprotocol/inspector-cli/build");
    let mut command = tokio::process::Command::new("node");
    // It finds its own package.json from where it runs, as its launcher runs it.
    command
        .current_dir(&build)
        .arg("index.js")
        .arg(url)
        .args(["--transport", "http"])
        .args(args);
    if let Some(key) = key {
        command.arg("--header").arg(format!("Authorization: Bearer {key}"));
    }
    let output = tokio::time::timeout(std::time::Duration::from_secs(60), command.output())
        .await
        .expect("the inspector finishes")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "inspector {args:?}: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("inspector {args:?} printed {stdout}"))
}

/// One JSON-RPC message POSTed as a client of the `initialize` revisions sends it, with
/// `headers` added.
pub async fn post_message(url: &str, headers: &[(&str, &str)], body: impl Into<reqwest::Body>) -> Reply {
    let mut request = client()
        .post(url)
        .header("accept", ACCEPT)
        .header("content-type", "application/json")
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    send(request).await
}

/// A `tools/list` request of the 2026-07-28 revision: its headers and `_meta` as that
/// revision requires them.
pub fn modern_list() -> (Vec<(&'static str, &'static str)>, Value) {
    let headers = vec![("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")];
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": { "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }},
    });
    (headers, body)
}

/// The JSON-RPC message of a reply, whether it came as JSON or as an SSE stream.
pub fn message(reply: &Reply) -> Value {
    if let Ok(value) = serde_json::from_str(&reply.text) {
        return value;
    }
    reply
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|m| m.get("id").is_some())
        .unwrap_or(Value::Null)
}

/// Runs the official Python SDK client with `request` (see `tests/python/mcp_client.py`),
/// on the interpreter scripts/test.sh set up (`MCP_PYTHON`): what it printed.
pub async fn python_client(request: &Value) -> Value {
    super::client_script(
        &super::python(),
        "python/mcp_client.py",
        request,
        "the MCP Python client",
    )
    .await
}
