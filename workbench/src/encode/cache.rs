//! [`EmbeddingCache`]: passage embeddings on disk, so a corpus is encoded once.
//!
//! An entry is two files in the cache folder (default `data/cache/embeddings/`):
//!
//! - `<key>.json`, a small header: `{format, key, n, dim, model, model_sha256, params,
//!   data_sha256}`;
//! - `<key>.f32`, the `n × dim` vectors as raw little-endian `f32`, row by row.
//!
//! The key is the sha256 of the model's sha256, the encoder parameters (as
//! JSON; `threads` is not part of them) and the ordered list of
//! `(passage id, passage text)`, each field length-prefixed. Changing the
//! model, a parameter, one passage's text or id, or the passage order gives a
//! different key, hence a miss: a stale entry can never be read.
//!
//! Reading verifies that the header's format, key, `n` and `dim` match, that
//! the data file is exactly `n · dim · 4` bytes and that it has the header's
//! `data_sha256` (so a flipped bit is caught too). **A header or data file that fails
//! these checks (truncated, edited, half-written) is treated as a miss: the
//! vectors are recomputed and the entry rewritten**, and the outcome says so
//! ([`CacheStatus::Rebuilt`] with the reason, naming the file). Entries are
//! written to temporary files first and renamed, data before header, so an
//! interrupted write leaves no header that points at partial data.
//!
//! Only `Passage::text` is embedded (report 000 kept the title separately).

use super::BertEncoder;
use crate::{Error, Passage, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Format 2 added `data_sha256`; older entries are rebuilt once.
const FORMAT: u32 = 2;

/// The header stored next to the vectors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheHeader {
    /// File format version.
    pub format: u32,
    /// The cache key (also the file stem).
    pub key: String,
    /// Number of vectors.
    pub n: usize,
    /// Dimension of each vector.
    pub dim: usize,
    /// Model asset name.
    pub model: String,
    /// sha256 of the model weights.
    pub model_sha256: String,
    /// Encoder parameters.
    pub params: serde_json::Value,
    /// sha256 of the data file, lowercase hex (empty in a format-1 header, which
    /// is then rebuilt for its format).
    #[serde(default)]
    pub data_sha256: String,
}

/// What [`EmbeddingCache::get_or_compute_with_status`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheStatus {
    /// Read from the cache.
    Hit,
    /// No entry for this key: computed and stored.
    Miss,
    /// An entry existed but failed verification (reason inside): recomputed and rewritten.
    Rebuilt(String),
}

/// An embedding cache folder. See the module docs.
#[derive(Debug, Clone)]
pub struct EmbeddingCache {
    dir: PathBuf,
}

