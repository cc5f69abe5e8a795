//! Extractive QA for training: a BERT encoder with transformers' `qa_outputs` head
//! (`BertForQuestionAnswering` weight names), the span loss, features (question +
//! context windows with offsets → start/end targets), batching and span decoding.
//!
//! The reader of `read::extractive` (branch `wt-qa`) is the inference-side model; this
//! file holds what training needs and writes checkpoints in the Hugging Face layout
//! (`model.safetensors` with `bert.…` and `qa_outputs.…`, `config.json` with
//! `architectures: ["BertForQuestionAnswering"]`, `tokenizer.json`), which both load.

use super::{candle_err, TrainData, Trainable};
use crate::{Error, Result};
use candle_core::{DType, Device, Tensor, Var, D};
use candle_nn::{Linear, Module, VarBuilder, VarMap};
use candle_transformers::models::bert::Config;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::path::Path;
use tokenizers::Tokenizer;

/// LayerNorm from differentiable primitives. candle-nn's `LayerNorm` runs a fused
/// kernel (`apply_op3_no_bwd`) that passes no gradient back: a model built on it
/// trains its last layer only.
struct DiffLayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f64,
}

impl DiffLayerNorm {
    fn new(size: usize, eps: f64, vb: VarBuilder) -> candle_core::Result<Self> {
        Ok(DiffLayerNorm {
            weight: vb.get_with_hints(size, "weight", candle_nn::Init::Const(1.0))?,
            bias: vb.get_with_hints(size, "bias", candle_nn::Init::Const(0.0))?,
            eps,
        })
    }
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let h = x.dim(D::Minus1)? as f64;
        let mean = (x.sum_keepdim(D::Minus1)? / h)?;
        let xc = x.broadcast_sub(&mean)?;
        let var = (xc.sqr()?.sum_keepdim(D::Minus1)? / h)?;
        let xn = xc.broadcast_div(&(var + self.eps)?.sqrt()?)?;
        xn.broadcast_mul(&self.weight)?.broadcast_add(&self.bias)
    }
}

struct Layer {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    ln1: DiffLayerNorm,
    inter: Linear,
    out: Linear,
    ln2: DiffLayerNorm,
    heads: usize,
}

impl Layer {
    fn new(vb: VarBuilder, c: &Config) -> candle_core::Result<Self> {
        let h = c.hidden_size;
        let a = vb.pp("attention");
        Ok(Layer {
            q: candle_nn::linear(h, h, a.pp("self").pp("query"))?,
            k: candle_nn::linear(h, h, a.pp("self").pp("key"))?,
            v: candle_nn::linear(h, h, a.pp("self").pp("value"))?,
            o: candle_nn::linear(h, h, a.pp("output").pp("dense"))?,
            ln1: DiffLayerNorm::new(h, c.layer_norm_eps, a.pp("output").pp("LayerNorm"))?,
            inter: candle_nn::linear(h, c.intermediate_size, vb.pp("intermediate").pp("dense"))?,
            out: candle_nn::linear(c.intermediate_size, h, vb.pp("output").pp("dense"))?,
            ln2: DiffLayerNorm::new(h, c.layer_norm_eps, vb.pp("output").pp("LayerNorm"))?,
            heads: c.num_attention_heads,
        })
    }

