//! A whole encoder layer (post-LayerNorm BERT block with exact GELU) as one graph node:
//!
//! ```text
//! qkv = x·W_qkvᵀ + b_qkv              (query, key, value in one product)
//! ctx = attention(qkv, mask)           (per head, see `matmul::attend`)
//! x1  = LN₁(x + ctx·W_oᵀ + b_o)
//! y   = LN₂(x1 + gelu(x1·W_iᵀ + b_i)·W_outᵀ + b_out)
//! ```
//!
//! The weights come packed in two tensors built by the caller with `Tensor::cat` (whose
//! own backward pass hands each weight its slice of the gradient): `weights` =
//! `W_q, W_k, W_v, W_o, W_i, W_out` flattened, `vectors` = `b_q, b_k, b_v, b_o, LN₁ weight,
//! LN₁ bias, b_i, b_out, LN₂ weight, LN₂ bias`. The forward pass keeps its intermediate
//! results for the backward pass (when a gradient will be asked), which writes every
//! gradient in place: no per-op tensors, zero-filled gradient buffers or residual adds
//! between the steps. The composed layer (`linear`, `attention`, `layer_norm`,
//! `gelu_erf` and candle's `+`) is the test oracle.

use super::matmul::{attend, attend_backward, Heads};
use super::{column_sums, cpu_slice, norm_rows, norm_rows_backward, rows_per_task, slice, values};
use crate::kernels::gemm::{gemm_into, matmul, product, Mat, Out};
use crate::kernels::rows::{gelu_grad_in_place, gelu_into};
use candle_core::{CpuStorage, CustomOp3, Layout, Shape, Tensor};
use rayon::prelude::*;
use std::sync::OnceLock;

/// Sizes of a layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerDims {
    /// Hidden size.
    pub hidden: usize,
    /// Feed-forward size.
    pub intermediate: usize,
    /// Attention heads (a divisor of `hidden`).
    pub heads: usize,
    /// LayerNorm epsilon.
    pub eps: f64,
}

impl LayerDims {
    /// Floats in the packed weights.
    pub fn weights_len(&self) -> usize {
        let (h, i) = (self.hidden, self.intermediate);
        4 * h * h + 2 * h * i
    }

    /// Floats in the packed vectors.
    pub fn vectors_len(&self) -> usize {
        9 * self.hidden + self.intermediate
    }
}

/// Offsets of the packed weights and vectors.
struct Packed {
    h: usize,
    i: usize,
}

impl Packed {
    const fn w_qkv(&self) -> usize {
        0
    }
    fn w_o(&self) -> usize {
        3 * self.h * self.h
    }
    fn w_i(&self) -> usize {
        4 * self.h * self.h
    }
    fn w_out(&self) -> usize {
        4 * self.h * self.h + self.i * self.h
    }
    /// `(offset, length)` of each vector, in packing order.
    fn vectors(&self) -> [(usize, usize); 8] {
        let (h, i) = (self.h, self.i);
        // b_qkv, b_o, ln1 w, ln1 b, b_i, b_out, ln2 w, ln2 b
        let lens = [3 * h, h, h, h, i, h, h, h];
        let mut out = [(0, 0); 8];
        let mut at = 0;
        for (o, l) in out.iter_mut().zip(lens) {
            *o = (at, l);
            at += l;
        }
        out
    }
}

/// What the forward pass keeps for the backward pass.
struct Saved {
    qkv: Vec<f32>,
    p: Vec<f32>,
    ctx: Vec<f32>,
    /// Input of LN₁.
    a: Vec<f32>,
    x1: Vec<f32>,
    /// Input of the GELU.
    pre: Vec<f32>,
    act: Vec<f32>,
    /// Input of LN₂.
    c: Vec<f32>,
}

struct LayerOp {
    dims: LayerDims,
    /// Additive mask per key, `[batch, len]`.
    mask: Vec<f32>,
    keep: bool,
    saved: OnceLock<Saved>,
}

/// `rows` copies of `v`, one after another.
fn repeated(v: &[f32], rows: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows * v.len());
    for _ in 0..rows {
        out.extend_from_slice(v);
    }
    out
}

/// `x + v` for every row of `x` (rows of `v.len()`).
fn plus_rows(x: &[f32], v: &[f32]) -> Vec<f32> {
    let mut out = x.to_vec();
    let h = v.len();
    out.par_chunks_mut(h * rows_per_task(h)).for_each(|c| {
        for r in c.chunks_exact_mut(h) {
            r.iter_mut().zip(v).for_each(|(a, b)| *a += b);
        }
    });
    out
}

