//! Run pipeline configs headlessly, and compare them.
//!
//! ```text
//! cargo run --release --bin rag -- configs/tiny.toml [--force] [--max-questions N] [--set SECTION.KEY=VALUE …] [--scale quick]
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
//! `manifest.json`. A result is fresh, and reused unless `--force`, when it was written by
//! the same program for the same resolved config *and the same contents* of the files the
//! config reads (prompts, questions, corpus; models by path and size:
//! `workbench::pipeline::run_key`); `config.json` records those hashes, and a stale
//! result's rerun names what changed.
//!
//! While it runs, each finished question is appended to
//! `data/results/<name>.journal.jsonl`; a run that is killed continues from there when
//! started again with the same run key (config, program and input contents); a journal of
//! any other key is started over, saying what changed. A question whose journal line was
//! cut off by the kill is run again.
//!
//! `--compare` first checks that every config runs the same questions (ids, question text,
//! gold answers) under the same answer-match rule and the same judge as the first, and
//! refuses, naming the first difference, when one does not; then it runs each config (or
//! reuses its fresh result) and prints every config against the first, paired by question
//! id: EM, F1, Match and token recall with paired tests, Holm-corrected marks, the
//! detectable difference, 95% intervals (and the LLM judge's verdicts when the configs name
//! one: `evaluation.judge_model`).
//! `--max-questions N` overrides `questions.limit` (a seeded sample) in every config;
//! `--scale quick` reads with the quick recipes of the trained models a config names
//! (`trained:minilm-ce`, `trained:minilm-all`, a ColBERT projection; part of the run key,
//! so a result of the other scale is run again, in the same folder);
//! `--results DIR` puts the result folders in `DIR` instead of `data/results`.

use anyhow::{bail, Context, Result};
use clap::Parser;
use std::path::{Path, PathBuf};
use workbench::env::Scale;
use workbench::evaluate::groups;
use workbench::load::question_set::QuestionSet;
use workbench::pipeline::reader::{build_parts, ModelPool};
use workbench::pipeline::run_key::{check_comparable, Comparand};
use workbench::pipeline::trace::Journal;
use workbench::pipeline::trained::{for_config, Training};
use workbench::pipeline::{Pipeline, PipelineConfig, PipelineRun, QueryTransform, RunKey};
use workbench::read::ReaderSpec;
use workbench::results::{executable_sha256, Experiment, ResultDir};
use workbench::study::repro::{self as study, QaComparisons, StudyRun, StudyRuns};

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
    /// Set a field of the config: `--set reader.model=models/my.gguf` (a relative path is
    /// relative to the current folder), `--set retrieval.depth=20`; repeatable.
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    sets: Vec<String>,
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
    /// The size of the trained models a config names (`trained:minilm-ce`,
    /// `trained:minilm-all`): quick (the short recipes) or default (the published ones;
    /// paper is the same).
    #[arg(long, default_value = "default")]
    scale: Scale,
}

/// The config of `path` with the command line's overrides.
fn read_config(path: &Path, args: &Args) -> Result<PipelineConfig> {
    let mut config = PipelineConfig::from_file_with(path, &args.sets)
        .with_context(|| format!("reading {}", path.display()))?;
    if let Some(n) = args.max_questions {
        config.questions.limit = n;
    }
    Ok(config)
}

/// The run key of `config` (the program's sha256 and the contents of its inputs), with
/// the scale of its trained models when it names any (a `trained:` re-ranker or reader, a
/// ColBERT projection): their size differs by scale (paper's recipes are the default's).
fn run_key(config: &PipelineConfig, path: &Path, scale: Scale) -> Result<RunKey> {
    let mut key = RunKey::new(config, &executable_sha256()?)
        .with_context(|| format!("hashing the inputs of {}", path.display()))?;
    let trained_reranker = config
        .rerank
        .as_ref()
        .is_some_and(|r| r.trained().is_some());
    let trained_reader = matches!(&config.reader.spec, ReaderSpec::Extractive(e)
        if e.model.starts_with(workbench::assets::TRAINED_PREFIX));
    if trained_reranker || trained_reader {
        let sized = if scale == Scale::Quick {
            Scale::Quick
        } else {
            Scale::Default
        };
        key.inputs
            .insert("trained models' scale".into(), sized.to_string());
    }
    Ok(key)
}

