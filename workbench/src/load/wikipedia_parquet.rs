//! Wikipedia as the Hugging Face hub's `wikipedia` data set ships it (config
//! `20220301.en`): parquet shards `data/20220301.en/train-000NN-of-00041.parquet` with
//! the columns `id`, `url`, `title` and `text`, one article per row, paragraphs
//! separated by newlines. The asset `wikipedia-20220301-en` holds the first shard.
//!
//! [`load_first`] (feature `parquet`) reads the first N articles of a list of shards,
//! in order: each shard is a lazy scan sliced to the rows still wanted, so polars
//! decodes the row groups holding those rows and no more, and the shards after the
//! N-th article are never opened. The 20 GB data set is never read whole.
//!
//! Report 000 takes the first [`REPORT000_ARTICLES`] articles, splits them on newlines
//! and keeps paragraphs of 21–199 words (`chunk::paragraph`).

#[cfg(feature = "parquet")]
use crate::{Document, Error, Result};
#[cfg(feature = "parquet")]
use std::path::{Path, PathBuf};

/// The number of articles report 000 takes from the start of the data set.
pub const REPORT000_ARTICLES: usize = 5_000;

/// The columns read, in the data set's names.
pub const COLUMNS: [&str; 4] = ["id", "url", "title", "text"];

/// The first `n` articles of `files` (parquet shards, read in the order given) as
/// documents: `id`, `title` and `text` from their columns, `url` in `meta["url"]`.
/// An integer `id` column becomes decimal strings.
///
/// # Errors
///
/// * [`Error::Io`] when a shard cannot be opened;
/// * [`Error::Table`] naming the shard for anything polars rejects (not a parquet
///   file, a damaged one, a missing column);
/// * [`Error::MalformedRecord`] naming the shard and the 1-based row for a null
///   value, an empty `id`, `title` or `text`, or an id seen before;
/// * [`Error::BadInput`] when the shards hold fewer than `n` articles, or `n` is 0.
#[cfg(feature = "parquet")]
pub fn load_first(files: &[PathBuf], n: usize) -> Result<Vec<Document>> {
    let first = files.first().map(PathBuf::as_path).unwrap_or(Path::new(""));
    if n == 0 {
        return Err(Error::bad_input(first, "asked for 0 articles"));
    }
    let mut docs: Vec<Document> = Vec::with_capacity(n.min(1 << 20));
    let mut seen = std::collections::HashSet::new();
    for file in files {
        if docs.len() == n {
            break;
        }
        let want = n - docs.len();
        super::rag_mini::check_parquet_footer(file)?;
        // polars' reader panics on some damaged files (see `rag_mini`); such a
        // file is a bad input, not a crash.
        let read =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read_slice(file, want)));
        let columns = match read {
            Ok(r) => r?,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("unknown panic");
                return Err(Error::Table {
                    path: file.clone(),
                    message: format!("not a readable parquet file (the reader failed: {what})"),
                });
            }
        };
        let [ids, urls, titles, texts] = columns;
        for (row, (((id, url), title), text)) in
            ids.into_iter().zip(urls).zip(titles).zip(texts).enumerate()
        {
            let field = |name: &str, v: Option<String>, may_be_empty: bool| {
                let bad = |m: &str| Error::record(file, "row", row + 1, format!("`{name}` {m}"));
                match v {
                    None => Err(bad("is null")),
                    Some(s) if !may_be_empty && s.trim().is_empty() => Err(bad("is empty")),
                    Some(s) => Ok(s),
                }
            };
            let id = field("id", id, false)?;
            let url = field("url", url, true)?;
            let title = field("title", title, false)?;
            let text = field("text", text, false)?;
            if !seen.insert(id.clone()) {
                return Err(Error::record(
                    file,
                    "row",
                    row + 1,
                    format!("article id `{id}` repeats an earlier row"),
                ));
            }
            let mut doc = Document::new(id, title, text);
            doc.meta.insert("url".into(), url);
            docs.push(doc);
        }
    }
    if docs.len() < n {
        return Err(Error::bad_input(
            first,
            format!(
                "{} shard(s) hold {} articles; {n} were asked for",
                files.len(),
                docs.len()
            ),
        ));
    }
    Ok(docs)
}

/// The first `want` rows of the four columns of one shard (a lazy scan with a slice:
/// only the row groups holding those rows are decoded).
#[cfg(feature = "parquet")]
fn read_slice(file: &Path, want: usize) -> Result<[Vec<Option<String>>; 4]> {
    use polars::prelude::{col, DataType, IdxSize, LazyFrame, PlRefPath, ScanArgsParquet};
    let table = |e: polars::prelude::PolarsError| Error::Table {
        path: file.to_path_buf(),
        message: e.to_string(),
    };
    std::fs::File::open(file).map_err(|e| Error::io(file, e))?;
    let path = PlRefPath::try_from_path(file).map_err(table)?;
    let args = ScanArgsParquet {
        // The shard's own order: no parallel row-group reading ahead of the slice.
        low_memory: true,
        ..Default::default()
    };
    let take = IdxSize::try_from(want).unwrap_or(IdxSize::MAX);
    let df = LazyFrame::scan_parquet(path, args)
        .map_err(table)?
        .select([
            col("id").cast(DataType::String),
            col("url").cast(DataType::String),
            col("title").cast(DataType::String),
            col("text").cast(DataType::String),
        ])
        .slice(0, take)
        .collect()
        .map_err(table)?;
    let mut out: [Vec<Option<String>>; 4] = Default::default();
    for (slot, name) in out.iter_mut().zip(COLUMNS) {
        let column = df.column(name).map_err(table)?;
        *slot = column
            .str()
            .map_err(table)?
            .iter()
            .map(|v| v.map(str::to_string))
            .collect();
    }
    Ok(out)
}

