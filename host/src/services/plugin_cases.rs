//! The cases an author writes beside a plugin for `agent-host plugin test`: a TOML table
//! of parameters and the answer each should give, run in order against one key-value
//! store (so a case may read what an earlier one wrote).
//!
//! ```toml
//! plugin = "target/wasm32-wasip2/release/notes.wasm"   # relative to this file
//! allowed_hosts = []        # as in an agent manifest; also config, allow_llm, timeout_ms
//!
//! [[case]]
//! name = "adds a note"
//! params = { action = "add", text = "Buy milk" }
//! expect = "Noted (1 in all)."          # the whole response
//!
//! [[case]]
//! name = "refuses an unknown action"
//! params = { action = "burn" }
//! expect_error = "unknown action"       # part of the error
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::ServiceError;
use super::commands::Answer;
use super::local_run::LocalSetup;

/// The file `plugin test` reads when none is named.
pub const DEFAULT_FILE: &str = "plugin-tests.toml";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    plugin: Option<String>,
    #[serde(default)]
    config: toml::Table,
    #[serde(default)]
    allowed_hosts: Vec<String>,
    #[serde(default)]
    allow_llm: bool,
    timeout_ms: Option<u64>,
    #[serde(default, rename = "case")]
    cases: Vec<RawCase>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    name: String,
    #[serde(default)]
    params: toml::Table,
    expect: Option<String>,
    expect_contains: Option<String>,
    expect_error: Option<String>,
    expect_format: Option<String>,
}

/// What a case expects of the run.
#[derive(Debug, Clone, PartialEq)]
pub enum Expected {
    Response(String),
    Contains(String),
    Error(String),
}

#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub params: Map<String, Value>,
    pub expected: Expected,
    pub format: Option<String>,
}

#[derive(Debug)]
pub struct CaseFile {
    pub setup: LocalSetup,
    pub cases: Vec<Case>,
}

