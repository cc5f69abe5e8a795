//! The methods study (feature `llm`): every RAG method of [`crate::method`] on the same
//! questions, corpus, retriever and model, against naive RAG and against closed-book.
//!
//! `configs/studies/methods.toml` lists the data sets (a pipeline config each) and the
//! systems (a `[method]` each). For each data set the study runs every system and writes
//! `data/results/methods-<set>/` (`-quick` at the quick scale):
//!
//! - `table.csv`: EM, F1, Match, judge (in %), abstentions, retrieval calls, prompt and
//!   generated tokens and seconds per question;
//! - `details.csv`: Match split by whether the corpus holds a gold answer at all (any
//!   passage, under the set's answer rule): on the questions it does not hold, retrieval
//!   can only distract, and a method that decides whether to retrieve should not fall below
//!   closed-book; on the others it should gain over both;
//! - `significance.csv`: paired randomisation and bootstrap tests of every system against
//!   `naive` and against `closed-book`, Holm-adjusted over each reader and metric;
//! - `intervals.csv`, `outcomes.csv` (miss attribution over every passage shown at any
//!   step), and every run's traces (each question's steps).

use super::repro::{
    intervals, load_average, run_study, short_name, significance_note, ConfigSystem, QaComparisons,
    ReproParams, ReproResult, ReproStudy, ReproValid, StudyRuns,
};
use super::Env;
use crate::display::Table;
use crate::env::Scale;
use crate::method::MethodSpec;
use crate::pipeline::study::ModelPool;
use crate::pipeline::{Pipeline, PipelineRun};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The study file, relative to the project root.
pub const STUDY_FILE: &str = "configs/studies/methods.toml";

/// The file printed when a fresh result is skipped.
pub const SUMMARY_FILE: &str = "table.md";

/// Questions per data set at the default scale (a seeded sample, seed 42).
pub const DEFAULT_QUESTIONS: usize = 30;

/// The systems every other one is tested against.
pub const BASELINES: [&str; 2] = ["naive", "closed-book"];

/// One data set of the study file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSet {
    /// Its name: the result folder is `methods-<name>`.
    pub name: String,
    /// Its pipeline config, relative to the project root.
    pub config: String,
}

/// One system of the study file: a row of every table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct System {
    /// Its name.
    pub name: String,
    /// The `[method]` it runs.
    pub method: MethodSpec,
}

/// `configs/studies/methods.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyFile {
    /// The data sets.
    pub dataset: Vec<DataSet>,
    /// The systems, in table order.
    pub system: Vec<System>,
}

impl StudyFile {
    /// Read and check `path`: at least one data set and one system, names unique, the
    /// baselines present, every method's parameters valid. Errors name the file.
    pub fn load(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let f: StudyFile =
            toml::from_str(&text).map_err(|e| Error::bad_input(path, e.to_string()))?;
        let bad = |m: String| Err(Error::bad_input(path, m));
        if f.dataset.is_empty() || f.system.is_empty() {
            return bad("needs at least one [[dataset]] and one [[system]]".into());
        }
        let mut seen = BTreeSet::new();
        for d in &f.dataset {
            if !seen.insert(("dataset", d.name.as_str())) {
                return bad(format!("data set `{}` is listed twice", d.name));
            }
        }
        for s in &f.system {
            if !seen.insert(("system", s.name.as_str())) {
                return bad(format!("system `{}` is listed twice", s.name));
            }
            s.method
                .check()
                .map_err(|e| Error::bad_input(path, format!("system `{}`: {e}", s.name)))?;
        }
        for b in BASELINES {
            if !f.system.iter().any(|s| s.name == b) {
                return bad(format!(
                    "no system `{b}`: every system is tested against {}",
                    BASELINES.join(" and ")
                ));
            }
        }
        Ok(f)
    }

