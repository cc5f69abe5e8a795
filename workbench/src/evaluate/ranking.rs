//! Ranking metrics over a [`Run`] and [`Qrels`], computed as `trec_eval` 9.0.8
//! computes them (checked against trec_eval's own C code through pytrec_eval in
//! `tests/trec_eval.rs`).
//!
//! # Conventions (shared by every metric here)
//!
//! Every choice below is an [`EvalOptions`] field; the defaults are trec_eval's.
//!
//! - **Which queries count** ([`QuerySet`]). By default
//!   ([`QuerySet::RunAndQrels`], trec_eval without `-c`) a metric is averaged over
//!   every query that is in both the run and the qrels, and a query whose qrels
//!   hold no relevant document scores 0 on every metric. Run queries that the
//!   qrels do not contain are ignored; qrels queries that the run does not contain
//!   are left out. [`QuerySet::Qrels`] (trec_eval `-c`) averages over every qrels
//!   query instead, a query missing from the run scoring 0.
//!   [`QuerySet::JudgedRelevant`] is the BEIR / ir_measures rule this crate used
//!   before: qrels queries with at least one relevant document (grade
//!   `>= rel_threshold` for the binary metrics, grade `> 0` for nDCG), missing
//!   queries scoring 0. [`MetricResult::queries`] says how many queries a mean
//!   covers. A query the run holds with an empty hit list is in the run: it scores
//!   0, as pytrec_eval scores an empty ranking. A TREC run file cannot hold such a
//!   query (it has no line), so `trec_eval` on a written run leaves it out.
//! - **Order** ([`HitOrder`]). By default ([`HitOrder::TrecEval`]) each query's
//!   hits are ranked as trec_eval ranks them, whatever their order in the `Vec`:
//!   by score descending, compared as `f32` (trec_eval 9.0.8 stores scores in a C
//!   `float`; so does pytrec_eval 0.5.x), ties broken by document id
//!   **descending**, byte by byte (`strcmp` in `comp_sim_docno`,
//!   `form_res_rels.c`). The rank column of a run file plays no part. So an
//!   in-memory run, the same run written with [`trec::write_run`] and read back
//!   with [`trec::read_run`], and `trec_eval` on that file all give the same
//!   numbers. Retrievers break score ties by *ascending* id
//!   ([`crate::retrieve::Retriever`]), so on tied scores the default order differs
//!   from the `Vec` order; [`HitOrder::AsGiven`] keeps the `Vec` order (the
//!   scores are then not read). With the default order, a NaN score is an
//!   [`Error::InvalidParam`] naming the query and document.
//! - **Relevance threshold.** A document is relevant to the binary metrics
//!   (recall, precision, reciprocal rank, success, MAP) when its grade is
//!   `>= rel_threshold` (default [`DEFAULT_REL_THRESHOLD`] = 1, trec_eval's `-l`).
//!   nDCG ignores the threshold: its gains are the positive grades themselves.
//! - **Unjudged and negative grades.** An unjudged document is non-relevant. A
//!   negative grade (trec_eval: "in the pool but unjudged") is non-relevant and
//!   contributes no gain.
//! - **Repeated ids.** If a query's hits repeat a document id, the later copies (in
//!   ranked order) keep their rank position but are treated as non-relevant, so a
//!   document is credited once (trec_eval rejects such runs outright).
//! - **Cut-offs.** `k == 0` is an [`Error::InvalidParam`]; `k` beyond the run's
//!   length is fine (missing ranks are non-relevant).
//!
//! Metrics only read their inputs.
//!
//! [`trec::write_run`]: crate::evaluate::trec::write_run
//! [`trec::read_run`]: crate::evaluate::trec::read_run

use crate::{Error, Hit, Qrels, Result, Run};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::str::FromStr;

/// Default minimum grade for a document to count as relevant in the binary
/// metrics (trec_eval's default `-l 1`).
pub const DEFAULT_REL_THRESHOLD: i32 = 1;

/// A metric's value: the mean over the evaluated queries and each query's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricResult {
    /// Metric name, e.g. `ndcg@10` (see [`Metric::name`]).
    pub name: String,
    /// Arithmetic mean of `per_query` (the trec_eval "all" line).
    pub mean: f64,
    /// Query id → value, for every evaluated query (see [`QuerySet`] for which).
    pub per_query: BTreeMap<String, f64>,
}

impl MetricResult {
    /// How many queries the mean averages (trec_eval's `num_q`).
    pub fn queries(&self) -> usize {
        self.per_query.len()
    }
}

/// Which queries a metric is averaged over (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum QuerySet {
    /// Every query in both the run and the qrels; no relevant document → 0
    /// (trec_eval's default).
    #[default]
    RunAndQrels,
    /// Every query of the qrels; missing from the run → 0 (trec_eval `-c`).
    Qrels,
    /// Qrels queries with at least one relevant document (grade ≥ the threshold;
    /// grade > 0 for nDCG); missing from the run → 0 (BEIR / ir_measures).
    JudgedRelevant,
}

/// How each query's hits are ranked before scoring (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum HitOrder {
    /// Score descending (as `f32`), ties by document id descending: trec_eval's
    /// order, whatever the `Vec` order.
    #[default]
    TrecEval,
    /// The `Vec` order, which must already be ranked best first.
    AsGiven,
}

/// How [`evaluate_with`] scores a run. The default is trec_eval's behaviour with
/// `-l 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EvalOptions {
    /// Minimum grade a binary metric counts as relevant (trec_eval `-l`, ≥ 1).
    pub rel_threshold: i32,
    /// Which queries are averaged.
    pub query_set: QuerySet,
    /// How hits are ranked.
    pub order: HitOrder,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            rel_threshold: DEFAULT_REL_THRESHOLD,
            query_set: QuerySet::default(),
            order: HitOrder::default(),
        }
    }
}

