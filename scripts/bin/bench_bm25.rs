//! Benchmark: BM25 queries per second against the Python `bm25s` library, measured
//! in the same run on the same corpus, queries, parameters and tokenisation, single
//! thread, with the top-10 overlap between the two.
//!
//! ```text
//! cargo run --release --bin bench_bm25 [-- --pseudo-queries 1000 --repeats 20]
//! ```
//! Needs the peers venv (`scripts/bench` makes it). Writes `data/results/bench-bm25/`.

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;
use workbench::assets::Assets;
use workbench::chunk::{Chunker, WholeDocument};
use workbench::display::Table;
use workbench::load::beir;
use workbench::results::ResultDir;
use workbench::retrieve::analyzer::AnalyzerParams;
use workbench::retrieve::bm25::{Bm25, Bm25Params, Bm25Variant};
use workbench::retrieve::impact::Scratch;

const NAME: &str = "bench-bm25";

#[derive(Parser, Serialize, Debug)]
#[command(about = "BM25 queries/s vs bm25s (single thread, same data and parameters)")]
struct Args {
    /// Pseudo-queries drawn from the corpus (first sentence of a seeded sample of passages), besides the 50 DL19 queries.
    #[arg(long, default_value_t = 1000)]
    pseudo_queries: usize,
    /// Timed passes over all queries (the median is reported).
    #[arg(long, default_value_t = 20)]
    repeats: usize,
    /// BM25 k1.
    #[arg(long, default_value_t = 0.9)]
    k1: f32,
    /// BM25 b.
    #[arg(long, default_value_t = 0.4)]
    b: f32,
    /// Python of the peers venv.
    #[arg(
        long,
        env = "PEERS_PYTHON",
        default_value = "~/.cache/rag-workbench/peers-venv/bin/python"
    )]
    #[serde(skip)]
    python: String,
    /// Recompute even if fresh (benchmarks are always re-run; kept for symmetry).
    #[arg(long)]
    #[serde(skip)]
    force: bool,
}

