//! AdamW with its state in the open, so it can be checkpointed.
//!
//! The update is candle-nn's `AdamW` (decoupled weight decay, bias-corrected moments),
//! re-written here because candle-nn keeps the moments and the step count private: a
//! run could not be resumed from a checkpoint with them. Two additions, both as in
//! transformers' `Trainer`: no weight decay on biases and LayerNorm weights, and a
//! gradient scale (for clipping by global norm) applied to every gradient.

use super::candle_err;
use crate::Result;
use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};
use candle_nn::VarMap;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// AdamW hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AdamWParams {
    /// β1.
    pub beta1: f64,
    /// β2.
    pub beta2: f64,
    /// ε.
    pub eps: f64,
    /// Decoupled weight decay (not applied to biases and LayerNorm weights).
    pub weight_decay: f64,
}

impl Default for AdamWParams {
    fn default() -> Self {
        AdamWParams {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
        }
    }
}

struct Slot {
    name: String,
    var: Var,
    m: Tensor,
    v: Tensor,
    decay: bool,
}

/// AdamW over every float variable of a [`VarMap`], in name order.
pub struct AdamW {
    slots: Vec<Slot>,
    /// Updates done so far.
    pub step_t: usize,
    params: AdamWParams,
}

/// True for the parameters transformers exempts from weight decay.
pub fn no_decay(name: &str) -> bool {
    name.ends_with("bias") || name.contains("LayerNorm") || name.contains("layer_norm")
}

impl AdamW {
    /// An optimizer for every variable of `vars` (zero moments, step 0).
    pub fn new(vars: &VarMap, params: AdamWParams) -> Result<Self> {
        let data = vars
            .data()
            .lock()
            .map_err(|_| crate::Error::param("vars", "the VarMap lock is poisoned"))?;
        let mut names: Vec<&String> = data.keys().collect();
        names.sort();
        let mut slots = Vec::with_capacity(names.len());
        for name in names {
            let var = data[name].clone();
            if !var.dtype().is_float() {
                continue;
            }
            let m = var.zeros_like().map_err(candle_err("optimizer state"))?;
            // Its own storage: the moments are updated in place.
            let v = var.zeros_like().map_err(candle_err("optimizer state"))?;
            slots.push(Slot {
                name: name.clone(),
                decay: !no_decay(name),
                var,
                m,
                v,
            });
        }
        Ok(AdamW {
            slots,
            step_t: 0,
            params,
        })
    }

    /// The variables, in update order.
    pub fn vars(&self) -> impl Iterator<Item = (&str, &Var)> {
        self.slots.iter().map(|s| (s.name.as_str(), &s.var))
    }

    /// Global L2 norm of the gradients of the optimizer's variables.
    pub fn grad_norm(&self, grads: &GradStore) -> Result<f64> {
        let err = candle_err("gradient norm");
        let mut sum = 0f64;
        for s in &self.slots {
            if let Some(g) = grads.get(&s.var) {
                let g = g.contiguous().map_err(&err)?;
                let sq = g
                    .apply_op1_no_bwd(&SumSquares)
                    .and_then(|t| t.to_vec1::<f64>())
                    .map_err(&err)?;
                sum += sq[0];
            }
        }
        Ok(sum.sqrt())
    }

    /// One update with learning rate `lr`, every gradient multiplied by `grad_scale`
    /// (1 without clipping). Variables without a gradient are left alone. The moments
    /// and the weights are updated in place, one fused pass each (rows in parallel).
    pub fn step(&mut self, grads: &GradStore, lr: f64, grad_scale: f64) -> Result<()> {
        self.step_t += 1;
        let p = self.params;
        let t = self.step_t as i32;
        let err = candle_err("AdamW update");
        let m_op = Moment {
            beta: p.beta1 as f32,
            scale: grad_scale as f32,
            square: false,
        };
        let v_op = Moment {
            beta: p.beta2 as f32,
            scale: grad_scale as f32,
            square: true,
        };
        for s in &mut self.slots {
            let Some(g) = grads.get(&s.var) else { continue };
            let g = g.contiguous().map_err(&err)?;
            s.m.inplace_op2(&g, &m_op).map_err(&err)?;
            s.v.inplace_op2(&g, &v_op).map_err(&err)?;
            let apply = Apply {
                lr: lr as f32,
                decay: if s.decay {
                    (1.0 - lr * p.weight_decay) as f32
                } else {
                    1.0
                },
                scale_m: (1.0 / (1.0 - p.beta1.powi(t))) as f32,
                scale_v: (1.0 / (1.0 - p.beta2.powi(t))) as f32,
                eps: p.eps as f32,
            };
            s.var
                .as_tensor()
                .inplace_op3(&s.m, &s.v, &apply)
                .map_err(&err)?;
        }
        Ok(())
    }

