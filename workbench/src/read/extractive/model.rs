//! [`QaModel`]: start and end logits over a BERT-family encoder, as transformers'
//! `*ForQuestionAnswering` models compute them. One model trains and reads: the encoder is
//! the workbench's differentiable [`BertEncoder`] (every weight gets a gradient; the
//! cross-encoder and ColBERT trainers use the same encoder), the head transformers'
//! `qa_outputs = Linear(hidden, 2)` on the last hidden states (channel 0 start, 1 end).
//!
//! | `architectures` in `config.json` | weight names | encoder options |
//! |---|---|---|
//! | `BertForQuestionAnswering` | `bert.*`, `qa_outputs.{weight,bias}` | absolute positions, token types |
//! | `DistilBertForQuestionAnswering` | `distilbert.*`, `qa_outputs.*` | renamed on the fly, no token types |
//! | `RobertaForQuestionAnswering` | `roberta.*`, `qa_outputs.*` | RoBERTa position ids (from `pad_token_id`) |
//!
//! DistilBERT is BERT without token types (and the same post-LayerNorm blocks): its
//! weights are renamed on the fly (`q_lin` → `query`, `sa_layer_norm` →
//! `attention.output.LayerNorm`, `ffn.lin1` → `intermediate.dense`, …) and its GELU is the
//! exact one, as in transformers (logits match to 1e-4 on the tiny checkpoints).
//!
//! Three ways to get a model:
//! - [`QaModel::load`]: a QA checkpoint (a hub snapshot or a [`save_pretrained`] folder),
//!   read-only (memory-mapped);
//! - [`QaModel::trainable`]: every weight a [`Var`](candle_core::Var) of a fresh
//!   [`VarMap`], copied from a QA checkpoint or from a **base encoder without a head**
//!   (all-MiniLM-L6-v2's `BertModel`, with or without the `bert.` prefix), a missing
//!   `qa_outputs` initialised as transformers does (normal(0, `initializer_range`), bias 0)
//!   from an explicit seed;
//! - [`QaModel::new`]: from any [`VarBuilder`] (the building block of both).
//!
//! [`span_loss`] is transformers' loss, `(CE(start) + CE(end)) / 2`, and
//! [`save_pretrained`] writes a folder that [`QaModel::load`] reads back.

use crate::assets::Assets;
use crate::encode::trainable::{BertEncoder, EncoderConfig};
use crate::encode::BertConfig as WbBertConfig;
use crate::{Error, Result};
use candle_core::{DType, Device, IndexOp, Tensor};
use candle_nn::{Linear, Module, VarBuilder, VarMap};
use candle_transformers::models::{bert, xlm_roberta};
use rand::SeedableRng;
pub(crate) use rand_distr_normal::sample_normal;
use std::path::{Path, PathBuf};

/// The encoder family of a QA checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QaArchitecture {
    /// `BertForQuestionAnswering` (also MiniLM, which is a BERT).
    Bert,
    /// `DistilBertForQuestionAnswering`.
    DistilBert,
    /// `RobertaForQuestionAnswering`.
    Roberta,
}

impl QaArchitecture {
    /// The transformers class name written to `architectures`.
    pub fn class_name(self) -> &'static str {
        match self {
            QaArchitecture::Bert => "BertForQuestionAnswering",
            QaArchitecture::DistilBert => "DistilBertForQuestionAnswering",
            QaArchitecture::Roberta => "RobertaForQuestionAnswering",
        }
    }

    /// Prefix of the encoder's weights (`bert`, `distilbert`, `roberta`).
    pub fn prefix(self) -> &'static str {
        match self {
            QaArchitecture::Bert => "bert",
            QaArchitecture::DistilBert => "distilbert",
            QaArchitecture::Roberta => "roberta",
        }
    }

    fn model_type(self) -> &'static str {
        self.prefix()
    }

    fn from_class(name: &str) -> Option<Self> {
        match name {
            "BertForQuestionAnswering" => Some(QaArchitecture::Bert),
            "DistilBertForQuestionAnswering" => Some(QaArchitecture::DistilBert),
            "RobertaForQuestionAnswering" => Some(QaArchitecture::Roberta),
            _ => None,
        }
    }

    fn from_base_class(name: &str) -> Option<Self> {
        match name {
            "BertModel" | "BertForMaskedLM" | "BertForPreTraining" => Some(QaArchitecture::Bert),
            "DistilBertModel" | "DistilBertForMaskedLM" => Some(QaArchitecture::DistilBert),
            "RobertaModel" | "RobertaForMaskedLM" => Some(QaArchitecture::Roberta),
            _ => Self::from_class(name),
        }
    }
}

