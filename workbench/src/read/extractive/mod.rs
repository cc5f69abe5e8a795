//! Extractive reading (feature `dense`): a question-answering model reads the question and
//! the passages and points at the answer span.
//!
//! | module | concept |
//! |---|---|
//! | [`model`] | [`QaModel`]: start/end logits over BERT / DistilBERT / RoBERTa, loading, a trainable copy, [`span_loss`], [`save_pretrained`] |
//! | [`spans`] | [`make_windows`] (sliding windows with a document stride) and [`decode`] (n-best spans, null score) |
//! | (this module) | [`ExtractiveReader`]: the [`Reader`] over both, multi-passage reading ([`MultiPassage`]) |
//!
//! ```no_run
//! # fn main() -> workbench::Result<()> {
//! use workbench::read::extractive::{ExtractiveReader, ReaderParams};
//! use workbench::read::{Context, Reader};
//! let mut reader = ExtractiveReader::load_dir("data/models/minilm-squad", ReaderParams::default())?;
//! let a = reader.read("Who wrote Hamlet?", &[Context::new("p1", "Hamlet is a play by Shakespeare.")])?;
//! println!("{} ({:?})", a.text, a.evidence);
//! # Ok(()) }
//! ```

pub mod model;
pub mod spans;

pub(crate) use model::sample_normal;
pub use model::{save_pretrained, span_loss, QaArchitecture, QaConfig, QaFiles, QaModel};
pub use spans::{
    char_slice, decode, make_windows, DecodeParams, Decoded, Span, TokenSource, Window,
    WindowParams,
};

use super::{check_question, Answer, Context, Evidence, Reader, Usage};
use crate::assets::Assets;
use crate::encode::fast_bert::{FastBert, Threads};
use crate::encode::Backend;
use crate::{Error, Result};
use candle_core::{Device, Tensor};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tokenizers::Tokenizer;

/// Start and end logits of each window (row `i` as long as window `i`).
pub type WindowLogits = (Vec<Vec<f32>>, Vec<Vec<f32>>);

/// How several passages are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MultiPassage {
    /// Report 000: the passages joined (rank order, [`ReaderParams::separator`]) into one
    /// context, read in windows; the answer is the best span of that context, mapped back
    /// to its passage. Spans never cross from one passage into the next.
    #[default]
    Concatenate,
    /// Each passage read on its own; the answer is the best span over all passages by raw
    /// `start + end` logits (comparable across passages: no per-passage softmax).
    BestPerPassage,
}

/// Parameters of an [`ExtractiveReader`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReaderParams {
    /// Windows.
    pub window: WindowParams,
    /// Span decoding and abstention.
    pub decode: DecodeParams,
    /// Multi-passage reading.
    pub mode: MultiPassage,
    /// Separator between concatenated passages (default `"\n"`).
    pub separator: String,
    /// Windows per forward pass (default 8; padded to the longest with an attention mask
    /// on the candle path, packed without padding on the fused one).
    pub batch_size: usize,
    /// Forward pass for inference. [`Backend::Fused`] (default): the workbench's fused,
    /// padding-free BERT pass ([`crate::encode::fast_bert`]) with the QA head applied by
    /// hand, for `BertForQuestionAnswering` checkpoints loaded from files; everything else
    /// (DistilBERT, RoBERTa, a model handed to [`ExtractiveReader::new`]) runs the candle
    /// [`QaModel`]. [`Backend::Candle`]: always the candle model.
    #[serde(default)]
    pub backend: Backend,
}

impl Default for ReaderParams {
    fn default() -> Self {
        ReaderParams {
            window: WindowParams::default(),
            decode: DecodeParams::default(),
            mode: MultiPassage::Concatenate,
            separator: "\n".into(),
            batch_size: 8,
            backend: Backend::Fused,
        }
    }
}

/// An extractive [`Reader`]: a [`QaModel`] with its tokenizer. See the module docs.
pub struct ExtractiveReader {
    name: String,
    model: QaModel,
    config: QaConfig,
    tokenizer: Tokenizer,
    tokenizer_path: PathBuf,
    params: ReaderParams,
    pad_id: u32,
    fused: Option<FusedQa>,
}

