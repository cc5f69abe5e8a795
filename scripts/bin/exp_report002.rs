//! Report 002's table: baseline RAG against RAG-Fusion (5 LLM paraphrases of each
//! question, each retrieved, the runs fused with RRF k = 60) on answerable SQuAD 2.0
//! questions over the paragraphs of the mirrored dev half; F1 and EM beside the report's
//! (baseline 63.55 / 55, fusion 59.23 / 52).
//!
//! ```text
//! cargo run --release --bin exp_report002 -- [--scale quick|default|paper] [--questions N] [--reader ASSET]... [--each] [--force]
//! ```
//!
//! Configs: `configs/report002_baseline.toml`, `configs/report002_fusion.toml` (the 5
//! paraphrases asked for in one call as a numbered list) and, with `--each`,
//! `configs/report002_fusion_each.toml` (report 002's own `paraphrase: {question}` input,
//! 5 calls sampled at temperature 0.5, as the report sampled T5). Default scale: a seeded
//! sample of `--questions` (default 24: about 27 min on 2 cores) of the 100 the report used (`--scale paper`: 100, seed
//! 42, the configs' `limit`). Writes `data/results/report002/`: `table.md` / `.csv`,
//! `details.csv` (abstentions apart, paraphrase counts, seconds per stage),
//! `significance.csv` (fusion against baseline, paired tests on EM and F1),
//! `substitutions.md`, and per reader and system the traces (with every paraphrase and the
//! model's raw output), SQuAD predictions and resolved config.

use anyhow::Result;
use clap::Parser;
use serde::Serialize;
use std::collections::BTreeMap;
use workbench::display::Table;
use workbench::pipeline::study::{
    answered_cells, finish_study, load_average, push_comparisons, question_count, run_study,
    short_name as short, side_by_side, significance_table, start_study, study_configs, Compared,
    FullScale, ModelPool, StudyArgs, ANSWERED_COLUMNS,
};
use workbench::pipeline::PipelineConfig;

const NAME: &str = "report002";

#[derive(Parser, Serialize)]
#[command(about = "Reproduce report 002's baseline RAG vs RAG-Fusion table")]
struct Args {
    /// Seeded sample of this many questions (default scale; `--scale paper`: the report's 100,
    /// the configs' seeded sample).
    #[arg(long, default_value_t = 24)]
    questions: usize,
    /// Also run RAG-Fusion with report 002's own prompt, one sampled call per paraphrase.
    #[arg(long)]
    each: bool,
    #[command(flatten)]
    #[serde(flatten)]
    study: StudyArgs,
}

/// (system, config file, report F1, EM).
const SYSTEMS: [(&str, &str, Option<f64>, Option<f64>); 3] = [
    (
        "baseline",
        "configs/report002_baseline.toml",
        Some(63.55),
        Some(55.0),
    ),
    (
        "fusion",
        "configs/report002_fusion.toml",
        Some(59.23),
        Some(52.0),
    ),
    (
        "fusion-each",
        "configs/report002_fusion_each.toml",
        Some(59.23),
        Some(52.0),
    ),
];

