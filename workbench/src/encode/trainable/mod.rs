//! [`BertEncoder`]: a BERT-family encoder (BERT, MiniLM, DistilBERT, RoBERTa) that trains
//! and reads. Every op has a backward pass (the fused LayerNorm, softmax and GELU of
//! [`ops`]), so every weight gets a gradient; there is no dropout. Weight names are
//! transformers' under the caller's prefix (`embeddings.word_embeddings.weight`,
//! `encoder.layer.N.attention.self.query.weight`, …); DistilBERT checkpoints are read
//! through a renaming [`VarBuilder`] (see `read::extractive::model`).
//!
//! Heads put on it: the extractive reader's `qa_outputs`
//! ([`crate::read::extractive::QaModel`]); a cross-encoder's classifier or a ColBERT
//! projection take [`BertEncoder::forward`]'s last hidden states the same way.

pub mod ops;

use crate::{Error, Result};
use candle_core::{DType, Device, Tensor, D};
use candle_nn::{Embedding, Linear, Module, VarBuilder, VarMap};
use std::path::Path;

/// The feed-forward activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// transformers' `gelu` (exact, erf).
    GeluErf,
    /// `gelu_new` / `gelu_pytorch_tanh` (tanh approximation).
    GeluTanh,
    /// `relu`.
    Relu,
}

/// How position ids are formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Positions {
    /// BERT: `0..len`.
    Absolute,
    /// RoBERTa: `padding_idx + 1 + i` for tokens, `padding_idx` for padding.
    Roberta {
        /// The padding token id (RoBERTa: 1).
        padding_idx: u32,
    },
}

/// Shape and options of a [`BertEncoder`].
#[derive(Debug, Clone, PartialEq)]
pub struct EncoderConfig {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden size.
    pub hidden_size: usize,
    /// Transformer layers.
    pub num_layers: usize,
    /// Attention heads (a divisor of `hidden_size`).
    pub num_heads: usize,
    /// Feed-forward size.
    pub intermediate_size: usize,
    /// Feed-forward activation.
    pub activation: Activation,
    /// Rows of the position embedding.
    pub max_position_embeddings: usize,
    /// Rows of the token-type embedding; 0 = none (DistilBERT).
    pub type_vocab_size: usize,
    /// LayerNorm epsilon.
    pub layer_norm_eps: f64,
    /// Position ids.
    pub positions: Positions,
}

impl EncoderConfig {
    /// From candle-transformers' BERT config (also what the workbench builds for DistilBERT).
    pub fn from_bert(c: &candle_transformers::models::bert::Config) -> Self {
        use candle_transformers::models::bert::HiddenAct;
        EncoderConfig {
            vocab_size: c.vocab_size,
            hidden_size: c.hidden_size,
            num_layers: c.num_hidden_layers,
            num_heads: c.num_attention_heads,
            intermediate_size: c.intermediate_size,
            activation: match c.hidden_act {
                HiddenAct::Gelu => Activation::GeluErf,
                HiddenAct::GeluApproximate => Activation::GeluTanh,
                HiddenAct::Relu => Activation::Relu,
            },
            max_position_embeddings: c.max_position_embeddings,
            type_vocab_size: c.type_vocab_size,
            layer_norm_eps: c.layer_norm_eps,
            positions: Positions::Absolute,
        }
    }

    /// From candle-transformers' (XLM-)RoBERTa config. Errors on an activation other
    /// than `gelu`, `gelu_new`/`gelu_pytorch_tanh` or `relu`.
    pub fn from_roberta(
        c: &candle_transformers::models::xlm_roberta::Config,
    ) -> candle_core::Result<Self> {
        use candle_nn::Activation as A;
        let activation = match c.hidden_act {
            A::Gelu => Activation::GeluErf,
            A::NewGelu | A::GeluPytorchTanh => Activation::GeluTanh,
            A::Relu => Activation::Relu,
            other => candle_core::bail!("hidden_act {other:?} is not supported"),
        };
        Ok(EncoderConfig {
            vocab_size: c.vocab_size,
            hidden_size: c.hidden_size,
            num_layers: c.num_hidden_layers,
            num_heads: c.num_attention_heads,
            intermediate_size: c.intermediate_size,
            activation,
            max_position_embeddings: c.max_position_embeddings,
            type_vocab_size: c.type_vocab_size,
            layer_norm_eps: c.layer_norm_eps,
            positions: Positions::Roberta {
                padding_idx: c.pad_token_id,
            },
        })
    }
}

