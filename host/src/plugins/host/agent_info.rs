use crate::plugins::bindings::for_each_version;
use crate::plugins::state::{AgentSnapshot, HostState};

impl HostState {
    /// The interface has no error channel: a plugin that reaches it without the grant is a
    /// plugin this host should never have linked it for, so it traps.
    fn agent_snapshot(&self) -> wasmtime::Result<&AgentSnapshot> {
        self.call.grants.check_agent_info().map_err(wasmtime::Error::msg)?;
        self.call
            .agent
            .as_ref()
            .ok_or_else(|| wasmtime::Error::msg("no agent snapshot for this call"))
    }
}

macro_rules! agent_info_host {
    ($v:ident) => {
        impl crate::plugins::bindings::$v::agent::plugin::agent_info::Host for HostState {
            async fn profile(
                &mut self,
            ) -> wasmtime::Result<crate::plugins::bindings::$v::agent::plugin::agent_info::AgentProfile> {
                let p = &self.agent_snapshot()?.profile;
                Ok(
                    crate::plugins::bindings::$v::agent::plugin::agent_info::AgentProfile {
                        id: p.id.clone(),
                        username: p.username.clone(),
                        name: p.name.clone(),
                        personality: p.personality.clone(),
                        knowledge: p.knowledge.clone(),
                    },
                )
            }

            async fn commands(
                &mut self,
            ) -> wasmtime::Result<Vec<crate::plugins::bindings::$v::agent::plugin::agent_info::CommandInfo>> {
                let commands = &self.agent_snapshot()?.commands;
                Ok(commands
                    .iter()
                    .map(
                        |c| crate::plugins::bindings::$v::agent::plugin::agent_info::CommandInfo {
                            name: c.name.clone(),
                            description: c.description.clone(),
                            parameters: c.parameters.clone(),
                            enabled: c.enabled,
                        },
                    )
                    .collect())
            }
        }
    };
}
for_each_version!(agent_info_host);
