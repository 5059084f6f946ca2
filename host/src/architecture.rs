//! The layering rules of docs/architecture.md, checked on the source: routes → services →
//! {store, plugins, chains, llm, clients, x402, outbound}, nothing imports upward, and the
//! services call each other only down the order the document writes. A `use` line that
//! breaks them fails here, with the line named.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
const ARCHITECTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/architecture.md");

/// The services by layer, lowest first, as the document's list between
/// `<!-- services-order -->` and `<!-- /services-order -->` gives them: each line names its
/// services in backticks before ` — `.
fn written_order() -> Vec<Vec<String>> {
    let doc = std::fs::read_to_string(ARCHITECTURE).expect("docs/architecture.md");
    let start = doc.find("<!-- services-order -->").expect("the services-order marker");
    let end = doc
        .find("<!-- /services-order -->")
        .expect("the /services-order marker");
    doc[start..end]
        .lines()
        .filter(|line| line.trim_start().chars().next().is_some_and(|c| c.is_ascii_digit()))
        .map(|line| {
            let names = line.split(" — ").next().unwrap_or_default();
            names.split('`').skip(1).step_by(2).map(str::to_string).collect()
        })
        .collect()
}

/// The source files of `dir`, recursively, with test-only code cut off.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") && path.file_name().is_some_and(|n| n != "tests.rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            let code = match text.find("#[cfg(test)]\nmod tests") {
                Some(at) => text[..at].to_string(),
                None => text,
            };
            found.push((path, code));
        }
    }
    found
}

/// The top-level service a file of `services/` belongs to (`payments/refund.rs` → payments).
fn service_of(path: &Path) -> Option<String> {
    let relative = path.strip_prefix(Path::new(SRC).join("services")).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.trim_end_matches(".rs");
    (name != "mod").then(|| name.to_string())
}

/// The services a line of code names: `services::x`, `super::x` at the services' top
/// level, and each name of a `{...}` group after them.
fn services_named(line: &str, known: &HashMap<String, usize>) -> Vec<String> {
    let mut named = Vec::new();
    for prefix in ["services::", "super::"] {
        for (at, _) in line.match_indices(prefix) {
            let rest = &line[at + prefix.len()..];
            let group = match rest.strip_prefix('{') {
                Some(group) => group.split('}').next().unwrap_or_default(),
                None => rest,
            };
            let words = group.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'));
            for word in words {
                let first = word.split("::").next().unwrap_or_default();
                if known.contains_key(first) && !named.iter().any(|n| n == first) {
                    named.push(first.to_string());
                }
                if rest.starts_with('{') {
                    continue;
                }
                break;
            }
        }
    }
    named
}

#[test]
fn services_call_each_other_only_down_the_written_order() {
    let order = written_order();
    let mut layer_of = HashMap::new();
    for (layer, names) in order.iter().enumerate() {
        for name in names {
            assert!(layer_of.insert(name.clone(), layer).is_none(), "{name} is listed twice");
        }
    }
    let mut broken = Vec::new();
    let mut unlisted = Vec::new();
    for (path, code) in sources(&Path::new(SRC).join("services")) {
        let Some(service) = service_of(&path) else { continue };
        let Some(&layer) = layer_of.get(&service) else {
            unlisted.push(service);
            continue;
        };
        // `super::` inside a service's own folder names its own parts, not other services.
        let nested = path.parent() != Some(&Path::new(SRC).join("services"));
        for (number, line) in code.lines().enumerate() {
            let line = if nested {
                line.replace("super::", "")
            } else {
                line.to_string()
            };
            for other in services_named(&line, &layer_of) {
                if other != service && layer_of[&other] >= layer {
                    broken.push(format!("{}:{}: {service} uses {other}", path.display(), number + 1));
                }
            }
        }
    }
    unlisted.sort();
    unlisted.dedup();
    assert!(
        unlisted.is_empty(),
        "services missing from docs/architecture.md: {unlisted:?}"
    );
    assert!(
        broken.is_empty(),
        "services used against the written order:\n{}",
        broken.join("\n")
    );
}

#[test]
fn nothing_imports_upward() {
    // Each layer, and what it must never name.
    let rules: [(&str, &[&str]); 9] = [
        ("routes", &["crate::app"]),
        (
            "services",
            &[
                "crate::routes",
                "crate::app",
                "crate::views",
                "crate::error",
                "crate::cli",
            ],
        ),
        (
            "store",
            &["crate::services", "crate::routes", "crate::app", "crate::plugins"],
        ),
        ("plugins", &["crate::services", "crate::routes", "crate::app"]),
        ("chains", &["crate::services", "crate::routes", "crate::app"]),
        ("llm", &["crate::services", "crate::routes", "crate::app"]),
        ("clients", &["crate::services", "crate::routes", "crate::app"]),
        ("x402", &["crate::services", "crate::routes", "crate::app"]),
        ("outbound", &["crate::services", "crate::routes", "crate::app"]),
    ];
    let mut broken = Vec::new();
    for (layer, forbidden) in rules {
        for (path, code) in sources(&Path::new(SRC).join(layer)) {
            for (number, line) in code.lines().enumerate() {
                for name in forbidden {
                    let at_word_end = line
                        .match_indices(name)
                        .any(|(at, _)| !line[at + name.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_'));
                    if at_word_end {
                        broken.push(format!("{}:{}: {layer} names {name}", path.display(), number + 1));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "imports against the layers:\n{}", broken.join("\n"));
}

#[test]
fn a_use_against_the_order_is_caught() {
    let known = HashMap::from([
        ("jobs".to_string(), 1),
        ("commands".to_string(), 2),
        ("wallets".to_string(), 0),
    ]);
    assert_eq!(
        services_named("use super::{ServiceError, jobs, wallets};", &known),
        ["jobs", "wallets"]
    );
    assert_eq!(
        services_named("    let x = crate::services::commands::execute(", &known),
        ["commands"]
    );
    assert_eq!(services_named("use super::jobs::{self, JobStatus};", &known), ["jobs"]);
    assert!(services_named("use super::ServiceError;", &known).is_empty());
}
