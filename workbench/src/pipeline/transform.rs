//! Query transformations: turn a question into the queries that are sent to the
//! retrievers.
//!
//! - **rewrite** (report 004): one query, an LLM's expanded rewrite of the question,
//!   replaces it for retrieval and re-ranking; the reader still reads the original
//!   question;
//! - **paraphrase-and-fuse** (RAG-Fusion, report 002): `n` paraphrases (optionally
//!   with the original question), each retrieved separately, the runs fused with RRF
//!   (`k = 60`) by [`fuse_variants`].
//!
//! [`QueryTransform`] is the trait; the LLM implementation (the same GGUF model as the
//! reader, prompted with `data/prompts/rewrite_004.txt` / `paraphrase_002.txt`) plugs in
//! once the generative reader exists. [`FnTransform`] wraps a closure (tests, rule-based
//! transforms).

use crate::read::Usage;
use crate::retrieve::fusion::{Fusion, FusionMethod};
use crate::{Error, Hit, Result};

/// The queries a transformation made for one question, with its cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transformed {
    /// The queries to retrieve with, in order (at least one).
    pub queries: Vec<String>,
    /// Token counts and times of the generation (zero for rule-based transforms).
    pub usage: Usage,
}

/// A query transformation. See the [module docs](self).
pub trait QueryTransform {
    /// A short name for tables and traces (`"rewrite-qwen2.5-1.5b"`).
    fn name(&self) -> String;

    /// The queries for `question`. Must return at least one non-empty query.
    fn transform(&mut self, question: &str) -> Result<Transformed>;
}

/// A transformation from a closure `question → queries`.
pub struct FnTransform<F> {
    label: String,
    f: F,
}

impl<F: FnMut(&str) -> Vec<String>> FnTransform<F> {
    /// Wrap `f` under the name `fn-{label}`.
    pub fn new(label: impl Into<String>, f: F) -> Self {
        FnTransform {
            label: label.into(),
            f,
        }
    }
}

impl<F: FnMut(&str) -> Vec<String>> QueryTransform for FnTransform<F> {
    fn name(&self) -> String {
        format!("fn-{}", self.label)
    }

    fn transform(&mut self, question: &str) -> Result<Transformed> {
        Ok(Transformed {
            queries: (self.f)(question),
            usage: Usage::default(),
        })
    }
}

/// Check a transformation's output: at least one query, none empty.
pub fn check_queries(name: &str, question: &str, queries: &[String]) -> Result<()> {
    if queries.is_empty() {
        return Err(Error::param(
            "query_transform",
            format!("`{name}` returned no query for {question:?}"),
        ));
    }
    if queries.iter().any(|q| q.trim().is_empty()) {
        return Err(Error::param(
            "query_transform",
            format!("`{name}` returned an empty query for {question:?}"),
        ));
    }
    Ok(())
}

/// RAG-Fusion: fuse the runs of the query variants with unweighted RRF,
/// `score(d) = Σ_{v : d ∈ L_v} 1 / (rank_constant + rank_v(d))`, every passage of every
/// run kept, best first (ties by ascending id). One run is returned as it is.
pub fn fuse_variants(runs: &[Vec<Hit>], rank_constant: f32) -> Result<Vec<Hit>> {
    match runs {
        [] => Err(Error::Empty("no query variants to fuse".into())),
        [one] => Ok(one.clone()),
        _ => Fusion::new(FusionMethod::Rrf { rank_constant }, None)?.fuse(runs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_over_variants_by_hand() {
        // Variant 1: a, b, c. Variant 2: b, d. With k = 60:
        // a = 1/61, b = 1/62 + 1/61, c = 1/63, d = 1/62.
        let v1 = vec![Hit::new("a", 9.0), Hit::new("b", 8.0), Hit::new("c", 7.0)];
        let v2 = vec![Hit::new("b", 0.3), Hit::new("d", 0.2)];
        let fused = fuse_variants(&[v1.clone(), v2], 60.0).unwrap();
        let ids: Vec<&str> = fused.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, ["b", "a", "d", "c"]);
        assert!((fused[0].score as f64 - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-6);
        assert!((fused[3].score as f64 - 1.0 / 63.0).abs() < 1e-6);
        assert_eq!(fuse_variants(std::slice::from_ref(&v1), 60.0).unwrap(), v1);
        assert!(fuse_variants(&[], 60.0).is_err());
    }

    #[test]
    fn fn_transform_and_checks() {
        let mut t = FnTransform::new("twice", |q: &str| vec![q.to_string(), q.to_uppercase()]);
        assert_eq!(t.name(), "fn-twice");
        assert_eq!(t.transform("who").unwrap().queries, ["who", "WHO"]);
        assert!(check_queries("x", "q", &[]).is_err());
        assert!(check_queries("x", "q", &[" ".into()]).is_err());
        assert!(check_queries("x", "q", &["a".into()]).is_ok());
    }
}
