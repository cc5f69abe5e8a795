//! [`VectorIndex`]: FAISS vector indexes (feature `faiss`) built with `index_factory`.
//!
//! | [`IndexKind`] | factory string | search |
//! |---|---|---|
//! | `Flat` | `Flat` | exact (report 000 used `IndexFlatL2`) |
//! | `IvfFlat { nlist, nprobe }` | `IVF{nlist},Flat` | the `nprobe` nearest of `nlist` k-means cells |
//! | `Hnsw { m, ef_search, ef_construction }` | `HNSW{m}` | graph search with a beam of `ef_search` |
//!
//! each with [`Metric::InnerProduct`] (cosine on normalised vectors) or
//! [`Metric::L2`]. [`VectorIndex::search`] returns `(position, value)` pairs best
//! first, where position is the insertion order and value is what FAISS
//! returns: the inner product (higher is better) or the **squared** L2 distance
//! (lower is better).
//!
//! IVF needs training: [`VectorIndex::add`] trains an untrained index on the
//! vectors it is given first (all of them, or a seeded sample of
//! [`IVF_TRAIN_PER_LIST`]` · nlist` when there are more; FAISS' k-means has its
//! own fixed seed, so builds are reproducible).
//!
//! [`VectorIndex::save`] writes the index with FAISS' `write_index` and a header
//! `<path>.json` (kind, parameters, metric, dim, count, the embedding-cache key of
//! the vectors and the sha256 of the FAISS file); [`VectorIndex::load`] rejects an
//! index whose header, FAISS file and expected embedding key disagree. The FAISS
//! file is checked against its sha256 **before** FAISS parses it: FAISS reads
//! damaged files without complaint (`tests/fuzz.rs` found one it loaded with a
//! metric code the `faiss` crate cannot map, which panics in `metric_type`), and
//! it trusts the sizes inside them.

use crate::{Error, Result};
use ::faiss::index::autotune::ParameterSpace;
use ::faiss::index::IndexImpl;
use ::faiss::{Index, MetricType};
use rand::seq::index::sample;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Training vectors per IVF list at most (FAISS' own k-means sample cap is 256).
pub const IVF_TRAIN_PER_LIST: usize = 256;
/// Seed of the IVF training sample.
pub const IVF_TRAIN_SEED: u64 = 0x5EED_F00D;

/// Similarity of the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Inner product (cosine for normalised vectors); higher is better.
    #[default]
    InnerProduct,
    /// Squared Euclidean distance; lower is better.
    L2,
}

impl Metric {
    fn faiss(self) -> MetricType {
        match self {
            Metric::InnerProduct => MetricType::InnerProduct,
            Metric::L2 => MetricType::L2,
        }
    }
    /// Short tag used in names: `ip` / `l2`.
    pub fn tag(self) -> &'static str {
        match self {
            Metric::InnerProduct => "ip",
            Metric::L2 => "l2",
        }
    }
}

/// The index structure and its search parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum IndexKind {
    /// Exact search over all vectors.
    Flat,
    /// Inverted file over `nlist` k-means cells, probing `nprobe` of them.
    IvfFlat {
        /// Number of cells (k-means centroids). A rule of thumb is `4·√n`; see [`IndexKind::ivf_for`].
        nlist: usize,
        /// Cells visited per query (1..=nlist). More is slower and more exact.
        nprobe: usize,
    },
    /// Hierarchical navigable small-world graph.
    Hnsw {
        /// Neighbours per node (FAISS' `M`). Default 32.
        m: usize,
        /// Beam width at search time (≥ k for good recall). Default 64.
        ef_search: usize,
        /// Beam width at build time. Default 80.
        ef_construction: usize,
    },
}

impl IndexKind {
    /// HNSW with `M = 32`, `efSearch = 64`, `efConstruction = 80`.
    pub fn hnsw() -> Self {
        IndexKind::Hnsw {
            m: 32,
            ef_search: 64,
            ef_construction: 80,
        }
    }

    /// IVF-Flat sized for `n` vectors: `nlist = 4·√n` (at most `n / 39`, the
    /// fewest training points per cell FAISS accepts without a warning, and at
    /// least 1) and `nprobe = max(1, nlist / 8)`.
    pub fn ivf_for(n: usize) -> Self {
        let nlist = ((4.0 * (n as f64).sqrt()).round() as usize)
            .min(n / 39)
            .max(1);
        IndexKind::IvfFlat {
            nlist,
            nprobe: (nlist / 8).max(1),
        }
    }

    /// FAISS `index_factory` description.
    pub fn factory(&self) -> String {
        match *self {
            IndexKind::Flat => "Flat".into(),
            IndexKind::IvfFlat { nlist, .. } => format!("IVF{nlist},Flat"),
            IndexKind::Hnsw { m, .. } => format!("HNSW{m}"),
        }
    }

