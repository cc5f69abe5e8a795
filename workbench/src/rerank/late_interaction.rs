//! Late interaction (ColBERT-style MaxSim) over per-token vectors — report 003.
//!
//! ## Score
//!
//! A query and a passage are each encoded into one vector per wordpiece (the last hidden
//! states of a BERT encoder, `[CLS]`/`[SEP]` dropped, optionally projected to `d`
//! dimensions, L2-normalised). The score is the mean over query tokens of the best cosine
//! with any passage token:
//!
//! ```text
//! S(q, d) = (1/|q|) · Σ_i max_j cos(E_qi, E_dj)
//! ```
//!
//! This is report 003's §3.2.1 definition ("instead of using the sum, we use the mean to
//! obtain a more interpretable similarity score"); ColBERT proper (Khattab & Zaharia 2020)
//! **sums** over query tokens. Within one query the two rank passages identically
//! (they differ by the factor `|q|`); the mean keeps scores in `[-1, 1]` and comparable
//! across queries.
//!
//! ## What this is not: no trained ColBERT checkpoint
//!
//! No ColBERT checkpoint is available here. The default encoder is **raw 384-d MiniLM token
//! embeddings** (`all-MiniLM-L6-v2`'s last hidden states, trained for *mean-pooled*
//! sentence vectors, never for token-level matching): no `[Q]`/`[D]` marker tokens, no
//! `[MASK]` query augmentation, no learned projection. Names say so: `maxsim-minilm-raw384`.
//! A learned linear projection (`d × 384`, e.g. ColBERT's `linear.weight`) can be loaded
//! with [`Projection::load`]; names then read `maxsim-minilm-proj{d}-{sha8}`.
//!
//! ## Two retrieval modes (report 003 §3.2.3)
//!
//! - **re-rank** ([`MaxSimReranker`], a [`Reranker`]): a first stage (TF-IDF in the report)
//!   returns the top `k`; exact MaxSim re-scores them.
//! - **end-to-end** (`MaxSimEndToEnd`, feature `faiss`, a [`Retriever`](crate::retrieve::Retriever)): a
//!   token-level FAISS index over every passage token vector; each query token retrieves
//!   its `k̂` nearest passage tokens, their passages (at most `k̂·|q|`) are the candidates,
//!   and exact MaxSim ranks those. The report sets `k̂ = k/λ` (Figure 6: `k = 1000`,
//!   `k̂ = k/λ`; λ ∈ {1, 2, 5, 10, 20} tried, λ = 2 in the base/best setting, λ = 5 chosen
//!   afterwards "to reduce the number of passages to rank"). Here `k̂ = ⌈k/λ⌉`, default
//!   λ = 2 (the report's best setting); λ < 1 widens the candidate set beyond `k`.
//!
//! Passage token vectors live in a [`TokenStore`]: one flat `f16` array (the report stores
//! embeddings "with 16-bit precision", Appendix B) plus per-passage offsets, saved with a
//! header holding the model's sha256, the projection, a key of the passage set and the
//! sha256 of each passage's text, and a checksum of the whole file, so a store built for
//! another model, projection, corpus or text (or a damaged one) is never read.
//!
//! ## Token relevance (report 003 §5)
//!
//! [`TokenRelevance`] explains a score per passage token: `R_abs` (how many query tokens
//! have this token among their `k̃` best matches), `R_acc` (the sum of those
//! similarities) and a Gaussian kernel density over the positions of the chosen tokens.
//! It renders as highlighted HTML in notebooks.

use super::{finish, resolve_candidates, PassageLookup, Reranker};
use crate::assets::Assets;
use crate::encode::{BertEncoder, EncoderParams};
use crate::{Error, Hit, Passage, Result};
use half::f16;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::sync::Arc;

/// The asset whose token embeddings are the default late-interaction encoder.
pub const DEFAULT_MODEL: &str = "all-minilm-l6-v2";

/// Score of a passage with no tokens: −1, the lowest cosine, so it ranks last.
pub const EMPTY_PASSAGE_SCORE: f32 = -1.0;

// ------------------------------------------------------------------ MaxSim kernels

/// Dot product with eight independent accumulators (vectorises well).
#[inline]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for ((a, xv), yv) in acc.iter_mut().zip(x).zip(y) {
            *a += xv * yv;
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

fn mean_of_best(best: &[f32], n_doc: usize) -> f32 {
    if best.is_empty() {
        return 0.0;
    }
    if n_doc == 0 {
        return EMPTY_PASSAGE_SCORE;
    }
    best.iter().sum::<f32>() / best.len() as f32
}

/// Mean-MaxSim of a query matrix `q` (`|q| × dim`) against a passage matrix `d`
/// (`|d| × dim`), both row-major with L2-normalised rows (so dot = cosine).
///
/// Fused single pass: each passage row is read once and updates the running maximum of
/// every query row. An empty passage scores [`EMPTY_PASSAGE_SCORE`]; an empty query 0.
pub fn maxsim(q: &[f32], d: &[f32], dim: usize) -> f32 {
    let nq = q.len() / dim;
    let mut best = vec![f32::NEG_INFINITY; nq];
    for drow in d.chunks_exact(dim) {
        for (b, qrow) in best.iter_mut().zip(q.chunks_exact(dim)) {
            let s = dot(qrow, drow);
            if s > *b {
                *b = s;
            }
        }
    }
    mean_of_best(&best, d.len() / dim)
}

