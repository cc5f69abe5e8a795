//! Plain interchange types shared by every stage (BEIR / ranx style).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A source document: an article, a web page, a passage of a BEIR corpus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// Stable id, unique within its corpus.
    pub id: String,
    /// Title (may be empty).
    pub title: String,
    /// Plain text.
    pub text: String,
    /// Free-form metadata (topic label, source URL, …).
    #[serde(default)]
    pub meta: BTreeMap<String, String>,
}

impl Document {
    /// A document with no metadata.
    pub fn new(id: impl Into<String>, title: impl Into<String>, text: impl Into<String>) -> Self {
        Document {
            id: id.into(),
            title: title.into(),
            text: text.into(),
            meta: BTreeMap::new(),
        }
    }

    /// Add one metadata entry (builder style).
    pub fn with_meta(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.meta.insert(key.into(), value.into());
        self
    }
}

/// A retrievable unit cut from a [`Document`] by a chunker.
///
/// `start..end` are byte offsets into the *source document's* `text`, so
/// `&doc.text[p.start..p.end]` is the passage before any normalisation; `text`
/// holds the (possibly normalised, e.g. lowercased) text that gets indexed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Passage {
    /// `"{doc_id}#{index}"`, unique within a chunk set.
    pub id: String,
    /// Id of the source document.
    pub doc_id: String,
    /// Title of the source document.
    pub title: String,
    /// Text to index.
    pub text: String,
    /// Byte offset of the first byte in the source text.
    pub start: usize,
    /// Byte offset one past the last byte in the source text.
    pub end: usize,
}

impl Passage {
    /// A whole document as one passage, keeping the document's id (corpora whose
    /// documents are already passages, such as RAG Mini Wikipedia's).
    pub fn whole(d: &Document) -> Self {
        Passage {
            id: d.id.clone(),
            doc_id: d.id.clone(),
            title: d.title.clone(),
            text: d.text.clone(),
            start: 0,
            end: d.text.len(),
        }
    }
}

/// A query (a question, or a BEIR query).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Query {
    /// Stable id.
    pub id: String,
    /// Query text.
    pub text: String,
}

/// A question with its gold answers, and the context it was asked about if any.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QaExample {
    /// Stable id.
    pub id: String,
    /// The question.
    pub question: String,
    /// Gold answers; empty for an unanswerable (SQuAD 2.0 `is_impossible`) question.
    pub answers: Vec<String>,
    /// Id of the document or paragraph the question was written about, if known.
    pub context_id: Option<String>,
    /// Title of that document, if known.
    pub title: Option<String>,
}

impl QaExample {
    /// True when the question has no gold answer.
    pub fn is_unanswerable(&self) -> bool {
        self.answers.is_empty()
    }

    /// The question as a retrieval query with the same id.
    pub fn to_query(&self) -> Query {
        Query {
            id: self.id.clone(),
            text: self.question.clone(),
        }
    }
}

/// Graded relevance judgements: query id → (doc id → grade).
pub type Qrels = BTreeMap<String, BTreeMap<String, i32>>;

/// One retrieved item: a passage (or document) id and its score. Higher is better.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// Passage or document id.
    pub id: String,
    /// Retrieval score (higher = more relevant).
    pub score: f32,
}

impl Hit {
    /// Construct a hit.
    pub fn new(id: impl Into<String>, score: f32) -> Self {
        Hit {
            id: id.into(),
            score,
        }
    }
}

/// A run: query id → hits ranked best first (the TREC run / ranx `Run` shape).
pub type Run = BTreeMap<String, Vec<Hit>>;
