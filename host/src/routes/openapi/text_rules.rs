//! The one rule every text of a request keeps, written on each schema that takes one: no
//! U+0000 (`error::refuse_nul`: PostgreSQL text cannot hold it). Path and query values,
//! body strings, object keys, and the free-form JSON a body may carry (a command's
//! parameters) all state it, so a request the document allows is one the server takes.

use serde_json::{Value, json};

/// A text without U+0000.
pub const NO_NUL: &str = "^[^\\u0000]*$";

/// What `str::trim` removes (Unicode White_Space), inside a regex class. Not `\s`: ECMA-262
/// leaves out U+0085 and schemathesis reads it as ASCII, where the server trims them all.
macro_rules! white_space {
    () => {
        "\\u0009-\\u000d\\u0020\\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
    };
}

/// Text that is not only white space.
pub const NOT_BLANK: &str = concat!("^[^\\u0000]*[^\\u0000", white_space!(), "][^\\u0000]*$");

/// A command's name as a paid body gives it: something besides white space and `/`.
pub const COMMAND_NAMED: &str = concat!("^[^\\u0000]*[^/\\u0000", white_space!(), "][^\\u0000]*$");

/// Any JSON value whose keys and strings hold no U+0000, for free-form request fields.
pub fn json_text() -> Value {
    let this = json!({ "$ref": "#/components/schemas/JsonText" });
    json!({
        "description": "Any JSON value whose keys and strings hold no U+0000",
        "anyOf": [
            { "type": ["null", "boolean", "number"] },
            { "type": "string", "pattern": NO_NUL },
            { "type": "array", "items": this },
            { "type": "object", "propertyNames": { "pattern": NO_NUL }, "additionalProperties": this },
        ],
    })
}

/// Writes the rule on every request schema of the document: each operation's parameters
/// and JSON body, and the components those bodies name.
pub fn state_on_requests(document: &mut Value, request_components: &[&str]) {
    if let Some(paths) = document["paths"].as_object_mut() {
        for operation in paths
            .values_mut()
            .filter_map(Value::as_object_mut)
            .flat_map(|p| p.values_mut())
        {
            if let Some(parameters) = operation["parameters"].as_array_mut() {
                for parameter in parameters.iter_mut().filter(|p| p["in"] != "header") {
                    state_on(&mut parameter["schema"]);
                }
            }
            if let Some(body) = operation.pointer_mut("/requestBody/content/application~1json/schema") {
                state_on(body);
            }
        }
    }
    for name in request_components {
        state_on(&mut document["components"]["schemas"][*name]);
    }
}

/// One schema and those inside it. A string that already has a pattern, a format or a
/// fixed set of values is left alone: those are written to exclude U+0000 (a test checks).
pub fn state_on(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if object.contains_key("$ref") {
        return;
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(branches) = object.get_mut(key).and_then(Value::as_array_mut) {
            branches.iter_mut().for_each(state_on);
        }
    }
    if let Some(properties) = object.get_mut("properties").and_then(Value::as_object_mut) {
        properties.values_mut().for_each(state_on);
    }
    if let Some(items) = object.get_mut("items") {
        state_on(items);
    }
    let types = types_of(object.get("type"));
    let (is_string, is_object) = (types.contains(&"string"), types.contains(&"object"));
    let fixed = ["pattern", "format", "enum", "const"]
        .iter()
        .any(|k| object.contains_key(*k));
    if is_string && !fixed {
        object.insert("pattern".into(), json!(NO_NUL));
    }
    if is_object {
        object
            .entry("propertyNames")
            .or_insert_with(|| json!({ "pattern": NO_NUL }));
        match object.get_mut("additionalProperties") {
            // Unknown fields refused: nothing more to say.
            Some(Value::Bool(false)) => {}
            Some(inner @ Value::Object(_)) => state_on(inner),
            _ => {
                object.insert(
                    "additionalProperties".into(),
                    json!({ "$ref": "#/components/schemas/JsonText" }),
                );
            }
        }
    }
}

