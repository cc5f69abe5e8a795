//! Cross-encoder training: transformers' `BertForSequenceClassification` with
//! one logit on the differentiable [`BertEncoder`], trained with softmax cross-entropy over
//! each group (the positive first, then its hard negatives, [`super::groups`]), and saved
//! in the Hugging Face layout that [`CrossEncoder`](crate::rerank::cross_encoder::CrossEncoder)
//! loads unchanged.
//!
//! The forward pass is transformers': last hidden state at `[CLS]` → pooler
//! `tanh(W_p h + b_p)` → classifier `W_c · + b_c` (one output). From a base encoder
//! (all-MiniLM-L6-v2, saved without the `bert.` prefix) the encoder and, when present,
//! the pooler are copied; the classifier (and a missing pooler) are initialised as
//! transformers does, weight ~ normal(0, `initializer_range`), bias 0, from an explicit
//! seed. There is no dropout.
//!
//! **Loss.** A batch holds `g` groups of `s` pairs each (pair 0 the positive); the `g × s`
//! logits are reshaped to `[g, s]` and the loss is the mean over groups of
//! `logsumexp(row) − row[0]` ([`group_loss`]), the "localised contrastive" loss of
//! Gao et al. (2021) that report 004's kind of reranker is trained with.

use super::groups::Group;
use super::{candle_err, TrainData, Trainable};
use crate::encode::BertConfig as WbBertConfig;
use crate::rerank::cross_encoder::PairTokenizer;
use crate::train::encoder::{BertEncoder, EncoderConfig};
use crate::{Error, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::{Linear, Module, VarBuilder, VarMap};
use rand::SeedableRng;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A parsed base or cross-encoder `config.json`.
#[derive(Debug, Clone)]
pub struct CrossConfig {
    /// Hidden size.
    pub hidden_size: usize,
    /// Longest input the position embeddings allow.
    pub max_positions: usize,
    /// Padding token id.
    pub pad_token_id: u32,
    /// Standard deviation of transformers' initialisation (for new weights).
    pub initializer_range: f64,
    /// The file it was read from.
    pub path: PathBuf,
    /// The JSON as read (written back by [`save_pretrained`] as a 1-label classifier).
    pub raw: serde_json::Value,
    encoder: EncoderConfig,
}

impl CrossConfig {
    /// Read a BERT `config.json` (a base encoder such as all-MiniLM-L6-v2, or a
    /// `BertForSequenceClassification` checkpoint). Errors name the file.
    pub fn from_file(path: &Path) -> Result<Self> {
        let c = WbBertConfig::from_file(path)?;
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let raw: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::bad_input(path, format!("config.json is not JSON: {e}")))?;
        let initializer_range = raw
            .get("initializer_range")
            .and_then(|v| v.as_f64())
            .unwrap_or(0.02);
        Ok(CrossConfig {
            hidden_size: c.hidden_size,
            max_positions: c.max_position_embeddings,
            pad_token_id: c.pad_token_id as u32,
            initializer_range,
            path: path.to_path_buf(),
            raw,
            encoder: EncoderConfig::from_bert(&c.to_candle()),
        })
    }

    /// The `config.json` of the trained cross-encoder: the JSON as read with
    /// `architectures = ["BertForSequenceClassification"]`, `model_type = "bert"` and one
    /// label (`id2label = {"0": "LABEL_0"}`, as the ms-marco cross-encoders have).
    pub fn classifier_json(&self) -> serde_json::Value {
        let mut v = self.raw.clone();
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "architectures".into(),
                serde_json::json!(["BertForSequenceClassification"]),
            );
            o.insert("model_type".into(), serde_json::json!("bert"));
            o.insert("id2label".into(), serde_json::json!({"0": "LABEL_0"}));
            o.insert("label2id".into(), serde_json::json!({"LABEL_0": 0}));
            o.remove("num_labels");
        }
        v
    }
}

/// `BertForSequenceClassification` with one logit over [`BertEncoder`]. See the module docs.
#[derive(Debug, Clone)]
pub struct CrossEncoderModel {
    encoder: BertEncoder,
    pooler: Linear,
    classifier: Linear,
}

