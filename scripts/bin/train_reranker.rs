//! Train the cross-encoder (issue 11) and evaluate it on the held-out SQuAD articles.
//!
//! ```text
//! cargo run --release --bin train_reranker [-- --recipe minilm-ce] [--scale quick] [--force] [--groups-only]
//! ```
//!
//! Recipe `minilm-ce` (default): all-MiniLM-L6-v2 with a new one-logit
//! `BertForSequenceClassification` head, trained with softmax cross-entropy over groups of
//! (question, positive passage, BM25 hard negatives) from the SQuAD dev half's training
//! articles (never the five held-out ones), RAG Mini Wikipedia's training questions and
//! NQ-open distant supervision (`workbench::train::groups`). Never DL19. A trained recipe
//! is cached under `data/cache/cross-encoders/<key>/` (key = sha256 of the recipe and of
//! every input file's sha256) and reused; `--force` redoes the results, not the training.
//!
//! Held-out evaluation: the answerable questions of the five held-out SQuAD articles over
//! all 646 dev-half paragraphs (each question's own paragraph is its one relevant
//! passage): TF-IDF, dense all-MiniLM-L6-v2, and the trained cross-encoder re-ranking
//! TF-IDF's top `--rerank-depth` (the first stage of report 003's table), MRR@10 and
//! Recall@1/10, randomisation tests against dense and TF-IDF.
//!
//! Writes `data/results/reranker-<recipe>/`: `groups.csv` (what became of each source's
//! questions), `nq_used_ids.txt`, `loss.csv`, `loss.png/.svg`, `metrics.csv`,
//! `metrics.md`, `significance.csv`, `per_query.csv`, `metrics.json`, `config.json`,
//! `manifest.json`.

use anyhow::{Context, Result};
use clap::Parser;
use serde::Serialize;
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;
use workbench::assets::Assets;
use workbench::chunk::{Chunker, WholeDocument};
use workbench::display::Table;
use workbench::encode::{BertEncoder, EmbeddingCache, EncoderParams};
use workbench::evaluate::{evaluate, significance, Metric};
use workbench::load::squad;
use workbench::plot::render;
use workbench::rerank::cross_encoder::{CrossEncoder, CrossEncoderParams};
use workbench::rerank::{PassageLookup, RerankedRetriever};
use workbench::results::Experiment;
use workbench::retrieve::analyzer::Analyzer;
use workbench::retrieve::dense::DenseRetriever;
use workbench::retrieve::faiss::IndexParams;
use workbench::retrieve::tfidf::{TfIdf, TfIdfVariant};
use workbench::retrieve::Retriever;
use workbench::train::cross_recipe::{self, CrossRecipe};
use workbench::train::qa_data::HELD_OUT_ARTICLES;
use workbench::train::reader::load_average;
use workbench::{Qrels, Query};

const DATA: &str = "squad-v2-dev-half";

#[derive(Parser, Debug, Serialize)]
#[command(about = "Train the cross-encoder and evaluate it on the held-out SQuAD articles")]
struct Args {
    /// Recipe: minilm-ce (`minilm-ce-quick`: its quick size, 160 groups).
    #[arg(long, default_value = "minilm-ce")]
    recipe: String,
    /// quick: the recipe's quick size (`<recipe>-quick`) and 200 held-out questions;
    /// default and paper: the recipe as it is, every held-out question.
    #[arg(long, default_value = "default")]
    scale: workbench::study::Scale,
    /// Build and count the training groups, then stop (no training, no results folder).
    #[arg(long)]
    #[serde(skip)]
    groups_only: bool,
    /// Train (or find the trained checkpoint), print the timing, then stop (no results
    /// folder): for a timed run under the quiet lock, the evaluation after it.
    #[arg(long)]
    #[serde(skip)]
    train_only: bool,
    /// Do not train: evaluate the latest checkpoint of the recipe's unfinished run
    /// (exported in Hugging Face layout; results under `reranker-<recipe>-partial<updates>`).
    #[arg(long)]
    partial: bool,
    /// Evaluate a seeded sample of this many held-out questions (default: all).
    #[arg(long)]
    max_questions: Option<usize>,
    /// TF-IDF candidates re-ranked by the cross-encoder in the held-out evaluation.
    #[arg(long, default_value_t = 20)]
    rerank_depth: usize,
    /// Passages ranked per query by the first stages.
    #[arg(long, default_value_t = 100)]
    depth: usize,
    /// Monte Carlo trials of the randomisation tests.
    #[arg(long, default_value_t = 10_000)]
    trials: usize,
    /// Seed of the randomisation tests.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Redo the result folder (the trained checkpoint is still reused while its key holds).
    #[arg(long)]
    #[serde(skip)]
    force: bool,
}