impl EvalOptions {
    /// The defaults with another relevance threshold (trec_eval `-l t`).
    pub fn with_threshold(rel_threshold: i32) -> Self {
        EvalOptions {
            rel_threshold,
            ..Self::default()
        }
    }

    /// These options with another query set.
    pub fn query_set(self, query_set: QuerySet) -> Self {
        EvalOptions { query_set, ..self }
    }

    /// These options with another hit order.
    pub fn order(self, order: HitOrder) -> Self {
        EvalOptions { order, ..self }
    }
}

/// trec_eval's ranking order (`comp_sim_docno` in `form_res_rels.c`): higher
/// score first, compared as `f32`; equal scores by document id, the larger id
/// (byte-wise, as `strcmp`) first. `-0.0` and `0.0` are equal, as in C. NaN has
/// no place in trec_eval's order: callers reject it first (this comparison puts
/// it consistently but arbitrarily, by `f32::total_cmp`).
pub fn trec_eval_cmp(a: &Hit, b: &Hit) -> Ordering {
    // `+ 0.0` turns -0.0 into +0.0 so that `total_cmp` agrees with `==`.
    (b.score + 0.0)
        .total_cmp(&(a.score + 0.0))
        .then_with(|| b.id.as_bytes().cmp(a.id.as_bytes()))
}

/// A ranking metric that [`evaluate`] can compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Recall at cut-off k: relevant documents in the top k / all relevant documents
    /// (trec_eval `recall_k`; 0 when the query has no relevant document).
    Recall(usize),
    /// Precision at cut-off k: relevant documents in the top k / k, even when fewer
    /// than k documents were retrieved (trec_eval `P_k`).
    Precision(usize),
    /// Reciprocal rank of the first relevant document within the top k, 0 if none
    /// (ir_measures `RR@k`). trec_eval has no cut-off for `recip_rank`; this equals
    /// its `recip_rank` when that is ≥ 1/k, and 0 otherwise.
    Mrr(usize),
    /// Reciprocal rank of the first relevant document anywhere in the ranking, 0 if
    /// none (trec_eval `recip_rank`).
    RecipRank,
    /// Normalised discounted cumulative gain at k with gain = grade and a
    /// `log2(rank + 1)` discount (trec_eval 9.x `ndcg_cut_k`; Järvelin & Kekäläinen 2002).
    Ndcg(usize),
    /// Mean (uninterpolated) average precision over the full ranking (trec_eval `map`).
    Map,
    /// Success at k: 1 if any relevant document is in the top k, else 0
    /// (trec_eval `success_k`).
    Hits(usize),
}

impl Metric {
    /// The metric's name: `recall@100`, `precision@10`, `mrr@10`, `mrr`, `ndcg@10`,
    /// `map`, `hits@5`. [`Metric::from_str`] parses the same names back.
    pub fn name(&self) -> String {
        match self {
            Metric::Recall(k) => format!("recall@{k}"),
            Metric::Precision(k) => format!("precision@{k}"),
            Metric::Mrr(k) => format!("mrr@{k}"),
            Metric::RecipRank => "mrr".to_string(),
            Metric::Ndcg(k) => format!("ndcg@{k}"),
            Metric::Map => "map".to_string(),
            Metric::Hits(k) => format!("hits@{k}"),
        }
    }

    /// The cut-off, if the metric has one.
    pub fn k(&self) -> Option<usize> {
        match *self {
            Metric::Recall(k)
            | Metric::Precision(k)
            | Metric::Mrr(k)
            | Metric::Ndcg(k)
            | Metric::Hits(k) => Some(k),
            Metric::Map | Metric::RecipRank => None,
        }
    }

    /// Compute this metric with the default options (trec_eval's query set and
    /// order) and the given relevance threshold for binary metrics (ignored by
    /// nDCG, which uses the grades as gains).
    ///
    /// Errors: `k == 0` or `rel_threshold < 1` ([`Error::InvalidParam`]); a NaN
    /// score ([`Error::InvalidParam`]); no query to evaluate ([`Error::Empty`]).
    pub fn compute(&self, run: &Run, qrels: &Qrels, rel_threshold: i32) -> Result<MetricResult> {
        self.compute_with(run, qrels, &EvalOptions::with_threshold(rel_threshold))
    }

    /// Compute this metric with explicit [`EvalOptions`]. Errors as
    /// [`Metric::compute`].
    pub fn compute_with(
        &self,
        run: &Run,
        qrels: &Qrels,
        opts: &EvalOptions,
    ) -> Result<MetricResult> {
        let mut out = evaluate_with(run, qrels, std::slice::from_ref(self), opts)?;
        Ok(out.remove(0))
    }

    fn validate(&self) -> Result<()> {
        match self.k() {
            Some(0) => Err(Error::param(
                "k",
                format!("metric `{}`: the cut-off must be at least 1", self.name()),
            )),
            _ => Ok(()),
        }
    }

    /// The value for one query, from its ranked hits.
    fn score(&self, ranked: &[&Hit], judged: &BTreeMap<String, i32>, t: i32) -> f64 {
        match *self {
            Metric::Recall(k) => {
                let r = num_relevant(judged, t);
                if r == 0 {
                    return 0.0;
                }
                count_relevant(&grades(ranked, judged, k), t) as f64 / r as f64
            }
            Metric::Precision(k) => count_relevant(&grades(ranked, judged, k), t) as f64 / k as f64,
            Metric::Mrr(k) => reciprocal_rank(ranked, judged, k, t),
            Metric::RecipRank => reciprocal_rank(ranked, judged, ranked.len(), t),
            Metric::Hits(k) => {
                if count_relevant(&grades(ranked, judged, k), t) > 0 {
                    1.0
                } else {
                    0.0
                }
            }
            Metric::Map => ap(ranked, judged, t),
            Metric::Ndcg(k) => ndcg(ranked, judged, k),
        }
    }

