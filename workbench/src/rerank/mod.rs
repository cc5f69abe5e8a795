//! Re-rankers: re-score a short first-stage candidate list with a stronger (slower) model.
//!
//! The pipeline of report 004: a cheap first stage (cosine over bi-encoder vectors, BM25, …)
//! returns the top 10, a cross-encoder re-scores those 10 query–passage pairs, and the best
//! 3 go to the reader. [`RerankedRetriever`] packages exactly that: it wraps any
//! [`Retriever`] with a candidate depth and a [`Reranker`], and is itself a [`Retriever`].
//!
//! | module | scorer | feature |
//! |---|---|---|
//! | (this module) | the [`Reranker`] trait, [`PassageLookup`], [`RerankedRetriever`], [`FnReranker`] | – |
//! | `bi_encoder` | cosine of mean-pooled sentence vectors (`BertEncoder::embed`) | `dense` |
//! | `late_interaction` | ColBERT-style MaxSim over token vectors (report 003): re-rank and end-to-end modes, token relevance `R_abs` / `R_acc` / KDE | `dense` (+ `faiss` for end-to-end) |
//! | `cross_encoder` | a Hugging Face `BertForSequenceClassification` checkpoint scoring `[CLS] q [SEP] p [SEP]` (report 004) | `dense` |
//!
//! ## Contract
//!
//! Every [`Reranker`] (checked in `tests/rerank.rs`):
//! - returns at most `k` of the given candidates, re-scored, sorted by descending score with
//!   ties broken by ascending id (the [`Retriever`] order);
//! - `k == 0` is an [`Error::InvalidParam`] error;
//! - `k` larger than the number of candidates returns every candidate, never an error;
//! - a candidate id that the [`PassageLookup`] does not hold is an error naming the id;
//! - a candidate id listed twice is scored once (the first occurrence counts);
//! - an empty candidate list gives an empty result.
//!
//! The first-stage scores are ignored: only the re-ranker's score is returned.
//!
//! ```
//! use workbench::rerank::{FnReranker, PassageLookup, Reranker};
//! use workbench::Hit;
//! # fn main() -> workbench::Result<()> {
//! let passages = PassageLookup::from_pairs([("a", "short"), ("b", "a longer passage")])?;
//! let by_length = FnReranker::new("length", |_q: &str, p: &str| p.len() as f32);
//! let hits = by_length.rerank("q", &[Hit::new("a", 9.0), Hit::new("b", 1.0)], &passages, 1)?;
//! assert_eq!(hits[0].id, "b");
//! # Ok(()) }
//! ```

#[cfg(feature = "dense")]
pub mod bi_encoder;
#[cfg(feature = "dense")]
pub mod cross_encoder;
#[cfg(feature = "dense")]
pub mod late_interaction;
pub mod spec;

pub use spec::RerankerSpec;

use crate::retrieve::{check_k, top_k, Retriever};
use crate::{Error, Hit, Passage, Result};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Passage id → the text a re-ranker reads.
///
/// A plain map, built once per corpus and shared by every re-ranker call.
/// [`PassageLookup::from_passages`] takes each [`Passage`]'s `text` (the text that was
/// indexed); build it with [`PassageLookup::from_pairs`] to feed something else (for
/// example `title + ". " + text`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PassageLookup {
    texts: HashMap<String, String>,
}

impl PassageLookup {
    /// An empty lookup.
    pub fn new() -> Self {
        Self::default()
    }

    /// Id → `text` of each passage. A duplicate id is an error naming it.
    pub fn from_passages(passages: &[Passage]) -> Result<Self> {
        Self::from_pairs(passages.iter().map(|p| (p.id.as_str(), p.text.as_str())))
    }

    /// From `(id, text)` pairs. A duplicate id is an error naming it.
    pub fn from_pairs<I, K, V>(pairs: I) -> Result<Self>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let mut lookup = Self::new();
        for (id, text) in pairs {
            lookup.insert(id, text)?;
        }
        Ok(lookup)
    }

    /// Add one passage. A duplicate id is an error naming it.
    pub fn insert(&mut self, id: impl Into<String>, text: impl Into<String>) -> Result<()> {
        let id = id.into();
        if self.texts.contains_key(&id) {
            return Err(Error::param(
                "passages",
                format!("passage id `{id}` appears twice"),
            ));
        }
        self.texts.insert(id, text.into());
        Ok(())
    }

    /// The text of a passage, if present.
    pub fn get(&self, id: &str) -> Option<&str> {
        self.texts.get(id).map(String::as_str)
    }

    /// The text of a passage, or an error naming the id.
    pub fn require(&self, id: &str) -> Result<&str> {
        self.get(id).ok_or_else(|| {
            Error::param(
                "candidates",
                format!(
                    "passage id `{id}` is not in the passage lookup ({} passages)",
                    self.texts.len()
                ),
            )
        })
    }

    /// Number of passages.
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// True when no passage is held.
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// All ids, sorted.
    pub fn ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.texts.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }
}

