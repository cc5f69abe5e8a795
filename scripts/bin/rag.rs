//! Run one pipeline config headlessly.
//!
//! ```text
//! cargo run --release --bin rag -- configs/tiny.toml [--force] [--max-questions N]
//! ```
//!
//! Builds the pipeline of the TOML file (`workbench::pipeline::config` documents the
//! schema), builds the reader the config names, runs every question and writes
//! `data/results/<name>/`: `traces.jsonl`, `predictions.json` (SQuAD format),
//! `summary.json`, `summary.md`, `per_question.csv`, `by_group.csv` / `.md` (report
//! 001's question groups), `config.toml` (resolved), `skipped.json`, plus `config.json`
//! and `manifest.json`. A fresh result is skipped unless `--force`.
//! `--max-questions N` overrides `questions.limit` (a seeded sample). A config with a
//! `[query_transform]` runs it on the reader's model (one loaded copy).

use anyhow::{Context, Result};
use clap::Parser;
use std::path::PathBuf;
use workbench::evaluate::groups;
use workbench::pipeline::config::ReaderKind;
use workbench::pipeline::{Pipeline, PipelineConfig, QueryTransform};
use workbench::read::Reader;
use workbench::results::{executable_sha256, Experiment};

#[derive(Parser)]
#[command(about = "Run one RAG pipeline config (TOML) headlessly")]
struct Args {
    /// The pipeline config (TOML).
    config: PathBuf,
    /// Redo a fresh result.
    #[arg(long)]
    force: bool,
    /// Override `questions.limit` (a seeded sample of this many questions).
    #[arg(long)]
    max_questions: Option<usize>,
}

/// A reader and the query transform that shares its model.
type ReaderAndTransform = (Box<dyn Reader>, Option<Box<dyn QueryTransform>>);

/// The reader a config names, and its query transform (on the reader's model).
fn build_reader(p: &Pipeline) -> Result<ReaderAndTransform> {
    let r = &p.config().reader;
    match r.kind {
        ReaderKind::Generative => {
            let reader = workbench::pipeline::reader::generative_reader(p)
                .with_context(|| format!("loading the reader `{}`", r.model))?;
            let transform = workbench::pipeline::llm_transform::transform_for(p, reader.llm())
                .context("building the query transform")?
                .map(|t| Box::new(t) as Box<dyn QueryTransform>);
            Ok((Box::new(reader), transform))
        }
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mut config = PipelineConfig::from_file(&args.config)
        .with_context(|| format!("reading {}", args.config.display()))?;
    if let Some(n) = args.max_questions {
        config.questions.limit = n;
    }
    let pipeline = Pipeline::build(config.clone()).context("building the pipeline")?;
    let (mut reader, mut transform) = build_reader(&pipeline)?;
    let resolved = serde_json::json!({
        "config": config,
        "executable_sha256": executable_sha256()?,
    });
    let Some(exp) = Experiment::start(&config.name, &resolved, args.force, "summary.md")? else {
        return Ok(());
    };
    let transform = transform
        .as_mut()
        .map(|t| -> &mut dyn QueryTransform { t.as_mut() });
    let run = pipeline.run(reader.as_mut(), transform)?;
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
    Ok(())
}