/// LayerNorm over [`ops::layer_norm`].
#[derive(Debug, Clone)]
struct Norm {
    weight: Tensor,
    bias: Tensor,
    eps: f64,
}

impl Norm {
    fn new(size: usize, eps: f64, vb: VarBuilder) -> candle_core::Result<Self> {
        Ok(Norm {
            weight: vb.get_with_hints(size, "weight", candle_nn::Init::Const(1.0))?,
            bias: vb.get_with_hints(size, "bias", candle_nn::Init::Const(0.0))?,
            eps,
        })
    }

    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        ops::layer_norm(x, &self.weight, &self.bias, self.eps)
    }
}

#[derive(Debug, Clone)]
struct Layer {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    ln1: Norm,
    inter: Linear,
    out: Linear,
    ln2: Norm,
    heads: usize,
    activation: Activation,
    /// The packed weights of [`ops::encoder_layer`], kept when they are not variables
    /// (a model that only reads packs them once, not per forward pass).
    packed: std::sync::OnceLock<(Tensor, Tensor)>,
}

impl Layer {
    fn new(vb: VarBuilder, c: &EncoderConfig) -> candle_core::Result<Self> {
        let h = c.hidden_size;
        let a = vb.pp("attention");
        Ok(Layer {
            q: candle_nn::linear(h, h, a.pp("self").pp("query"))?,
            k: candle_nn::linear(h, h, a.pp("self").pp("key"))?,
            v: candle_nn::linear(h, h, a.pp("self").pp("value"))?,
            o: candle_nn::linear(h, h, a.pp("output").pp("dense"))?,
            ln1: Norm::new(h, c.layer_norm_eps, a.pp("output").pp("LayerNorm"))?,
            inter: candle_nn::linear(h, c.intermediate_size, vb.pp("intermediate").pp("dense"))?,
            out: candle_nn::linear(c.intermediate_size, h, vb.pp("output").pp("dense"))?,
            ln2: Norm::new(h, c.layer_norm_eps, vb.pp("output").pp("LayerNorm"))?,
            heads: c.num_heads,
            activation: c.activation,
            packed: std::sync::OnceLock::new(),
        })
    }

    /// `x`: `[b, l, h]`; `mask`: `[b, l]` additive attention mask. A layer with exact
    /// GELU runs as one op ([`ops::encoder_layer`]); the others op by op.
    fn forward(&self, x: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        match self.activation {
            Activation::GeluErf => self.forward_fused(x, mask),
            _ => self.forward_composed(x, mask),
        }
    }

    /// The weights and the vectors packed for [`ops::encoder_layer`] (`Tensor::cat`, whose
    /// backward pass hands each variable its slice of the gradient).
    fn pack(&self) -> candle_core::Result<(Tensor, Tensor)> {
        let bias = |l: &Linear| match l.bias() {
            Some(b) => Ok(b.clone()),
            None => candle_core::bail!("a linear layer without bias"),
        };
        let weights = [&self.q, &self.k, &self.v, &self.o, &self.inter, &self.out]
            .iter()
            .map(|l| l.weight().flatten_all())
            .collect::<candle_core::Result<Vec<_>>>()?;
        let vectors = [
            bias(&self.q)?,
            bias(&self.k)?,
            bias(&self.v)?,
            bias(&self.o)?,
            self.ln1.weight.clone(),
            self.ln1.bias.clone(),
            bias(&self.inter)?,
            bias(&self.out)?,
            self.ln2.weight.clone(),
            self.ln2.bias.clone(),
        ];
        Ok((Tensor::cat(&weights, 0)?, Tensor::cat(&vectors, 0)?))
    }

    fn forward_fused(&self, x: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let (weights, vectors) = match self.packed.get() {
            Some(p) => p.clone(),
            None => {
                let p = self.pack()?;
                // Variables change at every update: packed again each pass.
                if !p.0.track_op() && !p.1.track_op() {
                    let _ = self.packed.set(p.clone());
                }
                p
            }
        };
        let (_, _, h) = x.dims3()?;
        let dims = ops::LayerDims {
            hidden: h,
            intermediate: self.inter.weight().dim(0)?,
            heads: self.heads,
            eps: self.ln1.eps,
        };
        ops::encoder_layer(x, &weights, &vectors, mask, dims)
    }

