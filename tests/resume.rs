//! Runs that survive a kill, and configs whose paths are relative to the config file:
//!
//! - library: a journaled run whose reader fails at question 4 keeps questions 1–3 in the
//!   journal; the next run reads only questions 4–5 and gives the uninterrupted run's
//!   records (times and the cache flag aside); a journal of another config is not
//!   continued; a journal cut off mid-line loses only that line, whose question alone is
//!   read again;
//! - binary: `rag` on SmolLM2 is killed (SIGKILL) once the journal holds two finished
//!   questions and a half-written line is left at its end; started again, it continues
//!   after exactly the finished questions and gives an uninterrupted run's records; a
//!   journal written with another prompt file is started over, saying so;
//! - `rag --compare` reports each metric's paired difference as computed from the two
//!   runs' per-question scores (paired by question id), reuses fresh results, runs a
//!   config again when its prompt file is edited, and refuses configs whose questions,
//!   gold answers or answer-match rule differ.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use workbench::pipeline::trace::{Journal, TraceRecord};
use workbench::pipeline::{Pipeline, PipelineConfig};
use workbench::read::{AbstentionRule, Answer, Context, Reader};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Answers with the first sentence of the top passage; fails on question `fail_at`
/// (0-based count of calls) when set; counts its calls.
struct Echo {
    calls: usize,
    fail_at: Option<usize>,
}

impl Reader for Echo {
    fn name(&self) -> &str {
        "echo"
    }

    fn read(&mut self, question: &str, passages: &[Context]) -> workbench::Result<Answer> {
        workbench::read::check_question(question)?;
        if Some(self.calls) == self.fail_at {
            return Err(workbench::Error::param("reader", "killed here"));
        }
        self.calls += 1;
        let text = passages.first().map_or("Not found".to_string(), |p| {
            p.text.split('.').next().unwrap_or("").trim().to_string()
        });
        Ok(Answer {
            abstained: AbstentionRule::default().is_abstention(&text),
            text,
            passage_ids: passages.iter().map(|p| p.id.clone()).collect(),
            ..Default::default()
        })
    }
}

/// A copy of the test corpus and questions, a prompt and a config in a temp folder;
/// the config names them by relative paths.
fn project(extra_reader: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::create_dir_all(d.join("data")).unwrap();
    for f in ["corpus.jsonl", "questions.jsonl"] {
        std::fs::copy(
            root().join("tests/data/pipeline").join(f),
            d.join("data").join(f),
        )
        .unwrap();
    }
    std::fs::create_dir_all(d.join("exp")).unwrap();
    std::fs::write(
        d.join("exp/prompt.txt"),
        "Read the passages and answer the question in one sentence.\n\n{passages}\n\nQuestion: {question}\n",
    )
    .unwrap();
    let config = d.join("exp/config.toml");
    std::fs::write(
        &config,
        format!(
            "name = \"resume\"\n\
             [corpus]\npath = \"../data/corpus.jsonl\"\n\
             [retrieval]\ndepth = 3\n[[retrieval.retrievers]]\nkind = \"bm25\"\n\
             [reader]\nmodel = \"smollm2-135m-instruct-gguf\"\nprompt = \"prompt.txt\"\npassages = 2\n{extra_reader}\n\
             [questions]\npath = \"../data/questions.jsonl\"\n\
             [evaluation]\nanswer_match = \"squad\"\n\
             [cache]\nretrieval = false\n"
        ),
    )
    .unwrap();
    (tmp, config)
}

/// The fields of a record that do not depend on timing or the cache.
fn comparable(r: &TraceRecord) -> TraceRecord {
    let mut r = r.clone();
    r.times = Default::default();
    r.retrieval_cached = false;
    r
}

