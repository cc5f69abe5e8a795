//! Wikipedia lead sections from the OVOS offline wiki skill (`summaries_en-us.json`).
//!
//! The file is one JSON object that maps a title to a record:
//!
//! ```json
//! {"Ada Lovelace": {"title": "Ada Lovelace", "extract": "Augusta Ada King, …",
//!                   "description": "English mathematician", "topic": "People"}}
//! ```
//!
//! [`load`] returns one [`Document`] per record **in file order** (the object is
//! read entry by entry, so no map re-sorts it). The object key is the document
//! id, the record's `title` the title, `extract` the text, and `topic` and
//! `description` go into [`Document::meta`].

use crate::load::read_to_string;
use crate::{Document, Error, Result};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use std::collections::HashSet;
use std::fmt;
use std::path::Path;

/// The fields every record must carry, all strings.
const FIELDS: [&str; 4] = ["title", "extract", "description", "topic"];

/// The top-level object's entries, in the order they appear in the file.
struct Entries(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct EntriesVisitor;

        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object mapping titles to lead records")
            }

            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Entries, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some((key, value)) = map.next_entry::<String, Value>()? {
                    entries.push((key, value));
                }
                Ok(Entries(entries))
            }
        }

        deserializer.deserialize_map(EntriesVisitor)
    }
}

/// Load the lead sections of an OVOS `summaries_*.json` file, in file order.
///
/// Each record becomes a [`Document`] with id = the object key (the title),
/// `title` = the record's `title`, `text` = `extract`, and meta entries `topic`
/// and `description`.
///
/// # Errors
///
/// * [`Error::Io`] when the file cannot be read;
/// * [`Error::Malformed`] for a JSON syntax error, at its line;
/// * [`Error::MalformedRecord`] (`record N`, the 1-based position of the entry in
///   the top-level object, with the title in the message) for a record that is
///   not an object, lacks one of `title`, `extract`, `description`, `topic`, has
///   a non-string value there, or repeats an earlier key;
/// * [`Error::BadInput`] when the top level is not an object or the file or object is empty.
pub fn load(path: &Path) -> Result<Vec<Document>> {
    let raw = read_to_string(path)?;
    if raw.trim().is_empty() {
        return Err(Error::bad_input(path, "the file is empty"));
    }
    let entries = match serde_json::from_str::<Entries>(&raw) {
        Ok(Entries(entries)) => entries,
        Err(e) if e.is_data() && !raw.trim_start().starts_with('{') => {
            return Err(Error::bad_input(
                path,
                format!("expected a JSON object at the top level: {e}"),
            ));
        }
        Err(e) => return Err(Error::malformed(path, e.line(), e.to_string())),
    };
    if entries.is_empty() {
        return Err(Error::bad_input(
            path,
            "the top-level object has no records",
        ));
    }

    let mut seen = HashSet::with_capacity(entries.len());
    let mut docs = Vec::with_capacity(entries.len());
    for (i, (key, value)) in entries.into_iter().enumerate() {
        let record = i + 1;
        let bad = |msg: String| Error::record(path, "record", record, format!("`{key}`: {msg}"));
        if !seen.insert(key.clone()) {
            return Err(bad(
                "duplicate title (an earlier record has the same key)".into()
            ));
        }
        let Value::Object(obj) = &value else {
            return Err(bad(format!("expected an object, found {}", kind(&value))));
        };
        let mut fields = [""; 4];
        for (slot, name) in fields.iter_mut().zip(FIELDS) {
            *slot = match obj.get(name) {
                Some(Value::String(s)) => s.as_str(),
                Some(other) => {
                    return Err(bad(format!(
                        "field `{name}` is {}, expected a string",
                        kind(other)
                    )))
                }
                None => return Err(bad(format!("field `{name}` is missing"))),
            };
        }
        let [title, extract, description, topic] = fields;
        docs.push(
            Document::new(key.as_str(), title, extract)
                .with_meta("topic", topic)
                .with_meta("description", description),
        );
    }
    Ok(docs)
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

    fn write(content: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(content.as_bytes()).unwrap();
        f
    }

    #[test]
    fn keeps_file_order() {
        let f = write(
            r#"{"Zebra": {"title": "Zebra", "extract": "Z.", "description": "d", "topic": "Animals"},
                "Apple": {"title": "Apple", "extract": "A.", "description": "", "topic": "Food"}}"#,
        );
        let docs = load(f.path()).unwrap();
        let ids: Vec<_> = docs.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["Zebra", "Apple"]);
        assert_eq!(docs[1].meta["topic"], "Food");
        assert_eq!(docs[1].meta["description"], "");
    }

    #[test]
    fn rejects_non_object_and_duplicates() {
        let f = write("[1, 2]");
        assert!(matches!(load(f.path()), Err(Error::BadInput { .. })));
        let rec = r#"{"title": "A", "extract": "x", "description": "d", "topic": "t"}"#;
        let f = write(&format!(r#"{{"A": {rec}, "A": {rec}}}"#));
        match load(f.path()) {
            Err(Error::MalformedRecord {
                unit,
                number,
                message,
                ..
            }) => {
                assert_eq!((unit, number), ("record", 2));
                assert!(message.contains("duplicate"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}
