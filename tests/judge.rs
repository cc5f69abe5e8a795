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

#[test]
fn p_yes_is_the_softmax_of_the_yes_and_no_logits_at_the_first_position() {
    use workbench::read::generative::ChatMessage;
    let llm = j_llm();
    let template = std::fs::read_to_string(root().join("data/prompts/judge.txt")).unwrap();
    let j = LlmJudge::new(llm.clone(), &template).unwrap();
    let golds = vec!["Paris".to_string()];
    for answer in ["Paris", "Berlin", "It is Paris, on the Seine."] {
        let q = "What is the capital of France?";
        let p = j.p_yes(q, &golds, answer).unwrap();
        // The same quantity from the model's logits, computed here.
        let mut m = llm.lock().unwrap();
        let chat = m
            .render_chat(&[ChatMessage::user(j.prompt(q, &golds, answer))], true)
            .unwrap();
        let ids = m.tokenize(&chat, true).unwrap();
        let logits = m.next_token_logits(&ids).unwrap();
        let yes = m.tokenize("Yes", false).unwrap();
        let no = m.tokenize("No", false).unwrap();
        assert_eq!((yes.len(), no.len()), (1, 1));
        let (y, n) = (
            logits[yes[0] as usize] as f64,
            logits[no[0] as usize] as f64,
        );
        let want = 1.0 / (1.0 + (n - y).exp());
        eprintln!("{answer:?}: P(Yes) {p:.6}, logits Yes {y:.4} No {n:.4}");
        assert!((p - want).abs() < 1e-9, "{answer:?}: {p} vs {want}");
    }
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
    run.judge_with(j.as_ref()).unwrap();
    assert!(run.judged());
    for r in &run.records {
        let pj = r.judge.unwrap();
        assert!((0.0..=1.0).contains(&pj));
        if r.abstained {
            assert_eq!(pj, 0.0);
        }
    }
    // The summary's arithmetic is checked on hand-set verdicts in tests/pipeline.rs
    // (`judge_summary_counts_abstentions_apart`); here, that a judged run has them all.
    let s = run.summary();
    assert!(s.judge.is_some() && s.judge_mean_p_yes.is_some());
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
