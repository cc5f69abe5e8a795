//! Report 004's table on RAG Mini Wikipedia (feature `llm`): naive RAG (dense top 3)
//! against the enhanced pipeline (LLM query rewrite, dense top 10, re-rank to the top 3):
//! EM, F1, time per query, context precision, with the report's numbers beside ours.
//!
//! The systems are `configs/report004_naive.toml` and `configs/report004_enhanced.toml`.
//! Questions come from the test side of RAG Mini's seeded split (the ~30 % of the 918
//! that the trained cross-encoder never saw): a seeded sample of 60 at the default scale,
//! all of them at the paper scale. The context-precision figures are the seed report's
//! (naive 0.74, enhanced 0.87).

use super::repro::{
    answered_cells, intervals, load_average, run_study, short_name, side_by_side,
    significance_note, Compared, ConfigSystem, ReproParams, ReproResult, ReproStudy, ReproValid,
    StudyRuns, ANSWERED_COLUMNS,
};
use super::Env;
use crate::display::Table;
use crate::env::Scale;
use crate::pipeline::study::ModelPool;
use crate::Result;
use std::collections::BTreeMap;

/// Result folder: `data/results/report004/` (`report004-quick/` at the quick scale).
pub const NAME: &str = "report004";

/// The file printed when a fresh result is skipped.
pub const SUMMARY_FILE: &str = "table.md";

/// (system, config file, report EM, F1, s/query, context precision): report 004's table;
/// the context precision as the seed report prints it.
pub const SYSTEMS: [(&str, &str, f64, f64, f64, f64); 2] = [
    (
        "naive",
        "configs/report004_naive.toml",
        43.14,
        52.92,
        2.17,
        0.74,
    ),
    (
        "enhanced",
        "configs/report004_enhanced.toml",
        42.59,
        54.12,
        7.50,
        0.87,
    ),
];

/// The published parameters at `scale`: 5 questions per system at the quick scale (the
/// quick cross-encoder), a seeded sample of 60 test-side questions at the default scale,
/// all of them at the paper scale.
pub fn params(scale: Scale) -> ReproParams {
    let systems = SYSTEMS
        .iter()
        .map(|s| ConfigSystem::new(s.0, s.1))
        .collect();
    ReproParams::at_scale(scale, systems, 60, Some(0))
}

/// What the study found: the table beside the report's, details, paired tests.
pub type Report004 = ReproResult;

/// `params` checked, as the [`Study`](super::Study) `scripts/bin/exp_report004` runs
/// ([`super::execute`]).
pub fn study(params: ReproParams) -> Result<ReproStudy<Report004>> {
    Ok(ReproStudy::new(params.check()?, NAME, SUMMARY_FILE, run))
}

/// Run both systems for every reader on `pool`'s models and build the tables.
pub fn run(env: &Env, params: &ReproValid, pool: &mut ModelPool) -> Result<Report004> {
    let runs = run_study(pool, params.configs(env)?)?;
    let out = tables(params, runs)?;
    out.runs.remove_journals()?;
    Ok(out)
}

