//! The agent manifest (`agent apply FILE.toml`): TOML in, validated definitions out.
//! Every error is one line naming the file, the line and the field at fault.

use std::collections::HashSet;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::domain::{
    A2aSettings, AgentDef, CommandConfig, CommandDef, HandlerType, Integration, ParamSpec, ResponseFormat,
};
use crate::money::MicroUsdc;

mod handlers;
pub mod mcp;
mod mcp_servers;
mod payments;
mod schedules;
mod sign_in;
mod x402;

#[derive(Debug, Clone, PartialEq)]
pub struct ManifestError {
    pub file: String,
    pub line: Option<usize>,
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ManifestError {}

/// A manifest that passed every check, ready for the store.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentManifest {
    pub agent: AgentDef,
    pub commands: Vec<CommandDef>,
    /// `[chatapp] enabled`, when the manifest says.
    pub chatapp_enabled: Option<bool>,
    /// `[social] enabled`, when the manifest says.
    pub social_enabled: Option<bool>,
    /// `[[schedules]]`: what the agent does on its own.
    pub schedules: Vec<crate::domain::schedule::ScheduleDef>,
}

/// Most knowledge entries, and characters in all, an agent may have.
pub const MAX_KNOWLEDGE_ENTRIES: usize = 1_000;
pub const MAX_KNOWLEDGE_CHARS: usize = 200_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    username: Spanned<String>,
    name: Spanned<String>,
    #[serde(default)]
    personality: String,
    #[serde(default)]
    knowledge: Vec<String>,
    #[serde(default)]
    commands: Vec<Spanned<RawCommand>>,
    #[serde(default)]
    chatapp: Option<Spanned<toml::Table>>,
    #[serde(default)]
    social: Option<Spanned<toml::Table>>,
    #[serde(default)]
    x402: Option<Spanned<x402::RawX402>>,
    #[serde(default)]
    mcp: Option<mcp::RawMcp>,
    /// `[a2a]`: read as it is stored (its fields are flags, nothing to check).
    #[serde(default)]
    a2a: Option<A2aSettings>,
    #[serde(default)]
    schedules: Vec<Spanned<crate::domain::schedule::ScheduleSpec>>,
    #[serde(default)]
    mcp_servers: Vec<Spanned<crate::domain::remote_mcp::McpServerDef>>,
    #[serde(default)]
    payments: Option<Spanned<payments::RawPayments>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCommand {
    command: Spanned<String>,
    #[serde(default)]
    description: String,
    handler_type: HandlerType,
    #[serde(default)]
    response_format: ResponseFormat,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    integrations: Vec<Integration>,
    #[serde(default)]
    price_usd: Option<Spanned<toml::Value>>,
    #[serde(default)]
    parameters: Vec<Spanned<ParamSpec>>,
    #[serde(default)]
    config: toml::Table,
    #[serde(default)]
    plugin: Option<Spanned<String>>,
    #[serde(default)]
    allowed_hosts: Vec<String>,
    #[serde(default)]
    allow_llm: bool,
    #[serde(default)]
    long_running: bool,
    #[serde(default)]
    timeout_ms: Option<Spanned<u64>>,
    #[serde(default)]
    sign_in: Option<Spanned<sign_in::RawSignIn>>,
    #[serde(default)]
    by_use: Option<Spanned<x402::RawByUse>>,
}

fn yes() -> bool {
    true
}

/// Longest per-call deadline a manifest may ask for.
pub const MAX_TIMEOUT_MS: u64 = 300_000;

struct Checker<'a> {
    file: String,
    source: &'a str,
}

impl Checker<'_> {
    fn line_of(&self, span: &Range<usize>) -> usize {
        let end = span.start.min(self.source.len());
        self.source[..end].bytes().filter(|b| *b == b'\n').count() + 1
    }

    fn err(&self, span: Option<&Range<usize>>, field: impl Into<String>, message: impl Into<String>) -> ManifestError {
        ManifestError {
            file: self.file.clone(),
            line: span.map(|s| self.line_of(s)),
            field: Some(field.into()),
            message: message.into(),
        }
    }
}

/// Where a custom command's `plugin` comes from.
#[derive(Debug, Clone, Copy)]
pub enum PluginSource<'a> {
    /// A file, relative to this folder (the manifest's own), or an uploaded component's
    /// `sha256:` hash: `agent apply` on the server.
    Files(&'a Path),
    /// Only uploaded components, by `sha256:` hash: a manifest sent over the network never
    /// names a file on the server.
    Uploaded,
}

/// How a custom command names an uploaded component: `sha256:` and its 64 hex digits.
pub const HASH_PREFIX: &str = "sha256:";

