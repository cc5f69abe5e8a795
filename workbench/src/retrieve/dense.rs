//! [`DenseRetriever`]: report 000's retriever — a Sentence-BERT encoder plus a
//! FAISS index over the passage vectors (features `dense` + `faiss`).
//!
//! Scores are cosine similarities of the L2-normalised query and passage
//! vectors, whatever the index metric: an inner-product index returns them
//! directly, and for an L2 index (report 000's `IndexFlatL2`) the squared
//! distance is converted with `cos = 1 − d²/2` (exact for unit vectors), so
//! both rank identically and print comparable scores.
//!
//! Contract choices (see [`Retriever`]):
//! - a query that is empty or only whitespace returns **an empty list** (like
//!   the lexical retrievers; `[CLS] [SEP]` alone carries no meaning), it is not
//!   embedded;
//! - hits are re-sorted by descending score, ties by ascending passage id;
//! - `k` larger than the corpus returns every passage (approximate indexes may
//!   return fewer);
//! - `k == 0` is [`Error::InvalidParam`].
//!
//! Latency (report 000, Figure 4): [`DenseRetriever::retrieve_with_timing`]
//! measures the two parts of a query separately — encoding the question and
//! searching the index.

use super::faiss::{IndexParams, Metric, VectorIndex};
use super::{check_k, top_k, Retriever};
use crate::encode::{BertEncoder, EmbeddingCache};
use crate::{Error, Hit, Passage, Query, Result, Run};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Wall-clock time of one query, by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueryTiming {
    /// Tokenising and encoding the query (zero for an empty query).
    pub encode: Duration,
    /// Searching the index and mapping positions to ids.
    pub search: Duration,
}

impl QueryTiming {
    /// Encoding plus search.
    pub fn total(&self) -> Duration {
        self.encode + self.search
    }
}

/// Sentence-BERT + FAISS dense retriever. See the module docs.
pub struct DenseRetriever {
    encoder: Arc<BertEncoder>,
    index: VectorIndex,
    ids: Vec<String>,
    query_prefix: String,
}

impl std::fmt::Debug for DenseRetriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseRetriever")
            .field("name", &self.name())
            .field("passages", &self.ids.len())
            .finish_non_exhaustive()
    }
}

impl DenseRetriever {
    /// Embed `passages` (through `cache` when given) and index them.
    pub fn build(
        encoder: Arc<BertEncoder>,
        passages: &[Passage],
        params: IndexParams,
        cache: Option<&EmbeddingCache>,
    ) -> Result<Self> {
        if passages.is_empty() {
            return Err(Error::Empty("no passages to index".into()));
        }
        let key = EmbeddingCache::key(&encoder, passages)?;
        let vectors = match cache {
            Some(c) => c.get_or_compute(&encoder, passages)?,
            None => {
                let texts: Vec<&str> = passages.iter().map(|p| p.text.as_str()).collect();
                encoder.embed(&texts)?
            }
        };
        let index = VectorIndex::build(params, encoder.dim(), &vectors)?.with_embedding_key(key);
        Self::from_parts(
            encoder,
            index,
            passages.iter().map(|p| p.id.clone()).collect(),
        )
    }

    /// Assemble from an existing index (e.g. [`VectorIndex::load`]) whose
    /// position `i` holds the vector of `ids[i]`.
    pub fn from_parts(
        encoder: Arc<BertEncoder>,
        index: VectorIndex,
        ids: Vec<String>,
    ) -> Result<Self> {
        if index.len() != ids.len() {
            return Err(Error::param(
                "ids",
                format!("{} ids for an index of {} vectors", ids.len(), index.len()),
            ));
        }
        if index.dim() != encoder.dim() {
            return Err(Error::param(
                "index",
                format!(
                    "index dimension {} differs from the encoder's {}",
                    index.dim(),
                    encoder.dim()
                ),
            ));
        }
        Ok(DenseRetriever {
            encoder,
            index,
            ids,
            query_prefix: String::new(),
        })
    }

    /// Put `prefix` before every query before it is encoded (E5's `"query: "`, a BGE
    /// instruction). Passages get theirs by being built prefixed.
    pub fn with_query_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.query_prefix = prefix.into();
        self
    }

    /// The encoder.
    pub fn encoder(&self) -> &Arc<BertEncoder> {
        &self.encoder
    }

    /// The index.
    pub fn index(&self) -> &VectorIndex {
        &self.index
    }

    /// Passage ids in index order.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    fn to_score(&self, value: f32) -> f32 {
        match self.index.params().metric {
            Metric::InnerProduct => value,
            Metric::L2 => 1.0 - value / 2.0,
        }
    }

    /// Top-`k` hits for already-encoded query vectors (one list per vector).
    pub fn search_vectors(&self, queries: &[Vec<f32>], k: usize) -> Result<Vec<Vec<Hit>>> {
        check_k(k)?;
        // A few extra candidates so that ties at the cut are broken by id, not by FAISS.
        let fetch = k.saturating_add(8).min(self.ids.len().max(1));
        let found = self.index.search(queries, fetch)?;
        found
            .into_iter()
            .map(|list| {
                let hits = list
                    .into_iter()
                    .map(|(pos, v)| Hit::new(self.ids[pos].clone(), self.to_score(v)))
                    .collect();
                top_k(hits, k)
            })
            .collect()
    }

    /// [`retrieve`](Retriever::retrieve), also returning how long encoding and search took.
    pub fn retrieve_with_timing(&self, query: &str, k: usize) -> Result<(Vec<Hit>, QueryTiming)> {
        check_k(k)?;
        if query.trim().is_empty() {
            return Ok((Vec::new(), QueryTiming::default()));
        }
        let t0 = Instant::now();
        let q = self
            .encoder
            .embed(&[format!("{}{query}", self.query_prefix).as_str()])?;
        let t1 = Instant::now();
        let hits = self.search_vectors(&q, k)?.remove(0);
        let t2 = Instant::now();
        Ok((
            hits,
            QueryTiming {
                encode: t1 - t0,
                search: t2 - t1,
            },
        ))
    }
}

impl Retriever for DenseRetriever {
    /// `dense-<model>-<index>-<metric>`, e.g. `dense-all-minilm-l6-v2-flat-ip`.
    fn name(&self) -> String {
        format!(
            "dense-{}-{}",
            self.encoder.name(),
            self.index.params().tag()
        )
    }

    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        Ok(self.retrieve_with_timing(query, k)?.0)
    }

    /// All queries encoded in batches and searched in one FAISS call.
    fn retrieve_all(&self, queries: &[Query], k: usize) -> Result<Run> {
        check_k(k)?;
        let mut run = Run::new();
        let live: Vec<&Query> = queries
            .iter()
            .filter(|q| {
                let empty = q.text.trim().is_empty();
                if empty {
                    run.insert(q.id.clone(), Vec::new());
                }
                !empty
            })
            .collect();
        if live.is_empty() {
            return Ok(run);
        }
        let texts: Vec<String> = live
            .iter()
            .map(|q| format!("{}{}", self.query_prefix, q.text))
            .collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vectors = self.encoder.embed(&texts)?;
        for (q, hits) in live.iter().zip(self.search_vectors(&vectors, k)?) {
            run.insert(q.id.clone(), hits);
        }
        Ok(run)
    }
}
