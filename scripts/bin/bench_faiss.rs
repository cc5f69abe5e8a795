//! Benchmark: FAISS flat vs HNSW (and IVF-Flat) per-query search latency and
//! recall@10 against exact search, through `workbench::retrieve::faiss`.
//!
//! ```text
//! cargo run --release --bin bench_faiss [-- --queries 1000 --ef-search 16,32,64,128,256 --nprobe 8,16,32,64]
//! ```
//!
//! Base: MiniLM (all-MiniLM-L6-v2) vectors of the wiki-leads-en paragraphs cut by report
//! 000's filter (21–199 words), exactly the passages and encoder parameters of
//! `fig4_latency`, so they come from the embedding cache when that ran. Queries: a seeded
//! sample of `--queries` NQ-open dev questions, embedded with the same encoder (search
//! time only; encoding is not measured).
//!
//! Indexes (inner product on the normalised vectors): `Flat` (exact; the reference),
//! `HNSW32` (efConstruction 80) at each `--ef-search`, and `IVF{nlist},Flat` with nlist
//! from `IndexKind::ivf_for` at each `--nprobe`. The wrapper fixes search parameters
//! when an index is built, so every setting is its own build (same vectors; with one
//! build thread the HNSW graph and the IVF cells are the same each time).
//!
//! Latency: one query per `search` call, top `--k`, OpenMP pinned to `--threads` (1)
//! threads through libgomp's `omp_set_num_threads` (the faiss crate does not expose
//! it). After `--warmup` unmeasured queries per index, the queries are timed in blocks
//! of `--block`: every index answers a block in turn, in an order that rotates from
//! block to block, so machine load falls on all indexes alike while each index still
//! runs warm. Reported: build seconds, median and p95 latency, the ratio of the flat
//! median to each index's median, and recall@k against the flat top-k.
//!
//! Writes `data/results/bench-faiss/`: `bench.md`, `bench.csv`, `latency_per_query.csv`,
//! `config.json` (arguments, inputs and the machine, `workbench::machine::Machine`),
//! `manifest.json`.

use anyhow::{ensure, Context, Result};
use clap::Parser;
use rand::SeedableRng;
use serde::Serialize;
use std::collections::HashSet;
use std::time::Instant;
use workbench::assets::Assets;
use workbench::bench::{median, median_p95, omp_threads, set_omp_threads, BenchRun};
use workbench::chunk::{Chunker, ParagraphParams};
use workbench::display::Table;
use workbench::encode::{BertEncoder, EmbeddingCache, EncoderParams};
use workbench::load::{nq_open, wikipedia_corpus};
use workbench::machine::load_average;
use workbench::retrieve::faiss::{IndexKind, IndexParams, VectorIndex};

const NAME: &str = "bench-faiss";
const CORPUS: &str = "wiki-leads-en";
const QUESTIONS: &str = "nq-open";
const SUMMARY_FILE: &str = "bench.md";

#[derive(Parser, Serialize, Debug)]
#[command(about = "FAISS flat vs HNSW vs IVF-Flat: per-query latency and recall@10 vs exact")]
struct Args {
    /// NQ-open dev questions to time (a seeded sample).
    #[arg(long, default_value_t = 1000)]
    queries: usize,
    /// Seed of the question sample.
    #[arg(long, default_value_t = 20240601)]
    seed: u64,
    /// Hits per query (recall@k is measured at this k).
    #[arg(long, default_value_t = 10)]
    k: usize,
    /// Unmeasured queries per index before timing.
    #[arg(long, default_value_t = 50)]
    warmup: usize,
    /// Queries per interleaving block.
    #[arg(long, default_value_t = 100)]
    block: usize,
    /// HNSW efSearch values (one index each; M 32, efConstruction 80).
    #[arg(long, value_delimiter = ',', default_value = "16,32,64,128,256")]
    ef_search: Vec<usize>,
    /// IVF-Flat nprobe values (one index each; nlist from `IndexKind::ivf_for`); empty to skip IVF.
    #[arg(long, value_delimiter = ',', default_value = "8,16,32,64")]
    nprobe: Vec<usize>,
    /// OpenMP threads while searching.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// OpenMP threads while building (1 keeps HNSW graphs identical across builds).
    #[arg(long, default_value_t = 1)]
    build_threads: usize,
    /// Sentence encoder (asset name).
    #[arg(long, default_value = "all-minilm-l6-v2")]
    model: String,
    /// Accepted for symmetry with the experiments; benchmarks always re-run.
    #[arg(long)]
    #[serde(skip)]
    force: bool,
}

