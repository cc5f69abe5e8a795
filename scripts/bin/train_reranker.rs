//! Train the cross-encoder and evaluate it on the held-out SQuAD articles
//! (`workbench::study::reranker`).
//!
//! ```text
//! cargo run --release --bin train_reranker [-- --recipe minilm-ce] [--scale quick] [--force] [--groups-only]
//! cargo run --release --bin train_reranker -- --bench 32 [--warmup 4] [--rounds 6]   # candle vs PyTorch, same batches
//! ```
//!
//! Recipe `minilm-ce` (default): all-MiniLM-L6-v2 with a new one-logit
//! `BertForSequenceClassification` head, trained with softmax cross-entropy over groups of
//! (question, positive passage, BM25 hard negatives) from the SQuAD dev half's training
//! articles (never the five held-out ones), RAG Mini Wikipedia's training questions and
//! NQ-open distant supervision (`workbench::train::groups`). Never DL19. A trained recipe
//! is cached under `data/cache/cross-encoders/<key>/` (key = sha256 of the recipe and of
//! every input file's sha256) and reused; `--force` redoes the results, not the training.
//! `--scale quick`: the recipe's quick size (labelled `minilm-ce-quick`, 400 groups) and a seeded sample of
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
use workbench::bench::BenchRun;
use workbench::study::{self, reranker, Env};
use workbench::train::cross_recipe::{self, CrossRecipe};
use workbench::train::{Stop, TrainData};

#[derive(Parser, Debug)]
#[command(about = "Train the cross-encoder and evaluate it on the held-out SQuAD articles")]
struct Args {
    #[command(flatten)]
    study: cli::StudyFlags,
    /// Recipe: minilm-ce (its quick size, 400 groups, with `--scale quick`).
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
    if let Some(plan) = a.bench.plan(&env.root)? {
        return bench(&env, &valid.recipe, &plan);
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
    study::execute(&env, &valid, a.study.force)?;
    Ok(())
}

/// `--bench`: candle and the PyTorch peers (`train_bench::PEER`, `--task cross`, float32
/// and bf16 autocast) on the first `warmup + timed` length-grouped batches of groups of the
/// recipe's epoch 0, from candle's initial model.
///
/// Writes `data/results/bench-train-cross-encoder/`: `bench.md`, `bench.csv`, `ratios.csv`,
/// `bench.json`, the shared inputs (`pairs.jsonl`, `batches.json`, `lrs.json`; the initial
/// model is removed at the end), `config.json`, `manifest.json`.
fn bench(env: &Env, recipe: &CrossRecipe, plan: &train_bench::Plan) -> Result<()> {
    let config = serde_json::json!({
        "recipe": recipe, "updates": plan.timed, "warmup_updates": plan.warmup,
        "rounds": plan.rounds, "peer": train_bench::PEER,
    });
    let BenchRun { exp, machine } =
        BenchRun::start("bench-train-cross-encoder", &config, "bench.md")?;
    println!("{}", machine.summary());
    let dir = exp.out.out_dir().to_path_buf();
    let set = cross_recipe::recipe_groups(&env.assets, recipe)?;
    let initial = cross_recipe::base_model(&env.assets, recipe)?;
    let data = cross_recipe::training_data(&env.assets, recipe, &set, &initial)?;
    // The shared inputs: pairs (JSONL, group after group, positive first), the batches of
    // groups of epoch 0 and their learning rates, candle's initial model.
    let ppath = dir.join("pairs.jsonl");
    train_bench::write_jsonl(
        &ppath,
        data.pairs
            .iter()
            .map(|p| serde_json::json!({"ids": p.ids, "type_ids": p.type_ids})),
    )?;
    let lengths: Vec<usize> = (0..data.len()).map(|i| data.length(i)).collect();
    let inputs = train_bench::inputs(&dir, &lengths, &recipe.train, plan)?;
    let model_dir = dir.join("initial-model");
    initial.save_pretrained(
        &model_dir,
        &env.assets.resolve(&recipe.base, "tokenizer.json")?,
    )?;
    // Every variable's elements: the parameters training updates.
    let parameters: usize = initial.vars.all_vars().iter().map(|v| v.elem_count()).sum();
    drop(initial);
    let g = recipe.group_size;
    let shape = |b: &Vec<usize>| {
        (
            b.len() * g,
            b.iter().map(|&i| lengths[i]).max().unwrap_or(0),
        )
    };
    let base_config = env.assets.resolve(&recipe.base, "config.json")?;
    let b = train_bench::TrainBench {
        unit: "pairs",
        per_item: g,
        warmup: plan.warmup,
        timed: plan.timed,
        rounds: plan.rounds,
        rows: inputs.batches.iter().map(|b| shape(b).0).collect(),
        padded: inputs.batches.iter().map(|b| shape(b).1).collect(),
        lrs: inputs.lrs.clone(),
        threads: recipe.train.threads,
        parameters,
        peer_args: train_bench::peer_args(
            &["--task", "cross", "--group-size", &g.to_string()],
            ppath,
            &inputs,
            &model_dir,
            &recipe.train,
        ),
        batches: format!(
            "length-grouped batches of {} groups of {g} pairs, pairs of at most {} tokens",
            recipe.train.batch_size, recipe.max_length
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
    let summary = train_bench::rounds(&b, &dir, &machine.summary(), &plan.peers, || {
        // A fresh model, the first `warmup + timed` batches of epoch 0.
        let model = cross_recipe::base_model(&env.assets, recipe)?;
        train_bench::measure(|| {
            Ok(workbench::train::train(
                &model,
                &model.vars,
                &data,
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
