//! Experiment (a): MS MARCO passage, TREC DL19 subset — lexical, dense, fused and
//! late-interaction re-ranked retrieval, with significance against BM25.
//!
//! ```text
//! cargo run --release --bin exp_dl19 [-- --force]
//! ```
//! Data: `msmarco-dl19-subset` (BEIR layout: 5,000 passages, 50 queries, 43 judged,
//! graded qrels 1–3). Systems, each retrieving `--depth` passages per judged query:
//!
//! | system | what |
//! |---|---|
//! | `tfidf` | TF-IDF cosine (scikit-learn `TfidfVectorizer` weights) |
//! | `bm25` | BM25, Lucene variant, k1 0.9, b 0.4 (Anserini's defaults) — the baseline |
//! | `dense` | all-MiniLM-L6-v2 (mean pooling, normalised) + exact FAISS inner product |
//! | `hybrid` | min-max fusion 0.5·dense + 0.5·BM25 over `--depth` candidates each (report 001) |
//! | `rrf` | reciprocal rank fusion of BM25 and dense, k = 60 (report 002) |
//! | `bm25+maxsim` | BM25 top `--rerank-depth` re-ranked by mean-MaxSim over **raw 384-d MiniLM token embeddings** (not a trained ColBERT; no projection) |
//! | `bm25+colbert` | BM25 top `--rerank-depth` re-ranked by mean-MaxSim over a **trained ColBERT projection** of the same token embeddings (`--colbert-dim`, default 128; `train::colbert`: frozen MiniLM, no markers, trained on SQuAD / RAG Mini / NQ groups, never on DL19; 0 drops the row) |
//! | `bm25+ce` | BM25 top `--rerank-depth` re-ranked by the cross-encoder `--cross-encoder` (default `trained:minilm-ce`: all-MiniLM-L6-v2 fine-tuned by `train_reranker` on SQuAD / RAG Mini / NQ groups, never on DL19; `none` drops the row) |
//!
//! Metrics: nDCG@10 (gains = grades), MRR@10 and Recall@100, computed as trec_eval
//! 9.0.8 computes them (`workbench::evaluate::ranking`: every query in both run and
//! qrels, tied scores ranked by descending passage id; `tests/trec_eval.rs` checks
//! the run files written here against trec_eval's C code). The subset has only
//! grades 1–3 (no grade 0: every judged passage is at least "related"). The binary
//! metrics use **grade ≥ 2 as relevant** (`--rel-threshold`, TREC DL's convention for
//! DL19 passage, trec_eval `-l 2`); `metrics_rel1.csv` repeats them with grade ≥ 1.
//! Significance of every system against BM25, per metric: paired t-test,
//! randomisation test, paired bootstrap and studentised paired bootstrap
//! (`--trials` each, default 10,000; `--seed`, default 42).
//!
//! Writes `data/results/dl19-retrieval/`: `metrics.csv` (with the number of
//! queries each column averages), `metrics.md`, `metrics_rel1.csv`,
//! `significance.csv`, `per_query.csv`, `run.<system>.trec` (TREC run files),
//! `qrels.dl19.trec` (so `trec_eval -l 2 -m ndcg_cut.10 -m recall.100
//! qrels.dl19.trec run.bm25.trec` prints the table's nDCG@10 and Recall@100; its
//! `recip_rank` has no cut-off), `ndcg10.png/.svg` (per-query nDCG@10 differences
//! against BM25), `config.json`, `manifest.json`. Before writing the tables, the
//! run files are read back and scored again: the numbers must be identical.

