//! Fused CPU ops with a backward pass, for training encoders in candle.
//!
//! candle-nn's fused `layer_norm` and `softmax_last_dim` have no backward (a model built
//! on them trains nothing below them), and their composed versions cost a dozen small
//! tensor ops each way. These are one pass forward and one backward, rows in parallel
//! (rayon, the caller's pool), f32 only:
//!
//! | op | forward | backward |
//! |---|---|---|
//! | [`layer_norm`] | `(x − μ) / √(σ² + ε) · w + b` over the last dimension | `dx`, `dw`, `db` |
//! | [`softmax_last_dim`] | `exp(x − max) / Σ` | `y · (g − Σ g·y)` |
//! | [`gelu_erf`] | `x · Φ(x)` (transformers' exact `gelu`; erf to 1.5e-7) | `g · (Φ(x) + x φ(x))` |
//! | [`linear`] | `x·Wᵀ + b` | `dx`, `dW`, `db` |
//! | [`attention`] | per head `softmax(s·Q Kᵀ + mask)·V` | `dQ`, `dK`, `dV` |
//! | [`encoder_layer`] | a whole BERT layer (exact GELU), weights packed | `dx`, packed gradients |
//!
//! Each agrees with its composed candle equivalent to float rounding (tests below
//! check values and gradients).

mod layer;
mod matmul;

pub use layer::{encoder_layer, LayerDims};
pub use matmul::{attention, linear};

use crate::kernels::rows::{gelu_grad_in_place, gelu_into};
use candle_core::{CpuStorage, CustomOp1, CustomOp3, Layout, Shape, Storage, Tensor};
use rayon::prelude::*;

fn slice<'a>(s: &'a CpuStorage, l: &Layout, what: &str) -> candle_core::Result<&'a [f32]> {
    let CpuStorage::F32(v) = s else {
        candle_core::bail!("{what}: f32 tensors only")
    };
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&v[a..b]),
        None => candle_core::bail!("{what}: input must be contiguous"),
    }
}

/// The f32 contents of a contiguous CPU tensor's storage.
fn cpu_slice<'a>(s: &'a Storage, l: &Layout, what: &str) -> candle_core::Result<&'a [f32]> {
    match s {
        Storage::Cpu(c) => slice(c, l, what),
        _ => candle_core::bail!("{what}: CPU tensors only"),
    }
}

fn values(t: &Tensor) -> candle_core::Result<Vec<f32>> {
    t.contiguous()?.flatten_all()?.to_vec1::<f32>()
}

/// Rows of at least this many elements per rayon task.
const GRAIN: usize = 1 << 14;

fn rows_per_task(h: usize) -> usize {
    (GRAIN / h.max(1)).max(1)
}

/// `f(row of x, row of y)` over the rows of length `h`, in parallel; returns `y`.
fn map_rows(x: &[f32], h: usize, f: impl Fn(&[f32], &mut [f32]) + Sync) -> Vec<f32> {
    let mut y = vec![0f32; x.len()];
    let k = rows_per_task(h);
    y.par_chunks_mut(h * k)
        .zip(x.par_chunks(h * k))
        .for_each(|(yc, xc)| {
            for (yr, xr) in yc.chunks_exact_mut(h).zip(xc.chunks_exact(h)) {
                f(xr, yr);
            }
        });
    y
}

struct LayerNormOp {
    eps: f32,
}

/// Mean and 1/σ of one row.
fn norm_stats(r: &[f32], eps: f32) -> (f32, f32) {
    let h = r.len() as f32;
    let mean = r.iter().sum::<f32>() / h;
    let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / h;
    (mean, 1.0 / (var + eps).sqrt())
}

/// LayerNorm of the rows of `x` (length `w.len()`) into `y`, rows in parallel.
fn norm_rows(x: &[f32], w: &[f32], b: &[f32], eps: f32, y: &mut [f32]) {
    let h = w.len();
    let k = rows_per_task(h);
    y.par_chunks_mut(h * k)
        .zip(x.par_chunks(h * k))
        .for_each(|(yc, xc)| {
            for (yr, xr) in yc.chunks_exact_mut(h).zip(xc.chunks_exact(h)) {
                let (mean, rstd) = norm_stats(xr, eps);
                for i in 0..h {
                    yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
                }
            }
        });
}

