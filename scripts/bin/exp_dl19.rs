//! The DL19 retrieval study (`workbench::study::dl19`): TF-IDF, BM25, dense, hybrid,
//! RRF and three BM25 re-rankers on the TREC DL19 passage subset, each tested against
//! BM25. The systems are `configs/studies/dl19.toml`.
//!
//! ```text
//! cargo run --release --bin exp_dl19 -- [--scale quick|default|paper] [--force]
//! ```
//! Writes `data/results/dl19-retrieval/` (`dl19-retrieval-quick/` at the quick scale):
//! `metrics.csv`, `metrics.md`, `metrics_rel1.csv`, `significance.csv`,
//! `per_query.csv`, `run.<system>.trec`, `qrels.dl19.trec`, `ndcg10.png/.svg`,
//! `config.json`, `manifest.json`.

#[path = "../common/cli.rs"]
mod cli;

use anyhow::Result;
use clap::Parser;
use workbench::study::{self, dl19, Env};

#[derive(Parser, Debug)]
#[command(about = "DL19 subset: eight retrieval systems, significance against BM25")]
struct Args {
    #[command(flatten)]
    study: cli::StudyFlags,
    /// Passages retrieved per query by a first stage (default: the study's, 1000).
    #[arg(long)]
    depth: Option<usize>,
    /// Minimum grade counted as relevant by MRR@10 and Recall@100 (default 2).
    #[arg(long)]
    rel_threshold: Option<i32>,
    /// Only these systems (keys of configs/studies/dl19.toml, comma-separated; the
    /// baseline is always kept).
    #[arg(long, value_delimiter = ',')]
    systems: Vec<String>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let env = Env::project()?;
    let mut p = dl19::Dl19Params::at_scale(&env, args.study.scale)?;
    args.study.override_tests(&mut p.trials, &mut p.seed);
    p.depth = args.depth.unwrap_or(p.depth);
    p.rel_threshold = args.rel_threshold.unwrap_or(p.rel_threshold);
    if !args.systems.is_empty() {
        let baseline = p.baseline.clone();
        p.systems
            .retain(|s| s.key == baseline || args.systems.contains(&s.key));
    }
    let valid = p.check()?;
    study::execute(&env, &valid, args.study.force)?;
    Ok(())
}