    /// `x`: `[b, l, h]`; `bias`: `[b, 1, 1, l]` additive attention mask.
    fn forward(&self, x: &Tensor, bias: &Tensor) -> candle_core::Result<Tensor> {
        let (b, l, h) = x.dims3()?;
        let d = h / self.heads;
        let split = |t: Tensor| -> candle_core::Result<Tensor> {
            t.reshape((b, l, self.heads, d))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = split(self.q.forward(x)?)?;
        let k = split(self.k.forward(x)?)?;
        let v = split(self.v.forward(x)?)?;
        let scores = (q.matmul(&k.t()?)? / (d as f64).sqrt())?.broadcast_add(bias)?;
        let p = candle_nn::ops::softmax(&scores, D::Minus1)?;
        let ctx = p
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((b, l, h))?;
        let x = self.ln1.forward(&(self.o.forward(&ctx)? + x)?)?;
        let f = self.out.forward(&self.inter.forward(&x)?.gelu_erf()?)?;
        self.ln2.forward(&(f + x)?)
    }
}

/// A BERT encoder with a 2-way token classifier (start, end), as transformers'
/// `BertForQuestionAnswering` (same weight names), written with differentiable candle
/// ops only (no dropout), so that every weight trains.
pub struct QaBert {
    word: candle_nn::Embedding,
    pos: candle_nn::Embedding,
    ty: candle_nn::Embedding,
    ln: DiffLayerNorm,
    layers: Vec<Layer>,
    qa_outputs: Linear,
}

impl QaBert {
    /// Build from `vb` (`bert.…`, `qa_outputs.…`). Only `gelu` activations and absolute
    /// positions are supported (BERT, MiniLM).
    pub fn new(vb: VarBuilder, config: &Config) -> candle_core::Result<Self> {
        let act = format!("{:?}", config.hidden_act);
        if act != "Gelu" {
            candle_core::bail!("hidden_act {act:?} is not supported (gelu only)");
        }
        let h = config.hidden_size;
        let e = vb.pp("bert").pp("embeddings");
        let layers = (0..config.num_hidden_layers)
            .map(|i| Layer::new(vb.pp("bert").pp("encoder").pp("layer").pp(i), config))
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(QaBert {
            word: candle_nn::embedding(config.vocab_size, h, e.pp("word_embeddings"))?,
            pos: candle_nn::embedding(
                config.max_position_embeddings,
                h,
                e.pp("position_embeddings"),
            )?,
            ty: candle_nn::embedding(config.type_vocab_size, h, e.pp("token_type_embeddings"))?,
            ln: DiffLayerNorm::new(h, config.layer_norm_eps, e.pp("LayerNorm"))?,
            layers,
            qa_outputs: candle_nn::linear(h, 2, vb.pp("qa_outputs"))?,
        })
    }

