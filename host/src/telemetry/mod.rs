//! What the service tells its operator: log lines (text or JSON, each carrying the request
//! id of the request it belongs to), and metrics (`metrics`).

mod hot_path;
pub mod metrics;

use crate::config::LogFormat;

/// Installs the log writer (stderr) once per process; a second call is ignored.
pub fn init_logs(filter: &str, format: LogFormat) {
    let filter =
        tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        // Colour only on a terminal: a log file or journal gets plain lines.
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        // The event's fields at the top level; beside them every span it is in, outermost
        // first: the request's (its id, route), and any inside it.
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .try_init(),
    };
}
