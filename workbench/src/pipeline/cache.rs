//! The retrieval-results cache: steps 1–3 of a run (the fused first-stage hits and the
//! re-ranked hits of every question) on disk, so a run with another reader does not
//! retrieve again.
//!
//! Keyed like the embedding cache (`encode::cache`): the key is the sha256 of
//! length-prefixed fields — a format tag; every passage's id and text, in order; each
//! retriever's `name()` (which carries its hyper-parameters and model); the fusion tag
//! and depth; the re-ranker's name and depth; the number of passages the reader gets;
//! and, per question in order, its id and the exact queries sent (so a different
//! transformation output is a different key). One entry is `<dir>/<key>.json`:
//! `{format, key, n, ids, body_sha256, body}`. Reading checks the format, key, count,
//! question ids and the body's sha256; an entry failing any check is rebuilt and the
//! run says so ([`Status::Rebuilt`] with the reason). Entries are written to a
//! temporary file and renamed.

use crate::{Error, Hit, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::Path;

const FORMAT: u32 = 1;

/// Retrieval output for one question.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Retrieved {
    /// Fused first-stage hits, best first.
    pub retrieved: Vec<Hit>,
    /// Re-ranked hits, when there is a re-ranker.
    pub reranked: Option<Vec<Hit>>,
    /// Seconds spent retrieving (as measured when computed).
    pub retrieve_secs: f64,
    /// Seconds spent re-ranking.
    pub rerank_secs: f64,
}

/// What the cache did for a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// No retriever, or `cache.retrieval = false`.
    Off,
    /// Read from the cache.
    Hit,
    /// Computed and stored.
    Miss,
    /// An entry failed verification (reason): recomputed and rewritten.
    Rebuilt(String),
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Off => write!(f, "off"),
            Status::Hit => write!(f, "hit"),
            Status::Miss => write!(f, "miss"),
            Status::Rebuilt(r) => write!(f, "rebuilt: {r}"),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Entry {
    format: u32,
    key: String,
    n: usize,
    ids: Vec<String>,
    body_sha256: String,
    body: String,
}

/// The verified entry, `Ok(None)` when absent, `Err(reason)` when present but bad.
pub fn read(
    dir: &Path,
    key: &str,
    ids: &[&str],
) -> std::result::Result<Option<Vec<Retrieved>>, String> {
    let path = dir.join(format!("{key}.json"));
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let e: Entry = serde_json::from_str(&text)
        .map_err(|err| format!("{}: unreadable entry: {err}", path.display()))?;
    if e.format != FORMAT || e.key != key || e.n != ids.len() || e.ids != ids {
        return Err(format!(
            "{}: header (format {}, key {}, n {}) does not match this run",
            path.display(),
            e.format,
            e.key,
            e.n
        ));
    }
    let sha = hex::encode(Sha256::digest(e.body.as_bytes()));
    if sha != e.body_sha256 {
        return Err(format!(
            "{}: body sha256 {sha} ≠ recorded {}; damaged",
            path.display(),
            e.body_sha256
        ));
    }
    let body: Vec<Retrieved> = serde_json::from_str(&e.body)
        .map_err(|err| format!("{}: unreadable body: {err}", path.display()))?;
    if body.len() != ids.len() {
        return Err(format!(
            "{}: {} records for {} questions",
            path.display(),
            body.len(),
            ids.len()
        ));
    }
    Ok(Some(body))
}

/// Store an entry (temporary file, then rename).
pub fn write(dir: &Path, key: &str, ids: &[&str], out: &[Retrieved]) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let body = serde_json::to_string(out)?;
    let e = Entry {
        format: FORMAT,
        key: key.to_string(),
        n: ids.len(),
        ids: ids.iter().map(|s| s.to_string()).collect(),
        body_sha256: hex::encode(Sha256::digest(body.as_bytes())),
        body,
    };
    let path = dir.join(format!("{key}.json"));
    let tmp = dir.join(format!("{key}.json.tmp{}", std::process::id()));
    std::fs::write(&tmp, serde_json::to_vec(&e)?).map_err(|err| Error::io(&tmp, err))?;
    std::fs::rename(&tmp, &path).map_err(|err| Error::io(&path, err))
}
