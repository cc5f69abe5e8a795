//! [`BertEncoder`]: a sentence-transformers BERT checkpoint (all-MiniLM-L6-v2 in
//! report 000) as a sentence encoder and a token encoder.
//!
//! Sentence vectors follow sentence-transformers exactly: tokenise (WordPiece,
//! `[CLS] … [SEP]`, truncated to `max_length` tokens), run BERT, **mean-pool the
//! last hidden states over the attention mask**, then **L2-normalise**. Token
//! vectors ([`BertEncoder::token_embeddings`]) are the last hidden states of
//! the word-piece tokens, L2-normalised, for late-interaction (ColBERT-style)
//! scoring.
//!
//! Speed: inputs are sorted by token length before batching (as
//! sentence-transformers does) and each batch runs through
//! [`FastBert`](super::fast_bert::FastBert), which packs the tokens of a batch
//! without any padding. [`Backend::Candle`] runs candle-transformers' own
//! `BertModel` on padded batches instead (the reference the tests compare with).

use super::candle_err_at;
use super::fast_bert::{Activation, FastBert, Shape, Threads};
use crate::assets::Assets;
use crate::{Error, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

/// Which forward pass runs the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// The fused, padding-free pass of [`super::fast_bert`] (default; fastest on CPU).
    #[default]
    Fused,
    /// `candle_transformers::models::bert::BertModel` on padded batches (the reference).
    Candle,
}

/// Parameters of [`BertEncoder`]. Part of the embedding-cache key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncoderParams {
    /// Texts per batch (batches are cut from the length-sorted inputs; each
    /// runs in forward passes of at most [`TOKENS_PER_PASS`] tokens, 2048 with
    /// [`Backend::Candle`]). Default 64.
    pub batch_size: usize,
    /// Longest input in tokens, `[CLS]` and `[SEP]` included; longer texts are
    /// truncated. Default 256: `max_seq_length` of all-MiniLM-L6-v2's
    /// `sentence_bert_config.json` (its `tokenizer.json` says 128, which
    /// sentence-transformers overrides). Must not exceed the model's
    /// `max_position_embeddings`.
    pub max_length: usize,
    /// L2-normalise sentence vectors (sentence-transformers' `Normalize`
    /// module). Default `true`.
    pub normalize: bool,
    /// Threads for tokenising and the forward pass (a private rayon pool, which
    /// also runs the matrix products); `None` uses the global rayon pool
    /// (`RAYON_NUM_THREADS`, default: one per CPU). With [`Backend::Candle`],
    /// candle's own element-wise pool (`CANDLE_NUM_THREADS`) is not affected.
    /// Not part of the cache key, since it does not change the vectors.
    #[serde(skip)]
    pub threads: Option<usize>,
    /// Forward pass. Default [`Backend::Fused`].
    #[serde(default)]
    pub backend: Backend,
}

impl Default for EncoderParams {
    fn default() -> Self {
        EncoderParams {
            batch_size: 64,
            max_length: 256,
            normalize: true,
            threads: None,
            backend: Backend::Fused,
        }
    }
}

impl EncoderParams {
    /// Set the batch size.
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch_size = n;
        self
    }
    /// Set the longest input in tokens.
    pub fn max_length(mut self, n: usize) -> Self {
        self.max_length = n;
        self
    }
    /// Normalise sentence vectors or not.
    pub fn normalize(mut self, yes: bool) -> Self {
        self.normalize = yes;
        self
    }
    /// Use a private pool of `n` threads.
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n);
        self
    }
    /// Pick the forward pass.
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }
    /// Reject values that cannot work (before any model is loaded).
    pub fn check(&self) -> Result<()> {
        if self.batch_size == 0 {
            return Err(Error::param("batch_size", "must be at least 1"));
        }
        if self.max_length < 2 {
            return Err(Error::param(
                "max_length",
                format!(
                    "{} leaves no room for [CLS] and [SEP]; use at least 2",
                    self.max_length
                ),
            ));
        }
        if self.threads == Some(0) {
            return Err(Error::param(
                "threads",
                "must be at least 1 (or None for the global pool)",
            ));
        }
        Ok(())
    }
}

