//! What the reproductions of the LLM-read reports share (feature `llm`): reports 001, 002
//! and 004 ([`crate::study::report001`], [`crate::study::report002`],
//! [`crate::study::report004`]).
//!
//! - their parameters ([`ReproParams`]: scale, question count, readers, systems as config
//!   files, test trials and seed) and, checked, the [`Study`](super::Study) of each report
//!   ([`ReproStudy`]);
//! - its configs at that scale ([`ReproValid::configs`]) and resolved `config.json`
//!   ([`ReproValid::resolved`]);
//! - the run of every config on one model pool ([`run_study`] → [`StudyRuns`]), with the
//!   trained models at the study's scale;
//! - the paired tests ([`QaComparisons`], with Holm's correction and the detectable
//!   difference; [`intervals`]), the abstention columns ([`ANSWERED_COLUMNS`],
//!   [`answered_cells`]), our numbers beside a report's ([`side_by_side`]) and the written
//!   files ([`write_outputs`]).

use crate::display::Table;
use crate::env::{Env, Outputs, Resolved, Scale};
use crate::evaluate::answer_match::AnswerMatch;
use crate::evaluate::significance;
use crate::pipeline::study::{run_config_journaled, scaled, ModelPool};
use crate::pipeline::trace::Summary;
use crate::pipeline::{PipelineConfig, PipelineRun};
use crate::results::ResultDir;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The reader every reproduction uses unless `--reader` says otherwise.
pub const MAIN_READER: &str = "qwen2.5-coder-1.5b-instruct-gguf";

/// Questions per config at the quick scale.
pub const QUICK_QUESTIONS: usize = 5;

/// One system of a reproduction: a row of the report's table and the pipeline config
/// that runs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigSystem {
    /// The row's name (`dense`, `fusion`, …).
    pub name: String,
    /// Its pipeline config (TOML), relative to the project root.
    pub config: String,
    /// A `[method]` that replaces the config's (`None`: the config as written). The
    /// config's `name` then gets `-<system name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<crate::method::MethodSpec>,
}

impl ConfigSystem {
    /// `name` run by the config file `config`.
    pub fn new(name: &str, config: &str) -> Self {
        ConfigSystem {
            name: name.into(),
            config: config.into(),
            method: None,
        }
    }
}

/// The parameters every reproduction of an LLM-read report shares (reports 001, 002
/// and 004: [`crate::study::report001`] and the others).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReproParams {
    /// Sizes; part of the result's name.
    pub scale: Scale,
    /// Questions per config: a seeded sample of this many (0: every question); `None`:
    /// the config file's own `questions.limit` (the report's count).
    pub questions: Option<usize>,
    /// Reader model assets; one set of systems each.
    pub readers: Vec<String>,
    /// The systems, in table order.
    pub systems: Vec<ConfigSystem>,
    /// Trials of the randomisation and bootstrap tests.
    pub trials: usize,
    /// Seed of those tests.
    pub seed: u64,
}

impl ReproParams {
    /// `systems` read by [`MAIN_READER`] at `scale`: [`QUICK_QUESTIONS`] questions at the
    /// quick scale, `default_questions` at the default scale, `paper` at the paper scale;
    /// 10,000 test trials, seed 42.
    pub fn at_scale(
        scale: Scale,
        systems: Vec<ConfigSystem>,
        default_questions: usize,
        paper: Option<usize>,
    ) -> Self {
        ReproParams {
            scale,
            questions: match scale {
                Scale::Quick => Some(QUICK_QUESTIONS),
                Scale::Default => Some(default_questions),
                Scale::Paper => paper,
            },
            readers: vec![MAIN_READER.to_string()],
            systems,
            trials: 10_000,
            seed: 42,
        }
    }

    /// Check the values: at least one reader and one system, system names unique and
    /// not empty, at least one test trial.
    pub fn check(self) -> Result<ReproValid> {
        if self.readers.is_empty() || self.readers.iter().any(|r| r.trim().is_empty()) {
            return Err(Error::param(
                "readers",
                "at least one reader asset, none empty",
            ));
        }
        if self.systems.is_empty() {
            return Err(Error::param("systems", "no system"));
        }
        for (i, s) in self.systems.iter().enumerate() {
            if s.name.trim().is_empty() || s.config.trim().is_empty() {
                return Err(Error::param(
                    "systems",
                    format!("system {} has an empty name or config", i + 1),
                ));
            }
            if self.systems[..i].iter().any(|o| o.name == s.name) {
                return Err(Error::param(
                    "systems",
                    format!("system `{}` is listed twice", s.name),
                ));
            }
        }
        if self.trials == 0 {
            return Err(Error::param("trials", "at least 1"));
        }
        Ok(ReproValid(self))
    }
}