    fn forward_composed(&self, x: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let (_, _, h) = x.dims3()?;
        let d = h / self.heads;
        let linear = |l: &Linear, x: &Tensor| match l.bias() {
            Some(b) => ops::linear(x, l.weight(), b),
            None => candle_core::bail!("a linear layer without bias"),
        };
        let ctx = ops::attention(
            &linear(&self.q, x)?,
            &linear(&self.k, x)?,
            &linear(&self.v, x)?,
            mask,
            self.heads,
            1.0 / (d as f64).sqrt(),
        )?;
        let x = self.ln1.forward(&(linear(&self.o, &ctx)? + x)?)?;
        let i = linear(&self.inter, &x)?;
        let i = match self.activation {
            Activation::GeluErf => ops::gelu_erf(&i)?,
            Activation::GeluTanh => i.gelu()?,
            Activation::Relu => i.relu()?,
        };
        self.ln2.forward(&(linear(&self.out, &i)? + x)?)
    }
}

/// A BERT-family encoder whose every weight trains. See the module docs.
#[derive(Debug, Clone)]
pub struct BertEncoder {
    word: Embedding,
    pos: Embedding,
    ty: Option<Embedding>,
    ln: Norm,
    layers: Vec<Layer>,
    config: EncoderConfig,
}

impl BertEncoder {
    /// Build from `vb` (`embeddings.…`, `encoder.layer.N.…` under `vb`'s prefix). Over a
    /// [`candle_nn::VarMap`] every weight is a trainable variable; over memory-mapped
    /// safetensors it is an inference model.
    pub fn new(vb: VarBuilder, config: &EncoderConfig) -> candle_core::Result<Self> {
        let c = config;
        if c.num_heads == 0 || !c.hidden_size.is_multiple_of(c.num_heads) {
            candle_core::bail!(
                "hidden size {} is not a multiple of {} heads",
                c.hidden_size,
                c.num_heads
            );
        }
        let h = c.hidden_size;
        let e = vb.pp("embeddings");
        let layers = (0..c.num_layers)
            .map(|i| Layer::new(vb.pp("encoder").pp("layer").pp(i), c))
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(BertEncoder {
            word: candle_nn::embedding(c.vocab_size, h, e.pp("word_embeddings"))?,
            pos: candle_nn::embedding(c.max_position_embeddings, h, e.pp("position_embeddings"))?,
            ty: (c.type_vocab_size > 0)
                .then(|| candle_nn::embedding(c.type_vocab_size, h, e.pp("token_type_embeddings")))
                .transpose()?,
            ln: Norm::new(h, c.layer_norm_eps, e.pp("LayerNorm"))?,
            layers,
            config: c.clone(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &EncoderConfig {
        &self.config
    }

    /// Last hidden states `[batch, len, hidden]` of `ids`, `type_ids` and `mask` (each
    /// `[batch, len]` u32; mask 1 = token, 0 = padding). Without a token-type embedding
    /// (`type_vocab_size` 0) `type_ids` is ignored.
    pub fn forward(
        &self,
        ids: &Tensor,
        type_ids: &Tensor,
        mask: &Tensor,
    ) -> candle_core::Result<Tensor> {
        let (b, l) = ids.dims2()?;
        let dev = ids.device();
        let pos = match self.config.positions {
            Positions::Absolute => self.pos.forward(&Tensor::arange(0u32, l as u32, dev)?)?,
            Positions::Roberta { padding_idx } => {
                let m: Vec<Vec<u32>> = mask.to_dtype(DType::U32)?.to_vec2()?;
                let mut p = Vec::with_capacity(b * l);
                for row in &m {
                    let mut c = 0u32;
                    for &x in row {
                        c += x.min(1);
                        p.push(if x > 0 { padding_idx + c } else { padding_idx });
                    }
                }
                self.pos
                    .forward(&Tensor::from_vec(p, (b, l), &Device::Cpu)?)?
            }
        };
        let mut x = self.word.forward(ids)?.broadcast_add(&pos)?;
        if let Some(ty) = &self.ty {
            x = (x + ty.forward(type_ids)?)?;
        }
        let mut x = self.ln.forward(&x)?;
        // 0 where attended, a large negative number at padding.
        let bias = ((mask.to_dtype(DType::F32)? - 1.0)? * 1e9)?;
        for layer in &self.layers {
            x = layer.forward(&x, &bias)?;
        }
        Ok(x)
    }

    /// The first token's hidden state `[batch, hidden]` (`[CLS]` / `<s>`).
    pub fn first_token(hidden: &Tensor) -> candle_core::Result<Tensor> {
        hidden.narrow(D::Minus2, 0, 1)?.squeeze(D::Minus2)
    }
}

/// Write a checkpoint folder in Hugging Face layout: `model.safetensors` (every variable
/// of `vars`, under its name), `config.json` (`config`) and a copy of `tokenizer`.
/// Creates `dir` if needed.
pub fn save_hf_layout(
    vars: &VarMap,
    config: &serde_json::Value,
    tokenizer: &Path,
    dir: &Path,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let weights = dir.join("model.safetensors");
    let tensors: std::collections::HashMap<String, Tensor> = vars
        .data()
        .lock()
        .map_err(|_| Error::bad_input(&weights, "variable map lock poisoned"))?
        .iter()
        .map(|(k, v)| (k.clone(), v.as_tensor().clone()))
        .collect();
    candle_core::safetensors::save(&tensors, &weights)
        .map_err(|e| Error::bad_input(&weights, format!("writing safetensors: {e}")))?;
    let cfg = dir.join("config.json");
    let text = serde_json::to_string_pretty(config)?;
    std::fs::write(&cfg, text).map_err(|e| Error::io(&cfg, e))?;
    let tok = dir.join("tokenizer.json");
    if tokenizer != tok {
        std::fs::copy(tokenizer, &tok).map_err(|e| Error::io(tokenizer, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::ops::testing::max_diff;
    use super::*;

    /// The one-op layer against the same layer op by op: output and the gradient of
    /// every variable and of the input, with padding in the mask and a loss that weights
    /// every output element differently.
    #[test]
    fn fused_layer_matches_the_composed_layer() {
        let dev = Device::Cpu;
        let vars = VarMap::new();
        let vb = VarBuilder::from_varmap(&vars, DType::F32, &dev);
        let c = EncoderConfig {
            vocab_size: 10,
            hidden_size: 12,
            num_layers: 1,
            num_heads: 3,
            intermediate_size: 20,
            activation: Activation::GeluErf,
            max_position_embeddings: 8,
            type_vocab_size: 0,
            layer_norm_eps: 1e-12,
            positions: Positions::Absolute,
        };
        let layer = Layer::new(vb.pp("layer"), &c).unwrap();
        // LayerNorm weights and biases away from 1 and 0, so their gradients matter.
        for (name, var) in vars.data().lock().unwrap().iter() {
            if name.contains("LayerNorm") || name.ends_with("bias") {
                let n = var.elem_count();
                let v: Vec<f32> = (0..n).map(|i| 0.8 + 0.03 * (i % 7) as f32).collect();
                var.set(&Tensor::from_vec(v, var.shape(), &dev).unwrap())
                    .unwrap();
            }
        }
        let (b, l) = (2, 5);
        let xv: Vec<f32> = (0..b * l * 12)
            .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
            .collect();
        let x = candle_core::Var::from_vec(xv, (b, l, 12), &dev).unwrap();
        let mut m = vec![0f32; b * l];
        m[l + 3] = -1e9;
        m[l + 4] = -1e9;
        let mask = Tensor::from_vec(m, (b, l), &dev).unwrap();
        let w: Vec<f32> = (0..b * l * 12)
            .map(|i| ((i * 13 % 29) as f32 / 10.0) - 1.4)
            .collect();
        let w = Tensor::from_vec(w, (b, l, 12), &dev).unwrap();
        let fused = layer.forward_fused(x.as_tensor(), &mask).unwrap();
        let composed = layer.forward_composed(x.as_tensor(), &mask).unwrap();
        let d = max_diff(&fused, &composed);
        assert!(d < 1e-5, "outputs differ by {d}");
        let gf = (fused * &w).unwrap().sum_all().unwrap().backward().unwrap();
        let gc = (composed * &w)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let mut checked = 0;
        let data = vars.data().lock().unwrap();
        let all = data.iter().map(|(n, v)| (n.clone(), v.as_tensor().clone()));
        for (name, t) in all.chain([("x".to_string(), x.as_tensor().clone())]) {
            let a = gf
                .get(&t)
                .unwrap_or_else(|| panic!("{name}: no fused gradient"));
            let c = gc
                .get(&t)
                .unwrap_or_else(|| panic!("{name}: no composed gradient"));
            let d = max_diff(a, c);
            let scale = c
                .abs()
                .unwrap()
                .flatten_all()
                .unwrap()
                .max(0)
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            assert!(
                d <= 1e-4 * (1.0 + scale),
                "{name}: gradients differ by {d} (largest {scale})"
            );
            checked += 1;
        }
        assert_eq!(checked, 17, "16 variables and the input");
    }
}
