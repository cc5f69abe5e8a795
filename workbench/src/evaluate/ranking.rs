//! Ranking metrics over a [`Run`] and [`Qrels`], following trec_eval conventions.
//!
//! # Conventions (shared by every metric here)
//!
//! - **Which queries count.** A metric is averaged over the queries of the qrels
//!   that have at least one *relevant* judgement: grade `>= rel_threshold` for the
//!   binary metrics (recall, precision, MRR, hits, MAP; the threshold defaults to
//!   [`DEFAULT_REL_THRESHOLD`] = 1, trec_eval's `-l 1`), grade `> 0` for nDCG, whose
//!   gains are the grades themselves. With the default threshold both sets are the
//!   same. trec_eval would also average over judged queries with no relevant
//!   document (scoring them 0); like BEIR / ir_measures we leave those out, since
//!   no ranking can score on them.
//! - **Missing queries.** A judged query that the run does not contain scores 0
//!   (trec_eval `-c`). Run queries that the qrels do not contain are ignored.
//! - **Order.** Hits are taken in the order of the run's `Vec`, which must already
//!   be ranked best first; the metrics never re-sort. (trec_eval re-sorts by score,
//!   breaking ties by *descending* document id, `comp_sim_docno` in
//!   `form_res_rels.c`; [`crate::retrieve::top_k`] breaks ties by ascending id, so
//!   results can differ from trec_eval on score ties only.)
//! - **Unjudged and negative grades.** An unjudged document is non-relevant. A
//!   negative grade (trec_eval: "in the pool but unjudged") is non-relevant and
//!   contributes no gain.
//! - **Repeated ids.** If a query's hits repeat a document id, the later copies keep
//!   their rank position but are treated as non-relevant, so a document is credited
//!   once (trec_eval rejects such runs outright).
//! - **Cut-offs.** `k == 0` is an [`Error::InvalidParam`]; `k` beyond the run's
//!   length is fine (missing ranks are non-relevant).
//!
//! Metrics only read their inputs.

use crate::{Error, Hit, Qrels, Result, Run};
use serde::{Deserialize, Serialize};
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
    /// Query id → value, for every evaluated query (see the module docs for which).
    pub per_query: BTreeMap<String, f64>,
}

