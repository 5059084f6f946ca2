use crate::plugins::bindings::agent::plugin::progress::Host;
use crate::plugins::state::HostState;

impl Host for HostState {
    async fn report(&mut self, percent: u8, message: Option<String>) -> wasmtime::Result<()> {
        // Only long runs have someone polling; elsewhere a report is simply dropped.
        if self.call.grants.progress
            && let Some(sink) = &self.call.progress
        {
            sink(percent.min(100), message.map(|m| m.chars().take(200).collect()));
        }
        Ok(())
    }
}