/// [`maxsim`] against passage vectors stored as `f16` (each row widened to `f32` once).
pub fn maxsim_f16(q: &[f32], d: &[f16], dim: usize) -> f32 {
    let nq = q.len() / dim;
    let mut best = vec![f32::NEG_INFINITY; nq];
    let mut row = vec![0f32; dim];
    for drow in d.chunks_exact(dim) {
        for (r, x) in row.iter_mut().zip(drow) {
            *r = x.to_f32();
        }
        for (b, qrow) in best.iter_mut().zip(q.chunks_exact(dim)) {
            let s = dot(qrow, &row);
            if s > *b {
                *b = s;
            }
        }
    }
    mean_of_best(&best, d.len() / dim)
}

/// The textbook definition, for tests: for each query row, the maximum over passage rows
/// of the explicit cosine `q·d / (‖q‖‖d‖)`, averaged. Rows need not be normalised.
pub fn maxsim_naive(q: &[f32], d: &[f32], dim: usize) -> f32 {
    let nq = q.len() / dim;
    let nd = d.len() / dim;
    if nq == 0 {
        return 0.0;
    }
    if nd == 0 {
        return EMPTY_PASSAGE_SCORE;
    }
    let mut total = 0f64;
    for qi in q.chunks_exact(dim) {
        let mut best = f64::NEG_INFINITY;
        for dj in d.chunks_exact(dim) {
            let mut num = 0f64;
            let mut nq2 = 0f64;
            let mut nd2 = 0f64;
            for (&a, &b) in qi.iter().zip(dj) {
                let (a, b) = (a as f64, b as f64);
                num += a * b;
                nq2 += a * a;
                nd2 += b * b;
            }
            let cos = num / (nq2.sqrt() * nd2.sqrt()).max(1e-12);
            if cos > best {
                best = cos;
            }
        }
        total += best;
    }
    (total / nq as f64) as f32
}

/// True when `len` values make whole rows of `dim` (`dim > 0`).
fn whole_rows(len: usize, dim: usize) -> bool {
    len / dim * dim == len
}

/// L2-normalise every `dim`-long row in place (a zero row stays zero).
pub fn normalize_rows(m: &mut [f32], dim: usize) {
    for row in m.chunks_exact_mut(dim) {
        let n = row.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        for x in row {
            *x /= n;
        }
    }
}

// ------------------------------------------------------------------ token relevance

/// Which token-relevance measure to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelevanceKind {
    /// `R_abs`: how many query tokens chose the passage token.
    Absolute,
    /// `R_acc`: the summed similarity of the query tokens that chose it.
    Accumulated,
    /// Gaussian kernel density over the positions of the chosen tokens.
    Density,
}

impl RelevanceKind {
    fn title(self) -> &'static str {
        match self {
            RelevanceKind::Absolute => "Absolute count R_abs",
            RelevanceKind::Accumulated => "Accumulated similarity R_acc",
            RelevanceKind::Density => "Kernel density estimate",
        }
    }
    fn rgb(self) -> (u8, u8, u8) {
        match self {
            RelevanceKind::Absolute => (31, 119, 180),
            RelevanceKind::Accumulated => (255, 127, 14),
            RelevanceKind::Density => (44, 160, 44),
        }
    }
}

/// Parameters of [`TokenRelevance`].
#[derive(Debug, Clone, PartialEq)]
pub struct RelevanceParams {
    /// `k̃`: how many best passage tokens each query token credits. Default 2, report 003
    /// §5.1 ("We identified the k̃ = 2 most similar passage vectors for each query
    /// vector"). With `k̃ = 1` a token is credited exactly when it is a query token's
    /// MaxSim argmax, so `Σ R_abs = |q|` and `Σ R_acc` = the MaxSim numerator `Σ_i max_j`.
    pub k_tilde: usize,
    /// KDE bandwidth in token positions. `None` (default): Scott's rule, `σ̂ · n^(-1/5)`
    /// with `σ̂` the sample standard deviation (ddof 1) of the `n = k̃·|q|` chosen
    /// positions — `scipy.stats.gaussian_kde`'s default; 1 token when `n < 2` or `σ̂ = 0`.
    /// The report names no bandwidth.
    pub bandwidth: Option<f32>,
}

impl Default for RelevanceParams {
    fn default() -> Self {
        RelevanceParams {
            k_tilde: 2,
            bandwidth: None,
        }
    }
}

/// Per-token relevance of a passage for a query (report 003 §5), with the text to render it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenRelevance {
    /// The query.
    pub query: String,
    /// The query's wordpieces (one per query vector).
    pub query_tokens: Vec<String>,
    /// The passage text the offsets point into.
    pub text: String,
    /// Passage wordpieces (no `[CLS]`/`[SEP]`; report 003's KDE ignores them too).
    pub tokens: Vec<String>,
    /// Byte span of each passage token in `text`.
    pub offsets: Vec<(usize, usize)>,
    /// `R_abs(q, d_l) = |Q(q, d_l)|`: number of query tokens that have `d_l` among their
    /// `k̃` most similar passage tokens.
    pub r_abs: Vec<u32>,
    /// `R_acc(q, d_l) = Σ_{E_qi ∈ Q(q, d_l)} sim(E_qi, E_dl)`.
    pub r_acc: Vec<f32>,
    /// Gaussian KDE of the `k̃·|q|` chosen positions, evaluated at each token position
    /// `0..|d|` (a density over positions: non-negative, integrates to 1 over ℝ).
    pub density: Vec<f32>,
    /// The KDE bandwidth used, in token positions.
    pub bandwidth: f32,
    /// The `k̃` used.
    pub k_tilde: usize,
    /// Mean-MaxSim score of the pair.
    pub score: f32,
}