/// A BERT `config.json`, mirroring the Hugging Face fields the encoder uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BertConfig {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden size (the embedding dimension).
    pub hidden_size: usize,
    /// Transformer layers.
    pub num_hidden_layers: usize,
    /// Attention heads.
    pub num_attention_heads: usize,
    /// Feed-forward inner size.
    pub intermediate_size: usize,
    /// `"gelu"`, `"gelu_new"`, `"gelu_pytorch_tanh"` or `"relu"`.
    #[serde(default = "default_act")]
    pub hidden_act: String,
    /// Dropout (unused at inference).
    #[serde(default)]
    pub hidden_dropout_prob: f64,
    /// Largest number of positions.
    #[serde(default = "default_max_pos")]
    pub max_position_embeddings: usize,
    /// Token-type vocabulary size.
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    /// Initialiser range (unused at inference).
    #[serde(default)]
    pub initializer_range: f64,
    /// LayerNorm epsilon.
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    /// Padding token id.
    #[serde(default)]
    pub pad_token_id: usize,
    /// Only `"absolute"` is supported.
    #[serde(default = "default_pos_type")]
    pub position_embedding_type: String,
    /// `"bert"` for BERT checkpoints.
    #[serde(default)]
    pub model_type: Option<String>,
}

fn default_act() -> String {
    "gelu".into()
}
fn default_max_pos() -> usize {
    512
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}
fn default_pos_type() -> String {
    "absolute".into()
}

impl BertConfig {
    /// Read and validate a `config.json`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let c: BertConfig =
            serde_json::from_str(&text).map_err(|e| Error::bad_input(path, e.to_string()))?;
        if let Some(t) = &c.model_type {
            if t != "bert" {
                return Err(Error::bad_input(
                    path,
                    format!("model_type `{t}` is not a BERT model"),
                ));
            }
        }
        if c.position_embedding_type != "absolute" {
            return Err(Error::bad_input(
                path,
                format!(
                    "position_embedding_type `{}` is not supported (only `absolute`)",
                    c.position_embedding_type
                ),
            ));
        }
        if c.num_attention_heads == 0
            || c.hidden_size / c.num_attention_heads * c.num_attention_heads != c.hidden_size
        {
            return Err(Error::bad_input(
                path,
                format!(
                    "hidden_size {} is not a multiple of num_attention_heads {}",
                    c.hidden_size, c.num_attention_heads
                ),
            ));
        }
        c.activation()
            .map_err(|m| Error::bad_input(path, m))
            .map(|_| c)
    }

    fn activation(&self) -> std::result::Result<Activation, String> {
        match self.hidden_act.as_str() {
            "gelu" => Ok(Activation::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" => Ok(Activation::GeluTanh),
            "relu" => Ok(Activation::Relu),
            other => Err(format!("hidden_act `{other}` is not supported")),
        }
    }

    pub(crate) fn shape(&self) -> Shape {
        Shape {
            hidden: self.hidden_size,
            heads: self.num_attention_heads,
            intermediate: self.intermediate_size,
            layers: self.num_hidden_layers,
            vocab: self.vocab_size,
            max_positions: self.max_position_embeddings,
            type_vocab: self.type_vocab_size,
            eps: self.layer_norm_eps as f32,
            activation: self.activation().unwrap_or(Activation::Gelu),
        }
    }

    pub(crate) fn to_candle(&self) -> candle_transformers::models::bert::Config {
        use candle_transformers::models::bert::{Config, HiddenAct};
        Config {
            vocab_size: self.vocab_size,
            hidden_size: self.hidden_size,
            num_hidden_layers: self.num_hidden_layers,
            num_attention_heads: self.num_attention_heads,
            intermediate_size: self.intermediate_size,
            hidden_act: match self.activation() {
                Ok(Activation::GeluTanh) => HiddenAct::GeluApproximate,
                Ok(Activation::Relu) => HiddenAct::Relu,
                _ => HiddenAct::Gelu,
            },
            hidden_dropout_prob: self.hidden_dropout_prob,
            max_position_embeddings: self.max_position_embeddings,
            type_vocab_size: self.type_vocab_size,
            initializer_range: self.initializer_range,
            layer_norm_eps: self.layer_norm_eps,
            pad_token_id: self.pad_token_id,
            position_embedding_type: Default::default(),
            use_cache: false,
            classifier_dropout: None,
            model_type: self.model_type.clone(),
        }
    }
}

