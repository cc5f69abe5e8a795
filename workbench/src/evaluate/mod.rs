//! Evaluation: ranking metrics, QA metrics, significance tests, TREC files.
//!
//! | file | what it holds | reference |
//! |---|---|---|
//! | [`ranking`] | recall, precision, reciprocal rank (with and without cut-off), nDCG, MAP, success over a [`Run`](crate::Run) and [`Qrels`](crate::Qrels) | trec_eval 9.0.8, checked against its C code (pytrec_eval) in `tests/trec_eval.rs`; Järvelin & Kekäläinen (2002) for nDCG |
//! | [`qa`] | SQuAD exact match and token F1, DPR-style answer recall | SQuAD v2.0 official eval script; Karpukhin et al. (2020) |
//! | [`significance`] | paired t, randomisation, bootstrap and studentised bootstrap tests on per-query scores | Smucker, Allan & Carterette (2007); Efron & Tibshirani (1993); Sakai (2006) |
//! | [`trec`] | read and write TREC run and qrels files | trec_eval file formats |
//! | [`context`] | context precision of the passages a reader was given, and its rank-aware (average precision) variant | report 004; RAGAS |
//! | [`judge`] | an LLM judge (feature `llm`): first-token P(Yes) of a GGUF model shown the question, gold answers and prediction; Cohen's kappa against Match | BERGEN's LLM evaluation (`config/evaluator/default_qa.yaml`: one generated token, the `Yes` / `No` logits, given the question, the golden answer and the generated answer) |
//! | [`calibration`] | a judge's agreement with labelled predictions: the P(Yes) cut with the highest kappa, bootstrap intervals, cross-validated kappa and accuracy, AUC; the committed record runs take their cut from | RAGAS / ARES calibrate LLM judges on labelled answers; Efron & Tibshirani (1993) |
//! | [`groups`] | report 001's question groups, per-group EM/F1 and winners, answered-only scores, with polars group-bys (feature `parquet`) | report 001 Tables 3–4 |
//!
//! Every ranking metric returns a [`MetricResult`]: the mean over the evaluated
//! queries *and* the per-query values, so the per-query maps can go straight into
//! the paired tests of [`significance`]. By default the metrics score a run as
//! `trec_eval` does (which queries count, how tied scores are ranked; see
//! [`ranking`] and [`EvalOptions`]):
//!
//! ```
//! use workbench::evaluate::{evaluate, significance, Metric};
//! use workbench::{Hit, Qrels, Run};
//!
//! let mut qrels = Qrels::new();
//! for q in ["q1", "q2", "q3"] {
//!     qrels.entry(q.to_string()).or_default().insert(format!("{q}-d1"), 1);
//! }
//! let run_a: Run = ["q1", "q2", "q3"]
//!     .iter()
//!     .map(|q| (q.to_string(), vec![Hit::new(format!("{q}-d1"), 1.0)]))
//!     .collect();
//! let run_b: Run = ["q1", "q2", "q3"]
//!     .iter()
//!     .map(|q| (q.to_string(), vec![Hit::new("other", 2.0), Hit::new(format!("{q}-d1"), 1.0)]))
//!     .collect();
//! let a = evaluate(&run_a, &qrels, &[Metric::Mrr(10)]).unwrap();
//! let b = evaluate(&run_b, &qrels, &[Metric::Mrr(10)]).unwrap();
//! assert_eq!(a[0].name, "mrr@10");
//! assert_eq!((a[0].mean, b[0].mean), (1.0, 0.5));
//! let t = significance::paired_t_test(&a[0].per_query, &b[0].per_query).unwrap();
//! assert_eq!(t.p_value, 0.0); // every query differs by exactly 0.5
//! ```

// `crate::Error` is large (its asset variants carry several strings), which trips
// clippy::result_large_err on every fallible function of the crate. That is a
// property of the shared error type, not of this module; silence it here until
// error.rs boxes its big variants or lib.rs allows it crate-wide.

pub use crate::text::answer_match;
pub mod calibration;
pub mod context;
pub mod groups;
pub mod judge;
pub mod qa;
pub mod ranking;
pub mod significance;
pub mod trec;

pub use ranking::{
    evaluate, evaluate_with, evaluate_with_threshold, EvalOptions, HitOrder, Metric, MetricResult,
    QuerySet,
};
pub use significance::{quantile, TestResult};
