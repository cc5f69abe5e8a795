//! Report 002's table (feature `llm`): baseline RAG against RAG-Fusion (5 LLM
//! paraphrases of each question, each retrieved, the runs fused with RRF k = 60) on
//! answerable SQuAD 2.0 questions over the paragraphs of the dev half; F1 and EM beside
//! the report's (baseline 63.55 / 55, fusion 59.23 / 52).
//!
//! The systems are `configs/report002_baseline.toml`, `configs/report002_span.toml` (the
//! baseline read with a span prompt), `configs/report002_fusion.toml` (the 5 paraphrases
//! asked for in one call as a numbered list) and two controls, `report002_oracle.toml`
//! (the gold paragraph) and `report002_random.toml` (random paragraphs); [`with_each`] adds
//! `configs/report002_fusion_each.toml` (report 002's own `paraphrase: {question}` input,
//! 5 calls sampled at temperature 0.5, as the report sampled T5). Default scale: a
//! seeded sample of 24 of the 100 questions the report used; paper: the configs' 100.

use super::repro::{
    answered_cells, intervals, load_average, run_study, short_name, side_by_side,
    significance_note, Compared, ConfigSystem, ReproParams, ReproResult, ReproStudy, ReproValid,
    StudyRuns, ANSWERED_COLUMNS,
};
use super::Env;
use crate::display::Table;
use crate::env::Scale;
use crate::pipeline::study::ModelPool;
use crate::pipeline::{PipelineConfig, PipelineRun};
use crate::Result;
use std::collections::BTreeMap;

/// Result folder: `data/results/report002/` (`report002-quick/` at the quick scale).
pub const NAME: &str = "report002";

/// The file printed when a fresh result is skipped.
pub const SUMMARY_FILE: &str = "table.md";

/// (system, config file, report F1, EM). `span` is the baseline read with a span prompt,
/// the stand-in for the report's SQuAD-fine-tuned T5 (an extractive-style generator);
/// `oracle` and `random` are controls (the gold paragraph; 5 random paragraphs), with no
/// number in the report.
pub const SYSTEMS: [(&str, &str, Option<f64>, Option<f64>); 6] = [
    (
        "baseline",
        "configs/report002_baseline.toml",
        Some(63.55),
        Some(55.0),
    ),
    (
        "span",
        "configs/report002_span.toml",
        Some(63.55),
        Some(55.0),
    ),
    (
        "fusion",
        "configs/report002_fusion.toml",
        Some(59.23),
        Some(52.0),
    ),
    ("oracle", "configs/report002_oracle.toml", None, None),
    ("random", "configs/report002_random.toml", None, None),
    (
        "fusion-each",
        "configs/report002_fusion_each.toml",
        Some(59.23),
        Some(52.0),
    ),
];

/// The system every other is tested against.
pub const BASELINE: &str = "baseline";

/// The published parameters at `scale` (baseline, span, fusion and the two controls): 5
/// questions per system at the quick scale, a seeded sample of 24 at the default scale, the
/// configs' 100 at the paper scale.
pub fn params(scale: Scale) -> ReproParams {
    let systems = SYSTEMS[..5]
        .iter()
        .map(|s| ConfigSystem::new(s.0, s.1))
        .collect();
    ReproParams::at_scale(scale, systems, 24, None)
}

/// `params` with `fusion-each` (report 002's own paraphrase input, one sampled call per
/// paraphrase) added.
pub fn with_each(mut params: ReproParams) -> ReproParams {
    let (name, config, ..) = SYSTEMS[5];
    if !params.systems.iter().any(|s| s.name == name) {
        params.systems.push(ConfigSystem::new(name, config));
    }
    params
}

/// What the study found: the table beside the report's, details, paired tests.
pub type Report002 = ReproResult;

/// `params` checked, as the [`Study`](super::Study) `scripts/bin/exp_report002` runs
/// ([`super::execute`]).
pub fn study(params: ReproParams) -> Result<ReproStudy<Report002>> {
    Ok(ReproStudy::new(params.check()?, NAME, SUMMARY_FILE, run))
}

/// Run every system for every reader on `pool`'s models and build the tables.
pub fn run(env: &Env, params: &ReproValid, pool: &mut ModelPool) -> Result<Report002> {
    let configs = params.configs(env)?;
    let mut gold = BTreeMap::new();
    for c in &configs {
        gold.insert(c.system.clone(), gold_paragraphs(env, &c.config)?);
    }
    let runs = run_study(pool, configs)?;
    let out = tables(params, runs, &gold)?;
    out.runs.remove_journals()?;
    Ok(out)
}

