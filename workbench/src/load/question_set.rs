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
//!   matched as DPR matches them when the pipeline's `answer_match` is `dpr-regex`;
//! - an answer that SQuAD-normalises to the empty string ([`normalize_answer`]: blank,
//!   or only punctuation and articles, e.g. `)` or `---` in NQ-open dev) is **dropped**
//!   from its question's gold list and listed in [`QuestionSet::dropped_golds`]: scored
//!   as the SQuAD script scores, it would stand for "unanswerable", where an abstention
//!   scores EM = F1 = 1.
//!
//! **Bad records** (an empty question, no usable gold answer — an empty `answer` list, or
//! every answer dropped as above —, an id seen before) are handled by [`BadRecords`]:
//! [`BadRecords::Error`] (the default) stops at the first with an error naming the file,
//! the line and what is wrong; [`BadRecords::Skip`] leaves the record out and **counts
//! it** in [`QuestionSet::skipped`] with its line and reason. Never a silent drop. A line
//! that is not JSON, or lacks `question` / `answer`, is always an error: it is a broken
//! file, not a bad record.
//!
//! [`from_examples`] applies the same gold-answer rule to questions another loader read
//! (SQuAD, RAG-Mini-Wikipedia), where a question with no answer at all is unanswerable by
//! design and is kept.

use crate::text::answer_match::{normalize_answer, AnswerMatch};
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
    /// 1-based line in the file (for questions checked by [`from_examples`]: the
    /// question's 1-based position in the loaded list).
    pub line: usize,
    /// Why it was left out.
    pub reason: String,
}

/// A gold answer dropped from a kept question because it SQuAD-normalises to the empty
/// string (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DroppedGold {
    /// 1-based line in the file (for [`from_examples`]: the question's 1-based position).
    pub line: usize,
    /// The question's id.
    pub id: String,
    /// The answer as written.
    pub answer: String,
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
    /// `evaluation.answer_match` is not set. Every set the workbench loads gets
    /// [`AnswerMatch::Squad`]: SQuAD's official evaluation script normalises answers
    /// that way (lowercase, no punctuation, no articles), and so do NQ-open's official
    /// EfficientQA scorer and FlashRAG's metrics (JSONL sets); RAG Mini Wikipedia ships no
    /// scorer, and BERGEN's Match and FlashRAG's `acc` normalise as SQuAD does (196 of
    /// its 918 golds end in punctuation, `Yes.`, `1944.`, that DPR's tokens would keep).
    /// DPR's own rules (`dpr`, `dpr-regex` for CuratedTREC's patterns) are chosen in the
    /// config.
    pub answer_match: AnswerMatch,
    /// Gold answers dropped from the kept questions because they normalise to nothing
    /// (the answers of a skipped question are named in its reason instead).
    pub dropped_golds: Vec<DroppedGold>,
}

impl Default for QuestionSet {
    /// An empty set under the SQuAD rule (see [`QuestionSet::answer_match`]).
    fn default() -> Self {
        QuestionSet {
            questions: Vec::new(),
            groups: BTreeMap::new(),
            skipped: Vec::new(),
            answer_match: AnswerMatch::Squad,
            dropped_golds: Vec::new(),
        }
    }
}

/// Split `answers` into the usable ones (distinct, in order) and the ones that
/// SQuAD-normalise to the empty string (distinct, in order), which no prediction can
/// match except by saying nothing.
pub fn split_golds(answers: impl IntoIterator<Item = String>) -> (Vec<String>, Vec<String>) {
    let (mut kept, mut dropped): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for a in answers {
        let to = if normalize_answer(&a).is_empty() {
            &mut dropped
        } else {
            &mut kept
        };
        if !to.contains(&a) {
            to.push(a);
        }
    }
    (kept, dropped)
}

/// Why question `id` has no gold answer left, `dropped` being its answers that normalise
/// to nothing.
fn no_gold_reason(id: &str, question: &str, dropped: &[String]) -> String {
    if dropped.is_empty() {
        format!("question `{id}` ({question:?}): no gold answer (`answer` is empty)")
    } else {
        format!(
            "question `{id}` ({question:?}): no usable gold answer: every answer ({dropped:?}) \
             normalises to the empty string (SQuAD normalisation), which would make it unanswerable"
        )
    }
}

