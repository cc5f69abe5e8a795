//! Report 003's table (`workbench::study::late_interaction`): TF-IDF, late-interaction
//! (MaxSim) re-rank and MaxSim end-to-end retrieval on SQuAD 2.0 dev (the CS224N half),
//! with report 003's token-relevance views; `--held-out` asks only the five held-out
//! articles' questions and adds a re-rank row per trained ColBERT projection.
//!
//! ```text
//! cargo run --release --bin exp_late_interaction -- [--scale quick|default|paper] [--held-out] [--force]
//! ```
//! Quick: the first 300 questions (held-out: d = 128 trained on 200 groups); default: every
//! question (held-out: d = 24, 32, 64, 128 on 800 groups, with the ablation rows).
//!
//! Writes `data/results/late-interaction/` (`late-interaction-heldout/` with `--held-out`;
//! `-quick` at the quick scale): `metrics.csv`, `metrics.md`, `significance.csv`,
//! `per_query.csv`, `token_relevance_{1,2}.html`, `recall_at_k.png/.svg` / `.csv`
//! (k = 1…50), `config.json`, `manifest.json`.

#[path = "../common/cli.rs"]
mod cli;

use anyhow::Result;
use clap::Parser;
use workbench::study::{self, late_interaction as li, Env};

#[derive(Parser, Debug)]
#[command(about = "Report 003's table: TF-IDF, MaxSim re-rank, MaxSim end-to-end")]
struct Args {
    #[command(flatten)]
    study: cli::StudyFlags,
    /// Only the questions of the five held-out articles, with the trained projections.
    #[arg(long)]
    held_out: bool,
    /// The first N answerable questions (0 = all; default: the scale's).
    #[arg(long)]
    max_questions: Option<usize>,
    /// Passages ranked per query (default 100).
    #[arg(long)]
    depth: Option<usize>,
    /// TF-IDF candidates re-ranked by MaxSim (default 100).
    #[arg(long)]
    rerank_depth: Option<usize>,
    /// λ values of the end-to-end rows (default 2).
    #[arg(long, value_delimiter = ',')]
    lambdas: Option<Vec<f32>>,
    /// k-means cells of the approximate end-to-end row (0: no such row; default 1024).
    #[arg(long)]
    approx_nlist: Option<usize>,
    /// Cells probed per query token by the approximate row (default 1).
    #[arg(long)]
    approx_nprobe: Option<usize>,
    /// Passages the approximate row scores exactly (default 64).
    #[arg(long)]
    approx_candidates: Option<usize>,
    /// k̃ of the token-relevance views (default 2).
    #[arg(long)]
    k_tilde: Option<usize>,
    /// Trained projections' dimensions (held-out; default: the scale's).
    #[arg(long, value_delimiter = ',')]
    colbert_dims: Option<Vec<usize>>,
    /// Training groups of the trained projections (0 = all; default: the scale's).
    #[arg(long)]
    colbert_groups: Option<usize>,
    /// Add the diagnostic rows of the trained projection (default: with the held-out
    /// table at the default and paper scales).
    #[arg(long, conflicts_with = "no_colbert_ablation")]
    colbert_ablation: bool,
    /// Leave the diagnostic rows out.
    #[arg(long)]
    no_colbert_ablation: bool,
}

fn main() -> Result<()> {
    let a = Args::parse();
    let env = Env::project()?;
    let mut p = li::LateParams::at_scale(a.study.scale, a.held_out);
    a.study.override_tests(&mut p.trials, &mut p.seed);
    p.questions = a.max_questions.unwrap_or(p.questions);
    p.depth = a.depth.unwrap_or(p.depth);
    p.rerank_depth = a.rerank_depth.unwrap_or(p.rerank_depth);
    p.lambdas = a.lambdas.unwrap_or(p.lambdas);
    p.approx_nlist = a.approx_nlist.unwrap_or(p.approx_nlist);
    p.approx_nprobe = a.approx_nprobe.unwrap_or(p.approx_nprobe);
    p.approx_candidates = a.approx_candidates.unwrap_or(p.approx_candidates);
    p.k_tilde = a.k_tilde.unwrap_or(p.k_tilde);
    p.colbert_dims = a.colbert_dims.unwrap_or(p.colbert_dims);
    p.colbert_groups = a.colbert_groups.unwrap_or(p.colbert_groups);
    p.colbert_ablation = (p.colbert_ablation || a.colbert_ablation) && !a.no_colbert_ablation;
    let valid = p.check()?;
    study::execute(&env, &valid, a.study.force)?;
    Ok(())
}
