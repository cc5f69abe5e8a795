//! Report 001's Tables 2–4 and its paired significance tests on RAG Mini Wikipedia
//! (features `llm` + `parquet`): sliding-window chunks of 300 words with overlap 100,
//! dense / sparse (BM25) / hybrid (min-max, 0.5 / 0.5) retrieval of the top 5 chunks and
//! a closed-book baseline, report 001's Appendix A prompts, temperature 0.4.
//!
//! The systems are `configs/report001_{dense,sparse,hybrid,closed_book}.toml`. Default
//! scale: a seeded sample of 25 of the 918 questions; paper: the configs' 150 (the
//! report's test-set size). Every table is a polars query over one per-question frame
//! ([`crate::evaluate::groups`]); the report's own numbers stand beside ours.
//!
//! ```no_run
//! # fn main() -> workbench::Result<()> {
//! use workbench::pipeline::study::ModelPool;
//! use workbench::study::{report001, Env, Scale};
//! let env = Env::project()?;
//! let params = report001::params(Scale::Quick).check()?;
//! let study = report001::run(&env, &params, &mut ModelPool::default())?;
//! println!("{}", study.table2.to_markdown());
//! # Ok(()) }
//! ```

use super::repro::{
    answered_cells, intervals, load_average, manifest_summary, run_study, short_name, side_by_side,
    significance_note, write_outputs, Compared, ConfigSystem, QaComparisons, ReproParams,
    ReproStudy, ReproValid, StudyRuns, ANSWERED_COLUMNS,
};
use super::Env;
use crate::display::Table;
use crate::env::{Outputs, Scale};
use crate::evaluate::groups;
use crate::pipeline::study::ModelPool;
use crate::results::ResultDir;
use crate::{Error, Result};
use std::collections::BTreeMap;

/// Result folder: `data/results/report001/` (`report001-quick/` at the quick scale).
pub const NAME: &str = "report001";

/// The file printed when a fresh result is skipped.
pub const SUMMARY_FILE: &str = "table2.md";

/// (system, config file, report EM, F1): Table 2 of report 001.
pub const SYSTEMS: [(&str, &str, f64, f64); 4] = [
    ("dense", "configs/report001_dense.toml", 4.00, 15.19),
    ("sparse", "configs/report001_sparse.toml", 1.33, 12.70),
    ("hybrid", "configs/report001_hybrid.toml", 4.67, 13.10),
    (
        "closed-book",
        "configs/report001_closed_book.toml",
        4.00,
        20.42,
    ),
];