    /// The threshold that decides this metric's [`QuerySet::JudgedRelevant`]
    /// queries: nDCG's are the queries with a positive grade.
    fn query_threshold(&self, t: i32) -> i32 {
        match self {
            Metric::Ndcg(_) => 1,
            _ => t,
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for Metric {
    type Err = Error;

    /// Parse a name produced by [`Metric::name`] (`recall@100`, `map`, `mrr`, …).
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        match s {
            "map" => return Ok(Metric::Map),
            "mrr" => return Ok(Metric::RecipRank),
            _ => {}
        }
        let bad = || {
            Error::param(
                "metric",
                format!(
                    "unknown metric `{s}`; expected map, mrr, recall@K, precision@K, mrr@K, ndcg@K or hits@K"
                ),
            )
        };
        let (kind, k) = s.split_once('@').ok_or_else(bad)?;
        let k: usize = k.parse().map_err(|_| bad())?;
        let m = match kind {
            "recall" => Metric::Recall(k),
            "precision" => Metric::Precision(k),
            "mrr" => Metric::Mrr(k),
            "ndcg" => Metric::Ndcg(k),
            "hits" => Metric::Hits(k),
            _ => return Err(bad()),
        };
        m.validate()?;
        Ok(m)
    }
}

/// Compute several metrics with the default options: trec_eval's query set and
/// order, grade ≥ 1 relevant.
///
/// All metrics are validated before any is computed. Errors as
/// [`Metric::compute`], plus an empty `metrics` list ([`Error::InvalidParam`]).
pub fn evaluate(run: &Run, qrels: &Qrels, metrics: &[Metric]) -> Result<Vec<MetricResult>> {
    evaluate_with(run, qrels, metrics, &EvalOptions::default())
}

/// [`evaluate`] with a custom minimum grade for the binary metrics (trec_eval `-l`).
pub fn evaluate_with_threshold(
    run: &Run,
    qrels: &Qrels,
    metrics: &[Metric],
    rel_threshold: i32,
) -> Result<Vec<MetricResult>> {
    evaluate_with(
        run,
        qrels,
        metrics,
        &EvalOptions::with_threshold(rel_threshold),
    )
}

/// Compute several metrics with explicit [`EvalOptions`]. Each query is ranked
/// once and shared by all metrics.
///
/// Errors: an empty `metrics` list, `k == 0` or `rel_threshold < 1`
/// ([`Error::InvalidParam`]); with [`HitOrder::TrecEval`], a NaN score in a query
/// that is evaluated ([`Error::InvalidParam`] naming the query and document); no
/// query to evaluate under the query set ([`Error::Empty`]).
pub fn evaluate_with(
    run: &Run,
    qrels: &Qrels,
    metrics: &[Metric],
    opts: &EvalOptions,
) -> Result<Vec<MetricResult>> {
    if metrics.is_empty() {
        return Err(Error::param("metrics", "at least one metric is required"));
    }
    check_threshold(opts.rel_threshold)?;
    for m in metrics {
        m.validate()?;
    }
    // Rank every run query that the qrels judge; the others are never evaluated.
    let mut ranked: BTreeMap<&str, Vec<&Hit>> = BTreeMap::new();
    for (qid, hits) in run {
        if qrels.contains_key(qid) {
            ranked.insert(qid.as_str(), rank(qid, hits, opts.order)?);
        }
    }
    let t = opts.rel_threshold;
    metrics
        .iter()
        .map(|m| {
            let name = m.name();
            let qt = m.query_threshold(t);
            let per_query: BTreeMap<String, f64> = qrels
                .iter()
                .filter(|(qid, judged)| match opts.query_set {
                    QuerySet::RunAndQrels => ranked.contains_key(qid.as_str()),
                    QuerySet::Qrels => true,
                    QuerySet::JudgedRelevant => num_relevant(judged, qt) > 0,
                })
                .map(|(qid, judged)| {
                    let hits = ranked.get(qid.as_str()).map(Vec::as_slice).unwrap_or(&[]);
                    (qid.clone(), m.score(hits, judged, t))
                })
                .collect();
            if per_query.is_empty() {
                let why = match opts.query_set {
                    QuerySet::RunAndQrels => {
                        "no query is in both the run and the qrels".to_string()
                    }
                    QuerySet::Qrels => "the qrels hold no query".to_string(),
                    QuerySet::JudgedRelevant => {
                        format!("no query in the qrels has a document with grade >= {qt}")
                    }
                };
                return Err(Error::Empty(format!("`{name}`: {why}")));
            }
            let mean = per_query.values().sum::<f64>() / per_query.len() as f64;
            Ok(MetricResult {
                name,
                mean,
                per_query,
            })
        })
        .collect()
}

/// One query's hits in the order the metrics read them.
fn rank<'a>(qid: &str, hits: &'a [Hit], order: HitOrder) -> Result<Vec<&'a Hit>> {
    let mut v: Vec<&Hit> = hits.iter().collect();
    if order == HitOrder::TrecEval {
        if let Some(h) = hits.iter().find(|h| h.score.is_nan()) {
            return Err(Error::param(
                "run",
                format!(
                    "query `{qid}`: document `{}` has a NaN score, which has no rank",
                    h.id
                ),
            ));
        }
        v.sort_by(|a, b| trec_eval_cmp(a, b));
    }
    Ok(v)
}

/// Recall@k (grade ≥ 1 is relevant; default options). See [`Metric::Recall`].
pub fn recall_at_k(run: &Run, qrels: &Qrels, k: usize) -> Result<MetricResult> {
    Metric::Recall(k).compute(run, qrels, DEFAULT_REL_THRESHOLD)
}