fn main() -> Result<()> {
    let mut args = Args::parse();
    if args.scale == workbench::study::Scale::Quick && args.max_questions.is_none() {
        args.max_questions = Some(200);
    }
    let assets = Assets::load()?;
    let recipe = workbench::pipeline::systems::cross_recipe_at(&args.recipe, args.scale)?;
    recipe.check()?;
    let root = workbench::paths::project_root()?;
    let cache_root = workbench::paths::cache_dir(&root, "cross-encoders");
    let key = recipe.key(&assets)?;

    let t_groups = Instant::now();
    let set = cross_recipe::recipe_groups(&assets, &recipe)?;
    let mut gt = Table::new([
        "source",
        "questions",
        "groups",
        "not grouped (reason: count)",
    ]);
    for c in &set.counts {
        let why: Vec<String> = c.skipped.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        gt.push([
            c.source.clone(),
            c.questions.to_string(),
            c.grouped.to_string(),
            why.join("; "),
        ])?;
    }
    println!(
        "training groups in {:.1} s ({} groups, {} negatives drawn from the BM25 top {}, {} used per group):\n{}",
        t_groups.elapsed().as_secs_f64(),
        set.groups.len(),
        recipe.groups.negatives,
        recipe.groups.depth,
        recipe.group_size - 1,
        gt.to_markdown()
    );
    if args.groups_only {
        return Ok(());
    }
    if args.train_only {
        let before = load_average();
        let t0 = Instant::now();
        let (t, _) = cross_recipe::train_or_load(&assets, &recipe, &cache_root, &set)?;
        println!(
            "`{}` (key {}): {} groups of {}, {:.1} s of updates ({:.1} s wall this run), {:.2} pairs/s; load before {before}, at the end of training {} → {}",
            recipe.name,
            t.key,
            t.groups,
            recipe.group_size,
            t.train_seconds,
            t0.elapsed().as_secs_f64(),
            t.pairs_per_second,
            t.load,
            t.model_dir.display()
        );
        return Ok(());
    }

    #[derive(Serialize)]
    struct Config<'a> {
        args: &'a Args,
        recipe: &'a CrossRecipe,
        key: &'a str,
        eval_data: &'static str,
        held_out_articles: [&'static str; 5],
        inputs: Vec<(String, String)>,
        program_sha256: String,
    }
    let mut inputs = assets.input_checksums(recipe.inputs())?;
    inputs.extend(assets.input_checksums([DATA])?);
    let config = Config {
        args: &args,
        recipe: &recipe,
        key: &key,
        eval_data: DATA,
        held_out_articles: HELD_OUT_ARTICLES,
        inputs,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let mut name = format!("reranker-{}", recipe.name);
    let partial = if args.partial {
        let p = cross_recipe::partial_checkpoint(&assets, &recipe, &cache_root, &set)?
            .context("no checkpoint of this recipe's run to evaluate")?;
        name = format!("{name}-partial{}", p.1.steps.len());
        Some(p)
    } else {
        None
    };
    if let Some(m) = args.max_questions {
        name = format!("{name}-q{m}");
    }
    let Some(exp) = Experiment::start(&name, &config, args.force, "metrics.md")? else {
        return Ok(());
    };
    let out = &exp.out;
    gt.write_csv(&out.path("groups.csv"))?;
    let mut ids = std::fs::File::create(out.path("nq_used_ids.txt"))?;
    for id in &set.nq_used {
        writeln!(ids, "{id}")?;
    }

    let t0 = Instant::now();
    let (trained, log) = match partial {
        Some((t, l)) => (t, Some(l)),
        None => cross_recipe::train_or_load(&assets, &recipe, &cache_root, &set)?,
    };
    let wall = t0.elapsed().as_secs_f64();
    println!(
        "trained `{}` ({} groups of {}) in {:.1} s of updates, {:.2} pairs/s, load at the end {} → {}",
        recipe.name,
        trained.groups,
        recipe.group_size,
        trained.train_seconds,
        trained.pairs_per_second,
        trained.load,
        trained.model_dir.display()
    );
    if let Some(log) = &log {
        log.write_csv(&out.path("loss.csv"))?;
        let fig = render(&log.loss_plot(
            &format!(
                "training loss, cross-encoder {} ({} groups of {}, {} groups per update)",
                recipe.name, trained.groups, recipe.group_size, recipe.train.batch_size
            ),
            25,
        ))?;
        fig.save(out.out_dir(), "loss")?;
    }

    // Held-out evaluation over every dev-half paragraph.
    let sq = squad::load(&assets.resolve(DATA, "dev-v2.0.json")?)
        .with_context(|| format!("loading `{DATA}`"))?;
    let passages = WholeDocument.chunk_all(&sq.contexts)?;
    let mut queries: Vec<Query> = Vec::new();
    let mut qrels = Qrels::new();
    for q in sq.examples.iter().filter(|q| !q.is_unanswerable()) {
        let ctx = q
            .context_id
            .clone()
            .context("SQuAD question without a context id")?;
        let title = ctx.split_once('#').map(|x| x.0).unwrap_or(&ctx);
        if HELD_OUT_ARTICLES.contains(&title) {
            queries.push(q.to_query());
            qrels.entry(q.id.clone()).or_default().insert(ctx, 1);
        }
    }
    if let Some(m) = args.max_questions {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);
        queries.shuffle(&mut rng);
        queries.truncate(m);
        queries.sort_by(|a, b| a.id.cmp(&b.id));
        let keep: std::collections::HashSet<&str> = queries.iter().map(|q| q.id.as_str()).collect();
        qrels.retain(|q, _| keep.contains(q.as_str()));
    }
    println!(
        "held-out: {} answerable questions of {} over {} paragraphs",
        queries.len(),
        HELD_OUT_ARTICLES.join(", "),
        passages.len()
    );
    let tfidf = Arc::new(TfIdf::build(
        &passages,
        &Analyzer::default(),
        TfIdfVariant::cosine(),
    )?);
    let encoder = Arc::new(BertEncoder::load(
        &assets,
        &recipe.base,
        EncoderParams::default(),
    )?);
    let dense = DenseRetriever::build(
        encoder,
        &passages,
        IndexParams::flat_ip(),
        Some(&EmbeddingCache::project_default()?),
    )?;
    let ce = CrossEncoder::load_from_files(
        &format!("trained-{}", recipe.name),
        &trained.model_dir.join("config.json"),
        &trained.model_dir.join("tokenizer.json"),
        &trained.model_dir.join("model.safetensors"),
        CrossEncoderParams {
            max_length: recipe.max_length,
            ..CrossEncoderParams::default()
        },
    )?;
    let reranked = RerankedRetriever::new(
        Box::new(tfidf.clone()),
        Box::new(ce),
        PassageLookup::from_passages(&passages)?,
        args.rerank_depth,
    )?;
    let metrics = [Metric::Mrr(10), Metric::Recall(1), Metric::Recall(10)];
    let plan: Vec<(&str, String, &dyn Retriever, usize)> = vec![
        (
            "tfidf",
            "TF-IDF (cosine)".into(),
            tfidf.as_ref(),
            args.depth,
        ),
        (
            "dense",
            format!("dense {} flat IP", recipe.base),
            &dense,
            args.depth,
        ),
        (
            "tfidf+ce",
            format!(
                "TF-IDF top-{} → cross-encoder (trained {})",
                args.rerank_depth, recipe.name
            ),
            &reranked,
            args.rerank_depth,
        ),
    ];
    let mut rows = Vec::new();
    for (k, label, r, depth) in plan {
        let t = Instant::now();
        let run = r.retrieve_all(&queries, depth)?;
        let secs = t.elapsed().as_secs_f64();
        println!("{label}: {} queries in {secs:.1} s", run.len());
        rows.push((k, label, evaluate(&run, &qrels, &metrics)?, secs));
    }
    let mut mt = Table::new([
        "system",
        "MRR@10",
        "Recall@1",
        "Recall@10",
        "queries",
        "seconds",
    ]);
    let mut sig = Table::new([
        "system",
        "against",
        "metric",
        "mean_a",
        "mean_b",
        "p_randomization",
    ]);
    let mut pq = Table::new(["system", "query", "mrr@10"]);
    let by_key = |k: &str| rows.iter().find(|r| r.0 == k).map(|r| &r.2);
    for (k, label, res, secs) in &rows {
        let mut marks = String::new();
        for against in ["dense", "tfidf"] {
            if *k == against || *k == "tfidf" {
                continue;
            }
            let b = by_key(against).context("baseline row")?;
            for (ma, mb) in res.iter().zip(b) {
                let c =
                    significance::compare(&ma.per_query, &mb.per_query, args.trials, args.seed)?;
                sig.push([
                    k.to_string(),
                    against.to_string(),
                    ma.name.clone(),
                    format!("{:.4}", ma.mean),
                    format!("{:.4}", mb.mean),
                    format!("{:.4}", c.randomization.p_value),
                ])?;
                if against == "dense" && ma.name == "mrr@10" {
                    marks = c.marker().to_string();
                }
            }
        }
        mt.push([
            label.clone(),
            format!("{:.4}{marks}", res[0].mean),
            format!("{:.4}", res[1].mean),
            format!("{:.4}", res[2].mean),
            res[0].per_query.len().to_string(),
            format!("{secs:.1}"),
        ])?;
        for (q, v) in &res[0].per_query {
            pq.push([k.to_string(), q.clone(), format!("{v:.4}")])?;
        }
    }
    mt.write_csv(&out.path("metrics.csv"))?;
    sig.write_csv(&out.path("significance.csv"))?;
    pq.write_csv(&out.path("per_query.csv"))?;
    let md = format!(
        "{}\n\nHeld-out: {} answerable questions of the five held-out SQuAD articles ({}) over all {} dev-half paragraphs; † / †† on MRR@10: randomisation test against dense, p < 0.05 / 0.01 ({} trials). Cross-encoder `{}` (key {}): {} groups of {} (SQuAD training articles, RAG Mini training questions, NQ distant supervision), {:.0} s of updates, {:.2} pairs/s, load at the end of training {}.\n",
        mt.to_markdown(),
        queries.len(),
        HELD_OUT_ARTICLES.join(", "),
        passages.len(),
        args.trials,
        recipe.name,
        trained.key,
        trained.groups,
        recipe.group_size,
        trained.train_seconds,
        trained.pairs_per_second,
        trained.load
    );
    println!("{md}");
    std::fs::write(out.path("metrics.md"), &md)?;
    let mean = |k: &str, i: usize| by_key(k).map(|r| r[i].mean);
    let summary = serde_json::json!({
        "recipe": recipe.name, "key": trained.key, "groups": trained.groups,
        "group_size": recipe.group_size, "train_seconds": trained.train_seconds,
        "pairs_per_second": trained.pairs_per_second, "train_wall_seconds_this_run": wall,
        "load_at_training_end": trained.load, "load_now": load_average(),
        "counts": trained.counts, "nq_used": trained.nq_used.len(),
        "model_dir": trained.model_dir, "held_out_questions": queries.len(),
        "mrr10_tfidf": mean("tfidf", 0), "mrr10_dense": mean("dense", 0),
        "mrr10_tfidf_ce": mean("tfidf+ce", 0),
        "recall1_tfidf_ce": mean("tfidf+ce", 1), "recall10_tfidf_ce": mean("tfidf+ce", 2),
    });
    std::fs::write(
        out.path("metrics.json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    exp.finish(summary)?;
    Ok(())
}
