//! [`TokenStore`]: every passage's token vectors in one flat `f16` array, saved with a
//! key (model, encoder settings, projection, passage ids and texts) and a checksum.

use super::maxsim::{maxsim_f16, whole_rows};
use crate::{Error, Hit, Passage, Result};
use half::f16;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

/// What a [`TokenStore`] was built from; a store is read only when its key equals the
/// expected one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreKey {
    /// sha256 of the encoder's weights file.
    pub model_sha256: String,
    /// Encoder settings that change token vectors (e.g. the maximum length).
    pub encoder: String,
    /// `"none"` or [`Projection::id`](super::Projection::id).
    pub projection: String,
    /// [`passage_set_key`] of the passages.
    pub passages: String,
    /// Vector dimension.
    pub dim: usize,
}

/// sha256 over every passage's id and text, in order: a store or index built for other
/// passages (or the same passages in another order) has another key.
pub fn passage_set_key(passages: &[Passage]) -> String {
    let mut h = Sha256::new();
    for p in passages {
        h.update(p.id.as_bytes());
        h.update([0u8]);
        h.update(p.text.as_bytes());
        h.update([0u8]);
    }
    hex::encode(h.finalize())
}

const STORE_MAGIC: &[u8; 8] = b"WBTOKF16";
/// Format 2 added the per-passage text digests and the checksum trailer.
const STORE_VERSION: u32 = 2;
/// Magic, version and header length.
const STORE_PREFIX: u64 = 8 + 4 + 8;
/// The sha256 of every byte before it, at the end of the file.
const STORE_TRAILER: u64 = 32;

#[derive(Serialize, Deserialize)]
struct StoreHeader {
    key: StoreKey,
    n_vectors: usize,
    ids: Vec<String>,
    /// sha256 of each passage's text, lowercase hex, in store order.
    text_sha256: Vec<String>,
}

fn text_digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// Passage token vectors as one flat `f16` array plus per-passage offsets.
///
/// Passage `i` owns rows `offsets[i]..offsets[i+1]` of the `n_vectors × dim` array. The
/// store also keeps the sha256 of each passage's text, so vectors are never used for a
/// passage whose text has changed under the same id.
///
/// File layout (little-endian): magic `WBTOKF16`, `u32` version, `u64` header length, the
/// JSON header ([`StoreKey`], vector count, passage ids, text digests), the body (`(n+1)`
/// `u64` offsets and the `f16` bits), then the sha256 of all the bytes before it.
/// [`TokenStore::load`] checks every length against the file size before allocating and
/// the whole file against its checksum, so a truncated, edited or foreign file is an
/// error naming it.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenStore {
    key: StoreKey,
    ids: Vec<String>,
    text_sha256: Vec<[u8; 32]>,
    offsets: Vec<usize>,
    data: Vec<f16>,
    index: HashMap<String, usize>,
}

