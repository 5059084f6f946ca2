//! Wire formats of the third-party APIs: the Telegram Bot API, the X API v2, an x402
//! facilitator's, and MCP's (remote servers an agent uses as tools).

pub mod facilitator;
pub mod mcp;
pub mod oauth;
pub mod telegram;
pub mod x;

/// Runs one call to a third party, measuring its duration and whether it succeeded.
async fn measured<T, E>(service: &'static str, call: impl Future<Output = Result<T, E>>) -> Result<T, E> {
    use tracing::Instrument;
    // The call's span in a trace; the request it sends carries its context (`propagate`).
    let call = call.instrument(crate::telemetry::traces::part_span!(
        "upstream",
        "otel.kind" = "client",
        "otel.name" = service,
        "peer.service" = service,
    ));
    let Some(metrics) = crate::telemetry::metrics::metrics() else {
        return call.await;
    };
    let started = std::time::Instant::now();
    let result = call.await;
    let outcome = if result.is_ok() { "ok" } else { "error" };
    metrics.upstream_call(service, outcome, started.elapsed().as_secs_f64());
    result
}