#[cfg(all(test, feature = "parquet"))]
mod tests {
    use super::*;
    use polars::prelude::{df, ParquetCompression, ParquetWriter};

    /// A shard in the data set's schema: rows `from..to`, row groups of 10 rows,
    /// uncompressed (so a test can find a row's bytes in the file).
    fn shard(path: &Path, from: usize, to: usize, text: impl Fn(usize) -> String) {
        let ids: Vec<String> = (from..to).map(|i| (i + 12).to_string()).collect();
        let urls: Vec<String> = (from..to)
            .map(|i| format!("https://en.wikipedia.org/wiki?curid={}", i + 12))
            .collect();
        let titles: Vec<String> = (from..to).map(|i| format!("Article {i}")).collect();
        let texts: Vec<String> = (from..to).map(text).collect();
        let mut frame =
            df!("id" => ids, "url" => urls, "title" => titles, "text" => texts).unwrap();
        ParquetWriter::new(std::fs::File::create(path).unwrap())
            .with_row_group_size(Some(10))
            .with_compression(ParquetCompression::Uncompressed)
            .finish(&mut frame)
            .unwrap();
    }

    fn text(i: usize) -> String {
        format!("Article {i} has a lead paragraph.\nIts second paragraph, number {i}.")
    }

    #[test]
    fn first_n_articles_across_shards_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
        shard(&a, 0, 30, text);
        shard(&b, 30, 60, text);
        let docs = load_first(&[a.clone(), b.clone()], 45).unwrap();
        assert_eq!(docs.len(), 45);
        for (i, d) in docs.iter().enumerate() {
            assert_eq!(d.id, (i + 12).to_string());
            assert_eq!(d.title, format!("Article {i}"));
            assert_eq!(d.text, text(i));
            assert_eq!(
                d.meta["url"],
                format!("https://en.wikipedia.org/wiki?curid={}", i + 12)
            );
        }
        // Asking for more than the shards hold is an error naming the count.
        let err = load_first(&[a, b], 61).unwrap_err().to_string();
        assert!(err.contains("hold 60 articles; 61 were asked for"), "{err}");
    }

    #[test]
    fn shards_after_the_nth_article_are_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.parquet");
        shard(&a, 0, 30, text);
        let absent = dir.path().join("train-00001-of-00041.parquet");
        assert_eq!(
            load_first(&[a.clone(), absent.clone()], 30).unwrap().len(),
            30
        );
        // The absent shard is an error as soon as it is needed.
        let err = load_first(&[a, absent], 31).unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{err:?}");
    }

    #[test]
    fn row_groups_after_the_slice_are_not_decoded() {
        // Row 45 (row group 5 of 6) gets text that is made invalid UTF-8 in the file:
        // reading the first 20 rows never touches it, reading 50 rows fails.
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.parquet");
        let marker = "MARKERMARKERMARKER";
        shard(&a, 0, 60, |i| {
            if i == 45 {
                format!("Middle {marker} text")
            } else {
                text(i)
            }
        });
        let mut bytes = std::fs::read(&a).unwrap();
        let at: Vec<usize> = bytes
            .windows(marker.len())
            .enumerate()
            .filter(|(_, w)| *w == marker.as_bytes())
            .map(|(i, _)| i)
            .collect();
        assert!(!at.is_empty(), "marker not found in the uncompressed file");
        for i in at {
            bytes[i..i + 4].copy_from_slice(&[0xff, 0xfe, 0xff, 0xfe]);
        }
        std::fs::write(&a, bytes).unwrap();
        let docs = load_first(std::slice::from_ref(&a), 20).unwrap();
        assert_eq!(docs.len(), 20);
        let err = load_first(&[a], 50).unwrap_err();
        assert!(matches!(err, Error::Table { .. }), "{err:?}");
    }

    #[test]
    fn missing_column_null_and_empty_values_are_errors_naming_the_row() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.parquet");
        let mut frame =
            df!("id" => ["1", "2"], "title" => ["A", "B"], "text" => ["x", "y"]).unwrap();
        ParquetWriter::new(std::fs::File::create(&p).unwrap())
            .finish(&mut frame)
            .unwrap();
        let err = load_first(std::slice::from_ref(&p), 1).unwrap_err();
        assert!(
            matches!(err, Error::Table { .. }) && err.to_string().contains("url"),
            "{err}"
        );
        let mut frame = df!(
            "id" => [Some("1"), Some("2"), Some("3")],
            "url" => [Some("u1"), Some("u2"), Some("u3")],
            "title" => [Some("A"), Some("B"), Some("C")],
            "text" => [Some("x"), None, Some(" ")]
        )
        .unwrap();
        ParquetWriter::new(std::fs::File::create(&p).unwrap())
            .finish(&mut frame)
            .unwrap();
        assert_eq!(load_first(std::slice::from_ref(&p), 1).unwrap().len(), 1);
        let err = load_first(std::slice::from_ref(&p), 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad.parquet: row 2: `text` is null"), "{err}");
        let mut frame = df!(
            "id" => ["1", "2"], "url" => ["u", "u"], "title" => ["A", "B"], "text" => ["x", " "]
        )
        .unwrap();
        ParquetWriter::new(std::fs::File::create(&p).unwrap())
            .finish(&mut frame)
            .unwrap();
        let err = load_first(std::slice::from_ref(&p), 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("row 2: `text` is empty"), "{err}");
        // Not a parquet file at all.
        std::fs::write(&p, b"id,url,title,text\n").unwrap();
        let err = load_first(&[p], 1).unwrap_err();
        assert!(matches!(err, Error::Table { .. }), "{err:?}");
    }
}