/// The backward pass of [`norm_rows`]: `dx` from the input rows `x` and the output's
/// gradient `g`; returns the weight's and the bias's gradients.
fn norm_rows_backward(
    x: &[f32],
    w: &[f32],
    g: &[f32],
    eps: f32,
    dx: &mut [f32],
) -> (Vec<f32>, Vec<f32>) {
    let h = w.len();
    let k = rows_per_task(h);
    dx.par_chunks_mut(h * k)
        .zip(x.par_chunks(h * k).zip(g.par_chunks(h * k)))
        .map(|(dxc, (xc, gc))| {
            let mut dw = vec![0f32; h];
            let mut db = vec![0f32; h];
            let mut xhat = vec![0f32; h];
            for ((dxr, xr), gr) in dxc
                .chunks_exact_mut(h)
                .zip(xc.chunks_exact(h))
                .zip(gc.chunks_exact(h))
            {
                let (mean, rstd) = norm_stats(xr, eps);
                let (mut m1, mut m2) = (0f32, 0f32);
                for i in 0..h {
                    xhat[i] = (xr[i] - mean) * rstd;
                    let d = gr[i] * w[i];
                    m1 += d;
                    m2 += d * xhat[i];
                    dw[i] += gr[i] * xhat[i];
                    db[i] += gr[i];
                }
                let (m1, m2) = (m1 / h as f32, m2 / h as f32);
                for i in 0..h {
                    dxr[i] = rstd * (gr[i] * w[i] - m1 - xhat[i] * m2);
                }
            }
            (dw, db)
        })
        .collect::<Vec<_>>()
        .into_iter()
        .fold((vec![0f32; h], vec![0f32; h]), |(mut a, mut b), (c, d)| {
            add_into(&mut a, &c);
            add_into(&mut b, &d);
            (a, b)
        })
}

/// `a += b`, element by element.
fn add_into(a: &mut [f32], b: &[f32]) {
    a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
}

/// Column sums of the `cols`-wide rows of `m`. Partial sums over fixed blocks of rows run
/// in parallel and are added in block order, so the result has the same bits whatever the
/// threads do (a rayon `reduce` associates the partial sums as work happens to be split).
fn column_sums(m: &[f32], cols: usize) -> Vec<f32> {
    m.par_chunks(cols * rows_per_task(cols))
        .map(|c| {
            let mut s = vec![0f32; cols];
            for r in c.chunks_exact(cols) {
                add_into(&mut s, r);
            }
            s
        })
        .collect::<Vec<_>>()
        .into_iter()
        .fold(vec![0f32; cols], |mut a, b| {
            add_into(&mut a, &b);
            a
        })
}

impl CustomOp3 for LayerNormOp {
    fn name(&self) -> &'static str {
        "wb-layer-norm"
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
        let x = slice(s1, l1, "layer_norm x")?;
        let w = slice(s2, l2, "layer_norm weight")?;
        let b = slice(s3, l3, "layer_norm bias")?;
        let h = w.len();
        if b.len() != h || l1.dims().last() != Some(&h) {
            candle_core::bail!(
                "layer_norm: x {:?}, weight {h}, bias {}",
                l1.dims(),
                b.len()
            )
        }
        let mut y = vec![0f32; x.len()];
        norm_rows(x, w, b, self.eps, &mut y);
        Ok((CpuStorage::F32(y), l1.shape().clone()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _b: &Tensor,
        _res: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let g = g.contiguous()?;
        let (xg, wg, gg) = (
            x.storage_and_layout(),
            w.storage_and_layout(),
            g.storage_and_layout(),
        );
        let xv = cpu_slice(&xg.0, xg.1, "layer_norm x")?;
        let wv = cpu_slice(&wg.0, wg.1, "layer_norm weight")?;
        let gv = cpu_slice(&gg.0, gg.1, "layer_norm gradient")?;
        let h = wv.len();
        let mut dx = vec![0f32; xv.len()];
        let (dw, db) = norm_rows_backward(xv, wv, gv, self.eps, &mut dx);
        let dev = x.device();
        Ok((
            Some(Tensor::from_vec(dx, x.shape(), dev)?),
            Some(Tensor::from_vec(dw, h, dev)?),
            Some(Tensor::from_vec(db, h, dev)?),
        ))
    }
}

/// LayerNorm over the last dimension of `x` (weight and bias of that size), with a
/// backward pass to all three. `x` is made contiguous first.
pub fn layer_norm(
    x: &Tensor,
    weight: &Tensor,
    bias: &Tensor,
    eps: f64,
) -> candle_core::Result<Tensor> {
    x.contiguous()?.apply_op3_arc(
        weight,
        bias,
        std::sync::Arc::new(Box::new(LayerNormOp { eps: eps as f32 })),
    )
}

struct SoftmaxOp;

impl CustomOp1 for SoftmaxOp {
    fn name(&self) -> &'static str {
        "wb-softmax-last-dim"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = slice(s, l, "softmax")?;
        let h = *l.dims().last().unwrap_or(&1);
        let y = map_rows(x, h, |xr, yr| {
            let m = xr.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut z = 0f32;
            for (y, &x) in yr.iter_mut().zip(xr) {
                *y = (x - m).exp();
                z += *y;
            }
            let inv = 1.0 / z;
            yr.iter_mut().for_each(|y| *y *= inv);
        });
        Ok((CpuStorage::F32(y), l.shape().clone()))
    }

