//! The methods study (feature `llm`): every RAG method of [`crate::method`] on the same
//! questions, corpus, retriever and model, against naive RAG and against closed-book.
//!
//! `configs/methods/study.toml` lists the data sets (a pipeline config each) and the
//! systems (a `[method]` each). For each data set the study runs every system and writes
//! `data/results/methods-<set>/` (`-quick` at the quick scale):
//!
//! - `table.csv`: EM, F1, Match, judge (in %), abstentions, retrieval calls, prompt and
//!   generated tokens and seconds per question;
//! - `details.csv`: Match split by whether some passage of the corpus contains a gold
//!   answer (under the set's answer rule): where none does, the passages do not state a
//!   gold in its words, and a method that decides whether to retrieve should not fall below
//!   closed-book; where one does, retrieval could help;
//! - `vs_baselines.csv`: each system's differences from both baselines, with the Holm marks;
//! - `discordant.csv`: per system and baseline, the questions one gets right (Match) and
//!   the other wrong, each way: the pairs the paired tests turn on;
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
use crate::env::{Outputs, Scale};
use crate::method::MethodSpec;
use crate::pipeline::study::ModelPool;
use crate::pipeline::{Pipeline, PipelineRun};
use crate::results::ResultDir;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The study file, relative to the project root.
pub const STUDY_FILE: &str = "configs/methods/study.toml";

/// The file printed when a fresh result is skipped.
pub const SUMMARY_FILE: &str = "table.md";

/// Questions per data set at the default scale (a seeded sample, with the config's seed).
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
    /// The systems it runs, by name, in the study file's order. Default: every system
    /// (both baselines must be among them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub systems: Vec<String>,
    /// Questions at the default scale. Default [`DEFAULT_QUESTIONS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub questions: Option<usize>,
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

