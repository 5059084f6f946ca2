//! The LLM provider layer: one trait, so the prompt plugin, chat and tests reach any model
//! the same way. Providers: an OpenAI-compatible chat-completions client (OpenAI, vLLM,
//! llama.cpp server, Ollama, ...).

mod openai;

pub use openai::OpenAiProvider;

use std::future::Future;
use std::pin::Pin;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

#[derive(Debug, Clone, Default)]
pub struct CompletionRequest {
    pub messages: Vec<Message>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("no LLM provider is configured on this server (set llm_base_url and llm_model)")]
    NotConfigured,
    #[error("the LLM provider did not answer within {0} ms")]
    Timeout(u64),
    #[error("the LLM provider refused the request ({status}): {message}")]
    Refused { status: u16, message: String },
    #[error("the LLM provider could not be reached: {0}")]
    Unreachable(String),
    #[error("the LLM provider sent an answer this server cannot read: {0}")]
    BadAnswer(String),
}

pub type LlmFuture<'a> = Pin<Box<dyn Future<Output = Result<Completion, LlmError>> + Send + 'a>>;

pub trait LlmProvider: Send + Sync {
    /// For logs and errors, e.g. `openai:gpt-4o-mini`.
    fn name(&self) -> String;
    fn complete(&self, request: CompletionRequest) -> LlmFuture<'_>;
}

/// What answers when no provider is configured.
pub struct NoProvider;

impl LlmProvider for NoProvider {
    fn name(&self) -> String {
        "none".into()
    }

    fn complete(&self, _: CompletionRequest) -> LlmFuture<'_> {
        Box::pin(async { Err(LlmError::NotConfigured) })
    }
}
