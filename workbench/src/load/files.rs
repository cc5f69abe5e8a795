//! Reading a data file whole: text and JSON Lines, with errors that name the file.

use crate::{Error, Result};
use serde::de::DeserializeOwned;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// Read a whole file to a string, naming the file on failure.
pub fn read_to_string(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::io(path, e))
}

/// Parse a JSON Lines file into `T`, one record per non-blank line.
/// A line that does not parse is an error naming the file and the 1-based line.
pub fn read_jsonl<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    Ok(read_jsonl_numbered(path)?
        .into_iter()
        .map(|(_, rec)| rec)
        .collect())
}

/// [`read_jsonl`], each record with its 1-based line number (blank lines are skipped but
/// counted).
pub fn read_jsonl_numbered<T: DeserializeOwned>(path: &Path) -> Result<Vec<(usize, T)>> {
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|e| Error::io(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let rec = serde_json::from_str(&line)
            .map_err(|e| Error::malformed(path, i + 1, e.to_string()))?;
        out.push((i + 1, rec));
    }
    Ok(out)
}
