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

use candle_core::DType;
use candle_nn::VarBuilder;
use rayon::prelude::*;

/// Hidden activation of the feed-forward block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `0.5·x·(1 + erf(x/√2))` (HF `"gelu"`).
    Gelu,
    /// The tanh approximation (HF `"gelu_new"`, `"gelu_pytorch_tanh"`).
    GeluTanh,
    /// `max(x, 0)`.
    Relu,
}

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
    // SAFETY: the three matrices are row-major with the asserted sizes (column
    // stride 1, row strides n, k and n), and `dst` does not alias `a` or `w`
    // (it is borrowed mutably). With `accumulate` false, gemm writes dst
    // without reading it (alpha is then ignored).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.as_ptr(),
            1,
            k as isize,
            w.as_ptr(),
            1,
            n as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
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
            kernels::layer_norm_in_place(row, &self.emb_ln.w, &self.emb_ln.b, eps);
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
            kernels::add_in_place(row, &l.attn_out_b)
        });
        matmul(x, &buf.ctx, &l.attn_out_w, (total, h, h), true, threads);
        rows_mut(x, h, threads, |_, row| {
            kernels::layer_norm_in_place(row, &l.ln1.w, &l.ln1.b, eps)
        });

        // Feed-forward: x ← LayerNorm(x + b_2 + act(x·W_1 + b_1)·W_2).
        matmul(&mut buf.inter, x, &l.inter_w, (total, h, n), false, threads);
        let act = self.shape.activation;
        rows_mut(&mut buf.inter, n, threads, |_, row| {
            kernels::bias_act_in_place(row, &l.inter_b, act)
        });
        rows_mut(x, h, threads, |_, row| kernels::add_in_place(row, &l.out_b));
        matmul(x, &buf.inter, &l.out_w, (total, n, h), true, threads);
        rows_mut(x, h, threads, |_, row| {
            kernels::layer_norm_in_place(row, &l.ln2.w, &l.ln2.b, eps)
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
    let (rs, ls, hs) = ((3 * h) as isize, len as isize, h as isize);
    for hd in 0..heads {
        // SAFETY: Q_h is rows[i·3h + hd·d + c] and K_h rows[j·3h + h + hd·d + c]
        // for i, j < len and c < d, inside `rows` (len·3h floats); S is the
        // row-major (len, len) `scores`, written without being read.
        unsafe {
            gemm::gemm(
                len,
                len,
                d,
                scores.as_mut_ptr(),
                1,
                ls,
                false,
                rows.as_ptr().add(hd * d),
                1,
                rs,
                rows.as_ptr().add(h + hd * d),
                rs,
                1,
                0.0,
                scale,
                false,
                false,
                false,
                gemm::Parallelism::None,
            );
        }
        for row in scores.chunks_exact_mut(len) {
            kernels::softmax_row(row);
        }
        // SAFETY: V_h is rows[j·3h + 2h + hd·d + c] (j < len, c < d), inside
        // `rows`; the destination is out[i·h + hd·d + c] (i < len, c < d),
        // inside `out` (len·h floats), written without being read; `scores`
        // is (len, len).
        unsafe {
            gemm::gemm(
                len,
                d,
                len,
                out.as_mut_ptr().add(hd * d),
                1,
                hs,
                false,
                scores.as_ptr(),
                1,
                ls,
                rows.as_ptr().add(2 * h + hd * d),
                1,
                rs,
                0.0,
                1.0,
                false,
                false,
                false,
                gemm::Parallelism::None,
            );
        }
    }
}

/// The work buffers of one forward pass, reused by every layer.
struct Buffers {
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    inter: Vec<f32>,
}

pub(crate) use kernels::{gelu_grad_in_place, gelu_into, softmax_backward_row, softmax_row};

/// Row kernels, compiled twice: for AVX2 + FMA (picked at run time when the
/// CPU has them) and for the baseline target.
mod kernels {
    use super::Activation;

    #[inline(always)]
    fn fma<const F: bool>(a: f32, b: f32, c: f32) -> f32 {
        if F {
            a.mul_add(b, c)
        } else {
            a * b + c
        }
    }

    /// Sum with eight independent accumulators (vectorisable under strict IEEE semantics).
    #[inline(always)]
    fn sum8(xs: &[f32]) -> f32 {
        let mut acc = [0f32; 8];
        let chunks = xs.chunks_exact(8);
        let rem = chunks.remainder();
        for c in chunks {
            for i in 0..8 {
                acc[i] += c[i];
            }
        }
        let mut s =
            ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
        for &r in rem {
            s += r;
        }
        s
    }

    /// `e^x` for f32, Cephes `expf` kernel, branch-free (vectorises).
    #[inline(always)]
    pub(super) fn exp<const F: bool>(x: f32) -> f32 {
        const LOG2E: f32 = std::f32::consts::LOG2_E;
        const C1: f32 = 0.693_359_4;
        const C2: f32 = -2.121_944_4e-4;
        const MAGIC: f32 = 12_582_912.0; // 1.5 · 2^23: adding it rounds to an integer
                                         // Below −87.3 the result is 0 (not e^−87.3 ≈ 1e−38, whose products with anything
                                         // below 1 are subnormal floats, which the CPU multiplies ~100× slower).
        let keep = if x >= -87.3 { 1.0 } else { 0.0 };
        let x = x.clamp(-87.3, 88.3);
        let t = fma::<F>(x, LOG2E, MAGIC);
        let n = t - MAGIC;
        let r = fma::<F>(n, -C1, x);
        let r = fma::<F>(n, -C2, r);
        let mut p = 1.987_569_2e-4f32;
        p = fma::<F>(p, r, 1.398_2e-3);
        p = fma::<F>(p, r, 8.333_452e-3);
        p = fma::<F>(p, r, 4.166_579_6e-2);
        p = fma::<F>(p, r, 1.666_666_5e-1);
        p = fma::<F>(p, r, 0.5); // Cephes: 5.0000001201e-1, which rounds to 0.5 in f32
        let e = fma::<F>(p, r * r, r) + 1.0;
        let bits = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
        let scale = f32::from_bits(((bits + 127) << 23) as u32);
        e * scale * keep
    }

    /// erf(x), Abramowitz & Stegun 7.1.26 (|error| ≤ 1.5e-7).
    #[inline(always)]
    fn erf<const F: bool>(x: f32) -> f32 {
        let a = x.abs();
        let t = 1.0 / fma::<F>(0.327_591_1, a, 1.0);
        let mut p = 1.061_405_4f32;
        p = fma::<F>(p, t, -1.453_152);
        p = fma::<F>(p, t, 1.421_413_7);
        p = fma::<F>(p, t, -0.284_496_74);
        p = fma::<F>(p, t, 0.254_829_6);
        let y = 1.0 - p * t * exp::<F>(-a * a);
        y.copysign(x)
    }

    #[inline(always)]
    fn act<const F: bool>(x: f32, kind: Activation) -> f32 {
        match kind {
            Activation::Gelu => 0.5 * x * (1.0 + erf::<F>(x * std::f32::consts::FRAC_1_SQRT_2)),
            Activation::GeluTanh => {
                let u = 0.797_884_6 * fma::<F>(0.044_715 * x, x * x, x);
                let tanh = 1.0 - 2.0 / (exp::<F>(2.0 * u) + 1.0);
                0.5 * x * (1.0 + tanh)
            }
            Activation::Relu => x.max(0.0),
        }
    }

    #[inline(always)]
    fn norm_impl<const F: bool>(v: &mut [f32], w: &[f32], b: &[f32], eps: f32) {
        let n = v.len() as f32;
        let mean = sum8(v) / n;
        for x in v.iter_mut() {
            *x -= mean;
        }
        let mut acc = [0f32; 8];
        let chunks = v.chunks_exact(8);
        let rem = chunks.remainder();
        for c in chunks {
            for i in 0..8 {
                acc[i] = fma::<F>(c[i], c[i], acc[i]);
            }
        }
        let mut ss: f32 = acc.iter().sum();
        for &r in rem {
            ss += r * r;
        }
        let inv = 1.0 / (ss / n + eps).sqrt();
        for ((x, &w), &b) in v.iter_mut().zip(w).zip(b) {
            *x = fma::<F>(*x * inv, w, b);
        }
    }

    #[inline(always)]
    fn add_impl<const F: bool>(v: &mut [f32], b: &[f32]) {
        for (x, &y) in v.iter_mut().zip(b) {
            *x += y;
        }
    }

    #[inline(always)]
    fn bias_act_impl<const F: bool>(v: &mut [f32], bias: &[f32], kind: Activation) {
        let n = v.len().min(bias.len());
        match kind {
            Activation::Gelu => {
                #[cfg(target_arch = "x86_64")]
                if F {
                    // SAFETY: AVX2+FMA path only (checked at run time).
                    return unsafe { avx2::bias_gelu_in_place(&mut v[..n], &bias[..n]) };
                }
                for i in 0..n {
                    v[i] = act::<F>(v[i] + bias[i], Activation::Gelu);
                }
            }
            Activation::GeluTanh => {
                for i in 0..n {
                    v[i] = act::<F>(v[i] + bias[i], Activation::GeluTanh);
                }
            }
            Activation::Relu => {
                for i in 0..n {
                    v[i] = (v[i] + bias[i]).max(0.0);
                }
            }
        }
    }

    /// 1 / √(2π).
    const INV_SQRT_2PI: f32 = 0.398_942_3;

    /// `d gelu(x) / dx = Φ(x) + x φ(x)`.
    #[inline(always)]
    fn gelu_grad<const F: bool>(x: f32) -> f32 {
        let cdf = 0.5 * (1.0 + erf::<F>(x * std::f32::consts::FRAC_1_SQRT_2));
        fma::<F>(x, INV_SQRT_2PI * exp::<F>(-0.5 * x * x), cdf)
    }

    #[inline(always)]
    fn gelu_into_impl<const F: bool>(x: &[f32], y: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if F {
            // SAFETY: AVX2+FMA path only (checked at run time).
            return unsafe { avx2::gelu_into(x, y) };
        }
        for (y, &x) in y.iter_mut().zip(x) {
            *y = act::<F>(x, Activation::Gelu);
        }
    }

    #[inline(always)]
    fn gelu_grad_impl<const F: bool>(x: &[f32], d: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if F {
            // SAFETY: AVX2+FMA path only (checked at run time).
            return unsafe { avx2::gelu_grad_in_place(x, d) };
        }
        for (d, &x) in d.iter_mut().zip(x) {
            *d *= gelu_grad::<F>(x);
        }
    }

    /// The backward pass of a softmax row in place: `d ← p ⊙ (d − Σ d·p)`.
    #[inline(always)]
    fn softmax_backward_impl<const F: bool>(d: &mut [f32], p: &[f32]) {
        let n = d.len().min(p.len());
        let (d, p) = (&mut d[..n], &p[..n]);
        let mut acc = [0f32; 16];
        let (dc, pc) = (d.chunks_exact(16), p.chunks_exact(16));
        let (dr, pr) = (dc.remainder(), pc.remainder());
        for (a, b) in dc.zip(pc) {
            for i in 0..16 {
                acc[i] = fma::<F>(a[i], b[i], acc[i]);
            }
        }
        let mut s: f32 = acc.iter().sum();
        for (a, b) in dr.iter().zip(pr) {
            s += a * b;
        }
        for (a, &b) in d.iter_mut().zip(p) {
            *a = b * (*a - s);
        }
    }

    /// Largest element, eight lanes at a time.
    #[inline(always)]
    fn max8(xs: &[f32]) -> f32 {
        let mut acc = [f32::NEG_INFINITY; 8];
        let chunks = xs.chunks_exact(8);
        let rem = chunks.remainder();
        for c in chunks {
            for i in 0..8 {
                acc[i] = if c[i] > acc[i] { c[i] } else { acc[i] };
            }
        }
        let mut m = f32::NEG_INFINITY;
        for &x in acc.iter().chain(rem) {
            m = if x > m { x } else { m };
        }
        m
    }

    /// Softmax of one row in place.
    #[inline(always)]
    fn softmax_impl<const F: bool>(row: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if F {
            // SAFETY: AVX2+FMA path only (checked at run time).
            return unsafe { avx2::softmax_row(row) };
        }
        let max = max8(row);
        for s in row.iter_mut() {
            *s = exp::<F>(*s - max);
        }
        let inv = 1.0 / sum8(row);
        for s in row.iter_mut() {
            *s *= inv;
        }
    }

    /// Explicit AVX2 + FMA versions of the hot loops (LLVM does not vectorise
    /// them reliably). Only called after run-time detection.
    #[cfg(target_arch = "x86_64")]
    mod avx2 {
        use std::arch::x86_64::*;

        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn exp8(x: __m256) -> __m256 {
            // All ones where x ≥ −87.3: below, the result is 0 (see the scalar `exp`).
            let keep = _mm256_cmp_ps::<_CMP_GE_OQ>(x, _mm256_set1_ps(-87.3));
            let x = _mm256_min_ps(
                _mm256_max_ps(x, _mm256_set1_ps(-87.3)),
                _mm256_set1_ps(88.3),
            );
            let magic = _mm256_set1_ps(12_582_912.0);
            let t = _mm256_fmadd_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E), magic);
            let n = _mm256_sub_ps(t, magic);
            let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
            let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
            let mut p = _mm256_set1_ps(1.987_569_2e-4);
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.398_2e-3));
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.333_452e-3));
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.166_579_6e-2));
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.666_666_5e-1));
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5));
            let e = _mm256_add_ps(
                _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r),
                _mm256_set1_ps(1.0),
            );
            let bits = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_castps_si256(magic));
            let scale = _mm256_castsi256_ps(_mm256_slli_epi32(
                _mm256_add_epi32(bits, _mm256_set1_epi32(127)),
                23,
            ));
            _mm256_and_ps(_mm256_mul_ps(e, scale), keep)
        }

        /// erf(z), Abramowitz & Stegun 7.1.26.
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn erf8(z: __m256) -> __m256 {
            let sign = _mm256_set1_ps(-0.0);
            let a = _mm256_andnot_ps(sign, z);
            let one = _mm256_set1_ps(1.0);
            let t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.327_591_1), a, one));
            let mut p = _mm256_set1_ps(1.061_405_4);
            p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453_152));
            p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421_413_7));
            p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284_496_74));
            p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254_829_6));
            let e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(a, a)));
            let y = _mm256_fnmadd_ps(_mm256_mul_ps(p, t), e, one); // 1 − p·t·e
            _mm256_or_ps(y, _mm256_and_ps(sign, z))
        }

        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn gelu8(x: __m256) -> __m256 {
            let erf = erf8(_mm256_mul_ps(
                x,
                _mm256_set1_ps(std::f32::consts::FRAC_1_SQRT_2),
            ));
            _mm256_mul_ps(
                _mm256_mul_ps(_mm256_set1_ps(0.5), x),
                _mm256_add_ps(_mm256_set1_ps(1.0), erf),
            )
        }

        /// `y = gelu(x)` (equal lengths).
        #[target_feature(enable = "avx2,fma")]
        pub(super) unsafe fn gelu_into(x: &[f32], y: &mut [f32]) {
            let n = x.len().min(y.len());
            let mut i = 0;
            while i + 8 <= n {
                let v = _mm256_loadu_ps(x.as_ptr().add(i));
                _mm256_storeu_ps(y.as_mut_ptr().add(i), gelu8(v));
                i += 8;
            }
            for j in i..n {
                y[j] = super::act::<true>(x[j], super::Activation::Gelu);
            }
        }

        /// `d ← d · gelu'(x)` (equal lengths).
        #[target_feature(enable = "avx2,fma")]
        pub(super) unsafe fn gelu_grad_in_place(x: &[f32], d: &mut [f32]) {
            let n = x.len().min(d.len());
            let mut i = 0;
            while i + 8 <= n {
                let v = _mm256_loadu_ps(x.as_ptr().add(i));
                let erf = erf8(_mm256_mul_ps(
                    v,
                    _mm256_set1_ps(std::f32::consts::FRAC_1_SQRT_2),
                ));
                let cdf =
                    _mm256_mul_ps(_mm256_set1_ps(0.5), _mm256_add_ps(_mm256_set1_ps(1.0), erf));
                let e = exp8(_mm256_mul_ps(_mm256_set1_ps(-0.5), _mm256_mul_ps(v, v)));
                let pdf = _mm256_mul_ps(_mm256_set1_ps(super::INV_SQRT_2PI), e);
                let r = _mm256_mul_ps(
                    _mm256_loadu_ps(d.as_ptr().add(i)),
                    _mm256_fmadd_ps(v, pdf, cdf),
                );
                _mm256_storeu_ps(d.as_mut_ptr().add(i), r);
                i += 8;
            }
            for j in i..n {
                d[j] *= super::gelu_grad::<true>(x[j]);
            }
        }

        /// `v = gelu(v + bias)` (equal lengths).
        #[target_feature(enable = "avx2,fma")]
        pub(super) unsafe fn bias_gelu_in_place(v: &mut [f32], bias: &[f32]) {
            let n = v.len().min(bias.len());
            let p = v.as_mut_ptr();
            let mut i = 0;
            while i + 8 <= n {
                let x = _mm256_add_ps(
                    _mm256_loadu_ps(p.add(i)),
                    _mm256_loadu_ps(bias.as_ptr().add(i)),
                );
                _mm256_storeu_ps(p.add(i), gelu8(x));
                i += 8;
            }
            for j in i..n {
                v[j] = super::act::<true>(v[j] + bias[j], super::Activation::Gelu);
            }
        }

        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn hmax(v: __m256) -> f32 {
            let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
            let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
            let m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
            _mm_cvtss_f32(m)
        }

        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn hsum(v: __m256) -> f32 {
            let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
            _mm_cvtss_f32(s)
        }

        /// Softmax of one row in place.
        #[target_feature(enable = "avx2,fma")]
        pub(super) unsafe fn softmax_row(row: &mut [f32]) {
            let n = row.len();
            let ptr = row.as_mut_ptr();
            let mut mv = _mm256_set1_ps(f32::NEG_INFINITY);
            let mut i = 0;
            while i + 8 <= n {
                mv = _mm256_max_ps(mv, _mm256_loadu_ps(ptr.add(i)));
                i += 8;
            }
            let mut max = hmax(mv);
            for &x in &row[i..] {
                max = max.max(x);
            }
            let m = _mm256_set1_ps(max);
            let mut sv = _mm256_setzero_ps();
            i = 0;
            while i + 8 <= n {
                let e = exp8(_mm256_sub_ps(_mm256_loadu_ps(ptr.add(i)), m));
                _mm256_storeu_ps(ptr.add(i), e);
                sv = _mm256_add_ps(sv, e);
                i += 8;
            }
            let mut sum = hsum(sv);
            for x in &mut row[i..] {
                *x = super::exp::<true>(*x - max);
                sum += *x;
            }
            let inv = 1.0 / sum;
            let iv = _mm256_set1_ps(inv);
            i = 0;
            while i + 8 <= n {
                _mm256_storeu_ps(ptr.add(i), _mm256_mul_ps(_mm256_loadu_ps(ptr.add(i)), iv));
                i += 8;
            }
            for x in &mut row[i..] {
                *x *= inv;
            }
        }
    }

    macro_rules! dispatch {
        ($(#[$m:meta])* pub fn $name:ident / $avx:ident => $imp:ident ( $($arg:ident : $ty:ty),* );) => {
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn $avx($($arg: $ty),*) {
                $imp::<true>($($arg),*)
            }
            $(#[$m])*
            pub fn $name($($arg: $ty),*) {
                #[cfg(target_arch = "x86_64")]
                if has_avx2_fma() {
                    // SAFETY: the CPU supports AVX2 and FMA (checked at run time).
                    return unsafe { $avx($($arg),*) };
                }
                $imp::<false>($($arg),*)
            }
        };
    }

    #[cfg(target_arch = "x86_64")]
    fn has_avx2_fma() -> bool {
        use std::sync::OnceLock;
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| {
            std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
        })
    }

    dispatch! {
        /// LayerNorm of one row in place.
        pub fn layer_norm_in_place / layer_norm_avx2 => norm_impl(v: &mut [f32], w: &[f32], b: &[f32], eps: f32);
    }
    dispatch! {
        /// `v += b` for one row.
        pub fn add_in_place / add_avx2 => add_impl(v: &mut [f32], b: &[f32]);
    }
    dispatch! {
        /// `v = act(v + bias)` for one row.
        pub fn bias_act_in_place / bias_act_avx2 => bias_act_impl(v: &mut [f32], bias: &[f32], kind: Activation);
    }
    dispatch! {
        /// Softmax of one row in place.
        pub fn softmax_row / softmax_avx2 => softmax_impl(row: &mut [f32]);
    }
    dispatch! {
        /// The backward pass of a softmax row in place: `d ← p ⊙ (d − Σ d·p)`.
        pub fn softmax_backward_row / softmax_backward_avx2 => softmax_backward_impl(d: &mut [f32], p: &[f32]);
    }
    dispatch! {
        /// `y = gelu(x)` (exact GELU, erf approximated as above).
        pub fn gelu_into / gelu_into_avx2 => gelu_into_impl(x: &[f32], y: &mut [f32]);
    }
    dispatch! {
        /// `d ← d · gelu'(x)`.
        pub fn gelu_grad_in_place / gelu_grad_avx2 => gelu_grad_impl(x: &[f32], d: &mut [f32]);
    }

    #[cfg(test)]
    mod tests {
        #[cfg(target_arch = "x86_64")]
        #[test]
        fn avx2_kernels_match_the_scalar_ones() {
            if !super::has_avx2_fma() {
                return;
            }
            let xs: Vec<f32> = (0..1003).map(|i| (i as f32 - 500.0) / 37.0).collect();
            let bias = vec![0.25f32; xs.len()];
            let (mut simd, mut scalar) = (xs.clone(), xs.clone());
            // SAFETY: AVX2 + FMA detected above.
            unsafe { super::avx2::bias_gelu_in_place(&mut simd, &bias) };
            super::bias_act_impl::<false>(&mut scalar, &bias, super::Activation::Gelu);
            for (a, b) in simd.iter().zip(&scalar) {
                assert!((a - b).abs() <= 1e-6 * (1.0 + b.abs()), "gelu {a} vs {b}");
            }
            let g: Vec<f32> = xs.iter().map(|x| 1.0 - x * 0.01).collect();
            let (mut y1, mut y2) = (vec![0f32; xs.len()], vec![0f32; xs.len()]);
            super::gelu_into_impl::<true>(&xs, &mut y1);
            super::gelu_into_impl::<false>(&xs, &mut y2);
            let (mut d1, mut d2) = (g.clone(), g.clone());
            super::gelu_grad_impl::<true>(&xs, &mut d1);
            super::gelu_grad_impl::<false>(&xs, &mut d2);
            for i in 0..xs.len() {
                assert!(
                    (y1[i] - y2[i]).abs() <= 1e-6 * (1.0 + y2[i].abs()),
                    "gelu at {}",
                    xs[i]
                );
                assert!(
                    (d1[i] - d2[i]).abs() <= 1e-6 * (1.0 + d2[i].abs()),
                    "gelu' at {}",
                    xs[i]
                );
            }
            for n in [1usize, 15, 16, 17, 100, 257] {
                let p: Vec<f32> = (0..n).map(|i| 1.0 / (1.0 + i as f32)).collect();
                let d: Vec<f32> = xs[..n].to_vec();
                let s: f64 = p.iter().zip(&d).map(|(p, d)| (p * d) as f64).sum();
                let (mut d1, mut d2) = (d.clone(), d.clone());
                super::softmax_backward_impl::<true>(&mut d1, &p);
                super::softmax_backward_impl::<false>(&mut d2, &p);
                for i in 0..n {
                    let want = p[i] as f64 * (d[i] as f64 - s);
                    for got in [d1[i], d2[i]] {
                        assert!(
                            (got as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                            "softmax' {got} vs {want}"
                        );
                    }
                }
            }
            for n in [1usize, 7, 8, 9, 100, 257] {
                let mut a: Vec<f32> = xs[..n].iter().map(|x| x * 0.3).collect();
                // Masked entries (additive −1e9) get exactly 0.
                for i in (1..n).step_by(3) {
                    a[i] -= 1e9;
                }
                let mut b = a.clone();
                super::softmax_impl::<true>(&mut a);
                super::softmax_impl::<false>(&mut b);
                for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                    assert!((x - y).abs() <= 1e-6, "softmax {x} vs {y}");
                    if i % 3 == 1 {
                        assert!(*x == 0.0 && *y == 0.0, "masked {x}, {y}");
                    }
                }
            }
        }

        #[test]
        fn exp_and_erf_are_accurate() {
            // Far below the smallest normal result: exactly 0 (a masked key's weight).
            for x in [-87.4f32, -1e3, -1e9, f32::NEG_INFINITY] {
                assert_eq!(super::exp::<false>(x), 0.0, "exp({x})");
                assert_eq!(super::exp::<true>(x), 0.0, "exp({x})");
            }
            for i in -2000..=2000 {
                let x = i as f32 / 50.0;
                let e = super::exp::<false>(x);
                let want = (x as f64).exp();
                assert!(
                    ((e as f64 - want) / want).abs() < 5e-7,
                    "exp({x}) = {e}, want {want}"
                );
                let g = super::erf::<false>(x);
                let want = statrs::function::erf::erf(x as f64);
                assert!(
                    (g as f64 - want).abs() < 3e-7,
                    "erf({x}) = {g}, want {want}"
                );
            }
        }
    }
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
