//! A remote MCP server whose tools an agent's chat may call (`[[mcp_servers]]`,
//! docs/mcp.md#remote-servers-as-the-agents-tools).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerDef {
    /// Its tools are offered as `NAME__TOOL`.
    pub name: String,
    /// Its Streamable HTTP address.
    pub url: String,
    /// Only these of its tools, when given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// None of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// The header that carries the owner's credential (`Authorization`); its value is set
    /// apart and sealed at rest, never written in the manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// The owner signs in with OAuth (in the console, or through the account API): the
    /// grant's access token goes in `Authorization`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oauth: bool,
    /// Longest wait for one of its answers.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Most calls of its tools one chat makes.
    #[serde(default = "default_max_calls")]
    pub max_calls: u32,
}

fn default_timeout_ms() -> u64 {
    10_000
}

fn default_max_calls() -> u32 {
    5
}

/// What a server's credential's kind starts with, among the agent's integrations.
pub const CREDENTIAL_PREFIX: &str = "mcp_server:";

/// What joins a server's name to its tools' names.
pub const SEPARATOR: &str = "__";

impl McpServerDef {
    /// Whether its tool `name` is offered to the chat.
    pub fn offers(&self, tool: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|t| t == tool)) && !self.exclude.iter().any(|t| t == tool)
    }

    /// The chat's name for its tool `tool`, if a model can call it by that name.
    pub fn tool_name(&self, tool: &str) -> Option<String> {
        let name = format!("{}{SEPARATOR}{tool}", self.name);
        let callable = name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        callable.then_some(name)
    }

    /// The kind its credential is sealed under, among the agent's integrations.
    pub fn credential_kind(&self) -> String {
        format!("{CREDENTIAL_PREFIX}{}", self.name)
    }
}
