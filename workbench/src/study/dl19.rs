//! MS MARCO passage, TREC DL19 subset: lexical, dense, fused and re-ranked systems
//! scored as trec_eval scores them, each compared with BM25 (features `dense` + `faiss`).
//!
//! Data: `msmarco-dl19-subset` (BEIR layout: 5,000 passages, 50 queries, 43 judged,
//! graded qrels 1–3). The systems are `configs/studies/dl19.toml` ([`SystemSpec`]s):
//!
//! | system | what |
//! |---|---|
//! | `tfidf` | TF-IDF cosine (scikit-learn `TfidfVectorizer` weights) |
//! | `bm25` | BM25, Lucene variant, k1 0.9, b 0.4 (Anserini's defaults): the baseline |
//! | `dense` | all-MiniLM-L6-v2 (mean pooling, normalised) + exact FAISS inner product |
//! | `hybrid` | min-max fusion 0.5·dense + 0.5·BM25 over `depth` candidates each (report 001) |
//! | `rrf` | reciprocal rank fusion of BM25 and dense, k = 60 (report 002) |
//! | `bm25+maxsim` | BM25 top 100 re-ranked by mean-MaxSim over raw 384-d MiniLM token vectors |
//! | `bm25+colbert` | BM25 top 100 re-ranked by MaxSim over a trained 128-d ColBERT projection of the same token vectors (never trained on DL19) |
//! | `bm25+ce` | BM25 top 100 re-ranked by the cross-encoder `trained:minilm-ce` (never trained on DL19) |
//!
//! Metrics: nDCG@10 (gains = grades), MRR@10 and Recall@100 as trec_eval 9.0.8 computes
//! them (every query in both run and qrels, ties by descending passage id). The binary
//! metrics count grade ≥ `rel_threshold` (2, TREC DL's convention) as relevant; the
//! second table repeats them with grade ≥ 1. Significance of every system against the
//! baseline: paired t-test, randomisation test, paired bootstrap and studentised
//! bootstrap (`trials` each, `seed`).
//!
//! At every scale the 43 judged queries and the 5,000 passages are the same; the quick
//! scale trains its cross-encoder and ColBERT projection from short recipes
//! ([`crate::pipeline::systems`]).

use super::retrieval::{self, ComparisonRow, Scored, SystemRun, SystemSpec};
use super::{Env, Scale};
use crate::chunk::{Chunker, WholeDocument};
use crate::display::Table;
use crate::evaluate::{evaluate_with, trec, EvalOptions, Metric, MetricResult};
use crate::load::beir;
use crate::pipeline::systems::SystemBuilder;
use crate::results::ResultDir;
use crate::{Error, Qrels, Query, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The study's result folder at the default scale (`dl19-retrieval-quick` at quick).
pub const NAME: &str = "dl19-retrieval";
/// The systems file, relative to the project root.
pub const SYSTEMS_FILE: &str = "configs/studies/dl19.toml";

/// The study's parameters. [`Dl19Params::at_scale`] reads the systems file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dl19Params {
    /// Recipe sizes of the trained re-rankers; part of the result's name.
    pub scale: Scale,
    /// The data set asset (BEIR layout, split `test`).
    pub data: String,
    /// The systems, in table order.
    pub systems: Vec<SystemSpec>,
    /// The system every other is tested against.
    pub baseline: String,
    /// The first this many judged queries, in file order (0 = all 43).
    pub queries: usize,
    /// Passages retrieved per query by a first stage (and each side of a fusion).
    pub depth: usize,
    /// Minimum grade counted as relevant by MRR@10 and Recall@100.
    pub rel_threshold: i32,
    /// Trials of the randomisation and bootstrap tests.
    pub trials: usize,
    /// Seed of those tests.
    pub seed: u64,
}

