//! Run pipeline configs headlessly, and compare them.
//!
//! ```text
//! cargo run --release --bin rag -- configs/tiny.toml [--force] [--max-questions N]
//! cargo run --release --bin rag -- --compare A.toml B.toml [C.toml …] [--max-questions N]
//! ```
//!
//! Builds the pipeline of the TOML file (`workbench::pipeline::config` documents the
//! schema), builds the reader the config names (an in-process GGUF, or an
//! OpenAI-compatible server), runs every question and writes `data/results/<name>/`:
//! `traces.jsonl`, `predictions.json` (SQuAD format), `raw_predictions.json`,
//! `summary.json`, `summary.md`, `per_question.csv`, `by_group.csv` / `.md` (report 001's
//! question groups), `config.toml` (resolved), `skipped.json`, `dropped_golds.json` (gold answers that
//! normalise to nothing, dropped and listed), plus `config.json` and
//! `manifest.json`. A fresh result is skipped unless `--force`.
//!
//! While it runs, each finished question is appended to
//! `data/results/<name>.journal.jsonl`; a run that is killed continues from there when
//! started again with the same config and program (any other config starts over).
//!
//! `--compare` runs each config (or reuses its fresh result) and prints every config
//! against the first on the questions they share: EM, F1, Match and token recall with
//! paired tests, Holm-corrected marks, the detectable difference, 95% intervals (and the LLM
//! judge's verdicts when the configs name one: `evaluation.judge_model`).
//! `--max-questions N` overrides `questions.limit` (a seeded sample) in every config;
//! `--results DIR` puts the result folders in `DIR` instead of `data/results`.

use anyhow::{bail, Context, Result};
use clap::Parser;
use std::path::{Path, PathBuf};
use workbench::evaluate::groups;
use workbench::pipeline::reader::{build, ModelPool};
use workbench::pipeline::study::{self, QaComparisons, StudyRun, StudyRuns};
use workbench::pipeline::trace::Journal;
use workbench::pipeline::{Pipeline, PipelineConfig, PipelineRun, QueryTransform};
use workbench::results::{executable_sha256, Experiment, ResultDir};

#[derive(Parser)]
#[command(about = "Run RAG pipeline configs (TOML) headlessly, or compare them")]
struct Args {
    /// The pipeline config (TOML); with --compare, two or more.
    #[arg(required = true)]
    configs: Vec<PathBuf>,
    /// Redo fresh results.
    #[arg(long)]
    force: bool,
    /// Override `questions.limit` (a seeded sample of this many questions).
    #[arg(long)]
    max_questions: Option<usize>,
    /// Compare the configs: paired tests of each against the first.
    #[arg(long)]
    compare: bool,
    /// Randomisation / bootstrap trials of the comparison.
    #[arg(long, default_value_t = 10_000)]
    trials: usize,
    /// Seed of the comparison's resampling.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Folder of the result folders (default: `data/results` of the project).
    #[arg(long)]
    results: Option<PathBuf>,
}