    /// Short name with parameters: `flat`, `ivf256-nprobe8`, `hnsw32-ef64`.
    pub fn tag(&self) -> String {
        match *self {
            IndexKind::Flat => "flat".into(),
            IndexKind::IvfFlat { nlist, nprobe } => format!("ivf{nlist}-nprobe{nprobe}"),
            IndexKind::Hnsw { m, ef_search, .. } => format!("hnsw{m}-ef{ef_search}"),
        }
    }

    /// Reject values that cannot work.
    pub fn check(&self) -> Result<()> {
        match *self {
            IndexKind::Flat => Ok(()),
            IndexKind::IvfFlat { nlist, nprobe } => {
                if nlist == 0 {
                    return Err(Error::param("nlist", "must be at least 1"));
                }
                if nprobe == 0 || nprobe > nlist {
                    return Err(Error::param(
                        "nprobe",
                        format!("{nprobe} must lie in 1..=nlist ({nlist})"),
                    ));
                }
                Ok(())
            }
            IndexKind::Hnsw {
                m,
                ef_search,
                ef_construction,
            } => {
                if m < 2 {
                    return Err(Error::param("m", format!("{m} must be at least 2")));
                }
                if ef_search == 0 {
                    return Err(Error::param("ef_search", "must be at least 1"));
                }
                if ef_construction == 0 {
                    return Err(Error::param("ef_construction", "must be at least 1"));
                }
                Ok(())
            }
        }
    }
}

/// Kind plus metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexParams {
    /// Structure and search parameters.
    pub kind: IndexKind,
    /// Similarity.
    pub metric: Metric,
}

impl IndexParams {
    /// Exact inner-product search (cosine on normalised vectors).
    pub fn flat_ip() -> Self {
        IndexParams {
            kind: IndexKind::Flat,
            metric: Metric::InnerProduct,
        }
    }
    /// Exact L2 search (report 000's `IndexFlatL2`).
    pub fn flat_l2() -> Self {
        IndexParams {
            kind: IndexKind::Flat,
            metric: Metric::L2,
        }
    }
    /// Any kind with inner product.
    pub fn ip(kind: IndexKind) -> Self {
        IndexParams {
            kind,
            metric: Metric::InnerProduct,
        }
    }
    /// `flat-ip`, `hnsw32-ef64-ip`, …
    pub fn tag(&self) -> String {
        format!("{}-{}", self.kind.tag(), self.metric.tag())
    }
}

/// The header written next to a saved index (`<index path>.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexHeader {
    /// Header format version.
    pub format: u32,
    /// Kind and metric.
    pub params: IndexParams,
    /// Vector dimension.
    pub dim: usize,
    /// Number of vectors.
    pub count: usize,
    /// Embedding-cache key of the vectors (`encode::EmbeddingCache::key`), if known.
    pub embedding_key: Option<String>,
    /// The FAISS factory string.
    pub factory: String,
    /// sha256 of the FAISS file, lowercase hex.
    pub faiss_sha256: String,
}

/// Format 2 added `faiss_sha256`.
const HEADER_FORMAT: u32 = 2;

/// A FAISS index. See the module docs. Searches take `&self` (an internal lock
/// serialises them; FAISS parallelises a batch of queries itself).
pub struct VectorIndex {
    inner: Mutex<IndexImpl>,
    params: IndexParams,
    dim: usize,
    count: usize,
    embedding_key: Option<String>,
}

impl std::fmt::Debug for VectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorIndex")
            .field("params", &self.params)
            .field("dim", &self.dim)
            .field("count", &self.count)
            .field("embedding_key", &self.embedding_key)
            .finish_non_exhaustive()
    }
}

fn ferr(what: &str, e: ::faiss::error::Error) -> Error {
    Error::Faiss(format!("{what}: {e}"))
}

fn flatten(vectors: &[Vec<f32>], dim: usize, what: &'static str) -> Result<Vec<f32>> {
    let mut flat = Vec::with_capacity(vectors.len() * dim);
    for (i, v) in vectors.iter().enumerate() {
        if v.len() != dim {
            return Err(Error::param(
                what,
                format!("vector {i} has {} dimensions, the index has {dim}", v.len()),
            ));
        }
        flat.extend_from_slice(v);
    }
    Ok(flat)
}

