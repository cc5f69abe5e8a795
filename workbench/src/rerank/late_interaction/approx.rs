//! Fast end-to-end mode (feature `faiss`): an approximate token index for candidate
//! generation, then exact MaxSim on the candidates — PLAID's centroid pruning
//! (Santhanam et al. 2022) over FAISS k-means.
//!
//! ## Build ([`CentroidParams`], part of the cache key)
//!
//! Spherical k-means (FAISS `Clustering`, seeded, `niter` iterations, at most
//! `max_points_per_centroid · nlist` training vectors drawn by FAISS with the seed) over
//! every token vector of a [`TokenStore`] gives `nlist` unit centroids; every token is
//! coded by its nearest centroid (inner product). Per passage the index keeps the set of
//! its tokens' codes, per centroid the passages with a token in it.
//!
//! ## Search ([`ApproxSearch`])
//!
//! 1. Centroid scores `S = C · Qᵀ` (`nlist × |q|`).
//! 2. **Candidate generation** (IVF): each query token probes its `nprobe` best
//!    centroids; a passage with a token in any probed cell is a candidate.
//! 3. **Centroid interaction** (PLAID): each candidate gets the approximate score
//!    `(1/|q|) Σ_i max_{c ∈ codes(d)} S[c, i]` (MaxSim with each token replaced by its
//!    centroid); the best `candidates` are kept (ties: store order).
//! 4. **Exact MaxSim** ([`TokenStore::score`], the same kernel as the exact path) on those;
//!    the best `k` are returned.
//!
//! With `nprobe = nlist` and `candidates ≥` the number of passages the search is
//! exhaustive: every passage with at least one token is scored exactly, so the result is
//! [`TokenStore::exhaustive`]'s (passages with no tokens, which score −1, are never
//! candidates).
//!
//! ## Cache
//!
//! [`ApproxTokenIndex::load_or_build`] keeps the index in a file next to the token store
//! ([`ApproxTokenIndex::path_next_to`]). Its header records a [`CentroidKey`]: the store's
//! key, vector count and the sha256 of its vectors, and the build parameters. A file whose
//! key differs (another store, other vectors, other parameters), or that is truncated or
//! damaged (sha256 trailer), is refused with an error naming it, and rebuilt.

use super::rerank::check_store;
use super::{LateInteraction, StoreKey, TokenStore};
use crate::kernels::gemm::{gemm, Mat};
use crate::retrieve::{check_k, top_k, Retriever};
use crate::{Error, Hit, Result};
use ::faiss::Index;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Build parameters of an [`ApproxTokenIndex`]; every field is part of its cache key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CentroidParams {
    /// Number of k-means centroids (cells).
    pub nlist: usize,
    /// k-means iterations.
    pub niter: usize,
    /// Seed of FAISS' k-means (initial centroids and training sample).
    pub seed: u32,
    /// Training vectors per centroid at most (FAISS samples down to `nlist ·` this).
    pub max_points_per_centroid: usize,
}

impl CentroidParams {
    /// `nlist` cells, 20 iterations, seed 42, at most 256 training vectors per cell.
    pub fn new(nlist: usize) -> Self {
        CentroidParams {
            nlist,
            niter: 20,
            seed: 42,
            max_points_per_centroid: 256,
        }
    }

    /// `nlist1024-iter20-seed42-mp256`.
    pub fn tag(&self) -> String {
        format!(
            "nlist{}-iter{}-seed{}-mp{}",
            self.nlist, self.niter, self.seed, self.max_points_per_centroid
        )
    }

    fn check(&self, n_vectors: usize) -> Result<()> {
        if self.nlist == 0 || self.nlist > u32::MAX as usize {
            return Err(Error::param(
                "nlist",
                format!("{} is not usable", self.nlist),
            ));
        }
        if self.nlist > n_vectors {
            return Err(Error::param(
                "nlist",
                format!(
                    "{} cells need at least as many token vectors; the store has {n_vectors}",
                    self.nlist
                ),
            ));
        }
        if self.niter == 0 || self.niter > u32::MAX as usize {
            return Err(Error::param(
                "niter",
                format!("{} is not usable", self.niter),
            ));
        }
        if self.max_points_per_centroid == 0 || self.max_points_per_centroid > u32::MAX as usize {
            return Err(Error::param(
                "max_points_per_centroid",
                format!("{} is not usable", self.max_points_per_centroid),
            ));
        }
        Ok(())
    }
}