/// The numbers behind [`TokenRelevance`], from vectors alone.
#[derive(Debug, Clone, PartialEq)]
pub struct RelevanceScores {
    /// See [`TokenRelevance::r_abs`].
    pub r_abs: Vec<u32>,
    /// See [`TokenRelevance::r_acc`].
    pub r_acc: Vec<f32>,
    /// See [`TokenRelevance::density`].
    pub density: Vec<f32>,
    /// The bandwidth used.
    pub bandwidth: f32,
    /// The chosen positions (KDE sample), `k̃` per query token, best first.
    pub chosen: Vec<usize>,
    /// Mean-MaxSim of the pair.
    pub score: f32,
}

/// Gaussian kernel density of `samples` evaluated at `at`; returns the densities and the
/// bandwidth (`None` → Scott's rule, see [`RelevanceParams::bandwidth`]).
pub fn gaussian_kde(samples: &[f32], at: &[f32], bandwidth: Option<f32>) -> (Vec<f32>, f32) {
    let n = samples.len();
    let h = match bandwidth {
        Some(h) => h,
        None => {
            if n < 2 {
                1.0
            } else {
                let mean = samples.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
                let var = samples
                    .iter()
                    .map(|&x| (x as f64 - mean).powi(2))
                    .sum::<f64>()
                    / (n - 1) as f64;
                let h = var.sqrt() * (n as f64).powf(-0.2);
                if h > 0.0 {
                    h as f32
                } else {
                    1.0
                }
            }
        }
    };
    if n == 0 {
        return (vec![0.0; at.len()], h);
    }
    let norm = 1.0 / (n as f64 * h as f64 * (2.0 * std::f64::consts::PI).sqrt());
    let dens = at
        .iter()
        .map(|&x| {
            let s: f64 = samples
                .iter()
                .map(|&xi| {
                    let z = (x as f64 - xi as f64) / h as f64;
                    (-0.5 * z * z).exp()
                })
                .sum();
            (s * norm) as f32
        })
        .collect();
    (dens, h)
}

/// `R_abs`, `R_acc` and the KDE for query vectors `q` against passage vectors `d`
/// (row-major, normalised rows). Each query token credits its `k̃` most similar passage
/// tokens (ties: lower position first).
pub fn relevance_scores(
    q: &[f32],
    d: &[f32],
    dim: usize,
    params: &RelevanceParams,
) -> Result<RelevanceScores> {
    if params.k_tilde == 0 {
        return Err(Error::param("k_tilde", "must be at least 1"));
    }
    if let Some(h) = params.bandwidth {
        if !(h.is_finite() && h > 0.0) {
            return Err(Error::param(
                "bandwidth",
                format!("{h} is not a positive number"),
            ));
        }
    }
    if dim == 0 || !whole_rows(q.len(), dim) || !whole_rows(d.len(), dim) {
        return Err(Error::param(
            "dim",
            format!(
                "{dim} does not divide the matrix sizes {} and {}",
                q.len(),
                d.len()
            ),
        ));
    }
    let nd = d.len() / dim;
    let mut r_abs = vec![0u32; nd];
    let mut r_acc = vec![0f32; nd];
    let mut chosen = Vec::new();
    let mut sims: Vec<(usize, f32)> = Vec::with_capacity(nd);
    for qrow in q.chunks_exact(dim) {
        sims.clear();
        sims.extend(d.chunks_exact(dim).map(|drow| dot(qrow, drow)).enumerate());
        sims.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        for &(j, s) in sims.iter().take(params.k_tilde) {
            r_abs[j] += 1;
            r_acc[j] += s;
            chosen.push(j);
        }
    }
    let samples: Vec<f32> = chosen.iter().map(|&j| j as f32).collect();
    let positions: Vec<f32> = (0..nd).map(|j| j as f32).collect();
    let (density, bandwidth) = gaussian_kde(&samples, &positions, params.bandwidth);
    Ok(RelevanceScores {
        r_abs,
        r_acc,
        density,
        bandwidth,
        chosen,
        score: maxsim(q, d, dim),
    })
}

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

impl TokenRelevance {
    /// Values of one measure, one per passage token.
    pub fn values(&self, which: RelevanceKind) -> Vec<f32> {
        match which {
            RelevanceKind::Absolute => self.r_abs.iter().map(|&v| v as f32).collect(),
            RelevanceKind::Accumulated => self.r_acc.clone(),
            RelevanceKind::Density => self.density.clone(),
        }
    }

    /// Index of the passage token with the highest value of a measure (first on ties).
    pub fn argmax(&self, which: RelevanceKind) -> Option<usize> {
        let v = self.values(which);
        (0..v.len()).reduce(|a, b| if v[b] > v[a] { b } else { a })
    }