crate::env::checked_params!(ReproValid, ReproParams, "Checked [`ReproParams`].");

impl ReproValid {
    /// Every system's config for every reader (reader-then-system order), each
    /// [`scaled`] to the question count; its trained models are resolved at the study's
    /// scale when it runs ([`StudyConfig::scale`]).
    pub fn configs(&self, env: &Env) -> Result<Vec<StudyConfig>> {
        let mut out = Vec::new();
        for reader in &self.readers {
            for s in &self.systems {
                let mut config = scaled(
                    PipelineConfig::from_file(&env.resolve(&s.config))?,
                    self.questions,
                    Some(reader),
                );
                if let Some(m) = &s.method {
                    config.method = Some(m.clone());
                    config.name = format!("{}-{}", config.name, s.name);
                    config.validate()?;
                }
                out.push(StudyConfig {
                    reader: reader.clone(),
                    system: s.name.clone(),
                    config,
                    scale: self.scale,
                });
            }
        }
        Ok(out)
    }

    /// What `config.json` records: the parameters, every resolved pipeline config by
    /// `<reader>/<system>`, the cache keys of the trained models each reads with at the
    /// study's scale ([`config_keys`](crate::pipeline::trained::config_keys)), the contents
    /// of the files each reads
    /// ([`run_key::inputs`](crate::pipeline::run_key::inputs): prompts, questions, corpus, models,
    /// the judge's calibration), and the program's sha256. A result whose record differs
    /// is not reused.
    pub fn resolved(&self, env: &Env) -> Result<Resolved<'_, ReproParams>> {
        let mut configs = BTreeMap::new();
        let mut inputs = BTreeMap::new();
        let mut trained = BTreeMap::new();
        for c in self.configs(env)? {
            let key = format!("{}/{}", short_name(&c.reader), c.system);
            inputs.insert(key.clone(), crate::pipeline::run_key::inputs(&c.config)?);
            let models = crate::pipeline::trained::config_keys(env, c.scale, &c.config)?;
            if !models.is_empty() {
                trained.insert(key.clone(), models);
            }
            configs.insert(key, c.config);
        }
        Resolved::new(
            env,
            &self.0,
            [],
            serde_json::json!({ "configs": configs, "inputs": inputs, "trained": trained }),
        )
    }
}

/// One report's reproduction, checked: the [`Study`](super::Study) of reports 001, 002
/// and 004, which share [`ReproValid`] and differ in their name, the file they print and
/// how they turn the runs into tables (`run`).
pub struct ReproStudy<O> {
    /// The checked parameters.
    pub valid: ReproValid,
    name: String,
    summary_file: &'static str,
    run: fn(&Env, &ReproValid, &mut ModelPool) -> Result<O>,
}

impl<O: Outputs> ReproStudy<O> {
    /// The report `name` (its result folder), printing `summary_file` when fresh, run by
    /// `run` on a fresh model pool.
    pub fn new(
        valid: ReproValid,
        name: impl Into<String>,
        summary_file: &'static str,
        run: fn(&Env, &ReproValid, &mut ModelPool) -> Result<O>,
    ) -> Self {
        ReproStudy {
            valid,
            name: name.into(),
            summary_file,
            run,
        }
    }

    /// Run on `pool`'s models (a notebook keeps its pool between cells).
    pub fn run_on(&self, env: &Env, pool: &mut ModelPool) -> Result<O> {
        (self.run)(env, &self.valid, pool)
    }
}

impl<O: Outputs> super::Study for ReproStudy<O> {
    type Output = O;

    fn name(&self) -> String {
        self.name.clone()
    }

    fn scale(&self) -> Scale {
        self.valid.scale
    }

    fn summary_file(&self) -> &'static str {
        self.summary_file
    }

    fn resolved(&self, env: &Env) -> Result<impl Serialize + '_> {
        self.valid.resolved(env)
    }

    fn run(&self, env: &Env) -> Result<O> {
        self.run_on(env, &mut ModelPool::default())
    }
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
    /// The scale whose recipe sizes its trained models are resolved at.
    pub scale: Scale,
}

