//! The workbench's ranking metrics against trec_eval's own C code.
//!
//! `scripts/python/trec_eval_ref.py` runs trec_eval 9.0.8 through pytrec_eval
//! (pytrec-eval-terrier, installed into the test venv by `scripts/lib.sh`
//! `ensure_python`). Every case is scored three ways — the in-memory run, the run
//! written with `trec::write_run` and read back with `trec::read_run`, and
//! trec_eval — and all must agree to 1e-6 per query, per mean and in the number
//! of queries averaged, with the default `EvalOptions` (trec_eval's query set and
//! tie order). A failure names the case, metric, query and both values.
//!
//! Metric ↔ trec_eval measure: `ndcg@k` ↔ `ndcg_cut_k`, `recall@k` ↔ `recall_k`,
//! `precision@k` ↔ `P_k`, `hits@k` ↔ `success_k`, `map` ↔ `map`, `mrr` ↔
//! `recip_rank`. trec_eval has no cut-off for `recip_rank`, so `mrr@k` is checked
//! against trec_eval's `recip_rank` with the cut applied to trec_eval's own
//! output: `recip_rank` is exactly `1 / rank` of the first relevant document in
//! trec_eval's ranking, so RR@k = `recip_rank` if that rank ≤ k, else 0.

mod common;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use workbench::evaluate::{evaluate_with, trec, EvalOptions, Metric, MetricResult};
use workbench::{Hit, Qrels, Run};

const TOL: f64 = 1e-6;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> PathBuf {
    common::venv_python("the trec_eval agreement test (pytrec-eval-terrier)")
}

/// Send `cases` to trec_eval (through pytrec_eval); returns case id → qid →
/// measure → value.
fn trec_eval(cases: Vec<Value>) -> BTreeMap<String, BTreeMap<String, BTreeMap<String, f64>>> {
    let py = python();
    let script = root().join("scripts/python/trec_eval_ref.py");
    let mut child = Command::new(&py)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", py.display()));
    let request = serde_json::to_vec(&json!({ "cases": cases })).unwrap();
    // Write from a thread so a large request cannot deadlock against a full stdout pipe.
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&request));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} {} failed ({}):\n{stderr}\n{}",
        py.display(),
        script.display(),
        out.status,
        if stderr.contains("No module named 'pytrec_eval'") {
            "pytrec-eval-terrier is missing from the test venv: run `bash scripts/test` once \
             (scripts/lib.sh ensure_python installs it)."
        } else {
            ""
        }
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("trec_eval_ref.py printed JSON");
    eprintln!(
        "trec_eval reference: pytrec-eval-terrier {}",
        v["pytrec_eval"]
    );
    serde_json::from_value(v["cases"].clone()).expect("case → qid → measure → value")
}

/// The workbench metrics checked at cut-offs `ks`, and the trec_eval measures
/// that compute them.
fn metrics(ks: &[usize]) -> (Vec<Metric>, Vec<String>) {
    let mut ms = vec![Metric::Map, Metric::RecipRank];
    for &k in ks {
        ms.extend([
            Metric::Ndcg(k),
            Metric::Recall(k),
            Metric::Precision(k),
            Metric::Hits(k),
            Metric::Mrr(k),
        ]);
    }
    let cut = ks
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let measures = ["ndcg_cut", "recall", "P", "success"]
        .iter()
        .map(|m| format!("{m}.{cut}"))
        .chain(["map".to_string(), "recip_rank".to_string()])
        .collect();
    (ms, measures)
}

/// trec_eval's value of `m` for one query (see the module docs for `mrr@k`).
fn reference_value(m: Metric, measures: &BTreeMap<String, f64>) -> f64 {
    let get = |key: String| -> f64 {
        *measures
            .get(&key)
            .unwrap_or_else(|| panic!("trec_eval returned no `{key}`: {measures:?}"))
    };
    match m {
        Metric::Ndcg(k) => get(format!("ndcg_cut_{k}")),
        Metric::Recall(k) => get(format!("recall_{k}")),
        Metric::Precision(k) => get(format!("P_{k}")),
        Metric::Hits(k) => get(format!("success_{k}")),
        Metric::Map => get("map".into()),
        Metric::RecipRank => get("recip_rank".into()),
        Metric::Mrr(k) => {
            let rr = get("recip_rank".into());
            if rr > 0.0 && (1.0 / rr).round() as usize <= k {
                rr
            } else {
                0.0
            }
        }
    }
}