/// Run `path` (or reuse its fresh result); returns the run.
fn run_one(path: &Path, args: &Args, pool: &mut ModelPool) -> Result<PipelineRun> {
    let config = read_config(path, args)?;
    let key = run_key(&config, path, args.scale)?;
    let resolved = key.resolved(&config)?;
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
    if let Some(why) = stale_because(&out, &key) {
        println!(
            "{}: running again ({} changed since {} was written)",
            config.name,
            why,
            out.dir.display()
        );
    }
    let journal_path = out
        .dir
        .with_file_name(format!("{}.journal.jsonl", config.name));
    let mut journal = Journal::open_for(&journal_path, &key)?;
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
    // A trained re-ranker the config names is found in the cache, or trained there first, at
    // the scale's recipe sizes (a trained reader must be in the cache); the pipeline is then
    // built from what was resolved.
    let env = workbench::env::Env::project()?;
    let trained = for_config(&env, args.scale, &config, Training::Allow)
        .context("resolving the trained models")?;
    let pipeline =
        Pipeline::build_resolved(config.clone(), &trained).context("building the pipeline")?;
    let mut parts = build_parts(&pipeline, pool)
        .with_context(|| format!("building the reader `{}`", config.reader.spec.model()))?;
    let Some(exp) = Experiment::start_in(out, true, "summary.md")? else {
        bail!("the result folder could not be started");
    };
    // Built before reading: a judge that cannot be built stops the run before it reads.
    let judge = workbench::pipeline::reader::judge(&pipeline, pool)?;
    let mut run = if pipeline.config().method.is_some() {
        let lm = parts
            .lm
            .as_mut()
            .map(|g| -> &mut dyn workbench::method::Lm { g });
        pipeline.run_method(parts.reader.as_mut(), lm, Some(&mut journal))?
    } else {
        let transform = parts
            .transform
            .as_mut()
            .map(|t| -> &mut dyn QueryTransform { t.as_mut() });
        pipeline.run_journaled(parts.reader.as_mut(), transform, &mut journal)?
    };
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

/// What changed since the stored result in `out` was written (`None`: there is none, or
/// nothing the run key records changed, e.g. an output file was edited).
fn stale_because(out: &ResultDir, key: &RunKey) -> Option<String> {
    let text = std::fs::read_to_string(out.final_path("config.json")).ok()?;
    let stored = RunKey::of_resolved(&serde_json::from_str::<serde_json::Value>(&text).ok()?)?;
    let changes = key.changes(&stored);
    (!changes.is_empty()).then(|| changes.join(", "))
}

fn compare(args: &Args, pool: &mut ModelPool) -> Result<()> {
    if args.configs.len() < 2 {
        bail!("--compare needs at least two configs");
    }
    // Refuse before running anything: the questions, gold answers, rule and judge of each
    // config must be the first one's.
    let mut checked = Vec::with_capacity(args.configs.len());
    for path in &args.configs {
        let config = read_config(path, args)?;
        let questions = Pipeline::load_questions_of(&config)
            .with_context(|| format!("loading the questions of {}", path.display()))?;
        let key = run_key(&config, path, args.scale)?;
        // Compared under the rule each run uses: the config's, else its question set's.
        let mut config = config;
        config
            .evaluation
            .answer_match
            .get_or_insert(questions.answer_match);
        // And at the judge cut each run uses (the config's, else the calibrated one).
        config
            .resolve_judge_cut()
            .with_context(|| format!("resolving the judge cut of {}", path.display()))?;
        checked.push((path.display().to_string(), config, questions, key));
    }
    fn side(c: &(String, PipelineConfig, QuestionSet, RunKey)) -> Comparand<'_> {
        Comparand {
            name: c.0.as_str(),
            config: &c.1,
            questions: &c.2.questions,
            key: &c.3,
        }
    }
    for other in &checked[1..] {
        check_comparable(side(&checked[0]), side(other))?;
    }
    let runs = args
        .configs
        .iter()
        .map(|p| run_one(p, args, pool))
        .collect::<Result<Vec<_>>>()?;
    let n = runs[0].records.len();
    let ids = |r: &PipelineRun| {
        let mut v: Vec<String> = r.records.iter().map(|x| x.id.clone()).collect();
        v.sort();
        v
    };
    for r in &runs[1..] {
        if ids(r) != ids(&runs[0]) {
            bail!(
                "the results of `{}` and `{}` hold different questions ({} and {}) although \
                 their configs run the same ones: pass --force to redo them",
                r.name,
                runs[0].name,
                r.records.len(),
                n
            );
        }
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
                journal: None,
                resumed: 0,
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
