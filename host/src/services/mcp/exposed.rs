//! An agent's resources and prompts, as its manifest's `[mcp]` exposes them: its knowledge
//! entries (`agent://knowledge/{n}`), its personality (the prompt `persona`), and the
//! owner's own resources, templates and prompts; read, filled in, and completed.

use std::collections::BTreeMap;

use crate::domain::{AgentDef, McpBody, McpMessageContent, McpPrompt, McpPromptArgument, McpResource};
use crate::manifest::mcp::{PERSONA, placeholders, template_parts};

/// Where the knowledge entries are, one resource each (numbered from 1).
const KNOWLEDGE_URI: &str = "agent://knowledge/";
/// Longest value a prompt argument or a template part may take.
const MAX_VALUE_CHARS: usize = 4096;
/// Most completions one answer gives (MCP's own bound).
const MAX_COMPLETIONS: usize = 100;

/// A resource as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: String,
}

/// A resource as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contents {
    pub uri: String,
    pub mime_type: String,
    pub body: McpBody,
}

/// A prompt filled in: its description and its messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filled {
    pub description: String,
    pub messages: Vec<(String, McpMessageContent)>,
}

/// Why a prompt could not be filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptRefusal {
    Unknown,
    Invalid(String),
}

/// The fixed resources: the knowledge entries, then the owner's (templates are listed apart).
pub fn resources(agent: &AgentDef) -> Vec<Listed> {
    let knowledge = agent.mcp.knowledge.then_some(&agent.knowledge).into_iter().flatten();
    let entries = knowledge.enumerate().map(|(i, entry)| {
        let first = entry.lines().next().unwrap_or_default();
        let title = match first.chars().count() > 60 {
            true => format!("{}…", first.chars().take(60).collect::<String>()),
            false => first.to_string(),
        };
        Listed {
            uri: format!("{KNOWLEDGE_URI}{}", i + 1),
            name: format!("knowledge-{}", i + 1),
            title: Some(title).filter(|t| !t.is_empty()),
            description: Some(format!("Knowledge entry {} of {}", i + 1, agent.name)),
            mime_type: "text/plain".into(),
        }
    });
    let owners = agent.mcp.resources.iter().filter(|r| !r.is_template()).map(listed);
    entries.chain(owners).collect()
}

/// The owner's resource templates.
pub fn templates(agent: &AgentDef) -> Vec<Listed> {
    agent
        .mcp
        .resources
        .iter()
        .filter(|r| r.is_template())
        .map(listed)
        .collect()
}

fn listed(resource: &McpResource) -> Listed {
    Listed {
        uri: resource.uri.clone(),
        name: resource.name.clone(),
        title: resource.title.clone(),
        description: resource.description.clone(),
        mime_type: resource.mime_type.clone(),
    }
}

/// The resource at `uri`: a knowledge entry, one of the owner's, or a template's, its parts
/// put in its text. `None` when there is none.
pub fn read(agent: &AgentDef, uri: &str) -> Option<Contents> {
    if let Some(n) = uri.strip_prefix(KNOWLEDGE_URI) {
        let entry = n
            .parse::<usize>()
            .ok()
            .filter(|_| agent.mcp.knowledge)
            .and_then(|n| agent.knowledge.get(n.checked_sub(1)?))?;
        return Some(Contents {
            uri: uri.to_string(),
            mime_type: "text/plain".into(),
            body: McpBody::Text(entry.clone()),
        });
    }
    let resources = &agent.mcp.resources;
    if let Some(fixed) = resources.iter().find(|r| !r.is_template() && r.uri == uri) {
        return Some(Contents {
            uri: uri.to_string(),
            mime_type: fixed.mime_type.clone(),
            body: fixed.body.clone(),
        });
    }
    resources.iter().filter(|r| r.is_template()).find_map(|template| {
        let values = match_template(&template.uri, uri)?;
        let McpBody::Text(text) = &template.body else {
            return None;
        };
        let json = template.mime_type.contains("json");
        Some(Contents {
            uri: uri.to_string(),
            mime_type: template.mime_type.clone(),
            body: McpBody::Text(fill(text, &values, json)),
        })
    })
}

/// The prompts: the personality's, then the owner's.
pub fn prompts(agent: &AgentDef) -> Vec<McpPrompt> {
    agent
        .mcp
        .personality
        .then(|| persona(agent))
        .into_iter()
        .chain(agent.mcp.prompts.iter().cloned())
        .collect()
}

/// The personality as a prompt: who to speak as, and what about, if the client says.
fn persona(agent: &AgentDef) -> McpPrompt {
    McpPrompt {
        name: PERSONA.into(),
        title: Some(format!("{}'s personality", agent.name)),
        description: format!("Speak as {}, with its personality; optionally on a topic", agent.name),
        arguments: vec![McpPromptArgument {
            name: "topic".into(),
            description: Some("What to talk about".into()),
            required: false,
            values: vec![],
        }],
        messages: vec![],
    }
}