/// The hash of a `sha256:` reference, if `text` is one.
pub fn uploaded_hash(text: &str) -> Option<&str> {
    let hash = text.strip_prefix(HASH_PREFIX)?;
    (hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())).then_some(hash)
}

/// Reads and checks the manifest at `path`; relative plugin paths resolve against its folder.
pub fn load(path: &Path) -> Result<AgentManifest, ManifestError> {
    let source = std::fs::read_to_string(path).map_err(|e| ManifestError {
        file: path.display().to_string(),
        line: None,
        field: None,
        message: format!("cannot read the manifest: {e}"),
    })?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    parse(&source, &path.display().to_string(), PluginSource::Files(&base))
}

/// The same manifest as JSON (the management API accepts both): turned into TOML and
/// checked by the same rules, so every message is the same. Lines would count the TOML
/// made here, not the caller's JSON, so errors name the field only.
pub fn parse_json(source: &str, file: &str) -> Result<AgentManifest, ManifestError> {
    let error = |message: String| ManifestError {
        file: file.to_string(),
        line: None,
        field: None,
        message,
    };
    let value: toml::Value = serde_json::from_str(source).map_err(|e| error(format!("malformed JSON: {e}")))?;
    if !value.is_table() {
        return Err(error("the manifest must be a JSON object".into()));
    }
    let text = toml::to_string(&value).map_err(|e| error(format!("cannot read the manifest: {e}")))?;
    parse(&text, file, PluginSource::Uploaded).map_err(|e| ManifestError { line: None, ..e })
}

/// The first field (`commands[0].config.text`) whose key or text holds U+0000.
fn field_with_nul(value: &toml::Value, at: &str) -> Option<String> {
    let nul = |text: &str| text.contains('\0');
    match value {
        toml::Value::String(text) => nul(text).then(|| at.to_string()),
        toml::Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| field_with_nul(item, &format!("{at}[{i}]"))),
        toml::Value::Table(table) => table.iter().find_map(|(key, item)| {
            let path = if at.is_empty() {
                key.clone()
            } else {
                format!("{at}.{key}")
            };
            if nul(key) {
                Some(path)
            } else {
                field_with_nul(item, &path)
            }
        }),
        _ => None,
    }
}

