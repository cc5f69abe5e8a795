//! TREC run and qrels files, the formats trec_eval reads.
//!
//! - **Run**: one line per retrieved document, `qid Q0 docid rank score tag`,
//!   whitespace-separated. The second column is ignored on reading (trec_eval
//!   ignores it too); ranks are 1-based.
//! - **Qrels**: one line per judgement, `qid iter docid grade`, with `iter`
//!   ignored on reading (written as `0`) and `grade` an integer.
//!
//! Blank lines are skipped. Any other line with the wrong number of columns or an
//! unparsable number is an [`Error::Malformed`] naming the file and 1-based line,
//! and so is a NaN score and a second line for the same (qid, docid) pair. A file
//! with no records is an [`Error::BadInput`]. Ids must not contain whitespace; the
//! writers check.
//!
//! **Scores and order, as trec_eval 9.0.8 sees them.** trec_eval reads a score
//! with `atof` (to `double`) into a C `float`, ranks by that score descending and
//! breaks ties by document id descending, ignoring the rank column
//! ([`crate::evaluate::ranking::trec_eval_cmp`]). [`read_run`] does the same: it
//! parses the score as `f64` and rounds it to `f32`, and returns each query's hits
//! in that order. [`write_run`] writes each `f32` score in Rust's shortest
//! round-trip form, which parses back (through `f64` or directly) to the same
//! `f32`, and writes the lines in trec_eval's order with ranks 1, 2, … in that
//! order, so the rank column agrees with what trec_eval evaluates. Written and
//! read back, a run scores exactly as it did in memory.

use crate::evaluate::ranking::trec_eval_cmp;
use crate::{Error, Hit, Qrels, Result, Run};
use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

/// Write `run` as a TREC run file. Each query's hits are written in trec_eval's
/// order (score descending, ties by document id descending; see the module docs)
/// with ranks 1, 2, …; scores use Rust's shortest round-trip formatting, so
/// [`read_run`] and trec_eval read back the same `f32`s. A query with no hits
/// writes no line (the format cannot hold it).
///
/// Errors: an empty run ([`Error::Empty`]); an empty `tag`, or a tag, query id or
/// document id that is empty or contains whitespace, or a NaN score
/// ([`Error::InvalidParam`]); I/O failures.
pub fn write_run(path: impl AsRef<Path>, run: &Run, tag: &str) -> Result<()> {
    let path = path.as_ref();
    if run.values().all(Vec::is_empty) {
        return Err(Error::Empty(format!(
            "run for {} has no hits to write",
            path.display()
        )));
    }
    check_token("tag", "tag", tag)?;
    for (qid, hits) in run {
        check_token("run", "query id", qid)?;
        for h in hits {
            check_token("run", "document id", &h.id)?;
            if h.score.is_nan() {
                return Err(Error::param(
                    "run",
                    format!(
                        "query `{qid}`, document `{}`: a NaN score cannot be ranked",
                        h.id
                    ),
                ));
            }
        }
    }
    write_lines(path, |w| {
        for (qid, hits) in run {
            let mut ranked: Vec<&Hit> = hits.iter().collect();
            ranked.sort_by(|a, b| trec_eval_cmp(a, b));
            for (i, h) in ranked.into_iter().enumerate() {
                writeln!(w, "{qid} Q0 {} {} {} {tag}", h.id, i + 1, h.score)?;
            }
        }
        Ok(())
    })
}

