//! Report 000, Figure 1: words per paragraph before and after the length filter.

use super::{bin_counts, Bins, Histogram, Series};
use crate::chunk::{paragraph_lengths, FilterStats, ParagraphChunker};
use crate::text::word_count;
use crate::{Document, Result};

/// Paragraph lengths of one corpus, before and after a [`ParagraphChunker`].
#[derive(Debug, Clone)]
pub struct ParagraphLengths {
    /// Corpus name shown in titles.
    pub corpus: String,
    /// Number of documents (articles).
    pub articles: usize,
    /// What the filter kept and dropped.
    pub stats: FilterStats,
    /// Word count of every paragraph before the filter.
    pub all: Vec<usize>,
    /// Word count of every kept paragraph.
    pub kept: Vec<usize>,
    /// The filter's inclusive bounds.
    pub bounds: (usize, usize),
}

impl ParagraphLengths {
    /// Measure a corpus.
    pub fn compute(corpus: &str, docs: &[Document], chunker: &ParagraphChunker) -> Result<Self> {
        let (kept, stats) = chunker.chunk_with_stats(docs)?;
        Ok(ParagraphLengths {
            corpus: corpus.to_string(),
            articles: docs.len(),
            stats,
            all: paragraph_lengths(docs),
            kept: kept.iter().map(|p| word_count(&p.text)).collect(),
            bounds: (chunker.params().min_words, chunker.params().max_words),
        })
    }

    /// Share of paragraphs kept, in percent.
    pub fn kept_percent(&self) -> f64 {
        100.0 * self.stats.kept as f64 / self.stats.total.max(1) as f64
    }

    /// Mean words per kept paragraph.
    pub fn mean_kept(&self) -> f64 {
        self.kept.iter().sum::<usize>() as f64 / self.kept.len().max(1) as f64
    }

    /// Counts per bin: `(all, kept)`.
    pub fn counts(&self, bins: &Bins) -> (Vec<usize>, Vec<usize>) {
        let (a, _) = bin_counts(self.all.iter().map(|&n| n as f64), bins);
        let (k, _) = bin_counts(self.kept.iter().map(|&n| n as f64), bins);
        (a, k)
    }

    /// The histogram panel: grey before, blue after, dashed lines at the bounds.
    pub fn histogram(&self, bins: Bins) -> Histogram {
        let (all, kept) = self.counts(&bins);
        let (lo, hi) = self.bounds;
        Histogram {
            title: format!(
                "{}: {} articles, {} → {} paragraphs ({:.1}% kept)",
                self.corpus,
                self.articles,
                self.stats.total,
                self.stats.kept,
                self.kept_percent()
            ),
            x_label: "words per paragraph".into(),
            y_label: "paragraphs".into(),
            bins,
            series: vec![
                Series {
                    label: format!("before filter (n = {})", self.stats.total),
                    counts: all,
                    color: (150, 150, 150),
                },
                Series {
                    label: format!("after filter, {lo}–{hi} words (n = {})", self.stats.kept),
                    counts: kept,
                    color: (31, 119, 180),
                },
            ],
            markers: vec![
                (lo as f64, format!("filter bounds ({lo} and {hi} words)")),
                ((hi + 1) as f64, String::new()),
            ],
            size: (1000, 380),
        }
    }
}
