//! Retrievers: score passages for a query. One file per retriever, one trait.
//!
//! To add a retriever: write `retrieve/<name>.rs` with a type that implements
//! [`Retriever`] and its parameters implementing [`BuildRetriever`], add
//! `pub mod <name>;` here and one line to the list in [`spec`] (see `ARCHITECTURE.md`,
//! "Adding things").
//!
//! | module | concept |
//! |---|---|
//! | [`analyzer`] | tokenise / lowercase / stopwords / stem |
//! | [`index`] | inverted index with save / load |
//! | [`impact`] | term-at-a-time scoring over precomputed impacts, top-k selection |
//! | [`tfidf`] | TF-IDF: raw and length-normalised (report 002), cosine (report 003) |
//! | [`bm25`] | BM25: Robertson, ATIRE (report 002 as printed), Lucene |
//! | [`fusion`] | min-max / z-score hybrid (report 001), RRF (report 002), CombSUM / CombMNZ, [`fusion::Fused`] |
//! | [`control`] | controls: the gold passage ([`control::OracleRetriever`]) and seeded random passages |
//! | [`http`] | a server speaking Search-R1's `/retrieve` API (`kind = "http"`) |
//! | [`conformance`] | the data-driven conformance suite read by `tests/conformance.rs` |
//! | [`spec`] | [`RetrieverSpec`]: a retriever as configured, checked and built |

pub mod analyzer;
pub mod bm25;
pub mod conformance;
pub mod control;
#[cfg(all(feature = "dense", feature = "faiss"))]
pub mod dense;
#[cfg(feature = "faiss")]
pub mod faiss;
pub mod fusion;
pub mod http;
pub mod impact;
pub mod index;
pub mod spec;
pub mod tfidf;

pub use spec::RetrieverSpec;

use crate::{Hit, Query, Result, Run};

/// What a retriever's parameters do: check themselves, and build the retriever.
pub trait BuildRetriever {
    /// Check the parameters before any work; errors name the field.
    fn check(&self) -> Result<()> {
        Ok(())
    }

    /// The retriever over `ctx.passages` (loading, never training).
    fn build(&self, ctx: &crate::build::BuildCtx<'_>) -> Result<std::sync::Arc<dyn Retriever>>;

    /// The model this retriever loads (an asset name or a folder), keyed in a run's
    /// identity; `None` for a retriever without one.
    fn model(&self) -> Option<&str> {
        None
    }

    /// The model, to rewrite (a relative folder made relative to the config's folder).
    fn model_mut(&mut self) -> Option<&mut String> {
        None
    }
}

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

    /// The top-`k` passages for `query`, asked on behalf of the question with id
    /// `question_id`. Retrievers that rank by the text ignore the id (the default: the
    /// same as [`Retriever::retrieve`]); a control that knows each question's gold
    /// passages ([`control::OracleRetriever`]) answers by the id, since two questions may
    /// have the same text.
    fn retrieve_for(&self, question_id: &str, query: &str, k: usize) -> Result<Vec<Hit>> {
        let _ = question_id;
        self.retrieve(query, k)
    }

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
    fn retrieve_for(&self, question_id: &str, query: &str, k: usize) -> Result<Vec<Hit>> {
        (**self).retrieve_for(question_id, query, k)
    }
    fn retrieve_all(&self, queries: &[Query], k: usize) -> Result<Run> {
        (**self).retrieve_all(queries, k)
    }
}

/// Sort hits by descending score, ties by ascending id, and keep the first `k`.
///
/// Scores are compared with `f32::total_cmp` (as [`impact`] does), after turning
/// `-0.0` into `0.0` so that the two zeros tie and fall back to the id.
///
/// Errors: a NaN score ([`crate::Error::InvalidParam`] naming the passage): it has
/// no place in a ranking, and it only arises from corrupt inputs (a NaN embedding
/// or model output), which must not be ranked silently.
pub fn top_k(mut hits: Vec<Hit>, k: usize) -> Result<Vec<Hit>> {
    if let Some(h) = hits.iter().find(|h| h.score.is_nan()) {
        return Err(crate::Error::param(
            "hits",
            format!(
                "passage `{}` has a NaN score, which cannot be ranked (corrupt embeddings or model output?)",
                h.id
            ),
        ));
    }
    hits.sort_by(|a, b| {
        (b.score + 0.0)
            .total_cmp(&(a.score + 0.0))
            .then_with(|| a.id.cmp(&b.id))
    });
    hits.truncate(k);
    Ok(hits)
}

/// Reject `k == 0` with a clear error.
pub fn check_k(k: usize) -> Result<()> {
    if k == 0 {
        return Err(crate::Error::param("k", "must be at least 1"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(hits: &[Hit]) -> Vec<&str> {
        hits.iter().map(|h| h.id.as_str()).collect()
    }

    #[test]
    fn top_k_sorts_by_score_then_ascending_id() {
        let hits = vec![
            Hit::new("c", 1.0),
            Hit::new("b", 2.0),
            Hit::new("z", 0.0),
            Hit::new("a", 1.0),
            Hit::new("y", -0.0),
            Hit::new("n", f32::NEG_INFINITY),
            Hit::new("p", f32::INFINITY),
        ];
        let top = top_k(hits.clone(), 10).unwrap();
        // -0.0 and 0.0 tie, so the id decides (y before z).
        assert_eq!(ids(&top), ["p", "b", "a", "c", "y", "z", "n"]);
        assert_eq!(ids(&top_k(hits, 3).unwrap()), ["p", "b", "a"]);
        assert!(top_k(Vec::new(), 3).unwrap().is_empty());
    }

    #[test]
    fn top_k_rejects_nan_instead_of_ranking_inconsistently() {
        // With `partial_cmp(..).unwrap_or(Equal)` this list came back as
        // [a 1.0, m NaN, x 2.0]: NaN "equals" every score, so the id tie-break made
        // the order cyclic (a < m < x < a) and put 1.0 above 2.0. Now it is an
        // error that names the passage.
        let hits = vec![
            Hit::new("m", f32::NAN),
            Hit::new("a", 1.0),
            Hit::new("x", 2.0),
        ];
        let e = top_k(hits, 3).unwrap_err();
        assert!(
            matches!(e, crate::Error::InvalidParam { name: "hits", .. }),
            "{e}"
        );
        assert!(e.to_string().contains("`m`"), "{e}");
    }
}