impl VectorIndex {
    /// An empty index for `dim`-dimensional vectors.
    pub fn new(params: IndexParams, dim: usize) -> Result<Self> {
        params.kind.check()?;
        if dim == 0 || dim > i32::MAX as usize {
            return Err(Error::param(
                "dim",
                format!("{dim} is not a usable dimension"),
            ));
        }
        let index =
            ::faiss::index_factory(dim as u32, params.kind.factory(), params.metric.faiss())
                .map_err(|e| {
                    ferr(
                        &format!("index_factory({dim}, {})", params.kind.factory()),
                        e,
                    )
                })?;
        let me = VectorIndex {
            inner: Mutex::new(index),
            params,
            dim,
            count: 0,
            embedding_key: None,
        };
        me.apply_search_params()?;
        Ok(me)
    }

    /// A new index holding `vectors` (trained on them first when the kind needs it).
    pub fn build(params: IndexParams, dim: usize, vectors: &[Vec<f32>]) -> Result<Self> {
        let mut index = Self::new(params, dim)?;
        index.add(vectors)?;
        Ok(index)
    }

    /// Record the embedding-cache key of the vectors (saved in the header; checked by [`load`](Self::load)).
    pub fn with_embedding_key(mut self, key: impl Into<String>) -> Self {
        self.embedding_key = Some(key.into());
        self
    }

    fn apply_search_params(&self) -> Result<()> {
        let set = |name: &str, value: usize| -> Result<()> {
            let space = ParameterSpace::new().map_err(|e| ferr("ParameterSpace", e))?;
            let index = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            space
                .set_index_parameter(&*index, name, value as f64)
                .map_err(|e| ferr(&format!("set {name} = {value}"), e))
        };
        match self.params.kind {
            IndexKind::Flat => Ok(()),
            IndexKind::IvfFlat { nprobe, .. } => set("nprobe", nprobe),
            IndexKind::Hnsw {
                ef_search,
                ef_construction,
                ..
            } => {
                set("efConstruction", ef_construction)?;
                set("efSearch", ef_search)
            }
        }
    }

    /// Append vectors (positions continue from [`len`](Self::len)). An IVF
    /// index that is not trained yet is first trained on these vectors; it
    /// then needs at least `nlist` of them.
    pub fn add(&mut self, vectors: &[Vec<f32>]) -> Result<()> {
        if vectors.is_empty() {
            return Ok(());
        }
        let flat = flatten(vectors, self.dim, "vectors")?;
        let mut index = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if !index.is_trained() {
            if let IndexKind::IvfFlat { nlist, .. } = self.params.kind {
                if vectors.len() < nlist {
                    return Err(Error::param(
                        "nlist",
                        format!(
                            "{nlist} cells need at least {nlist} training vectors; got {}",
                            vectors.len()
                        ),
                    ));
                }
                let cap = IVF_TRAIN_PER_LIST * nlist;
                if vectors.len() > cap {
                    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(IVF_TRAIN_SEED);
                    let mut picked = sample(&mut rng, vectors.len(), cap).into_vec();
                    picked.sort_unstable();
                    let mut train = Vec::with_capacity(cap * self.dim);
                    for i in picked {
                        train.extend_from_slice(&vectors[i]);
                    }
                    index.train(&train).map_err(|e| ferr("train", e))?;
                } else {
                    index.train(&flat).map_err(|e| ferr("train", e))?;
                }
            } else {
                index.train(&flat).map_err(|e| ferr("train", e))?;
            }
        }
        index.add(&flat).map_err(|e| ferr("add", e))?;
        self.count = index.ntotal() as usize;
        Ok(())
    }

    /// Top-`k` `(position, value)` per query, best first (see the module docs
    /// for what value means). Fewer than `k` when the index holds fewer
    /// vectors (or an approximate search finds fewer). `k == 0` is an error.
    pub fn search(&self, queries: &[Vec<f32>], k: usize) -> Result<Vec<Vec<(usize, f32)>>> {
        crate::retrieve::check_k(k)?;
        if queries.is_empty() {
            return Ok(Vec::new());
        }
        if self.count == 0 {
            return Ok(vec![Vec::new(); queries.len()]);
        }
        let flat = flatten(queries, self.dim, "queries")?;
        let k_eff = k.min(self.count);
        let res = {
            let mut index = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            index.search(&flat, k_eff).map_err(|e| ferr("search", e))?
        };
        Ok(res
            .labels
            .chunks(k_eff)
            .zip(res.distances.chunks(k_eff))
            .map(|(labels, dists)| {
                labels
                    .iter()
                    .zip(dists)
                    .filter_map(|(l, &d)| l.get().map(|p| (p as usize, d)))
                    .collect()
            })
            .collect())
    }