/// Compare workbench results with trec_eval's per-query values; returns one line
/// per disagreement.
fn disagreements(
    case: &str,
    source: &str,
    ours: &[MetricResult],
    ms: &[Metric],
    reference: &BTreeMap<String, BTreeMap<String, f64>>,
) -> Vec<String> {
    let mut bad = Vec::new();
    for (r, &m) in ours.iter().zip(ms) {
        let theirs: BTreeMap<&str, f64> = reference
            .iter()
            .map(|(q, v)| (q.as_str(), reference_value(m, v)))
            .collect();
        let ours_q: Vec<&str> = r.per_query.keys().map(String::as_str).collect();
        let theirs_q: Vec<&str> = theirs.keys().copied().collect();
        if ours_q != theirs_q || r.queries() != theirs.len() {
            bad.push(format!(
                "{case} [{source}] {}: queries averaged differ: workbench {} {ours_q:?}, trec_eval {} {theirs_q:?}",
                r.name,
                r.queries(),
                theirs.len()
            ));
            continue;
        }
        for (q, &t) in &theirs {
            let o = r.per_query[*q];
            if (o - t).abs() > TOL {
                bad.push(format!(
                    "{case} [{source}] {} query {q}: workbench {o} vs trec_eval {t}",
                    r.name
                ));
            }
        }
        let mean = theirs.values().sum::<f64>() / theirs.len() as f64;
        if (r.mean - mean).abs() > TOL {
            bad.push(format!(
                "{case} [{source}] {} mean over {} queries: workbench {} vs trec_eval {mean}",
                r.name,
                theirs.len(),
                r.mean
            ));
        }
    }
    bad
}