/// One finished run of a study.
#[derive(Debug, Clone)]
pub struct StudyRun {
    /// Reader asset.
    pub reader: String,
    /// System name.
    pub system: String,
    /// The run.
    pub run: PipelineRun,
    /// Its journal, kept until the study's tables are made
    /// ([`StudyRuns::remove_journals`]).
    pub journal: Option<std::path::PathBuf>,
    /// Questions whose answers were taken from the journal of an earlier process (a study
    /// that was killed and started again); their seconds are the earlier process's.
    pub resumed: usize,
}

/// Every run of a study, in config order (reader, then system).
#[derive(Debug, Clone, Default)]
pub struct StudyRuns(pub Vec<StudyRun>);

impl StudyRuns {
    /// The run of `system` read by `reader`.
    pub fn get(&self, reader: &str, system: &str) -> Option<&PipelineRun> {
        self.0
            .iter()
            .find(|r| r.reader == reader && r.system == system)
            .map(|r| &r.run)
    }

    /// The readers, in run order.
    pub fn readers(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for r in &self.0 {
            if !out.contains(&r.reader.as_str()) {
                out.push(&r.reader);
            }
        }
        out
    }

    /// Questions per run (the first run's; every run has the same questions).
    pub fn question_count(&self) -> usize {
        self.0.first().map_or(0, |r| r.run.records.len())
    }

    /// Paired tests ([`QaComparisons::push`]) of every system against `baseline`, per
    /// reader; a reader without a `baseline` run has no rows.
    pub fn against_baseline(
        &self,
        baseline: &str,
        trials: usize,
        seed: u64,
    ) -> Result<QaComparisons> {
        let mut out = QaComparisons::default();
        for reader in self.readers() {
            let Some(base) = self.get(reader, baseline) else {
                continue;
            };
            for r in self
                .0
                .iter()
                .filter(|r| r.reader == reader && r.system != baseline)
            {
                out.push(reader, (&r.system, &r.run), (baseline, base), trials, seed)?;
            }
        }
        Ok(out)
    }

    /// Miss attribution: questions per [`Outcome`](crate::pipeline::trace::Outcome) for every run
    /// (reader, system, then one column per outcome).
    pub fn outcomes(&self) -> Result<Table> {
        let mut t = Table::new(
            ["reader", "system", "questions"]
                .into_iter()
                .map(String::from)
                .chain(crate::pipeline::trace::Outcome::ALL.iter().map(|o| o.name().to_string())),
        )
        .caption(
            "What became of each question: correct (exact match); form-miss (the answer contains a gold answer but is not an exact match); reader-miss (a passage given to the reader holds a gold answer, or there was none to judge, as closed-book); retrieval-miss (no passage given to the reader holds one); not-attributable (a wrong answer to a yes/no question: whether a passage holds the word says nothing about retrieval); abstained",
        );
        for r in &self.0 {
            let mut row = vec![
                short_name(&r.reader),
                r.system.clone(),
                r.run.records.len().to_string(),
            ];
            row.extend(r.run.outcomes().iter().map(|n| n.to_string()));
            t.push(row)?;
        }
        Ok(t)
    }

    /// Remove every run's journal: call once the study's tables are made (until then a
    /// killed or failed study continues from its journals).
    pub fn remove_journals(&self) -> Result<()> {
        for p in self.0.iter().filter_map(|r| r.journal.as_ref()) {
            match std::fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(p, e)),
            }
        }
        Ok(())
    }

    /// Write every run to `out`'s `<reader>/<system>/`.
    pub fn write(&self, out: &ResultDir) -> Result<()> {
        for r in &self.0 {
            r.run
                .write(&out.path(&format!("{}/{}", short_name(&r.reader), r.system)))?;
        }
        Ok(())
    }
}

/// A reader asset's short name for labels and folders (`qwen2.5-coder-1.5b`).
pub fn short_name(reader: &str) -> String {
    reader
        .trim_end_matches("-gguf")
        .trim_end_matches("-instruct")
        .to_string()
}

