//! Report 002's table: baseline RAG against RAG-Fusion (5 LLM paraphrases of each
//! question, each retrieved, the runs fused with RRF k = 60) on answerable SQuAD 2.0
//! questions over the paragraphs of the mirrored dev half; F1 and EM beside the report's
//! (baseline 63.55 / 55, fusion 59.23 / 52).
//!
//! ```text
//! cargo run --release --bin exp_report002 -- [--questions N | --full] [--reader ASSET]... [--each] [--force]
//! ```
//!
//! Configs: `configs/report002_baseline.toml`, `configs/report002_fusion.toml` (the 5
//! paraphrases asked for in one call as a numbered list) and, with `--each`,
//! `configs/report002_fusion_each.toml` (report 002's own `paraphrase: {question}` input,
//! 5 calls sampled at temperature 0.5, as the report sampled T5). Default scale: a seeded
//! sample of `--questions` (default 50) of the 100 the report used (`--full`: 100, seed
//! 42, the configs' `limit`). Writes `data/results/report002/`: `table.md` / `.csv`,
//! `details.csv` (abstentions apart, paraphrase counts, seconds per stage),
//! `significance.csv` (fusion against baseline, paired tests on EM and F1),
//! `substitutions.md`, and per reader and system the traces (with every paraphrase and the
//! model's raw output), SQuAD predictions and resolved config.

use anyhow::{Context, Result};
use clap::Parser;
use serde::Serialize;
use std::collections::BTreeMap;
use workbench::display::Table;
use workbench::evaluate::significance;
use workbench::pipeline::study::{
    load_average, run_config, scaled, side_by_side, Compared, ModelPool,
};
use workbench::pipeline::{PipelineConfig, PipelineRun};
use workbench::results::{executable_sha256, Experiment};

const NAME: &str = "report002";
const MAIN_READER: &str = "qwen2.5-coder-1.5b-instruct-gguf";