impl CrossEncoderModel {
    /// Build from `vb` under transformers' names (`bert.*`, `bert.pooler.dense.*`,
    /// `classifier.*`).
    pub fn new(vb: VarBuilder, config: &CrossConfig) -> candle_core::Result<Self> {
        let h = config.hidden_size;
        Ok(CrossEncoderModel {
            encoder: BertEncoder::new(vb.pp("bert"), &config.encoder)?,
            pooler: candle_nn::linear(h, h, vb.pp("bert").pp("pooler").pp("dense"))?,
            classifier: candle_nn::linear(h, 1, vb.pp("classifier"))?,
        })
    }

    /// One logit per row `[batch]` of `ids`, `type_ids`, `mask` (each `[batch, len]` u32).
    pub fn forward(
        &self,
        ids: &Tensor,
        type_ids: &Tensor,
        mask: &Tensor,
    ) -> candle_core::Result<Tensor> {
        let hidden = self.encoder.forward(ids, type_ids, mask)?;
        let cls = BertEncoder::first_token(&hidden)?;
        let pooled = self.pooler.forward(&cls)?.tanh()?;
        self.classifier.forward(&pooled)?.squeeze(1)
    }
}

/// Softmax cross-entropy of each group's positive (column 0) over `logits` `[g · s]`
/// reshaped to `[g, s]`, the mean over the `g` groups.
pub fn group_loss(logits: &Tensor, group_size: usize) -> candle_core::Result<Tensor> {
    let n = logits.dims1()?;
    if group_size == 0 || !n.is_multiple_of(group_size) {
        candle_core::bail!("group_loss: {n} logits are not groups of {group_size}");
    }
    let g = n / group_size;
    let rows = logits.reshape((g, group_size))?;
    let target = Tensor::zeros(g, DType::U32, logits.device())?;
    candle_nn::loss::cross_entropy(&rows, &target)
}

/// A model being trained: its variables and the model over them.
pub struct CrossTrainModel {
    /// The trainable variables (transformers' names, as saved).
    pub vars: VarMap,
    /// The model built over `vars`.
    pub model: CrossEncoderModel,
    /// The config (written back by [`save_pretrained`]).
    pub config: CrossConfig,
    /// Pairs per group (positive + negatives).
    pub group_size: usize,
}

fn bad(path: &Path, msg: impl Into<String>) -> Error {
    Error::bad_input(path, msg)
}

fn load_tensors(path: &Path) -> Result<HashMap<String, Tensor>> {
    if !path.is_file() {
        return Err(Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "missing checkpoint file"),
        ));
    }
    candle_core::safetensors::load(path, &Device::Cpu)
        .map_err(|e| bad(path, format!("not a readable safetensors file: {e}")))
}

