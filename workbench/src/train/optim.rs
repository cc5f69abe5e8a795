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
            let v = m.clone();
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
        let mut sum = 0f64;
        for s in &self.slots {
            if let Some(g) = grads.get(&s.var) {
                let sq = g
                    .sqr()
                    .and_then(|t| t.sum_all())
                    .and_then(|t| t.to_scalar::<f32>())
                    .map_err(candle_err("gradient norm"))?;
                sum += sq as f64;
            }
        }
        Ok(sum.sqrt())
    }

    /// One update with learning rate `lr`, every gradient multiplied by `grad_scale`
    /// (1 without clipping). Variables without a gradient are left alone.
    pub fn step(&mut self, grads: &GradStore, lr: f64, grad_scale: f64) -> Result<()> {
        self.step_t += 1;
        let p = self.params;
        let t = self.step_t as i32;
        let scale_m = 1.0 / (1.0 - p.beta1.powi(t));
        let scale_v = 1.0 / (1.0 - p.beta2.powi(t));
        let err = candle_err("AdamW update");
        for s in &mut self.slots {
            let Some(g) = grads.get(&s.var) else { continue };
            // Detached: the gradient (and so the moments) would otherwise keep the
            // whole backward graph of every update alive.
            let g = g.detach();
            let g = if grad_scale != 1.0 {
                (g * grad_scale).map_err(&err)?
            } else {
                g
            };
            let m = ((&s.m * p.beta1).map_err(&err)? + (&g * (1.0 - p.beta1)).map_err(&err)?)
                .map_err(&err)?;
            let v = ((&s.v * p.beta2).map_err(&err)?
                + (g.sqr().map_err(&err)? * (1.0 - p.beta2)).map_err(&err)?)
            .map_err(&err)?;
            let denom = ((&v * scale_v)
                .and_then(|x| x.sqrt())
                .and_then(|x| x + p.eps))
            .map_err(&err)?;
            let update = ((&m * scale_m).and_then(|x| x / denom)).map_err(&err)?;
            let theta = if s.decay {
                (s.var.as_tensor() * (1.0 - lr * p.weight_decay)).map_err(&err)?
            } else {
                s.var.as_tensor().clone()
            };
            let next = (theta - (update * lr).map_err(&err)?).map_err(&err)?;
            s.var.set(&next).map_err(&err)?;
            s.m = m.detach();
            s.v = v.detach();
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
                *dst = t.clone();
            }
        }
        Ok(())
    }
}