impl EmbeddingCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        EmbeddingCache { dir: dir.into() }
    }

    /// The project's cache, `<root>/data/cache/embeddings`.
    pub fn project_default() -> Result<Self> {
        Ok(Self::new(crate::paths::project_cache_dir("embeddings")?))
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cache key of `passages` embedded by `encoder` (lowercase hex sha256).
    pub fn key(encoder: &BertEncoder, passages: &[Passage]) -> Result<String> {
        let mut h = Sha256::new();
        let mut field = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        field(b"workbench-embeddings-v1");
        field(encoder.model_sha256().as_bytes());
        field(serde_json::to_string(encoder.params())?.as_bytes());
        field(&(passages.len() as u64).to_le_bytes());
        for p in passages {
            field(p.id.as_bytes());
            field(p.text.as_bytes());
        }
        Ok(hex::encode(h.finalize()))
    }

    /// Path of the header of `key`.
    pub fn header_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }

    /// Path of the vectors of `key`.
    pub fn data_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.f32"))
    }

    /// The vectors of `passages` (in passage order): from the cache when a
    /// verified entry exists, else computed with `encoder` and stored.
    pub fn get_or_compute(
        &self,
        encoder: &BertEncoder,
        passages: &[Passage],
    ) -> Result<Vec<Vec<f32>>> {
        Ok(self.get_or_compute_with_status(encoder, passages)?.0)
    }

    /// [`get_or_compute`](Self::get_or_compute), also saying whether it hit.
    pub fn get_or_compute_with_status(
        &self,
        encoder: &BertEncoder,
        passages: &[Passage],
    ) -> Result<(Vec<Vec<f32>>, CacheStatus)> {
        let key = Self::key(encoder, passages)?;
        let status = match self.read(&key, passages.len(), encoder.dim()) {
            Ok(Some(v)) => return Ok((v, CacheStatus::Hit)),
            Ok(None) => CacheStatus::Miss,
            Err(reason) => CacheStatus::Rebuilt(reason),
        };
        let texts: Vec<&str> = passages.iter().map(|p| p.text.as_str()).collect();
        let vectors = encoder.embed(&texts)?;
        self.write(&key, encoder, &vectors)?;
        Ok((vectors, status))
    }

    /// The verified entry for `key`, `Ok(None)` when there is none, `Err(reason)`
    /// when one exists but fails verification.
    fn read(
        &self,
        key: &str,
        n: usize,
        dim: usize,
    ) -> std::result::Result<Option<Vec<Vec<f32>>>, String> {
        let hp = self.header_path(key);
        let dp = self.data_path(key);
        let text = match std::fs::read_to_string(&hp) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", hp.display())),
        };
        let header: CacheHeader = serde_json::from_str(&text)
            .map_err(|e| format!("{}: unreadable header: {e}", hp.display()))?;
        if header.format != FORMAT || header.key != key || header.n != n || header.dim != dim {
            return Err(format!(
                "{}: header (format {}, key {}, n {}, dim {}) does not match (format {FORMAT}, key {key}, n {n}, dim {dim})",
                hp.display(),
                header.format,
                header.key,
                header.n,
                header.dim
            ));
        }
        let bytes = std::fs::read(&dp).map_err(|e| format!("{}: {e}", dp.display()))?;
        let want = n * dim * 4;
        if bytes.len() != want {
            return Err(format!(
                "{}: {} bytes, expected {want} ({n} × {dim} f32); truncated or overwritten",
                dp.display(),
                bytes.len()
            ));
        }
        let actual = hex::encode(Sha256::digest(&bytes));
        if !actual.eq_ignore_ascii_case(&header.data_sha256) {
            return Err(format!(
                "{}: sha256 {actual}, but {} records {}; damaged",
                dp.display(),
                hp.display(),
                header.data_sha256
            ));
        }
        let flat: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok(Some(if dim == 0 {
            vec![Vec::new(); n]
        } else {
            flat.chunks_exact(dim).map(|c| c.to_vec()).collect()
        }))
    }

    fn write(&self, key: &str, encoder: &BertEncoder, vectors: &[Vec<f32>]) -> Result<()> {
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        let dim = encoder.dim();
        let mut bytes = Vec::with_capacity(vectors.len() * dim * 4);
        for v in vectors {
            if v.len() != dim {
                return Err(Error::bad_input(
                    self.data_path(key),
                    format!("vector of length {} in a {dim}-d cache entry", v.len()),
                ));
            }
            for x in v {
                bytes.extend_from_slice(&x.to_le_bytes());
            }
        }
        let header = CacheHeader {
            format: FORMAT,
            key: key.to_string(),
            n: vectors.len(),
            dim,
            model: encoder.name().to_string(),
            model_sha256: encoder.model_sha256().to_string(),
            params: serde_json::to_value(encoder.params())?,
            data_sha256: hex::encode(Sha256::digest(&bytes)),
        };
        // Data first, header last: a header only ever points at complete data.
        let hp = self.header_path(key);
        let _ = std::fs::remove_file(&hp);
        write_atomic(&self.data_path(key), &bytes)?;
        write_atomic(&hp, serde_json::to_string_pretty(&header)?.as_bytes())
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!(
        "{}.tmp{}",
        path.extension().and_then(|e| e.to_str()).unwrap_or(""),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}
