//! ColBERT projection training (report 003): a linear head `d × 384` on
//! **frozen** MiniLM token vectors, trained with report 003's loss.
//!
//! ## The loss
//!
//! For a batch of `B` training groups (question, positive, BM25 hard negatives) the
//! candidates are every passage of the batch (each group's positive and negatives, and
//! the other groups' passages: in-batch negatives; a passage in several groups counts
//! once). With the query's token vectors `q_i` and a passage's `d_j`, projected by `W`
//! and L2-normalised,
//!
//! ```text
//! S(q, p) = Σ_i max_j cos(W q_i, W d_j)        (= N_q · mean-MaxSim)
//! L = − log softmax_p S(q, p) [positive]       (cross-entropy over the batch's passages)
//! ```
//!
//! The sum over query tokens is the mean-MaxSim of [`late_interaction`] scaled by the
//! query's token count (`[CLS]` and `[SEP]` are dropped as in the token store). Queries of
//! a batch are zero-padded to the longest: a zero row stays zero after normalisation, so
//! its cosine with every passage token is 0 and it adds nothing to `S`.
//!
//! ## Markers
//!
//! ColBERT's input format (`[Q]` / `[D]` markers after `[CLS]`, queries padded with `[MASK]`
//! to `N_q` ids) is a recipe switch, [`ColbertRecipe::markers`], **off by default**: on the
//! frozen MiniLM, which never saw those tokens, it costs more than the head can win back.
//! On the held-out SQuAD articles (TF-IDF top-100 re-ranked), raw 384-d MaxSim loses much
//! of its MRR@10 with the markers, and a d = 128 head trained with them stays below the
//! untrained PCA head without them (the numbers: `docs/report003.md`, "Trained ColBERT
//! projections"). ColBERT fine-tunes the encoder with its markers; this head cannot.
//!
//! ## Why the encoder is frozen
//!
//! On 2 shared cores a MiniLM forward+backward over 16 groups × (1 + negatives)
//! passages of ~150 wordpieces costs seconds per update (the reader's fine-tuning runs at
//! a few examples per second); the projection alone on cached token vectors costs
//! milliseconds. So the token vectors of every training text are computed once (with
//! the markers, [`TokenVectors`], cached on disk by content) and only `W` is trained:
//! the sweep over `d` reuses one cache. ColBERT proper fine-tunes BERT too; this is the
//! substitution, named in names (`minilm-proj{d}-…-qd{N_q}`) and in `docs/reports.md`.
//!
//! The trained `W` is saved as `linear.weight` in `projection.safetensors` under
//! `data/cache/colbert/<key>/`, which [`Projection::load`] reads as any ColBERT
//! checkpoint's final layer; the key covers the recipe and every input file.
//!
//! [`late_interaction`]: crate::rerank::late_interaction

use super::groups::{training_groups, Group, GroupParams, GroupSet};
use super::reader::{load_average, ReaderRecipe, Supervision};
use super::{candle_err, Stop, TrainConfig, TrainData, TrainLog, Trainable};
use crate::assets::Assets;
use crate::encode::{BertEncoder, EncoderParams};
use crate::rerank::late_interaction::{LateInteraction, Projection};
use crate::{Error, Result};
use candle_core::{Device, Tensor};
use candle_nn::VarMap;
use half::f16;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Version of the cache layout and training code; part of every key.
pub const COLBERT_CACHE_VERSION: &str = "workbench-colbert-v1";

/// Name of the trained weight in `projection.safetensors` (ColBERT's final layer).
pub const WEIGHT_NAME: &str = "linear.weight";

/// Additive mask of padded passage positions (cosines are in `[-1, 1]`).
const PAD_SCORE: f64 = -1.0e4;

/// Everything that determines a trained projection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColbertRecipe {
    /// A label (not part of the key).
    pub name: String,
    /// The encoder asset (frozen).
    pub base: String,
    /// Supervision sources and split (the reader's).
    pub supervision: Supervision,
    /// How the hard negatives are drawn.
    pub groups: GroupParams,
    /// Hard negatives used per group (a prefix of the drawn ones).
    pub negatives: usize,
    /// Output dimension `d`.
    pub dim: usize,
    /// ColBERT's input format: `[Q]`/`[D]` markers and `[MASK]` query padding to `n_q`
    /// ids (see the module docs: off by default on the frozen encoder).
    pub markers: bool,
    /// Query length in ids with the markers (ColBERT: 32); unused without them.
    pub n_q: usize,
    /// Passage truncation (the encoder's `max_length`).
    pub max_length: usize,
    /// Keep only this many groups (a seeded sample), for a run that fits the budget.
    pub max_groups: Option<usize>,
    /// How `W` starts.
    pub init: HeadInit,
    /// Seed of `W`'s initialisation (used by [`HeadInit::Random`]).
    pub init_seed: u64,
    /// The training loop's configuration.
    pub train: TrainConfig,
}

/// How the head's weight `W` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeadInit {
    /// Seeded Gaussian, std `1/√h`: a random projection, which roughly keeps cosines.
    Random,
    /// The top-`d` eigenvectors of the training token vectors' uncentred second-moment
    /// matrix: the rank-`d` projection that best keeps their inner products, so training
    /// starts close to raw MaxSim instead of from a random one.
    Pca,
}

/// Rows of the token vectors [`HeadInit::Pca`] reads (evenly strided when there are more).
pub const PCA_MAX_ROWS: usize = 65_536;