impl CrossTrainModel {
    /// A trainable model whose variables are copied from `weights`: a base encoder (with
    /// or without the `bert.` prefix) or a 1-label `BertForSequenceClassification`
    /// checkpoint. A missing classifier or pooler is initialised from `seed` (see the
    /// module docs); any other missing tensor, or one of the wrong shape, is an error
    /// naming it and the file.
    pub fn from_checkpoint(
        config_path: &Path,
        weights: &Path,
        seed: u64,
        group_size: usize,
    ) -> Result<Self> {
        if group_size < 2 {
            return Err(Error::param(
                "group_size",
                format!("{group_size}: a group needs a positive and at least one negative"),
            ));
        }
        let config = CrossConfig::from_file(config_path)?;
        let tensors = load_tensors(weights)?;
        let vars = VarMap::new();
        let vb = VarBuilder::from_varmap(&vars, DType::F32, &Device::Cpu);
        let model = CrossEncoderModel::new(vb, &config).map_err(|e| bad(weights, e.to_string()))?;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        {
            let data = vars
                .data()
                .lock()
                .map_err(|_| bad(weights, "variable map lock poisoned"))?;
            // Sorted, so the new weights' random numbers do not depend on hash order.
            let mut names: Vec<&String> = data.keys().collect();
            names.sort();
            for name in names {
                let var = &data[name];
                let src = tensors
                    .get(name.as_str())
                    .or_else(|| name.strip_prefix("bert.").and_then(|n| tensors.get(n)));
                let new_weight = name == "classifier.weight" || name == "bert.pooler.dense.weight";
                let new_bias = name == "classifier.bias" || name == "bert.pooler.dense.bias";
                let value = match src {
                    Some(t) => {
                        if t.dims() != var.dims() {
                            return Err(bad(
                                weights,
                                format!(
                                    "tensor `{name}` has shape {:?}, the config ({}) implies {:?}",
                                    t.dims(),
                                    config_path.display(),
                                    var.dims()
                                ),
                            ));
                        }
                        t.to_dtype(DType::F32)
                            .map_err(|e| bad(weights, e.to_string()))?
                    }
                    None if new_weight => {
                        let n = var.elem_count();
                        let v: Vec<f32> = (0..n)
                            .map(|_| {
                                (crate::read::extractive::sample_normal(&mut rng)
                                    * config.initializer_range)
                                    as f32
                            })
                            .collect();
                        Tensor::from_vec(v, var.dims(), &Device::Cpu)
                            .map_err(|e| bad(weights, e.to_string()))?
                    }
                    None if new_bias => Tensor::zeros(var.dims(), DType::F32, &Device::Cpu)
                        .map_err(|e| bad(weights, e.to_string()))?,
                    None => {
                        return Err(bad(
                            weights,
                            format!(
                                "missing tensor `{name}` (nor `{}`) needed by a \
                                 BertForSequenceClassification",
                                name.strip_prefix("bert.").unwrap_or(name)
                            ),
                        ))
                    }
                };
                var.set(&value).map_err(|e| bad(weights, e.to_string()))?;
            }
        }
        Ok(CrossTrainModel {
            vars,
            model,
            config,
            group_size,
        })
    }

    /// Save in the Hugging Face layout ([`save_pretrained`]).
    pub fn save_pretrained(&self, dir: &Path, tokenizer_json: &Path) -> Result<()> {
        save_pretrained(&self.vars, &self.config, tokenizer_json, dir)
    }
}

impl Trainable for CrossTrainModel {
    type Batch = PairBatch;
    fn loss(&self, b: &PairBatch) -> candle_core::Result<Tensor> {
        let logits = self.model.forward(&b.ids, &b.type_ids, &b.mask)?;
        group_loss(&logits, self.group_size)
    }
}

/// Write `model.safetensors` (every variable under transformers' names), `config.json`
/// ([`CrossConfig::classifier_json`]) and a copy of `tokenizer` to `dir` (created).
pub fn save_pretrained(
    vars: &VarMap,
    config: &CrossConfig,
    tokenizer: &Path,
    dir: &Path,
) -> Result<()> {
    super::checkpoint::save_hf_layout(vars, &config.classifier_json(), tokenizer, dir)
}

/// One encoded pair.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedPair {
    /// Token ids (special tokens included).
    pub ids: Vec<u32>,
    /// Token types.
    pub type_ids: Vec<u32>,
}

/// Encoded groups: each `group_size` pairs, the positive first.
#[derive(Debug, Clone)]
pub struct PairGroups {
    /// Pairs, group after group.
    pub pairs: Vec<EncodedPair>,
    /// Pairs per group.
    pub group_size: usize,
    /// Padding id.
    pub pad_id: u32,
}

/// Encode `groups` with `tok` (the inference tokenizer, [`PairTokenizer`]): per group the
/// positive and its first `group_size − 1` negatives. A group with fewer negatives is an
/// error naming it.
pub fn encode_groups(
    tok: &PairTokenizer,
    groups: &[Group],
    group_size: usize,
    pad_id: u32,
) -> Result<PairGroups> {
    if group_size < 2 {
        return Err(Error::param(
            "group_size",
            format!("{group_size}: a group needs a positive and at least one negative"),
        ));
    }
    let mut pairs = Vec::with_capacity(groups.len() * group_size);
    for g in groups {
        if g.negatives.len() + 1 < group_size {
            return Err(Error::param(
                "group_size",
                format!(
                    "group `{}` has {} negatives, {} needed",
                    g.id,
                    g.negatives.len(),
                    group_size - 1
                ),
            ));
        }
        for text in std::iter::once(&g.positive.text)
            .chain(g.negatives.iter().map(|n| &n.text))
            .take(group_size)
        {
            let e = tok.encode(&g.query, text)?;
            pairs.push(EncodedPair {
                ids: e.get_ids().to_vec(),
                type_ids: e.get_type_ids().to_vec(),
            });
        }
    }
    Ok(PairGroups {
        pairs,
        group_size,
        pad_id,
    })
}