impl Dl19Params {
    /// The published parameters at `scale`, with the systems of [`SYSTEMS_FILE`].
    pub fn at_scale(env: &Env, scale: Scale) -> Result<Self> {
        Ok(Dl19Params {
            scale,
            data: "msmarco-dl19-subset".into(),
            systems: retrieval::load_systems(&env.resolve(SYSTEMS_FILE))?,
            baseline: "bm25".into(),
            queries: 0,
            depth: 1000,
            rel_threshold: 2,
            trials: 10_000,
            seed: 42,
        })
    }

    /// Check the values: systems valid and unique, the baseline among them, depths of
    /// at least 1 and at least every re-ranker's depth, at least 1 trial.
    pub fn check(self) -> Result<Dl19Valid> {
        retrieval::check_study(&self.systems, &self.baseline, self.trials)?;
        if self.depth == 0 {
            return Err(Error::param("depth", "must be at least 1"));
        }
        for s in &self.systems {
            if let Some(r) = &s.rerank {
                if r.depth() > self.depth {
                    return Err(Error::param(
                        "depth",
                        format!(
                            "{} is smaller than system `{}`'s rerank.depth {}",
                            self.depth,
                            s.key,
                            r.depth()
                        ),
                    ));
                }
            }
        }
        Ok(Dl19Valid(self))
    }
}

crate::env::checked_params!(Dl19Valid, Dl19Params, "Checked [`Dl19Params`].");

impl Dl19Valid {
    /// What `config.json` records: the parameters, the sha256 of the data set's and
    /// the encoders' files, the evaluation options, the encoder's parameters, the cache
    /// keys of the trained re-rankers at this scale, and the program's sha256.
    pub fn resolved(&self, env: &Env) -> Result<super::Resolved<'_, Dl19Params>> {
        let assets = std::iter::once(self.data.as_str())
            .chain(crate::pipeline::system_spec::encoder_assets(&self.systems));
        super::Resolved::new(
            env,
            &self.0,
            assets,
            serde_json::json!({
                "evaluation": EvalOptions::with_threshold(self.rel_threshold),
                "encoder": crate::encode::EncoderParams::default(),
                "trained": crate::pipeline::trained::keys(env, self.scale, &self.systems)?,
            }),
        )
    }
}

/// The metrics, in column order.
pub fn metrics() -> [Metric; 3] {
    [Metric::Ndcg(10), Metric::Mrr(10), Metric::Recall(100)]
}

/// What the study found.
#[derive(Debug, Clone)]
pub struct Dl19Study {
    /// The parameters it ran with.
    pub params: Dl19Params,
    /// Passages in the corpus.
    pub passages: usize,
    /// Judged queries (every system's query set).
    pub queries: usize,
    /// qrels grade → judgements.
    pub grades: BTreeMap<i32, usize>,
    /// The judgements.
    pub qrels: Qrels,
    /// Every system's run, in table order.
    pub runs: Vec<SystemRun>,
    /// Scored with grade ≥ `rel_threshold` as relevant.
    pub scored: Scored,
    /// Scored with grade ≥ 1 as relevant.
    pub scored_rel1: Scored,
    /// Every system against the baseline (at `rel_threshold`).
    pub comparisons: Vec<ComparisonRow>,
}

impl super::Study for Dl19Valid {
    type Output = Dl19Study;

    fn name(&self) -> String {
        NAME.to_string()
    }

    fn scale(&self) -> Scale {
        self.scale
    }

    fn summary_file(&self) -> &'static str {
        "metrics.md"
    }

    fn resolved(&self, env: &Env) -> Result<impl serde::Serialize + '_> {
        Dl19Valid::resolved(self, env)
    }

    fn run(&self, env: &Env) -> Result<Dl19Study> {
        run(env, self)
    }
}