/// One cell pair of report 001's Table 3: (system, EM, F1).
type Cell = (&'static str, f64, f64);

/// Table 3 of report 001: (group, [(system, EM, F1)]).
pub const TABLE3: [(&str, [Cell; 4]); 8] = [
    (
        "Misc.",
        [
            ("hybrid", 5.56, 17.97),
            ("sparse", 0.00, 15.66),
            ("dense", 0.00, 10.45),
            ("closed-book", 0.00, 4.33),
        ],
    ),
    (
        "In",
        [
            ("hybrid", 0.00, 10.11),
            ("sparse", 0.00, 16.90),
            ("dense", 0.00, 6.81),
            ("closed-book", 0.00, 13.47),
        ],
    ),
    (
        "What",
        [
            ("hybrid", 6.00, 17.15),
            ("sparse", 3.85, 13.30),
            ("dense", 2.67, 18.82),
            ("closed-book", 3.56, 22.11),
        ],
    ),
    (
        "What is",
        [
            ("hybrid", 12.00, 20.55),
            ("sparse", 0.00, 8.35),
            ("dense", 8.00, 22.72),
            ("closed-book", 8.00, 27.47),
        ],
    ),
    (
        "When",
        [
            ("hybrid", 0.00, 0.00),
            ("sparse", 0.00, 5.56),
            ("dense", 0.00, 2.63),
            ("closed-book", 0.00, 4.29),
        ],
    ),
    (
        "Where",
        [
            ("hybrid", 0.00, 6.35),
            ("sparse", 0.00, 16.67),
            ("dense", 0.00, 9.23),
            ("closed-book", 0.00, 25.47),
        ],
    ),
    (
        "Which",
        [
            ("hybrid", 0.00, 16.93),
            ("sparse", 0.00, 10.71),
            ("dense", 7.89, 16.30),
            ("closed-book", 7.89, 31.05),
        ],
    ),
    (
        "Who",
        [
            ("hybrid", 0.00, 10.87),
            ("sparse", 16.67, 21.67),
            ("dense", 0.00, 14.56),
            ("closed-book", 0.00, 18.23),
        ],
    ),
];

/// Pairs compared: (system, baseline). Report 001 tested sparse vs dense and hybrid vs
/// dense; the RAG systems against closed-book are added.
pub const PAIRS: [(&str, &str); 5] = [
    ("dense", "sparse"),
    ("hybrid", "dense"),
    ("dense", "closed-book"),
    ("sparse", "closed-book"),
    ("hybrid", "closed-book"),
];

/// The published parameters at `scale`: 5 questions per system at the quick scale, a
/// seeded sample of 25 at the default scale, the configs' 150 at the paper scale.
pub fn params(scale: Scale) -> ReproParams {
    let systems = SYSTEMS
        .iter()
        .map(|s| ConfigSystem::new(s.0, s.1))
        .collect();
    ReproParams::at_scale(scale, systems, 25, None)
}

/// What the study found.
#[derive(Debug, Clone)]
pub struct Report001 {
    /// The parameters it ran with.
    pub params: ReproParams,
    /// Every run.
    pub runs: StudyRuns,
    /// Table 2: EM and F1 per system, ours beside the report's.
    pub table2: Table,
    /// Per system: abstentions counted apart, EM / F1 over the questions answered.
    pub overall: Table,
    /// Per run: every answer metric (EM, F1 over the answered, Match, token recall, the
    /// LLM judge and its agreement with Match).
    pub details: Table,
    /// Table 3: per question group, ours beside the report's.
    pub table3: Table,
    /// Table 4: the winner per question group by F1, ours beside the report's.
    pub table4: Table,
    /// Paired tests on EM, F1, Match and token recall for every pair of [`PAIRS`],
    /// Holm-adjusted per reader and metric.
    pub significance: Table,
    /// 95% bootstrap intervals of each run's means.
    pub intervals: Table,
    /// Miss attribution per run.
    pub outcomes: Table,
    /// The per-question table every other table is computed from.
    pub per_question: Table,
    /// What differs from the report.
    pub substitutions: String,
}

/// `params` checked, as the [`Study`](super::Study) `scripts/bin/exp_report001` runs
/// ([`super::execute`]).
pub fn study(params: ReproParams) -> Result<ReproStudy<Report001>> {
    Ok(ReproStudy::new(params.check()?, NAME, SUMMARY_FILE, run))
}

/// Run every system for every reader on `pool`'s models and build the tables.
pub fn run(env: &Env, params: &ReproValid, pool: &mut ModelPool) -> Result<Report001> {
    let runs = run_study(pool, params.configs(env)?)?;
    let out = tables(params, runs)?;
    out.runs.remove_journals()?;
    Ok(out)
}

/// The tables of `runs`.
pub fn tables(params: &ReproValid, runs: StudyRuns) -> Result<Report001> {
    let single = params.readers.len() == 1;
    let label = |reader: &str, system: &str| {
        if single {
            system.to_string()
        } else {
            format!("{system} ({})", short_name(reader))
        }
    };
    let mut scores = Vec::new();
    for r in &runs.0 {
        scores.extend(r.run.question_scores(&label(&r.reader, &r.system)));
    }
    let df = groups::per_question_frame(&scores)?;
    let n = runs.question_count();

    let mut rows = Vec::new();
    for r in &runs.0 {
        let Some((.., em, f1)) = SYSTEMS.iter().find(|s| s.0 == r.system) else {
            continue;
        };
        let s = r.run.summary();
        let l = label(&r.reader, &r.system);
        for (metric, ours, report) in [("EM", s.em, *em), ("F1", s.f1, *f1)] {
            rows.push(Compared {
                system: l.clone(),
                metric: metric.into(),
                ours: Some(ours),
                report: Some(report),
            });
        }
    }
    let readers: Vec<String> = params.readers.iter().map(|r| short_name(r)).collect();
    let table2 = side_by_side(
        &rows,
        &BTreeMap::new(),
        &format!(
            "Table 2 of report 001 on RAG Mini Wikipedia: {n} questions (seeded sample, seed 42), readers {}; report: 150 questions on a scraped Pittsburgh/CMU corpus, Llama 3.1 8B. Load {}",
            readers.join(", "),
            load_average()
        ),
    );
    let overall = groups::to_table(&groups::overall(&df)?, 2)?.caption(
        "Per system: abstentions (\"Not found\") counted apart; em_answered / f1_answered over the questions answered",
    );
    let mut details = Table::new(ANSWERED_COLUMNS).caption(
        "Per system: abstentions counted apart; EM / F1 over the questions answered; Match (gold inside the answer, token-bounded, under the rule named) and token recall over all questions; the LLM judge's share with P(Yes) above its cut (`judge cut`: calibrated on labelled predictions, else 0.5) and its mean P(Yes) over all questions (an abstention 0); Cohen's kappa of the judge against Match over the questions answered",
    );
    for r in &runs.0 {
        details.push(answered_cells(
            &label(&r.reader, &r.system),
            &r.run.summary(),
            r.run.answer_match,
        ))?;
    }
    let table3 = join_report_t3(&groups::to_table(&groups::by_group(&df)?, 2)?, single)?;
    let table4 = winners_beside_report(&groups::to_table(&groups::winners(&df, 2)?, 2)?)?;

    let mut compared = QaComparisons::default();
    for reader in runs.readers() {
        for (a, b) in PAIRS {
            let (Some(ra), Some(rb)) = (runs.get(reader, a), runs.get(reader, b)) else {
                continue;
            };
            compared.push(reader, (a, ra), (b, rb), params.trials, params.seed)?;
        }
    }
    let significance = compared.table()?.caption(format!(
        "Paired tests per question (EM and Match 0/1, F1 and token recall 0–1); randomisation and bootstrap {} trials, seed {}. Report 001: dense vs sparse significant, hybrid vs dense not. {}",
        params.trials,
        params.seed,
        significance_note(&compared)
    ));
    let intervals = intervals(&runs, params.trials, params.seed)?;
    let outcomes = runs.outcomes()?;
    Ok(Report001 {
        params: (**params).clone(),
        substitutions: substitutions(n, &params.readers),
        per_question: groups::to_table(&df, 4)?,
        runs,
        table2,
        overall,
        details,
        table3,
        table4,
        significance,
        intervals,
        outcomes,
    })
}

/// Our per-group rows with the report's EM and F1 for the same (group, system).
fn join_report_t3(ours: &Table, plain_labels: bool) -> Result<Table> {
    let col = |name: &str| {
        ours.header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| Error::Empty(format!("the per-group table has no `{name}` column")))
    };
    let (gi, si) = (col("group")?, col("system")?);
    let mut header = ours.header.clone();
    header.push("em (report)".into());
    header.push("f1 (report)".into());
    let mut t = Table::new(header).caption(
        "Table 3: per question group (report 001's rule, evaluate::groups), ours beside the report's (its groups hold other questions: compare the pattern, not the cells)",
    );
    for r in &ours.rows {
        // "dense (qwen…)" → "dense" for the report's look-up.
        let sys = if plain_labels {
            r[si].as_str()
        } else {
            r[si].split(" (").next().unwrap_or("")
        };
        let cell = TABLE3
            .iter()
            .find(|(g, _)| *g == r[gi])
            .and_then(|(_, cells)| cells.iter().find(|c| c.0 == sys));
        let mut row = r.clone();
        row.push(cell.map_or("–".into(), |c| format!("{:.2}", c.1)));
        row.push(cell.map_or("–".into(), |c| format!("{:.2}", c.2)));
        t.push(row)?;
    }
    Ok(t)
}