pub fn parse(source: &str, file: &str, plugins: PluginSource) -> Result<AgentManifest, ManifestError> {
    let check = Checker {
        file: file.to_string(),
        source,
    };
    let raw: RawManifest = toml::from_str(source).map_err(|e| ManifestError {
        file: file.to_string(),
        line: e.span().map(|s| check.line_of(&s)),
        field: None,
        message: e.message().trim().replace('\n', " "),
    })?;
    // No field means U+0000, and PostgreSQL text cannot hold it: refused for every store.
    if let Some(field) = toml::from_str::<toml::Value>(source)
        .ok()
        .and_then(|v| field_with_nul(&v, ""))
    {
        return Err(ManifestError {
            file: file.to_string(),
            line: None,
            field: Some(field),
            message: "must not contain the NUL character (U+0000)".into(),
        });
    }

    let username = raw.username.get_ref().trim().to_string();
    if !valid_name(&username, 3, 32) {
        return Err(check.err(
            Some(&raw.username.span()),
            "username",
            "must be 3 to 32 characters of lowercase letters, digits and _",
        ));
    }
    let name = raw.name.get_ref().trim().to_string();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(check.err(Some(&raw.name.span()), "name", "must be 1 to 100 characters"));
    }
    // Every entry is embedded when the agent is applied, and read at each chat that ranks them.
    let knowledge_chars: usize = raw.knowledge.iter().map(|k| k.chars().count()).sum();
    if raw.knowledge.len() > MAX_KNOWLEDGE_ENTRIES || knowledge_chars > MAX_KNOWLEDGE_CHARS {
        return Err(check.err(
            None,
            "knowledge",
            format!(
                "{} entries of {knowledge_chars} characters; an agent knows at most {MAX_KNOWLEDGE_ENTRIES} entries of {MAX_KNOWLEDGE_CHARS} characters in all",
                raw.knowledge.len()
            ),
        ));
    }

    let x402 = x402::settings(&check, raw.x402)?;

    let mut names = HashSet::new();
    let mut commands = Vec::with_capacity(raw.commands.len());
    for (index, spanned) in raw.commands.into_iter().enumerate() {
        let span = spanned.span();
        let cmd = spanned.into_inner();
        let at = |field: &str| format!("commands[{index}].{field}");
        let command_name = cmd.command.get_ref().trim().trim_start_matches('/').to_string();
        if !valid_name(&command_name, 1, 32) {
            return Err(check.err(
                Some(&cmd.command.span()),
                at("command"),
                "must be 1 to 32 characters of lowercase letters, digits and _ (without the leading /)",
            ));
        }
        if !names.insert(command_name.clone()) {
            return Err(check.err(
                Some(&cmd.command.span()),
                at("command"),
                format!("'{command_name}' is defined twice"),
            ));
        }
        let mut param_names = HashSet::new();
        let mut parameters = Vec::with_capacity(cmd.parameters.len());
        for (p, param) in cmd.parameters.into_iter().enumerate() {
            let pspan = param.span();
            let param = param.into_inner();
            let ok = param
                .name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && param.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && param.name.len() <= 64;
            if !ok {
                return Err(check.err(
                    Some(&pspan),
                    at(&format!("parameters[{p}].name")),
                    "must be an identifier (letters, digits, _; not starting with a digit)",
                ));
            }
            if !param_names.insert(param.name.clone()) {
                return Err(check.err(
                    Some(&pspan),
                    at(&format!("parameters[{p}].name")),
                    format!("'{}' is defined twice", param.name),
                ));
            }
            if let Err(why) = allowed_values(&param) {
                return Err(check.err(Some(&pspan), at(&format!("parameters[{p}].values")), why));
            }
            let default_fits = |d: &serde_json::Value| {
                param.kind.accepts(d)
                    && (param.values.is_empty() || d.as_str().is_some_and(|d| param.values.iter().any(|v| v == d)))
            };
            if param.default.as_ref().is_some_and(|d| !default_fits(d)) {
                return Err(check.err(
                    Some(&pspan),
                    at(&format!("parameters[{p}].default")),
                    format!(
                        "must be a {} (and one of its values, if it lists them)",
                        param.kind.as_str()
                    ),
                ));
            }
            parameters.push(param);
        }
        let price = cmd.price_usd.map(|p| price(&check, &p, &at("price_usd"))).transpose()?;
        let timeout_ms = match cmd.timeout_ms {
            Some(t) if *t.get_ref() == 0 || *t.get_ref() > MAX_TIMEOUT_MS => {
                return Err(check.err(
                    Some(&t.span()),
                    at("timeout_ms"),
                    format!("must be between 1 and {MAX_TIMEOUT_MS}"),
                ));
            }
            other => other.map(Spanned::into_inner),
        };
        let config = match serde_json::to_value(&cmd.config) {
            Ok(serde_json::Value::Object(object)) => CommandConfig::of(object),
            Ok(_) => CommandConfig::default(),
            Err(e) => return Err(check.err(Some(&span), at("config"), e.to_string())),
        };
        handlers::check_config(&check, &span, &at, cmd.handler_type, &cmd.config, cmd.plugin.is_some())?;
        let plugin = match (cmd.plugin, plugins) {
            (None, _) => None,
            (Some(p), _) if p.get_ref().starts_with(HASH_PREFIX) => match uploaded_hash(p.get_ref()) {
                Some(_) => Some(p.into_inner()),
                None => {
                    return Err(check.err(
                        Some(&p.span()),
                        at("plugin"),
                        "a sha256: reference is 64 lowercase hex digits",
                    ));
                }
            },
            (Some(p), PluginSource::Uploaded) => {
                return Err(check.err(
                    Some(&p.span()),
                    at("plugin"),
                    "name an uploaded component by its hash, sha256:<64 hex digits> (upload it first: POST /v1/account/plugins)",
                ));
            }
            (Some(p), PluginSource::Files(base_dir)) => {
                let resolved: PathBuf = base_dir.join(p.get_ref());
                if !resolved.is_file() {
                    return Err(check.err(
                        Some(&p.span()),
                        at("plugin"),
                        format!("no file at {}", resolved.display()),
                    ));
                }
                Some(resolved.display().to_string())
            }
        };
        let mut integrations = cmd.integrations;
        dedup(&mut integrations);
        let sign_in = cmd
            .sign_in
            .map(|terms| sign_in::terms(&check, terms, &at, integrations.contains(&Integration::X402)))
            .transpose()?;
        let by_use = cmd
            .by_use
            .map(|raw| {
                let sold = x402::CommandSold {
                    x402: &x402,
                    sold: integrations.contains(&Integration::X402),
                    handler: cmd.handler_type,
                    long_running: cmd.long_running,
                };
                x402::command_rates(&check, raw, &at, sold)
            })
            .transpose()?;
        commands.push(CommandDef {
            name: command_name,
            description: cmd.description,
            handler_type: cmd.handler_type,
            parameters,
            response_format: cmd.response_format,
            enabled: cmd.enabled,
            integrations,
            price,
            config,
            plugin,
            allowed_hosts: cmd.allowed_hosts,
            allow_llm: cmd.allow_llm,
            long_running: cmd.long_running,
            timeout_ms,
            sign_in,
            by_use,
        });
    }

    let chatapp_enabled = integration_section(&check, raw.chatapp, "chatapp", "agent-host chatapp connect")?;
    let social_enabled = integration_section(&check, raw.social, "social", "agent-host social connect")?;
    let schedules = schedules::check(&check, raw.schedules, &commands, crate::clock::controllable_now_ms())?;
    let mcp_servers = mcp_servers::check(&check, raw.mcp_servers)?;
    let payments = raw
        .payments
        .map(|raw| payments::check(&check, raw, &commands, &mcp_servers).map(Box::new))
        .transpose()?;

    Ok(AgentManifest {
        agent: AgentDef {
            username,
            name,
            personality: raw.personality,
            knowledge: raw.knowledge,
            x402,
            mcp_open: raw.mcp.as_ref().is_some_and(|m| m.open),
            mcp: match raw.mcp {
                Some(mcp) => {
                    let offered = commands.iter().filter(|c| c.integrations.contains(&Integration::Mcp));
                    let tools: Vec<&str> = std::iter::once("chat")
                        .chain(offered.map(|c| c.name.as_str()))
                        .collect();
                    mcp::exposed(&check, mcp, &tools)?
                }
                None => Default::default(),
            },
            a2a: raw.a2a.unwrap_or_default(),
            mcp_servers,
            payments,
        },
        commands,
        chatapp_enabled,
        social_enabled,
        schedules,
    })
}