    /// Start and end logits, each `[batch, len]`.
    pub fn forward(
        &self,
        ids: &Tensor,
        type_ids: &Tensor,
        mask: &Tensor,
    ) -> candle_core::Result<(Tensor, Tensor)> {
        let (b, l) = ids.dims2()?;
        let pos = Tensor::arange(0u32, l as u32, ids.device())?;
        let x = self
            .word
            .forward(ids)?
            .broadcast_add(&self.pos.forward(&pos)?)?
            .add(&self.ty.forward(type_ids)?)?;
        let mut x = self.ln.forward(&x)?;
        // 0 where attended, a large negative number at padding.
        let bias = ((mask.to_dtype(DType::F32)? - 1.0)? * 1e9)?.reshape((b, 1, 1, l))?;
        for layer in &self.layers {
            x = layer.forward(&x, &bias)?;
        }
        let logits = self.qa_outputs.forward(&x)?;
        let start = logits.narrow(D::Minus1, 0, 1)?.squeeze(D::Minus1)?;
        let end = logits.narrow(D::Minus1, 1, 1)?.squeeze(D::Minus1)?;
        Ok((start.contiguous()?, end.contiguous()?))
    }
}

/// transformers' QA loss: the mean of the cross-entropies of the start and end logits
/// (`[batch, len]`) against the target positions (`[batch]`, u32).
pub fn span_loss(
    start: &Tensor,
    end: &Tensor,
    start_pos: &Tensor,
    end_pos: &Tensor,
) -> candle_core::Result<Tensor> {
    let ls = candle_nn::loss::cross_entropy(start, start_pos)?;
    let le = candle_nn::loss::cross_entropy(end, end_pos)?;
    (ls + le)? / 2.0
}

/// A model being trained: its variables, its config and the model.
pub struct QaTrainModel {
    /// The trainable variables (names as in the saved checkpoint).
    pub vars: VarMap,
    /// The model built over `vars`.
    pub model: QaBert,
    /// The config as read (written back with `architectures` set).
    pub config_json: serde_json::Value,
    /// The parsed config.
    pub config: Config,
}

impl Trainable for QaTrainModel {
    type Batch = QaBatch;
    fn loss(&self, b: &QaBatch) -> candle_core::Result<Tensor> {
        let (s, e) = self.model.forward(&b.ids, &b.type_ids, &b.mask)?;
        span_loss(&s, &e, &b.start, &b.end)
    }
}

fn read_config(path: &Path) -> Result<(serde_json::Value, Config)> {
    let raw = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let json: serde_json::Value =
        serde_json::from_str(&raw).map_err(|e| Error::bad_input(path, e.to_string()))?;
    let config: Config = serde_json::from_value(json.clone())
        .map_err(|e| Error::bad_input(path, format!("not a BERT config: {e}")))?;
    Ok((json, config))
}

impl QaTrainModel {
    /// Start from a BERT checkpoint (`model.safetensors` with or without the `bert.`
    /// prefix, as sentence-transformers saves it; a `qa_outputs` head is used when
    /// present, otherwise initialised N(0, 0.02) with zero bias from `seed`, as
    /// transformers does). Every variable the model needs must come from the file or
    /// that initialisation: a missing tensor is an error naming it.
    pub fn from_checkpoint(config_path: &Path, model_path: &Path, seed: u64) -> Result<Self> {
        let (config_json, config) = read_config(config_path)?;
        let tensors = candle_core::safetensors::load(model_path, &Device::Cpu)
            .map_err(|e| Error::bad_input(model_path, format!("not a safetensors file: {e}")))?;
        let prefixed = tensors.contains_key("bert.embeddings.word_embeddings.weight");
        if !prefixed && !tensors.contains_key("embeddings.word_embeddings.weight") {
            return Err(Error::bad_input(
                model_path,
                "no `embeddings.word_embeddings.weight` (nor `bert.…`): not a BERT checkpoint",
            ));
        }
        let vars = VarMap::new();
        {
            let mut data = vars
                .data()
                .lock()
                .map_err(|_| Error::param("vars", "poisoned lock"))?;
            for (name, t) in &tensors {
                let name = if prefixed || name.starts_with("qa_outputs.") {
                    name.clone()
                } else {
                    format!("bert.{name}")
                };
                if name.starts_with("bert.pooler.") || name.ends_with("position_ids") {
                    continue; // BertForQuestionAnswering has no pooler
                }
                let t = t
                    .to_dtype(DType::F32)
                    .map_err(candle_err("loading weights"))?;
                data.insert(
                    name,
                    Var::from_tensor(&t).map_err(candle_err("loading weights"))?,
                );
            }
            if !data.contains_key("qa_outputs.weight") {
                let h = config.hidden_size;
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let w: Vec<f32> = (0..2 * h).map(|_| 0.02 * std_normal(&mut rng)).collect();
                let w = Tensor::from_vec(w, (2, h), &Device::Cpu).map_err(candle_err("init"))?;
                let b = Tensor::zeros(2, DType::F32, &Device::Cpu).map_err(candle_err("init"))?;
                data.insert(
                    "qa_outputs.weight".into(),
                    Var::from_tensor(&w).map_err(candle_err("init"))?,
                );
                data.insert(
                    "qa_outputs.bias".into(),
                    Var::from_tensor(&b).map_err(candle_err("init"))?,
                );
            }
        }
        let n_before = vars.all_vars().len();
        let vb = VarBuilder::from_varmap(&vars, DType::F32, &Device::Cpu);
        let model = QaBert::new(vb, &config)
            .map_err(|e| Error::bad_input(model_path, format!("building the model: {e}")))?;
        let n_after = vars.all_vars().len();
        if n_after != n_before {
            let names: Vec<String> = vars
                .data()
                .lock()
                .map(|d| d.keys().cloned().collect())
                .unwrap_or_default();
            let mut missing: Vec<String> = names
                .into_iter()
                .filter(|n| {
                    !tensors.contains_key(n)
                        && !tensors.contains_key(n.trim_start_matches("bert."))
                        && !n.starts_with("qa_outputs.")
                })
                .collect();
            missing.sort();
            return Err(Error::bad_input(
                model_path,
                format!(
                    "the checkpoint lacks tensors the model needs: {}",
                    missing.join(", ")
                ),
            ));
        }
        Ok(QaTrainModel {
            vars,
            model,
            config_json,
            config,
        })
    }

