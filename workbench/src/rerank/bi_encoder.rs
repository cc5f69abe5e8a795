//! Bi-encoder re-ranking: cosine between the query's and each candidate's sentence vector
//! ([`BertEncoder::embed`]: mean pooling, L2 normalisation, so the dot product is the
//! cosine).
//!
//! Useful behind a lexical first stage (BM25 top-`depth` → cosine), and as the
//! like-for-like baseline for the late-interaction and cross-encoder re-rankers.
//! Candidates are embedded on each call (no cache): at re-ranking depths of 10–100 that is
//! cheap next to a cross-encoder.

use super::{finish, resolve_candidates, PassageLookup, Reranker};
use crate::encode::BertEncoder;
use crate::{Hit, Result};
use std::sync::Arc;

/// Re-rank by the cosine of sentence vectors. Implements [`Reranker`].
pub struct BiEncoderReranker {
    encoder: Arc<BertEncoder>,
}

impl BiEncoderReranker {
    /// Wrap an encoder (shared, e.g. with a dense first stage).
    pub fn new(encoder: Arc<BertEncoder>) -> Self {
        BiEncoderReranker { encoder }
    }

    /// Cosine of `query` with each text, in order.
    pub fn scores(&self, query: &str, texts: &[&str]) -> Result<Vec<f32>> {
        let mut all = Vec::with_capacity(texts.len() + 1);
        all.push(query);
        all.extend_from_slice(texts);
        let vectors = self.encoder.embed(&all)?;
        // Explicit cosine, so an encoder with `normalize: false` still gives cosines.
        let norm = |v: &[f32]| crate::encode::dot(v, v).sqrt().max(1e-12);
        let q = &vectors[0];
        let nq = norm(q);
        Ok(vectors[1..]
            .iter()
            .map(|v| crate::encode::dot(q, v) / (nq * norm(v)))
            .collect())
    }
}

impl Reranker for BiEncoderReranker {
    /// `biencoder-{asset}-len{max_length}`, e.g. `biencoder-all-minilm-l6-v2-len256`.
    fn name(&self) -> String {
        format!(
            "biencoder-{}-len{}",
            self.encoder.name(),
            self.encoder.params().max_length
        )
    }

    fn rerank(
        &self,
        query: &str,
        candidates: &[Hit],
        passages: &PassageLookup,
        k: usize,
    ) -> Result<Vec<Hit>> {
        let cands = resolve_candidates(candidates, passages, k)?;
        if cands.is_empty() {
            return Ok(Vec::new());
        }
        let texts: Vec<&str> = cands.iter().map(|c| c.text).collect();
        let scores = self.scores(query, &texts)?;
        finish(&cands, &scores, k)
    }
}
