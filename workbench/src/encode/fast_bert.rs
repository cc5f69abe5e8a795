//! A BERT encoder forward pass tuned for CPU throughput.
//!
//! Same arithmetic as Hugging Face `BertModel` (and candle's
//! `candle_transformers::models::bert::BertModel`, which the tests use as the
//! oracle), organised differently:
//!
//! - **no padding at all**: the tokens of every sequence in a batch are packed
//!   into one `(T, hidden)` matrix (`T` = total tokens), so the dense layers —
//!   ~95 % of the work — run as one large matrix product each and never touch a
//!   pad token; attention runs per sequence over exactly its own tokens (the
//!   same result as a padded batch with an additive `-inf`-like mask, whose
//!   padded keys get probability 0);
//! - **fused query/key/value projection**: one `(hidden, 3·hidden)` product
//!   instead of three;
//! - **residuals accumulated in the product**: the output projections add
//!   their product into `residual + bias` (`C ← C + A·W`), so bias, residual
//!   and product cost no extra pass; LayerNorm then runs in place;
//! - **fused element-wise passes**: bias + GELU is one in-place pass over the
//!   product's output, in plain Rust with AVX2/FMA when the CPU has them
//!   (runtime detection), vectorised `exp`/`erf` polynomials;
//! - **attention in register tiles**: per sequence and head, `4 × 16` tiles of
//!   the score and context products held in eight AVX2 registers (explicit
//!   intrinsics; LLVM does not vectorise these loops reliably), softmax in
//!   between; a portable scalar path otherwise;
//! - **four buffers per pass**, allocated once and reused by every layer (no
//!   per-layer allocation, zeroing or page faults);
//! - matrix products through the `gemm` crate (the one candle uses), with its
//!   AVX-512 kernels where the CPU has them, weights stored once as contiguous
//!   `(in, out)` matrices;
//! - **two ways to use threads** ([`Threads`]): a pass either splits every
//!   step across the current rayon pool, or runs entirely on the calling thread
//!   so that a caller can run several passes side by side with no
//!   synchronisation between steps ([`BertEncoder::embed`](super::BertEncoder::embed)
//!   does the latter when it has enough passes to share out).
//!
//! `exp` and `erf` are polynomial approximations (relative error ≈ 1e-7, the
//! Cephes `expf` kernel and Abramowitz–Stegun 7.1.26 with |error| ≤ 1.5e-7),
//! far below the 1e-5 agreement the tests ask of the output.

use crate::kernels::{self, gemm::Mat, rows};
use candle_core::DType;
use candle_nn::VarBuilder;
use rayon::prelude::*;

pub use crate::kernels::rows::Activation;

/// How one forward pass uses threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// Every step on the calling thread: for callers that run several
    /// passes at once, one per thread.
    One,
    /// Matrix products, attention and the element-wise passes split across
    /// the current rayon pool: for a single pass (lowest latency).
    Pool,
}

/// The shape of the network, read from the checkpoint's `config.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// Hidden size (embedding dimension).
    pub hidden: usize,
    /// Attention heads.
    pub heads: usize,
    /// Feed-forward inner size.
    pub intermediate: usize,
    /// Transformer layers.
    pub layers: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Largest position.
    pub max_positions: usize,
    /// Token-type vocabulary size.
    pub type_vocab: usize,
    /// LayerNorm epsilon.
    pub eps: f32,
    /// Feed-forward activation.
    pub activation: Activation,
}

struct Norm {
    w: Vec<f32>,
    b: Vec<f32>,
}

/// One transformer layer; matrices are row-major `(in, out)`.
struct Layer {
    qkv_w: Vec<f32>, // (hidden, 3·hidden)
    qkv_b: Vec<f32>,
    attn_out_w: Vec<f32>, // (hidden, hidden)
    attn_out_b: Vec<f32>,
    ln1: Norm,
    inter_w: Vec<f32>, // (hidden, intermediate)
    inter_b: Vec<f32>,
    out_w: Vec<f32>, // (intermediate, hidden)
    out_b: Vec<f32>,
    ln2: Norm,
}

/// The fused, padding-free BERT forward pass. See the module docs.
pub struct FastBert {
    shape: Shape,
    word: Vec<f32>,
    pos: Vec<f32>,
    /// Token-type embeddings, `(type_vocab, hidden)` row-major.
    typ: Vec<f32>,
    emb_ln: Norm,
    layers: Vec<Layer>,
}

