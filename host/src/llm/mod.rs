//! The models. Chat: one trait, so the prompt plugin, chat and tests reach any model the same
//! way, in one answer or streamed; providers are an OpenAI-compatible chat-completions client
//! (OpenAI, vLLM, llama.cpp server, Ollama, ...) and an embedded GGUF model run in-process
//! (the default when no remote provider is configured). Embeddings (`embed`): the in-process
//! sentence model that finds knowledge by meaning and answers plugins' `llm.embed`.

#[cfg(feature = "embedded-model")]
mod bpe;
pub mod embed;
#[cfg(feature = "embedded-model")]
mod embedded;
#[cfg(feature = "embedded-model")]
mod minilm;
mod openai;

pub use embed::Embedder;
#[cfg(feature = "embedded-model")]
pub use embedded::{EmbeddedProvider, GenerationStats};
#[cfg(feature = "embedded-model")]
pub use minilm::MiniLm;
pub use openai::OpenAiProvider;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    /// The result of a tool call, answering `tool_call_id`.
    Tool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub content: String,
    /// Calls the assistant asked for (assistant messages only).
    pub tool_calls: Vec<ToolCall>,
    /// The call a tool message answers.
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Message {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    pub fn tool_result(call_id: &str, content: impl Into<String>) -> Message {
        Message {
            role: Role::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.to_string()),
        }
    }
}

/// A function the model may call: a name, what it does, and a JSON Schema of its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them (JSON text, possibly malformed).
    pub arguments: String,
}

#[derive(Debug, Clone, Default)]
pub struct CompletionRequest {
    pub messages: Vec<Message>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    /// Offered functions; empty means the model must answer in text.
    pub tools: Vec<ToolSpec>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Completion {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    /// Tokens read and written, when the provider says.
    pub usage: Option<Usage>,
    /// The answer stopped at its token limit (OpenAI's `finish_reason: "length"`).
    pub cut_short: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("no LLM provider is configured on this server (set llm_base_url and llm_model, or embedded_model_path)")]
    NotConfigured,
    #[error("the LLM provider did not answer within {0} ms")]
    Timeout(u64),
    /// The embedded model has as many generations waiting as it takes.
    #[error("the embedded model is busy with other generations; try again shortly")]
    Busy,
    #[error("the LLM provider refused the request ({status}): {message}")]
    Refused { status: u16, message: String },
    /// The provider is limiting this server's requests (HTTP 429): worth asking again after
    /// the time it named.
    #[error("the LLM provider is limiting this server's requests: {message}")]
    RateLimited { retry_after_secs: u64, message: String },
    #[error("the LLM provider could not be reached: {0}")]
    Unreachable(String),
    #[error("the LLM provider sent an answer this server cannot read: {0}")]
    BadAnswer(String),
}

impl LlmError {
    /// What a plugin or a chat's user may be told: the kind of failure, never the
    /// provider's own words or address (they can carry the operator's account details).
    pub fn public_text(&self) -> String {
        match self {
            LlmError::NotConfigured | LlmError::Timeout(_) | LlmError::Busy => self.to_string(),
            LlmError::Refused { status, .. } => {
                format!("the language model provider refused the request (HTTP {status})")
            }
            LlmError::RateLimited { retry_after_secs, .. } => format!(
                "the language model provider is limiting this server's requests; try again in {retry_after_secs} s"
            ),
            LlmError::Unreachable(_) => "the language model provider could not be reached".into(),
            LlmError::BadAnswer(_) => "the language model provider sent an answer this server cannot read".into(),
        }
    }
}

pub type LlmFuture<'a> = Pin<Box<dyn Future<Output = Result<Completion, LlmError>> + Send + 'a>>;

/// Where a streaming provider hands each piece of the answer's text as it is written. It
/// answers false once nobody listens any more; the provider then stops generating.
pub type TextSink = Arc<dyn Fn(&str) -> bool + Send + Sync>;

pub trait LlmProvider: Send + Sync {
    /// For logs and errors, e.g. `openai:gpt-4o-mini`.
    fn name(&self) -> String;
    fn complete(&self, request: CompletionRequest) -> LlmFuture<'_>;

    /// Whether a completion asked now could start, as far as this server knows without
    /// asking the provider: none configured, or an embedded model with no place left, is
    /// not. A paid message is refused on it before anyone pays.
    fn ready(&self) -> Result<(), LlmError> {
        Ok(())
    }

    /// `complete`, handing the text to `text` as it is generated. The whole completion
    /// (tool calls and usage included) is still the result. A provider that cannot stream
    /// hands the text over in one piece.
    fn stream(&self, request: CompletionRequest, text: TextSink) -> LlmFuture<'_> {
        Box::pin(async move {
            let completion = self.complete(request).await?;
            if !completion.content.is_empty() {
                text(&completion.content);
            }
            Ok(completion)
        })
    }
}

/// A provider whose calls are measured (duration, outcome, tokens) when metrics are on.
pub struct Measured(pub Arc<dyn LlmProvider>);

impl Measured {
    async fn measure(&self, call: LlmFuture<'_>) -> Result<Completion, LlmError> {
        use tracing::Instrument;
        let started = std::time::Instant::now();
        let span = crate::telemetry::traces::part_span!("llm", "otel.kind" = "client", "otel.name" = "chat");
        let result = call.instrument(span).await;
        if let Some(metrics) = crate::telemetry::metrics::metrics() {
            let outcome = match &result {
                Ok(_) => "ok",
                Err(LlmError::Timeout(_)) => "timeout",
                Err(LlmError::Busy) => "busy",
                Err(LlmError::NotConfigured) => "not_configured",
                Err(_) => "failed",
            };
            let usage = result.as_ref().ok().and_then(|c| c.usage).unwrap_or_default();
            metrics.llm_call(
                outcome,
                started.elapsed().as_secs_f64(),
                usage.input_tokens,
                usage.output_tokens,
            );
        }
        result
    }
}

impl LlmProvider for Measured {
    fn name(&self) -> String {
        self.0.name()
    }

    fn ready(&self) -> Result<(), LlmError> {
        self.0.ready()
    }

    fn complete(&self, request: CompletionRequest) -> LlmFuture<'_> {
        Box::pin(self.measure(self.0.complete(request)))
    }

    fn stream(&self, request: CompletionRequest, text: TextSink) -> LlmFuture<'_> {
        Box::pin(self.measure(self.0.stream(request, text)))
    }
}

/// Tells work running on a blocking thread to stop when its caller's future is dropped.
#[cfg(feature = "embedded-model")]
struct CancelOnDrop(Arc<std::sync::atomic::AtomicBool>);

#[cfg(feature = "embedded-model")]
impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
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

    fn ready(&self) -> Result<(), LlmError> {
        Err(LlmError::NotConfigured)
    }
}