fn types_of(value: Option<&Value>) -> Vec<&str> {
    match value {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every text a request may carry, as the document describes it.
    fn request_strings(schema: &Value, out: &mut Vec<Value>) {
        let Some(object) = schema.as_object() else {
            return;
        };
        if types_of(object.get("type")).contains(&"string") {
            out.push(schema.clone());
        }
        let nested = ["anyOf", "oneOf", "allOf"]
            .iter()
            .filter_map(|k| object.get(*k)?.as_array())
            .flatten();
        let properties = object
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|p| p.values());
        let single = ["items", "additionalProperties", "propertyNames"]
            .iter()
            .filter_map(|k| object.get(*k));
        for inner in nested.chain(properties).chain(single) {
            request_strings(inner, out);
        }
    }

    /// A pattern that cannot match U+0000: anchored, no `.` outside a class, and every
    /// negated class names it.
    fn excludes_nul(pattern: &str) -> bool {
        let anchored = pattern.starts_with('^') && pattern.ends_with('$');
        let negated_classes_name_it = pattern.match_indices("[^").all(|(at, _)| {
            pattern[at..]
                .split(']')
                .next()
                .is_some_and(|class| class.contains("\\u0000"))
        });
        let (mut in_class, mut escaped, mut any_char) = (false, false, false);
        for c in pattern.chars() {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '[') => in_class = true,
                (false, ']') => in_class = false,
                (false, '.') if !in_class => any_char = true,
                _ => {}
            }
        }
        anchored && !any_char && negated_classes_name_it
    }

    #[test]
    fn every_text_a_request_carries_refuses_nul() {
        let document = super::super::document();
        let mut strings = Vec::new();
        for operation in document["paths"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|p| p.as_object().unwrap().values())
        {
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                if parameter["in"] != "header" {
                    request_strings(&parameter["schema"], &mut strings);
                }
            }
            request_strings(
                &operation["requestBody"]["content"]["application/json"]["schema"],
                &mut strings,
            );
        }
        for name in ["ChatMessage", "JsonText"] {
            request_strings(&document["components"]["schemas"][name], &mut strings);
        }
        assert!(strings.len() > 50, "found only {} request strings", strings.len());
        for string in strings {
            let stated = match string.get("pattern").and_then(Value::as_str) {
                Some(pattern) => excludes_nul(pattern),
                None => ["format", "enum", "const"].iter().any(|k| string.get(*k).is_some()),
            };
            assert!(stated, "a request text that may hold U+0000: {string}");
        }
    }

    /// The class names exactly what `str::trim` removes.
    #[test]
    fn white_space_is_what_trim_removes() {
        let class = white_space!();
        let code = |hex: &str| char::from_u32(u32::from_str_radix(hex, 16).unwrap()).unwrap();
        // Ranges are written `\uAAAA-\uBBBB`: pair each start with the next code.
        let ranges: Vec<(char, char)> = {
            let tokens: Vec<&str> = class.split("\\u").filter(|s| !s.is_empty()).collect();
            let mut out = Vec::new();
            let mut i = 0;
            while i < tokens.len() {
                if let Some(from) = tokens[i].strip_suffix('-') {
                    out.push((code(from), code(tokens[i + 1])));
                    i += 2;
                } else {
                    out.push((code(tokens[i]), code(tokens[i])));
                    i += 1;
                }
            }
            out
        };
        assert!(ranges.len() > 5);
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            let in_class = ranges.iter().any(|(from, to)| (*from..=*to).contains(&c));
            assert_eq!(in_class, c.is_whitespace(), "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn the_check_tells_a_nul_free_pattern() {
        assert!(excludes_nul(NO_NUL) && excludes_nul(NOT_BLANK));
        assert!(excludes_nul("^[A-Za-z0-9._~+/-]+=*$"));
        assert!(!excludes_nul("\\S") && !excludes_nul("^https?://.*$") && !excludes_nul("^[^\\s/]+$"));
    }
}