impl ColbertRecipe {
    /// The default recipe at dimension `dim`: the reader's supervision (SQuAD training
    /// articles, RAG Mini, NQ distant supervision), 3 BM25 hard negatives per question
    /// plus in-batch negatives, no markers, 2,000 groups, 3 epochs of batches of 16.
    pub fn default_minilm(dim: usize) -> Self {
        ColbertRecipe {
            name: format!("minilm-colbert-d{dim}"),
            base: "all-minilm-l6-v2".into(),
            supervision: ReaderRecipe::default_minilm().supervision,
            groups: GroupParams::default(),
            negatives: 3,
            dim,
            markers: false,
            n_q: 32,
            max_length: EncoderParams::default().max_length,
            max_groups: Some(2000),
            init: HeadInit::Pca,
            init_seed: 42,
            train: TrainConfig {
                epochs: 3,
                batch_size: 16,
                lr: 1e-3,
                warmup_ratio: 0.1,
                max_grad_norm: Some(1.0),
                seed: 42,
                bucket_batches: 0,
                threads: 2,
                checkpoint_every: Some(100),
                ..TrainConfig::default()
            },
        }
    }

    /// Check the values.
    pub fn check(&self) -> Result<()> {
        self.groups.check()?;
        self.train.check()?;
        if self.dim == 0 {
            return Err(Error::param("dim", "must be at least 1"));
        }
        if self.negatives > self.groups.negatives {
            return Err(Error::param(
                "negatives",
                format!(
                    "{} used but only {} drawn per group",
                    self.negatives, self.groups.negatives
                ),
            ));
        }
        if self.max_groups == Some(0) {
            return Err(Error::param("max_groups", "must be at least 1"));
        }
        Ok(())
    }

    /// The asset names the recipe reads.
    pub fn inputs(&self) -> Vec<String> {
        let r = ReaderRecipe {
            base: self.base.clone(),
            supervision: self.supervision.clone(),
            ..ReaderRecipe::default_minilm()
        };
        r.inputs().into_iter().map(String::from).collect()
    }

    /// The cache key: sha256 of [`COLBERT_CACHE_VERSION`], the recipe (name aside) and
    /// every input file's sha256.
    pub fn key(&self, assets: &Assets) -> Result<String> {
        let unnamed = ColbertRecipe {
            name: String::new(),
            ..self.clone()
        };
        let mut h = Sha256::new();
        let mut field = |b: &[u8]| {
            h.update((b.len() as u64).to_le_bytes());
            h.update(b);
        };
        field(COLBERT_CACHE_VERSION.as_bytes());
        field(serde_json::to_string(&unnamed)?.as_bytes());
        for (file, sha) in assets.input_checksums(self.inputs().iter().map(String::as_str))? {
            field(file.as_bytes());
            field(sha.as_bytes());
        }
        Ok(hex::encode(h.finalize())[..16].to_string())
    }
}

/// Token vectors of many texts: one flat `f16` array of `dim`-wide rows and each text's
/// row range.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenVectors {
    /// Row width.
    pub dim: usize,
    /// Row-major vectors.
    pub data: Vec<f16>,
    /// Text `i` has rows `offsets[i]..offsets[i + 1]`.
    pub offsets: Vec<usize>,
}

impl TokenVectors {
    /// An empty set of `dim`-wide rows.
    pub fn new(dim: usize) -> Self {
        TokenVectors {
            dim,
            data: Vec::new(),
            offsets: vec![0],
        }
    }

    /// Append one text's rows (row-major `f32`).
    pub fn push(&mut self, rows: &[f32]) -> Result<()> {
        if !rows.len().is_multiple_of(self.dim) {
            return Err(Error::param(
                "token vectors",
                format!("{} values are not rows of {}", rows.len(), self.dim),
            ));
        }
        self.data.extend(rows.iter().map(|&x| f16::from_f32(x)));
        self.offsets.push(self.data.len() / self.dim);
        Ok(())
    }

    /// Number of texts.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True when there are no texts.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows of text `i`.
    pub fn rows(&self, i: usize) -> usize {
        self.offsets[i + 1] - self.offsets[i]
    }

    /// Copy text `i`'s rows as `f32` into `out` (which must hold `rows(i) * dim`).
    fn copy_into(&self, i: usize, out: &mut [f32]) {
        let s = &self.data[self.offsets[i] * self.dim..self.offsets[i + 1] * self.dim];
        for (o, x) in out.iter_mut().zip(s) {
            *o = x.to_f32();
        }
    }

    /// Save as safetensors (`vectors`: `f16` rows, `offsets`: `u32`).
    pub fn save(&self, path: &Path) -> Result<()> {
        let n = self.data.len() / self.dim;
        let v = Tensor::from_slice(&self.data, (n, self.dim), &Device::Cpu)
            .map_err(candle_err("token vectors"))?;
        let off: Vec<u32> = self.offsets.iter().map(|&o| o as u32).collect();
        let o = Tensor::from_slice(&off, off.len(), &Device::Cpu)
            .map_err(candle_err("token vectors"))?;
        let tmp = path.with_extension("tmp");
        candle_core::safetensors::save(
            &HashMap::from([("vectors".to_string(), v), ("offsets".to_string(), o)]),
            &tmp,
        )
        .map_err(|e| Error::bad_input(&tmp, e.to_string()))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    }

