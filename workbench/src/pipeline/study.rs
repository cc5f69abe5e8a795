//! Running several pipeline configs as one study (feature `llm`): the reproductions of
//! reports 001, 002 and 004 (`scripts/bin/exp_report00{1,2,4}.rs`) and the notebooks.
//!
//! - [`ModelPool`] loads each GGUF model once; every config's reader and query transform
//!   that names it shares that copy ([`SharedLlm`]);
//! - [`run_config`] builds a config's pipeline, its reader on the pool's model and its
//!   LLM transform, and runs it;
//! - [`scaled`] sets a config's question count (a seeded sample) and reader model, the
//!   two things a reproduction changes between its default scale and its full run;
//! - [`side_by_side`] puts our numbers beside a report's in one table;
//! - the parts every reproduction binary shares: its command-line options ([`StudyArgs`]),
//!   its configs at the chosen scale ([`study_configs`]), its resolved config and result
//!   folder ([`start_study`]), the run of every config ([`run_study`]), the paired tests
//!   ([`significance_table`], [`push_comparisons`]), the abstention columns
//!   ([`ANSWERED_COLUMNS`], [`answered_cells`]) and the written tables ([`finish_study`]).
//!
//! ```no_run
//! # fn main() -> workbench::Result<()> {
//! use workbench::pipeline::study::{run_config, ModelPool};
//! let mut pool = ModelPool::default();
//! let config = workbench::pipeline::PipelineConfig::from_file("configs/report004_naive.toml".as_ref())?;
//! let run = run_config(&mut pool, workbench::pipeline::study::scaled(config, Some(5), None))?;
//! println!("{}", run.summary().to_table().to_markdown());
//! # Ok(()) }
//! ```

use super::llm_transform::transform_for;
use super::reader::generative_reader_on;
use super::trace::Summary;
use super::{Pipeline, PipelineConfig, PipelineRun, QueryTransform};
use crate::display::Table;
use crate::env::Scale;
use crate::evaluate::significance;
use crate::read::generative::{Llm, LoadOptions, SharedLlm};
use crate::results::{executable_sha256, Experiment, ResultDir};
use crate::Result;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The reader every reproduction uses unless `--reader` says otherwise.
pub const MAIN_READER: &str = "qwen2.5-coder-1.5b-instruct-gguf";

/// Command-line options every reproduction binary shares (flattened into its clap
/// `Args`, and serialised with them into the resolved config). The question count of the
/// default scale is the binary's own option (each has its own default).
#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct StudyArgs {
    /// quick: a handful of questions ([`QUICK_QUESTIONS`]) and the quick trained
    /// re-ranker; default: `--questions`; paper: the report's question count.
    #[arg(long, default_value = "default")]
    pub scale: Scale,
    /// Reader model asset(s); one set of systems each.
    #[arg(long = "reader", default_values_t = [MAIN_READER.to_string()])]
    pub readers: Vec<String>,
    /// Trials of the randomisation and bootstrap tests.
    #[arg(long, default_value_t = 10_000)]
    pub trials: usize,
    /// Seed of the significance tests.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Redo a fresh result.
    #[arg(long)]
    #[serde(skip)]
    pub force: bool,
}

/// Questions per config at the quick scale.
pub const QUICK_QUESTIONS: usize = 5;

/// What the paper scale runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FullScale {
    /// The config file's own `questions.limit` (the report's question count).
    ConfigLimit,
    /// Every question of the set.
    All,
}

/// One config of a study: the reader it runs with, the system (row) it stands for.
#[derive(Debug, Clone)]
pub struct StudyConfig {
    /// Reader asset.
    pub reader: String,
    /// System name (a row of the report's table).
    pub system: String,
    /// The resolved config.
    pub config: PipelineConfig,
}

/// Every run of a study: reader asset → system → run.
pub type StudyRuns = BTreeMap<String, BTreeMap<String, PipelineRun>>;

/// A reader asset's short name for labels and folders (`qwen2.5-coder-1.5b`).
pub fn short_name(reader: &str) -> String {
    reader
        .trim_end_matches("-gguf")
        .trim_end_matches("-instruct")
        .to_string()
}

