use crate::plugins::bindings::agent::plugin::log::{Host, Level};
use crate::plugins::state::HostState;

const MAX_LINES_PER_CALL: u32 = 200;
const MAX_LINE_CHARS: usize = 2_000;

impl Host for HostState {
    async fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let call = &mut self.call;
        call.log_lines += 1;
        if call.log_lines > MAX_LINES_PER_CALL {
            return Ok(());
        }
        let message: String = message.chars().take(MAX_LINE_CHARS).collect();
        let (agent, command) = (&call.agent_id, &call.command);
        match level {
            Level::Debug => tracing::debug!(target: "plugin", agent, command, "{message}"),
            Level::Info => tracing::info!(target: "plugin", agent, command, "{message}"),
            Level::Warn => tracing::warn!(target: "plugin", agent, command, "{message}"),
            Level::Error => tracing::error!(target: "plugin", agent, command, "{message}"),
        }
        Ok(())
    }
}
