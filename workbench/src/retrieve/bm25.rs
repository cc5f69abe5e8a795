//! Okapi BM25 and its Lucene variant, selected by [`Bm25Variant`].
//!
//! Report 002 prints
//!
//! ```text
//! BM25(q, d) = Σ_{t∈q} log[N / df(t)] · (k1 + 1)·tf(t,d) / (k1·[(1 − b) + b·dl(d)/dl_avg] + tf(t,d))
//! ```
//!
//! i.e. the classic Okapi saturation term with the *plain* idf `log(N/df)`, not the
//! Robertson–Spärck Jones idf. In the terminology of Kamphuis, de Vries, Boytsov &
//! Lin, "Which BM25 Do You Mean? A Large-Scale Reproducibility Study of Scoring
//! Variants" (ECIR 2020), that printed formula is the **ATIRE** variant. The three
//! variants offered here (with `K(d) = k1·(1 − b + b·dl(d)/avgdl)`):
//!
//! | variant | idf(t) | term score | source |
//! |---|---|---|---|
//! | [`Bm25Variant::Robertson`] | `ln((N − df + 0.5)/(df + 0.5))` | `idf · (k1+1)·tf / (K(d) + tf)` | Robertson et al., Okapi at TREC-3 (1994); Robertson & Zaragoza (2009) eq. 3.26 |
//! | [`Bm25Variant::Atire`] | `ln(N / df)` | `idf · (k1+1)·tf / (K(d) + tf)` | report 002 as printed; Trotman et al. 2014 (ATIRE) |
//! | [`Bm25Variant::Lucene`] | `ln(1 + (N − df + 0.5)/(df + 0.5))` | `idf · tf / (K(d) + tf)` | Lucene ≥ 8 `BM25Similarity` (the `(k1+1)` factor was dropped in LUCENE-8563) |
//!
//! `tf` = count of `t` in the passage, `dl` = passage length in tokens after
//! analysis, `avgdl` = mean length over the corpus, `N` = number of passages, and the
//! sum runs over the query's tokens (a term repeated in the query counts once per
//! occurrence, as in `rank_bm25` and Anserini's bag-of-words queries). Logs are
//! natural (the report does not say; the base only scales all scores).
//!
//! Notes: the Robertson idf is **negative** for terms in more than half the passages
//! (`df > N/2`) and 0 at `df = N/2`; it is kept as printed (`bm25s`'s `robertson`
//! method clamps it at 0 unless `allow_negative`), so passages matching only very
//! common terms can score below 0 — they are still returned, since they contain a
//! query term. Lucene stores lengths lossily (one byte per document); exact lengths
//! are used here, as in `bm25s`. Defaults `k1 = 0.9, b = 0.4` are Anserini's.
//!
//! Scoring is term-at-a-time over precomputed per-posting impacts (see
//! [`super::impact`]): the term score above is computed once per posting at build
//! time, a query sums them into a corpus-sized accumulator and partially selects the
//! top k, with safe dynamic pruning ([`Impacts::search`]) that skips most postings
//! of frequent, low-idf terms when they cannot change the top k; the hits are the
//! same, bit for bit, as exhaustive scoring ([`Bm25::retrieve_exhaustive`]).

use super::analyzer::Analyzer;
use super::impact::{par_retrieve_all, with_thread_scratch, Impacts, Scratch};
use super::index::InvertedIndex;
use super::{check_k, Retriever};
use crate::display::Table;
use crate::{Error, Hit, Passage, Query, Result, Run};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Which BM25 formula (see the [module docs](self) for the table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Bm25Variant {
    /// Robertson–Spärck Jones idf `ln((N−df+0.5)/(df+0.5))` with the `(k1+1)` numerator.
    Robertson,
    /// Plain idf `ln(N/df)` with the `(k1+1)` numerator: report 002's printed formula.
    Atire,
    /// Lucene ≥ 8: idf `ln(1 + (N−df+0.5)/(df+0.5))`, no `(k1+1)` numerator (default).
    #[default]
    Lucene,
}

impl Bm25Variant {
    /// Lowercase tag used in retriever names.
    pub fn tag(&self) -> &'static str {
        match self {
            Bm25Variant::Robertson => "robertson",
            Bm25Variant::Atire => "atire",
            Bm25Variant::Lucene => "lucene",
        }
    }

    /// The variant's idf for a term in `df` of `n` passages.
    pub fn idf(&self, n: usize, df: usize) -> f64 {
        let (n, df) = (n as f64, df as f64);
        match self {
            Bm25Variant::Robertson => ((n - df + 0.5) / (df + 0.5)).ln(),
            Bm25Variant::Atire => (n / df).ln(),
            Bm25Variant::Lucene => (1.0 + (n - df + 0.5) / (df + 0.5)).ln(),
        }
    }
}

