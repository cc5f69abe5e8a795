//! Train the cross-encoder and evaluate it on the held-out SQuAD articles
//! (`workbench::study::reranker`).
//!
//! ```text
//! cargo run --release --bin train_reranker [-- --recipe minilm-ce] [--scale quick] [--force] [--groups-only]
//! cargo run --release --bin train_reranker -- --bench 8 [--rounds 5]   # candle vs PyTorch, same batches
//! ```
//!
//! Recipe `minilm-ce` (default): all-MiniLM-L6-v2 with a new one-logit
//! `BertForSequenceClassification` head, trained with softmax cross-entropy over groups of
//! (question, positive passage, BM25 hard negatives) from the SQuAD dev half's training
//! articles (never the five held-out ones), RAG Mini Wikipedia's training questions and
//! NQ-open distant supervision (`workbench::train::groups`). Never DL19. A trained recipe
//! is cached under `data/cache/cross-encoders/<key>/` (key = sha256 of the recipe and of
//! every input file's sha256) and reused; `--force` redoes the results, not the training.
//! Quick: the recipe's quick size (`minilm-ce-quick`, 160 groups) and a seeded sample of
//! 200 held-out questions.
//!
//! Writes `data/results/reranker-<recipe>/` (`-q<N>` for a sample of N questions other
//! than the scale's):
//! `groups.csv`, `nq_used_ids.txt`, `loss.csv`, `loss.png/.svg`, `metrics.csv`,
//! `metrics.md`, `significance.csv`, `per_query.csv`, `metrics.json`, `config.json`,
//! `manifest.json`.

#[path = "../common/cli.rs"]
mod cli;
#[path = "../common/train_bench.rs"]
mod train_bench;

use anyhow::Result;
use clap::Parser;
use std::time::Instant;
use workbench::bench::{BenchRun, PythonPeers};
use workbench::study::{self, reranker, Env, Scale};
use workbench::train::cross_recipe::{self, CrossRecipe};
use workbench::train::{Stop, TrainData};

#[derive(Parser, Debug)]
#[command(about = "Train the cross-encoder and evaluate it on the held-out SQuAD articles")]
struct Args {
    #[command(flatten)]
    study: cli::StudyFlags,
    /// Recipe: minilm-ce (`minilm-ce-quick`: its quick size, 160 groups).
    #[arg(long, default_value = "minilm-ce")]
    recipe: String,
    /// Build and count the training groups, then stop (no training, no results folder).
    #[arg(long)]
    groups_only: bool,
    /// Train (or find the trained checkpoint), print the timing, then stop (no results
    /// folder).
    #[arg(long)]
    train_only: bool,
    /// Do not train: evaluate the latest checkpoint of the recipe's unfinished run
    /// (results under `reranker-<recipe>-partial`).
    #[arg(long)]
    partial: bool,
    /// Evaluate a seeded sample of this many held-out questions (0 = all; default: the
    /// scale's).
    #[arg(long)]
    max_questions: Option<usize>,
    /// TF-IDF candidates re-ranked by the cross-encoder (default 20).
    #[arg(long)]
    rerank_depth: Option<usize>,
    /// Passages ranked per query by the first stages (default 100).
    #[arg(long)]
    depth: Option<usize>,
    #[command(flatten)]
    bench: train_bench::BenchFlags,
}

