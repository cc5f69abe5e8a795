//! Extractive QA training on the reader's own model: [`QaModel`] (the differentiable
//! [`BertEncoder`](super::encoder::BertEncoder) with transformers' `qa_outputs`) is the
//! [`Trainable`]; training features are the reader's windows
//! ([`make_windows`](crate::read::extractive::make_windows)) with start/end targets from
//! [`Window::token_span`] (`[CLS]` when the window does not hold the whole answer), so
//! training and reading cut contexts the same way. Checkpoints are written with
//! [`save_pretrained`] in the Hugging Face layout and read back by [`QaModel::load`] or
//! an [`ExtractiveReader`](crate::read::extractive::ExtractiveReader).

use super::{candle_err, TrainData, Trainable};
use crate::read::extractive::{
    make_windows, save_pretrained, span_loss, QaConfig, QaModel, Window, WindowParams,
};
use crate::{Error, Result};
use candle_core::{Device, Tensor};
use candle_nn::VarMap;
use serde::{Deserialize, Serialize};
use std::path::Path;
use tokenizers::Tokenizer;

impl Trainable for QaModel {
    type Batch = QaBatch;
    fn loss(&self, b: &QaBatch) -> candle_core::Result<Tensor> {
        let (s, e) = self.forward(&b.ids, &b.type_ids, &b.mask)?;
        span_loss(&s, &e, &b.start, &b.end)
    }
}

impl Trainable for QaTrainModel {
    type Batch = QaBatch;
    fn loss(&self, b: &QaBatch) -> candle_core::Result<Tensor> {
        self.model.loss(b)
    }
}

/// A model being trained: its variables, the model over them and its config.
pub struct QaTrainModel {
    /// The trainable variables (transformers' names, as saved).
    pub vars: VarMap,
    /// The model built over `vars`.
    pub model: QaModel,
    /// The config (written back by [`QaTrainModel::save_pretrained`]).
    pub config: QaConfig,
}

impl QaTrainModel {
    /// Start from a base encoder or a QA checkpoint (`config.json` and
    /// `model.safetensors`; see [`QaModel::trainable`]): a missing `qa_outputs` is
    /// initialised from `seed` as transformers does.
    pub fn from_checkpoint(config_path: &Path, model_path: &Path, seed: u64) -> Result<Self> {
        let config = QaConfig::from_base_file(config_path)?;
        let (vars, model) = QaModel::trainable(&config, model_path, seed)?;
        Ok(QaTrainModel {
            vars,
            model,
            config,
        })
    }

    /// Save in the Hugging Face layout ([`save_pretrained`]): `model.safetensors`,
    /// `config.json` with the QA class in `architectures`, a copy of `tokenizer_json`.
    pub fn save_pretrained(&self, dir: &Path, tokenizer_json: &Path) -> Result<()> {
        save_pretrained(&self.vars, &self.config, tokenizer_json, dir)
    }
}

/// One training window with its targets.
#[derive(Debug, Clone, PartialEq)]
pub struct Feature {
    /// Index of the example it comes from.
    pub example: usize,
    /// The window (token ids, types, character sources of the context tokens).
    pub window: Window,
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

/// Cut every example into the reader's windows ([`make_windows`], one segment) and set
/// each window's targets: the answer's first and last token when the window holds the
/// whole answer, `[CLS]` otherwise (and for unanswerable questions). Errors name the
/// example: an answer range that is not on character boundaries of its context, a
/// question that leaves no room for context in a window.
pub fn make_features(
    tok: &Tokenizer,
    examples: &[SpanExample],
    p: &WindowParams,
) -> Result<Vec<Feature>> {
    let mut out = Vec::new();
    for (ei, ex) in examples.iter().enumerate() {
        let chars = match ex.answer {
            Some((a, b)) => {
                if a > b || !ex.context.is_char_boundary(a) || !ex.context.is_char_boundary(b) {
                    return Err(Error::param(
                        "answer",
                        format!(
                            "example `{}`: byte range {a}..{b} is not a span of its context",
                            ex.id
                        ),
                    ));
                }
                let s = ex.context[..a].chars().count();
                Some((s, s + ex.context[a..b].chars().count()))
            }
            None => None,
        };
        let windows = make_windows(tok, &ex.question, &[ex.context.as_str()], "", p)
            .map_err(|e| Error::param("question", format!("example `{}`: {e}", ex.id)))?;
        for w in windows {
            let (s, e) = chars
                .and_then(|(s, e)| w.token_span(0, s, e))
                .unwrap_or((w.cls_index, w.cls_index));
            out.push(Feature {
                example: ei,
                start: s as u32,
                end: e as u32,
                window: w,
            });
        }
    }
    Ok(out)
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
    let len = feats.iter().map(|f| f.window.len()).max().unwrap_or(0);
    let n = feats.len();
    let mut ids = vec![0u32; n * len];
    let mut ty = vec![0u32; n * len];
    let mut mask = vec![0u32; n * len];
    for (r, f) in feats.iter().enumerate() {
        let w = &f.window;
        ids[r * len..r * len + w.len()].copy_from_slice(&w.input_ids);
        ty[r * len..r * len + w.len()].copy_from_slice(&w.type_ids);
        mask[r * len..r * len + w.len()].fill(1);
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
        self.0[i].window.len()
    }
    fn collate(&self, idx: &[usize]) -> Result<QaBatch> {
        let f: Vec<&Feature> = idx.iter().map(|&i| &self.0[i]).collect();
        collate(&f)
    }
}