/// BM25 hyper-parameters, validated by [`Bm25Params::validate`] before any work.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bm25Params {
    /// Term-frequency saturation, `k1 ≥ 0`. Default `0.9` (Anserini).
    pub k1: f32,
    /// Length normalisation, `0 ≤ b ≤ 1`. Default `0.4` (Anserini).
    pub b: f32,
    /// Formula variant. Default [`Bm25Variant::Lucene`].
    pub variant: Bm25Variant,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Bm25Params {
            k1: 0.9,
            b: 0.4,
            variant: Bm25Variant::Lucene,
        }
    }
}

impl Bm25Params {
    /// The defaults: `k1 = 0.9`, `b = 0.4`, Lucene variant.
    pub fn new() -> Self {
        Self::default()
    }

    /// Set `k1` (≥ 0, finite). Default `0.9`.
    pub fn k1(mut self, k1: f32) -> Self {
        self.k1 = k1;
        self
    }

    /// Set `b` (in `[0, 1]`). Default `0.4`.
    pub fn b(mut self, b: f32) -> Self {
        self.b = b;
        self
    }

    /// Set the variant. Default [`Bm25Variant::Lucene`].
    pub fn variant(mut self, variant: Bm25Variant) -> Self {
        self.variant = variant;
        self
    }

    /// The length normalisation `K(d) = k1·(1 − b + b·dl/avgdl)` of a passage of `dl`
    /// tokens in a corpus of average length `avgdl` (the `K(d)` of the
    /// [module docs](self)).
    pub fn length_norm(&self, dl: f64, avgdl: f64) -> f64 {
        let (k1, b) = (self.k1 as f64, self.b as f64);
        k1 * (1.0 - b + b * dl / avgdl)
    }

    /// The saturated term frequency `(k1 + 1)·tf / (K(d) + tf)` (Robertson, ATIRE) or
    /// `tf / (K(d) + tf)` (Lucene): what a term's idf is multiplied by. It grows with
    /// `tf` but never exceeds `k1 + 1` (or 1): report 002's "saturation". 0 when
    /// `tf = 0`.
    pub fn saturation(&self, tf: f64, dl: f64, avgdl: f64) -> f64 {
        if tf == 0.0 {
            return 0.0;
        }
        let numerator = match self.variant {
            Bm25Variant::Robertson | Bm25Variant::Atire => self.k1 as f64 + 1.0,
            Bm25Variant::Lucene => 1.0,
        };
        numerator * tf / (self.length_norm(dl, avgdl) + tf)
    }

    /// Reject `k1 < 0` or non-finite (`k1`), and `b` outside `[0, 1]` or NaN (`b`).
    pub fn validate(&self) -> Result<()> {
        if !(self.k1.is_finite() && self.k1 >= 0.0) {
            return Err(Error::param(
                "k1",
                format!("must be finite and ≥ 0, got {}", self.k1),
            ));
        }
        if !(0.0..=1.0).contains(&self.b) {
            return Err(Error::param(
                "b",
                format!("must be in [0, 1], got {}", self.b),
            ));
        }
        Ok(())
    }
}

/// A BM25 first stage as configured (`kind = "bm25"`): the Lucene variant over the
/// default analyzer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Bm25Spec {
    /// Term-frequency saturation, `k1 ≥ 0`. Default `0.9`.
    pub k1: f32,
    /// Length normalisation, `0 ≤ b ≤ 1`. Default `0.4`.
    pub b: f32,
}

impl Default for Bm25Spec {
    fn default() -> Self {
        let p = Bm25Params::default();
        Bm25Spec { k1: p.k1, b: p.b }
    }
}

impl Bm25Spec {
    fn params(&self) -> Bm25Params {
        Bm25Params::new().k1(self.k1).b(self.b)
    }
}

impl super::BuildRetriever for Bm25Spec {
    fn check(&self) -> Result<()> {
        self.params().validate().map_err(|e| match e {
            Error::InvalidParam {
                name: "k1",
                message,
            } => Error::param("retrieval.retrievers.k1", message),
            Error::InvalidParam { name: "b", message } => {
                Error::param("retrieval.retrievers.b", message)
            }
            e => e,
        })
    }

    fn build(&self, ctx: &crate::build::BuildCtx<'_>) -> Result<Arc<dyn Retriever>> {
        Ok(Arc::new(Bm25::build(
            ctx.passages,
            &Analyzer::default(),
            self.params(),
        )?))
    }
}

/// A BM25 retriever over an [`InvertedIndex`].
#[derive(Debug, Clone)]
pub struct Bm25 {
    params: Bm25Params,
    impacts: Impacts,
}

impl Bm25 {
    /// Validate `params` and precompute the per-posting term scores over `index`.
    pub fn new(index: Arc<InvertedIndex>, params: Bm25Params) -> Result<Self> {
        params.validate()?;
        let n = index.len();
        let avgdl = index.avg_doc_len();
        let k1 = params.k1 as f64;
        let b = params.b as f64;
        let variant = params.variant;
        let idf: Vec<f64> = (0..index.num_terms() as u32)
            .map(|t| variant.idf(n, index.df(t)))
            .collect();
        let numerator = match variant {
            Bm25Variant::Robertson | Bm25Variant::Atire => k1 + 1.0,
            Bm25Variant::Lucene => 1.0,
        };
        let idx = index.clone();
        // avgdl > 0 whenever a posting exists (that passage has ≥ 1 token).
        let impacts = Impacts::new(index, move |t, d, tf| {
            let tf = tf as f64;
            let dl = idx.doc_len(d as usize) as f64;
            let norm = k1 * (1.0 - b + b * dl / avgdl);
            (idf[t as usize] * numerator * tf / (norm + tf)) as f32
        });
        Ok(Bm25 { params, impacts })
    }