/// Run `path` (or reuse its fresh result); returns the run.
fn run_one(path: &Path, args: &Args, pool: &mut ModelPool) -> Result<PipelineRun> {
    let mut config =
        PipelineConfig::from_file(path).with_context(|| format!("reading {}", path.display()))?;
    if let Some(n) = args.max_questions {
        config.questions.limit = n;
    }
    let resolved = serde_json::json!({
        "config": config,
        "executable_sha256": executable_sha256()?,
    });
    let out = match &args.results {
        Some(dir) => ResultDir::at(dir.join(&config.name), &config.name, &resolved)?,
        None => ResultDir::new(&config.name, &resolved)?,
    };
    if out.is_fresh() && !args.force {
        println!(
            "{}: fresh, reused ({}); pass --force to redo",
            config.name,
            out.dir.display()
        );
        let run = PipelineRun::read(&out.dir, config)?;
        println!("{}", run.summary().to_table().to_markdown());
        return Ok(run);
    }
    let journal_path = out
        .dir
        .with_file_name(format!("{}.journal.jsonl", config.name));
    let key = workbench::assets::sha256_bytes(serde_json::to_string(&resolved)?.as_bytes());
    let mut journal = Journal::open(&journal_path, &key)?;
    if let Some(why) = journal.discarded() {
        println!(
            "{}: not continuing {} ({why}): starting over",
            config.name,
            journal_path.display()
        );
    } else if !journal.done().is_empty() {
        println!(
            "{}: continuing after {} finished questions ({})",
            config.name,
            journal.done().len(),
            journal_path.display()
        );
    }
    let pipeline = Pipeline::build(config.clone()).context("building the pipeline")?;
    let (mut reader, mut transform) = build(&pipeline, pool)
        .with_context(|| format!("building the reader `{}`", config.reader.model))?;
    let Some(exp) = Experiment::start_in(out, true, "summary.md")? else {
        bail!("the result folder could not be started");
    };
    let transform = transform
        .as_mut()
        .map(|t| -> &mut dyn QueryTransform { t.as_mut() });
    // Built before reading: a judge that cannot be built stops the run before it reads.
    let judge = workbench::pipeline::reader::judge(&pipeline, pool)?;
    let mut run = pipeline.run_journaled(reader.as_mut(), transform, &mut journal)?;
    if let Some(judge) = judge {
        run.judge_with(judge.as_ref())?;
    }
    run.write(exp.out.out_dir())?;
    let system = run.retrieval.clone();
    let df = groups::per_question_frame(&run.question_scores(&system))?;
    let by_group = groups::to_table(&groups::by_group(&df)?, 2)?;
    by_group.write_csv(&exp.out.path("by_group.csv"))?;
    std::fs::write(exp.out.path("by_group.md"), by_group.to_markdown())?;
    let summary = run.summary();
    println!("{}", summary.to_table().to_markdown());
    println!("{}", by_group.to_markdown());
    println!("load: {}", workbench::machine::load_average());
    exp.finish(serde_json::to_value(&summary)?)?;
    journal.remove()?;
    Ok(run)
}

/// Keep only the questions every run has, in the first run's order.
fn common_questions(runs: &mut [PipelineRun]) -> usize {
    let mut ids: Vec<String> = runs[0].records.iter().map(|r| r.id.clone()).collect();
    for r in &runs[1..] {
        let have: std::collections::HashSet<&str> =
            r.records.iter().map(|x| x.id.as_str()).collect();
        ids.retain(|id| have.contains(id.as_str()));
    }
    let keep: std::collections::HashSet<String> = ids.iter().cloned().collect();
    for r in runs.iter_mut() {
        r.records.retain(|x| keep.contains(&x.id));
    }
    ids.len()
}

fn compare(args: &Args, pool: &mut ModelPool) -> Result<()> {
    if args.configs.len() < 2 {
        bail!("--compare needs at least two configs");
    }
    let mut runs = args
        .configs
        .iter()
        .map(|p| run_one(p, args, pool))
        .collect::<Result<Vec<_>>>()?;
    let sizes: Vec<usize> = runs.iter().map(|r| r.records.len()).collect();
    let n = common_questions(&mut runs);
    if n == 0 {
        bail!("the configs share no question (questions per config: {sizes:?})");
    }
    if sizes.iter().any(|&s| s != n) {
        println!("compared on the {n} questions all configs ran (questions per config: {sizes:?})");
    }
    let names: Vec<String> = runs.iter().map(|r| r.name.clone()).collect();
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    if unique.len() != names.len() {
        bail!("two configs have the same `name` ({names:?}): give each its own");
    }
    let study = StudyRuns(
        runs.into_iter()
            .map(|run| StudyRun {
                reader: run.reader.clone(),
                system: run.name.clone(),
                run,
            })
            .collect(),
    );
    let mut t = workbench::display::Table::new(study::ANSWERED_COLUMNS).caption(format!(
        "{n} questions; EM and F1 over every question are in the summary of each run"
    ));
    for r in &study.0 {
        let s = r.run.summary();
        t.push(study::answered_cells(&r.system, &s, r.run.answer_match))?;
    }
    println!("{}", t.to_markdown());
    let mut c = QaComparisons::default();
    let base = &study.0[0];
    for r in &study.0[1..] {
        c.push(
            "",
            (&r.system, &r.run),
            (&base.system, &base.run),
            args.trials,
            args.seed,
        )?;
    }
    println!("{}", c.table()?.to_markdown());
    println!("{}\n", study::significance_note(&c));
    println!(
        "{}",
        study::intervals(&study, args.trials, args.seed)?.to_markdown()
    );
    Ok(())
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mut pool = ModelPool::default();
    if args.compare {
        return compare(&args, &mut pool);
    }
    if args.configs.len() != 1 {
        bail!("give one config, or several with --compare");
    }
    run_one(&args.configs[0], &args, &mut pool)?;
    Ok(())
}