/// Re-scores a candidate list for a query. See the [module docs](self) for the contract.
pub trait Reranker: Send + Sync {
    /// A name that carries the model and hyper-parameters, e.g. `cross-ms-marco-minilm-l6-len512`.
    fn name(&self) -> String;

    /// The best `k` of `candidates` by this re-ranker's score, best first (ties by id).
    ///
    /// `passages` maps each candidate id to its text.
    fn rerank(
        &self,
        query: &str,
        candidates: &[Hit],
        passages: &PassageLookup,
        k: usize,
    ) -> Result<Vec<Hit>>;
}

impl<R: Reranker + ?Sized> Reranker for Arc<R> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn rerank(
        &self,
        query: &str,
        candidates: &[Hit],
        passages: &PassageLookup,
        k: usize,
    ) -> Result<Vec<Hit>> {
        (**self).rerank(query, candidates, passages, k)
    }
}

impl<R: Reranker + ?Sized> Reranker for Box<R> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn rerank(
        &self,
        query: &str,
        candidates: &[Hit],
        passages: &PassageLookup,
        k: usize,
    ) -> Result<Vec<Hit>> {
        (**self).rerank(query, candidates, passages, k)
    }
}

/// One candidate resolved against a [`PassageLookup`]: its id and text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate<'c, 'p> {
    /// Passage id (borrowed from the candidate hit).
    pub id: &'c str,
    /// Passage text (borrowed from the lookup).
    pub text: &'p str,
}

/// The shared first half of every [`Reranker::rerank`]: reject `k == 0`, drop repeated ids
/// (first occurrence wins) and resolve every id to its text (an unknown id is an error
/// naming it).
pub fn resolve_candidates<'c, 'p>(
    candidates: &'c [Hit],
    passages: &'p PassageLookup,
    k: usize,
) -> Result<Vec<Candidate<'c, 'p>>> {
    check_k(k)?;
    let mut seen = HashSet::with_capacity(candidates.len());
    let mut out = Vec::with_capacity(candidates.len());
    for hit in candidates {
        if !seen.insert(hit.id.as_str()) {
            continue;
        }
        out.push(Candidate {
            id: hit.id.as_str(),
            text: passages.require(&hit.id)?,
        });
    }
    Ok(out)
}

/// The shared second half: pair candidates with their new scores and keep the best `k`
/// (descending score, ties by ascending id).
///
/// Errors: a NaN score, as [`top_k`].
/// Panics if `scores.len() != candidates.len()` (an implementation bug, not an input error).
pub fn finish(candidates: &[Candidate<'_, '_>], scores: &[f32], k: usize) -> Result<Vec<Hit>> {
    assert_eq!(
        candidates.len(),
        scores.len(),
        "one score per candidate expected"
    );
    top_k(
        candidates
            .iter()
            .zip(scores)
            .map(|(c, &s)| Hit::new(c.id, s))
            .collect(),
        k,
    )
}

/// A re-ranker from a closure `(query, passage text) → score`: for tests, baselines and
/// quick experiments (e.g. a lexical-overlap re-ranker).
pub struct FnReranker<F> {
    label: String,
    score: F,
}

impl<F> FnReranker<F>
where
    F: Fn(&str, &str) -> f32 + Send + Sync,
{
    /// Wrap `score` under the name `fn-{label}`.
    pub fn new(label: impl Into<String>, score: F) -> Self {
        FnReranker {
            label: label.into(),
            score,
        }
    }
}

impl<F> Reranker for FnReranker<F>
where
    F: Fn(&str, &str) -> f32 + Send + Sync,
{
    fn name(&self) -> String {
        format!("fn-{}", self.label)
    }

    fn rerank(
        &self,
        query: &str,
        candidates: &[Hit],
        passages: &PassageLookup,
        k: usize,
    ) -> Result<Vec<Hit>> {
        let cands = resolve_candidates(candidates, passages, k)?;
        let scores: Vec<f32> = cands.iter().map(|c| (self.score)(query, c.text)).collect();
        finish(&cands, &scores, k)
    }
}

