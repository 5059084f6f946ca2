//! What an agent's MCP server shows besides its tools, as its manifest's `[mcp]` declares
//! it: its knowledge entries as resources, its personality as a prompt, and resources and
//! prompts of the owner's own. Nothing is shown unless declared.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpExposed {
    /// The knowledge entries, each a text resource.
    #[serde(default)]
    pub knowledge: bool,
    /// The personality, as the prompt `persona`.
    #[serde(default)]
    pub personality: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<McpResource>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompts: Vec<McpPrompt>,
    /// The agent's icon, served by the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<McpIcon>,
    /// What MCP clients are told of a tool beyond its command: by tool name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, McpToolMeta>,
}

/// An image, kept base64 (checked when the manifest was read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpIcon {
    pub mime_type: String,
    pub data: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpToolMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<McpIcon>,
    /// A JSON Schema (an object's) the tool's structured answer follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Map<String, serde_json::Value>>,
    /// The command answers MCP content itself: a JSON array of content blocks (text,
    /// image, audio, embedded resources, resource links), given to clients as they are.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub content_blocks: bool,
}

impl McpExposed {
    pub fn is_empty(&self) -> bool {
        *self == McpExposed::default()
    }
}

/// A resource of the owner's: a fixed URI, or a URI template (`{name}` parts, RFC 6570's
/// simple expansion) whose text takes the parts' values as `{{name}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpResource {
    pub uri: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub mime_type: String,
    pub body: McpBody,
    /// A template's parts' known values, offered as completions.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, Vec<String>>,
}

impl McpResource {
    pub fn is_template(&self) -> bool {
        self.uri.contains('{')
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpBody {
    Text(String),
    /// Base64, checked when the manifest was read.
    Blob(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpPrompt {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub description: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<McpPromptArgument>,
    pub messages: Vec<McpPromptMessage>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpPromptArgument {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub required: bool,
    /// Known values, offered as completions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpPromptMessage {
    /// `user` or `assistant`.
    pub role: String,
    pub content: McpMessageContent,
}

/// A prompt message's content; its texts take the arguments as `{{name}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpMessageContent {
    Text(String),
    Image {
        mime_type: String,
        data: String,
    },
    Resource {
        uri: String,
        mime_type: String,
        text: String,
    },
}