/// Read a TREC run file. Each query's hits are ordered as trec_eval ranks them:
/// by score (read as `f64`, then rounded to `f32`, as trec_eval's `atof` into a
/// `float`) descending, ties by document id descending. The rank column must be a
/// non-negative integer but, as in trec_eval, does not decide the order.
///
/// Errors: see the module docs.
pub fn read_run(path: impl AsRef<Path>) -> Result<Run> {
    let path = path.as_ref();
    let mut run: Run = BTreeMap::new();
    let mut seen: HashSet<(String, String)> = HashSet::new();
    for_each_record(path, |line_no, cols| {
        let [qid, _q0, docid, rank, score, _tag] = cols[..] else {
            return Err(Error::malformed(
                path,
                line_no,
                format!(
                    "expected 6 columns `qid Q0 docid rank score tag`, found {}",
                    cols.len()
                ),
            ));
        };
        rank.parse::<u64>().map_err(|_| {
            Error::malformed(
                path,
                line_no,
                format!("rank `{rank}` is not a non-negative integer"),
            )
        })?;
        let wide: f64 = score.parse().map_err(|_| {
            Error::malformed(path, line_no, format!("score `{score}` is not a number"))
        })?;
        if wide.is_nan() {
            return Err(Error::malformed(
                path,
                line_no,
                format!("score `{score}` is NaN, which has no rank"),
            ));
        }
        if !seen.insert((qid.to_string(), docid.to_string())) {
            return Err(Error::malformed(
                path,
                line_no,
                format!("document `{docid}` appears twice for query `{qid}`"),
            ));
        }
        run.entry(qid.to_string())
            .or_default()
            .push(Hit::new(docid, wide as f32));
        Ok(())
    })?;
    for hits in run.values_mut() {
        hits.sort_by(trec_eval_cmp);
    }
    Ok(run)
}

/// Write `qrels` as a TREC qrels file, `qid 0 docid grade`, in id order.
///
/// Errors: empty qrels ([`Error::Empty`]); a query or document id that is empty
/// or contains whitespace ([`Error::InvalidParam`]); I/O failures.
pub fn write_qrels(path: impl AsRef<Path>, qrels: &Qrels) -> Result<()> {
    let path = path.as_ref();
    if qrels.values().all(BTreeMap::is_empty) {
        return Err(Error::Empty(format!(
            "qrels for {} have no judgements to write",
            path.display()
        )));
    }
    for (qid, judged) in qrels {
        check_token("qrels", "query id", qid)?;
        for docid in judged.keys() {
            check_token("qrels", "document id", docid)?;
        }
    }
    write_lines(path, |w| {
        for (qid, judged) in qrels {
            for (docid, grade) in judged {
                writeln!(w, "{qid} 0 {docid} {grade}")?;
            }
        }
        Ok(())
    })
}

/// Read a TREC qrels file (`qid iter docid grade`, 4 columns).
///
/// Errors: see the module docs.
pub fn read_qrels(path: impl AsRef<Path>) -> Result<Qrels> {
    let path = path.as_ref();
    let mut qrels = Qrels::new();
    for_each_record(path, |line_no, cols| {
        let [qid, _iter, docid, grade] = cols[..] else {
            return Err(Error::malformed(
                path,
                line_no,
                format!(
                    "expected 4 columns `qid iter docid grade`, found {}",
                    cols.len()
                ),
            ));
        };
        let grade: i32 = grade.parse().map_err(|_| {
            Error::malformed(path, line_no, format!("grade `{grade}` is not an integer"))
        })?;
        let judged = qrels.entry(qid.to_string()).or_default();
        if judged.insert(docid.to_string(), grade).is_some() {
            return Err(Error::malformed(
                path,
                line_no,
                format!("document `{docid}` is judged twice for query `{qid}`"),
            ));
        }
        Ok(())
    })?;
    Ok(qrels)
}

/// Call `f(line_number, columns)` for every non-blank line; error if there is none.
fn for_each_record(path: &Path, mut f: impl FnMut(usize, Vec<&str>) -> Result<()>) -> Result<()> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut records = 0usize;
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| Error::io(path, e))?;
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.is_empty() {
            continue;
        }
        f(i + 1, cols)?;
        records += 1;
    }
    if records == 0 {
        return Err(Error::bad_input(path, "no records"));
    }
    Ok(())
}