    /// Validate `params`, index `passages` with `analyzer`, build the retriever.
    pub fn build(passages: &[Passage], analyzer: &Analyzer, params: Bm25Params) -> Result<Self> {
        params.validate()?;
        Self::new(Arc::new(InvertedIndex::build(passages, analyzer)?), params)
    }

    /// The hyper-parameters.
    pub fn params(&self) -> Bm25Params {
        self.params
    }

    /// The underlying index.
    pub fn index(&self) -> &Arc<InvertedIndex> {
        self.impacts.index()
    }

    /// The query's `(term id, weight = count in the query)` in `scratch.weights`, in
    /// the order their contributions are summed on every path (see
    /// [`Impacts::sort_for_search`]), so that pruned and exhaustive scores are
    /// bit-identical.
    fn query_weights(&self, query: &str, scratch: &mut Scratch) {
        self.index().query_terms_into(query, &mut scratch.terms);
        scratch.weights.clear();
        scratch
            .weights
            .extend(scratch.terms.iter().map(|&(t, c)| (t, c as f32)));
        self.impacts.sort_for_search(&mut scratch.weights);
    }

    /// Exhaustive scoring of every passage containing a query term.
    fn score_into(&self, query: &str, scratch: &mut Scratch) {
        self.query_weights(query, scratch);
        let weights = std::mem::take(&mut scratch.weights);
        self.impacts.accumulate(&weights, scratch);
        scratch.weights = weights;
    }

    /// The BM25 score of every passage for `query`, by passage index (0 for passages
    /// without any query term). For oracle tests and analysis.
    pub fn score_all(&self, query: &str) -> Vec<f32> {
        with_thread_scratch(|s| {
            self.score_into(query, s);
            self.impacts.dense_scores(s)
        })
    }

    /// [`Retriever::retrieve`] with caller-owned buffers (no per-query allocation
    /// besides the returned hits). Uses [`Impacts::search`]: the same hits as
    /// exhaustive scoring, with safe dynamic pruning when the impacts allow it.
    pub fn retrieve_with(&self, query: &str, k: usize, scratch: &mut Scratch) -> Result<Vec<Hit>> {
        check_k(k)?;
        self.query_weights(query, scratch);
        let weights = std::mem::take(&mut scratch.weights);
        let hits = self.impacts.search(&weights, k, scratch);
        scratch.weights = weights;
        Ok(hits)
    }

    /// [`Bm25::retrieve_with`] without pruning: every posting of every query term is
    /// scored, then the top `k` selected. The reference the pruned path must equal.
    pub fn retrieve_exhaustive(
        &self,
        query: &str,
        k: usize,
        scratch: &mut Scratch,
    ) -> Result<Vec<Hit>> {
        check_k(k)?;
        self.score_into(query, scratch);
        Ok(self.impacts.top_k(scratch, k))
    }
}

/// One query term's part of a BM25 score (see [`Bm25::explain`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bm25Term {
    /// The term as indexed (after the analyzer: lowercased, stemmed, …).
    pub term: String,
    /// How often the term occurs in the query (its part is counted that often).
    pub query_count: u32,
    /// `tf(t, d)`: occurrences in the passage (0: the term adds nothing).
    pub tf: u32,
    /// `df(t)`: passages that contain the term.
    pub df: usize,
    /// The variant's idf ([`Bm25Variant::idf`]).
    pub idf: f64,
    /// The saturated term frequency ([`Bm25Params::saturation`]).
    pub tf_part: f64,
    /// The per-posting score `idf · tf_part` the retriever stores and sums (f32); 0
    /// when `tf = 0`.
    pub impact: f32,
    /// `query_count · impact`: this term's share of the passage's score.
    pub contribution: f32,
}

/// A passage's BM25 score for a query, term by term (see [`Bm25::explain`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bm25Explanation {
    /// The query.
    pub query: String,
    /// The passage id.
    pub passage: String,
    /// `dl(d)`: the passage's length in tokens.
    pub doc_len: u32,
    /// `avgdl`: the corpus's mean passage length.
    pub avg_doc_len: f64,
    /// `K(d)` ([`Bm25Params::length_norm`]).
    pub length_norm: f64,
    /// The parameters.
    pub params: Bm25Params,
    /// The query's indexed terms in order of first occurrence (terms the index has
    /// never seen are left out: they match no passage).
    pub terms: Vec<Bm25Term>,
    /// The sum of the contributions: the passage's score.
    pub score: f32,
}