impl TokenStore {
    /// An empty store for vectors of `key.dim` dimensions.
    pub fn new(key: StoreKey) -> Self {
        TokenStore {
            key,
            ids: Vec::new(),
            text_sha256: Vec::new(),
            offsets: vec![0],
            data: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// Append a passage's token vectors (row-major `n × dim`, rounded to `f16`) with the
    /// text they were computed from (only its sha256 is kept). A repeated id or a wrong
    /// length is an error.
    pub fn push(&mut self, id: &str, text: &str, vectors: &[f32]) -> Result<()> {
        let dim = self.key.dim;
        if dim == 0 || !whole_rows(vectors.len(), dim) {
            return Err(Error::param(
                "vectors",
                format!("{} values is not a multiple of dim {dim}", vectors.len()),
            ));
        }
        if self.index.contains_key(id) {
            return Err(Error::param(
                "passages",
                format!("passage id `{id}` appears twice"),
            ));
        }
        self.index.insert(id.to_string(), self.ids.len());
        self.ids.push(id.to_string());
        self.text_sha256.push(text_digest(text));
        self.data.extend(vectors.iter().map(|&x| f16::from_f32(x)));
        self.offsets.push(self.data.len() / dim);
        Ok(())
    }

    /// What the store was built from.
    pub fn key(&self) -> &StoreKey {
        &self.key
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.key.dim
    }

    /// Number of passages.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when no passage is held.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Total number of token vectors.
    pub fn n_vectors(&self) -> usize {
        self.data.len() / self.key.dim.max(1)
    }

    /// Passage ids in store order.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// Position of a passage id.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// True when passage `i` was stored from exactly this text.
    pub fn holds_text(&self, i: usize, text: &str) -> bool {
        self.text_sha256[i] == text_digest(text)
    }

    /// Token rows of passage `i` (`f16`, row-major).
    pub fn vectors(&self, i: usize) -> &[f16] {
        let dim = self.key.dim;
        &self.data[self.offsets[i] * dim..self.offsets[i + 1] * dim]
    }

    /// Token rows of passage `i` widened to `f32`.
    pub fn vectors_f32(&self, i: usize) -> Vec<f32> {
        self.vectors(i).iter().map(|x| x.to_f32()).collect()
    }

    /// All token rows, flat.
    pub fn all_vectors(&self) -> &[f16] {
        &self.data
    }

    /// sha256 (lowercase hex) of the passage offsets and the vectors' `f16` bits, as laid
    /// out in the file body: two stores with equal digests hold the same vectors.
    pub fn vectors_sha256(&self) -> String {
        let mut h = Sha256::new();
        self.body_chunks(|b| {
            h.update(b);
            Ok(())
        })
        .expect("hashing does not fail");
        hex::encode(h.finalize())
    }

    /// The passage owning global token row `row`.
    pub fn passage_of_row(&self, row: usize) -> usize {
        // offsets is non-decreasing; the owner is the last i with offsets[i] <= row
        // among passages that have tokens.
        self.offsets.partition_point(|&o| o <= row) - 1
    }

    /// Mean-MaxSim of a query matrix against passage `i`.
    pub fn score(&self, q: &[f32], i: usize) -> f32 {
        maxsim_f16(q, self.vectors(i), self.key.dim)
    }

    /// Exhaustive MaxSim of a query against every passage: the best `k` hits.
    pub fn exhaustive(&self, q: &[f32], k: usize) -> Result<Vec<Hit>> {
        crate::retrieve::check_k(k)?;
        use rayon::prelude::*;
        let hits: Vec<Hit> = (0..self.len())
            .into_par_iter()
            .map(|i| Hit::new(self.ids[i].clone(), self.score(q, i)))
            .collect();
        crate::retrieve::top_k(hits, k)
    }

    /// The body bytes (offsets, then vectors) in chunks, as written to the file.
    fn body_chunks(&self, mut f: impl FnMut(&[u8]) -> std::io::Result<()>) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(1 << 16);
        for &o in &self.offsets {
            buf.extend_from_slice(&(o as u64).to_le_bytes());
        }
        f(&buf)?;
        for chunk in self.data.chunks(1 << 15) {
            buf.clear();
            for x in chunk {
                buf.extend_from_slice(&x.to_bits().to_le_bytes());
            }
            f(&buf)?;
        }
        Ok(())
    }

    /// Write to `path` (through a temporary file renamed into place).
    pub fn save(&self, path: &Path) -> Result<()> {
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            }
        }
        let tmp = path.with_extension("tmp");
        let io = |e| Error::io(&tmp, e);
        let header = serde_json::to_vec(&StoreHeader {
            key: self.key.clone(),
            n_vectors: self.n_vectors(),
            ids: self.ids.clone(),
            text_sha256: self.text_sha256.iter().map(hex::encode).collect(),
        })?;
        let mut w = BufWriter::new(std::fs::File::create(&tmp).map_err(io)?);
        let mut h = Sha256::new();
        let mut put = |b: &[u8]| {
            h.update(b);
            w.write_all(b)
        };
        put(STORE_MAGIC).map_err(io)?;
        put(&STORE_VERSION.to_le_bytes()).map_err(io)?;
        put(&(header.len() as u64).to_le_bytes()).map_err(io)?;
        put(&header).map_err(io)?;
        self.body_chunks(&mut put).map_err(io)?;
        w.write_all(&h.finalize()).map_err(io)?;
        w.flush().map_err(io)?;
        drop(w);
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    }

    /// Read and check the header, feeding every byte read to `h`; returns it with the
    /// number of body bytes between it and the trailer. Every length is checked against
    /// the file size before anything is allocated.
    fn read_header(
        r: &mut impl Read,
        path: &Path,
        file_len: u64,
        h: &mut Sha256,
    ) -> Result<(StoreHeader, u64)> {
        let bad = |m: String| Error::bad_input(path, m);
        let short = |e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                bad(format!(
                    "not a workbench token store (only {file_len} bytes)"
                ))
            } else {
                Error::io(path, e)
            }
        };
        let mut prefix = [0u8; STORE_PREFIX as usize];
        r.read_exact(&mut prefix).map_err(short)?;
        h.update(prefix);
        if &prefix[..8] != STORE_MAGIC {
            return Err(bad("not a workbench token store".into()));
        }
        let version = u32::from_le_bytes(prefix[8..12].try_into().expect("4 bytes"));
        if version != STORE_VERSION {
            return Err(bad(format!(
                "token store format {version}, this build reads {STORE_VERSION}"
            )));
        }
        let len = u64::from_le_bytes(prefix[12..20].try_into().expect("8 bytes"));
        let room = file_len.saturating_sub(STORE_PREFIX + STORE_TRAILER);
        if len > room {
            return Err(bad(format!(
                "token store header length {len} exceeds the {room} bytes the file has for it (truncated or corrupt)"
            )));
        }
        let mut header = vec![0u8; len as usize];
        r.read_exact(&mut header).map_err(|e| Error::io(path, e))?;
        h.update(&header);
        let header: StoreHeader =
            serde_json::from_slice(&header).map_err(|e| bad(format!("token store header: {e}")))?;
        let body = room - len;
        Self::check_header(&header, body).map_err(|m| bad(format!("token store header: {m}")))?;
        Ok((header, body))
    }

    /// Consistency of a parsed header with itself and with the `body` bytes that follow it.
    fn check_header(h: &StoreHeader, body: u64) -> std::result::Result<(), String> {
        let n = h.ids.len();
        if h.key.dim == 0 {
            return Err("dim is 0".into());
        }
        if h.text_sha256.len() != n {
            return Err(format!("{n} ids but {} text digests", h.text_sha256.len()));
        }
        let want = (n as u64)
            .checked_add(1)
            .and_then(|m| m.checked_mul(8))
            .zip(
                (h.n_vectors as u64)
                    .checked_mul(h.key.dim as u64)
                    .and_then(|v| v.checked_mul(2)),
            )
            .and_then(|(a, b)| a.checked_add(b));
        if want != Some(body) {
            return Err(format!(
                "{n} passages and {} vectors of dim {} need {} body bytes, the file holds {body}",
                h.n_vectors,
                h.key.dim,
                want.map_or("more than 2^64".to_string(), |w| w.to_string())
            ));
        }
        Ok(())
    }

    /// The key recorded in a store file (reads only the header).
    pub fn read_key(path: &Path) -> Result<StoreKey> {
        let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let len = f.metadata().map_err(|e| Error::io(path, e))?.len();
        let mut h = Sha256::new();
        Ok(
            Self::read_header(&mut BufReader::new(f), path, len, &mut h)?
                .0
                .key,
        )
    }

    /// Read a store, refusing it unless its key equals `expected` (the error names each
    /// differing field: a stale store is never read), and unless every length agrees
    /// with the file size and the body with its checksum.
    pub fn load(path: &Path, expected: &StoreKey) -> Result<Self> {
        let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let file_len = f.metadata().map_err(|e| Error::io(path, e))?.len();
        let mut r = BufReader::new(f);
        let mut h = Sha256::new();
        let (header, body_len) = Self::read_header(&mut r, path, file_len, &mut h)?;
        if &header.key != expected {
            return Err(Error::bad_input(
                path,
                format!(
                    "stale token store ({}); delete it or rebuild",
                    describe_key_diff(&header.key, expected)
                ),
            ));
        }
        let bad = |m: String| Error::bad_input(path, m);
        let n = header.ids.len();
        let mut text_sha256 = Vec::with_capacity(n);
        for (i, d) in header.text_sha256.iter().enumerate() {
            let mut digest = [0u8; 32];
            hex::decode_to_slice(d, &mut digest).map_err(|e| {
                bad(format!(
                    "token store header: text digest {} of passage `{}`: {e}",
                    i + 1,
                    header.ids[i]
                ))
            })?;
            text_sha256.push(digest);
        }
        let mut index = HashMap::with_capacity(n);
        for (i, id) in header.ids.iter().enumerate() {
            if index.insert(id.clone(), i).is_some() {
                return Err(bad(format!(
                    "token store header: passage id `{id}` appears twice"
                )));
            }
        }
        // The lengths were checked against the file size, so these allocations are
        // bounded by it.
        let truncated = |e: std::io::Error| bad(format!("token store truncated ({e})"));
        let mut buf = vec![0u8; (n + 1) * 8];
        r.read_exact(&mut buf).map_err(truncated)?;
        h.update(&buf);
        let offsets: Vec<usize> = buf
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .map(|o| usize::try_from(o).unwrap_or(usize::MAX))
            .collect();
        let n_values = header.n_vectors * header.key.dim;
        let mut data = Vec::with_capacity(n_values);
        let mut chunk = vec![0u8; 1 << 16];
        let mut left = body_len - buf.len() as u64;
        while left > 0 {
            let take = left.min(chunk.len() as u64) as usize;
            r.read_exact(&mut chunk[..take]).map_err(truncated)?;
            h.update(&chunk[..take]);
            data.extend(
                chunk[..take]
                    .chunks_exact(2)
                    .map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]]))),
            );
            left -= take as u64;
        }
        let mut trailer = [0u8; STORE_TRAILER as usize];
        r.read_exact(&mut trailer).map_err(truncated)?;
        let mut extra = [0u8; 1];
        if r.read(&mut extra).map_err(|e| Error::io(path, e))? != 0 {
            return Err(bad("token store grew while being read".into()));
        }
        let actual: [u8; 32] = h.finalize().into();
        if actual != trailer {
            return Err(bad(format!(
                "token store checksum mismatch: sha256 {}, the file ends with {} (corrupt file)",
                hex::encode(actual),
                hex::encode(trailer)
            )));
        }
        let ok = offsets[0] == 0
            && offsets.windows(2).all(|w| w[0] <= w[1])
            && offsets[n] == header.n_vectors;
        if !ok {
            return Err(bad("token store offsets are inconsistent".into()));
        }
        Ok(TokenStore {
            key: header.key,
            ids: header.ids,
            text_sha256,
            offsets,
            data,
            index,
        })
    }
}