fn report(bad: Vec<String>, checked: usize) {
    assert!(
        bad.is_empty(),
        "{} disagreements with trec_eval (tolerance {TOL}) out of {checked} case sources:\n{}",
        bad.len(),
        bad.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
}

fn run_json(run: &Run) -> Value {
    let m: BTreeMap<&str, BTreeMap<&str, f32>> = run
        .iter()
        .map(|(q, hits)| {
            (
                q.as_str(),
                hits.iter().map(|h| (h.id.as_str(), h.score)).collect(),
            )
        })
        .collect();
    serde_json::to_value(m).unwrap()
}

/// One case to score: a run (in memory, optionally as a file too) and qrels.
struct Case {
    id: String,
    run: Run,
    qrels: Qrels,
    threshold: i32,
    ks: Vec<usize>,
    /// Whether to also write the run and qrels as TREC files (a run with an
    /// empty hit list cannot be written faithfully).
    files: bool,
}

/// Score every case three ways and compare; panics with every disagreement.
fn check_cases(cases: &[Case]) {
    let dir = tempfile::tempdir().unwrap();
    let mut requests = Vec::new();
    for c in cases {
        let (_, measures) = metrics(&c.ks);
        requests.push(json!({
            "id": format!("{}/memory", c.id),
            "run": run_json(&c.run),
            "qrels": c.qrels,
            "relevance_level": c.threshold,
            "measures": measures,
        }));
        if c.files {
            let run_file = dir.path().join(format!("{}.run", c.id));
            let qrels_file = dir.path().join(format!("{}.qrels", c.id));
            trec::write_run(&run_file, &c.run, "wb").unwrap();
            trec::write_qrels(&qrels_file, &c.qrels).unwrap();
            requests.push(json!({
                "id": format!("{}/file", c.id),
                "run_file": run_file,
                "qrels_file": qrels_file,
                "relevance_level": c.threshold,
                "measures": measures,
            }));
        }
    }
    let reference = trec_eval(requests);
    let mut bad = Vec::new();
    let mut checked = 0;
    for c in cases {
        let (ms, _) = metrics(&c.ks);
        let opts = EvalOptions::with_threshold(c.threshold);
        let memory = evaluate_with(&c.run, &c.qrels, &ms, &opts)
            .unwrap_or_else(|e| panic!("case {}: {e}", c.id));
        let r_mem = &reference[&format!("{}/memory", c.id)];
        bad.extend(disagreements(
            &c.id,
            "in-memory run vs trec_eval on the same run",
            &memory,
            &ms,
            r_mem,
        ));
        checked += 1;
        if c.files {
            let run = trec::read_run(dir.path().join(format!("{}.run", c.id))).unwrap();
            let qrels = trec::read_qrels(dir.path().join(format!("{}.qrels", c.id))).unwrap();
            let from_file = evaluate_with(&run, &qrels, &ms, &opts).unwrap();
            let r_file = &reference[&format!("{}/file", c.id)];
            bad.extend(disagreements(
                &c.id,
                "read_run(written file) vs trec_eval on the file",
                &from_file,
                &ms,
                r_file,
            ));
            // The in-memory numbers must equal the file's exactly (same f32 scores).
            for (a, b) in memory.iter().zip(&from_file) {
                if a != b {
                    bad.push(format!(
                        "{} {}: in-memory {:?} differs from the written-and-read run {:?}",
                        c.id, a.name, a.per_query, b.per_query
                    ));
                }
            }
            checked += 1;
        }
    }
    report(bad, checked);
}

fn qrels_of(rows: &[(&str, &str, i32)]) -> Qrels {
    let mut q = Qrels::new();
    for &(qid, doc, g) in rows {
        q.entry(qid.to_string())
            .or_default()
            .insert(doc.to_string(), g);
    }
    q
}

fn run_of(rows: &[(&str, &[(&str, f32)])]) -> Run {
    rows.iter()
        .map(|&(q, hits)| {
            (
                q.to_string(),
                hits.iter().map(|&(d, s)| Hit::new(d, s)).collect(),
            )
        })
        .collect()
}

/// Hand-made cases: tied scores, ids that sort differently as bytes and as
/// numbers, queries missing from the run or the qrels, a query with no relevant
/// document, negative grades, thresholds 1 and 2, cut-offs beyond the run.
fn hand_cases() -> Vec<Case> {
    let qrels = qrels_of(&[
        // q-ties: every score tied; the relevant documents sit at both ends of
        // the byte order.
        ("q-ties", "a", 1),
        ("q-ties", "b", 0),
        ("q-ties", "c", 2),
        ("q-ties", "d", 1),
        ("q-ties", "zz", 3),
        // q-ids: ids whose byte order differs from their numeric order and case.
        ("q-ids", "d10", 2),
        ("q-ids", "d9", 1),
        ("q-ids", "D1", 3),
        ("q-ids", "d1", 0),
        ("q-ids", "a-b", 1),
        // q-neg: negative grades ("in the pool, unjudged") among positive ones.
        ("q-neg", "n1", -1),
        ("q-neg", "n2", -2),
        ("q-neg", "p1", 1),
        ("q-neg", "p2", 2),
        ("q-neg", "z0", 0),
        // q-none: judged, but nothing relevant (scores 0 everywhere).
        ("q-none", "x1", 0),
        ("q-none", "x2", 0),
        // q-low: only grade 1 (relevant at -l 1, not at -l 2).
        ("q-low", "l1", 1),
        ("q-low", "l2", 1),
        // q-missing: judged but absent from the run (trec_eval leaves it out).
        ("q-missing", "m1", 1),
        // q-deep: the only relevant document is at rank 12.
        ("q-deep", "r", 2),
    ]);
    let deep: Vec<(String, f32)> = (0..15)
        .map(|i| {
            if i == 11 {
                ("r".to_string(), 15.0 - i as f32)
            } else {
                (format!("j{i:02}"), 15.0 - i as f32)
            }
        })
        .collect();
    let deep_refs: Vec<(&str, f32)> = deep.iter().map(|(d, s)| (d.as_str(), *s)).collect();
    let run = run_of(&[
        (
            "q-ties",
            &[
                ("a", 1.0),
                ("b", 1.0),
                ("c", 1.0),
                ("d", 1.0),
                ("e", 1.0),
                ("zz", 0.5),
            ],
        ),
        (
            "q-ids",
            &[
                ("d1", 0.25),
                ("d9", 0.25),
                ("d10", 0.25),
                ("D1", 0.25),
                ("a-b", -0.0),
                ("zero", 0.0),
                ("neg", -7.5),
            ],
        ),
        (
            "q-neg",
            &[
                ("n1", 3.0),
                ("n2", 2.5),
                ("p1", 2.5),
                ("u", 2.0),
                ("p2", 0.1),
                ("z0", 0.1),
            ],
        ),
        ("q-none", &[("x1", 1.0), ("x2", 1.0), ("y", 0.5)]),
        ("q-low", &[("l2", 1.0), ("o", 1.0), ("l1", 0.0)]),
        ("q-deep", &deep_refs),
        // Not in the qrels: trec_eval ignores it.
        ("q-unjudged", &[("a", 1.0)]),
    ]);
    let mut cases = Vec::new();
    for t in [1, 2, 3] {
        cases.push(Case {
            id: format!("hand-l{t}"),
            run: run.clone(),
            qrels: qrels.clone(),
            threshold: t,
            ks: vec![1, 2, 3, 5, 10, 20],
            files: true,
        });
    }
    // A query the run holds with no hits: pytrec_eval scores the empty ranking 0
    // and averages it, as the workbench does (a file cannot hold it).
    let mut empty = run.clone();
    empty.insert("q-missing".into(), Vec::new());
    cases.push(Case {
        id: "hand-empty-hit-list".into(),
        run: empty,
        qrels,
        threshold: 1,
        ks: vec![1, 5, 10],
        files: false,
    });
    cases
}

#[test]
fn hand_made_runs_agree_with_trec_eval() {
    check_cases(&hand_cases());
}

#[test]
fn scores_are_compared_as_f32_like_trec_eval_9_0_8() {
    // In a file, 1.0000000001 and 1 are different doubles but the same f32:
    // trec_eval 9.0.8 (and pytrec_eval) store scores in a C float, so they tie
    // and the larger id ranks first. 1.0001 stays above.
    let dir = tempfile::tempdir().unwrap();
    let run_file = dir.path().join("f32.run");
    let qrels_file = dir.path().join("f32.qrels");
    std::fs::write(
        &run_file,
        "q Q0 a 1 1.0000000001 t\nq Q0 b 2 1 t\nq Q0 c 3 1.0001 t\nq Q0 d 4 1e-46 t\nq Q0 e 5 0 t\n",
    )
    .unwrap();
    std::fs::write(&qrels_file, "q 0 a 1\nq 0 e 1\n").unwrap();
    let (ms, measures) = metrics(&[1, 2, 3, 4, 5]);
    let reference = trec_eval(vec![json!({
        "id": "f32",
        "run_file": run_file,
        "qrels_file": qrels_file,
        "relevance_level": 1,
        "measures": measures,
    })]);
    let run = trec::read_run(&run_file).unwrap();
    let ids: Vec<&str> = run["q"].iter().map(|h| h.id.as_str()).collect();
    // 1e-46 underflows to 0 in f32 and ties with e; e > d as bytes.
    assert_eq!(ids, ["c", "b", "a", "e", "d"]);
    let ours = evaluate_with(
        &run,
        &trec::read_qrels(&qrels_file).unwrap(),
        &ms,
        &EvalOptions::default(),
    )
    .unwrap();
    // Relevant `a` at rank 3 in trec_eval's order.
    assert_eq!(ours[1].name, "mrr");
    assert!((ours[1].mean - 1.0 / 3.0).abs() < 1e-12);
    report(
        disagreements("f32", "file", &ours, &ms, &reference["f32"]),
        1,
    );
}

/// A seeded random case: up to 6 queries over a pool of awkward ids, grades
/// -2..=3, scores from a small set (many ties) or continuous, queries missing on
/// either side, thresholds 1–3.
fn random_case(rng: &mut ChaCha8Rng, i: usize) -> Case {
    const POOL: [&str; 16] = [
        "d1", "d2", "d9", "d10", "d11", "D1", "D10", "a", "A", "a-1", "a_1", "zz", "z", "0", "00",
        "doc.7",
    ];
    let n_q = rng.gen_range(1..=6);
    let mut qrels = Qrels::new();
    let mut run = Run::new();
    for q in 0..n_q {
        let qid = format!("q{q}");
        let judged = rng.gen_bool(0.85);
        let retrieved = rng.gen_bool(0.85);
        if judged {
            let mut j = BTreeMap::new();
            for _ in 0..rng.gen_range(1..=8) {
                let d = POOL[rng.gen_range(0..POOL.len())];
                j.insert(d.to_string(), rng.gen_range(-2..=3));
            }
            // trec_eval reads uninitialised memory for a query whose grades are
            // all negative (form_res_rels.c sizes rel_levels by the maximum grade),
            // so keep one grade ≥ 0.
            if j.values().all(|&g| g < 0) {
                j.insert("d1".to_string(), rng.gen_range(0..=3));
            }
            qrels.insert(qid.clone(), j);
        }
        if retrieved || !judged {
            let mut hits: Vec<Hit> = Vec::new();
            let n_hits = rng.gen_range(1..=POOL.len());
            let mut pool: Vec<&str> = POOL.to_vec();
            for _ in 0..n_hits {
                let d = pool.swap_remove(rng.gen_range(0..pool.len()));
                let score: f32 = match rng.gen_range(0..4) {
                    0 => rng.gen_range(-2..=2) as f32 * 0.5,
                    1 => 1.0,
                    2 => rng.gen_range(-10.0f32..10.0),
                    _ => rng.gen_range(0.0f32..1e-3),
                };
                hits.push(Hit::new(d, score));
            }
            run.insert(qid, hits);
        }
    }
    // At least one query in both, so every metric has something to average.
    if !run.keys().any(|q| qrels.contains_key(q)) {
        let q = "q0".to_string();
        run.insert(q.clone(), vec![Hit::new("d1", 1.0), Hit::new("d2", 1.0)]);
        qrels.entry(q).or_default().insert("d2".into(), 1);
    }
    Case {
        id: format!("random-{i:03}"),
        run,
        qrels,
        threshold: rng.gen_range(1..=3),
        ks: vec![1, 2, 3, 5, 10, 20],
        // Every other case also goes through TREC files.
        files: i & 1 == 0,
    }
}

#[test]
fn seeded_random_runs_agree_with_trec_eval() {
    let mut rng = ChaCha8Rng::seed_from_u64(20240607);
    let cases: Vec<Case> = (0..300).map(|i| random_case(&mut rng, i)).collect();
    check_cases(&cases);
}

/// `<results>/<experiment>/` folders that hold TREC run files and exactly one qrels
/// file.
fn experiment_run_files(results: &Path) -> Vec<(PathBuf, PathBuf, Vec<PathBuf>)> {
    let Ok(dirs) = std::fs::read_dir(results) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = dirs.filter_map(|e| e.ok().map(|e| e.path())).collect();
    dirs.sort();
    for dir in dirs {
        let Ok(files) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = files.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        let name = |p: &Path| p.file_name().unwrap().to_string_lossy().to_string();
        let qrels: Vec<&PathBuf> = files
            .iter()
            .filter(|p| name(p).starts_with("qrels") && name(p).ends_with(".trec"))
            .collect();
        let runs: Vec<PathBuf> = files
            .iter()
            .filter(|p| name(p).starts_with("run.") && name(p).ends_with(".trec"))
            .cloned()
            .collect();
        if qrels.len() == 1 && !runs.is_empty() {
            out.push((dir.clone(), qrels[0].clone(), runs));
        }
    }
    out
}

/// An experiment folder made here, as `scripts/reproduce` lays them out: BM25 runs
/// (three parameter settings, every passage retrieved) over the pipeline fixture
/// (`tests/data/pipeline/`: 8 passages, 5 questions) written with `trec::write_run`,
/// and graded qrels written with `trec::write_qrels`: 2 for a passage that holds a gold
/// answer (`qa::answer_in_text`), 1 for one that shares a word of four or more letters
/// with the question, none otherwise.
fn fixture_experiment(results: &Path) -> PathBuf {
    use workbench::evaluate::qa::answer_in_text;
    use workbench::retrieve::analyzer::Analyzer;
    use workbench::retrieve::bm25::{Bm25, Bm25Params};
    use workbench::retrieve::Retriever;
    use workbench::{Document, Passage};
    let data = root().join("tests/data/pipeline");
    let docs: Vec<Document> =
        workbench::load::read_jsonl(&data.join("corpus.jsonl")).expect("pipeline corpus");
    let passages: Vec<Passage> = docs.iter().map(Passage::whole).collect();
    let questions: Vec<Value> =
        workbench::load::read_jsonl(&data.join("questions.jsonl")).expect("pipeline questions");
    assert!(passages.len() >= 8 && questions.len() >= 5);
    let words = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 4)
            .map(str::to_lowercase)
            .collect()
    };
    let mut qrels = Qrels::new();
    for q in &questions {
        let (id, text) = (q["id"].as_str().unwrap(), q["question"].as_str().unwrap());
        let golds: Vec<String> = q["answer"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        let qw = words(text);
        for p in &passages {
            let full = format!("{} {}", p.title, p.text);
            let grade = if answer_in_text(&full, &golds) {
                2
            } else if words(&full).iter().any(|w| qw.contains(w)) {
                1
            } else {
                continue;
            };
            qrels
                .entry(id.to_string())
                .or_default()
                .insert(p.id.clone(), grade);
        }
    }
    let dir = results.join("fixture-bm25");
    std::fs::create_dir_all(&dir).unwrap();
    trec::write_qrels(dir.join("qrels.fixture.trec"), &qrels).unwrap();
    for (name, params) in [
        ("bm25", Bm25Params::new()),
        ("bm25-k1_1.2-b_0.75", Bm25Params::new().k1(1.2).b(0.75)),
        ("bm25-k1_0-b_0", Bm25Params::new().k1(0.0).b(0.0)),
    ] {
        let bm25 = Bm25::build(&passages, &Analyzer::default(), params).unwrap();
        let mut run = Run::new();
        for q in &questions {
            let hits = bm25
                .retrieve(q["question"].as_str().unwrap(), passages.len())
                .unwrap();
            if !hits.is_empty() {
                run.insert(q["id"].as_str().unwrap().to_string(), hits);
            }
        }
        trec::write_run(dir.join(format!("run.{name}.trec")), &run, name).unwrap();
    }
    dir
}

