//! RAG methods (`[method]`, `workbench::method`) run through a real pipeline: the tiny
//! fixture's BM25 (`configs/tiny.toml`), a deterministic reader, and a scripted model
//! (control flow pinned) or the SmolLM2-135M GGUF (the real generator end to end).

mod common;

use common::words;
use std::path::PathBuf;
use workbench::method::lm::scripted;
use workbench::method::{Completion, ScriptedLm, StepKind};
use workbench::pipeline::trace::{Journal, Outcome};
use workbench::pipeline::{Pipeline, PipelineConfig};
use workbench::read::{Answer, Context, Reader};

/// Every `kind` a `[method]` section takes.
const KINDS: [&str; 8] = [
    "naive",
    "closed-book",
    "adaptive",
    "iter-retgen",
    "ircot",
    "self-ask",
    "flare",
    "agentic",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `configs/tiny.toml` (paths made absolute) with `extra` appended, read and checked as
/// a config file is.
fn tiny_checked(extra: &str, edit: impl Fn(String) -> String) -> workbench::Result<PipelineConfig> {
    let text = std::fs::read_to_string(root().join("configs/tiny.toml"))
        .unwrap()
        .replace("\"../", &format!("\"{}/", root().display()));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.toml");
    std::fs::write(&path, format!("{}\n{extra}\n", edit(text))).unwrap();
    let mut c = PipelineConfig::from_file(&path)?;
    c.cache.retrieval = false;
    Ok(c)
}

/// `configs/tiny.toml` with `extra` (a `[method]` section) appended.
fn tiny_with(extra: &str) -> PipelineConfig {
    tiny_checked(extra, |t| t).unwrap_or_else(|e| panic!("{e}"))
}

/// Answers with the first sentence of passage 1 when that passage shares a word of more
/// than three letters with the question, else "Not found".
struct FirstSentence;

impl Reader for FirstSentence {
    fn name(&self) -> &str {
        "first-sentence"
    }
    fn read(&mut self, q: &str, passages: &[Context]) -> workbench::Result<Answer> {
        let qw = words(q);
        let text = passages
            .first()
            .filter(|p| words(&p.text).iter().any(|w| qw.contains(w)))
            .map_or("Not found".to_string(), |p| {
                p.text.split('.').next().unwrap_or("").trim().to_string()
            });
        Ok(Answer {
            text,
            passage_ids: passages.iter().map(|p| p.id.clone()).collect(),
            ..Answer::default()
        })
    }
}

fn questions(p: &Pipeline) -> Vec<String> {
    p.questions()
        .questions
        .iter()
        .map(|q| q.question.clone())
        .collect()
}

#[test]
fn adaptive_retrieves_only_for_unsure_answers_and_counts_the_calls() {
    let p = Pipeline::build(tiny_with(
        "[method]\nkind = \"adaptive\"\nthreshold = 0.5\n",
    ))
    .unwrap();
    let n = questions(&p).len();
    assert_eq!(n, 5);
    // Question 1 is answered closed-book with confidence 0.9; the others at 0.2.
    let mut outputs = vec![scripted("Paris", 0.9)];
    outputs.extend((1..n).map(|_| scripted("Lyon", 0.2)));
    let mut lm = ScriptedLm::from_completions(outputs);
    let run = p
        .run_method(&mut FirstSentence, Some(&mut lm), None)
        .unwrap();
    let calls: Vec<usize> = run.records.iter().map(|r| r.retrieval_calls()).collect();
    assert_eq!(calls, [0, 1, 1, 1, 1]);
    assert_eq!(run.records[0].prediction, "Paris");
    assert_eq!(run.records[0].em, 1.0);
    assert!(run.records[0].passage_ids.is_empty());
    // Question 2 (Hamlet) is read over BM25's passages.
    let q2 = &run.records[1];
    assert_eq!(q2.passage_ids[0], "hamlet");
    assert_eq!(q2.prediction, "Hamlet was written by William Shakespeare");
    let kinds: Vec<StepKind> = q2.steps.iter().map(|s| s.kind).collect();
    assert_eq!(
        kinds,
        [StepKind::Generate, StepKind::Retrieve, StepKind::Read]
    );
    // Question 5 (Neptune) is in no passage: the read finds nothing → the closed-book
    // answer stands (fallback), and it is wrong.
    let q5 = &run.records[4];
    assert!(!q5.abstained);
    assert_eq!(q5.prediction, "Lyon");
    let s = run.summary();
    assert_eq!(s.mean_retrieval_calls, Some(0.8));
    assert!(s.to_table().to_markdown().contains("mean retrieval calls"));
    assert!(run.retrieval.ends_with("__adaptive"), "{}", run.retrieval);
}

#[test]
fn a_passage_retrieved_at_any_step_makes_a_wrong_answer_a_reader_miss() {
    let p = Pipeline::build(tiny_with(
        "[method]\nkind = \"agentic\"\nmax_searches = 2\n",
    ))
    .unwrap();
    let n = questions(&p).len();
    // Every question: search "capital of France", then answer "Berlin".
    let mut outputs: Vec<Completion> = Vec::new();
    for _ in 0..n {
        outputs.push(scripted("<search> capital of France", 0.9));
        outputs.push(scripted("<answer> Berlin", 0.9));
    }
    let mut lm = ScriptedLm::from_completions(outputs);
    let run = p
        .run_method(&mut FirstSentence, Some(&mut lm), None)
        .unwrap();
    let q1 = &run.records[0];
    assert_eq!(q1.prediction, "Berlin");
    assert!(q1.passage_ids.contains(&"paris".to_string()));
    assert_eq!(q1.outcome, Outcome::ReaderMiss);
    // The information block holds BM25's passages for the query.
    let second = &lm.requests[1].assistant_prefix;
    assert!(
        second.contains("<information>Doc 1(Title: Paris) Paris is the capital of France"),
        "{second}"
    );
    // Hamlet's gold is in no passage the searches found: a retrieval miss.
    assert_eq!(run.records[1].outcome, Outcome::RetrievalMiss);
    // Tokens are summed over the model's calls.
    assert_eq!(q1.generated_tokens, 4 + 2);
}

#[test]
fn a_journaled_method_run_continues_without_asking_the_model_again() {
    let dir = tempfile::tempdir().unwrap();
    let jp = dir.path().join("run.journal.jsonl");
    let p = Pipeline::build(tiny_with(
        "[method]\nkind = \"iter-retgen\"\niterations = 2\n",
    ))
    .unwrap();
    let mut j = Journal::open(&jp, "k").unwrap();
    let first = p
        .run_method(&mut FirstSentence, None, Some(&mut j))
        .unwrap();
    // Two turns, or one when the first read abstains (the second query would repeat it).
    let calls: Vec<usize> = first.records.iter().map(|r| r.retrieval_calls()).collect();
    assert!(
        calls.contains(&2) && calls.iter().all(|c| *c == 1 || *c == 2),
        "{calls:?}"
    );
    for r in &first.records {
        assert_eq!(
            r.retrieval_calls() == 1,
            r.steps[1].text == "Not found",
            "{}",
            r.id
        );
    }
    let mut j = Journal::open(&jp, "k").unwrap();
    assert_eq!(j.done().len(), 5);
    // A reader that fails if asked: nothing is read again.
    struct Refuses;
    impl Reader for Refuses {
        fn name(&self) -> &str {
            "refuses"
        }
        fn read(&mut self, _: &str, _: &[Context]) -> workbench::Result<Answer> {
            Err(workbench::Error::param("reader", "asked again"))
        }
    }
    let again = p.run_method(&mut Refuses, None, Some(&mut j)).unwrap();
    let strip = |r: &workbench::pipeline::trace::TraceRecord| {
        (r.id.clone(), r.prediction.clone(), r.steps.len())
    };
    assert_eq!(
        first.records.iter().map(strip).collect::<Vec<_>>(),
        again.records.iter().map(strip).collect::<Vec<_>>()
    );
}

#[test]
fn method_configs_are_checked_before_any_work() {
    let err = |extra: &str| -> String {
        tiny_checked(extra, |t| t)
            .map(|_| String::new())
            .unwrap_or_else(|e| e.to_string())
    };
    let e = err("[method]\nkind = \"agentic\"\nthreshold = 0.3\n");
    assert!(e.contains("threshold"), "{e}");
    let e = err("[method]\nkind = \"adaptive\"\nthreshold = 2.0\n");
    assert!(e.contains("method.threshold"), "{e}");
    let e = err("[method]\nkind = \"ircot\"\nprompt = \"no/such/file.txt\"\n");
    assert!(e.contains("method.prompt"), "{e}");
    let e = err("[query_transform]\nkind = \"rewrite\"\n[method]\nkind = \"naive\"\n");
    assert!(e.contains("method") && e.contains("query_transform"), "{e}");
    // A method that prompts the model needs a reader that has one.
    let e = tiny_checked("[method]\nkind = \"self-ask\"\n", |t| {
        t.replace(
            "model = \"smollm2-135m-instruct-gguf\"",
            "kind = \"extractive\"\nmodel = \"all-minilm-l6-v2\"",
        )
        .replace("max_new_tokens = 32\n", "")
    })
    .map(|_| String::new())
    .unwrap_or_else(|e| e.to_string());
    assert!(e.contains("method.kind") && e.contains("self-ask"), "{e}");
    // A prompt file without the method's placeholders is refused at build, naming it.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("ircot.txt");
    std::fs::write(&f, "Question: {question}").unwrap();
    let c = tiny_with(&format!(
        "[method]\nkind = \"ircot\"\nprompt = {:?}\n",
        f.display().to_string()
    ));
    let e = Pipeline::build(c).err().unwrap().to_string();
    assert!(e.contains("{passages}") && e.contains("ircot.txt"), "{e}");
    // `run` refuses a method config; `run_method` a config without one.
    let p = Pipeline::build(tiny_with("[method]\nkind = \"naive\"\n")).unwrap();
    let e = p.run(&mut FirstSentence, None).unwrap_err().to_string();
    assert!(e.contains("run_method"), "{e}");
    let p = Pipeline::build(tiny_with("")).unwrap();
    let e = p
        .run_method(&mut FirstSentence, None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no [method]"), "{e}");
}

#[test]
fn a_config_without_a_method_keys_as_before_and_a_method_prompt_is_keyed() {
    let plain = serde_json::to_value(tiny_with("")).unwrap();
    assert!(plain.get("method").is_none(), "{plain}");
    let with = serde_json::to_value(tiny_with("[method]\nkind = \"naive\"\n")).unwrap();
    assert_eq!(with["method"]["kind"], "naive");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("adaptive.txt");
    std::fs::write(&f, "Q: {question}").unwrap();
    let c = tiny_with(&format!(
        "[method]\nkind = \"adaptive\"\nprompt = {:?}\n",
        f.display().to_string()
    ));
    let a = workbench::pipeline::run_key::inputs(&c).unwrap();
    std::fs::write(&f, "Question: {question}").unwrap();
    let b = workbench::pipeline::run_key::inputs(&c).unwrap();
    assert!(a.contains_key("method.prompt"));
    assert_ne!(a["method.prompt"], b["method.prompt"]);
}

#[test]
fn naive_method_equals_the_plain_pipeline() {
    let plain = Pipeline::build(tiny_with("")).unwrap();
    let a = plain.run(&mut FirstSentence, None).unwrap();
    let m = Pipeline::build(tiny_with("[method]\nkind = \"naive\"\n")).unwrap();
    let b = m.run_method(&mut FirstSentence, None, None).unwrap();
    for (x, y) in a.records.iter().zip(&b.records) {
        assert_eq!(
            (&x.prediction, x.em, x.f1, x.outcome, &x.passage_ids),
            (&y.prediction, y.em, y.f1, y.outcome, &y.passage_ids)
        );
        assert_eq!(y.retrieval_calls(), 1);
    }
}

/// The order of a real model's trace that `kind`'s control flow implies, whatever the model
/// wrote: each rule follows from what a step's text or confidence asked for. Returns the
/// conditional branches the record took (`retrieved`, `sure`, `query + answer`, …), so the
/// caller can check that a run exercised them.
fn check_step_grammar(
    kind: &str,
    r: &workbench::pipeline::trace::TraceRecord,
) -> Vec<&'static str> {
    use workbench::method::agentic::tag_content;
    use workbench::method::recorder::{after_marker, first_sentence};
    use StepKind::{Generate, Read, Retrieve};
    let kinds: Vec<StepKind> = r.steps.iter().map(|s| s.kind).collect();
    let retrieves = kinds.iter().filter(|k| **k == Retrieve).count();
    assert_eq!(r.retrieval_calls(), retrieves, "{kind}: {kinds:?}");
    let at = |i: usize| kinds.get(i).copied();
    let query = |i: usize| r.steps.get(i).and_then(|s| s.query.clone());
    let mut took = Vec::new();
    match kind {
        "naive" => assert_eq!(kinds, [Retrieve, Read], "{kind}"),
        "closed-book" => assert_eq!(kinds, [Generate], "{kind}"),
        "adaptive" => {
            // Its closed-book turn; kept when sure (threshold 0.6), else one retrieval with
            // the question and a read.
            assert_eq!(at(0), Some(Generate), "{kind}");
            let first = &r.steps[0];
            let sure = !first.text.trim().is_empty() && first.confidence.is_some_and(|c| c >= 0.6);
            if !sure {
                assert_eq!(
                    kinds,
                    [Generate, Retrieve, Read],
                    "{kind}: unsure must retrieve"
                );
                assert_eq!(query(1).as_deref(), Some(r.question.as_str()));
                took.push("unsure: retrieved");
            } else if kinds.len() == 1 {
                assert_eq!(r.prediction.trim(), first.text.trim(), "{kind}");
                took.push("sure: kept");
            } else {
                // Sure, but the answer abstained: retrieve all the same.
                assert_eq!(kinds, [Generate, Retrieve, Read], "{kind}");
            }
        }
        "iter-retgen" => {
            // Retrieve and read, at most `iterations` (2) times: the question first, then the
            // question with the last answer (a query that would repeat ends the loop).
            assert!(
                (1..=2).contains(&retrieves) && kinds.len() == 2 * retrieves,
                "{kind}: {kinds:?}"
            );
            for pair in kinds.chunks(2) {
                assert_eq!(pair, [Retrieve, Read], "{kind}");
            }
            assert_eq!(query(0).as_deref(), Some(r.question.as_str()));
            if retrieves == 2 {
                let answer = r.steps[1].text.trim();
                assert_eq!(query(2), Some(format!("{} {answer}", r.question)), "{kind}");
                took.push("query + answer");
            }
        }
        "ircot" => {
            // The question first; each reasoning sentence either states the answer (the
            // end), or is empty (the end), or is the next query (within `max_steps` = 4
            // sentences); without a stated answer the reader answers last.
            assert_eq!(at(0), Some(Retrieve), "{kind}");
            assert_eq!(query(0).as_deref(), Some(r.question.as_str()));
            let reasons: Vec<usize> = (0..kinds.len())
                .filter(|i| r.steps[*i].purpose == "reason")
                .collect();
            let mut stated = false;
            for (k, &i) in reasons.iter().enumerate() {
                let sentence = first_sentence(&r.steps[i].text);
                if after_marker(sentence, "so the answer is").is_some() {
                    assert_eq!(i + 1, kinds.len(), "{kind}: a stated answer ends the loop");
                    stated = true;
                } else if sentence.is_empty() || k + 1 == 4 {
                    assert_eq!(at(i + 1), Some(Read), "{kind}");
                } else {
                    assert_eq!(at(i + 1), Some(Retrieve), "{kind}");
                    assert_eq!(query(i + 1).as_deref(), Some(sentence), "{kind}");
                    took.push("retrieved with a sentence");
                }
            }
            if !stated {
                assert_eq!(kinds.last(), Some(&Read), "{kind}");
            }
        }
        "flare" => {
            // The question first; a regeneration only after a retrieval for its sentence.
            assert_eq!(at(0), Some(Retrieve), "{kind}");
            for (i, s) in r.steps.iter().enumerate() {
                if s.purpose == "regenerate" {
                    assert_eq!(r.steps[i - 1].purpose, "unsure sentence", "{kind}");
                    took.push("unsure: retrieved");
                }
                if s.purpose == "unsure sentence" {
                    assert_eq!(
                        r.steps.get(i + 1).map(|s| s.purpose.as_str()),
                        Some("regenerate")
                    );
                }
            }
        }
        "self-ask" => {
            // A follow-up question without a final answer is searched (its text the query)
            // and read next.
            for (i, s) in r.steps.iter().enumerate() {
                let follow_up = after_marker(&s.text, "Follow up:");
                let asks = s.kind == Generate
                    && follow_up.is_some()
                    && after_marker(&s.text, "So the final answer is:").is_none();
                let searched = r.steps[..i].iter().filter(|s| s.kind == Retrieve).count();
                if asks && searched < 4 && s.purpose == "decompose" {
                    assert_eq!(
                        (at(i + 1), at(i + 2)),
                        (Some(Retrieve), Some(Read)),
                        "{kind}"
                    );
                    assert_eq!(query(i + 1), follow_up, "{kind}");
                    took.push("searched a follow-up");
                }
            }
        }
        "agentic" => {
            // A turn that ends in a <search> (no answer after it) is searched next, its text
            // the query.
            for (i, s) in r.steps.iter().enumerate() {
                let (search, answer) = (s.text.rfind("<search>"), s.text.rfind("<answer>"));
                let q = tag_content(&s.text, "search");
                let searched = r.steps[..i].iter().filter(|s| s.kind == Retrieve).count();
                if s.purpose == "turn"
                    && search.is_some_and(|at| answer.is_none_or(|a| a < at))
                    && q.as_ref().is_some_and(|q| !q.is_empty())
                    && searched < 4
                {
                    assert_eq!(at(i + 1), Some(Retrieve), "{kind}: {:?}", s.text);
                    assert_eq!(query(i + 1), q, "{kind}");
                    took.push("searched");
                }
            }
        }
        other => panic!("no grammar for `{other}`"),
    }
    took
}

/// Every method with the SmolLM2-135M GGUF as reader and model: the loop runs end to end,
/// its steps follow the method's control flow, the model's calls carry token
/// log-probabilities (a confidence), and the tokens counted in the trace are the steps'
/// sums.
#[test]
fn every_method_runs_with_a_real_gguf_model() {
    use workbench::pipeline::reader::{build_parts, ModelPool};
    let mut pool = ModelPool::default();
    for kind in KINDS {
        let extra = if kind == "iter-retgen" {
            "[method]\nkind = \"iter-retgen\"\niterations = 2\n".to_string()
        } else if kind == "adaptive" {
            "[method]\nkind = \"adaptive\"\nthreshold = 0.6\nmax_new_tokens = 24\n".to_string()
        } else if kind == "naive" {
            "[method]\nkind = \"naive\"\n".to_string()
        } else {
            format!("[method]\nkind = \"{kind}\"\nmax_new_tokens = 24\n")
        };
        let mut c = tiny_with(&extra);
        c.questions.limit = 2;
        let p = Pipeline::build(c).unwrap_or_else(|e| panic!("{kind}: {e}"));
        let mut parts = build_parts(&p, &mut pool).unwrap();
        let run = p
            .run_method(
                parts.reader.as_mut(),
                parts
                    .lm
                    .as_mut()
                    .map(|g| g as &mut dyn workbench::method::Lm),
                None,
            )
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(run.records.len(), 2, "{kind}");
        let mut took = std::collections::BTreeSet::new();
        for r in &run.records {
            assert!(!r.steps.is_empty(), "{kind}");
            took.extend(check_step_grammar(kind, r));
            let generated: usize = r.steps.iter().map(|s| s.generated_tokens).sum();
            assert_eq!(generated, r.generated_tokens, "{kind}");
            assert!(generated > 0 || kind == "naive", "{kind}");
            for s in r.steps.iter().filter(|s| s.kind == StepKind::Generate) {
                // A turn cut at a stop string on its first token has no text to score.
                if !s.text.is_empty() {
                    let c = s
                        .confidence
                        .unwrap_or_else(|| panic!("{kind}: no confidence"));
                    assert!(c > 0.0 && c <= 1.0, "{kind}: {c}");
                    eprintln!("{kind}: {:?} confidence {c:.3}: {:?}", r.id, s.text);
                }
            }
        }
        // Each looping method's conditional step ran on at least one of the two questions
        // (SmolLM2's closed-book confidences on them are about 0.77 and 0.53, either side
        // of adaptive's 0.6). Self-Ask and agentic loop only when the model writes
        // "Follow up:" or <search>, which SmolLM2 does not here: their scripted tests pin
        // that flow.
        let want: &[&str] = match kind {
            "adaptive" => &["sure: kept", "unsure: retrieved"],
            "iter-retgen" => &["query + answer"],
            "ircot" => &["retrieved with a sentence"],
            "flare" => &["unsure: retrieved"],
            _ => &[],
        };
        for w in want {
            assert!(
                took.contains(w),
                "{kind}: no question took `{w}` ({took:?})"
            );
        }
    }
}

#[test]
fn flashrag_files_run_through_a_method_hop_by_hop() {
    // FlashRAG's corpus layout ("contents" = quoted title, newline, text) and its HotpotQA
    // question layout (metadata kept out of the way), searched one hop at a time.
    let c = tiny_checked("[method]\nkind = \"agentic\"\nmax_searches = 3\n", |t| {
        t.replace(
            "tests/data/pipeline/corpus.jsonl",
            "tests/data/flashrag/multihop_corpus.jsonl",
        )
        .replace(
            "tests/data/pipeline/questions.jsonl",
            "tests/data/flashrag/multihop_questions.jsonl",
        )
        .replace("passages = 2", "passages = 1")
    })
    .unwrap();
    let p = Pipeline::build(c).unwrap();
    assert_eq!(questions(&p).len(), 3);
    let mut outputs = vec![
        scripted("<search> designer of the Harbour Bridge of Velmora", 0.9),
        scripted("<search> Ilse Marrow born town", 0.9),
        scripted("<answer> Quillsby", 0.9),
    ];
    outputs.extend((0..2).map(|_| scripted("<answer> Arden", 0.9)));
    let mut lm = ScriptedLm::from_completions(outputs);
    let run = p
        .run_method(&mut FirstSentence, Some(&mut lm), None)
        .unwrap();
    let q = &run.records[0];
    assert_eq!((q.id.as_str(), q.em), ("dev_0", 1.0));
    assert_eq!(q.retrieval_calls(), 2);
    // Each hop's information block opens with that hop's passage, titled from "contents".
    assert!(
        lm.requests[1].assistant_prefix.contains(
            "Doc 1(Title: Harbour Bridge of Velmora) The Harbour Bridge of Velmora was designed by"
        ),
        "{}",
        lm.requests[1].assistant_prefix
    );
    assert!(
        lm.requests[2].assistant_prefix.contains(
            "Doc 1(Title: Ilse Marrow) Ilse Marrow was an engineer born in the town of Quillsby"
        ),
        "{}",
        lm.requests[2].assistant_prefix
    );
    // Both hops' passages were shown: the record's passages hold the two supporting facts.
    assert!(q.passage_ids.contains(&"0".to_string()) && q.passage_ids.contains(&"1".to_string()));
    // "the river Tamsel" / "Tamsel": every gold of a multi-answer line is kept.
    assert_eq!(p.questions().questions[1].answers.len(), 2);
}

#[test]
fn the_committed_nq_head_is_flashrag_jsonl() {
    let set = workbench::load::question_set::load(
        &root().join("tests/data/flashrag/nq_test_head.jsonl"),
        workbench::load::question_set::BadRecords::Error,
    )
    .unwrap();
    assert_eq!(set.questions.len(), 17);
    assert_eq!(set.questions[0].id, "test_0");
    assert_eq!(
        set.questions[14].answers,
        [
            "planner Raymond Unwin",
            "architect Barry Parker",
            "Raymond Unwin"
        ]
    );
}

#[test]
fn closed_book_needs_no_retriever_and_answers_without_one() {
    let c = tiny_checked("[method]\nkind = \"closed-book\"\n", |t| {
        t.replace("[[retrieval.retrievers]]\nkind = \"bm25\"\n", "")
            .replace("rag_001.txt", "closed_book_001.txt")
    })
    .unwrap();
    assert!(c.retrieval.retrievers.is_empty());
    let p = Pipeline::build(c).unwrap();
    let n = questions(&p).len();
    let mut lm = ScriptedLm::new(&vec!["Paris"; n], 0.9);
    let run = p
        .run_method(&mut FirstSentence, Some(&mut lm), None)
        .unwrap();
    assert!(run
        .records
        .iter()
        .all(|r| r.retrieval_calls() == 0 && r.passage_ids.is_empty()));
    assert_eq!(run.records[0].em, 1.0);
    // Every other method still needs one.
    for kind in KINDS.into_iter().filter(|k| *k != "closed-book") {
        let e = tiny_checked(&format!("[method]\nkind = \"{kind}\"\n"), |t| {
            t.replace("[[retrieval.retrievers]]\nkind = \"bm25\"\n", "")
                .replace("rag_001.txt", "closed_book_001.txt")
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("retrievers"), "{kind}: {e}");
    }
}

/// The methods study's tables on three real runs of the tiny pipeline: closed-book (the
/// model says "16" to everything: right only on q5, whose gold no passage holds), naive
/// and adaptive (unsure → retrieves; the read abstains on q5 → the closed-book "16").
#[test]
fn the_methods_study_splits_by_what_the_corpus_holds_and_tests_each_pair_once() {
    use workbench::study::methods;
    use workbench::study::repro::{ConfigSystem, ReproParams, StudyRun, StudyRuns};
    let mut runs = StudyRuns::default();
    for (system, extra) in [
        ("closed-book", "[method]\nkind = \"closed-book\"\n"),
        ("naive", "[method]\nkind = \"naive\"\n"),
        (
            "adaptive",
            "[method]\nkind = \"adaptive\"\nthreshold = 0.5\n",
        ),
    ] {
        let p = Pipeline::build(tiny_with(extra)).unwrap();
        let mut lm = ScriptedLm::new(&["16"; 5], 0.2);
        let run = p
            .run_method(&mut FirstSentence, Some(&mut lm), None)
            .unwrap();
        runs.0.push(StudyRun {
            reader: "r".into(),
            system: system.into(),
            run,
            journal: None,
            resumed: 0,
        });
    }
    let held = methods::corpus_holds(&runs.0[0].run).unwrap();
    let held_ids: Vec<&str> = held
        .iter()
        .filter(|(_, h)| **h == Some(true))
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(held_ids, ["q1", "q2", "q3", "q4"]);
    let params = ReproParams {
        scale: workbench::env::Scale::Quick,
        questions: Some(0),
        readers: vec!["r".into()],
        systems: ["closed-book", "naive", "adaptive"]
            .iter()
            .map(|s| ConfigSystem::new(s, "configs/tiny.toml"))
            .collect(),
        trials: 200,
        seed: 1,
    }
    .check()
    .unwrap();
    let result = methods::tables(&params, runs, &held).unwrap();
    let out = &result.repro;
    let row = |t: &workbench::display::Table, s: &str| {
        t.rows
            .iter()
            .find(|r| r[0] == format!("{s} (r)"))
            .unwrap()
            .clone()
    };
    assert_eq!(
        out.details.header[1],
        "Match, a passage contains a gold (4)"
    );
    assert_eq!(out.details.header[2], "Match, no passage contains one (1)");
    assert_eq!(out.details.header[3], "Match, yes / no golds only (0)");
    assert_eq!(
        row(&out.details, "closed-book")[1..4],
        ["0.00", "100.00", "–"]
    );
    assert_eq!(row(&out.details, "naive")[2], "0.00");
    // Adaptive: naive's answers where the corpus helps, closed-book's where it cannot.
    assert_eq!(
        row(&out.details, "adaptive")[1],
        row(&out.details, "naive")[1]
    );
    assert_eq!(row(&out.details, "adaptive")[2], "100.00");
    assert_eq!(row(&out.details, "adaptive")[4], "1.00");
    assert_eq!(row(&out.table, "closed-book")[6], "0.00");
    // EM and Match in %: closed-book is right on one question of five.
    assert_eq!(
        row(&out.table, "closed-book")[1..4],
        ["20.00", "20.00", "20.00"]
    );
    // Pairs: closed-book and adaptive against naive, adaptive against closed-book; four
    // metrics each; naive against closed-book only once.
    let pairs: Vec<(String, String)> = out
        .significance
        .rows
        .iter()
        .map(|r| (r[2].clone(), r[3].clone()))
        .collect();
    assert_eq!(pairs.len(), 12, "{pairs:?}");
    assert!(!pairs.contains(&("naive".into(), "closed-book".into())));
    assert!(pairs.contains(&("adaptive".into(), "closed-book".into())));
    // The summary reads each pair with its sign: closed-book − naive and naive −
    // closed-book are one test, opposite signs.
    let vs = &result.vs_baselines;
    assert_eq!(
        vs.header[2..4],
        ["Match − naive (pp)", "Match − closed-book (pp)"]
    );
    let by = |s: &str| vs.rows.iter().find(|r| r[1] == s).unwrap().clone();
    let (cb, nv, ad) = (by("closed-book"), by("naive"), by("adaptive"));
    assert_eq!((cb[3].as_str(), nv[2].as_str()), ("–", "–"));
    let strip = |c: &str| c.trim_end_matches('†').parse::<f64>().unwrap();
    assert_eq!(strip(&cb[2]), -strip(&nv[3]));
    // Closed-book is right on q5 only: its difference is 20 points minus naive's Match.
    assert_eq!(strip(&cb[2]), 20.0 - strip(&row(&out.table, "naive")[3]));
    assert_eq!(ad.len(), 2 + 2 * 2);
    // The discordant pairs behind those tests: naive is right on the four questions a
    // passage answers, closed-book on q5 only; adaptive keeps both (nothing lost to either).
    let d = &result.discordant;
    assert_eq!(
        d.header,
        [
            "system",
            "won vs naive",
            "lost vs naive",
            "won vs closed-book",
            "lost vs closed-book"
        ]
    );
    assert_eq!(row(&out.table, "naive")[3], "80.00");
    assert_eq!(row(d, "closed-book")[1..], ["1", "4", "–", "–"]);
    assert_eq!(row(d, "naive")[1..], ["–", "–", "4", "1"]);
    assert_eq!(row(d, "adaptive")[1..], ["1", "0", "4", "0"]);
}