    /// The passage text as HTML with every token's background opacity proportional to the
    /// chosen measure (0 → transparent, the passage maximum → opaque; negative values show
    /// as 0), a hover title with all three measures, and a legend. All text is escaped.
    pub fn to_html(&self, which: RelevanceKind) -> String {
        let values = self.values(which);
        let max = values.iter().cloned().fold(0f32, f32::max);
        let (r, g, b) = which.rgb();
        let mut s = String::from(
            "<div class=\"wb-token-relevance\" style=\"font-family:sans-serif;line-height:1.9;margin:0.5em 0\">",
        );
        s += &format!(
            "<div style=\"font-weight:bold\">{}</div><div style=\"color:#555;font-size:90%\">query: {} &middot; MaxSim {:.4} &middot; k&#771; = {}{}</div>",
            escape_html(which.title()),
            escape_html(&self.query),
            self.score,
            self.k_tilde,
            if which == RelevanceKind::Density {
                format!(" &middot; bandwidth {:.2} tokens", self.bandwidth)
            } else {
                String::new()
            }
        );
        s += "<div>";
        let mut order: Vec<usize> = (0..self.tokens.len()).collect();
        order.sort_by_key(|&j| self.offsets.get(j).map(|o| o.0).unwrap_or(usize::MAX));
        let mut pos = 0usize;
        for j in order {
            let (start, end) = self.offsets.get(j).copied().unwrap_or((pos, pos));
            let piece = match (start >= pos, self.text.get(start..end)) {
                (true, Some(p)) => {
                    if let Some(gap) = self.text.get(pos..start) {
                        s += &escape_html(gap);
                    }
                    pos = end;
                    p.to_string()
                }
                // Overlapping or out-of-range span: show the token itself.
                _ => format!(" {}", self.tokens[j]),
            };
            let alpha = if max > 0.0 {
                (values[j].max(0.0) / max).clamp(0.0, 1.0)
            } else {
                0.0
            };
            s += &format!(
                "<span style=\"background:rgba({r},{g},{b},{alpha:.3});border-radius:3px\" title=\"#{j} {}: R_abs={} R_acc={:.3} density={:.4}\">{}</span>",
                escape_html(&self.tokens[j]),
                self.r_abs[j],
                self.r_acc[j],
                self.density[j],
                escape_html(&piece)
            );
        }
        if let Some(rest) = self.text.get(pos..) {
            s += &escape_html(rest);
        }
        s += "</div>";
        s += &format!(
            "<div style=\"font-size:85%;color:#555;margin-top:0.3em\">0 <span style=\"display:inline-block;width:140px;height:0.8em;vertical-align:middle;background:linear-gradient(to right,rgba({r},{g},{b},0),rgba({r},{g},{b},1))\"></span> {max:.4} ({})</div>",
            escape_html(which.title())
        );
        s + "</div>"
    }

    /// All three measures stacked (KDE, absolute count, accumulated similarity — the order
    /// of report 003's Figures 9, 11 and 12).
    pub fn to_html_all(&self) -> String {
        [
            RelevanceKind::Density,
            RelevanceKind::Absolute,
            RelevanceKind::Accumulated,
        ]
        .iter()
        .map(|&k| self.to_html(k))
        .collect()
    }

    /// evcxr display hook: the three measures as HTML.
    pub fn evcxr_display(&self) {
        crate::display::emit("text/html", &self.to_html_all());
    }
}

// ------------------------------------------------------------------ projection

/// A linear map `d × in_dim` applied to every token vector before normalisation
/// (ColBERT's final `linear` layer, no bias).
#[derive(Debug, Clone, PartialEq)]
pub struct Projection {
    /// Row-major `out_dim × in_dim` weight.
    pub weight: Vec<f32>,
    /// Output dimension `d`.
    pub out_dim: usize,
    /// Input dimension (the encoder's hidden size).
    pub in_dim: usize,
    /// Identity recorded in store headers and names: `{file sha256}:{tensor name}`.
    pub id: String,
}

impl Projection {
    /// A projection from an explicit weight.
    pub fn new(
        weight: Vec<f32>,
        out_dim: usize,
        in_dim: usize,
        id: impl Into<String>,
    ) -> Result<Self> {
        if out_dim == 0 || in_dim == 0 || weight.len() != out_dim * in_dim {
            return Err(Error::param(
                "projection",
                format!(
                    "weight has {} values, expected {out_dim} × {in_dim}",
                    weight.len()
                ),
            ));
        }
        Ok(Projection {
            weight,
            out_dim,
            in_dim,
            id: id.into(),
        })
    }

