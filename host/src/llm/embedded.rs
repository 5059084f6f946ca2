//! The embedded provider: a small GGUF chat model (SmolLM2-135M-Instruct by default) run
//! in-process on the CPU with candle, so `demo` chats offline. The model loads on first use;
//! one generation runs at a time (on a blocking thread), within the request's deadline.
//! Waiting callers hold no thread, at most `MAX_QUEUED` wait or run (more are told the
//! model is busy), and a generation whose caller is gone (a plugin killed at its deadline,
//! a client that hung up) stops at its next token.
//! Small models cannot call functions reliably, so this provider answers in text only.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::generation::LogitsProcessor;
use candle_transformers::models::quantized_llama::ModelWeights;

use super::bpe::Bpe;
use super::{CancelOnDrop, Completion, CompletionRequest, LlmError, LlmFuture, LlmProvider, Role, TextSink};
use crate::telemetry::metrics::metrics;

pub struct EmbeddedProvider {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    max_tokens: u32,
    timeout: Duration,
    loaded: Mutex<Option<Arc<Mutex<Loaded>>>>,
    /// Places for generations waiting or running.
    queue: Arc<Semaphore>,
    /// The one generation running.
    turn: Arc<Semaphore>,
}

/// Generations waiting or running at once; more are refused at once.
const MAX_QUEUED: usize = 4;

/// A generation's place in the queue, counted in the metrics while it is held.
struct Place(#[allow(dead_code)] tokio::sync::OwnedSemaphorePermit);

impl Place {
    fn take(queue: &Arc<Semaphore>) -> Option<Place> {
        let permit = queue.clone().try_acquire_owned().ok()?;
        if let Some(m) = metrics() {
            m.llm_embedded_generations.inc();
        }
        Some(Place(permit))
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some(m) = metrics() {
            m.llm_embedded_generations.dec();
        }
    }
}

/// Cuts the bytes of tokens, as they come, into text to stream: only whole characters,
/// and no whitespace at either end, so the pieces join into exactly the trimmed answer.
#[derive(Default)]
struct Pieces {
    pending: Vec<u8>,
    /// Whitespace held back until text follows it.
    held: String,
    started: bool,
}

impl Pieces {
    fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut piece = String::new();
        loop {
            let error = match std::str::from_utf8(&self.pending) {
                Ok(text) => {
                    piece.push_str(text);
                    self.pending.clear();
                    break;
                }
                Err(error) => error,
            };
            let valid = error.valid_up_to();
            piece.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
            match error.error_len() {
                // A character cut at the end waits for its next token.
                None => {
                    self.pending.drain(..valid);
                    break;
                }
                // A broken one is shown as such, as the whole answer's decoding shows it.
                Some(broken) => {
                    piece.push(char::REPLACEMENT_CHARACTER);
                    self.pending.drain(..valid + broken);
                }
            }
        }
        let mut text = std::mem::take(&mut self.held) + &piece;
        if !self.started {
            text = text.trim_start().to_string();
            self.started = !text.is_empty();
        }
        let kept = text.trim_end().len();
        self.held = text.split_off(kept);
        text
    }
}

struct Loaded {
    model: ModelWeights,
    bpe: Bpe,
    end_of_turn: u32,
    end_of_text: Option<u32>,
}

/// Figures from one generation, for logs and benchmarks.
#[derive(Debug, Clone, Copy, Default)]
pub struct GenerationStats {
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    pub time_to_first_token: Duration,
    pub total: Duration,
}

impl EmbeddedProvider {
    pub fn new(path: &Path, max_tokens: u32, timeout: Duration) -> EmbeddedProvider {
        let inner = Inner {
            path: path.to_path_buf(),
            max_tokens,
            timeout,
            loaded: Mutex::new(None),
            queue: Arc::new(Semaphore::new(MAX_QUEUED)),
            turn: Arc::new(Semaphore::new(1)),
        };
        EmbeddedProvider { inner: Arc::new(inner) }
    }

    /// Generates a reply; blocking (run it off the async runtime).
    pub fn generate(&self, request: &CompletionRequest) -> Result<(String, GenerationStats), LlmError> {
        let deadline = Instant::now() + self.inner.timeout;
        self.inner.generate(request, deadline, &AtomicBool::new(false), None)
    }
}

