//! An agent manifest (`agent apply`, TOML), arbitrary text.
//! Invariants: never panics; a refusal names the file, and its line (when it gives one)
//! lies within the text; an accepted manifest obeys the documented rules.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let lines = source.split('\n').count();
    match agent_host::manifest::parse(
        source,
        "fuzz.toml",
        agent_host::manifest::PluginSource::Files(std::path::Path::new("/nonexistent")),
    ) {
        Ok(manifest) => {
            let name_ok = |n: &str, max: usize| {
                (1..=max).contains(&n.len())
                    && n.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            };
            assert!(name_ok(&manifest.agent.username, 32) && manifest.agent.username.len() >= 3);
            let mut names: Vec<&str> = manifest.commands.iter().map(|c| c.name.as_str()).collect();
            assert!(names.iter().all(|n| name_ok(n, 32)), "{names:?}");
            names.sort();
            names.dedup();
            assert_eq!(names.len(), manifest.commands.len(), "command names are unique");
            for command in &manifest.commands {
                assert!(command.timeout_ms.is_none_or(|t| (1..=300_000).contains(&t)));
                // Prices are micro-USDC: at most 6 decimals by construction, and positive.
                assert!(command.price.is_none_or(|p| p.0 > 0));
            }
        }
        Err(err) => {
            assert_eq!(err.file, "fuzz.toml");
            if let Some(line) = err.line {
                assert!(line >= 1 && line <= lines, "line {line} of {lines}: {err}");
            }
        }
    }
});
