//! A data-driven retrieval conformance suite: a tiny corpus, queries, and the ids
//! every retriever is expected to rank first, read from a TOML file (the project's
//! is `tests/data/retrieval_conformance.toml`, run by `tests/conformance.rs`).
//!
//! ```toml
//! [[passages]]
//! id = "p1"
//! title = "Eiffel Tower"     # optional, default ""
//! text = "The Eiffel Tower is a wrought-iron lattice tower in Paris."
//!
//! [[queries]]
//! id = "q1"
//! text = "Where is the Eiffel Tower?"
//! expected_top = ["p1"]      # the first hits, in order
//! note = "why the winner is unambiguous"   # optional
//! ```

use crate::{Error, Passage, Query, Result};
use serde::Deserialize;
use std::collections::HashSet;
use std::path::Path;

/// One passage of the suite.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuitePassage {
    /// Passage id (unique in the suite).
    pub id: String,
    /// Title (default empty).
    #[serde(default)]
    pub title: String,
    /// Text.
    pub text: String,
}

/// One query of the suite with its expected ranking prefix.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteQuery {
    /// Query id.
    pub id: String,
    /// Query text.
    pub text: String,
    /// Ids expected at ranks 1, 2, … (a prefix of the ranking; at least one).
    pub expected_top: Vec<String>,
    /// Why the expectation holds (free text).
    #[serde(default)]
    pub note: Option<String>,
}

/// A whole conformance suite.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    /// The corpus.
    pub passages: Vec<SuitePassage>,
    /// The queries.
    pub queries: Vec<SuiteQuery>,
}

impl Suite {
    /// Read and check a suite file: at least one passage and one query, unique
    /// passage and query ids, and every expected id present in the corpus.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let suite: Suite =
            toml::from_str(&text).map_err(|e| Error::bad_input(path, e.to_string()))?;
        if suite.passages.is_empty() || suite.queries.is_empty() {
            return Err(Error::bad_input(
                path,
                "needs at least one passage and one query",
            ));
        }
        let mut ids = HashSet::new();
        for p in &suite.passages {
            if !ids.insert(p.id.as_str()) {
                return Err(Error::bad_input(
                    path,
                    format!("duplicate passage id `{}`", p.id),
                ));
            }
        }
        let mut qids = HashSet::new();
        for q in &suite.queries {
            if !qids.insert(q.id.as_str()) {
                return Err(Error::bad_input(
                    path,
                    format!("duplicate query id `{}`", q.id),
                ));
            }
            if q.expected_top.is_empty() {
                return Err(Error::bad_input(
                    path,
                    format!("query `{}`: expected_top is empty", q.id),
                ));
            }
            if let Some(x) = q.expected_top.iter().find(|x| !ids.contains(x.as_str())) {
                return Err(Error::bad_input(
                    path,
                    format!("query `{}` expects unknown passage `{x}`", q.id),
                ));
            }
        }
        Ok(suite)
    }

    /// The corpus as [`Passage`]s (`doc_id` = `id`, offsets spanning the text).
    pub fn corpus(&self) -> Vec<Passage> {
        self.passages
            .iter()
            .map(|p| Passage {
                id: p.id.clone(),
                doc_id: p.id.clone(),
                title: p.title.clone(),
                text: p.text.clone(),
                start: 0,
                end: p.text.len(),
            })
            .collect()
    }

    /// The queries as [`Query`]s.
    pub fn queries(&self) -> Vec<Query> {
        self.queries
            .iter()
            .map(|q| Query {
                id: q.id.clone(),
                text: q.text.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_and_validate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("suite.toml");
        std::fs::write(
            &path,
            "[[passages]]\nid = \"a\"\ntext = \"x\"\n\n[[queries]]\nid = \"q\"\ntext = \"x\"\nexpected_top = [\"a\"]\n",
        )
        .unwrap();
        let s = Suite::load(&path).unwrap();
        assert_eq!(s.corpus()[0].end, 1);
        assert_eq!(s.queries()[0].text, "x");

        std::fs::write(
            &path,
            "[[passages]]\nid = \"a\"\ntext = \"x\"\n\n[[queries]]\nid = \"q\"\ntext = \"x\"\nexpected_top = [\"b\"]\n",
        )
        .unwrap();
        let e = Suite::load(&path).unwrap_err().to_string();
        assert!(
            e.contains("suite.toml") && e.contains("unknown passage `b`"),
            "{e}"
        );
    }
}