use anyhow::{Context, Result};
use clap::Parser;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use workbench::assets::Assets;
use workbench::chunk::{Chunker, WholeDocument};
use workbench::display::Table;
use workbench::encode::{BertEncoder, EmbeddingCache, EncoderParams};
use workbench::evaluate::{evaluate_with, significance, trec, EvalOptions, Metric, MetricResult};
use workbench::load::beir;
use workbench::plot::{render, Bins, Histogram, HistogramGrid, Series};
use workbench::rerank::late_interaction::{LateInteraction, MaxSimReranker};
use workbench::rerank::{PassageLookup, RerankedRetriever, Reranker};
use workbench::results::Experiment;
use workbench::retrieve::analyzer::Analyzer;
use workbench::retrieve::bm25::{Bm25, Bm25Params};
use workbench::retrieve::dense::DenseRetriever;
use workbench::retrieve::faiss::IndexParams;
use workbench::retrieve::fusion::{Fused, Fusion, RRF_K};
use workbench::retrieve::tfidf::{TfIdf, TfIdfVariant};
use workbench::retrieve::Retriever;
use workbench::train::cross_recipe::{self, CrossRecipe};
use workbench::{Query, Run};

const NAME: &str = "dl19-retrieval";
/// Printed when the result is fresh and the run is skipped.
const SUMMARY_FILE: &str = "metrics.md";
const DATA: &str = "msmarco-dl19-subset";

#[derive(Parser, Serialize, Debug)]
#[command(about = "Experiment (a): DL19 subset — TF-IDF, BM25, dense, hybrid, RRF, MaxSim re-rank")]
struct Args {
    /// Passages retrieved per query (run depth; also the fusion depth of each side).
    #[arg(long, default_value_t = 1000)]
    depth: usize,
    /// BM25 candidates re-ranked by MaxSim.
    #[arg(long, default_value_t = 100)]
    rerank_depth: usize,
    /// Dense weight of the min-max hybrid.
    #[arg(long, default_value_t = 0.5)]
    hybrid_weight: f32,
    /// Minimum grade counted as relevant by MRR and Recall (nDCG uses the grades).
    #[arg(long, default_value_t = 2)]
    rel_threshold: i32,
    /// Monte Carlo trials of the randomisation and bootstrap tests.
    #[arg(long, default_value_t = 10_000)]
    trials: usize,
    /// Seed of the randomisation and bootstrap tests.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Cross-encoder re-ranking BM25's top `--rerank-depth`: `trained:<recipe>` (trained by
    /// `train_reranker`), a checkpoint folder, or `none` (no such row).
    #[arg(long, default_value = "trained:minilm-ce")]
    cross_encoder: String,
    /// Dimension of a trained ColBERT projection (`train_colbert --dim D --groups
    /// --colbert-groups`: frozen MiniLM, no markers) re-ranking BM25's top
    /// `--rerank-depth`; trained first if not cached; 0: no such row.
    #[arg(long, default_value_t = 128)]
    colbert_dim: usize,
    /// Training groups of that projection (`train_colbert --groups`).
    #[arg(long, default_value_t = 800)]
    colbert_groups: usize,
    /// Sentence and token encoder (asset name).
    #[arg(long, default_value = "all-minilm-l6-v2")]
    model: String,
    /// Recompute even if the results are fresh.
    #[arg(long)]
    #[serde(skip)]
    force: bool,
}

#[derive(Serialize)]
struct Config<'a> {
    args: &'a Args,
    data: &'static str,
    split: &'static str,
    metrics: Vec<String>,
    evaluation: EvalOptions,
    bm25: Bm25Params,
    encoder: EncoderParams,
    /// The trained cross-encoder's cache key (its recipe and training inputs).
    cross_encoder_key: Option<String>,
    inputs: Vec<(String, String)>,
    program_sha256: String,
}

struct System {
    key: &'static str,
    label: String,
    name: String,
    run: Run,
    seconds: f64,
}

