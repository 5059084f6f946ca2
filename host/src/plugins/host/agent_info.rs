use crate::plugins::bindings::agent::plugin::agent_info::{AgentProfile, CommandInfo, Host};
use crate::plugins::state::HostState;

impl Host for HostState {
    async fn profile(&mut self) -> wasmtime::Result<AgentProfile> {
        // The interface has no error channel: a plugin that reaches it without the grant
        // is a plugin this host should never have linked it for, so it traps.
        self.call.grants.check_agent_info().map_err(wasmtime::Error::msg)?;
        let agent = self
            .call
            .agent
            .as_ref()
            .ok_or_else(|| wasmtime::Error::msg("no agent snapshot for this call"))?;
        Ok(agent.profile.clone())
    }

    async fn commands(&mut self) -> wasmtime::Result<Vec<CommandInfo>> {
        self.call.grants.check_agent_info().map_err(wasmtime::Error::msg)?;
        let agent = self
            .call
            .agent
            .as_ref()
            .ok_or_else(|| wasmtime::Error::msg("no agent snapshot for this call"))?;
        Ok(agent.commands.clone())
    }
}
