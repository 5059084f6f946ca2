//! The records the service is about: accounts, agents, commands. Plain data; the rules
//! that create and change them live in `services`, their storage in `store`.

mod by_use;
pub mod cron;
mod mcp;
pub mod remote_mcp;
pub mod schedule;
pub mod spending;
pub use by_use::{ChatRates, Rates, UnitRates, Used};
pub use mcp::{
    McpBody, McpExposed, McpIcon, McpMessageContent, McpPrompt, McpPromptArgument, McpPromptMessage, McpResource,
    McpToolMeta,
};

use serde::{Deserialize, Serialize};

use crate::money::MicroUsdc;

/// An account's plan decides its keyed-API rate limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Plan {
    Free,
    Pro,
    Enterprise,
}

impl Plan {
    pub fn as_str(self) -> &'static str {
        match self {
            Plan::Free => "free",
            Plan::Pro => "pro",
            Plan::Enterprise => "enterprise",
        }
    }

    pub fn parse(text: &str) -> Option<Plan> {
        match text {
            "free" => Some(Plan::Free),
            "pro" => Some(Plan::Pro),
            "enterprise" => Some(Plan::Enterprise),
            _ => None,
        }
    }

    /// The API's numbers; enterprise has none of its own (set per account).
    pub fn default_limits(self) -> Option<RateLimits> {
        match self {
            Plan::Free => Some(RateLimits {
                per_minute: 60,
                per_day: 1_000,
            }),
            Plan::Pro => Some(RateLimits {
                per_minute: 300,
                per_day: 10_000,
            }),
            Plan::Enterprise => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RateLimits {
    pub per_minute: u32,
    pub per_day: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct Account {
    pub id: String,
    pub name: String,
    pub plan: Plan,
    pub limits: RateLimits,
    pub created_at: i64,
}

/// What a key may do. Each scope includes the ones before it, so a key can be given to a
/// webhook or a bot with only the power it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyScope {
    /// The API's agent endpoints, except moving money: chat, commands, chat-app, social,
    /// wallet balance.
    Use,
    /// `use`, and USDC transfers out of the agent's wallets.
    Spend,
    /// `spend`, and the account itself (`/v1/account/...`): keys, agents, plugins, wallets.
    Manage,
}

impl KeyScope {
    pub const ALL: [KeyScope; 3] = [KeyScope::Use, KeyScope::Spend, KeyScope::Manage];

    pub fn as_str(self) -> &'static str {
        match self {
            KeyScope::Use => "use",
            KeyScope::Spend => "spend",
            KeyScope::Manage => "manage",
        }
    }

    pub fn parse(text: &str) -> Option<KeyScope> {
        KeyScope::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// An API key as listed: never the secret, which exists only when created.
#[derive(Debug, Clone, Serialize)]
pub struct ApiKeyInfo {
    pub id: String,
    pub account_id: String,
    pub scope: KeyScope,
    /// The owner's label for it ("CI", "Telegram bot"), if given.
    pub name: Option<String>,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    /// When it stops working, if its owner gave it an end.
    pub expires_at: Option<i64>,
}

impl ApiKeyInfo {
    pub fn expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }

    /// Neither revoked nor expired.
    pub fn active(&self, now: i64) -> bool {
        self.revoked_at.is_none() && !self.expired(now)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HandlerType {
    SimpleText,
    Prompt,
    Webhook,
    BuiltIn,
    Custom,
}

impl HandlerType {
    pub fn as_str(self) -> &'static str {
        match self {
            HandlerType::SimpleText => "simple_text",
            HandlerType::Prompt => "prompt",
            HandlerType::Webhook => "webhook",
            HandlerType::BuiltIn => "built_in",
            HandlerType::Custom => "custom",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ResponseFormat {
    #[default]
    Text,
    Markdown,
    Image,
    Video,
}

impl ResponseFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            ResponseFormat::Text => "text",
            ResponseFormat::Markdown => "markdown",
            ResponseFormat::Image => "image",
            ResponseFormat::Video => "video",
        }
    }

    pub fn parse(text: &str) -> Option<ResponseFormat> {
        [Self::Text, Self::Markdown, Self::Image, Self::Video]
            .into_iter()
            .find(|f| f.as_str() == text)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamType {
    String,
    Number,
    Boolean,
    Array,
    Object,
    File,
}

impl ParamType {
    /// Whether `value` is of this type (no value is a file).
    pub fn accepts(self, value: &serde_json::Value) -> bool {
        match self {
            ParamType::String => value.is_string(),
            ParamType::Number => value.is_number(),
            ParamType::Boolean => value.is_boolean(),
            ParamType::Array => value.is_array(),
            ParamType::Object => value.is_object(),
            ParamType::File => false,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Number => "number",
            ParamType::Boolean => "boolean",
            ParamType::Array => "array",
            ParamType::Object => "object",
            ParamType::File => "file",
        }
    }
}

/// Where a command is offered besides the keyed API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Integration {
    Chatapp,
    Social,
    X402,
    /// The agent's MCP endpoint: a tool for MCP clients.
    Mcp,
    /// The agent's A2A endpoint: a skill on its agent card.
    A2a,
}

impl Integration {
    pub fn parse(text: &str) -> Option<Integration> {
        match text {
            "chatapp" => Some(Integration::Chatapp),
            "social" => Some(Integration::Social),
            "x402" => Some(Integration::X402),
            "mcp" => Some(Integration::Mcp),
            "a2a" => Some(Integration::A2a),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    Solana,
    Base,
}

impl Network {
    pub fn parse(text: &str) -> Option<Network> {
        match text {
            "solana" => Some(Network::Solana),
            "base" => Some(Network::Base),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Network::Solana => "solana",
            Network::Base => "base",
        }
    }

    /// The symbol of the coin that pays fees.
    pub fn native_token(self) -> &'static str {
        match self {
            Network::Solana => "SOL",
            Network::Base => "ETH",
        }
    }

    /// Decimals of the native coin's base unit (lamports, wei).
    pub fn native_decimals(self) -> u32 {
        match self {
            Network::Solana => 9,
            Network::Base => 18,
        }
    }
}

impl std::fmt::Display for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamSpec {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: ParamType,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub description: String,
    /// A string parameter's allowed values (its schema's `enum`); empty: any string.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Taken when the caller gives none (checked against the type when the manifest is read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct X402Settings {
    pub enabled: bool,
    pub default_price: Option<MicroUsdc>,
    pub networks: Vec<Network>,
    /// `[x402.chat_by_use]`: a message may also be paid for by its tokens (x402 `upto`, on
    /// Base), up to a maximum.
    pub chat_by_use: Option<ChatRates>,
}

/// An agent as its manifest defines it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDef {
    pub username: String,
    pub name: String,
    pub personality: String,
    pub knowledge: Vec<String>,
    pub x402: X402Settings,
    /// `[mcp] open`: its MCP tools without a price may be called by anyone, with no key.
    pub mcp_open: bool,
    /// `[mcp]`: the resources and prompts its MCP server shows.
    pub mcp: McpExposed,
    /// `[a2a]`: who finds its agent card and who may use its free skills.
    pub a2a: A2aSettings,
    /// `[[mcp_servers]]`: remote MCP servers whose tools its chat may call.
    pub mcp_servers: Vec<remote_mcp::McpServerDef>,
    /// `[payments]`: what its commands may spend on the paid services they call; `None`:
    /// nothing. Boxed: every host keeps its active agents in memory, and most pay for nothing.
    pub payments: Option<Box<spending::SpendingPolicy>>,
}

/// `[a2a]` of a manifest: how the agent meets A2A clients that hold no key of its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct A2aSettings {
    /// Its card is in the host's list of agents (`/a2a`), and anyone may read it.
    #[serde(default)]
    pub listed: bool,
    /// Its skills without a price (and its chat, when that has none) may be used by anyone,
    /// with no key; they count against the owner's plan.
    #[serde(default)]
    pub open: bool,
}

#[derive(Debug, Clone)]
pub struct Agent {
    pub id: String,
    pub account_id: String,
    pub def: AgentDef,
    pub created_at: i64,
    pub updated_at: i64,
}

/// What a command gives a wallet that signs in with x402's `sign-in-with-x` instead of
/// paying. Both parts may be offered; a sign-in uses the pass first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SignInTerms {
    /// After each payment, the wallet that paid may call again without paying: at most
    /// `calls` times, within `hours` of the payment (either bound, or both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<Allowance>,
    /// Any wallet that signs in: `calls` calls in every `hours` (both bounds), and, since
    /// wallets cost nothing to make, at most `total` calls by all wallets together in that
    /// window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free: Option<Allowance>,
}

/// A number of calls, a time, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allowance {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<u32>,
    /// Free calls only: all wallets' calls in the window together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u32>,
}

/// A command as its manifest defines it.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandDef {
    pub name: String,
    pub description: String,
    pub handler_type: HandlerType,
    pub parameters: Vec<ParamSpec>,
    pub response_format: ResponseFormat,
    pub enabled: bool,
    pub integrations: Vec<Integration>,
    /// The x402 price; `None` falls back to the agent's default.
    pub price: Option<MicroUsdc>,
    /// Handler-specific settings from the manifest's `config` table.
    pub config: CommandConfig,
    /// A custom command's component, as the manifest named it (resolved to a path).
    pub plugin: Option<String>,
    pub allowed_hosts: Vec<String>,
    /// A custom command's plugin may use the host's LLM (built-in handlers always may).
    pub allow_llm: bool,
    pub long_running: bool,
    pub timeout_ms: Option<u64>,
    /// What a wallet that signs in may use without paying; `None`: a payment every call.
    pub sign_in: Option<SignInTerms>,
    /// Also sold by the units its plugin reports (x402 `upto`, on Base); `None`: at its
    /// price only.
    pub by_use: Option<UnitRates>,
}