/// `systems` (name, config file relative to `root`) for every reader of `args`, each
/// [`scaled`] to `args.scale`: [`QUICK_QUESTIONS`] questions and the quick recipes of
/// trained re-rankers ([`quick_models`]) at the quick scale, `questions` at the default
/// scale, `full` at the paper scale; in reader-then-system order.
pub fn study_configs(
    root: &Path,
    systems: &[(&str, &str)],
    args: &StudyArgs,
    questions: usize,
    full: FullScale,
) -> Result<Vec<StudyConfig>> {
    let mut out = Vec::new();
    for reader in &args.readers {
        for (system, file) in systems {
            let c = PipelineConfig::from_file(&root.join(file))?;
            let n = match (args.scale, full) {
                (Scale::Quick, _) => QUICK_QUESTIONS,
                (Scale::Default, _) => questions,
                (Scale::Paper, FullScale::ConfigLimit) => c.questions.limit,
                (Scale::Paper, FullScale::All) => 0,
            };
            let mut config = scaled(c, Some(n), Some(reader));
            if args.scale == Scale::Quick {
                config = quick_models(config);
            }
            out.push(StudyConfig {
                reader: reader.clone(),
                system: system.to_string(),
                config,
            });
        }
    }
    Ok(out)
}

/// `config` with every trained re-ranker (`trained:<recipe>`) replaced by its quick
/// recipe (`trained:<recipe>-quick`, [`super::systems::cross_recipe_at`]).
pub fn quick_models(mut config: PipelineConfig) -> PipelineConfig {
    if let Some(r) = config.rerank.as_mut() {
        if r.model.starts_with(super::config::TRAINED_PREFIX) && !r.model.ends_with("-quick") {
            r.model.push_str("-quick");
        }
    }
    config
}

/// Open `data/results/<name>/` for a study (`<name>-quick` / `-paper` at those scales,
/// [`Scale::result_name`]): its resolved config is the binary's `args`,
/// every config by `<reader>/<system>` and the executable's sha256 as `program_sha256`
/// (the key `grade` checks, as in every other binary's config). `None` when the
/// result is fresh and `force` is false (the summary file is printed instead).
pub fn start_study(
    name: &str,
    scale: Scale,
    args: &impl Serialize,
    configs: &[StudyConfig],
    force: bool,
    summary_file: &str,
) -> Result<Option<Experiment>> {
    let resolved = serde_json::json!({
        "args": args,
        "configs": configs
            .iter()
            .map(|c| (format!("{}/{}", short_name(&c.reader), c.system), &c.config))
            .collect::<BTreeMap<_, _>>(),
        "program_sha256": executable_sha256()?,
    });
    Experiment::start(&scale.result_name(name), &resolved, force, summary_file)
}

/// Run every config on `pool`'s models, writing each run to `out`'s
/// `<reader>/<system>/` and printing its summary; `each` sees every run as it finishes.
pub fn run_study(
    pool: &mut ModelPool,
    configs: Vec<StudyConfig>,
    out: &ResultDir,
    mut each: impl FnMut(&StudyConfig, &PipelineRun) -> Result<()>,
) -> Result<StudyRuns> {
    let mut runs = StudyRuns::new();
    for c in configs {
        let short = short_name(&c.reader);
        println!(
            "== {short} / {}: {} questions (load {})",
            c.system,
            c.config.questions.limit,
            load_average()
        );
        let run = run_config(pool, c.config.clone())?;
        run.write(&out.path(&format!("{short}/{}", c.system)))?;
        println!("{}", run.summary().to_table().to_markdown());
        each(&c, &run)?;
        runs.entry(c.reader).or_default().insert(c.system, run);
    }
    Ok(runs)
}

/// Questions per run of a study (the first run's; every run has the same questions).
pub fn question_count(runs: &StudyRuns) -> usize {
    runs.values()
        .next()
        .and_then(|m| m.values().next())
        .map_or(0, |r| r.records.len())
}

/// An empty table of paired tests: reader, metric, system, baseline, then
/// [`significance::Comparison::COLUMNS`].
pub fn significance_table() -> Table {
    Table::new(
        ["reader", "metric", "system", "baseline"]
            .into_iter()
            .map(String::from)
            .chain(
                significance::Comparison::COLUMNS
                    .iter()
                    .map(|s| s.to_string()),
            ),
    )
}

/// Paired tests of `system` against `baseline` on EM and F1 per question (two rows of
/// [`significance_table`]), `trials` randomisation / bootstrap trials, `seed`.
#[allow(clippy::too_many_arguments)]
pub fn push_comparisons(
    table: &mut Table,
    reader: &str,
    (system, run): (&str, &PipelineRun),
    (baseline, base): (&str, &PipelineRun),
    trials: usize,
    seed: u64,
) -> Result<()> {
    for metric in ["em", "f1"] {
        let c = significance::compare(
            &run.per_query(metric)?,
            &base.per_query(metric)?,
            trials,
            seed,
        )?;
        let mut row = vec![
            short_name(reader),
            metric.to_string(),
            system.to_string(),
            baseline.to_string(),
        ];
        row.extend(c.cells());
        table.push(row)?;
    }
    Ok(())
}