/// Our winners per group (group, winner, F1, questions) with the report's beside them.
fn winners_beside_report(ours: &Table) -> Result<Table> {
    let mut t = Table::new([
        "group",
        "winner (ours)",
        "F1 (ours)",
        "questions",
        "winner (report)",
        "F1 (report)",
    ])
    .caption(
        "Table 4: the system with the highest F1 per question group (ties: every tied system)",
    );
    for r in &ours.rows {
        let (rw, rf) = report_winner(&r[0]);
        t.push([
            r[0].clone(),
            r[1].clone(),
            r[2].clone(),
            r[3].clone(),
            rw,
            rf,
        ])?;
    }
    Ok(t)
}

/// Report 001's Table 4 winner of `group` by F1 (recomputed from its Table 3).
pub fn report_winner(group: &str) -> (String, String) {
    match TABLE3.iter().find(|(g, _)| *g == group) {
        None => ("–".into(), "–".into()),
        Some((_, cells)) => {
            let best = cells.iter().map(|c| c.2).fold(f64::MIN, f64::max);
            let names: Vec<&str> = cells.iter().filter(|c| c.2 == best).map(|c| c.0).collect();
            (names.join(" = "), format!("{best:.2}"))
        }
    }
}

fn substitutions(n: usize, readers: &[String]) -> String {
    format!(
        "Substitutions against report 001:\n\
         - corpus: the report's ~732 scraped Pittsburgh/CMU web pages → RAG Mini Wikipedia's 3,200 passages, each cut into sliding windows of 300 words with overlap 100 (as the report);\n\
         - questions: the report's 150 hand-written questions → {n} of RAG Mini Wikipedia's 918 (seeded sample, seed 42); the groups of report 001's rule hold other questions, so Tables 3 and 4 compare patterns, not cells;\n\
         - LLM: Llama 3.1 8B → {} (GGUF, candle), temperature 0.4 sampled with seed 42, at most 50 new tokens (report: temperature 0.4, sample, token truncate 50);\n\
         - dense embedder: Linq-Embed-Mistral (7B) → all-MiniLM-L6-v2, FAISS flat inner product; sparse: bm25s → the workbench's BM25 (k1 0.9, b 0.4); hybrid: min-max normalised scores, weights 0.5 / 0.5 (the report's weights are not printed);\n\
         - prompts: Appendix A.1 and A.2 as printed (`data/prompts/closed_book_001.txt`, `rag_001.txt`), sent as the chat user message; \"Not found\" answers are abstentions, scored as the empty prediction and also counted apart;\n\
         - significance: the report's test is not named; paired t, randomisation, bootstrap and studentised bootstrap tests are all given.\n",
        readers.join(", ")
    )
}