/// Build every system, run the judged queries, score and compare.
pub fn run(env: &Env, params: &Dl19Valid) -> Result<Dl19Study> {
    let p = &params.0;
    let set = beir::load(&env.assets.resolve_all(&p.data)?, "test")?;
    let passages = WholeDocument.chunk_all(&set.corpus)?;
    let mut queries: Vec<Query> = set.judged_queries().into_iter().cloned().collect();
    if p.queries > 0 {
        queries.truncate(p.queries);
    }
    let mut grades: BTreeMap<i32, usize> = BTreeMap::new();
    for j in set.qrels.values() {
        for g in j.values() {
            *grades.entry(*g).or_default() += 1;
        }
    }
    let n_passages = passages.len();
    println!(
        "{}: {} passages, {} queries ({} judged), qrels grades {grades:?}",
        p.data,
        n_passages,
        set.queries.len(),
        queries.len()
    );
    let trained = crate::pipeline::trained::for_systems(
        env,
        p.scale,
        &p.systems,
        crate::pipeline::trained::Training::Allow,
    )?;
    let mut builder = SystemBuilder::new(env, trained, passages)?;
    let runs = retrieval::run_systems(
        &mut builder,
        &p.systems,
        &queries,
        p.depth,
        |s| s.run_depth(p.depth),
        &env.root,
    )?;
    let names: Vec<String> = metrics().iter().map(Metric::name).collect();
    let opts = EvalOptions::with_threshold(p.rel_threshold);
    let opts_rel1 = EvalOptions {
        rel_threshold: 1,
        ..opts
    };
    let scored = Scored::new(&runs, names.clone(), |r| {
        evaluate_with(r, &set.qrels, &metrics(), &opts)
    })?;
    let scored_rel1 = Scored::new(&runs, names, |r| {
        evaluate_with(r, &set.qrels, &metrics(), &opts_rel1)
    })?;
    let comparisons = scored.compare_to(&p.baseline, p.trials, p.seed)?;
    Ok(Dl19Study {
        params: p.clone(),
        passages: n_passages,
        queries: queries.len(),
        grades,
        qrels: set.qrels,
        runs,
        scored,
        scored_rel1,
        comparisons,
    })
}

const HEADER: [&str; 9] = [
    "system",
    "description",
    "nDCG@10",
    "MRR@10",
    "Recall@100",
    "seconds",
    "queries_nDCG@10",
    "queries_MRR@10",
    "queries_Recall@100",
];

impl Dl19Study {
    fn evaluation(&self, rel_threshold: i32) -> EvalOptions {
        EvalOptions::with_threshold(rel_threshold)
    }

    /// The gains nDCG uses, from the qrels' grades ("grades 1–3 as gains").
    fn gains(&self) -> String {
        let positive: Vec<i32> = self.grades.keys().copied().filter(|&g| g > 0).collect();
        match (positive.first(), positive.last()) {
            (Some(lo), Some(hi)) if lo != hi => format!("grades {lo}–{hi} as gains"),
            (Some(g), _) => format!("grade {g} as gain"),
            _ => "no positive grade".to_string(),
        }
    }

    /// The main table's caption: every fact in it comes from the parameters or the results.
    pub fn caption(&self) -> String {
        let p = &self.params;
        let counts = format!(
            "Queries averaged: {}.",
            self.scored.query_counts().join(", ")
        );
        // Stated only when measured: re-ranking the baseline's top N keeps its Recall@N.
        let mut rerank_note = String::new();
        for (si, spec) in p.systems.iter().enumerate() {
            let Some(r) = &spec.rerank else { continue };
            let same_first = spec.retrievers.len() == 1
                && p.systems
                    .iter()
                    .find(|s| s.key == p.baseline)
                    .is_some_and(|b| b.retrievers == spec.retrievers && b.rerank.is_none());
            let base = self.scored.index(&p.baseline).unwrap_or(0);
            if same_first
                && r.depth() == 100
                && self.scored.results[si][2].per_query == self.scored.results[base][2].per_query
            {
                rerank_note = format!(
                    " The re-rankers order {b}'s top {}; `{}`'s Recall@100 equals {b}'s on every query.",
                    r.depth(),
                    spec.key,
                    b = self.baseline_title()
                );
                break;
            }
        }
        format!(
            "TREC DL19 passage subset ({} passages, {} judged queries), scored as trec_eval 9.0.8 \
             scores the run files (ties by descending passage id). MRR@10 and Recall@100 count grade ≥ {} as relevant \
             (nDCG@10 uses {}). † / †† : randomisation test against {} ({} trials, seed {}), \
             p < 0.05 / p < 0.01.{rerank_note} {counts}",
            self.passages,
            self.queries,
            p.rel_threshold,
            self.gains(),
            self.baseline_title(),
            retrieval::thousands(p.trials),
            p.seed,
        )
    }

