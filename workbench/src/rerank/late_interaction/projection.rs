//! A learned linear projection of token vectors (ColBERT's final `linear` layer).

use super::maxsim::dot;
use crate::{Error, Result};
use std::path::Path;

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

    pub(crate) fn short_id(&self) -> String {
        self.id.chars().take(8).collect()
    }
}
