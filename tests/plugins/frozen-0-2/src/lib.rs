//! A command built against `agent:plugin@0.2.0`: it completes a prompt through the host's
//! `llm` interface of that version, which has no `embed`, and says which version it is.

wit_bindgen::generate!({
    path: "../../../wit/v0.2.0",
    world: "command-plugin",
    generate_all,
});

use agent::plugin::llm::{CompletionRequest, Message, Role, complete};
use agent::plugin::types::{Capability, CommandError, Invocation, Output, PluginManifest, ResponseFormat};

struct Frozen;

impl exports::agent::plugin::command::Guest for Frozen {
    fn manifest() -> PluginManifest {
        PluginManifest {
            name: "frozen".into(),
            version: "0.1.0".into(),
            description: "Built against WIT 0.2.0".into(),
            parameters: Vec::new(),
            response_format: ResponseFormat::Text,
            capabilities: vec![Capability::Llm],
            long_running: false,
        }
    }

    fn execute(_: Invocation) -> Result<Output, CommandError> {
        let request = CompletionRequest {
            messages: vec![Message {
                role: Role::User,
                content: "Say hello.".into(),
            }],
            max_tokens: Some(16),
            temperature: None,
        };
        let answer = complete(&request).map_err(CommandError::Unavailable)?;
        Ok(Output {
            response: format!("0.2.0 says: {answer}"),
            format: ResponseFormat::Text,
            media_url: None,
        })
    }
}

export!(Frozen);
