//! Question sets users bring: JSON Lines in the NQ-open layout, one question per line,
//! with optional `id` and `group` fields.
//!
//! ```json
//! {"question": "who wrote hamlet", "answer": ["William Shakespeare", "Shakespeare"]}
//! {"id": "q7", "group": "Who", "question": "who painted the mona lisa", "answer": ["Leonardo da Vinci"]}
//! ```
//!
//! - `question` (string) and `answer` (list of strings) are required; FlashRAG's layout,
//!   `{"id", "question", "golden_answers"}`, is read too (`golden_answers` is `answer`; a
//!   line with both is an error); other fields (`def_correct_predictions`, FlashRAG's
//!   `metadata`, …) are ignored, as in [`super::nq_open`];
//! - `id` (string or integer) is optional; a record without one gets `line-{N}` (`N` its
//!   1-based line in the file), so ids stay stable when lines are added at the end;
//! - `group` (string) is optional: a question group given by the file, which takes
//!   precedence over the rule of `evaluate::groups` (feature `parquet`);
//! - answers keep their order; repeated answer strings are kept once. Answers that
//!   are regular expressions (DPR's CuratedTREC files) are stored as they are and
//!   matched as DPR matches them when the pipeline's `answer_match` is `dpr-regex`.
//!
//! **Bad records** (an empty question, no usable gold answer, an id seen before) are
//! handled by [`BadRecords`]: [`BadRecords::Error`] (the default) stops at the first with
//! an error naming the file, the line and what is wrong; [`BadRecords::Skip`] leaves the
//! record out and **counts it** in [`QuestionSet::skipped`] with its line and reason.
//! Never a silent drop. A line that is not JSON, or lacks `question` / `answer`, is
//! always an error: it is a broken file, not a bad record.

use crate::evaluate::answer_match::AnswerMatch;
use crate::{Error, QaExample, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::Path;

/// What to do with a bad record (empty question, no gold answer, duplicate id).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BadRecords {
    /// Stop with an error naming the file, line and problem (default).
    #[default]
    Error,
    /// Leave the record out and count it in [`QuestionSet::skipped`].
    Skip,
}

/// A record left out under [`BadRecords::Skip`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkippedRecord {
    /// 1-based line in the file.
    pub line: usize,
    /// Why it was left out.
    pub reason: String,
}