#[test]
fn config_paths_resolve_against_the_config_file() {
    let (tmp, path) = project("");
    let c = PipelineConfig::from_file(&path).unwrap();
    let folder = std::path::absolute(tmp.path()).unwrap();
    assert_eq!(Path::new(&c.corpus.path), folder.join("data/corpus.jsonl"));
    assert_eq!(Path::new(&c.reader.prompt), folder.join("exp/prompt.txt"));
    // Not written in the file: the workbench's own default, relative to the project.
    assert_eq!(c.cache.dir, "data/cache/retrieval");
    // A shipped config: stored relative to the project root, as before.
    let tiny = PipelineConfig::from_file(&root().join("configs/tiny.toml")).unwrap();
    assert_eq!(tiny.corpus.path, "tests/data/pipeline/corpus.jsonl");
    assert_eq!(tiny.reader.prompt, "data/prompts/rag_001.txt");
    // A missing file is named with where it was looked for.
    std::fs::remove_file(tmp.path().join("exp/prompt.txt")).unwrap();
    let e = PipelineConfig::from_file(&path).unwrap_err().to_string();
    assert!(
        e.contains("exp/prompt.txt") && e.contains("reader.prompt"),
        "{e}"
    );
}

#[test]
fn a_reader_model_given_as_a_path_must_exist() {
    let (_tmp, path) = project("");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("smollm2-135m-instruct-gguf", "./models/mine.gguf");
    std::fs::write(&path, text).unwrap();
    let e = PipelineConfig::from_file(&path).unwrap_err().to_string();
    assert!(
        e.contains("models/mine.gguf") && e.contains("reader.model"),
        "{e}"
    );
}

#[test]
fn a_journaled_run_continues_after_a_failure_with_the_same_records() {
    let (tmp, path) = project("");
    let pipeline = Pipeline::build(PipelineConfig::from_file(&path).unwrap()).unwrap();
    let n = pipeline.questions().questions.len();
    assert!(n >= 4, "{n} questions");
    let whole = pipeline
        .run(
            &mut Echo {
                calls: 0,
                fail_at: None,
            },
            None,
        )
        .unwrap();

    let jp = tmp.path().join("resume.journal.jsonl");
    let mut j = Journal::open(&jp, "key-1").unwrap();
    let e = pipeline
        .run_journaled(
            &mut Echo {
                calls: 0,
                fail_at: Some(3),
            },
            None,
            &mut j,
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("question 4") && e.contains("killed here"), "{e}");
    drop(j);

    let mut j = Journal::open(&jp, "key-1").unwrap();
    assert_eq!(j.done().len(), 3);
    assert!(j.discarded().is_none());
    let mut reader = Echo {
        calls: 0,
        fail_at: None,
    };
    let resumed = pipeline.run_journaled(&mut reader, None, &mut j).unwrap();
    assert_eq!(
        reader.calls,
        n - 3,
        "only the unfinished questions are read"
    );
    let a: Vec<TraceRecord> = whole.records.iter().map(comparable).collect();
    let b: Vec<TraceRecord> = resumed.records.iter().map(comparable).collect();
    assert_eq!(a, b);
    assert_eq!(Journal::open(&jp, "key-1").unwrap().done().len(), n);

    // Another key (another config or program) starts over.
    let other = Journal::open(&jp, "key-2").unwrap();
    assert!(other.done().is_empty());
    assert!(other.discarded().unwrap().contains("another configuration"));

    // A kill in the middle of a line loses that line only: its question is read again,
    // and the journal is rewritten without the cut-off text.
    let text = std::fs::read_to_string(&jp).unwrap();
    let last = text.trim_end().rfind('\n').unwrap() + 1;
    let cut = last + (text.len() - last) / 2;
    std::fs::write(&jp, &text.as_bytes()[..cut]).unwrap();
    let mut j = Journal::open(&jp, "key-1").unwrap();
    assert_eq!(j.done().len(), n - 1);
    assert!(j.discarded().is_none());
    let mut reader = Echo {
        calls: 0,
        fail_at: None,
    };
    let again = pipeline.run_journaled(&mut reader, None, &mut j).unwrap();
    assert_eq!(
        reader.calls, 1,
        "only the question of the cut-off line is read"
    );
    let c: Vec<TraceRecord> = again.records.iter().map(comparable).collect();
    assert_eq!(a, c);
    drop(j);
    let j = Journal::open(&jp, "key-1").unwrap();
    let d: Vec<TraceRecord> = j.done().iter().map(comparable).collect();
    assert_eq!(a, d, "the journal holds every question once, whole");
    std::fs::write(&jp, &text.as_bytes()[..cut]).unwrap();
    // Garbage on a whole line is an error naming the file and line, not a silent skip.
    let mut f = std::fs::OpenOptions::new().append(true).open(&jp).unwrap();
    writeln!(f, "\nnot json").unwrap();
    let e = Journal::open(&jp, "key-1").unwrap_err().to_string();
    assert!(e.contains("resume.journal.jsonl"), "{e}");
}