impl LayerOp {
    fn heads<'a>(&self, qkv: &'a [f32], batch: usize, len: usize) -> Heads<'a> {
        let h = self.dims.hidden;
        Heads {
            q: (qkv, 0),
            k: (qkv, h),
            v: (qkv, 2 * h),
            rs: 3 * h,
            batch,
            len,
            heads: self.dims.heads,
            d: h / self.dims.heads,
        }
    }

    fn scale(&self) -> f32 {
        1.0 / ((self.dims.hidden / self.dims.heads) as f32).sqrt()
    }

    /// `(batch, len)` of `x`'s layout, every size checked.
    fn check(&self, lx: &Layout, w: usize, v: usize) -> candle_core::Result<(usize, usize)> {
        let d = &self.dims;
        let (b, n, h) = lx.shape().dims3()?;
        if h != d.hidden
            || d.heads == 0
            || !h.is_multiple_of(d.heads)
            || w != d.weights_len()
            || v != d.vectors_len()
            || self.mask.len() != b * n
        {
            candle_core::bail!(
                "encoder layer {d:?}: x {:?}, {w} packed weights, {v} packed vectors, mask of {}",
                lx.dims(),
                self.mask.len()
            )
        }
        Ok((b, n))
    }
}

impl CustomOp3 for LayerOp {
    fn name(&self) -> &'static str {
        "wb-encoder-layer"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = slice(s1, l1, "encoder layer x")?;
        let w = slice(s2, l2, "encoder layer weights")?;
        let v = slice(s3, l3, "encoder layer vectors")?;
        let (b, n) = self.check(l1, w.len(), v.len())?;
        let (h, i, eps) = (
            self.dims.hidden,
            self.dims.intermediate,
            self.dims.eps as f32,
        );
        let rows = b * n;
        let pk = Packed { h, i };
        let [bqkv, bo, ln1w, ln1b, bi, bout, ln2w, ln2b] = pk.vectors().map(|(o, l)| &v[o..o + l]);
        let weight = |off: usize, out: usize, inp: usize| {
            Mat::rows(&w[off..off + out * inp], out, inp).map(Mat::t)
        };
        let mut qkv = repeated(bqkv, rows);
        matmul(
            &mut qkv,
            Mat::rows(x, rows, h)?,
            weight(pk.w_qkv(), 3 * h, h)?,
            true,
            1.0,
        )?;
        let mut ctx = vec![0f32; rows * h];
        let p = attend(&self.heads(&qkv, b, n), &self.mask, self.scale(), &mut ctx)?;
        let mut a = plus_rows(x, bo);
        matmul(
            &mut a,
            Mat::rows(&ctx, rows, h)?,
            weight(pk.w_o(), h, h)?,
            true,
            1.0,
        )?;
        let mut x1 = vec![0f32; rows * h];
        norm_rows(&a, ln1w, ln1b, eps, &mut x1);
        let mut pre = repeated(bi, rows);
        matmul(
            &mut pre,
            Mat::rows(&x1, rows, h)?,
            weight(pk.w_i(), i, h)?,
            true,
            1.0,
        )?;
        let mut act = vec![0f32; rows * i];
        act.par_chunks_mut(1 << 14)
            .zip(pre.par_chunks(1 << 14))
            .for_each(|(y, x)| gelu_into(x, y));
        let mut c = plus_rows(&x1, bout);
        matmul(
            &mut c,
            Mat::rows(&act, rows, i)?,
            weight(pk.w_out(), h, i)?,
            true,
            1.0,
        )?;
        let mut y = vec![0f32; rows * h];
        norm_rows(&c, ln2w, ln2b, eps, &mut y);
        if self.keep {
            let _ = self.saved.set(Saved {
                qkv,
                p,
                ctx,
                a,
                x1,
                pre,
                act,
                c,
            });
        }
        Ok((CpuStorage::F32(y), l1.shape().clone()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        v: &Tensor,
        _y: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let g = g.contiguous()?;
        let xg = x.storage_and_layout();
        let xs = cpu_slice(&xg.0, xg.1, "encoder layer x")?;
        let wg = w.storage_and_layout();
        let ws = cpu_slice(&wg.0, wg.1, "encoder layer weights")?;
        let vg = v.storage_and_layout();
        let vs = cpu_slice(&vg.0, vg.1, "encoder layer vectors")?;
        let gg = g.storage_and_layout();
        let gs = cpu_slice(&gg.0, gg.1, "encoder layer gradient")?;
        let (b, n) = self.check(x.layout(), ws.len(), vs.len())?;
        let Some(sv) = self.saved.get() else {
            candle_core::bail!("encoder layer: backward pass without the forward's results")
        };
        let (h, i, eps) = (
            self.dims.hidden,
            self.dims.intermediate,
            self.dims.eps as f32,
        );
        let rows = b * n;
        let pk = Packed { h, i };
        let vecs = pk.vectors();
        let [_, _, ln1w, _, _, _, ln2w, _] = vecs.map(|(o, l)| &vs[o..o + l]);
        let weight =
            |off: usize, out: usize, inp: usize| Mat::rows(&ws[off..off + out * inp], out, inp);
        let mut dw = vec![0f32; ws.len()];
        let mut dv = vec![0f32; vs.len()];
        let dw_out = Out::new(&mut dw);
        // dW = dYᵀ·X into the packed gradient at `off` (`out × inp`, row-major).
        let weight_grad = |off: usize, dy: Mat, xm: Mat| -> candle_core::Result<()> {
            // SAFETY: `dw` is this call's own buffer, and the four weights' regions are
            // disjoint and written one after another.
            unsafe { gemm_into(dw_out, off, xm.cols, dy.t(), xm, false, 1.0, true) }
        };
        // LN₂
        let mut dc = vec![0f32; rows * h];
        let (dln2w, dln2b) = norm_rows_backward(&sv.c, ln2w, gs, eps, &mut dc);
        dv[vecs[6].0..vecs[6].0 + h].copy_from_slice(&dln2w);
        dv[vecs[7].0..vecs[7].0 + h].copy_from_slice(&dln2b);
        // Output projection; its input x1 also feeds the residual.
        let dcm = Mat::rows(&dc, rows, h)?;
        weight_grad(pk.w_out(), dcm, Mat::rows(&sv.act, rows, i)?)?;
        dv[vecs[5].0..vecs[5].0 + h].copy_from_slice(&column_sums(&dc, h));
        let mut dpre = product(dcm, weight(pk.w_out(), h, i)?)?;
        dpre.par_chunks_mut(1 << 14)
            .zip(sv.pre.par_chunks(1 << 14))
            .for_each(|(d, p)| gelu_grad_in_place(p, d));
        // Intermediate projection: dx1 = dc + dpre·W_i.
        let dprem = Mat::rows(&dpre, rows, i)?;
        weight_grad(pk.w_i(), dprem, Mat::rows(&sv.x1, rows, h)?)?;
        dv[vecs[4].0..vecs[4].0 + i].copy_from_slice(&column_sums(&dpre, i));
        let mut dx1 = dc;
        matmul(&mut dx1, dprem, weight(pk.w_i(), i, h)?, true, 1.0)?;
        // LN₁
        let mut da = vec![0f32; rows * h];
        let (dln1w, dln1b) = norm_rows_backward(&sv.a, ln1w, &dx1, eps, &mut da);
        dv[vecs[2].0..vecs[2].0 + h].copy_from_slice(&dln1w);
        dv[vecs[3].0..vecs[3].0 + h].copy_from_slice(&dln1b);
        // Attention output projection; x also feeds the residual.
        let dam = Mat::rows(&da, rows, h)?;
        weight_grad(pk.w_o(), dam, Mat::rows(&sv.ctx, rows, h)?)?;
        dv[vecs[1].0..vecs[1].0 + h].copy_from_slice(&column_sums(&da, h));
        let dctx = product(dam, weight(pk.w_o(), h, h)?)?;
        let mut dqkv = vec![0f32; rows * 3 * h];
        let o = Out::new(&mut dqkv);
        // SAFETY: `dqkv` is this call's own buffer, laid out as `qkv`; queries, keys and
        // values are its disjoint column ranges 0..h, h..2h, 2h..3h.
        unsafe {
            attend_backward(
                &self.heads(&sv.qkv, b, n),
                &sv.p,
                &dctx,
                self.scale(),
                (o, o, o),
            )?
        };
        // Query/key/value projection: dx = da + dqkv·W_qkv.
        let dqkvm = Mat::rows(&dqkv, rows, 3 * h)?;
        weight_grad(pk.w_qkv(), dqkvm, Mat::rows(xs, rows, h)?)?;
        dv[vecs[0].0..vecs[0].0 + 3 * h].copy_from_slice(&column_sums(&dqkv, 3 * h));
        let mut dx = da;
        matmul(&mut dx, dqkvm, weight(pk.w_qkv(), 3 * h, h)?, true, 1.0)?;
        Ok((
            Some(Tensor::from_vec(dx, x.shape(), x.device())?),
            Some(Tensor::from_vec(dw, w.shape(), w.device())?),
            Some(Tensor::from_vec(dv, v.shape(), v.device())?),
        ))
    }
}

/// One encoder layer over `x` (`[batch, len, hidden]`) with the packed `weights` and
/// `vectors` (see the module docs) and the additive key `mask` (`[batch, len]`). One graph
/// node with a backward pass to all three tensor inputs.
pub fn encoder_layer(
    x: &Tensor,
    weights: &Tensor,
    vectors: &Tensor,
    mask: &Tensor,
    dims: LayerDims,
) -> candle_core::Result<Tensor> {
    let op = LayerOp {
        dims,
        mask: values(mask)?,
        keep: x.track_op() || weights.track_op() || vectors.track_op(),
        saved: OnceLock::new(),
    };
    x.contiguous()?.apply_op3_arc(
        &weights.contiguous()?,
        &vectors.contiguous()?,
        std::sync::Arc::new(Box::new(op)),
    )
}