fn main() -> Result<()> {
    let args = Args::parse();
    let study = &args.study;
    let root = workbench::paths::project_root()?;
    let files: Vec<(&str, &str)> = SYSTEMS
        .iter()
        .filter(|s| args.each || s.0 != "fusion-each")
        .map(|s| (s.0, s.1))
        .collect();
    let configs = study_configs(&root, &files, study, args.questions, FullScale::ConfigLimit)?;
    let Some(exp) = start_study(NAME, study.scale, &args, &configs, study.force, "table.md")?
    else {
        return Ok(());
    };
    let mut pool = ModelPool::default();
    let mut rows = Vec::new();
    let mut details = Table::new(ANSWERED_COLUMNS.into_iter().chain([
        "gold passage retrieved (%)",
        "mean queries",
        "questions short of 5 paraphrases",
        "s/q transform",
        "s/q retrieve",
        "s/q read",
    ]))
    .caption("Abstentions counted apart; gold passage = the question's own SQuAD paragraph among the reader's passages; paraphrase counts; mean seconds per question by stage");
    let runs = run_study(&mut pool, configs, &exp.out, |c, run| {
        let gold = gold_paragraphs(&c.config)?;
        let s = run.summary();
        let (.., f1, em) = SYSTEMS
            .iter()
            .find(|x| x.0 == c.system)
            .copied()
            .expect("known");
        let label = format!("{} ({})", c.system, short(&c.reader));
        rows.push(Compared {
            system: label.clone(),
            metric: "F1".into(),
            ours: Some(s.f1),
            report: f1,
        });
        rows.push(Compared {
            system: label.clone(),
            metric: "EM".into(),
            ours: Some(s.em),
            report: em,
        });
        let found = run
            .records
            .iter()
            .filter(|r| {
                gold.get(&r.id)
                    .is_some_and(|g| r.passage_ids.iter().any(|p| p == g))
            })
            .count();
        let nq = run.records.len().max(1) as f64;
        let mut cells = answered_cells(&label, &s);
        cells.extend([
            format!("{:.1}", 100.0 * found as f64 / nq),
            format!(
                "{:.2}",
                run.records
                    .iter()
                    .map(|r| r.queries.len().max(1) as f64)
                    .sum::<f64>()
                    / nq
            ),
            s.transform_repaired.to_string(),
            format!("{:.2}", s.mean_times.transform),
            format!("{:.3}", s.mean_times.retrieve),
            format!("{:.2}", s.mean_times.read),
        ]);
        details.push(cells)?;
        Ok(())
    })?;
    let mut sig = significance_table();
    for (reader, by_system) in &runs {
        let base = &by_system["baseline"];
        for (system, run) in by_system.iter().filter(|(s, _)| *s != "baseline") {
            push_comparisons(
                &mut sig,
                reader,
                (system, run),
                ("baseline", base),
                study.trials,
                study.seed,
            )?;
        }
    }
    let n = question_count(&runs);
    let table = side_by_side(
        &rows,
        &BTreeMap::new(),
        &format!(
            "Report 002 on SQuAD 2.0: {n} answerable questions of the mirrored dev half (seeded sample, seed 42) over its paragraphs, BM25 top 5; report: 100 training questions, T5-large. Load {}",
            load_average()
        ),
    );
    let subs = substitutions(n, &study.readers);
    let md = format!(
        "{}\n{}\n{}\n{subs}",
        table.to_markdown(),
        details.to_markdown(),
        sig.to_markdown()
    );
    finish_study(
        exp,
        &[
            ("table.csv", &table),
            ("details.csv", &details),
            ("significance.csv", &sig),
        ],
        &[("table.md", &md), ("substitutions.md", &subs)],
        &md,
        n,
        &study.readers,
    )?;
    Ok(())
}

/// Question id → the id of its own SQuAD paragraph (as the pipeline's `squad` corpus
/// names paragraphs), to count how often the reader saw it.
fn gold_paragraphs(config: &PipelineConfig) -> workbench::Result<BTreeMap<String, String>> {
    let assets = workbench::assets::Assets::load()?;
    let path = if config.questions.path.is_empty() {
        let asset = if config.questions.asset.is_empty() {
            "squad-v2-dev-half"
        } else {
            config.questions.asset.as_str()
        };
        assets.resolve(asset, "dev-v2.0.json")?
    } else {
        config.resolve(&config.questions.path)
    };
    let set = workbench::load::squad::load(&path)?;
    Ok(set
        .examples
        .iter()
        .filter_map(|e| e.context_id.clone().map(|c| (e.id.clone(), c)))
        .collect())
}

fn substitutions(n: usize, readers: &[String]) -> String {
    format!(
        "Substitutions against report 002:\n\
         - generator and paraphraser: T5-large → {} (GGUF, candle), one loaded copy shared by the paraphrase transform and the reader, greedy answers; the reader prompt is report 001's RAG prompt (report 002 does not print its T5 input);\n\
         - paraphrases: report 002 sampled 5 outputs of T5 from `paraphrase: {{question}}` (num_beams 10, temperature 0.5); `fusion` asks the chat model for 5 numbered paraphrases in one greedy call (`data/prompts/paraphrase_list.txt`), `fusion-each` (with `--each`) sends report 002's own input 5 times sampled at temperature 0.5, seeds 42–46. Duplicates are dropped and a count short of 5 is recorded in the traces (`transform_note`), never padded;\n\
         - questions and corpus: {n} answerable questions sampled (seed 42) from the mirrored SQuAD 2.0 dev half, retrieved from that half's paragraphs (the report: 100 samples of the training set, retrieved from the training set);\n\
         - retriever: BM25 (k1 0.9, b 0.4) top 5 for every query (the report's slides describe TF-IDF and BM25 but do not name the one used); RRF k = 60 over the 5 paraphrases' runs, as in the report;\n\
         - scoring: SQuAD's EM and F1 on the answer text (an abstention scores as the empty prediction).\n",
        readers.join(", ")
    )
}
