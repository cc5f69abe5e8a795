//! The TOML-configured pipeline end to end on the tiny fixture (`configs/tiny.toml`,
//! `tests/data/pipeline/`), with a deterministic fake reader (tests only): config errors,
//! traces, SQuAD predictions, the retrieval cache, query transforms, question-set bad
//! input, closed-book, per-group tables.

mod common;

use common::words;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use workbench::evaluate::{context, groups, qa};
use workbench::load::question_set::BadRecords;
use workbench::pipeline::trace::{read_predictions, read_traces};
use workbench::pipeline::{cache::Status, FnTransform, Pipeline, PipelineConfig, PromptTemplate};
use workbench::read::{AbstentionRule, Answer, Context, Reader};
use workbench::retrieve::analyzer::Analyzer;
use workbench::retrieve::bm25::{Bm25, Bm25Params};
use workbench::retrieve::fusion::{Fusion, FusionMethod};
use workbench::retrieve::Retriever;
use workbench::{Error, Passage};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Answers with the first sentence of passage 1 when that passage shares a word of more
/// than three letters with the question, else "Not found". Reads at most `window`
/// passages (drops the rest, lowest-ranked first). Exposes its prompt.
struct FirstSentence {
    template: PromptTemplate,
    rule: AbstentionRule,
    window: usize,
    seen: Vec<usize>,
}

impl FirstSentence {
    fn new(p: &Pipeline) -> Self {
        FirstSentence {
            template: p.template().clone(),
            rule: p.config().reader.abstention.clone(),
            window: usize::MAX,
            seen: Vec::new(),
        }
    }
}

impl Reader for FirstSentence {
    fn name(&self) -> &str {
        "first-sentence"
    }

    fn read(&mut self, question: &str, passages: &[Context]) -> workbench::Result<Answer> {
        workbench::read::check_question(question)?;
        self.seen.push(passages.len());
        let n = passages.len().min(self.window);
        let kept = &passages[..n];
        let text = match kept.first() {
            Some(p) if words(&p.text).iter().any(|w| words(question).contains(w)) => {
                p.text.split('.').next().unwrap_or("").trim().to_string()
            }
            _ => "Not found.".to_string(),
        };
        Ok(Answer {
            abstained: self.rule.is_abstention(&text),
            text,
            passage_ids: kept.iter().map(|p| p.id.clone()).collect(),
            dropped: passages[n..].iter().map(|p| p.id.clone()).collect(),
            ..Default::default()
        })
    }

    fn prompt(&self, question: &str, passages: &[Context]) -> workbench::Result<Option<String>> {
        Ok(Some(self.template.render(question, passages)))
    }
}