/// Search parameters of an [`ApproxTokenIndex`] (not part of the cache key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApproxSearch {
    /// Cells probed per query token (`1..=nlist`; `nlist` = every passage is a candidate).
    pub nprobe: usize,
    /// Candidates kept after centroid interaction and scored exactly (`≥` the number of
    /// passages = all).
    pub candidates: usize,
}

impl ApproxSearch {
    /// `nprobe4-cand64`.
    pub fn tag(&self) -> String {
        format!("nprobe{}-cand{}", self.nprobe, self.candidates)
    }

    /// Every passage scored exactly (`nprobe = nlist`, unlimited candidates).
    pub fn exhaustive(nlist: usize) -> Self {
        ApproxSearch {
            nprobe: nlist,
            candidates: usize::MAX,
        }
    }
}

/// What an [`ApproxTokenIndex`] was built from; a cached index is read only when its key
/// equals the expected one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CentroidKey {
    /// The token store's key (model, encoder, projection, passages, dim).
    pub store: StoreKey,
    /// Token vectors in the store.
    pub n_vectors: usize,
    /// [`TokenStore::vectors_sha256`].
    pub vectors_sha256: String,
    /// Build parameters.
    pub params: CentroidParams,
}

impl CentroidKey {
    /// The key of an index over `store` built with `params`.
    pub fn new(store: &TokenStore, params: CentroidParams) -> Self {
        CentroidKey {
            store: store.key().clone(),
            n_vectors: store.n_vectors(),
            vectors_sha256: store.vectors_sha256(),
            params,
        }
    }
}

const MAGIC: &[u8; 8] = b"WBCENTR1";
const VERSION: u32 = 1;
/// Magic, version and header length.
const PREFIX: u64 = 8 + 4 + 8;
/// sha256 of every byte before it.
const TRAILER: u64 = 32;

#[derive(Serialize, Deserialize)]
struct Header {
    key: CentroidKey,
}

/// Compressed-sparse-row lists: list `i` is `data[off[i]..off[i+1]]`.
#[derive(Debug, Clone, PartialEq)]
struct Lists {
    off: Vec<usize>,
    data: Vec<u32>,
}

impl Lists {
    fn get(&self, i: usize) -> &[u32] {
        &self.data[self.off[i]..self.off[i + 1]]
    }
}

/// An approximate token index over a [`TokenStore`]: k-means centroids, one code per
/// token, and the lists that turn probed cells into candidate passages. See the module
/// docs.
pub struct ApproxTokenIndex {
    store: Arc<TokenStore>,
    key: CentroidKey,
    /// Row-major `nlist × dim`, unit rows.
    centroids: Vec<f32>,
    /// Nearest centroid of every token row.
    codes: Vec<u32>,
    /// Per passage: the distinct codes of its tokens (ascending).
    passage_codes: Lists,
    /// Per centroid: the passages with a token in it (ascending store positions).
    cell_passages: Lists,
}

impl std::fmt::Debug for ApproxTokenIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApproxTokenIndex")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

fn ferr(what: &str, e: ::faiss::error::Error) -> Error {
    Error::Faiss(format!("{what}: {e}"))
}

