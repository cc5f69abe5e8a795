//! Report 001's Tables 2–4 and its paired significance tests on RAG Mini Wikipedia
//! (`workbench::study::report001`): dense, sparse, hybrid and closed-book systems read by
//! an LLM, report 001's prompts.
//!
//! ```text
//! cargo run --release --bin exp_report001 -- [--scale quick|default|paper] [--questions N] [--reader ASSET]... [--force]
//! ```
//!
//! Writes `data/results/report001/` (`report001-quick/` at the quick scale): `table2.md`
//! (overall EM/F1 beside the report's, abstentions apart), `table3.md` (per question
//! group), `table4.md` (winner per group by F1), `significance.csv`, `per_question.csv`,
//! `substitutions.md`, and per reader and system the traces, SQuAD predictions and
//! resolved config.

#[path = "../common/cli.rs"]
mod cli;

use anyhow::Result;
use clap::Parser;
use workbench::study::{self, report001, Env};

#[derive(Parser, Debug)]
#[command(about = "Reproduce report 001's Tables 2-4 and significance tests")]
struct Args {
    #[command(flatten)]
    study: cli::StudyFlags,
    #[command(flatten)]
    repro: cli::ReproFlags,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let env = Env::project()?;
    let mut p = report001::params(args.study.scale);
    args.repro.apply(&args.study, &mut p);
    let valid = report001::study(p)?;
    study::execute(&env, &valid, args.study.force)?;
    Ok(())
}