/// `configs/methods/study.toml`.
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
            if d.questions == Some(0) {
                return bad(format!("data set `{}`: questions = 0", d.name));
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
            match f.system.iter().find(|s| s.name == b) {
                None => {
                    return bad(format!(
                        "no system `{b}`: every system is tested against {}",
                        BASELINES.join(" and ")
                    ))
                }
                Some(s) if s.method.kind() != b => {
                    return bad(format!(
                        "system `{b}` runs `kind = \"{}\"`: the baseline `{b}` must run `kind = \"{b}\"`",
                        s.method.kind()
                    ))
                }
                Some(_) => {}
            }
        }
        for d in &f.dataset {
            for name in &d.systems {
                if !f.system.iter().any(|s| &s.name == name) {
                    return bad(format!(
                        "data set `{}` lists system `{name}`, which no [[system]] defines",
                        d.name
                    ));
                }
            }
            for b in BASELINES {
                if !d.systems.is_empty() && !d.systems.iter().any(|s| s == b) {
                    return bad(format!(
                        "data set `{}` does not run `{b}`: every system is tested against {}",
                        d.name,
                        BASELINES.join(" and ")
                    ));
                }
            }
        }
        // Closed-book is adaptive's first turn: same prompt, same length.
        let closed = f.system.iter().find_map(|s| match &s.method {
            MethodSpec::ClosedBook(c) => Some(c),
            _ => None,
        });
        for s in &f.system {
            if let (MethodSpec::Adaptive(a), Some(c)) = (&s.method, closed) {
                if a.prompt != c.prompt || a.max_new_tokens != c.max_new_tokens {
                    return bad(format!(
                        "system `{}`: its closed-book turn (prompt {:?}, max_new_tokens {}) differs from `closed-book`'s ({:?}, {}); make them equal so the two compare like for like",
                        s.name, a.prompt, a.max_new_tokens, c.prompt, c.max_new_tokens
                    ));
                }
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

/// The study's parameters for `dataset` at `scale`: the data set's systems (every system
/// of the study file unless it lists some) on its config, read by the main reader; 5
/// questions at the quick scale, the data set's `questions` ([`DEFAULT_QUESTIONS`] unless
/// set) at the default scale, 200 (or that, if larger) at the paper scale; 10,000 test
/// trials, seed 42 (the tests'; the question sample's seed is the config's).
pub fn params(env: &Env, scale: Scale, dataset: &str) -> Result<ReproParams> {
    let f = StudyFile::load(&env.resolve(STUDY_FILE))?;
    let d = f.dataset(dataset)?;
    let systems = f
        .system
        .iter()
        .filter(|s| d.systems.is_empty() || d.systems.contains(&s.name))
        .map(|s| ConfigSystem {
            method: Some(s.method.clone()),
            ..ConfigSystem::new(&s.name, &d.config)
        })
        .collect();
    let default = d.questions.unwrap_or(DEFAULT_QUESTIONS);
    Ok(ReproParams::at_scale(
        scale,
        systems,
        default,
        Some(default.max(200)),
    ))
}

/// What the study found: the tables of [`ReproResult`] (`table`: the comparison, `details`:
/// Match split by what the corpus holds) and every system's differences from both
/// baselines.
#[derive(Debug, Clone)]
pub struct MethodsResult {
    /// The runs and their tables.
    pub repro: ReproResult,
    /// One row per system: its difference from `naive` and from `closed-book` on Match,
    /// EM and the judge, in percentage points, with the Holm-adjusted mark
    /// ([`vs_baselines`]).
    pub vs_baselines: Table,
    /// One row per system: the questions it gets right on Match and a baseline wrong, and
    /// the reverse, for each baseline ([`discordant`]).
    pub discordant: Table,
}

impl Outputs for MethodsResult {
    /// [`ReproResult`]'s files and `vs_baselines.csv`.
    fn write(&self, out: &ResultDir) -> Result<()> {
        self.repro.write(out)?;
        self.vs_baselines.write_csv(&out.path("vs_baselines.csv"))?;
        self.discordant.write_csv(&out.path("discordant.csv"))?;
        let p = out.path(SUMMARY_FILE);
        std::fs::write(&p, self.markdown()?).map_err(|e| Error::io(&p, e))
    }

    fn markdown(&self) -> Result<String> {
        Ok(format!(
            "{}\n{}\n{}",
            self.vs_baselines.to_markdown(),
            self.discordant.to_markdown(),
            self.repro.markdown()?
        ))
    }

    fn summary(&self) -> Result<serde_json::Value> {
        self.repro.summary()
    }
}

/// One row per system of `significance` (a [`QaComparisons::table`]): its mean minus each
/// baseline's on Match, EM and the judge, in percentage points, each followed by its
/// Holm-adjusted mark (`†` p̃ < 0.05, `††` p̃ < 0.01); `–` for a pair not tested (a
/// baseline against itself).
pub fn vs_baselines(significance: &Table) -> Result<Table> {
    let col = |name: &str| {
        significance
            .header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| Error::param("significance", format!("no column `{name}`")))
    };
    let (reader, sys, base, metric, diff, mark) = (
        col("reader")?,
        col("system")?,
        col("baseline")?,
        col("metric")?,
        col("diff")?,
        col("mark_holm")?,
    );
    let metrics = [("match", "Match"), ("em", "EM"), ("judge", "judge")];
    let present: Vec<(&str, &str)> = metrics
        .into_iter()
        .filter(|(m, _)| significance.rows.iter().any(|r| r[metric] == *m))
        .collect();
    let mut header = vec!["reader".to_string(), "system".to_string()];
    for (_, label) in &present {
        for b in BASELINES {
            header.push(format!("{label} − {b} (pp)"));
        }
    }
    let mut systems: Vec<(&str, &str)> = Vec::new();
    for r in &significance.rows {
        for name in [r[sys].as_str(), r[base].as_str()] {
            if !systems.contains(&(r[reader].as_str(), name)) {
                systems.push((r[reader].as_str(), name));
            }
        }
    }
    let mut t = Table::new(header).caption(
        "Each system's mean minus the baseline's, in percentage points, on the same questions; † / †† the paired randomisation test's p < 0.05 / 0.01 after Holm's correction over every comparison of that metric (significance.csv)",
    );
    for (rd, s) in systems {
        let mut row = vec![rd.to_string(), s.to_string()];
        for (m, _) in &present {
            for b in BASELINES {
                // naive against closed-book is tested once; read it either way round.
                let found = significance.rows.iter().find_map(|r| {
                    if r[metric] != *m || r[reader] != rd {
                        return None;
                    }
                    let d: f64 = r[diff].parse().ok()?;
                    if r[sys] == s && r[base] == b {
                        Some((d, &r[mark]))
                    } else if r[sys] == b && r[base] == s {
                        Some((-d, &r[mark]))
                    } else {
                        None
                    }
                });
                row.push(found.map_or("–".to_string(), |(d, mk)| {
                    // A difference that rounds to zero prints as +0.0, never -0.0.
                    let pp = 100.0 * d;
                    let pp = if pp.abs() < 0.05 { 0.0 } else { pp };
                    format!("{pp:+.1}{mk}")
                }));
            }
        }
        t.push(row)?;
    }
    Ok(t)
}

/// One row per reader and system of `runs`: for each baseline of [`BASELINES`], the
/// questions the system gets right on Match and the baseline wrong (`won`), and the reverse
/// (`lost`); `–` for a baseline against itself. A method that only adds to a baseline's
/// answers loses none.
pub fn discordant(runs: &StudyRuns) -> Result<Table> {
    let mut header = vec!["system".to_string()];
    for b in BASELINES {
        header.push(format!("won vs {b}"));
        header.push(format!("lost vs {b}"));
    }
    let mut t = Table::new(header).caption(
        "Questions each system answers right on Match where the baseline does not (won), and the reverse (lost), on the same questions: the discordant pairs the paired tests of significance.csv turn on",
    );
    for r in &runs.0 {
        let mine = r.run.per_query("match")?;
        let mut row = vec![format!("{} ({})", r.system, short_name(&r.reader))];
        for b in BASELINES {
            match runs.get(&r.reader, b) {
                Some(_) if r.system == b => {
                    row.extend(["–".to_string(), "–".to_string()]);
                }
                Some(base) => {
                    let theirs = base.per_query("match")?;
                    let (mut won, mut lost) = (0usize, 0usize);
                    for (id, m) in &mine {
                        let o = theirs.get(id).ok_or_else(|| {
                            Error::param(
                                "discordant",
                                format!("question `{id}` of `{}` is not in `{b}`'s run", r.system),
                            )
                        })?;
                        won += usize::from(*m > 0.5 && *o < 0.5);
                        lost += usize::from(*m < 0.5 && *o > 0.5);
                    }
                    if theirs.len() != mine.len() {
                        return Err(Error::param(
                            "discordant",
                            format!(
                                "`{}` ran {} questions and `{b}` {}",
                                r.system,
                                mine.len(),
                                theirs.len()
                            ),
                        ));
                    }
                    row.extend([won.to_string(), lost.to_string()]);
                }
                None => row.extend(["–".to_string(), "–".to_string()]),
            }
        }
        t.push(row)?;
    }
    Ok(t)
}

/// `params` checked, as the [`Study`](super::Study) `exp_methods` runs: its result folder
/// is `methods-<dataset>`.
pub fn study(params: ReproParams, dataset: &str) -> Result<ReproStudy<MethodsResult>> {
    Ok(ReproStudy::new(
        params.check()?,
        format!("methods-{dataset}"),
        SUMMARY_FILE,
        run,
    ))
}

/// Run every system on `pool`'s models, then the tables.
pub fn run(env: &Env, params: &ReproValid, pool: &mut ModelPool) -> Result<MethodsResult> {
    let runs = run_study(pool, params.configs(env)?)?;
    let held = match runs.0.first() {
        Some(r) => corpus_holds(&r.run)?,
        None => BTreeMap::new(),
    };
    let out = tables(params, runs, &held)?;
    out.repro.runs.remove_journals()?;
    Ok(out)
}

/// For every question of `run`: whether some passage of its corpus (chunked as the run's
/// retriever indexes it) contains one of its gold answers as a string (the run's answer
/// rule: the gold's normalised tokens as a contiguous run of the passage's), or `None` when
/// every gold is yes / no (a word any passage may hold, [`crate::evaluate::qa::span_golds`]).
/// A contained gold is an upper bound on what the corpus answers: a year or a count may
/// appear in an unrelated passage.
pub fn corpus_holds(run: &PipelineRun) -> Result<BTreeMap<String, Option<bool>>> {
    let docs = Pipeline::load_corpus(&run.config)?;
    let passages = Pipeline::chunk(&run.config, &docs)?;
    let rule = run.answer_match;
    let prepared: Vec<_> = passages.iter().map(|p| rule.prepare(&p.text)).collect();
    let mut out = BTreeMap::new();
    for r in &run.records {
        let spans = crate::evaluate::qa::span_golds(&r.gold_answers);
        if spans.is_empty() {
            out.insert(r.id.clone(), None);
            continue;
        }
        let golds = rule.golds(&spans)?;
        let mut held = false;
        for p in &prepared {
            if golds.found_in(p)? {
                held = true;
                break;
            }
        }
        out.insert(r.id.clone(), Some(held));
    }
    Ok(out)
}

/// The tables of `runs`; `held` says which questions the corpus can answer
/// ([`corpus_holds`]).
pub fn tables(
    params: &ReproValid,
    runs: StudyRuns,
    held: &BTreeMap<String, Option<bool>>,
) -> Result<MethodsResult> {
    let n = runs.question_count();
    let first = runs.0.first().map(|r| &r.run);
    let seed = first.map_or(0, |r| r.config.questions.seed);
    let skipped = first.map_or(0, |r| r.skipped.len());
    let dropped = first.map_or(0, |r| r.dropped_golds.len());
    let limit = first.map_or(0, |r| r.config.questions.limit);
    let drawn = if limit > 0 && n >= limit {
        format!("a seeded sample, seed {seed}, of the set's questions")
    } else {
        "all of the set's questions".to_string()
    };
    let resumed: Vec<String> = runs
        .0
        .iter()
        .filter(|r| r.resumed > 0)
        .map(|r| format!("{} {}", r.system, r.resumed))
        .collect();
    let resumed = if resumed.is_empty() {
        String::new()
    } else {
        format!(
            "; answers taken from an earlier process's journal, with that process's seconds: {} (manifest.json /summary/resumed)",
            resumed.join(", ")
        )
    };
    let mut table = Table::new([
        "system",
        "EM",
        "F1",
        "Match",
        "judge",
        "abstained (n)",
        "retrieval calls/q",
        "prompt tokens/q",
        "generated tokens/q",
        "s/q",
    ])
    .caption(format!(
        "{n} questions ({drawn}; {skipped} question(s) of the file left out because no gold answer survives normalisation, {dropped} such gold(s) dropped from kept questions: skipped.json, dropped_golds.json), every system on the same questions, corpus, retriever and model. EM: SQuAD normalisation (NQ-open's official rule); F1: SQuAD's token F1; Match, the primary metric: a gold's normalised tokens as a contiguous run of the prediction's (stricter than FlashRAG's substring acc); judge: the reader model asked whether the answer is right, its P(Yes) cut calibrated on report 001's RAG Mini labels. All in %. Tokens and retrieval calls summed over each question's steps; seconds at load {}{resumed}",
        load_average()
    ));
    let count = |want: Option<bool>| held.values().filter(|h| **h == want).count();
    let mut details = Table::new([
        "system".to_string(),
        format!("Match, a passage contains a gold ({})", count(Some(true))),
        format!("Match, no passage contains one ({})", count(Some(false))),
        format!("Match, yes / no golds only ({})", count(None)),
        "retrieval calls/q, contains".to_string(),
        "retrieval calls/q, contains none".to_string(),
    ])
    .caption("Match (%) split by whether some passage of the corpus contains a gold answer (the answer rule of Match; yes / no golds apart, since any passage may hold the word). Where none does, no passage states a gold in its words (a sentence-long gold may still be answered in other words); where one does, retrieval could supply it (an upper bound: a year or a count may sit in an unrelated passage)");
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
        let part = |want: Option<bool>, f: &dyn Fn(&crate::pipeline::trace::TraceRecord) -> f64| {
            let sel: Vec<f64> = r
                .run
                .records
                .iter()
                .filter(|t| held.get(&t.id) == Some(&want))
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
            part(Some(true), &found),
            part(Some(false), &found),
            part(None, &found),
            part(Some(true), &calls),
            part(Some(false), &calls),
        ])?;
    }
    for r in &runs.0 {
        if let Some(t) = r.run.records.iter().find(|t| !held.contains_key(&t.id)) {
            return Err(Error::param(
                "held",
                format!(
                    "question `{}` of `{}` is not in the corpus check",
                    t.id, r.system
                ),
            ));
        }
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
    let vs_baselines = vs_baselines(&significance)?;
    let discordant = discordant(&runs)?;
    Ok(MethodsResult {
        repro: ReproResult {
            params: (**params).clone(),
            substitutions: notes(params),
            runs,
            table,
            details,
            significance,
            intervals,
            outcomes,
        },
        vs_baselines,
        discordant,
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
        "Systems: {}. Reader and model: {} (greedy; one loaded copy reads, writes the methods' own text and judges). Every method uses its built-in prompt (`workbench/src/method/<kind>.rs`) and the config's RAG prompt for reads. Differences by design: the methods that prompt the model with passages (ircot, flare, agentic) show them as `Doc i(Title: …)`, the reads of naive, adaptive, iter-retgen and self-ask as the RAG prompt's chunks; ircot's final read may take up to its `max_passages` passages, the others `reader.passages`. A system's passages are every passage shown to the model or kept by the reader at any step; the miss attribution and context precision use them (a retrieval miss there includes questions whose gold no passage of the corpus contains in its words: details.csv counts them). Holm's correction runs over the comparisons of one metric; Match is the primary metric, the others are secondary.\n",
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
            // Each system the data set runs (every one unless it lists some, in the study
            // file's order) is the data set's config with that system's method.
            let runs: Vec<&System> = f
                .system
                .iter()
                .filter(|s| d.systems.is_empty() || d.systems.contains(&s.name))
                .collect();
            assert_eq!(configs.len(), runs.len(), "{}", d.name);
            for b in BASELINES {
                assert!(runs.iter().any(|s| s.name == b), "{}: {b}", d.name);
            }
            for (c, s) in configs.iter().zip(&runs) {
                assert_eq!(c.config.method.as_ref(), Some(&s.method));
                assert_eq!(c.config.questions.limit, 5);
            }
            // Default and paper sizes: the data set's own, else 30; the paper scale at least 200.
            let default = d.questions.unwrap_or(DEFAULT_QUESTIONS);
            let sizes = [Scale::Default, Scale::Paper].map(|scale| {
                params(&env, scale, &d.name)
                    .unwrap()
                    .check()
                    .unwrap()
                    .configs(&env)
                    .unwrap()[0]
                    .config
                    .questions
                    .limit
            });
            assert_eq!(sizes, [default, default.max(200)], "{}", d.name);
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
        // A data set's own systems and size: each named system defined, both baselines in.
        let two = format!(
            "{}{}",
            sys("naive", "naive"),
            sys("closed-book", "closed-book")
        );
        for (extra, want) in [
            ("systems = [\"naive\", \"nope\"]\n", "system `nope`"),
            ("systems = [\"naive\"]\n", "does not run `closed-book`"),
            ("questions = 0\n", "questions = 0"),
        ] {
            let (_d, p) = write(&format!("{base}{extra}{two}"));
            let e = StudyFile::load(&p).unwrap_err().to_string();
            assert!(
                e.contains(want) && e.contains("data set `a`"),
                "{extra}: {e}"
            );
        }
        let (_d, p) = write(&format!(
            "{base}systems = [\"closed-book\", \"naive\"]\nquestions = 7\n{two}"
        ));
        let f = StudyFile::load(&p).unwrap();
        assert_eq!(
            (f.dataset[0].systems.len(), f.dataset[0].questions),
            (2, Some(7))
        );
    }
}