impl ApproxTokenIndex {
    /// Build over every token vector of `store` (k-means, then coding every token).
    pub fn build(store: Arc<TokenStore>, params: CentroidParams) -> Result<Self> {
        let n = store.n_vectors();
        params.check(n)?;
        let dim = store.dim();
        let key = CentroidKey::new(&store, params);
        let all: Vec<f32> = store.all_vectors().iter().map(|x| x.to_f32()).collect();
        let mut cp = ::faiss::cluster::ClusteringParameters::new();
        cp.set_niter(params.niter as u32);
        cp.set_seed(params.seed);
        cp.set_spherical(true);
        cp.set_max_points_per_centroid(params.max_points_per_centroid as u32);
        cp.set_min_points_per_centroid(1);
        cp.set_verbose(false);
        let mut km =
            ::faiss::cluster::Clustering::new_with_params(dim as u32, params.nlist as u32, &cp)
                .map_err(|e| ferr("Clustering", e))?;
        let mut quantizer =
            ::faiss::FlatIndex::new_ip(dim as u32).map_err(|e| ferr("FlatIndex", e))?;
        km.train(&all, &mut quantizer)
            .map_err(|e| ferr("k-means", e))?;
        let centroids: Vec<f32> = km.centroids().map_err(|e| ferr("centroids", e))?.concat();
        if centroids.len() != params.nlist * dim {
            return Err(Error::Faiss(format!(
                "k-means returned {} values, expected {} × {dim}",
                centroids.len(),
                params.nlist
            )));
        }
        // Code every token by its nearest centroid (inner product).
        let mut flat = ::faiss::FlatIndex::new_ip(dim as u32).map_err(|e| ferr("FlatIndex", e))?;
        flat.add(&centroids).map_err(|e| ferr("add centroids", e))?;
        let mut codes = Vec::with_capacity(n);
        for chunk in all.chunks(dim * 16_384) {
            let res = flat.search(chunk, 1).map_err(|e| ferr("assign", e))?;
            for l in res.labels {
                let c = l.get().ok_or_else(|| {
                    Error::Faiss("a token vector was assigned no centroid".into())
                })?;
                codes.push(c as u32);
            }
        }
        Self::assemble(store, key, centroids, codes)
    }

    /// Derive the per-passage and per-cell lists; checks every code.
    fn assemble(
        store: Arc<TokenStore>,
        key: CentroidKey,
        centroids: Vec<f32>,
        codes: Vec<u32>,
    ) -> Result<Self> {
        let nlist = key.params.nlist;
        if codes.len() != store.n_vectors() || centroids.len() != nlist * store.dim() {
            return Err(Error::param(
                "codes",
                format!(
                    "{} codes and {} centroid values for {} tokens and {nlist} × {} centroids",
                    codes.len(),
                    centroids.len(),
                    store.n_vectors(),
                    store.dim()
                ),
            ));
        }
        if let Some(c) = codes.iter().find(|&&c| c as usize >= nlist) {
            return Err(Error::param(
                "codes",
                format!("code {c} is not below nlist {nlist}"),
            ));
        }
        let mut pc = Lists {
            off: vec![0],
            data: Vec::new(),
        };
        let mut per_cell: Vec<Vec<u32>> = vec![Vec::new(); nlist];
        let mut row = 0usize;
        let mut distinct: Vec<u32> = Vec::new();
        for p in 0..store.len() {
            let n_tok = store.vectors(p).len() / store.dim();
            distinct.clear();
            distinct.extend_from_slice(&codes[row..row + n_tok]);
            distinct.sort_unstable();
            distinct.dedup();
            for &c in &distinct {
                per_cell[c as usize].push(p as u32);
            }
            pc.data.extend_from_slice(&distinct);
            pc.off.push(pc.data.len());
            row += n_tok;
        }
        let mut cp = Lists {
            off: vec![0],
            data: Vec::new(),
        };
        for cell in per_cell {
            cp.data.extend(cell);
            cp.off.push(cp.data.len());
        }
        Ok(ApproxTokenIndex {
            store,
            key,
            centroids,
            codes,
            passage_codes: pc,
            cell_passages: cp,
        })
    }

    /// The cache file for an index over the store saved at `store_path`:
    /// `<store path>.centroids-<params tag>`.
    pub fn path_next_to(store_path: &Path, params: &CentroidParams) -> PathBuf {
        let mut s = store_path.as_os_str().to_owned();
        s.push(format!(".centroids-{}", params.tag()));
        PathBuf::from(s)
    }

    /// Load the index at `path` if its key matches `store` and `params`; otherwise
    /// (absent, stale, truncated or corrupt) build it and save it there. Why an existing
    /// file was not used is printed to stderr.
    pub fn load_or_build(
        store: Arc<TokenStore>,
        params: CentroidParams,
        path: &Path,
    ) -> Result<Self> {
        if path.exists() {
            match Self::load(path, store.clone(), params) {
                Ok(index) => return Ok(index),
                Err(e) => eprintln!("rebuilding the centroid index: {e}"),
            }
        }
        let index = Self::build(store, params)?;
        index.save(path)?;
        Ok(index)
    }