    fn bwd(&self, _x: &Tensor, y: &Tensor, g: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let g = g.contiguous()?;
        let (yg, gg) = (y.storage_and_layout(), g.storage_and_layout());
        let yv = cpu_slice(&yg.0, yg.1, "softmax output")?;
        let gv = cpu_slice(&gg.0, gg.1, "softmax gradient")?;
        let h = *y.dims().last().unwrap_or(&1);
        let k = rows_per_task(h);
        let mut dx = vec![0f32; yv.len()];
        dx.par_chunks_mut(h * k)
            .zip(yv.par_chunks(h * k).zip(gv.par_chunks(h * k)))
            .for_each(|(dc, (yc, gc))| {
                for ((dr, yr), gr) in dc
                    .chunks_exact_mut(h)
                    .zip(yc.chunks_exact(h))
                    .zip(gc.chunks_exact(h))
                {
                    let s: f32 = yr.iter().zip(gr).map(|(y, g)| y * g).sum();
                    for i in 0..h {
                        dr[i] = yr[i] * (gr[i] - s);
                    }
                }
            });
        Ok(Some(Tensor::from_vec(dx, y.shape(), y.device())?))
    }
}

/// Softmax over the last dimension, with a backward pass. `x` is made contiguous first.
pub fn softmax_last_dim(x: &Tensor) -> candle_core::Result<Tensor> {
    x.contiguous()?
        .apply_op1_arc(std::sync::Arc::new(Box::new(SoftmaxOp)))
}

struct GeluOp;

impl CustomOp1 for GeluOp {
    fn name(&self) -> &'static str {
        "wb-gelu-erf"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = slice(s, l, "gelu")?;
        let mut y = vec![0f32; x.len()];
        y.par_chunks_mut(GRAIN)
            .zip(x.par_chunks(GRAIN))
            .for_each(|(yc, xc)| gelu_into(xc, yc));
        Ok((CpuStorage::F32(y), l.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, _y: &Tensor, g: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let g = g.contiguous()?;
        let (xg, xl) = x.storage_and_layout();
        let (gg, gl) = g.storage_and_layout();
        let xv = cpu_slice(&xg, xl, "gelu x")?;
        let gv = cpu_slice(&gg, gl, "gelu gradient")?;
        let mut dx = gv.to_vec();
        dx.par_chunks_mut(GRAIN)
            .zip(xv.par_chunks(GRAIN))
            .for_each(|(dc, xc)| gelu_grad_in_place(xc, dc));
        Ok(Some(Tensor::from_vec(dx, x.shape(), x.device())?))
    }
}

/// transformers' exact GELU, `x · Φ(x)`, with a backward pass. `x` is made contiguous first.
pub fn gelu_erf(x: &Tensor) -> candle_core::Result<Tensor> {
    x.contiguous()?
        .apply_op1_arc(std::sync::Arc::new(Box::new(GeluOp)))
}

/// Helpers of the tests of the encoder's ops.
#[cfg(test)]
pub(crate) mod testing {
    use candle_core::Tensor;

    /// The largest absolute difference between two tensors of one shape.
    pub(crate) fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::max_diff;
    use super::*;
    use candle_core::{Device, Var, D};