#[derive(Serialize)]
struct Config<'a> {
    args: &'a Args,
    corpus: &'static str,
    filter: ParagraphParams,
    encoder: EncoderParams,
    inputs: Vec<(String, String)>,
    program_sha256: String,
}

struct Bench {
    label: String,
    params: IndexParams,
    index: VectorIndex,
    build_s: f64,
    /// Per query (sample order): latency in ms and the top-k positions.
    ms: Vec<f64>,
    hits: Vec<Vec<usize>>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(
        args.queries > 0 && args.k > 0 && args.block > 0 && args.threads > 0,
        "--queries, --k, --block and --threads must be at least 1"
    );
    let assets = Assets::load()?;
    let filter = ParagraphParams::default();
    let encoder_params = EncoderParams::default();
    let config = Config {
        args: &args,
        corpus: CORPUS,
        filter: filter.clone(),
        encoder: encoder_params.clone(),
        inputs: assets.input_checksums([CORPUS, QUESTIONS, args.model.as_str()])?,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let BenchRun { exp, machine } = BenchRun::start(NAME, &config, SUMMARY_FILE)?;
    let out = &exp.out;
    let load_start = machine.load_before.clone();
    println!("{}", machine.summary());
    let omp_default = omp_threads();

    // Base vectors: fig4_latency's passages and encoder, through the embedding cache.
    let docs =
        wikipedia_corpus(&assets, CORPUS).with_context(|| format!("loading corpus `{CORPUS}`"))?;
    let passages = filter.clone().check()?.chunk_all(&docs)?;
    let encoder = BertEncoder::load(&assets, &args.model, encoder_params)?;
    let t0 = Instant::now();
    let (base, status) =
        EmbeddingCache::project_default()?.get_or_compute_with_status(&encoder, &passages)?;
    println!(
        "{CORPUS}: {} passages; embeddings {status:?} in {:.1} s",
        passages.len(),
        t0.elapsed().as_secs_f64()
    );

    // Queries: a seeded sample of NQ-open dev questions, in file order.
    let nq = nq_open::load(
        &assets.resolve(QUESTIONS, "NQ-open.dev.jsonl")?,
        workbench::load::question_set::BadRecords::Skip,
    )?;
    eprintln!("NQ-open dev: {}", nq_open::dropped_note(&nq));
    let all = nq.questions;
    ensure!(
        args.queries <= all.len(),
        "--queries {} exceeds the {} NQ-open dev questions",
        args.queries,
        all.len()
    );
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);
    let mut picked = rand::seq::index::sample(&mut rng, all.len(), args.queries).into_vec();
    picked.sort_unstable();
    let questions: Vec<&str> = picked.iter().map(|&i| all[i].question.as_str()).collect();
    let t0 = Instant::now();
    let qvecs = encoder.embed(&questions)?;
    println!(
        "{} NQ-open dev questions (seed {}) embedded in {:.1} s",
        qvecs.len(),
        args.seed,
        t0.elapsed().as_secs_f64()
    );

    // Builds.
    let mut kinds = vec![("Flat (exact)".to_string(), IndexKind::Flat)];
    for &ef in &args.ef_search {
        if let IndexKind::Hnsw {
            m, ef_construction, ..
        } = IndexKind::hnsw()
        {
            kinds.push((
                format!("HNSW{m} efSearch {ef}"),
                IndexKind::Hnsw {
                    m,
                    ef_search: ef,
                    ef_construction,
                },
            ));
        }
    }
    if let IndexKind::IvfFlat { nlist, .. } = IndexKind::ivf_for(base.len()) {
        for &nprobe in &args.nprobe {
            kinds.push((
                format!("IVF{nlist},Flat nprobe {nprobe}"),
                IndexKind::IvfFlat { nlist, nprobe },
            ));
        }
    }
    let build_omp = set_omp_threads(args.build_threads);
    let mut benches = Vec::new();
    for (label, kind) in kinds {
        let params = IndexParams::ip(kind);
        let t = Instant::now();
        let index = VectorIndex::build(params, encoder.dim(), &base)?;
        let build_s = t.elapsed().as_secs_f64();
        println!("built {label:<28} {build_s:7.2} s");
        benches.push(Bench {
            label,
            params,
            index,
            build_s,
            ms: vec![f64::NAN; qvecs.len()],
            hits: vec![Vec::new(); qvecs.len()],
        });
    }