fn vec1(t: candle_core::Tensor) -> candle_core::Result<Vec<f32>> {
    t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()
}

/// `weight` / `bias`, or the `gamma` / `beta` names of old TF-converted checkpoints.
fn load_norm(vb: &VarBuilder, hidden: usize) -> candle_core::Result<Norm> {
    let (w, b) = if vb.contains_tensor("weight") {
        ("weight", "bias")
    } else {
        ("gamma", "beta")
    };
    Ok(Norm {
        w: vec1(vb.get(hidden, w)?)?,
        b: vec1(vb.get(hidden, b)?)?,
    })
}

/// A linear layer's weight `(out, in)` as a row-major `(in, out)` matrix, and its bias.
fn load_linear(
    vb: &VarBuilder,
    inp: usize,
    out: usize,
) -> candle_core::Result<(Vec<f32>, Vec<f32>)> {
    let w = vb.get((out, inp), "weight")?.to_dtype(DType::F32)?;
    let b = vec1(vb.get(out, "bias")?)?;
    Ok((vec1(w.t()?.contiguous()?)?, b))
}

/// Columns `[q | k | v]` of three row-major `(inp, h)` matrices side by side: `(inp, 3h)`.
fn concat_columns(parts: [&[f32]; 3], inp: usize, h: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(inp * 3 * h);
    for r in 0..inp {
        for p in parts {
            out.extend_from_slice(&p[r * h..(r + 1) * h]);
        }
    }
    out
}

/// `dst (m×n) = a (m×k) · w (k×n)`, or `dst += a · w` when `accumulate`; all row-major.
fn matmul(
    dst: &mut [f32],
    a: &[f32],
    w: &[f32],
    (m, k, n): (usize, usize, usize),
    accumulate: bool,
    threads: Threads,
) {
    assert!(dst.len() == m * n && a.len() == m * k && w.len() == k * n);
    if m == 0 || n == 0 {
        return;
    }
    let parallelism = match threads {
        Threads::Pool if rayon::current_num_threads() > 1 => {
            gemm::Parallelism::Rayon(rayon::current_num_threads())
        }
        _ => gemm::Parallelism::None,
    };
    // The three matrices are row-major with the asserted sizes; with `accumulate` false,
    // gemm writes dst without reading it (alpha is then ignored).
    let a = Mat::rows(a, m, k).expect("m × k (asserted above)");
    let w = Mat::rows(w, k, n).expect("k × n (asserted above)");
    kernels::gemm::gemm(dst, 0, n, a, w, accumulate, 1.0, 1.0, parallelism)
        .expect("matrix shapes asserted above");
}

/// Apply `f` to every `width`-long row of `buf`, in blocks of rows across the
/// pool (`Threads::Pool`) or in turn. `f` gets the row index and the row.
fn rows_mut(
    buf: &mut [f32],
    width: usize,
    threads: Threads,
    f: impl Fn(usize, &mut [f32]) + Sync + Send,
) {
    const ROWS: usize = 16;
    match threads {
        Threads::Pool => buf
            .par_chunks_mut(ROWS * width)
            .enumerate()
            .for_each(|(c, block)| {
                for (r, row) in block.chunks_mut(width).enumerate() {
                    f(c * ROWS + r, row);
                }
            }),
        Threads::One => {
            for (r, row) in buf.chunks_mut(width).enumerate() {
                f(r, row);
            }
        }
    }
}