pub(crate) fn describe_key_diff(found: &StoreKey, want: &StoreKey) -> String {
    let mut d = Vec::new();
    if found.model_sha256 != want.model_sha256 {
        d.push(format!(
            "model sha256 {} ≠ expected {}",
            found.model_sha256, want.model_sha256
        ));
    }
    if found.encoder != want.encoder {
        d.push(format!(
            "encoder `{}` ≠ expected `{}`",
            found.encoder, want.encoder
        ));
    }
    if found.projection != want.projection {
        d.push(format!(
            "projection `{}` ≠ expected `{}`",
            found.projection, want.projection
        ));
    }
    if found.passages != want.passages {
        d.push(format!(
            "passage-set key {} ≠ expected {}",
            found.passages, want.passages
        ));
    }
    if found.dim != want.dim {
        d.push(format!("dim {} ≠ expected {}", found.dim, want.dim));
    }
    d.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rerank::late_interaction::normalize_rows;

    fn unit_rows(rows: &[&[f32]]) -> Vec<f32> {
        let dim = rows[0].len();
        let mut m: Vec<f32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
        normalize_rows(&mut m, dim);
        m
    }

    #[test]
    fn store_round_trip_and_stale_key() {
        let key = StoreKey {
            model_sha256: "abc".into(),
            encoder: "e".into(),
            projection: "none".into(),
            passages: "p".into(),
            dim: 2,
        };
        let mut s = TokenStore::new(key.clone());
        s.push("a", "text a", &unit_rows(&[&[1.0, 0.0], &[0.6, 0.8]]))
            .unwrap();
        s.push("empty", "", &[]).unwrap();
        s.push("b", "text b", &unit_rows(&[&[0.0, 1.0]])).unwrap();
        assert!(s.push("a", "text a", &[1.0, 0.0]).is_err());
        assert!(s.holds_text(0, "text a") && !s.holds_text(0, "text b"));
        assert_eq!(s.n_vectors(), 3);
        assert_eq!(s.passage_of_row(0), 0);
        assert_eq!(s.passage_of_row(1), 0);
        assert_eq!(s.passage_of_row(2), 2);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.wbtok");
        s.save(&path).unwrap();
        let back = TokenStore::load(&path, &key).unwrap();
        assert_eq!(back, s);
        let stale = StoreKey {
            model_sha256: "def".into(),
            ..key
        };
        let err = TokenStore::load(&path, &stale).unwrap_err().to_string();
        assert!(
            err.contains("stale") && err.contains("model sha256 abc"),
            "{err}"
        );
    }
}
