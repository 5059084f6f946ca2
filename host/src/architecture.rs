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

/// The source files of `dir`, recursively, with test-only code cut off (an inline
/// `#[cfg(test)] mod tests { ... }` at the end; a `tests.rs` file; a file that declares
/// itself `#![cfg(test)]`, such as a fake).
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") && path.file_name().is_some_and(|n| n != "tests.rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            if test_only(&text) {
                continue;
            }
            let code = match text.find("#[cfg(test)]\nmod tests {") {
                Some(at) => text[..at].to_string(),
                None => text,
            };
            found.push((path, code));
        }
    }
    found
}

/// Whether a file declares itself test-only: `#![cfg(test)]` among its inner attributes, in
/// the block before its first item (a line elsewhere, in a string or a nested module, is not).
fn test_only(text: &str) -> bool {
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with("//") {
            continue;
        }
        if line == "#![cfg(test)]" {
            return true;
        }
        if !line.starts_with("#![") {
            return false;
        }
    }
    false
}

/// The top-level service a file of `services/` belongs to (`payments/refund.rs` → payments).
fn service_of(path: &Path) -> Option<String> {
    let relative = path.strip_prefix(Path::new(SRC).join("services")).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.trim_end_matches(".rs");
    (name != "mod").then(|| name.to_string())
}

/// The code of a service's file with every path to another service written from the
/// services' root (`services::x`): a `super::` chain as long as the file's module is deep
/// below `services` (`jobs.rs`, `payments/mod.rs`: 1; `payments/refund.rs`,
/// `payments/tests/mod.rs`: 2) is the root, a shorter one the service itself. Statements
/// are joined onto one line each, so a `use` group over several lines reads as one.
fn from_the_root(path: &Path, code: &str) -> String {
    // Longest chains first, so a long one is not read as a short one.
    let below = path.strip_prefix(Path::new(SRC).join("services")).unwrap_or(path);
    let depth = below.components().count() - usize::from(path.file_name().is_some_and(|n| n == "mod.rs"));
    let mut code = code.to_string();
    for steps in (1..=depth).rev() {
        let to = if steps == depth { "services::" } else { "self::" };
        code = code.replace(&"super::".repeat(steps), to);
    }
    code.lines()
        .map(|line| line.split("//").next().unwrap_or_default().trim())
        .collect::<Vec<_>>()
        .join(" ")
        .replace(';', ";\n")
}

/// The services a statement names after `services::`: a path (`services::jobs::x`), or
/// each top-level name of a group (`services::{jobs::{self, X}, wallets}`), nested groups
/// skipped. `*` stands for every service (a glob hides what is used).
fn services_named(statement: &str, known: &HashMap<String, usize>) -> Vec<String> {
    let mut named: Vec<String> = Vec::new();
    let mut add = |name: &str| {
        if (known.contains_key(name) || name == "*") && !named.iter().any(|n| n == name) {
            named.push(name.to_string());
        }
    };
    for (at, _) in statement.match_indices("services::") {
        let rest = statement[at + "services::".len()..].trim_start();
        let Some(group) = rest.strip_prefix('{') else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '*')
                .collect();
            add(&name);
            continue;
        };
        let (mut depth, mut item) = (0, String::new());
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    add(first_word(&item));
                    item.clear();
                }
                _ if depth == 0 => item.push(c),
                _ => {}
            }
        }
        add(first_word(&item));
    }
    named
}

/// `jobs` of `jobs::{self, X}` or `jobs as j`.
fn first_word(item: &str) -> &str {
    item.trim()
        .split(|c: char| c == ':' || c.is_whitespace())
        .next()
        .unwrap_or_default()
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
        for statement in from_the_root(&path, &code).lines() {
            for other in services_named(statement, &layer_of) {
                if other == "*" {
                    broken.push(format!(
                        "{}: a glob import of the services: {statement}",
                        path.display()
                    ));
                } else if other != service && layer_of[&other] >= layer {
                    broken.push(format!("{}: {service} uses {other}: {statement}", path.display()));
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
fn only_a_leading_cfg_test_marks_a_file_test_only() {
    assert!(test_only("//! A fake.\n\n#![cfg(test)]\n#![allow(x)]\nuse a;\n"));
    assert!(test_only("#![allow(x)]\n#![cfg(test)]\n"));
    assert!(!test_only("use a;\n#![cfg(test)]\n"));
    assert!(!test_only("mod m {\n    #![cfg(test)]\n}\n"));
}

#[test]
fn every_form_of_a_use_is_read() {
    let known = HashMap::from([
        ("jobs".to_string(), 1),
        ("commands".to_string(), 2),
        ("wallets".to_string(), 0),
        ("payments".to_string(), 3),
    ]);
    let named = |path: &str, code: &str| -> Vec<String> {
        let path = Path::new(SRC).join("services").join(path);
        from_the_root(&path, code)
            .lines()
            .flat_map(|statement| services_named(statement, &known))
            .collect()
    };
    assert_eq!(
        named("jobs.rs", "use super::{ServiceError, jobs, wallets};"),
        ["jobs", "wallets"]
    );
    assert_eq!(
        named("jobs.rs", "    let x = crate::services::commands::execute("),
        ["commands"]
    );
    assert_eq!(named("jobs.rs", "use super::jobs::{self, JobStatus};"), ["jobs"]);
    assert_eq!(
        named(
            "jobs.rs",
            "use super::{\n    payments::{self, Offer},\n    wallets,\n};"
        ),
        ["payments", "wallets"]
    );
    assert_eq!(named("payments/mod.rs", "use super::{ServiceError, jobs};"), ["jobs"]);
    assert_eq!(named("payments/refund.rs", "use super::super::jobs;"), ["jobs"]);
    assert!(named("payments/refund.rs", "use super::scheme::{self, Terms};").is_empty());
    assert_eq!(named("jobs.rs", "use super::*;"), ["*"]);
    assert_eq!(named("jobs.rs", "use super::{jobs as j};"), ["jobs"]);
    assert!(named("jobs.rs", "use super::ServiceError; // super::jobs in a comment").is_empty());
}
