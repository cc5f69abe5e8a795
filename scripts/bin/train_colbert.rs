//! Train a ColBERT projection head (issue 11 item 2, report 003's loss) on frozen
//! all-MiniLM-L6-v2 token vectors.
//!
//! ```text
//! cargo run --release --bin train_colbert -- --dim 128 [--groups 2000] [--epochs 3] [--force]
//! ```
//!
//! Training groups (question, positive, BM25 hard negatives) come from the reader's
//! supervision: the SQuAD dev half's training articles (never the five held-out ones),
//! RAG Mini Wikipedia training questions, NQ-open distant supervision; never DL19.
//! The loss is cross-entropy over `Σ_i max_j cos` (mean-MaxSim × N_q) of each query with
//! every passage of the batch (its positive, its hard negatives, the other groups'
//! passages); `[Q]`/`[D]` markers, queries padded with `[MASK]` to N_q = 32 ids.
//! The encoder is frozen: token vectors of the training texts are encoded once (cached
//! under `data/cache/colbert/`, shared by every `d`) and only the `d × 384` projection
//! is trained. The projection is cached under `data/cache/colbert/<key>/` (key = sha256
//! of the recipe and every input file) and reused. Writes `data/results/colbert-d<d>/`:
//! `metrics.json`, `loss.csv`, `loss.png/.svg`, `groups.csv`, `config.json`, `manifest.json`.

use anyhow::Result;
use clap::Parser;
use serde::Serialize;
use std::time::Instant;
use workbench::assets::Assets;
use workbench::plot::render;
use workbench::results::Experiment;
use workbench::train::colbert::{self, ColbertRecipe};
use workbench::train::reader;

#[derive(Parser, Debug, Serialize)]
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
    let args = Args::parse();
    let assets = Assets::load()?;
    let mut recipe = ColbertRecipe::default_minilm(args.dim);
    if let Some(g) = args.groups {
        recipe.max_groups = (g > 0).then_some(g);
        recipe.name.push_str(&format!("-g{g}"));
    }
    if args.markers {
        recipe.markers = true;
        recipe.name.push_str("-markers");
    }
    if let Some(e) = args.epochs {
        recipe.train.epochs = e;
        recipe.name.push_str(&format!("-e{e}"));
    }
    recipe.check()?;
    let root = workbench::paths::project_root()?;
    #[derive(Serialize)]
    struct Config<'a> {
        args: &'a Args,
        recipe: &'a ColbertRecipe,
        key: String,
        inputs: Vec<(String, String)>,
        program_sha256: String,
    }
    let inputs = recipe.inputs();
    let config = Config {
        args: &args,
        recipe: &recipe,
        key: recipe.key(&assets)?,
        inputs: assets.input_checksums(inputs.iter().map(String::as_str))?,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let name = format!(
        "colbert-{}",
        recipe.name.trim_start_matches("minilm-colbert-")
    );
    let Some(exp) = Experiment::start(&name, &config, args.force, "metrics.json")? else {
        return Ok(());
    };
    let out = &exp.out;
    let cache_root = workbench::paths::cache_dir(&root, "colbert");
    let t0 = Instant::now();
    let (trained, log) = colbert::train_or_load(&assets, &recipe, &cache_root)?;
    let wall = t0.elapsed().as_secs_f64();
    println!(
        "trained d={} on {} groups ({} distinct passages): encoding {:.0} s, {:.1} s of updates, {:.1} groups/s, load {} → {}",
        recipe.dim,
        trained.groups,
        trained.passages,
        trained.encode_seconds,
        trained.train_seconds,
        trained.examples_per_second,
        trained.load,
        trained.projection_path.display()
    );
    if let Some(log) = &log {
        log.write_csv(&out.path("loss.csv"))?;
        let fig = render(&log.loss_plot(
            &format!(
                "ColBERT projection d={}: training loss ({} groups, batch {}, {} hard negatives + in-batch)",
                recipe.dim, trained.groups, recipe.train.batch_size, recipe.negatives
            ),
            20,
        ))?;
        fig.save(out.out_dir(), "loss")?;
    }
    let first = log.as_ref().map(|l| {
        l.steps.iter().take(20).map(|s| s.loss).sum::<f64>()
            / 20f64.min(l.steps.len() as f64).max(1.0)
    });
    let last = log.as_ref().map(|l| l.running_loss(20));
    let summary = serde_json::json!({
        "recipe": recipe.name, "key": trained.key, "dim": recipe.dim,
        "groups": trained.groups, "passages": trained.passages,
        "encode_seconds": trained.encode_seconds,
        "train_seconds": trained.train_seconds, "groups_per_second": trained.examples_per_second,
        "loss_first_20": first, "loss_last_20": last,
        "wall_seconds_this_run": wall, "load_at_training_end": trained.load,
        "load_now": reader::load_average(),
        "projection": trained.projection_path,
        "storage_bytes_per_token_f16": 2 * recipe.dim,
    });
    println!("{}", serde_json::to_string_pretty(&summary)?);
    std::fs::write(
        out.path("metrics.json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    exp.finish(summary)?;
    Ok(())
}