    /// Load a `d × in_dim` tensor from a safetensors file. `key: None` takes the file's
    /// only 2-D tensor (an error if there are several); ColBERT checkpoints call it
    /// `linear.weight`.
    pub fn load(path: &Path, key: Option<&str>) -> Result<Self> {
        let tensors = candle_core::safetensors::load(path, &candle_core::Device::Cpu)
            .map_err(|e| Error::bad_input(path, format!("not a readable safetensors file: {e}")))?;
        let name = match key {
            Some(k) => k.to_string(),
            None => {
                let mut two_d: Vec<&String> = tensors
                    .iter()
                    .filter(|(_, t)| t.rank() == 2)
                    .map(|(k, _)| k)
                    .collect();
                two_d.sort();
                match two_d.as_slice() {
                    [one] => (*one).clone(),
                    [] => return Err(Error::bad_input(path, "holds no 2-D tensor")),
                    many => {
                        return Err(Error::bad_input(
                            path,
                            format!("holds several 2-D tensors ({many:?}); name one"),
                        ))
                    }
                }
            }
        };
        let t = tensors
            .get(&name)
            .ok_or_else(|| Error::bad_input(path, format!("missing tensor `{name}`")))?;
        let (out_dim, in_dim) = t
            .dims2()
            .map_err(|e| Error::bad_input(path, format!("`{name}`: {e}")))?;
        let weight: Vec<f32> = t
            .to_dtype(candle_core::DType::F32)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1())
            .map_err(|e| Error::bad_input(path, format!("`{name}`: {e}")))?;
        let sha = crate::assets::sha256_file(path)?;
        Projection::new(weight, out_dim, in_dim, format!("{sha}:{name}"))
    }

    /// Apply to a row-major `n × in_dim` matrix; returns `n × out_dim` (not normalised).
    pub fn apply(&self, m: &[f32]) -> Vec<f32> {
        let mut out = Vec::with_capacity(m.len() / self.in_dim * self.out_dim);
        for row in m.chunks_exact(self.in_dim) {
            for w in self.weight.chunks_exact(self.in_dim) {
                out.push(dot(w, row));
            }
        }
        out
    }

    fn short_id(&self) -> String {
        self.id.chars().take(8).collect()
    }
}

// ------------------------------------------------------------------ token store

/// What a [`TokenStore`] was built from; a store is read only when its key equals the
/// expected one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreKey {
    /// sha256 of the encoder's weights file.
    pub model_sha256: String,
    /// Encoder settings that change token vectors (e.g. the maximum length).
    pub encoder: String,
    /// `"none"` or [`Projection::id`].
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

fn describe_key_diff(found: &StoreKey, want: &StoreKey) -> String {
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

// ------------------------------------------------------------------ encoder

/// Token vectors of one text: wordpieces, their byte spans, and normalised rows.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedTokens {
    /// Wordpieces (no `[CLS]`/`[SEP]`).
    pub tokens: Vec<String>,
    /// Byte span of each wordpiece in the text.
    pub offsets: Vec<(usize, usize)>,
    /// Row-major `tokens.len() × dim`, L2-normalised rows.
    pub vectors: Vec<f32>,
}

/// A late-interaction encoder: a [`BertEncoder`]'s token embeddings, an optional
/// [`Projection`], L2 normalisation.
pub struct LateInteraction {
    encoder: Arc<BertEncoder>,
    model_label: String,
    projection: Option<Projection>,
}

impl LateInteraction {
    /// Wrap an encoder (no projection). The label in names is `minilm` for
    /// `all-minilm-l6-v2`, else the encoder's asset name; store keys carry the encoder's
    /// weights sha256 and `max_length`.
    pub fn new(encoder: Arc<BertEncoder>) -> Self {
        let model_label = match encoder.name() {
            DEFAULT_MODEL => "minilm".to_string(),
            other => other.to_string(),
        };
        LateInteraction {
            encoder,
            model_label,
            projection: None,
        }
    }

    /// The default: raw 384-d MiniLM token embeddings (`all-minilm-l6-v2` with default
    /// [`EncoderParams`], no projection — **not** a trained ColBERT).
    pub fn load_minilm(assets: &Assets) -> Result<Self> {
        let encoder = BertEncoder::load(assets, DEFAULT_MODEL, EncoderParams::default())?;
        Ok(Self::new(Arc::new(encoder)))
    }