impl FastBert {
    /// Load the weights under `vb`, which must point at the BERT root (the
    /// folder holding `embeddings.*` and `encoder.*`).
    pub fn load(vb: VarBuilder, shape: Shape) -> candle_core::Result<Self> {
        let h = shape.hidden;
        if shape.heads == 0 || h / shape.heads * shape.heads != h {
            candle_core::bail!(
                "hidden_size {h} is not a multiple of num_attention_heads {}",
                shape.heads
            );
        }
        let e = vb.pp("embeddings");
        let word = vec1(e.get((shape.vocab, h), "word_embeddings.weight")?)?;
        let pos = vec1(e.get((shape.max_positions, h), "position_embeddings.weight")?)?;
        let typ = vec1(e.get((shape.type_vocab, h), "token_type_embeddings.weight")?)?;
        let emb_ln = load_norm(&e.pp("LayerNorm"), h)?;
        let mut layers = Vec::with_capacity(shape.layers);
        for l in 0..shape.layers {
            let lv = vb.pp(format!("encoder.layer.{l}"));
            let att = lv.pp("attention");
            let (qw, qb) = load_linear(&att.pp("self").pp("query"), h, h)?;
            let (kw, kb) = load_linear(&att.pp("self").pp("key"), h, h)?;
            let (vw, vb_) = load_linear(&att.pp("self").pp("value"), h, h)?;
            let qkv_w = concat_columns([&qw, &kw, &vw], h, h);
            let qkv_b = [qb, kb, vb_].concat();
            let (attn_out_w, attn_out_b) = load_linear(&att.pp("output").pp("dense"), h, h)?;
            let ln1 = load_norm(&att.pp("output").pp("LayerNorm"), h)?;
            let (inter_w, inter_b) =
                load_linear(&lv.pp("intermediate").pp("dense"), h, shape.intermediate)?;
            let (out_w, out_b) = load_linear(&lv.pp("output").pp("dense"), shape.intermediate, h)?;
            let ln2 = load_norm(&lv.pp("output").pp("LayerNorm"), h)?;
            layers.push(Layer {
                qkv_w,
                qkv_b,
                attn_out_w,
                attn_out_b,
                ln1,
                inter_w,
                inter_b,
                out_w,
                out_b,
                ln2,
            });
        }
        Ok(FastBert {
            typ,
            shape,
            word,
            pos,
            emb_ln,
            layers,
        })
    }

    /// The network's shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// Last hidden states of every token of every sequence (token type 0,
    /// positions from 0), packed: rows `offset_i .. offset_i + len_i` of the
    /// returned row-major `(Σ len_i, hidden)` matrix belong to `seqs[i]`.
    /// Every step is split across the current rayon pool
    /// ([`Threads::Pool`]); see [`forward_with`](Self::forward_with).
    pub fn forward(&self, seqs: &[&[u32]]) -> candle_core::Result<Vec<f32>> {
        self.forward_with(seqs, Threads::Pool)
    }

    /// [`forward`](Self::forward) with a choice of threading. The result does
    /// not depend on it beyond float rounding (the matrix products may block
    /// their sums differently).
    pub fn forward_with(&self, seqs: &[&[u32]], threads: Threads) -> candle_core::Result<Vec<f32>> {
        self.forward_typed(seqs, None, threads)
    }

    /// [`forward_with`](Self::forward_with) with token type ids (`types[i]` as long as
    /// `seqs[i]`; `None`: all 0), for sentence pairs (question answering).
    pub fn forward_typed(
        &self,
        seqs: &[&[u32]],
        types: Option<&[&[u32]]>,
        threads: Threads,
    ) -> candle_core::Result<Vec<f32>> {
        let h = self.shape.hidden;
        if let Some(types) = types {
            if types.len() != seqs.len() || types.iter().zip(seqs).any(|(t, s)| t.len() != s.len())
            {
                candle_core::bail!("token types do not match the sequences in number or length");
            }
            if let Some(&bad) = types
                .iter()
                .flat_map(|t| t.iter())
                .find(|&&t| t as usize >= self.shape.type_vocab)
            {
                candle_core::bail!(
                    "token type {bad} outside type_vocab_size {}",
                    self.shape.type_vocab
                );
            }
        }
        let lens: Vec<usize> = seqs.iter().map(|s| s.len()).collect();
        let total: usize = lens.iter().sum();
        if total == 0 {
            return Ok(Vec::new());
        }
        for s in seqs {
            if s.len() > self.shape.max_positions {
                candle_core::bail!(
                    "sequence of {} tokens is longer than max_position_embeddings {}",
                    s.len(),
                    self.shape.max_positions
                );
            }
            if let Some(&bad) = s.iter().find(|&&id| id as usize >= self.shape.vocab) {
                candle_core::bail!(
                    "token id {bad} outside the vocabulary ({})",
                    self.shape.vocab
                );
            }
        }
        let mut x = self.embed(seqs, types, total, threads);
        let mut buf = Buffers {
            qkv: vec![0f32; total * 3 * h],
            ctx: vec![0f32; total * h],
            inter: vec![0f32; total * self.shape.intermediate],
        };
        for layer in &self.layers {
            self.layer(layer, &mut x, &mut buf, &lens, threads);
        }
        debug_assert_eq!(x.len(), total * h);
        Ok(x)
    }

