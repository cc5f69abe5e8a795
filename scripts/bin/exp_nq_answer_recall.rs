//! The NQ-open answer-recall study (`workbench::study::nq`): BM25, dense, hybrid and
//! BM25 re-ranked by a trained ColBERT projection over the Wikipedia corpora, DPR's
//! top-k answer recall, each tested against BM25 at every k. The systems are
//! `configs/studies/nq.toml`.
//!
//! ```text
//! cargo run --release --bin exp_nq_answer_recall -- [--scale quick|default|paper] [--force]
//! ```
//! Writes `data/results/nq-answer-recall/` (`-quick` at the quick scale):
//! `answer_recall.csv` / `.md`, `curve.csv` (k = 1…100), `significance.csv`,
//! `per_question.csv`, `corpus.csv`, `captions.json`, `answer_recall.png/.svg`,
//! `config.json`, `manifest.json`.

#[path = "../common/cli.rs"]
mod cli;

use anyhow::Result;
use clap::Parser;
use workbench::evaluate::answer_match::AnswerMatch;
use workbench::study::{self, nq, Env};

#[derive(Parser, Debug)]
#[command(about = "NQ-open dev answer recall@{1,5,20,100} over the Wikipedia corpora")]
struct Args {
    #[command(flatten)]
    study: cli::StudyFlags,
    /// The first N NQ-open dev questions (0 = all; default: the scale's).
    #[arg(long)]
    max_questions: Option<usize>,
    /// Window size in words (default 100, DPR's).
    #[arg(long)]
    window: Option<usize>,
    /// Words shared by consecutive windows (default 0).
    #[arg(long)]
    overlap: Option<usize>,
    /// Do not prepend the article title to the indexed text.
    #[arg(long)]
    no_title: bool,
    /// How a passage is found to hold a gold answer: dpr, dpr-regex or squad (default dpr).
    #[arg(long)]
    answer_match: Option<AnswerMatch>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let env = Env::project()?;
    let mut p = nq::NqParams::at_scale(&env, args.study.scale)?;
    args.study.override_tests(&mut p.trials, &mut p.seed);
    p.questions = args.max_questions.unwrap_or(p.questions);
    p.window = args.window.unwrap_or(p.window);
    p.overlap = args.overlap.unwrap_or(p.overlap);
    p.titles = !args.no_title;
    p.answer_match = args.answer_match.unwrap_or(p.answer_match);
    let valid = p.check()?;
    study::execute(&env, &valid, args.study.force)?;
    Ok(())
}
