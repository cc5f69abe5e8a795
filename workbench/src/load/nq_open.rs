//! NQ-open (open-domain Natural Questions) JSON Lines files, e.g.
//! `NQ-open.dev.jsonl` and the EfficientQA splits.
//!
//! ```json
//! {"question": "when was the last time anyone was on the moon", "answer": ["14 December 1972 UTC", "December 1972"]}
//! ```
//!
//! Extra fields (the EfficientQA test file's `def_correct_predictions`, …) are
//! ignored. The files carry no ids and no passages.

use super::question_set::{split_golds, BadRecords, DroppedGold, QuestionSet, SkippedRecord};
use crate::{Error, QaExample, Result};
use serde::Deserialize;
use std::path::Path;

#[derive(Deserialize)]
struct Record {
    question: String,
    answer: Vec<String>,
}

/// Load an NQ-open JSONL file as a [`QuestionSet`] of [`QaExample`]s, in file order.
///
/// Ids are `nq-{i}` with `i` the 0-based line index in the file (the record on
/// line 1 is `nq-0`), so a question keeps its id when another is left out. `answers` are
/// the distinct answer strings in their original order, without those that
/// SQuAD-normalise to the empty string (NQ-open dev has `)` and `---`): these are listed
/// in [`QuestionSet::dropped_golds`], as [`super::question_set`] does. There is no context
/// id, title or group. Blank lines are skipped.
///
/// **Bad records**, handled by `bad` ([`BadRecords::Error`]: an error naming the file and
/// the line; [`BadRecords::Skip`]: left out and counted in [`QuestionSet::skipped`]): an
/// empty question, and a question with no usable gold answer (an empty `answer` list, or
/// every answer dropped as above), which would otherwise be scored as unanswerable.
///
/// # Errors
///
/// * [`Error::Io`] when the file cannot be read;
/// * [`Error::Malformed`] naming the file and the 1-based line for a line that is
///   not a JSON object with a string `question` and a list-of-strings `answer`, and,
///   under [`BadRecords::Error`], for a bad record;
/// * [`Error::BadInput`] when no question is left.
pub fn load(path: &Path, bad: BadRecords) -> Result<QuestionSet> {
    let mut set = QuestionSet::default();
    for (line, rec) in super::read_jsonl_numbered::<Record>(path)? {
        let i = line - 1;
        let id = format!("nq-{i}");
        let (answers, dropped) = split_golds(rec.answer);
        let problem = if rec.question.trim().is_empty() {
            Some(format!("question `{id}`: empty `question`"))
        } else if answers.is_empty() && dropped.is_empty() {
            Some(format!(
                "question `{id}`: empty `answer` list for question {:?}",
                rec.question
            ))
        } else if answers.is_empty() {
            Some(format!(
                "question `{id}` ({:?}): no usable gold answer: every answer ({dropped:?}) \
                 normalises to the empty string (SQuAD normalisation), which would make it unanswerable",
                rec.question
            ))
        } else {
            None
        };
        if let Some(reason) = problem {
            match bad {
                BadRecords::Error => return Err(Error::malformed(path, i + 1, reason)),
                BadRecords::Skip => {
                    set.skipped.push(SkippedRecord {
                        line: i + 1,
                        reason,
                    });
                    continue;
                }
            }
        }
        set.dropped_golds
            .extend(dropped.into_iter().map(|answer| DroppedGold {
                line: i + 1,
                id: id.clone(),
                answer,
            }));
        set.questions.push(QaExample {
            id,
            question: rec.question,
            answers,
            context_id: None,
            title: None,
        });
    }
    if set.questions.is_empty() {
        return Err(Error::bad_input(
            path,
            format!("no records ({} skipped)", set.skipped.len()),
        ));
    }
    Ok(set)
}

/// One line saying what [`load`] left out of `set`: the questions without a usable gold
/// answer and the gold answers dropped, each with its line (up to five named).
pub fn dropped_note(set: &QuestionSet) -> String {
    let name = |v: Vec<String>| {
        let n = v.len();
        let mut shown: Vec<String> = v.into_iter().take(5).collect();
        if n > 5 {
            shown.push(format!("… {} more", n - 5));
        }
        shown.join("; ")
    };
    format!(
        "{} questions left out ({}), {} gold answers dropped as they normalise to nothing ({})",
        set.skipped.len(),
        name(
            set.skipped
                .iter()
                .map(|r| format!("line {}: {}", r.line, r.reason))
                .collect()
        ),
        set.dropped_golds.len(),
        name(
            set.dropped_golds
                .iter()
                .map(|d| format!("line {}: {:?}", d.line, d.answer))
                .collect()
        ),
    )
}
