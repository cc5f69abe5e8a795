//! SQuAD v1.1 and v2.0 JSON files (`train-v1.1.json`, `dev-v2.0.json`, …).
//!
//! ```json
//! {"version": "v2.0",
//!  "data": [{"title": "Normans",
//!            "paragraphs": [{"context": "The Normans … in France …",
//!                            "qas": [{"id": "56ddde6b9a695914005b9628",
//!                                     "question": "In what country is Normandy located?",
//!                                     "answers": [{"text": "France", "answer_start": 159}],
//!                                     "is_impossible": false}]}]}]}
//! ```
//!
//! [`load`] returns every paragraph as a [`Document`] (id `{title}#{p}`, `p` the
//! 0-based paragraph number within the article) and every question as a
//! [`QaExample`] pointing at it. Each answer is checked against its context:
//! `answer_start` is a *character* (Unicode code point) offset, as Python's `str`
//! indexing uses, and the context must contain the answer text there.

use crate::load::read_to_string;
use crate::{Document, Error, QaExample, Result};
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::path::Path;

/// A SQuAD file as typed records.
#[derive(Debug, Clone, PartialEq)]
pub struct SquadSet {
    /// The file's `version` field (`"1.1"`, `"v2.0"`, …); empty when the file has none.
    pub version: String,
    /// Every paragraph, in file order: id `{title}#{p}`, title = article title,
    /// text = the paragraph's `context`.
    pub contexts: Vec<Document>,
    /// Every question, in file order. `context_id` is the paragraph's id, `title`
    /// the article title, `answers` the distinct answer texts in order of first
    /// appearance (empty for SQuAD 2.0 `is_impossible` questions).
    pub examples: Vec<QaExample>,
}

/// Load a SQuAD v1.1 or v2.0 JSON file.
///
/// # Errors
///
/// * [`Error::Io`] when the file cannot be read;
/// * [`Error::Malformed`] for a JSON syntax error, at its line;
/// * [`Error::MalformedRecord`] for any problem with a question, as `record N`
///   with `N` the question's 1-based ordinal in the file (SQuAD files are often
///   one long line, so there is no useful line) and a message naming its id,
///   article and paragraph: a missing or mistyped `id`, `question`,
///   `answers`, `text` or `answer_start`; an `answer_start` whose context
///   substring differs from the answer text; an answerable question without
///   answers, or an `is_impossible` one with answers; a repeated id;
/// * [`Error::BadInput`] for problems above the question level (no `data` array,
///   an article without `title` or `paragraphs`, a paragraph without `context` or
///   `qas`, two articles with the same title), naming the article and paragraph.
pub fn load(path: &Path) -> Result<SquadSet> {
    let raw = read_to_string(path)?;
    let root: Value =
        serde_json::from_str(&raw).map_err(|e| Error::malformed(path, e.line(), e.to_string()))?;
    let Value::Object(root) = root else {
        return Err(Error::bad_input(
            path,
            "expected a JSON object with `version` and `data` at the top level",
        ));
    };
    let version = match root.get("version") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(Error::bad_input(
                path,
                format!("`version` is {}, expected a string", kind(other)),
            ))
        }
    };
    let data = match root.get("data") {
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(Error::bad_input(
                path,
                format!("`data` is {}, expected an array", kind(other)),
            ))
        }
        None => return Err(Error::bad_input(path, "missing the `data` array")),
    };

    let mut set = SquadSet {
        version,
        contexts: Vec::new(),
        examples: Vec::new(),
    };
    let mut titles = HashSet::new();
    let mut ids = HashSet::new();
    let mut ordinal = 0usize;

    for (a, article) in data.iter().enumerate() {
        let art = || format!("article {}", a + 1);
        let Value::Object(article) = article else {
            return Err(Error::bad_input(
                path,
                format!("{} is {}, expected an object", art(), kind(article)),
            ));
        };
        let title = field_str(article, "title")
            .map_err(|m| Error::bad_input(path, format!("{}: {m}", art())))?;
        let art = || format!("article {} (`{title}`)", a + 1);
        if !titles.insert(title) {
            return Err(Error::bad_input(
                path,
                format!("{}: an earlier article has the same title", art()),
            ));
        }
        let paragraphs = field_array(article, "paragraphs")
            .map_err(|m| Error::bad_input(path, format!("{}: {m}", art())))?;

        for (p, para) in paragraphs.iter().enumerate() {
            let par = || format!("{}, paragraph {p}", art());
            let Value::Object(para) = para else {
                return Err(Error::bad_input(
                    path,
                    format!("{} is {}, expected an object", par(), kind(para)),
                ));
            };
            let context = field_str(para, "context")
                .map_err(|m| Error::bad_input(path, format!("{}: {m}", par())))?;
            let qas = field_array(para, "qas")
                .map_err(|m| Error::bad_input(path, format!("{}: {m}", par())))?;
            let context_id = format!("{title}#{p}");
            // Byte offset of every character, plus the end: maps SQuAD's character
            // offsets to byte offsets.
            let char_starts: Vec<usize> = context
                .char_indices()
                .map(|(b, _)| b)
                .chain(std::iter::once(context.len()))
                .collect();

            for q in qas {
                ordinal += 1;
                let bad = |msg: String| Error::record(path, "record", ordinal, msg);
                let Value::Object(q) = q else {
                    return Err(bad(format!(
                        "question {ordinal} in {} is {}, expected an object",
                        par(),
                        kind(q)
                    )));
                };
                let id = field_str(q, "id")
                    .map_err(|m| bad(format!("question {ordinal} in {}: {m}", par())))?;
                let qn = || format!("question `{id}` ({})", par());
                if !ids.insert(id) {
                    return Err(bad(format!(
                        "{}: an earlier question has the same id",
                        qn()
                    )));
                }
                let question =
                    field_str(q, "question").map_err(|m| bad(format!("{}: {m}", qn())))?;
                let impossible = match q.get("is_impossible") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(b)) => *b,
                    Some(other) => {
                        return Err(bad(format!(
                            "{}: `is_impossible` is {}, expected a boolean",
                            qn(),
                            kind(other)
                        )))
                    }
                };
                let answers =
                    field_array(q, "answers").map_err(|m| bad(format!("{}: {m}", qn())))?;
                if impossible && !answers.is_empty() {
                    return Err(bad(format!(
                        "{}: marked `is_impossible` but has {} answers",
                        qn(),
                        answers.len()
                    )));
                }
                if !impossible && answers.is_empty() {
                    return Err(bad(format!(
                        "{}: no answers and not marked `is_impossible`",
                        qn()
                    )));
                }

                let mut texts: Vec<String> = Vec::new();
                for (k, ans) in answers.iter().enumerate() {
                    let an = || format!("{}, answer {}", qn(), k + 1);
                    let Value::Object(ans) = ans else {
                        return Err(bad(format!(
                            "{} is {}, expected an object",
                            an(),
                            kind(ans)
                        )));
                    };
                    let text = field_str(ans, "text").map_err(|m| bad(format!("{}: {m}", an())))?;
                    let start = match ans.get("answer_start") {
                        Some(Value::Number(n)) => n.as_u64(),
                        _ => None,
                    }
                    .ok_or_else(|| {
                        bad(format!(
                            "{}: `answer_start` missing or not a non-negative integer",
                            an()
                        ))
                    })?;
                    let matches = usize::try_from(start)
                        .ok()
                        .and_then(|s| char_starts.get(s))
                        .is_some_and(|&b| context[b..].starts_with(text));
                    if !matches {
                        let found: String = usize::try_from(start)
                            .ok()
                            .and_then(|s| char_starts.get(s))
                            .map(|&b| context[b..].chars().take(text.chars().count()).collect())
                            .unwrap_or_default();
                        return Err(bad(format!(
                            "{}: the context at character {start} reads {found:?}, not the answer {text:?} \
                             (context has {} characters)",
                            an(),
                            char_starts.len() - 1
                        )));
                    }
                    if !texts.iter().any(|t| t == text) {
                        texts.push(text.to_string());
                    }
                }

                set.examples.push(QaExample {
                    id: id.to_string(),
                    question: question.to_string(),
                    answers: texts,
                    context_id: Some(context_id.clone()),
                    title: Some(title.to_string()),
                });
            }
            set.contexts.push(Document::new(context_id, title, context));
        }
    }
    Ok(set)
}

