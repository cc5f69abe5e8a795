//! RAG-Mini-Wikipedia (Hugging Face `rag-datasets/rag-mini-wikipedia`): 3,200
//! passages and 918 question/answer pairs.
//!
//! Two layouts:
//!
//! * the CSV mirror ([`load_csv`]): `infos.csv` with one column `text` (quoted
//!   fields hold newlines and commas) and `questions.csv` with `question,answer`;
//!   the CSV has no ids, so passages get `p{row}` and questions `q{row}` (0-based
//!   data rows);
//! * the Hugging Face parquet layout (`load_parquet`, feature `parquet`):
//!   `data/passages.parquet/part.0.parquet` (`passage`, `id`) and
//!   `data/test.parquet/part.0.parquet` (`question`, `answer`, `id`); ids come
//!   from the `id` columns.
//!
//! Passages have no title. Questions carry their single answer and no context id
//! (the data set does not say which passage answers which question).

use crate::{Document, Error, QaExample, Result};
use std::path::Path;

/// Load the CSV mirror: `passages` is `infos.csv`, `questions` is `questions.csv`.
///
/// The passage column is `text` (a `passage` column, the Hugging Face name, is
/// accepted when there is no `text`); the question file needs `question` and
/// `answer`. Other columns are ignored.
///
/// # Errors
///
/// * [`Error::Io`] when a file cannot be opened;
/// * [`Error::BadInput`] naming the file and the column when a required column
///   is missing, or when a file has no data rows;
/// * [`Error::Malformed`] naming the file and the CSV line (where the record
///   starts) for a row that does not parse (wrong field count, invalid UTF-8) or
///   whose passage, question or answer is empty.
pub fn load_csv(passages: &Path, questions: &Path) -> Result<(Vec<Document>, Vec<QaExample>)> {
    let docs = read_csv(passages, &[&["text", "passage"]])?
        .into_iter()
        .enumerate()
        .map(|(row, mut fields)| {
            Document::new(format!("p{row}"), "", fields.pop().unwrap_or_default())
        })
        .collect();
    let qas = read_csv(questions, &[&["question"], &["answer"]])?
        .into_iter()
        .enumerate()
        .map(|(row, fields)| {
            let [question, answer]: [String; 2] = fields.try_into().expect("two columns asked for");
            QaExample {
                id: format!("q{row}"),
                question,
                answers: vec![answer],
                context_id: None,
                title: None,
            }
        })
        .collect();
    Ok((docs, qas))
}

/// Read the wanted columns of a CSV file, row by row. Each entry of `columns`
/// lists acceptable header names for one column, preferred first; the error for
/// a missing column names the first. Empty (all-whitespace) values are errors.
fn read_csv(path: &Path, columns: &[&[&str]]) -> Result<Vec<Vec<String>>> {
    let mut rdr = csv::Reader::from_path(path).map_err(|e| csv_error(path, e))?;
    let headers = rdr.headers().map_err(|e| csv_error(path, e))?.clone();
    let idx: Vec<usize> = columns
        .iter()
        .map(|names| {
            names
                .iter()
                .find_map(|n| headers.iter().position(|h| h.trim() == *n))
                .ok_or_else(|| {
                    let have: Vec<&str> = headers.iter().collect();
                    Error::bad_input(
                        path,
                        format!("missing column `{}` (header: {have:?})", names[0]),
                    )
                })
        })
        .collect::<Result<_>>()?;

    let mut rows = Vec::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| csv_error(path, e))?;
        let line = rec.position().map_or(0, |p| p.line() as usize);
        let mut row = Vec::with_capacity(idx.len());
        for (&i, names) in idx.iter().zip(columns) {
            let value = rec.get(i).unwrap_or_default();
            if value.trim().is_empty() {
                return Err(Error::malformed(
                    path,
                    line,
                    format!("empty `{}` field", headers.get(i).unwrap_or(names[0])),
                ));
            }
            row.push(value.to_string());
        }
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(Error::bad_input(path, "no data rows"));
    }
    Ok(rows)
}

/// Turn a csv error into the crate's error, keeping the line when csv knows it.
fn csv_error(path: &Path, e: csv::Error) -> Error {
    let line = e.position().map(|p| p.line() as usize);
    let msg = e.to_string();
    match (e.into_kind(), line) {
        (csv::ErrorKind::Io(io), _) => Error::io(path, io),
        (_, Some(line)) => Error::malformed(path, line, msg),
        (_, None) => Error::bad_input(path, msg),
    }
}