    /// Write to `path` (through a temporary file renamed into place).
    pub fn save(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let tmp = path.with_extension("tmp");
        let io = |e| Error::io(&tmp, e);
        let header = serde_json::to_vec(&Header {
            key: self.key.clone(),
        })?;
        let mut w = BufWriter::new(std::fs::File::create(&tmp).map_err(io)?);
        let mut h = Sha256::new();
        let mut put = |b: &[u8]| {
            h.update(b);
            w.write_all(b)
        };
        put(MAGIC).map_err(io)?;
        put(&VERSION.to_le_bytes()).map_err(io)?;
        put(&(header.len() as u64).to_le_bytes()).map_err(io)?;
        put(&header).map_err(io)?;
        let mut buf = Vec::with_capacity(1 << 16);
        for chunk in self.centroids.chunks(1 << 14) {
            buf.clear();
            chunk
                .iter()
                .for_each(|x| buf.extend_from_slice(&x.to_le_bytes()));
            put(&buf).map_err(io)?;
        }
        for chunk in self.codes.chunks(1 << 14) {
            buf.clear();
            chunk
                .iter()
                .for_each(|x| buf.extend_from_slice(&x.to_le_bytes()));
            put(&buf).map_err(io)?;
        }
        w.write_all(&h.finalize()).map_err(io)?;
        w.flush().map_err(io)?;
        drop(w);
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    }