impl Inner {
    fn load(&self) -> Result<Arc<Mutex<Loaded>>, LlmError> {
        let mut slot = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(loaded) = slot.as_ref() {
            return Ok(loaded.clone());
        }
        let unavailable =
            |what: String| LlmError::Unreachable(format!("embedded model {}: {what}", self.path.display()));
        let mut file = std::fs::File::open(&self.path).map_err(|e| unavailable(e.to_string()))?;
        let content = gguf_file::Content::read(&mut file).map_err(|e| unavailable(e.to_string()))?;
        let strings = |key: &str| -> Result<Vec<String>, LlmError> {
            let values = content
                .metadata
                .get(key)
                .ok_or_else(|| unavailable(format!("no {key}")))?
                .to_vec()
                .map_err(|e| unavailable(e.to_string()))?;
            values
                .iter()
                .map(|v| v.to_string().cloned().map_err(|e| unavailable(e.to_string())))
                .collect()
        };
        let bpe = Bpe::new(strings("tokenizer.ggml.tokens")?, &strings("tokenizer.ggml.merges")?);
        let end_of_turn = bpe
            .token_id("<|im_end|>")
            .ok_or_else(|| unavailable("not a ChatML model (no <|im_end|>)".into()))?;
        let end_of_text = bpe.token_id("<|endoftext|>");
        let model =
            ModelWeights::from_gguf(content, &mut file, &Device::Cpu).map_err(|e| unavailable(e.to_string()))?;
        let loaded = Arc::new(Mutex::new(Loaded {
            model,
            bpe,
            end_of_turn,
            end_of_text,
        }));
        *slot = Some(loaded.clone());
        Ok(loaded)
    }

    /// ChatML, as SmolLM2's template writes it.
    fn prompt(request: &CompletionRequest) -> String {
        let mut text = String::new();
        for message in &request.messages {
            let role = match message.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
                // Tool results never reach this provider (it offers no tools); keep them readable.
                Role::Tool => "user",
            };
            text.push_str(&format!("<|im_start|>{role}\n{}<|im_end|>\n", message.content.trim()));
        }
        text.push_str("<|im_start|>assistant\n");
        text
    }

    fn generate(
        &self,
        request: &CompletionRequest,
        deadline: Instant,
        cancelled: &AtomicBool,
        text: Option<&TextSink>,
    ) -> Result<(String, GenerationStats), LlmError> {
        let started = Instant::now();
        let loaded = self.load()?;
        let mut guard = loaded.lock().unwrap_or_else(|p| p.into_inner());
        let loaded = &mut *guard;
        let failed = |e: candle_core::Error| LlmError::BadAnswer(format!("embedded model: {e}"));
        let prompt = loaded.bpe.encode(&Self::prompt(request));
        let max_new = request.max_tokens.unwrap_or(self.max_tokens).min(self.max_tokens) as usize;
        // Temperature 0 asks for the likeliest token every time; none given, a little variety.
        let temperature = match request.temperature {
            Some(t) if t <= 0.0 => None,
            Some(t) => Some(f64::from(t)),
            None => Some(0.3),
        };
        let mut sampler = LogitsProcessor::new(42, temperature, Some(0.9));
        let mut stats = GenerationStats {
            prompt_tokens: prompt.len(),
            ..Default::default()
        };
        let mut generated: Vec<u32> = Vec::new();
        let mut input = prompt.clone();
        let mut position = 0;
        let mut pieces = Pieces::default();
        for step in 0..max_new {
            if Instant::now() > deadline || cancelled.load(Ordering::Relaxed) {
                let reason = if cancelled.load(Ordering::Relaxed) {
                    "caller_gone"
                } else {
                    "deadline"
                };
                if let Some(m) = metrics() {
                    m.llm_embedded_stopped(reason);
                }
                return Err(LlmError::Timeout(self.timeout.as_millis() as u64));
            }
            let tokens = Tensor::new(input.as_slice(), &Device::Cpu)
                .and_then(|t| t.unsqueeze(0))
                .map_err(failed)?;
            let logits = loaded
                .model
                .forward(&tokens, position)
                .and_then(|l| l.squeeze(0))
                .map_err(failed)?;
            position += input.len();
            // A light repeat penalty keeps a small model from looping.
            let recent = &generated[generated.len().saturating_sub(64)..];
            let logits = candle_transformers::utils::apply_repeat_penalty(&logits, 1.1, recent).map_err(failed)?;
            let next = sampler.sample(&logits).map_err(failed)?;
            if step == 0 {
                stats.time_to_first_token = started.elapsed();
            }
            if next == loaded.end_of_turn || Some(next) == loaded.end_of_text {
                break;
            }
            generated.push(next);
            input = vec![next];
            if let Some(text) = text {
                let piece = pieces.push(&loaded.bpe.decode_bytes(&[next]));
                // Nobody reads the stream any more: stop at the next token.
                if !piece.is_empty() && !text(&piece) {
                    cancelled.store(true, Ordering::Relaxed);
                }
            }
        }
        stats.generated_tokens = generated.len();
        stats.total = started.elapsed();
        Ok((loaded.bpe.decode(&generated).trim().to_string(), stats))
    }
}

