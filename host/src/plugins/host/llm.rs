use crate::llm::{CompletionRequest, Message, Role};
use crate::plugins::state::HostState;

const MAX_PROMPT_CHARS: usize = 100_000;
/// Texts one `embed` call may ask for.
const MAX_EMBED_TEXTS: usize = 64;

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
        // A plugin's cost on the operator's provider is bounded like its time and memory:
        // per call, per run, and per account across runs.
        let services = self.call.services.clone();
        let max_tokens = max_tokens
            .unwrap_or(services.llm_max_tokens)
            .min(services.llm_max_tokens);
        self.spend_llm(total as u64, max_tokens).await?;
        let request = CompletionRequest {
            messages,
            max_tokens: Some(max_tokens),
            temperature,
            tools: Vec::new(),
        };
        match services.llm.complete(request).await {
            Ok(completion) => Ok(completion.content),
            Err(e) => {
                // The provider's words go to the owner's log of this run, not to the plugin.
                self.host_note(&format!("the language model failed: {e}"));
                Err(e.public_text())
            }
        }
    }

    async fn llm_embed(&mut self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, String> {
        self.call.grants.check_llm()?;
        let Some(embedder) = self.call.services.embedder.clone() else {
            return Err("this host has no embedding model (embedding_model_path)".into());
        };
        if texts.len() > MAX_EMBED_TEXTS {
            return Err(format!(
                "{} texts; one call embeds at most {MAX_EMBED_TEXTS}",
                texts.len()
            ));
        }
        let total: usize = texts.iter().map(|t| t.chars().count()).sum();
        if total > MAX_PROMPT_CHARS {
            return Err(format!("the texts are longer than {MAX_PROMPT_CHARS} characters"));
        }
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        // Counted like a completion that writes nothing: a call, its characters, its tokens.
        self.spend_llm(total as u64, 0).await?;
        embedder.embed(texts).await.map_err(|e| {
            self.host_note(&format!("the embedding model failed: {e}"));
            e.public_text()
        })
    }

    /// Counts a call of `prompt_chars` asking for up to `max_tokens` against the run's
    /// limits, then charges its worst case (the prompt at four characters a token, and
    /// the answer's limit) to the account's budget.
    async fn spend_llm(&mut self, prompt_chars: u64, max_tokens: u32) -> Result<(), String> {
        let services = self.call.services.clone();
        let (limits, spent) = (services.llm_run_limits, self.call.llm_spent);
        if spent.calls >= limits.calls {
            return Err(format!(
                "this run has called the language model {} times, as many as a run may (plugin_llm_calls_per_run)",
                spent.calls
            ));
        }
        if spent.prompt_chars + prompt_chars > limits.prompt_chars {
            return Err(format!(
                "this run's prompts would pass {} characters, as many as a run may send (plugin_llm_prompt_chars_per_run)",
                limits.prompt_chars
            ));
        }
        if spent.tokens + u64::from(max_tokens) > limits.tokens {
            return Err(format!(
                "this run would ask for more than {} tokens, as many as a run may (plugin_llm_tokens_per_run)",
                limits.tokens
            ));
        }
        let cost = max_tokens.saturating_add(prompt_chars.div_ceil(4).min(u64::from(u32::MAX)) as u32);
        services.llm_budget.charge(&self.call.account_id, cost).await?;
        let spent = &mut self.call.llm_spent;
        spent.calls += 1;
        spent.prompt_chars += prompt_chars;
        spent.tokens += u64::from(max_tokens);
        Ok(())
    }
}

/// The interface of one version; `embed` (from 0.3.0) passed in where the version has it.
macro_rules! llm_host {
    ($v:ident $(, $embed:item)?) => {
        impl crate::plugins::bindings::$v::agent::plugin::llm::Host for HostState {
            $($embed)?

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
llm_host!(v0_1_0);
llm_host!(v0_2_0);
llm_host!(
    v0_3_0,
    async fn embed(&mut self, texts: Vec<String>) -> wasmtime::Result<Result<Vec<Vec<f32>>, String>> {
        Ok(self.llm_embed(texts).await)
    }
);
llm_host!(
    v0_4_0,
    async fn embed(&mut self, texts: Vec<String>) -> wasmtime::Result<Result<Vec<Vec<f32>>, String>> {
        Ok(self.llm_embed(texts).await)
    }
);