    /// Save in the Hugging Face layout: `model.safetensors`, `config.json` (with
    /// `architectures: ["BertForQuestionAnswering"]`) and a copy of `tokenizer.json`.
    pub fn save_pretrained(&self, dir: &Path, tokenizer_json: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let m = dir.join("model.safetensors");
        self.vars.save(&m).map_err(candle_err("saving the model"))?;
        let mut cfg = self.config_json.clone();
        if let Some(o) = cfg.as_object_mut() {
            o.insert(
                "architectures".into(),
                serde_json::json!(["BertForQuestionAnswering"]),
            );
            o.insert("model_type".into(), serde_json::json!("bert"));
        }
        let c = dir.join("config.json");
        std::fs::write(&c, serde_json::to_string_pretty(&cfg)?).map_err(|e| Error::io(&c, e))?;
        let t = dir.join("tokenizer.json");
        std::fs::copy(tokenizer_json, &t).map_err(|e| Error::io(&t, e))?;
        Ok(())
    }
}

/// Load a QA checkpoint in the Hugging Face layout (`config.json`, `model.safetensors`)
/// for inference (memory-mapped, no gradients).
pub fn load_pretrained(dir: &Path) -> Result<QaBert> {
    let (_, config) = read_config(&dir.join("config.json"))?;
    let m = dir.join("model.safetensors");
    if !m.exists() {
        return Err(Error::bad_input(&m, "missing: not a saved QA checkpoint"));
    }
    // SAFETY: a checkpoint file nothing rewrites while it is mapped.
    let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&m], DType::F32, &Device::Cpu) }
        .map_err(|e| Error::bad_input(&m, format!("cannot map: {e}")))?;
    if !vb.contains_tensor("qa_outputs.weight") {
        return Err(Error::bad_input(
            &m,
            "no `qa_outputs.weight`: not a question-answering checkpoint",
        ));
    }
    QaBert::new(vb, &config).map_err(|e| Error::bad_input(&m, format!("loading: {e}")))
}

/// Windowing parameters (transformers' `run_qa.py` names).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FeatureParams {
    /// Longest feature, special tokens included.
    pub max_len: usize,
    /// Context tokens shared by consecutive windows.
    pub doc_stride: usize,
    /// Question tokens kept (longer questions are truncated).
    pub max_query_len: usize,
}

impl Default for FeatureParams {
    fn default() -> Self {
        FeatureParams {
            max_len: 384,
            doc_stride: 128,
            max_query_len: 64,
        }
    }
}

/// One window of `[CLS] question [SEP] context-window [SEP]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Feature {
    /// Index of the example it comes from.
    pub example: usize,
    /// Token ids.
    pub ids: Vec<u32>,
    /// Token type ids (0 question, 1 context).
    pub type_ids: Vec<u32>,
    /// Byte offsets into the context of each token; `None` for question and special tokens.
    pub offsets: Vec<Option<(usize, usize)>>,
    /// Target start token (0 = `[CLS]`: no answer in this window).
    pub start: u32,
    /// Target end token.
    pub end: u32,
}

/// A training or evaluation example: a question over one context, with the answer's
/// byte range in the context when there is one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanExample {
    /// Stable id (question id).
    pub id: String,
    /// Where it comes from (`squad`, `rag-mini`, `nq`).
    pub source: String,
    /// The question.
    pub question: String,
    /// The context.
    pub context: String,
    /// Byte range of the answer in `context`; `None` for an unanswerable question.
    pub answer: Option<(usize, usize)>,
    /// Gold answer texts (for scoring).
    pub golds: Vec<String>,
}