impl Report001 {
    /// Table 2 with the abstention table under it.
    pub fn table2_markdown(&self) -> String {
        format!(
            "{}\n{}",
            self.table2.to_markdown(),
            self.overall.to_markdown()
        )
    }
}

impl Outputs for Report001 {
    fn write(&self, out: &ResultDir) -> Result<()> {
        write_outputs(
            out,
            &self.runs,
            &[
                ("table2.csv", &self.table2),
                ("overall.csv", &self.overall),
                ("details.csv", &self.details),
                ("table3.csv", &self.table3),
                ("table4.csv", &self.table4),
                ("significance.csv", &self.significance),
                ("intervals.csv", &self.intervals),
                ("outcomes.csv", &self.outcomes),
                ("per_question.csv", &self.per_question),
            ],
            &[
                ("table2.md", &self.table2_markdown()),
                ("details.md", &self.details.to_markdown()),
                ("table3.md", &self.table3.to_markdown()),
                ("table4.md", &self.table4.to_markdown()),
                ("significance.md", &self.significance.to_markdown()),
                ("intervals.md", &self.intervals.to_markdown()),
                ("outcomes.md", &self.outcomes.to_markdown()),
                ("substitutions.md", &self.substitutions),
            ],
        )
    }

    fn markdown(&self) -> Result<String> {
        Ok(format!(
            "{}\n{}\n{}\n{}\n{}\n{}\n{}",
            self.table2_markdown(),
            self.details.to_markdown(),
            self.table3.to_markdown(),
            self.table4.to_markdown(),
            self.significance.to_markdown(),
            self.intervals.to_markdown(),
            self.substitutions
        ))
    }

    fn summary(&self) -> Result<serde_json::Value> {
        Ok(manifest_summary(&self.runs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_winners_are_recomputed_from_its_table3() {
        assert_eq!(report_winner("Misc."), ("hybrid".into(), "17.97".into()));
        assert_eq!(
            report_winner("Which"),
            ("closed-book".into(), "31.05".into())
        );
        assert_eq!(report_winner("nope"), ("–".into(), "–".into()));
    }

    #[test]
    fn params_per_scale() {
        assert_eq!(params(Scale::Quick).questions, Some(5));
        assert_eq!(params(Scale::Default).questions, Some(25));
        assert_eq!(params(Scale::Paper).questions, None);
        let p = params(Scale::Default);
        assert_eq!(p.systems.len(), 4);
        assert!(p.check().is_ok());
    }

    #[test]
    fn report_cells_join_ours_by_group_and_system() {
        let mut ours = Table::new(["group", "system", "em", "f1"]);
        ours.push(["What is", "dense (qwen)", "1.00", "2.00"])
            .unwrap();
        ours.push(["Nope", "dense (qwen)", "0.00", "0.00"]).unwrap();
        let t = join_report_t3(&ours, false).unwrap();
        assert_eq!(t.rows[0][4..], ["8.00".to_string(), "22.72".to_string()]);
        assert_eq!(t.rows[1][4..], ["–".to_string(), "–".to_string()]);
        let bad = Table::new(["team", "system"]);
        assert!(join_report_t3(&bad, true)
            .unwrap_err()
            .to_string()
            .contains("group"));
    }
}