    /// Save the moments (`m.<name>`, `v.<name>`) as safetensors.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut map: HashMap<String, Tensor> = HashMap::new();
        for s in &self.slots {
            map.insert(format!("m.{}", s.name), s.m.clone());
            map.insert(format!("v.{}", s.name), s.v.clone());
        }
        candle_core::safetensors::save(&map, path).map_err(candle_err("saving optimizer state"))
    }

    /// Load moments saved by [`AdamW::save`]; `step_t` is set by the caller.
    pub fn load(&mut self, path: &Path) -> Result<()> {
        let map = candle_core::safetensors::load(path, &candle_core::Device::Cpu)
            .map_err(|e| crate::Error::bad_input(path, format!("optimizer state: {e}")))?;
        for s in &mut self.slots {
            for (key, dst) in [("m", &mut s.m), ("v", &mut s.v)] {
                let k = format!("{key}.{}", s.name);
                let t = map.get(&k).ok_or_else(|| {
                    crate::Error::bad_input(path, format!("optimizer state has no `{k}`"))
                })?;
                if t.dims() != dst.dims() {
                    return Err(crate::Error::bad_input(
                        path,
                        format!("`{k}` has shape {:?}, the model {:?}", t.dims(), dst.dims()),
                    ));
                }
                // A copy of its own: the moments are updated in place.
                *dst = t.copy().map_err(candle_err("optimizer state"))?;
            }
        }
        Ok(())
    }
}

fn f32_slice<'a>(
    s: &'a candle_core::CpuStorage,
    l: &candle_core::Layout,
    what: &str,
) -> candle_core::Result<&'a [f32]> {
    let candle_core::CpuStorage::F32(v) = s else {
        candle_core::bail!("{what}: f32 only")
    };
    let Some((a, b)) = l.contiguous_offsets() else {
        candle_core::bail!("{what}: must be contiguous")
    };
    Ok(&v[a..b])
}

fn f32_slice_mut<'a>(
    s: &'a mut candle_core::CpuStorage,
    l: &candle_core::Layout,
    what: &str,
) -> candle_core::Result<&'a mut [f32]> {
    let candle_core::CpuStorage::F32(v) = s else {
        candle_core::bail!("{what}: f32 only")
    };
    let Some((a, b)) = l.contiguous_offsets() else {
        candle_core::bail!("{what}: must be contiguous")
    };
    Ok(&mut v[a..b])
}

/// Elements per rayon task of the fused updates.
const CHUNK: usize = 1 << 15;

/// Σ x² (in f64) of a tensor, as a one-element f64 tensor.
struct SumSquares;

impl candle_core::CustomOp1 for SumSquares {
    fn name(&self) -> &'static str {
        "wb-sum-squares"
    }
    fn cpu_fwd(
        &self,
        s: &candle_core::CpuStorage,
        l: &candle_core::Layout,
    ) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
        use rayon::prelude::*;
        let x = f32_slice(s, l, "gradient norm")?;
        // Partial sums per fixed chunk, added in chunk order: the same bits whatever the
        // threads do (a parallel `sum` associates them as the work happens to be split).
        let sum: f64 = x
            .par_chunks(CHUNK)
            .map(|c| c.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>())
            .collect::<Vec<_>>()
            .iter()
            .sum();
        Ok((candle_core::CpuStorage::F64(vec![sum]), 1.into()))
    }
}

/// `m ← β m + (1 − β) (s g)` (or `(s g)²` for the second moment), in place.
struct Moment {
    beta: f32,
    scale: f32,
    square: bool,
}

impl candle_core::InplaceOp2 for Moment {
    fn name(&self) -> &'static str {
        "wb-adamw-moment"
    }
    fn cpu_fwd(
        &self,
        dst: &mut candle_core::CpuStorage,
        dst_l: &candle_core::Layout,
        g: &candle_core::CpuStorage,
        g_l: &candle_core::Layout,
    ) -> candle_core::Result<()> {
        use rayon::prelude::*;
        let m = f32_slice_mut(dst, dst_l, "AdamW moment")?;
        let g = f32_slice(g, g_l, "gradient")?;
        if m.len() != g.len() {
            candle_core::bail!(
                "AdamW: moment of {} values, gradient of {}",
                m.len(),
                g.len()
            )
        }
        let (b, s, sq) = (self.beta, self.scale, self.square);
        m.par_chunks_mut(CHUNK)
            .zip(g.par_chunks(CHUNK))
            .for_each(|(m, g)| {
                for (m, &g) in m.iter_mut().zip(g) {
                    let g = g * s;
                    *m = b * *m + (1.0 - b) * if sq { g * g } else { g };
                }
            });
        Ok(())
    }
}