/// The fused BERT pass and the QA head as plain numbers.
struct FusedQa {
    bert: FastBert,
    /// `qa_outputs.weight`, `(2, hidden)` row-major.
    w: Vec<f32>,
    /// `qa_outputs.bias`.
    b: [f32; 2],
}

impl FusedQa {
    fn load(config: &QaConfig, weights: &Path) -> Result<Self> {
        let cfg = crate::encode::BertConfig::from_file(&config.path)?;
        // SAFETY: a read-only checkpoint file nothing rewrites while it is mapped.
        let vb = unsafe {
            candle_nn::VarBuilder::from_mmaped_safetensors(
                &[weights],
                candle_core::DType::F32,
                &Device::Cpu,
            )
        }
        .map_err(|e| Error::bad_input(weights, format!("not a readable safetensors file: {e}")))?;
        let err = |e: candle_core::Error| Error::bad_input(weights, e.to_string());
        let bert = FastBert::load(vb.pp("bert"), cfg.shape()).map_err(err)?;
        let h = config.hidden_size;
        let w: Vec<f32> = vb
            .get((2, h), "qa_outputs.weight")
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1())
            .map_err(err)?;
        let b: Vec<f32> = vb
            .get(2, "qa_outputs.bias")
            .and_then(|t| t.to_vec1())
            .map_err(err)?;
        Ok(FusedQa {
            bert,
            w,
            b: [b[0], b[1]],
        })
    }

    fn logits(&self, batch: &[Window]) -> candle_core::Result<WindowLogits> {
        let seqs: Vec<&[u32]> = batch.iter().map(|w| w.input_ids.as_slice()).collect();
        let types: Vec<&[u32]> = batch.iter().map(|w| w.type_ids.as_slice()).collect();
        let hidden = self
            .bert
            .forward_typed(&seqs, Some(&types), Threads::Pool)?;
        let h = self.w.len() / 2;
        let (ws, we) = self.w.split_at(h);
        let mut rows = hidden.chunks_exact(h);
        let mut starts = Vec::with_capacity(batch.len());
        let mut ends = Vec::with_capacity(batch.len());
        for w in batch {
            let (mut s, mut e) = (Vec::with_capacity(w.len()), Vec::with_capacity(w.len()));
            for x in rows.by_ref().take(w.len()) {
                s.push(self.b[0] + crate::encode::dot(ws, x));
                e.push(self.b[1] + crate::encode::dot(we, x));
            }
            starts.push(s);
            ends.push(e);
        }
        Ok((starts, ends))
    }
}

impl std::fmt::Debug for ExtractiveReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtractiveReader")
            .field("name", &self.name)
            .field("architecture", &self.config.architecture)
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

/// Load a tokenizer for reading: its own truncation and padding turned off (windows are
/// cut by [`make_windows`]).
pub fn load_tokenizer(path: &Path) -> Result<Tokenizer> {
    if !path.is_file() {
        return Err(Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "missing tokenizer file"),
        ));
    }
    let mut t = Tokenizer::from_file(path)
        .map_err(|e| Error::Tokenizer(format!("{}: {e}", path.display())))?;
    t.with_truncation(None)
        .map_err(|e| Error::Tokenizer(format!("{}: {e}", path.display())))?;
    t.with_padding(None);
    Ok(t)
}

