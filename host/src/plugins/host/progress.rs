use crate::plugins::bindings::for_each_version;
use crate::plugins::state::HostState;

impl HostState {
    fn report_progress(&mut self, percent: u8, message: Option<String>) {
        // Only long runs have someone polling; elsewhere a report is simply dropped.
        if self.call.grants.progress
            && let Some(sink) = &self.call.progress
        {
            sink(percent.min(100), message.map(|m| m.chars().take(200).collect()));
        }
    }
}

macro_rules! progress_host {
    ($v:ident) => {
        impl crate::plugins::bindings::$v::agent::plugin::progress::Host for HostState {
            async fn report(&mut self, percent: u8, message: Option<String>) -> wasmtime::Result<()> {
                self.report_progress(percent, message);
                Ok(())
            }
        }
    };
}
for_each_version!(progress_host);
