//! Cross-encoder re-ranking (report 004): a Hugging Face `BertForSequenceClassification`
//! checkpoint reads the query and the passage together and outputs one relevance logit.
//!
//! The checkpoint is loaded unchanged, exactly as `transformers` saves it:
//!
//! | file | what is read |
//! |---|---|
//! | `config.json` | the BERT sizes, `id2label` (or `num_labels`; HF's default is 2) |
//! | `tokenizer.json` | the tokenizer with its post-processor (`[CLS] q [SEP] p [SEP]`, token types 0 / 1) |
//! | `model.safetensors` | `bert.embeddings.*`, `bert.encoder.layer.N.*`, `bert.pooler.dense.{weight,bias}`, `classifier.{weight,bias}` |
//!
//! The forward pass is HF's: BERT's last hidden state at `[CLS]` → pooler
//! (`tanh(W_p h + b_p)`) → classifier (`W_c · + b_c`) → logits.
//!
//! **Score.** With one label (`num_labels = 1`, as the ms-marco cross-encoders such as
//! `cross-encoder/ms-marco-MiniLM-L-6-v2` report 004 uses) the score is that logit
//! (sentence-transformers' `CrossEncoder.predict` applies no activation for these models
//! unless asked). With two labels (not-relevant / relevant) the score is the logit of label
//! index 1. More labels have no single relevance score: set
//! [`CrossEncoderParams::label_index`] to pick one.
//!
//! **Input.** `tokenizer.encode((query, passage), true)` with the tokenizer's own
//! post-processor; truncation to `max_length` tokens cuts only the passage
//! (`only_second`). If the query alone does not fit, both sides are cut (`longest_first`).
//! Pairs are scored in batches of [`CrossEncoderParams::batch_size`] through the fused,
//! padding-free BERT pass ([`FastBert`]), so a pair's score does not depend on its batch.