    fn input(shape: (usize, usize, usize), seed: u64) -> Var {
        let dev = Device::Cpu;
        let n = shape.0 * shape.1 * shape.2;
        let v: Vec<f32> = (0..n)
            .map(|i| (((i as u64 * 7919 + seed * 104729) % 1000) as f32 / 250.0) - 2.0)
            .collect();
        Var::from_vec(v, shape, &dev).unwrap()
    }

    /// Values and gradients of each fused op against the composed candle ops, with a
    /// loss that weights each output element differently (so every gradient term counts).
    #[test]
    fn fused_ops_match_composed_ops_values_and_gradients() {
        let dev = Device::Cpu;
        let x = input((3, 5, 7), 1);
        let w = Var::from_vec((0..7).map(|i| 0.5 + i as f32 * 0.1).collect(), 7, &dev).unwrap();
        let b = Var::from_vec((0..7).map(|i| i as f32 * -0.05).collect(), 7, &dev).unwrap();
        let weights = input((3, 5, 7), 2);
        let weights = weights.as_tensor().detach();
        let composed_ln = |x: &Tensor| {
            let mean = x.mean_keepdim(D::Minus1).unwrap();
            let xc = x.broadcast_sub(&mean).unwrap();
            let var = xc.sqr().unwrap().mean_keepdim(D::Minus1).unwrap();
            xc.broadcast_div(&(var + 1e-5).unwrap().sqrt().unwrap())
                .unwrap()
                .broadcast_mul(w.as_tensor())
                .unwrap()
                .broadcast_add(b.as_tensor())
                .unwrap()
        };
        type Op<'a> = Box<dyn Fn(&Tensor) -> Tensor + 'a>;
        let cases: Vec<(&str, Op, Op)> = vec![
            (
                "layer_norm",
                Box::new(|x: &Tensor| layer_norm(x, w.as_tensor(), b.as_tensor(), 1e-5).unwrap()),
                Box::new(composed_ln),
            ),
            (
                "softmax",
                Box::new(|x: &Tensor| softmax_last_dim(x).unwrap()),
                Box::new(|x: &Tensor| candle_nn::ops::softmax(x, D::Minus1).unwrap()),
            ),
            (
                "gelu",
                Box::new(|x: &Tensor| gelu_erf(x).unwrap()),
                Box::new(|x: &Tensor| x.gelu_erf().unwrap()),
            ),
        ];
        for (name, fused, composed) in cases {
            let yf = fused(x.as_tensor());
            let yc = composed(x.as_tensor());
            assert!(max_diff(&yf, &yc) < 1e-5, "{name}: values");
            let lf = (yf * &weights).unwrap().sum_all().unwrap();
            let lc = (yc * &weights).unwrap().sum_all().unwrap();
            let gf = lf.backward().unwrap();
            let gc = lc.backward().unwrap();
            let vars: Vec<&Var> = if name == "layer_norm" {
                vec![&x, &w, &b]
            } else {
                vec![&x]
            };
            for v in vars {
                let a = gf.get(v.as_tensor()).expect("fused gradient");
                let c = gc.get(v.as_tensor()).expect("composed gradient");
                let d = max_diff(a, c);
                assert!(d < 1e-4, "{name}: gradient differs by {d}");
            }
        }
    }

    /// Column sums are the per-block partial sums added in block order, to the bit, on a
    /// pool of several threads, every time.
    #[test]
    fn column_sums_have_the_same_bits_whatever_the_threads_do() {
        let cols = 24;
        let rows = rows_per_task(cols) * 9 + 5;
        let m: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919 % 1009) as f32 - 504.0) * 1.37e-3)
            .collect();
        let mut want = vec![0f32; cols];
        for block in m.chunks(cols * rows_per_task(cols)) {
            let mut s = vec![0f32; cols];
            for r in block.chunks_exact(cols) {
                add_into(&mut s, r);
            }
            add_into(&mut want, &s);
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        for _ in 0..20 {
            let got = pool.install(|| column_sums(&m, cols));
            let same = got
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn non_f32_input_is_an_error() {
        let x = Tensor::new(&[[1f64, 2.0]], &Device::Cpu).unwrap();
        assert!(softmax_last_dim(&x).is_err());
        assert!(gelu_erf(&x).is_err());
    }
}