/// A required string field, or a message saying what is wrong with it.
fn field_str<'a>(obj: &'a Map<String, Value>, name: &str) -> std::result::Result<&'a str, String> {
    match obj.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!("`{name}` is {}, expected a string", kind(other))),
        None => Err(format!("missing `{name}`")),
    }
}

/// A required array field, or a message saying what is wrong with it.
fn field_array<'a>(
    obj: &'a Map<String, Value>,
    name: &str,
) -> std::result::Result<&'a [Value], String> {
    match obj.get(name) {
        Some(Value::Array(a)) => Ok(a),
        Some(other) => Err(format!("`{name}` is {}, expected an array", kind(other))),
        None => Err(format!("missing `{name}`")),
    }
}

/// A short name for a JSON value's type, for error messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(v: &Value) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(v.to_string().as_bytes()).unwrap();
        f
    }

    #[test]
    fn answer_start_counts_characters_not_bytes() {
        // "Café " is 5 characters but 6 bytes.
        let v = serde_json::json!({"version": "1.1", "data": [{"title": "T", "paragraphs": [{
            "context": "Café au lait", "qas": [{"id": "a", "question": "q?",
            "answers": [{"text": "au", "answer_start": 5}, {"text": "au", "answer_start": 5}]}]}]}]});
        let set = load(write(&v).path()).unwrap();
        assert_eq!(set.examples[0].answers, ["au"]);
        assert_eq!(set.contexts[0].id, "T#0");

        let v = serde_json::json!({"data": [{"title": "T", "paragraphs": [{
            "context": "Café au lait", "qas": [{"id": "a", "question": "q?",
            "answers": [{"text": "au", "answer_start": 6}]}]}]}]});
        let err = load(write(&v).path()).unwrap_err().to_string();
        assert!(err.contains(": record 1: ") && err.contains("`a`"), "{err}");
    }
}