    /// Read an index saved by [`save`](Self::save) for `store`, refusing it unless its key
    /// equals [`CentroidKey::new`]`(store, params)` (the error names what differs), every
    /// length agrees with the file size and the file with its checksum.
    pub fn load(path: &Path, store: Arc<TokenStore>, params: CentroidParams) -> Result<Self> {
        let bad = |m: String| Error::bad_input(path, m);
        let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let file_len = f.metadata().map_err(|e| Error::io(path, e))?.len();
        let mut r = BufReader::new(f);
        let mut h = Sha256::new();
        let short = |e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                bad(format!("centroid index truncated ({file_len} bytes)"))
            } else {
                Error::io(path, e)
            }
        };
        let mut prefix = [0u8; PREFIX as usize];
        r.read_exact(&mut prefix).map_err(short)?;
        h.update(prefix);
        if &prefix[..8] != MAGIC {
            return Err(bad("not a workbench centroid index".into()));
        }
        let version = u32::from_le_bytes(prefix[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(bad(format!(
                "centroid index format {version}, this build reads {VERSION}"
            )));
        }
        let len = u64::from_le_bytes(prefix[12..20].try_into().expect("8 bytes"));
        let room = file_len.saturating_sub(PREFIX + TRAILER);
        if len > room {
            return Err(bad(format!(
                "centroid index header length {len} exceeds the {room} bytes the file has for it (truncated or corrupt)"
            )));
        }
        let mut header = vec![0u8; len as usize];
        r.read_exact(&mut header).map_err(short)?;
        h.update(&header);
        let header: Header = serde_json::from_slice(&header)
            .map_err(|e| bad(format!("centroid index header: {e}")))?;
        let want = CentroidKey::new(&store, params);
        if header.key != want {
            return Err(bad(format!(
                "stale centroid index ({}); delete it or rebuild",
                describe_key_diff(&header.key, &want)
            )));
        }
        let (nlist, dim, n) = (params.nlist, store.dim(), store.n_vectors());
        let body = (nlist as u64 * dim as u64 + n as u64) * 4;
        if body != room - len {
            return Err(bad(format!(
                "{nlist} centroids × {dim} and {n} codes need {body} body bytes, the file holds {}",
                room - len
            )));
        }
        let mut read_u32s = |count: usize| -> Result<Vec<[u8; 4]>> {
            let mut out = Vec::with_capacity(count);
            let mut chunk = vec![0u8; 1 << 16];
            let mut left = count * 4;
            while left > 0 {
                let take = left.min(chunk.len());
                r.read_exact(&mut chunk[..take]).map_err(short)?;
                h.update(&chunk[..take]);
                out.extend(
                    chunk[..take]
                        .chunks_exact(4)
                        .map(|c| [c[0], c[1], c[2], c[3]]),
                );
                left -= take;
            }
            Ok(out)
        };
        let centroids: Vec<f32> = read_u32s(nlist * dim)?
            .into_iter()
            .map(f32::from_le_bytes)
            .collect();
        let codes: Vec<u32> = read_u32s(n)?.into_iter().map(u32::from_le_bytes).collect();
        let mut trailer = [0u8; TRAILER as usize];
        r.read_exact(&mut trailer).map_err(short)?;
        let actual: [u8; 32] = h.finalize().into();
        if actual != trailer {
            return Err(bad(format!(
                "centroid index checksum mismatch: sha256 {}, the file ends with {} (corrupt file)",
                hex::encode(actual),
                hex::encode(trailer)
            )));
        }
        Self::assemble(store, header.key, centroids, codes).map_err(|e| bad(e.to_string()))
    }

    /// The store behind the index.
    pub fn store(&self) -> &Arc<TokenStore> {
        &self.store
    }

    /// What the index was built from.
    pub fn key(&self) -> &CentroidKey {
        &self.key
    }

    /// Number of cells.
    pub fn nlist(&self) -> usize {
        self.key.params.nlist
    }

    /// Nearest centroid of every token row.
    pub fn codes(&self) -> &[u32] {
        &self.codes
    }

    /// Centroid scores, transposed: `nlist × |q|` row-major, `S[c, i] = C_c · q_i`.
    fn centroid_scores(&self, q: &[f32]) -> Vec<f32> {
        let dim = self.store.dim();
        let nq = q.len() / dim;
        let nlist = self.nlist();
        let mut s = vec![0f32; nlist * nq];
        // `centroids` is row-major nlist × dim; q is row-major nq × dim, read as its
        // transpose; `s` is row-major nlist × nq, written without being read.
        let c = Mat::rows(&self.centroids, nlist, dim).expect("nlist × dim centroids");
        let q = Mat::rows(q, nq, dim).expect("nq · dim ≤ q.len()").t();
        gemm(
            &mut s,
            0,
            nq,
            c,
            q,
            false,
            0.0,
            1.0,
            ::gemm::Parallelism::None,
        )
        .expect("shapes of the buffers above");
        s
    }

    fn check_query(&self, q: &[f32], search: &ApproxSearch) -> Result<()> {
        let dim = self.store.dim();
        if q.is_empty() || !q.len().is_multiple_of(dim) {
            return Err(Error::param(
                "query",
                format!(
                    "{} values is not a non-empty multiple of dim {dim}",
                    q.len()
                ),
            ));
        }
        if search.nprobe == 0 || search.nprobe > self.nlist() {
            return Err(Error::param(
                "nprobe",
                format!("{} must lie in 1..=nlist ({})", search.nprobe, self.nlist()),
            ));
        }
        if search.candidates == 0 {
            return Err(Error::param("candidates", "must be at least 1"));
        }
        Ok(())
    }

    /// Candidate passages (store positions, ascending) of the probed cells.
    fn probe(&self, s: &[f32], nq: usize, nprobe: usize) -> Vec<usize> {
        let nlist = self.nlist();
        let mut seen = vec![false; self.store.len()];
        if nprobe >= nlist {
            for &p in &self.cell_passages.data {
                seen[p as usize] = true;
            }
        } else {
            let mut col: Vec<(f32, u32)> = Vec::with_capacity(nlist);
            for i in 0..nq {
                col.clear();
                col.extend((0..nlist).map(|c| (s[c * nq + i], c as u32)));
                col.select_nth_unstable_by(nprobe - 1, |a, b| {
                    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
                });
                for &(_, c) in &col[..nprobe] {
                    for &p in self.cell_passages.get(c as usize) {
                        seen[p as usize] = true;
                    }
                }
            }
        }
        (0..seen.len()).filter(|&p| seen[p]).collect()
    }

    /// Candidate passages after probing and centroid interaction, best approximate score
    /// first (ties: store order), at most `search.candidates`; also the number probed.
    pub fn candidates(&self, q: &[f32], search: &ApproxSearch) -> Result<(Vec<usize>, usize)> {
        self.check_query(q, search)?;
        let nq = q.len() / self.store.dim();
        let s = self.centroid_scores(q);
        let probed = self.probe(&s, nq, search.nprobe);
        let n_probed = probed.len();
        if probed.len() <= search.candidates {
            return Ok((probed, n_probed));
        }
        let mut best = vec![f32::NEG_INFINITY; nq];
        let mut scored: Vec<(f32, usize)> = probed
            .into_iter()
            .map(|p| {
                best.fill(f32::NEG_INFINITY);
                for &c in self.passage_codes.get(p) {
                    let row = &s[c as usize * nq..(c as usize + 1) * nq];
                    for (b, &x) in best.iter_mut().zip(row) {
                        if x > *b {
                            *b = x;
                        }
                    }
                }
                (best.iter().sum::<f32>(), p)
            })
            .collect();
        scored.select_nth_unstable_by(search.candidates - 1, |a, b| {
            b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
        });
        scored.truncate(search.candidates);
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        Ok((scored.into_iter().map(|(_, p)| p).collect(), n_probed))
    }

    /// Approximate end-to-end search: candidates (see [`candidates`](Self::candidates)),
    /// exact mean-MaxSim on them, the best `k`.
    pub fn search(&self, q: &[f32], k: usize, search: &ApproxSearch) -> Result<Vec<Hit>> {
        check_k(k)?;
        let (cands, _) = self.candidates(q, search)?;
        let hits = cands
            .into_iter()
            .map(|i| Hit::new(self.store.ids()[i].clone(), self.store.score(q, i)))
            .collect();
        top_k(hits, k)
    }
}