/// `θ ← θ · decay − lr · (m · scale_m) / (√(v · scale_v) + ε)`, in place.
struct Apply {
    lr: f32,
    decay: f32,
    scale_m: f32,
    scale_v: f32,
    eps: f32,
}

impl candle_core::InplaceOp3 for Apply {
    fn name(&self) -> &'static str {
        "wb-adamw-apply"
    }
    fn cpu_fwd(
        &self,
        dst: &mut candle_core::CpuStorage,
        dst_l: &candle_core::Layout,
        m: &candle_core::CpuStorage,
        m_l: &candle_core::Layout,
        v: &candle_core::CpuStorage,
        v_l: &candle_core::Layout,
    ) -> candle_core::Result<()> {
        use rayon::prelude::*;
        let w = f32_slice_mut(dst, dst_l, "AdamW weights")?;
        let m = f32_slice(m, m_l, "AdamW first moment")?;
        let v = f32_slice(v, v_l, "AdamW second moment")?;
        if m.len() != w.len() || v.len() != w.len() {
            candle_core::bail!("AdamW: weights, moments of different sizes")
        }
        w.par_chunks_mut(CHUNK)
            .zip(m.par_chunks(CHUNK).zip(v.par_chunks(CHUNK)))
            .for_each(|(w, (m, v))| {
                for ((w, &m), &v) in w.iter_mut().zip(m).zip(v) {
                    let u = (m * self.scale_m) / ((v * self.scale_v).sqrt() + self.eps);
                    *w = *w * self.decay - self.lr * u;
                }
            });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};
    use candle_nn::VarBuilder;

    /// Two updates of the fused in-place AdamW against the formula by hand (f64), for a
    /// decayed weight and an undecayed bias, with gradient scaling (clipping).
    #[test]
    fn fused_adamw_matches_the_formula() {
        let vars = VarMap::new();
        let vb = VarBuilder::from_varmap(&vars, DType::F32, &Device::Cpu);
        let w = vb
            .get_with_hints(3, "dense.weight", candle_nn::Init::Const(0.5))
            .unwrap();
        let b = vb
            .get_with_hints(3, "dense.bias", candle_nn::Init::Const(-0.2))
            .unwrap();
        let p = AdamWParams::default();
        let mut opt = AdamW::new(&vars, p).unwrap();
        let x = Tensor::new(&[1f32, -2.0, 3.0], &Device::Cpu).unwrap();
        let (lr, scale) = (0.1, 0.5);
        // Reference state per element: (theta, m, v) for w and b.
        let mut rw = [(0.5f64, 0.0f64, 0.0f64); 3];
        let mut rb = [(-0.2f64, 0.0f64, 0.0f64); 3];
        for t in 1..=2 {
            // loss = Σ (w·x + b)² / 2 → dw = (w x + b) x, db = w x + b.
            let y = (w.mul(&x).unwrap() + &b).unwrap();
            let loss = (y.sqr().unwrap().sum_all().unwrap() * 0.5).unwrap();
            let grads = loss.backward().unwrap();
            let xs = [1f64, -2.0, 3.0];
            let norm = opt.grad_norm(&grads).unwrap();
            let mut want_norm = 0.0;
            for i in 0..3 {
                let yi = rw[i].0 * xs[i] + rb[i].0;
                want_norm += (yi * xs[i]).powi(2) + yi * yi;
            }
            assert!((norm - want_norm.sqrt()).abs() < 1e-4 * norm.max(1.0));
            let step = |st: &mut (f64, f64, f64), g: f64, decay: bool| {
                let g = g * scale;
                st.1 = p.beta1 * st.1 + (1.0 - p.beta1) * g;
                st.2 = p.beta2 * st.2 + (1.0 - p.beta2) * g * g;
                let mh = st.1 / (1.0 - p.beta1.powi(t));
                let vh = st.2 / (1.0 - p.beta2.powi(t));
                let d = if decay {
                    1.0 - lr * p.weight_decay
                } else {
                    1.0
                };
                st.0 = st.0 * d - lr * mh / (vh.sqrt() + p.eps);
            };
            for i in 0..3 {
                let yi = rw[i].0 * xs[i] + rb[i].0;
                step(&mut rw[i], yi * xs[i], true);
                step(&mut rb[i], yi, false);
            }
            opt.step(&grads, lr, scale).unwrap();
        }
        let got_w: Vec<f32> = w.to_vec1().unwrap();
        let got_b: Vec<f32> = b.to_vec1().unwrap();
        for i in 0..3 {
            assert!((got_w[i] as f64 - rw[i].0).abs() < 1e-5, "w[{i}]");
            assert!((got_b[i] as f64 - rb[i].0).abs() < 1e-5, "b[{i}]");
        }
    }
}
