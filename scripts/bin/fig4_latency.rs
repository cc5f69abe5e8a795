//! Report 000, Figure 4: histogram of per-query retrieval latency, one panel per retriever.
//!
//! ```text
//! cargo run --release --bin fig4_latency [-- --force] [--queries 500]
//! ```
//! Corpus: the Wikipedia lead sections (`wiki-leads-en`) cut by report 000's paragraph
//! filter (21–199 words, ~10k passages). Queries: the first `--queries` NQ-open dev
//! questions. Each retriever answers every query one at a time (top `--k`), after
//! `--warmup` unmeasured queries; the wall-clock time of each call is recorded:
//!
//! | retriever | what one query costs |
//! |---|---|
//! | TF-IDF (cosine) | analyse + term-at-a-time scoring + top-k |
//! | BM25 (Lucene, k1 0.9, b 0.4) | same |
//! | dense flat | MiniLM query encoding + exact FAISS inner-product search |
//! | dense HNSW | MiniLM query encoding + FAISS HNSW32 (efSearch 64) search |
//! | hybrid | dense flat + BM25 (each `--hybrid-depth` deep), min-max fusion w = 0.5 |
//! | FAISS flat search only | the search part of "dense flat" (what report 000's 32.2 ms measured) |
//!
//! The machine may be shared: the CPU cores available to the process
//! (`std::thread::available_parallelism`) and the load average at the start and end are
//! measured and stated in the caption of `latency_summary.md` and in the manifest
//! summary; latencies include that noise. Every label and caption takes its numbers
//! (BM25 parameters, HNSW `M` and efSearch, hybrid weight, counts) from the run's
//! configuration.
//!
//! Writes `data/results/fig4-latency/`: `fig4.png`, `fig4.svg`, `latency_summary.csv`
//! (mean, median, p95, p99, min, max per retriever), `latency_summary.md`,
//! `latency_per_query.csv`, `bins.csv`, `config.json`, `manifest.json`.

use anyhow::{Context, Result};
use clap::Parser;
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;
use workbench::assets::Assets;
use workbench::chunk::{Chunker, ParagraphParams};
use workbench::display::Table;
use workbench::encode::{BertEncoder, EmbeddingCache, EncoderParams};
use workbench::evaluate::quantile;
use workbench::load::{nq_open, wikipedia_corpus};
use workbench::plot::{bin_counts, render, Bins, Histogram, HistogramGrid, Series};
use workbench::results::Experiment;
use workbench::retrieve::analyzer::Analyzer;
use workbench::retrieve::bm25::{Bm25, Bm25Params};
use workbench::retrieve::dense::DenseRetriever;
use workbench::retrieve::faiss::{IndexKind, IndexParams};
use workbench::retrieve::fusion::Fused;
use workbench::retrieve::tfidf::{TfIdf, TfIdfVariant};
use workbench::retrieve::Retriever;
use workbench::QaExample;

const NAME: &str = "fig4-latency";
/// Printed when the result is fresh and the run is skipped.
const SUMMARY_FILE: &str = "latency_summary.md";
/// The corpus at the default and paper scales (the quick scale's is `wikitext-2-raw`).
const CORPUS: &str = "wiki-leads-en";
/// Report 000's FAISS latency: mean over its queries, 184,051 paragraph vectors.
const REPORT_FAISS_MEAN_MS: f64 = 32.2;

#[derive(Parser, Serialize, Debug)]
#[command(about = "Report 000 Figure 4: per-query retrieval latency histograms")]
struct Args {
    /// quick: 100 questions over the `wikitext-2-raw` paragraphs (no 10k-paragraph
    /// embedding run); default and paper: `--queries` over `wiki-leads-en`.
    #[arg(long, default_value = "default")]
    scale: workbench::study::Scale,
    /// Number of NQ-open dev questions (the first ones, in file order; the quick scale
    /// asks 100).
    #[arg(long, default_value_t = 500)]
    queries: usize,
    /// Unmeasured queries run through each retriever first.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// Hits per query.
    #[arg(long, default_value_t = 10)]
    k: usize,
    /// Candidates from each side of the hybrid.
    #[arg(long, default_value_t = 100)]
    hybrid_depth: usize,
    /// Dense weight of the hybrid (min-max fusion).
    #[arg(long, default_value_t = 0.5)]
    hybrid_weight: f32,
    /// Sentence encoder (asset name).
    #[arg(long, default_value = "all-minilm-l6-v2")]
    model: String,
    /// Regular histogram bins per panel (plus one overflow bin from a round 1.5 × p99 up).
    #[arg(long, default_value_t = 60)]
    bins: usize,
    /// Recompute even if the results are fresh.
    #[arg(long)]
    #[serde(skip)]
    force: bool,
}