/// A BERT tensor name → the DistilBERT checkpoint's name for it.
fn distil_name(n: &str) -> String {
    let Some(rest) = n.strip_prefix("distilbert.encoder.layer.") else {
        return n.to_string();
    };
    let Some((num, tail)) = rest.split_once('.') else {
        return n.to_string();
    };
    let (module, wb) = tail.rsplit_once('.').unwrap_or((tail, ""));
    let m = match module {
        "attention.self.query" => "attention.q_lin",
        "attention.self.key" => "attention.k_lin",
        "attention.self.value" => "attention.v_lin",
        "attention.output.dense" => "attention.out_lin",
        "attention.output.LayerNorm" => "sa_layer_norm",
        "intermediate.dense" => "ffn.lin1",
        "output.dense" => "ffn.lin2",
        "output.LayerNorm" => "output_layer_norm",
        other => other,
    };
    format!("distilbert.transformer.layer.{num}.{m}.{wb}")
}

/// Fill in the fields recent transformers versions leave out of a RoBERTa `config.json`.
fn roberta_defaults(raw: &serde_json::Value) -> serde_json::Value {
    let mut v = raw.clone();
    if let Some(o) = v.as_object_mut() {
        for (k, d) in [
            ("position_embedding_type", serde_json::json!("absolute")),
            ("attention_probs_dropout_prob", serde_json::json!(0.1)),
            ("hidden_dropout_prob", serde_json::json!(0.1)),
            ("hidden_act", serde_json::json!("gelu")),
            ("layer_norm_eps", serde_json::json!(1e-5)),
            ("type_vocab_size", serde_json::json!(1)),
            ("pad_token_id", serde_json::json!(1)),
        ] {
            if o.get(k).is_none_or(|x| x.is_null()) {
                o.insert(k.into(), d);
            }
        }
    }
    v
}

/// A parsed `config.json` of a QA model (or of a base encoder to put a QA head on).
#[derive(Debug, Clone)]
pub struct QaConfig {
    /// Encoder family.
    pub architecture: QaArchitecture,
    /// Hidden size (input of `qa_outputs`).
    pub hidden_size: usize,
    /// Longest input in tokens the position embeddings allow (RoBERTa: `max_position_embeddings − 2`).
    pub max_positions: usize,
    /// Padding token id.
    pub pad_token_id: u32,
    /// Standard deviation of transformers' weight initialisation (for a new head).
    pub initializer_range: f64,
    /// The file it was read from.
    pub path: PathBuf,
    /// The JSON as read (written back by [`save_pretrained`] with `architectures` set).
    pub raw: serde_json::Value,
    encoder: EncoderConfig,
}

fn bad(path: &Path, msg: impl Into<String>) -> Error {
    Error::bad_input(path, msg)
}

impl QaConfig {
    /// Read a QA checkpoint's `config.json`: `architectures` must name one of
    /// `BertForQuestionAnswering`, `DistilBertForQuestionAnswering`,
    /// `RobertaForQuestionAnswering`; anything else is an error naming it and the file.
    pub fn from_file(path: &Path) -> Result<Self> {
        Self::read(path, false)
    }

    /// Read a base encoder's `config.json` (`BertModel`, `DistilBertModel`, `RobertaModel`,
    /// their masked-LM classes, or a QA class; without `architectures`, `model_type`
    /// decides) to put a new QA head on it with [`QaModel::trainable`].
    pub fn from_base_file(path: &Path) -> Result<Self> {
        Self::read(path, true)
    }

