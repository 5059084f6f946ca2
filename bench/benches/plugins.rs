//! Instantiate + execute of each handler component in a fresh instance, as the host runs
//! it for every request (cached `InstancePre`, pooling allocator). Prints criterion's
//! estimate and, per handler, p50/p99 over every call made.

// Benchmarks: a failed unwrap stops the run with its reason.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_host::domain::HandlerType;
use agent_host::plugins::{AgentProfile, CommandInfo};
use agent_host::plugins::{AgentSnapshot, Grants, Invocation, Origin, ResponseFormat, Run, Tenant};
use criterion::{Criterion, criterion_group, criterion_main};

mod common;
use common::{Setup, percentile, setup};

async fn make_run(setup: &Setup, handler: HandlerType) -> Run {
    let component = setup.runtime.builtin(handler).unwrap();
    let manifest = setup.runtime.declared(&component).await.unwrap();
    let (command, parameters, config) = match handler {
        HandlerType::SimpleText => (
            "hello",
            r#"{"name":"Ann"}"#.to_string(),
            r#"{"text":"Hello, {{name}}!"}"#.to_string(),
        ),
        HandlerType::Prompt => (
            "poem",
            r#"{"topic":"rain"}"#.to_string(),
            r#"{"template":"A poem about {{topic}}"}"#.to_string(),
        ),
        HandlerType::Webhook => (
            "hook",
            "{}".to_string(),
            format!(r#"{{"url":"{}"}}"#, setup.webhook_url),
        ),
        _ => ("help", "{}".to_string(), r#"{"builtin":"help"}"#.to_string()),
    };
    let webhook = (handler == HandlerType::Webhook).then_some(setup.webhook_url.as_str());
    let grants = Grants::for_command(component.kind, &manifest.capabilities, &[], webhook, false);
    let agent = (handler == HandlerType::BuiltIn).then(|| AgentSnapshot {
        profile: AgentProfile {
            id: "a1".into(),
            username: "bench".into(),
            name: "Bench".into(),
            personality: "Fast.".into(),
            knowledge: vec![],
        },
        commands: (0..5)
            .map(|i| CommandInfo {
                name: format!("cmd{i}"),
                description: "A command".into(),
                parameters: vec![],
                enabled: true,
            })
            .collect(),
    });
    Run {
        component,
        invocation: Invocation {
            agent_id: "a1".into(),
            command: command.into(),
            parameters,
            raw_text: None,
            config,
            response_format: ResponseFormat::Text,
            origin: Origin::Api,
        },
        agent_id: "a1".into(),
        agent_name: "a1".into(),
        grants,
        agent,
        progress: None,
        timeout: Some(Duration::from_secs(5)),
        tenant: Tenant {
            account: "bench".into(),
            wait: None,
        },
        kv_scope: format!("command:{command}"),
        meter: None,
        slot: None,
    }
}

fn handlers(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let setup = setup(&rt);
    let mut report = Vec::new();
    for (name, handler) in [
        ("simple_text", HandlerType::SimpleText),
        ("built_in", HandlerType::BuiltIn),
        ("prompt", HandlerType::Prompt),
        ("webhook", HandlerType::Webhook),
    ] {
        // Compile and warm the instance slots first.
        rt.block_on(async {
            for _ in 0..200 {
                setup
                    .runtime
                    .execute(make_run(&setup, handler).await)
                    .await
                    .result
                    .unwrap();
            }
        });
        let samples = Arc::new(Mutex::new(Vec::with_capacity(200_000)));
        c.bench_function(&format!("instantiate+execute/{name}"), |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let (setup, samples) = (&setup, samples.clone());
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let run = make_run(setup, handler).await;
                        let started = Instant::now();
                        setup.runtime.execute(run).await.result.unwrap();
                        let took = started.elapsed();
                        total += took;
                        samples.lock().unwrap().push(took);
                    }
                    total
                }
            })
        });
        let mut all = samples.lock().unwrap().clone();
        if all.is_empty() {
            continue; // filtered out on the command line
        }
        all.sort();
        report.push((name, all.len(), percentile(&all, 0.5), percentile(&all, 0.99)));
    }
    println!("\nhandler       calls     p50        p99");
    for (name, n, p50, p99) in report {
        println!(
            "{name:<12} {n:>7}  {:>7.1} µs  {:>7.1} µs",
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50).measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    targets = handlers
}
criterion_main!(benches);
