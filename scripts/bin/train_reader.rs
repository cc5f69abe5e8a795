//! Train the extractive reader (`workbench::study::reader`) and evaluate it on the held-out SQuAD articles.
//!
//! ```text
//! cargo run --release --bin train_reader [-- --recipe minilm-all] [--scale quick] [--full] [--force]
//! cargo run --release --bin train_reader -- --bench 32 [--warmup 4] [--rounds 6]   # candle vs PyTorch, same batches
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
use workbench::bench::BenchRun;
use workbench::study::{self, Env};
use workbench::train::qa::{QaFeatures, QaTrainModel};
use workbench::train::reader::{self, ReaderRecipe};
use workbench::train::Stop;

#[derive(Parser, Debug)]
#[command(about = "Train the extractive reader and evaluate it on the held-out SQuAD articles")]
struct Args {
    /// Recipe: minilm-all, minilm-squad, minilm-squad2.
    #[arg(long, default_value = "minilm-all")]
    recipe: String,
    /// quick (one epoch on 3,200 windows, `minilm-squad2` two, a few minutes; the recipe is
    /// named `<recipe>-quick`),
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
    if let Some(plan) = args.bench.plan(&env.root)? {
        return bench(&env.assets, &valid.recipe, &plan);
    }
    let run = study::reader::ReaderTrainingRun::new(&env, valid)?;
    study::execute(&env, &run, args.force)?;
    Ok(())
}

/// `--bench`: candle and the PyTorch peers (`train_bench::PEER`, `--task qa`, float32 and
/// bf16 autocast) on the first `warmup + timed` length-grouped batches of the recipe's
/// epoch 0, from candle's initial model.
///
/// Writes `data/results/bench-train-reader/`: `bench.md`, `bench.csv`, `ratios.csv`,
/// `bench.json`, the shared inputs (`features.jsonl`, `batches.json`, `lrs.json`; the
/// initial model is removed at the end), `config.json`, `manifest.json`.
fn bench(assets: &Assets, recipe: &ReaderRecipe, plan: &train_bench::Plan) -> Result<()> {
    let config = serde_json::json!({
        "recipe": recipe, "updates": plan.timed, "warmup_updates": plan.warmup,
        "rounds": plan.rounds, "peer": train_bench::PEER,
    });
    let BenchRun { exp, machine } = BenchRun::start("bench-train-reader", &config, "bench.md")?;
    println!("{}", machine.summary());
    let dir = exp.out.out_dir().to_path_buf();
    let data = reader::supervision(assets, &recipe.supervision)?;
    let tok_path = assets.resolve(&recipe.base, "tokenizer.json")?;
    let tok = reader::load_tokenizer(&tok_path)?;
    let feats = reader::training_features(&tok, &data, &recipe.windows)?;
    // The shared inputs: features (JSONL), the batches of epoch 0 (indices) and their
    // learning rates, candle's initial model.
    let fpath = dir.join("features.jsonl");
    train_bench::write_jsonl(
        &fpath,
        feats.iter().map(|f| {
            serde_json::json!({"ids": f.window.input_ids, "type_ids": f.window.type_ids, "start": f.start, "end": f.end})
        }),
    )?;
    let lengths: Vec<usize> = feats.iter().map(|f| f.window.len()).collect();
    let inputs = train_bench::inputs(&dir, &lengths, &recipe.train, plan)?;
    let base_config = assets.resolve(&recipe.base, "config.json")?;
    let fresh = || {
        QaTrainModel::from_checkpoint(
            &base_config,
            &assets.resolve(&recipe.base, "model.safetensors")?,
            recipe.init_seed,
        )
    };
    let model_dir = dir.join("initial-model");
    let initial = fresh()?;
    initial.save_pretrained(&model_dir, &tok_path)?;
    // Every variable's elements: the parameters training updates.
    let parameters: usize = initial.vars.all_vars().iter().map(|v| v.elem_count()).sum();
    drop(initial);
    let shape = |b: &Vec<usize>| (b.len(), b.iter().map(|&i| lengths[i]).max().unwrap_or(0));
    let b = train_bench::TrainBench {
        unit: "features",
        per_item: 1,
        warmup: plan.warmup,
        timed: plan.timed,
        rounds: plan.rounds,
        rows: inputs.batches.iter().map(Vec::len).collect(),
        padded: inputs.batches.iter().map(|b| shape(b).1).collect(),
        lrs: inputs.lrs.clone(),
        threads: recipe.train.threads,
        parameters,
        peer_args: train_bench::peer_args(
            &["--task", "qa"],
            fpath,
            &inputs,
            &model_dir,
            &recipe.train,
        ),
        batches: format!(
            "length-grouped batches of {} features, max_seq_len {}",
            recipe.train.batch_size, recipe.windows.max_seq_len
        ),
        macs: train_bench::encoder_macs(
            &base_config,
            &inputs.batches[plan.warmup..]
                .iter()
                .map(shape)
                .collect::<Vec<_>>(),
        )?,
        product: train_bench::ffn_product(
            &base_config,
            &inputs.batches[plan.warmup..]
                .iter()
                .map(shape)
                .collect::<Vec<_>>(),
        )?,
    };
    let data_f = QaFeatures(feats);
    let summary = train_bench::rounds(&b, &dir, &machine.summary(), &plan.peers, || {
        // A fresh model, the first `warmup + timed` batches of epoch 0.
        let model = fresh()?;
        train_bench::measure(|| {
            Ok(workbench::train::train(
                &model,
                &model.vars,
                &data_f,
                &recipe.train,
                None,
                Stop::AfterSteps(plan.warmup + plan.timed),
            )?)
        })
    })?;
    std::fs::remove_dir_all(&model_dir)?;
    exp.finish(summary)?;
    Ok(())
}