impl ExtractiveReader {
    /// Load a QA checkpoint folder (`config.json`, `tokenizer.json`, `model.safetensors`);
    /// the reader's name is the folder name.
    pub fn load_dir(dir: impl AsRef<Path>, params: ReaderParams) -> Result<Self> {
        let dir = dir.as_ref();
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "extractive".into());
        Self::load_files(&name, &QaFiles::in_dir(dir), params)
    }

    /// Load a QA checkpoint asset of `data/assets.toml`; the reader's name is the asset name.
    pub fn load_asset(assets: &Assets, name: &str, params: ReaderParams) -> Result<Self> {
        Self::load_files(name, &QaFiles::from_asset(assets, name)?, params)
    }

    /// Load from explicit files.
    pub fn load_files(name: &str, files: &QaFiles, params: ReaderParams) -> Result<Self> {
        files.check_exist()?;
        let (model, config) = QaModel::load(files)?;
        let fused = (params.backend == Backend::Fused
            && config.architecture == QaArchitecture::Bert)
            .then(|| FusedQa::load(&config, &files.weights))
            .transpose()?;
        let mut reader = Self::new(name, model, config, &files.tokenizer, params)?;
        reader.fused = fused;
        Ok(reader)
    }

    /// Whether inference runs the fused BERT pass (see [`ReaderParams::backend`]): the
    /// checkpoint has one and the parameters ask for [`Backend::Fused`].
    pub fn is_fused(&self) -> bool {
        self.fused.is_some() && self.params.backend == Backend::Fused
    }

    /// A reader over an existing model (e.g. one being trained, for evaluation between
    /// epochs), with the tokenizer at `tokenizer`.
    pub fn new(
        name: &str,
        model: QaModel,
        config: QaConfig,
        tokenizer: &Path,
        params: ReaderParams,
    ) -> Result<Self> {
        if params.batch_size == 0 {
            return Err(Error::param("batch_size", "must be at least 1"));
        }
        if params.decode.n_best == 0 {
            return Err(Error::param("decode.n_best", "must be at least 1"));
        }
        if params.decode.max_answer_len == 0 {
            return Err(Error::param("decode.max_answer_len", "must be at least 1"));
        }
        if params.window.max_seq_len > config.max_positions || params.window.max_seq_len < 4 {
            return Err(Error::param(
                "window.max_seq_len",
                format!(
                    "{} is outside 4..={} (the position limit of {})",
                    params.window.max_seq_len,
                    config.max_positions,
                    config.path.display()
                ),
            ));
        }
        let tok = load_tokenizer(tokenizer)?;
        let pad_id = tok
            .get_padding()
            .map(|p| p.pad_id)
            .or_else(|| tok.token_to_id("[PAD]"))
            .or_else(|| tok.token_to_id("<pad>"))
            .unwrap_or(config.pad_token_id);
        Ok(ExtractiveReader {
            name: name.to_string(),
            model,
            config,
            tokenizer: tok,
            tokenizer_path: tokenizer.to_path_buf(),
            params,
            pad_id,
            fused: None,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &ReaderParams {
        &self.params
    }

    /// Change the parameters that do not affect loading (decode, mode, separator, windows
    /// within the model's position limit).
    pub fn set_params(&mut self, params: ReaderParams) -> Result<()> {
        if params.window.max_seq_len > self.config.max_positions {
            return Err(Error::param(
                "window.max_seq_len",
                format!(
                    "{} exceeds the model's {}",
                    params.window.max_seq_len, self.config.max_positions
                ),
            ));
        }
        self.params = params;
        Ok(())
    }

    /// The model.
    pub fn model(&self) -> &QaModel {
        &self.model
    }

    /// The model's configuration.
    pub fn config(&self) -> &QaConfig {
        &self.config
    }

    /// The tokenizer (truncation and padding off).
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Path of `tokenizer.json`.
    pub fn tokenizer_path(&self) -> &Path {
        &self.tokenizer_path
    }

    /// Windows of `question` over the context made of `segments`.
    pub fn windows(&self, question: &str, segments: &[&str]) -> Result<Vec<Window>> {
        make_windows(
            &self.tokenizer,
            question,
            segments,
            &self.params.separator,
            &self.params.window,
        )
    }

    /// Start and end logits of each window, in batches of `batch_size` padded windows.
    /// Row `i` has `windows[i].len()` entries.
    pub fn logits(&self, windows: &[Window]) -> Result<WindowLogits> {
        let mut starts = Vec::with_capacity(windows.len());
        let mut ends = Vec::with_capacity(windows.len());
        for chunk in windows.chunks(self.params.batch_size) {
            let (s, e) = self.forward_batch(chunk)?;
            starts.extend(s);
            ends.extend(e);
        }
        Ok((starts, ends))
    }

    fn forward_batch(&self, batch: &[Window]) -> Result<WindowLogits> {
        let weights = self.config.path.with_file_name("model.safetensors");
        let err =
            |e: candle_core::Error| Error::bad_input(&weights, format!("QA forward pass: {e}"));
        let n = batch.len();
        let len = batch.iter().map(|w| w.len()).max().unwrap_or(0);
        if n == 0 || len == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        if let Some(f) = &self.fused {
            if self.params.backend == Backend::Fused {
                return f.logits(batch).map_err(err);
            }
        }
        let mut ids = vec![self.pad_id; n * len];
        let mut types = vec![0u32; n * len];
        let mut mask = vec![0u32; n * len];
        for (r, w) in batch.iter().enumerate() {
            ids[r * len..r * len + w.len()].copy_from_slice(&w.input_ids);
            types[r * len..r * len + w.len()].copy_from_slice(&w.type_ids);
            mask[r * len..r * len + w.len()].fill(1);
        }
        let t = |v: Vec<u32>| Tensor::from_vec(v, (n, len), &Device::Cpu).map_err(err);
        let (ids, types, mask) = (t(ids)?, t(types)?, t(mask)?);
        let (s, e) = self.model.forward(&ids, &types, &mask).map_err(err)?;
        let mut s: Vec<Vec<f32>> = s.to_vec2().map_err(err)?;
        let mut e: Vec<Vec<f32>> = e.to_vec2().map_err(err)?;
        for (r, w) in batch.iter().enumerate() {
            s[r].truncate(w.len());
            e[r].truncate(w.len());
        }
        Ok((s, e))
    }

    /// Read and return the decoded spans (n-best, null score) with segment = passage index,
    /// and the usage. [`Reader::read`] is this plus the answer text and evidence.
    pub fn read_spans(&self, question: &str, passages: &[Context]) -> Result<(Decoded, Usage)> {
        let question = check_question(question)?;
        let t0 = Instant::now();
        let texts: Vec<&str> = passages.iter().map(|p| p.text.as_str()).collect();
        let windows: Vec<Window> = match self.params.mode {
            MultiPassage::Concatenate => self.windows(question, &texts)?,
            MultiPassage::BestPerPassage => {
                let mut all = Vec::new();
                for (i, t) in texts.iter().enumerate() {
                    for mut w in self.windows(question, &[t])? {
                        w.sources.iter_mut().for_each(|s| s.segment = i);
                        all.push(w);
                    }
                }
                all
            }
        };
        let (st, en) = self.logits(&windows)?;
        let decoded = decode(&windows, &st, &en, &self.params.decode)?;
        let usage = Usage {
            prompt_tokens: windows.iter().map(|w| w.len()).sum(),
            generated_tokens: 0,
            prefill_secs: t0.elapsed().as_secs_f64(),
            decode_secs: 0.0,
            decode_steps: 0,
        };
        Ok((decoded, usage))
    }
}

impl Reader for ExtractiveReader {
    fn name(&self) -> &str {
        &self.name
    }

    /// The best span as the answer, its passage id and character offsets as evidence, its
    /// raw score (`start + end` logits) as [`Answer::score`]. A null answer (threshold, or
    /// no context token at all) is an abstention with empty text. No passage is dropped:
    /// windows cover any length.
    fn read(&mut self, question: &str, passages: &[Context]) -> Result<Answer> {
        let (decoded, usage) = self.read_spans(question, passages)?;
        let passage_ids = passages.iter().map(|p| p.id.clone()).collect();
        let (text, evidence, score) = match decoded.answer() {
            Some(s) => {
                let p = &passages[s.segment];
                (
                    char_slice(&p.text, s.start_char, s.end_char).to_string(),
                    Some(Evidence {
                        passage_id: p.id.clone(),
                        start_char: s.start_char,
                        end_char: s.end_char,
                    }),
                    Some(s.score),
                )
            }
            None => (String::new(), None, decoded.nbest.first().map(|s| s.score)),
        };
        Ok(Answer {
            text,
            abstained: decoded.answer().is_none(),
            passage_ids,
            dropped: Vec::new(),
            evidence,
            score,
            usage,
        })
    }
}

/// `params` with windows no longer than the model of `config` allows (a small model's
/// position limit below the default 384 tokens: the window is cut to it, the stride to a
/// quarter of it at most).
pub fn fit_window(mut params: ReaderParams, config: &Path) -> Result<ReaderParams> {
    let limit = QaConfig::from_file(config)?.max_positions;
    let w = &mut params.window;
    if w.max_seq_len > limit {
        w.max_seq_len = limit;
        w.doc_stride = w.doc_stride.min(limit / 4);
    }
    Ok(params)
}
