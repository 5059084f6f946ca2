//! Command parameters: `rawText` parsing and validation against the command's specs.
//!
//! `rawText` is what a person types: `/hello Ann`, `/hello name=Ann`, `/say "two words"`.
//! After the optional `/command` (or `/command@bot`) come words; `name=value` sets that
//! parameter, other words fill the remaining parameters in declared order, and the last
//! string parameter takes any words left over. Quotes (`"..."`, `'...'`) group words.
//! Values are read as the parameter's type (`number`, `boolean`, JSON for `array`/`object`).
//!
//! When a request carries both `parameters` and `rawText`, `parameters` wins for any name
//! given in both: it is explicit and typed.

use serde_json::{Map, Number, Value};

use crate::domain::{ParamSpec, ParamType};

/// Splits text into words, honouring quotes and backslash escapes inside double quotes.
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                in_word = true;
                let quote = c;
                loop {
                    match chars.next() {
                        None => return Err(format!("rawText has an unterminated {quote} quote")),
                        Some(q) if q == quote => break,
                        Some('\\') if quote == '"' => match chars.next() {
                            Some(escaped) => current.push(escaped),
                            None => return Err("rawText ends with a backslash".into()),
                        },
                        Some(other) => current.push(other),
                    }
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            other => {
                in_word = true;
                current.push(other);
            }
        }
    }
    if in_word {
        words.push(current);
    }
    Ok(words)
}

/// Parses `rawText` for `command` into parameters.
pub fn parse_raw_text(raw: &str, command: &str, specs: &[ParamSpec]) -> Result<Map<String, Value>, String> {
    let mut words = split_words(raw.trim())?;
    if let Some(first) = words.first()
        && let Some(named) = first.strip_prefix('/')
    {
        let named = named.split('@').next().unwrap_or(named);
        if !named.eq_ignore_ascii_case(command) {
            return Err(format!("rawText starts with /{named}, but the command is {command}"));
        }
        words.remove(0);
    }

    let mut out = Map::new();
    let mut positional = Vec::new();
    for word in words {
        match word.split_once('=') {
            Some((name, value)) if specs.iter().any(|s| s.name == name) => {
                let spec = specs.iter().find(|s| s.name == name).expect("checked above");
                out.insert(name.to_string(), from_text(spec, value)?);
            }
            _ => positional.push(word),
        }
    }
    let open: Vec<&ParamSpec> = specs.iter().filter(|s| !out.contains_key(&s.name)).collect();
    let mut rest = positional.into_iter();
    for (i, spec) in open.iter().enumerate() {
        let Some(word) = rest.next() else { break };
        let is_last = i + 1 == open.len();
        let value = if is_last && spec.kind == ParamType::String {
            // The last text parameter takes the rest of the line.
            std::iter::once(word).chain(rest.by_ref()).collect::<Vec<_>>().join(" ")
        } else {
            word
        };
        out.insert(spec.name.clone(), from_text(spec, &value)?);
    }
    let extra: Vec<String> = rest.collect();
    if !extra.is_empty() {
        return Err(format!(
            "rawText has more values than the command takes: {}",
            extra.join(" ")
        ));
    }
    Ok(out)
}

/// Reads text as the parameter's type (`rawText` words, `plugin run --param` values).
pub fn from_text(spec: &ParamSpec, text: &str) -> Result<Value, String> {
    let name = &spec.name;
    match spec.kind {
        ParamType::String => Ok(Value::String(text.to_string())),
        ParamType::Number => {
            if let Ok(i) = text.parse::<i64>() {
                return Ok(Value::Number(i.into()));
            }
            text.parse::<f64>()
                .ok()
                .and_then(Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| format!("parameter '{name}' must be a number, got '{text}'"))
        }
        ParamType::Boolean => match text.to_ascii_lowercase().as_str() {
            "true" | "yes" | "1" | "on" => Ok(Value::Bool(true)),
            "false" | "no" | "0" | "off" => Ok(Value::Bool(false)),
            _ => Err(format!("parameter '{name}' must be true or false, got '{text}'")),
        },
        ParamType::Array | ParamType::Object => {
            let value: Value = serde_json::from_str(text)
                .map_err(|_| format!("parameter '{name}' must be JSON {}", spec.kind.as_str()))?;
            check_type(spec, &value)?;
            Ok(value)
        }
        ParamType::File => Err(file_unsupported(name)),
    }
}

