//! NQ-open (open-domain Natural Questions) JSON Lines files, e.g.
//! `NQ-open.dev.jsonl` and the EfficientQA splits.
//!
//! ```json
//! {"question": "when was the last time anyone was on the moon", "answer": ["14 December 1972 UTC", "December 1972"]}
//! ```
//!
//! Extra fields (the EfficientQA test file's `def_correct_predictions`, …) are
//! ignored. The files carry no ids and no passages.

use crate::{Error, QaExample, Result};
use serde::Deserialize;
use std::io::{BufRead, BufReader};
use std::path::Path;

#[derive(Deserialize)]
struct Record {
    question: String,
    answer: Vec<String>,
}

/// Load an NQ-open JSONL file as [`QaExample`]s, in file order.
///
/// Ids are `nq-{i}` with `i` the 0-based line index in the file (the record on
/// line 1 is `nq-0`). `answers` are the distinct answer strings in their original
/// order; there is no context id or title. Blank lines are skipped.
///
/// # Errors
///
/// * [`Error::Io`] when the file cannot be read;
/// * [`Error::Malformed`] naming the file and the 1-based line for a line that is
///   not a JSON object with a string `question` and a list-of-strings `answer`,
///   for an empty question, and for an empty `answer` list;
/// * [`Error::BadInput`] when the file holds no records.
pub fn load(path: &Path) -> Result<Vec<QaExample>> {
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|e| Error::io(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let rec: Record = serde_json::from_str(&line)
            .map_err(|e| Error::malformed(path, i + 1, e.to_string()))?;
        if rec.question.trim().is_empty() {
            return Err(Error::malformed(path, i + 1, "empty `question`"));
        }
        let mut answers: Vec<String> = Vec::with_capacity(rec.answer.len());
        for a in rec.answer {
            if !answers.contains(&a) {
                answers.push(a);
            }
        }
        if answers.is_empty() {
            return Err(Error::malformed(
                path,
                i + 1,
                format!("empty `answer` list for question {:?}", rec.question),
            ));
        }
        out.push(QaExample {
            id: format!("nq-{i}"),
            question: rec.question,
            answers,
            context_id: None,
            title: None,
        });
    }
    if out.is_empty() {
        return Err(Error::bad_input(path, "no records"));
    }
    Ok(out)
}