    /// Load what [`save`](Self::save) wrote; a file whose offsets do not cover its rows
    /// exactly is an error.
    pub fn load(path: &Path) -> Result<Self> {
        let t = candle_core::safetensors::load(path, &Device::Cpu)
            .map_err(|e| Error::bad_input(path, format!("not a readable safetensors file: {e}")))?;
        let get = |k: &str| {
            t.get(k)
                .ok_or_else(|| Error::bad_input(path, format!("missing tensor `{k}`")))
        };
        let v = get("vectors")?;
        let (n, dim) = v
            .dims2()
            .map_err(|e| Error::bad_input(path, e.to_string()))?;
        let data: Vec<f16> = v
            .flatten_all()
            .and_then(|t| t.to_vec1())
            .map_err(|e| Error::bad_input(path, e.to_string()))?;
        let offsets: Vec<usize> = get("offsets")?
            .to_vec1::<u32>()
            .map_err(|e| Error::bad_input(path, e.to_string()))?
            .into_iter()
            .map(|o| o as usize)
            .collect();
        let ok = offsets.first() == Some(&0)
            && offsets.last() == Some(&n)
            && offsets.windows(2).all(|w| w[0] <= w[1]);
        if !ok || dim == 0 {
            return Err(Error::bad_input(
                path,
                format!("offsets do not cover the {n} rows"),
            ));
        }
        Ok(TokenVectors { dim, data, offsets })
    }
}

/// The training set: token vectors of the queries and of the distinct passages, and
/// each group as (query, positive, negatives) indices.
#[derive(Debug, Clone, PartialEq)]
pub struct ColbertData {
    /// Query token vectors (`N_q - 3` rows each with markers on, else one per wordpiece).
    pub queries: TokenVectors,
    /// Passage token vectors.
    pub passages: TokenVectors,
    /// Per group: query index, positive passage index, negative passage indices.
    pub groups: Vec<(usize, usize, Vec<usize>)>,
}

/// A collated batch.
#[derive(Debug)]
pub struct ColbertBatch {
    /// `(B, n, h)` query rows, zero-padded to the longest query (a zero row adds 0 to
    /// every score).
    pub queries: Tensor,
    /// `(P, L, h)` passage rows, zero-padded.
    pub passages: Tensor,
    /// `(P, L)` additive mask: 0 on tokens, −10⁴ on padding.
    pub mask: Tensor,
    /// `(B,)` index of each query's positive among the `P` passages.
    pub targets: Tensor,
}

impl ColbertData {
    /// Collate groups `idx`: their queries, the distinct passages of all of them.
    pub fn batch(&self, idx: &[usize]) -> Result<ColbertBatch> {
        let h = self.queries.dim;
        if self.passages.dim != h {
            return Err(Error::param(
                "token vectors",
                format!("queries are {h}-d, passages {}-d", self.passages.dim),
            ));
        }
        let mut pos = HashMap::new();
        let mut order = Vec::new();
        let mut targets = Vec::with_capacity(idx.len());
        let mut slot = |p: usize, order: &mut Vec<usize>| -> u32 {
            *pos.entry(p).or_insert_with(|| {
                order.push(p);
                order.len() - 1
            }) as u32
        };
        for &g in idx {
            let (_, p, negs) = &self.groups[g];
            targets.push(slot(*p, &mut order));
            for &n in negs {
                slot(n, &mut order);
            }
        }
        let nq = idx
            .iter()
            .map(|&g| self.queries.rows(self.groups[g].0))
            .max()
            .unwrap_or(0);
        if let Some(&g) = idx
            .iter()
            .find(|&&g| self.queries.rows(self.groups[g].0) == 0)
        {
            return Err(Error::param(
                "queries",
                format!("the query of group {g} has no token vectors"),
            ));
        }
        let mut q = vec![0f32; idx.len() * nq * h];
        for (b, &g) in idx.iter().enumerate() {
            let r = self.queries.rows(self.groups[g].0);
            self.queries
                .copy_into(self.groups[g].0, &mut q[b * nq * h..(b * nq + r) * h]);
        }
        let l = order
            .iter()
            .map(|&p| self.passages.rows(p))
            .max()
            .unwrap_or(0)
            .max(1);
        let mut d = vec![0f32; order.len() * l * h];
        let mut m = vec![PAD_SCORE as f32; order.len() * l];
        for (k, &p) in order.iter().enumerate() {
            let r = self.passages.rows(p);
            self.passages
                .copy_into(p, &mut d[k * l * h..(k * l + r) * h]);
            m[k * l..k * l + r].iter_mut().for_each(|x| *x = 0.0);
        }
        let dev = &Device::Cpu;
        let t = candle_err("collate");
        Ok(ColbertBatch {
            queries: Tensor::from_vec(q, (idx.len(), nq, h), dev).map_err(&t)?,
            passages: Tensor::from_vec(d, (order.len(), l, h), dev).map_err(&t)?,
            mask: Tensor::from_vec(m, (order.len(), l), dev).map_err(&t)?,
            targets: Tensor::from_vec(targets, idx.len(), dev).map_err(&t)?,
        })
    }
}

impl TrainData for ColbertData {
    type Batch = ColbertBatch;
    fn len(&self) -> usize {
        self.groups.len()
    }
    fn length(&self, i: usize) -> usize {
        self.passages.rows(self.groups[i].1)
    }
    fn collate(&self, idx: &[usize]) -> Result<ColbertBatch> {
        self.batch(idx)
    }
}

/// The trainable head: `W` (`d × h`), no bias.
pub struct ColbertHead {
    /// Holds `linear.weight`.
    pub vars: VarMap,
    weight: Tensor,
}

/// Rows divided by their L2 norm (zero rows stay zero).
fn normalize(x: &Tensor) -> candle_core::Result<Tensor> {
    let n = (x.sqr()?.sum_keepdim(1)? + 1e-12)?.sqrt()?;
    x.broadcast_div(&n)
}