impl Bm25Explanation {
    /// The explanation as a table, one row per query term, and the sum as the caption.
    pub fn to_table(&self) -> Table {
        let mut t = Table::new([
            "term", "in query", "tf", "df", "idf", "tf part", "impact", "contribution",
        ])
        .caption(format!(
            "BM25 ({}, k1 = {}, b = {}) of `{}` for {:?}: dl = {}, avgdl = {:.2}, K(d) = {:.4}; score = {:.4}",
            self.params.variant.tag(),
            self.params.k1,
            self.params.b,
            self.passage,
            self.query,
            self.doc_len,
            self.avg_doc_len,
            self.length_norm,
            self.score
        ));
        for x in &self.terms {
            t.rows.push(vec![
                x.term.clone(),
                x.query_count.to_string(),
                x.tf.to_string(),
                x.df.to_string(),
                format!("{:.4}", x.idf),
                format!("{:.4}", x.tf_part),
                format!("{:.4}", x.impact),
                format!("{:.4}", x.contribution),
            ]);
        }
        t
    }

    /// evcxr display hook: the table as HTML.
    pub fn evcxr_display(&self) {
        self.to_table().evcxr_display();
    }
}

impl Bm25 {
    /// Why passage `passage` (an id) scores what it does for `query`: each indexed
    /// query term's tf, df, idf, saturated tf and contribution, read from the same
    /// per-posting impacts retrieval sums. The contributions add up to the passage's
    /// [`Bm25::score_all`] score (up to float rounding of the order of addition).
    ///
    /// Errors: [`Error::InvalidParam`] (`passage`) for an id not in the index.
    pub fn explain(&self, query: &str, passage: &str) -> Result<Bm25Explanation> {
        let index = self.index();
        let d = index.passage_index(passage)?;
        let (n, avgdl) = (index.len(), index.avg_doc_len());
        let dl = index.doc_len(d);
        let mut score = 0f32;
        let terms = index
            .query_terms(query)
            .into_iter()
            .map(|(t, query_count)| {
                let pos = index.posting_position(t, d);
                let tf = index.tf(t, d);
                let impact = pos.map_or(0.0, |i| self.impacts.weights()[i]);
                let contribution = query_count as f32 * impact;
                score += contribution;
                Bm25Term {
                    term: index.terms()[t as usize].clone(),
                    query_count,
                    tf,
                    df: index.df(t),
                    idf: self.params.variant.idf(n, index.df(t)),
                    tf_part: self.params.saturation(tf as f64, dl as f64, avgdl),
                    impact,
                    contribution,
                }
            })
            .collect();
        Ok(Bm25Explanation {
            query: query.to_string(),
            passage: passage.to_string(),
            doc_len: dl,
            avg_doc_len: avgdl,
            length_norm: self.params.length_norm(dl as f64, avgdl),
            params: self.params,
            terms,
            score,
        })
    }
}

impl Retriever for Bm25 {
    /// `bm25-k1_{k1}-b_{b}-{variant}`, e.g. `bm25-k1_0.9-b_0.4-lucene`.
    fn name(&self) -> String {
        format!(
            "bm25-k1_{}-b_{}-{}",
            self.params.k1,
            self.params.b,
            self.params.variant.tag()
        )
    }

    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        with_thread_scratch(|s| self.retrieve_with(query, k, s))
    }

    /// Queries in parallel (rayon).
    fn retrieve_all(&self, queries: &[Query], k: usize) -> Result<Run> {
        par_retrieve_all(self, queries, k)
    }
}

#[cfg(test)]
mod tests {
    use super::super::index::tests::passage;
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// N = 4 passages, plain analyzer, dl = 2, 4, 2, 2, avgdl = 10/4 = 2.5.
    fn corpus() -> Vec<Passage> {
        vec![
            passage("d1", "cat dog"),
            passage("d2", "cat cat cat bird"),
            passage("d3", "dog bird"),
            passage("d4", "fish fish"),
        ]
    }

    fn bm25(variant: Bm25Variant) -> Bm25 {
        Bm25::build(
            &corpus(),
            &Analyzer::plain(),
            Bm25Params::new().variant(variant),
        )
        .unwrap()
    }

    fn close(got: f32, want: f64) {
        assert!((got as f64 - want).abs() < 1e-5, "got {got}, want {want}");
    }

    // Query "cat fish", k1 = 0.9, b = 0.4. df(cat) = 2, df(fish) = 1.
    // K(dl=2) = 0.9·(0.6 + 0.4·2/2.5) = 0.9·0.92 = 0.828
    // K(dl=4) = 0.9·(0.6 + 0.4·4/2.5) = 0.9·1.24 = 1.116
    // tf parts: d1 cat tf=1: 1/(1 + 0.828) = 0.547046
    //           d2 cat tf=3: 3/(3 + 1.116) = 0.728863
    //           d4 fish tf=2: 2/(2 + 0.828) = 0.707214

