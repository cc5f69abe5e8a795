//! Report 002's table (`workbench::study::report002`): baseline RAG against RAG-Fusion
//! (5 LLM paraphrases of each question, RRF k = 60) on answerable SQuAD 2.0 questions,
//! F1 and EM beside the report's.
//!
//! ```text
//! cargo run --release --bin exp_report002 -- [--scale quick|default|paper] [--questions N] [--reader ASSET]... [--each] [--force]
//! ```
//!
//! `--each` adds `fusion-each` (report 002's own `paraphrase: {question}` input, one
//! sampled call per paraphrase). Writes `data/results/report002/` (`report002-quick/` at
//! the quick scale): `table.md` / `.csv`, `details.csv`, `significance.csv`,
//! `substitutions.md`, and per reader and system the traces (with every paraphrase and
//! the model's raw output), SQuAD predictions and resolved config.

#[path = "../common/cli.rs"]
mod cli;

use anyhow::Result;
use clap::Parser;
use workbench::study::{self, report002, Env};

#[derive(Parser, Debug)]
#[command(about = "Reproduce report 002's baseline RAG vs RAG-Fusion table")]
struct Args {
    #[command(flatten)]
    study: cli::StudyFlags,
    #[command(flatten)]
    repro: cli::ReproFlags,
    /// Also run RAG-Fusion with report 002's own prompt, one sampled call per paraphrase.
    #[arg(long)]
    each: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let env = Env::project()?;
    let mut p = report002::params(args.study.scale);
    if args.each {
        p = report002::with_each(p);
    }
    args.repro.apply(&args.study, &mut p);
    let valid = report002::study(p)?;
    study::execute(&env, &valid, args.study.force)?;
    Ok(())
}