/// Load the Hugging Face parquet layout.
///
/// `passages` is `data/passages.parquet` and `questions` is `data/test.parquet`:
/// either the `part.0.parquet` file itself or the folder holding the `*.parquet`
/// parts (read in name order). Passages need columns `passage` and `id`,
/// questions `question`, `answer` and `id`; integer ids become decimal strings.
///
/// # Errors
///
/// * [`Error::Io`] when a file or folder cannot be read;
/// * [`Error::Table`] for anything polars rejects (not a parquet file, a damaged
///   one — also when polars' reader panics on it —, a missing column, a column
///   that cannot be read as text);
/// * [`Error::MalformedRecord`] naming the part file and the 1-based row (`row N`)
///   for a null value, an empty passage, question or answer, or a repeated id;
/// * [`Error::BadInput`] when a folder holds no `*.parquet` file or a table has
///   no rows.
#[cfg(feature = "parquet")]
pub fn load_parquet(passages: &Path, questions: &Path) -> Result<(Vec<Document>, Vec<QaExample>)> {
    let mut docs = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (file, cols) in read_parquet(passages, &["passage", "id"])? {
        let [texts, ids]: [Vec<String>; 2] = cols.try_into().expect("two columns asked for");
        for (row, (text, id)) in texts.into_iter().zip(ids).enumerate() {
            if !seen.insert(id.clone()) {
                return Err(Error::record(
                    &file,
                    "row",
                    row + 1,
                    format!("passage id `{id}` repeats an earlier row"),
                ));
            }
            docs.push(Document::new(id, "", text));
        }
    }
    let mut qas = Vec::new();
    seen.clear();
    for (file, cols) in read_parquet(questions, &["question", "answer", "id"])? {
        let [questions, answers, ids]: [Vec<String>; 3] =
            cols.try_into().expect("three columns asked for");
        for (row, ((question, answer), id)) in
            questions.into_iter().zip(answers).zip(ids).enumerate()
        {
            if !seen.insert(id.clone()) {
                return Err(Error::record(
                    &file,
                    "row",
                    row + 1,
                    format!("question id `{id}` repeats an earlier row"),
                ));
            }
            qas.push(QaExample {
                id,
                question,
                answers: vec![answer],
                context_id: None,
                title: None,
            });
        }
    }
    Ok((docs, qas))
}

/// The `*.parquet` files of a table: the path itself, or the parts in a folder.
#[cfg(feature = "parquet")]
fn parquet_parts(path: &Path) -> Result<Vec<std::path::PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut parts = Vec::new();
    for entry in std::fs::read_dir(path).map_err(|e| Error::io(path, e))? {
        let p = entry.map_err(|e| Error::io(path, e))?.path();
        if p.is_file() && p.extension().is_some_and(|x| x == "parquet") {
            parts.push(p);
        }
    }
    if parts.is_empty() {
        return Err(Error::bad_input(path, "no *.parquet file in this folder"));
    }
    parts.sort();
    Ok(parts)
}

/// Read the named columns of every part of a table as strings, column-major,
/// one entry per part file.
#[cfg(feature = "parquet")]
fn read_parquet(
    path: &Path,
    names: &[&str],
) -> Result<Vec<(std::path::PathBuf, Vec<Vec<String>>)>> {
    let mut out = Vec::new();
    let mut total_rows = 0;
    for file in parquet_parts(path)? {
        check_parquet_footer(&file)?;
        // polars' parquet reader panics on some damaged files (an out-of-range
        // slice in its thrift metadata decoder or page reader, found by
        // `tests/fuzz.rs`); such a file is a bad input, not a crash.
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            read_parquet_part(&file, names)
        }));
        let (rows, cols) = match read {
            Ok(r) => r?,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("unknown panic");
                return Err(Error::Table {
                    path: file,
                    message: format!("not a readable parquet file (the reader failed: {what})"),
                });
            }
        };
        total_rows += rows;
        out.push((file, cols));
    }
    if total_rows == 0 {
        return Err(Error::bad_input(path, "the table has no rows"));
    }
    Ok(out)
}

/// Check the frame of a parquet file — `PAR1` at both ends, a footer length that fits
/// the file — and walk its footer (thrift compact protocol) checking that every list
/// and binary length fits in the bytes that remain, before polars reads it:
/// polars-parquet 0.55 sizes its vectors from those lengths, so a damaged footer
/// could abort the process on the allocation (found by `tests/fuzz.rs`).
#[cfg(feature = "parquet")]
pub(crate) fn check_parquet_footer(file: &Path) -> Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let bad = |m: String| Error::Table {
        path: file.to_path_buf(),
        message: format!("not a readable parquet file: {m}"),
    };
    let io = |e| Error::io(file, e);
    let mut f = std::fs::File::open(file).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    if len < 12 {
        return Err(bad(format!("{len} bytes is too short")));
    }
    let mut head = [0u8; 4];
    f.read_exact(&mut head).map_err(io)?;
    let mut tail = [0u8; 8];
    f.seek(SeekFrom::End(-8)).map_err(io)?;
    f.read_exact(&mut tail).map_err(io)?;
    if &head != b"PAR1" || &tail[4..] != b"PAR1" {
        return Err(bad("no `PAR1` magic at the start and end".into()));
    }
    let footer_len = u64::from(u32::from_le_bytes(tail[..4].try_into().expect("4 bytes")));
    if footer_len > len - 12 {
        return Err(bad(format!(
            "footer length {footer_len} exceeds the file ({len} bytes)"
        )));
    }
    let mut footer = vec![0u8; footer_len as usize];
    f.seek(SeekFrom::End(-8 - footer_len as i64)).map_err(io)?;
    f.read_exact(&mut footer).map_err(io)?;
    let mut walker = ThriftWalker {
        bytes: &footer,
        at: 0,
    };
    walker.value(12, 0).map_err(|m| {
        bad(format!(
            "damaged footer at byte {} of {footer_len}: {m}",
            walker.at
        ))
    })
}