fn write_lines(
    path: &Path,
    body: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> Result<()> {
    let file = File::create(path).map_err(|e| Error::io(path, e))?;
    let mut w = BufWriter::new(file);
    body(&mut w)
        .and_then(|()| w.flush())
        .map_err(|e| Error::io(path, e))
}

fn check_token(param: &'static str, what: &str, s: &str) -> Result<()> {
    if s.is_empty() || s.contains(char::is_whitespace) {
        return Err(Error::param(
            param,
            format!("{what} `{s}` must be non-empty and contain no whitespace"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_run() -> Run {
        let mut run = Run::new();
        run.insert(
            "q1".into(),
            vec![
                Hit::new("d3", 12.5),
                Hit::new("d1", 0.1),
                Hit::new("d2", -3.25e-7),
            ],
        );
        run.insert("q2".into(), vec![Hit::new("d1", 1.0 / 3.0)]);
        run
    }

    fn sample_qrels() -> Qrels {
        let mut q = Qrels::new();
        q.entry("q1".into()).or_default().insert("d1".into(), 2);
        q.entry("q1".into()).or_default().insert("d9".into(), 0);
        q.entry("q2".into()).or_default().insert("d1".into(), -1);
        q
    }

    #[test]
    fn run_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.trec");
        let run = sample_run();
        write_run(&p, &run, "bm25").unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.lines().next().unwrap(), "q1 Q0 d3 1 12.5 bm25");
        assert_eq!(text.lines().count(), 4);
        assert_eq!(read_run(&p).unwrap(), run);
    }

    #[test]
    fn qrels_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("qrels.txt");
        let qrels = sample_qrels();
        write_qrels(&p, &qrels).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "q1 0 d1 2\nq1 0 d9 0\nq2 0 d1 -1\n"
        );
        assert_eq!(read_qrels(&p).unwrap(), qrels);
    }

    #[test]
    fn read_run_orders_like_trec_eval() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.txt");
        // Out of order, tabs and extra spaces, a blank line; the rank column
        // disagrees with the scores on purpose: as in trec_eval, the scores win,
        // and tied scores go by descending id (d 5.0 ties c 5, and 2.0000000001
        // ties 2 once rounded to f32).
        std::fs::write(
            &p,
            "q1 Q0 b 2 9.0 t\n\nq1\tQ0\ta\t1\t1.0\tt\n  q1 0 c 3 5 other  \nq1 Q0 d 4 5.0 t\n\
             q0 Q0 x 1 2 t\nq0 Q0 w 2 2.0000000001 t\nq0 Q0 y 3 2.0001 t\n",
        )
        .unwrap();
        let run = read_run(&p).unwrap();
        let ids = |q: &str| -> Vec<String> { run[q].iter().map(|h| h.id.clone()).collect() };
        assert_eq!(ids("q1"), ["b", "d", "c", "a"]);
        assert_eq!(run["q1"][0].score, 9.0);
        assert_eq!(ids("q0"), ["y", "x", "w"]);
        assert_eq!(run["q0"][2].score, 2.0);
        assert_eq!(run.keys().collect::<Vec<_>>(), ["q0", "q1"]);
    }

    #[test]
    fn write_run_writes_trec_evals_order_and_ranks() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.trec");
        // A retriever's order: ties by ascending id. The file gets trec_eval's.
        let mut run = Run::new();
        run.insert(
            "q".into(),
            vec![
                Hit::new("a", 2.0),
                Hit::new("b", 2.0),
                Hit::new("c", 1.0),
                Hit::new("d", -0.0),
                Hit::new("e", 0.0),
            ],
        );
        write_run(&p, &run, "t").unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "q Q0 b 1 2 t\nq Q0 a 2 2 t\nq Q0 c 3 1 t\nq Q0 e 4 0 t\nq Q0 d 5 -0 t\n"
        );
        let back = read_run(&p).unwrap();
        let ids: Vec<&str> = back["q"].iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, ["b", "a", "c", "e", "d"]);
        // A NaN score is refused, naming the query and document.
        run.get_mut("q").unwrap().push(Hit::new("n", f32::NAN));
        let e = write_run(&p, &run, "t").unwrap_err();
        assert!(matches!(e, Error::InvalidParam { .. }), "{e}");
        assert!(e.to_string().contains("`n`"), "{e}");
    }

    proptest::proptest! {
        /// Every finite or infinite f32 survives write → read exactly, both through
        /// Rust's f32 parser and through f64 then f32 (trec_eval's `atof` into a
        /// `float`, and pytrec_eval's `float()`).
        #[test]
        fn scores_round_trip_bit_exactly(bits in proptest::prelude::any::<u32>()) {
            let x = f32::from_bits(bits);
            proptest::prop_assume!(!x.is_nan());
            let text = format!("{x}");
            let direct: f32 = text.parse().unwrap();
            let via_f64 = text.parse::<f64>().unwrap() as f32;
            proptest::prop_assert_eq!(direct.to_bits(), bits, "{}", text);
            proptest::prop_assert_eq!(via_f64.to_bits(), bits, "{}", text);
        }
    }

    #[test]
    fn malformed_lines_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.run");
        let cases = [
            ("q1 Q0 a 1 1.0 t\nq1 Q0 b 2 1.0\n", 2, "6 columns"),
            ("q1 Q0 a one 1.0 t\n", 1, "rank"),
            ("q1 Q0 a 1 high t\n", 1, "score"),
            ("q1 Q0 a 1 1 t\nq1 Q0 b 2 NaN t\n", 2, "NaN"),
            ("q1 Q0 a 1 1 t\n\nq1 Q0 a 2 0.5 t\n", 3, "twice"),
        ];
        for (text, line, what) in cases {
            std::fs::write(&p, text).unwrap();
            match read_run(&p).unwrap_err() {
                Error::Malformed {
                    path,
                    line: l,
                    message,
                } => {
                    assert_eq!(path, p);
                    assert_eq!(l, line, "{message}");
                    assert!(message.contains(what), "{message}");
                }
                e => panic!("unexpected {e}"),
            }
        }
        let q = dir.path().join("bad.qrels");
        for (text, line) in [
            ("q1 0 d1 1\nq1 d2 1\n", 2),
            ("q1 0 d1 1.5\n", 1),
            ("q1 0 d1 1\nq1 0 d1 0\n", 2),
        ] {
            std::fs::write(&q, text).unwrap();
            let e = read_qrels(&q).unwrap_err();
            assert!(
                matches!(e, Error::Malformed { line: l, .. } if l == line),
                "{e}"
            );
            assert!(e.to_string().contains("bad.qrels"), "{e}");
        }
        // Same docid under different queries is fine.
        std::fs::write(&q, "q1 0 d1 1\nq2 0 d1 1\n").unwrap();
        assert_eq!(read_qrels(&q).unwrap().len(), 2);
    }

    #[test]
    fn empty_and_invalid_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("empty");
        std::fs::write(&p, "\n  \n").unwrap();
        assert!(matches!(read_run(&p), Err(Error::BadInput { .. })));
        assert!(matches!(read_qrels(&p), Err(Error::BadInput { .. })));
        assert!(matches!(
            read_run(dir.path().join("missing")),
            Err(Error::Io { .. })
        ));
        assert!(matches!(
            write_run(&p, &Run::new(), "t"),
            Err(Error::Empty(_))
        ));
        assert!(matches!(
            write_qrels(&p, &Qrels::new()),
            Err(Error::Empty(_))
        ));
        let run = sample_run();
        assert!(write_run(&p, &run, "two words").is_err());
        assert!(write_run(&p, &run, "").is_err());
        let mut bad = run.clone();
        bad.insert("q 3".into(), vec![Hit::new("d", 1.0)]);
        let e = write_run(&p, &bad, "t").unwrap_err();
        assert!(e.to_string().contains("q 3"), "{e}");
    }
}
