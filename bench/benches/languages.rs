//! The same host, one plugin per language: the Rust example (`notes`), the Python one
//! (`py-echo`, componentize-py) and the JavaScript one (`js-weather`, componentize-js).
//! For each: its size, the host's one-time compile, and instantiate + execute in a fresh
//! instance per call (as every request runs it), p50 and p99 over 300 calls (BENCH_CALLS) after 20 warm.
//! Each does a comparable small thing: notes lists from the key-value store, js-weather
//! answers from it (a cached place), py-echo echoes with a log line.
//!
//! bench/languages.sh builds the three and runs this; or set NOTES_WASM, PY_ECHO_WASM and
//! JS_WEATHER_WASM and run `cargo bench -p agent-host-bench --bench languages`.

// Benchmarks: a failed unwrap stops the run with its reason.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use agent_host::plugins::{Grants, Invocation, Origin, ResponseFormat, Run, Tenant};

mod common;
use common::{bench_agent, percentile, setup};

struct Plugin {
    language: &'static str,
    env: &'static str,
    command: &'static str,
    parameters: &'static str,
    /// A key-value entry the run reads, as an earlier run would have left it.
    seed: Option<(&'static str, &'static str)>,
}

const PLUGINS: &[Plugin] = &[
    Plugin {
        language: "Rust (notes)",
        env: "NOTES_WASM",
        command: "notes",
        parameters: r#"{"action":"list"}"#,
        seed: Some(("notes", "Buy milk\nCall Ann")),
    },
    Plugin {
        language: "Python (py-echo)",
        env: "PY_ECHO_WASM",
        command: "echo",
        parameters: r#"{"text":"hello"}"#,
        seed: None,
    },
    Plugin {
        language: "JavaScript (js-weather)",
        env: "JS_WEATHER_WASM",
        command: "weather",
        parameters: r#"{"latitude":38.72,"longitude":-9.14}"#,
        seed: Some((
            "at:38.72,-9.14",
            r#"{"at":99999999999999,"text":"14.3 °C, wind 11.5 km/h at 38.72, -9.14"}"#,
        )),
    },
];

/// Calls measured per plugin: 300, or BENCH_CALLS (more, to profile a run).
fn calls() -> usize {
    std::env::var("BENCH_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300)
        .max(1)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("plugin                     size      compile    first run   p50        p99");
    for plugin in PLUGINS {
        let Ok(path) = std::env::var(plugin.env) else {
            println!("{:<26} skipped: set {}", plugin.language, plugin.env);
            continue;
        };
        // A runtime of its own: the compile is measured cold, with no cached artifact.
        let setup = setup(&rt);
        let agent_id = bench_agent(&rt, &setup.store);
        let bytes = std::fs::read(&path).unwrap();
        let size = bytes.len();
        let started = Instant::now();
        let tenant = agent_host::plugins::Tenant {
            account: "bench".into(),
            wait: None,
        };
        // As an upload is kept: checked and compiled, recorded, then ready to run.
        let (inspection, compiled) = rt
            .block_on(setup.runtime.check_upload(std::sync::Arc::new(bytes.clone()), &tenant))
            .unwrap();
        let manifest = agent_host::plugins::manifest_json(&inspection.manifest);
        rt.block_on(
            setup
                .store
                .put_plugin(&inspection.hash, &manifest, &inspection.wit_version, &bytes),
        )
        .unwrap();
        rt.block_on(setup.runtime.keep(compiled, &inspection.manifest)).unwrap();
        let compile = started.elapsed();
        if let Some((key, value)) = plugin.seed {
            let scope = format!("command:{}", plugin.command);
            rt.block_on(setup.store.kv_set(
                &agent_id,
                &scope,
                key,
                value.as_bytes().to_vec(),
                agent_host::store::KvQuota {
                    max_keys: 1000,
                    account_id: "bench".into(),
                    max_account_bytes: u64::MAX,
                },
            ))
            .unwrap();
        }
        let run = || {
            let component = setup.runtime.custom(&inspection.hash);
            let grants = Grants::for_command(component.kind, &inspection.manifest.capabilities, &[], None, false);
            Run {
                component,
                invocation: Invocation {
                    agent_id: agent_id.clone(),
                    command: plugin.command.into(),
                    parameters: plugin.parameters.into(),
                    raw_text: None,
                    config: "{}".into(),
                    response_format: ResponseFormat::Text,
                    origin: Origin::Api,
                },
                agent_id: agent_id.clone(),
                agent_name: "bench".into(),
                grants,
                agent: None,
                progress: None,
                timeout: Some(Duration::from_secs(10)),
                tenant: Tenant {
                    account: "bench".into(),
                    wait: None,
                },
                kv_scope: format!("command:{}", plugin.command),
                meter: None,
                slot: None,
            }
        };
        let timed = |_: usize| {
            let started = Instant::now();
            let output = rt.block_on(setup.runtime.execute(run())).result.unwrap();
            (started.elapsed(), output.response)
        };
        let (first, answer) = timed(0);
        (0..20).for_each(|i| drop(timed(i)));
        let mut samples: Vec<Duration> = (0..calls()).map(|i| timed(i).0).collect();
        samples.sort();
        println!(
            "{:<26} {:>5.1} MB  {:>7.0} ms  {:>7.1} ms  {:>7.3} ms  {:>7.3} ms   ({answer:?})",
            plugin.language,
            size as f64 / 1e6,
            compile.as_secs_f64() * 1e3,
            first.as_secs_f64() * 1e3,
            percentile(&samples, 0.5).as_secs_f64() * 1e3,
            percentile(&samples, 0.99).as_secs_f64() * 1e3,
        );
    }
}