    fn read(path: &Path, base: bool) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let raw: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| bad(path, format!("config.json is not JSON: {e}")))?;
        let archs: Vec<String> = raw
            .get("architectures")
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let pick = |f: fn(&str) -> Option<QaArchitecture>| archs.iter().find_map(|a| f(a));
        let architecture = if base {
            pick(QaArchitecture::from_base_class).or_else(|| {
                if !archs.is_empty() {
                    return None;
                }
                match raw.get("model_type").and_then(|m| m.as_str()) {
                    Some("bert") => Some(QaArchitecture::Bert),
                    Some("distilbert") => Some(QaArchitecture::DistilBert),
                    Some("roberta") => Some(QaArchitecture::Roberta),
                    _ => None,
                }
            })
        } else {
            pick(QaArchitecture::from_class)
        };
        let Some(architecture) = architecture else {
            return Err(bad(
                path,
                format!(
                    "field `architectures` = {archs:?} (model_type {:?}): not a supported {}; \
                     supported: BertForQuestionAnswering, DistilBertForQuestionAnswering, \
                     RobertaForQuestionAnswering{}",
                    raw.get("model_type")
                        .and_then(|m| m.as_str())
                        .unwrap_or("?"),
                    if base {
                        "encoder"
                    } else {
                        "question-answering model"
                    },
                    if base {
                        " (or their base encoders BertModel, DistilBertModel, RobertaModel)"
                    } else {
                        ""
                    }
                ),
            ));
        };
        let num = |k: &str| raw.get(k).and_then(|v| v.as_u64());
        let initializer_range = raw
            .get("initializer_range")
            .and_then(|v| v.as_f64())
            .unwrap_or(0.02);
        let pad_token_id = num("pad_token_id").unwrap_or(0) as u32;
        let (encoder, hidden_size, max_positions) = match architecture {
            QaArchitecture::Bert => {
                // The workbench's BERT config validates activation, position type, sizes.
                let mut c = WbBertConfig::from_file(path)?;
                c.model_type = None; // weights are addressed under `bert.` explicitly
                let (h, m) = (c.hidden_size, c.max_position_embeddings);
                (EncoderConfig::from_bert(&c.to_candle()), h, m)
            }
            QaArchitecture::DistilBert => {
                let field = |k: &str| {
                    num(k).map(|x| x as usize).ok_or_else(|| {
                        bad(
                            path,
                            format!("field `{k}` missing: not a DistilBERT config"),
                        )
                    })
                };
                let act = match raw.get("activation").and_then(|a| a.as_str()) {
                    Some("gelu") | None => bert::HiddenAct::Gelu,
                    Some("relu") => bert::HiddenAct::Relu,
                    Some(o) => {
                        return Err(bad(
                            path,
                            format!("field `activation` = `{o}` is not supported"),
                        ))
                    }
                };
                let dim = field("dim")?;
                let heads = field("n_heads")?;
                if heads == 0 || dim % heads != 0 {
                    return Err(bad(
                        path,
                        format!("dim {dim} is not a multiple of n_heads {heads}"),
                    ));
                }
                let max_pos = num("max_position_embeddings").unwrap_or(512) as usize;
                let c = bert::Config {
                    vocab_size: field("vocab_size")?,
                    hidden_size: dim,
                    num_hidden_layers: field("n_layers")?,
                    num_attention_heads: heads,
                    intermediate_size: field("hidden_dim")?,
                    hidden_act: act,
                    hidden_dropout_prob: 0.0,
                    max_position_embeddings: max_pos,
                    type_vocab_size: 1,
                    initializer_range,
                    layer_norm_eps: 1e-12,
                    pad_token_id: pad_token_id as usize,
                    position_embedding_type: Default::default(),
                    use_cache: false,
                    classifier_dropout: None,
                    model_type: None,
                };
                // No token-type embedding: DistilBERT has none.
                let e = EncoderConfig {
                    type_vocab_size: 0,
                    ..EncoderConfig::from_bert(&c)
                };
                (e, dim, max_pos)
            }
            QaArchitecture::Roberta => {
                let c: xlm_roberta::Config = serde_json::from_value(roberta_defaults(&raw))
                    .map_err(|e| bad(path, format!("not a RoBERTa config: {e}")))?;
                if c.position_embedding_type != "absolute" {
                    return Err(bad(
                        path,
                        format!(
                            "field `position_embedding_type` = `{}`: only `absolute` is supported",
                            c.position_embedding_type
                        ),
                    ));
                }
                let (h, m) = (
                    c.hidden_size,
                    c.max_position_embeddings
                        .saturating_sub(c.pad_token_id as usize + 1),
                );
                let e = EncoderConfig::from_roberta(&c)
                    .map_err(|e| bad(path, format!("not a supported RoBERTa config: {e}")))?;
                (e, h, m)
            }
        };
        Ok(QaConfig {
            architecture,
            hidden_size,
            max_positions,
            pad_token_id,
            initializer_range,
            path: path.to_path_buf(),
            raw,
            encoder,
        })
    }

    /// The `config.json` of a QA checkpoint of this model: the JSON as read, with
    /// `architectures` set to the QA class and `model_type` to the family.
    pub fn qa_json(&self) -> serde_json::Value {
        let mut v = self.raw.clone();
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "architectures".into(),
                serde_json::json!([self.architecture.class_name()]),
            );
            o.insert(
                "model_type".into(),
                serde_json::json!(self.architecture.model_type()),
            );
        }
        v
    }
}

