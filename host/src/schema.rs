//! A command's parameters as the JSON Schema of its arguments: what a model's tool
//! declares, written once from the manifest for every surface that offers commands as tools.

use serde_json::{Map, Value, json};

use crate::domain::{Command, ParamType};

/// `{"type": "object", "properties": ..., "required": [...]}` for `command`, or `None`
/// when it needs a file: a file cannot come as an argument, so such a command is not
/// offered (an optional file parameter is left out).
pub fn arguments(command: &Command) -> Option<Value> {
    if needs_file(command) {
        return None;
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    for param in &command.def.parameters {
        let mut schema = match param.kind {
            ParamType::File => continue,
            other => json!({ "type": other.as_str() }),
        };
        if !param.description.is_empty() {
            schema["description"] = json!(param.description);
        }
        if !param.values.is_empty() {
            schema["enum"] = json!(param.values);
        }
        if let Some(default) = &param.default {
            schema["default"] = default.clone();
        }
        properties.insert(param.name.clone(), schema);
        if param.required {
            required.push(param.name.clone());
        }
    }
    Some(json!({ "type": "object", "properties": properties, "required": required }))
}

/// Whether `command` cannot run without a file (which no JSON argument can carry).
pub fn needs_file(command: &Command) -> bool {
    command
        .def
        .parameters
        .iter()
        .any(|param| param.kind == ParamType::File && param.required)
}
