//! `rawText` command parsing (`/say "two words" n=3`) against fuzzed parameter specs, with
//! and without explicit `parameters`.
//! Invariants: never panics; an accepted result names only declared parameters, holds every
//! required one, and each value has its declared type.

#![no_main]

use agent_host::domain::{ParamSpec, ParamType};
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

#[derive(Arbitrary, Debug)]
struct Spec {
    name: u8,
    kind: u8,
    required: bool,
}

#[derive(Arbitrary, Debug)]
struct Input {
    specs: Vec<Spec>,
    raw_text: String,
    explicit: Option<Vec<(u8, String)>>,
}

const NAMES: [&str; 6] = ["name", "city", "n", "flag", "items", "extra"];
const KINDS: [ParamType; 6] = [
    ParamType::String,
    ParamType::Number,
    ParamType::Boolean,
    ParamType::Array,
    ParamType::Object,
    ParamType::File,
];

fuzz_target!(|input: Input| {
    let mut specs: Vec<ParamSpec> = Vec::new();
    for spec in input.specs.iter().take(6) {
        let name = NAMES[spec.name as usize % NAMES.len()];
        if specs.iter().any(|s| s.name == name) {
            continue;
        }
        specs.push(ParamSpec {
            name: name.into(),
            kind: KINDS[spec.kind as usize % KINDS.len()],
            required: spec.required,
            description: String::new(),
            values: Vec::new(),
            default: None,
        });
    }
    let explicit = input.explicit.map(|pairs| {
        pairs
            .into_iter()
            .take(6)
            .map(|(n, v)| {
                (
                    NAMES[n as usize % NAMES.len()].to_string(),
                    serde_json::from_str(&v).unwrap_or(Value::String(v)),
                )
            })
            .collect::<Map<String, Value>>()
    });
    let Ok(resolved) = agent_host::services::params::resolve("cmd", &specs, explicit, Some(&input.raw_text)) else {
        return;
    };
    for (name, value) in &resolved {
        let spec = specs
            .iter()
            .find(|s| &s.name == name)
            .expect("only declared parameters");
        let typed = match spec.kind {
            ParamType::String => value.is_string(),
            ParamType::Number => value.is_number(),
            ParamType::Boolean => value.is_boolean(),
            ParamType::Array => value.is_array(),
            ParamType::Object => value.is_object(),
            ParamType::File => false,
        };
        assert!(typed, "{name} = {value} is not a {:?}", spec.kind);
    }
    for spec in specs.iter().filter(|s| s.required) {
        assert!(resolved.contains_key(&spec.name), "required {} missing", spec.name);
    }
});