    /// Lucene: idf(cat) = ln(1 + 2.5/2.5) = ln 2 = 0.693147,
    /// idf(fish) = ln(1 + 3.5/1.5) = ln 3.333333 = 1.203973.
    /// d1 = 0.693147·0.547046 = 0.379183; d2 = 0.693147·0.728863 = 0.505209;
    /// d4 = 1.203973·0.707214 = 0.851466; d3 has neither term.
    #[test]
    fn lucene_hand_computed() {
        let r = bm25(Bm25Variant::Lucene);
        let s = r.score_all("cat fish");
        close(s[0], 0.379183);
        close(s[1], 0.505209);
        assert_eq!(s[2], 0.0);
        close(s[3], 0.851466);
        let ids: Vec<String> = r
            .retrieve("cat fish", 10)
            .unwrap()
            .into_iter()
            .map(|h| h.id)
            .collect();
        assert_eq!(ids, ["d4", "d2", "d1"]);
        assert_eq!(r.name(), "bm25-k1_0.9-b_0.4-lucene");
    }

    /// Robertson: idf(cat) = ln(2.5/2.5) = 0 (df = N/2), idf(fish) = ln(3.5/1.5) =
    /// 0.847298. Numerator k1 + 1 = 1.9:
    /// d1 = d2 = 0; d4 = 0.847298 · 1.9 · 0.707214 = 0.847298 · 1.343706 = 1.138519.
    /// d1 and d2 contain "cat", so they are still returned (score 0, ties by id).
    #[test]
    fn robertson_hand_computed() {
        let r = bm25(Bm25Variant::Robertson);
        let s = r.score_all("cat fish");
        close(s[0], 0.0);
        close(s[1], 0.0);
        close(s[3], 1.138519);
        let hits = r.retrieve("cat fish", 10).unwrap();
        let ids: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, ["d4", "d1", "d2"]);
        assert_eq!(r.name(), "bm25-k1_0.9-b_0.4-robertson");
    }

    /// Robertson idf is negative when df > N/2: "x" in 2 of 3 passages gives
    /// ln(1.5/2.5) = −0.510826; with dl = avgdl = 1 and tf = 1,
    /// K = 0.9, score = −0.510826 · 1.9 · 1/(1 + 0.9) = −0.510826.
    #[test]
    fn robertson_negative_idf_is_kept_and_returned() {
        let c = vec![passage("a", "x"), passage("b", "x"), passage("c", "y")];
        let r = Bm25::build(
            &c,
            &Analyzer::plain(),
            Bm25Params::new().variant(Bm25Variant::Robertson),
        )
        .unwrap();
        let hits = r.retrieve("x", 10).unwrap();
        assert_eq!(hits.len(), 2);
        close(hits[0].score, -0.510826);
        assert_eq!(hits[0].id, "a");
    }

    /// ATIRE (report 002 as printed): idf(cat) = ln(4/2) = 0.693147,
    /// idf(fish) = ln(4/1) = 1.386294; numerator 1.9:
    /// d1 = 0.693147 · 1.9 · 0.547046 = 0.720448;
    /// d2 = 0.693147 · 1.9 · 0.728863 = 0.959898;
    /// d4 = 1.386294 · 1.9 · 0.707214 = 1.862772.
    #[test]
    fn atire_report_002_hand_computed() {
        let r = bm25(Bm25Variant::Atire);
        let s = r.score_all("cat fish");
        close(s[0], 0.720448);
        close(s[1], 0.959898);
        close(s[3], 1.862772);
    }

    /// The explanation of `lucene_hand_computed`'s scores, term by term.
    #[test]
    fn explain_hand_computed_and_sums_to_the_score() {
        let r = bm25(Bm25Variant::Lucene);
        let e = r.explain("cat fish cat", "d2").unwrap();
        assert_eq!((e.doc_len, e.avg_doc_len), (4, 2.5));
        close(e.length_norm as f32, 1.116);
        let terms: Vec<&str> = e.terms.iter().map(|t| t.term.as_str()).collect();
        assert_eq!(terms, ["cat", "fish"]);
        let (cat, fish) = (&e.terms[0], &e.terms[1]);
        assert_eq!((cat.query_count, cat.tf, cat.df), (2, 3, 2));
        close(cat.idf as f32, std::f64::consts::LN_2); // ln(1 + 2.5/2.5)
        close(cat.tf_part as f32, 0.728863);
        close(cat.impact, 0.505209);
        close(cat.contribution, 2.0 * 0.505209);
        // d2 has no "fish": it is listed, and adds nothing.
        assert_eq!(
            (fish.tf, fish.df, fish.impact, fish.contribution),
            (0, 1, 0.0, 0.0)
        );
        assert_eq!(fish.tf_part, 0.0);
        close(e.score, 2.0 * 0.505209);
        assert!(e
            .to_table()
            .to_markdown()
            .contains("| cat | 2 | 3 | 2 | 0.6931 | 0.7289 | 0.5052 | 1.0104 |"));
        let e = r.explain("fish", "d4").unwrap();
        close(e.score, 0.851466);
        // Unknown terms are left out; an unknown passage is an error naming it.
        assert!(r.explain("zebra", "d1").unwrap().terms.is_empty());
        let err = r.explain("cat", "d9").unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidParam {
                    name: "passage",
                    ..
                }
            ),
            "{err}"
        );
        // Every variant: the contributions sum to score_all, and idf · tf_part is the
        // stored impact.
        for v in [
            Bm25Variant::Robertson,
            Bm25Variant::Atire,
            Bm25Variant::Lucene,
        ] {
            let r = bm25(v);
            let q = "cat dog bird fish cat";
            let all = r.score_all(q);
            for (d, id) in ["d1", "d2", "d3", "d4"].iter().enumerate() {
                let e = r.explain(q, id).unwrap();
                assert!((e.score - all[d]).abs() < 1e-6, "{v:?} {id}");
                for t in &e.terms {
                    assert!(
                        (t.idf * t.tf_part - t.impact as f64).abs() < 1e-6,
                        "{v:?} {id} {t:?}"
                    );
                }
            }
        }
    }

    /// Saturation never exceeds the numerator, grows with tf, and shrinks with length.
    #[test]
    fn saturation_is_bounded_and_monotone() {
        for v in [Bm25Variant::Robertson, Bm25Variant::Lucene] {
            let p = Bm25Params::new().variant(v);
            let cap = if v == Bm25Variant::Lucene { 1.0 } else { 1.9 };
            let s: Vec<f64> = (0..50)
                .map(|tf| p.saturation(tf as f64, 10.0, 10.0))
                .collect();
            assert_eq!(s[0], 0.0);
            assert!(s.windows(2).all(|w| w[1] > w[0]) && s[49] < cap, "{s:?}");
            assert!(p.saturation(3.0, 20.0, 10.0) < p.saturation(3.0, 5.0, 10.0));
        }
        // b = 0: no length normalisation at all.
        let p = Bm25Params::new().b(0.0);
        assert_eq!(p.saturation(2.0, 100.0, 1.0), p.saturation(2.0, 1.0, 100.0));
    }

    #[test]
    fn params_are_validated_before_any_work() {
        let bad = [
            (Bm25Params::new().k1(-0.1), "k1"),
            (Bm25Params::new().k1(f32::NAN), "k1"),
            (Bm25Params::new().k1(f32::INFINITY), "k1"),
            (Bm25Params::new().b(1.5), "b"),
            (Bm25Params::new().b(-0.01), "b"),
            (Bm25Params::new().b(f32::NAN), "b"),
        ];
        for (p, field) in bad {
            // The empty corpus would be an Error::Empty: the parameter error wins.
            match Bm25::build(&[], &Analyzer::default(), p) {
                Err(Error::InvalidParam { name, .. }) => assert_eq!(name, field),
                other => panic!("{p:?}: {other:?}"),
            }
        }
        assert!(Bm25Params::new().k1(0.0).b(0.0).validate().is_ok());
        assert!(Bm25Params::new().b(1.0).validate().is_ok());
        assert!(matches!(
            Bm25::build(&[], &Analyzer::default(), Bm25Params::new()),
            Err(Error::Empty(_))
        ));
    }

    #[test]
    fn contract_edges() {
        let r = bm25(Bm25Variant::Lucene);
        assert!(matches!(
            r.retrieve("cat", 0),
            Err(Error::InvalidParam { name: "k", .. })
        ));
        assert!(r.retrieve("", 3).unwrap().is_empty());
        assert!(r.retrieve("unknown words", 3).unwrap().is_empty());
        assert_eq!(r.retrieve("cat dog bird fish", 1000).unwrap().len(), 4);
        let mut s = Scratch::new();
        assert_eq!(r.retrieve_with("cat", 1, &mut s).unwrap()[0].id, "d2");
        let run = r
            .retrieve_all(
                &[
                    Query {
                        id: "q1".into(),
                        text: "fish".into(),
                    },
                    Query {
                        id: "q2".into(),
                        text: "".into(),
                    },
                ],
                2,
            )
            .unwrap();
        assert_eq!(run["q1"][0].id, "d4");
        assert!(run["q2"].is_empty());
        assert!(r.retrieve_all(&[], 0).is_err());
    }

    /// Throughput smoke test on a synthetic Zipfian corpus (not a benchmark: run with
    /// `cargo test --release -p workbench --lib bm25_throughput -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn bm25_throughput() {
        use rand::{Rng, SeedableRng};
        let (n_docs, doc_len, vocab, n_queries) = (200_000usize, 60usize, 50_000usize, 2_000usize);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        // Zipf(1) over the vocabulary by inverse-CDF on the harmonic weights.
        let mut cdf: Vec<f64> = (1..=vocab).map(|r| 1.0 / r as f64).collect();
        for i in 1..vocab {
            cdf[i] += cdf[i - 1];
        }
        let total = cdf[vocab - 1];
        let draw = |rng: &mut rand_chacha::ChaCha8Rng| {
            let u = rng.gen::<f64>() * total;
            cdf.partition_point(|&c| c < u)
        };
        let t0 = std::time::Instant::now();
        let corpus: Vec<Passage> = (0..n_docs)
            .map(|i| {
                let text: Vec<String> = (0..doc_len)
                    .map(|_| format!("t{}", draw(&mut rng)))
                    .collect();
                passage(&format!("d{i}"), &text.join(" "))
            })
            .collect();
        let queries: Vec<Query> = (0..n_queries)
            .map(|i| Query {
                id: format!("q{i}"),
                text: (0..5)
                    .map(|_| format!("t{}", draw(&mut rng)))
                    .collect::<Vec<_>>()
                    .join(" "),
            })
            .collect();
        let rate = |t: std::time::Instant| n_queries as f64 / t.elapsed().as_secs_f64();
        let generated = t0.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let r = Bm25::build(&corpus, &Analyzer::plain(), Bm25Params::default()).unwrap();
        let built = t.elapsed().as_secs_f64();
        let mut s = Scratch::new();
        for q in queries.iter().take(200) {
            std::hint::black_box(r.retrieve_with(&q.text, 10, &mut s).unwrap());
            // warm-up
        }
        let t = std::time::Instant::now();
        for q in &queries {
            std::hint::black_box(r.retrieve_with(&q.text, 10, &mut s).unwrap());
        }
        let one_thread = rate(t);
        let t = std::time::Instant::now();
        let mut touched = 0;
        for q in &queries {
            r.score_into(&q.text, &mut s);
            touched += r.impacts.touched(&s).len();
        }
        let accumulate_only = rate(t);
        let t = std::time::Instant::now();
        let run = r.retrieve_all(&queries, 10).unwrap();
        let parallel = rate(t);
        assert_eq!(run.len(), n_queries);
        eprintln!(
            "corpus {n_docs} x {doc_len} tokens ({} postings): generate {generated:.1}s, \
             index+impacts {built:.1}s; {n_queries} queries (mean {} passages touched), top-10: \
             1 thread {one_thread:.0} q/s (accumulation alone {accumulate_only:.0} q/s), \
             rayon ({} threads) {parallel:.0} q/s",
            r.index().num_postings(),
            touched / n_queries,
            rayon::current_num_threads(),
        );
    }

    /// Reference BM25 straight from the formula on the analysed tokens.
    fn naive(docs: &[Vec<String>], query: &[String], p: Bm25Params) -> Vec<f64> {
        let n = docs.len();
        let avgdl = docs.iter().map(Vec::len).sum::<usize>() as f64 / n as f64;
        let (k1, b) = (p.k1 as f64, p.b as f64);
        docs.iter()
            .map(|d| {
                let mut tf: HashMap<&str, usize> = HashMap::new();
                for t in d {
                    *tf.entry(t).or_default() += 1;
                }
                query
                    .iter()
                    .filter_map(|q| tf.get(q.as_str()).map(|&f| (q, f as f64)))
                    .map(|(q, f)| {
                        let df = docs.iter().filter(|d| d.contains(q)).count();
                        let idf = p.variant.idf(n, df);
                        let k = k1 * (1.0 - b + b * d.len() as f64 / avgdl);
                        let num = match p.variant {
                            Bm25Variant::Lucene => 1.0,
                            _ => k1 + 1.0,
                        };
                        idf * num * f / (k + f)
                    })
                    .sum()
            })
            .collect()
    }

    /// A token of a skewed vocabulary: `a` picks a geometric "frequent word" rank
    /// (w0 in about half the tokens, w1 in a quarter, …) two times in three, else a
    /// rare word r0..r299 from `b`. Queries drawn the same way mix a few very
    /// frequent terms with rare ones, as natural-language queries do, so the pruned
    /// search has something to prune.
    fn skewed_token(a: u32, b: u32) -> String {
        match a % 3 {
            0 => format!("r{}", b % 300),
            _ => format!("w{}", (a >> 2).leading_zeros().saturating_sub(16)),
        }
    }

    fn skewed_text(toks: &[(u32, u32)]) -> String {
        toks.iter()
            .map(|&(a, b)| skewed_token(a, b))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Hits as `(id, score bits)`, for bit-exact comparison.
    fn exact(hits: &[Hit]) -> Vec<(String, u32)> {
        hits.iter()
            .map(|h| (h.id.clone(), h.score.to_bits()))
            .collect()
    }

    #[test]
    fn pruned_search_prunes_and_matches_exhaustive_on_a_skewed_corpus() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut toks = |n: usize| -> String {
            let t: Vec<(u32, u32)> = (0..n).map(|_| (rng.gen(), rng.gen())).collect();
            skewed_text(&t)
        };
        let corpus: Vec<Passage> = (0..2000)
            .map(|i| passage(&format!("p{i:04}"), &toks(8 + i % 40)))
            .collect();
        let queries: Vec<String> = (0..300).map(|i| toks(2 + i % 14)).collect();
        let (mut a, mut b) = (Scratch::new(), Scratch::new());
        let (mut pruned, mut scored, mut total) = (0, 0, 0);
        let (mut dense, mut bitmap, mut searched) = (0, 0, 0);
        for variant in [
            Bm25Variant::Lucene,
            Bm25Variant::Atire,
            Bm25Variant::Robertson,
        ] {
            let r = Bm25::build(
                &corpus,
                &Analyzer::plain(),
                Bm25Params::new().variant(variant),
            )
            .unwrap();
            let mut sparse = r.clone();
            sparse.impacts.clear_dense_rows();
            sparse.impacts.clear_bit_rows();
            assert!(r.impacts.dense_rows() > 0 && sparse.impacts.dense_rows() == 0);
            for q in &queries {
                for (k, r) in [(1, &r), (10, &r), (100, &r), (10, &sparse)] {
                    let got = r.retrieve_with(q, k, &mut a).unwrap();
                    let want = r.retrieve_exhaustive(q, k, &mut b).unwrap();
                    assert_eq!(exact(&got), exact(&want), "{variant:?} k={k} {q:?}");
                    let st = a.last_search();
                    dense += st.dense_lookups;
                    bitmap += st.bitmap_lookups;
                    searched += st.lookups - st.dense_lookups - st.bitmap_lookups;
                    if variant == Bm25Variant::Lucene && k == 10 && r.impacts.dense_rows() > 0 {
                        pruned += (st.candidates > 0) as usize;
                        scored += st.postings_scored;
                        total += r
                            .index()
                            .query_terms(q)
                            .iter()
                            .map(|&(t, _)| r.index().df(t))
                            .sum::<usize>();
                    }
                    if variant == Bm25Variant::Robertson {
                        // Negative idf (w0 is in more than half the passages): no pruning.
                        assert_eq!(st.candidates, 0);
                    }
                }
            }
        }
        // The pruned path must actually run, and skip most postings, on this corpus.
        assert!(
            pruned > queries.len() / 2,
            "pruned {pruned} of {}",
            queries.len()
        );
        assert!(scored * 3 < total, "scored {scored} of {total} postings");
        // Every kind of phase-2 look-up ran.
        assert!(
            dense > 0 && bitmap > 0 && searched > 0,
            "dense {dense}, bitmap {bitmap}, searched {searched}"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Oracle for the pruned search: the same hits, bit for bit and in the same
        /// order, as scoring every posting, for every variant, k and parameters.
        #[test]
        fn pruned_search_equals_exhaustive_scoring(
            docs in prop::collection::vec(prop::collection::vec((any::<u32>(), any::<u32>()), 1..40), 1..250),
            queries in prop::collection::vec(prop::collection::vec((any::<u32>(), any::<u32>()), 0..14), 1..6),
            k in prop_oneof![1usize..4, 4usize..15],
            k1 in 0.0f32..3.0,
            b in 0.0f32..=1.0,
            v in 0usize..3,
        ) {
            // Passage ids in reverse corpus order, so id ties are not index ties.
            let n = docs.len();
            let passages: Vec<Passage> = docs
                .iter()
                .enumerate()
                .map(|(i, d)| passage(&format!("p{:03}", n - i), &skewed_text(d)))
                .collect();
            let variant = [Bm25Variant::Robertson, Bm25Variant::Atire, Bm25Variant::Lucene][v];
            let r = Bm25::build(&passages, &Analyzer::plain(), Bm25Params::new().k1(k1).b(b).variant(variant)).unwrap();
            let mut bitmaps = r.clone();
            bitmaps.impacts.clear_dense_rows();
            let mut sparse = bitmaps.clone();
            sparse.impacts.clear_bit_rows();
            let (mut a, mut s) = (Scratch::new(), Scratch::new());
            for q in &queries {
                let q = skewed_text(q);
                let want = r.retrieve_exhaustive(&q, k, &mut s).unwrap();
                // Phase 2 with dense impact rows, bitmaps, then posting searches only.
                for r in [&r, &bitmaps, &sparse] {
                    let got = r.retrieve_with(&q, k, &mut a).unwrap();
                    prop_assert_eq!(exact(&got), exact(&want), "{:?}", a.last_search());
                }
            }
        }
    }

    proptest! {
        #[test]
        fn score_all_matches_the_formula(
            docs in prop::collection::vec(prop::collection::vec(0usize..8, 0..12), 1..12),
            query in prop::collection::vec(0usize..10, 0..5),
            k1 in 0.0f32..3.0,
            b in 0.0f32..=1.0,
            v in 0usize..3,
        ) {
            let words = |ids: &[usize]| ids.iter().map(|i| format!("w{i}")).collect::<Vec<_>>();
            let toks: Vec<Vec<String>> = docs.iter().map(|d| words(d)).collect();
            let passages: Vec<Passage> = toks
                .iter()
                .enumerate()
                .map(|(i, t)| passage(&format!("p{i}"), &t.join(" ")))
                .collect();
            let variant = [Bm25Variant::Robertson, Bm25Variant::Atire, Bm25Variant::Lucene][v];
            let p = Bm25Params::new().k1(k1).b(b).variant(variant);
            let r = Bm25::build(&passages, &Analyzer::plain(), p).unwrap();
            let q = words(&query);
            let got = r.score_all(&q.join(" "));
            let want = naive(&toks, &q, p);
            for (g, w) in got.iter().zip(&want) {
                prop_assert!((*g as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()), "{got:?} vs {want:?}");
            }
        }
    }
}