/// Start/end logits over a BERT-family encoder. See the module docs. Cloning shares the
/// weights (tensors are reference-counted).
#[derive(Clone)]
pub struct QaModel {
    encoder: BertEncoder,
    qa_outputs: Linear,
    architecture: QaArchitecture,
    hidden_size: usize,
}

impl std::fmt::Debug for QaModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QaModel")
            .field("architecture", &self.architecture)
            .field("hidden_size", &self.hidden_size)
            .finish_non_exhaustive()
    }
}

/// The three files of a checkpoint folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QaFiles {
    /// `config.json`.
    pub config: PathBuf,
    /// `tokenizer.json`.
    pub tokenizer: PathBuf,
    /// `model.safetensors`.
    pub weights: PathBuf,
}

impl QaFiles {
    /// The files of a folder (a hub snapshot or a [`save_pretrained`] output).
    pub fn in_dir(dir: impl AsRef<Path>) -> Self {
        let d = dir.as_ref();
        QaFiles {
            config: d.join("config.json"),
            tokenizer: d.join("tokenizer.json"),
            weights: d.join("model.safetensors"),
        }
    }

    /// The files of a model asset of `data/assets.toml` (each sha256-checked; a missing
    /// asset is [`Error::AssetMissing`]).
    pub fn from_asset(assets: &Assets, name: &str) -> Result<Self> {
        Ok(QaFiles {
            config: assets.resolve(name, "config.json")?,
            tokenizer: assets.resolve(name, "tokenizer.json")?,
            weights: assets.resolve(name, "model.safetensors")?,
        })
    }