/// Per-token vectors of one text (special tokens and padding excluded).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenEmbeddings {
    /// Word-piece tokens as the tokenizer prints them (`##` marks a continuation).
    pub tokens: Vec<String>,
    /// Byte offsets into the text: `&text[s..e]` is the source of `tokens[i]`.
    pub offsets: Vec<(usize, usize)>,
    /// Last hidden state of each token, L2-normalised.
    pub vectors: Vec<Vec<f32>>,
}

enum Model {
    Fused(FastBert),
    Candle(candle_transformers::models::bert::BertModel),
}

/// A sentence-transformers BERT bi-encoder loaded from an asset. See the module docs.
pub struct BertEncoder {
    asset: String,
    model_sha256: String,
    model_path: PathBuf,
    config: BertConfig,
    params: EncoderParams,
    tokenizer: Tokenizer,
    model: Model,
    pool: Option<rayon::ThreadPool>,
}

impl std::fmt::Debug for BertEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BertEncoder")
            .field("asset", &self.asset)
            .field("model_sha256", &self.model_sha256)
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

/// A text's index and its vector.
type Indexed = (usize, Vec<f32>);

/// Texts above this count get a progress bar.
const PROGRESS_MIN: usize = 256;

/// Most tokens in one forward pass (both backends). A batch is split into
/// passes of at most this many tokens (at least one text each): the largest
/// activation, `tokens × intermediate_size` floats, then stays around 3 MB for
/// MiniLM, close to a core's L2 cache, and a long input gives many passes to
/// share out between threads. Measured on the `bench_embed` texts (2 threads):
/// 512 was as fast as or slightly faster than 256, 1024 and 2048 (within 3 %).
/// Vectors do not depend on how texts are grouped.
pub const TOKENS_PER_PASS: usize = 512;

/// [`TOKENS_PER_PASS`] for [`Backend::Candle`], whose padded batches and
/// per-step thread splits want larger passes.
const CANDLE_TOKENS_PER_PASS: usize = 2048;

/// Split `items` into consecutive groups whose total `len` stays within
/// `budget` (a single item longer than the budget forms its own group).
fn token_budget<'a>(
    items: &'a [usize],
    len: impl Fn(usize) -> usize + 'a,
    budget: usize,
) -> impl Iterator<Item = &'a [usize]> + 'a {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= items.len() {
            return None;
        }
        let mut end = start;
        let mut total = 0;
        while end < items.len() && (end == start || total + len(items[end]) <= budget) {
            total += len(items[end]);
            end += 1;
        }
        let group = &items[start..end];
        start = end;
        Some(group)
    })
}

