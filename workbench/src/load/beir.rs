//! BEIR-layout retrieval data sets.
//!
//! ```text
//! <dir>/corpus.jsonl      {"_id": "4380635", "title": "", "text": "…", "metadata": {}}
//! <dir>/queries.jsonl     {"_id": "19335", "text": "anthropological definition of environment"}
//! <dir>/qrels/test.tsv    query-id<TAB>corpus-id<TAB>score   (header line optional)
//! ```
//!
//! [`load`] reads the three files of one split and cross-checks them: every
//! judged query must be in `queries.jsonl` and every judged document in
//! `corpus.jsonl`. Queries without judgements are kept (they are common: BEIR's
//! `queries.jsonl` is shared by all splits).

use super::read_jsonl_numbered;
use crate::{Document, Error, Qrels, Query, Result};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::Path;

/// One BEIR split: the corpus, the queries and the judgements.
#[derive(Debug, Clone, PartialEq)]
pub struct BeirSet {
    /// `corpus.jsonl` in file order. `metadata` values are flattened into
    /// [`Document::meta`] (see [`load`]).
    pub corpus: Vec<Document>,
    /// `queries.jsonl` in file order (all queries, judged or not).
    pub queries: Vec<Query>,
    /// `qrels/{split}.tsv`: query id → (corpus id → grade).
    pub qrels: Qrels,
}

impl BeirSet {
    /// The queries that have at least one judgement in [`BeirSet::qrels`].
    pub fn judged_queries(&self) -> Vec<&Query> {
        self.queries
            .iter()
            .filter(|q| self.qrels.contains_key(&q.id))
            .collect()
    }
}