impl ColbertHead {
    /// A head with a seeded Gaussian initialisation (std `1/√h`: a random projection,
    /// which roughly keeps cosines).
    pub fn new(dim: usize, in_dim: usize, seed: u64) -> Result<Self> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let std = 1.0 / (in_dim as f32).sqrt();
        let w: Vec<f32> = (0..dim * in_dim)
            .map(|_| {
                // Box–Muller.
                let u1: f32 = rng.gen::<f32>().max(f32::MIN_POSITIVE);
                let u2: f32 = rng.gen();
                std * (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
            })
            .collect();
        Self::from_weight(w, dim, in_dim)
    }

    /// A head whose rows are the top-`dim` eigenvectors of the uncentred second-moment
    /// matrix `XᵀX` of the token vectors `sets` hold (at most [`PCA_MAX_ROWS`] rows, evenly
    /// strided over all of them), largest eigenvalue first.
    pub fn pca(dim: usize, sets: &[&TokenVectors]) -> Result<Self> {
        let h = sets.first().map_or(0, |s| s.dim);
        if sets.iter().any(|s| s.dim != h) || h == 0 {
            return Err(Error::param(
                "token vectors",
                "PCA needs token vectors of one non-zero width",
            ));
        }
        if dim == 0 || dim > h {
            return Err(Error::param(
                "dim",
                format!("{dim} is not in 1..={h} (PCA of {h}-d token vectors)"),
            ));
        }
        let total: usize = sets.iter().map(|s| s.data.len() / h).sum();
        if total == 0 {
            return Err(Error::param("token vectors", "no rows to take a PCA of"));
        }
        let step = total.div_ceil(PCA_MAX_ROWS);
        let mut x = Vec::with_capacity(total.div_ceil(step) * h);
        let mut i = 0usize;
        for s in sets {
            for row in s.data.chunks_exact(h) {
                if i.is_multiple_of(step) {
                    x.extend(row.iter().map(|v| v.to_f32()));
                }
                i += 1;
            }
        }
        let n = x.len() / h;
        let t = candle_err("pca");
        let xt = Tensor::from_vec(x, (n, h), &Device::Cpu).map_err(&t)?;
        let m: Vec<f32> = xt
            .t()
            .and_then(|a| a.matmul(&xt))
            .and_then(|m| m.flatten_all())
            .and_then(|m| m.to_vec1())
            .map_err(&t)?;
        let m = nalgebra::DMatrix::from_row_iterator(h, h, m.into_iter().map(f64::from));
        let eig = nalgebra::SymmetricEigen::new(m);
        let mut order: Vec<usize> = (0..h).collect();
        order.sort_by(|&a, &b| eig.eigenvalues[b].total_cmp(&eig.eigenvalues[a]));
        let mut w = Vec::with_capacity(dim * h);
        for &k in &order[..dim] {
            w.extend(eig.eigenvectors.column(k).iter().map(|&v| v as f32));
        }
        Self::from_weight(w, dim, h)
    }

    /// A head with an explicit row-major `dim × in_dim` weight.
    pub fn from_weight(w: Vec<f32>, dim: usize, in_dim: usize) -> Result<Self> {
        let vars = VarMap::new();
        let t = Tensor::from_vec(w, (dim, in_dim), &Device::Cpu).map_err(candle_err("init"))?;
        let var = candle_core::Var::from_tensor(&t).map_err(candle_err("init"))?;
        let weight = var.as_tensor().clone();
        vars.data()
            .lock()
            .map_err(|_| Error::param("vars", "the VarMap lock is poisoned"))?
            .insert(WEIGHT_NAME.to_string(), var);
        Ok(ColbertHead { vars, weight })
    }

    /// `(B, P)` scores `Σ_i max_j cos(W q_i, W d_j)` of every query with every passage.
    pub fn scores(&self, b: &ColbertBatch) -> candle_core::Result<Tensor> {
        let (nb, nq, h) = b.queries.dims3()?;
        let (np, l, _) = b.passages.dims3()?;
        let wt = self.weight.t()?;
        let q = normalize(&b.queries.reshape((nb * nq, h))?.matmul(&wt)?)?;
        let d = normalize(&b.passages.reshape((np * l, h))?.matmul(&wt)?)?;
        let sim = q.matmul(&d.t()?)?.reshape((nb, nq, np, l))?;
        let sim = sim.broadcast_add(&b.mask.reshape((1, 1, np, l))?)?;
        sim.max(3)?.sum(1)
    }

    /// Save `W` as `linear.weight` (safetensors).
    pub fn save(&self, path: &Path) -> Result<()> {
        self.vars
            .save(path)
            .map_err(|e| Error::bad_input(path, e.to_string()))
    }
}

impl Trainable for ColbertHead {
    type Batch = ColbertBatch;
    fn loss(&self, b: &ColbertBatch) -> candle_core::Result<Tensor> {
        candle_nn::loss::cross_entropy(&self.scores(b)?, &b.targets)
    }
}