/// A parameter's `values`: for a string parameter only, at most 100 distinct, non-empty
/// values of at most 200 characters.
fn allowed_values(param: &ParamSpec) -> Result<(), String> {
    if param.values.is_empty() {
        return Ok(());
    }
    if param.kind != crate::domain::ParamType::String {
        return Err("are for a string parameter only".into());
    }
    let distinct: HashSet<&String> = param.values.iter().collect();
    let fine = |v: &String| !v.is_empty() && v.chars().count() <= 200;
    if param.values.len() > 100 || distinct.len() != param.values.len() || !param.values.iter().all(fine) {
        return Err("at most 100 distinct values, each 1 to 200 characters".into());
    }
    Ok(())
}

/// `[chatapp]` / `[social]`: only `enabled`. Tokens never go in a manifest (a plain file);
/// the CLI stores them encrypted.
fn integration_section(
    check: &Checker<'_>,
    section: Option<Spanned<toml::Table>>,
    name: &str,
    connect: &str,
) -> Result<Option<bool>, ManifestError> {
    let Some(section) = section else { return Ok(None) };
    let span = section.span();
    let mut enabled = None;
    for (key, value) in section.into_inner() {
        match (key.as_str(), value) {
            ("enabled", toml::Value::Boolean(on)) => enabled = Some(on),
            ("enabled", _) => return Err(check.err(Some(&span), format!("{name}.enabled"), "must be true or false")),
            (other, _) => {
                return Err(check.err(
                    Some(&span),
                    format!("{name}.{other}"),
                    format!("is not a manifest setting; secrets stay out of manifests: use `{connect}`, which stores them encrypted"),
                ));
            }
        }
    }
    Ok(enabled)
}

fn price(check: &Checker<'_>, value: &Spanned<toml::Value>, field: &str) -> Result<MicroUsdc, ManifestError> {
    let parsed = match value.get_ref() {
        toml::Value::Float(f) => MicroUsdc::from_f64(*f),
        toml::Value::Integer(i) if *i >= 0 => MicroUsdc::parse_decimal(&i.to_string()),
        toml::Value::Integer(_) => Err(crate::money::AmountError::Negative),
        toml::Value::String(s) => MicroUsdc::parse_decimal(s),
        _ => Err(crate::money::AmountError::NotANumber),
    };
    let price = parsed.map_err(|e| check.err(Some(&value.span()), field, format!("{e}")))?;
    // Nothing can be paid for with 0: x402 needs an amount (the fuzzer found 0 accepted,
    // and its payment then could not be recorded).
    if price.0 == 0 {
        return Err(check.err(Some(&value.span()), field, "must be more than 0 (at least 0.000001)"));
    }
    Ok(price)
}

fn valid_name(text: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&text.len())
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn dedup<T: PartialEq + Clone>(items: &mut Vec<T>) {
    let mut seen: Vec<T> = Vec::with_capacity(items.len());
    items.retain(|item| {
        if seen.contains(item) {
            false
        } else {
            seen.push(item.clone());
            true
        }
    });
}

#[cfg(test)]
mod tests;
