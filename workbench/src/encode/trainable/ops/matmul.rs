//! The two matrix-product ops of an encoder layer, each one node of candle's graph with
//! its own backward pass, computed with the `gemm` crate (candle's own kernels) on the
//! tensors' memory in place:
//!
//! - [`linear`]: `y = x·Wᵀ + b` over the rows of `x` (any leading shape), with
//!   `dx = dy·W`, `dW = dyᵀ·x` (one product over all rows) and `db = Σ dy`.
//!   candle-nn's `Linear` on a 3-d input broadcasts `W` over the batch, so its
//!   backward runs one product per sequence and then sums `batch` copies of `dW`.
//! - [`attention`]: `ctx_h = softmax(s·Q_h K_hᵀ + mask)·V_h` for every head `h`, reading
//!   the heads of `q`, `k`, `v` (`[batch, len, hidden]`, heads side by side in the last
//!   dimension) in place and writing `ctx` in the same layout; when a gradient will be
//!   asked, the forward pass keeps each head's probabilities for the backward pass. The composed version has a
//!   dozen nodes (head splits and merges, two products, the mask, the softmax), each
//!   a `[batch, heads, len, len]` or `[batch, len, hidden]` tensor whose gradient
//!   candle zero-fills and adds into.

use super::{column_sums, cpu_slice, slice, values};
use crate::kernels::gemm::{gemm_into, matmul, product, Mat, Out};
use candle_core::{CpuStorage, CustomOp3, Layout, Shape, Tensor};
use rayon::prelude::*;

struct LinearOp;

impl CustomOp3 for LinearOp {
    fn name(&self) -> &'static str {
        "wb-linear"
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
        let x = slice(s1, l1, "linear x")?;
        let w = slice(s2, l2, "linear weight")?;
        let b = slice(s3, l3, "linear bias")?;
        let (out, inp) = l2.shape().dims2()?;
        if b.len() != out || l1.dims().last() != Some(&inp) {
            candle_core::bail!(
                "linear: x {:?}, weight {out}×{inp}, bias {}",
                l1.dims(),
                b.len()
            )
        }
        let rows = x.len() / inp.max(1);
        let mut y = Vec::with_capacity(rows * out);
        for _ in 0..rows {
            y.extend_from_slice(b);
        }
        matmul(
            &mut y,
            Mat::rows(x, rows, inp)?,
            Mat::rows(w, out, inp)?.t(),
            true,
            1.0,
        )?;
        let mut dims = l1.dims().to_vec();
        if let Some(last) = dims.last_mut() {
            *last = out;
        }
        Ok((CpuStorage::F32(y), Shape::from(dims)))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _b: &Tensor,
        _y: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (out, inp) = w.dims2()?;
        let g = g.contiguous()?;
        let xg = x.storage_and_layout();
        let xs = cpu_slice(&xg.0, xg.1, "linear x")?;
        let wg = w.storage_and_layout();
        let ws = cpu_slice(&wg.0, wg.1, "linear weight")?;
        let gg = g.storage_and_layout();
        let gs = cpu_slice(&gg.0, gg.1, "linear gradient")?;
        let rows = gs.len() / out.max(1);
        let dx = if x.track_op() {
            let dx = product(Mat::rows(gs, rows, out)?, Mat::rows(ws, out, inp)?)?;
            Some(Tensor::from_vec(dx, x.shape(), x.device())?)
        } else {
            None
        };
        let dw = product(Mat::rows(gs, rows, out)?.t(), Mat::rows(xs, rows, inp)?)?;
        let db = column_sums(gs, out);
        let dev = w.device();
        Ok((
            dx,
            Some(Tensor::from_vec(dw, (out, inp), dev)?),
            Some(Tensor::from_vec(db, out, dev)?),
        ))
    }
}