    fn embed(
        &self,
        seqs: &[&[u32]],
        types: Option<&[&[u32]]>,
        total: usize,
        threads: Threads,
    ) -> Vec<f32> {
        let h = self.shape.hidden;
        let mut x = vec![0f32; total * h];
        let mut rows: Vec<(u32, usize, usize)> = Vec::with_capacity(total);
        for (i, s) in seqs.iter().enumerate() {
            let t = types.map(|t| t[i]);
            rows.extend(
                s.iter()
                    .enumerate()
                    .map(|(p, &id)| (id, p, t.map_or(0, |t| t[p] as usize))),
            );
        }
        let eps = self.shape.eps;
        rows_mut(&mut x, h, threads, |r, row| {
            let (id, p, t) = rows[r];
            let w = &self.word[id as usize * h..][..h];
            let pe = &self.pos[p * h..][..h];
            let te = &self.typ[t * h..][..h];
            for i in 0..h {
                row[i] = w[i] + pe[i] + te[i];
            }
            rows::layer_norm_in_place(row, &self.emb_ln.w, &self.emb_ln.b, eps);
        });
        x
    }

    /// One transformer layer, `x` updated in place.
    fn layer(&self, l: &Layer, x: &mut [f32], buf: &mut Buffers, lens: &[usize], threads: Threads) {
        let h = self.shape.hidden;
        let n = self.shape.intermediate;
        let total = x.len() / h;
        let eps = self.shape.eps;

        // Self-attention: x ← LayerNorm(x + b_o + attention(x)·W_o).
        rows_mut(&mut buf.qkv, 3 * h, threads, |_, row| {
            row.copy_from_slice(&l.qkv_b)
        });
        matmul(&mut buf.qkv, x, &l.qkv_w, (total, h, 3 * h), true, threads);
        self.attention(&buf.qkv, lens, &mut buf.ctx, threads);
        rows_mut(x, h, threads, |_, row| {
            rows::add_in_place(row, &l.attn_out_b)
        });
        matmul(x, &buf.ctx, &l.attn_out_w, (total, h, h), true, threads);
        rows_mut(x, h, threads, |_, row| {
            rows::layer_norm_in_place(row, &l.ln1.w, &l.ln1.b, eps)
        });

        // Feed-forward: x ← LayerNorm(x + b_2 + act(x·W_1 + b_1)·W_2).
        matmul(&mut buf.inter, x, &l.inter_w, (total, h, n), false, threads);
        let act = self.shape.activation;
        rows_mut(&mut buf.inter, n, threads, |_, row| {
            rows::bias_act_in_place(row, &l.inter_b, act)
        });
        rows_mut(x, h, threads, |_, row| rows::add_in_place(row, &l.out_b));
        matmul(x, &buf.inter, &l.out_w, (total, n, h), true, threads);
        rows_mut(x, h, threads, |_, row| {
            rows::layer_norm_in_place(row, &l.ln2.w, &l.ln2.b, eps)
        });
    }

    /// Multi-head attention over the packed `(T, 3·hidden)` projections
    /// (biases included); each sequence attends to its own tokens only.
    /// Writes the `(T, hidden)` context into `ctx`.
    fn attention(&self, qkv: &[f32], lens: &[usize], ctx: &mut [f32], threads: Threads) {
        let h = self.shape.hidden;
        let heads = self.shape.heads;
        // Split the output into one disjoint block per sequence.
        let mut blocks: Vec<(usize, &mut [f32])> = Vec::with_capacity(lens.len());
        let mut rest: &mut [f32] = ctx;
        let mut offset = 0;
        for &len in lens {
            let (head, tail) = rest.split_at_mut(len * h);
            blocks.push((offset, head));
            rest = tail;
            offset += len;
        }
        let longest = lens.iter().copied().max().unwrap_or(0);
        let one = |scores: &mut Vec<f32>, (offset, out): (usize, &mut [f32])| {
            let len = out.len() / h;
            if len == 0 {
                return;
            }
            let rows = &qkv[offset * 3 * h..(offset + len) * 3 * h];
            attention_seq(rows, out, len, h, heads, &mut scores[..len * len]);
        };
        match threads {
            Threads::Pool => blocks
                .into_par_iter()
                .for_each_init(|| vec![0f32; longest * longest], one),
            Threads::One => {
                let mut scores = vec![0f32; longest * longest];
                for b in blocks {
                    one(&mut scores, b);
                }
            }
        }
    }
}