#[derive(Deserialize)]
struct CorpusRecord {
    #[serde(rename = "_id")]
    id: Value,
    #[serde(default)]
    title: Option<String>,
    text: String,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
struct QueryRecord {
    #[serde(rename = "_id")]
    id: Value,
    text: String,
}

/// Load split `split` (e.g. `"test"`) of the BEIR data set in `dir`.
///
/// * `corpus.jsonl`: `_id` (a string, or an integer taken as its decimal
///   text), `text`, optional `title` (missing or null → empty) and optional
///   `metadata` object. Metadata strings go into `meta` as they are, numbers and
///   booleans as their JSON text, nested objects under dotted keys
///   (`source.url`), arrays as compact JSON; nulls are dropped.
/// * `queries.jsonl`: `_id` and `text` (other fields ignored).
/// * `qrels/{split}.tsv`: tab-separated `query-id`, `corpus-id`, `score`
///   (an integer). The first non-blank line is taken as a header when its third
///   field is not an integer; otherwise it is data.
///
/// # Errors
///
/// * [`Error::InvalidParam`] when `split` is empty or contains a path separator;
/// * [`Error::Io`] when a file is missing or unreadable;
/// * [`Error::Malformed`] naming the file and the 1-based line for a record that
///   does not parse, an `_id` that is not a string or integer or repeats an
///   earlier one, a qrels line without exactly three fields or with a
///   non-integer score, a query/document pair judged twice, and a qrels query id
///   or corpus id that is not in `queries.jsonl` / `corpus.jsonl`;
/// * [`Error::BadInput`] when a file has no records.
pub fn load(dir: &Path, split: &str) -> Result<BeirSet> {
    if split.is_empty() || split.contains(['/', '\\']) || split == ".." {
        return Err(Error::param(
            "split",
            format!("{split:?} is not a split name such as \"test\""),
        ));
    }
    let corpus_path = dir.join("corpus.jsonl");
    let queries_path = dir.join("queries.jsonl");
    let qrels_path = dir.join("qrels").join(format!("{split}.tsv"));

    let mut corpus = Vec::new();
    let mut doc_ids = HashSet::new();
    for (line, rec) in read_jsonl_numbered::<CorpusRecord>(&corpus_path)? {
        let id = id_text(&corpus_path, line, &rec.id)?;
        if !doc_ids.insert(id.clone()) {
            return Err(Error::malformed(
                &corpus_path,
                line,
                format!("duplicate `_id` {id:?}"),
            ));
        }
        let mut doc = Document::new(id, rec.title.unwrap_or_default(), rec.text);
        if let Some(meta) = rec.metadata {
            flatten_into(&mut doc.meta, "", meta);
        }
        corpus.push(doc);
    }
    if corpus.is_empty() {
        return Err(Error::bad_input(&corpus_path, "no documents"));
    }

    let mut queries = Vec::new();
    let mut query_ids = HashSet::new();
    for (line, rec) in read_jsonl_numbered::<QueryRecord>(&queries_path)? {
        let id = id_text(&queries_path, line, &rec.id)?;
        if !query_ids.insert(id.clone()) {
            return Err(Error::malformed(
                &queries_path,
                line,
                format!("duplicate `_id` {id:?}"),
            ));
        }
        queries.push(Query { id, text: rec.text });
    }
    if queries.is_empty() {
        return Err(Error::bad_input(&queries_path, "no queries"));
    }

    let qrels = read_qrels(&qrels_path, &query_ids, &doc_ids)?;
    Ok(BeirSet {
        corpus,
        queries,
        qrels,
    })
}

/// Parse a BEIR qrels TSV, checking ids against the queries and the corpus.
fn read_qrels(
    path: &Path,
    query_ids: &HashSet<String>,
    doc_ids: &HashSet<String>,
) -> Result<Qrels> {
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut qrels = Qrels::new();
    let mut first_line: HashMap<(String, String), usize> = HashMap::new();
    let mut first = true;
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let line_no = i + 1;
        let line = line.map_err(|e| Error::io(path, e))?;
        let line = line.trim_end_matches(['\r', '\n']);
        if line.trim().is_empty() {
            continue;
        }
        let bad = |msg: String| Error::malformed(path, line_no, msg);
        let fields: Vec<&str> = line.split('\t').map(str::trim).collect();
        if fields.len() != 3 {
            return Err(bad(format!(
                "expected 3 tab-separated fields (query-id, corpus-id, score), found {}",
                fields.len()
            )));
        }
        let is_first = std::mem::take(&mut first);
        let score = match fields[2].parse::<i32>() {
            Ok(s) => s,
            Err(_) if is_first => continue, // header line, e.g. `query-id corpus-id score`
            Err(e) => return Err(bad(format!("score {:?} is not an integer: {e}", fields[2]))),
        };
        let (qid, did) = (fields[0], fields[1]);
        if !query_ids.contains(qid) {
            return Err(bad(format!("query id {qid:?} is not in queries.jsonl")));
        }
        if !doc_ids.contains(did) {
            return Err(bad(format!("corpus id {did:?} is not in corpus.jsonl")));
        }
        if let Some(prev) = first_line.insert((qid.to_string(), did.to_string()), line_no) {
            return Err(bad(format!(
                "query {qid:?} / document {did:?} already judged on line {prev}"
            )));
        }
        qrels
            .entry(qid.to_string())
            .or_default()
            .insert(did.to_string(), score);
    }
    if qrels.is_empty() {
        return Err(Error::bad_input(path, "no judgements"));
    }
    Ok(qrels)
}

/// An `_id` as text: strings as they are, integers in decimal.
fn id_text(path: &Path, line: usize, v: &Value) -> Result<String> {
    match v {
        Value::String(s) if !s.is_empty() => Ok(s.clone()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(n.to_string()),
        other => Err(Error::malformed(
            path,
            line,
            format!("`_id` must be a non-empty string or an integer, found {other}"),
        )),
    }
}

/// Flatten a metadata object into string entries (see [`load`]).
fn flatten_into(meta: &mut BTreeMap<String, String>, prefix: &str, obj: Map<String, Value>) {
    for (k, v) in obj {
        let key = if prefix.is_empty() {
            k
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Null => {}
            Value::String(s) => {
                meta.insert(key, s);
            }
            Value::Object(inner) => flatten_into(meta, &key, inner),
            other => {
                meta.insert(key, other.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattens_metadata() {
        let mut meta = BTreeMap::new();
        let obj = serde_json::json!({"url": "u", "n": 3, "src": {"name": "x", "none": null}, "tags": ["a"]});
        let Value::Object(obj) = obj else {
            unreachable!()
        };
        flatten_into(&mut meta, "", obj);
        assert_eq!(meta["url"], "u");
        assert_eq!(meta["n"], "3");
        assert_eq!(meta["src.name"], "x");
        assert_eq!(meta["tags"], r#"["a"]"#);
        assert!(!meta.contains_key("src.none"));
    }
}