use super::{finish, resolve_candidates, PassageLookup, Reranker};
use crate::assets::Assets;
use crate::encode::fast_bert::{FastBert, Threads};
use crate::encode::BertConfig;
use crate::{Error, Hit, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tokenizers::{Encoding, Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

/// Hyper-parameters of a [`CrossEncoder`].
#[derive(Debug, Clone, PartialEq)]
pub struct CrossEncoderParams {
    /// Longest input in tokens, special tokens included (default 512; capped at the model's
    /// `max_position_embeddings`).
    pub max_length: usize,
    /// Pairs per forward pass (default 16).
    pub batch_size: usize,
    /// Which logit is the score. `None` (default): label 0 of a 1-label model, label 1 of a
    /// 2-label model, an error otherwise.
    pub label_index: Option<usize>,
}

impl Default for CrossEncoderParams {
    fn default() -> Self {
        CrossEncoderParams {
            max_length: 512,
            batch_size: 16,
            label_index: None,
        }
    }
}

/// A cross-encoder's input: `tokenizer.json` with its own post-processor
/// (`[CLS] q [SEP] p [SEP]`, token types 0 / 1), truncated to `max_length` tokens cutting
/// only the passage, or both sides when the query alone does not fit. Training
/// (`train::cross`) and [`CrossEncoder`] encode pairs with it, so they cut the same way.
#[derive(Clone)]
pub struct PairTokenizer {
    tokenizer: Tokenizer,
    fallback: Tokenizer,
    max_length: usize,
}

impl PairTokenizer {
    /// Read `tokenizer.json` (padding off) for pairs of at most `max_length` tokens.
    pub fn from_file(tokenizer_path: &Path, max_length: usize) -> Result<Self> {
        let tok_err =
            |e: tokenizers::Error| Error::Tokenizer(format!("{}: {e}", tokenizer_path.display()));
        if !tokenizer_path.is_file() {
            return Err(Error::io(
                tokenizer_path,
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
            ));
        }
        let mut tokenizer = Tokenizer::from_file(tokenizer_path).map_err(tok_err)?;
        tokenizer.with_padding(None);
        let mut fallback = tokenizer.clone();
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length,
                strategy: TruncationStrategy::OnlySecond,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(tok_err)?;
        fallback
            .with_truncation(Some(TruncationParams {
                max_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(tok_err)?;
        Ok(PairTokenizer {
            tokenizer,
            fallback,
            max_length,
        })
    }

    /// The longest input in tokens.
    pub fn max_length(&self) -> usize {
        self.max_length
    }

    /// The id of `token` in the vocabulary.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.tokenizer.token_to_id(token)
    }

    /// Encode one pair (special tokens included).
    pub fn encode(&self, query: &str, passage: &str) -> Result<Encoding> {
        match self.tokenizer.encode((query, passage), true) {
            Ok(e) => Ok(e),
            // only_second fails when the query alone exceeds max_length: cut both sides.
            Err(_) => self
                .fallback
                .encode((query, passage), true)
                .map_err(|e| Error::Tokenizer(format!("encoding a query–passage pair: {e}"))),
        }
    }
}

/// A `BertForSequenceClassification` cross-encoder. Implements [`Reranker`].
pub struct CrossEncoder {
    label: String,
    bert: FastBert,
    /// `bert.pooler.dense.weight`, `(hidden, hidden)` row-major (out × in), and its bias.
    pooler: (Vec<f32>, Vec<f32>),
    /// `classifier.weight`, `(num_labels, hidden)` row-major, and its bias.
    classifier: (Vec<f32>, Vec<f32>),
    pairs: PairTokenizer,
    num_labels: usize,
    score_index: usize,
    score_label: String,
    max_length: usize,
    batch_size: usize,
    weights_path: PathBuf,
}

/// Every tensor name a `BertForSequenceClassification` checkpoint with `layers` layers holds.
pub fn expected_keys(layers: usize) -> Vec<String> {
    let mut keys: Vec<String> = [
        "word_embeddings.weight",
        "position_embeddings.weight",
        "token_type_embeddings.weight",
        "LayerNorm.weight",
        "LayerNorm.bias",
    ]
    .iter()
    .map(|k| format!("bert.embeddings.{k}"))
    .collect();
    for l in 0..layers {
        for k in [
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
            "attention.output.LayerNorm",
            "intermediate.dense",
            "output.dense",
            "output.LayerNorm",
        ] {
            for wb in ["weight", "bias"] {
                keys.push(format!("bert.encoder.layer.{l}.{k}.{wb}"));
            }
        }
    }
    for k in ["bert.pooler.dense", "classifier"] {
        for wb in ["weight", "bias"] {
            keys.push(format!("{k}.{wb}"));
        }
    }
    keys
}

/// Number of labels of a classification config: `len(id2label)` when present, else
/// `num_labels`, else HF's default 2.
fn num_labels(config: &serde_json::Value) -> usize {
    if let Some(m) = config.get("id2label").and_then(|v| v.as_object()) {
        if !m.is_empty() {
            return m.len();
        }
    }
    config
        .get("num_labels")
        .and_then(|v| v.as_u64())
        .map(|n| n as usize)
        .unwrap_or(2)
}

fn label_name(config: &serde_json::Value, index: usize) -> String {
    config
        .get("id2label")
        .and_then(|m| m.get(index.to_string()))
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| format!("LABEL_{index}"))
}

impl CrossEncoder {
    /// Load `config.json`, `tokenizer.json` and `model.safetensors` from one folder (a
    /// `save_pretrained` output or a hub snapshot), with default parameters. The label in
    /// [`Reranker::name`] is the folder name.
    pub fn load_from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        Self::load_from_dir_with(dir, CrossEncoderParams::default())
    }

    /// [`CrossEncoder::load_from_dir`] with explicit parameters.
    pub fn load_from_dir_with(dir: impl AsRef<Path>, params: CrossEncoderParams) -> Result<Self> {
        let dir = dir.as_ref();
        let label = dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "cross-encoder".to_string());
        Self::load_from_files(
            &label,
            &dir.join("config.json"),
            &dir.join("tokenizer.json"),
            &dir.join("model.safetensors"),
            params,
        )
    }

    /// Load a named model asset of `data/assets.toml` (each file sha256-checked), with
    /// default parameters. The asset name is the label in [`Reranker::name`].
    pub fn load(assets: &Assets, name: &str) -> Result<Self> {
        Self::load_with(assets, name, CrossEncoderParams::default())
    }

    /// [`CrossEncoder::load`] with explicit parameters.
    pub fn load_with(assets: &Assets, name: &str, params: CrossEncoderParams) -> Result<Self> {
        let config = assets.resolve(name, "config.json")?;
        let tokenizer = assets.resolve(name, "tokenizer.json")?;
        let weights = assets.resolve(name, "model.safetensors")?;
        Self::load_from_files(name, &config, &tokenizer, &weights, params)
    }

    /// Load from three explicit files.
    pub fn load_from_files(
        label: &str,
        config_path: &Path,
        tokenizer_path: &Path,
        weights_path: &Path,
        params: CrossEncoderParams,
    ) -> Result<Self> {
        if params.batch_size == 0 {
            return Err(Error::param("batch_size", "must be at least 1"));
        }
        if params.max_length < 4 {
            return Err(Error::param(
                "max_length",
                format!(
                    "{} leaves no room for [CLS] q [SEP] p [SEP]",
                    params.max_length
                ),
            ));
        }
        // config.json
        let text = std::fs::read_to_string(config_path).map_err(|e| Error::io(config_path, e))?;
        let raw: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::bad_input(config_path, format!("not JSON: {e}")))?;
        if let Some(archs) = raw.get("architectures").and_then(|a| a.as_array()) {
            if !archs
                .iter()
                .any(|a| a.as_str() == Some("BertForSequenceClassification"))
            {
                return Err(Error::bad_input(
                    config_path,
                    format!("architectures {archs:?} do not include BertForSequenceClassification"),
                ));
            }
        }
        // The workbench's own BERT config reader (sizes, activation, position type).
        let config = BertConfig::from_file(config_path)?;
        let num_labels = num_labels(&raw);
        let score_index = match (params.label_index, num_labels) {
            (Some(i), n) if i < n => i,
            (Some(i), n) => {
                return Err(Error::param(
                    "label_index",
                    format!("{i} is out of range for a {n}-label model"),
                ))
            }
            (None, 1) => 0,
            (None, 2) => 1,
            (None, n) => {
                return Err(Error::param(
                    "label_index",
                    format!(
                        "a {n}-label classifier ({}) has no single relevance score; choose one",
                        config_path.display()
                    ),
                ))
            }
        };
        let score_label = label_name(&raw, score_index);
        let max_length = params.max_length.min(config.max_position_embeddings);

        // tokenizer.json
        let pairs = PairTokenizer::from_file(tokenizer_path, max_length)?;

        // model.safetensors
        let device = Device::Cpu;
        let tensors = load_tensors(weights_path, &device)?;
        for key in expected_keys(config.num_hidden_layers) {
            if !tensors.contains_key(&key) {
                return Err(Error::bad_input(
                    weights_path,
                    format!(
                        "missing tensor `{key}`: a BertForSequenceClassification checkpoint \
                         (config {}) needs it; the file holds {} tensors",
                        config_path.display(),
                        tensors.len()
                    ),
                ));
            }
        }
        let classifier_shape = tensors["classifier.weight"].dims().to_vec();
        if classifier_shape != [num_labels, config.hidden_size] {
            return Err(Error::bad_input(
                weights_path,
                format!(
                    "`classifier.weight` has shape {classifier_shape:?}, config {} implies [{num_labels}, {}]",
                    config_path.display(),
                    config.hidden_size
                ),
            ));
        }
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &device);
        let load_err = |e: candle_core::Error| Error::bad_input(weights_path, e.to_string());
        let bert = FastBert::load(vb.pp("bert"), config.shape()).map_err(load_err)?;
        let h = config.hidden_size;
        let flat = |name: &str, shape: (usize, usize)| -> Result<(Vec<f32>, Vec<f32>)> {
            let w = vb
                .get(shape, &format!("{name}.weight"))
                .and_then(|t| t.flatten_all())
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(load_err)?;
            let b = vb
                .get(shape.0, &format!("{name}.bias"))
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(load_err)?;
            Ok((w, b))
        };
        let pooler = flat("bert.pooler.dense", (h, h))?;
        let classifier = flat("classifier", (num_labels, h))?;
        Ok(CrossEncoder {
            label: label.to_string(),
            bert,
            pooler,
            classifier,
            pairs,
            num_labels,
            score_index,
            score_label,
            max_length,
            batch_size: params.batch_size,
            weights_path: weights_path.to_path_buf(),
        })
    }

    /// Number of classifier outputs.
    pub fn num_labels(&self) -> usize {
        self.num_labels
    }

    /// Index and name (`id2label`) of the logit used as the score.
    pub fn score_label(&self) -> (usize, &str) {
        (self.score_index, &self.score_label)
    }

    /// The effective `max_length` in tokens.
    pub fn max_length(&self) -> usize {
        self.max_length
    }

    /// The model input for one pair: token ids and token type ids, special tokens included.
    pub fn encode_pair(&self, query: &str, passage: &str) -> Result<(Vec<u32>, Vec<u32>)> {
        let e = self.encoding(query, passage)?;
        Ok((e.get_ids().to_vec(), e.get_type_ids().to_vec()))
    }

    fn encoding(&self, query: &str, passage: &str) -> Result<Encoding> {
        self.pairs.encode(query, passage)
    }

    /// Score one pair.
    pub fn score(&self, query: &str, passage: &str) -> Result<f32> {
        Ok(self.score_pairs(query, &[passage])?[0])
    }

    /// Score `query` against each passage, in batches; one score per passage, in order.
    pub fn score_pairs(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>> {
        let encodings = passages
            .iter()
            .map(|p| self.encoding(query, p))
            .collect::<Result<Vec<_>>>()?;
        // Group similar lengths to waste less padding; scores go back to input order.
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].get_ids().len());
        let mut scores = vec![0f32; encodings.len()];
        for chunk in order.chunks(self.batch_size) {
            let batch: Vec<&Encoding> = chunk.iter().map(|&i| &encodings[i]).collect();
            for (&i, s) in chunk.iter().zip(self.forward(&batch)?) {
                scores[i] = s;
            }
        }
        Ok(scores)
    }

    /// One batch → the chosen logit per pair: the fused pass over the packed tokens, then
    /// `[CLS]` (each pair's first row) → pooler (`tanh(W_p h + b_p)`) → classifier.
    fn forward(&self, batch: &[&Encoding]) -> Result<Vec<f32>> {
        let seqs: Vec<&[u32]> = batch.iter().map(|e| e.get_ids()).collect();
        let types: Vec<&[u32]> = batch.iter().map(|e| e.get_type_ids()).collect();
        let hidden = self
            .bert
            .forward_typed(&seqs, Some(&types), Threads::Pool)
            .map_err(|e| {
                Error::bad_input(
                    &self.weights_path,
                    format!("cross-encoder forward pass: {e}"),
                )
            })?;
        let h = self.pooler.1.len();
        let (pw, pb) = &self.pooler;
        let (cw, cb) = &self.classifier;
        let mut out = Vec::with_capacity(batch.len());
        let mut row = 0;
        for s in &seqs {
            let cls = &hidden[row * h..(row + 1) * h];
            row += s.len();
            let pooled: Vec<f32> = pw
                .chunks_exact(h)
                .zip(pb)
                .map(|(w, b)| (b + crate::encode::dot(w, cls)).tanh())
                .collect();
            let i = self.score_index;
            out.push(cb[i] + crate::encode::dot(&cw[i * h..(i + 1) * h], &pooled));
        }
        Ok(out)
    }
}