/// Attention of one sequence: `rows` is its `(len, 3·h)` block of the
/// query/key/value projections, `out` its `(len, h)` context, `scores` room
/// for `len × len` floats. Per head: `S = Q·Kᵀ/√d` and `out_h = softmax(S)·V`,
/// both matrix products read `Q`, `K` and `V` in place (strided).
fn attention_seq(
    rows: &[f32],
    out: &mut [f32],
    len: usize,
    h: usize,
    heads: usize,
    scores: &mut [f32],
) {
    assert!(rows.len() == len * 3 * h && out.len() == len * h && scores.len() == len * len);
    let d = h / heads;
    let scale = 1.0 / (d as f32).sqrt();
    let mats = |hd: usize| -> candle_core::Result<[Mat; 3]> {
        // Q_h, K_h and V_h: rows[i·3h + hd·d + c], rows[j·3h + h + hd·d + c] and
        // rows[j·3h + 2h + hd·d + c] for i, j < len and c < d, read in place (strided).
        let head = |at: usize| Mat::new(rows, at + hd * d, (len, d), (3 * h, 1));
        Ok([head(0)?, head(h)?, head(2 * h)?])
    };
    let none = gemm::Parallelism::None;
    for hd in 0..heads {
        let [q, k, v] = mats(hd).expect("in `rows` (asserted above)");
        // S = Q_h·K_hᵀ·scale: the row-major (len, len) `scores`, written without being read.
        kernels::gemm::gemm(scores, 0, len, q, k.t(), false, 0.0, scale, none)
            .expect("shapes asserted above");
        for row in scores.chunks_exact_mut(len) {
            rows::softmax_row(row);
        }
        // out[i·h + hd·d + c] (i < len, c < d) = S·V_h, written without being read.
        let s = Mat::rows(scores, len, len).expect("len × len (asserted above)");
        kernels::gemm::gemm(out, hd * d, h, s, v, false, 0.0, 1.0, none)
            .expect("shapes asserted above");
    }
}

/// The work buffers of one forward pass, reused by every layer.
struct Buffers {
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    inter: Vec<f32>,
}

#[cfg(test)]
mod tests {
    use super::{Activation, FastBert, Shape, Threads};
    use candle_core::{DType, Device, Tensor};
    use candle_nn::VarBuilder;
    use rand::{Rng, SeedableRng};
    use std::collections::HashMap;

    const H: usize = 64;
    const HEADS: usize = 4;
    const INTER: usize = 128;
    const LAYERS: usize = 2;
    const VOCAB: usize = 100;
    const MAX_POS: usize = 80;