/// Two-stage retrieval (report 004): the first stage's top `depth`, re-ranked, cut to `k`.
///
/// `retrieve(q, k)` asks the first stage for `max(depth, k)` candidates, so `k > depth`
/// still returns `k` hits when the corpus has them (the [`Retriever`] contract); every
/// returned score is the re-ranker's.
///
/// ```
/// # use workbench::rerank::{FnReranker, PassageLookup, RerankedRetriever};
/// # use workbench::retrieve::Retriever;
/// # use workbench::{Hit, Result};
/// # struct Fixed;
/// # impl Retriever for Fixed {
/// #     fn name(&self) -> String { "fixed".into() }
/// #     fn retrieve(&self, _q: &str, k: usize) -> Result<Vec<Hit>> {
/// #         Ok(["a", "bb", "ccc"].iter().take(k).map(|id| Hit::new(*id, 1.0)).collect())
/// #     }
/// # }
/// # fn main() -> Result<()> {
/// let passages = PassageLookup::from_pairs([("a", "x"), ("bb", "xx"), ("ccc", "xxx")])?;
/// let longest = FnReranker::new("len", |_q: &str, p: &str| p.len() as f32);
/// // top-10 → re-rank → top-3, as in report 004
/// let two_stage = RerankedRetriever::new(Box::new(Fixed), Box::new(longest), passages, 10)?;
/// assert_eq!(two_stage.retrieve("q", 3)?[0].id, "ccc");
/// # Ok(()) }
/// ```
pub struct RerankedRetriever {
    first: Box<dyn Retriever>,
    reranker: Box<dyn Reranker>,
    passages: Arc<PassageLookup>,
    depth: usize,
}

impl RerankedRetriever {
    /// Wrap a first stage with a re-ranker. `depth == 0` is an error.
    pub fn new(
        first: Box<dyn Retriever>,
        reranker: Box<dyn Reranker>,
        passages: impl Into<Arc<PassageLookup>>,
        depth: usize,
    ) -> Result<Self> {
        if depth == 0 {
            return Err(Error::param("depth", "must be at least 1"));
        }
        Ok(RerankedRetriever {
            first,
            reranker,
            passages: passages.into(),
            depth,
        })
    }

    /// The candidate depth.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The first stage.
    pub fn first_stage(&self) -> &dyn Retriever {
        self.first.as_ref()
    }

    /// The re-ranker.
    pub fn reranker(&self) -> &dyn Reranker {
        self.reranker.as_ref()
    }
}

impl Retriever for RerankedRetriever {
    /// `{first}__rerank-d{depth}-{reranker}`.
    fn name(&self) -> String {
        format!(
            "{}__rerank-d{}-{}",
            self.first.name(),
            self.depth,
            self.reranker.name()
        )
    }

    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        check_k(k)?;
        let candidates = self.first.retrieve(query, self.depth.max(k))?;
        self.reranker.rerank(query, &candidates, &self.passages, k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup() -> PassageLookup {
        PassageLookup::from_pairs([("a", "one"), ("b", "three"), ("c", "xx"), ("d", "xx")]).unwrap()
    }

    fn by_len() -> FnReranker<impl Fn(&str, &str) -> f32 + Send + Sync> {
        FnReranker::new("len", |_q: &str, p: &str| p.len() as f32)
    }

    #[test]
    fn sorts_by_score_then_id_and_cuts() {
        let cands = [Hit::new("d", 0.0), Hit::new("a", 0.0), Hit::new("c", 0.0)];
        let hits = by_len().rerank("q", &cands, &lookup(), 2).unwrap();
        assert_eq!(hits, vec![Hit::new("a", 3.0), Hit::new("c", 2.0)]);
    }

    #[test]
    fn k_zero_unknown_id_and_large_k() {
        let r = by_len();
        let err = r
            .rerank("q", &[Hit::new("a", 1.0)], &lookup(), 0)
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidParam { name: "k", .. }),
            "{err}"
        );
        let err = r
            .rerank(
                "q",
                &[Hit::new("a", 1.0), Hit::new("zz", 1.0)],
                &lookup(),
                5,
            )
            .unwrap_err();
        assert!(err.to_string().contains("`zz`"), "{err}");
        let hits = r.rerank("q", &[Hit::new("b", 1.0)], &lookup(), 50).unwrap();
        assert_eq!(hits.len(), 1);
        assert!(r.rerank("q", &[], &lookup(), 5).unwrap().is_empty());
    }

    #[test]
    fn duplicate_candidates_scored_once() {
        let cands = [Hit::new("a", 1.0), Hit::new("a", 2.0), Hit::new("b", 0.0)];
        let hits = by_len().rerank("q", &cands, &lookup(), 10).unwrap();
        assert_eq!(hits.len(), 2);
    }

    #[test]
    fn duplicate_passage_id_rejected() {
        let err = PassageLookup::from_pairs([("a", "x"), ("a", "y")]).unwrap_err();
        assert!(err.to_string().contains("`a`"), "{err}");
    }
}