    /// Kind and metric.
    pub fn params(&self) -> &IndexParams {
        &self.params
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of vectors.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when the index holds no vector.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The embedding-cache key recorded for the vectors, if any.
    pub fn embedding_key(&self) -> Option<&str> {
        self.embedding_key.as_deref()
    }

    /// The header path of an index saved at `path`: `<path>.json`.
    pub fn header_path(path: &Path) -> PathBuf {
        let mut s = path.as_os_str().to_owned();
        s.push(".json");
        PathBuf::from(s)
    }

    fn header(&self, faiss_sha256: String) -> IndexHeader {
        IndexHeader {
            format: HEADER_FORMAT,
            params: self.params,
            dim: self.dim,
            count: self.count,
            embedding_key: self.embedding_key.clone(),
            factory: self.params.kind.factory(),
            faiss_sha256,
        }
    }

    /// Write the index (FAISS `write_index`) and its header `<path>.json`.
    pub fn save(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let p = path
            .to_str()
            .ok_or_else(|| Error::bad_input(path, "index path is not valid UTF-8"))?;
        let hp = Self::header_path(path);
        let _ = std::fs::remove_file(&hp);
        {
            let index = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            ::faiss::write_index(&*index, p)
                .map_err(|e| ferr(&format!("write_index {}", path.display()), e))?;
        }
        let sha = crate::assets::sha256_file(path)?;
        let json = serde_json::to_string_pretty(&self.header(sha))?;
        std::fs::write(&hp, json).map_err(|e| Error::io(&hp, e))
    }

    /// Read an index saved by [`save`](Self::save). The header must exist, the
    /// FAISS file must have the sha256 it records (checked before FAISS reads
    /// it) and agree with it (dimension, count, metric); when `expected_key` is
    /// given the header must record exactly that embedding key — otherwise the
    /// index was built from other vectors. Every rejection is an error naming the
    /// file at fault.
    pub fn load(path: &Path, expected_key: Option<&str>) -> Result<Self> {
        let hp = Self::header_path(path);
        let text = std::fs::read_to_string(&hp).map_err(|e| Error::io(&hp, e))?;
        let header: IndexHeader = serde_json::from_str(&text).map_err(|e| {
            let format = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.get("format").and_then(|f| f.as_u64()));
            match format {
                Some(f) if f != HEADER_FORMAT as u64 => Error::bad_input(
                    &hp,
                    format!("header format {f} (expected {HEADER_FORMAT}); rebuild the index"),
                ),
                _ => Error::bad_input(&hp, e.to_string()),
            }
        })?;
        if header.format != HEADER_FORMAT {
            return Err(Error::bad_input(
                &hp,
                format!("header format {} (expected {HEADER_FORMAT})", header.format),
            ));
        }
        header
            .params
            .kind
            .check()
            .map_err(|e| Error::bad_input(&hp, format!("index parameters: {e}")))?;
        if header.dim == 0 || header.dim > i32::MAX as usize {
            return Err(Error::bad_input(
                &hp,
                format!("dim {} is not a usable dimension", header.dim),
            ));
        }
        if let Some(want) = expected_key {
            if header.embedding_key.as_deref() != Some(want) {
                return Err(Error::bad_input(
                    &hp,
                    format!(
                        "index was built from embeddings {}, expected {want}; rebuild it",
                        header.embedding_key.as_deref().unwrap_or("(unrecorded)")
                    ),
                ));
            }
        }
        let p = path
            .to_str()
            .ok_or_else(|| Error::bad_input(path, "index path is not valid UTF-8"))?;
        if !path.is_file() {
            return Err(Error::io(
                path,
                std::io::Error::new(std::io::ErrorKind::NotFound, "index file not found"),
            ));
        }
        let actual = crate::assets::sha256_file(path)?;
        if !actual.eq_ignore_ascii_case(&header.faiss_sha256) {
            return Err(Error::bad_input(
                path,
                format!(
                    "FAISS file has sha256 {actual}, header {} says {} (damaged, or saved by another build); rebuild the index",
                    hp.display(),
                    header.faiss_sha256
                ),
            ));
        }
        let index = ::faiss::read_index(p)
            .map_err(|e| ferr(&format!("read_index {}", path.display()), e))?;
        let (d, n, metric) = (
            index.d() as usize,
            index.ntotal() as usize,
            index.metric_type(),
        );
        if d != header.dim || n != header.count || metric != header.params.metric.faiss() {
            return Err(Error::bad_input(
                path,
                format!(
                    "FAISS file has dim {d}, {n} vectors, metric {metric:?}; header {} says dim {}, {} vectors, metric {:?}",
                    hp.display(),
                    header.dim,
                    header.count,
                    header.params.metric
                ),
            ));
        }
        let me = VectorIndex {
            inner: Mutex::new(index),
            params: header.params,
            dim: header.dim,
            count: header.count,
            embedding_key: header.embedding_key,
        };
        me.apply_search_params()?;
        Ok(me)
    }
}