    /// Replace the label used in names.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.model_label = label.into();
        self
    }

    /// Add a projection; its input size must equal the encoder's dimension.
    pub fn with_projection(mut self, projection: Projection) -> Result<Self> {
        if projection.in_dim != self.encoder.dim() {
            return Err(Error::param(
                "projection",
                format!(
                    "takes {}-d input, the encoder gives {}-d vectors",
                    projection.in_dim,
                    self.encoder.dim()
                ),
            ));
        }
        self.projection = Some(projection);
        Ok(self)
    }

    /// The encoder.
    pub fn encoder(&self) -> &BertEncoder {
        &self.encoder
    }

    /// The projection, if any.
    pub fn projection(&self) -> Option<&Projection> {
        self.projection.as_ref()
    }

    /// Output dimension (after the projection).
    pub fn dim(&self) -> usize {
        self.projection
            .as_ref()
            .map(|p| p.out_dim)
            .unwrap_or_else(|| self.encoder.dim())
    }

    /// `minilm-raw384`, or `minilm-proj{d}-{sha8}` with a projection.
    pub fn label(&self) -> String {
        match &self.projection {
            None => format!("{}-raw{}", self.model_label, self.dim()),
            Some(p) => format!("{}-proj{}-{}", self.model_label, p.out_dim, p.short_id()),
        }
    }

    /// Token vectors of a text.
    pub fn encode(&self, text: &str) -> Result<EncodedTokens> {
        let te = self.encoder.token_embeddings(text)?;
        // The encoder normalises each row already; the projection (if any) needs the rows
        // renormalised after it.
        let mut vectors: Vec<f32> = te.vectors.iter().flatten().copied().collect();
        if let Some(p) = &self.projection {
            vectors = p.apply(&vectors);
        }
        let dim = self.dim();
        normalize_rows(&mut vectors, dim);
        Ok(EncodedTokens {
            tokens: te.tokens,
            offsets: te.offsets,
            vectors,
        })
    }

    /// Query token vectors; a query with no tokens is an error.
    pub fn encode_query(&self, query: &str) -> Result<EncodedTokens> {
        let e = self.encode(query)?;
        if e.tokens.is_empty() {
            return Err(Error::Empty(format!("query {query:?} has no tokens")));
        }
        Ok(e)
    }

    /// Mean-MaxSim of a query and a passage text.
    pub fn score(&self, query: &str, passage: &str) -> Result<f32> {
        let q = self.encode_query(query)?;
        let d = self.encode(passage)?;
        Ok(maxsim(&q.vectors, &d.vectors, self.dim()))
    }

    /// Token relevance of a passage for a query (report 003 §5).
    pub fn token_relevance(
        &self,
        query: &str,
        passage: &str,
        params: &RelevanceParams,
    ) -> Result<TokenRelevance> {
        let q = self.encode_query(query)?;
        let d = self.encode(passage)?;
        let r = relevance_scores(&q.vectors, &d.vectors, self.dim(), params)?;
        Ok(TokenRelevance {
            query: query.to_string(),
            query_tokens: q.tokens,
            text: passage.to_string(),
            tokens: d.tokens,
            offsets: d.offsets,
            r_abs: r.r_abs,
            r_acc: r.r_acc,
            density: r.density,
            bandwidth: r.bandwidth,
            k_tilde: params.k_tilde,
            score: r.score,
        })
    }

    /// The key a store of these passages must carry.
    pub fn store_key(&self, passages: &[Passage]) -> StoreKey {
        StoreKey {
            model_sha256: self.encoder.model_sha256().to_string(),
            encoder: format!(
                "{} max_length={}",
                self.encoder.name(),
                self.encoder.params().max_length
            ),
            projection: self
                .projection
                .as_ref()
                .map(|p| p.id.clone())
                .unwrap_or_else(|| "none".to_string()),
            passages: passage_set_key(passages),
            dim: self.dim(),
        }
    }

    /// Encode every passage into a new store (with a progress bar).
    pub fn build_store(&self, passages: &[Passage]) -> Result<TokenStore> {
        let mut store = TokenStore::new(self.store_key(passages));
        let mut bar = crate::progress::bar(passages.len(), "token vectors");
        for p in passages {
            let e = self.encode(&p.text)?;
            store.push(&p.id, &p.text, &e.vectors)?;
            crate::progress::tick(&mut bar, 1);
        }
        Ok(store)
    }

    /// Load the store at `path` if its key matches these passages (ids and texts) and
    /// this encoder; otherwise (absent, stale, truncated or corrupt) build it and save
    /// it there. Why an existing file was not used is printed to stderr.
    pub fn load_or_build_store(&self, passages: &[Passage], path: &Path) -> Result<TokenStore> {
        let key = self.store_key(passages);
        if path.exists() {
            match TokenStore::load(path, &key) {
                Ok(store) => return Ok(store),
                Err(e) => eprintln!("rebuilding the token store: {e}"),
            }
        }
        let store = self.build_store(passages)?;
        store.save(path)?;
        Ok(store)
    }
}

// ------------------------------------------------------------------ re-rank mode

/// Re-rank mode (report 003 §3.2.3): exact mean-MaxSim over first-stage candidates.
///
/// Passage vectors come from an optional [`TokenStore`] (ids it holds) or are encoded on
/// the fly from the [`PassageLookup`] text.
pub struct MaxSimReranker {
    model: Arc<LateInteraction>,
    store: Option<Arc<TokenStore>>,
}

impl MaxSimReranker {
    /// Encode candidates on the fly.
    pub fn new(model: Arc<LateInteraction>) -> Self {
        MaxSimReranker { model, store: None }
    }

    /// Read candidate vectors from a store when it holds them. The store must match the
    /// model's dimension and projection; a candidate whose lookup text differs from the
    /// text the store was built from is an error naming it (never stale vectors).
    pub fn with_store(mut self, store: Arc<TokenStore>) -> Result<Self> {
        check_store(&self.model, &store)?;
        self.store = Some(store);
        Ok(self)
    }
}

fn check_store(model: &LateInteraction, store: &TokenStore) -> Result<()> {
    let want = model.store_key(&[]);
    let key = store.key();
    if key.dim != want.dim
        || key.model_sha256 != want.model_sha256
        || key.projection != want.projection
        || key.encoder != want.encoder
    {
        return Err(Error::param(
            "store",
            format!(
                "built with another encoder ({})",
                describe_key_diff(
                    key,
                    &StoreKey {
                        passages: key.passages.clone(),
                        ..want
                    }
                )
            ),
        ));
    }
    Ok(())
}

impl Reranker for MaxSimReranker {
    /// `maxsim-rerank-minilm-raw384`.
    fn name(&self) -> String {
        format!("maxsim-rerank-{}", self.model.label())
    }