/// Token vectors of the groups' texts, computed with `li`'s encoder and markers (no
/// projection), cached at `cache_dir/tokens-<key>.safetensors`, keyed by the encoder's
/// key and every text.
pub fn group_vectors(
    li: &LateInteraction,
    groups: &[Group],
    negatives: usize,
    cache_dir: &Path,
) -> Result<ColbertData> {
    if li.projection().is_some() {
        return Err(Error::param(
            "encoder",
            "training reads unprojected token vectors",
        ));
    }
    let mut pidx: HashMap<&str, usize> = HashMap::new();
    let mut ptexts: Vec<&str> = Vec::new();
    let mut out = Vec::with_capacity(groups.len());
    for (gi, g) in groups.iter().enumerate() {
        if g.negatives.len() < negatives {
            return Err(Error::param(
                "negatives",
                format!(
                    "group {} has {} negatives, {negatives} wanted",
                    g.id,
                    g.negatives.len()
                ),
            ));
        }
        let p = text_index(&mut pidx, &mut ptexts, &g.positive.text);
        let ns = g.negatives[..negatives]
            .iter()
            .map(|n| text_index(&mut pidx, &mut ptexts, &n.text))
            .collect();
        out.push((gi, p, ns));
    }
    let qtexts: Vec<&str> = groups.iter().map(|g| g.query.as_str()).collect();
    let key = {
        let k = li.store_key(&[]);
        let mut h = Sha256::new();
        for s in [COLBERT_CACHE_VERSION, &k.model_sha256, &k.encoder] {
            h.update((s.len() as u64).to_le_bytes());
            h.update(s.as_bytes());
        }
        for t in qtexts.iter().chain([&"\u{0}passages"]).chain(ptexts.iter()) {
            h.update((t.len() as u64).to_le_bytes());
            h.update(t.as_bytes());
        }
        hex::encode(h.finalize())[..16].to_string()
    };
    std::fs::create_dir_all(cache_dir).map_err(|e| Error::io(cache_dir, e))?;
    let encode = |texts: &[&str], query: bool, what: &str| -> Result<TokenVectors> {
        let path = cache_dir.join(format!("tokens-{key}-{what}.safetensors"));
        if path.exists() {
            match TokenVectors::load(&path) {
                Ok(v) if v.len() == texts.len() => return Ok(v),
                Ok(v) => eprintln!(
                    "re-encoding {}: {} texts, {} wanted",
                    path.display(),
                    v.len(),
                    texts.len()
                ),
                Err(e) => eprintln!("re-encoding: {e}"),
            }
        }
        let mut tv = TokenVectors::new(li.dim());
        let mut bar = crate::progress::bar(texts.len(), what);
        for chunk in texts.chunks(32) {
            let enc = if query {
                li.encode_queries(chunk)?
            } else {
                li.encode_passages(chunk)?
            };
            for e in enc {
                tv.push(&e.vectors)?;
            }
            crate::progress::tick(&mut bar, chunk.len());
        }
        tv.save(&path)?;
        Ok(tv)
    };
    let queries = encode(&qtexts, true, "queries")?;
    let passages = encode(&ptexts, false, "passages")?;
    Ok(ColbertData {
        queries,
        passages,
        groups: out,
    })
}

/// Index of `t` among the distinct texts, adding it if new.
fn text_index<'a>(
    idx: &mut HashMap<&'a str, usize>,
    texts: &mut Vec<&'a str>,
    t: &'a str,
) -> usize {
    *idx.entry(t).or_insert_with(|| {
        texts.push(t);
        texts.len() - 1
    })
}

/// A trained projection in the cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainedColbert {
    /// The recipe.
    pub recipe: ColbertRecipe,
    /// Its cache key.
    pub key: String,
    /// `projection.safetensors` (`linear.weight`, `d × 384`).
    pub projection_path: PathBuf,
    /// Training groups used.
    pub groups: usize,
    /// Distinct passages among them.
    pub passages: usize,
    /// Seconds spent encoding the training texts (0 when cached).
    pub encode_seconds: f64,
    /// Training seconds (updates only).
    pub train_seconds: f64,
    /// Groups per second during the updates.
    pub examples_per_second: f64,
    /// Load average when the run ended.
    pub load: String,
}

impl super::checkpoint::RunRecord for TrainedColbert {
    fn run_paths(&mut self) -> Vec<&mut PathBuf> {
        vec![&mut self.projection_path]
    }
}

impl TrainedColbert {
    /// The projection.
    pub fn projection(&self) -> Result<Projection> {
        Projection::load(&self.projection_path, Some(WEIGHT_NAME))
    }

    /// A [`LateInteraction`] over `encoder` with this projection (and the markers if the
    /// recipe has them).
    pub fn late_interaction(&self, encoder: Arc<BertEncoder>) -> Result<LateInteraction> {
        let li = LateInteraction::new(encoder);
        let li = if self.recipe.markers {
            li.with_markers(self.recipe.n_q)?
        } else {
            li
        };
        li.with_projection(self.projection()?)
    }
}

/// The recipe's encoder (frozen), with ColBERT's markers if the recipe has them; no
/// projection.
pub fn recipe_encoder(assets: &Assets, recipe: &ColbertRecipe) -> Result<LateInteraction> {
    let enc = BertEncoder::load(
        assets,
        &recipe.base,
        EncoderParams::default().max_length(recipe.max_length),
    )?;
    let li = LateInteraction::new(Arc::new(enc));
    if recipe.markers {
        li.with_markers(recipe.n_q)
    } else {
        Ok(li)
    }
}

/// The recipe's training groups: all of them, or the seeded sample of `max_groups`
/// (shuffled with `train.seed`) that [`train_or_load`] trains on.
pub fn sampled_groups(assets: &Assets, recipe: &ColbertRecipe) -> Result<GroupSet> {
    let mut set = training_groups(assets, &recipe.supervision, &recipe.groups)?;
    if let Some(m) = recipe.max_groups {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(recipe.train.seed);
        set.groups.shuffle(&mut rng);
        set.groups.truncate(m);
    }
    Ok(set)
}

