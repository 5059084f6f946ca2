//! The embedded embedding model: a sentence-transformers BERT model (all-MiniLM-L6-v2 by
//! default: 6 layers, 384 dimensions) run in-process on the CPU with candle. Its directory
//! holds `config.json`, `model.safetensors` and `tokenizer.json`, as the model is published.
//! It loads on first use; texts are embedded one at a time on a blocking thread (mean of the
//! token vectors, then normalised, as the model was trained), one call at a time.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use sha2::{Digest, Sha256};
use tokenizers::{Tokenizer, TruncationParams};
use tokio::sync::Semaphore;

use super::LlmError;
use super::embed::{EmbedFuture, Embedder};

/// Tokens of a text read at most: the model's own limit (longer texts are cut).
const MAX_TOKENS: usize = 256;

pub struct MiniLm {
    dir: PathBuf,
    model: String,
    dimensions: usize,
    loaded: Arc<Mutex<Option<Arc<Loaded>>>>,
    turn: Arc<Semaphore>,
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
        // Another model, or other weights in the same place, give another name.
        let mut files = Sha256::new();
        files.update(&config);
        files.update(weights.len().to_le_bytes());
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("model");
        Some(MiniLm {
            dir: dir.to_path_buf(),
            model: format!("{name}:{}", &hex::encode(files.finalize())[..16]),
            dimensions,
            loaded: Arc::default(),
            turn: Arc::new(Semaphore::new(1)),
        })
    }
}

fn unavailable(dir: &Path, what: impl std::fmt::Display) -> LlmError {
    LlmError::Unreachable(format!("embedding model {}: {what}", dir.display()))
}

fn load(dir: &Path, slot: &Mutex<Option<Arc<Loaded>>>) -> Result<Arc<Loaded>, LlmError> {
    let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(loaded) = slot.as_ref() {
        return Ok(loaded.clone());
    }
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
    let loaded = Arc::new(Loaded { model, tokenizer });
    *slot = Some(loaded.clone());
    Ok(loaded)
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
        let (dir, slot, turn) = (self.dir.clone(), self.loaded.clone(), self.turn.clone());
        Box::pin(async move {
            // Waiting holds no thread; one embedding runs at a time, beside the server's work.
            let _turn = turn
                .acquire_owned()
                .await
                .map_err(|_| LlmError::Unreachable("the embedding model is closed".into()))?;
            tokio::task::spawn_blocking(move || {
                let loaded = load(&dir, &slot)?;
                texts.iter().map(|text| loaded.embed(text)).collect()
            })
            .await
            .map_err(|e| LlmError::BadAnswer(format!("embedding task failed: {e}")))?
        })
    }
}
