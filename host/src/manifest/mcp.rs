//! `[mcp]`: whether the agent's free tools are open to callers without a key, and what its
//! MCP server shows besides its tools (knowledge, personality, the owner's own resources
//! and prompts), checked as the manifest is read.

use std::collections::{BTreeMap, HashSet};

use base64::Engine;
use serde::Deserialize;
use toml::Spanned;

use super::{Checker, ManifestError};
use crate::domain::{
    McpBody, McpExposed, McpIcon, McpMessageContent, McpPrompt, McpPromptArgument, McpPromptMessage, McpResource,
    McpToolMeta,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcp {
    #[serde(default)]
    pub(super) open: bool,
    #[serde(default)]
    knowledge: bool,
    #[serde(default)]
    personality: bool,
    #[serde(default)]
    resources: Vec<Spanned<RawResource>>,
    #[serde(default)]
    prompts: Vec<Spanned<RawPrompt>>,
    #[serde(default)]
    icon: Option<McpIcon>,
    #[serde(default)]
    tools: BTreeMap<String, RawToolMeta>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToolMeta {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    icon: Option<McpIcon>,
    #[serde(default)]
    output_schema: Option<toml::Table>,
    #[serde(default)]
    content_blocks: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResource {
    uri: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    mime_type: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    blob: Option<String>,
    #[serde(default)]
    values: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrompt {
    name: String,
    #[serde(default)]
    title: Option<String>,
    description: String,
    #[serde(default)]
    arguments: Vec<McpPromptArgument>,
    messages: Vec<RawMessage>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMessage {
    #[serde(default = "user")]
    role: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    image: Option<RawImage>,
    #[serde(default)]
    resource: Option<RawEmbedded>,
}

fn user() -> String {
    "user".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawImage {
    mime_type: String,
    data: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEmbedded {
    uri: String,
    #[serde(default)]
    mime_type: Option<String>,
    text: String,
}

/// The personality's prompt's name.
pub const PERSONA: &str = "persona";
const MAX_RESOURCES: usize = 100;
const MAX_PROMPTS: usize = 50;
const MAX_MESSAGES: usize = 20;
const MAX_URI_CHARS: usize = 1000;
/// All the text and data `[mcp]` holds, together: it is kept with the agent and read with it.
const MAX_TOTAL_BYTES: usize = 1024 * 1024;

/// Largest icon, decoded: an icon is read with its agent.
const MAX_ICON_BYTES: usize = 64 * 1024;
/// The images an icon may be (an SVG is served so that no script in it runs).
const ICON_TYPES: [&str; 5] = ["image/png", "image/jpeg", "image/webp", "image/gif", "image/svg+xml"];

fn icon(check: &Checker<'_>, field: &str, icon: McpIcon) -> Result<McpIcon, ManifestError> {
    if !ICON_TYPES.contains(&icon.mime_type.as_str()) {
        return Err(check.err(None, field, format!("mime_type is one of {}", ICON_TYPES.join(", "))));
    }
    let data = icon.data.trim().to_string();
    match base64::engine::general_purpose::STANDARD.decode(&data) {
        Ok(bytes) if !bytes.is_empty() && bytes.len() <= MAX_ICON_BYTES => Ok(McpIcon {
            mime_type: icon.mime_type,
            data,
        }),
        Ok(_) => Err(check.err(None, field, format!("data is 1 to {MAX_ICON_BYTES} bytes"))),
        Err(_) => Err(check.err(None, field, "data is not base64")),
    }
}

/// `[mcp.tools.<name>]`: a title, an icon and an output schema for a tool this agent offers
/// on MCP (`chat`, or a command with `mcp` in its integrations).
fn tool_meta(
    check: &Checker<'_>,
    tools: &[&str],
    raw: BTreeMap<String, RawToolMeta>,
) -> Result<BTreeMap<String, McpToolMeta>, ManifestError> {
    let mut metas = BTreeMap::new();
    for (name, raw) in raw {
        let at = |f: &str| format!("mcp.tools.{name}.{f}");
        if !tools.contains(&name.as_str()) {
            return Err(check.err(
                None,
                format!("mcp.tools.{name}"),
                "names no tool: chat, or a command with \"mcp\" in its integrations",
            ));
        }
        if raw
            .title
            .as_ref()
            .is_some_and(|t| t.trim().is_empty() || t.chars().count() > 100 || t.chars().any(char::is_control))
        {
            return Err(check.err(None, at("title"), "1 to 100 characters, no control characters"));
        }
        let output_schema = match raw.output_schema {
            None => None,
            Some(table) => {
                let schema = serde_json::to_value(&table).unwrap_or_default();
                let serde_json::Value::Object(schema) = schema else {
                    return Err(check.err(None, at("output_schema"), "is a JSON Schema table"));
                };
                if schema.get("type").and_then(|t| t.as_str()) != Some("object") {
                    return Err(check.err(None, at("output_schema"), "describes an object: type = \"object\""));
                }
                if schema
                    .get("required")
                    .is_some_and(|r| !r.as_array().is_some_and(|r| r.iter().all(|k| k.is_string())))
                {
                    return Err(check.err(None, at("output_schema"), "required is a list of property names"));
                }
                Some(schema)
            }
        };
        let icon = raw.icon.map(|i| icon(check, &at("icon"), i)).transpose()?;
        if raw.content_blocks && output_schema.is_some() {
            return Err(check.err(
                None,
                at("content_blocks"),
                "answers content, not a structured answer: drop output_schema",
            ));
        }
        let meta = McpToolMeta {
            title: raw.title,
            icon,
            output_schema,
            content_blocks: raw.content_blocks,
        };
        metas.insert(name, meta);
    }
    Ok(metas)
}

/// What `[mcp]` shows; every name unique, every placeholder declared, every blob base64.
/// `tools`: the names of the tools the agent offers on MCP.
pub(super) fn exposed(check: &Checker<'_>, raw: RawMcp, tools: &[&str]) -> Result<McpExposed, ManifestError> {
    let personality = raw.personality;
    let mut total = 0usize;
    let mut count = |text: &str| total += text.len();
    if raw.resources.len() > MAX_RESOURCES {
        return Err(check.err(None, "mcp.resources", format!("at most {MAX_RESOURCES} resources")));
    }
    if raw.prompts.len() > MAX_PROMPTS {
        return Err(check.err(None, "mcp.prompts", format!("at most {MAX_PROMPTS} prompts")));
    }
    let mut uris = HashSet::new();
    let mut resources = Vec::new();
    for (i, spanned) in raw.resources.into_iter().enumerate() {
        let span = spanned.span();
        let field = |f: &str| format!("mcp.resources[{i}].{f}");
        let fail = |f: &str, message: &str| Err(check.err(Some(&span), field(f), message));
        let raw = spanned.into_inner();
        if !is_uri(&raw.uri) {
            return fail("uri", "must be an absolute URI (scheme:rest), at most 1000 characters");
        }
        if !uris.insert(raw.uri.clone()) {
            return fail("uri", "is given twice");
        }
        let parts = template_parts(&raw.uri)
            .ok_or_else(|| check.err(Some(&span), field("uri"), "has an unclosed or empty {part}"))?;
        let body = match (raw.text, raw.blob) {
            (Some(text), None) => {
                if let Some(unknown) = placeholders(&text).find(|p| !parts.contains(p)) {
                    return fail(
                        "text",
                        &format!("names {{{{{unknown}}}}}, which is not a part of the uri"),
                    );
                }
                count(&text);
                McpBody::Text(text)
            }
            (None, Some(_)) if !parts.is_empty() => {
                return fail("blob", "a template's content is text (its parts are put in it)");
            }
            (None, Some(blob)) => {
                if base64::engine::general_purpose::STANDARD.decode(blob.trim()).is_err() {
                    return fail("blob", "is not base64");
                }
                count(&blob);
                McpBody::Blob(blob.trim().to_string())
            }
            _ => return fail("text", "give text or blob (base64), one of them"),
        };
        let mime_type = match (raw.mime_type, &body) {
            (Some(mime), _) => mime,
            (None, McpBody::Text(_)) => "text/plain".into(),
            (None, McpBody::Blob(_)) => return fail("mime_type", "is needed for a blob"),
        };
        if let Some(unknown) = raw.values.keys().find(|k| !parts.contains(&k.as_str())) {
            return fail("values", &format!("names {unknown}, which is not a part of the uri"));
        }
        let name = raw.name.unwrap_or_else(|| default_name(&raw.uri));
        resources.push(McpResource {
            uri: raw.uri,
            name,
            title: raw.title,
            description: raw.description,
            mime_type,
            body,
            values: raw.values,
        });
    }
    let mut names = HashSet::new();
    let mut prompts = Vec::new();
    for (i, spanned) in raw.prompts.into_iter().enumerate() {
        let span = spanned.span();
        let field = |f: &str| format!("mcp.prompts[{i}].{f}");
        let fail = |f: &str, message: &str| Err(check.err(Some(&span), field(f), message));
        let raw = spanned.into_inner();
        let plain = |n: &str| {
            !n.is_empty() && n.len() <= 64 && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !plain(&raw.name) {
            return fail("name", "1 to 64 letters, digits, _ or -");
        }
        if raw.name == PERSONA && personality {
            return fail("name", "persona is the personality's prompt (personality = true)");
        }
        if !names.insert(raw.name.clone()) {
            return fail("name", "is given twice");
        }
        let declared: HashSet<&str> = raw.arguments.iter().map(|a| a.name.as_str()).collect();
        if raw.arguments.iter().any(|a| !plain(&a.name)) || declared.len() != raw.arguments.len() {
            return fail("arguments", "each has a unique name of letters, digits, _ or -");
        }
        if raw.messages.is_empty() || raw.messages.len() > MAX_MESSAGES {
            return fail("messages", &format!("1 to {MAX_MESSAGES} messages"));
        }
        let mut messages = Vec::new();
        for (m, message) in raw.messages.into_iter().enumerate() {
            let at = format!("messages[{m}]");
            if !["user", "assistant"].contains(&message.role.as_str()) {
                return fail(&format!("{at}.role"), "is user or assistant");
            }
            let content = match (message.text, message.image, message.resource) {
                (Some(text), None, None) => McpMessageContent::Text(text),
                (None, Some(image), None) => {
                    if base64::engine::general_purpose::STANDARD
                        .decode(image.data.trim())
                        .is_err()
                    {
                        return fail(&format!("{at}.image.data"), "is not base64");
                    }
                    McpMessageContent::Image {
                        mime_type: image.mime_type,
                        data: image.data.trim().to_string(),
                    }
                }
                (None, None, Some(embedded)) => McpMessageContent::Resource {
                    uri: embedded.uri,
                    mime_type: embedded.mime_type.unwrap_or_else(|| "text/plain".into()),
                    text: embedded.text,
                },
                _ => return fail(&at, "holds one of text, image or resource"),
            };
            let texts: Vec<&str> = match &content {
                McpMessageContent::Text(text) => vec![text],
                McpMessageContent::Image { data, .. } => {
                    count(data);
                    vec![]
                }
                McpMessageContent::Resource { uri, text, .. } => vec![uri, text],
            };
            for text in texts {
                count(text);
                if let Some(unknown) = placeholders(text).find(|p| !declared.contains(p)) {
                    return fail(&at, &format!("names {{{{{unknown}}}}}, which is not an argument"));
                }
            }
            messages.push(McpPromptMessage {
                role: message.role,
                content,
            });
        }
        prompts.push(McpPrompt {
            name: raw.name,
            title: raw.title,
            description: raw.description,
            arguments: raw.arguments,
            messages,
        });
    }
    if total > MAX_TOTAL_BYTES {
        return Err(check.err(
            None,
            "mcp",
            format!("holds more than {MAX_TOTAL_BYTES} bytes of text and data"),
        ));
    }
    Ok(McpExposed {
        knowledge: raw.knowledge,
        personality: raw.personality,
        resources,
        prompts,
        icon: raw.icon.map(|i| icon(check, "mcp.icon", i)).transpose()?,
        tools: tool_meta(check, tools, raw.tools)?,
    })
}

fn is_uri(uri: &str) -> bool {
    let Some((scheme, rest)) = uri.split_once(':') else {
        return false;
    };
    let scheme_ok = scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    scheme_ok
        && !rest.is_empty()
        && uri.len() <= MAX_URI_CHARS
        && !uri.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// The `{name}` parts of a URI template; `None` when one is unclosed or empty.
pub fn template_parts(uri: &str) -> Option<Vec<&str>> {
    let mut parts = Vec::new();
    let mut rest = uri;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let close = after.find('}')?;
        let name = &after[..close];
        if name.is_empty() || name.contains('{') {
            return None;
        }
        parts.push(name);
        rest = &after[close + 1..];
    }
    (!rest.contains('}')).then_some(parts)
}

/// The `{{name}}` placeholders of a text.
pub fn placeholders(text: &str) -> impl Iterator<Item = &str> {
    text.split("{{")
        .skip(1)
        .filter_map(|part| part.split_once("}}").map(|(name, _)| name.trim()))
}

/// A resource's name when the manifest gives none: its URI's last segment.
fn default_name(uri: &str) -> String {
    let last = uri.trim_end_matches('/').rsplit(['/', ':']).next().unwrap_or(uri);
    if last.is_empty() {
        uri.to_string()
    } else {
        last.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_and_placeholders_are_read() {
        assert_eq!(template_parts("test://template/{id}/data"), Some(vec!["id"]));
        assert_eq!(template_parts("test://static-text"), Some(vec![]));
        assert_eq!(template_parts("test://x/{a}/{b}"), Some(vec!["a", "b"]));
        assert_eq!(template_parts("test://x/{a"), None);
        assert_eq!(template_parts("test://x/{}"), None);
        assert_eq!(template_parts("test://x/a}"), None);
        let found: Vec<_> = placeholders("arg1='{{arg1}}', arg2='{{ arg2 }}' {{").collect();
        assert_eq!(found, ["arg1", "arg2"]);
        assert!(is_uri("test://static-text"));
        assert!(is_uri("urn:isbn:123"));
        assert!(!is_uri("no scheme"));
        assert!(!is_uri("/relative"));
        assert_eq!(default_name("test://template/{id}/data"), "data");
    }
}
