use crate::llm::{CompletionRequest, Message, Role};
use crate::plugins::bindings::for_each_version;
use crate::plugins::state::HostState;

const MAX_PROMPT_CHARS: usize = 100_000;

impl HostState {
    async fn llm_complete(
        &mut self,
        messages: Vec<Message>,
        max_tokens: Option<u32>,
        temperature: Option<f32>,
    ) -> Result<String, String> {
        self.call.grants.check_llm()?;
        let total: usize = messages.iter().map(|m| m.content.chars().count()).sum();
        if total > MAX_PROMPT_CHARS {
            return Err(format!("the prompt is longer than {MAX_PROMPT_CHARS} characters"));
        }
        let request = CompletionRequest {
            messages,
            // A plugin's cost on the operator's provider is bounded like its time and memory.
            max_tokens: Some(
                max_tokens
                    .unwrap_or(self.call.services.llm_max_tokens)
                    .min(self.call.services.llm_max_tokens),
            ),
            temperature,
            tools: Vec::new(),
        };
        self.call
            .services
            .llm
            .complete(request)
            .await
            .map(|c| c.content)
            .map_err(|e| e.to_string())
    }
}

macro_rules! llm_host {
    ($v:ident) => {
        impl crate::plugins::bindings::$v::agent::plugin::llm::Host for HostState {
            async fn complete(
                &mut self,
                request: crate::plugins::bindings::$v::agent::plugin::llm::CompletionRequest,
            ) -> wasmtime::Result<Result<String, String>> {
                use crate::plugins::bindings::$v::agent::plugin::llm::Role as R;
                let messages = request
                    .messages
                    .into_iter()
                    .map(|m| {
                        let role = match m.role {
                            R::System => Role::System,
                            R::User => Role::User,
                            R::Assistant => Role::Assistant,
                        };
                        Message::new(role, m.content)
                    })
                    .collect();
                Ok(self
                    .llm_complete(messages, request.max_tokens, request.temperature)
                    .await)
            }
        }
    };
}
for_each_version!(llm_host);