/// Run every config on `pool`'s models, printing each run's summary as it finishes.
///
/// Each run keeps a journal,
/// `data/results/.journals/<reader>-<config name>-<key>.journal.jsonl`, keyed (and named, by
/// the first 12 hex digits of the key) by the config (question count included), the
/// program's sha256, the contents of its inputs and the scale: a study that is killed or
/// fails continues where it stopped when started again. The journals stay until the caller
/// has made its tables ([`StudyRuns::remove_journals`]).
pub fn run_study(pool: &mut ModelPool, configs: Vec<StudyConfig>) -> Result<StudyRuns> {
    let env = Env::project()?;
    let program = crate::results::executable_sha256()?;
    let mut runs = StudyRuns::default();
    for c in configs {
        println!(
            "== {} / {}: {} questions (load {})",
            short_name(&c.reader),
            c.system,
            c.config.questions.limit,
            load_average()
        );
        let mut key = crate::pipeline::RunKey::new(&c.config, &program)?;
        key.inputs.insert("scale".into(), c.scale.to_string());
        let digest = key.digest();
        let path = env.results.join(".journals").join(format!(
            "{}-{}-{}.journal.jsonl",
            short_name(&c.reader),
            c.config.name,
            &digest[..12]
        ));
        let mut journal = crate::pipeline::trace::Journal::open_for(&path, &key)?;
        let resumed = journal.done().len();
        if let Some(why) = journal.discarded() {
            println!("not continuing {} ({why}): starting over", path.display());
        } else if !journal.done().is_empty() {
            println!(
                "continuing after {} finished questions ({})",
                journal.done().len(),
                path.display()
            );
        }
        let run = run_config_journaled(pool, c.config, c.scale, Some(&mut journal))?;
        println!("{}", run.summary().to_table().to_markdown());
        runs.0.push(StudyRun {
            reader: c.reader,
            system: c.system,
            run,
            journal: Some(path),
            resumed,
        });
    }
    Ok(runs)
}

/// The metrics of the QA studies' paired tests and intervals: EM, F1, Match (the
/// prediction contains a gold answer, 0 or 1) and token recall, per question.
pub const QA_METRICS: [&str; 4] = ["em", "f1", "match", "recall"];

/// [`QA_METRICS`], and `judge` when every run of `runs` was judged.
pub fn metrics_of(runs: &[&PipelineRun]) -> Vec<&'static str> {
    let mut m = QA_METRICS.to_vec();
    if runs.iter().all(|r| r.judged()) {
        m.push("judge");
    }
    m
}

/// Whether `run` is a control: it retrieves, and every retriever is the oracle (the gold
/// passage) or random passages. A control bounds what retrieval can add; its comparison
/// with a baseline is not one of the study's real comparisons.
pub fn is_control(run: &PipelineRun) -> bool {
    let r = &run.config.retrieval.retrievers;
    !r.is_empty() && r.iter().all(|r| r.is_control())
}

/// Paired tests of a QA study, collected comparison by comparison, written as one table
/// ([`QaComparisons::table`]) with the Holm–Bonferroni correction applied per family and
/// the minimum detectable difference of each comparison. Comparisons that involve a
/// control ([`is_control`]) are a family of their own, so they do not make the correction
/// of the real comparisons more conservative.
#[derive(Debug, Default)]
pub struct QaComparisons {
    rows: Vec<QaComparison>,
}

#[derive(Debug)]
struct QaComparison {
    reader: String,
    metric: String,
    system: String,
    baseline: String,
    comparison: significance::Comparison,
    /// `None` when the paired differences have no spread (undefined).
    mde: Option<f64>,
    /// The system or the baseline is a control ([`is_control`]).
    control: bool,
}

impl QaComparisons {
    /// The columns of [`table`](Self::table): reader, metric, system, baseline, `family`
    /// (`real`, or `control` when the system or the baseline is a control),
    /// [`significance::Comparison::COLUMNS`], then `p_randomization_holm` (the
    /// randomisation p-value adjusted over its family), `mark_holm` (`†` p̃ < 0.05, `††`
    /// p̃ < 0.01) and `mde_80` (the difference detectable at α = 0.05 with power 0.8; `–`
    /// when the paired differences are all the same, e.g. identical systems).
    pub fn columns() -> Vec<String> {
        ["reader", "metric", "system", "baseline", "family"]
            .into_iter()
            .chain(significance::Comparison::COLUMNS)
            .chain(["p_randomization_holm", "mark_holm", "mde_80"])
            .map(String::from)
            .collect()
    }