/// The first columns of a study's details table: abstentions counted apart.
pub const ANSWERED_COLUMNS: [&str; 6] = [
    "system",
    "questions",
    "answered",
    "abstained",
    "EM (answered)",
    "F1 (answered)",
];

/// The [`ANSWERED_COLUMNS`] cells of one run.
pub fn answered_cells(label: &str, s: &Summary) -> Vec<String> {
    let o = |x: Option<f64>| x.map_or("–".into(), |v| format!("{v:.2}"));
    vec![
        label.to_string(),
        s.questions.to_string(),
        s.answered.to_string(),
        s.abstained.to_string(),
        o(s.em_answered),
        o(s.f1_answered),
    ]
}

/// Write a study's outputs and finish its folder: each `(file, table)` of `csv` as CSV,
/// each `(file, text)` of `text`, print `printed` and the load, and record the question
/// count, the readers and the load in the manifest.
pub fn finish_study(
    exp: Experiment,
    csv: &[(&str, &Table)],
    text: &[(&str, &str)],
    printed: &str,
    questions: usize,
    readers: &[String],
) -> Result<()> {
    for (file, table) in csv {
        table.write_csv(&exp.out.path(file))?;
    }
    for (file, body) in text {
        let p = exp.out.path(file);
        std::fs::write(&p, body).map_err(|e| crate::Error::io(&p, e))?;
    }
    println!("{printed}");
    println!("load: {}", load_average());
    exp.finish(
        serde_json::json!({"questions": questions, "readers": readers, "load": load_average()}),
    )?;
    Ok(())
}

/// GGUF models loaded once, by asset name.
#[derive(Debug, Default)]
pub struct ModelPool {
    models: BTreeMap<String, SharedLlm>,
}

impl ModelPool {
    /// The model of asset `name`, loaded on first use.
    pub fn get(&mut self, name: &str) -> Result<SharedLlm> {
        if let Some(m) = self.models.get(name) {
            return Ok(m.clone());
        }
        let m = SharedLlm::new(Llm::from_asset(name, &LoadOptions::default())?);
        self.models.insert(name.to_string(), m.clone());
        Ok(m)
    }

    /// Models loaded so far.
    pub fn loaded(&self) -> Vec<String> {
        self.models.keys().cloned().collect()
    }
}

/// `config` with `questions.limit` set to `questions` (`Some(0)`: every question; `None`:
/// as the file says) and `reader.model` set to `reader` (`None`: as the file says).
pub fn scaled(
    mut config: PipelineConfig,
    questions: Option<usize>,
    reader: Option<&str>,
) -> PipelineConfig {
    if let Some(n) = questions {
        config.questions.limit = n;
    }
    if let Some(r) = reader {
        config.reader.model = r.to_string();
    }
    config
}

/// Build `config`'s pipeline, its generative reader on `pool`'s copy of `reader.model`
/// and its query transform (on the same copy), and run every question.
pub fn run_config(pool: &mut ModelPool, config: PipelineConfig) -> Result<PipelineRun> {
    let pipeline = Pipeline::build(config)?;
    run_pipeline(pool, &pipeline)
}

/// [`run_config`] for an already built pipeline.
pub fn run_pipeline(pool: &mut ModelPool, pipeline: &Pipeline) -> Result<PipelineRun> {
    let llm = pool.get(&pipeline.config().reader.model)?;
    let mut reader = generative_reader_on(pipeline, llm)?;
    let mut transform = transform_for(pipeline, reader.llm())?;
    pipeline.run(
        &mut reader,
        transform.as_mut().map(|t| t as &mut dyn QueryTransform),
    )
}

/// A number of ours beside the report's, for [`side_by_side`].
#[derive(Debug, Clone, PartialEq)]
pub struct Compared {
    /// Row label (system).
    pub system: String,
    /// Column label (metric).
    pub metric: String,
    /// Our value.
    pub ours: Option<f64>,
    /// The report's value.
    pub report: Option<f64>,
}