impl BertEncoder {
    /// Load the asset `name` (files `config.json`, `tokenizer.json`,
    /// `model.safetensors`, optionally `1_Pooling/config.json`), each verified
    /// against its sha256. A missing asset is [`Error::AssetMissing`], naming
    /// the command that fetches it.
    pub fn load(assets: &Assets, name: &str, params: EncoderParams) -> Result<Self> {
        params.check()?;
        let spec = assets.spec(name)?;
        let model_sha256 = spec
            .files
            .get("model.safetensors")
            .ok_or_else(|| {
                Error::bad_input(
                    &assets.manifest_path,
                    format!("asset `{name}` has no model.safetensors"),
                )
            })?
            .sha256
            .clone()
            .ok_or_else(|| {
                Error::bad_input(
                    &assets.manifest_path,
                    format!("asset `{name}` pins no sha256 for model.safetensors"),
                )
            })?;
        let has_pooling = spec.files.contains_key("1_Pooling/config.json");
        let config_path = assets.resolve(name, "config.json")?;
        let tokenizer_path = assets.resolve(name, "tokenizer.json")?;
        let model_path = assets.resolve(name, "model.safetensors")?;
        if has_pooling {
            check_pooling(&assets.resolve(name, "1_Pooling/config.json")?)?;
        }
        Self::from_files(
            name,
            &config_path,
            &tokenizer_path,
            &model_path,
            model_sha256,
            params,
        )
    }

    /// Load a model a config names ([`crate::assets::ModelRef`]): an asset of `assets`, or
    /// a folder (relative to the project root) holding `config.json`, `tokenizer.json` and
    /// `model.safetensors` (a sentence-transformers or Hugging Face BERT layout; its
    /// `1_Pooling/config.json`, when present, must be mean pooling). The folder's model
    /// file is hashed for the embedding cache key.
    pub fn load_named(assets: &Assets, model: &str, params: EncoderParams) -> Result<Self> {
        match crate::assets::ModelRef::parse(model) {
            crate::assets::ModelRef::Path(p) => {
                let dir = crate::paths::project_root()
                    .map(|r| r.join(p))
                    .unwrap_or_else(|_| PathBuf::from(p));
                Self::from_dir(&dir, params)
            }
            crate::assets::ModelRef::Hub(_) => Err(Error::param(
                "model",
                format!("`{model}` names one file of a hub repository; an encoder is a folder: name it by an asset or a folder path"),
            )),
            _ => Self::load(assets, model, params),
        }
    }