impl LlmProvider for EmbeddedProvider {
    fn name(&self) -> String {
        format!(
            "embedded:{}",
            self.inner.path.file_name().and_then(|n| n.to_str()).unwrap_or("model")
        )
    }

    fn complete(&self, request: CompletionRequest) -> LlmFuture<'_> {
        Box::pin(self.inner.clone().run(request, None))
    }

    fn stream(&self, request: CompletionRequest, text: TextSink) -> LlmFuture<'_> {
        Box::pin(self.inner.clone().run(request, Some(text)))
    }

    fn ready(&self) -> Result<(), LlmError> {
        match self.inner.queue.available_permits() {
            0 => Err(LlmError::Busy),
            _ => Ok(()),
        }
    }
}

impl Inner {
    /// Takes a place in the queue, waits for the model, and generates on a blocking thread.
    async fn run(self: Arc<Inner>, request: CompletionRequest, text: Option<TextSink>) -> Result<Completion, LlmError> {
        let deadline = Instant::now() + self.timeout;
        let timed_out = || LlmError::Timeout(self.timeout.as_millis() as u64);
        let Some(place) = Place::take(&self.queue) else {
            return Err(LlmError::Busy);
        };
        // Waiting for the model holds no thread, and counts against the deadline.
        let turn = tokio::time::timeout_at(deadline.into(), self.turn.clone().acquire_owned())
            .await
            .map_err(|_| timed_out())?
            .map_err(|_| timed_out())?;
        let cancelled = Arc::new(AtomicBool::new(false));
        let _cancel = CancelOnDrop(cancelled.clone());
        let request_limit = request.max_tokens.unwrap_or(self.max_tokens);
        let generating = self.clone();
        let (content, stats) = tokio::task::spawn_blocking(move || {
            // The model stays taken until the generation really ends, even if its
            // caller has gone.
            let _held = (place, turn);
            generating.generate(&request, deadline, &cancelled, text.as_ref())
        })
        .await
        .map_err(|e| LlmError::BadAnswer(format!("embedded model task failed: {e}")))??;
        tracing::debug!(
            prompt_tokens = stats.prompt_tokens,
            generated = stats.generated_tokens,
            ttft_ms = stats.time_to_first_token.as_millis() as u64,
            total_ms = stats.total.as_millis() as u64,
            "embedded generation"
        );
        if content.is_empty() {
            return Err(LlmError::BadAnswer("the embedded model produced no text".into()));
        }
        let limit = request_limit.min(self.max_tokens) as usize;
        Ok(Completion {
            content,
            tool_calls: Vec::new(),
            usage: Some(super::Usage {
                input_tokens: stats.prompt_tokens as u64,
                output_tokens: stats.generated_tokens as u64,
            }),
            cut_short: stats.generated_tokens >= limit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Pieces;

    #[test]
    fn streamed_pieces_are_whole_characters_and_join_into_the_trimmed_answer() {
        let answer = "  Olá, café ☕ \n\n";
        let mut pieces = Pieces::default();
        // One byte at a time: every character cut, as a token may cut it.
        let streamed: Vec<String> = answer.as_bytes().iter().map(|b| pieces.push(&[*b])).collect();
        assert!(streamed.iter().all(|p| !p.contains('\u{FFFD}')), "{streamed:?}");
        assert_eq!(streamed.concat(), answer.trim());
        assert!(
            streamed.iter().any(|p| p == "á"),
            "a character is sent once it is whole"
        );
        // A broken byte, then a character cut in two: both as the whole answer decodes them.
        let bytes = [b"ok ".as_slice(), &[0xff], "é".as_bytes(), b" end"].concat();
        let mut pieces = Pieces::default();
        let streamed: String = [&bytes[..4], &bytes[4..5], &bytes[5..]]
            .iter()
            .map(|b| pieces.push(b))
            .collect();
        assert_eq!(streamed, String::from_utf8_lossy(&bytes));
    }
}
