//! Benchmark: fast approximate end-to-end late interaction (centroid pruning over FAISS
//! k-means, `late_interaction::approx`) against the exact end-to-end path, in the same run
//! on the same queries.
//!
//! ```text
//! cargo run --release --bin bench_token_index [-- --nlist 256,1024 --nprobe 1,4 --candidates 16,32,64,128]
//! ```
//!
//! Data: SQuAD 2.0 dev (the CS224N half), its 646 contexts as passages and its answerable
//! questions as queries, one relevant passage each — `exp_late_interaction`'s set-up and
//! token store (raw 384-d all-MiniLM-L6-v2 token vectors, `data/cache/late-interaction/`,
//! rebuilt when missing or stale).
//!
//! Systems:
//! - **exact** end-to-end (report 003 §3.2.3, `MaxSimEndToEnd`'s search): each query token's
//!   `k̂ = ⌈k/λ⌉` nearest passage tokens by exact FAISS inner product (`Flat`) over every
//!   token vector, exact MaxSim on their passages; `k = --depth`, λ = `--lambda`.
//! - **approximate** at each `--nlist` × `--nprobe` × `--candidates`: centroid scores,
//!   `nprobe` cells per query token, the `candidates` best passages by centroid
//!   interaction, exact MaxSim on those. One index per `nlist` (k-means seed `--seed`,
//!   `--niter` iterations), cached next to the token store.
//!
//! Timing: every query is encoded once (timed: `encode ms`), then each system searches the
//! encoded query (`search ms`); `total ms` = encode + search of the same query. After
//! `--warmup` unmeasured queries per system, the queries are timed in blocks of `--block`,
//! every system answering a block in turn in an order that rotates from block to block, so
//! machine load falls on all alike. One thread each: FAISS' OpenMP pinned to `--threads`
//! (1); the approximate search and MaxSim are single-threaded. Reported: median and p95,
//! Recall@10 and MRR@10 (and Recall@1), their difference to exact, and the share of exact's
//! top 10 each system returns. The load average is printed and saved at start and end.
//!
//! Writes `data/results/bench-token-index/`: `bench.md`, `bench.csv`, `per_query.csv`,
//! `config.json` (arguments, inputs and the machine, `workbench::machine::Machine`),
//! `manifest.json`.

use anyhow::{ensure, Context, Result};
use clap::Parser;
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;
use workbench::assets::Assets;
use workbench::bench::{median_p95, set_omp_threads, BenchRun};
use workbench::chunk::{Chunker, WholeDocument};
use workbench::display::Table;
use workbench::evaluate::{evaluate, Metric};
use workbench::load::squad;
use workbench::machine::load_average;
use workbench::rerank::late_interaction::{
    ApproxSearch, ApproxTokenIndex, CentroidParams, LateInteraction, TokenIndex, TokenStore,
};
use workbench::{Hit, Qrels, Run};

const NAME: &str = "bench-token-index";
const SUMMARY_FILE: &str = "bench.md";
const DATA: &str = "squad-v2-dev-half";

#[derive(Parser, Serialize, Debug)]
#[command(about = "Approximate vs exact end-to-end late interaction: ms/query, Recall@10, MRR@10")]
struct Args {
    /// Passages returned per query (the `k` of k̂ = ⌈k/λ⌉ for exact end-to-end).
    #[arg(long, default_value_t = 100)]
    depth: usize,
    /// λ of the exact end-to-end path (report 003's best: 2).
    #[arg(long, default_value_t = 2.0)]
    lambda: f64,
    /// Centroid counts (one index each).
    #[arg(long, value_delimiter = ',', default_value = "256,1024")]
    nlist: Vec<usize>,
    /// Cells probed per query token.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    nprobe: Vec<usize>,
    /// Candidates scored exactly after centroid interaction.
    #[arg(long, value_delimiter = ',', default_value = "16,32,64,128")]
    candidates: Vec<usize>,
    /// k-means iterations.
    #[arg(long, default_value_t = 20)]
    niter: usize,
    /// k-means seed.
    #[arg(long, default_value_t = 42)]
    seed: u32,
    /// Use only the first N answerable questions (default: all).
    #[arg(long)]
    max_questions: Option<usize>,
    /// Questions over which the passages scored exactly per query are counted.
    #[arg(long, default_value_t = 200)]
    count_sample: usize,
    /// Unmeasured queries per system before timing.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// Queries per interleaving block.
    #[arg(long, default_value_t = 50)]
    block: usize,
    /// OpenMP threads of FAISS while searching (exact path) and building.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Accepted for symmetry with the experiments; benchmarks always re-run.
    #[arg(long)]
    #[serde(skip)]
    force: bool,
}

