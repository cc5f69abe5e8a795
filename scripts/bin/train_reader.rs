//! Train the extractive reader (`workbench::study::reader`) and evaluate it on the held-out SQuAD articles.
//!
//! ```text
//! cargo run --release --bin train_reader [-- --recipe minilm-all] [--scale quick] [--full] [--force]
//! cargo run --release --bin train_reader -- --bench 12 [--rounds 2]   # candle vs PyTorch, same batches
//! ```
//!
//! Recipes (all from `all-minilm-l6-v2`, none sees the five held-out articles):
//! * `minilm-all` (default): SQuAD training articles' answerable questions + RAG Mini
//!   Wikipedia training questions located in passages + NQ-open distant supervision;
//! * `minilm-squad`: the SQuAD training articles' answerable questions only;
//! * `minilm-squad2`: `minilm-all` plus the training articles' unanswerable questions
//!   (target `[CLS]`), for the SQuAD 2.0-style reader with a null threshold.
//!
//! The default trains two epochs over all the recipe's windows (~18 min on 2 quiet
//! cores); `--full` trains four. A trained recipe is cached under
//! `data/cache/readers/<key>/` (key = sha256 of the recipe and of every input file's
//! sha256) and reused. Writes `data/results/reader-<recipe>/`: `metrics.json`,
//! `metrics.csv`, `predictions.csv` (held-out, gold paragraph), `loss.csv`,
//! `loss.png/.svg`, `supervision.csv`, `nq_used_ids.txt`, `config.json`, `manifest.json`.

#[path = "../common/train_bench.rs"]
mod train_bench;

use anyhow::{bail, Context, Result};
use clap::Parser;
use std::path::PathBuf;
use workbench::assets::Assets;
use workbench::bench::{BenchRun, PythonPeers};
use workbench::study::{self, Env, Scale};
use workbench::train::qa::{QaFeatures, QaTrainModel};
use workbench::train::reader::{self, ReaderRecipe};
use workbench::train::{batching, Stop};

#[derive(Parser, Debug)]
#[command(about = "Train the extractive reader and evaluate it on the held-out SQuAD articles")]
struct Args {
    /// Recipe: minilm-all, minilm-squad, minilm-squad2.
    #[arg(long, default_value = "minilm-all")]
    recipe: String,
    /// quick (one epoch on 640 windows, a few minutes; the recipe is named `<recipe>-quick`),
    /// default or paper (the published recipe).
    #[arg(long, default_value = "default")]
    scale: workbench::study::Scale,
    /// Larger run: four epochs instead of two.
    #[arg(long)]
    full: bool,
    /// Do not train: evaluate the latest checkpoint of the recipe's unfinished run
    /// (exported in Hugging Face layout; results under `reader-<recipe>-partial<updates>`).
    #[arg(long)]
    partial: bool,
    /// Redo the result folder (the trained checkpoint is still reused while its key holds).
    #[arg(long)]
    force: bool,
    /// Benchmark instead: this many updates of candle and of the PyTorch peer on the same batches.
    #[arg(long)]
    bench: Option<usize>,
    /// Interleaved rounds of the benchmark.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// Python of the peers venv (default: `$PEERS_PYTHON`, else `$PEERS_VENV/bin/python`,
    /// see `PythonPeers::default_python`).
    #[arg(long, env = "WORKBENCH_PEERS_PYTHON")]
    python: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let env = Env::project()?;
    let valid = study::reader::ReaderTrainingParams {
        recipe: args.recipe.clone(),
        scale: args.scale,
        full: args.full,
        partial: args.partial,
    }
    .check()?;
    if let Some(steps) = args.bench {
        let peers = PythonPeers::new(&env.root, args.python.clone());
        peers.command(train_bench::PEER)?; // a missing peers venv stops the run before any work
        return bench(&env.assets, &valid.recipe, steps, args.rounds, &peers);
    }
    let prepared = study::reader::prepare(&env, &valid)?;
    let name = study::reader::result_name(&valid, &prepared);
    let resolved = valid.resolved(&env)?;
    study::execute(
        &env,
        &name,
        Scale::Default,
        &resolved,
        args.force,
        "metrics.md",
        || study::reader::run(&env, &valid, prepared),
    )?;
    Ok(())
}

