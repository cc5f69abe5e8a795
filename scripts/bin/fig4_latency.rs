//! Report 000, Figure 4: histogram of per-query retrieval latency, one panel per retriever
//! (`workbench::study::latency`): TF-IDF, BM25, dense flat and HNSW (MiniLM + FAISS),
//! hybrid, and FAISS search alone, one query at a time after a warm-up.
//!
//! ```text
//! cargo run --release --bin fig4_latency -- [--scale quick|default|paper] [--queries 500] [--force]
//! ```
//! Quick: 100 NQ-open questions over the `wikitext-2-raw` paragraphs; default and paper:
//! 500 over the `wiki-leads-en` paragraphs (~10k, report 000's 21–199-word filter).
//!
//! Writes `data/results/fig4-latency/` (`-quick` at the quick scale): `fig4.png`,
//! `fig4.svg`, `latency_summary.csv` (mean, median, p95, p99, min, max per retriever),
//! `latency_summary.md`, `latency_per_query.csv`, `bins.csv`, `config.json`,
//! `manifest.json`.

use anyhow::Result;
use clap::Parser;
use workbench::study::{self, latency, Env};

#[derive(Parser, Debug)]
#[command(about = "Report 000 Figure 4: per-query retrieval latency histograms")]
struct Args {
    /// quick (100 questions, wikitext-2 paragraphs), default or paper.
    #[arg(long, default_value = "default")]
    scale: study::Scale,
    /// Number of NQ-open dev questions (the first ones; default: the scale's).
    #[arg(long)]
    queries: Option<usize>,
    /// Unmeasured queries run through each retriever first (default 20).
    #[arg(long)]
    warmup: Option<usize>,
    /// Hits per query (default 10).
    #[arg(long)]
    k: Option<usize>,
    /// Candidates from each side of the hybrid (default 100).
    #[arg(long)]
    hybrid_depth: Option<usize>,
    /// Dense weight of the hybrid, min-max fusion (default 0.5).
    #[arg(long)]
    hybrid_weight: Option<f32>,
    /// Sentence encoder asset (default all-minilm-l6-v2).
    #[arg(long)]
    model: Option<String>,
    /// Regular histogram bins per panel (default 60).
    #[arg(long)]
    bins: Option<usize>,
    /// Recompute even if the results are fresh.
    #[arg(long)]
    force: bool,
}

fn main() -> Result<()> {
    let a = Args::parse();
    let env = Env::project()?;
    let mut p = latency::LatencyParams::at_scale(a.scale);
    p.queries = a.queries.unwrap_or(p.queries);
    p.warmup = a.warmup.unwrap_or(p.warmup);
    p.k = a.k.unwrap_or(p.k);
    p.hybrid_depth = a.hybrid_depth.unwrap_or(p.hybrid_depth);
    p.hybrid_weight = a.hybrid_weight.unwrap_or(p.hybrid_weight);
    p.model = a.model.unwrap_or(p.model);
    p.bins = a.bins.unwrap_or(p.bins);
    let valid = p.check()?;
    study::execute(&env, &valid, a.force)?;
    Ok(())
}