    /// The data set `name`, or an error listing them.
    pub fn dataset(&self, name: &str) -> Result<&DataSet> {
        self.dataset.iter().find(|d| d.name == name).ok_or_else(|| {
            Error::param(
                "dataset",
                format!(
                    "no data set `{name}` in {STUDY_FILE} (it has {})",
                    self.dataset
                        .iter()
                        .map(|d| d.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })
    }
}

/// The study's parameters for `dataset` at `scale`: every system of the study file on its
/// config, read by the main reader; 5 questions at the quick scale, [`DEFAULT_QUESTIONS`]
/// at the default scale, 200 at the paper scale; 10,000 test trials, seed 42.
pub fn params(env: &Env, scale: Scale, dataset: &str) -> Result<ReproParams> {
    let f = StudyFile::load(&env.resolve(STUDY_FILE))?;
    let d = f.dataset(dataset)?;
    let systems = f
        .system
        .iter()
        .map(|s| ConfigSystem {
            method: Some(s.method.clone()),
            ..ConfigSystem::new(&s.name, &d.config)
        })
        .collect();
    Ok(ReproParams::at_scale(
        scale,
        systems,
        DEFAULT_QUESTIONS,
        Some(200),
    ))
}

/// `params` checked, as the [`Study`](super::Study) `exp_methods` runs: its result folder
/// is `methods-<dataset>`.
pub fn study(params: ReproParams, dataset: &str) -> Result<ReproStudy<ReproResult>> {
    Ok(ReproStudy::new(
        params.check()?,
        format!("methods-{dataset}"),
        SUMMARY_FILE,
        run,
    ))
}

/// Run every system on `pool`'s models, then the tables.
pub fn run(env: &Env, params: &ReproValid, pool: &mut ModelPool) -> Result<ReproResult> {
    let runs = run_study(pool, params.configs(env)?)?;
    let held = match runs.0.first() {
        Some(r) => corpus_holds(&r.run)?,
        None => BTreeMap::new(),
    };
    tables(params, runs, &held)
}

/// For every question of `run`: whether some passage of its corpus holds one of its gold
/// answers (under the run's answer rule).
pub fn corpus_holds(run: &PipelineRun) -> Result<BTreeMap<String, bool>> {
    let docs = Pipeline::load_corpus(&run.config)?;
    let passages = Pipeline::chunk(&run.config, &docs)?;
    let rule = run.answer_match;
    let prepared: Vec<_> = passages.iter().map(|p| rule.prepare(&p.text)).collect();
    let mut out = BTreeMap::new();
    for r in &run.records {
        let golds = rule.golds(&r.gold_answers)?;
        let mut held = false;
        for p in &prepared {
            if golds.found_in(p)? {
                held = true;
                break;
            }
        }
        out.insert(r.id.clone(), held);
    }
    Ok(out)
}

/// The tables of `runs`; `held` says which questions the corpus can answer
/// ([`corpus_holds`]).
pub fn tables(
    params: &ReproValid,
    runs: StudyRuns,
    held: &BTreeMap<String, bool>,
) -> Result<ReproResult> {
    let n = runs.question_count();
    let mut table = Table::new([
        "system",
        "EM",
        "F1",
        "Match",
        "judge",
        "abstained",
        "retrieval calls/q",
        "prompt tokens/q",
        "generated tokens/q",
        "s/q",
    ])
    .caption(format!(
        "{n} questions (seeded sample, seed 42), every system on the same questions, corpus, retriever and model; EM, F1, Match (a gold answer inside the prediction) and the LLM judge in %; tokens and retrieval calls summed over each question's steps; seconds at load {}",
        load_average()
    ));
    let held_n = held.values().filter(|h| **h).count();
    let mut details = Table::new([
        "system".to_string(),
        format!("Match, corpus holds a gold ({held_n})"),
        format!("Match, corpus holds none ({})", held.len() - held_n),
        "retrieval calls/q, holds".to_string(),
        "retrieval calls/q, holds none".to_string(),
    ])
    .caption("Match (%) split by whether any passage of the corpus holds a gold answer (under the set's answer rule): where none does, retrieval can only distract");
    for r in &runs.0 {
        let s = r.run.summary();
        let label = format!("{} ({})", r.system, short_name(&r.reader));
        let q = r.run.records.len().max(1) as f64;
        let sum = |f: &dyn Fn(&crate::pipeline::trace::TraceRecord) -> f64| {
            r.run.records.iter().map(f).sum::<f64>() / q
        };
        table.push([
            label.clone(),
            format!("{:.2}", s.em),
            format!("{:.2}", s.f1),
            format!("{:.2}", s.answer_found),
            s.judge.map_or("–".into(), |v| format!("{v:.2}")),
            s.abstained.to_string(),
            format!("{:.2}", sum(&|t| t.retrieval_calls() as f64)),
            format!("{:.0}", sum(&|t| t.prompt_tokens as f64)),
            format!("{:.1}", sum(&|t| t.generated_tokens as f64)),
            format!("{:.2}", s.seconds_per_question),
        ])?;
        let part = |want: bool, f: &dyn Fn(&crate::pipeline::trace::TraceRecord) -> f64| {
            let sel: Vec<f64> = r
                .run
                .records
                .iter()
                .filter(|t| held.get(&t.id).copied() == Some(want))
                .map(f)
                .collect();
            if sel.is_empty() {
                "–".to_string()
            } else {
                format!("{:.2}", sel.iter().sum::<f64>() / sel.len() as f64)
            }
        };
        let found = |t: &crate::pipeline::trace::TraceRecord| {
            if t.answer_found {
                100.0
            } else {
                0.0
            }
        };
        let calls = |t: &crate::pipeline::trace::TraceRecord| t.retrieval_calls() as f64;
        details.push([
            label,
            part(true, &found),
            part(false, &found),
            part(true, &calls),
            part(false, &calls),
        ])?;
    }
    let mut compared = QaComparisons::default();
    for reader in runs.readers() {
        for (i, baseline) in BASELINES.iter().enumerate() {
            let Some(base) = runs.get(reader, baseline) else {
                continue;
            };
            for r in runs.0.iter().filter(|r| r.reader == reader) {
                // Each pair once: naive against closed-book is in the first family.
                if r.system == *baseline || BASELINES[..i].contains(&r.system.as_str()) {
                    continue;
                }
                compared.push(
                    reader,
                    (&r.system, &r.run),
                    (baseline, base),
                    params.trials,
                    params.seed,
                )?;
            }
        }
    }
    let significance = compared.table()?.caption(significance_note(&compared));
    let intervals = intervals(&runs, params.trials, params.seed)?;
    let outcomes = runs.outcomes()?;
    Ok(ReproResult {
        params: (**params).clone(),
        substitutions: notes(params),
        runs,
        table,
        details,
        significance,
        intervals,
        outcomes,
    })
}

fn notes(params: &ReproValid) -> String {
    let systems: Vec<String> = params
        .systems
        .iter()
        .map(|s| {
            format!(
                "`{}` ({})",
                s.name,
                s.method.as_ref().map_or("as configured", |m| m.kind())
            )
        })
        .collect();
    format!(
        "Systems: {}. Reader and model: {} (greedy; one loaded copy reads, writes the methods' own text and judges). Every method uses its built-in prompt (`workbench/src/method/<kind>.rs`) and the config's RAG prompt for reads. A system's passages are every passage shown to the model or kept by the reader at any step; the miss attribution and context precision use them.\n",
        systems.join(", "),
        params.readers.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("methods.toml");
        std::fs::write(&p, text).unwrap();
        (d, p)
    }

    #[test]
    fn the_shipped_study_file_lists_every_method_and_both_baselines() {
        let root = crate::paths::project_root().unwrap();
        let f = StudyFile::load(&root.join(STUDY_FILE)).unwrap();
        let kinds: BTreeSet<&str> = f.system.iter().map(|s| s.method.kind()).collect();
        for k in [
            "closed-book",
            "naive",
            "adaptive",
            "iter-retgen",
            "ircot",
            "self-ask",
            "flare",
            "agentic",
        ] {
            assert!(kinds.contains(k), "{k}");
        }
        for d in &f.dataset {
            let env = Env::project().unwrap();
            let p = params(&env, Scale::Quick, &d.name)
                .unwrap()
                .check()
                .unwrap();
            let configs = p.configs(&env).unwrap();
            assert_eq!(configs.len(), f.system.len());
            // Each system is the data set's config with that system's method.
            for (c, s) in configs.iter().zip(&f.system) {
                assert_eq!(c.config.method.as_ref(), Some(&s.method));
                assert_eq!(c.config.questions.limit, 5);
            }
        }
    }

    #[test]
    fn a_bad_study_file_is_named_with_what_is_wrong() {
        let base = "[[dataset]]\nname = \"a\"\nconfig = \"x.toml\"\n";
        let sys = |n: &str, k: &str| {
            format!("[[system]]\nname = \"{n}\"\nmethod = {{ kind = \"{k}\" }}\n")
        };
        let (_d, p) = write(&format!("{base}{}", sys("naive", "naive")));
        let e = StudyFile::load(&p).unwrap_err().to_string();
        assert!(
            e.contains("closed-book") && e.contains("methods.toml"),
            "{e}"
        );
        let (_d, p) = write(&format!(
            "{base}{}{}{}",
            sys("naive", "naive"),
            sys("closed-book", "closed-book"),
            sys("naive", "adaptive")
        ));
        let e = StudyFile::load(&p).unwrap_err().to_string();
        assert!(e.contains("`naive` is listed twice"), "{e}");
        let (_d, p) = write(&format!(
            "{base}{}{}[[system]]\nname = \"a\"\nmethod = {{ kind = \"adaptive\", threshold = 3.0 }}\n",
            sys("naive", "naive"),
            sys("closed-book", "closed-book"),
        ));
        let e = StudyFile::load(&p).unwrap_err().to_string();
        assert!(e.contains("system `a`") && e.contains("threshold"), "{e}");
        let (_d, p) = write(&format!(
            "{base}{}{}",
            sys("naive", "naive"),
            sys("closed-book", "closed-book")
        ));
        let f = StudyFile::load(&p).unwrap();
        let e = f.dataset("b").unwrap_err().to_string();
        assert!(e.contains("`b`") && e.contains("has a"), "{e}");
    }
}
