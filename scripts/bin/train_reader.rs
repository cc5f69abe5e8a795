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

use anyhow::Result;
use clap::Parser;
use workbench::assets::Assets;
use workbench::bench::{BenchRun, PythonPeers};
use workbench::study::{self, Env, Scale};
use workbench::train::qa::{QaFeatures, QaTrainModel};
use workbench::train::reader::{self, ReaderRecipe};
use workbench::train::Stop;

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
    #[command(flatten)]
    bench: train_bench::BenchFlags,
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
    if let Some((steps, peers)) = args.bench.peers(&env.root)? {
        return bench(&env.assets, &valid.recipe, steps, args.bench.rounds, &peers);
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
    let (bpath, batches) = train_bench::first_batches(&dir, &lengths, &recipe.train, steps)?;
    let b = train_bench::TrainBench {
        unit: "features",
        steps,
        rounds,
        examples: batches.iter().map(Vec::len).sum(),
        threads: recipe.train.threads,
        peer_args: train_bench::peer_args(
            &["--task", "qa"],
            fpath,
            bpath,
            &assets.resolve(&recipe.base, "config.json")?,
            &recipe.train,
        )?,
        batches: format!(
            "length-grouped batches of {} features, max_seq_len {}",
            recipe.train.batch_size, recipe.windows.max_seq_len
        ),
        macs: train_bench::encoder_macs(
            &assets.resolve(&recipe.base, "config.json")?,
            &batches
                .iter()
                .map(|b| (b.len(), b.iter().map(|&i| lengths[i]).max().unwrap_or(0)))
                .collect::<Vec<_>>(),
        )?,
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
