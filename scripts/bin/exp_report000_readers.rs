//! Report 000, Table 1 and Figure 3 with readers trained here (`workbench::study::report000`):
//! the ten questions of its §4 over Wikipedia windows, SBERT (all-MiniLM-L6-v2) + FAISS
//! flat top-5 passages, read by three extractive readers trained from MiniLM (each
//! trained on first use, as `train_reader` does), with an honest set beside them (the
//! held-out SQuAD articles, the RAG Mini test questions).
//!
//! ```text
//! cargo run --release --bin exp_report000_readers -- [--scale quick|default|paper] [--force]
//! ```
//!
//! Writes `data/results/report000_readers/` (`-quick` at the quick scale): `table1.csv`/`.md`
//! (ours beside report 000's 66.7 / 66.7 / 33.3), `figure3.png`/`.svg`, `answers.csv`,
//! `answers.html` (each answer highlighted in its passage), `honest.csv`, `config.json`,
//! `manifest.json`.

#[path = "../common/cli.rs"]
mod cli;

use anyhow::Result;
use clap::Parser;
use workbench::study::{self, report000, Env};

#[derive(Parser, Debug)]
#[command(about = "Report 000 Table 1 and Figure 3 with readers trained in candle")]
struct Args {
    #[command(flatten)]
    study: cli::StudyFlags,
    /// Passages read per question (default 5).
    #[arg(long)]
    k: Option<usize>,
    /// SQuAD training-article questions used to choose the null threshold (the first N;
    /// default: the scale's).
    #[arg(long)]
    threshold_questions: Option<usize>,
    /// Questions of each honest set (the first N; 0 = all; default: the scale's).
    #[arg(long)]
    honest_questions: Option<usize>,
    /// For each recipe whose training has not finished, read with the latest checkpoint of
    /// its unfinished run instead of training it (see `train_reader --partial`).
    #[arg(long)]
    partial: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let env = Env::project()?;
    let mut p = report000::Report000Params::at_scale(args.study.scale);
    p.k = args.k.unwrap_or(p.k);
    p.threshold_questions = args.threshold_questions.unwrap_or(p.threshold_questions);
    p.honest_questions = args.honest_questions.unwrap_or(p.honest_questions);
    p.partial = args.partial;
    let valid = p.check()?;
    study::execute(&env, &valid, args.study.force)?;
    Ok(())
}