    /// An error naming the first of the three files that does not exist.
    pub fn check_exist(&self) -> Result<()> {
        for p in [&self.config, &self.tokenizer, &self.weights] {
            if !p.is_file() {
                return Err(Error::io(
                    p.clone(),
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "missing checkpoint file (a QA checkpoint needs config.json, \
                         tokenizer.json and model.safetensors)",
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn load_tensors(path: &Path) -> Result<std::collections::HashMap<String, Tensor>> {
    if !path.is_file() {
        return Err(Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "missing checkpoint file"),
        ));
    }
    candle_core::safetensors::load(path, &Device::Cpu)
        .map_err(|e| bad(path, format!("not a readable safetensors file: {e}")))
}

impl QaModel {
    /// Build the model from `vb` (weights under `bert.` / `distilbert.` / `roberta.` and
    /// `qa_outputs.`, exactly as transformers names them). With a [`VarBuilder`] over a
    /// [`VarMap`] every weight becomes a trainable variable.
    pub fn new(vb: VarBuilder, config: &QaConfig) -> candle_core::Result<Self> {
        let prefix = config.architecture.prefix();
        let encoder = if config.architecture == QaArchitecture::DistilBert {
            let renamed = vb.clone().rename_f(|n: &str| distil_name(n));
            BertEncoder::new(renamed.pp(prefix), &config.encoder)?
        } else {
            BertEncoder::new(vb.pp(prefix), &config.encoder)?
        };
        let qa_outputs = candle_nn::linear(config.hidden_size, 2, vb.pp("qa_outputs"))?;
        Ok(QaModel {
            encoder,
            qa_outputs,
            architecture: config.architecture,
            hidden_size: config.hidden_size,
        })
    }

    /// Load a QA checkpoint (read-only, memory-mapped weights). Errors name the file:
    /// a missing file, a config whose `architectures` is not a supported QA class, a file
    /// that is not safetensors, a missing or mis-shaped tensor (a base encoder without
    /// `qa_outputs` is refused here: use [`QaModel::trainable`] to add a head).
    pub fn load(files: &QaFiles) -> Result<(Self, QaConfig)> {
        files.check_exist()?;
        let config = QaConfig::from_file(&files.config)?;
        let model = Self::load_with(&config, &files.weights)?;
        Ok((model, config))
    }

    /// [`QaModel::load`] with an already parsed config and an explicit weights file.
    pub fn load_with(config: &QaConfig, weights: &Path) -> Result<Self> {
        let tensors = load_tensors(weights)?;
        for k in ["qa_outputs.weight", "qa_outputs.bias"] {
            if !tensors.contains_key(k) {
                return Err(bad(
                    weights,
                    format!(
                        "no tensor `{k}`: not a {} checkpoint (a base encoder gets a new head \
                         with QaModel::trainable)",
                        config.architecture.class_name()
                    ),
                ));
            }
        }
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
        Self::new(vb, config).map_err(|e| {
            bad(
                weights,
                format!(
                    "loading a {} from it: {e}",
                    config.architecture.class_name()
                ),
            )
        })
    }

    /// A trainable model: a new [`VarMap`] whose variables are copied from `weights` — a
    /// QA checkpoint, or a base encoder whose tensors may lack the family prefix (the
    /// sentence-transformers layout of all-MiniLM-L6-v2). When `qa_outputs` is absent it is
    /// initialised as transformers does, weight ~ normal(0, `initializer_range`) and bias
    /// 0, from `seed` (the same seed gives the same head). Any other missing tensor, or
    /// one of the wrong shape, is an error naming it and the file.
    pub fn trainable(config: &QaConfig, weights: &Path, seed: u64) -> Result<(VarMap, Self)> {
        let tensors = load_tensors(weights)?;
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let model = Self::new(vb, config).map_err(|e| bad(weights, e.to_string()))?;
        let prefix = format!("{}.", config.architecture.prefix());
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        {
            let data = varmap
                .data()
                .lock()
                .map_err(|_| bad(weights, "variable map lock poisoned"))?;
            // Sorted, so the head's random numbers do not depend on hash order.
            let mut names: Vec<&String> = data.keys().collect();
            names.sort();
            for name in names {
                let var = &data[name];
                let src = tensors
                    .get(name.as_str())
                    .or_else(|| name.strip_prefix(&prefix).and_then(|n| tensors.get(n)));
                let value = match src {
                    Some(t) => {
                        if t.dims() != var.dims() {
                            return Err(bad(
                                weights,
                                format!(
                                    "tensor `{name}` has shape {:?}, the config ({}) implies {:?}",
                                    t.dims(),
                                    config.path.display(),
                                    var.dims()
                                ),
                            ));
                        }
                        t.to_dtype(DType::F32)
                            .map_err(|e| bad(weights, e.to_string()))?
                    }
                    None if name == "qa_outputs.weight" => {
                        let n = 2 * config.hidden_size;
                        let v: Vec<f32> = (0..n)
                            .map(|_| (sample_normal(&mut rng) * config.initializer_range) as f32)
                            .collect();
                        Tensor::from_vec(v, (2, config.hidden_size), &Device::Cpu)
                            .map_err(|e| bad(weights, e.to_string()))?
                    }
                    None if name == "qa_outputs.bias" => Tensor::zeros(2, DType::F32, &Device::Cpu)
                        .map_err(|e| bad(weights, e.to_string()))?,
                    None => {
                        return Err(bad(
                            weights,
                            format!(
                                "missing tensor `{name}` (nor `{}`) needed by a {}",
                                name.strip_prefix(&prefix).unwrap_or(name),
                                config.architecture.class_name()
                            ),
                        ))
                    }
                };
                var.set(&value).map_err(|e| bad(weights, e.to_string()))?;
            }
        }
        Ok((varmap, model))
    }

    /// Encoder family.
    pub fn architecture(&self) -> QaArchitecture {
        self.architecture
    }

    /// Hidden size.
    pub fn hidden_size(&self) -> usize {
        self.hidden_size
    }

    /// `(start_logits, end_logits)`, each `(batch, seq)`, for `input_ids`, `token_type_ids`
    /// and `attention_mask` (each `(batch, seq)`, `u32`; mask 1 = token, 0 = padding).
    /// The result keeps the graph, so a loss on it can be back-propagated. DistilBERT
    /// ignores `token_type_ids`; RoBERTa (one token type) uses zeros whatever is given.
    /// Padding positions get logits too (like transformers); readers mask them.
    pub fn forward(
        &self,
        input_ids: &Tensor,
        token_type_ids: &Tensor,
        attention_mask: &Tensor,
    ) -> candle_core::Result<(Tensor, Tensor)> {
        let types = match self.architecture {
            QaArchitecture::Bert => token_type_ids.clone(),
            _ => input_ids.zeros_like()?,
        };
        let hidden = self.encoder.forward(input_ids, &types, attention_mask)?;
        let logits = self.qa_outputs.forward(&hidden)?;
        let start = logits.i((.., .., 0))?.contiguous()?;
        let end = logits.i((.., .., 1))?.contiguous()?;
        Ok((start, end))
    }
}

/// transformers' span loss: `(CE(start_logits, start_positions) + CE(end_logits,
/// end_positions)) / 2`, each cross-entropy the mean over the batch. Logits are
/// `(batch, seq)`, positions `(batch,)` `u32` token indices (0, the `[CLS]` token, for
/// "no answer in this window"). A position outside `0..seq` is an error (transformers
/// would silently ignore it).
pub fn span_loss(
    start_logits: &Tensor,
    end_logits: &Tensor,
    start_positions: &Tensor,
    end_positions: &Tensor,
) -> candle_core::Result<Tensor> {
    let (_, seq) = start_logits.dims2()?;
    for p in [start_positions, end_positions] {
        let v = p.to_dtype(DType::U32)?.to_vec1::<u32>()?;
        if let Some(bad) = v.iter().find(|&&x| x as usize >= seq) {
            candle_core::bail!("span_loss: position {bad} is outside the sequence of {seq} tokens");
        }
    }
    let s = candle_nn::loss::cross_entropy(start_logits, &start_positions.to_dtype(DType::U32)?)?;
    let e = candle_nn::loss::cross_entropy(end_logits, &end_positions.to_dtype(DType::U32)?)?;
    (s + e)? / 2.0
}

/// Write a checkpoint folder in Hugging Face layout that [`QaModel::load`] (and
/// transformers' `AutoModelForQuestionAnswering`) reads: `model.safetensors` (every
/// variable of `varmap`, under transformers' names), `config.json` ([`QaConfig::qa_json`]:
/// `architectures` = the QA class) and a copy of `tokenizer`. Creates `dir` if needed.
pub fn save_pretrained(
    varmap: &VarMap,
    config: &QaConfig,
    tokenizer: &Path,
    dir: &Path,
) -> Result<()> {
    crate::encode::trainable::save_hf_layout(varmap, &config.qa_json(), tokenizer, dir)
}

/// A standard normal sample by Box–Muller (rand 0.8 has no normal distribution without
/// `rand_distr`).
pub(crate) mod rand_distr_normal {
    use rand::Rng;
    pub fn sample_normal<R: Rng>(rng: &mut R) -> f64 {
        let u1: f64 = rng.gen_range(f64::EPSILON..1.0);
        let u2: f64 = rng.gen();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn tiny_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/tiny_qa")
    }

    #[test]
    fn span_loss_by_hand_and_its_gradient() {
        let dev = Device::Cpu;
        let s =
            candle_core::Var::from_vec(vec![1f32, 2.0, 0.5, 0.0, -1.0, 3.0], (2, 3), &dev).unwrap();
        let e =
            candle_core::Var::from_vec(vec![0f32, 0.0, 1.0, 2.0, 2.0, 2.0], (2, 3), &dev).unwrap();
        let sp = Tensor::new(&[1u32, 2], &dev).unwrap();
        let ep = Tensor::new(&[2u32, 0], &dev).unwrap();
        let loss = span_loss(s.as_tensor(), e.as_tensor(), &sp, &ep).unwrap();
        // By hand: CE = logsumexp(row) − row[target], mean over the batch, then (s + e) / 2.
        let lse = |r: &[f32]| r.iter().map(|x| x.exp()).sum::<f32>().ln();
        let rows_s = [[1f32, 2.0, 0.5], [0.0, -1.0, 3.0]];
        let rows_e = [[0f32, 0.0, 1.0], [2.0, 2.0, 2.0]];
        let ce_s = ((lse(&rows_s[0]) - 2.0) + (lse(&rows_s[1]) - 3.0)) / 2.0;
        let ce_e = ((lse(&rows_e[0]) - 1.0) + (lse(&rows_e[1]) - 2.0)) / 2.0;
        let want = (ce_s + ce_e) / 2.0;
        let got = loss.to_scalar::<f32>().unwrap();
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        // Gradient: (softmax − one-hot) / (2 · batch), against candle's backward pass.
        let grads = loss.backward().unwrap();
        let g = grads.get(s.as_tensor()).unwrap().to_vec2::<f32>().unwrap();
        for (r, t) in [(0usize, 1usize), (1, 2)] {
            let z: f32 = rows_s[r].iter().map(|x| x.exp()).sum();
            for c in 0..3 {
                let want = (rows_s[r][c].exp() / z - (c == t) as u8 as f32) / 4.0;
                assert!((g[r][c] - want).abs() < 1e-6, "d/ds[{r}][{c}]");
            }
        }
        // A position outside the sequence is an error, not a silent skip.
        let bad = Tensor::new(&[3u32, 0], &dev).unwrap();
        assert!(span_loss(s.as_tensor(), e.as_tensor(), &bad, &ep).is_err());
    }

    /// The tiny QA checkpoint as a sentence-transformers-style base encoder: no `bert.`
    /// prefix, no `qa_outputs`.
    fn write_base(dir: &Path) -> HashMap<String, Tensor> {
        let t = candle_core::safetensors::load(tiny_dir().join("model.safetensors"), &Device::Cpu)
            .unwrap();
        let base: HashMap<String, Tensor> = t
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("bert.").map(|k| (k.to_string(), v.clone())))
            .collect();
        candle_core::safetensors::save(&base, dir.join("model.safetensors")).unwrap();
        let mut cfg: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(tiny_dir().join("config.json")).unwrap())
                .unwrap();
        cfg["architectures"] = serde_json::json!(["BertModel"]);
        std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
        t
    }

    #[test]
    fn base_encoder_gets_a_seeded_transformers_style_head() {
        let d = tempfile::tempdir().unwrap();
        let full = write_base(d.path());
        // A base config is not a QA checkpoint …
        let e = QaConfig::from_file(&d.path().join("config.json"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("BertModel") && e.contains("architectures"),
            "{e}"
        );
        // … nor are its weights (no head).
        let config = QaConfig::from_base_file(&d.path().join("config.json")).unwrap();
        let e = QaModel::load_with(&config, &d.path().join("model.safetensors"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("qa_outputs.weight"), "{e}");
        let (vm1, _) = QaModel::trainable(&config, &d.path().join("model.safetensors"), 3).unwrap();
        let (vm2, _) = QaModel::trainable(&config, &d.path().join("model.safetensors"), 3).unwrap();
        let (vm3, _) = QaModel::trainable(&config, &d.path().join("model.safetensors"), 4).unwrap();
        let get = |vm: &VarMap, k: &str| -> Vec<f32> {
            vm.data().lock().unwrap()[k]
                .as_tensor()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap()
        };
        let w1 = get(&vm1, "qa_outputs.weight");
        assert_eq!(w1, get(&vm2, "qa_outputs.weight"));
        assert_ne!(w1, get(&vm3, "qa_outputs.weight"));
        assert!(get(&vm1, "qa_outputs.bias").iter().all(|&b| b == 0.0));
        let sd = (w1.iter().map(|x| x * x).sum::<f32>() / w1.len() as f32).sqrt();
        assert!(
            (sd - 0.2).abs() < 0.06,
            "std {sd} for initializer_range 0.2"
        );
        // The encoder weights are the checkpoint's, under transformers' names.
        let k = "bert.encoder.layer.1.output.dense.weight";
        let want: Vec<f32> = full[k].flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(get(&vm1, k), want);
        assert_eq!(vm1.all_vars().len(), full.len());
    }

    #[test]
    fn missing_or_misshaped_tensors_are_named() {
        let d = tempfile::tempdir().unwrap();
        let mut t = write_base(d.path());
        let config = QaConfig::from_base_file(&d.path().join("config.json")).unwrap();
        let w = d.path().join("model.safetensors");
        let base: HashMap<String, Tensor> = t
            .drain()
            .filter(|(k, _)| k != "bert.encoder.layer.0.attention.self.key.bias")
            .collect();
        candle_core::safetensors::save(&base, &w).unwrap();
        let e = QaModel::trainable(&config, &w, 0)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("encoder.layer.0.attention.self.key.bias"), "{e}");
        assert!(e.contains("model.safetensors"), "{e}");
        let mut base = base;
        base.insert(
            "bert.encoder.layer.0.attention.self.key.bias".into(),
            Tensor::zeros(5, DType::F32, &Device::Cpu).unwrap(),
        );
        candle_core::safetensors::save(&base, &w).unwrap();
        let e = QaModel::trainable(&config, &w, 0)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("shape") && e.contains("key.bias"), "{e}");
    }
}