#[derive(Serialize)]
struct Config<'a> {
    args: &'a Args,
    corpus: &'a str,
    filter: ParagraphParams,
    encoder: EncoderParams,
    bm25: Bm25Params,
    hnsw: IndexKind,
    inputs: Vec<(String, String)>,
    program_sha256: String,
}

/// The smallest of 1, 2, 2.5, 5 × 10^e that is ≥ x.
fn nice_ceil(x: f64) -> f64 {
    let e = x.log10().floor();
    let base = 10f64.powf(e);
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * base >= x * (1.0 - 1e-12) {
            return m * base;
        }
    }
    10.0 * base
}

/// CPU cores this process may use (`available_parallelism`: affinity mask and cgroup
/// quota), or `"unknown"`.
fn cores_available() -> String {
    std::thread::available_parallelism()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// `BM25 (Lucene, k1 0.9, b 0.4)` from the parameters in use.
fn bm25_label(p: &Bm25Params) -> String {
    format!("BM25 ({:?}, k1 {}, b {})", p.variant, p.k1, p.b)
}

/// `dense HNSW32 (encode + search)` from the index kind in use (efSearch is in the
/// retriever's name column).
fn hnsw_label(kind: &IndexKind) -> String {
    match kind {
        IndexKind::Hnsw { m, .. } => format!("dense HNSW{m} (encode + search)"),
        other => format!("dense {} (encode + search)", other.tag()),
    }
}

struct Measured {
    label: String,
    name: String,
    /// Per query: total, encode, search (ms); encode/search are NaN for lexical retrievers.
    times: Vec<(f64, f64, f64)>,
}

fn main() -> Result<()> {
    let mut args = Args::parse();
    let corpus = match args.scale {
        workbench::study::Scale::Quick => {
            args.queries = args.queries.min(100);
            "wikitext-2-raw"
        }
        _ => CORPUS,
    };
    let assets = Assets::load()?;
    let filter = ParagraphParams::default();
    let encoder_params = EncoderParams::default();
    let hnsw = IndexKind::hnsw();
    let inputs = assets.input_checksums([corpus, "nq-open", args.model.as_str()])?;
    let config = Config {
        args: &args,
        corpus,
        filter: filter.clone(),
        encoder: encoder_params.clone(),
        bm25: Bm25Params::default(),
        hnsw,
        inputs,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let Some(exp) = Experiment::start(
        &args.scale.result_name(NAME),
        &config,
        args.force,
        SUMMARY_FILE,
    )?
    else {
        return Ok(());
    };
    let out = &exp.out;
    let load_start = workbench::machine::load_average();
    let cores = cores_available();

    let docs =
        wikipedia_corpus(&assets, corpus).with_context(|| format!("loading corpus `{corpus}`"))?;
    let passages = filter.clone().check()?.chunk_all(&docs)?;
    let questions: Vec<QaExample> =
        nq_open::load(&assets.resolve("nq-open", "NQ-open.dev.jsonl")?)?
            .into_iter()
            .take(args.queries)
            .collect();
    let warm: Vec<&QaExample> = questions.iter().take(args.warmup).collect();
    println!(
        "{corpus}: {} passages; {} NQ-open dev questions (+{} warm-up)",
        passages.len(),
        questions.len(),
        warm.len()
    );

    // Indexes.
    let t0 = Instant::now();
    let analyzer = Analyzer::default();
    let tfidf = TfIdf::build(&passages, &analyzer, TfIdfVariant::cosine())?;
    let bm25_params = Bm25Params::default();
    let bm25 = Arc::new(Bm25::build(&passages, &analyzer, bm25_params)?);
    let lexical_build_s = t0.elapsed().as_secs_f64();
    let encoder = Arc::new(BertEncoder::load(&assets, &args.model, encoder_params)?);
    let cache = EmbeddingCache::project_default()?;
    let t0 = Instant::now();
    let (vectors, status) = cache.get_or_compute_with_status(&encoder, &passages)?;
    let embed_s = t0.elapsed().as_secs_f64();
    println!("passage embeddings: {status:?} in {embed_s:.1} s");
    let ids: Vec<String> = passages.iter().map(|p| p.id.clone()).collect();
    let t0 = Instant::now();
    let flat_index = workbench::retrieve::faiss::VectorIndex::build(
        IndexParams::flat_ip(),
        encoder.dim(),
        &vectors,
    )?;
    let flat = Arc::new(DenseRetriever::from_parts(
        encoder.clone(),
        flat_index,
        ids.clone(),
    )?);
    let flat_build_s = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    let hnsw_index = workbench::retrieve::faiss::VectorIndex::build(
        IndexParams::ip(hnsw),
        encoder.dim(),
        &vectors,
    )?;
    let hnsw_r = DenseRetriever::from_parts(encoder.clone(), hnsw_index, ids)?;
    let hnsw_build_s = t0.elapsed().as_secs_f64();
    let hybrid = Fused::hybrid(
        Box::new(flat.clone()),
        Box::new(bm25.clone()),
        args.hybrid_weight,
        args.hybrid_depth,
    )?;
    println!(
        "built: lexical {lexical_build_s:.1} s, FAISS flat {flat_build_s:.2} s, HNSW {hnsw_build_s:.1} s"
    );

    // Measure, one retriever at a time, one query at a time.
    let k = args.k;
    let nan = f64::NAN;
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let time_plain = |r: &dyn Retriever| -> Result<Vec<(f64, f64, f64)>> {
        for q in &warm {
            r.retrieve(&q.question, k)?;
        }
        let mut v = Vec::with_capacity(questions.len());
        for q in &questions {
            let t = Instant::now();
            let hits = r.retrieve(&q.question, k)?;
            v.push((ms(t.elapsed()), nan, nan));
            std::hint::black_box(hits);
        }
        Ok(v)
    };
    let time_dense = |r: &DenseRetriever| -> Result<Vec<(f64, f64, f64)>> {
        for q in &warm {
            r.retrieve_with_timing(&q.question, k)?;
        }
        let mut v = Vec::with_capacity(questions.len());
        for q in &questions {
            let t = Instant::now();
            let (hits, timing) = r.retrieve_with_timing(&q.question, k)?;
            v.push((ms(t.elapsed()), ms(timing.encode), ms(timing.search)));
            std::hint::black_box(hits);
        }
        Ok(v)
    };
    let mut measured = Vec::new();
    let lexical: [(String, &dyn Retriever); 2] = [
        ("TF-IDF (cosine)".into(), &tfidf),
        (bm25_label(&bm25_params), bm25.as_ref()),
    ];
    for (label, r) in lexical {
        measured.push(Measured {
            label: label.clone(),
            name: r.name(),
            times: time_plain(r)?,
        });
        println!("measured {label}");
    }
    let flat_times = time_dense(&flat)?;
    println!("measured dense flat");
    measured.push(Measured {
        label: "dense flat (encode + search)".into(),
        name: flat.name(),
        times: flat_times.clone(),
    });
    measured.push(Measured {
        label: hnsw_label(&hnsw),
        name: hnsw_r.name(),
        times: time_dense(&hnsw_r)?,
    });
    println!("measured dense HNSW");
    measured.push(Measured {
        label: format!(
            "hybrid (dense flat + BM25, min-max w = {})",
            args.hybrid_weight
        ),
        name: hybrid.name(),
        times: time_plain(&hybrid)?,
    });
    println!("measured hybrid");
    measured.push(Measured {
        label: "FAISS flat search only (no encoding)".into(),
        name: format!("{}:search-only", flat.name()),
        times: flat_times.iter().map(|t| (t.2, nan, t.2)).collect(),
    });
    let load_end = workbench::machine::load_average();

    // Tables.
    let mut summary_t = Table::new([
        "retriever", "name", "queries", "mean_ms", "median_ms", "p95_ms", "p99_ms", "min_ms", "max_ms",
        "encode_median_ms", "search_median_ms",
    ])
    .caption(format!(
        "Per-query latency, {} NQ-open dev questions over {} {corpus} paragraphs, top {k}, one query at a time \
         after {} warm-up queries; {cores} CPU cores available to the process, load average (1/5/15 min) \
         {load_start} at the start and {load_end} at the end. Report 000: FAISS mean {REPORT_FAISS_MEAN_MS} ms \
         over 184,051 vectors.",
        questions.len(),
        passages.len(),
        warm.len()
    ));
    let mut per_query = Table::new([
        "retriever",
        "query_id",
        "total_ms",
        "encode_ms",
        "search_ms",
    ]);
    let mut bins_csv = Table::new(["retriever", "bin", "lo_ms", "hi_ms", "queries"]);
    let mut panels = Vec::new();
    let mut summary = serde_json::Map::new();
    for (mi, m) in measured.iter().enumerate() {
        let mut tot: Vec<f64> = m.times.iter().map(|t| t.0).collect();
        tot.sort_by(f64::total_cmp);
        let med_of = |f: fn(&(f64, f64, f64)) -> f64| {
            let mut v: Vec<f64> = m.times.iter().map(f).filter(|x| x.is_finite()).collect();
            v.sort_by(f64::total_cmp);
            if v.is_empty() {
                None
            } else {
                Some(quantile(&v, 0.5))
            }
        };
        let mean = tot.iter().sum::<f64>() / tot.len() as f64;
        let (med, p95, p99) = (
            quantile(&tot, 0.5),
            quantile(&tot, 0.95),
            quantile(&tot, 0.99),
        );
        let fmt = |x: f64| format!("{x:.3}");
        summary_t.push([
            m.label.clone(),
            m.name.clone(),
            tot.len().to_string(),
            fmt(mean),
            fmt(med),
            fmt(p95),
            fmt(p99),
            fmt(tot[0]),
            fmt(tot[tot.len() - 1]),
            med_of(|t| t.1).map(fmt).unwrap_or_else(|| "–".into()),
            med_of(|t| t.2).map(fmt).unwrap_or_else(|| "–".into()),
        ])?;
        summary.insert(
            m.label.clone(),
            serde_json::json!({"mean_ms": mean, "median_ms": med, "p95_ms": p95, "p99_ms": p99}),
        );
        for (q, t) in questions.iter().zip(&m.times) {
            let f = |x: f64| {
                if x.is_finite() {
                    format!("{x:.4}")
                } else {
                    String::new()
                }
            };
            per_query.push([m.label.clone(), q.id.clone(), f(t.0), f(t.1), f(t.2)])?;
        }
        // Room on the right for the legend: the overflow bin starts at a round 1.5 × p99.
        let hi = nice_ceil(1.5 * p99);
        let bins = Bins::new(0.0, hi, hi / args.bins as f64, true)?;
        let (counts, _) = bin_counts(tot.iter().copied(), &bins);
        for (i, c) in counts.iter().enumerate() {
            let (lo, h) = bins.edges(i);
            bins_csv.push([
                m.label.clone(),
                bins.label(i),
                format!("{lo}"),
                format!("{h}"),
                c.to_string(),
            ])?;
        }
        let c = workbench::plot::palette(mi);
        panels.push(Histogram {
            title: m.label.clone(),
            x_label: "latency per query (ms)".into(),
            y_label: "queries".into(),
            bins,
            series: vec![Series {
                label: format!("{} queries, mean {mean:.2} ms", tot.len()),
                counts,
                color: (c.0, c.1, c.2),
            }],
            markers: vec![
                (med, format!("median {med:.2} ms")),
                (p95.min(hi), format!("p95 {p95:.2} ms")),
            ],
            size: (720, 360),
        });
    }
    let grid = HistogramGrid {
        caption: format!(
            "Figure 4: per-query latency, {} NQ-open questions, {} paragraphs (report 000: FAISS mean {REPORT_FAISS_MEAN_MS} ms, 184k vectors)",
            questions.len(),
            passages.len()
        ),
        panels,
        cols: 2,
        panel_size: (720, 360),
    };
    render(&grid)?.save(out.out_dir(), "fig4")?;
    summary_t.write_csv(&out.path("latency_summary.csv"))?;
    per_query.write_csv(&out.path("latency_per_query.csv"))?;
    bins_csv.write_csv(&out.path("bins.csv"))?;
    let md = format!(
        "{}\n\n{}",
        summary_t.caption.as_deref().unwrap_or(""),
        summary_t.to_markdown()
    );
    std::fs::write(out.path("latency_summary.md"), &md)?;
    summary.insert("passages".into(), passages.len().into());
    summary.insert("queries".into(), questions.len().into());
    summary.insert("load_avg_start".into(), load_start.clone().into());
    summary.insert("load_avg_end".into(), load_end.clone().into());
    summary.insert("cpu_cores_available".into(), cores.clone().into());
    summary.insert("embed_seconds".into(), embed_s.into());
    summary.insert("embedding_cache".into(), format!("{status:?}").into());
    summary.insert("hnsw_build_seconds".into(), hnsw_build_s.into());
    println!("{md}");
    println!("load average: start {load_start}, end {load_end}; {cores} CPU cores available");
    exp.finish(serde_json::Value::Object(summary))?;
    Ok(())
}