/// Precision@k (grade ≥ 1 is relevant; default options). See [`Metric::Precision`].
pub fn precision_at_k(run: &Run, qrels: &Qrels, k: usize) -> Result<MetricResult> {
    Metric::Precision(k).compute(run, qrels, DEFAULT_REL_THRESHOLD)
}

/// MRR@k (grade ≥ 1 is relevant; default options). See [`Metric::Mrr`].
pub fn mrr_at_k(run: &Run, qrels: &Qrels, k: usize) -> Result<MetricResult> {
    Metric::Mrr(k).compute(run, qrels, DEFAULT_REL_THRESHOLD)
}

/// nDCG@k with graded gains (default options). See [`Metric::Ndcg`].
pub fn ndcg_at_k(run: &Run, qrels: &Qrels, k: usize) -> Result<MetricResult> {
    Metric::Ndcg(k).compute(run, qrels, DEFAULT_REL_THRESHOLD)
}

/// Hits@k, a.k.a. success@k (grade ≥ 1 is relevant; default options). See
/// [`Metric::Hits`].
pub fn hits_at_k(run: &Run, qrels: &Qrels, k: usize) -> Result<MetricResult> {
    Metric::Hits(k).compute(run, qrels, DEFAULT_REL_THRESHOLD)
}

/// MAP: the mean of [`average_precision`] over the evaluated queries (grade ≥ 1 is
/// relevant; default options). See [`Metric::Map`].
pub fn map(run: &Run, qrels: &Qrels) -> Result<MetricResult> {
    Metric::Map.compute(run, qrels, DEFAULT_REL_THRESHOLD)
}

/// Uninterpolated average precision of one ranking, taken in the given order
/// (trec_eval `map`, per query):
///
/// `AP = (1 / R) · Σ_{r : doc at rank r relevant} P@r`
///
/// over the whole ranking, where `R` is the number of documents in `judged` with
/// grade `>= rel_threshold` (relevant documents never retrieved contribute 0).
/// Returns 0 when `R == 0`.
pub fn average_precision(hits: &[Hit], judged: &BTreeMap<String, i32>, rel_threshold: i32) -> f64 {
    let refs: Vec<&Hit> = hits.iter().collect();
    ap(&refs, judged, rel_threshold)
}

fn ap(ranked: &[&Hit], judged: &BTreeMap<String, i32>, rel_threshold: i32) -> f64 {
    let r = num_relevant(judged, rel_threshold);
    if r == 0 {
        return 0.0;
    }
    let mut found = 0usize;
    let mut sum = 0.0;
    for (i, g) in grades(ranked, judged, ranked.len()).into_iter().enumerate() {
        if g >= rel_threshold {
            found += 1;
            sum += found as f64 / (i + 1) as f64;
        }
    }
    sum / r as f64
}

/// 1 / (rank of the first relevant document within the first `depth`), or 0.
fn reciprocal_rank(ranked: &[&Hit], judged: &BTreeMap<String, i32>, depth: usize, t: i32) -> f64 {
    grades(ranked, judged, depth)
        .iter()
        .position(|&g| g >= t)
        .map_or(0.0, |i| 1.0 / (i + 1) as f64)
}

