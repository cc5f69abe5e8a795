//! Chunkers: cut [`Document`]s into [`Passage`]s that keep their document id,
//! title and byte offsets into the source text.
//!
//! | chunker | report | file |
//! |---|---|---|
//! | [`ParagraphChunker`]: split on newlines, keep paragraphs within a word-count range | 000 | `paragraph.rs` |
//! | [`SlidingWindowChunker`]: fixed windows with overlap, in words or tokenizer tokens | 001 | `sliding.rs` |
//! | [`WholeDocument`]: one passage per document, id = document id (BEIR corpora are already passages) | – | `mod.rs` |
//!
//! Parameters are checked when the chunker is built (`*Params::check`), before any work.

use crate::{Document, Passage, Result};

mod paragraph;
mod sliding;

pub use paragraph::{paragraph_lengths, FilterStats, ParagraphChunker, ParagraphParams};
pub use sliding::{SlidingWindowChunker, SlidingWindowParams, WindowUnit};

/// Something that cuts a document into passages.
pub trait Chunker {
    /// Passages of one document, in source order.
    fn chunk(&self, doc: &Document) -> Result<Vec<Passage>>;

    /// Passages of every document, in order. Fails on an empty corpus.
    fn chunk_all(&self, docs: &[Document]) -> Result<Vec<Passage>> {
        if docs.is_empty() {
            return Err(crate::Error::Empty("no documents to chunk".into()));
        }
        let mut out = Vec::new();
        for d in docs {
            out.extend(self.chunk(d)?);
        }
        Ok(out)
    }
}

/// Build a passage for `doc.text[start..end]`, with `text` as the indexed text.
pub(crate) fn passage(
    doc: &Document,
    index: usize,
    start: usize,
    end: usize,
    text: String,
) -> Passage {
    Passage {
        id: format!("{}#{}", doc.id, index),
        doc_id: doc.id.clone(),
        title: doc.title.clone(),
        text,
        start,
        end,
    }
}

/// One passage per document, with the document's own id (no `#n` suffix), so
/// qrels written against document ids (BEIR, MS MARCO) apply unchanged.
#[derive(Debug, Clone, Copy, Default)]
pub struct WholeDocument;

impl Chunker for WholeDocument {
    fn chunk(&self, doc: &Document) -> Result<Vec<Passage>> {
        Ok(vec![Passage {
            id: doc.id.clone(),
            doc_id: doc.id.clone(),
            title: doc.title.clone(),
            text: doc.text.clone(),
            start: 0,
            end: doc.text.len(),
        }])
    }
}
