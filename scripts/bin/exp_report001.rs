//! Report 001's Tables 2–4 and its paired significance tests on RAG Mini Wikipedia:
//! sliding-window chunks of 300 words with overlap 100, dense / sparse (BM25) / hybrid
//! (min-max, 0.5 / 0.5) retrieval of the top 5 chunks and a closed-book baseline, report
//! 001's Appendix A prompts, temperature 0.4.
//!
//! ```text
//! cargo run --release --bin exp_report001 -- [--questions N | --full] [--reader ASSET]... [--force]
//! ```
//!
//! Configs: `configs/report001_{dense,sparse,hybrid,closed_book}.toml`. Default scale: a
//! seeded sample of `--questions` (default 40) of the 918 questions; `--full` runs the
//! configs' 150 (the report's test-set size; `--questions 0` runs all 918). Writes
//! `data/results/report001/`: `table2.md` (overall EM/F1 beside the report's, abstentions
//! apart), `table3.md` (per question group, polars group-bys, beside the report's),
//! `table4.md` (winner per group by F1, beside the report's), `significance.csv` (paired
//! t, randomisation, bootstrap and studentised bootstrap tests on EM and F1 for every
//! pair the report discusses), `per_question.csv` (the table every other one is computed
//! from), `substitutions.md`, and per reader and system the traces, SQuAD predictions and
//! resolved config.

use anyhow::{Context, Result};
use clap::Parser;
use serde::Serialize;
use std::collections::BTreeMap;
use workbench::display::Table;
use workbench::evaluate::{groups, significance};
use workbench::pipeline::study::{
    load_average, run_config, scaled, side_by_side, Compared, ModelPool,
};
use workbench::pipeline::{PipelineConfig, PipelineRun};
use workbench::results::{executable_sha256, Experiment};

const NAME: &str = "report001";
const MAIN_READER: &str = "qwen2.5-coder-1.5b-instruct-gguf";