/// The prompt `name` filled in with `arguments`: every required one given, none unknown.
pub fn prompt(agent: &AgentDef, name: &str, arguments: &BTreeMap<String, String>) -> Result<Filled, PromptRefusal> {
    let prompt = prompts(agent)
        .into_iter()
        .find(|p| p.name == name)
        .ok_or(PromptRefusal::Unknown)?;
    if let Some(unknown) = arguments
        .keys()
        .find(|k| !prompt.arguments.iter().any(|a| &a.name == *k))
    {
        return Err(PromptRefusal::Invalid(format!(
            "Prompt '{name}' takes no argument '{unknown}'"
        )));
    }
    if let Some(missing) = prompt
        .arguments
        .iter()
        .find(|a| a.required && !arguments.contains_key(&a.name))
    {
        return Err(PromptRefusal::Invalid(format!(
            "Prompt '{name}' needs the argument '{}'",
            missing.name
        )));
    }
    if arguments.values().any(|v| v.chars().count() > MAX_VALUE_CHARS) {
        return Err(PromptRefusal::Invalid(format!(
            "An argument is longer than {MAX_VALUE_CHARS} characters"
        )));
    }
    let values: BTreeMap<&str, String> = arguments.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    if name == PERSONA && agent.mcp.personality {
        let mut messages = vec![(
            "user".to_string(),
            McpMessageContent::Text(
                format!("You are {}. {}", agent.name, agent.personality)
                    .trim()
                    .to_string(),
            ),
        )];
        if let Some(topic) = arguments.get("topic").filter(|t| !t.trim().is_empty()) {
            messages.push(("user".into(), McpMessageContent::Text(format!("Talk about: {topic}"))));
        }
        return Ok(Filled {
            description: prompt.description,
            messages,
        });
    }
    let messages = prompt
        .messages
        .iter()
        .map(|message| {
            let content = match &message.content {
                McpMessageContent::Text(text) => McpMessageContent::Text(fill(text, &values, false)),
                McpMessageContent::Resource { uri, mime_type, text } => McpMessageContent::Resource {
                    uri: fill(uri, &values, false),
                    mime_type: mime_type.clone(),
                    text: fill(text, &values, mime_type.contains("json")),
                },
                image => image.clone(),
            };
            (message.role.clone(), content)
        })
        .collect();
    Ok(Filled {
        description: prompt.description,
        messages,
    })
}

/// Completions of a prompt's argument: its known values that start with `value`.
pub fn complete_prompt(agent: &AgentDef, name: &str, argument: &str, value: &str) -> Option<Vec<String>> {
    let prompt = prompts(agent).into_iter().find(|p| p.name == name)?;
    let known = &prompt.arguments.iter().find(|a| a.name == argument)?.values;
    Some(starting_with(known, value))
}

/// Completions of a template's part: its known values that start with `value`.
pub fn complete_template(agent: &AgentDef, uri_template: &str, part: &str, value: &str) -> Option<Vec<String>> {
    let template = agent
        .mcp
        .resources
        .iter()
        .find(|r| r.is_template() && r.uri == uri_template)?;
    if !template_parts(&template.uri)?.contains(&part) {
        return None;
    }
    Some(starting_with(
        template.values.get(part).map(Vec::as_slice).unwrap_or_default(),
        value,
    ))
}

fn starting_with(known: &[String], value: &str) -> Vec<String> {
    let value = value.to_lowercase();
    known
        .iter()
        .filter(|k| k.to_lowercase().starts_with(&value))
        .take(MAX_COMPLETIONS)
        .cloned()
        .collect()
}

/// The values of a template's parts in `uri`, if it matches: each part is one non-empty
/// path segment (no `/`, `?` or `#`).
fn match_template<'t>(template: &'t str, uri: &str) -> Option<BTreeMap<&'t str, String>> {
    let mut values = BTreeMap::new();
    let (mut template, mut uri) = (template, uri);
    loop {
        let Some(open) = template.find('{') else {
            return (template == uri).then_some(values);
        };
        uri = uri.strip_prefix(&template[..open])?;
        let close = open + template[open..].find('}')?;
        let name = &template[open + 1..close];
        template = &template[close + 1..];
        // The part runs to the next literal of the template (or to the end).
        let literal = template.split('{').next().unwrap_or_default();
        let end = match literal.is_empty() {
            true => uri.len(),
            false => uri.find(literal)?,
        };
        let value = &uri[..end];
        if value.is_empty() || value.contains(['/', '?', '#']) || value.chars().count() > MAX_VALUE_CHARS {
            return None;
        }
        values.insert(name, value.to_string());
        uri = &uri[end..];
    }
}

/// `text` with each `{{name}}` replaced by its value (escaped for a JSON string when the
/// text is JSON); a name with no value is left empty.
fn fill(text: &str, values: &BTreeMap<&str, String>, json: bool) -> String {
    if placeholders(text).next().is_none() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else {
            break;
        };
        out.push_str(&rest[..start]);
        let name = rest[start + 2..start + 2 + len].trim();
        let value = values.get(name).map(String::as_str).unwrap_or_default();
        if json {
            let quoted = serde_json::to_string(value).unwrap_or_default();
            out.push_str(&quoted[1..quoted.len() - 1]);
        } else {
            out.push_str(value);
        }
        rest = &rest[start + 2 + len + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_matches_one_segment_per_part() {
        let t = "test://template/{id}/data";
        assert_eq!(match_template(t, "test://template/123/data").unwrap()["id"], "123");
        assert_eq!(match_template(t, "test://template//data"), None);
        assert_eq!(match_template(t, "test://template/1/2/data"), None);
        assert_eq!(match_template(t, "test://template/123/other"), None);
        let two = "x://{a}-{b}";
        let found = match_template(two, "x://left-right").unwrap();
        assert_eq!((found["a"].as_str(), found["b"].as_str()), ("left", "right"));
        assert_eq!(match_template("x://static", "x://static"), Some(BTreeMap::new()));
    }

    #[test]
    fn values_are_filled_in_and_escaped_in_json() {
        let values = BTreeMap::from([("id", "1\"}, \"admin\": true".to_string())]);
        let json = fill(r#"{"id":"{{id}}"}"#, &values, true);
        let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(parsed["id"], "1\"}, \"admin\": true", "the value stays a string");
        assert_eq!(
            fill("a {{ id }} b {{none}}", &values, false),
            "a 1\"}, \"admin\": true b "
        );
        assert_eq!(fill("no {{ end", &values, false), "no {{ end");
    }
}