    /// Paired tests of `system` against `baseline` on every metric of [`QA_METRICS`],
    /// `trials` randomisation / bootstrap trials, `seed`.
    pub fn push(
        &mut self,
        reader: &str,
        (system, run): (&str, &PipelineRun),
        (baseline, base): (&str, &PipelineRun),
        trials: usize,
        seed: u64,
    ) -> Result<()> {
        for metric in metrics_of(&[run, base]) {
            let (a, b) = (run.per_query(metric)?, base.per_query(metric)?);
            self.rows.push(QaComparison {
                reader: short_name(reader),
                metric: metric.to_string(),
                system: system.to_string(),
                baseline: baseline.to_string(),
                comparison: significance::compare(&a, &b, trials, seed)?,
                mde: significance::min_detectable_difference(&a, &b, 0.05, 0.8)?,
                control: is_control(run) || is_control(base),
            });
        }
        Ok(())
    }

    /// The table. A **family** is every real comparison of one reader on one metric (all
    /// the systems compared in the table on, say, EM), and apart from it every comparison
    /// of that reader and metric that involves a control ([`is_control`]); Holm's
    /// adjustment runs over each family.
    pub fn table(&self) -> Result<Table> {
        let mut holm = vec![f64::NAN; self.rows.len()];
        let mut families: BTreeMap<(&str, &str, bool), Vec<usize>> = BTreeMap::new();
        for (i, r) in self.rows.iter().enumerate() {
            families
                .entry((r.reader.as_str(), r.metric.as_str(), r.control))
                .or_default()
                .push(i);
        }
        for members in families.values() {
            let p: Vec<f64> = members
                .iter()
                .map(|&i| self.rows[i].comparison.randomization.p_value)
                .collect();
            for (&i, adj) in members.iter().zip(significance::holm(&p)?) {
                holm[i] = adj;
            }
        }
        let mut t = Table::new(Self::columns());
        for (r, p) in self.rows.iter().zip(holm) {
            let mut row = vec![
                r.reader.clone(),
                r.metric.clone(),
                r.system.clone(),
                r.baseline.clone(),
                if r.control { "control" } else { "real" }.to_string(),
            ];
            row.extend(r.comparison.cells());
            row.extend([
                format!("{p:.4}"),
                significance::marker(p).to_string(),
                r.mde.map_or("–".to_string(), |m| format!("{m:.4}")),
            ]);
            t.push(row)?;
        }
        Ok(t)
    }

