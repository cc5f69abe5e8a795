//! Retrievers: score passages for a query. One file per retriever, one trait.
//!
//! To add a retriever: write `retrieve/<name>.rs` with a type that implements
//! [`Retriever`], add `pub mod <name>;` here.
//!
//! | module | concept |
//! |---|---|
//! | [`analyzer`] | tokenise / lowercase / stopwords / stem |
//! | [`index`] | inverted index with save / load |
//! | [`impact`] | term-at-a-time scoring over precomputed impacts, top-k selection |
//! | [`tfidf`] | TF-IDF: raw and length-normalised (report 002), cosine (report 003) |
//! | [`bm25`] | BM25: Robertson, ATIRE (report 002 as printed), Lucene |
//! | [`fusion`] | min-max / z-score hybrid (report 001), RRF (report 002), CombSUM / CombMNZ, [`fusion::Fused`] |
//! | [`conformance`] | the data-driven conformance suite read by `tests/conformance.rs` |

pub mod analyzer;
pub mod bm25;
pub mod conformance;
#[cfg(all(feature = "dense", feature = "faiss"))]
pub mod dense;
#[cfg(feature = "faiss")]
pub mod faiss;
pub mod fusion;
pub mod impact;
pub mod index;
pub mod tfidf;

use crate::{Hit, Query, Result, Run};

/// A built index that ranks passages for a query.
///
/// Contract (checked by `tests/conformance.rs` for every implementation):
/// - hits are sorted by descending score, ties broken by ascending id;
/// - `k == 0` is an [`crate::Error::InvalidParam`] error;
/// - `k` larger than the corpus returns every scoreable passage, never an error;
/// - an empty (or all-stopword) query returns an empty list for lexical retrievers.
pub trait Retriever: Send + Sync {
    /// A name that carries the hyper-parameters, e.g. `bm25-k1_0.9-b_0.4`.
    fn name(&self) -> String;

    /// The top-`k` passages for one query text.
    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>>;

    /// The top-`k` passages for each query, as a run.
    fn retrieve_all(&self, queries: &[Query], k: usize) -> Result<Run> {
        let mut run = Run::new();
        for q in queries {
            run.insert(q.id.clone(), self.retrieve(&q.text, k)?);
        }
        Ok(run)
    }
}

/// A shared index is a retriever too, so one built index can serve alone and
/// inside fusions and re-rankers at the same time.
impl<R: Retriever + ?Sized> Retriever for std::sync::Arc<R> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        (**self).retrieve(query, k)
    }
    fn retrieve_all(&self, queries: &[Query], k: usize) -> Result<Run> {
        (**self).retrieve_all(queries, k)
    }
}

/// Sort hits by descending score, ties by ascending id, and keep the first `k`.
pub fn top_k(mut hits: Vec<Hit>, k: usize) -> Vec<Hit> {
    hits.sort_by(|a, b| {
        b.score
            .partial_cmp(&a.score)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.id.cmp(&b.id))
    });
    hits.truncate(k);
    hits
}

/// Reject `k == 0` with a clear error.
pub fn check_k(k: usize) -> Result<()> {
    if k == 0 {
        return Err(crate::Error::param("k", "must be at least 1"));
    }
    Ok(())
}