/// nDCG@k of one ranking, as trec_eval 9.x `ndcg_cut` (Järvelin & Kekäläinen 2002):
///
/// `DCG@k = Σ_{r=1..k} gain_r / log2(r + 1)`, with `gain_r` = the grade of the
/// document at rank r (0 if unjudged or negative); the ideal DCG@k applies the
/// same formula to all positive grades of `judged` sorted descending.
/// Returns 0 when no grade is positive.
fn ndcg(ranked: &[&Hit], judged: &BTreeMap<String, i32>, k: usize) -> f64 {
    let dcg: f64 = grades(ranked, judged, k)
        .into_iter()
        .enumerate()
        .filter(|&(_, g)| g > 0)
        .map(|(i, g)| f64::from(g) / ((i + 2) as f64).log2())
        .sum();
    let mut ideal: Vec<i32> = judged.values().copied().filter(|&g| g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal
        .into_iter()
        .take(k)
        .enumerate()
        .map(|(i, g)| f64::from(g) / ((i + 2) as f64).log2())
        .sum();
    if idcg > 0.0 {
        dcg / idcg
    } else {
        0.0
    }
}

/// Grades of the first `depth` ranked hits: the judged grade, 0 for an unjudged
/// document or a repeat of an id already seen higher up.
fn grades(ranked: &[&Hit], judged: &BTreeMap<String, i32>, depth: usize) -> Vec<i32> {
    let mut seen = HashSet::new();
    ranked
        .iter()
        .take(depth)
        .map(|h| {
            if seen.insert(h.id.as_str()) {
                judged.get(&h.id).copied().unwrap_or(0)
            } else {
                0
            }
        })
        .collect()
}

fn count_relevant(grades: &[i32], t: i32) -> usize {
    grades.iter().filter(|&&g| g >= t).count()
}

fn num_relevant(judged: &BTreeMap<String, i32>, t: i32) -> usize {
    judged.values().filter(|&&g| g >= t).count()
}

fn check_threshold(t: i32) -> Result<()> {
    if t < 1 {
        return Err(Error::param(
            "rel_threshold",
            format!("must be at least 1 (grade 0 means judged non-relevant), got {t}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn qrels_of(rows: &[(&str, &str, i32)]) -> Qrels {
        let mut q = Qrels::new();
        for &(qid, doc, g) in rows {
            q.entry(qid.to_string())
                .or_default()
                .insert(doc.to_string(), g);
        }
        q
    }

    fn run_of(rows: &[(&str, &[&str])]) -> Run {
        rows.iter()
            .map(|&(qid, docs)| {
                let n = docs.len();
                let hits = docs
                    .iter()
                    .enumerate()
                    .map(|(i, d)| Hit::new(*d, (n - i) as f32))
                    .collect();
                (qid.to_string(), hits)
            })
            .collect()
    }

    /// The hand-checked fixture. Scores fall with the rank, so every order agrees.
    ///
    /// qrels: q1 {d1:2, d2:1, d3:0, d4:1} (3 relevant), q2 {d5:1}, q3 {d9:0}
    /// (no relevant doc), q4 {d7:1} (absent from the run).
    /// run:   q1 [d3, d1, d8, d2, d6], q2 [d6, d7, d8, d5], q3 [d9], q5 [d1]
    /// (q5 unjudged → never evaluated).
    ///
    /// Query sets: trec_eval's default (run ∩ qrels) is q1, q2, q3; `-c` (all
    /// qrels) is q1, q2, q3, q4; the old judged-relevant rule is q1, q2, q4.
    ///
    /// q1 grades by rank: 0, 2, -, 1, - (relevant at ranks 2 and 4).
    /// q2 grades by rank: -, -, -, 1   (relevant at rank 4).
    fn fixture() -> (Run, Qrels) {
        let qrels = qrels_of(&[
            ("q1", "d1", 2),
            ("q1", "d2", 1),
            ("q1", "d3", 0),
            ("q1", "d4", 1),
            ("q2", "d5", 1),
            ("q3", "d9", 0),
            ("q4", "d7", 1),
        ]);
        let run = run_of(&[
            ("q1", &["d3", "d1", "d8", "d2", "d6"]),
            ("q2", &["d6", "d7", "d8", "d5"]),
            ("q3", &["d9"]),
            ("q5", &["d1"]),
        ]);
        (run, qrels)
    }

    /// The crate's former rule: judged queries with a relevant document.
    fn judged(t: i32) -> EvalOptions {
        EvalOptions::with_threshold(t).query_set(QuerySet::JudgedRelevant)
    }

    fn old(m: Metric) -> MetricResult {
        let (run, qrels) = fixture();
        m.compute_with(&run, &qrels, &judged(1)).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    fn assert_pq(r: &MetricResult, expected: &[(&str, f64)]) {
        let keys: Vec<&str> = r.per_query.keys().map(String::as_str).collect();
        let want: Vec<&str> = expected.iter().map(|e| e.0).collect();
        assert_eq!(keys, want, "{}: evaluated queries", r.name);
        assert_eq!(r.queries(), expected.len());
        for &(q, v) in expected {
            assert!(
                close(r.per_query[q], v),
                "{} {q}: {} != {v}",
                r.name,
                r.per_query[q]
            );
        }
        let mean = expected.iter().map(|e| e.1).sum::<f64>() / expected.len() as f64;
        assert!(close(r.mean, mean), "{} mean: {} != {mean}", r.name, r.mean);
    }

    #[test]
    fn recall_by_hand() {
        // recall@1: q1 0/3, q2 0/1, q4 0.
        assert_pq(
            &old(Metric::Recall(1)),
            &[("q1", 0.0), ("q2", 0.0), ("q4", 0.0)],
        );
        // recall@2: q1 {d1} → 1/3.
        assert_pq(
            &old(Metric::Recall(2)),
            &[("q1", 1.0 / 3.0), ("q2", 0.0), ("q4", 0.0)],
        );
        // recall@5: q1 {d1, d2} → 2/3; q2 {d5} → 1; mean (2/3 + 1 + 0) / 3 = 5/9.
        let r5 = old(Metric::Recall(5));
        assert_eq!(r5.name, "recall@5");
        assert_pq(&r5, &[("q1", 2.0 / 3.0), ("q2", 1.0), ("q4", 0.0)]);
        assert!(close(r5.mean, 5.0 / 9.0));
    }

    #[test]
    fn precision_by_hand() {
        // P@2: q1 1/2, q2 0/2.
        assert_pq(
            &old(Metric::Precision(2)),
            &[("q1", 0.5), ("q2", 0.0), ("q4", 0.0)],
        );
        // P@10 divides by 10 even though q1 retrieved only 5 (trec_eval P_10): q1 2/10, q2 1/10.
        assert_pq(
            &old(Metric::Precision(10)),
            &[("q1", 0.2), ("q2", 0.1), ("q4", 0.0)],
        );
    }

    #[test]
    fn mrr_and_hits_by_hand() {
        // MRR@10: q1 first relevant at rank 2 → 1/2; q2 at rank 4 → 1/4; q4 0.
        // mean (0.5 + 0.25 + 0) / 3 = 0.25.
        let m = old(Metric::Mrr(10));
        assert_eq!(m.name, "mrr@10");
        assert_pq(&m, &[("q1", 0.5), ("q2", 0.25), ("q4", 0.0)]);
        assert!(close(m.mean, 0.25));
        // MRR@3: q2's rank-4 hit is cut off; without a cut-off it counts.
        assert_pq(
            &old(Metric::Mrr(3)),
            &[("q1", 0.5), ("q2", 0.0), ("q4", 0.0)],
        );
        let rr = old(Metric::RecipRank);
        assert_eq!(rr.name, "mrr");
        assert_pq(&rr, &[("q1", 0.5), ("q2", 0.25), ("q4", 0.0)]);
        // hits@3: q1 yes, q2 no.
        assert_pq(
            &old(Metric::Hits(3)),
            &[("q1", 1.0), ("q2", 0.0), ("q4", 0.0)],
        );
    }

    #[test]
    fn ndcg_by_hand() {
        let l = |r: f64| r.log2();
        // q1: DCG@10 = 2/log2(3) + 1/log2(5)            (grade 2 at rank 2, grade 1 at rank 4)
        //          = 1.2618595 + 0.4306766 = 1.6925361
        //     IDCG@10 from grades [2, 1, 1] (d3's 0 gives nothing):
        //          = 2/log2(2) + 1/log2(3) + 1/log2(4) = 2 + 0.6309298 + 0.5 = 3.1309298
        //     nDCG = 0.5405858
        let q1 = (2.0 / l(3.0) + 1.0 / l(5.0)) / (2.0 + 1.0 / l(3.0) + 1.0 / l(4.0));
        assert!((q1 - 0.5405857679).abs() < 1e-9);
        // q2: (1/log2(5)) / (1/log2(2)) = 0.4306766
        let q2 = 1.0 / l(5.0);
        assert!((q2 - 0.4306765581).abs() < 1e-9);
        // mean = (0.5405858 + 0.4306766 + 0) / 3 = 0.3237541
        let n = old(Metric::Ndcg(10));
        assert_eq!(n.name, "ndcg@10");
        assert_pq(&n, &[("q1", q1), ("q2", q2), ("q4", 0.0)]);
        assert!((n.mean - 0.3237541087).abs() < 1e-9);
        // nDCG@2 for q1: (2/log2(3)) / (2 + 1/log2(3)) = 1.2618595 / 2.6309298 = 0.4796249
        // (the ideal ranking is cut at k too).
        let n2 = old(Metric::Ndcg(2));
        assert!((n2.per_query["q1"] - 0.4796249331).abs() < 1e-9);
        // nDCG@1 for q1: rank 1 is d3 (grade 0) → 0.
        assert_eq!(old(Metric::Ndcg(1)).per_query["q1"], 0.0);
    }

    #[test]
    fn map_by_hand() {
        // q1: relevant at rank 2 (P@2 = 1/2) and rank 4 (P@4 = 2/4); d4 never
        //     retrieved. AP = (1/2 + 1/2) / 3 = 1/3.
        // q2: relevant at rank 4 (P@4 = 1/4). AP = 1/4.
        // MAP = (1/3 + 1/4 + 0) / 3 = 7/36.
        let m = old(Metric::Map);
        assert_eq!(m.name, "map");
        assert_pq(&m, &[("q1", 1.0 / 3.0), ("q2", 0.25), ("q4", 0.0)]);
        assert!(close(m.mean, 7.0 / 36.0));
    }

    #[test]
    fn default_query_set_is_trec_evals() {
        let (run, qrels) = fixture();
        // Default (trec_eval): q1, q2 and q3 (in run and qrels; q3 has no relevant
        // document and scores 0); q4 is not in the run, q5 not in the qrels.
        let ms = [
            Metric::Recall(5),
            Metric::Map,
            Metric::Ndcg(10),
            Metric::Mrr(10),
        ];
        let out = evaluate(&run, &qrels, &ms).unwrap();
        assert_pq(&out[0], &[("q1", 2.0 / 3.0), ("q2", 1.0), ("q3", 0.0)]);
        assert_pq(&out[1], &[("q1", 1.0 / 3.0), ("q2", 0.25), ("q3", 0.0)]);
        assert_eq!(out[2].queries(), 3);
        assert_pq(&out[3], &[("q1", 0.5), ("q2", 0.25), ("q3", 0.0)]);
        // `-c`: every qrels query; q4 scores 0.
        let all = evaluate_with(
            &run,
            &qrels,
            &ms,
            &EvalOptions::default().query_set(QuerySet::Qrels),
        )
        .unwrap();
        assert_pq(
            &all[1],
            &[("q1", 1.0 / 3.0), ("q2", 0.25), ("q3", 0.0), ("q4", 0.0)],
        );
        // Judged-relevant: q1, q2, q4.
        let j = evaluate_with(&run, &qrels, &ms, &judged(1)).unwrap();
        assert_pq(&j[1], &[("q1", 1.0 / 3.0), ("q2", 0.25), ("q4", 0.0)]);
        // A run query with an empty hit list is in the run: it scores 0.
        let mut run2 = run.clone();
        run2.insert("q4".into(), Vec::new());
        let r = Metric::Map.compute(&run2, &qrels, 1).unwrap();
        assert_pq(
            &r,
            &[("q1", 1.0 / 3.0), ("q2", 0.25), ("q3", 0.0), ("q4", 0.0)],
        );
    }

    #[test]
    fn rel_threshold_changes_relevance_and_query_set() {
        let (run, qrels) = fixture();
        // With grade >= 2 only q1/d1 is relevant; q2 and q4 have no relevant doc.
        let ms = [
            Metric::Recall(5),
            Metric::Map,
            Metric::Mrr(10),
            Metric::Ndcg(10),
        ];
        let out = evaluate_with(&run, &qrels, &ms, &judged(2)).unwrap();
        assert_pq(&out[0], &[("q1", 1.0)]);
        assert_pq(&out[1], &[("q1", 0.5)]); // d1 at rank 2: AP = (1/2) / 1
        assert_pq(&out[2], &[("q1", 0.5)]);
        // nDCG ignores the threshold: graded gains, queries with any positive grade.
        assert_eq!(out[3].per_query.len(), 3);
        // trec_eval's rule keeps q2 and q3 at 0 instead (-l 2).
        let out = evaluate_with_threshold(&run, &qrels, &ms, 2).unwrap();
        assert_pq(&out[0], &[("q1", 1.0), ("q2", 0.0), ("q3", 0.0)]);
        assert_pq(&out[2], &[("q1", 0.5), ("q2", 0.0), ("q3", 0.0)]);
        // nDCG is the same at any threshold.
        assert_eq!(
            out[3],
            evaluate(&run, &qrels, &[Metric::Ndcg(10)]).unwrap()[0]
        );
        assert!(evaluate_with_threshold(&run, &qrels, &[Metric::Map], 0).is_err());
    }

    #[test]
    fn evaluate_names_and_order() {
        let (run, qrels) = fixture();
        let ms = [
            Metric::Recall(100),
            Metric::Precision(10),
            Metric::Mrr(10),
            Metric::RecipRank,
            Metric::Ndcg(10),
            Metric::Map,
            Metric::Hits(5),
        ];
        let out = evaluate(&run, &qrels, &ms).unwrap();
        let names: Vec<&str> = out.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "recall@100",
                "precision@10",
                "mrr@10",
                "mrr",
                "ndcg@10",
                "map",
                "hits@5"
            ]
        );
        for m in ms {
            assert_eq!(m.name().parse::<Metric>().unwrap(), m);
            assert_eq!(m.to_string(), m.name());
        }
        assert!("ndcg@0".parse::<Metric>().is_err());
        assert!("bleu@4".parse::<Metric>().is_err());
        assert!("recall".parse::<Metric>().is_err());
    }

    #[test]
    fn k_zero_and_empty_are_errors() {
        let (run, qrels) = fixture();
        for m in [
            Metric::Recall(0),
            Metric::Precision(0),
            Metric::Mrr(0),
            Metric::Ndcg(0),
            Metric::Hits(0),
        ] {
            let e = evaluate(&run, &qrels, &[Metric::Map, m]).unwrap_err();
            assert!(matches!(e, Error::InvalidParam { name: "k", .. }), "{e}");
        }
        assert!(matches!(
            recall_at_k(&run, &qrels, 0),
            Err(Error::InvalidParam { name: "k", .. })
        ));
        assert!(evaluate(&run, &qrels, &[]).is_err());
        // Qrels with no relevant document: trec_eval scores the query 0; the
        // judged-relevant rule has nothing to average.
        let none = qrels_of(&[("q3", "d9", 0)]);
        assert_pq(&map(&run, &none).unwrap(), &[("q3", 0.0)]);
        assert!(matches!(
            Metric::Map.compute_with(&run, &none, &judged(1)),
            Err(Error::Empty(_))
        ));
        // No query in both run and qrels.
        let other = qrels_of(&[("q9", "d1", 1)]);
        let e = map(&run, &other).unwrap_err();
        assert!(
            matches!(e, Error::Empty(_)) && e.to_string().contains("both"),
            "{e}"
        );
        for set in [
            QuerySet::RunAndQrels,
            QuerySet::Qrels,
            QuerySet::JudgedRelevant,
        ] {
            let o = EvalOptions::default().query_set(set);
            assert!(matches!(
                Metric::Map.compute_with(&run, &Qrels::new(), &o),
                Err(Error::Empty(_))
            ));
        }
    }

    #[test]
    fn ties_are_broken_by_descending_id_and_the_vec_order_is_ignored() {
        let qrels = qrels_of(&[("q", "a", 1)]);
        // Three tied scores: trec_eval ranks c, b, a whatever the Vec order.
        let tied = |ids: [&str; 3]| -> Run {
            [(
                "q".to_string(),
                ids.iter().map(|d| Hit::new(*d, 1.0)).collect(),
            )]
            .into()
        };
        for ids in [["a", "b", "c"], ["c", "a", "b"], ["b", "c", "a"]] {
            let r = Metric::RecipRank.compute(&tied(ids), &qrels, 1).unwrap();
            assert_eq!(r.mean, 1.0 / 3.0, "{ids:?}");
        }
        // AsGiven keeps the Vec order.
        let as_given = EvalOptions::default().order(HitOrder::AsGiven);
        let r = Metric::RecipRank
            .compute_with(&tied(["a", "b", "c"]), &qrels, &as_given)
            .unwrap();
        assert_eq!(r.mean, 1.0);
        // Scores decide over the Vec order (ascending here).
        let qrels = qrels_of(&[("q", "rel", 1)]);
        let run: Run = [(
            "q".to_string(),
            vec![Hit::new("junk", 0.1), Hit::new("rel", 0.9)],
        )]
        .into();
        assert_eq!(mrr_at_k(&run, &qrels, 10).unwrap().mean, 1.0);
        assert_eq!(recall_at_k(&run, &qrels, 1).unwrap().mean, 1.0);
        let given = Metric::Mrr(10)
            .compute_with(&run, &qrels, &as_given)
            .unwrap();
        assert_eq!(given.mean, 0.5);
    }

    #[test]
    fn trec_eval_cmp_is_strcmp_descending_and_zero_signs_tie() {
        let mut hits = [
            Hit::new("d10", 0.0),
            Hit::new("B", 0.0),
            Hit::new("d9", -0.0),
            Hit::new("a", 0.0),
            Hit::new("top", 2.0),
            Hit::new("low", -1.0),
        ];
        hits.sort_by(trec_eval_cmp);
        let ids: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
        // Bytes: "B" (0x42) < "a" < "d10" < "d9"; descending among the zeros.
        assert_eq!(ids, ["top", "d9", "d10", "a", "B", "low"]);
    }

    #[test]
    fn nan_scores_are_rejected_when_ranking() {
        let qrels = qrels_of(&[("q", "a", 1)]);
        let run: Run = [(
            "q".to_string(),
            vec![Hit::new("a", 1.0), Hit::new("bad", f32::NAN)],
        )]
        .into();
        let e = map(&run, &qrels).unwrap_err();
        assert!(matches!(e, Error::InvalidParam { name: "run", .. }), "{e}");
        assert!(
            e.to_string().contains("`q`") && e.to_string().contains("`bad`"),
            "{e}"
        );
        // The Vec order needs no scores.
        let as_given = EvalOptions::default().order(HitOrder::AsGiven);
        assert_eq!(
            Metric::Map
                .compute_with(&run, &qrels, &as_given)
                .unwrap()
                .mean,
            1.0
        );
        // A NaN in a query that is not evaluated is not read.
        let mut other = run.clone();
        other.insert("unjudged".into(), vec![Hit::new("x", f32::NAN)]);
        other.insert("q".into(), vec![Hit::new("a", 1.0)]);
        assert_eq!(map(&other, &qrels).unwrap().mean, 1.0);
    }

    #[test]
    fn recip_rank_has_no_cut_off() {
        let qrels = qrels_of(&[("q", "d11", 1)]);
        let docs: Vec<String> = (0..15).map(|i| format!("d{i:02}")).collect();
        let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
        // d11 is at rank 12 (scores fall with the Vec position).
        let run = run_of(&[("q", &refs)]);
        assert_eq!(Metric::Mrr(10).compute(&run, &qrels, 1).unwrap().mean, 0.0);
        assert!(close(
            Metric::RecipRank.compute(&run, &qrels, 1).unwrap().mean,
            1.0 / 12.0
        ));
        assert!(close(
            Metric::Mrr(12).compute(&run, &qrels, 1).unwrap().mean,
            1.0 / 12.0
        ));
    }

    #[test]
    fn repeated_ids_are_credited_once() {
        let qrels = qrels_of(&[("q", "a", 1), ("q", "b", 1)]);
        let run = run_of(&[("q", &["a", "a", "b"])]);
        // ranks: a (rel), a (repeat → non-rel), b (rel)
        assert_eq!(precision_at_k(&run, &qrels, 2).unwrap().mean, 0.5);
        assert_eq!(recall_at_k(&run, &qrels, 2).unwrap().mean, 0.5);
        // AP = (1/1 + 2/3) / 2 = 5/6
        assert!(close(map(&run, &qrels).unwrap().mean, 5.0 / 6.0));
        // DCG@3 = 1 + 1/log2(4) = 1.5; IDCG@3 = 1 + 1/log2(3)
        let want = 1.5 / (1.0 + 1.0 / 3f64.log2());
        assert!(close(ndcg_at_k(&run, &qrels, 3).unwrap().mean, want));
    }

    #[test]
    fn perfect_run_scores_one() {
        let qrels = qrels_of(&[("q", "a", 3), ("q", "b", 1), ("q", "c", 2)]);
        let run = run_of(&[("q", &["a", "c", "b", "x"])]);
        for r in evaluate(
            &run,
            &qrels,
            &[
                Metric::Ndcg(10),
                Metric::Map,
                Metric::Recall(3),
                Metric::Mrr(1),
                Metric::RecipRank,
            ],
        )
        .unwrap()
        {
            assert!(close(r.mean, 1.0), "{}: {}", r.name, r.mean);
        }
    }

    fn arb_case() -> impl Strategy<Value = (Run, Qrels)> {
        // Up to 4 queries over 12 documents; grades in -1..=3; runs of up to 15
        // hits, possibly with repeats, unjudged ids and tied scores.
        let qrels = prop::collection::btree_map(
            0u8..4,
            prop::collection::btree_map(0u8..12, -1i32..=3, 0..8),
            0..4,
        );
        let run = prop::collection::btree_map(
            0u8..5,
            prop::collection::vec((0u8..14, -2i8..3), 0..15),
            0..5,
        );
        (run, qrels).prop_map(|(run, qrels)| {
            let run: Run = run
                .into_iter()
                .map(|(q, hits)| {
                    let hits = hits
                        .into_iter()
                        .map(|(d, s)| Hit::new(format!("d{d}"), f32::from(s) * 0.5))
                        .collect();
                    (format!("q{q}"), hits)
                })
                .collect();
            let qrels: Qrels = qrels
                .into_iter()
                .map(|(q, j)| {
                    let j = j.into_iter().map(|(d, g)| (format!("d{d}"), g)).collect();
                    (format!("q{q}"), j)
                })
                .collect();
            (run, qrels)
        })
    }

    proptest! {
        #[test]
        fn metrics_in_unit_interval_and_recall_monotone((run, qrels) in arb_case(), k in 1usize..20) {
            let before = (run.clone(), qrels.clone());
            let ms = [
                Metric::Recall(k),
                Metric::Precision(k),
                Metric::Mrr(k),
                Metric::RecipRank,
                Metric::Ndcg(k),
                Metric::Map,
                Metric::Hits(k),
            ];
            match evaluate(&run, &qrels, &ms) {
                Ok(out) => {
                    for r in &out {
                        prop_assert!((0.0..=1.0).contains(&r.mean), "{} mean {}", r.name, r.mean);
                        for (q, v) in &r.per_query {
                            prop_assert!((0.0..=1.0).contains(v), "{} {q} {v}", r.name);
                            prop_assert!(run.contains_key(q) && qrels.contains_key(q));
                        }
                    }
                    let lo = recall_at_k(&run, &qrels, k).unwrap();
                    let hi = recall_at_k(&run, &qrels, k + 1).unwrap();
                    for (q, v) in &lo.per_query {
                        prop_assert!(hi.per_query[q] >= *v);
                    }
                    prop_assert!(hi.mean >= lo.mean);
                    // RR@k ≤ RR, with equality once k covers the whole ranking.
                    for (q, v) in &out[2].per_query {
                        prop_assert!(*v <= out[3].per_query[q]);
                    }
                    // The Vec order does not matter: reversing every list changes nothing.
                    let rev: Run = run
                        .iter()
                        .map(|(q, h)| (q.clone(), h.iter().rev().cloned().collect()))
                        .collect();
                    prop_assert_eq!(&evaluate(&rev, &qrels, &ms).unwrap(), &out);
                }
                // Only legitimate failure: no query in both the run and the qrels.
                Err(Error::Empty(_)) => {
                    prop_assert!(run.keys().all(|q| !qrels.contains_key(q)));
                }
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
            prop_assert_eq!(&before.0, &run);
            prop_assert_eq!(&before.1, &qrels);
        }
    }
}