    /// Load a model folder (see [`BertEncoder::load_named`]); it is named by the folder.
    pub fn from_dir(dir: &Path, params: EncoderParams) -> Result<Self> {
        for f in ["config.json", "tokenizer.json", "model.safetensors"] {
            if !dir.join(f).is_file() {
                return Err(Error::bad_input(
                    dir,
                    format!("not an encoder folder: `{f}` is missing (needs config.json, tokenizer.json, model.safetensors)"),
                ));
            }
        }
        let pooling = dir.join("1_Pooling/config.json");
        if pooling.is_file() {
            check_pooling(&pooling)?;
        }
        let model = dir.join("model.safetensors");
        let sha = crate::assets::sha256_file(&model)?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| dir.display().to_string());
        Self::from_files(
            &name,
            &dir.join("config.json"),
            &dir.join("tokenizer.json"),
            &model,
            sha,
            params,
        )
    }

    /// Load from explicit files (no manifest); `model_sha256` is recorded as given.
    pub fn from_files(
        name: &str,
        config_path: &Path,
        tokenizer_path: &Path,
        model_path: &Path,
        model_sha256: String,
        params: EncoderParams,
    ) -> Result<Self> {
        params.check()?;
        let config = BertConfig::from_file(config_path)?;
        if params.max_length > config.max_position_embeddings {
            return Err(Error::param(
                "max_length",
                format!(
                    "{} exceeds the model's max_position_embeddings {} ({})",
                    params.max_length,
                    config.max_position_embeddings,
                    config_path.display()
                ),
            ));
        }
        let mut tokenizer = Tokenizer::from_file(tokenizer_path)
            .map_err(|e| Error::Tokenizer(format!("{}: {e}", tokenizer_path.display())))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length: params.max_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(|e| Error::Tokenizer(format!("{}: {e}", tokenizer_path.display())))?;
        tokenizer.with_padding(None);

        // SAFETY: the file is a verified, read-only asset in the cache; nothing
        // rewrites it while it is mapped.
        let vb =
            unsafe { VarBuilder::from_mmaped_safetensors(&[model_path], DType::F32, &Device::Cpu) }
                .map_err(|e| candle_err_at(model_path, "cannot map the safetensors file", e))?;
        // sentence-transformers checkpoints have no `bert.` prefix; HF `BertModel`
        // exports and fine-tuned heads do.
        let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") {
            vb.pp("bert")
        } else if vb.contains_tensor("embeddings.word_embeddings.weight") {
            vb
        } else {
            return Err(Error::bad_input(
                model_path,
                "no `embeddings.word_embeddings.weight` (nor `bert.…`): not a BERT checkpoint",
            ));
        };
        let model = match params.backend {
            Backend::Fused => Model::Fused(
                FastBert::load(vb, config.shape())
                    .map_err(|e| candle_err_at(model_path, "loading the weights", e))?,
            ),
            Backend::Candle => Model::Candle(
                candle_transformers::models::bert::BertModel::load(vb, &config.to_candle())
                    .map_err(|e| candle_err_at(model_path, "loading the weights", e))?,
            ),
        };
        let pool = match params.threads {
            Some(n) => Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .build()
                    .map_err(|e| Error::param("threads", e.to_string()))?,
            ),
            None => None,
        };
        Ok(BertEncoder {
            asset: name.to_string(),
            model_sha256,
            model_path: model_path.to_path_buf(),
            config,
            params,
            tokenizer,
            model,
            pool,
        })
    }

    /// The asset name (e.g. `all-minilm-l6-v2`).
    pub fn name(&self) -> &str {
        &self.asset
    }

    /// sha256 of `model.safetensors`, from the asset manifest.
    pub fn model_sha256(&self) -> &str {
        &self.model_sha256
    }

    /// Embedding dimension (`hidden_size`, 384 for MiniLM).
    pub fn dim(&self) -> usize {
        self.config.hidden_size
    }

    /// The parameters.
    pub fn params(&self) -> &EncoderParams {
        &self.params
    }

    /// The model configuration.
    pub fn config(&self) -> &BertConfig {
        &self.config
    }

    /// The tokenizer (truncation set to `max_length`, no padding).
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }

    fn tokenize(&self, texts: &[&str]) -> Result<Vec<tokenizers::Encoding>> {
        self.tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| Error::Tokenizer(e.to_string()))
    }

    /// Last hidden states of a batch, packed: `(Σ len_i, dim)` row-major.
    fn hidden(&self, seqs: &[&[u32]], threads: Threads) -> Result<Vec<f32>> {
        let err = |e| candle_err_at(&self.model_path, "forward pass", e);
        match &self.model {
            Model::Fused(m) => m.forward_with(seqs, threads).map_err(err),
            Model::Candle(m) => candle_forward(m, seqs, self.dim()).map_err(err),
        }
    }

    /// Sentence vectors of one forward pass over the texts `chunk` (indices
    /// into `ids`): mean pooling, then L2 normalisation unless turned off.
    fn pooled(&self, ids: &[&[u32]], chunk: &[usize], threads: Threads) -> Result<Vec<Vec<f32>>> {
        let dim = self.dim();
        let seqs: Vec<&[u32]> = chunk.iter().map(|&i| ids[i]).collect();
        let hidden = self.hidden(&seqs, threads)?;
        let mut row = 0;
        let mut out = Vec::with_capacity(seqs.len());
        for s in &seqs {
            let mut v = vec![0f32; dim];
            for h in hidden[row * dim..(row + s.len()) * dim].chunks_exact(dim) {
                for (a, b) in v.iter_mut().zip(h) {
                    *a += b;
                }
            }
            let n = (s.len() as f32).max(1e-9);
            v.iter_mut().for_each(|x| *x /= n);
            if self.params.normalize {
                super::l2_normalize(&mut v);
            }
            out.push(v);
            row += s.len();
        }
        Ok(out)
    }

    /// Sentence vectors, in input order: mean pooling over the tokens, then L2
    /// normalisation (unless `normalize` is off). An empty text is embedded too
    /// (it is `[CLS] [SEP]`). Batches are formed after sorting by token count,
    /// so padding never costs compute; the order of `texts` does not change
    /// any vector.
    ///
    /// Threads: with [`Backend::Fused`] and at least two forward passes per
    /// thread, each pass runs whole on one thread ([`Threads::One`]) and the
    /// threads take passes from a shared queue, longest first, so no step
    /// waits for another thread; otherwise each pass splits its steps across
    /// the threads ([`Threads::Pool`]).
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.run(|| {
            let encodings = self.tokenize(texts)?;
            let ids: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
            let mut order: Vec<usize> = (0..ids.len()).collect();
            // Longest first, like sentence-transformers; stable, so equal lengths keep input order.
            order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
            let fused = matches!(self.model, Model::Fused(_));
            let budget = if fused {
                TOKENS_PER_PASS
            } else {
                CANDLE_TOKENS_PER_PASS
            };
            let passes: Vec<&[usize]> = order
                .chunks(self.params.batch_size)
                .flat_map(|batch| token_budget(batch, |i| ids[i].len(), budget))
                .collect();
            let mut out = vec![Vec::new(); texts.len()];
            let bar = std::sync::Mutex::new(
                (texts.len() >= PROGRESS_MIN).then(|| crate::progress::bar(texts.len(), "embed")),
            );
            let tick = |n: usize| {
                if let Ok(mut b) = bar.lock() {
                    if let Some(b) = b.as_mut() {
                        crate::progress::tick(b, n);
                    }
                }
            };
            let threads = rayon::current_num_threads();
            if fused && threads > 1 && passes.len() >= 2 * threads {
                // Longest passes first; each thread takes the next one when it is done.
                let mut queue: Vec<usize> = (0..passes.len()).collect();
                let tokens = |p: &[usize]| p.iter().map(|&i| ids[i].len()).sum::<usize>();
                queue.sort_by_key(|&p| std::cmp::Reverse(tokens(passes[p])));
                let next = std::sync::atomic::AtomicUsize::new(0);
                let done: Vec<Result<Vec<Indexed>>> = (0..threads)
                    .into_par_iter()
                    .with_max_len(1)
                    .map(|_| {
                        let mut mine = Vec::new();
                        loop {
                            let q = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(&p) = queue.get(q) else {
                                return Ok(mine);
                            };
                            let chunk = passes[p];
                            let vectors = self.pooled(&ids, chunk, Threads::One)?;
                            mine.extend(chunk.iter().copied().zip(vectors));
                            tick(chunk.len());
                        }
                    })
                    .collect();
                for part in done {
                    for (i, v) in part? {
                        out[i] = v;
                    }
                }
            } else {
                for chunk in passes {
                    let vectors = self.pooled(&ids, chunk, Threads::Pool)?;
                    for (&i, v) in chunk.iter().zip(vectors) {
                        out[i] = v;
                    }
                    tick(chunk.len());
                }
            }
            Ok(out)
        })
    }

    /// One sentence vector.
    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>> {
        Ok(self.embed(&[text])?.remove(0))
    }

    /// Per-token vectors of one text (truncated to `max_length` tokens like
    /// [`embed`](Self::embed)), without `[CLS]`, `[SEP]` or padding; each
    /// vector is L2-normalised. An empty text gives empty lists.
    pub fn token_embeddings(&self, text: &str) -> Result<TokenEmbeddings> {
        self.run(|| {
            let enc = self
                .tokenizer
                .encode(text, true)
                .map_err(|e| Error::Tokenizer(e.to_string()))?;
            let hidden = self.hidden(&[enc.get_ids()], Threads::Pool)?;
            let dim = self.dim();
            let mut out = TokenEmbeddings {
                tokens: Vec::new(),
                offsets: Vec::new(),
                vectors: Vec::new(),
            };
            for (t, &special) in enc.get_special_tokens_mask().iter().enumerate() {
                if special != 0 {
                    continue;
                }
                let mut v = hidden[t * dim..(t + 1) * dim].to_vec();
                super::l2_normalize(&mut v);
                out.tokens.push(enc.get_tokens()[t].clone());
                out.offsets.push(enc.get_offsets()[t]);
                out.vectors.push(v);
            }
            Ok(out)
        })
    }

    /// Per-token vectors of a batch of texts in ColBERT's input format: the marker token
    /// `marker` (ColBERT's `[Q]` / `[D]`) right after `[CLS]`, and with `pad = Some((id, n))`
    /// the sequence cut to `n` ids and filled up to `n` with `id` (ColBERT pads queries
    /// with `[MASK]`, "query augmentation"); see [`colbert_ids`]. The rows returned are the
    /// text's wordpieces and then the pad positions (token `[MASK]`, offset `(0, 0)`);
    /// `[CLS]`, the marker and `[SEP]` are dropped. Each row is L2-normalised. The pad
    /// tokens are attended to (every position of a sequence sees every other).
    pub fn token_embeddings_marked(
        &self,
        texts: &[&str],
        marker: u32,
        pad: Option<(u32, usize)>,
    ) -> Result<Vec<TokenEmbeddings>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.run(|| {
            let encodings = self.tokenize(texts)?;
            let max_len = self.params.max_length;
            let seqs: Vec<(Vec<u32>, usize)> = encodings
                .iter()
                .map(|e| colbert_ids(e.get_ids(), marker, pad, max_len))
                .collect::<Result<_>>()?;
            let dim = self.dim();
            let mut out = Vec::with_capacity(texts.len());
            let idx: Vec<usize> = (0..seqs.len()).collect();
            for chunk in token_budget(&idx, |i| seqs[i].0.len(), TOKENS_PER_PASS) {
                let ids: Vec<&[u32]> = chunk.iter().map(|&i| seqs[i].0.as_slice()).collect();
                let hidden = self.hidden(&ids, Threads::Pool)?;
                let mut row = 0;
                for &i in chunk {
                    let (ids, kept) = (&seqs[i].0, seqs[i].1);
                    let enc = &encodings[i];
                    let mut te = TokenEmbeddings {
                        tokens: Vec::new(),
                        offsets: Vec::new(),
                        vectors: Vec::new(),
                    };
                    // Wordpieces sit at positions 2..2+kept; pad ids after the [SEP].
                    let rows = (2..2 + kept).chain(3 + kept..ids.len());
                    for (n, t) in rows.enumerate() {
                        let mut v = hidden[(row + t) * dim..(row + t + 1) * dim].to_vec();
                        super::l2_normalize(&mut v);
                        if n < kept {
                            te.tokens.push(enc.get_tokens()[1 + n].clone());
                            te.offsets.push(enc.get_offsets()[1 + n]);
                        } else {
                            te.tokens.push("[MASK]".to_string());
                            te.offsets.push((0, 0));
                        }
                        te.vectors.push(v);
                    }
                    out.push(te);
                    row += ids.len();
                }
            }
            Ok(out)
        })
    }

    /// Token count of each text after truncation, `[CLS]`/`[SEP]` included.
    pub fn token_counts(&self, texts: &[&str]) -> Result<Vec<usize>> {
        Ok(self
            .tokenize(texts)?
            .iter()
            .map(|e| e.get_ids().len())
            .collect())
    }
}