    fn rerank(
        &self,
        query: &str,
        candidates: &[Hit],
        passages: &PassageLookup,
        k: usize,
    ) -> Result<Vec<Hit>> {
        let cands = resolve_candidates(candidates, passages, k)?;
        let q = self.model.encode_query(query)?;
        let dim = self.model.dim();
        let scores = cands
            .iter()
            .map(|c| {
                match self
                    .store
                    .as_ref()
                    .and_then(|s| s.position(c.id).map(|i| (s, i)))
                {
                    Some((s, i)) if s.holds_text(i, c.text) => Ok(s.score(&q.vectors, i)),
                    Some(_) => Err(Error::param(
                        "store",
                        format!(
                            "the token store holds passage `{}` built from another text than \
                             the passage lookup gives; rebuild the store for these passages",
                            c.id
                        ),
                    )),
                    None => Ok(maxsim(&q.vectors, &self.model.encode(c.text)?.vectors, dim)),
                }
            })
            .collect::<Result<Vec<f32>>>()?;
        finish(&cands, &scores, k)
    }
}

// ------------------------------------------------------------------ end-to-end mode

#[cfg(feature = "faiss")]
pub use e2e::{MaxSimEndToEnd, TokenIndex};

#[cfg(feature = "faiss")]
mod e2e {
    use super::*;
    use crate::retrieve::faiss::{IndexParams, VectorIndex};
    use crate::retrieve::{check_k, top_k, Retriever};

    /// Vectors added to FAISS per call while building (bounds the temporary `f32` copy).
    const ADD_CHUNK: usize = 16_384;

    /// A token-level FAISS index over every vector of a [`TokenStore`], for end-to-end
    /// MaxSim retrieval. Exact inner product ([`IndexParams::flat_ip`]) by default; any
    /// inner-product kind (e.g. HNSW) through [`TokenIndex::build_with`].
    pub struct TokenIndex {
        store: TokenStore,
        index: VectorIndex,
    }

    impl TokenIndex {
        /// Index every token vector of `store` exactly (flat inner product).
        pub fn build(store: TokenStore) -> Result<Self> {
            Self::build_with(store, IndexParams::flat_ip())
        }

        /// Index with explicit FAISS parameters. Token vectors are added as stored
        /// (`f16` widened to `f32`), so index similarities equal [`TokenStore::score`]'s.
        pub fn build_with(store: TokenStore, params: IndexParams) -> Result<Self> {
            if params.metric != crate::retrieve::faiss::Metric::InnerProduct {
                return Err(Error::param(
                    "metric",
                    "MaxSim needs the inner product (cosine on normalised vectors)",
                ));
            }
            let dim = store.dim();
            let mut index = VectorIndex::new(params, dim)?;
            let all = store.all_vectors();
            let mut rows: Vec<Vec<f32>> = Vec::new();
            let mut start = 0;
            while start < store.n_vectors() {
                let end = (start + ADD_CHUNK).min(store.n_vectors());
                rows.clear();
                rows.extend(
                    all[start * dim..end * dim]
                        .chunks_exact(dim)
                        .map(|r| r.iter().map(|x| x.to_f32()).collect::<Vec<f32>>()),
                );
                index.add(&rows)?;
                start = end;
            }
            Ok(TokenIndex { store, index })
        }

        /// The store behind the index.
        pub fn store(&self) -> &TokenStore {
            &self.store
        }

        /// Candidate passages (store positions, ascending) for a query matrix
        /// (`|q| × dim`, row-major): the owners of each query token's `k_hat` nearest
        /// passage tokens — at most `k_hat · |q|` passages.
        pub fn candidates(&self, q: &[f32], k_hat: usize) -> Result<Vec<usize>> {
            if k_hat == 0 {
                return Err(Error::param("k_hat", "must be at least 1"));
            }
            let dim = self.store.dim();
            if q.is_empty() || !whole_rows(q.len(), dim) {
                return Err(Error::param(
                    "query",
                    format!(
                        "{} values is not a non-empty multiple of dim {dim}",
                        q.len()
                    ),
                ));
            }
            let queries: Vec<Vec<f32>> = q.chunks_exact(dim).map(<[f32]>::to_vec).collect();
            let mut seen = vec![false; self.store.len()];
            for (row, _) in self.index.search(&queries, k_hat)?.into_iter().flatten() {
                seen[self.store.passage_of_row(row)] = true;
            }
            Ok((0..seen.len()).filter(|&i| seen[i]).collect())
        }

        /// End-to-end search: candidates from the `k_hat` nearest tokens of each query
        /// token, exact mean-MaxSim on those, the best `k`.
        pub fn search(&self, q: &[f32], k: usize, k_hat: usize) -> Result<Vec<Hit>> {
            check_k(k)?;
            let hits = self
                .candidates(q, k_hat)?
                .into_iter()
                .map(|i| Hit::new(self.store.ids()[i].clone(), self.store.score(q, i)))
                .collect();
            top_k(hits, k)
        }
    }

    /// End-to-end late-interaction retrieval (report 003 §3.2.3): `k̂ = ⌈k/λ⌉` nearest
    /// passage tokens per query token, then exact mean-MaxSim on their passages.
    pub struct MaxSimEndToEnd {
        model: Arc<LateInteraction>,
        index: TokenIndex,
        lambda: f32,
    }