/// Reads a cases file; `plugin` (or the file named by `plugin` in it) is the component.
pub fn read(path: &Path, plugin: Option<&Path>) -> Result<CaseFile, ServiceError> {
    let invalid = |message: String| ServiceError::Validation(format!("{}: {message}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| invalid(format!("cannot read it: {e}")))?;
    let raw: RawFile = toml::from_str(&text).map_err(|e| invalid(e.message().trim().replace('\n', " ")))?;
    let folder = path.parent().unwrap_or(Path::new("."));
    let file: PathBuf = match (plugin, &raw.plugin) {
        (Some(given), _) => given.to_path_buf(),
        (None, Some(named)) => folder.join(named),
        (None, None) => return Err(invalid("name the component: plugin = \"path/to/plugin.wasm\"".into())),
    };
    if raw.cases.is_empty() {
        return Err(invalid("no cases: add [[case]] tables".into()));
    }
    let mut cases = Vec::with_capacity(raw.cases.len());
    for case in raw.cases {
        let expected = match (case.expect, case.expect_contains, case.expect_error) {
            (Some(text), None, None) => Expected::Response(text),
            (None, Some(text), None) => Expected::Contains(text),
            (None, None, Some(text)) => Expected::Error(text),
            _ => {
                return Err(invalid(format!(
                    "case '{}': give exactly one of expect, expect_contains, expect_error",
                    case.name
                )));
            }
        };
        cases.push(Case {
            params: json_table(case.params),
            name: case.name,
            expected,
            format: case.expect_format,
        });
    }
    Ok(CaseFile {
        setup: LocalSetup {
            file,
            config: json_table(raw.config),
            allowed_hosts: raw.allowed_hosts,
            allow_llm: raw.allow_llm,
            timeout_ms: raw.timeout_ms,
        },
        cases,
    })
}

fn json_table(table: toml::Table) -> Map<String, Value> {
    table
        .into_iter()
        .map(|(k, v)| (k, serde_json::to_value(v).unwrap_or(Value::Null)))
        .collect()
}

/// Whether the run gave what the case expects; the reason when not.
pub fn check(case: &Case, outcome: &Result<Answer, ServiceError>) -> Result<(), String> {
    match (&case.expected, outcome) {
        (Expected::Response(want), Ok(got)) if &got.response != want => {
            Err(format!("expected {want:?}, got {:?}", got.response))
        }
        (Expected::Contains(part), Ok(got)) if !got.response.contains(part.as_str()) => Err(format!(
            "expected a response containing {part:?}, got {:?}",
            got.response
        )),
        (Expected::Error(_), Ok(got)) => Err(format!("expected an error, got {:?}", got.response)),
        (Expected::Error(part), Err(e)) if !e.to_string().contains(part.as_str()) => {
            Err(format!("expected an error containing {part:?}, got: {e}"))
        }
        (Expected::Error(_), Err(_)) => Ok(()),
        (_, Err(e)) => Err(format!("failed: {e}")),
        (_, Ok(got)) => match &case.format {
            Some(format) if format != got.format.as_str() => {
                Err(format!("expected format {format}, got {}", got.format.as_str()))
            }
            _ => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ResponseFormat;

    fn answer(text: &str) -> Result<Answer, ServiceError> {
        Ok(Answer {
            response: text.into(),
            format: ResponseFormat::Text,
            media_url: None,
            cut_short: false,
        })
    }

    fn case(expected: Expected, format: Option<&str>) -> Case {
        Case {
            name: "c".into(),
            params: Map::new(),
            expected,
            format: format.map(str::to_string),
        }
    }

    #[test]
    fn each_expectation_passes_and_fails_as_written() {
        let exact = case(Expected::Response("Noted.".into()), None);
        assert_eq!(check(&exact, &answer("Noted.")), Ok(()));
        assert_eq!(
            check(&exact, &answer("Noted!")),
            Err("expected \"Noted.\", got \"Noted!\"".into())
        );
        let part = case(Expected::Contains("milk".into()), Some("text"));
        assert_eq!(check(&part, &answer("1. Buy milk")), Ok(()));
        assert!(check(&part, &answer("nothing")).is_err());
        let markdown = case(Expected::Contains("milk".into()), Some("markdown"));
        assert_eq!(
            check(&markdown, &answer("milk")),
            Err("expected format markdown, got text".into())
        );
        let refusal = case(Expected::Error("unknown action".into()), None);
        let refused = Err(ServiceError::Validation("/notes: unknown action 'burn'".into()));
        assert_eq!(check(&refusal, &refused), Ok(()));
        assert!(check(&refusal, &answer("done")).is_err());
        assert!(check(&refusal, &Err(ServiceError::Validation("other".into()))).is_err());
        assert!(check(&exact, &refused).unwrap_err().starts_with("failed: "));
    }

    #[test]
    fn a_case_file_names_its_plugin_and_one_expectation_per_case() {
        let dir = std::env::temp_dir().join(format!("plugin-cases-{}", crate::random::hex_token(6)));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(DEFAULT_FILE);
        let write = |text: &str| std::fs::write(&path, text).unwrap();
        write(
            "plugin = \"out/p.wasm\"\nconfig = { units = \"metric\" }\n[[case]]\nname = \"a\"\nparams = { n = 5 }\nexpect = \"5\"\n",
        );
        let file = read(&path, None).unwrap();
        assert_eq!(file.setup.file, dir.join("out/p.wasm"));
        assert_eq!(file.setup.config["units"], "metric");
        assert_eq!(file.cases[0].params["n"], 5);
        assert_eq!(file.cases[0].expected, Expected::Response("5".into()));
        assert_eq!(
            read(&path, Some(Path::new("/x.wasm"))).unwrap().setup.file,
            Path::new("/x.wasm")
        );

        write("plugin = \"p.wasm\"\n[[case]]\nname = \"a\"\nexpect = \"x\"\nexpect_error = \"y\"\n");
        let both = read(&path, None).unwrap_err().to_string();
        assert!(both.contains("case 'a': give exactly one of"), "{both}");
        write("[[case]]\nname = \"a\"\nexpect = \"x\"\n");
        assert!(
            read(&path, None)
                .unwrap_err()
                .to_string()
                .contains("name the component")
        );
        write("plugin = \"p.wasm\"\n[[case]]\nname = \"a\"\nexpected = \"x\"\n");
        assert!(
            read(&path, None)
                .unwrap_err()
                .to_string()
                .contains("unknown field `expected`")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