    // Search: warm-up, then interleaved blocks of single-query searches.
    let search_omp = set_omp_threads(args.threads);
    let k = args.k;
    for b in &benches {
        for q in qvecs.iter().cycle().take(args.warmup) {
            std::hint::black_box(b.index.search(std::slice::from_ref(q), k)?);
        }
    }
    let nb = benches.len();
    for (bi, start) in (0..qvecs.len()).step_by(args.block).enumerate() {
        let end = (start + args.block).min(qvecs.len());
        for j in 0..nb {
            let b = &mut benches[(bi + j) % nb];
            for (qi, q) in qvecs.iter().enumerate().take(end).skip(start) {
                let t = Instant::now();
                let res = b.index.search(std::slice::from_ref(q), k)?;
                b.ms[qi] = t.elapsed().as_secs_f64() * 1e3;
                b.hits[qi] = res[0].iter().map(|&(p, _)| p).collect();
            }
        }
    }
    let load_end = load_average();

    // Recall@k against the flat top-k, latency statistics.
    let truth: Vec<HashSet<usize>> = benches[0]
        .hits
        .iter()
        .map(|h| h.iter().copied().collect())
        .collect();
    let flat_median = median(&benches[0].ms);
    let mut t = Table::new([
        "index",
        "factory",
        "build (s)",
        "median (ms)",
        "p95 (ms)",
        "flat/this median latency",
        format!("recall@{k} vs flat").as_str(),
    ])
    .caption(format!(
        "FAISS inner-product search over {} MiniLM vectors (wiki-leads-en paragraphs, dim {}), {} NQ-open dev questions \
         (seed {}), one query per call, top {k}, {} OpenMP thread(s) searching, {} building; median/p95 of per-query \
         wall time after {} warm-up queries, indexes interleaved in blocks of {}.",
        base.len(),
        encoder.dim(),
        qvecs.len(),
        args.seed,
        search_omp,
        build_omp,
        args.warmup,
        args.block
    ));
    let mut per_query = Table::new(["index", "query_id", "ms", "recall"]);
    let mut summary = serde_json::Map::new();
    for b in &benches {
        let (med, p95) = median_p95(&b.ms);
        let recalls: Vec<f64> = b
            .hits
            .iter()
            .zip(&truth)
            .map(|(h, t)| h.iter().filter(|p| t.contains(p)).count() as f64 / t.len().max(1) as f64)
            .collect();
        let recall = recalls.iter().sum::<f64>() / recalls.len() as f64;
        t.push([
            b.label.clone(),
            b.params.kind.factory(),
            format!("{:.2}", b.build_s),
            format!("{med:.4}"),
            format!("{p95:.4}"),
            format!("{:.2}", flat_median / med),
            format!("{recall:.4}"),
        ])?;
        for ((&qi, ms), r) in picked.iter().zip(&b.ms).zip(&recalls) {
            per_query.push([
                b.params.tag(),
                all[qi].id.clone(),
                format!("{ms:.5}"),
                format!("{r:.2}"),
            ])?;
        }
        summary.insert(
            b.params.tag(),
            serde_json::json!({
                "label": b.label, "build_s": b.build_s, "median_ms": med, "p95_ms": p95,
                "flat_over_this_median": flat_median / med, "recall_at_k": recall,
            }),
        );
    }
    t.write_csv(&out.path("bench.csv"))?;
    per_query.write_csv(&out.path("latency_per_query.csv"))?;
    let md = format!(
        "{}\n{}\nOpenMP threads: {omp_default} by default, {build_omp} building, {search_omp} searching (set with libgomp's \
         omp_set_num_threads; BLAS threads, used by IVF training, are not controlled). Embeddings: {status:?}. \
         Load average (1/5/15 min): start {load_start}, end {load_end}.\n",
        machine.summary(),
        t.to_markdown()
    );
    std::fs::write(out.path(SUMMARY_FILE), &md)?;
    summary.insert("passages".into(), base.len().into());
    summary.insert("queries".into(), qvecs.len().into());
    summary.insert("omp_threads_default".into(), omp_default.into());
    summary.insert("omp_threads_build".into(), build_omp.into());
    summary.insert("omp_threads_search".into(), search_omp.into());
    summary.insert("embedding_cache".into(), format!("{status:?}").into());
    summary.insert("load_avg_start".into(), load_start.into());
    summary.insert("load_avg_end".into(), load_end.into());
    exp.finish(serde_json::Value::Object(summary))?;
    println!("\n{md}");
    Ok(())
}
