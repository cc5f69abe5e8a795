//! Report 000's paragraph chunker: split articles on newlines, keep paragraphs
//! whose word count lies within bounds, optionally lowercase them.

use super::{passage, Chunker};
use crate::text::{paragraph_spans, word_count};
use crate::{Document, Error, Passage, Result};
use serde::{Deserialize, Serialize};

/// Parameters of [`ParagraphChunker`].
///
/// Report 000 removed paragraphs of ≤ 20 words and ≥ 200 words, i.e. it kept
/// 21..=199 words: the defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParagraphParams {
    /// Smallest word count kept (inclusive). Default 21.
    pub min_words: usize,
    /// Largest word count kept (inclusive). Default 199.
    pub max_words: usize,
    /// Lowercase the indexed text (report 000 did). Default `true`.
    pub lowercase: bool,
}

impl Default for ParagraphParams {
    fn default() -> Self {
        ParagraphParams {
            min_words: 21,
            max_words: 199,
            lowercase: true,
        }
    }
}

impl ParagraphParams {
    /// Set the smallest kept word count (inclusive).
    pub fn min_words(mut self, n: usize) -> Self {
        self.min_words = n;
        self
    }
    /// Set the largest kept word count (inclusive).
    pub fn max_words(mut self, n: usize) -> Self {
        self.max_words = n;
        self
    }
    /// Lowercase the indexed text or not.
    pub fn lowercase(mut self, yes: bool) -> Self {
        self.lowercase = yes;
        self
    }
    /// Validate and build the chunker.
    pub fn check(self) -> Result<ParagraphChunker> {
        if self.min_words == 0 {
            return Err(Error::param(
                "min_words",
                "must be at least 1 (empty paragraphs are never kept)",
            ));
        }
        if self.min_words > self.max_words {
            return Err(Error::param(
                "min_words",
                format!(
                    "{} is larger than max_words = {}",
                    self.min_words, self.max_words
                ),
            ));
        }
        Ok(ParagraphChunker { params: self })
    }
}

/// How many paragraphs the length filter kept and dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterStats {
    /// Non-empty paragraphs seen.
    pub total: usize,
    /// Paragraphs kept.
    pub kept: usize,
    /// Dropped for having fewer than `min_words`.
    pub too_short: usize,
    /// Dropped for having more than `max_words`.
    pub too_long: usize,
}

/// Splits on newlines and keeps paragraphs within the word-count bounds.
#[derive(Debug, Clone)]
pub struct ParagraphChunker {
    params: ParagraphParams,
}

impl ParagraphChunker {
    /// The validated parameters.
    pub fn params(&self) -> &ParagraphParams {
        &self.params
    }

    /// Chunk every document and count what the filter did.
    pub fn chunk_with_stats(&self, docs: &[Document]) -> Result<(Vec<Passage>, FilterStats)> {
        if docs.is_empty() {
            return Err(Error::Empty("no documents to chunk".into()));
        }
        let mut stats = FilterStats::default();
        let mut out = Vec::new();
        for d in docs {
            for (i, (a, b)) in paragraph_spans(&d.text).into_iter().enumerate() {
                let n = word_count(&d.text[a..b]);
                stats.total += 1;
                if n < self.params.min_words {
                    stats.too_short += 1;
                } else if n > self.params.max_words {
                    stats.too_long += 1;
                } else {
                    stats.kept += 1;
                    out.push(self.make(d, i, a, b));
                }
            }
        }
        Ok((out, stats))
    }

    fn make(&self, d: &Document, i: usize, a: usize, b: usize) -> Passage {
        let raw = &d.text[a..b];
        let text = if self.params.lowercase {
            raw.to_lowercase()
        } else {
            raw.to_string()
        };
        passage(d, i, a, b, text)
    }
}

impl Chunker for ParagraphChunker {
    fn chunk(&self, doc: &Document) -> Result<Vec<Passage>> {
        Ok(paragraph_spans(&doc.text)
            .into_iter()
            .enumerate()
            .filter(|(_, (a, b))| {
                let n = word_count(&doc.text[*a..*b]);
                n >= self.params.min_words && n <= self.params.max_words
            })
            .map(|(i, (a, b))| self.make(doc, i, a, b))
            .collect())
    }
}

/// Word count of every non-empty paragraph (newline split) of every document,
/// before any filter: the data of report 000's Figure 1.
pub fn paragraph_lengths(docs: &[Document]) -> Vec<usize> {
    docs.iter()
        .flat_map(|d| {
            paragraph_spans(&d.text)
                .into_iter()
                .map(move |(a, b)| word_count(&d.text[a..b]))
        })
        .collect()
}
