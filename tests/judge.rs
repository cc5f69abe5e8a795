//! The LLM judge (`evaluate::judge`): first-token P(Yes) of a GGUF model.
//!
//! - Qwen2.5-Coder 0.5B as the judge: on six easy cases its P(Yes) is higher for the three
//!   right answers than for the three wrong ones (on average and case by case against the
//!   wrong answer to the same question), the same call gives the same number, and an
//!   abstention is 0 without asking;
//! - in a pipeline (`evaluation.judge_model`, the reader's own SmolLM2 shared): every trace
//!   has the judge's P(Yes), the summary its share judged correct and kappa against Match,
//!   `per_question.csv` its column, and `judge` is a metric of the paired tests.

use std::path::PathBuf;
use workbench::evaluate::judge::LlmJudge;
use workbench::pipeline::reader::{build, judge, ModelPool};
use workbench::pipeline::{Pipeline, PipelineConfig};
use workbench::read::generative::{Llm, LoadOptions, SharedLlm};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn a_small_judge_prefers_right_answers_to_wrong_ones() {
    let llm = SharedLlm::new(
        Llm::from_asset("qwen2.5-coder-0.5b-instruct-gguf", &LoadOptions::default())
            .expect("Qwen 0.5B GGUF in the asset cache (scripts/test fetches it)"),
    );
    let template = std::fs::read_to_string(root().join("data/prompts/judge.txt")).unwrap();
    let j = LlmJudge::new(llm, &template).unwrap();
    let g = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let cases = [
        (
            "What is the capital of France?",
            g(&["Paris"]),
            "Paris",
            "Berlin",
        ),
        (
            "Who wrote Hamlet?",
            g(&["William Shakespeare", "Shakespeare"]),
            "It was written by William Shakespeare.",
            "Charles Dickens",
        ),
        (
            "How many legs does a spider have?",
            g(&["eight", "8"]),
            "8",
            "six",
        ),
    ];
    let (mut right, mut wrong) = (0.0, 0.0);
    for (q, golds, good, bad) in &cases {
        let (pg, pb) = (
            j.p_yes(q, golds, good).unwrap(),
            j.p_yes(q, golds, bad).unwrap(),
        );
        eprintln!("{q}: P(Yes | {good:?}) = {pg:.3}, P(Yes | {bad:?}) = {pb:.3}");
        assert!((0.0..=1.0).contains(&pg) && (0.0..=1.0).contains(&pb));
        assert!(pg > pb, "{q}: {pg} for {good:?} vs {pb} for {bad:?}");
        assert_eq!(pg, j.p_yes(q, golds, good).unwrap(), "deterministic");
        right += pg;
        wrong += pb;
    }
    // Measured 2026-11-27: 0.374 against 0.257 on average (each right answer above the
    // wrong one to its question), with every P(Yes) under 0.5: as a yes/no rater this
    // judge says "no" to all six, which the kappa of a judged run shows.
    assert!(right / 3.0 > wrong / 3.0 + 0.05, "{right} vs {wrong}");
    assert_eq!(j.p_yes("Q?", &g(&["x"]), "  ").unwrap(), 0.0);
    assert!(LlmJudge::new(j_llm(), "no placeholders").is_err());
}

fn j_llm() -> SharedLlm {
    SharedLlm::new(Llm::from_asset("smollm2-135m-instruct-gguf", &LoadOptions::default()).unwrap())
}

#[test]
fn a_judged_pipeline_run_carries_verdicts_and_kappa() {
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(root().join("configs/tiny.toml"))
        .unwrap()
        .replace("\"../", &format!("\"{}/", root().display()))
        .replace(
            "[evaluation]",
            "[evaluation]\njudge_model = \"smollm2-135m-instruct-gguf\"",
        );
    let cfg = tmp.path().join("judged.toml");
    std::fs::write(&cfg, text).unwrap();
    let p = Pipeline::build(PipelineConfig::from_file(&cfg).unwrap()).unwrap();
    let mut pool = ModelPool::default();
    let (mut reader, _) = build(&p, &mut pool).unwrap();
    let mut run = p.run(reader.as_mut(), None).unwrap();
    assert!(!run.judged());
    assert!(run.per_query("judge").is_err());
    let j = judge(&p, &mut pool).unwrap().expect("a judge");
    assert_eq!(
        pool.loaded().len(),
        1,
        "the judge shares the reader's model"
    );
    run.judge_with(&j).unwrap();
    assert!(run.judged());
    for r in &run.records {
        let pj = r.judge.unwrap();
        assert!((0.0..=1.0).contains(&pj));
        if r.abstained {
            assert_eq!(pj, 0.0);
        }
    }
    let s = run.summary();
    let share = 100.0 * run.records.iter().filter(|r| r.judge > Some(0.5)).count() as f64
        / run.records.len() as f64;
    assert_eq!(s.judge, Some(share));
    assert_eq!(s.judge_kappa, run.judge_kappa());
    assert_eq!(run.per_query("judge").unwrap().len(), run.records.len());
    let out = tmp.path().join("out");
    run.write(&out).unwrap();
    let csv = std::fs::read_to_string(out.join("per_question.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "judge").unwrap();
    for line in csv.lines().skip(1) {
        let v: f64 = line.split(',').nth(col).unwrap().parse().unwrap();
        assert!((0.0..=1.0).contains(&v));
    }
    assert!(std::fs::read_to_string(out.join("summary.md"))
        .unwrap()
        .contains("LLM judge"));
}
