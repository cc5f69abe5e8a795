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

use anyhow::{bail, Context, Result};
use clap::Parser;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use workbench::assets::Assets;
use workbench::bench::{median, BenchRun, PythonPeers};
use workbench::display::Table;
use workbench::machine::load_average;
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
        peers.command(PEER)?; // a missing peers venv stops the run before any work
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

/// The PyTorch peer of `--bench`.
const PEER: &str = "train_qa_torch_peer.py";

/// candle vs the PyTorch peer on the same features and the same batches, interleaved.
/// Writes `data/results/bench-train-reader/`: `bench.md`, `bench.csv`, `bench.json`, the
/// shared inputs `features.jsonl` and `batches.json`, `config.json` (recipe, updates,
/// rounds and the machine), `manifest.json`.
fn bench(
    assets: &Assets,
    recipe: &ReaderRecipe,
    steps: usize,
    rounds: usize,
    peers: &PythonPeers,
) -> Result<()> {
    let config = serde_json::json!({
        "recipe": recipe, "updates": steps, "rounds": rounds, "peer": PEER,
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
    let mut w = std::io::BufWriter::new(std::fs::File::create(&fpath)?);
    for f in &feats {
        serde_json::to_writer(
            &mut w,
            &serde_json::json!({"ids": f.window.input_ids, "type_ids": f.window.type_ids, "start": f.start, "end": f.end}),
        )?;
        writeln!(w)?;
    }
    w.flush()?;
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
    let mut rows = Table::new([
        "round",
        "system",
        "updates",
        "features",
        "seconds",
        "features_per_s",
        "load",
    ]);
    let mut ours_all = Vec::new();
    let mut peer_all = Vec::new();
    let data_f = QaFeatures(feats);
    let total_feats: usize = batches[..steps].iter().map(Vec::len).sum();
    for round in 1..=rounds {
        // candle: a fresh model, the first `steps` batches of epoch 0.
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
        let ours = log.examples_per_second();
        ours_all.push(ours);
        rows.push([
            round.to_string(),
            "candle (workbench)".into(),
            steps.to_string(),
            total_feats.to_string(),
            format!("{:.1}", log.seconds()),
            format!("{ours:.2}"),
            load_average(),
        ])?;
        println!(
            "round {round}: candle {ours:.2} features/s (load {})",
            load_average()
        );
        let argv: [OsString; 10] = [
            "--features".into(),
            fpath.clone().into(),
            "--batches".into(),
            bpath.clone().into(),
            "--model".into(),
            base_dir.clone().into(),
            "--threads".into(),
            recipe.train.threads.to_string().into(),
            "--lr".into(),
            recipe.train.lr.to_string().into(),
        ];
        let r: serde_json::Value = peers.run(PEER, argv)?.json()?;
        let peer = r["features_per_second"]
            .as_f64()
            .context("peer features_per_second")?;
        peer_all.push(peer);
        rows.push([
            round.to_string(),
            format!("PyTorch {} (peer)", r["torch"].as_str().unwrap_or("?")),
            steps.to_string(),
            total_feats.to_string(),
            format!("{:.1}", r["seconds"].as_f64().unwrap_or(0.0)),
            format!("{peer:.2}"),
            load_average(),
        ])?;
        println!(
            "round {round}: PyTorch {peer:.2} features/s (load {})",
            load_average()
        );
    }
    let (ours_med, peer_med) = (median(&ours_all), median(&peer_all));
    let ratio = ours_med / peer_med;
    let md = format!(
        "{}\n\n{}\n\ncandle / PyTorch throughput: **{ratio:.2}×** (medians of {rounds} interleaved rounds: candle {ours_med:.2}, PyTorch {peer_med:.2} features/s; same {steps} length-grouped batches of {} features, {} threads, max_seq_len {}; load {} at the end).\n",
        machine.summary(), rows.to_markdown(), recipe.train.batch_size, recipe.train.threads, recipe.windows.max_seq_len, load_average()
    );
    std::fs::write(
        dir.join("bench.json"),
        serde_json::to_vec_pretty(&serde_json::json!({
            "ratio": ratio, "candle_median": ours_med, "pytorch_median": peer_med,
            "candle": ours_all, "pytorch": peer_all, "updates": steps, "rounds": rounds,
            "threads": recipe.train.threads, "batch_size": recipe.train.batch_size,
            "load_at_end": load_average(),
        }))?,
    )?;
    println!("{md}");
    rows.write_csv(&dir.join("bench.csv"))?;
    std::fs::write(dir.join("bench.md"), md)?;
    exp.finish(serde_json::json!({ "ratio": ratio }))?;
    Ok(())
}
