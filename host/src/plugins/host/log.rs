use crate::plugins::bindings::for_each_version;
use crate::plugins::state::{HostState, KEPT_LOG_BYTES};
use crate::store::LogLine;

const MAX_LINES_PER_CALL: u32 = 200;
const MAX_LINE_CHARS: usize = 2_000;

/// A plugin's text as one log line: line breaks, escape sequences and every other control
/// character are written out (`\n`, `\u{1b}`), so a plugin can neither forge a host log
/// line nor restyle the operator's terminal.
fn one_line(message: &str) -> String {
    let mut line = String::with_capacity(message.len().min(MAX_LINE_CHARS));
    for c in message.chars().take(MAX_LINE_CHARS) {
        if c.is_control() {
            line.extend(c.escape_default());
        } else {
            line.push(c);
        }
    }
    line
}

/// A log line's level, as every version of the `log` interface has it.
#[derive(Clone, Copy)]
enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

impl HostState {
    fn log_line(&mut self, level: Level, message: &str) {
        let call = &mut self.call;
        call.log_lines += 1;
        if call.log_lines > MAX_LINES_PER_CALL {
            return;
        }
        let message = one_line(message);
        let (agent, command) = (&call.agent_id, &call.command);
        let name = match level {
            Level::Debug => {
                tracing::debug!(target: "plugin", agent, command, "{message}");
                "debug"
            }
            Level::Info => {
                tracing::info!(target: "plugin", agent, command, "{message}");
                "info"
            }
            Level::Warn => {
                tracing::warn!(target: "plugin", agent, command, "{message}");
                "warn"
            }
            Level::Error => {
                tracing::error!(target: "plugin", agent, command, "{message}");
                "error"
            }
        };
        // The run's record keeps the first lines, up to its byte budget.
        if call.kept_log_bytes + message.len() <= KEPT_LOG_BYTES {
            call.kept_log_bytes += message.len();
            call.kept_log.push(LogLine {
                at: crate::clock::now_ms(),
                level: name.into(),
                message,
            });
        }
    }

    /// A line the host writes into the run's log, for its author: why the host refused
    /// something the plugin asked for where the interface has no room for a reason.
    pub(crate) fn host_note(&mut self, message: &str) {
        self.log_line(Level::Warn, message);
    }
}

macro_rules! log_host {
    ($v:ident) => {
        impl crate::plugins::bindings::$v::agent::plugin::log::Host for HostState {
            async fn log(
                &mut self,
                level: crate::plugins::bindings::$v::agent::plugin::log::Level,
                message: String,
            ) -> wasmtime::Result<()> {
                use crate::plugins::bindings::$v::agent::plugin::log::Level as L;
                let level = match level {
                    L::Debug => Level::Debug,
                    L::Info => Level::Info,
                    L::Warn => Level::Warn,
                    L::Error => Level::Error,
                };
                self.log_line(level, &message);
                Ok(())
            }
        }
    };
}
for_each_version!(log_host);

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn control_characters_are_written_out() {
        assert_eq!(
            one_line("done\n2026-11-23T00:00:00Z ERROR agent_host::routes: fake\r\t\u{1b}[31m"),
            "done\\n2026-11-23T00:00:00Z ERROR agent_host::routes: fake\\r\\t\\u{1b}[31m"
        );
        assert_eq!(one_line("héllo wörld"), "héllo wörld");
        assert_eq!(one_line(&"x".repeat(5_000)).len(), 2_000);
    }
}