/// The journal's finished questions: its lines that end in a newline, after the header
/// (a line still being written, or cut off by a kill, is not one).
fn finished_lines(journal: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(journal).unwrap_or_default();
    let mut lines: Vec<String> = text
        .split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .map(|l| l.trim_end().to_string())
        .collect();
    if !lines.is_empty() {
        lines.remove(0);
    }
    lines
}

/// Run `rag` on `config` with results in `results`; kill it when `kill_after` questions
/// are finished in its journal (`None`: let it finish). Returns its stdout and whether it
/// was killed.
fn rag(config: &Path, results: &Path, kill_after: Option<usize>) -> (String, bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rag"))
        .arg(config)
        .arg("--results")
        .arg(results)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let mut killed = false;
    if let Some(k) = kill_after {
        let journal = results.join("resume.journal.jsonl");
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(300) {
            if finished_lines(&journal).len() >= k {
                child.kill().unwrap();
                killed = true;
                break;
            }
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let out = child.wait_with_output().unwrap();
    if !killed {
        assert!(out.status.success(), "rag failed");
    }
    (String::from_utf8_lossy(&out.stdout).to_string(), killed)
}

fn predictions(dir: &Path) -> HashMap<String, String> {
    serde_json::from_str(&std::fs::read_to_string(dir.join("raw_predictions.json")).unwrap())
        .unwrap()
}

fn traces(dir: &Path) -> Vec<TraceRecord> {
    workbench::pipeline::trace::read_traces(&dir.join("traces.jsonl")).unwrap()
}

/// `rag` is killed (SIGKILL) once its journal holds two finished questions; the journal
/// then ends in a half-written line (the next question's record, cut in the middle: the
/// kill may or may not have left one of its own, so the test writes it). Started again,
/// `rag` continues after exactly the finished questions, reads the cut-off question again,
/// and gives an uninterrupted run's predictions and records.
#[test]
fn a_killed_rag_run_continues_where_it_stopped() {
    let (tmp, config) = project("max_new_tokens = 48");
    let killed_results = tmp.path().join("killed");
    let whole_results = tmp.path().join("whole");
    rag(&config, &whole_results, None);
    let whole = traces(&whole_results.join("resume"));
    let n = whole.len();
    assert_eq!(n, 5);

    let (_, killed) = rag(&config, &killed_results, Some(2));
    assert!(
        killed,
        "the run finished before two questions were journaled"
    );
    assert!(!killed_results.join("resume").join("summary.json").exists());
    let journal = killed_results.join("resume.journal.jsonl");
    let finished = finished_lines(&journal);
    let k = finished.len();
    assert!((2..n).contains(&k), "{k} finished questions of {n}");
    for (line, want) in finished.iter().zip(&whole) {
        let r: TraceRecord = serde_json::from_str(line).unwrap();
        assert_eq!(comparable(&r), comparable(want));
    }
    // Keep the finished lines and add the next question's record cut in the middle.
    let text = std::fs::read_to_string(&journal).unwrap();
    let keep: String = text.split_inclusive('\n').take(k + 1).collect();
    let next = serde_json::to_string(&whole[k]).unwrap();
    std::fs::write(&journal, format!("{keep}{}", &next[..next.len() / 2])).unwrap();

    let (out, _) = rag(&config, &killed_results, None);
    assert!(
        out.contains(&format!("continuing after {k} finished questions")),
        "not continuing after exactly {k}:\n{out}"
    );
    assert!(
        !journal.exists(),
        "the journal is removed once the results are written"
    );
    let resumed = traces(&killed_results.join("resume"));
    let a: Vec<TraceRecord> = whole.iter().map(comparable).collect();
    let b: Vec<TraceRecord> = resumed.iter().map(comparable).collect();
    assert_eq!(
        a, b,
        "every question once, in order, as the uninterrupted run"
    );
    assert_eq!(
        predictions(&killed_results.join("resume")),
        predictions(&whole_results.join("resume"))
    );
    // The finished questions are taken from the journal as recorded (times included).
    let kept: Vec<TraceRecord> = finished
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(&resumed[..k], &kept[..]);

    // A journal written with another prompt is not continued, and the output says why.
    let prompt = tmp.path().join("exp/prompt.txt");
    let edit = |from: &str, to: &str| {
        let text = std::fs::read_to_string(&prompt).unwrap();
        assert!(text.contains(from));
        std::fs::write(&prompt, text.replace(from, to)).unwrap();
    };
    edit("one sentence", "a few words");
    let (out, killed) = rag(&config, &killed_results, Some(1));
    assert!(
        killed,
        "the run finished before a question was journaled:\n{out}"
    );
    edit("a few words", "one word");
    let (out, _) = rag(&config, &killed_results, None);
    assert!(
        out.contains("`reader.prompt` changed since it was written): starting over"),
        "{out}"
    );
}

/// The comparison table of `rag --compare`'s stdout: (metric, system, baseline) → the
/// row's cells by column name.
fn comparison_rows(out: &str) -> HashMap<(String, String, String), HashMap<String, String>> {
    let cells = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("| p_randomization_holm |"))
        .unwrap_or_else(|| panic!("no comparison table in:\n{out}"));
    let header = cells(lines[at]);
    let mut rows = HashMap::new();
    for l in lines[at + 2..].iter().take_while(|l| l.starts_with('|')) {
        let row: HashMap<String, String> = header.iter().cloned().zip(cells(l)).collect();
        rows.insert(
            (
                row["metric"].clone(),
                row["system"].clone(),
                row["baseline"].clone(),
            ),
            row,
        );
    }
    rows
}

/// Per question id, the score of `metric` in a result folder's traces.
fn scores(dir: &Path, metric: &str) -> HashMap<String, f64> {
    traces(dir)
        .into_iter()
        .map(|r| {
            let v = match metric {
                "em" => r.em,
                "f1" => r.f1,
                "recall" => r.recall,
                "match" => f64::from(u8::from(r.answer_found)),
                other => panic!("{other}"),
            };
            (r.id, v)
        })
        .collect()
}

/// A second config beside `a` named `name`: `a`'s text with `edits` applied.
fn sibling(a: &Path, name: &str, edits: &[(&str, &str)]) -> PathBuf {
    let mut text = std::fs::read_to_string(a)
        .unwrap()
        .replace("name = \"resume\"", &format!("name = \"{name}\""));
    for (from, to) in edits {
        assert!(text.contains(from), "{from:?} not in {a:?}");
        text = text.replace(from, to);
    }
    let b = a.with_file_name(format!("{name}.toml"));
    std::fs::write(&b, text).unwrap();
    b
}

/// Run `rag --compare` on `configs` with results in `results`: (success, stdout, stderr).
fn rag_compare(configs: &[&Path], results: &Path) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rag"))
        .args(["--compare", "--trials", "500"])
        .args(configs)
        .arg("--results")
        .arg(results)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// `rag --compare` pairs the questions by id: the second config reads the questions in
/// the reverse order, and every metric's row holds the means of each run's per-question
/// scores, their difference and the effect size of the paired differences (by id: paired
/// by position, F1's d_z is -0.16 instead of -0.72 on this machine's answers), on all 5
/// questions. A second call reuses the fresh results.
#[test]
fn rag_compare_reports_the_paired_differences_of_the_runs_scores() {
    let (tmp, a) = project("max_new_tokens = 24");
    let d = tmp.path();
    let qs = std::fs::read_to_string(d.join("data/questions.jsonl")).unwrap();
    let reversed: String = qs.lines().rev().map(|l| format!("{l}\n")).collect();
    std::fs::write(d.join("data/reversed.jsonl"), reversed).unwrap();
    // Fewer passages and a short answer: scores that differ from `a`'s on some questions.
    let b = sibling(
        &a,
        "short",
        &[
            ("passages = 2", "passages = 1"),
            ("max_new_tokens = 24", "max_new_tokens = 6"),
            ("questions.jsonl", "reversed.jsonl"),
        ],
    );
    let results = d.join("results");
    let (ok, first, err) = rag_compare(&[&a, &b], &results);
    assert!(ok, "{err}");
    let rows = comparison_rows(&first);
    assert_eq!(rows.len(), 4, "{first}");
    let ids_a: Vec<String> = traces(&results.join("resume"))
        .into_iter()
        .map(|r| r.id)
        .collect();
    let ids_b: Vec<String> = traces(&results.join("short"))
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids_a, ["q1", "q2", "q3", "q4", "q5"]);
    assert_eq!(ids_b, ["q5", "q4", "q3", "q2", "q1"]);
    let close = |cell: &str, want: f64, decimals: i32| {
        let got: f64 = cell.parse().unwrap_or_else(|_| panic!("{cell:?}"));
        (got - want).abs() <= 0.5 * 10f64.powi(-decimals) + 1e-9
            || (got.is_infinite() && got == want)
    };
    for metric in ["em", "f1", "recall", "match"] {
        let row = &rows[&(metric.into(), "short".into(), "resume".into())];
        let (sys, base) = (
            scores(&results.join("short"), metric),
            scores(&results.join("resume"), metric),
        );
        let diffs: Vec<f64> = ids_a.iter().map(|id| sys[id] - base[id]).collect();
        let n = diffs.len() as f64;
        let mean = |v: &mut dyn Iterator<Item = f64>| v.sum::<f64>() / n;
        let mean_diff = mean(&mut diffs.iter().copied());
        let sd = (diffs.iter().map(|x| (x - mean_diff).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let dz = if sd > 1e-12 {
            mean_diff / sd
        } else if mean_diff.abs() < 1e-12 {
            0.0
        } else {
            f64::INFINITY.copysign(mean_diff)
        };
        let want = [
            ("mean", mean(&mut sys.values().copied())),
            ("baseline_mean", mean(&mut base.values().copied())),
            ("diff", mean_diff),
        ];
        for (col, v) in want {
            assert!(
                close(&row[col], v, 4),
                "{metric} {col}: {} vs {v}\n{first}",
                row[col]
            );
        }
        assert!(
            close(&row["effect_size_dz"], dz, 3),
            "{metric} effect_size_dz: {} vs {dz} (diffs {diffs:?})\n{first}",
            row["effect_size_dz"]
        );
        assert_eq!(row["queries"], "5", "{first}");
    }
    let (ok, second, err) = rag_compare(&[&a, &b], &results);
    assert!(ok, "{err}");
    assert_eq!(second.matches("fresh, reused").count(), 2, "{second}");
    assert_eq!(
        comparison_rows(&second),
        rows,
        "the same table from the reused results"
    );
}

/// Editing a config's prompt file makes its stored result stale: `rag --compare` reuses
/// the other config's result, runs the edited one again (saying why), and the new traces
/// hold the new prompt.
#[test]
fn rag_compare_runs_a_config_again_when_its_prompt_file_changes() {
    let (tmp, a) = project("max_new_tokens = 24");
    let d = tmp.path();
    std::fs::copy(d.join("exp/prompt.txt"), d.join("exp/prompt_b.txt")).unwrap();
    let b = sibling(
        &a,
        "one-passage",
        &[
            ("passages = 2", "passages = 1"),
            ("prompt.txt", "prompt_b.txt"),
        ],
    );
    let results = d.join("results");
    let (ok, _, err) = rag_compare(&[&a, &b], &results);
    assert!(ok, "{err}");
    let before = traces(&results.join("one-passage"));
    assert!(before[0]
        .prompt
        .as_deref()
        .unwrap()
        .contains("in one sentence"));
    let text = std::fs::read_to_string(d.join("exp/prompt_b.txt")).unwrap();
    std::fs::write(
        d.join("exp/prompt_b.txt"),
        text.replace("in one sentence", "in a few words"),
    )
    .unwrap();
    let (ok, out, err) = rag_compare(&[&a, &b], &results);
    assert!(ok, "{err}");
    assert!(out.contains("resume: fresh, reused"), "{out}");
    assert!(!out.contains("one-passage: fresh, reused"), "{out}");
    assert!(
        out.contains("one-passage: running again (`reader.prompt` changed since"),
        "{out}"
    );
    for r in traces(&results.join("one-passage")) {
        let p = r.prompt.unwrap();
        assert!(
            p.contains("in a few words") && !p.contains("in one sentence"),
            "{p}"
        );
    }
    let config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(results.join("one-passage/config.json")).unwrap(),
    )
    .unwrap();
    let want = format!(
        "sha256:{}",
        workbench::assets::sha256_file(&d.join("exp/prompt_b.txt")).unwrap()
    );
    assert_eq!(config["inputs"]["reader.prompt"], want.as_str());
}

/// `rag --compare` refuses, before running anything, configs whose questions, gold
/// answers or answer-match rule differ from the first config's, naming the difference.
#[test]
fn rag_compare_refuses_runs_on_other_questions_answers_or_rule() {
    let (tmp, a) = project("");
    let d = tmp.path();
    let qs = std::fs::read_to_string(d.join("data/questions.jsonl")).unwrap();
    let write = |name: &str, text: String| std::fs::write(d.join("data").join(name), text).unwrap();
    // q4 left out.
    write(
        "fewer.jsonl",
        qs.lines()
            .filter(|l| !l.contains("\"q4\""))
            .map(|l| format!("{l}\n"))
            .collect(),
    );
    // q3's gold answer changed.
    write("gold.jsonl", qs.replace("[\"1969\"]", "[\"July 1969\"]"));
    // q2's question reworded.
    write(
        "text.jsonl",
        qs.replace("Who wrote Hamlet?", "Who wrote Hamlet"),
    );
    let results = d.join("results");
    let cases = [
        (
            "fewer",
            ("questions.jsonl", "fewer.jsonl"),
            "question `q4` is in",
        ),
        (
            "gold",
            ("questions.jsonl", "gold.jsonl"),
            "question `q3` has the gold answers [\"1969\"]",
        ),
        (
            "text",
            ("questions.jsonl", "text.jsonl"),
            "question `q2` reads \"Who wrote Hamlet?\"",
        ),
        (
            "rule",
            ("answer_match = \"squad\"", "answer_match = \"dpr\""),
            "`evaluation.answer_match` is squad",
        ),
    ];
    for (name, edit, want) in cases {
        let b = sibling(&a, name, &[edit]);
        let (ok, out, err) = rag_compare(&[&a, &b], &results);
        assert!(!ok, "{name}: compared anyway:\n{out}");
        assert!(
            err.contains("cannot compare") && err.contains(&format!("{name}.toml")),
            "{name}: {err}"
        );
        assert!(err.contains(want), "{name}: no {want:?} in {err}");
        assert!(
            !results.exists(),
            "{name}: something ran before the refusal"
        );
    }
}