/// Tokenise `examples` into windows. Returns the features and how many answers fell
/// outside every window they could (always 0 unless an answer is longer than a window).
pub fn make_features(
    tok: &Tokenizer,
    examples: &[SpanExample],
    p: FeatureParams,
) -> Result<Vec<Feature>> {
    let cls = token_id(tok, "[CLS]")?;
    let sep = token_id(tok, "[SEP]")?;
    let mut out = Vec::new();
    for (ei, ex) in examples.iter().enumerate() {
        let q = tok
            .encode(ex.question.as_str(), false)
            .map_err(|e| Error::Tokenizer(format!("question `{}`: {e}", ex.id)))?;
        let mut q_ids: Vec<u32> = q.get_ids().to_vec();
        q_ids.truncate(p.max_query_len);
        let c = tok
            .encode(ex.context.as_str(), false)
            .map_err(|e| Error::Tokenizer(format!("context of `{}`: {e}", ex.id)))?;
        let c_ids = c.get_ids();
        let c_off = c.get_offsets();
        let room = p
            .max_len
            .checked_sub(q_ids.len() + 3)
            .filter(|&r| r > 0)
            .ok_or_else(|| {
                Error::param(
                    "max_len",
                    format!(
                        "{} leaves no room for the context of `{}`",
                        p.max_len, ex.id
                    ),
                )
            })?;
        if p.doc_stride >= room {
            return Err(Error::param(
                "doc_stride",
                format!(
                    "{} must be below the context room {room} of a window",
                    p.doc_stride
                ),
            ));
        }
        let mut begin = 0usize;
        loop {
            let stop = (begin + room).min(c_ids.len());
            let mut ids = Vec::with_capacity(q_ids.len() + 3 + stop - begin);
            ids.push(cls);
            ids.extend_from_slice(&q_ids);
            ids.push(sep);
            let ctx0 = ids.len();
            ids.extend_from_slice(&c_ids[begin..stop]);
            ids.push(sep);
            let mut type_ids = vec![0u32; ctx0];
            type_ids.extend(std::iter::repeat_n(1u32, ids.len() - ctx0));
            let mut offsets = vec![None; ctx0];
            offsets.extend(c_off[begin..stop].iter().map(|&o| Some(o)));
            offsets.push(None);
            let (mut s, mut e) = (0u32, 0u32);
            if let Some((a0, a1)) = ex.answer {
                let first = (begin..stop).find(|&i| c_off[i].1 > a0);
                let last = (begin..stop).rev().find(|&i| c_off[i].0 < a1);
                if let (Some(f), Some(l)) = (first, last) {
                    // Inside the window only if the whole answer is.
                    let whole = c_off[f].0 <= a0 && c_off[l].1 >= a1 && f <= l;
                    if whole {
                        s = (ctx0 + f - begin) as u32;
                        e = (ctx0 + l - begin) as u32;
                    }
                }
            }
            out.push(Feature {
                example: ei,
                ids,
                type_ids,
                offsets,
                start: s,
                end: e,
            });
            if stop >= c_ids.len() {
                break;
            }
            begin += room - p.doc_stride;
        }
    }
    Ok(out)
}

fn token_id(tok: &Tokenizer, t: &str) -> Result<u32> {
    tok.token_to_id(t)
        .ok_or_else(|| Error::Tokenizer(format!("the tokenizer has no `{t}` token")))
}

/// A collated batch: `[batch, len]` u32 tensors, targets `[batch]`.
pub struct QaBatch {
    /// Token ids.
    pub ids: Tensor,
    /// Token type ids.
    pub type_ids: Tensor,
    /// Attention mask.
    pub mask: Tensor,
    /// Start targets.
    pub start: Tensor,
    /// End targets.
    pub end: Tensor,
}

