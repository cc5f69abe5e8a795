//! Train a ColBERT projection head (report 003's loss) on frozen all-MiniLM-L6-v2 token
//! vectors (`workbench::study::colbert`).
//!
//! ```text
//! cargo run --release --bin train_colbert -- --dim 128 [--groups 2000] [--epochs 3] [--markers] [--force]
//! ```
//!
//! The loss is cross-entropy over `Σ_i max_j cos` (mean-MaxSim × N_q) of each query with
//! every passage of the batch (its positive, its hard negatives, the other groups'
//! passages). The projection is cached under `data/cache/colbert/<key>/` (key = sha256 of
//! the recipe and every input file) and reused. Writes `data/results/colbert-d<d>…/`:
//! `metrics.json`, `loss.csv`, `loss.png/.svg`, `config.json`, `manifest.json`.

use anyhow::Result;
use clap::Parser;
use workbench::study::{self, colbert, Env};

#[derive(Parser, Debug)]
#[command(about = "Train a ColBERT projection head on frozen MiniLM token vectors")]
struct Args {
    /// Output dimension d.
    #[arg(long, default_value_t = 128)]
    dim: usize,
    /// Training groups (a seeded sample of all of them; 0 = all).
    #[arg(long)]
    groups: Option<usize>,
    /// Epochs.
    #[arg(long)]
    epochs: Option<usize>,
    /// ColBERT's `[Q]`/`[D]` markers and `[MASK]` query padding (off by default: the
    /// frozen encoder never saw them; see `train::colbert`).
    #[arg(long)]
    markers: bool,
    /// Redo the result folder (the trained projection is still reused while its key holds).
    #[arg(long)]
    force: bool,
}

fn main() -> Result<()> {
    let a = Args::parse();
    let env = Env::project()?;
    let valid = colbert::ColbertTrainingParams {
        dim: a.dim,
        groups: a.groups,
        epochs: a.epochs,
        markers: a.markers,
    }
    .check()?;
    study::execute(&env, &valid, a.force)?;
    Ok(())
}