    /// A small BERT with random weights (fixed seed), as candle tensors by checkpoint name.
    fn weights() -> HashMap<String, Tensor> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut t = |shape: &[usize], centre: f32, spread: f32| {
            let n: usize = shape.iter().product();
            let v: Vec<f32> = (0..n)
                .map(|_| centre + rng.gen_range(-spread..spread))
                .collect();
            Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
        };
        let mut m = HashMap::new();
        m.insert(
            "embeddings.word_embeddings.weight".into(),
            t(&[VOCAB, H], 0.0, 1.0),
        );
        m.insert(
            "embeddings.position_embeddings.weight".into(),
            t(&[MAX_POS, H], 0.0, 0.5),
        );
        m.insert(
            "embeddings.token_type_embeddings.weight".into(),
            t(&[2, H], 0.0, 0.5),
        );
        m.insert("embeddings.LayerNorm.weight".into(), t(&[H], 1.0, 0.2));
        m.insert("embeddings.LayerNorm.bias".into(), t(&[H], 0.0, 0.2));
        for l in 0..LAYERS {
            let p = format!("encoder.layer.{l}");
            for name in [
                "attention.self.query",
                "attention.self.key",
                "attention.self.value",
                "attention.output.dense",
            ] {
                m.insert(format!("{p}.{name}.weight"), t(&[H, H], 0.0, 0.25));
                m.insert(format!("{p}.{name}.bias"), t(&[H], 0.0, 0.1));
            }
            m.insert(
                format!("{p}.intermediate.dense.weight"),
                t(&[INTER, H], 0.0, 0.2),
            );
            m.insert(
                format!("{p}.intermediate.dense.bias"),
                t(&[INTER], 0.0, 0.1),
            );
            m.insert(
                format!("{p}.output.dense.weight"),
                t(&[H, INTER], 0.0, 0.15),
            );
            m.insert(format!("{p}.output.dense.bias"), t(&[H], 0.0, 0.1));
            for ln in ["attention.output.LayerNorm", "output.LayerNorm"] {
                m.insert(format!("{p}.{ln}.weight"), t(&[H], 1.0, 0.2));
                m.insert(format!("{p}.{ln}.bias"), t(&[H], 0.0, 0.2));
            }
        }
        m
    }

    fn candle_config() -> candle_transformers::models::bert::Config {
        use candle_transformers::models::bert::{Config, HiddenAct};
        Config {
            vocab_size: VOCAB,
            hidden_size: H,
            num_hidden_layers: LAYERS,
            num_attention_heads: HEADS,
            intermediate_size: INTER,
            hidden_act: HiddenAct::Gelu,
            hidden_dropout_prob: 0.0,
            max_position_embeddings: MAX_POS,
            type_vocab_size: 2,
            initializer_range: 0.02,
            layer_norm_eps: 1e-12,
            pad_token_id: 0,
            position_embedding_type: Default::default(),
            use_cache: false,
            classifier_dropout: None,
            model_type: None,
        }
    }

    /// candle-transformers' BertModel on a padded batch, unpadded and packed.
    fn reference(seqs: &[Vec<u32>]) -> Vec<f32> {
        let vb = VarBuilder::from_tensors(weights(), DType::F32, &Device::Cpu);
        let model =
            candle_transformers::models::bert::BertModel::load(vb, &candle_config()).unwrap();
        let s = seqs.iter().map(|x| x.len()).max().unwrap();
        let (mut ids, mut mask) = (vec![0u32; seqs.len() * s], vec![0u32; seqs.len() * s]);
        for (i, q) in seqs.iter().enumerate() {
            ids[i * s..i * s + q.len()].copy_from_slice(q);
            mask[i * s..i * s + q.len()].iter_mut().for_each(|m| *m = 1);
        }
        let ids = Tensor::from_vec(ids, (seqs.len(), s), &Device::Cpu).unwrap();
        let mask = Tensor::from_vec(mask, (seqs.len(), s), &Device::Cpu).unwrap();
        let h = model
            .forward(&ids, &ids.zeros_like().unwrap(), Some(&mask))
            .unwrap();
        let h = h.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let mut out = Vec::new();
        for (i, q) in seqs.iter().enumerate() {
            out.extend_from_slice(&h[i * s * H..(i * s + q.len()) * H]);
        }
        out
    }

    #[test]
    fn both_threadings_match_candle_bert_model() {
        let vb = VarBuilder::from_tensors(weights(), DType::F32, &Device::Cpu);
        let shape = Shape {
            hidden: H,
            heads: HEADS,
            intermediate: INTER,
            layers: LAYERS,
            vocab: VOCAB,
            max_positions: MAX_POS,
            type_vocab: 2,
            eps: 1e-12,
            activation: Activation::Gelu,
        };
        let fast = FastBert::load(vb, shape).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let seqs: Vec<Vec<u32>> = [1usize, 5, 17, 33, 80, 2, 64]
            .iter()
            .map(|&n| (0..n).map(|_| rng.gen_range(0..VOCAB as u32)).collect())
            .collect();
        let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
        let want = reference(&seqs);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for threads in [Threads::One, Threads::Pool] {
            let got = pool.install(|| fast.forward_with(&refs, threads)).unwrap();
            assert_eq!(got.len(), want.len());
            let worst = got
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(worst < 2e-5, "{threads:?}: max |fast − candle| = {worst:e}");
        }
        // Bad input is an error, not a panic.
        assert!(fast.forward(&[&[VOCAB as u32]]).is_err());
        assert!(fast.forward(&[&vec![1u32; MAX_POS + 1]]).is_err());
        assert!(fast.forward(&[&[], &[]]).unwrap().is_empty());
    }
}