/// One row per system, a pair of columns (`<metric>` and `<metric> (report)`) per
/// metric, in first-seen order; `decimals` per metric (default 2).
pub fn side_by_side(rows: &[Compared], decimals: &BTreeMap<&str, usize>, caption: &str) -> Table {
    let mut systems: Vec<&str> = Vec::new();
    let mut metrics: Vec<&str> = Vec::new();
    for r in rows {
        if !systems.contains(&r.system.as_str()) {
            systems.push(&r.system);
        }
        if !metrics.contains(&r.metric.as_str()) {
            metrics.push(&r.metric);
        }
    }
    let mut header = vec!["system".to_string()];
    for m in &metrics {
        header.push(m.to_string());
        header.push(format!("{m} (report)"));
    }
    let mut t = Table::new(header).caption(caption);
    let f = |x: Option<f64>, d: usize| x.map_or("–".to_string(), |v| format!("{v:.d$}"));
    for s in &systems {
        let mut row = vec![s.to_string()];
        for m in &metrics {
            let d = decimals.get(m).copied().unwrap_or(2);
            let cell = rows.iter().find(|r| r.system == *s && r.metric == *m);
            row.push(f(cell.and_then(|c| c.ours), d));
            row.push(f(cell.and_then(|c| c.report), d));
        }
        t.push(row).expect("one cell per column");
    }
    t
}

/// `/proc/loadavg`'s first three numbers (the load the timings were measured under).
pub use crate::machine::load_average;

#[cfg(test)]
mod tests {
    use super::*;

    fn args(paper: bool, readers: &[&str]) -> StudyArgs {
        StudyArgs {
            scale: if paper { Scale::Paper } else { Scale::Default },
            readers: readers.iter().map(|r| r.to_string()).collect(),
            trials: 10,
            seed: 1,
            force: false,
        }
    }

    #[test]
    fn study_configs_scale_each_reader_and_system() {
        let root = crate::paths::project_root().unwrap();
        let systems = [
            ("naive", "configs/report004_naive.toml"),
            ("enhanced", "configs/report004_enhanced.toml"),
        ];
        let a = args(false, &["r-a", "r-b"]);
        let c = study_configs(&root, &systems, &a, 7, FullScale::All).unwrap();
        let got: Vec<(&str, &str, usize, &str)> = c
            .iter()
            .map(|c| {
                let m = c.config.reader.model.as_str();
                (
                    c.reader.as_str(),
                    c.system.as_str(),
                    c.config.questions.limit,
                    m,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("r-a", "naive", 7, "r-a"),
                ("r-a", "enhanced", 7, "r-a"),
                ("r-b", "naive", 7, "r-b"),
                ("r-b", "enhanced", 7, "r-b"),
            ]
        );
        // --full: every question, or the file's own limit.
        let full = args(true, &["r"]);
        let all = study_configs(&root, &systems, &full, 7, FullScale::All).unwrap();
        assert!(all.iter().all(|c| c.config.questions.limit == 0));
        let own = PipelineConfig::from_file(&root.join(systems[0].1)).unwrap();
        let limit = study_configs(&root, &systems[..1], &full, 7, FullScale::ConfigLimit).unwrap();
        assert_eq!(limit[0].config.questions.limit, own.questions.limit);
        // Quick: a handful of questions, the quick recipe of a trained re-ranker.
        let mut q = args(false, &["r"]);
        q.scale = Scale::Quick;
        let quick = study_configs(&root, &systems, &q, 7, FullScale::All).unwrap();
        assert!(quick
            .iter()
            .all(|c| c.config.questions.limit == QUICK_QUESTIONS));
        let enhanced = quick[1].config.rerank.as_ref().unwrap();
        assert_eq!(enhanced.model, "trained:minilm-ce-quick");
        assert!(quick[0].config.rerank.is_none());
        // A missing config file is an error naming it.
        let err = study_configs(&root, &[("x", "configs/nope.toml")], &a, 1, FullScale::All)
            .unwrap_err()
            .to_string();
        assert!(err.contains("nope.toml"), "{err}");
    }

    #[test]
    fn short_names_and_force_stays_out_of_the_resolved_args() {
        assert_eq!(short_name(MAIN_READER), "qwen2.5-coder-1.5b");
        assert_eq!(short_name("smollm2-135m-instruct-gguf"), "smollm2-135m");
        let mut a = args(false, &["r"]);
        a.force = true;
        let v = serde_json::to_value(&a).unwrap();
        assert!(v.get("force").is_none());
        assert_eq!(v["readers"], serde_json::json!(["r"]));
    }
}