/// `x·Wᵀ + b` over the last dimension of `x` (`weight` `[out, in]`, `bias` `[out]`), one
/// graph node with a backward pass to all three. `x` is made contiguous first.
pub fn linear(x: &Tensor, weight: &Tensor, bias: &Tensor) -> candle_core::Result<Tensor> {
    x.contiguous()?.apply_op3_arc(
        &weight.contiguous()?,
        &bias.contiguous()?,
        std::sync::Arc::new(Box::new(LinearOp)),
    )
}

/// Where the heads of a multi-head attention are: the query, key and value matrices of
/// `batch` sequences of `len` tokens (rows), each token's `heads` heads of `d` values side
/// by side from column `off` of a row of `rs` floats.
#[derive(Clone, Copy)]
pub(super) struct Heads<'a> {
    pub q: (&'a [f32], usize),
    pub k: (&'a [f32], usize),
    pub v: (&'a [f32], usize),
    /// Row stride of the three buffers.
    pub rs: usize,
    pub batch: usize,
    pub len: usize,
    pub heads: usize,
    pub d: usize,
}

impl<'a> Heads<'a> {
    /// Head `hd` of sequence `bi` of `(buf, off)`: `len × d`.
    fn head(&self, (buf, off): (&'a [f32], usize), t: usize) -> candle_core::Result<Mat<'a>> {
        let (bi, hd) = (t / self.heads, t % self.heads);
        let at = bi * self.len * self.rs + off + hd * self.d;
        Mat::new(buf, at, (self.len, self.d), (self.rs, 1))
    }

    fn tasks(&self) -> usize {
        self.batch * self.heads
    }
}

/// Attention probabilities, `[batch, heads, len, len]`.
pub(super) type Probabilities = Vec<f32>;

/// `softmax(scale · Q_h K_hᵀ + mask)·V_h` for every head of every sequence, written to
/// `ctx` (`[batch·len, heads·d]`, row-major) and returned with the probabilities.
/// `mask` is `[batch, len]`, added to every query's score of each key.
pub(super) fn attend(
    x: &Heads,
    mask: &[f32],
    scale: f32,
    ctx: &mut [f32],
) -> candle_core::Result<Probabilities> {
    let (n, h) = (x.len, x.heads * x.d);
    if mask.len() != x.batch * n || ctx.len() != x.batch * n * h {
        candle_core::bail!(
            "attention over {} × {n} tokens: mask of {}, context of {}",
            x.batch,
            mask.len(),
            ctx.len()
        )
    }
    let tasks = x.tasks();
    let mut p = Vec::<f32>::with_capacity(tasks * n * n);
    let po = Out::spare(&mut p, tasks * n * n);
    let out = Out::new(ctx);
    (0..tasks)
        .into_par_iter()
        .try_for_each(|t| -> candle_core::Result<()> {
            let bi = t / x.heads;
            // SAFETY: task t writes only its own n × n block of `p` and the columns
            // hd·d..(hd+1)·d of sequence bi's rows of `ctx`; no two tasks share one.
            unsafe {
                gemm_into(
                    po,
                    t * n * n,
                    n,
                    x.head(x.q, t)?,
                    x.head(x.k, t)?.t(),
                    false,
                    scale,
                    false,
                )?;
                // The n × n block is inside `p` (checked by gemm_into) and initialised.
                let pt = po.slice_mut(t * n * n, n * n);
                let m = &mask[bi * n..(bi + 1) * n];
                for row in pt.chunks_exact_mut(n) {
                    row.iter_mut().zip(m).for_each(|(s, m)| *s += m);
                    crate::kernels::rows::softmax_row(row);
                }
                let off = bi * n * h + (t % x.heads) * x.d;
                gemm_into(
                    out,
                    off,
                    h,
                    Mat::rows(pt, n, n)?,
                    x.head(x.v, t)?,
                    false,
                    1.0,
                    false,
                )
            }
        })?;
    // SAFETY: the tasks wrote every n × n block, i.e. all of `p`.
    unsafe { p.set_len(tasks * n * n) };
    Ok(p)
}

/// The backward pass of [`attend`]: from the context's gradient `g` (`[batch·len,
/// heads·d]`) and the probabilities, the gradients of the queries, keys and values,
/// written into `dq`, `dk`, `dv` at the same places as `x`'s heads (the `Out`s' buffers
/// laid out as `x`'s; they may be one buffer). Every element of the heads' columns is
/// written.
///
/// # Safety
/// The `Out`s point at live buffers laid out as `x` says, no other thread touches them
/// during the call, and the three regions written do not overlap.
pub(super) unsafe fn attend_backward(
    x: &Heads,
    p: &[f32],
    g: &[f32],
    scale: f32,
    (dq, dk, dv): (Out, Out, Out),
) -> candle_core::Result<()> {
    let (n, h) = (x.len, x.heads * x.d);
    if p.len() != x.tasks() * n * n || g.len() != x.batch * n * h {
        candle_core::bail!(
            "attention backward: {} probabilities, gradient of {}",
            p.len(),
            g.len()
        )
    }
    let at =
        |(_, off): (&[f32], usize), t: usize| (t / x.heads) * n * x.rs + off + (t % x.heads) * x.d;
    (0..x.tasks()).into_par_iter().try_for_each_init(
        || vec![0f32; n * n],
        |dp, t| -> candle_core::Result<()> {
            let pm = Mat::rows(&p[t * n * n..(t + 1) * n * n], n, n)?;
            let bi = t / x.heads;
            let go = Mat::new(g, bi * n * h + (t % x.heads) * x.d, (n, x.d), (h, 1))?;
            // SAFETY (all four products): task t writes only its head's columns of its
            // sequence's rows of dq, dk and dv, and its own `dp`; no two tasks share one.
            // dV_h = Pᵀ·dO_h
            // SAFETY: task t writes only its head's columns of its sequence's rows of dv.
            unsafe { gemm_into(dv, at(x.v, t), x.rs, pm.t(), go, false, 1.0, false)? };
            // dP = dO_h·V_hᵀ
            let vh = x.head(x.v, t)?;
            // SAFETY: `dp` is this task's own scratch buffer.
            unsafe { gemm_into(Out::new(dp), 0, n, go, vh.t(), false, 1.0, false)? };
            // dS = P ⊙ (dP − Σ_j dP·P), in place of dP.
            for (dr, pr) in dp.chunks_exact_mut(n).zip(pm.data.chunks_exact(n)) {
                crate::kernels::rows::softmax_backward_row(dr, pr);
            }
            let ds = Mat::rows(dp, n, n)?;
            // dQ_h = s·dS·K_h, dK_h = s·dSᵀ·Q_h
            let (kh, qh) = (x.head(x.k, t)?, x.head(x.q, t)?);
            // SAFETY: task t writes only its head's columns of its sequence's rows of dq.
            unsafe { gemm_into(dq, at(x.q, t), x.rs, ds, kh, false, scale, false)? };
            // SAFETY: likewise for dk.
            unsafe { gemm_into(dk, at(x.k, t), x.rs, ds.t(), qh, false, scale, false) }
        },
    )
}

struct AttentionOp {
    heads: usize,
    scale: f32,
    /// Additive mask per key, `[batch, len]`.
    mask: Vec<f32>,
    /// Keep the probabilities of the forward pass for the backward pass (when a gradient
    /// will be asked).
    keep: bool,
    /// The probabilities, when kept.
    kept: std::sync::OnceLock<Probabilities>,
}

impl AttentionOp {
    fn heads<'a>(
        &self,
        l: &Layout,
        (q, k, v): (&'a [f32], &'a [f32], &'a [f32]),
    ) -> candle_core::Result<Heads<'a>> {
        let (b, n, h) = l.shape().dims3()?;
        if self.heads == 0 || !h.is_multiple_of(self.heads) || self.mask.len() != b * n {
            candle_core::bail!(
                "attention: q {:?} with {} heads and a mask of {}",
                l.dims(),
                self.heads,
                self.mask.len()
            )
        }
        Ok(Heads {
            q: (q, 0),
            k: (k, 0),
            v: (v, 0),
            rs: h,
            batch: b,
            len: n,
            heads: self.heads,
            d: h / self.heads,
        })
    }
}

impl CustomOp3 for AttentionOp {
    fn name(&self) -> &'static str {
        "wb-attention"
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
        if l2.dims() != l1.dims() || l3.dims() != l1.dims() {
            candle_core::bail!(
                "attention: q {:?}, k {:?}, v {:?}",
                l1.dims(),
                l2.dims(),
                l3.dims()
            )
        }
        let q = slice(s1, l1, "attention q")?;
        let k = slice(s2, l2, "attention k")?;
        let v = slice(s3, l3, "attention v")?;
        let x = self.heads(l1, (q, k, v))?;
        let mut ctx = vec![0f32; q.len()];
        let p = attend(&x, &self.mask, self.scale, &mut ctx)?;
        if self.keep {
            let _ = self.kept.set(p);
        }
        Ok((CpuStorage::F32(ctx), l1.shape().clone()))
    }

    fn bwd(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        _ctx: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let g = g.contiguous()?;
        let qg = q.storage_and_layout();
        let qs = cpu_slice(&qg.0, qg.1, "attention q")?;
        let kg = k.storage_and_layout();
        let ks = cpu_slice(&kg.0, kg.1, "attention k")?;
        let vg = v.storage_and_layout();
        let vs = cpu_slice(&vg.0, vg.1, "attention v")?;
        let gg = g.storage_and_layout();
        let gs = cpu_slice(&gg.0, gg.1, "attention gradient")?;
        let x = self.heads(q.layout(), (qs, ks, vs))?;
        let Some(p) = self.kept.get() else {
            candle_core::bail!("attention: backward pass without the forward's probabilities")
        };
        let len = qs.len();
        let (mut dq, mut dk, mut dv) = (vec![0f32; len], vec![0f32; len], vec![0f32; len]);
        // SAFETY: three separate buffers of q's layout, borrowed mutably here.
        unsafe {
            attend_backward(
                &x,
                p,
                gs,
                self.scale,
                (Out::new(&mut dq), Out::new(&mut dk), Out::new(&mut dv)),
            )?
        };
        let dev = q.device();
        let shape = q.shape();
        Ok((
            Some(Tensor::from_vec(dq, shape, dev)?),
            Some(Tensor::from_vec(dk, shape, dev)?),
            Some(Tensor::from_vec(dv, shape, dev)?),
        ))
    }
}

/// Multi-head attention over `q`, `k`, `v` (`[batch, len, hidden]`, head `h` in columns
/// `h·d..(h+1)·d`): `softmax(scale · Q_h K_hᵀ + mask)·V_h` per head, in the same layout.
/// `mask` is `[batch, len]` f32, added to every query's score of each key (0 for a
/// token, a large negative number for padding). One graph node with a backward pass to
/// `q`, `k` and `v`; inputs are made contiguous first.
pub fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: &Tensor,
    heads: usize,
    scale: f64,
) -> candle_core::Result<Tensor> {
    let op = AttentionOp {
        heads,
        scale: scale as f32,
        mask: values(mask)?,
        keep: q.track_op() || k.track_op() || v.track_op(),
        kept: std::sync::OnceLock::new(),
    };
    q.contiguous()?.apply_op3_arc(
        &k.contiguous()?,
        &v.contiguous()?,
        std::sync::Arc::new(Box::new(op)),
    )
}

#[cfg(test)]
mod tests {
    use super::super::testing::max_diff;
    use super::*;
    use candle_core::{Device, Module, Var, D};

    fn var(shape: &[usize], seed: u64) -> Var {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|i| (((i as u64 * 7919 + seed * 104_729) % 1000) as f32 / 500.0) - 1.0)
            .collect();
        Var::from_vec(v, shape, &Device::Cpu).unwrap()
    }

    /// Values and gradients of `fused` and `composed` over `vars`, with a loss that
    /// weights every output element differently.
    fn check(name: &str, vars: &[&Var], fused: impl Fn() -> Tensor, composed: impl Fn() -> Tensor) {
        let (yf, yc) = (fused(), composed());
        assert_eq!(yf.dims(), yc.dims(), "{name}: shape");
        let d = max_diff(&yf, &yc);
        assert!(d < 1e-5, "{name}: values differ by {d}");
        let w = var(yf.dims(), 9).as_tensor().detach();
        let gf = (yf * &w).unwrap().sum_all().unwrap().backward().unwrap();
        let gc = (yc * &w).unwrap().sum_all().unwrap().backward().unwrap();
        for (i, v) in vars.iter().enumerate() {
            let a = gf.get(v.as_tensor()).expect("fused gradient");
            let c = gc.get(v.as_tensor()).expect("composed gradient");
            let d = max_diff(a, c);
            assert!(d < 1e-4, "{name}: gradient {i} differs by {d}");
        }
    }

    #[test]
    fn linear_matches_candle_nn_values_and_gradients() {
        let (x, w, b) = (var(&[2, 5, 7], 1), var(&[3, 7], 2), var(&[3], 3));
        let composed = candle_nn::Linear::new(w.as_tensor().clone(), Some(b.as_tensor().clone()));
        check(
            "linear 3-d",
            &[&x, &w, &b],
            || linear(x.as_tensor(), w.as_tensor(), b.as_tensor()).unwrap(),
            || composed.forward(x.as_tensor()).unwrap(),
        );
        // A 2-d input, and an input that is not a variable (no gradient asked of it).
        let x2 = var(&[4, 7], 4).as_tensor().detach();
        check(
            "linear 2-d",
            &[&w, &b],
            || linear(&x2, w.as_tensor(), b.as_tensor()).unwrap(),
            || composed.forward(&x2).unwrap(),
        );
        assert!(linear(x.as_tensor(), &w.as_tensor().t().unwrap(), b.as_tensor()).is_err());
    }

    #[test]
    fn attention_matches_composed_ops_values_and_gradients() {
        let (b, n, heads, d) = (2, 5, 3, 4);
        let h = heads * d;
        let (q, k, v) = (var(&[b, n, h], 1), var(&[b, n, h], 2), var(&[b, n, h], 3));
        // The second sequence has two padded keys.
        let mut m = vec![0f32; b * n];
        m[n + 3] = -1e9;
        m[n + 4] = -1e9;
        let mask = Tensor::from_vec(m, (b, n), &Device::Cpu).unwrap();
        let scale = 1.0 / (d as f64).sqrt();
        let split = |t: &Tensor| {
            t.reshape((b, n, heads, d))
                .unwrap()
                .transpose(1, 2)
                .unwrap()
                .contiguous()
                .unwrap()
        };
        let composed = || {
            let s = (split(q.as_tensor())
                .matmul(&split(k.as_tensor()).t().unwrap())
                .unwrap()
                * scale)
                .unwrap()
                .broadcast_add(&mask.reshape((b, 1, 1, n)).unwrap())
                .unwrap();
            let p = candle_nn::ops::softmax(&s, D::Minus1).unwrap();
            p.matmul(&split(v.as_tensor()))
                .unwrap()
                .transpose(1, 2)
                .unwrap()
                .contiguous()
                .unwrap()
                .reshape((b, n, h))
                .unwrap()
        };
        check(
            "attention",
            &[&q, &k, &v],
            || {
                attention(
                    q.as_tensor(),
                    k.as_tensor(),
                    v.as_tensor(),
                    &mask,
                    heads,
                    scale,
                )
                .unwrap()
            },
            composed,
        );
        // Heads that do not divide the hidden size, a mask of the wrong size.
        assert!(attention(q.as_tensor(), k.as_tensor(), v.as_tensor(), &mask, 5, scale).is_err());
        let short = mask.narrow(1, 0, 4).unwrap();
        assert!(attention(
            q.as_tensor(),
            k.as_tensor(),
            v.as_tensor(),
            &short,
            heads,
            scale
        )
        .is_err());
    }
}
