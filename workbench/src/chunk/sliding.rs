//! Report 001's sliding-window chunker: windows of `window` units that overlap
//! by `overlap` units, counted in words or in tokenizer tokens.

use super::{passage, Chunker};
use crate::text::word_spans;
use crate::{Document, Error, Passage, Result};
use serde::{Deserialize, Serialize};

/// What a window counts.
#[derive(Clone, Default)]
pub enum WindowUnit {
    /// Whitespace-separated words.
    #[default]
    Words,
    /// Tokens of a Hugging Face tokenizer (special tokens excluded).
    #[cfg(feature = "tokenizers")]
    Tokens(std::sync::Arc<tokenizers::Tokenizer>),
}

impl std::fmt::Debug for WindowUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WindowUnit::Words => write!(f, "Words"),
            #[cfg(feature = "tokenizers")]
            WindowUnit::Tokens(_) => write!(f, "Tokens"),
        }
    }
}

/// Parameters of [`SlidingWindowChunker`]. Report 001 used 300 / 100.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SlidingWindowParams {
    /// Units per window. Default 300.
    pub window: usize,
    /// Units shared by consecutive windows; must be smaller than `window`. Default 100.
    pub overlap: usize,
    /// Unit counted. Default words.
    #[serde(skip)]
    pub unit: WindowUnit,
}

impl Default for SlidingWindowParams {
    fn default() -> Self {
        SlidingWindowParams {
            window: 300,
            overlap: 100,
            unit: WindowUnit::Words,
        }
    }
}

impl SlidingWindowParams {
    /// Set the window size in units.
    pub fn window(mut self, n: usize) -> Self {
        self.window = n;
        self
    }
    /// Set the overlap in units.
    pub fn overlap(mut self, n: usize) -> Self {
        self.overlap = n;
        self
    }
    /// Count tokens of this tokenizer instead of words. Truncation and padding
    /// configured in the tokenizer are switched off for chunking.
    #[cfg(feature = "tokenizers")]
    pub fn tokens(mut self, tokenizer: tokenizers::Tokenizer) -> Result<Self> {
        let mut t = tokenizer;
        t.with_truncation(None)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        t.with_padding(None);
        self.unit = WindowUnit::Tokens(std::sync::Arc::new(t));
        Ok(self)
    }
    /// Validate and build the chunker.
    pub fn check(self) -> Result<SlidingWindowChunker> {
        if self.window == 0 {
            return Err(Error::param("window", "must be at least 1"));
        }
        if self.overlap >= self.window {
            return Err(Error::param(
                "overlap",
                format!(
                    "{} must be smaller than window = {}",
                    self.overlap, self.window
                ),
            ));
        }
        Ok(SlidingWindowChunker { params: self })
    }
}

/// Fixed-size overlapping windows. Window `i` starts at unit `i·(window − overlap)`;
/// the last window ends at the last unit and may be shorter. Consecutive windows
/// share exactly `overlap` units.
#[derive(Debug, Clone)]
pub struct SlidingWindowChunker {
    params: SlidingWindowParams,
}

impl SlidingWindowChunker {
    /// The validated parameters.
    pub fn params(&self) -> &SlidingWindowParams {
        &self.params
    }

    /// Byte spans of the units of `text`.
    pub fn unit_spans(&self, text: &str) -> Result<Vec<(usize, usize)>> {
        match &self.params.unit {
            WindowUnit::Words => Ok(word_spans(text)),
            #[cfg(feature = "tokenizers")]
            WindowUnit::Tokens(t) => {
                let enc = t
                    .encode(text, false)
                    .map_err(|e| Error::Tokenizer(e.to_string()))?;
                Ok(enc
                    .get_offsets()
                    .iter()
                    .copied()
                    .filter(|(a, b)| b > a)
                    .collect())
            }
        }
    }

    /// Unit index ranges `[a, b)` of the windows over `n` units.
    pub fn window_ranges(&self, n: usize) -> Vec<(usize, usize)> {
        let step = self.params.window - self.params.overlap;
        let mut out = Vec::new();
        let mut start = 0;
        while start < n {
            let end = (start + self.params.window).min(n);
            out.push((start, end));
            if end == n {
                break;
            }
            start += step;
        }
        out
    }
}

impl Chunker for SlidingWindowChunker {
    fn chunk(&self, doc: &Document) -> Result<Vec<Passage>> {
        let spans = self.unit_spans(&doc.text)?;
        Ok(self
            .window_ranges(spans.len())
            .into_iter()
            .enumerate()
            .map(|(i, (a, b))| {
                let (s, e) = (spans[a].0, spans[b - 1].1);
                passage(doc, i, s, e, doc.text[s..e].to_string())
            })
            .collect())
    }
}