#[derive(serde::Deserialize)]
struct PeerOut {
    qps: f64,
    top10: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    bm25s_version: Option<String>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

fn run_peer(
    args: &Args,
    corpus: &std::path::Path,
    queries: &std::path::Path,
    root: &std::path::Path,
) -> Result<PeerOut> {
    let python = args
        .python
        .replacen('~', &std::env::var("HOME").unwrap_or_default(), 1);
    let out = Command::new(&python)
        .arg(root.join("scripts/python/bench_bm25s.py"))
        .args(["--corpus".as_ref(), corpus.as_os_str()])
        .args(["--queries".as_ref(), queries.as_os_str()])
        .args([
            "--k1",
            &args.k1.to_string(),
            "--b",
            &args.b.to_string(),
            "--method",
            "lucene",
            "--k",
            "10",
        ])
        .args(["--repeats", &args.repeats.to_string()])
        .output()
        .with_context(|| {
            format!("running the bm25s peer with {python} (make it with scripts/bench)")
        })?;
    if !out.status.success() {
        bail!(
            "bm25s peer failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let last = line
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .context("no JSON line from the peer")?;
    Ok(serde_json::from_str(last)?)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let root = workbench::paths::project_root()?;
    let assets = Assets::load()?;
    let dir = assets.resolve_all("msmarco-dl19-subset")?;
    let set = beir::load(&dir, "test")?;
    let passages = WholeDocument.chunk_all(&set.corpus)?;

    // One query set for both sides: the DL19 queries plus seeded pseudo-queries, written as JSONL.
    let out = ResultDir::new(NAME, &args)?;
    out.begin()?;
    let qpath: PathBuf = out.path("queries.jsonl");
    let peer_queries = Command::new(args.python.replacen(
        '~',
        &std::env::var("HOME").unwrap_or_default(),
        1,
    ))
    .arg(root.join("scripts/python/bench_bm25s.py"))
    .args(["--corpus".as_ref(), dir.join("corpus.jsonl").as_os_str()])
    .args([
        "--queries-from-corpus",
        &args.pseudo_queries.to_string(),
        "--repeats",
        "1",
        "--write-queries",
    ])
    .arg(&qpath)
    .output()
    .context("writing pseudo-queries with the peer script")?;
    if !peer_queries.status.success() {
        bail!(
            "pseudo-query generation failed: {}",
            String::from_utf8_lossy(&peer_queries.stderr)
        );
    }
    let mut queries: Vec<(String, String)> = set
        .queries
        .iter()
        .map(|q| (q.id.clone(), q.text.clone()))
        .collect();
    for line in std::fs::read_to_string(&qpath)?
        .lines()
        .filter(|l| !l.trim().is_empty())
    {
        let v: serde_json::Value = serde_json::from_str(line)?;
        queries.push((
            v["_id"].as_str().unwrap_or_default().to_string(),
            v["text"].as_str().unwrap_or_default().to_string(),
        ));
    }
    let all_q = out.path("all_queries.jsonl");
    std::fs::write(
        &all_q,
        queries
            .iter()
            .map(|(i, t)| serde_json::json!({"_id": i, "text": t}).to_string() + "\n")
            .collect::<String>(),
    )?;

    // Peer first, then ours, on the same files.
    let peer = run_peer(&args, &dir.join("corpus.jsonl"), &all_q, &root)?;

    let t0 = Instant::now();
    let analyzer = AnalyzerParams::plain().build()?;
    let bm25 = Bm25::build(
        &passages,
        &analyzer,
        Bm25Params::new()
            .k1(args.k1)
            .b(args.b)
            .variant(Bm25Variant::Lucene),
    )?;
    let index_s = t0.elapsed().as_secs_f64();
    let mut scratch = Scratch::new();
    for (_, q) in &queries {
        bm25.retrieve_with(q, 10, &mut scratch)?; // warm-up
    }
    let mut rates = Vec::new();
    let mut top10: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in 0..args.repeats {
        let t = Instant::now();
        for (id, q) in &queries {
            let hits = bm25.retrieve_with(q, 10, &mut scratch)?;
            if r == 0 {
                top10.insert(
                    id.clone(),
                    hits.into_iter()
                        .filter(|h| h.score > 0.0)
                        .map(|h| h.id)
                        .collect(),
                );
            }
        }
        rates.push(queries.len() as f64 / t.elapsed().as_secs_f64());
    }
    let ours = median(rates);

    // Top-10 overlap: |ours ∩ theirs| / max(|ours|, |theirs|), averaged over queries.
    let mut overlaps = Vec::new();
    for (id, mine) in &top10 {
        let theirs: HashSet<&String> = peer
            .top10
            .get(id)
            .map(|v| v.iter().collect())
            .unwrap_or_default();
        let denom = mine.len().max(theirs.len());
        if denom > 0 {
            overlaps.push(mine.iter().filter(|x| theirs.contains(x)).count() as f64 / denom as f64);
        }
    }
    let overlap = overlaps.iter().sum::<f64>() / overlaps.len().max(1) as f64;

    let mut t = Table::new(["system", "queries/s (median)", "ratio vs bm25s", "top-10 overlap"]).caption(format!(
        "BM25 (Lucene idf, k1={}, b={}), {} passages, {} queries × {} passes, one thread, same tokenisation (lowercase, split on non-alphanumerics)",
        args.k1, args.b, passages.len(), queries.len(), args.repeats
    ));
    t.push([
        format!("bm25s {}", peer.bm25s_version.clone().unwrap_or_default()),
        format!("{:.0}", peer.qps),
        "1.00".into(),
        "–".into(),
    ])?;
    t.push([
        "workbench Bm25".to_string(),
        format!("{ours:.0}"),
        format!("{:.2}", ours / peer.qps),
        format!("{:.3}", overlap),
    ])?;
    t.write_csv(&out.path("bench.csv"))?;
    std::fs::write(out.path("bench.md"), t.to_markdown())?;
    out.finish(serde_json::json!({"ours_qps": ours, "bm25s_qps": peer.qps, "ratio": ours / peer.qps, "top10_overlap": overlap, "index_s": index_s}))?;
    println!(
        "{}\n\n{}",
        t.caption.as_deref().unwrap_or(""),
        t.to_markdown()
    );
    Ok(())
}