/// Apply the gold-answer rule of the [module docs](self) to questions another loader
/// read from `source`: answers that normalise to nothing are dropped and listed; an
/// answerable question (one that had answers) left with none is a bad record, handled by
/// `bad` (an error names `source` and the question's 1-based position as `record N`, a
/// skip counts it with that position). A question with no answer at all (SQuAD 2.0's
/// unanswerable questions) is kept as it is.
///
/// Errors: [`Error::MalformedRecord`] under [`BadRecords::Error`]; [`Error::BadInput`]
/// when no question is left.
pub fn from_examples(
    examples: Vec<QaExample>,
    bad: BadRecords,
    source: &Path,
) -> Result<QuestionSet> {
    let mut set = QuestionSet::default();
    for (i, mut q) in examples.into_iter().enumerate() {
        let n = i + 1;
        if q.answers.is_empty() {
            set.questions.push(q);
            continue;
        }
        let (kept, dropped) = split_golds(std::mem::take(&mut q.answers));
        if kept.is_empty() {
            let reason = no_gold_reason(&q.id, &q.question, &dropped);
            match bad {
                BadRecords::Error => return Err(Error::record(source, "record", n, reason)),
                BadRecords::Skip => {
                    set.skipped.push(SkippedRecord { line: n, reason });
                    continue;
                }
            }
        }
        set.dropped_golds
            .extend(dropped.into_iter().map(|answer| DroppedGold {
                line: n,
                id: q.id.clone(),
                answer,
            }));
        q.answers = kept;
        set.questions.push(q);
    }
    if set.questions.is_empty() {
        return Err(Error::bad_input(
            source,
            format!("no questions left ({} records skipped)", set.skipped.len()),
        ));
    }
    Ok(set)
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
///   [`BadRecords::Error`], for an empty question, an `answer` list with no answer that
///   normalises to something, or an id already used by an earlier record;
/// * [`Error::BadInput`] when no question is left.
pub fn load(path: &Path, bad: BadRecords) -> Result<QuestionSet> {
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut questions = Vec::new();
    let mut groups = BTreeMap::new();
    let mut skipped = Vec::new();
    let mut dropped_golds = Vec::new();
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
        let (answers, dropped) = split_golds(rec.answer);
        let problem = if rec.question.trim().is_empty() {
            Some(format!("question `{id}`: empty `question`"))
        } else if answers.is_empty() {
            Some(no_gold_reason(&id, &rec.question, &dropped))
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
        dropped_golds.extend(dropped.into_iter().map(|answer| DroppedGold {
            line: lineno,
            id: id.clone(),
            answer,
        }));
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
        dropped_golds,
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
    fn golds_that_normalise_to_nothing_are_dropped_and_counted() {
        // NQ-open dev has golds `)` and `---`: SQuAD normalisation leaves nothing of them.
        let text =
            "{\"id\": \"a\", \"question\": \"q1\", \"answer\": [\"Paris\", \")\", \"the\"]}\n\
                    {\"id\": \"b\", \"question\": \"q2\", \"answer\": [\")\"]}\n\
                    {\"id\": \"c\", \"question\": \"q3\", \"answer\": [\"---\", \" \"]}\n\
                    {\"id\": \"d\", \"question\": \"q4\", \"answer\": [\"1969\"]}\n";
        let f = write(text);
        let e = load(f.path(), BadRecords::Error).unwrap_err().to_string();
        assert!(
            e.contains(":2:") && e.contains("`b`") && e.contains("no usable gold answer"),
            "{e}"
        );
        let s = load(f.path(), BadRecords::Skip).unwrap();
        let ids: Vec<&str> = s.questions.iter().map(|q| q.id.as_str()).collect();
        assert_eq!(ids, ["a", "d"]);
        assert_eq!(s.questions[0].answers, ["Paris"]);
        assert_eq!(s.skipped.iter().map(|r| r.line).collect::<Vec<_>>(), [2, 3]);
        assert!(s.skipped[1].reason.contains("\"---\""), "{:?}", s.skipped);
        let dropped: Vec<(usize, &str, &str)> = s
            .dropped_golds
            .iter()
            .map(|d| (d.line, d.id.as_str(), d.answer.as_str()))
            .collect();
        assert_eq!(dropped, [(1, "a", ")"), (1, "a", "the")]);
        // No question the loader keeps scores an abstention as correct.
        for q in &s.questions {
            assert_eq!(crate::evaluate::qa::exact_match("", &q.answers), 0.0);
        }
    }

    #[test]
    fn other_loaders_questions_keep_unanswerables_and_lose_empty_golds() {
        let q = |id: &str, answers: &[&str]| QaExample {
            id: id.into(),
            question: format!("question {id}"),
            answers: answers.iter().map(|a| a.to_string()).collect(),
            context_id: None,
            title: None,
        };
        let path = Path::new("dev-v2.0.json");
        let examples = vec![
            q("answerable", &["France", "."]),
            q("unanswerable", &[]),
            q("empty-golds", &["---"]),
        ];
        let e = from_examples(examples.clone(), BadRecords::Error, path)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("dev-v2.0.json") && e.contains("record 3") && e.contains("`empty-golds`"),
            "{e}"
        );
        let s = from_examples(examples, BadRecords::Skip, path).unwrap();
        assert_eq!(s.questions.len(), 2);
        assert_eq!(s.questions[0].answers, ["France"]);
        // SQuAD 2.0's unanswerable question stays unanswerable.
        assert!(s.questions[1].answers.is_empty());
        assert_eq!(
            crate::evaluate::qa::exact_match("", &s.questions[1].answers),
            1.0
        );
        assert_eq!(s.skipped.len(), 1);
        assert_eq!(s.skipped[0].line, 3);
        assert_eq!(s.dropped_golds.len(), 1);
        assert_eq!(s.dropped_golds[0].answer, ".");
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