/// Score `predictions` (a SQuAD predictions file) with the official SQuAD 2.0
/// evaluation logic run by Python: `scripts/python/squad_v2_eval.py` (a transcription of
/// `evaluate-v2.0.py`, standard library only), given a SQuAD-format data file written
/// here from `golds` (question id, gold answers; none = unanswerable). The command is
/// `python3 scripts/python/squad_v2_eval.py data.json predictions.json`; returns its
/// JSON output (`exact`, `f1`, `total`, …). Fails when python3 is missing.
fn official_squad_eval(
    dir: &Path,
    golds: &[(String, Vec<String>)],
    predictions: &Path,
) -> serde_json::Value {
    let qas: Vec<serde_json::Value> = golds
        .iter()
        .map(|(id, answers)| {
            serde_json::json!({
                "id": id,
                "question": "",
                "answers": answers.iter().map(|a| serde_json::json!({"text": a, "answer_start": 0})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let data = serde_json::json!({
        "version": "v2.0",
        "data": [{"title": "fixture", "paragraphs": [{"context": "", "qas": qas}]}],
    });
    let data_file = dir.join("squad_data.json");
    std::fs::write(&data_file, serde_json::to_vec(&data).unwrap()).unwrap();
    let script = root().join("scripts/python/squad_v2_eval.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(&data_file)
        .arg(predictions)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "python3 {} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("squad_v2_eval.py prints JSON")
}

fn config(text: &str) -> workbench::Result<PipelineConfig> {
    let c = PipelineConfig::from_toml(text, Path::new("test.toml"), &root())?;
    c.validate()?;
    Ok(c)
}

/// `configs/tiny.toml`'s text with its paths (relative to `configs/`) made relative to
/// the project root, for [`config`].
fn tiny_text() -> String {
    std::fs::read_to_string(root().join("configs/tiny.toml"))
        .unwrap()
        .replace("\"../", "\"")
}

fn tiny() -> PipelineConfig {
    PipelineConfig::from_file(&root().join("configs/tiny.toml")).unwrap()
}

#[test]
fn tiny_config_end_to_end_with_traces_and_predictions() {
    let mut c = tiny();
    c.cache.retrieval = false;
    let p = Pipeline::build(c).unwrap();
    assert_eq!(p.passages().len(), 8);
    let mut reader = FirstSentence::new(&p);
    let run = p.run(&mut reader, None).unwrap();
    // BM25 returns only passages sharing a term: q1 has 2 (capital + France), the others
    // one; never more than reader.passages = 2.
    assert_eq!(reader.seen, vec![2, 1, 1, 1, 1]);
    assert_eq!(run.records.len(), 5);
    let by_id: BTreeMap<&str, _> = run.records.iter().map(|r| (r.id.as_str(), r)).collect();

    // q1: BM25 puts "paris" first; the answer is its first sentence, a gold answer.
    let q1 = by_id["q1"];
    assert_eq!(q1.passage_ids[0], "paris");
    assert_eq!(q1.answer, "Paris is the capital of France");
    assert_eq!((q1.em, q1.f1), (1.0, 1.0));
    assert_eq!(q1.group, "What is");
    assert!(q1
        .prompt
        .as_ref()
        .unwrap()
        .contains("[CHUNK 1]\nParis is the capital"));
    assert!(q1
        .prompt
        .as_ref()
        .unwrap()
        .contains("Query: What is the capital of France?"));
    // Only passage 1 holds "Paris": CP = 1/2, AP = 1.
    assert_eq!(q1.context_precision, Some(0.5));
    assert_eq!(q1.context_average_precision, Some(1.0));
    assert!(q1.retrieved.len() <= 5 && !q1.retrieved.is_empty());
    assert!(q1.reranked.is_none() && q1.queries.is_empty());

    // q2: "Hamlet was written by William Shakespeare" vs "William Shakespeare":
    // 2 common tokens of 6 predicted / 2 gold: P = 2/6, R = 1, F1 = (2/3)/(4/3) = 1/2
    // (against "Shakespeare": P = 1/6, R = 1, F1 = 2/7; the max is taken).
    let q2 = by_id["q2"];
    assert_eq!(q2.passage_ids[0], "hamlet");
    assert!((q2.f1 - 0.5).abs() < 1e-12, "{}", q2.f1);
    assert_eq!(q2.em, 0.0);
    assert!(q2.answer_found);

    // q5 (Neptune) is not in the corpus: the fake reader abstains; the file's group wins.
    let q5 = by_id["q5"];
    assert!(q5.abstained);
    assert_eq!(q5.prediction, "");
    assert_eq!(q5.group, "How many");
    assert_eq!(by_id["q3"].group, "When");
    assert_eq!(by_id["q4"].group, "Which");

    // Summary numbers equal the per-question values.
    let s = run.summary();
    assert_eq!((s.questions, s.abstained, s.answered), (5, 1, 4));
    let em: f64 = run.records.iter().map(|r| r.em).sum::<f64>() / 5.0 * 100.0;
    assert!((s.em - em).abs() < 1e-9);
    assert_eq!(s.context_scored, 5);

    // Files: traces are valid JSONL that reads back equal; predictions are SQuAD's
    // {id: string} with "" for the abstention, and the official SQuAD 2.0 script's logic
    // (scripts/python/squad_v2_eval.py, run by python3) scores them to the summary's EM
    // and F1.
    let dir = tempfile::tempdir().unwrap();
    run.write(dir.path()).unwrap();
    // Floats compared with a tolerance: serde_json's default parsing is not bit-exact.
    let back = read_traces(&dir.path().join("traces.jsonl")).unwrap();
    assert_eq!(back.len(), run.records.len());
    for (a, b) in back.iter().zip(&run.records) {
        let mut a = a.clone();
        assert!((a.times.total() - b.times.total()).abs() < 1e-9);
        assert!((a.f1 - b.f1).abs() < 1e-12);
        a.times = b.times;
        a.f1 = b.f1;
        assert_eq!(&a, b);
    }
    let raw = std::fs::read_to_string(dir.path().join("traces.jsonl")).unwrap();
    assert_eq!(raw.lines().count(), 5);
    for line in raw.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for field in [
            "question",
            "gold_answers",
            "queries",
            "retrieved",
            "reranked",
            "prompt",
            "answer",
            "abstained",
            "prompt_tokens",
            "generated_tokens",
            "times",
        ] {
            assert!(v.get(field).is_some(), "trace line lacks `{field}`: {line}");
        }
    }
    let preds = read_predictions(&dir.path().join("predictions.json")).unwrap();
    let ids: Vec<&str> = preds.keys().map(String::as_str).collect();
    assert_eq!(ids, ["q1", "q2", "q3", "q4", "q5"]);
    assert_eq!(preds["q5"], "");
    assert_eq!(preds["q1"], "Paris is the capital of France");
    let golds: BTreeMap<&str, &Vec<String>> = run
        .records
        .iter()
        .map(|r| (r.id.as_str(), &r.gold_answers))
        .collect();
    let (mut em2, mut f12) = (0.0, 0.0);
    for (id, pred) in &preds {
        em2 += qa::exact_match(pred, golds[id.as_str()]);
        f12 += qa::f1(pred, golds[id.as_str()]);
    }
    assert!((100.0 * em2 / 5.0 - s.em).abs() < 1e-9);
    assert!((100.0 * f12 / 5.0 - s.f1).abs() < 1e-9);
    let official = official_squad_eval(
        dir.path(),
        &run.records
            .iter()
            .map(|r| (r.id.clone(), r.gold_answers.clone()))
            .collect::<Vec<_>>(),
        &dir.path().join("predictions.json"),
    );
    assert_eq!(official["total"], 5, "{official}");
    let (o_em, o_f1) = (
        official["exact"].as_f64().unwrap(),
        official["f1"].as_f64().unwrap(),
    );
    assert!(
        (o_em - s.em).abs() < 1e-9,
        "official EM {o_em} vs ours {}",
        s.em
    );
    assert!(
        (o_f1 - s.f1).abs() < 1e-9,
        "official F1 {o_f1} vs ours {}",
        s.f1
    );
    // Not a trivial agreement: partial credit (q2's F1 of 1/2) is in both.
    assert!(o_f1 > o_em, "{official}");
    for f in [
        "summary.json",
        "summary.md",
        "per_question.csv",
        "config.toml",
        "skipped.json",
    ] {
        assert!(dir.path().join(f).exists(), "{f}");
    }
    // The written config is the resolved one and parses back to the same settings.
    let written = std::fs::read_to_string(dir.path().join("config.toml")).unwrap();
    let again = PipelineConfig::from_toml(&written, Path::new("config.toml"), &root()).unwrap();
    assert_eq!(again, run.config);

    // Per-group tables over the run (polars group-bys).
    let df = groups::per_question_frame(&run.question_scores("bm25")).unwrap();
    let t = groups::to_table(&groups::by_group(&df).unwrap(), 2).unwrap();
    let gs: Vec<&str> = t.rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(gs, ["What is", "When", "Which", "Who", "How many"]);
}

/// A reader that answers each question with a fixed raw output (sentences, lead-ins,
/// quotes), as instruction-tuned models do.
struct Scripted(BTreeMap<&'static str, &'static str>);

impl Reader for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn read(&mut self, question: &str, passages: &[Context]) -> workbench::Result<Answer> {
        let text = self
            .0
            .get(question)
            .copied()
            .unwrap_or("Not found.")
            .to_string();
        Ok(Answer {
            abstained: AbstentionRule::default().is_abstention(&text),
            text,
            passage_ids: passages.iter().map(|p| p.id.clone()).collect(),
            ..Default::default()
        })
    }
}

/// The tiny corpus with the questions of `lines` (NQ-open JSONL), every answer-matching
/// rule left to the question set, the short-answer parser, no cache.
fn tiny_with_questions(dir: &Path, lines: &str) -> PipelineConfig {
    let q = dir.join("questions.jsonl");
    std::fs::write(&q, lines).unwrap();
    let mut c = tiny();
    c.cache.retrieval = false;
    c.questions.path = q.display().to_string();
    c.evaluation.answer_match = None;
    c.reader.parse = workbench::read::AnswerParser::short();
    c
}

#[test]
fn scoring_follows_the_data_sets_rule_and_the_parsed_answer() {
    use workbench::evaluate::answer_match::AnswerMatch;
    use workbench::pipeline::trace::Outcome;
    let dir = tempfile::tempdir().unwrap();
    let c = tiny_with_questions(
        dir.path(),
        r#"{"id": "y", "question": "Is Paris the capital of France?", "answer": ["Yes."]}
{"id": "n", "question": "Is Rome the capital of Germany?", "answer": ["No"]}
{"id": "year", "question": "When did the Berlin Wall fall?", "answer": ["1989."]}
{"id": "nf", "question": "Who painted the Mona Lisa?", "answer": ["Leonardo da Vinci"]}
{"id": "dc", "question": "What is the capital of the United States?", "answer": ["Washington, D.C."]}
{"id": "yes", "question": "Is Berlin the capital of Germany?", "answer": ["Yes, it is."]}
{"id": "notin", "question": "Who discovered penicillin?", "answer": ["Alexander Fleming"]}
"#,
    );
    let raw = BTreeMap::from([
        // Wrong answers to yes / no questions: the passages hold the capital, not "yes".
        ("Is Paris the capital of France?", "No, it is not."),
        ("Is Rome the capital of Germany?", "Yes."),
        // A gold with a final dot, inside a sentence.
        (
            "When did the Berlin Wall fall?",
            "The Berlin Wall fell in 1989, after weeks of protest.",
        ),
        // An abstention behind a final-answer marker.
        (
            "Who painted the Mona Lisa?",
            "Let me check.\nFinal answer: Not found.",
        ),
        // A lead-in on its own line, in markdown.
        (
            "What is the capital of the United States?",
            "**Answer:**\nWashington, D.C.",
        ),
        // A right answer to a yes / no question is correct, like any other.
        (
            "Is Berlin the capital of Germany?",
            "**Final Answer:** Yes, it is.",
        ),
        // An abstention whose phrase starts with a lead-in.
        (
            "Who discovered penicillin?",
            "The answer is not in the passages.",
        ),
    ]);
    let p = Pipeline::build(c).unwrap();
    // The question set's rule: SQuAD's normalisation, recorded in the resolved config.
    assert_eq!(p.config().evaluation.answer_match, Some(AnswerMatch::Squad));
    let run = p.run(&mut Scripted(raw.clone()), None).unwrap();
    assert_eq!(run.answer_match, AnswerMatch::Squad);
    let by_id: BTreeMap<&str, _> = run.records.iter().map(|r| (r.id.as_str(), r)).collect();

    // `1989.` is found in "… in 1989, after …" under SQuAD's rule (DPR's keeps the dot).
    assert!(by_id["year"].answer_found);
    assert_eq!(by_id["year"].outcome, Outcome::FormMiss);
    assert!(!AnswerMatch::Dpr
        .has_answer(&by_id["year"].prediction, &["1989."])
        .unwrap());

    // Yes / no golds: no context precision, and a wrong answer is not attributable.
    for id in ["y", "n"] {
        let r = by_id[id];
        assert_eq!(r.context_precision, None, "{id}");
        assert_eq!(r.outcome, Outcome::NotAttributable, "{id}");
        assert!(!r.abstained);
    }

    // Abstention is decided on the parsed answer.
    let nf = by_id["nf"];
    assert!(nf.abstained, "{nf:?}");
    assert_eq!(nf.prediction, "");
    assert_eq!(nf.outcome, Outcome::Abstained);
    assert_eq!(nf.answer, raw["Who painted the Mona Lisa?"]);

    // `**Answer:**` on its own line gives the next line, with the abbreviation's dot.
    let dc = by_id["dc"];
    assert_eq!(dc.prediction, "Washington, D.C.");
    assert_eq!(dc.em, 1.0);

    assert_eq!(by_id["yes"].prediction, "Yes, it is");
    assert_eq!(by_id["yes"].outcome, Outcome::Correct);
    assert_eq!(by_id["yes"].context_precision, None);
    assert!(by_id["notin"].abstained, "{:?}", by_id["notin"]);

    let s = run.summary();
    assert_eq!((s.answered, s.abstained), (5, 2));
    assert_eq!(run.outcomes(), [2, 1, 0, 0, 2, 2]);
    assert_eq!(s.answer_match, Some(AnswerMatch::Squad));
    // Read back from its files, the run keeps its rule.
    let out = dir.path().join("run");
    run.write(&out).unwrap();
    let back = workbench::pipeline::PipelineRun::read(&out, p.config().clone()).unwrap();
    assert_eq!(back.answer_match, AnswerMatch::Squad);
    // With every parsing rule off, `Final answer: Not found.` is still an abstention.
    let mut c = tiny_with_questions(
        dir.path(),
        r#"{"id": "nf", "question": "Who painted the Mona Lisa?", "answer": ["Leonardo da Vinci"]}"#,
    );
    c.reader.parse = workbench::read::AnswerParser::default();
    let p0 = Pipeline::build(c).unwrap();
    let run0 = p0
        .run(
            &mut Scripted(BTreeMap::from([(
                "Who painted the Mona Lisa?",
                "Final answer: Not found.",
            )])),
            None,
        )
        .unwrap();
    assert!(run0.records[0].abstained);
    // A rule set in the config wins and is the one the run reports.
    let mut c = tiny_with_questions(
        dir.path(),
        r#"{"id": "year", "question": "When did the Berlin Wall fall?", "answer": ["1989."]}"#,
    );
    c.evaluation.answer_match = Some(AnswerMatch::Dpr);
    let p = Pipeline::build(c).unwrap();
    let run = p.run(&mut Scripted(raw.clone()), None).unwrap();
    assert_eq!(run.answer_match, AnswerMatch::Dpr);
    assert!(!run.records[0].answer_found);
}

#[test]
fn rag_mini_and_squad_question_sets_bring_the_squad_rule() {
    use workbench::evaluate::answer_match::AnswerMatch;
    use workbench::pipeline::config::QuestionsKind;
    for (kind, asset) in [
        (QuestionsKind::RagMini, "rag-mini-wikipedia"),
        (QuestionsKind::Squad, "squad-v2-dev-half"),
    ] {
        let mut c = PipelineConfig::default();
        c.reader.prompt = root()
            .join("data/prompts/closed_book_001.txt")
            .display()
            .to_string();
        c.questions.kind = kind;
        c.questions.asset = asset.into();
        c.questions.limit = 3;
        assert_eq!(c.evaluation.answer_match, None);
        let p = Pipeline::build(c).unwrap();
        assert_eq!(
            p.config().evaluation.answer_match,
            Some(AnswerMatch::Squad),
            "{asset}"
        );
        assert_eq!(p.questions().answer_match, AnswerMatch::Squad, "{asset}");
    }
}

#[test]
fn dpr_match_finds_a_dotted_abbreviation_after_parsing() {
    use workbench::evaluate::answer_match::AnswerMatch;
    let gold = ["Washington, D.C."];
    let parsed = workbench::read::AnswerParser::short().parse("Washington, D.C.");
    assert!(
        AnswerMatch::Dpr.has_answer(&parsed, &gold).unwrap(),
        "{parsed:?}"
    );
    // Without its final dot, DPR's tokens do not hold the gold's.
    assert!(!AnswerMatch::Dpr
        .has_answer("Washington, D.C", &gold)
        .unwrap());
}

#[test]
fn judge_summary_counts_abstentions_apart() {
    let mut c = tiny();
    c.cache.retrieval = false;
    let p = Pipeline::build(c).unwrap();
    let mut run = p.run(&mut Scripted(BTreeMap::new()), None).unwrap();
    assert_eq!(run.records.len(), 5);
    // (abstained, Match, P(Yes)): the judge says yes to q1 and q3 (q2's 0.5 is not above
    // the cut), Match holds for q1 and q2.
    let set = [
        (false, true, 0.9),
        (false, true, 0.5),
        (false, false, 0.7),
        (false, false, 0.2),
        (true, false, 0.0),
    ];
    for (r, (abstained, found, p_yes)) in run.records.iter_mut().zip(set) {
        r.abstained = abstained;
        r.answer_found = found;
        r.judge = Some(p_yes);
    }
    let s = run.summary();
    // 2 of 5 above the cut; mean P(Yes) (0.9 + 0.5 + 0.7 + 0.2 + 0) / 5 = 0.46.
    assert!((s.judge.unwrap() - 40.0).abs() < 1e-9, "{:?}", s.judge);
    assert!((s.judge_mean_p_yes.unwrap() - 46.0).abs() < 1e-9);
    // Answered: judge [y n y n], Match [y y n n]: p_o = 0.5 = p_e, kappa 0.
    assert!(s.judge_kappa_answered.unwrap().abs() < 1e-12);
    // All: judge [y n y n n], Match [y y n n n]: p_o = 0.6, p_e = 0.4·0.4 + 0.6·0.6
    // = 0.52, kappa = 0.08 / 0.48 = 1/6 (the abstention's agreement inflates it).
    assert!((s.judge_kappa.unwrap() - 1.0 / 6.0).abs() < 1e-12);
    let per = run.per_query("judge").unwrap();
    let yes: Vec<f64> = run.records.iter().map(|r| per[&r.id]).collect();
    assert_eq!(yes, [1.0, 0.0, 1.0, 0.0, 0.0]);
}

#[test]
fn the_judge_cut_comes_from_the_config_else_the_calibration_record_else_a_half() {
    use workbench::evaluate::calibration::{self, Calibration};
    // A project root of its own: the judge prompt and a calibration record.
    let tmp = tempfile::tempdir().unwrap();
    let prompt = "Q {question} G {gold} A {answer}\n";
    std::fs::create_dir_all(tmp.path().join("data/prompts")).unwrap();
    std::fs::write(tmp.path().join("data/prompts/judge.txt"), prompt).unwrap();
    std::fs::write(tmp.path().join("judge.gguf"), b"").unwrap();
    let record = tmp.path().join(calibration::RECORD);
    std::fs::create_dir_all(record.parent().unwrap()).unwrap();
    let row = |judge: &str, prompt_text: &str, cut: f64| Calibration {
        judge: judge.into(),
        backend: "gguf".into(),
        prompt_sha256: workbench::assets::sha256_bytes(prompt_text.as_bytes()),
        labels_sha256: "x".into(),
        n: 300,
        correct: 150,
        questions: 120,
        cut,
        kappa: 0.5,
        accuracy: 0.75,
        cv_kappa: Some(0.45),
        cv_kappa_low: Some(0.35),
        cv_kappa_high: Some(0.55),
        cv_accuracy: 0.731,
        cv_accuracy_low: 0.7,
        cv_accuracy_high: 0.8,
        cv_cut_min: 0.7,
        cv_cut_max: 0.9,
        kappa_at_half: Some(0.2),
        accuracy_at_half: 0.6,
        auc: Some(0.8),
    };
    calibration::write_record(
        &record,
        &[
            row("other-judge", prompt, 0.3),
            row("judge.gguf", prompt, 0.8),
        ],
    )
    .unwrap();
    let build = |cut: Option<f64>, prompt_file: &str| {
        let mut c = tiny();
        c.cache.retrieval = false;
        // The fixture's files stay where they are; the judge's come from `tmp`.
        for path in [
            &mut c.corpus.path,
            &mut c.questions.path,
            &mut c.reader.prompt,
        ] {
            *path = root().join(&*path).display().to_string();
        }
        c.base_dir = tmp.path().to_path_buf();
        c.evaluation.judge_model = "judge.gguf".into();
        c.evaluation.judge_prompt = prompt_file.into();
        c.evaluation.judge_cut = cut;
        let p = Pipeline::build(c).unwrap();
        let e = p.config().evaluation.clone();
        (p, e)
    };
    // No cut in the config: the record's row for this judge and prompt.
    let (p, e) = build(None, "data/prompts/judge.txt");
    assert_eq!(e.judge_cut, Some(0.8));
    assert_eq!(
        e.judge_cut_source,
        "calibrated: data/benchmarks/judge-calibration/calibration.csv (300 labelled predictions; cross-validated kappa 0.450, AUC 0.800)"
    );
    // P(Yes) 0.9, 0.5, 0.7, 0.2, abstention: above 0.8 only the first.
    let mut run = p.run(&mut Scripted(BTreeMap::new()), None).unwrap();
    for (r, p_yes) in run.records.iter_mut().zip([0.9, 0.5, 0.7, 0.2, 0.0]) {
        r.judge = Some(p_yes);
    }
    let s = run.summary();
    assert_eq!(s.judge_cut, Some(0.8));
    assert!((s.judge.unwrap() - 20.0).abs() < 1e-9, "{:?}", s.judge);
    let per = run.per_query("judge").unwrap();
    let yes: Vec<f64> = run.records.iter().map(|r| per[&r.id]).collect();
    assert_eq!(yes, [1.0, 0.0, 0.0, 0.0, 0.0]);
    // Read back with the config as written (no cut) and without the record: the
    // summary's cut, not 0.5 and not the record's.
    let dir = tmp.path().join("run");
    run.write(&dir).unwrap();
    let saved = std::fs::read(&record).unwrap();
    std::fs::remove_file(&record).unwrap();
    let mut raw = p.config().clone();
    raw.evaluation.judge_cut = None;
    let back = workbench::pipeline::PipelineRun::read(&dir, raw.clone()).unwrap();
    assert_eq!(back.judge_cut(), 0.8);
    assert_eq!(back.config.evaluation.judge_cut_source, "summary");
    assert_eq!(back.summary().judge, s.judge);
    // A config that asks for another cut than the run was judged at: refused.
    raw.evaluation.judge_cut = Some(0.6);
    let e = workbench::pipeline::PipelineRun::read(&dir, raw)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("judged at the cut 0.8"), "{e}");
    std::fs::write(&record, saved).unwrap();
    // Another prompt text: no row, so 0.5, and the run says it is uncalibrated.
    std::fs::write(
        tmp.path().join("data/prompts/other.txt"),
        "{question} {gold} {answer}",
    )
    .unwrap();
    let (_, e) = build(None, "data/prompts/other.txt");
    assert_eq!(e.judge_cut, Some(0.5));
    assert!(
        e.judge_cut_source.starts_with("uncalibrated"),
        "{}",
        e.judge_cut_source
    );
    // The config's own cut wins over the record.
    let (_, e) = build(Some(0.65), "data/prompts/judge.txt");
    assert_eq!(
        (e.judge_cut, e.judge_cut_source.as_str()),
        (Some(0.65), "config")
    );
    // A cut outside [0, 1) is refused, naming the field.
    let mut c = tiny();
    c.evaluation.judge_cut = Some(1.0);
    let err = Pipeline::build(c).err().unwrap().to_string();
    assert!(err.contains("evaluation.judge_cut"), "{err}");
}

#[test]
fn answers_are_parsed_before_scoring_and_raw_outputs_kept() {
    let raw = BTreeMap::from([
        (
            "What is the capital of France?",
            "The answer is: \"Paris\".\nParis has been the capital since 987.",
        ),
        ("Who wrote Hamlet?", "Hamlet was written by Shakespeare."),
        (
            "When did Apollo 11 land on the Moon?",
            "Final answer: 1969.",
        ),
        ("How many moons does Neptune have?", "Maybe 14."),
    ]);
    let run_with = |parse: Option<workbench::read::AnswerParser>| {
        let mut c = tiny();
        c.cache.retrieval = false;
        if let Some(parse) = parse {
            c.reader.parse = parse;
        }
        let p = Pipeline::build(c).unwrap();
        p.run(&mut Scripted(raw.clone()), None).unwrap()
    };
    // Every rule off (the default): the raw output is scored.
    let plain = run_with(None);
    let q1 = &plain.records[0];
    assert_eq!(q1.prediction, q1.answer);
    assert_eq!(q1.em, 0.0);
    // Token recall and Match credit the sentence that holds the gold; F1 barely does.
    assert_eq!(q1.recall, 1.0);
    assert!(q1.answer_found);
    assert!(q1.f1 < 0.5, "{}", q1.f1);
    // q2: "Shakespeare" is one of the golds, so recall is 1; q4 abstains: 0.
    assert_eq!(plain.records[1].recall, 1.0);
    assert_eq!(plain.records[3].recall, 0.0);

    // The short-answer preset: q1 and q3 become exact matches; the raw answers stay.
    let short = run_with(Some(workbench::read::AnswerParser::short()));
    let by_id: BTreeMap<&str, _> = short.records.iter().map(|r| (r.id.as_str(), r)).collect();
    assert_eq!(by_id["q1"].prediction, "Paris");
    assert_eq!(by_id["q1"].answer, raw["What is the capital of France?"]);
    assert_eq!((by_id["q1"].em, by_id["q3"].em), (1.0, 1.0));
    assert_eq!(by_id["q3"].prediction, "1969");
    // The sentence without a lead-in is kept whole (its first line).
    assert_eq!(by_id["q2"].prediction, "Hamlet was written by Shakespeare");
    let (sp, ss) = (plain.summary(), short.summary());
    assert!(ss.em > sp.em, "{} vs {}", ss.em, sp.em);
    let recall: f64 = short.records.iter().map(|r| r.recall).sum::<f64>() / 5.0 * 100.0;
    assert!((ss.recall - recall).abs() < 1e-9);

    // Files: SQuAD predictions are the parsed answers, raw_predictions.json the outputs.
    let dir = tempfile::tempdir().unwrap();
    short.write(dir.path()).unwrap();
    let preds = read_predictions(&dir.path().join("predictions.json")).unwrap();
    assert_eq!(preds["q1"], "Paris");
    let raws = read_predictions(&dir.path().join("raw_predictions.json")).unwrap();
    assert_eq!(raws["q1"], raw["What is the capital of France?"]);
    assert_eq!(raws["q4"], "Not found.");
    let csv = std::fs::read_to_string(dir.path().join("per_question.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains(",recall,"), "{csv}");
    // Miss attribution: sentences holding the gold are form misses until parsed; q5's
    // only passage (Apollo 11's Moon, without "16") makes its wrong answer a retrieval
    // miss; q4 abstained.
    use workbench::pipeline::trace::Outcome;
    assert_eq!(plain.outcomes(), [0, 3, 0, 1, 0, 1]);
    assert_eq!(short.outcomes(), [2, 1, 0, 1, 0, 1]);
    assert_eq!(by_id["q5"].outcome, Outcome::RetrievalMiss);
    assert!(csv.contains(",retrieval-miss,"), "{csv}");
    // Paired tests take the lenient scores too; an unknown metric is named.
    assert_eq!(short.per_query("match").unwrap()["q1"], 1.0);
    assert_eq!(short.per_query("recall").unwrap()["q5"], 0.0);
    let e = short.per_query("bleu").unwrap_err().to_string();
    assert!(e.contains("bleu") && e.contains("recall"), "{e}");
}

/// Controls (oracle or random retrieval) are a Holm family of their own: the real
/// comparisons are adjusted over the real systems only, the controls over the controls,
/// and the table labels each row's family. A system identical to the baseline has no
/// detectable difference (`–`), not 0.
#[test]
fn qa_comparisons_keep_controls_out_of_the_real_holm_family() {
    use workbench::pipeline::config::RetrieverSpec;
    use workbench::study::repro::{significance_note, QaComparisons, StudyRun, StudyRuns};
    let q = [
        "What is the capital of France?",
        "Who wrote Hamlet?",
        "When did Apollo 11 land on the Moon?",
        "Which river flows into the Mediterranean?",
        "How many moons does Neptune have?",
    ];
    let perfect = ["Paris", "William Shakespeare", "1969", "the Nile", "16"];
    let base = ["Paris", "Marlowe", "1970", "Not found.", "Not found."];
    // Two real systems (one the baseline's twin), an oracle and a random control.
    let systems = [
        ("real", perfect, None),
        ("twin", base, None),
        (
            "oracle",
            perfect,
            Some(RetrieverSpec::Oracle(Default::default())),
        ),
        (
            "random",
            base,
            Some(RetrieverSpec::Random(Default::default())),
        ),
        ("base", base, None),
    ];
    let mut runs = StudyRuns::default();
    for (name, a, kind) in systems {
        let mut c = tiny();
        c.cache.retrieval = false;
        let p = Pipeline::build(c).unwrap();
        let script: BTreeMap<&'static str, &'static str> = q.iter().copied().zip(a).collect();
        let mut run = p.run(&mut Scripted(script), None).unwrap();
        if let Some(k) = kind {
            // What the study reads to tell a control: the run's retriever kind.
            run.config.retrieval.retrievers[0] = k;
        }
        runs.0.push(StudyRun {
            reader: "scripted-gguf".into(),
            system: name.to_string(),
            run,
            journal: None,
            resumed: 0,
        });
    }
    let compared: QaComparisons = runs.against_baseline("base", 999, 42).unwrap();
    let t = compared.table().unwrap();
    assert_eq!(t.rows.len(), 16);
    let col = |name: &str| t.header.iter().position(|h| h == name).unwrap();
    let (metric, system, family) = (col("metric"), col("system"), col("family"));
    let (p_raw, p_holm, mde) = (
        col("p_randomization"),
        col("p_randomization_holm"),
        col("mde_80"),
    );
    let num = |r: &Vec<String>, c: usize| r[c].parse::<f64>().unwrap();
    let row = |m: &str, s: &str| {
        t.rows
            .iter()
            .find(|r| r[metric] == m && r[system] == s)
            .unwrap()
            .clone()
    };
    for m in ["em", "f1", "match", "recall"] {
        for (s, fam) in [
            ("real", "real"),
            ("twin", "real"),
            ("oracle", "control"),
            ("random", "control"),
        ] {
            assert_eq!(row(m, s)[family], fam, "{m} {s}");
        }
        // The twin's p is 1, so in a family of two (real, twin) Holm doubles the real
        // system's p: 2p, not the 4p of a family that counted the controls too.
        let (r, twin) = (row(m, "real"), row(m, "twin"));
        assert_eq!(num(&twin, p_raw), 1.0, "{m}");
        let want = (2.0 * num(&r, p_raw)).min(1.0);
        assert!((num(&r, p_holm) - want).abs() < 2e-4, "{m}: {r:?}");
        // The controls: a family of two of their own (the oracle scores as `real` does,
        // random as the baseline does).
        let (o, rnd) = (row(m, "oracle"), row(m, "random"));
        assert_eq!(num(&o, p_raw), num(&r, p_raw), "{m}");
        assert!((num(&o, p_holm) - want).abs() < 2e-4, "{m}: {o:?}");
        assert_eq!(num(&rnd, p_holm), 1.0, "{m}");
        // Identical to the baseline: the detectable difference is undefined.
        assert_eq!(twin[mde], "–", "{m}");
        assert_eq!(rnd[mde], "–", "{m}");
        assert!(num(&r, mde) > 0.0, "{m}");
    }
    let note = significance_note(&compared);
    assert!(note.contains("control"), "{note}");
}

#[test]
fn qa_comparisons_are_holm_adjusted_per_family_with_intervals() {
    use workbench::study::repro::{
        intervals, significance_note, QaComparisons, StudyRun, StudyRuns,
    };
    let q = [
        "What is the capital of France?",
        "Who wrote Hamlet?",
        "When did Apollo 11 land on the Moon?",
        "Which river flows into the Mediterranean?",
        "How many moons does Neptune have?",
    ];
    let answers = [
        ["Paris", "William Shakespeare", "1969", "the Nile", "16"],
        [
            "Paris",
            "Shakespeare wrote it",
            "1969",
            "Not found.",
            "16 moons",
        ],
        ["Paris", "Marlowe", "1970", "Not found.", "Not found."],
    ];
    let mut runs = StudyRuns::default();
    for (name, a) in ["perfect", "partial", "base"].iter().zip(answers) {
        let mut c = tiny();
        c.cache.retrieval = false;
        let p = Pipeline::build(c).unwrap();
        let script: BTreeMap<&'static str, &'static str> = q.iter().copied().zip(a).collect();
        runs.0.push(StudyRun {
            reader: "scripted-gguf".into(),
            system: name.to_string(),
            run: p.run(&mut Scripted(script), None).unwrap(),
            journal: None,
            resumed: 0,
        });
    }
    let compared: QaComparisons = runs.against_baseline("base", 999, 42).unwrap();
    let t = compared.table().unwrap();
    // Two systems against the baseline on four metrics.
    assert_eq!(t.rows.len(), 8);
    let col = |name: &str| t.header.iter().position(|h| h == name).unwrap();
    let (metric, system) = (col("metric"), col("system"));
    let (p_raw, p_holm, mark, mde) = (
        col("p_randomization"),
        col("p_randomization_holm"),
        col("mark_holm"),
        col("mde_80"),
    );
    let num = |r: &Vec<String>, c: usize| r[c].parse::<f64>().unwrap();
    for m in ["em", "f1", "match", "recall"] {
        let fam: Vec<&Vec<String>> = t.rows.iter().filter(|r| r[metric] == m).collect();
        assert_eq!(fam.len(), 2, "{m}");
        // Holm over a family of two: the smaller p doubled (capped at 1), the larger at
        // least that; never below the unadjusted p.
        let (lo, hi) = if num(fam[0], p_raw) <= num(fam[1], p_raw) {
            (fam[0], fam[1])
        } else {
            (fam[1], fam[0])
        };
        let want = (2.0 * num(lo, p_raw)).min(1.0);
        assert!((num(lo, p_holm) - want).abs() < 2e-4, "{m}: {lo:?}");
        assert!(num(hi, p_holm) >= num(lo, p_holm) - 1e-12, "{m}");
        for r in &fam {
            assert!(num(r, p_holm) >= num(r, p_raw) - 1e-12);
            assert!(num(r, mde) > 0.0, "{m}: {r:?}");
            assert_eq!(
                r[mark],
                workbench::evaluate::significance::marker(num(r, p_holm))
            );
        }
    }
    assert!(t.rows.iter().any(|r| r[system] == "perfect"));
    // The baseline's "Marlowe" had the Hamlet passage: a reader miss.
    let base = runs.get("scripted-gguf", "base").unwrap();
    assert_eq!(
        base.records[1].outcome,
        workbench::pipeline::trace::Outcome::ReaderMiss
    );
    let outcomes = runs.outcomes().unwrap();
    assert_eq!(outcomes.rows.len(), 3);
    assert_eq!(outcomes.rows[0][3], "5", "{:?}", outcomes.rows[0]); // perfect: 5 correct
    let note = significance_note(&compared);
    assert!(
        note.contains("Holm") && note.contains("em ") && note.contains("recall "),
        "{note}"
    );

    // Intervals: three systems × four metrics, each holding its mean; the perfect system's
    // EM is 1 with a degenerate interval.
    let iv = intervals(&runs, 999, 42).unwrap();
    assert_eq!(iv.rows.len(), 12);
    let c = |name: &str| iv.header.iter().position(|h| h == name).unwrap();
    for r in &iv.rows {
        let (m, lo, hi) = (
            r[c("mean")].parse::<f64>().unwrap(),
            r[c("ci95_lo")].parse::<f64>().unwrap(),
            r[c("ci95_hi")].parse::<f64>().unwrap(),
        );
        assert!(lo <= m && m <= hi, "{r:?}");
    }
    let perfect_em = iv
        .rows
        .iter()
        .find(|r| r[c("system")] == "perfect" && r[c("metric")] == "em")
        .unwrap();
    assert_eq!(
        (
            perfect_em[c("mean")].as_str(),
            perfect_em[c("ci95_lo")].as_str()
        ),
        ("1.0000", "1.0000")
    );
}

#[test]
fn reader_drops_are_traced_and_context_precision_uses_kept_passages() {
    let mut c = tiny();
    c.cache.retrieval = false;
    let p = Pipeline::build(c).unwrap();
    let mut reader = FirstSentence::new(&p);
    reader.window = 1;
    let run = p.run(&mut reader, None).unwrap();
    let q1 = &run.records[0];
    assert_eq!(q1.passage_ids, ["paris"]);
    assert_eq!(q1.dropped.len(), 1);
    // Only the kept passage counts: CP = 1/1.
    assert_eq!(q1.context_precision, Some(1.0));
    assert!(!q1.prompt.as_ref().unwrap().contains("[CHUNK 2]"));
}

#[test]
fn retrieval_cache_hit_miss_and_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = tiny();
    c.cache.retrieval = true;
    c.cache.dir = tmp.path().to_string_lossy().to_string();
    let p = Pipeline::build(c).unwrap();
    let first = p.run(&mut FirstSentence::new(&p), None).unwrap();
    assert_eq!(first.retrieval_cache, Status::Miss);
    let second = p.run(&mut FirstSentence::new(&p), None).unwrap();
    assert_eq!(second.retrieval_cache, Status::Hit);
    assert!(second.records.iter().all(|r| r.retrieval_cached));
    for (a, b) in first.records.iter().zip(&second.records) {
        assert_eq!(a.retrieved, b.retrieved);
        assert_eq!(a.times.retrieve, b.times.retrieve);
    }
    // Damage the entry: rebuilt, and the reason names the file.
    let entry = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let text = std::fs::read_to_string(&entry).unwrap();
    std::fs::write(&entry, text.replacen("paris", "pariz", 1)).unwrap();
    let third = p.run(&mut FirstSentence::new(&p), None).unwrap();
    match &third.retrieval_cache {
        Status::Rebuilt(reason) => assert!(reason.contains(&*entry.to_string_lossy()), "{reason}"),
        other => panic!("expected a rebuild, got {other}"),
    }
    assert_eq!(third.records[0].retrieved, first.records[0].retrieved);
}

#[test]
fn paraphrase_fuse_and_rewrite_with_a_fake_transform() {
    let base = tiny_text();
    let text = base.replace(
        "[reader]",
        "[query_transform]\nkind = \"paraphrase-fuse\"\nprompt = \"data/prompts/paraphrase_002.txt\"\nvariants = 2\n\n[reader]",
    );
    let p = Pipeline::build(config(&text).unwrap()).unwrap();
    let variants = |q: &str| vec![q.to_string(), "Eiffel Tower museum".to_string()];
    let mut t = FnTransform::new("two", variants);
    let run = p.run(&mut FirstSentence::new(&p), Some(&mut t)).unwrap();
    let q2 = &run.records[1];
    assert_eq!(q2.queries, ["Who wrote Hamlet?", "Eiffel Tower museum"]);
    // The retrieved list is RRF (k = 60) of the two BM25 runs at depth 5, recomputed here.
    let passages: Vec<Passage> = p.passages().to_vec();
    let bm25 = Bm25::build(&passages, &Analyzer::default(), Bm25Params::new()).unwrap();
    let runs = vec![
        bm25.retrieve("Who wrote Hamlet?", 5).unwrap(),
        bm25.retrieve("Eiffel Tower museum", 5).unwrap(),
    ];
    let mut want = Fusion::new(
        FusionMethod::Rrf {
            rank_constant: 60.0,
        },
        None,
    )
    .unwrap()
    .fuse(&runs)
    .unwrap();
    want.truncate(5);
    assert_eq!(q2.retrieved, want);
    assert!(q2.retrieved.iter().any(|h| h.id == "paris"));

    // include_original: the question first, and a paraphrase that is the question
    // (case and spacing aside) is not retrieved a second time.
    let with_q = base.replace(
        "[reader]",
        "[query_transform]\nkind = \"paraphrase-fuse\"\nprompt = \"data/prompts/paraphrase_002.txt\"\nvariants = 2\ninclude_original = true\n\n[reader]",
    );
    let po = Pipeline::build(config(&with_q).unwrap()).unwrap();
    let mut t = FnTransform::new("echo", |q: &str| {
        vec![
            q.to_uppercase().replace(' ', "  "),
            "Eiffel Tower museum".to_string(),
        ]
    });
    let run = po.run(&mut FirstSentence::new(&po), Some(&mut t)).unwrap();
    assert_eq!(
        run.records[1].queries,
        ["Who wrote Hamlet?", "Eiffel Tower museum"]
    );
    assert_eq!(run.records[1].retrieved, want);

    // A config with a transform refuses to run without one, and the reverse.
    let e = p
        .run(&mut FirstSentence::new(&p), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("query_transform"), "{e}");
    let plain = Pipeline::build(tiny()).unwrap();
    let mut t = FnTransform::new("x", |q: &str| vec![q.to_string()]);
    let e = plain
        .run(&mut FirstSentence::new(&plain), Some(&mut t))
        .unwrap_err()
        .to_string();
    assert!(e.contains("query_transform"), "{e}");
    // A transform that returns nothing is an error naming the question number.
    let mut empty = FnTransform::new("empty", |_q: &str| Vec::new());
    let e = p
        .run(&mut FirstSentence::new(&p), Some(&mut empty))
        .unwrap_err()
        .to_string();
    assert!(e.contains("question 1") && e.contains("no query"), "{e}");

    // Rewrite: only the first query is used.
    let text = base.replace(
        "[reader]",
        "[query_transform]\nkind = \"rewrite\"\n\n[reader]",
    );
    let p = Pipeline::build(config(&text).unwrap()).unwrap();
    let mut t = FnTransform::new("rw", |_q: &str| {
        vec!["Shakespeare tragedy".into(), "ignored".into()]
    });
    let run = p.run(&mut FirstSentence::new(&p), Some(&mut t)).unwrap();
    assert_eq!(run.records[0].queries, ["Shakespeare tragedy"]);
    assert_eq!(run.records[0].retrieved[0].id, "hamlet");
}

#[test]
fn closed_book_gets_no_passages() {
    let text = "name = \"cb\"\n[reader]\nprompt = \"data/prompts/closed_book_001.txt\"\n\
                [questions]\npath = \"tests/data/pipeline/questions.jsonl\"\n";
    let p = Pipeline::build(config(text).unwrap()).unwrap();
    let mut r = FirstSentence::new(&p);
    let run = p.run(&mut r, None).unwrap();
    assert_eq!(r.seen, vec![0; 5]);
    assert!(run
        .records
        .iter()
        .all(|x| x.abstained && x.context_precision.is_none()));
    assert_eq!(run.summary().context_precision, None);
    assert_eq!(run.retrieval, "closed-book");
    let prompt = run.records[0].prompt.clone().unwrap();
    assert!(prompt.contains("Help me answer this question: What is the capital of France?"));
    // The RAG prompt without a retriever is refused.
    let text = "[questions]\npath = \"tests/data/pipeline/questions.jsonl\"\n";
    let e = Pipeline::build(config(text).unwrap())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("reader.prompt") && e.contains("no retriever"),
        "{e}"
    );
}

#[test]
fn config_errors_name_the_field_or_file() {
    let base = tiny_text();
    // Unknown field.
    let e = config(&base.replace("passages = 2", "pasages = 2"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `pasages`"), "{e}");
    let e = config(&format!("colour = \"red\"\n{base}"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `colour`"), "{e}");
    // Missing corpus file.
    let e = config(&base.replace("corpus.jsonl", "nope.jsonl"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("nope.jsonl") && e.contains("corpus.path"), "{e}");
    // A re-ranker without a first stage.
    let text = "[rerank]\nkind = \"bi-encoder\"\n[reader]\nprompt = \"data/prompts/closed_book_001.txt\"\n\
                [questions]\npath = \"tests/data/pipeline/questions.jsonl\"\n";
    let e = config(text).unwrap_err();
    assert!(
        matches!(e, Error::InvalidParam { name: "rerank", .. }),
        "{e}"
    );
    assert!(e.to_string().contains("first stage"), "{e}");
    // k = 0, in each place a k is given.
    let e = config(&base.replace("passages = 2", "passages = 0")).unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidParam {
                name: "reader.passages",
                ..
            }
        ),
        "{e}"
    );
    let e = config(&base.replace("depth = 5", "depth = 0")).unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidParam {
                name: "retrieval.depth",
                ..
            }
        ),
        "{e}"
    );
    let e = config(&base.replace("[reader]", "[rerank]\ndepth = 0\n\n[reader]")).unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidParam {
                name: "rerank.depth",
                ..
            }
        ),
        "{e}"
    );
    // Missing prompt and question files; a wrong type.
    let e = config(&base.replace("rag_001.txt", "gone.txt"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("gone.txt") && e.contains("reader.prompt"), "{e}");
    let e = config(&base.replace("questions.jsonl", "gone.jsonl"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("gone.jsonl") && e.contains("questions.path"),
        "{e}"
    );
    let e = config(&base.replace("passages = 2", "passages = \"two\""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("passages") && e.contains("test.toml"), "{e}");
    // A prompt placeholder the template does not know.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "{passages}\nQ: {query}\n").unwrap();
    let text = base.replace("data/prompts/rag_001.txt", &bad.to_string_lossy());
    let e = Pipeline::build(config(&text).unwrap())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("bad.txt") && e.contains("{query}"), "{e}");
    // A trained cross-encoder on questions of the sets it trained on needs `split = "test"`;
    // `split = "test"` is not defined for a JSONL file.
    let enhanced = std::fs::read_to_string(root().join("configs/report004_enhanced.toml")).unwrap();
    assert!(enhanced.contains("split = \"test\"") && enhanced.contains("trained:minilm-ce"));
    let e = config(&enhanced.replace("split = \"test\"", "")).unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidParam {
                name: "questions.split",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("RAG Mini Wikipedia training"), "{e}");
    let squad = enhanced.replace("split = \"test\"", "").replace(
        "kind = \"rag-mini\"\nasset = \"rag-mini-wikipedia\"\nlimit",
        "kind = \"squad\"\nasset = \"squad-v2-dev-half\"\nlimit",
    );
    let e = config(&squad).unwrap_err().to_string();
    assert!(e.contains("questions.split") && e.contains("SQuAD"), "{e}");
    let e = config(&base.replace("[evaluation]", "split = \"test\"\n\n[evaluation]"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("questions.split") && e.contains("JSONL"), "{e}");
    // Every example config in configs/ parses (assets are not needed to parse), and every
    // systems file of a study in configs/studies/ parses and checks.
    let mut studies = 0;
    for entry in std::fs::read_dir(root().join("configs/studies")).unwrap() {
        let path = entry.unwrap().path();
        workbench::pipeline::system_spec::load_systems(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        studies += 1;
    }
    assert!(
        studies >= 2,
        "configs/studies/ holds the studies' systems files"
    );
    for entry in std::fs::read_dir(root().join("configs")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            continue;
        }
        PipelineConfig::from_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

#[test]
fn example_configs_name_models_three_ways_and_settings_override_fields() {
    use workbench::assets::ModelRef;
    let examples = root().join("configs/examples");
    let by_asset = PipelineConfig::from_file(&examples.join("gguf_by_asset.toml")).unwrap();
    assert!(matches!(
        ModelRef::parse(by_asset.reader.spec.model()),
        ModelRef::Asset(_)
    ));
    let by_hub = PipelineConfig::from_file(&examples.join("gguf_by_hub.toml")).unwrap();
    assert!(matches!(
        ModelRef::parse(by_hub.reader.spec.model()),
        ModelRef::Hub(_)
    ));
    PipelineConfig::from_file(&examples.join("openai_server.toml")).unwrap();
    // The by-path example names a file the user supplies: without it, the error names the
    // field; with `--set`, a relative path is the current folder's (the tests run in the
    // project root) and other fields keep the file's values.
    let by_path = examples.join("gguf_by_path.toml");
    let e = PipelineConfig::from_file(&by_path).unwrap_err().to_string();
    assert!(e.contains("reader.model"), "{e}");
    let sets = [
        "reader.model=./Cargo.toml".to_string(),
        "retrieval.depth=7".to_string(),
    ];
    let c = PipelineConfig::from_file_with(&by_path, &sets).unwrap();
    assert_eq!(c.resolve(c.reader.spec.model()), root().join("Cargo.toml"));
    assert_eq!(c.retrieval.depth, 7);
    assert!(c
        .resolve(&c.corpus.path)
        .ends_with("configs/examples/data/corpus.jsonl"));
    // A quoted string, a malformed setting and an unknown field.
    let c =
        PipelineConfig::from_file_with(&by_path, &["reader.model=\"./Cargo.toml\"".to_string()])
            .unwrap();
    assert_eq!(c.resolve(c.reader.spec.model()), root().join("Cargo.toml"));
    for (bad, says) in [
        ("reader.model", "no `=`"),
        ("reader..model=x", "empty key"),
        ("reader.nonsense=1", "nonsense"),
    ] {
        let e = PipelineConfig::from_file_with(&by_path, &[bad.to_string()])
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
    // An array of tables is set whole, its paths from the current folder too; a number where
    // a string is wanted is read as the string; a value that starts like TOML must be TOML.
    let c = PipelineConfig::from_file_with(
        &by_path,
        &[
            "reader.model=./Cargo.toml".to_string(),
            "retrieval.retrievers=[{kind=\"dense\", model=\"./workbench\"}]".to_string(),
            "name=2024".to_string(),
        ],
    )
    .unwrap();
    assert_eq!(
        c.resolve(c.retrieval.retrievers[0].model().unwrap()),
        root().join("workbench")
    );
    assert_eq!(c.name, "2024");
    let e = PipelineConfig::from_file_with(&by_path, &["reader.model=\"./Cargo.toml".to_string()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("not valid TOML"), "{e}");
    let e =
        PipelineConfig::from_file_with(&by_path, &["retrieval.retrievers.0.kind=bm25".to_string()])
            .unwrap_err()
            .to_string();
    assert!(e.contains("set it whole"), "{e}");
    // A hub file where a folder is needed is refused, naming the field.
    let text = std::fs::read_to_string(root().join("configs/report000.toml")).unwrap();
    assert!(text.contains("kind = \"extractive\""));
    let e = PipelineConfig::from_file_with(
        &root().join("configs/report000.toml"),
        &["reader.model=hf:org/name/model.safetensors".to_string()],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("reader.model") && e.contains("one file"), "{e}");
}

#[test]
fn question_set_bad_records_error_or_counted_skip() {
    let base = tiny_text();
    let text = base.replace("questions.jsonl", "bad_questions.jsonl");
    let e = Pipeline::build(config(&text).unwrap())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("bad_questions.jsonl:2:") && e.contains("empty `question`"),
        "{e}"
    );
    let text = text.replace(
        "path = \"tests/data/pipeline/bad_questions.jsonl\"",
        "path = \"tests/data/pipeline/bad_questions.jsonl\"\non_bad_record = \"skip\"",
    );
    let c = config(&text).unwrap();
    assert_eq!(c.questions.on_bad_record, BadRecords::Skip);
    let p = Pipeline::build(c).unwrap();
    let run = p.run(&mut FirstSentence::new(&p), None).unwrap();
    let ids: Vec<&str> = run.records.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["b1", "b5"]);
    assert_eq!(run.summary().skipped, 3);
    let reasons: Vec<&str> = run.skipped.iter().map(|s| s.reason.as_str()).collect();
    assert!(reasons[0].contains("empty `question`"));
    assert!(reasons[1].contains("no gold answer"));
    assert!(reasons[2].contains("duplicate id `b1`"));
    let dir = tempfile::tempdir().unwrap();
    run.write(dir.path()).unwrap();
    let skipped: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("skipped.json")).unwrap())
            .unwrap();
    assert_eq!(skipped.as_array().unwrap().len(), 3);
}

/// A gold answer that SQuAD-normalises to nothing (`---`, `)`) is dropped and counted; a
/// question left with no gold is a bad record, not an unanswerable question that an
/// abstention would get right.
#[test]
fn golds_that_normalise_to_nothing_are_dropped_and_reported() {
    let text = tiny_text().replace("questions.jsonl", "empty_gold_questions.jsonl");
    let e = Pipeline::build(config(&text).unwrap())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("empty_gold_questions.jsonl:2:") && e.contains("no usable gold answer"),
        "{e}"
    );
    let text = text.replace(
        "path = \"tests/data/pipeline/empty_gold_questions.jsonl\"",
        "path = \"tests/data/pipeline/empty_gold_questions.jsonl\"\non_bad_record = \"skip\"",
    );
    let p = Pipeline::build(config(&text).unwrap()).unwrap();
    // A reader that always abstains: no question it is run on can score EM = 1.
    let never: BTreeMap<&'static str, &'static str> = BTreeMap::new();
    let run = p.run(&mut Scripted(never), None).unwrap();
    let ids: Vec<&str> = run.records.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["g1", "g3"]);
    assert_eq!(run.records[0].gold_answers, ["Paris"]);
    let s = run.summary();
    assert_eq!((s.skipped, s.dropped_golds), (1, 1));
    assert_eq!(s.em, 0.0);
    assert!(s
        .to_table()
        .rows
        .iter()
        .any(|r| r[0].starts_with("gold answers dropped") && r[1] == "1"));
    let dir = tempfile::tempdir().unwrap();
    run.write(dir.path()).unwrap();
    let dropped: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("dropped_golds.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(dropped[0]["answer"], "---");
    assert_eq!(dropped[0]["line"], 1);
    assert_eq!(dropped.as_array().unwrap().len(), 1);
}

#[test]
fn context_precision_matches_hand_count_on_the_fixture() {
    // Passages "paris" and "rome" for "capital of France" (gold "Paris"): [1, 0].
    let c = context::context_precision(
        &[
            "Paris is the capital of France.",
            "Rome is the capital of Italy.",
        ],
        &["Paris"],
        workbench::evaluate::answer_match::AnswerMatch::Squad,
    )
    .unwrap()
    .unwrap();
    assert_eq!((c.precision, c.average_precision), (0.5, 1.0));
    // Reversed order: CP unchanged, AP = P@2 = 1/2.
    let c = context::context_precision(
        &[
            "Rome is the capital of Italy.",
            "Paris is the capital of France.",
        ],
        &["Paris"],
        workbench::evaluate::answer_match::AnswerMatch::Squad,
    )
    .unwrap()
    .unwrap();
    assert_eq!((c.precision, c.average_precision), (0.5, 0.5));
}

/// The issue's end-to-end test: `configs/tiny.toml` with the real SmolLM2 reader (the
/// test fixture model), on a seeded sample of 2 of its 5 questions.
#[test]
fn tiny_config_with_the_smollm2_reader() {
    let mut c = tiny();
    c.cache.retrieval = false;
    c.questions.limit = 2;
    let workbench::read::ReaderSpec::Generative(g) = &mut c.reader.spec else {
        panic!("the tiny config reads with a generative reader")
    };
    g.max_new_tokens = 24;
    let p = Pipeline::build(c).unwrap();
    let mut reader = workbench::pipeline::reader::generative_reader(&p).unwrap();
    let run = p.run(&mut reader, None).unwrap();
    assert_eq!(run.records.len(), 2);
    for r in &run.records {
        let prompt = r
            .prompt
            .as_ref()
            .expect("the generative reader exposes its prompt");
        // The chat text holds the report 001 prompt with the question and chunk 1.
        assert!(
            prompt.contains(&format!("Query: {}", r.question)),
            "{prompt}"
        );
        assert!(prompt.contains("[CHUNK 1]\n"), "{prompt}");
        assert!(
            prompt.contains(&format!("\n{} retrieved document chunks", 2)),
            "{prompt}"
        );
        assert!(!r.answer.is_empty());
        assert!(r.prompt_tokens > 50 && r.generated_tokens >= 1 && r.generated_tokens <= 24);
        assert!(r.times.read > 0.0 && r.times.prefill > 0.0);
        assert_eq!(r.passage_ids.first(), r.retrieved.first().map(|h| &h.id));
    }
    let dir = tempfile::tempdir().unwrap();
    run.write(dir.path()).unwrap();
    let preds = read_predictions(&dir.path().join("predictions.json")).unwrap();
    assert_eq!(preds.len(), 2);
    for r in &run.records {
        assert_eq!(preds[&r.id], r.prediction);
    }
    // serde_json's default float parsing is not bit-exact (no `float_roundtrip`), so the
    // read-back floats are compared with a tolerance.
    let back = read_traces(&dir.path().join("traces.jsonl")).unwrap();
    for (a, b) in back.iter().zip(&run.records) {
        assert_eq!(
            (&a.id, &a.answer, &a.prompt, &a.passage_ids),
            (&b.id, &b.answer, &b.prompt, &b.passage_ids)
        );
        assert!((a.f1 - b.f1).abs() < 1e-12 && (a.times.read - b.times.read).abs() < 1e-9);
    }
}

/// LLM query transforms on the SmolLM2 fixture, sharing the reader's model: RAG-Fusion
/// paraphrases (list prompt) and report 004's rewrite. SmolLM2 is too small to paraphrase
/// well; what is checked is the plumbing: one loaded model, the request and raw output in
/// the trace, a short count recorded (never padded), retrieval over exactly the parsed
/// queries, the transform's tokens and time.
#[test]
fn llm_paraphrase_and_rewrite_transforms_with_smollm2() {
    use workbench::pipeline::llm_transform::{transform_for, LlmTransform};
    use workbench::pipeline::transform::parse_list;
    let base = tiny_text();
    let text = base.replace(
        "[reader]",
        "[query_transform]\nkind = \"paraphrase-fuse\"\nprompt = \"data/prompts/paraphrase_list.txt\"\n\
         variants = 3\nmax_new_tokens = 40\n\n[reader]",
    );
    let mut c = config(&text).unwrap();
    c.questions.limit = 1;
    let workbench::read::ReaderSpec::Generative(g) = &mut c.reader.spec else {
        panic!("the tiny config reads with a generative reader")
    };
    g.max_new_tokens = 12;
    let p = Pipeline::build(c).unwrap();
    let mut reader = workbench::pipeline::reader::generative_reader(&p).unwrap();
    let mut t = transform_for(&p, reader.llm())
        .unwrap()
        .expect("a transform");
    assert!(t.llm().same_model(reader.llm()), "one loaded model");
    assert!(t.list_mode());
    let run = p.run(&mut reader, Some(&mut t)).unwrap();
    let passages: Vec<Passage> = p.passages().to_vec();
    let bm25 = Bm25::build(&passages, &Analyzer::default(), Bm25Params::new()).unwrap();
    for r in &run.records {
        assert_eq!(r.transform_requested, 3);
        assert_eq!(r.transform_raw.len(), 1, "one list call");
        assert!(!r.queries.is_empty() && r.queries.len() <= 3);
        let parsed = parse_list(&r.transform_raw[0], 3);
        if parsed.is_empty() {
            assert_eq!(r.queries, std::slice::from_ref(&r.question));
        } else {
            assert_eq!(r.queries, parsed, "the queries are the parsed output");
        }
        assert_eq!(
            r.transform_note.is_some(),
            parsed.len() < 3,
            "a short count is noted: {:?}",
            r.transform_note
        );
        assert!(r.transform_tokens.0 > 10 && r.transform_tokens.1 >= 1);
        assert!(r.times.transform > 0.0);
        // Retrieval used exactly these queries: RRF (k = 60) of their BM25 runs.
        let runs: Vec<_> = r
            .queries
            .iter()
            .map(|q| bm25.retrieve(q, 5).unwrap())
            .collect();
        let mut want = workbench::pipeline::transform::fuse_variants(&runs, 60.0).unwrap();
        want.truncate(5);
        assert_eq!(r.retrieved, want);
    }
    let s = run.summary();
    assert_eq!(
        s.transform_repaired,
        run.records
            .iter()
            .filter(|r| r.transform_note.is_some())
            .count()
    );
    assert!(run
        .transform
        .as_deref()
        .unwrap()
        .starts_with("paraphrase3-list-"));

    // Rewrite (report 004's prompt) on the same loaded model: one query per question.
    let text = base.replace(
        "[reader]",
        "[query_transform]\nkind = \"rewrite\"\nmax_new_tokens = 32\n\n[reader]",
    );
    let mut c = config(&text).unwrap();
    c.questions.limit = 1;
    let workbench::read::ReaderSpec::Generative(g) = &mut c.reader.spec else {
        panic!("the tiny config reads with a generative reader")
    };
    g.max_new_tokens = 8;
    let p2 = Pipeline::build(c).unwrap();
    let mut reader2 =
        workbench::pipeline::reader::generative_reader_on(&p2, reader.llm().clone()).unwrap();
    let mut t2 = transform_for(&p2, reader2.llm()).unwrap().unwrap();
    assert!(t2.llm().same_model(reader.llm()));
    let run = p2.run(&mut reader2, Some(&mut t2)).unwrap();
    let r = &run.records[0];
    assert_eq!((r.transform_requested, r.queries.len()), (1, 1));
    let (want, note) =
        workbench::pipeline::transform::parse_rewrite(&r.transform_raw[0], &r.question);
    assert_eq!((&r.queries[0], &r.transform_note), (&want, &note));

    // Bad transform prompts: each an error naming the file.
    let dir = tempfile::tempdir().unwrap();
    for (body, want) in [
        ("Rewrite this.", "{question}"),
        ("{question} {passages}", "{passages}"),
    ] {
        let f = dir.path().join("bad.txt");
        std::fs::write(&f, body).unwrap();
        let tpl = PromptTemplate::load(&f, "", "").unwrap();
        let e = LlmTransform::new(reader.llm().clone(), Default::default(), tpl)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want) && e.contains("bad.txt"), "{e}");
    }
}

/// The reproductions' ours-beside-report table: paired columns, missing values as –.
#[test]
fn side_by_side_pairs_columns_and_marks_missing() {
    let rows = vec![
        workbench::study::repro::Compared {
            system: "naive".into(),
            metric: "EM".into(),
            ours: Some(40.0),
            report: Some(43.14),
        },
        workbench::study::repro::Compared {
            system: "enhanced".into(),
            metric: "EM".into(),
            ours: Some(41.5),
            report: None,
        },
        workbench::study::repro::Compared {
            system: "naive".into(),
            metric: "CP".into(),
            ours: Some(0.5),
            report: Some(0.74),
        },
    ];
    let t = workbench::study::repro::side_by_side(&rows, &BTreeMap::from([("CP", 3)]), "c");
    let md = t.to_markdown();
    assert!(
        md.contains("| system | EM | EM (report) | CP | CP (report) |"),
        "{md}"
    );
    assert!(
        md.contains("| naive | 40.00 | 43.14 | 0.500 | 0.740 |"),
        "{md}"
    );
    assert!(md.contains("| enhanced | 41.50 | – | – | – |"), "{md}");
}

/// `questions.split = "test"` keeps exactly the questions the trained models never saw:
/// RAG Mini ids on the test side of the recipes' hash split (seed 13, 30 %), SQuAD
/// questions of the five held-out articles; a sample is drawn from those only.
#[test]
fn test_split_keeps_only_the_questions_no_trained_model_saw() {
    use workbench::train::qa_data::{hash_test_side, HELD_OUT_ARTICLES};
    use workbench::train::reader::ReaderRecipe;
    let sup = ReaderRecipe::default_minilm().supervision;
    let rag = |extra: &str| {
        let text = format!(
            "[reader]\nprompt = \"data/prompts/closed_book_001.txt\"\n\
             [questions]\nkind = \"rag-mini\"\nasset = \"rag-mini-wikipedia\"\n{extra}"
        );
        Pipeline::build(config(&text).unwrap()).unwrap()
    };
    let all = rag("").questions().questions.clone();
    let test = rag("split = \"test\"\n").questions().questions.clone();
    let want: Vec<&str> = all
        .iter()
        .filter(|q| hash_test_side(&q.id, sup.split_seed, sup.rag_test_percent))
        .map(|q| q.id.as_str())
        .collect();
    let got: Vec<&str> = test.iter().map(|q| q.id.as_str()).collect();
    assert_eq!(got, want);
    assert!(
        got.len() > all.len() / 5 && got.len() < all.len() * 2 / 5,
        "{} of {}",
        got.len(),
        all.len()
    );
    let sample = rag("split = \"test\"\nlimit = 40\n");
    let sample = &sample.questions().questions;
    assert_eq!(sample.len(), 40);
    assert!(sample.iter().all(|q| got.contains(&q.id.as_str())));

    let squad = Pipeline::build(
        config(
            "[reader]\nprompt = \"data/prompts/closed_book_001.txt\"\n\
             [questions]\nkind = \"squad\"\nasset = \"squad-v2-dev-half\"\nsplit = \"test\"\n",
        )
        .unwrap(),
    )
    .unwrap();
    let qs = &squad.questions().questions;
    assert!(!qs.is_empty());
    assert!(qs.iter().all(|q| q
        .title
        .as_deref()
        .is_some_and(|t| HELD_OUT_ARTICLES.contains(&t))));
}

/// `reader.kind = "extractive"` with a QA folder given by a path relative to the config:
/// the pipeline's answers are the reader's own on the same passages, with evidence;
/// concatenated and per-passage reading are both reachable; an unknown `trained:` recipe
/// and a transform without a language model are refused.
#[test]
fn extractive_reader_in_a_pipeline() {
    use workbench::pipeline::reader::{build, extractive_reader, ModelPool};
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("extractive.toml");
    let qa = root().join("tests/data/tiny_qa");
    let text = tiny_text()
        .replace("\"tests/", &format!("\"{}/tests/", root().display()))
        .replace("\"data/", &format!("\"{}/data/", root().display()))
        .replace(
            "model = \"smollm2-135m-instruct-gguf\"",
            &format!("kind = \"extractive\"\nmodel = \"{}\"", qa.display()),
        )
        // An extractive reader takes no decoding settings.
        .replace("max_new_tokens = 32\n", "");
    std::fs::write(&cfg, &text).unwrap();
    let p = Pipeline::build(PipelineConfig::from_file(&cfg).unwrap()).unwrap();
    let (mut reader, transform) = build(&p, &mut ModelPool::default()).unwrap();
    assert!(transform.is_none());
    let run = p.run(reader.as_mut(), None).unwrap();
    let mut direct = extractive_reader(&p).unwrap();
    for r in &run.records {
        let ctx: Vec<Context> = r
            .reranked
            .as_ref()
            .unwrap_or(&r.retrieved)
            .iter()
            .take(p.config().reader.passages)
            .map(|h| {
                let x = p.passages().iter().find(|x| x.id == h.id).unwrap();
                Context {
                    id: x.id.clone(),
                    title: x.title.clone(),
                    text: x.text.clone(),
                    score: h.score,
                }
            })
            .collect();
        let a = direct.read(&r.question, &ctx).unwrap();
        assert_eq!(r.answer, a.text, "{}", r.question);
        assert!(r.prompt.is_none());
    }
    assert!(run.records.iter().any(|r| !r.answer.is_empty()));

    let per = text.replace(
        "kind = \"extractive\"",
        "kind = \"extractive\"\nread_mode = \"best-per-passage\"\nnull_threshold = 0.5",
    );
    std::fs::write(&cfg, &per).unwrap();
    let c = PipelineConfig::from_file(&cfg).unwrap();
    let workbench::read::ReaderSpec::Extractive(e) = &c.reader.spec else {
        panic!("{:?}", c.reader.spec)
    };
    assert_eq!(e.null_threshold, Some(0.5));
    let p2 = Pipeline::build(c).unwrap();
    let r2 = extractive_reader(&p2).unwrap();
    assert_eq!(
        r2.params().mode,
        workbench::read::extractive::MultiPassage::BestPerPassage
    );

    let unknown = text.replace(&qa.display().to_string(), "trained:no-such-recipe");
    std::fs::write(&cfg, &unknown).unwrap();
    // A trained reader is resolved before building: building refuses it unresolved, and
    // resolving names the unknown recipe.
    let c3 = PipelineConfig::from_file(&cfg).unwrap();
    let e = Pipeline::build(c3.clone()).err().unwrap().to_string();
    assert!(
        e.contains("reader.model") && e.contains("no-such-recipe"),
        "{e}"
    );
    let e = workbench::pipeline::trained::for_config(
        &workbench::env::Env::project().unwrap(),
        workbench::env::Scale::Quick,
        &c3,
        workbench::pipeline::trained::Training::Forbid,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("no-such-recipe"), "{e}");

    let with_transform = text.replace(
        "[reader]",
        "[query_transform]\nkind = \"rewrite\"\n\n[reader]",
    );
    std::fs::write(&cfg, &with_transform).unwrap();
    let e = PipelineConfig::from_file(&cfg).unwrap_err().to_string();
    assert!(e.contains("query_transform"), "{e}");
}

/// The controls as retrievers: `oracle` gives each SQuAD question its own paragraph (and
/// refuses a JSONL question set), `random` the same seeded passages run after run.
#[test]
fn oracle_and_random_controls() {
    let text = |kind: &str| {
        format!(
            "name = \"control\"\n[corpus]\nkind = \"squad\"\nasset = \"squad-v2-dev-half\"\n\
             [retrieval]\ndepth = 3\n[[retrieval.retrievers]]\nkind = \"{kind}\"\n\
             [reader]\nmodel = \"smollm2-135m-instruct-gguf\"\nprompt = \"data/prompts/rag_001.txt\"\npassages = 3\n\
             [questions]\nkind = \"squad\"\nasset = \"squad-v2-dev-half\"\nlimit = 6\n\
             [evaluation]\nanswer_match = \"squad\"\n[cache]\nretrieval = false\n"
        )
    };
    let p = Pipeline::build(config(&text("oracle")).unwrap()).unwrap();
    let run = p.run(&mut FirstSentence::new(&p), None).unwrap();
    for (r, q) in run.records.iter().zip(&p.questions().questions) {
        let gold = q.context_id.as_deref().unwrap();
        assert!(!r.retrieved.is_empty(), "{}", r.id);
        for h in &r.retrieved {
            let doc = &p.passages().iter().find(|x| x.id == h.id).unwrap().doc_id;
            assert_eq!(doc, gold, "{}", r.id);
        }
        // The gold paragraph holds the answer: every kept passage is relevant.
        assert_eq!(r.context_precision, Some(1.0), "{}", r.id);
    }
    let random = |_: ()| {
        let p = Pipeline::build(config(&text("random")).unwrap()).unwrap();
        let run = p.run(&mut FirstSentence::new(&p), None).unwrap();
        run.records
            .iter()
            .map(|r| r.retrieved.iter().map(|h| h.id.clone()).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    };
    let a = random(());
    assert_eq!(a, random(()));
    assert!(a.iter().all(|ids| ids.len() == 3));
    let jsonl = tiny_text().replace("kind = \"bm25\"", "kind = \"oracle\"");
    let e = config(&jsonl).unwrap_err().to_string();
    assert!(e.contains("oracle") && e.contains("squad"), "{e}");
}

/// A dense retriever's model given as a folder (the all-MiniLM-L6-v2 files, by path)
/// retrieves exactly as the asset does; a query prefix is put before the query, and a
/// passage prefix before every passage, before encoding.
#[test]
fn dense_model_by_folder_and_prefixes() {
    let folder = workbench::assets::Assets::load()
        .unwrap()
        .resolve("all-minilm-l6-v2", "model.safetensors")
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let dense = |model: &str, extra: &str| {
        let text = tiny_text().replace(
            "kind = \"bm25\"",
            &format!("kind = \"dense\"\nmodel = \"{model}\"\n{extra}"),
        );
        Pipeline::build(config(&text).unwrap()).unwrap()
    };
    let ids = |p: &Pipeline| {
        let run = p.run(&mut FirstSentence::new(p), None).unwrap();
        run.records
            .iter()
            .map(|r| {
                r.retrieved
                    .iter()
                    .map(|h| (h.id.clone(), (h.score * 1e4).round() as i64))
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    };
    let by_asset = ids(&dense("all-minilm-l6-v2", ""));
    let by_folder = ids(&dense(&folder.display().to_string(), ""));
    assert_eq!(by_asset, by_folder);
    let prefixed = ids(&dense(
        "all-minilm-l6-v2",
        "query_prefix = \"query: \"\npassage_prefix = \"passage: \"",
    ));
    assert_ne!(by_asset, prefixed, "the prefixes change the vectors");
    // The query prefix alone: the scores of the question with "query: " written in front.
    let p = dense("all-minilm-l6-v2", "query_prefix = \"query: \"");
    let plain = dense("all-minilm-l6-v2", "");
    let q = &p.questions().questions[0];
    let with_prefix = p.run(&mut FirstSentence::new(&p), None).unwrap().records[0]
        .retrieved
        .clone();
    let enc = workbench::encode::BertEncoder::load(
        &workbench::assets::Assets::load().unwrap(),
        "all-minilm-l6-v2",
        Default::default(),
    )
    .unwrap();
    let qv = enc
        .embed(&[format!("query: {}", q.question).as_str()])
        .unwrap();
    let top = &with_prefix[0];
    let passage = plain.passages().iter().find(|x| x.id == top.id).unwrap();
    let pv = enc.embed(&[passage.text.as_str()]).unwrap();
    let dot: f32 = qv[0].iter().zip(&pv[0]).map(|(a, b)| a * b).sum();
    assert!((dot - top.score).abs() < 1e-4, "{dot} vs {}", top.score);
}

/// Building never trains. A config naming a trained cross-encoder fails in
/// `Pipeline::build` with an error saying it was not resolved; resolving it with training
/// forbidden, over an empty cache, fails naming how to train it and writes nothing.
#[test]
fn a_trained_reranker_is_resolved_before_building_never_by_it() {
    use workbench::env::{Env, Scale};
    use workbench::pipeline::trained::{for_config, Training};
    let text = tiny_text().replace(
        "[reader]",
        "[rerank]\nkind = \"cross-encoder\"\nmodel = \"trained:minilm-ce\"\ndepth = 5\n\n[reader]",
    );
    let c = config(&text).unwrap();
    let e = Pipeline::build(c.clone()).err().unwrap().to_string();
    assert!(
        e.contains("trained:minilm-ce") && e.contains("not resolved"),
        "{e}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let mut env = Env::project().unwrap();
    env.cache = tmp.path().join("cache");
    // The recipe of each scale, named in the error.
    for (scale, recipe) in [
        (Scale::Quick, "`minilm-ce-quick`"),
        (Scale::Default, "`minilm-ce`"),
    ] {
        let e = for_config(&env, scale, &c, Training::Forbid)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("train_reranker")
                && e.contains(recipe)
                && e.contains(&format!("--recipe minilm-ce --scale {scale}")),
            "{e}"
        );
    }
    // A ColBERT projection: refused by the builder, not trained when resolving may not.
    let colbert = config(&tiny_text().replace(
        "[reader]",
        "[rerank]\nkind = \"late-interaction\"\nmodel = \"all-minilm-l6-v2\"\nhead_dim = 128\ndepth = 5\n\n[reader]",
    ))
    .unwrap();
    let e = Pipeline::build(colbert.clone()).err().unwrap().to_string();
    assert!(e.contains("not resolved") && e.contains("ColBERT"), "{e}");
    let e = for_config(&env, Scale::Quick, &colbert, Training::Forbid)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ColBERT projection") && e.contains("is not in"),
        "{e}"
    );
    assert!(
        !env.cache.exists(),
        "resolving without training wrote {}",
        env.cache.display()
    );
    // Without a trained model there is nothing to resolve.
    assert!(for_config(&env, Scale::Quick, &tiny(), Training::Forbid)
        .unwrap()
        .is_empty());
}

/// A trained extractive reader is resolved before building, at the scale given as a
/// value: `Pipeline::build` refuses it unresolved, and resolving over an empty cache names
/// the recipe at that scale and the command (with `--scale`) that trains it. A name with a
/// scale suffix is not a recipe.
#[test]
fn a_trained_reader_is_resolved_at_a_scale_before_building() {
    use workbench::env::{Env, Scale};
    use workbench::pipeline::trained::{for_config, Training};
    let reader = |model: &str| {
        tiny_text()
            .replace(
                "model = \"smollm2-135m-instruct-gguf\"",
                &format!("kind = \"extractive\"\nmodel = \"{model}\""),
            )
            .replace("max_new_tokens = 32\n", "")
    };
    let c = config(&reader("trained:minilm-all")).unwrap();
    let e = Pipeline::build(c.clone()).err().unwrap().to_string();
    assert!(
        e.contains("reader.model") && e.contains("trained:minilm-all") && e.contains("resolve"),
        "{e}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let mut env = Env::project().unwrap();
    env.cache = tmp.path().join("cache");
    for (scale, label) in [
        (Scale::Quick, "`minilm-all-quick`"),
        (Scale::Default, "`minilm-all`"),
    ] {
        let e = for_config(&env, scale, &c, Training::Allow)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(label)
                && e.contains(&format!("--recipe minilm-all --scale {scale}"))
                && e.contains("reader.model"),
            "{e}"
        );
    }
    let suffixed = config(&reader("trained:minilm-all-quick")).unwrap();
    let e = for_config(&env, Scale::Quick, &suffixed, Training::Allow)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown recipe `minilm-all-quick`"), "{e}");
    assert!(
        !env.cache.exists(),
        "resolving a reader wrote {}",
        env.cache.display()
    );
}

/// A trained extractive reader in the cache resolves to the folder and windows its record
/// names, at the scale asked (the quick record is not the default's), and the built
/// pipeline hands exactly that to its reader; another `reader.model` gets nothing.
#[test]
fn a_resolved_trained_reader_reaches_the_pipeline_from_its_record() {
    use workbench::env::{Env, Scale};
    use workbench::pipeline::trained::{for_config, Training};
    use workbench::read::extractive::WindowParams;
    use workbench::train::reader::{ReaderRecipe, TrainedReader};
    let tmp = tempfile::tempdir().unwrap();
    let mut env = Env::project().unwrap();
    env.cache = tmp.path().join("cache");
    let mut recipe = ReaderRecipe::at_scale("minilm-all", Scale::Quick).unwrap();
    let key = recipe.key(&env.assets).unwrap();
    let run = env.cache_dir("readers").join(&key);
    std::fs::create_dir_all(&run).unwrap();
    // Windows unlike any recipe's: they must come from the record.
    recipe.windows = WindowParams {
        max_seq_len: 123,
        doc_stride: 45,
    };
    let record = TrainedReader {
        recipe,
        key: key.clone(),
        model_dir: run.join("model"),
        features: 0,
        train_seconds: 0.0,
        examples_per_second: 0.0,
        counts: vec![],
        nq_used: vec![],
        load: String::new(),
    };
    std::fs::write(
        run.join("done.json"),
        serde_json::to_string(&record).unwrap(),
    )
    .unwrap();
    let text = tiny_text()
        .replace(
            "model = \"smollm2-135m-instruct-gguf\"",
            "kind = \"extractive\"\nmodel = \"trained:minilm-all\"",
        )
        .replace("max_new_tokens = 32\n", "");
    let c = config(&text).unwrap();
    let trained = for_config(&env, Scale::Quick, &c, Training::Forbid).unwrap();
    let want = (run.join("model"), record.recipe.windows);
    assert_eq!(trained.reader_for("trained:minilm-all"), Some(&want));
    assert_eq!(trained.reader_for("trained:minilm-squad"), None);
    let p = Pipeline::build_resolved(c.clone(), &trained).unwrap();
    assert_eq!(p.trained_reader(), Some(&want));
    // The default scale's recipe is another key: not in this cache.
    let e = for_config(&env, Scale::Default, &c, Training::Forbid)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not trained yet"), "{e}");
    // Resolved for one model, built for another: refused.
    let other = config(&text.replace("trained:minilm-all", "trained:minilm-squad")).unwrap();
    let e = Pipeline::build_resolved(other, &trained)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("trained:minilm-squad") && e.contains("resolve"),
        "{e}"
    );
}