    impl MaxSimEndToEnd {
        /// Default λ = 2: report 003's base and best setting, `k̂ = k/2` (Figure 6).
        pub const DEFAULT_LAMBDA: f32 = 2.0;

        /// Build over passages with an exact token index, reusing the store at
        /// `store_path` when its key matches (else building and saving it there).
        pub fn build(
            model: Arc<LateInteraction>,
            passages: &[Passage],
            store_path: Option<&Path>,
        ) -> Result<Self> {
            let store = match store_path {
                Some(p) => model.load_or_build_store(passages, p)?,
                None => model.build_store(passages)?,
            };
            Self::from_index(model, TokenIndex::build(store)?)
        }

        /// Wrap an existing token index (its store must come from the same encoder).
        pub fn from_index(model: Arc<LateInteraction>, index: TokenIndex) -> Result<Self> {
            check_store(&model, index.store())?;
            Ok(MaxSimEndToEnd {
                model,
                index,
                lambda: Self::DEFAULT_LAMBDA,
            })
        }

        /// Set λ (`k̂ = ⌈k/λ⌉`); must be positive and finite.
        pub fn with_lambda(mut self, lambda: f32) -> Result<Self> {
            if !(lambda.is_finite() && lambda > 0.0) {
                return Err(Error::param("lambda", format!("{lambda} is not positive")));
            }
            self.lambda = lambda;
            Ok(self)
        }

        /// `k̂` for a given `k`: `⌈k/λ⌉`, at least 1.
        pub fn k_hat(&self, k: usize) -> usize {
            ((k as f64 / self.lambda as f64).ceil() as usize).max(1)
        }

        /// The token index.
        pub fn index(&self) -> &TokenIndex {
            &self.index
        }
    }

    impl Retriever for MaxSimEndToEnd {
        /// `maxsim-e2e-minilm-raw384-khat_k_over_2` (λ = 2).
        fn name(&self) -> String {
            format!(
                "maxsim-e2e-{}-khat_k_over_{}",
                self.model.label(),
                self.lambda
            )
        }

        fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
            check_k(k)?;
            let q = self.model.encode_query(query)?;
            self.index.search(&q.vectors, k, self.k_hat(k))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit_rows(rows: &[&[f32]]) -> Vec<f32> {
        let dim = rows[0].len();
        let mut m: Vec<f32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
        normalize_rows(&mut m, dim);
        m
    }

    #[test]
    fn maxsim_by_hand() {
        let q = unit_rows(&[&[1.0, 0.0], &[0.0, 1.0]]);
        let d = unit_rows(&[&[1.0, 0.0], &[1.0, 1.0]]);
        // q1: max(1, .7071) = 1; q2: max(0, .7071) = .7071 → mean .85355
        let want = (1.0 + std::f32::consts::FRAC_1_SQRT_2) / 2.0;
        assert!((maxsim(&q, &d, 2) - want).abs() < 1e-6);
        assert!((maxsim_naive(&q, &d, 2) - want).abs() < 1e-6);
        assert_eq!(maxsim(&q, &[], 2), EMPTY_PASSAGE_SCORE);
    }

    #[test]
    fn kde_scott_rule_by_hand() {
        // samples 0, 1, 2, 3: sd (ddof 1) = 1.290994, n^(-1/5) = 0.757858 → h = 0.978391;
        // density at 1.5 = Σ φ((1.5 − x_i)/h) / (n h) = 0.241865 (computed independently
        // in f64; scipy.stats.gaussian_kde uses the same Scott factor on the ddof-1 covariance).
        let (d, h) = gaussian_kde(&[0.0, 1.0, 2.0, 3.0], &[1.5], None);
        assert!((h - 0.978_391).abs() < 1e-5, "{h}");
        assert!((d[0] - 0.241_865).abs() < 1e-5, "{}", d[0]);
        let (_, h1) = gaussian_kde(&[5.0, 5.0], &[5.0], None);
        assert_eq!(h1, 1.0);
    }

    #[test]
    fn html_escapes_and_has_legend() {
        let tr = TokenRelevance {
            query: "a<b".into(),
            query_tokens: vec!["a".into()],
            text: "x <y> & z".into(),
            tokens: vec![
                "x".into(),
                "<".into(),
                "y".into(),
                ">".into(),
                "&".into(),
                "z".into(),
            ],
            offsets: vec![(0, 1), (2, 3), (3, 4), (4, 5), (6, 7), (8, 9)],
            r_abs: vec![0, 1, 2, 0, 0, 1],
            r_acc: vec![0.0, 0.5, 1.0, 0.0, 0.0, 0.4],
            density: vec![0.1, 0.2, 0.3, 0.2, 0.1, 0.05],
            bandwidth: 1.0,
            k_tilde: 1,
            score: 0.5,
        };
        let html = tr.to_html(RelevanceKind::Absolute);
        assert!(!html.contains("<y>") && html.contains("&lt;") && html.contains("&amp;"));
        assert!(html.contains("a&lt;b"));
        assert!(html.contains("rgba(31,119,180,1.000)"), "{html}");
        assert!(html.contains("linear-gradient"));
        assert_eq!(tr.argmax(RelevanceKind::Density), Some(2));
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
