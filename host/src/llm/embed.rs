//! Text embeddings: sentences as unit vectors, so that two texts of like meaning are near
//! (their dot product, the cosine, is high) whatever their words. Knowledge is chosen by
//! them, and plugins granted the model may ask for them.

use std::future::Future;
use std::pin::Pin;

use super::LlmError;

pub type EmbedFuture<'a> = Pin<Box<dyn Future<Output = Result<Vec<Vec<f32>>, LlmError>> + Send + 'a>>;

pub trait Embedder: Send + Sync {
    /// Names the model and its files: vectors of another model are never compared.
    fn model(&self) -> &str;
    /// Dimensions of its vectors.
    fn dimensions(&self) -> usize;
    /// One unit vector per text, in order.
    fn embed(&self, texts: Vec<String>) -> EmbedFuture<'_>;
}

/// The cosine of two unit vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// A vector as stored: its numbers as little-endian 32-bit floats.
pub fn to_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn from_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_comes_back_as_it_was_stored() {
        let vector = vec![0.6, -0.8, 0.0, 1e-7];
        assert_eq!(from_bytes(&to_bytes(&vector)), vector);
        assert!((cosine(&[0.6, 0.8], &[0.6, 0.8]) - 1.0).abs() < 1e-6);
    }
}