#[derive(Parser, Serialize)]
#[command(about = "Reproduce report 001's Tables 2-4 and significance tests")]
struct Args {
    /// Seeded sample of this many questions (default scale; 0 = all 918).
    #[arg(long, default_value_t = 40)]
    questions: usize,
    /// The configs' 150 questions (the report's test-set size).
    #[arg(long)]
    full: bool,
    /// Reader model asset(s); one set of systems each.
    #[arg(long = "reader", default_values_t = [MAIN_READER.to_string()])]
    readers: Vec<String>,
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

/// (system, config file, report EM, F1): Table 2.
const SYSTEMS: [(&str, &str, f64, f64); 4] = [
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
const TABLE3: [(&str, [Cell; 4]); 8] = [
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
const PAIRS: [(&str, &str); 5] = [
    ("dense", "sparse"),
    ("hybrid", "dense"),
    ("dense", "closed-book"),
    ("sparse", "closed-book"),
    ("hybrid", "closed-book"),
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
    let Some(exp) = Experiment::start(NAME, &resolved, args.force, "table2.md")? else {
        return Ok(());
    };
    let out = &exp.out;
    let mut pool = ModelPool::default();
    let mut runs: BTreeMap<String, BTreeMap<String, PipelineRun>> = BTreeMap::new();
    for (reader, system, config) in configs {
        println!(
            "== {} / {system}: {} questions (load {})",
            short(&reader),
            config.questions.limit,
            load_average()
        );
        let run = run_config(&mut pool, config).with_context(|| format!("{reader} / {system}"))?;
        run.write(&out.path(&format!("{}/{system}", short(&reader))))?;
        println!("{}", run.summary().to_table().to_markdown());
        runs.entry(reader.clone()).or_default().insert(system, run);
    }
    let label = |reader: &str, system: &str| {
        if args.readers.len() == 1 {
            system.to_string()
        } else {
            format!("{system} ({})", short(reader))
        }
    };
    // The per-question table: every other table is a polars query over it.
    let mut scores = Vec::new();
    for (reader, by_system) in &runs {
        for (system, run) in by_system {
            scores.extend(run.question_scores(&label(reader, system)));
        }
    }
    let df = groups::per_question_frame(&scores)?;
    let n = runs
        .values()
        .next()
        .and_then(|m| m.values().next())
        .map_or(0, |r| r.records.len());

    // Table 2.
    let overall = groups::overall(&df)?;
    let mut rows = Vec::new();
    for (reader, by_system) in &runs {
        for (system, em, f1) in SYSTEMS.iter().map(|s| (s.0, s.2, s.3)) {
            let Some(run) = by_system.get(system) else {
                continue;
            };
            let s = run.summary();
            let l = label(reader, system);
            rows.push(Compared {
                system: l.clone(),
                metric: "EM".into(),
                ours: Some(s.em),
                report: Some(em),
            });
            rows.push(Compared {
                system: l,
                metric: "F1".into(),
                ours: Some(s.f1),
                report: Some(f1),
            });
        }
    }
    let table2 = side_by_side(
        &rows,
        &BTreeMap::new(),
        &format!(
            "Table 2 of report 001 on RAG Mini Wikipedia: {n} questions (seeded sample, seed 42), readers {}; report: 150 questions on a scraped Pittsburgh/CMU corpus, Llama 3.1 8B. Load {}",
            args.readers.iter().map(|r| short(r)).collect::<Vec<_>>().join(", "),
            load_average()
        ),
    );
    let overall_t = groups::to_table(&overall, 2)?
        .caption("Per system: abstentions (\"Not found\") counted apart; em_answered / f1_answered over the questions answered");

    // Table 3: ours (polars group-by) beside the report's.
    let by_group = groups::by_group(&df)?;
    let ours_t3 = groups::to_table(&by_group, 2)?;
    let mut report_t3 = Table::new(["group", "system", "em (report)", "f1 (report)"]);
    for (g, cells) in TABLE3 {
        for (s, em, f1) in cells {
            report_t3.push([
                g.to_string(),
                s.to_string(),
                format!("{em:.2}"),
                format!("{f1:.2}"),
            ])?;
        }
    }
    let t3 = join_report_t3(&ours_t3, &report_t3, args.readers.len() == 1)?;

    // Table 4: winners.
    let winners = groups::winners(&df)?;
    let win_t = groups::to_table(&winners, 2)?;
    let mut t4 = Table::new([
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
    for i in 0..win_t.rows.len() {
        let r = &win_t.rows[i];
        let (rw, rf) = report_winner(&r[0]);
        t4.push([
            r[0].clone(),
            r[1].clone(),
            r[2].clone(),
            r[3].clone(),
            rw,
            rf,
        ])?;
    }

    // Significance.
    let mut sig = Table::new(
        ["reader", "metric", "system", "baseline"]
            .into_iter()
            .map(String::from)
            .chain(significance::Comparison::COLUMNS.iter().map(|s| s.to_string())),
    )
    .caption(format!(
        "Paired tests per question (EM 0/1, F1 0–1); randomisation and bootstrap {} trials, seed {}. Report 001: dense vs sparse significant, hybrid vs dense not",
        args.trials, args.seed
    ));
    for (reader, by_system) in &runs {
        for (a, b) in PAIRS {
            let (Some(ra), Some(rb)) = (by_system.get(a), by_system.get(b)) else {
                continue;
            };
            for metric in ["em", "f1"] {
                let c = significance::compare(
                    &ra.per_query(metric)?,
                    &rb.per_query(metric)?,
                    args.trials,
                    args.seed,
                )?;
                let mut row = vec![short(reader), metric.into(), a.into(), b.into()];
                row.extend(c.cells());
                sig.push(row)?;
            }
        }
    }

    let subs = substitutions(n, &args.readers);
    table2.write_csv(&out.path("table2.csv"))?;
    overall_t.write_csv(&out.path("overall.csv"))?;
    t3.write_csv(&out.path("table3.csv"))?;
    t4.write_csv(&out.path("table4.csv"))?;
    sig.write_csv(&out.path("significance.csv"))?;
    groups::to_table(&df, 4)?.write_csv(&out.path("per_question.csv"))?;
    let t2md = format!("{}\n{}", table2.to_markdown(), overall_t.to_markdown());
    std::fs::write(out.path("table2.md"), &t2md)?;
    std::fs::write(out.path("table3.md"), t3.to_markdown())?;
    std::fs::write(out.path("table4.md"), t4.to_markdown())?;
    std::fs::write(out.path("significance.md"), sig.to_markdown())?;
    std::fs::write(out.path("substitutions.md"), &subs)?;
    println!(
        "{t2md}\n{}\n{}\n{}\n{subs}",
        t3.to_markdown(),
        t4.to_markdown(),
        sig.to_markdown()
    );
    println!("load: {}", load_average());
    exp.finish(
        serde_json::json!({"questions": n, "readers": args.readers, "load": load_average()}),
    )?;
    Ok(())
}

/// Our per-group rows with the report's EM and F1 for the same (group, system).
fn join_report_t3(ours: &Table, report: &Table, plain_labels: bool) -> Result<Table> {
    let gi = ours
        .header
        .iter()
        .position(|h| h == "group")
        .context("group column")?;
    let si = ours
        .header
        .iter()
        .position(|h| h == "system")
        .context("system column")?;
    let mut header = ours.header.clone();
    header.push("em (report)".into());
    header.push("f1 (report)".into());
    let mut t = Table::new(header).caption(
        "Table 3: per question group (report 001's rule, evaluate::groups), ours beside the report's (its groups hold other questions: compare the pattern, not the cells)",
    );
    for r in &ours.rows {
        // "dense (qwen…)" → "dense" for the report's look-up.
        let sys = if plain_labels {
            r[si].clone()
        } else {
            r[si].split(" (").next().unwrap_or("").to_string()
        };
        let found = report.rows.iter().find(|x| x[0] == r[gi] && x[1] == sys);
        let mut row = r.clone();
        row.push(found.map_or("–".into(), |x| x[2].clone()));
        row.push(found.map_or("–".into(), |x| x[3].clone()));
        t.push(row)?;
    }
    Ok(t)
}

/// Report 001's Table 4 winner of `group` by F1 (recomputed from its Table 3).
fn report_winner(group: &str) -> (String, String) {
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
