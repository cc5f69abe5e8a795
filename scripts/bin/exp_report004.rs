//! Report 004's table on RAG Mini Wikipedia (`workbench::study::report004`): naive RAG
//! (dense top 3) against the enhanced pipeline (LLM query rewrite, dense top 10, trained
//! cross-encoder to the top 3): EM, F1, time per query, context precision, beside the
//! report's.
//!
//! ```text
//! cargo run --release --bin exp_report004 -- [--scale quick|default|paper] [--questions N] [--reader ASSET]... [--force]
//! ```
//!
//! Writes `data/results/report004/` (`report004-quick/` at the quick scale): `table.md` /
//! `.csv`, `details.csv`, `significance.csv` (enhanced against naive),
//! `substitutions.md`, and per reader and system the pipeline's traces, SQuAD
//! predictions, resolved `config.toml`, summary and per-question CSV.

#[path = "../common/cli.rs"]
mod cli;

use anyhow::Result;
use clap::Parser;
use workbench::study::{self, report004, Env};

#[derive(Parser, Debug)]
#[command(about = "Reproduce report 004's naive vs enhanced RAG table")]
struct Args {
    #[command(flatten)]
    study: cli::StudyFlags,
    #[command(flatten)]
    repro: cli::ReproFlags,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let env = Env::project()?;
    let mut p = report004::params(args.study.scale);
    args.repro.apply(&args.study, &mut p);
    let valid = report004::study(p)?;
    study::execute(&env, &valid, args.study.force)?;
    Ok(())
}
