//! Runs that survive a kill, and configs whose paths are relative to the config file:
//!
//! - library: a journaled run whose reader fails at question 4 keeps questions 1–3 in the
//!   journal; the next run reads only questions 4–5 and gives the uninterrupted run's
//!   records (times and the cache flag aside); a journal of another config is not
//!   continued; a journal cut off mid-line loses only that line;
//! - binary: `rag` on SmolLM2 is killed (SIGKILL) once the journal holds two questions,
//!   started again, and continues: its predictions equal an uninterrupted run's;
//! - `rag --compare` prints the paired tests of two configs and reuses fresh results.

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

    // A kill in the middle of a line loses that line only.
    let text = std::fs::read_to_string(&jp).unwrap();
    let cut = text.trim_end().rfind('\n').unwrap() + 20;
    std::fs::write(&jp, &text[..cut]).unwrap();
    assert_eq!(Journal::open(&jp, "key-1").unwrap().done().len(), n - 1);
    // Garbage on a whole line is an error naming the file and line, not a silent skip.
    let mut f = std::fs::OpenOptions::new().append(true).open(&jp).unwrap();
    writeln!(f, "\nnot json").unwrap();
    let e = Journal::open(&jp, "key-1").unwrap_err().to_string();
    assert!(e.contains("resume.journal.jsonl"), "{e}");
}

/// Run `rag` on `config` with results in `results`; kill it when `kill_after` questions
/// are in its journal (`None`: let it finish). Returns its stdout and whether it was killed.
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
            let lines = std::fs::read_to_string(&journal)
                .map(|t| t.lines().count().saturating_sub(1))
                .unwrap_or(0);
            if lines >= k {
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

#[test]
fn a_killed_rag_run_continues_where_it_stopped() {
    let (tmp, config) = project("max_new_tokens = 48");
    let killed_results = tmp.path().join("killed");
    let whole_results = tmp.path().join("whole");
    let (_, killed) = rag(&config, &killed_results, Some(2));
    assert!(
        killed,
        "the run finished before two questions were journaled"
    );
    assert!(!killed_results.join("resume").join("summary.json").exists());
    let (out, _) = rag(&config, &killed_results, None);
    let resumed_from = out
        .lines()
        .find_map(|l| {
            l.split("continuing after ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse::<usize>().ok())
        })
        .unwrap_or_else(|| panic!("no 'continuing after' in:\n{out}"));
    assert!(resumed_from >= 2, "{out}");
    assert!(
        !killed_results.join("resume.journal.jsonl").exists(),
        "the journal is removed once the results are written"
    );
    rag(&config, &whole_results, None);
    assert_eq!(
        predictions(&killed_results.join("resume")),
        predictions(&whole_results.join("resume"))
    );
    // A journal of another config is not continued.
    let edit = |from: &str, to: &str| {
        let t = std::fs::read_to_string(&config).unwrap().replace(from, to);
        std::fs::write(&config, t).unwrap();
    };
    edit("max_new_tokens = 48", "max_new_tokens = 40");
    let (_, killed) = rag(&config, &killed_results, Some(1));
    assert!(killed, "the run finished before a question was journaled");
    edit("max_new_tokens = 40", "max_new_tokens = 44");
    let (out, _) = rag(&config, &killed_results, None);
    assert!(out.contains("starting over"), "{out}");
}

/// `rag --compare`: both configs run on the same questions, the paired table and the
/// intervals are printed; a second call reuses the fresh results instead of reading again.
#[test]
fn rag_compare_prints_paired_tests_and_reuses_fresh_results() {
    let (tmp, a) = project("max_new_tokens = 24");
    let b = a.with_file_name("one_passage.toml");
    let text = std::fs::read_to_string(&a)
        .unwrap()
        .replace("name = \"resume\"", "name = \"one-passage\"")
        .replace("passages = 2", "passages = 1");
    std::fs::write(&b, text).unwrap();
    let results = tmp.path().join("results");
    let run = || {
        let out = Command::new(env!("CARGO_BIN_EXE_rag"))
            .args(["--compare", "--trials", "500"])
            .arg(&a)
            .arg(&b)
            .arg("--results")
            .arg(&results)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let first = run();
    for want in [
        "p_randomization_holm",
        "mde_80",
        "ci95_lo",
        "one-passage",
        "resume",
    ] {
        assert!(first.contains(want), "no {want:?} in:\n{first}");
    }
    // One row per metric of the comparison of `one-passage` against `resume`.
    let rows = first
        .lines()
        .filter(|l| l.contains("| one-passage | resume |"))
        .count();
    assert_eq!(rows, 4, "{first}");
    let second = run();
    assert_eq!(second.matches("fresh, reused").count(), 2, "{second}");
}