#[derive(Serialize)]
struct Config<'a> {
    args: &'a Args,
    data: &'static str,
    token_encoder: &'static str,
    inputs: Vec<(String, String)>,
    program_sha256: String,
}

type SearchFn<'a> = Box<dyn Fn(&[f32]) -> workbench::Result<Vec<Hit>> + 'a>;
type CountFn<'a> = Box<dyn Fn(&[f32]) -> workbench::Result<usize> + 'a>;

struct System<'a> {
    label: String,
    tag: String,
    search: SearchFn<'a>,
    /// Passages scored exactly for a query (not timed).
    count: CountFn<'a>,
    ms: Vec<f64>,
    scored: Vec<usize>,
    hits: Vec<Vec<Hit>>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(
        args.depth >= 10 && args.block > 0 && args.threads > 0,
        "--depth must be at least 10 (metrics @10), --block and --threads at least 1"
    );
    ensure!(
        args.lambda.is_finite() && args.lambda > 0.0,
        "--lambda must be positive"
    );
    ensure!(
        args.candidates.iter().all(|&c| c >= 10),
        "--candidates must be at least 10 (metrics @10)"
    );
    let assets = Assets::load()?;
    let config = Config {
        args: &args,
        data: DATA,
        token_encoder:
            "all-minilm-l6-v2 last hidden states, raw 384-d, L2-normalised (LateInteraction::load_minilm)",
        inputs: assets.input_checksums([DATA, "all-minilm-l6-v2"])?,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let BenchRun { exp, machine } = BenchRun::start(NAME, &config, SUMMARY_FILE)?;
    let out = &exp.out;
    let load_start = machine.load_before.clone();
    println!("{}", machine.summary());

    let set = squad::load(&assets.resolve(DATA, "dev-v2.0.json")?)
        .with_context(|| format!("loading `{DATA}`"))?;
    let passages = WholeDocument.chunk_all(&set.contexts)?;
    let answerable: Vec<_> = set
        .examples
        .iter()
        .filter(|q| !q.is_unanswerable())
        .take(args.max_questions.unwrap_or(usize::MAX))
        .collect();
    let mut qrels = Qrels::new();
    for q in &answerable {
        let ctx = q
            .context_id
            .clone()
            .context("SQuAD question without a context id")?;
        qrels.entry(q.id.clone()).or_default().insert(ctx, 1);
    }
    println!(
        "{DATA}: {} passages, {} answerable questions",
        passages.len(),
        answerable.len()
    );

    // Token store (shared with exp_late_interaction).
    let late = LateInteraction::load_minilm(&assets)?;
    let store_path = workbench::paths::project_cache_dir("late-interaction")?
        .join(format!("{DATA}-{}.tok", late.label()));
    let t0 = Instant::now();
    let store: TokenStore = late.load_or_build_store(&passages, &store_path)?;
    println!(
        "token store: {} passages, {} token vectors × {} in {:.1} s ({})",
        store.len(),
        store.n_vectors(),
        store.dim(),
        t0.elapsed().as_secs_f64(),
        store_path.display()
    );
    let n_vectors = store.n_vectors();
    let store = Arc::new(store);

    // Indexes.
    let build_omp = set_omp_threads(args.threads);
    let t0 = Instant::now();
    let exact = TokenIndex::build((*store).clone())?;
    println!(
        "exact token index (FAISS Flat, inner product): {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let mut approx = Vec::new();
    let mut builds = serde_json::Map::new();
    for &nlist in &args.nlist {
        let params = CentroidParams {
            nlist,
            niter: args.niter,
            seed: args.seed,
            ..CentroidParams::new(nlist)
        };
        let path = ApproxTokenIndex::path_next_to(&store_path, &params);
        let cached = path.exists();
        let t0 = Instant::now();
        let index = ApproxTokenIndex::load_or_build(store.clone(), params, &path)?;
        let s = t0.elapsed().as_secs_f64();
        println!(
            "centroid index {} in {s:.1} s ({}, {})",
            params.tag(),
            if cached {
                "cache file present"
            } else {
                "built"
            },
            path.display()
        );
        builds.insert(
            params.tag(),
            serde_json::json!({ "seconds": s, "cache_file_present": cached, "path": path }),
        );
        approx.push(index);
    }

    // Encode every query once.
    let t0 = Instant::now();
    let mut qvecs = Vec::with_capacity(answerable.len());
    let mut encode_ms = Vec::with_capacity(answerable.len());
    for q in &answerable {
        let t = Instant::now();
        let v = late.encode_query(&q.question)?.vectors;
        encode_ms.push(t.elapsed().as_secs_f64() * 1e3);
        qvecs.push(v);
    }
    println!(
        "{} queries encoded in {:.1} s",
        qvecs.len(),
        t0.elapsed().as_secs_f64()
    );

    // Systems.
    let depth = args.depth;
    let k_hat = ((depth as f64 / args.lambda).ceil() as usize).max(1);
    let exact_ref = &exact;
    let mut systems: Vec<System> = vec![System {
        label: format!(
            "exact end-to-end (Flat, k = {depth}, λ = {}, k̂ = {k_hat})",
            args.lambda
        ),
        tag: format!("exact-flat-khat{k_hat}"),
        search: Box::new(move |q: &[f32]| exact_ref.search(q, depth, k_hat)),
        count: Box::new(move |q: &[f32]| Ok(exact_ref.candidates(q, k_hat)?.len())),
        ms: Vec::new(),
        scored: Vec::new(),
        hits: Vec::new(),
    }];
    for index in &approx {
        for &nprobe in &args.nprobe {
            if nprobe > index.nlist() {
                continue;
            }
            for &candidates in &args.candidates {
                let s = ApproxSearch { nprobe, candidates };
                systems.push(System {
                    label: format!(
                        "approximate (nlist {}, nprobe {nprobe}, candidates {candidates})",
                        index.nlist()
                    ),
                    tag: format!("approx-nlist{}-{}", index.nlist(), s.tag()),
                    search: Box::new(move |q: &[f32]| index.search(q, depth, &s)),
                    count: Box::new(move |q: &[f32]| Ok(index.candidates(q, &s)?.0.len())),
                    ms: Vec::new(),
                    scored: Vec::new(),
                    hits: Vec::new(),
                });
            }
        }
    }
    for s in &mut systems {
        s.ms = vec![f64::NAN; qvecs.len()];
        s.scored = Vec::new();
        s.hits = vec![Vec::new(); qvecs.len()];
    }

    // Passages scored exactly, over the first questions (untimed).
    for s in &mut systems {
        for q in qvecs.iter().take(args.count_sample) {
            s.scored.push((s.count)(q)?);
        }
    }
    // Warm-up, then interleaved blocks.
    for s in &systems {
        for q in qvecs
            .iter()
            .cycle()
            .take(args.warmup.min(qvecs.len().max(1)))
        {
            std::hint::black_box((s.search)(q)?);
        }
    }
    let ns = systems.len();
    for (bi, start) in (0..qvecs.len()).step_by(args.block).enumerate() {
        let end = (start + args.block).min(qvecs.len());
        for j in 0..ns {
            let s = &mut systems[(bi + j) % ns];
            for (qi, q) in qvecs.iter().enumerate().take(end).skip(start) {
                let t = Instant::now();
                let hits = std::hint::black_box((s.search)(q)?);
                s.ms[qi] = t.elapsed().as_secs_f64() * 1e3;
                s.hits[qi] = hits;
            }
        }
        eprint!("\rblock {}/{}", bi + 1, qvecs.len().div_ceil(args.block));
    }
    eprintln!();
    let load_end = load_average();
    println!("load at end: {load_end}");

    // Metrics.
    let metrics = [Metric::Recall(10), Metric::Mrr(10), Metric::Recall(1)];
    let mut results = Vec::new();
    for s in &systems {
        let mut run = Run::new();
        for (q, h) in answerable.iter().zip(&s.hits) {
            run.insert(q.id.clone(), h.clone());
        }
        results.push(evaluate(&run, &qrels, &metrics)?);
    }
    let top10 = |h: &[Hit]| -> Vec<String> { h.iter().take(10).map(|h| h.id.clone()).collect() };
    let (enc_med, enc_p95) = median_p95(&encode_ms);
    let mut table = Table::new([
        "system",
        "total ms/query (median)",
        "total p95",
        "search ms (median)",
        "passages scored exactly (mean, first questions)",
        "Recall@10",
        "Δ Recall@10",
        "MRR@10",
        "Δ MRR@10",
        "Recall@1",
        "exact top-10 found",
    ])
    .caption(format!(
        "SQuAD 2.0 dev half: {} answerable questions, {} passages, {n_vectors} token vectors × {} \
         (raw all-MiniLM-L6-v2, `{}`). total = query encoding (median {enc_med:.2} ms, p95 {enc_p95:.2}) + search, per query; \
         one thread; systems interleaved in blocks of {} after {} warm-up queries. Δ: this − exact. \
         Load average (1/5/15 min): start {load_start}, end {load_end}.",
        qvecs.len(),
        passages.len(),
        store.dim(),
        late.label(),
        args.block,
        args.warmup
    ));
    let mut csv = Table::new([
        "system",
        "tag",
        "total_ms_median",
        "total_ms_p95",
        "search_ms_median",
        "search_ms_p95",
        "encode_ms_median",
        "scored_mean",
        "recall@10",
        "mrr@10",
        "recall@1",
        "delta_recall@10",
        "delta_mrr@10",
        "exact_top10_found",
    ]);
    let mut per_query = Table::new(["system", "query_id", "search_ms", "encode_ms", "gold_rank"]);
    let mut summary = serde_json::Map::new();
    let exact_top: Vec<Vec<String>> = systems[0].hits.iter().map(|h| top10(h)).collect();
    for (s, r) in systems.iter().zip(&results) {
        let total: Vec<f64> = s.ms.iter().zip(&encode_ms).map(|(a, b)| a + b).collect();
        let (tmed, tp95) = median_p95(&total);
        let (smed, sp95) = median_p95(&s.ms);
        let scored = s.scored.iter().sum::<usize>() as f64 / s.scored.len().max(1) as f64;
        let (r10, mrr, r1) = (r[0].mean, r[1].mean, r[2].mean);
        let (d_r10, d_mrr) = (r10 - results[0][0].mean, mrr - results[0][1].mean);
        let found = s
            .hits
            .iter()
            .zip(&exact_top)
            .map(|(h, t)| {
                let mine = top10(h);
                t.iter().filter(|id| mine.contains(id)).count() as f64 / t.len().max(1) as f64
            })
            .sum::<f64>()
            / exact_top.len().max(1) as f64;
        table.push([
            s.label.clone(),
            format!("{tmed:.2}"),
            format!("{tp95:.2}"),
            format!("{smed:.2}"),
            format!("{scored:.1}"),
            format!("{r10:.4}"),
            format!("{d_r10:+.4}"),
            format!("{mrr:.4}"),
            format!("{d_mrr:+.4}"),
            format!("{r1:.4}"),
            format!("{found:.4}"),
        ])?;
        csv.push([
            s.label.clone(),
            s.tag.clone(),
            format!("{tmed:.4}"),
            format!("{tp95:.4}"),
            format!("{smed:.4}"),
            format!("{sp95:.4}"),
            format!("{enc_med:.4}"),
            format!("{scored:.2}"),
            format!("{r10:.6}"),
            format!("{mrr:.6}"),
            format!("{r1:.6}"),
            format!("{d_r10:.6}"),
            format!("{d_mrr:.6}"),
            format!("{found:.6}"),
        ])?;
        for (qi, q) in answerable.iter().enumerate() {
            let gold = q.context_id.as_deref().unwrap_or_default();
            let rank = s.hits[qi]
                .iter()
                .position(|h| h.id == gold)
                .map(|i| (i + 1).to_string())
                .unwrap_or_default();
            per_query.push([
                s.tag.clone(),
                q.id.clone(),
                format!("{:.4}", s.ms[qi]),
                format!("{:.4}", encode_ms[qi]),
                rank,
            ])?;
        }
        summary.insert(
            s.tag.clone(),
            serde_json::json!({
                "label": s.label, "total_ms_median": tmed, "total_ms_p95": tp95,
                "search_ms_median": smed, "scored_mean": scored, "recall@10": r10,
                "mrr@10": mrr, "recall@1": r1, "delta_recall@10": d_r10, "delta_mrr@10": d_mrr,
                "exact_top10_found": found,
                "meets_goal": tmed < 20.0 && d_r10 >= -0.01,
            }),
        );
    }
    csv.write_csv(&out.path("bench.csv"))?;
    per_query.write_csv(&out.path("per_query.csv"))?;
    let md = format!(
        "{}\n{}\n\
         FAISS OpenMP threads: {build_omp}. Centroid indexes: {}.\n",
        machine.summary(),
        table.to_markdown(),
        serde_json::to_string(&builds)?
    );
    std::fs::write(out.path(SUMMARY_FILE), &md)?;
    summary.insert("queries".into(), qvecs.len().into());
    summary.insert("passages".into(), passages.len().into());
    summary.insert("token_vectors".into(), n_vectors.into());
    summary.insert("encode_ms_median".into(), enc_med.into());
    summary.insert("builds".into(), serde_json::Value::Object(builds));
    summary.insert("load_start".into(), load_start.into());
    summary.insert("load_end".into(), load_end.into());
    exp.finish(serde_json::Value::Object(summary))?;
    println!("\n{md}");
    Ok(())
}