/// Require mean pooling (the only pooling implemented).
fn check_pooling(path: &Path) -> Result<()> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::bad_input(path, e.to_string()))?;
    let on = |k: &str| v.get(k).and_then(|x| x.as_bool()).unwrap_or(false);
    if !on("pooling_mode_mean_tokens")
        || on("pooling_mode_cls_token")
        || on("pooling_mode_max_tokens")
        || on("pooling_mode_mean_sqrt_len_tokens")
    {
        return Err(Error::bad_input(
            path,
            "only mean pooling (pooling_mode_mean_tokens alone) is implemented",
        ));
    }
    Ok(())
}

/// candle-transformers' BertModel on a padded batch, repacked without padding.
fn candle_forward(
    model: &candle_transformers::models::bert::BertModel,
    seqs: &[&[u32]],
    dim: usize,
) -> candle_core::Result<Vec<f32>> {
    let b = seqs.len();
    let s = seqs.iter().map(|x| x.len()).max().unwrap_or(0);
    if b == 0 || s == 0 {
        return Ok(Vec::new());
    }
    let mut ids = vec![0u32; b * s];
    let mut mask = vec![0u32; b * s];
    for (i, q) in seqs.iter().enumerate() {
        ids[i * s..i * s + q.len()].copy_from_slice(q);
        mask[i * s..i * s + q.len()].iter_mut().for_each(|m| *m = 1);
    }
    let dev = Device::Cpu;
    let ids = Tensor::from_vec(ids, (b, s), &dev)?;
    let mask = Tensor::from_vec(mask, (b, s), &dev)?;
    let types = ids.zeros_like()?;
    let h = model.forward(&ids, &types, Some(&mask))?;
    let h = h.flatten_all()?.to_vec1::<f32>()?;
    let mut out = Vec::with_capacity(seqs.iter().map(|q| q.len()).sum::<usize>() * dim);
    for (i, q) in seqs.iter().enumerate() {
        out.extend_from_slice(&h[i * s * dim..(i * s + q.len()) * dim]);
    }
    Ok(out)
}

