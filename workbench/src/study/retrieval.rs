//! The shared retrieval study: systems × queries × metrics, and every system compared
//! with a baseline.
//!
//! A system is data ([`SystemSpec`]): the pipeline's retriever specs
//! ([`crate::retrieve::RetrieverSpec`]), their fusion (weights, RRF's k) and an optional
//! re-ranker ([`crate::rerank::RerankerSpec`]), so a study's systems are a TOML list and
//! adding one is a TOML edit:
//!
//! ```toml
//! [[system]]
//! key = "bm25"
//! label = "BM25 (Lucene, k1 0.9, b 0.4)"
//! retrievers = [{ kind = "bm25" }]
//!
//! [[system]]
//! key = "hybrid"
//! retrievers = [{ kind = "dense" }, { kind = "bm25" }]
//! fusion = "minmax"
//! weights = [0.5, 0.5]
//!
//! [[system]]
//! key = "bm25+ce"
//! retrievers = [{ kind = "bm25" }]
//! rerank = { kind = "cross-encoder", model = "trained:minilm-ce", depth = 100 }
//! ```
//!
//! Running the systems (`pipeline::systems::SystemBuilder`, feature `dense`) gives
//! [`SystemRun`]s; scoring them gives one [`MetricResult`] per system and metric
//! ([`Scored`]), whatever scored them (qrels through trec_eval's rules, or an answer
//! matcher); [`Scored::compare_to`] tests every system against the baseline on every
//! metric; [`Scored::table`] and [`Scored::per_query_table`] format at the edge.

pub use crate::pipeline::system_spec::{
    check_systems, load_systems, parse_systems, SystemSpec, SystemsFile,
};

use crate::display::Table;
use crate::evaluate::significance::{self, Comparison};
use crate::evaluate::MetricResult;
use crate::{Error, Result, Run};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One system's run over a study's queries.
#[derive(Debug, Clone)]
pub struct SystemRun {
    /// The spec's key.
    pub key: String,
    /// The spec's label.
    pub label: String,
    /// The spec's title.
    pub title: String,
    /// The built retriever's own name (`Retriever::name`).
    pub name: String,
    /// The ranked lists.
    pub run: Run,
    /// Wall-clock seconds for every query.
    pub seconds: f64,
}

/// The checks every retrieval study makes: valid systems with unique keys, the baseline
/// among them, at least one trial of the significance tests.
pub fn check_study(systems: &[SystemSpec], baseline: &str, trials: usize) -> Result<()> {
    check_systems(systems)?;
    if !systems.iter().any(|s| s.key == baseline) {
        return Err(Error::param(
            "baseline",
            format!("`{baseline}` is not one of the systems"),
        ));
    }
    if trials == 0 {
        return Err(Error::param("trials", "must be at least 1"));
    }
    Ok(())
}

/// Build every system of `specs` with `builder` (first stages `depth` deep), run all
/// `queries` through it (`k(spec)` passages each) and time it.
#[cfg(feature = "dense")]
pub fn run_systems(
    builder: &mut crate::pipeline::systems::SystemBuilder<'_>,
    specs: &[SystemSpec],
    queries: &[crate::Query],
    depth: usize,
    k: impl Fn(&SystemSpec) -> usize,
    base_dir: &std::path::Path,
) -> Result<Vec<SystemRun>> {
    let mut runs = Vec::with_capacity(specs.len());
    for spec in specs {
        let system = builder.build(spec, depth, base_dir)?;
        let t0 = std::time::Instant::now();
        let run = system.retrieve_all(queries, k(spec))?;
        let seconds = t0.elapsed().as_secs_f64();
        println!("{}: {} queries in {seconds:.1} s", spec.key, queries.len());
        runs.push(SystemRun {
            key: spec.key.clone(),
            label: spec.label(),
            title: spec.title(),
            name: system.name(),
            run,
            seconds,
        });
    }
    Ok(runs)
}

/// One system against the baseline on one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparisonRow {
    /// The system's key.
    pub system: String,
    /// The metric's name.
    pub metric: String,
    /// The four paired tests.
    pub comparison: Comparison,
}

/// Runs scored: `results[s][m]` is system `s` on metric `m`.
#[derive(Debug, Clone)]
pub struct Scored {
    /// The systems' keys, in run order.
    pub keys: Vec<String>,
    /// Metric names, in column order.
    pub metrics: Vec<String>,
    /// One row per system, one result per metric.
    pub results: Vec<Vec<MetricResult>>,
}

