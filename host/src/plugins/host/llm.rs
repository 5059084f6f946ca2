use crate::llm::{CompletionRequest, Message, Role};
use crate::plugins::bindings::agent::plugin::llm::{self as wit, Host};
use crate::plugins::state::HostState;

const MAX_PROMPT_CHARS: usize = 100_000;

impl Host for HostState {
    async fn complete(&mut self, request: wit::CompletionRequest) -> wasmtime::Result<Result<String, String>> {
        if let Err(e) = self.call.grants.check_llm() {
            return Ok(Err(e));
        }
        let total: usize = request.messages.iter().map(|m| m.content.chars().count()).sum();
        if total > MAX_PROMPT_CHARS {
            return Ok(Err(format!("the prompt is longer than {MAX_PROMPT_CHARS} characters")));
        }
        let request = CompletionRequest {
            messages: request
                .messages
                .into_iter()
                .map(|m| {
                    let role = match m.role {
                        wit::Role::System => Role::System,
                        wit::Role::User => Role::User,
                        wit::Role::Assistant => Role::Assistant,
                    };
                    Message::new(role, m.content)
                })
                .collect(),
            // A plugin's cost on the operator's provider is bounded like its time and memory.
            max_tokens: Some(
                request
                    .max_tokens
                    .unwrap_or(self.call.services.llm_max_tokens)
                    .min(self.call.services.llm_max_tokens),
            ),
            temperature: request.temperature,
            tools: Vec::new(),
        };
        Ok(self
            .call
            .services
            .llm
            .complete(request)
            .await
            .map(|c| c.content)
            .map_err(|e| e.to_string()))
    }
}