/// Run files compared as files: the fixture experiment made by [`fixture_experiment`]
/// always, and every `data/results/*/` folder with `run.*.trec` files beside one
/// `qrels*.trec` when there are any (after `scripts/reproduce`).
#[test]
fn experiment_run_files_agree_with_trec_eval() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = fixture_experiment(tmp.path());
    let mut found = experiment_run_files(tmp.path());
    assert_eq!(
        found.len(),
        1,
        "the fixture experiment {}",
        fixture.display()
    );
    assert_eq!(found[0].2.len(), 3, "three fixture runs");
    let real = experiment_run_files(&root().join("data/results"));
    eprintln!(
        "{} experiment folders with run files under {}",
        real.len(),
        root().join("data/results").display()
    );
    found.extend(real);
    let ks = [1, 3, 5, 10, 20, 100, 1000];
    let (ms, measures) = metrics(&ks);
    let mut requests = Vec::new();
    for (dir, qrels, runs) in &found {
        for run in runs {
            for t in [1, 2] {
                requests.push(json!({
                    "id": format!("{}|{}", run.display(), t),
                    "run_file": run,
                    "qrels_file": qrels,
                    "relevance_level": t,
                    "measures": measures,
                }));
            }
        }
        eprintln!(
            "checking {} run files in {} against {}",
            runs.len(),
            dir.display(),
            qrels.display()
        );
    }
    let reference = trec_eval(requests);
    let mut bad = Vec::new();
    let mut checked = 0;
    let mut compared_queries = 0;
    for (_, qrels_path, runs) in &found {
        let qrels = trec::read_qrels(qrels_path).unwrap();
        for run_path in runs {
            let run = trec::read_run(run_path).unwrap();
            for t in [1, 2] {
                let ours = evaluate_with(&run, &qrels, &ms, &EvalOptions::with_threshold(t))
                    .unwrap_or_else(|e| panic!("{}: {e}", run_path.display()));
                let id = format!("{}|{}", run_path.display(), t);
                compared_queries += reference[&id].len();
                bad.extend(disagreements(
                    &id,
                    "read_run(file) vs trec_eval",
                    &ours,
                    &ms,
                    &reference[&id],
                ));
                checked += 1;
            }
        }
    }
    report(bad, checked);
    // Never a pass on nothing: the fixture's 3 runs × 2 thresholds, each with queries
    // trec_eval evaluated.
    assert!(checked >= 6, "{checked} (run file, threshold) pairs");
    assert!(
        compared_queries >= 6,
        "{compared_queries} per-query comparisons"
    );
    eprintln!(
        "{checked} (run file, threshold) pairs, {compared_queries} per-query values agree with trec_eval"
    );
}