impl Scored {
    /// Score every run with `score` (one [`MetricResult`] per metric, in the same order
    /// for every run).
    pub fn new(
        runs: &[SystemRun],
        metrics: Vec<String>,
        mut score: impl FnMut(&Run) -> Result<Vec<MetricResult>>,
    ) -> Result<Self> {
        let mut results = Vec::with_capacity(runs.len());
        for r in runs {
            let got = score(&r.run)?;
            if got.len() != metrics.len() {
                return Err(Error::param(
                    "metrics",
                    format!(
                        "scoring `{}` gave {} results for {} metrics",
                        r.key,
                        got.len(),
                        metrics.len()
                    ),
                ));
            }
            results.push(got);
        }
        Ok(Scored {
            keys: runs.iter().map(|r| r.key.clone()).collect(),
            metrics,
            results,
        })
    }

    /// The row of system `key`.
    pub fn index(&self, key: &str) -> Result<usize> {
        self.keys.iter().position(|k| k == key).ok_or_else(|| {
            Error::param(
                "baseline",
                format!("no system `{key}` (systems: {})", self.keys.join(", ")),
            )
        })
    }

    /// System `key`'s result on metric `m` (column index).
    pub fn get(&self, key: &str, m: usize) -> Result<&MetricResult> {
        Ok(&self.results[self.index(key)?][m])
    }

    /// Every other system against `baseline` on every metric (the four paired tests,
    /// `trials` rounds, `seed`), system-major.
    pub fn compare_to(
        &self,
        baseline: &str,
        trials: usize,
        seed: u64,
    ) -> Result<Vec<ComparisonRow>> {
        let b = self.index(baseline)?;
        let mut out = Vec::new();
        for (si, key) in self.keys.iter().enumerate() {
            if si == b {
                continue;
            }
            for (mi, m) in self.results[si].iter().enumerate() {
                let comparison = significance::compare(
                    &m.per_query,
                    &self.results[b][mi].per_query,
                    trials,
                    seed,
                )?;
                out.push(ComparisonRow {
                    system: key.clone(),
                    metric: self.metrics[mi].clone(),
                    comparison,
                });
            }
        }
        Ok(out)
    }

    /// The mark (`†`, `††` or empty) of system `key` on metric `metric` in `rows`.
    pub fn mark<'a>(rows: &'a [ComparisonRow], key: &str, metric: &str) -> &'a str {
        rows.iter()
            .find(|r| r.system == key && r.metric == metric)
            .map_or("", |r| r.comparison.marker())
    }

    /// How many queries each metric's mean averages, as `"<metric> <n>"` (several
    /// counts joined by ` / ` when systems differ).
    pub fn query_counts(&self) -> Vec<String> {
        (0..self.metrics.len())
            .map(|mi| {
                let mut n: Vec<usize> = self.results.iter().map(|r| r[mi].queries()).collect();
                n.sort_unstable();
                n.dedup();
                let n: Vec<String> = n.iter().map(usize::to_string).collect();
                format!("{} {}", self.results[0][mi].name, n.join(" / "))
            })
            .collect()
    }

    /// Per-query values: `system, query_id, <metric>…`, 4 decimals.
    pub fn per_query_table(&self) -> Result<Table> {
        let mut t = Table::new(
            ["system".to_string(), "query_id".to_string()]
                .into_iter()
                .chain(self.results[0].iter().map(|m| m.name.clone())),
        );
        for (si, key) in self.keys.iter().enumerate() {
            for qid in self.results[si][0].per_query.keys() {
                let mut row = vec![key.clone(), qid.clone()];
                for m in &self.results[si] {
                    row.push(
                        m.per_query
                            .get(qid)
                            .map(|x| format!("{x:.4}"))
                            .unwrap_or_default(),
                    );
                }
                t.push(row)?;
            }
        }
        Ok(t)
    }
}

/// The significance table of `rows`: `system, metric`, then [`Comparison::COLUMNS`].
pub fn significance_table(rows: &[ComparisonRow]) -> Result<Table> {
    let mut t = Table::new(["system", "metric"].into_iter().chain(Comparison::COLUMNS));
    for r in rows {
        t.push(
            [r.system.clone(), r.metric.clone()]
                .into_iter()
                .chain(r.comparison.cells()),
        )?;
    }
    Ok(t)
}