    /// The baseline's short title ("BM25").
    fn baseline_title(&self) -> String {
        self.runs
            .iter()
            .find(|r| r.key == self.params.baseline)
            .map_or(self.params.baseline.clone(), |r| r.title.clone())
    }

    fn rows(&self, scored: &Scored, marks: bool) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        for (si, r) in self.runs.iter().enumerate() {
            let cell = |mi: usize| {
                let m = if marks {
                    Scored::mark(&self.comparisons, &r.key, &scored.metrics[mi])
                } else {
                    ""
                };
                format!("{:.4}{m}", scored.results[si][mi].mean)
            };
            let n = |mi: usize| scored.results[si][mi].queries().to_string();
            out.push(vec![
                r.key.clone(),
                r.label.clone(),
                cell(0),
                cell(1),
                cell(2),
                format!("{:.1}", r.seconds),
                n(0),
                n(1),
                n(2),
            ]);
        }
        out
    }

    /// nDCG@10, MRR@10, Recall@100 per system, with significance marks (`metrics.csv`).
    pub fn table(&self) -> Table {
        let mut t = Table::new(HEADER).caption(self.caption());
        for row in self.rows(&self.scored, true) {
            t.rows.push(row);
        }
        t
    }

    /// The same runs with grade ≥ 1 relevant (`metrics_rel1.csv`).
    pub fn table_rel1(&self) -> Table {
        let mut t = Table::new(HEADER).caption(format!(
            "Same runs, grade ≥ 1 counted as relevant for MRR@10 and Recall@100. Queries averaged: {}.",
            self.scored_rel1.query_counts().join(", ")
        ));
        for row in self.rows(&self.scored_rel1, false) {
            t.rows.push(row);
        }
        t
    }

    /// Every system against the baseline, every metric (`significance.csv`).
    pub fn significance(&self) -> Result<Table> {
        retrieval::significance_table(&self.comparisons)
    }

    /// The tables as Markdown (`metrics.md`).
    pub fn markdown(&self) -> Result<String> {
        let t = self.table();
        let r1 = self.table_rel1();
        Ok(format!(
            "{}\n{}\n\nSignificance against {} (two-sided p; {} trials, seed {}):\n\n{}",
            t.to_markdown(),
            r1.to_markdown(),
            self.baseline_title(),
            retrieval::thousands(self.params.trials),
            self.params.seed,
            self.significance()?.to_markdown()
        ))
    }

    /// Per-query nDCG@10 of every system minus the baseline's, one histogram panel per
    /// system, bins of 0.05 over ±(largest |difference|) (`ndcg10.png` / `.svg`).
    #[cfg(feature = "plot")]
    pub fn figure(&self) -> Result<crate::plot::HistogramGrid> {
        use crate::plot::{Bins, Histogram, HistogramGrid, Series};
        let base = self.scored.index(&self.params.baseline)?;
        let res = &self.scored.results;
        let diffs: Vec<Vec<f64>> = (0..self.runs.len())
            .map(|si| {
                res[si][0]
                    .per_query
                    .iter()
                    .map(|(q, v)| v - res[base][0].per_query.get(q).copied().unwrap_or(0.0))
                    .collect()
            })
            .collect();
        let max_abs = diffs.iter().flatten().fold(0.0f64, |m, d| m.max(d.abs()));
        let half = ((max_abs * 10.0).ceil() / 10.0).max(0.1);
        let bins = Bins::new(-half, half, 0.05, false)?;
        let mut panels = Vec::new();
        for (si, r) in self.runs.iter().enumerate() {
            if si == base {
                continue;
            }
            let mut counts = vec![0usize; bins.len()];
            for &d in &diffs[si] {
                // A difference of exactly +half lands in the last bin.
                counts[bins.index(d).unwrap_or(bins.len() - 1).min(bins.len() - 1)] += 1;
            }
            let wins = diffs[si].iter().filter(|&&d| d > 1e-9).count();
            let losses = diffs[si].iter().filter(|&&d| d < -1e-9).count();
            let c = crate::plot::palette(si);
            panels.push(Histogram {
                title: format!("{} − {}", r.title, self.baseline_title()),
                x_label: "per-query nDCG@10 difference".into(),
                y_label: "queries".into(),
                bins,
                series: vec![Series {
                    label: format!(
                        "{wins} better, {losses} worse, mean {:+.3}",
                        res[si][0].mean - res[base][0].mean
                    ),
                    counts,
                    color: (c.0, c.1, c.2),
                }],
                markers: vec![(0.0, String::new())],
                size: (640, 320),
            });
        }
        Ok(HistogramGrid {
            caption: format!(
                "DL19 subset: per-query nDCG@10 of each system minus {} ({} queries){}",
                self.baseline_title(),
                res[base][0].queries(),
                match self.params.scale {
                    Scale::Default => String::new(),
                    s => format!(", {s} scale"),
                }
            ),
            panels,
            cols: 2,
            panel_size: (640, 320),
        })
    }

    /// The numbers `manifest.json` records.
    pub fn summary(&self) -> Result<serde_json::Value> {
        let mut summary = serde_json::Map::new();
        for (si, r) in self.runs.iter().enumerate() {
            let res = &self.scored.results[si];
            summary.insert(
                r.key.clone(),
                serde_json::json!({
                    "name": r.name,
                    "ndcg@10": res[0].mean,
                    "mrr@10": res[1].mean,
                    "recall@100": res[2].mean,
                    "queries": res.iter().map(|m| (m.name.clone(), m.queries())).collect::<BTreeMap<_, _>>(),
                    "seconds": r.seconds,
                }),
            );
        }
        summary.insert("rel_threshold".into(), self.params.rel_threshold.into());
        summary.insert(
            "evaluated_queries".into(),
            self.scored.results[self.scored.index(&self.params.baseline)?][1]
                .queries()
                .into(),
        );
        summary.insert(
            "evaluation".into(),
            serde_json::to_value(self.evaluation(self.params.rel_threshold))?,
        );
        summary.insert("qrels_grades".into(), serde_json::to_value(&self.grades)?);
        Ok(serde_json::Value::Object(summary))
    }

    /// Write every output into `out`'s staging folder: the tables (CSV, Markdown), the
    /// per-query values, a TREC run file per system and the qrels, and the figure. Each
    /// run file is read back and scored again first: it must give the same numbers.
    pub fn write(&self, out: &ResultDir) -> Result<()> {
        let opts = self.evaluation(self.params.rel_threshold);
        let opts_rel1 = self.evaluation(1);
        for (si, r) in self.runs.iter().enumerate() {
            let tag = r.key.replace('+', "_");
            let path = out.path(&format!("run.{tag}.trec"));
            trec::write_run(&path, &r.run, &tag)?;
            let back = trec::read_run(&path)?;
            for (o, want) in [
                (&opts, &self.scored.results[si]),
                (&opts_rel1, &self.scored_rel1.results[si]),
            ] {
                let got: Vec<MetricResult> = evaluate_with(&back, &self.qrels, &metrics(), o)?;
                if &got != want {
                    return Err(Error::bad_input(
                        &path,
                        format!(
                            "scoring the written run file gives {:?}, the in-memory run {:?}",
                            got.iter().map(|m| m.mean).collect::<Vec<_>>(),
                            want.iter().map(|m| m.mean).collect::<Vec<_>>()
                        ),
                    ));
                }
            }
        }
        trec::write_qrels(out.path("qrels.dl19.trec"), &self.qrels)?;
        self.table().write_csv(&out.path("metrics.csv"))?;
        self.table_rel1().write_csv(&out.path("metrics_rel1.csv"))?;
        self.significance()?
            .write_csv(&out.path("significance.csv"))?;
        self.scored
            .per_query_table()?
            .write_csv(&out.path("per_query.csv"))?;
        let md = out.path("metrics.md");
        std::fs::write(&md, self.markdown()?).map_err(|e| Error::io(&md, e))?;
        #[cfg(feature = "plot")]
        crate::plot::render(&self.figure()?)?.save(out.out_dir(), "ndcg10")?;
        Ok(())
    }
}