/// `--bench`: candle and the PyTorch peer (`train_bench::PEER`, `--task qa`) on the
/// first `steps` length-grouped batches of the recipe's epoch 0.
///
/// Writes `data/results/bench-train-reader/`: `bench.md`, `bench.csv`, `bench.json`, the
/// shared inputs (`features.jsonl`, `batches.json`), `config.json`, `manifest.json`.
fn bench(
    assets: &Assets,
    recipe: &ReaderRecipe,
    steps: usize,
    rounds: usize,
    peers: &PythonPeers,
) -> Result<()> {
    let config = serde_json::json!({
        "recipe": recipe, "updates": steps, "rounds": rounds, "peer": train_bench::PEER,
    });
    let BenchRun { exp, machine } = BenchRun::start("bench-train-reader", &config, "bench.md")?;
    println!("{}", machine.summary());
    let dir = exp.out.out_dir().to_path_buf();
    let data = reader::supervision(assets, &recipe.supervision)?;
    let tok_path = assets.resolve(&recipe.base, "tokenizer.json")?;
    let tok = reader::load_tokenizer(&tok_path)?;
    let feats = reader::training_features(&tok, &data, &recipe.windows)?;
    // The shared inputs: features (JSONL) and the batches of epoch 0 (indices).
    let fpath = dir.join("features.jsonl");
    train_bench::write_jsonl(
        &fpath,
        feats.iter().map(|f| {
            serde_json::json!({"ids": f.window.input_ids, "type_ids": f.window.type_ids, "start": f.start, "end": f.end})
        }),
    )?;
    let lengths: Vec<usize> = feats.iter().map(|f| f.window.len()).collect();
    let batches = batching::length_grouped_batches(
        &lengths,
        recipe.train.batch_size,
        recipe.train.bucket_batches,
        recipe.train.seed,
        0,
    )?;
    if batches.len() < steps {
        bail!(
            "only {} batches in an epoch, fewer than --bench {steps}",
            batches.len()
        );
    }
    let bpath = dir.join("batches.json");
    std::fs::write(&bpath, serde_json::to_vec(&batches[..steps])?)?;
    let base_dir = assets
        .resolve(&recipe.base, "config.json")?
        .parent()
        .context("asset dir")?
        .to_path_buf();
    let b = train_bench::TrainBench {
        unit: "features",
        steps,
        rounds,
        examples: batches[..steps].iter().map(Vec::len).sum(),
        threads: recipe.train.threads,
        peer_args: [
            "--task".into(),
            "qa".into(),
            "--features".into(),
            fpath.into_os_string(),
            "--batches".into(),
            bpath.into_os_string(),
            "--model".into(),
            base_dir.into_os_string(),
            "--threads".into(),
            recipe.train.threads.to_string().into(),
            "--lr".into(),
            recipe.train.lr.to_string().into(),
        ]
        .into(),
        batches: format!(
            "length-grouped batches of {} features, max_seq_len {}",
            recipe.train.batch_size, recipe.windows.max_seq_len
        ),
    };
    let data_f = QaFeatures(feats);
    let ratio = train_bench::rounds(&b, &dir, &machine.summary(), peers, || {
        // A fresh model, the first `steps` batches of epoch 0.
        let model = QaTrainModel::from_checkpoint(
            &assets.resolve(&recipe.base, "config.json")?,
            &assets.resolve(&recipe.base, "model.safetensors")?,
            recipe.init_seed,
        )?;
        let log = workbench::train::train(
            &model,
            &model.vars,
            &data_f,
            &recipe.train,
            None,
            Stop::AfterSteps(steps),
        )?;
        Ok((log.examples_per_second(), log.seconds()))
    })?;
    exp.finish(serde_json::json!({ "ratio": ratio }))?;
    Ok(())
}