/// The tables of `runs`; `gold`: per system, question id → its own paragraph id.
pub fn tables(
    params: &ReproValid,
    runs: StudyRuns,
    gold: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<Report002> {
    let mut rows = Vec::new();
    let mut details = Table::new(ANSWERED_COLUMNS.into_iter().chain([
        "gold passage retrieved (%)",
        "mean queries",
        "questions short of 5 paraphrases",
        "s/q transform",
        "s/q retrieve",
        "s/q read",
        "prompt",
    ]))
    .caption("Abstentions counted apart; gold passage = the question's own SQuAD paragraph among the reader's passages; paraphrase counts; mean seconds per question by stage; the reader's prompt (data/prompts/)");
    let none = BTreeMap::new();
    for r in &runs.0 {
        let s = r.run.summary();
        let report = SYSTEMS.iter().find(|x| x.0 == r.system);
        let label = format!("{} ({})", r.system, short_name(&r.reader));
        for (metric, ours, theirs) in [
            ("F1", s.f1, report.and_then(|x| x.2)),
            ("EM", s.em, report.and_then(|x| x.3)),
        ] {
            rows.push(Compared {
                system: label.clone(),
                metric: metric.into(),
                ours: Some(ours),
                report: theirs,
            });
        }
        let nq = r.run.records.len().max(1) as f64;
        let found = gold_found(&r.run, gold.get(&r.system).unwrap_or(&none));
        let mut cells = answered_cells(&label, &s, r.run.answer_match);
        cells.extend([
            format!("{:.1}", 100.0 * found as f64 / nq),
            format!(
                "{:.2}",
                r.run
                    .records
                    .iter()
                    .map(|x| x.queries.len().max(1) as f64)
                    .sum::<f64>()
                    / nq
            ),
            s.transform_repaired.to_string(),
            format!("{:.2}", s.mean_times.transform),
            format!("{:.3}", s.mean_times.retrieve),
            format!("{:.2}", s.mean_times.read),
            std::path::Path::new(&r.run.config.reader.prompt)
                .file_name()
                .map_or_else(String::new, |f| f.to_string_lossy().into_owned()),
        ]);
        details.push(cells)?;
    }
    let compared = runs.against_baseline(BASELINE, params.trials, params.seed)?;
    let significance = compared.table()?.caption(significance_note(&compared));
    let intervals = intervals(&runs, params.trials, params.seed)?;
    let outcomes = runs.outcomes()?;
    let n = runs.question_count();
    let table = side_by_side(
        &rows,
        &BTreeMap::new(),
        &format!(
            "Report 002 on SQuAD 2.0: {n} answerable questions of the mirrored dev half (seeded sample, seed 42) over its paragraphs, BM25 top 5; report: 100 training questions, T5-large. Load {}",
            load_average()
        ),
    );
    Ok(ReproResult {
        params: (**params).clone(),
        substitutions: substitutions(n, &params.readers),
        runs,
        table,
        details,
        significance,
        intervals,
        outcomes,
    })
}

/// Questions of `run` whose own paragraph (`gold`) was among the reader's passages.
pub fn gold_found(run: &PipelineRun, gold: &BTreeMap<String, String>) -> usize {
    run.records
        .iter()
        .filter(|r| {
            gold.get(&r.id)
                .is_some_and(|g| r.passage_ids.iter().any(|p| p == g))
        })
        .count()
}

/// Question id → the id of its own SQuAD paragraph (as the pipeline's `squad` corpus
/// names paragraphs), to count how often the reader saw it.
pub fn gold_paragraphs(env: &Env, config: &PipelineConfig) -> Result<BTreeMap<String, String>> {
    let path = if config.questions.path.is_empty() {
        let asset = if config.questions.asset.is_empty() {
            "squad-v2-dev-half"
        } else {
            config.questions.asset.as_str()
        };
        env.assets.resolve(asset, "dev-v2.0.json")?
    } else {
        config.resolve(&config.questions.path)
    };
    let set = crate::load::squad::load(&path)?;
    Ok(set
        .examples
        .iter()
        .filter_map(|e| e.context_id.clone().map(|c| (e.id.clone(), c)))
        .collect())
}

fn substitutions(n: usize, readers: &[String]) -> String {
    format!(
        "Substitutions against report 002:\n\
         - generator and paraphraser: T5-large → {} (GGUF, candle), one loaded copy shared by the paraphrase transform and the reader, greedy answers; report 002 does not print its T5 input. `baseline` and `fusion` read with report 001's RAG prompt (`rag_001.txt`, answers in a sentence or less); `span` is the baseline read with a span prompt (`extractive.txt`, the shortest span copied from the passages), the stand-in for a T5 fine-tuned on SQuAD, which answers with spans; the details table names each row's prompt;\n\
         - paraphrases: report 002 sampled 5 outputs of T5 from `paraphrase: {{question}}` (num_beams 10, temperature 0.5); `fusion` asks the chat model for 5 numbered paraphrases in one greedy call (`data/prompts/paraphrase_list.txt`), `fusion-each` (with `--each`) sends report 002's own input 5 times sampled at temperature 0.5, seeds 42–46. Duplicates are dropped and a count short of 5 is recorded in the traces (`transform_note`), never padded;\n\
         - questions and corpus: {n} answerable questions sampled (seed 42) from the mirrored SQuAD 2.0 dev half, retrieved from that half's paragraphs (the report: 100 samples of the training set, retrieved from the training set);\n\
         - retriever: BM25 (k1 0.9, b 0.4) top 5 for every query (the report's slides describe TF-IDF and BM25 but do not name the one used); RRF k = 60 over the 5 paraphrases' runs, as in the report;\n\
         - controls (not in the report): `oracle` gives the reader the question's own paragraph, `random` 5 paragraphs drawn at random (seeded by the question and seed 42), both with the baseline's prompt: they bound what retrieval can add;\n\
         - scoring: SQuAD's EM and F1 on the answer text (an abstention scores as the empty prediction).\n",
        readers.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_per_scale_and_each() {
        assert_eq!(params(Scale::Quick).questions, Some(5));
        assert_eq!(params(Scale::Default).questions, Some(24));
        assert_eq!(params(Scale::Paper).questions, None);
        let p = with_each(with_each(params(Scale::Default)));
        let names: Vec<&str> = p.systems.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "baseline",
                "span",
                "fusion",
                "oracle",
                "random",
                "fusion-each"
            ]
        );
        assert!(p.check().is_ok());
    }

    #[test]
    fn gold_paragraphs_of_the_baseline_config() {
        let env = Env::project().unwrap();
        let c = PipelineConfig::from_file(&env.resolve(SYSTEMS[0].1)).unwrap();
        let g = gold_paragraphs(&env, &c).unwrap();
        assert!(g.len() > 1000, "{}", g.len());
        // Several questions share a paragraph; ids are not empty.
        assert!(g.values().all(|p| !p.is_empty()));
    }
}
