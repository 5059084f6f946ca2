//! Runs the embedded model once and prints the reply and its timing:
//! `cargo run --release -p agent-host --example embedded_chat -- MODEL.gguf "your message"`.
//! Used for the figures in BENCHMARKS.md.

use std::time::Duration;

use agent_host::llm::{CompletionRequest, EmbeddedProvider, Message, Role};

fn main() {
    let mut args = std::env::args().skip(1);
    let model = args.next().expect("usage: embedded_chat MODEL.gguf MESSAGE [RUNS]");
    let message = args.next().unwrap_or_else(|| "What is the capital of France?".into());
    let runs: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(3);
    let provider = EmbeddedProvider::new(std::path::Path::new(&model), 128, Duration::from_secs(120));
    let request = CompletionRequest {
        messages: vec![
            Message::new(Role::System, "You are Helper, a concise and friendly assistant."),
            Message::new(Role::User, message),
        ],
        ..Default::default()
    };
    let started = std::time::Instant::now();
    for run in 0..runs {
        let (text, stats) = provider.generate(&request).expect("generation");
        let decode = stats.total - stats.time_to_first_token;
        let per_sec = if stats.generated_tokens > 1 {
            (stats.generated_tokens - 1) as f64 / decode.as_secs_f64()
        } else {
            0.0
        };
        println!(
            "run {run}: prompt {} tokens, generated {} tokens, time to first token {:.0} ms, total {:.0} ms, {:.1} tokens/s after the first",
            stats.prompt_tokens,
            stats.generated_tokens,
            stats.time_to_first_token.as_secs_f64() * 1000.0,
            stats.total.as_secs_f64() * 1000.0,
            per_sec
        );
        if run == 0 {
            println!("reply: {text}");
        }
    }
    println!(
        "all runs (first includes loading the model): {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