impl super::Outputs for Dl19Study {
    fn write(&self, out: &ResultDir) -> Result<()> {
        Dl19Study::write(self, out)
    }
    fn markdown(&self) -> Result<String> {
        Dl19Study::markdown(self)
    }
    fn summary(&self) -> Result<serde_json::Value> {
        Dl19Study::summary(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        Env::project().unwrap()
    }

    #[test]
    fn published_parameters_check_and_bad_ones_are_named() {
        let env = env();
        let p = Dl19Params::at_scale(&env, Scale::Default).unwrap();
        let keys: Vec<&str> = p.systems.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "tfidf",
                "bm25",
                "dense",
                "hybrid",
                "rrf",
                "bm25+maxsim",
                "bm25+colbert",
                "bm25+ce"
            ]
        );
        p.clone().check().unwrap();
        let mut bad = p.clone();
        bad.baseline = "bm99".into();
        let err = bad.check().unwrap_err().to_string();
        assert!(err.contains("bm99"), "{err}");
        let mut bad = p.clone();
        bad.depth = 50;
        let err = bad.check().unwrap_err().to_string();
        assert!(err.contains("rerank.depth 100"), "{err}");
        let mut bad = p;
        bad.trials = 0;
        assert!(bad.check().unwrap_err().to_string().contains("trials"));
    }

    /// The whole study at a tiny scale (lexical systems, 6 queries): runs, scores,
    /// compares, and writes run files that score the same when read back.
    #[test]
    fn tiny_study_runs_scores_and_writes() {
        let env = env();
        let mut p = Dl19Params::at_scale(&env, Scale::Quick).unwrap();
        p.systems.retain(|s| s.key == "bm25" || s.key == "tfidf");
        p.queries = 6;
        p.trials = 200;
        let study = run(&env, &p.check().unwrap()).unwrap();
        assert_eq!(study.queries, 6);
        assert_eq!(study.runs.len(), 2);
        for r in &study.runs {
            assert_eq!(r.run.len(), 6, "{}", r.key);
            // BM25 and TF-IDF return the passages sharing a term with the query, up to 1000.
            assert!(
                r.run
                    .values()
                    .all(|hits| !hits.is_empty() && hits.len() <= 1000),
                "{}",
                r.key
            );
        }
        let bm25 = study.scored.get("bm25", 0).unwrap();
        assert_eq!(bm25.queries(), 6);
        assert!(bm25.mean > 0.2 && bm25.mean <= 1.0, "nDCG@10 {}", bm25.mean);
        assert_eq!(
            study.comparisons.len(),
            3,
            "tfidf against bm25 on 3 metrics"
        );
        let t = study.table();
        assert_eq!(t.rows.len(), 2);
        assert!(t.caption.as_deref().unwrap().contains("6 judged queries"));
        let tmp = tempfile::tempdir().unwrap();
        let out = ResultDir::at(tmp.path().join("r"), "r", &serde_json::json!({})).unwrap();
        out.begin().unwrap();
        study.write(&out).unwrap();
        for f in [
            "metrics.csv",
            "metrics_rel1.csv",
            "significance.csv",
            "per_query.csv",
            "run.bm25.trec",
            "qrels.dl19.trec",
            "metrics.md",
        ] {
            assert!(out.path(f).is_file(), "{f}");
        }
        let back = Table::read_csv(&out.path("metrics.csv")).unwrap();
        assert_eq!(back.rows[1][0], "bm25");
        assert_eq!(back.rows[1][2], format!("{:.4}", bm25.mean));
    }
}