/// A schema-agnostic walk over thrift compact-protocol data that checks lengths only.
#[cfg(feature = "parquet")]
struct ThriftWalker<'a> {
    bytes: &'a [u8],
    at: usize,
}

#[cfg(feature = "parquet")]
impl ThriftWalker<'_> {
    const MAX_DEPTH: usize = 64;

    fn byte(&mut self) -> std::result::Result<u8, String> {
        let b = *self.bytes.get(self.at).ok_or("ends early")?;
        self.at += 1;
        Ok(b)
    }

    fn varint(&mut self) -> std::result::Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return Err("varint overflows 64 bits".into());
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint longer than 10 bytes".into())
    }

    fn skip(&mut self, n: u64) -> std::result::Result<(), String> {
        let left = (self.bytes.len() - self.at) as u64;
        if n > left {
            return Err(format!("length {n} exceeds the {left} bytes left"));
        }
        self.at += n as usize;
        Ok(())
    }

    /// Every element takes at least one byte, so a count above the bytes left is a lie.
    fn count(&mut self, n: u64) -> std::result::Result<u64, String> {
        let left = (self.bytes.len() - self.at) as u64;
        if n > left {
            return Err(format!("count {n} exceeds the {left} bytes left"));
        }
        Ok(n)
    }

    /// Walk one value of compact type `t`.
    fn value(&mut self, t: u8, depth: usize) -> std::result::Result<(), String> {
        if depth > Self::MAX_DEPTH {
            return Err("nested too deep".into());
        }
        match t {
            1 | 2 => Ok(()), // booleans inside a struct live in the field header
            3 => self.skip(1),
            4..=6 => self.varint().map(drop),
            7 => self.skip(8),
            8 => {
                let n = self.varint()?;
                self.skip(n)
            }
            9 | 10 => {
                let h = self.byte()?;
                let n = match h >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                let n = self.count(n)?;
                let et = h & 0x0f;
                for _ in 0..n {
                    if matches!(et, 1 | 2) {
                        self.skip(1)?; // a boolean element is one byte
                    } else {
                        self.value(et, depth + 1)?;
                    }
                }
                Ok(())
            }
            11 => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let n = self.count(n)?;
                let kv = self.byte()?;
                for _ in 0..n {
                    for et in [kv >> 4, kv & 0x0f] {
                        if matches!(et, 1 | 2) {
                            self.skip(1)?;
                        } else {
                            self.value(et, depth + 1)?;
                        }
                    }
                }
                Ok(())
            }
            12 => loop {
                let h = self.byte()?;
                if h == 0 {
                    return Ok(());
                }
                if h >> 4 == 0 {
                    self.varint()?; // explicit field id
                }
                self.value(h & 0x0f, depth + 1)?;
            },
            other => Err(format!("unknown thrift type {other}")),
        }
    }
}

/// The named columns of one parquet file as strings, with its row count.
#[cfg(feature = "parquet")]
fn read_parquet_part(file: &Path, names: &[&str]) -> Result<(usize, Vec<Vec<String>>)> {
    use polars::prelude::{DataType, ParquetReader, PolarsError, SerReader};

    let table = |e: PolarsError| Error::Table {
        path: file.to_path_buf(),
        message: e.to_string(),
    };
    let f = std::fs::File::open(file).map_err(|e| Error::io(file, e))?;
    let df = ParquetReader::new(f).finish().map_err(table)?;
    let mut cols = Vec::with_capacity(names.len());
    for &name in names {
        let col = df.column(name).map_err(|_| Error::Table {
            path: file.to_path_buf(),
            message: format!(
                "missing column `{name}` (columns: {:?})",
                df.get_column_names()
                    .iter()
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()
            ),
        })?;
        let col = col.cast(&DataType::String).map_err(table)?;
        let values = col
            .str()
            .map_err(table)?
            .iter()
            .enumerate()
            .map(|(row, v)| match v {
                Some(v) if !v.trim().is_empty() => Ok(v.to_string()),
                Some(_) => Err(Error::record(
                    file,
                    "row",
                    row + 1,
                    format!("empty `{name}` value"),
                )),
                None => Err(Error::record(
                    file,
                    "row",
                    row + 1,
                    format!("null `{name}` value"),
                )),
            })
            .collect::<Result<Vec<String>>>()?;
        cols.push(values);
    }
    Ok((df.height(), cols))
}