/// A command of an agent (whose id is the agent's, so it is not repeated here).
#[derive(Debug, Clone)]
pub struct Command {
    pub id: String,
    pub def: CommandDef,
}

/// A command's `config` table, kept as the JSON object text it is stored and handed to its
/// plugin as: an agent's commands are held in memory by every host, and a parsed map costs
/// twenty times its text (and a copy and a rendering on every run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandConfig(Box<str>);

impl CommandConfig {
    /// The config holding `object`.
    pub fn of(object: serde_json::Map<String, serde_json::Value>) -> CommandConfig {
        CommandConfig(serde_json::Value::Object(object).to_string().into_boxed_str())
    }

    /// A config read back from its stored text, checked to be a JSON object.
    pub fn from_json(text: &str) -> Result<CommandConfig, serde_json::Error> {
        let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text)?;
        Ok(CommandConfig::of(object))
    }

    pub fn json(&self) -> &str {
        &self.0
    }

    /// The parsed object, for the few runs that read a field (webhooks, built-ins).
    pub fn object(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::from_str(&self.0).unwrap_or_default()
    }

    /// The text field `key`, if it is one.
    pub fn text(&self, key: &str) -> Option<String> {
        match self.object().remove(key)? {
            serde_json::Value::String(text) => Some(text),
            _ => None,
        }
    }
}

impl Default for CommandConfig {
    fn default() -> CommandConfig {
        CommandConfig("{}".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commands_config_text_is_what_a_parsed_value_renders() {
        // What plugins were handed before the config was kept as text: the parsed map rendered.
        let stored = r#"{"z": {"b": [1.5, -2e3, null], "a": "\u00e9\u0000x"}, "a": true, "m": {}}"#;
        let config = CommandConfig::from_json(stored).unwrap();
        let rendered = serde_json::from_str::<serde_json::Value>(stored).unwrap().to_string();
        assert_eq!(config.json(), rendered);
        assert_eq!(config.text("z"), None, "an object is not a text field");
        assert_eq!(
            CommandConfig::from_json(r#"{"url":"https://x"}"#)
                .unwrap()
                .text("url")
                .as_deref(),
            Some("https://x")
        );
    }

    #[test]
    fn a_stored_config_that_is_not_an_object_is_refused() {
        assert!(CommandConfig::from_json("[1]").is_err());
        assert!(CommandConfig::from_json("\"text\"").is_err());
        assert_eq!(CommandConfig::default().json(), "{}");
    }
}
