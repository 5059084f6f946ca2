use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::bindings::agent::plugin::types as wit;
use crate::{Error, Format, Result};

/// Who asked for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Api,
    ChatTool,
    X402,
    Chatapp,
    Social,
}

/// One run of a command: its parameters (already checked by the host against the
/// command's specs) and the command's `config` from the agent manifest.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub agent_id: String,
    pub command: String,
    pub parameters: Map<String, Value>,
    pub raw_text: Option<String>,
    pub config: Map<String, Value>,
    /// The format the agent manifest declares for this command.
    pub format: Format,
    pub origin: Origin,
}

impl Invocation {
    pub(crate) fn from_wit(inv: wit::Invocation) -> Result<Invocation> {
        let object = |text: &str, what: &str| -> Result<Map<String, Value>> {
            match serde_json::from_str(text) {
                Ok(Value::Object(map)) => Ok(map),
                Ok(Value::Null) => Ok(Map::new()),
                _ => Err(Error::invalid(format!(
                    "the host sent {what} that are not a JSON object"
                ))),
            }
        };
        Ok(Invocation {
            parameters: object(&inv.parameters, "parameters")?,
            config: object(&inv.config, "config")?,
            agent_id: inv.agent_id,
            command: inv.command,
            raw_text: inv.raw_text,
            format: inv.response_format.into(),
            origin: match inv.origin {
                wit::Origin::Api => Origin::Api,
                wit::Origin::ChatTool => Origin::ChatTool,
                wit::Origin::X402 => Origin::X402,
                wit::Origin::Chatapp => Origin::Chatapp,
                wit::Origin::Social => Origin::Social,
            },
        })
    }

    /// A test or tool can build one directly.
    pub fn new(command: &str, parameters: Value, config: Value) -> Invocation {
        let object = |v: Value| match v {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        Invocation {
            agent_id: String::new(),
            command: command.to_string(),
            parameters: object(parameters),
            raw_text: None,
            config: object(config),
            format: Format::Text,
            origin: Origin::Api,
        }
    }

    /// A required parameter as `T`; a clear `invalid-input` error names it otherwise.
    pub fn param<T: DeserializeOwned>(&self, name: &str) -> Result<T> {
        self.opt_param(name)?
            .ok_or_else(|| Error::invalid(format!("parameter '{name}' is required")))
    }

    /// An optional parameter as `T` (absent or null is `None`).
    pub fn opt_param<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>> {
        typed(self.parameters.get(name), || format!("parameter '{name}'"))
    }

    /// A required `config` value as `T`.
    pub fn config<T: DeserializeOwned>(&self, key: &str) -> Result<T> {
        self.opt_config(key)?
            .ok_or_else(|| Error::unavailable(format!("the command's config has no '{key}'")))
    }

    /// An optional `config` value as `T`.
    pub fn opt_config<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        typed(self.config.get(key), || format!("config '{key}'"))
            .map_err(|e| Error::unavailable(e.to_string().trim_start_matches("invalid input: ").to_string()))
    }
}

fn typed<T: DeserializeOwned>(value: Option<&Value>, what: impl Fn() -> String) -> Result<Option<T>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value.clone())
            .map(Some)
            .map_err(|e| Error::invalid(format!("{} {}", what(), describe(value, &e)))),
    }
}

fn describe(value: &Value, err: &serde_json::Error) -> String {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    let wanted = err.to_string();
    let wanted = wanted.split(", expected ").nth(1).unwrap_or("another type");
    format!("is {kind}, expected {wanted}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn typed_parameters_with_clear_errors() {
        let call = Invocation::new("x", json!({"name": "Ann", "n": 3, "flag": true}), json!({"text": "hi"}));
        assert_eq!(call.param::<String>("name").unwrap(), "Ann");
        assert_eq!(call.param::<u32>("n").unwrap(), 3);
        assert_eq!(call.opt_param::<bool>("missing").unwrap(), None);
        assert_eq!(
            call.param::<String>("missing").unwrap_err(),
            Error::invalid("parameter 'missing' is required")
        );
        let err = call.param::<String>("n").unwrap_err().to_string();
        assert!(err.contains("parameter 'n' is a number, expected a string"), "{err}");
        assert_eq!(call.config::<String>("text").unwrap(), "hi");
        assert!(matches!(call.config::<String>("nope"), Err(Error::Unavailable(_))));
    }
}