/// A ranking metric that [`evaluate`] can compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Recall at cut-off k: relevant documents in the top k / all relevant documents
    /// (trec_eval `recall_k`).
    Recall(usize),
    /// Precision at cut-off k: relevant documents in the top k / k, even when fewer
    /// than k documents were retrieved (trec_eval `P_k`).
    Precision(usize),
    /// Reciprocal rank of the first relevant document within the top k, 0 if none
    /// (trec_eval `recip_rank` with a cut-off; ir_measures `RR@k`).
    Mrr(usize),
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
    /// The metric's name: `recall@100`, `precision@10`, `mrr@10`, `ndcg@10`, `map`,
    /// `hits@5`. [`Metric::from_str`] parses the same names back.
    pub fn name(&self) -> String {
        match self {
            Metric::Recall(k) => format!("recall@{k}"),
            Metric::Precision(k) => format!("precision@{k}"),
            Metric::Mrr(k) => format!("mrr@{k}"),
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
            Metric::Map => None,
        }
    }

    /// Compute this metric with the given relevance threshold for binary metrics
    /// (ignored by nDCG, which uses the grades as gains).
    ///
    /// Errors: `k == 0` or `rel_threshold < 1` ([`Error::InvalidParam`]); no query
    /// in `qrels` has a relevant judgement ([`Error::Empty`]).
    pub fn compute(&self, run: &Run, qrels: &Qrels, rel_threshold: i32) -> Result<MetricResult> {
        self.validate()?;
        check_threshold(rel_threshold)?;
        let name = self.name();
        let t = rel_threshold;
        match *self {
            Metric::Recall(k) => per_query(run, qrels, name, t, |hits, judged| {
                let found = count_relevant(&grades(hits, judged, k), t);
                found as f64 / num_relevant(judged, t) as f64
            }),
            Metric::Precision(k) => per_query(run, qrels, name, t, |hits, judged| {
                count_relevant(&grades(hits, judged, k), t) as f64 / k as f64
            }),
            Metric::Mrr(k) => per_query(run, qrels, name, t, |hits, judged| {
                grades(hits, judged, k)
                    .iter()
                    .position(|&g| g >= t)
                    .map_or(0.0, |i| 1.0 / (i + 1) as f64)
            }),
            Metric::Hits(k) => per_query(run, qrels, name, t, |hits, judged| {
                if count_relevant(&grades(hits, judged, k), t) > 0 {
                    1.0
                } else {
                    0.0
                }
            }),
            Metric::Map => per_query(run, qrels, name, t, |hits, judged| {
                average_precision(hits, judged, t)
            }),
            // nDCG's query set is "has a positive grade", i.e. threshold 1.
            Metric::Ndcg(k) => per_query(run, qrels, name, 1, |hits, judged| ndcg(hits, judged, k)),
        }
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
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for Metric {
    type Err = Error;

    /// Parse a name produced by [`Metric::name`] (`recall@100`, `map`, …).
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        if s == "map" {
            return Ok(Metric::Map);
        }
        let bad = || {
            Error::param(
                "metric",
                format!(
                    "unknown metric `{s}`; expected map, recall@K, precision@K, mrr@K, ndcg@K or hits@K"
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

/// Compute several metrics with the default relevance threshold (grade ≥ 1).
///
/// All metrics are validated before any is computed. Errors as
/// [`Metric::compute`], plus an empty `metrics` list ([`Error::InvalidParam`]).
pub fn evaluate(run: &Run, qrels: &Qrels, metrics: &[Metric]) -> Result<Vec<MetricResult>> {
    evaluate_with_threshold(run, qrels, metrics, DEFAULT_REL_THRESHOLD)
}

/// [`evaluate`] with a custom minimum grade for the binary metrics (trec_eval `-l`).
pub fn evaluate_with_threshold(
    run: &Run,
    qrels: &Qrels,
    metrics: &[Metric],
    rel_threshold: i32,
) -> Result<Vec<MetricResult>> {
    if metrics.is_empty() {
        return Err(Error::param("metrics", "at least one metric is required"));
    }
    check_threshold(rel_threshold)?;
    for m in metrics {
        m.validate()?;
    }
    metrics
        .iter()
        .map(|m| m.compute(run, qrels, rel_threshold))
        .collect()
}

/// Recall@k (grade ≥ 1 is relevant). See [`Metric::Recall`].
pub fn recall_at_k(run: &Run, qrels: &Qrels, k: usize) -> Result<MetricResult> {
    Metric::Recall(k).compute(run, qrels, DEFAULT_REL_THRESHOLD)
}

/// Precision@k (grade ≥ 1 is relevant). See [`Metric::Precision`].
pub fn precision_at_k(run: &Run, qrels: &Qrels, k: usize) -> Result<MetricResult> {
    Metric::Precision(k).compute(run, qrels, DEFAULT_REL_THRESHOLD)
}

/// MRR@k (grade ≥ 1 is relevant). See [`Metric::Mrr`].
pub fn mrr_at_k(run: &Run, qrels: &Qrels, k: usize) -> Result<MetricResult> {
    Metric::Mrr(k).compute(run, qrels, DEFAULT_REL_THRESHOLD)
}

/// nDCG@k with graded gains. See [`Metric::Ndcg`].
pub fn ndcg_at_k(run: &Run, qrels: &Qrels, k: usize) -> Result<MetricResult> {
    Metric::Ndcg(k).compute(run, qrels, DEFAULT_REL_THRESHOLD)
}

/// Hits@k, a.k.a. success@k (grade ≥ 1 is relevant). See [`Metric::Hits`].
pub fn hits_at_k(run: &Run, qrels: &Qrels, k: usize) -> Result<MetricResult> {
    Metric::Hits(k).compute(run, qrels, DEFAULT_REL_THRESHOLD)
}

/// MAP: the mean of [`average_precision`] over the evaluated queries (grade ≥ 1 is
/// relevant). See [`Metric::Map`].
pub fn map(run: &Run, qrels: &Qrels) -> Result<MetricResult> {
    Metric::Map.compute(run, qrels, DEFAULT_REL_THRESHOLD)
}

/// Uninterpolated average precision of one ranking (trec_eval `map`, per query):
///
/// `AP = (1 / R) · Σ_{r : doc at rank r relevant} P@r`
///
/// over the whole ranking, where `R` is the number of documents in `judged` with
/// grade `>= rel_threshold` (relevant documents never retrieved contribute 0).
/// Returns 0 when `R == 0`.
pub fn average_precision(hits: &[Hit], judged: &BTreeMap<String, i32>, rel_threshold: i32) -> f64 {
    let r = num_relevant(judged, rel_threshold);
    if r == 0 {
        return 0.0;
    }
    let mut found = 0usize;
    let mut sum = 0.0;
    for (i, g) in grades(hits, judged, hits.len()).into_iter().enumerate() {
        if g >= rel_threshold {
            found += 1;
            sum += found as f64 / (i + 1) as f64;
        }
    }
    sum / r as f64
}

/// nDCG@k of one ranking, as trec_eval 9.x `ndcg_cut` (Järvelin & Kekäläinen 2002):
///
/// `DCG@k = Σ_{r=1..k} gain_r / log2(r + 1)`, with `gain_r` = the grade of the
/// document at rank r (0 if unjudged or negative); the ideal DCG@k applies the
/// same formula to all positive grades of `judged` sorted descending.
/// Returns 0 when no grade is positive.
fn ndcg(hits: &[Hit], judged: &BTreeMap<String, i32>, k: usize) -> f64 {
    let dcg: f64 = grades(hits, judged, k)
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

/// Grades of the first `depth` hits in run order: the judged grade, 0 for an
/// unjudged document or a repeat of an id already seen higher up.
fn grades(hits: &[Hit], judged: &BTreeMap<String, i32>, depth: usize) -> Vec<i32> {
    let mut seen = HashSet::new();
    hits.iter()
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

/// Apply `f` to every query of `qrels` with a document of grade ≥ `t`; a query
/// missing from the run gets an empty ranking.
fn per_query(
    run: &Run,
    qrels: &Qrels,
    name: String,
    t: i32,
    f: impl Fn(&[Hit], &BTreeMap<String, i32>) -> f64,
) -> Result<MetricResult> {
    let per_query: BTreeMap<String, f64> = qrels
        .iter()
        .filter(|(_, judged)| num_relevant(judged, t) > 0)
        .map(|(qid, judged)| {
            let hits = run.get(qid).map(Vec::as_slice).unwrap_or(&[]);
            (qid.clone(), f(hits, judged))
        })
        .collect();
    if per_query.is_empty() {
        return Err(Error::Empty(format!(
            "`{name}`: no query in the qrels has a document with grade >= {t}"
        )));
    }
    let mean = per_query.values().sum::<f64>() / per_query.len() as f64;
    Ok(MetricResult {
        name,
        mean,
        per_query,
    })
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

    /// The hand-checked fixture.
    ///
    /// qrels: q1 {d1:2, d2:1, d3:0, d4:1} (3 relevant), q2 {d5:1}, q3 {d9:0}
    /// (no relevant doc → not evaluated), q4 {d7:1} (absent from the run → 0).
    /// run:   q1 [d3, d1, d8, d2, d6], q2 [d6, d7, d8, d5], q3 [d9], q5 [d1]
    /// (q5 unjudged → ignored). Evaluated queries: q1, q2, q4.
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

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    fn assert_pq(r: &MetricResult, expected: &[(&str, f64)]) {
        let keys: Vec<&str> = r.per_query.keys().map(String::as_str).collect();
        let want: Vec<&str> = expected.iter().map(|e| e.0).collect();
        assert_eq!(keys, want, "{}: evaluated queries", r.name);
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
        let (run, qrels) = fixture();
        // recall@1: q1 0/3, q2 0/1, q4 0.
        assert_pq(
            &recall_at_k(&run, &qrels, 1).unwrap(),
            &[("q1", 0.0), ("q2", 0.0), ("q4", 0.0)],
        );
        // recall@2: q1 {d1} → 1/3.
        assert_pq(
            &recall_at_k(&run, &qrels, 2).unwrap(),
            &[("q1", 1.0 / 3.0), ("q2", 0.0), ("q4", 0.0)],
        );
        // recall@5: q1 {d1, d2} → 2/3; q2 {d5} → 1; mean (2/3 + 1 + 0) / 3 = 5/9.
        let r5 = recall_at_k(&run, &qrels, 5).unwrap();
        assert_eq!(r5.name, "recall@5");
        assert_pq(&r5, &[("q1", 2.0 / 3.0), ("q2", 1.0), ("q4", 0.0)]);
        assert!(close(r5.mean, 5.0 / 9.0));
    }

    #[test]
    fn precision_by_hand() {
        let (run, qrels) = fixture();
        // P@2: q1 1/2, q2 0/2.
        assert_pq(
            &precision_at_k(&run, &qrels, 2).unwrap(),
            &[("q1", 0.5), ("q2", 0.0), ("q4", 0.0)],
        );
        // P@10 divides by 10 even though q1 retrieved only 5 (trec_eval P_10): q1 2/10, q2 1/10.
        assert_pq(
            &precision_at_k(&run, &qrels, 10).unwrap(),
            &[("q1", 0.2), ("q2", 0.1), ("q4", 0.0)],
        );
    }

    #[test]
    fn mrr_and_hits_by_hand() {
        let (run, qrels) = fixture();
        // MRR@10: q1 first relevant at rank 2 → 1/2; q2 at rank 4 → 1/4; q4 0.
        // mean (0.5 + 0.25 + 0) / 3 = 0.25.
        let m = mrr_at_k(&run, &qrels, 10).unwrap();
        assert_eq!(m.name, "mrr@10");
        assert_pq(&m, &[("q1", 0.5), ("q2", 0.25), ("q4", 0.0)]);
        assert!(close(m.mean, 0.25));
        // MRR@3: q2's rank-4 hit is cut off.
        assert_pq(
            &mrr_at_k(&run, &qrels, 3).unwrap(),
            &[("q1", 0.5), ("q2", 0.0), ("q4", 0.0)],
        );
        // hits@3: q1 yes, q2 no.
        assert_pq(
            &hits_at_k(&run, &qrels, 3).unwrap(),
            &[("q1", 1.0), ("q2", 0.0), ("q4", 0.0)],
        );
    }

    #[test]
    fn ndcg_by_hand() {
        let (run, qrels) = fixture();
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
        let n = ndcg_at_k(&run, &qrels, 10).unwrap();
        assert_eq!(n.name, "ndcg@10");
        assert_pq(&n, &[("q1", q1), ("q2", q2), ("q4", 0.0)]);
        assert!((n.mean - 0.3237541087).abs() < 1e-9);
        // nDCG@2 for q1: (2/log2(3)) / (2 + 1/log2(3)) = 1.2618595 / 2.6309298 = 0.4796249
        // (the ideal ranking is cut at k too).
        let n2 = ndcg_at_k(&run, &qrels, 2).unwrap();
        assert!((n2.per_query["q1"] - 0.4796249331).abs() < 1e-9);
        // nDCG@1 for q1: rank 1 is d3 (grade 0) → 0.
        assert_eq!(ndcg_at_k(&run, &qrels, 1).unwrap().per_query["q1"], 0.0);
    }

    #[test]
    fn map_by_hand() {
        let (run, qrels) = fixture();
        // q1: relevant at rank 2 (P@2 = 1/2) and rank 4 (P@4 = 2/4); d4 never
        //     retrieved. AP = (1/2 + 1/2) / 3 = 1/3.
        // q2: relevant at rank 4 (P@4 = 1/4). AP = 1/4.
        // MAP = (1/3 + 1/4 + 0) / 3 = 7/36.
        let m = map(&run, &qrels).unwrap();
        assert_eq!(m.name, "map");
        assert_pq(&m, &[("q1", 1.0 / 3.0), ("q2", 0.25), ("q4", 0.0)]);
        assert!(close(m.mean, 7.0 / 36.0));
    }

    #[test]
    fn rel_threshold_changes_relevance_and_query_set() {
        let (run, qrels) = fixture();
        // With grade >= 2 only q1/d1 is relevant; q2 and q4 have no relevant doc.
        let out = evaluate_with_threshold(
            &run,
            &qrels,
            &[
                Metric::Recall(5),
                Metric::Map,
                Metric::Mrr(10),
                Metric::Ndcg(10),
            ],
            2,
        )
        .unwrap();
        assert_pq(&out[0], &[("q1", 1.0)]);
        assert_pq(&out[1], &[("q1", 0.5)]); // d1 at rank 2: AP = (1/2) / 1
        assert_pq(&out[2], &[("q1", 0.5)]);
        // nDCG ignores the threshold: graded gains, queries with any positive grade.
        assert_eq!(out[3].per_query.len(), 3);
        assert!(evaluate_with_threshold(&run, &qrels, &[Metric::Map], 0).is_err());
    }

    #[test]
    fn evaluate_names_and_order() {
        let (run, qrels) = fixture();
        let ms = [
            Metric::Recall(100),
            Metric::Precision(10),
            Metric::Mrr(10),
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
        let none = qrels_of(&[("q3", "d9", 0)]);
        assert!(matches!(map(&run, &none), Err(Error::Empty(_))));
        assert!(matches!(map(&run, &Qrels::new()), Err(Error::Empty(_))));
    }

    #[test]
    fn run_order_is_used_not_scores() {
        // Scores ascending: the metric must still take the Vec order.
        let qrels = qrels_of(&[("q", "rel", 1)]);
        let run: Run = [(
            "q".to_string(),
            vec![Hit::new("junk", 0.1), Hit::new("rel", 0.9)],
        )]
        .into();
        assert_eq!(mrr_at_k(&run, &qrels, 10).unwrap().mean, 0.5);
        assert_eq!(recall_at_k(&run, &qrels, 1).unwrap().mean, 0.0);
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
            ],
        )
        .unwrap()
        {
            assert!(close(r.mean, 1.0), "{}: {}", r.name, r.mean);
        }
    }

    fn arb_case() -> impl Strategy<Value = (Run, Qrels)> {
        // Up to 4 queries over 12 documents; grades in -1..=3; runs of up to 15
        // hits, possibly with repeats and unjudged ids.
        let qrels = prop::collection::btree_map(
            0u8..4,
            prop::collection::btree_map(0u8..12, -1i32..=3, 0..8),
            0..4,
        );
        let run = prop::collection::btree_map(
            0u8..5,
            prop::collection::vec((0u8..14, -5.0f32..5.0), 0..15),
            0..5,
        );
        (run, qrels).prop_map(|(run, qrels)| {
            let run: Run = run
                .into_iter()
                .map(|(q, hits)| {
                    let hits = hits
                        .into_iter()
                        .map(|(d, s)| Hit::new(format!("d{d}"), s))
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
                        }
                    }
                    let lo = recall_at_k(&run, &qrels, k).unwrap();
                    let hi = recall_at_k(&run, &qrels, k + 1).unwrap();
                    for (q, v) in &lo.per_query {
                        prop_assert!(hi.per_query[q] >= *v);
                    }
                    prop_assert!(hi.mean >= lo.mean);
                }
                // Only legitimate failure: no query with a relevant document.
                Err(Error::Empty(_)) => {
                    prop_assert!(qrels.values().all(|j| j.values().all(|&g| g < 1)));
                }
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
            prop_assert_eq!(&before.0, &run);
            prop_assert_eq!(&before.1, &qrels);
        }
    }
}