fn file_unsupported(name: &str) -> String {
    format!("parameter '{name}' is a file upload, which is not supported")
}

fn check_type(spec: &ParamSpec, value: &Value) -> Result<(), String> {
    if spec.kind == ParamType::File {
        return Err(file_unsupported(&spec.name));
    }
    let ok = spec.kind.accepts(value);
    if ok && !spec.values.is_empty() && !value.as_str().is_some_and(|v| spec.values.iter().any(|a| a == v)) {
        return Err(format!(
            "parameter '{}' must be one of {}",
            spec.name,
            spec.values
                .iter()
                .map(|v| format!("'{v}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if ok {
        Ok(())
    } else {
        Err(format!(
            "parameter '{}' must be of type {}, got {}",
            spec.name,
            spec.kind.as_str(),
            kind_of(value)
        ))
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Combines both inputs (explicit `parameters` win) and checks the result against the specs.
pub fn resolve(
    command: &str,
    specs: &[ParamSpec],
    parameters: Option<Map<String, Value>>,
    raw_text: Option<&str>,
) -> Result<Map<String, Value>, String> {
    let mut merged = match raw_text {
        Some(raw) if !raw.trim().is_empty() => parse_raw_text(raw, command, specs)?,
        _ => Map::new(),
    };
    for (name, value) in parameters.unwrap_or_default() {
        merged.insert(name, value);
    }
    merged.retain(|_, v| !v.is_null());
    for name in merged.keys() {
        if !specs.iter().any(|s| &s.name == name) {
            let takes = if specs.is_empty() {
                "this command takes no parameters".to_string()
            } else {
                format!(
                    "this command takes: {}",
                    specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
                )
            };
            return Err(format!("unknown parameter '{name}'; {takes}"));
        }
    }
    for spec in specs {
        if let (None, Some(default)) = (merged.get(&spec.name), &spec.default) {
            merged.insert(spec.name.clone(), default.clone());
        }
        match merged.get(&spec.name) {
            Some(value) => check_type(spec, value)?,
            None if spec.kind == ParamType::File && spec.required => return Err(file_unsupported(&spec.name)),
            None if spec.required => return Err(format!("missing required parameter '{}'", spec.name)),
            None => {}
        }
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str, kind: ParamType, required: bool) -> ParamSpec {
        ParamSpec {
            name: name.into(),
            kind,
            required,
            description: String::new(),
            values: Vec::new(),
            default: None,
        }
    }

    fn greet() -> Vec<ParamSpec> {
        vec![spec("name", ParamType::String, true)]
    }

    fn parse(raw: &str, specs: &[ParamSpec]) -> Result<Value, String> {
        resolve("cmd", specs, None, Some(raw)).map(Value::Object)
    }

    #[test]
    fn positional_named_and_quoted() {
        assert_eq!(parse("/cmd Ann", &greet()).unwrap(), json!({"name": "Ann"}));
        assert_eq!(parse("/cmd name=Ann", &greet()).unwrap(), json!({"name": "Ann"}));
        assert_eq!(
            parse("/cmd@my_bot Ann Lee", &greet()).unwrap(),
            json!({"name": "Ann Lee"}),
            "the last text takes the rest"
        );
        assert_eq!(
            parse(r#"/cmd name="Ann \"A\" Lee""#, &greet()).unwrap(),
            json!({"name": "Ann \"A\" Lee"})
        );
        assert_eq!(
            parse("Ann", &greet()).unwrap(),
            json!({"name": "Ann"}),
            "the /command is optional"
        );
        let two = vec![
            spec("city", ParamType::String, true),
            spec("days", ParamType::Number, false),
        ];
        assert_eq!(
            parse("/cmd 'New York' 3", &two).unwrap(),
            json!({"city": "New York", "days": 3})
        );
        assert_eq!(
            parse("/cmd 'New York' 3 4", &two).unwrap_err(),
            "rawText has more values than the command takes: 4"
        );
        assert_eq!(
            parse("/cmd days=3 'New York'", &two).unwrap(),
            json!({"city": "New York", "days": 3})
        );
        let typed = vec![
            spec("n", ParamType::Number, true),
            spec("flag", ParamType::Boolean, false),
            spec("tags", ParamType::Array, false),
        ];
        assert_eq!(
            parse(r#"/cmd 2.5 yes '["a","b"]'"#, &typed).unwrap(),
            json!({"n": 2.5, "flag": true, "tags": ["a", "b"]})
        );
    }

    #[test]
    fn raw_text_errors_are_clear() {
        assert!(parse("/other Ann", &greet()).unwrap_err().contains("/other"));
        assert!(parse("/cmd \"Ann", &greet()).unwrap_err().contains("unterminated"));
        let n = vec![spec("n", ParamType::Number, true)];
        assert_eq!(
            parse("/cmd lots", &n).unwrap_err(),
            "parameter 'n' must be a number, got 'lots'"
        );
        assert_eq!(
            parse("/cmd", &greet()).unwrap_err(),
            "missing required parameter 'name'"
        );
    }

    #[test]
    fn explicit_parameters_win_and_types_are_checked() {
        let merged = resolve(
            "cmd",
            &greet(),
            Some(json!({"name": "Bo"}).as_object().unwrap().clone()),
            Some("/cmd Ann"),
        )
        .unwrap();
        assert_eq!(Value::Object(merged), json!({"name": "Bo"}));
        let wrong = resolve(
            "cmd",
            &greet(),
            Some(json!({"name": 5}).as_object().unwrap().clone()),
            None,
        );
        assert_eq!(
            wrong.unwrap_err(),
            "parameter 'name' must be of type string, got number"
        );
        let unknown = resolve(
            "cmd",
            &greet(),
            Some(json!({"name": "a", "nme": "b"}).as_object().unwrap().clone()),
            None,
        );
        assert_eq!(
            unknown.unwrap_err(),
            "unknown parameter 'nme'; this command takes: name"
        );
        let file = vec![spec("doc", ParamType::File, true)];
        assert!(resolve("cmd", &file, None, None).unwrap_err().contains("not supported"));
        let optional = vec![spec("x", ParamType::String, false)];
        assert_eq!(resolve("cmd", &optional, None, None).unwrap(), Map::new());
    }

    #[test]
    fn a_parameter_with_values_takes_only_those() {
        let mut unit = spec("unit", ParamType::String, true);
        unit.values = vec!["celsius".into(), "fahrenheit".into()];
        assert!(check_type(&unit, &json!("celsius")).is_ok());
        let err = check_type(&unit, &json!("kelvin")).unwrap_err();
        assert_eq!(err, "parameter 'unit' must be one of 'celsius', 'fahrenheit'");
        assert!(
            check_type(&unit, &json!(3))
                .unwrap_err()
                .contains("must be of type string")
        );
    }

    #[test]
    fn a_missing_parameter_takes_its_default() {
        let mut n = spec("n", ParamType::Number, false);
        n.default = Some(json!(300));
        let resolved = resolve("nap", std::slice::from_ref(&n), None, None).unwrap();
        assert_eq!(resolved["n"], json!(300));
        let given = resolve(
            "nap",
            std::slice::from_ref(&n),
            Some(json!({ "n": 5 }).as_object().unwrap().clone()),
            None,
        );
        assert_eq!(given.unwrap()["n"], json!(5));
    }
}