    /// Whether no comparison was pushed.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// One line for under a significance table: the families, the correction and what the
/// run's size could detect (the range of `mde_80` per metric).
pub fn significance_note(c: &QaComparisons) -> String {
    let mut by_metric: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for r in &c.rows {
        let Some(mde) = r.mde else { continue };
        let e = by_metric.entry(&r.metric).or_insert((f64::INFINITY, 0.0));
        e.0 = e.0.min(mde);
        e.1 = e.1.max(mde);
    }
    let ranges: Vec<String> = QA_METRICS
        .iter()
        .chain(&["judge"])
        .filter_map(|m| {
            by_metric
                .get(m)
                .map(|(lo, hi)| format!("{m} {lo:.3}–{hi:.3}"))
        })
        .collect();
    format!(
        "Marks: `mark_holm` is the randomisation test's p-value after Holm–Bonferroni over each family (one reader, one metric, every real system compared; the controls, oracle or random retrieval, `family` = control, form a family of their own); the unadjusted p-values are beside it. \
         Smallest difference detectable at α = 0.05 with power 0.8 (`mde_80`, on the 0–1 scale; – where the paired differences are all the same): {}",
        if ranges.is_empty() { "–".to_string() } else { ranges.join("; ") }
    )
}

/// 95% bootstrap intervals of every run's mean on each metric of [`QA_METRICS`]
/// (`significance::mean_ci95`, `trials` resamples, `seed`): columns reader, system,
/// metric, mean, ci95_lo, ci95_hi, questions (0–1 scale).
pub fn intervals(runs: &StudyRuns, trials: usize, seed: u64) -> Result<Table> {
    let mut t = Table::new([
        "reader",
        "system",
        "metric",
        "mean",
        "ci95_lo",
        "ci95_hi",
        "questions",
    ])
    .caption(format!(
        "95% percentile bootstrap intervals of each system's mean ({trials} resamples, seed {seed})"
    ));
    for r in &runs.0 {
        for metric in metrics_of(&[&r.run]) {
            let v: Vec<f64> = r.run.per_query(metric)?.into_values().collect();
            let (lo, hi) = significance::mean_ci95(&v, trials, seed)?;
            t.push([
                short_name(&r.reader),
                r.system.clone(),
                metric.to_string(),
                format!("{:.4}", v.iter().sum::<f64>() / v.len() as f64),
                format!("{lo:.4}"),
                format!("{hi:.4}"),
                v.len().to_string(),
            ])?;
        }
    }
    Ok(t)
}

/// The first columns of a study's details table: abstentions counted apart, then the
/// lenient scores of every question: Match (the prediction contains a gold answer under
/// the run's answer-match rule, named in `Match rule`), token recall, the share the LLM
/// judge called correct (P(Yes) above the cut in `judge cut`) and its mean P(Yes), in
/// percent (`–` when the run was not judged), and the judge's kappa against Match over the
/// answered questions.
pub const ANSWERED_COLUMNS: [&str; 13] = [
    "system",
    "questions",
    "answered",
    "abstained",
    "EM (answered)",
    "F1 (answered)",
    "Match rule",
    "Match (%)",
    "token recall (%)",
    "LLM judge (%)",
    "judge cut",
    "judge mean P(Yes) (%)",
    "judge kappa (answered, vs Match)",
];

/// The [`ANSWERED_COLUMNS`] cells of one run; `rule` is the run's answer-match rule.
pub fn answered_cells(label: &str, s: &Summary, rule: AnswerMatch) -> Vec<String> {
    let o = |x: Option<f64>| x.map_or("–".into(), |v| format!("{v:.2}"));
    vec![
        label.to_string(),
        s.questions.to_string(),
        s.answered.to_string(),
        s.abstained.to_string(),
        o(s.em_answered),
        o(s.f1_answered),
        rule.name().to_string(),
        format!("{:.2}", s.answer_found),
        format!("{:.2}", s.recall),
        o(s.judge),
        s.judge_cut.map_or("–".into(), |v| format!("{v:.3}")),
        o(s.judge_mean_p_yes),
        s.judge_kappa_answered
            .map_or("–".into(), |v| format!("{v:.3}")),
    ]
}

/// Write a reproduction's files into `out`: every run (`<reader>/<system>/`), each
/// `(file, table)` of `csv` as CSV and each `(file, text)` of `text`.
pub fn write_outputs(
    out: &ResultDir,
    runs: &StudyRuns,
    csv: &[(&str, &Table)],
    text: &[(&str, &str)],
) -> Result<()> {
    runs.write(out)?;
    for (file, table) in csv {
        table.write_csv(&out.path(file))?;
    }
    for (file, body) in text {
        let p = out.path(file);
        std::fs::write(&p, body).map_err(|e| crate::Error::io(&p, e))?;
    }
    Ok(())
}

/// The numbers a reproduction's `manifest.json` records: questions per run, readers,
/// the load at the end.
///
/// `resumed` lists the runs that continued from an earlier process's journal: how many of
/// their questions were answered then, and those questions' seconds (measured then, and
/// not in this process's `total_seconds`).
pub fn manifest_summary(runs: &StudyRuns) -> serde_json::Value {
    let resumed: Vec<serde_json::Value> = runs
        .0
        .iter()
        .filter(|r| r.resumed > 0)
        .map(|r| {
            let seconds: f64 = r
                .run
                .records
                .iter()
                .take(r.resumed)
                .map(|t| t.times.total())
                .sum();
            serde_json::json!({
                "reader": short_name(&r.reader),
                "system": r.system,
                "questions": r.resumed,
                "seconds": (seconds * 100.0).round() / 100.0,
            })
        })
        .collect();
    serde_json::json!({
        "questions": runs.question_count(),
        "readers": runs.readers(),
        "load": load_average(),
        "resumed": resumed,
    })
}

/// A reproduction whose result is one table of ours beside the report's, a details
/// table and paired tests against a baseline (reports 002 and 004).
#[derive(Debug, Clone)]
pub struct ReproResult {
    /// The parameters it ran with.
    pub params: ReproParams,
    /// Every run.
    pub runs: StudyRuns,
    /// Our numbers beside the report's, one row per reader and system.
    pub table: Table,
    /// Abstentions counted apart, and the report's own extra columns.
    pub details: Table,
    /// Paired tests on EM, F1, Match and token recall against the baseline, Holm-adjusted
    /// ([`QaComparisons::table`], its note in the caption).
    pub significance: Table,
    /// 95% bootstrap intervals of each run's means ([`intervals`]).
    pub intervals: Table,
    /// Miss attribution per run ([`StudyRuns::outcomes`]).
    pub outcomes: Table,
    /// What differs from the report.
    pub substitutions: String,
}

impl Outputs for ReproResult {
    /// `table.csv`, `details.csv`, `significance.csv`, `intervals.csv`, `outcomes.csv`,
    /// `table.md` (every
    /// table and the substitutions), `substitutions.md` and every run.
    fn write(&self, out: &ResultDir) -> Result<()> {
        write_outputs(
            out,
            &self.runs,
            &[
                ("table.csv", &self.table),
                ("details.csv", &self.details),
                ("significance.csv", &self.significance),
                ("intervals.csv", &self.intervals),
                ("outcomes.csv", &self.outcomes),
            ],
            &[
                ("table.md", &self.markdown()?),
                ("substitutions.md", &self.substitutions),
            ],
        )
    }