fn describe_key_diff(found: &CentroidKey, want: &CentroidKey) -> String {
    let mut d = Vec::new();
    if found.store != want.store {
        d.push(format!(
            "token store {} ≠ expected {}",
            serde_json::to_string(&found.store).unwrap_or_default(),
            serde_json::to_string(&want.store).unwrap_or_default()
        ));
    }
    if found.n_vectors != want.n_vectors {
        d.push(format!(
            "{} token vectors ≠ expected {}",
            found.n_vectors, want.n_vectors
        ));
    }
    if found.vectors_sha256 != want.vectors_sha256 {
        d.push(format!(
            "vectors sha256 {} ≠ expected {}",
            found.vectors_sha256, want.vectors_sha256
        ));
    }
    if found.params != want.params {
        d.push(format!(
            "build parameters {} ≠ expected {}",
            found.params.tag(),
            want.params.tag()
        ));
    }
    d.join("; ")
}

/// Fast end-to-end late-interaction retrieval over an [`ApproxTokenIndex`]: encode the
/// query, probe, prune by centroid interaction, exact MaxSim on the candidates.
pub struct MaxSimApprox {
    model: Arc<LateInteraction>,
    index: Arc<ApproxTokenIndex>,
    search: ApproxSearch,
}

impl MaxSimApprox {
    /// Wrap an index (its store must come from the model's encoder).
    pub fn new(
        model: Arc<LateInteraction>,
        index: Arc<ApproxTokenIndex>,
        search: ApproxSearch,
    ) -> Result<Self> {
        check_store(&model, index.store())?;
        if search.nprobe == 0 || search.nprobe > index.nlist() || search.candidates == 0 {
            return Err(Error::param(
                "search",
                format!(
                    "nprobe {} must lie in 1..=nlist ({}) and candidates {} be at least 1",
                    search.nprobe,
                    index.nlist(),
                    search.candidates
                ),
            ));
        }
        Ok(MaxSimApprox {
            model,
            index,
            search,
        })
    }

    /// The index.
    pub fn index(&self) -> &ApproxTokenIndex {
        &self.index
    }

    /// The search parameters.
    pub fn search_params(&self) -> &ApproxSearch {
        &self.search
    }
}

impl Retriever for MaxSimApprox {
    /// `maxsim-plaid-minilm-raw384-nlist1024-iter20-seed42-mp256-nprobe4-cand64`.
    fn name(&self) -> String {
        format!(
            "maxsim-plaid-{}-{}-{}",
            self.model.label(),
            self.index.key.params.tag(),
            self.search.tag()
        )
    }

    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        check_k(k)?;
        let q = self.model.encode_query(query)?;
        self.index.search(&q.vectors, k, &self.search)
    }
}