/// Pad `feats` to their longest and stack them.
pub fn collate(feats: &[&Feature]) -> Result<QaBatch> {
    let len = feats.iter().map(|f| f.ids.len()).max().unwrap_or(0);
    let n = feats.len();
    let mut ids = vec![0u32; n * len];
    let mut ty = vec![0u32; n * len];
    let mut mask = vec![0u32; n * len];
    for (r, f) in feats.iter().enumerate() {
        ids[r * len..r * len + f.ids.len()].copy_from_slice(&f.ids);
        ty[r * len..r * len + f.ids.len()].copy_from_slice(&f.type_ids);
        mask[r * len..r * len + f.ids.len()].fill(1);
    }
    let e = candle_err("collating a batch");
    let t = |v: Vec<u32>| Tensor::from_vec(v, (n, len), &Device::Cpu);
    Ok(QaBatch {
        ids: t(ids).map_err(&e)?,
        type_ids: t(ty).map_err(&e)?,
        mask: t(mask).map_err(&e)?,
        start: Tensor::from_vec(feats.iter().map(|f| f.start).collect(), n, &Device::Cpu)
            .map_err(&e)?,
        end: Tensor::from_vec(feats.iter().map(|f| f.end).collect(), n, &Device::Cpu)
            .map_err(&e)?,
    })
}

/// Features as [`TrainData`].
pub struct QaFeatures(pub Vec<Feature>);

impl TrainData for QaFeatures {
    type Batch = QaBatch;
    fn len(&self) -> usize {
        self.0.len()
    }
    fn length(&self, i: usize) -> usize {
        self.0[i].ids.len()
    }
    fn collate(&self, idx: &[usize]) -> Result<QaBatch> {
        let f: Vec<&Feature> = idx.iter().map(|&i| &self.0[i]).collect();
        collate(&f)
    }
}

/// The best span of one example over its windows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanPrediction {
    /// Byte range in the context.
    pub range: (usize, usize),
    /// The answer text.
    pub text: String,
    /// start + end logit of the span.
    pub score: f32,
    /// Best null (`[CLS]`) score over the windows.
    pub null_score: f32,
}

/// Predict every example's best span (start ≤ end, at most `max_answer_len` tokens,
/// context tokens only), over all its windows, in batches of `batch_size`.
pub fn predict(
    model: &QaBert,
    examples: &[SpanExample],
    features: &[Feature],
    batch_size: usize,
    max_answer_len: usize,
) -> Result<Vec<Option<SpanPrediction>>> {
    let mut best: Vec<Option<SpanPrediction>> = vec![None; examples.len()];
    let mut null: Vec<f32> = vec![f32::NEG_INFINITY; examples.len()];
    let mut order: Vec<usize> = (0..features.len()).collect();
    order.sort_by_key(|&i| features[i].ids.len());
    let mut bar = crate::progress::bar(features.len(), "predicting");
    for chunk in order.chunks(batch_size.max(1)) {
        let fs: Vec<&Feature> = chunk.iter().map(|&i| &features[i]).collect();
        let b = collate(&fs)?;
        let (s, e) = model
            .forward(&b.ids, &b.type_ids, &b.mask)
            .map_err(candle_err("forward"))?;
        let s: Vec<Vec<f32>> = s.to_vec2().map_err(candle_err("logits"))?;
        let e: Vec<Vec<f32>> = e.to_vec2().map_err(candle_err("logits"))?;
        for (r, f) in fs.iter().enumerate() {
            let ex = &examples[f.example];
            null[f.example] = null[f.example].max(s[r][0] + e[r][0]);
            let n = f.ids.len();
            let (sr, er) = (&s[r], &e[r]);
            for (i, off_i) in f.offsets.iter().enumerate() {
                let Some((a, _)) = *off_i else { continue };
                let stop = n.min(i + max_answer_len);
                for (j, off_j) in f.offsets.iter().enumerate().take(stop).skip(i) {
                    let Some((_, b_end)) = *off_j else {
                        break;
                    };
                    let score = sr[i] + er[j];
                    if best[f.example].as_ref().is_none_or(|p| score > p.score) {
                        best[f.example] = Some(SpanPrediction {
                            range: (a, b_end),
                            text: ex.context[a..b_end].to_string(),
                            score,
                            null_score: 0.0,
                        });
                    }
                }
            }
        }
        crate::progress::tick(&mut bar, chunk.len());
    }
    for (b, n) in best.iter_mut().zip(null) {
        if let Some(p) = b {
            p.null_score = n;
        }
    }
    Ok(best)
}

/// A standard normal draw (Box–Muller).
fn std_normal(rng: &mut ChaCha8Rng) -> f32 {
    let u1: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    let u2: f64 = rng.gen();
    ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
}
