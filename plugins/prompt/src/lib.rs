//! `prompt`: fills `config.template` with the parameters and completes it through the
//! host's LLM provider; `config.system` is an optional system prompt.

use agent_plugin_sdk::{Capability, Error, Invocation, Manifest, Output, Plugin, Result, llm, template};

struct Prompt;

impl Plugin for Prompt {
    fn manifest() -> Manifest {
        Manifest::new("prompt", env!("CARGO_PKG_VERSION"))
            .describe("A prompt template completed by the LLM")
            .capability(Capability::Llm)
    }

    fn execute(call: Invocation) -> Result<Output> {
        let prompt = template::render(&call.config::<String>("template")?, &call.parameters);
        let system = call.opt_config::<String>("system")?;
        let answer = llm::prompt(system.as_deref(), &prompt)?;
        if answer.trim().is_empty() {
            return Err(Error::failed("the model returned an empty answer"));
        }
        Ok(Output::text(answer.trim().to_string()).with_format(call.format))
    }
}

agent_plugin_sdk::export_plugin!(Prompt);