/// A collated batch of groups: `[groups · group_size, len]` u32 tensors.
pub struct PairBatch {
    /// Token ids.
    pub ids: Tensor,
    /// Token types.
    pub type_ids: Tensor,
    /// Attention mask.
    pub mask: Tensor,
}

impl PairGroups {
    /// Pad the pairs of groups `idx` to their longest and stack them, group after group.
    pub fn batch(&self, idx: &[usize]) -> Result<PairBatch> {
        let s = self.group_size;
        let rows: Vec<&EncodedPair> = idx
            .iter()
            .flat_map(|&g| &self.pairs[g * s..(g + 1) * s])
            .collect();
        let len = rows.iter().map(|p| p.ids.len()).max().unwrap_or(0);
        let n = rows.len();
        let mut ids = vec![self.pad_id; n * len];
        let mut ty = vec![0u32; n * len];
        let mut mask = vec![0u32; n * len];
        for (r, p) in rows.iter().enumerate() {
            ids[r * len..r * len + p.ids.len()].copy_from_slice(&p.ids);
            ty[r * len..r * len + p.ids.len()].copy_from_slice(&p.type_ids);
            mask[r * len..r * len + p.ids.len()].fill(1);
        }
        let e = candle_err("collating a batch of groups");
        let t = |v: Vec<u32>| Tensor::from_vec(v, (n, len), &Device::Cpu).map_err(&e);
        Ok(PairBatch {
            ids: t(ids)?,
            type_ids: t(ty)?,
            mask: t(mask)?,
        })
    }
}

impl TrainData for PairGroups {
    type Batch = PairBatch;
    /// Groups.
    fn len(&self) -> usize {
        self.pairs.len() / self.group_size
    }
    /// The longest pair of the group.
    fn length(&self, i: usize) -> usize {
        let s = self.group_size;
        self.pairs[i * s..(i + 1) * s]
            .iter()
            .map(|p| p.ids.len())
            .max()
            .unwrap_or(0)
    }
    fn collate(&self, idx: &[usize]) -> Result<PairBatch> {
        self.batch(idx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_loss_by_hand_and_its_gradient() {
        let dev = Device::Cpu;
        let v = vec![2f32, 0.5, -1.0, 0.0, 1.0, 3.0];
        let x = candle_core::Var::from_vec(v.clone(), 6, &dev).unwrap();
        let loss = group_loss(x.as_tensor(), 3).unwrap();
        let lse = |r: &[f32]| r.iter().map(|x| x.exp()).sum::<f32>().ln();
        let want = ((lse(&v[0..3]) - v[0]) + (lse(&v[3..6]) - v[3])) / 2.0;
        let got = loss.to_scalar::<f32>().unwrap();
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        // d/dx = (softmax − one-hot at column 0) / groups.
        let g = loss.backward().unwrap();
        let g: Vec<f32> = g.get(x.as_tensor()).unwrap().to_vec1().unwrap();
        for r in 0..2 {
            let row = &v[r * 3..r * 3 + 3];
            let z: f32 = row.iter().map(|x| x.exp()).sum();
            for c in 0..3 {
                let want = (row[c].exp() / z - (c == 0) as u8 as f32) / 2.0;
                assert!((g[r * 3 + c] - want).abs() < 1e-6);
            }
        }
        assert!(group_loss(x.as_tensor(), 4).is_err());
        assert!(group_loss(x.as_tensor(), 0).is_err());
    }
}
