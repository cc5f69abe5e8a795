//! tantivy as a BM25 peer of `bench_bm25` (compiled with `--features tantivy`).
//!
//! Same tokens: every passage is analysed by the workbench's analyzer and handed to tantivy
//! as its tokens joined by single spaces, indexed with tantivy's whitespace tokenizer; every
//! query is analysed the same way inside the timed loop. Both sides therefore index and
//! search exactly the same terms and pay for the same analysis.
//!
//! Same scoring function where tantivy's API allows: tantivy's BM25 has fixed constants
//! (k1 = 1.2, b = 0.75) and Lucene's idf, ln(1 + (N − n + 0.5) / (n + 0.5)); the workbench
//! side of this comparison runs at those constants. tantivy keeps the (k1 + 1) factor of the
//! original BM25 numerator, which Lucene (and the workbench's Lucene variant) drops: the
//! same ranking, every score larger by that constant, which the comparison multiplies ours
//! by before comparing scores. tantivy stores each passage's length
//! as a one-byte code (exact for short passages, bucketed for long ones), so scores agree
//! closely, not bit for bit: the comparison reports the top-10 overlap and the largest
//! relative difference of the top-1 scores.
//!
//! Search: a RAM index merged into one segment, one search thread, a `BooleanQuery` of
//! `SHOULD` term queries (one clause per query token, so a repeated token counts twice, as
//! in Lucene and in the workbench's BM25), `TopDocs` top 10 by score: tantivy's block-max
//! WAND path.

use anyhow::{ensure, Context, Result};
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{TextAnalyzer, WhitespaceTokenizer};
use tantivy::{doc, Index, IndexReader, IndexWriter, Searcher, Term};

/// tantivy's BM25 constants (`tantivy::query::Bm25Weight`).
pub const K1: f32 = 1.2;
/// See [`K1`].
pub const B: f32 = 0.75;

/// A tantivy RAM index of pre-analysed passages (document `i` is passage `i`).
pub struct TantivyBm25 {
    searcher: Searcher,
    body: Field,
    _reader: IndexReader,
}

impl TantivyBm25 {
    /// Index `docs` (each a passage's tokens joined by spaces), in order, into one segment.
    pub fn build(docs: &[String]) -> Result<Self> {
        let mut sb = Schema::builder();
        let opts = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer("ws")
                .set_index_option(IndexRecordOption::WithFreqs),
        );
        let body = sb.add_text_field("body", opts);
        let index = Index::create_in_ram(sb.build());
        index
            .tokenizers()
            .register("ws", TextAnalyzer::from(WhitespaceTokenizer::default()));
        let mut w: IndexWriter = index
            .writer_with_num_threads(1, 1_000_000_000)
            .context("tantivy index writer")?;
        for d in docs {
            w.add_document(doc!(body => d.as_str()))?;
        }
        w.commit()?;
        let segments = index.searchable_segment_ids()?;
        if segments.len() > 1 {
            w.merge(&segments).wait()?;
        }
        w.wait_merging_threads()?;
        let reader = index.reader()?;
        reader.reload()?;
        let searcher = reader.searcher();
        ensure!(
            searcher.segment_readers().len() == 1,
            "tantivy index has {} segments after the merge",
            searcher.segment_readers().len()
        );
        ensure!(
            searcher.num_docs() as usize == docs.len(),
            "tantivy indexed {} of {} passages",
            searcher.num_docs(),
            docs.len()
        );
        Ok(TantivyBm25 {
            searcher,
            body,
            _reader: reader,
        })
    }

    /// Bytes of the index's one segment, by tantivy's own account (`Searcher::space_usage`):
    /// the size the same index has in a directory on disk.
    #[allow(dead_code)] // used by bench_bm25_scale, not by bench_bm25
    pub fn index_bytes(&self) -> Result<u64> {
        Ok(self.searcher.space_usage()?.total().get_bytes())
    }

    /// The top `k` passages (index, score) for the query's tokens, best first.
    pub fn search(&self, tokens: &[String], k: usize) -> Result<Vec<(u32, f32)>> {
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let clauses: Vec<(Occur, Box<dyn Query>)> = tokens
            .iter()
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(self.body, t),
                    IndexRecordOption::WithFreqs,
                ));
                (Occur::Should, q)
            })
            .collect();
        let q = BooleanQuery::new(clauses);
        let top = self
            .searcher
            .search(&q, &TopDocs::with_limit(k).order_by_score())?;
        Ok(top.into_iter().map(|(s, a)| (a.doc_id, s)).collect())
    }
}