/// ColBERT's input ids from a `[CLS] w1 … wn [SEP]` encoding: `[CLS] marker w1 … wk [SEP]`,
/// with `k` cut so the sequence fits `max_len` (and `n` when padding), then with
/// `pad = Some((id, n))` filled with `id` up to `n` ids. Returns the ids and `k`.
pub fn colbert_ids(
    ids: &[u32],
    marker: u32,
    pad: Option<(u32, usize)>,
    max_len: usize,
) -> Result<(Vec<u32>, usize)> {
    if ids.len() < 2 {
        return Err(Error::param(
            "colbert_ids",
            "an encoding without [CLS] and [SEP]",
        ));
    }
    let limit = match pad {
        Some((_, n)) => n.min(max_len),
        None => max_len,
    };
    if limit < 4 {
        return Err(Error::param(
            "n_q",
            format!("{limit} ids leave no room for a wordpiece after [CLS], the marker and [SEP]"),
        ));
    }
    let words = &ids[1..ids.len() - 1];
    let kept = words.len().min(limit - 3);
    let mut out = Vec::with_capacity(limit);
    out.push(ids[0]);
    out.push(marker);
    out.extend_from_slice(&words[..kept]);
    out.push(ids[ids.len() - 1]);
    if let Some((id, n)) = pad {
        while out.len() < n.min(max_len) {
            out.push(id);
        }
    }
    Ok((out, kept))
}

#[cfg(test)]
mod tests {
    use super::token_budget;

    #[test]
    fn token_budget_groups_consecutive_items_within_the_budget() {
        let lens = [5usize, 4, 3, 9, 1, 1, 12, 2];
        let items: Vec<usize> = (0..lens.len()).collect();
        let groups: Vec<&[usize]> = token_budget(&items, |i| lens[i], 10).collect();
        assert_eq!(groups, vec![&[0, 1][..], &[2], &[3, 4], &[5], &[6], &[7]]);
        // Every item exactly once, in order.
        assert_eq!(groups.concat(), items);
        assert_eq!(token_budget(&[], |_| 1, 10).count(), 0);
    }
}