/// `10000` → `10,000`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    digits
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|group| String::from_utf8_lossy(group).into_owned())
        .collect::<Vec<_>>()
        .join(",")
}

/// `per_query[q] = metric(run[q])` for every query of `run`, averaged.
pub fn metric_from(name: &str, per_query: BTreeMap<String, f64>) -> MetricResult {
    let mean = if per_query.is_empty() {
        0.0
    } else {
        per_query.values().sum::<f64>() / per_query.len() as f64
    };
    MetricResult {
        name: name.to_string(),
        mean,
        per_query,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Hit;

    fn run_of(key: &str, lists: &[(&str, &[&str])]) -> SystemRun {
        let run: Run = lists
            .iter()
            .map(|(q, docs)| {
                let hits = docs
                    .iter()
                    .enumerate()
                    .map(|(i, d)| Hit::new(*d, 1.0 / (i + 1) as f32))
                    .collect();
                (q.to_string(), hits)
            })
            .collect();
        SystemRun {
            key: key.into(),
            label: key.into(),
            title: key.into(),
            name: key.into(),
            run,
            seconds: 0.0,
        }
    }

    /// Score = 1 when the query's first hit is `d<query number>`.
    fn first_hit_right(run: &Run) -> Result<Vec<MetricResult>> {
        let per_query = run
            .iter()
            .map(|(q, hits)| {
                let want = q.replace('q', "d");
                let v = if hits.first().map(|h| h.id.as_str()) == Some(want.as_str()) {
                    1.0
                } else {
                    0.0
                };
                (q.clone(), v)
            })
            .collect();
        Ok(vec![metric_from("p@1", per_query)])
    }

    #[test]
    fn scored_runs_compare_against_the_baseline() {
        let queries: Vec<String> = (0..30).map(|i| format!("q{i}")).collect();
        let good: Vec<(String, Vec<String>)> = queries
            .iter()
            .map(|q| (q.clone(), vec![q.replace('q', "d"), "x".into()]))
            .collect();
        let bad: Vec<(String, Vec<String>)> = queries
            .iter()
            .map(|q| (q.clone(), vec!["x".into(), q.replace('q', "d")]))
            .collect();
        let as_refs = |v: &[(String, Vec<String>)]| -> Vec<(String, Vec<String>)> { v.to_vec() };
        let mk = |key: &str, v: Vec<(String, Vec<String>)>| {
            let lists: Vec<(&str, Vec<&str>)> = v
                .iter()
                .map(|(q, d)| (q.as_str(), d.iter().map(String::as_str).collect()))
                .collect();
            let lists: Vec<(&str, &[&str])> =
                lists.iter().map(|(q, d)| (*q, d.as_slice())).collect();
            run_of(key, &lists)
        };
        let runs = vec![mk("base", as_refs(&bad)), mk("better", as_refs(&good))];
        let scored = Scored::new(&runs, vec!["p@1".into()], first_hit_right).unwrap();
        assert_eq!(scored.get("base", 0).unwrap().mean, 0.0);
        assert_eq!(scored.get("better", 0).unwrap().mean, 1.0);
        let rows = scored.compare_to("base", 2000, 7).unwrap();
        assert_eq!(rows.len(), 1, "the baseline is not compared with itself");
        assert_eq!(rows[0].system, "better");
        assert_eq!(Scored::mark(&rows, "better", "p@1"), "††");
        assert_eq!(Scored::mark(&rows, "base", "p@1"), "");
        assert_eq!(scored.query_counts(), vec!["p@1 30".to_string()]);
        let t = significance_table(&rows).unwrap();
        assert_eq!(t.rows.len(), 1);
        assert_eq!(t.header.len(), 2 + Comparison::COLUMNS.len());
        let pq = scored.per_query_table().unwrap();
        assert_eq!(pq.rows.len(), 60);
        let err = scored.compare_to("nope", 10, 1).unwrap_err().to_string();
        assert!(
            err.contains("nope") && err.contains("base, better"),
            "{err}"
        );
        // A scorer that returns the wrong number of metrics is an error naming the system.
        let err = Scored::new(&runs, vec!["a".into(), "b".into()], first_hit_right)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`base`") && err.contains("1 results for 2 metrics"),
            "{err}"
        );
    }

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(10_000), "10,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
