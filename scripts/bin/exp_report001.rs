//! Report 001's Tables 2–4 and its paired significance tests on RAG Mini Wikipedia:
//! sliding-window chunks of 300 words with overlap 100, dense / sparse (BM25) / hybrid
//! (min-max, 0.5 / 0.5) retrieval of the top 5 chunks and a closed-book baseline, report
//! 001's Appendix A prompts, temperature 0.4.
//!
//! ```text
//! cargo run --release --bin exp_report001 -- [--scale quick|default|paper] [--questions N] [--reader ASSET]... [--force]
//! ```
//!
//! Configs: `configs/report001_{dense,sparse,hybrid,closed_book}.toml`. Default scale: a
//! seeded sample of `--questions` (default 25) of the 918 questions; `--scale paper` runs the
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
use workbench::evaluate::groups;
use workbench::pipeline::study::{
    finish_study, load_average, push_comparisons, question_count, run_study, short_name as short,
    side_by_side, significance_table, start_study, study_configs, Compared, FullScale, ModelPool,
    StudyArgs,
};

const NAME: &str = "report001";

#[derive(Parser, Serialize)]
#[command(about = "Reproduce report 001's Tables 2-4 and significance tests")]
struct Args {
    /// Seeded sample of this many questions (default scale; 0 = all 918; `--scale paper`: the
    /// configs' 150, the report's test-set size).
    #[arg(long, default_value_t = 25)]
    questions: usize,
    #[command(flatten)]
    #[serde(flatten)]
    study: StudyArgs,
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

fn main() -> Result<()> {
    let args = Args::parse();
    let study = &args.study;
    let root = workbench::paths::project_root()?;
    let files: Vec<(&str, &str)> = SYSTEMS.iter().map(|s| (s.0, s.1)).collect();
    let configs = study_configs(&root, &files, study, args.questions, FullScale::ConfigLimit)?;
    let Some(exp) = start_study(NAME, study.scale, &args, &configs, study.force, "table2.md")?
    else {
        return Ok(());
    };
    let out = &exp.out;
    let mut pool = ModelPool::default();
    let runs = run_study(&mut pool, configs, out, |_, _| Ok(()))?;
    let label = |reader: &str, system: &str| {
        if study.readers.len() == 1 {
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
    let n = question_count(&runs);

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
            study.readers.iter().map(|r| short(r)).collect::<Vec<_>>().join(", "),
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
    let t3 = join_report_t3(&ours_t3, &report_t3, study.readers.len() == 1)?;

    // Table 4: winners.
    let winners = groups::winners(&df, 2)?;
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
    let mut sig = significance_table().caption(format!(
        "Paired tests per question (EM 0/1, F1 0–1); randomisation and bootstrap {} trials, seed {}. Report 001: dense vs sparse significant, hybrid vs dense not",
        study.trials, study.seed
    ));
    for (reader, by_system) in &runs {
        for (a, b) in PAIRS {
            let (Some(ra), Some(rb)) = (by_system.get(a), by_system.get(b)) else {
                continue;
            };
            push_comparisons(&mut sig, reader, (a, ra), (b, rb), study.trials, study.seed)?;
        }
    }

    let subs = substitutions(n, &study.readers);
    let per_question = groups::to_table(&df, 4)?;
    let t2md = format!("{}\n{}", table2.to_markdown(), overall_t.to_markdown());
    let (t3md, t4md, sigmd) = (t3.to_markdown(), t4.to_markdown(), sig.to_markdown());
    let printed = format!("{t2md}\n{t3md}\n{t4md}\n{sigmd}\n{subs}");
    finish_study(
        exp,
        &[
            ("table2.csv", &table2),
            ("overall.csv", &overall_t),
            ("table3.csv", &t3),
            ("table4.csv", &t4),
            ("significance.csv", &sig),
            ("per_question.csv", &per_question),
        ],
        &[
            ("table2.md", &t2md),
            ("table3.md", &t3md),
            ("table4.md", &t4md),
            ("significance.md", &sigmd),
            ("substitutions.md", &subs),
        ],
        &printed,
        n,
        &study.readers,
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
