//! The embedded embedding model: a sentence-transformers BERT model (all-MiniLM-L6-v2 by
//! default: 6 layers, 384 dimensions) run in-process on the CPU with candle. Its directory
//! holds `config.json`, `model.safetensors` and `tokenizer.json`, as the model is published.
//! It loads on first use; texts are embedded one at a time on a blocking thread (mean of the
//! token vectors, then normalised, as the model was trained), one call at a time. At most
//! `MAX_QUEUED` calls wait or run (more are told the model is busy), none waits longer than
//! `MAX_WAIT` for its turn, and a call whose caller is gone stops before its next text.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use sha2::{Digest, Sha256};
use tokenizers::{Tokenizer, TruncationParams};
use tokio::sync::Semaphore;

use super::embed::{EmbedFuture, Embedder};
use super::{CancelOnDrop, LlmError};

/// Tokens of a text read at most: the model's own limit (longer texts are cut).
const MAX_TOKENS: usize = 256;
/// Calls waiting or running at once; more are refused at once.
const MAX_QUEUED: usize = 8;
/// The longest a call waits for its turn.
const MAX_WAIT: Duration = Duration::from_secs(10);
/// How long a model that failed to load is not tried again.
const RETRY_LOAD_AFTER: Duration = Duration::from_secs(60);

pub struct MiniLm {
    dir: PathBuf,
    model: String,
    dimensions: usize,
    slot: Arc<Mutex<Slot>>,
    queue: Arc<Semaphore>,
    turn: Arc<Semaphore>,
}

/// The model once loaded, or when and why it last failed to.
#[derive(Default)]
struct Slot {
    loaded: Option<Arc<Loaded>>,
    failed: Option<(Instant, LlmError)>,
}

struct Loaded {
    model: BertModel,
    tokenizer: Tokenizer,
}

impl MiniLm {
    /// The model in `dir`, when its files are there.
    pub fn open(dir: &Path) -> Option<MiniLm> {
        let config = std::fs::read(dir.join("config.json")).ok()?;
        let weights = std::fs::metadata(dir.join("model.safetensors")).ok()?;
        if !dir.join("tokenizer.json").is_file() {
            return None;
        }
        let dimensions = serde_json::from_slice::<serde_json::Value>(&config).ok()?["hidden_size"].as_u64()? as usize;
        // Another model, or other weights put in the same place, give another name (the
        // weights are known by size and time, not read: that would slow every start).
        let mut files = Sha256::new();
        files.update(&config);
        files.update(weights.len().to_le_bytes());
        if let Ok(changed) = weights
            .modified()
            .map(|t| t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default())
        {
            files.update(changed.as_nanos().to_le_bytes());
        }
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("model");
        Some(MiniLm {
            dir: dir.to_path_buf(),
            model: format!("{name}:{}", &hex::encode(files.finalize())[..16]),
            dimensions,
            slot: Arc::default(),
            queue: Arc::new(Semaphore::new(MAX_QUEUED)),
            turn: Arc::new(Semaphore::new(1)),
        })
    }
}

fn unavailable(dir: &Path, what: impl std::fmt::Display) -> LlmError {
    LlmError::Unreachable(format!("embedding model {}: {what}", dir.display()))
}

fn load(dir: &Path, slot: &Mutex<Slot>) -> Result<Arc<Loaded>, LlmError> {
    let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(loaded) = &slot.loaded {
        return Ok(loaded.clone());
    }
    if let Some((at, error)) = &slot.failed
        && at.elapsed() < RETRY_LOAD_AFTER
    {
        return Err(error.clone());
    }
    let loaded = read(dir).inspect_err(|e| slot.failed = Some((Instant::now(), e.clone())))?;
    slot.loaded = Some(loaded.clone());
    Ok(loaded)
}

fn read(dir: &Path) -> Result<Arc<Loaded>, LlmError> {
    let config: Config =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).map_err(|e| unavailable(dir, e))?)
            .map_err(|e| unavailable(dir, e))?;
    let weights = std::fs::read(dir.join("model.safetensors")).map_err(|e| unavailable(dir, e))?;
    let weights =
        VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu).map_err(|e| unavailable(dir, e))?;
    let model = BertModel::load(weights, &config).map_err(|e| unavailable(dir, e))?;
    let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| unavailable(dir, e))?;
    // The file pads every text to 128 tokens; one text at a time needs no padding.
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: MAX_TOKENS,
            ..Default::default()
        }))
        .map_err(|e| unavailable(dir, e))?;
    Ok(Arc::new(Loaded { model, tokenizer }))
}

impl Loaded {
    fn embed(&self, text: &str) -> Result<Vec<f32>, LlmError> {
        let failed = |e: &dyn std::fmt::Display| LlmError::BadAnswer(format!("embedding model: {e}"));
        let encoding = self.tokenizer.encode(text, true).map_err(|e| failed(&e))?;
        let ids = Tensor::new(encoding.get_ids(), &Device::Cpu)
            .and_then(|t| t.unsqueeze(0))
            .map_err(|e| failed(&e))?;
        let types = ids.zeros_like().map_err(|e| failed(&e))?;
        let tokens = self.model.forward(&ids, &types, None).map_err(|e| failed(&e))?;
        // The mean of the token vectors, as a unit vector.
        let mean = tokens.mean(1).map_err(|e| failed(&e))?;
        let norm = mean
            .sqr()
            .and_then(|s| s.sum_keepdim(1))
            .and_then(|s| s.sqrt())
            .map_err(|e| failed(&e))?;
        let unit = mean.broadcast_div(&norm).map_err(|e| failed(&e))?;
        let mut rows = unit.to_vec2::<f32>().map_err(|e| failed(&e))?;
        rows.pop().ok_or_else(|| failed(&"no vector"))
    }
}

impl Embedder for MiniLm {
    fn model(&self) -> &str {
        &self.model
    }

    fn dimensions(&self) -> usize {
        self.dimensions
    }

    fn embed(&self, texts: Vec<String>) -> EmbedFuture<'_> {
        let (dir, slot, turn) = (self.dir.clone(), self.slot.clone(), self.turn.clone());
        let place = self.queue.clone().try_acquire_owned();
        Box::pin(async move {
            let Ok(place) = place else {
                return Err(LlmError::Busy);
            };
            // Waiting holds no thread; one call runs at a time, beside the server's work.
            let turn = tokio::time::timeout(MAX_WAIT, turn.acquire_owned())
                .await
                .map_err(|_| LlmError::Timeout(MAX_WAIT.as_millis() as u64))?
                .map_err(|_| LlmError::Unreachable("the embedding model is closed".into()))?;
            let cancelled = Arc::new(AtomicBool::new(false));
            let _cancel = CancelOnDrop(cancelled.clone());
            tokio::task::spawn_blocking(move || {
                // The model stays taken until the work really ends, even if its caller has gone.
                let _held = (place, turn);
                let loaded = load(&dir, &slot)?;
                let mut vectors = Vec::with_capacity(texts.len());
                for text in &texts {
                    if cancelled.load(Ordering::Relaxed) {
                        return Err(LlmError::Timeout(0));
                    }
                    vectors.push(loaded.embed(text)?);
                }
                Ok(vectors)
            })
            .await
            .map_err(|e| LlmError::BadAnswer(format!("embedding task failed: {e}")))?
        })
    }
}
