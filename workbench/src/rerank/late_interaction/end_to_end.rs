//! End-to-end mode (feature `faiss`): a token-level FAISS index over every passage token
//! ([`TokenIndex`]) and the retriever on top of it ([`MaxSimEndToEnd`]).

use super::maxsim::whole_rows;
use super::rerank::check_store;
use super::{LateInteraction, TokenStore};
use crate::retrieve::faiss::{IndexParams, VectorIndex};
use crate::retrieve::{check_k, top_k, Retriever};
use crate::{Error, Hit, Passage, Result};
use std::path::Path;
use std::sync::Arc;

/// Vectors added to FAISS per call while building (bounds the temporary `f32` copy).
const ADD_CHUNK: usize = 16_384;

/// A token-level FAISS index over every vector of a [`TokenStore`], for end-to-end
/// MaxSim retrieval. Exact inner product ([`IndexParams::flat_ip`]) by default; any
/// inner-product kind (e.g. HNSW) through [`TokenIndex::build_with`].
pub struct TokenIndex {
    store: TokenStore,
    index: VectorIndex,
}

impl TokenIndex {
    /// Index every token vector of `store` exactly (flat inner product).
    pub fn build(store: TokenStore) -> Result<Self> {
        Self::build_with(store, IndexParams::flat_ip())
    }

    /// Index with explicit FAISS parameters. Token vectors are added as stored
    /// (`f16` widened to `f32`), so index similarities equal [`TokenStore::score`]'s.
    pub fn build_with(store: TokenStore, params: IndexParams) -> Result<Self> {
        if params.metric != crate::retrieve::faiss::Metric::InnerProduct {
            return Err(Error::param(
                "metric",
                "MaxSim needs the inner product (cosine on normalised vectors)",
            ));
        }
        let dim = store.dim();
        let mut index = VectorIndex::new(params, dim)?;
        let all = store.all_vectors();
        let mut rows: Vec<Vec<f32>> = Vec::new();
        let mut start = 0;
        while start < store.n_vectors() {
            let end = (start + ADD_CHUNK).min(store.n_vectors());
            rows.clear();
            rows.extend(
                all[start * dim..end * dim]
                    .chunks_exact(dim)
                    .map(|r| r.iter().map(|x| x.to_f32()).collect::<Vec<f32>>()),
            );
            index.add(&rows)?;
            start = end;
        }
        Ok(TokenIndex { store, index })
    }

    /// The store behind the index.
    pub fn store(&self) -> &TokenStore {
        &self.store
    }

    /// Candidate passages (store positions, ascending) for a query matrix
    /// (`|q| × dim`, row-major): the owners of each query token's `k_hat` nearest
    /// passage tokens — at most `k_hat · |q|` passages.
    pub fn candidates(&self, q: &[f32], k_hat: usize) -> Result<Vec<usize>> {
        if k_hat == 0 {
            return Err(Error::param("k_hat", "must be at least 1"));
        }
        let dim = self.store.dim();
        if q.is_empty() || !whole_rows(q.len(), dim) {
            return Err(Error::param(
                "query",
                format!(
                    "{} values is not a non-empty multiple of dim {dim}",
                    q.len()
                ),
            ));
        }
        let queries: Vec<Vec<f32>> = q.chunks_exact(dim).map(<[f32]>::to_vec).collect();
        let mut seen = vec![false; self.store.len()];
        for (row, _) in self.index.search(&queries, k_hat)?.into_iter().flatten() {
            seen[self.store.passage_of_row(row)] = true;
        }
        Ok((0..seen.len()).filter(|&i| seen[i]).collect())
    }

    /// End-to-end search: candidates from the `k_hat` nearest tokens of each query
    /// token, exact mean-MaxSim on those, the best `k`.
    pub fn search(&self, q: &[f32], k: usize, k_hat: usize) -> Result<Vec<Hit>> {
        check_k(k)?;
        let hits = self
            .candidates(q, k_hat)?
            .into_iter()
            .map(|i| Hit::new(self.store.ids()[i].clone(), self.store.score(q, i)))
            .collect();
        top_k(hits, k)
    }
}

/// End-to-end late-interaction retrieval (report 003 §3.2.3): `k̂ = ⌈k/λ⌉` nearest
/// passage tokens per query token, then exact mean-MaxSim on their passages.
pub struct MaxSimEndToEnd {
    model: Arc<LateInteraction>,
    index: TokenIndex,
    lambda: f32,
}

impl MaxSimEndToEnd {
    /// Default λ = 2: report 003's base and best setting, `k̂ = k/2` (Figure 6).
    pub const DEFAULT_LAMBDA: f32 = 2.0;

    /// Build over passages with an exact token index, reusing the store at
    /// `store_path` when its key matches (else building and saving it there).
    pub fn build(
        model: Arc<LateInteraction>,
        passages: &[Passage],
        store_path: Option<&Path>,
    ) -> Result<Self> {
        let store = match store_path {
            Some(p) => model.load_or_build_store(passages, p)?,
            None => model.build_store(passages)?,
        };
        Self::from_index(model, TokenIndex::build(store)?)
    }

    /// Wrap an existing token index (its store must come from the same encoder).
    pub fn from_index(model: Arc<LateInteraction>, index: TokenIndex) -> Result<Self> {
        check_store(&model, index.store())?;
        Ok(MaxSimEndToEnd {
            model,
            index,
            lambda: Self::DEFAULT_LAMBDA,
        })
    }

    /// Set λ (`k̂ = ⌈k/λ⌉`); must be positive and finite.
    pub fn with_lambda(mut self, lambda: f32) -> Result<Self> {
        if !(lambda.is_finite() && lambda > 0.0) {
            return Err(Error::param("lambda", format!("{lambda} is not positive")));
        }
        self.lambda = lambda;
        Ok(self)
    }

    /// `k̂` for a given `k`: `⌈k/λ⌉`, at least 1.
    pub fn k_hat(&self, k: usize) -> usize {
        ((k as f64 / self.lambda as f64).ceil() as usize).max(1)
    }

    /// The token index.
    pub fn index(&self) -> &TokenIndex {
        &self.index
    }
}

impl Retriever for MaxSimEndToEnd {
    /// `maxsim-e2e-minilm-raw384-khat_k_over_2` (λ = 2).
    fn name(&self) -> String {
        format!(
            "maxsim-e2e-{}-khat_k_over_{}",
            self.model.label(),
            self.lambda
        )
    }

    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        check_k(k)?;
        let q = self.model.encode_query(query)?;
        self.index.search(&q.vectors, k, self.k_hat(k))
    }
}
