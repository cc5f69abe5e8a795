//! Judge the predictions of finished runs with an LLM judge, after the fact, and print how
//! often the judge agrees with Match (the token-bounded containment).
//!
//! ```text
//! cargo run --release --example judge_traces -- JUDGE_MODEL RUN_DIR [RUN_DIR …]
//! cargo run --release --example judge_traces -- qwen2.5-coder-1.5b-instruct-gguf \
//!     data/results/report002-quick/qwen2.5-coder-1.5b/*
//! ```
//!
//! Each `RUN_DIR` is a folder `PipelineRun::write` wrote (`traces.jsonl`, `summary.json`,
//! `config.toml`); nothing is written back. The judge model is an asset name or a `.gguf`
//! path; its prompt is `data/prompts/judge.txt`.

use anyhow::{Context, Result};
use std::path::PathBuf;
use workbench::display::Table;
use workbench::evaluate::calibration;
use workbench::evaluate::judge::{cohen_kappa, says_yes, LlmJudge, DEFAULT_CUT, DEFAULT_PROMPT};
use workbench::pipeline::{PipelineConfig, PipelineRun};
use workbench::read::generative::{Llm, LoadOptions, SharedLlm};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (model, dirs) = args
        .split_first()
        .filter(|(_, d)| !d.is_empty())
        .context("usage: judge_traces JUDGE_MODEL RUN_DIR [RUN_DIR …]")?;
    let opts = LoadOptions::default();
    let llm = Llm::from_model(
        model,
        "JUDGE_MODEL",
        |p: &str| std::path::PathBuf::from(p),
        &opts,
    )?;
    let root = workbench::paths::project_root()?;
    let template = std::fs::read_to_string(root.join(DEFAULT_PROMPT))?;
    let judge = LlmJudge::new(SharedLlm::new(llm), &template)?;
    // The judge's calibrated cut for this prompt, else 0.5.
    let calibrated =
        calibration::recorded_cut(&root.join(calibration::RECORD), model, "gguf", &template)?;
    let cut = calibrated.as_ref().map_or(DEFAULT_CUT, |c| c.cut);
    let mut t = Table::new([
        "run",
        "questions",
        "Match (%)",
        "judge (%)",
        "agree (%)",
        "kappa (answered)",
        "kappa (all)",
        "mean P(Yes) | Match",
        "mean P(Yes) | no Match",
    ])
    .caption(format!(
        "LLM judge {} against Match; a verdict is \"correct\" when P(Yes) > {cut} ({})",
        judge.name(),
        if calibrated.is_some() {
            "its calibrated cut"
        } else {
            "uncalibrated"
        }
    ));
    let (mut all_j, mut all_m) = (Vec::new(), Vec::new());
    for d in dirs {
        let dir = PathBuf::from(d);
        let text = std::fs::read_to_string(dir.join("config.toml"))
            .with_context(|| format!("{}: no config.toml (not a run folder)", dir.display()))?;
        let config = PipelineConfig::from_toml(&text, &dir.join("config.toml"), &root)?;
        let mut run = PipelineRun::read(&dir, config)?;
        run.judge_with(&judge)?;
        let j: Vec<bool> = run.records.iter().map(|r| says_yes(r.judge, cut)).collect();
        let m: Vec<bool> = run.records.iter().map(|r| r.answer_found).collect();
        // Abstentions are "no" on both sides by construction: kappa over the answered ones.
        let (ja, ma): (Vec<bool>, Vec<bool>) = run
            .records
            .iter()
            .zip(j.iter().zip(&m))
            .filter(|(r, _)| !r.abstained)
            .map(|(_, (a, b))| (*a, *b))
            .unzip();
        let n = j.len().max(1) as f64;
        let mean_p = |want: bool| {
            let v: Vec<f64> = run
                .records
                .iter()
                .filter(|r| r.answer_found == want)
                .filter_map(|r| r.judge)
                .collect();
            if v.is_empty() {
                "–".to_string()
            } else {
                format!("{:.3}", v.iter().sum::<f64>() / v.len() as f64)
            }
        };
        t.push([
            dir.display().to_string(),
            j.len().to_string(),
            format!("{:.1}", 100.0 * m.iter().filter(|x| **x).count() as f64 / n),
            format!("{:.1}", 100.0 * j.iter().filter(|x| **x).count() as f64 / n),
            format!(
                "{:.1}",
                100.0 * j.iter().zip(&m).filter(|(a, b)| a == b).count() as f64 / n
            ),
            cohen_kappa(&ja, &ma)?.map_or("–".into(), |k| format!("{k:.3}")),
            cohen_kappa(&j, &m)?.map_or("–".into(), |k| format!("{k:.3}")),
            mean_p(true),
            mean_p(false),
        ])?;
        all_j.extend(ja);
        all_m.extend(ma);
    }
    println!("{}", t.to_markdown());
    println!(
        "all runs: {} answered predictions, kappa {}",
        all_j.len(),
        cohen_kappa(&all_j, &all_m)?.map_or("–".into(), |k| format!("{k:.3}"))
    );
    Ok(())
}