fn load_tensors(path: &Path, device: &Device) -> Result<HashMap<String, Tensor>> {
    if !path.exists() {
        return Err(Error::io(
            PathBuf::from(path),
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        ));
    }
    candle_core::safetensors::load(path, device)
        .map_err(|e| Error::bad_input(path, format!("not a readable safetensors file: {e}")))
}

impl Reranker for CrossEncoder {
    /// `cross-{label}-len{max_length}`.
    fn name(&self) -> String {
        format!("cross-{}-len{}", self.label, self.max_length)
    }

    fn rerank(
        &self,
        query: &str,
        candidates: &[Hit],
        passages: &PassageLookup,
        k: usize,
    ) -> Result<Vec<Hit>> {
        let cands = resolve_candidates(candidates, passages, k)?;
        let texts: Vec<&str> = cands.iter().map(|c| c.text).collect();
        let scores = self.score_pairs(query, &texts)?;
        finish(&cands, &scores, k)
    }
}

#[cfg(test)]
mod tests {
    //! The checkpoint-level checks (loads unchanged, determinism, batching, missing key,
    //! an independent plain-Rust forward pass) live in `tests/rerank.rs`. Here: agreement
    //! with candle's own `BertModel` plus a pooler and classifier applied by hand.
    use super::*;
    use candle_transformers::models::bert::{BertModel, Config as CandleBertConfig};
    use rand::{Rng, SeedableRng};

