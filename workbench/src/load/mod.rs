//! Loaders: every corpus format the reports use, as typed records.
//!
//! Each loader validates its input and reports problems with the file and the
//! line (`path:N:`, [`Error::Malformed`]) or, for formats without useful lines
//! (a JSON object's entries, SQuAD questions, parquet rows), the record number
//! said as such (`path: record N:`, [`Error::MalformedRecord`]). Nothing
//! malformed is skipped silently.
//!
//! | format | function | returns |
//! |---|---|---|
//! | Wikipedia lead JSON (OVOS) | [`wiki_leads::load`] | [`Document`]s with a `topic` meta field |
//! | MediaWiki XML dump (`.xml`, `.xml.bz2`) | [`mediawiki::load`] | [`Document`]s with plain-text paragraphs |
//! | WikiText raw | [`wikitext::load`] | one [`Document`] per article |
//! | SQuAD v1.1 / v2.0 JSON | [`squad::load`] | paragraphs as [`Document`]s and [`QaExample`]s |
//! | RAG-Mini-Wikipedia (CSV, HF parquet) | [`rag_mini`] | passages and [`QaExample`]s |
//! | BEIR (`corpus.jsonl`, `queries.jsonl`, `qrels/*.tsv`) | [`beir::load`] | corpus, [`Query`]s, [`Qrels`] |
//! | NQ-open JSONL | [`nq_open::load`] | [`QaExample`]s |
//! | question sets in the NQ-open layout (+ optional `id`, `group`; bad records an error or a counted skip) | [`question_set::load`] | [`question_set::QuestionSet`] |
//! | folder of text files | [`text_dir::load`] | one [`Document`] per file |
//! | Wikipedia parquet shards of the hub's `wikipedia` data set (`id`, `url`, `title`, `text`; feature `parquet`) | `wikipedia_parquet::load_first` | the first N articles as [`Document`]s |

use crate::{Error, Result};

#[allow(unused_imports)]
use crate::{Document, QaExample, Qrels, Query};

pub mod beir;
pub mod mediawiki;
pub mod nq_open;
pub mod question_set;
pub mod rag_mini;
pub mod squad;
pub mod text_dir;
pub mod wiki_leads;
pub mod wikipedia_parquet;
pub mod wikitext;

mod files;
pub use files::{read_jsonl, read_jsonl_numbered, read_to_string};

/// The Wikipedia-derived corpora that [`wikipedia_corpus`] knows offline, by asset name.
pub const WIKIPEDIA_CORPORA: [&str; 3] = ["enwiki-sample-dump", "wiki-leads-en", "wikitext-2-raw"];

/// Report 000's own corpus (the hub's `wikipedia`, 20220301.en): online only, so
/// report 000 uses [`WIKIPEDIA_CORPORA`] offline. [`wikipedia_corpus`] loads its
/// first [`wikipedia_parquet::REPORT000_ARTICLES`] articles (feature `parquet`).
pub const REPORT000_CORPUS: &str = "wikipedia-20220301-en";

/// Load one of the Wikipedia corpora of [`WIKIPEDIA_CORPORA`] (or [`REPORT000_CORPUS`])
/// through the asset cache, as full-text documents (paragraphs separated by newlines).
pub fn wikipedia_corpus(assets: &crate::assets::Assets, name: &str) -> Result<Vec<Document>> {
    let spec = assets.spec(name)?;
    if name == REPORT000_CORPUS && !cfg!(feature = "parquet") {
        return Err(Error::param(
            "corpus",
            format!("`{name}` is parquet: build the workbench with the `parquet` feature"),
        ));
    }
    let file = spec
        .files
        .keys()
        .next()
        .ok_or_else(|| Error::Empty(format!("asset `{name}` lists no files")))?
        .clone();
    let path = assets.resolve(name, &file)?;
    match name {
        "enwiki-sample-dump" => mediawiki::load(&path),
        "wiki-leads-en" => wiki_leads::load(&path),
        "wikitext-2-raw" => wikitext::load(&path),
        #[cfg(feature = "parquet")]
        REPORT000_CORPUS => {
            wikipedia_parquet::load_first(&[path], wikipedia_parquet::REPORT000_ARTICLES)
        }
        other => Err(Error::param(
            "corpus",
            format!("`{other}` is not a Wikipedia corpus; choose one of {WIKIPEDIA_CORPORA:?} or `{REPORT000_CORPUS}`"),
        )),
    }
}
