//! What the service tells its operator: log lines (text or JSON, each carrying the request
//! id of the request it belongs to), metrics (`metrics`) and traces (`traces`).

mod hot_path;
mod labels;
pub mod metrics;
pub mod text_format;
pub mod traces;

use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::LogFormat;

/// Installs the log writer (stderr), and the trace exporter when `traces` says where to,
/// once per process; a second call is ignored. Call inside the async runtime.
pub fn init(filter: &str, format: LogFormat, traces: Option<traces::Export>) {
    let filter =
        tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match format {
        // Colour only on a terminal: a log file or journal gets plain lines.
        LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .boxed(),
        // The event's fields at the top level; beside them every span it is in, outermost
        // first: the request's (its id, route), and any inside it.
        LogFormat::Json => logs
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .boxed(),
    };
    // The traced requests' spans are exported whatever the log filter keeps: an operator
    // who quiets the logs still sees the traces.
    let spans = traces.and_then(|export| match traces::tracer(&export) {
        Ok(tracer) => Some(
            // Only what a trace reader uses: the layer's extras (source locations, threads,
            // busy and idle times, an OpenTelemetry context made current at each poll) cost
            // a request about a fifth of its throughput when every span is kept.
            tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_location(false)
                .with_threads(false)
                .with_target(false)
                .with_level(false)
                .with_tracked_inactivity(false)
                .with_context_activation(false)
                .with_filter(
                    tracing_subscriber::filter::filter_fn(|span| span.target() == traces::TRACED)
                        .with_max_level_hint(tracing_subscriber::filter::LevelFilter::INFO),
                ),
        ),
        Err(e) => {
            eprintln!("warning: traces are not exported: {e}");
            None
        }
    });
    let _ = tracing_subscriber::registry()
        .with(logs.with_filter(filter))
        .with(spans)
        .try_init();
}