/// A figure-panel title short enough for a 640-pixel panel (the tables keep the long label).
fn panel_title(s: &System, args: &Args) -> String {
    match s.key {
        "dense" => "dense (bi-encoder)".into(),
        "hybrid" => format!("hybrid min-max (w_dense = {})", args.hybrid_weight),
        "rrf" => format!("RRF (BM25 + dense, k = {RRF_K})"),
        "bm25+maxsim" => format!("BM25 top-{} → MaxSim raw tokens", args.rerank_depth),
        "bm25+colbert" => format!(
            "BM25 top-{} → trained MaxSim d = {}",
            args.rerank_depth, args.colbert_dim
        ),
        "bm25+ce" => format!(
            "BM25 top-{} → cross-encoder {}",
            args.rerank_depth,
            args.cross_encoder
                .strip_prefix(cross_recipe::TRAINED_PREFIX)
                .unwrap_or(&args.cross_encoder)
        ),
        _ => s.label.clone(),
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let assets = Assets::load()?;
    let metrics = [Metric::Ndcg(10), Metric::Mrr(10), Metric::Recall(100)];
    // trec_eval's rules (query set, tie order) with `-l rel_threshold`.
    let evaluation = EvalOptions::with_threshold(args.rel_threshold);
    let inputs = assets.input_checksums([DATA, args.model.as_str()])?;
    let ce_root = workbench::train::cross_recipe::default_cache_root()?;
    let cross_encoder_key = match args
        .cross_encoder
        .strip_prefix(cross_recipe::TRAINED_PREFIX)
    {
        Some(name) => Some(CrossRecipe::named(name)?.key(&assets)?),
        None => None,
    };
    let config = Config {
        args: &args,
        data: DATA,
        split: "test",
        metrics: metrics.iter().map(Metric::name).collect(),
        evaluation,
        bm25: Bm25Params::default(),
        encoder: EncoderParams::default(),
        cross_encoder_key,
        inputs,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let Some(exp) = Experiment::start(NAME, &config, args.force, SUMMARY_FILE)? else {
        return Ok(());
    };
    let out = &exp.out;

    let set = beir::load(&assets.resolve_all(DATA)?, "test")
        .with_context(|| format!("loading `{DATA}`"))?;
    let passages = WholeDocument.chunk_all(&set.corpus)?;
    let queries: Vec<Query> = set.judged_queries().into_iter().cloned().collect();
    let mut grades: BTreeMap<i32, usize> = BTreeMap::new();
    for j in set.qrels.values() {
        for g in j.values() {
            *grades.entry(*g).or_default() += 1;
        }
    }
    println!(
        "{DATA}: {} passages, {} queries ({} judged), qrels grades {grades:?}",
        passages.len(),
        set.queries.len(),
        queries.len()
    );

    // First stages.
    let analyzer = Analyzer::default();
    let tfidf = TfIdf::build(&passages, &analyzer, TfIdfVariant::cosine())?;
    let bm25_params = Bm25Params::default();
    let bm25 = Arc::new(Bm25::build(&passages, &analyzer, bm25_params)?);
    let encoder = Arc::new(BertEncoder::load(
        &assets,
        &args.model,
        EncoderParams::default(),
    )?);
    let cache = EmbeddingCache::project_default()?;
    let t0 = Instant::now();
    let dense = Arc::new(DenseRetriever::build(
        encoder.clone(),
        &passages,
        IndexParams::flat_ip(),
        Some(&cache),
    )?);
    println!(
        "dense index over {} passages in {:.1} s",
        passages.len(),
        t0.elapsed().as_secs_f64()
    );
    let hybrid = Fused::hybrid(
        Box::new(dense.clone()),
        Box::new(bm25.clone()),
        args.hybrid_weight,
        args.depth,
    )?;
    let rrf = Fused::new(
        vec![Box::new(bm25.clone()), Box::new(dense.clone())],
        Fusion::rrf(),
        args.depth,
    )?;
    let late = Arc::new(LateInteraction::new(encoder.clone()));
    let colbert_reranked = if args.colbert_dim == 0 {
        None
    } else {
        let trained = workbench::train::colbert::default_trained(
            &assets,
            args.colbert_dim,
            args.colbert_groups,
        )?;
        let li = trained.late_interaction(encoder.clone())?;
        Some((
            format!(
                "BM25 top-{} → trained MaxSim d = {} ({}, frozen all-MiniLM-L6-v2 trained on SQuAD / RAG Mini / NQ groups)",
                args.rerank_depth,
                args.colbert_dim,
                li.label()
            ),
            RerankedRetriever::new(
                Box::new(bm25.clone()),
                Box::new(MaxSimReranker::new(Arc::new(li))),
                PassageLookup::from_passages(&passages)?,
                args.rerank_depth,
            )?,
        ))
    };
    let reranked = RerankedRetriever::new(
        Box::new(bm25.clone()),
        Box::new(MaxSimReranker::new(late)),
        PassageLookup::from_passages(&passages)?,
        args.rerank_depth,
    )?;

    let ce_reranked = if args.cross_encoder == "none" {
        None
    } else {
        let ce = cross_recipe::load_cross_encoder(&args.cross_encoder, &assets, &ce_root)?;
        let label = format!(
            "BM25 top-{} → cross-encoder ({})",
            args.rerank_depth,
            match args
                .cross_encoder
                .strip_prefix(cross_recipe::TRAINED_PREFIX)
            {
                Some(r) => format!("{r}, all-MiniLM-L6-v2 trained on SQuAD / RAG Mini / NQ groups"),
                None => ce.name(),
            }
        );
        Some((
            label,
            RerankedRetriever::new(
                Box::new(bm25.clone()),
                Box::new(ce),
                PassageLookup::from_passages(&passages)?,
                args.rerank_depth,
            )?,
        ))
    };

    let mut systems = Vec::new();
    let mut plan: Vec<(&'static str, String, &dyn Retriever, usize)> = vec![
        ("tfidf", "TF-IDF (cosine)".into(), &tfidf, args.depth),
        (
            "bm25",
            format!(
                "BM25 ({:?}, k1 {}, b {})",
                bm25_params.variant, bm25_params.k1, bm25_params.b
            ),
            bm25.as_ref(),
            args.depth,
        ),
        (
            "dense",
            format!("dense {} flat IP", args.model),
            dense.as_ref(),
            args.depth,
        ),
        (
            "hybrid",
            format!("hybrid min-max (w_dense = {})", args.hybrid_weight),
            &hybrid,
            args.depth,
        ),
        (
            "rrf",
            format!("RRF (BM25 + dense, k = {RRF_K})"),
            &rrf,
            args.depth,
        ),
        (
            "bm25+maxsim",
            format!(
                "BM25 top-{} → MaxSim (raw {}-d {} tokens)",
                args.rerank_depth,
                encoder.dim(),
                args.model
            ),
            &reranked,
            args.rerank_depth,
        ),
    ];
    if let Some((label, r)) = &colbert_reranked {
        plan.push(("bm25+colbert", label.clone(), r, args.rerank_depth));
    }
    if let Some((label, r)) = &ce_reranked {
        plan.push(("bm25+ce", label.clone(), r, args.rerank_depth));
    }
    for (key, label, r, k) in plan {
        let t0 = Instant::now();
        let run = r.retrieve_all(&queries, k)?;
        let seconds = t0.elapsed().as_secs_f64();
        println!("{label}: {} queries in {seconds:.1} s", run.len());
        systems.push(System {
            key,
            label,
            name: r.name(),
            run,
            seconds,
        });
    }

    // Metrics, as trec_eval computes them (see the module docs).
    let t = args.rel_threshold;
    let evaluation_rel1 = EvalOptions {
        rel_threshold: 1,
        ..evaluation
    };
    let score = |opts: &EvalOptions| -> workbench::Result<Vec<Vec<MetricResult>>> {
        systems
            .iter()
            .map(|s| evaluate_with(&s.run, &set.qrels, &metrics, opts))
            .collect()
    };
    let results = score(&evaluation)?;
    let results_rel1 = score(&evaluation_rel1)?;

    // TREC files, read back and scored again: the file must give the same numbers.
    for (si, s) in systems.iter().enumerate() {
        let tag = s.key.replace('+', "_");
        let path = out.path(&format!("run.{tag}.trec"));
        trec::write_run(&path, &s.run, &tag)?;
        let back = trec::read_run(&path)?;
        for (opts, want) in [
            (&evaluation, &results[si]),
            (&evaluation_rel1, &results_rel1[si]),
        ] {
            let got = evaluate_with(&back, &set.qrels, &metrics, opts)?;
            if &got != want {
                anyhow::bail!(
                    "{}: scoring the written run file gives {:?}, the in-memory run {:?}",
                    path.display(),
                    got.iter().map(|m| m.mean).collect::<Vec<_>>(),
                    want.iter().map(|m| m.mean).collect::<Vec<_>>()
                );
            }
        }
    }
    trec::write_qrels(out.path("qrels.dl19.trec"), &set.qrels)?;

    let base = systems
        .iter()
        .position(|s| s.key == "bm25")
        .expect("bm25 is a system");
    // Queries averaged by each column (the same for every system unless one of them
    // returned nothing for a query).
    let counts = |rs: &[Vec<MetricResult>]| -> Vec<String> {
        (0..metrics.len())
            .map(|mi| {
                let mut n: Vec<usize> = rs.iter().map(|r| r[mi].queries()).collect();
                n.sort_unstable();
                n.dedup();
                let n: Vec<String> = n.iter().map(usize::to_string).collect();
                format!("{} {}", metrics[mi].name(), n.join(" / "))
            })
            .collect()
    };
    let counts_line = format!(
        "Queries averaged: {}.",
        counts(results.as_slice()).join(", ")
    );
    let counts_line_rel1 = format!(
        "Queries averaged: {}.",
        counts(results_rel1.as_slice()).join(", ")
    );
    println!("{counts_line}");

    let mut sig = Table::new(
        ["system", "metric"]
            .into_iter()
            .chain(significance::Comparison::COLUMNS),
    );
    let mut stars: BTreeMap<(usize, usize), String> = BTreeMap::new();
    for (si, s) in systems.iter().enumerate() {
        if si == base {
            continue;
        }
        for (mi, m) in results[si].iter().enumerate() {
            let b = &results[base][mi];
            let c = significance::compare(&m.per_query, &b.per_query, args.trials, args.seed)?;
            sig.push(
                [s.key.to_string(), m.name.clone()]
                    .into_iter()
                    .chain(c.cells()),
            )?;
            stars.insert((si, mi), c.marker().to_string());
        }
    }
    let header = [
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
    let positive: Vec<i32> = grades.keys().copied().filter(|&g| g > 0).collect();
    let gains = match (positive.first(), positive.last()) {
        (Some(lo), Some(hi)) if lo != hi => format!("grades {lo}–{hi} as gains"),
        (Some(g), _) => format!("grade {g} as gain"),
        _ => "no positive grade".to_string(),
    };
    // Stated only when measured: re-ranking BM25's top N keeps BM25's Recall@N.
    let maxsim = systems
        .iter()
        .position(|s| s.key == "bm25+maxsim")
        .expect("bm25+maxsim is a system");
    let recall_name = &results[base][2].name;
    let maxsim_recall = if results[maxsim][2].per_query == results[base][2].per_query {
        format!(
            " MaxSim re-ranks BM25's top {}; its {recall_name} equals BM25's on every query.",
            args.rerank_depth
        )
    } else {
        format!(" MaxSim re-ranks BM25's top {}.", args.rerank_depth)
    };
    let mut table = Table::new(header).caption(caption(
        &args,
        passages.len(),
        queries.len(),
        &gains,
        &maxsim_recall,
        &counts_line,
    ));
    let mut table_rel1 = Table::new(header).caption(format!(
        "Same runs, grade ≥ 1 counted as relevant for MRR@10 and Recall@100. {counts_line_rel1}"
    ));
    for (si, s) in systems.iter().enumerate() {
        let cell = |mi: usize| {
            format!(
                "{:.4}{}",
                results[si][mi].mean,
                stars.get(&(si, mi)).map(String::as_str).unwrap_or("")
            )
        };
        let n = |rs: &[Vec<MetricResult>], mi: usize| rs[si][mi].queries().to_string();
        table.push([
            s.key.to_string(),
            s.label.clone(),
            cell(0),
            cell(1),
            cell(2),
            format!("{:.1}", s.seconds),
            n(&results[..], 0),
            n(&results[..], 1),
            n(&results[..], 2),
        ])?;
        table_rel1.push([
            s.key.to_string(),
            s.label.clone(),
            format!("{:.4}", results_rel1[si][0].mean),
            format!("{:.4}", results_rel1[si][1].mean),
            format!("{:.4}", results_rel1[si][2].mean),
            format!("{:.1}", s.seconds),
            n(&results_rel1[..], 0),
            n(&results_rel1[..], 1),
            n(&results_rel1[..], 2),
        ])?;
    }

    // Per-query values.
    let mut per_query = Table::new(["system", "query_id", "ndcg@10", "mrr@10", "recall@100"]);
    for (si, s) in systems.iter().enumerate() {
        for qid in results[si][0].per_query.keys() {
            let v = |mi: usize| {
                results[si][mi]
                    .per_query
                    .get(qid)
                    .map(|x| format!("{x:.4}"))
                    .unwrap_or_default()
            };
            per_query.push([s.key.to_string(), qid.clone(), v(0), v(1), v(2)])?;
        }
    }

    // Figure: per-query nDCG@10 differences against BM25, bins of 0.05 over ±(largest |difference|).
    let all_diffs: Vec<Vec<f64>> = (0..systems.len())
        .map(|si| {
            results[si][0]
                .per_query
                .iter()
                .map(|(q, v)| v - results[base][0].per_query[q])
                .collect()
        })
        .collect();
    let max_abs = all_diffs
        .iter()
        .flatten()
        .fold(0.0f64, |m, d| m.max(d.abs()));
    let half = ((max_abs * 10.0).ceil() / 10.0).max(0.1);
    let bins = Bins::new(-half, half, 0.05, false)?;
    let mut panels = Vec::new();
    for (si, s) in systems.iter().enumerate() {
        if si == base {
            continue;
        }
        let diffs = &all_diffs[si];
        let mut counts = vec![0usize; bins.len()];
        for &d in diffs {
            // A difference of exactly +half lands in the last bin.
            counts[bins.index(d).unwrap_or(bins.len() - 1).min(bins.len() - 1)] += 1;
        }
        let wins = diffs.iter().filter(|&&d| d > 1e-9).count();
        let losses = diffs.iter().filter(|&&d| d < -1e-9).count();
        let c = workbench::plot::palette(si);
        panels.push(Histogram {
            title: format!("{} − BM25", panel_title(s, &args)),
            x_label: "per-query nDCG@10 difference".into(),
            y_label: "queries".into(),
            bins,
            series: vec![Series {
                label: format!(
                    "{wins} better, {losses} worse, mean {:+.3}",
                    results[si][0].mean - results[base][0].mean
                ),
                counts,
                color: (c.0, c.1, c.2),
            }],
            markers: vec![(0.0, String::new())],
            size: (640, 320),
        });
    }
    let grid = HistogramGrid {
        caption: format!(
            "DL19 subset: per-query nDCG@10 of each system minus BM25 ({} queries)",
            results[base][0].queries()
        ),
        panels,
        cols: 2,
        panel_size: (640, 320),
    };
    render(&grid)?.save(out.out_dir(), "ndcg10")?;

    table.write_csv(&out.path("metrics.csv"))?;
    table_rel1.write_csv(&out.path("metrics_rel1.csv"))?;
    sig.write_csv(&out.path("significance.csv"))?;
    per_query.write_csv(&out.path("per_query.csv"))?;
    let md = format!(
        "{}\n\n{}\n{}\n\n{}\n\nSignificance against BM25 (two-sided p; {} trials, seed {}):\n\n{}",
        table.caption.as_deref().unwrap_or(""),
        table.to_markdown(),
        table_rel1.caption.as_deref().unwrap_or(""),
        table_rel1.to_markdown(),
        thousands(args.trials),
        args.seed,
        sig.to_markdown()
    );
    std::fs::write(out.path("metrics.md"), &md)?;
    let mut summary = serde_json::Map::new();
    for (si, s) in systems.iter().enumerate() {
        summary.insert(
            s.key.to_string(),
            serde_json::json!({
                "name": s.name,
                "ndcg@10": results[si][0].mean,
                "mrr@10": results[si][1].mean,
                "recall@100": results[si][2].mean,
                "queries": results[si]
                    .iter()
                    .map(|m| (m.name.clone(), m.queries()))
                    .collect::<BTreeMap<_, _>>(),
                "seconds": s.seconds,
            }),
        );
    }
    // The goal of issue 11: the cross-encoder against dense on nDCG@10.
    if let (Some(ce), Some(dense)) = (
        systems.iter().position(|s| s.key == "bm25+ce"),
        systems.iter().position(|s| s.key == "dense"),
    ) {
        let c = significance::compare(
            &results[ce][0].per_query,
            &results[dense][0].per_query,
            args.trials,
            args.seed,
        )?;
        println!(
            "cross-encoder vs dense, nDCG@10: {:.4} vs {:.4}, randomisation p = {:.4}",
            results[ce][0].mean, results[dense][0].mean, c.randomization.p_value
        );
        summary.insert(
            "ce_vs_dense_ndcg10_p_randomization".into(),
            c.randomization.p_value.into(),
        );
    }
    summary.insert("rel_threshold".into(), t.into());
    summary.insert(
        "evaluated_queries".into(),
        results[base][1].queries().into(),
    );
    summary.insert("evaluation".into(), serde_json::to_value(evaluation)?);
    summary.insert("qrels_grades".into(), serde_json::to_value(&grades)?);
    println!("{md}");
    exp.finish(serde_json::Value::Object(summary))?;
    Ok(())
}

/// `10000` → `10,000`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    digits
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|group| std::str::from_utf8(group).expect("ASCII digits"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The main table's caption: every fact in it comes from the arguments or the
/// measured results.
fn caption(
    args: &Args,
    passages: usize,
    queries: usize,
    gains: &str,
    maxsim_recall: &str,
    counts_line: &str,
) -> String {
    format!(
        "TREC DL19 passage subset ({passages} passages, {queries} judged queries), scored as trec_eval 9.0.8 \
         scores the run files (ties by descending passage id). MRR@10 and Recall@100 count grade ≥ {} as relevant \
         (nDCG@10 uses {gains}). † / †† : randomisation test against BM25 ({} trials, seed {}), \
         p < 0.05 / p < 0.01.{maxsim_recall} {counts_line}",
        args.rel_threshold,
        thousands(args.trials),
        args.seed,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(10_000), "10,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn caption_states_the_configured_trials_seed_and_threshold() {
        // The caption used to say "10,000 trials" whatever --trials said.
        let args = Args::parse_from([
            "exp_dl19",
            "--trials",
            "500",
            "--seed",
            "7",
            "--rel-threshold",
            "3",
        ]);
        let c = caption(
            &args,
            5000,
            43,
            "grades 1–3 as gains",
            "",
            "Queries averaged: ndcg@10 43.",
        );
        assert!(c.contains("(500 trials, seed 7)"), "{c}");
        assert!(!c.contains("10,000"), "{c}");
        assert!(c.contains("grade ≥ 3"), "{c}");
        assert!(c.contains("5000 passages, 43 judged queries"), "{c}");
        let default = Args::parse_from(["exp_dl19"]);
        assert!(caption(&default, 1, 1, "", "", "").contains("(10,000 trials, seed 42)"));
    }
}
