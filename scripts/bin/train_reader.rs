//! Train the extractive reader (issue 9) and evaluate it on the held-out SQuAD articles.
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
use serde::Serialize;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;
use workbench::assets::Assets;
use workbench::bench::{median, BenchRun, PythonPeers};
use workbench::display::Table;
use workbench::machine::load_average;
use workbench::plot::render;
use workbench::read::extractive::{ExtractiveReader, ReaderParams};
use workbench::results::Experiment;
use workbench::train::qa::{QaFeatures, QaTrainModel};
use workbench::train::reader::{self, ReaderRecipe};
use workbench::train::{batching, Stop};

#[derive(Parser, Debug, Serialize)]
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
    #[serde(skip)]
    bench: Option<usize>,
    /// Interleaved rounds of the benchmark.
    #[arg(long, default_value_t = 2)]
    #[serde(skip)]
    rounds: usize,
    /// Python of the peers venv (default: `$PEERS_PYTHON`, else `$PEERS_VENV/bin/python`,
    /// see `PythonPeers::default_python`).
    #[arg(long, env = "WORKBENCH_PEERS_PYTHON")]
    #[serde(skip)]
    python: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let assets = Assets::load()?;
    if args.full && args.scale == workbench::study::Scale::Quick {
        bail!("--full and --scale quick contradict each other: choose one");
    }
    let recipe = if args.full {
        ReaderRecipe::named(&args.recipe, true)?
    } else {
        ReaderRecipe::at_scale(&args.recipe, args.scale)?
    };
    if let Some(steps) = args.bench {
        let peers = PythonPeers::new(&workbench::paths::project_root()?, args.python.clone());
        peers.command(PEER)?; // a missing peers venv stops the run before any work
        return bench(&assets, &recipe, steps, args.rounds, &peers);
    }
    let root = workbench::paths::project_root()?;
    #[derive(Serialize)]
    struct Config<'a> {
        args: &'a Args,
        recipe: &'a ReaderRecipe,
        key: String,
        inputs: Vec<(String, String)>,
        program_sha256: String,
    }
    let config = Config {
        args: &args,
        recipe: &recipe,
        key: recipe.key(&assets)?,
        inputs: assets.input_checksums(recipe.inputs())?,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let cache_root = workbench::paths::cache_dir(&root, "readers");
    let mut name = format!("reader-{}", recipe.name);
    let t_sup = Instant::now();
    let data = reader::supervision(&assets, &recipe.supervision)?;
    let partial = if args.partial {
        let p = reader::partial_checkpoint(&assets, &recipe, &cache_root, &data)?
            .context("no checkpoint of this recipe's run to evaluate")?;
        name = format!("{name}-partial{}", p.1.steps.len());
        Some(p)
    } else {
        None
    };
    let Some(exp) = Experiment::start(&name, &config, args.force, "metrics.md")? else {
        return Ok(());
    };
    let out = &exp.out;
    println!("supervision in {:.1} s:", t_sup.elapsed().as_secs_f64());
    let mut sup_t = Table::new(["source", "questions", "used", "not used (reason: count)"]);
    for c in &data.counts {
        let why: Vec<String> = c
            .unlocated
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        sup_t.push([
            c.source.clone(),
            c.questions.to_string(),
            c.located.to_string(),
            why.join("; "),
        ])?;
    }
    println!("{}", sup_t.to_markdown());
    sup_t.write_csv(&out.path("supervision.csv"))?;
    let mut ids = std::fs::File::create(out.path("nq_used_ids.txt"))?;
    for id in &data.nq_used {
        writeln!(ids, "{id}")?;
    }
    let t0 = Instant::now();
    let (trained, log) = match partial {
        Some((t, l)) => (t, Some(l)),
        None => reader::train_or_load(&assets, &recipe, &cache_root, &data)?,
    };
    println!(
        "trained `{}` ({} features) in {:.1} s of updates, {:.2} features/s, load {} → {}",
        recipe.name,
        trained.features,
        trained.train_seconds,
        trained.examples_per_second,
        trained.load,
        trained.model_dir.display()
    );
    let wall = t0.elapsed().as_secs_f64();
    if let Some(log) = &log {
        log.write_csv(&out.path("loss.csv"))?;
        let fig = render(&log.loss_plot(
            &format!(
                "training loss, reader {} ({} features, batch {})",
                recipe.name, trained.features, recipe.train.batch_size
            ),
            25,
        ))?;
        fig.save(out.out_dir(), "loss")?;
    }

    // Held-out: the answerable questions of the five articles, gold paragraph given.
    // Read through the hub path: the saved folder loads like any QA checkpoint.
    let params = ReaderParams {
        window: recipe.windows,
        ..ReaderParams::default()
    };
    let qa_reader = ExtractiveReader::load_dir(&trained.model_dir, params)?;
    let held: Vec<_> = data
        .held_out
        .iter()
        .filter(|e| e.answer.is_some())
        .cloned()
        .collect();
    let t1 = Instant::now();
    let texts = reader::predict_gold(&qa_reader, &held)?;
    let pred_s = t1.elapsed().as_secs_f64();
    let (em, f1) = reader::em_f1(&held, &texts);
    let mut pt = Table::new(["id", "question", "prediction", "golds", "em", "f1"]);
    for (e, p) in held.iter().zip(&texts) {
        let p = p.clone().unwrap_or_default();
        pt.push([
            e.id.clone(),
            e.question.clone(),
            p.clone(),
            e.golds.join(" | "),
            workbench::evaluate::qa::exact_match(&p, &e.golds).to_string(),
            format!("{:.3}", workbench::evaluate::qa::f1(&p, &e.golds)),
        ])?;
    }
    pt.write_csv(&out.path("predictions.csv"))?;
    let mut mt = Table::new([
        "reader",
        "questions",
        "EM",
        "F1",
        "train_features",
        "train_s",
        "features_per_s",
        "load",
    ]);
    mt.push([
        recipe.name.clone(),
        held.len().to_string(),
        format!("{em:.1}"),
        format!("{f1:.1}"),
        trained.features.to_string(),
        format!("{:.0}", trained.train_seconds),
        format!("{:.2}", trained.examples_per_second),
        trained.load.clone(),
    ])?;
    mt.write_csv(&out.path("metrics.csv"))?;
    let md = format!(
        "{}\n\nHeld-out: the {} answerable questions of {}, gold paragraph given (PyTorch reference, 2 epochs on ~2,000 questions: EM 34.5 / F1 50.9). Prediction {pred_s:.1} s.\n",
        mt.to_markdown(),
        held.len(),
        workbench::train::qa_data::HELD_OUT_ARTICLES.join(", ")
    );
    println!("{md}");
    std::fs::write(out.path("metrics.md"), &md)?;
    let summary = serde_json::json!({
        "recipe": recipe.name, "key": trained.key, "held_out_questions": held.len(),
        "em": em, "f1": f1, "train_features": trained.features,
        "train_seconds": trained.train_seconds, "features_per_second": trained.examples_per_second,
        "train_wall_seconds_this_run": wall, "load_at_training_end": trained.load,
        "load_now": load_average(), "nq_used": data.nq_used.len(),
        "model_dir": trained.model_dir, "counts": trained.counts,
    });
    std::fs::write(
        out.path("metrics.json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    exp.finish(summary)?;
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
