//! Dense encoders (feature `dense`): text → vectors with candle, and an on-disk
//! cache of passage embeddings.
//!
//! | module | concept |
//! |---|---|
//! | [`bert`] | [`BertEncoder`]: a sentence-transformers BERT checkpoint (all-MiniLM-L6-v2) — mean-pooled sentence vectors and per-token vectors |
//! | [`fast_bert`] | the BERT forward pass used by the encoder, fused and padding-free for CPU throughput |
//! | [`cache`] | [`EmbeddingCache`]: passage embeddings under `data/cache/embeddings/`, keyed by model, parameters and passages |
//!
//! ```no_run
//! # fn main() -> workbench::Result<()> {
//! use workbench::assets::Assets;
//! use workbench::encode::{BertEncoder, EncoderParams};
//! let assets = Assets::load()?;
//! let encoder = BertEncoder::load(&assets, "all-minilm-l6-v2", EncoderParams::default())?;
//! let vectors = encoder.embed(&["Who wrote Hamlet?", "Hamlet is a tragedy by Shakespeare."])?;
//! assert_eq!(vectors[0].len(), encoder.dim());
//! # Ok(()) }
//! ```

pub mod bert;
pub mod cache;
pub mod fast_bert;
pub mod trainable;

pub use bert::{colbert_ids, Backend, BertConfig, BertEncoder, EncoderParams, TokenEmbeddings};
pub use cache::{CacheStatus, EmbeddingCache};

/// Map a candle error to the crate error, naming the model file and what was being done.
pub(crate) fn candle_err_at(
    path: &std::path::Path,
    what: &str,
    e: candle_core::Error,
) -> crate::Error {
    crate::Error::bad_input(path, format!("{what}: {e}"))
}

/// Dot product of two equal-length vectors.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// L2-normalise a vector in place (torch `F.normalize` semantics: divide by
/// `max(‖v‖, 1e-12)`, so a zero vector stays zero).
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    for x in v {
        *x /= norm;
    }
}