/// The tables of `runs`.
pub fn tables(params: &ReproValid, runs: StudyRuns) -> Result<Report004> {
    let mut rows = Vec::new();
    let mut details = Table::new(ANSWERED_COLUMNS.into_iter().chain([
        "context precision (rank-aware)",
        "s/q transform",
        "s/q retrieve",
        "s/q rerank",
        "s/q read",
        "rewrites repaired",
    ]))
    .caption("Abstentions counted apart, rank-aware context precision (average precision, over the questions whose golds are not all yes / no), mean seconds per question by stage");
    for r in &runs.0 {
        let s = r.run.summary();
        let report = SYSTEMS.iter().find(|x| x.0 == r.system);
        let label = format!("{} ({})", r.system, short_name(&r.reader));
        for (i, (metric, ours)) in [
            ("EM", Some(s.em)),
            ("F1", Some(s.f1)),
            ("s/query", Some(s.seconds_per_question)),
            ("context precision", s.context_precision),
        ]
        .into_iter()
        .enumerate()
        {
            rows.push(Compared {
                system: label.clone(),
                metric: metric.into(),
                ours,
                report: report.map(|x| [x.2, x.3, x.4, x.5][i]),
            });
        }
        let mut cells = answered_cells(&label, &s, r.run.answer_match);
        cells.extend([
            s.context_average_precision
                .map_or("–".into(), |v| format!("{v:.3}")),
            format!("{:.2}", s.mean_times.transform),
            format!("{:.3}", s.mean_times.retrieve),
            format!("{:.3}", s.mean_times.rerank),
            format!("{:.2}", s.mean_times.read),
            s.transform_repaired.to_string(),
        ]);
        details.push(cells)?;
    }
    let compared = runs.against_baseline("naive", params.trials, params.seed)?;
    let significance = compared.table()?.caption(significance_note(&compared));
    let intervals = intervals(&runs, params.trials, params.seed)?;
    let outcomes = runs.outcomes()?;
    let n = runs.question_count();
    let table = side_by_side(
        &rows,
        &BTreeMap::from([("context precision", 3)]),
        &format!(
            "Report 004 on RAG Mini Wikipedia: {n} test-side questions (seeded sample, seed 42{}); report: 918 questions, Flan-T5-base. s/query measured at load {}",
            if params.questions == Some(0) { ", all" } else { "" },
            load_average()
        ),
    );
    Ok(ReproResult {
        params: (**params).clone(),
        substitutions: substitutions(n, &params.readers, params.scale),
        runs,
        table,
        details,
        significance,
        intervals,
        outcomes,
    })
}

fn substitutions(n: usize, readers: &[String], scale: Scale) -> String {
    let recipe = if scale == Scale::Quick {
        "`trained:minilm-ce` at the quick scale (the `minilm-ce-quick` recipe, 400 groups)"
    } else {
        "`trained:minilm-ce`"
    };
    format!(
        "Substitutions against report 004:\n\
         - generator and query rewriter: Flan-T5-base → {} (GGUF, candle), one loaded copy shared by the rewrite and the reader; greedy decoding (the report: beam search 3 / 4, no sampling);\n\
         - re-ranker: cross-encoder ms-marco-MiniLM-L-6-v2 → the workbench's cross-encoder {recipe} (all-MiniLM-L6-v2 fine-tuned on this CPU by `train_reranker` on SQuAD training-article, RAG Mini training-side and NQ distant-supervision groups; never on these questions), over the 10 candidates;\n\
         - vector search: Milvus cosine → FAISS flat inner product over normalised all-MiniLM-L6-v2 vectors (the same model as the report);\n\
         - generation prompt: not printed in the report → report 001's RAG prompt (`data/prompts/rag_001.txt`); rewrite prompt: report 004's, byte for byte (`data/prompts/rewrite_004.txt`), sent as the chat user message;\n\
         - questions: {n} of the test side of RAG Mini's seeded id-hash split (~30 % of 918, the questions the cross-encoder never trained on; seeded sample, seed 42, unless all are run);\n\
         - context precision: share of the passages given to the reader that contain a gold answer (SQuAD-normalised, the gold's tokens as a contiguous run of the passage's), averaged over the questions with a gold that can be looked for in a passage (yes / no golds have none: see `questions with context precision` in each run's summary); the report does not define its measure (RAGAS-style). The report's figures are the seed report's: naive 0.74, enhanced 0.87;\n\
         - time per query: wall-clock seconds on this machine's cores, all stages (transform + retrieve + re-rank + read); the report's machine is not named.\n",
        readers.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_per_scale() {
        assert_eq!(params(Scale::Quick).questions, Some(5));
        assert_eq!(params(Scale::Default).questions, Some(60));
        assert_eq!(params(Scale::Paper).questions, Some(0));
        assert!(params(Scale::Paper).check().is_ok());
    }

    #[test]
    fn tables_of_no_runs_are_empty_not_an_error() {
        let v = params(Scale::Quick).check().unwrap();
        let r = tables(&v, StudyRuns::default()).unwrap();
        assert!(r.table.rows.is_empty() && r.details.rows.is_empty());
        assert!(r.substitutions.contains("0 of the test side"));
    }
}