fn main() -> Result<()> {
    let a = Args::parse();
    let env = Env::project()?;
    let mut p = reranker::RerankerParams::at_scale(&a.recipe, a.study.scale);
    a.study.override_tests(&mut p.trials, &mut p.seed);
    p.partial = a.partial;
    if let Some(m) = a.max_questions {
        p.questions = (m > 0).then_some(m);
    }
    p.rerank_depth = a.rerank_depth.unwrap_or(p.rerank_depth);
    p.depth = a.depth.unwrap_or(p.depth);
    let valid = p.check()?;
    if let Some((steps, peers)) = a.bench.peers(&env.root)? {
        return bench(&env, &valid.recipe, steps, a.bench.rounds, &peers);
    }
    if a.groups_only || a.train_only {
        let set = cross_recipe::recipe_groups(&env.assets, &valid.recipe)?;
        println!(
            "{} groups ({} negatives drawn from the BM25 top {}, {} used per group); per source: {}",
            set.groups.len(),
            valid.recipe.groups.negatives,
            valid.recipe.groups.depth,
            valid.recipe.group_size - 1,
            serde_json::to_string(&set.counts)?
        );
        if a.train_only {
            let t0 = Instant::now();
            let (t, _) = cross_recipe::train_or_load(
                &env.assets,
                &valid.recipe,
                &env.cache_dir("cross-encoders"),
                &set,
            )?;
            println!(
                "`{}` (key {}): {} groups, {:.1} s of updates ({:.1} s wall this run), {:.2} pairs/s, load at the end of training {} → {}",
                valid.recipe.name,
                t.key,
                t.groups,
                t.train_seconds,
                t0.elapsed().as_secs_f64(),
                t.pairs_per_second,
                t.load,
                t.model_dir.display()
            );
        }
        return Ok(());
    }
    let resolved = valid.resolved(&env)?;
    study::execute(
        &env,
        &valid.name(),
        Scale::Default,
        &resolved,
        a.study.force,
        "metrics.md",
        || reranker::run(&env, &valid),
    )?;
    Ok(())
}

/// `--bench`: candle and the PyTorch peer (`train_bench::PEER`, `--task cross`) on the first
/// `steps` length-grouped batches of groups of the recipe's epoch 0.
///
/// Writes `data/results/bench-train-cross-encoder/`: `bench.md`, `bench.csv`, `bench.json`,
/// the shared inputs (`pairs.jsonl`, `batches.json`), `config.json`, `manifest.json`.
fn bench(
    env: &Env,
    recipe: &CrossRecipe,
    steps: usize,
    rounds: usize,
    peers: &PythonPeers,
) -> Result<()> {
    let config = serde_json::json!({
        "recipe": recipe, "updates": steps, "rounds": rounds, "peer": train_bench::PEER,
    });
    let BenchRun { exp, machine } =
        BenchRun::start("bench-train-cross-encoder", &config, "bench.md")?;
    println!("{}", machine.summary());
    let dir = exp.out.out_dir().to_path_buf();
    let set = cross_recipe::recipe_groups(&env.assets, recipe)?;
    let data = cross_recipe::training_data(
        &env.assets,
        recipe,
        &set,
        &cross_recipe::base_model(&env.assets, recipe)?,
    )?;
    // The shared inputs: pairs (JSONL, group after group, positive first) and the batches
    // of groups of epoch 0.
    let ppath = dir.join("pairs.jsonl");
    train_bench::write_jsonl(
        &ppath,
        data.pairs
            .iter()
            .map(|p| serde_json::json!({"ids": p.ids, "type_ids": p.type_ids})),
    )?;
    let lengths: Vec<usize> = (0..data.len()).map(|i| data.length(i)).collect();
    let (bpath, batches) = train_bench::first_batches(&dir, &lengths, &recipe.train, steps)?;
    let g = recipe.group_size;
    let b = train_bench::TrainBench {
        unit: "pairs",
        steps,
        rounds,
        examples: batches.iter().map(|b| b.len() * g).sum(),
        threads: recipe.train.threads,
        peer_args: train_bench::peer_args(
            &["--task", "cross", "--group-size", &g.to_string()],
            ppath,
            bpath,
            &env.assets.resolve(&recipe.base, "config.json")?,
            &recipe.train,
        )?,
        batches: format!(
            "length-grouped batches of {} groups of {g} pairs, pairs of at most {} tokens",
            recipe.train.batch_size, recipe.max_length
        ),
        macs: train_bench::encoder_macs(
            &env.assets.resolve(&recipe.base, "config.json")?,
            &batches
                .iter()
                .map(|b| {
                    (
                        b.len() * g,
                        b.iter().map(|&i| lengths[i]).max().unwrap_or(0),
                    )
                })
                .collect::<Vec<_>>(),
        )?,
    };
    let ratio = train_bench::rounds(&b, &dir, &machine.summary(), peers, || {
        // A fresh model, the first `steps` batches of epoch 0.
        let model = cross_recipe::base_model(&env.assets, recipe)?;
        let log = workbench::train::train(
            &model,
            &model.vars,
            &data,
            &recipe.train,
            None,
            Stop::AfterSteps(steps),
        )?;
        Ok((log.examples_per_second() * g as f64, log.seconds()))
    })?;
    exp.finish(serde_json::json!({ "ratio": ratio }))?;
    Ok(())
}