/// The project's cache of ColBERT heads and their training token vectors:
/// `<root>/data/cache/colbert`.
pub fn default_cache_root() -> Result<PathBuf> {
    crate::paths::project_cache_dir("colbert")
}

/// The default recipe ([`ColbertRecipe::default_minilm`]) at `dim`, on `groups` sampled
/// training groups (0 = all), trained into [`default_cache_root`] unless already there:
/// what the experiments re-rank with when they name a trained ColBERT dimension.
pub fn default_trained(assets: &Assets, dim: usize, groups: usize) -> Result<TrainedColbert> {
    let mut recipe = ColbertRecipe::default_minilm(dim);
    recipe.max_groups = (groups > 0).then_some(groups);
    Ok(train_or_load(assets, &recipe, &default_cache_root()?)?.0)
}

/// The projection of `recipe` cached under `cache_root`, if it was trained there.
pub fn load_trained(
    assets: &Assets,
    recipe: &ColbertRecipe,
    cache_root: &Path,
) -> Result<Option<TrainedColbert>> {
    recipe.check()?;
    let dir = cache_root.join(recipe.key(assets)?);
    Ok(super::checkpoint::read_done::<TrainedColbert>(&dir)?.map(|(t, _)| t))
}

/// Train `recipe` unless `cache_root/<key>/done.json` exists (then load it); an
/// interrupted run resumes from `cache_root/<key>/state/`. Token vectors of the
/// training texts are cached in `cache_root` (shared by every `d`).
pub fn train_or_load(
    assets: &Assets,
    recipe: &ColbertRecipe,
    cache_root: &Path,
) -> Result<(TrainedColbert, Option<TrainLog>)> {
    recipe.check()?;
    let key = recipe.key(assets)?;
    let dir = cache_root.join(&key);
    if let Some(found) = super::checkpoint::read_done::<TrainedColbert>(&dir)? {
        return Ok(found);
    }
    super::training_allowed(&format!("ColBERT projection `{}`", recipe.name))?;
    let set = sampled_groups(assets, recipe)?;
    let li = recipe_encoder(assets, recipe)?;
    if recipe.init == HeadInit::Pca && recipe.dim > li.dim() {
        return Err(Error::param(
            "dim",
            format!(
                "{} is more than the encoder's {} dimensions (PCA initialisation)",
                recipe.dim,
                li.dim()
            ),
        ));
    }
    let t0 = std::time::Instant::now();
    let data = group_vectors(&li, &set.groups, recipe.negatives, cache_root)?;
    let encode_seconds = t0.elapsed().as_secs_f64();
    let head = match recipe.init {
        HeadInit::Random => ColbertHead::new(recipe.dim, li.dim(), recipe.init_seed)?,
        HeadInit::Pca => ColbertHead::pca(recipe.dim, &[&data.queries, &data.passages])?,
    };
    let log = super::train(
        &head,
        &head.vars,
        &data,
        &recipe.train,
        Some(&dir.join("state")),
        Stop::End,
    )?;
    let projection_path = dir.join("projection.safetensors");
    head.save(&projection_path)?;
    let t = TrainedColbert {
        recipe: recipe.clone(),
        key,
        projection_path,
        groups: data.groups.len(),
        passages: data.passages.len(),
        encode_seconds,
        train_seconds: log.seconds(),
        examples_per_second: log.examples_per_second(),
        load: load_average(),
    };
    let done = dir.join("done.json");
    std::fs::write(&done, serde_json::to_vec_pretty(&t)?).map_err(|e| Error::io(&done, e))?;
    Ok((t, Some(log)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_trained_projection_record_names_its_file_for_rebasing() {
        use super::super::checkpoint::RunRecord;
        let mut t = TrainedColbert {
            recipe: ColbertRecipe::default_minilm(128),
            key: "k".into(),
            projection_path: std::path::PathBuf::from("/old/k/projection.safetensors"),
            groups: 0,
            passages: 0,
            encode_seconds: 0.0,
            train_seconds: 0.0,
            examples_per_second: 0.0,
            load: String::new(),
        };
        let paths = t.run_paths();
        assert_eq!(paths.len(), 1);
        assert_eq!(
            *paths[0],
            std::path::PathBuf::from("/old/k/projection.safetensors")
        );
    }

    use super::*;

    fn tv(dim: usize, texts: &[&[f32]]) -> TokenVectors {
        let mut t = TokenVectors::new(dim);
        for r in texts {
            t.push(r).unwrap();
        }
        t
    }

    #[test]
    fn pca_head_spans_the_vectors_subspace_largest_first() {
        // Rows in the plane of axes 0 and 2 of a 4-d space, spread more along axis 2.
        let q = tv(4, &[&[1.0, 0.0, 3.0, 0.0, -1.0, 0.0, 2.0, 0.0]]);
        let p = tv(4, &[&[0.5, 0.0, -4.0, 0.0], &[0.0, 0.0, 1.0, 0.0]]);
        let head = ColbertHead::pca(2, &[&q, &p]).unwrap();
        let w: Vec<Vec<f32>> = head.weight.to_vec2().unwrap();
        assert_eq!(w.len(), 2);
        for r in &w {
            let norm: f32 = r.iter().map(|x| x * x).sum();
            assert!((norm - 1.0).abs() < 1e-5, "{r:?}");
            assert!(r[1].abs() < 1e-5 && r[3].abs() < 1e-5, "{r:?}");
        }
        let dot: f32 = w[0].iter().zip(&w[1]).map(|(a, b)| a * b).sum();
        assert!(dot.abs() < 1e-5);
        // The first component is the direction of most energy: mostly axis 2.
        assert!(w[0][2].abs() > w[0][0].abs(), "{:?}", w[0]);
        let err = ColbertHead::pca(5, &[&q]).err().unwrap().to_string();
        assert!(err.contains("dim") && err.contains("1..=4"), "{err}");
        assert!(ColbertHead::pca(2, &[&TokenVectors::new(4)]).is_err());
    }

    /// q = [(1,0), (-0.6,-0.8)], A = [(1,0)] (padded to 2 rows in the batch),
    /// B = [(0,1), (0.6,0.8)], W = I:
    /// S(q,A) = 1 + (-0.6) = 0.4 (the zero pad row would give 0 > -0.6 without the mask);
    /// S(q,B) = max(0, 0.6) + max(-0.8, -1.0) = -0.2;
    /// loss = -log(e^0.4 / (e^0.4 + e^-0.2)) = ln(1 + e^-0.6) = 0.437488.
    #[test]
    fn loss_on_a_hand_worked_case() {
        let data = ColbertData {
            queries: tv(2, &[&[1.0, 0.0, -0.6, -0.8]]),
            passages: tv(2, &[&[1.0, 0.0], &[0.0, 1.0, 0.6, 0.8]]),
            groups: vec![(0, 0, vec![1])],
        };
        let head = ColbertHead::from_weight(vec![1.0, 0.0, 0.0, 1.0], 2, 2).unwrap();
        let b = data.batch(&[0]).unwrap();
        let s: Vec<Vec<f32>> = head.scores(&b).unwrap().to_vec2().unwrap();
        assert!((s[0][0] - 0.4).abs() < 1e-3, "{s:?}");
        assert!((s[0][1] + 0.2).abs() < 1e-3, "{s:?}");
        let l: f32 = head.loss(&b).unwrap().to_scalar().unwrap();
        assert!((l - 0.437_488).abs() < 1e-3, "loss {l}");
        // Scaling W changes nothing (rows are normalised after the projection).
        let head2 = ColbertHead::from_weight(vec![3.0, 0.0, 0.0, 3.0], 2, 2).unwrap();
        let l2: f32 = head2.loss(&b).unwrap().to_scalar().unwrap();
        assert!((l - l2).abs() < 1e-4);
    }

    #[test]
    fn in_batch_passages_are_shared_and_deduplicated() {
        let data = ColbertData {
            queries: tv(2, &[&[1.0, 0.0], &[0.0, 1.0]]),
            passages: tv(2, &[&[1.0, 0.0], &[0.0, 1.0], &[0.7, 0.7]]),
            // Both groups use passage 2 as a negative; the second's positive is 1.
            groups: vec![(0, 0, vec![2]), (1, 1, vec![2, 0])],
        };
        let b = data.batch(&[0, 1]).unwrap();
        assert_eq!(b.passages.dims3().unwrap(), (3, 1, 2));
        assert_eq!(b.targets.to_vec1::<u32>().unwrap(), vec![0, 2]);
    }

    /// Queries of different lengths share a batch: the shorter is zero-padded, and its
    /// scores are those it has alone. A query without rows is an error.
    #[test]
    fn queries_of_different_lengths_are_zero_padded() {
        let data = ColbertData {
            queries: tv(2, &[&[1.0, 0.0], &[0.0, 1.0, -0.6, -0.8]]),
            passages: tv(2, &[&[1.0, 0.0, 0.0, -1.0], &[0.0, 1.0]]),
            groups: vec![(0, 0, vec![1]), (1, 1, vec![0])],
        };
        let head = ColbertHead::from_weight(vec![1.0, 0.0, 0.0, 1.0], 2, 2).unwrap();
        let both = data.batch(&[0, 1]).unwrap();
        assert_eq!(both.queries.dims3().unwrap(), (2, 2, 2));
        let s: Vec<Vec<f32>> = head.scores(&both).unwrap().to_vec2().unwrap();
        let alone: Vec<Vec<f32>> = head
            .scores(&data.batch(&[0]).unwrap())
            .unwrap()
            .to_vec2()
            .unwrap();
        // Query 0 = [(1,0)], alone (1 row) and padded (2 rows): S = 1 with passage 0
        // (max(1, 0)) and 0 with passage 1.
        assert!(
            (s[0][0] - 1.0).abs() < 1e-5 && (s[0][1]).abs() < 1e-5,
            "{s:?}"
        );
        assert!((alone[0][0] - s[0][0]).abs() < 1e-6, "{alone:?} vs {s:?}");
        assert!((alone[0][1] - s[0][1]).abs() < 1e-6, "{alone:?} vs {s:?}");
        // Query 1 = [(0,1), (-0.6,-0.8)] on passage 0 = [(1,0),(0,-1)]:
        // max(0, -1) + max(-0.6, 0.8) = 0.8 (token vectors are stored as f16).
        assert!((s[1][0] - 0.8).abs() < 1e-3, "{s:?}");
        let empty = ColbertData {
            queries: tv(2, &[&[1.0, 0.0], &[]]),
            ..data
        };
        let e = empty.batch(&[0, 1]).unwrap_err().to_string();
        assert!(
            e.contains("group 1") && e.contains("no token vectors"),
            "{e}"
        );
    }

    /// Random token vectors where each query's positive shares its tokens up to noise
    /// and W starts random: training drives the loss near zero.
    #[test]
    fn overfits_a_tiny_set() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let h = 16;
        let mut queries = TokenVectors::new(h);
        let mut passages = TokenVectors::new(h);
        let mut groups = Vec::new();
        for g in 0..8 {
            let q: Vec<f32> = (0..3 * h).map(|_| rng.gen::<f32>() - 0.5).collect();
            let mut p = q.clone();
            p.extend((0..2 * h).map(|_| rng.gen::<f32>() - 0.5));
            p.iter_mut()
                .for_each(|x| *x += 0.3 * (rng.gen::<f32>() - 0.5));
            let n: Vec<f32> = (0..5 * h).map(|_| rng.gen::<f32>() - 0.5).collect();
            queries.push(&q).unwrap();
            passages.push(&p).unwrap();
            passages.push(&n).unwrap();
            groups.push((g, 2 * g, vec![2 * g + 1]));
        }
        let data = ColbertData {
            queries,
            passages,
            groups,
        };
        let head = ColbertHead::new(8, h, 1).unwrap();
        let cfg = TrainConfig {
            epochs: 100,
            batch_size: 4,
            lr: 0.05,
            warmup_ratio: 0.0,
            bucket_batches: 0,
            threads: 1,
            ..TrainConfig::default()
        };
        let all: Vec<usize> = (0..8).collect();
        let before: f32 = head
            .loss(&data.batch(&all).unwrap())
            .unwrap()
            .to_scalar()
            .unwrap();
        super::super::train(&head, &head.vars, &data, &cfg, None, Stop::End).unwrap();
        let after: f32 = head
            .loss(&data.batch(&all).unwrap())
            .unwrap()
            .to_scalar()
            .unwrap();
        // Scores are sums of 3 cosines, so the loss cannot reach 0 over 16 passages
        // (ln(1 + 15·e^-3) ≈ 0.56 with every other passage orthogonal): ask for a clear
        // drop and every positive ranked first.
        assert!(after < 0.8 * before, "{before} -> {after}");
        let s: Vec<Vec<f32>> = head
            .scores(&data.batch(&all).unwrap())
            .unwrap()
            .to_vec2()
            .unwrap();
        for (g, row) in s.iter().enumerate() {
            let best = (0..row.len())
                .max_by(|&a, &b| row[a].total_cmp(&row[b]))
                .unwrap();
            assert_eq!(best, 2 * g, "group {g}: {row:?}");
        }

        // Save and load through the Projection path: the same scores.
        let dir = std::env::temp_dir().join(format!("colbert-head-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("projection.safetensors");
        head.save(&path).unwrap();
        let proj = Projection::load(&path, Some(WEIGHT_NAME)).unwrap();
        assert_eq!((proj.out_dim, proj.in_dim), (8, h));
        let b = data.batch(&all).unwrap();
        let s: Vec<Vec<f32>> = head.scores(&b).unwrap().to_vec2().unwrap();
        let dv = |t: &TokenVectors, i: usize| -> Vec<f32> {
            let mut v = vec![0f32; t.rows(i) * h];
            t.copy_into(i, &mut v);
            let mut p = proj.apply(&v);
            crate::rerank::late_interaction::normalize_rows(&mut p, 8);
            p
        };
        // Passage order in the batch: p0, n0, p1, n1, ... (first appearance).
        for (g, row) in s.iter().enumerate() {
            let q = dv(&data.queries, g);
            for (k, &score) in row.iter().enumerate() {
                let d = dv(&data.passages, k);
                let m = crate::rerank::late_interaction::maxsim(&q, &d, 8) * 3.0;
                assert!(
                    (m - score).abs() < 1e-3,
                    "group {g} passage {k}: {m} vs {score}"
                );
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn token_vectors_round_trip_and_reject_bad_offsets() {
        let dir = std::env::temp_dir().join(format!("colbert-tv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.safetensors");
        let t = tv(2, &[&[1.0, 0.5], &[0.25, 0.0, 2.0, 1.0]]);
        t.save(&path).unwrap();
        assert_eq!(TokenVectors::load(&path).unwrap(), t);
        let bad = TokenVectors {
            offsets: vec![0, 1, 7],
            ..t
        };
        bad.save(&path).unwrap();
        let e = TokenVectors::load(&path).unwrap_err().to_string();
        assert!(e.contains("offsets"), "{e}");
        std::fs::write(&path, b"not safetensors").unwrap();
        assert!(TokenVectors::load(&path).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn colbert_ids_add_markers_and_mask_padding() {
        use crate::encode::colbert_ids;
        // [CLS]=101 w=7,8,9 [SEP]=102; [Q]=1, [MASK]=103.
        let (ids, kept) = colbert_ids(&[101, 7, 8, 9, 102], 1, Some((103, 8)), 512).unwrap();
        assert_eq!(ids, vec![101, 1, 7, 8, 9, 102, 103, 103]);
        assert_eq!(kept, 3);
        // Too long: cut to n ids, [SEP] kept last, no padding.
        let (ids, kept) = colbert_ids(&[101, 7, 8, 9, 10, 102], 1, Some((103, 5)), 512).unwrap();
        assert_eq!(ids, vec![101, 1, 7, 8, 102]);
        assert_eq!(kept, 2);
        // Passages: the marker, no padding, cut to max_len.
        let (ids, _) = colbert_ids(&[101, 7, 8, 9, 102], 2, None, 4).unwrap();
        assert_eq!(ids, vec![101, 2, 7, 102]);
        assert!(colbert_ids(&[101, 7, 102], 1, Some((103, 3)), 512).is_err());
        assert!(colbert_ids(&[101], 1, None, 512).is_err());
    }
}