    fn markdown(&self) -> Result<String> {
        Ok(format!(
            "{}\n{}\n{}\n{}\n{}\n{}",
            self.table.to_markdown(),
            self.details.to_markdown(),
            self.outcomes.to_markdown(),
            self.significance.to_markdown(),
            self.intervals.to_markdown(),
            self.substitutions
        ))
    }

    fn summary(&self) -> Result<serde_json::Value> {
        Ok(manifest_summary(&self.runs))
    }
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

    fn params(scale: Scale, readers: &[&str]) -> ReproParams {
        let mut p = ReproParams::at_scale(
            scale,
            vec![
                ConfigSystem::new("naive", "configs/report004_naive.toml"),
                ConfigSystem::new("enhanced", "configs/report004_enhanced.toml"),
            ],
            7,
            Some(0),
        );
        p.readers = readers.iter().map(|r| r.to_string()).collect();
        p
    }

    #[test]
    fn configs_scale_each_reader_and_system() {
        let env = Env::project().unwrap();
        let v = params(Scale::Default, &["r-a", "r-b"]).check().unwrap();
        let c = v.configs(&env).unwrap();
        let got: Vec<(&str, &str, usize, &str)> = c
            .iter()
            .map(|c| {
                (
                    c.reader.as_str(),
                    c.system.as_str(),
                    c.config.questions.limit,
                    c.config.reader.spec.model(),
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
        // Paper: every question (Some(0)), or the file's own limit (None).
        let all = params(Scale::Paper, &["r"])
            .check()
            .unwrap()
            .configs(&env)
            .unwrap();
        assert!(all.iter().all(|c| c.config.questions.limit == 0));
        let mut own = params(Scale::Paper, &["r"]);
        own.questions = None;
        let file = PipelineConfig::from_file(&env.resolve(&own.systems[0].config)).unwrap();
        let limit = own.check().unwrap().configs(&env).unwrap();
        assert_eq!(limit[0].config.questions.limit, file.questions.limit);
        // Quick: a handful of questions; the trained re-ranker keeps its name and is
        // resolved at the quick scale (the scale is a value, not a name suffix).
        let quick = params(Scale::Quick, &["r"])
            .check()
            .unwrap()
            .configs(&env)
            .unwrap();
        assert!(quick
            .iter()
            .all(|c| c.config.questions.limit == QUICK_QUESTIONS));
        assert_eq!(
            quick[1].config.rerank.as_ref().unwrap().model(),
            "trained:minilm-ce"
        );
        assert!(quick.iter().all(|c| c.scale == Scale::Quick));
        assert!(quick[0].config.rerank.is_none());
        // The resolved config names every config by reader and system, with its inputs
        // (a reader that is not a model the workbench knows cannot be keyed).
        let err = v.resolved(&env).unwrap_err().to_string();
        assert!(err.contains("r-a"), "{err}");
        let shipped = params(Scale::Default, &["smollm2-135m-instruct-gguf"])
            .check()
            .unwrap();
        let r = shipped.resolved(&env).unwrap();
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["params"]["questions"], 7);
        assert!(
            j["extra"]["configs"].get("smollm2-135m/enhanced").is_some(),
            "{j}"
        );
        assert!(
            j["extra"]["inputs"]["smollm2-135m/enhanced"]
                .get("rerank.model")
                .is_some(),
            "{j}"
        );
        // The trained cross-encoder's cache key at the study's scale: the quick and
        // default records name different models; the naive system has none.
        let key_at = |scale: Scale| {
            let r = params(scale, &["smollm2-135m-instruct-gguf"])
                .check()
                .unwrap()
                .resolved(&env)
                .map(|r| serde_json::to_value(&r).unwrap())
                .unwrap();
            assert!(
                r["extra"]["trained"].get("smollm2-135m/naive").is_none(),
                "{r}"
            );
            r["extra"]["trained"]["smollm2-135m/enhanced"]["rerank.model"]
                .as_str()
                .unwrap()
                .to_string()
        };
        let quick = crate::train::cross_recipe::CrossRecipe::at_scale("minilm-ce", Scale::Quick)
            .unwrap()
            .key(&env.assets)
            .unwrap();
        assert_eq!(key_at(Scale::Quick), quick);
        assert_ne!(key_at(Scale::Default), quick);
        // A missing config file is an error naming it.
        let mut bad = params(Scale::Default, &["r"]);
        bad.systems = vec![ConfigSystem::new("x", "configs/nope.toml")];
        let err = bad.check().unwrap().configs(&env).unwrap_err().to_string();
        assert!(err.contains("nope.toml"), "{err}");
    }

    #[test]
    fn a_studys_record_follows_the_contents_of_the_files_its_configs_read() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let root = crate::paths::project_root().unwrap();
        std::fs::create_dir_all(d.join("data")).unwrap();
        std::fs::copy(root.join("data/assets.toml"), d.join("data/assets.toml")).unwrap();
        std::fs::create_dir_all(d.join("configs")).unwrap();
        std::fs::write(d.join("prompt.txt"), "{passages}\nQ: {question}\n").unwrap();
        std::fs::write(
            d.join("questions.jsonl"),
            "{\"id\": \"q1\", \"question\": \"Who?\", \"answer\": [\"Ann\"]}\n",
        )
        .unwrap();
        std::fs::write(
            d.join("corpus.jsonl"),
            "{\"id\": \"a\", \"text\": \"Ann.\"}\n",
        )
        .unwrap();
        std::fs::write(
            d.join("configs/x.toml"),
            "name = \"x\"\n[corpus]\npath = \"../corpus.jsonl\"\n\
             [[retrieval.retrievers]]\nkind = \"bm25\"\n\
             [reader]\nmodel = \"smollm2-135m-instruct-gguf\"\nprompt = \"../prompt.txt\"\npassages = 1\n\
             [questions]\npath = \"../questions.jsonl\"\n",
        )
        .unwrap();
        let env = Env::at(d).unwrap();
        let v = ReproParams::at_scale(
            Scale::Default,
            vec![ConfigSystem::new("x", "configs/x.toml")],
            1,
            None,
        )
        .check()
        .unwrap();
        let record = || serde_json::to_value(v.resolved(&env).unwrap()).unwrap();
        let before = record();
        assert_eq!(record(), before, "deterministic");
        let inputs = before["extra"]["inputs"].as_object().unwrap();
        assert_eq!(inputs.len(), 1, "{inputs:?}");
        let first = inputs.values().next().unwrap();
        assert!(first["reader.prompt"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"));
        // The config file is untouched; its prompt and then its questions change.
        std::fs::write(d.join("prompt.txt"), "{passages}\nQuestion: {question}\n").unwrap();
        let after = record();
        assert_ne!(after, before);
        assert_eq!(after["extra"]["configs"], before["extra"]["configs"]);
        std::fs::write(
            d.join("questions.jsonl"),
            "{\"id\": \"q1\", \"question\": \"Who?\", \"answer\": [\"Bob\"]}\n",
        )
        .unwrap();
        assert_ne!(record(), after);
    }

    #[test]
    fn bad_parameters_are_refused_naming_the_field() {
        type Spoil = fn(&mut ReproParams);
        let cases: [(&str, Spoil); 5] = [
            ("readers", |p| p.readers.clear()),
            ("readers", |p| p.readers = vec![" ".into()]),
            ("systems", |p| p.systems.clear()),
            ("systems", |p| p.systems[1].name = "naive".into()),
            ("trials", |p| p.trials = 0),
        ];
        for (field, spoil) in cases {
            let mut p = params(Scale::Default, &["r"]);
            spoil(&mut p);
            let err = p.check().unwrap_err().to_string();
            assert!(err.contains(field), "{field}: {err}");
        }
        assert!(params(Scale::Default, &["r"]).check().is_ok());
    }

    #[test]
    fn short_names() {
        assert_eq!(short_name(MAIN_READER), "qwen2.5-coder-1.5b");
        assert_eq!(short_name("smollm2-135m-instruct-gguf"), "smollm2-135m");
    }
}
