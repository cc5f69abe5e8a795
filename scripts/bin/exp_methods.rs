//! The methods study (`workbench::study::methods`): every system of
//! `configs/methods/study.toml` (closed-book, naive, adaptive, Iter-RetGen, IRCoT,
//! Self-Ask, FLARE, agentic) on one data set's questions, corpus, retriever and model, with
//! paired tests against naive and closed-book.
//!
//! ```text
//! cargo run --release --bin exp_methods -- --set rag-mini|nq|bamboogle|nq-adaptive [--scale quick|default|paper] [--questions N] [--reader ASSET]... [--force]
//! ```
//!
//! Writes `data/results/methods-<set>/` (`-quick` at the quick scale): `table.md` / `.csv`,
//! `details.csv` (Match split by whether the corpus holds a gold answer),
//! `significance.csv`, `intervals.csv`, `outcomes.csv`, and per reader and system the
//! pipeline's traces with every step.

#[path = "../common/cli.rs"]
mod cli;

use anyhow::Result;
use clap::Parser;
use workbench::study::{self, methods, Env};

#[derive(Parser, Debug)]
#[command(about = "Compare the RAG methods on one data set of configs/methods/study.toml")]
struct Args {
    /// The data set (a `[[dataset]]` name of configs/methods/study.toml).
    #[arg(long)]
    set: String,
    #[command(flatten)]
    study: cli::StudyFlags,
    #[command(flatten)]
    repro: cli::ReproFlags,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let env = Env::project()?;
    let mut p = methods::params(&env, args.study.scale, &args.set)?;
    args.repro.apply(&args.study, &mut p);
    let valid = methods::study(p, &args.set)?;
    study::execute(&env, &valid, args.study.force)?;
    Ok(())
}