#[derive(Parser, Serialize)]
#[command(about = "Reproduce report 002's baseline RAG vs RAG-Fusion table")]
struct Args {
    /// Seeded sample of this many questions (default scale).
    #[arg(long, default_value_t = 50)]
    questions: usize,
    /// The report's 100 questions (the configs' seeded sample).
    #[arg(long)]
    full: bool,
    /// Reader model asset(s); one set of rows each.
    #[arg(long = "reader", default_values_t = [MAIN_READER.to_string()])]
    readers: Vec<String>,
    /// Also run RAG-Fusion with report 002's own prompt, one sampled call per paraphrase.
    #[arg(long)]
    each: bool,
    /// Trials of the randomisation and bootstrap tests.
    #[arg(long, default_value_t = 10_000)]
    trials: usize,
    /// Seed of the significance tests.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Redo a fresh result.
    #[arg(long)]
    #[serde(skip)]
    force: bool,
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

fn short(reader: &str) -> String {
    reader
        .trim_end_matches("-gguf")
        .trim_end_matches("-instruct")
        .to_string()
}

fn main() -> Result<()> {
    let args = Args::parse();
    let root = workbench::paths::project_root()?;
    let mut configs: Vec<(String, String, PipelineConfig)> = Vec::new();
    for reader in &args.readers {
        for (system, file, ..) in SYSTEMS {
            if system == "fusion-each" && !args.each {
                continue;
            }
            let c = PipelineConfig::from_file(&root.join(file))
                .with_context(|| format!("reading {file}"))?;
            let n = if args.full {
                c.questions.limit
            } else {
                args.questions
            };
            configs.push((
                reader.clone(),
                system.to_string(),
                scaled(c, Some(n), Some(reader)),
            ));
        }
    }
    let resolved = serde_json::json!({
        "args": &args,
        "configs": configs.iter().map(|(r, s, c)| (format!("{}/{s}", short(r)), c)).collect::<BTreeMap<_, _>>(),
        "executable_sha256": executable_sha256()?,
    });
    let Some(exp) = Experiment::start(NAME, &resolved, args.force, "table.md")? else {
        return Ok(());
    };
    let mut pool = ModelPool::default();
    let mut rows = Vec::new();
    let mut details = Table::new([
        "system",
        "questions",
        "answered",
        "abstained",
        "EM (answered)",
        "F1 (answered)",
        "gold passage retrieved (%)",
        "mean queries",
        "questions short of 5 paraphrases",
        "s/q transform",
        "s/q retrieve",
        "s/q read",
    ])
    .caption("Abstentions counted apart; gold passage = the question's own SQuAD paragraph among the reader's passages; paraphrase counts; mean seconds per question by stage");
    let mut sig = Table::new(
        ["reader", "metric", "system", "baseline"]
            .into_iter()
            .map(String::from)
            .chain(
                significance::Comparison::COLUMNS
                    .iter()
                    .map(|s| s.to_string()),
            ),
    );
    let mut runs: BTreeMap<String, BTreeMap<String, PipelineRun>> = BTreeMap::new();
    for (reader, system, config) in configs {
        println!(
            "== {} / {system}: {} questions (load {})",
            short(&reader),
            config.questions.limit,
            load_average()
        );
        let gold = gold_paragraphs(&config)?;
        let run = run_config(&mut pool, config).with_context(|| format!("{reader} / {system}"))?;
        run.write(&exp.out.path(&format!("{}/{system}", short(&reader))))?;
        let s = run.summary();
        let (.., f1, em) = SYSTEMS
            .iter()
            .find(|x| x.0 == system)
            .copied()
            .expect("known");
        let label = format!("{system} ({})", short(&reader));
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
        let o = |x: Option<f64>| x.map_or("–".into(), |v| format!("{v:.2}"));
        details.push([
            label,
            s.questions.to_string(),
            s.answered.to_string(),
            s.abstained.to_string(),
            o(s.em_answered),
            o(s.f1_answered),
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
        ])?;
        runs.entry(reader.clone()).or_default().insert(system, run);
    }
    for (reader, by_system) in &runs {
        let base = &by_system["baseline"];
        for (system, run) in by_system.iter().filter(|(s, _)| *s != "baseline") {
            for metric in ["em", "f1"] {
                let c = significance::compare(
                    &run.per_query(metric)?,
                    &base.per_query(metric)?,
                    args.trials,
                    args.seed,
                )?;
                let mut row = vec![
                    short(reader),
                    metric.to_string(),
                    system.clone(),
                    "baseline".into(),
                ];
                row.extend(c.cells());
                sig.push(row)?;
            }
        }
    }
    let n = runs
        .values()
        .next()
        .and_then(|m| m.values().next())
        .map_or(0, |r| r.records.len());
    let table = side_by_side(
        &rows,
        &BTreeMap::new(),
        &format!(
            "Report 002 on SQuAD 2.0: {n} answerable questions of the mirrored dev half (seeded sample, seed 42) over its paragraphs, BM25 top 5; report: 100 training questions, T5-large. Load {}",
            load_average()
        ),
    );
    let subs = substitutions(n, &args.readers);
    let out = &exp.out;
    table.write_csv(&out.path("table.csv"))?;
    details.write_csv(&out.path("details.csv"))?;
    sig.write_csv(&out.path("significance.csv"))?;
    let md = format!(
        "{}\n{}\n{}\n{subs}",
        table.to_markdown(),
        details.to_markdown(),
        sig.to_markdown()
    );
    std::fs::write(out.path("table.md"), &md)?;
    std::fs::write(out.path("substitutions.md"), &subs)?;
    println!("{md}");
    println!("load: {}", load_average());
    exp.finish(
        serde_json::json!({"questions": n, "readers": args.readers, "load": load_average()}),
    )?;
    Ok(())
}

/// Question id → the id of its own SQuAD paragraph (as the pipeline's `squad` corpus
/// names paragraphs), to count how often the reader saw it.
fn gold_paragraphs(config: &PipelineConfig) -> Result<BTreeMap<String, String>> {
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