/// A loaded question set.
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionSet {
    /// The questions kept, in file order.
    pub questions: Vec<QaExample>,
    /// Question id → group, for records with a `group` field.
    pub groups: BTreeMap<String, String>,
    /// Records left out under [`BadRecords::Skip`] (always empty under `Error`).
    pub skipped: Vec<SkippedRecord>,
    /// The answer-matching rule of the data set's own scorer, used when a pipeline's
    /// `evaluation.answer_match` is not set. A JSONL set gets
    /// [`AnswerMatch::Squad`]: NQ-open's official EfficientQA scorer and FlashRAG's
    /// metrics normalise answers as the SQuAD script does (lowercase, no punctuation, no
    /// articles). DPR's own rules (`dpr`, `dpr-regex` for CuratedTREC's patterns) are
    /// chosen in the config.
    pub answer_match: AnswerMatch,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawId {
    Str(String),
    Int(i64),
}

#[derive(Deserialize)]
struct Record {
    question: String,
    #[serde(alias = "golden_answers")]
    answer: Vec<String>,
    #[serde(default)]
    id: Option<RawId>,
    #[serde(default)]
    group: Option<String>,
}

/// Load a question set (see the [module docs](self)).
///
/// # Errors
///
/// * [`Error::Io`] when the file cannot be read;
/// * [`Error::Malformed`] (`path:line: …`) for a line that is not a JSON object with a
///   string `question` and a list-of-strings `answer`, and, under
///   [`BadRecords::Error`], for an empty question, an `answer` list with no non-blank
///   answer, or an id already used by an earlier record;
/// * [`Error::BadInput`] when no question is left.
pub fn load(path: &Path, bad: BadRecords) -> Result<QuestionSet> {
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut questions = Vec::new();
    let mut groups = BTreeMap::new();
    let mut skipped = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let lineno = i + 1;
        let line = line.map_err(|e| Error::io(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let rec: Record = serde_json::from_str(&line)
            .map_err(|e| Error::malformed(path, lineno, e.to_string()))?;
        let id = match rec.id {
            Some(RawId::Str(s)) => s,
            Some(RawId::Int(n)) => n.to_string(),
            None => format!("line-{lineno}"),
        };
        let mut answers: Vec<String> = Vec::with_capacity(rec.answer.len());
        for a in rec.answer {
            if !a.trim().is_empty() && !answers.contains(&a) {
                answers.push(a);
            }
        }
        let problem = if rec.question.trim().is_empty() {
            Some(format!("question `{id}`: empty `question`"))
        } else if answers.is_empty() {
            Some(format!(
                "question `{id}` ({:?}): no gold answer (`answer` is empty or blank)",
                rec.question
            ))
        } else if id.trim().is_empty() {
            Some("empty `id`".to_string())
        } else if seen.contains(&id) {
            Some(format!(
                "duplicate id `{id}` (first used on an earlier line)"
            ))
        } else {
            None
        };
        if let Some(reason) = problem {
            match bad {
                BadRecords::Error => return Err(Error::malformed(path, lineno, reason)),
                BadRecords::Skip => {
                    skipped.push(SkippedRecord {
                        line: lineno,
                        reason,
                    });
                    continue;
                }
            }
        }
        seen.insert(id.clone());
        if let Some(g) = rec.group.filter(|g| !g.trim().is_empty()) {
            groups.insert(id.clone(), g);
        }
        questions.push(QaExample {
            id,
            question: rec.question,
            answers,
            context_id: None,
            title: None,
        });
    }
    if questions.is_empty() {
        return Err(Error::bad_input(
            path,
            format!("no questions left ({} records skipped)", skipped.len()),
        ));
    }
    Ok(QuestionSet {
        questions,
        groups,
        skipped,
        answer_match: AnswerMatch::Squad,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(s: &str) -> tempfile::NamedTempFile {
        use std::io::Write;
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(s.as_bytes()).unwrap();
        f
    }

    #[test]
    fn flashrag_golden_answers_are_answers() {
        let f = write(
            "{\"id\": \"test_0\", \"question\": \"who wrote hamlet\", \"golden_answers\": [\"Shakespeare\"], \"metadata\": {}}\n",
        );
        let s = load(f.path(), BadRecords::Error).unwrap();
        assert_eq!(s.questions[0].id, "test_0");
        assert_eq!(s.questions[0].answers, ["Shakespeare"]);
        let both =
            write("{\"question\": \"q\", \"answer\": [\"a\"], \"golden_answers\": [\"b\"]}\n");
        let e = load(both.path(), BadRecords::Error)
            .unwrap_err()
            .to_string();
        assert!(e.contains(":1:") && e.contains("answer"), "{e}");
    }

    #[test]
    fn ids_groups_and_dedup() {
        let f = write(
            "{\"question\": \"who wrote hamlet\", \"answer\": [\"Shakespeare\", \"Shakespeare\", \" \"]}\n\n\
             {\"id\": 7, \"group\": \"Who\", \"question\": \"who?\", \"answer\": [\"x\"], \"extra\": 1}\n",
        );
        let s = load(f.path(), BadRecords::Error).unwrap();
        assert_eq!(s.questions.len(), 2);
        assert_eq!(s.questions[0].id, "line-1");
        assert_eq!(s.questions[0].answers, ["Shakespeare"]);
        assert_eq!(s.questions[1].id, "7");
        assert_eq!(s.groups["7"], "Who");
        assert!(s.skipped.is_empty());
    }

    #[test]
    fn bad_records_error_or_counted_skip() {
        let text = "{\"id\": \"a\", \"question\": \"q1\", \"answer\": [\"x\"]}\n\
                    {\"id\": \"b\", \"question\": \"  \", \"answer\": [\"x\"]}\n\
                    {\"id\": \"c\", \"question\": \"q3\", \"answer\": []}\n\
                    {\"id\": \"a\", \"question\": \"q4\", \"answer\": [\"y\"]}\n\
                    {\"id\": \"d\", \"question\": \"q5\", \"answer\": [\"z\"]}\n";
        let f = write(text);
        let e = load(f.path(), BadRecords::Error).unwrap_err().to_string();
        assert!(e.contains(":2:") && e.contains("empty `question`"), "{e}");
        let s = load(f.path(), BadRecords::Skip).unwrap();
        let ids: Vec<&str> = s.questions.iter().map(|q| q.id.as_str()).collect();
        assert_eq!(ids, ["a", "d"]);
        assert_eq!(s.skipped.len(), 3);
        assert_eq!(
            s.skipped.iter().map(|r| r.line).collect::<Vec<_>>(),
            [2, 3, 4]
        );
        assert!(s.skipped[1].reason.contains("no gold answer"));
        assert!(s.skipped[2].reason.contains("duplicate id `a`"));
        // A broken line is an error even when skipping.
        let f = write("{\"question\": \"q\"}\n");
        let e = load(f.path(), BadRecords::Skip).unwrap_err().to_string();
        assert!(e.contains(":1:") && e.contains("answer"), "{e}");
        // Nothing left.
        let f = write("{\"question\": \"\", \"answer\": [\"x\"]}\n");
        let e = load(f.path(), BadRecords::Skip).unwrap_err().to_string();
        assert!(e.contains("no questions left (1 records skipped)"), "{e}");
    }
}