    const H: usize = 32;
    const LAYERS: usize = 2;
    const INTER: usize = 37;
    const WORDS: [&str; 14] = [
        "the",
        "cat",
        "sat",
        "on",
        "mat",
        "who",
        "wrote",
        "hamlet",
        "shakespeare",
        "a",
        "play",
        "##s",
        "dog",
        "?",
    ];

    fn write_checkpoint(dir: &Path, num_labels: usize) -> HashMap<String, Tensor> {
        let specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
        let vocab: serde_json::Map<String, serde_json::Value> = specials
            .iter()
            .chain(WORDS.iter())
            .enumerate()
            .map(|(i, w)| (w.to_string(), serde_json::json!(i)))
            .collect();
        let n_vocab = vocab.len();
        let tokenizer = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null,
            "added_tokens": specials.iter().enumerate().map(|(i, t)| serde_json::json!({
                "id": i, "content": t, "single_word": false, "lstrip": false, "rstrip": false,
                "normalized": false, "special": true})).collect::<Vec<_>>(),
            "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                           "strip_accents": null, "lowercase": true},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
            "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": 100, "vocab": vocab}
        });
        std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
        let id2label: serde_json::Map<String, serde_json::Value> = (0..num_labels)
            .map(|i| (i.to_string(), serde_json::json!(format!("LABEL_{i}"))))
            .collect();
        let config = serde_json::json!({
            "architectures": ["BertForSequenceClassification"], "model_type": "bert",
            "vocab_size": n_vocab, "hidden_size": H, "num_hidden_layers": LAYERS,
            "num_attention_heads": 2, "intermediate_size": INTER, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
            "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02,
            "layer_norm_eps": 1e-12, "pad_token_id": 0, "id2label": id2label
        });
        std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut tensors = HashMap::new();
        for key in expected_keys(LAYERS) {
            let shape: Vec<usize> = if key.contains("word_embeddings") {
                vec![n_vocab, H]
            } else if key.contains("position_embeddings") {
                vec![64, H]
            } else if key.contains("token_type") {
                vec![2, H]
            } else if key.starts_with("classifier") {
                if key.ends_with("weight") {
                    vec![num_labels, H]
                } else {
                    vec![num_labels]
                }
            } else if key.contains("intermediate.dense") {
                if key.ends_with("weight") {
                    vec![INTER, H]
                } else {
                    vec![INTER]
                }
            } else if key.contains("output.dense") && !key.contains("attention") {
                if key.ends_with("weight") {
                    vec![H, INTER]
                } else {
                    vec![H]
                }
            } else if key.ends_with("weight") && !key.contains("LayerNorm") {
                vec![H, H]
            } else {
                vec![H]
            };
            let n: usize = shape.iter().product();
            let base = if key.contains("LayerNorm.weight") {
                1.0
            } else {
                0.0
            };
            let v: Vec<f32> = (0..n).map(|_| base + rng.gen_range(-0.3f32..0.3)).collect();
            tensors.insert(key, Tensor::from_vec(v, shape, &Device::Cpu).unwrap());
        }
        candle_core::safetensors::save(&tensors, dir.join("model.safetensors")).unwrap();
        tensors
    }

    #[test]
    fn matches_candle_bert_model_plus_hand_pooler() {
        let dir = tempfile::tempdir().unwrap();
        let tensors = write_checkpoint(dir.path(), 1);
        let ce = CrossEncoder::load_from_dir(dir.path()).unwrap();
        let (q, p) = ("who wrote hamlet?", "shakespeare wrote plays");
        let (ids, types) = ce.encode_pair(q, p).unwrap();
        assert_eq!(ids[0], 2);
        assert_eq!(types.iter().filter(|&&t| t == 1).count(), 5); // shakespeare wrote play ##s [SEP]
        let got = ce.score(q, p).unwrap();

        // Independent: candle BertModel on the un-prefixed weights, pooler/classifier by hand.
        let stripped: HashMap<String, Tensor> = tensors
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("bert.").map(|k| (k.to_string(), v.clone())))
            .collect();
        let config: CandleBertConfig =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("config.json")).unwrap())
                .unwrap();
        let vb = VarBuilder::from_tensors(stripped, DType::F32, &Device::Cpu);
        let bert = BertModel::load(vb, &config).unwrap();
        let n = ids.len();
        let ids_t = Tensor::from_vec(ids, (1, n), &Device::Cpu).unwrap();
        let types_t = Tensor::from_vec(types, (1, n), &Device::Cpu).unwrap();
        let h = bert.forward(&ids_t, &types_t, None).unwrap();
        let cls: Vec<f32> = h.get(0).unwrap().get(0).unwrap().to_vec1().unwrap();
        let wp: Vec<Vec<f32>> = tensors["bert.pooler.dense.weight"].to_vec2().unwrap();
        let bp: Vec<f32> = tensors["bert.pooler.dense.bias"].to_vec1().unwrap();
        let pooled: Vec<f32> = (0..H)
            .map(|o| (bp[o] + (0..H).map(|i| wp[o][i] * cls[i]).sum::<f32>()).tanh())
            .collect();
        let wc: Vec<Vec<f32>> = tensors["classifier.weight"].to_vec2().unwrap();
        let bc: Vec<f32> = tensors["classifier.bias"].to_vec1().unwrap();
        let want = bc[0] + (0..H).map(|i| wc[0][i] * pooled[i]).sum::<f32>();
        assert!((got - want).abs() < 1e-5, "{got} vs {want}");
    }

    #[test]
    fn two_labels_score_label_one_and_many_labels_need_a_choice() {
        let dir = tempfile::tempdir().unwrap();
        write_checkpoint(dir.path(), 2);
        let ce = CrossEncoder::load_from_dir(dir.path()).unwrap();
        assert_eq!(ce.score_label(), (1, "LABEL_1"));
        let dir3 = tempfile::tempdir().unwrap();
        write_checkpoint(dir3.path(), 3);
        let err = CrossEncoder::load_from_dir(dir3.path()).err().unwrap();
        assert!(err.to_string().contains("label_index"), "{err}");
        let ce3 = CrossEncoder::load_from_dir_with(
            dir3.path(),
            CrossEncoderParams {
                label_index: Some(2),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(ce3.score_label().0, 2);
    }

    #[test]
    fn truncation_cuts_only_the_passage() {
        let dir = tempfile::tempdir().unwrap();
        write_checkpoint(dir.path(), 1);
        let ce = CrossEncoder::load_from_dir_with(
            dir.path(),
            CrossEncoderParams {
                max_length: 10,
                ..Default::default()
            },
        )
        .unwrap();
        let long = "the cat sat on the mat ".repeat(10);
        let (ids, types) = ce.encode_pair("who wrote hamlet", &long).unwrap();
        assert_eq!(ids.len(), 10);
        // [CLS] who wrote hamlet [SEP] = 5 tokens of type 0, all kept.
        assert_eq!(types.iter().filter(|&&t| t == 0).count(), 5);
        assert_eq!(*ids.last().unwrap(), 3);
        // A query longer than max_length still scores (both sides cut).
        let long_q = "who wrote hamlet ".repeat(10);
        assert!(ce.score(&long_q, "the cat").unwrap().is_finite());
    }
}
