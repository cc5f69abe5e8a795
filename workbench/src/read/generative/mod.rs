//! Generative readers: GGUF language models (`qwen2`, `llama`) on candle's quantized path
//! (feature `llm`).
//!
//! ```no_run
//! # fn main() -> workbench::Result<()> {
//! use workbench::read::generative::{GenerateParams, GenerativeReader, Llm, LoadOptions, ReaderOptions};
//! use workbench::read::{Context, Reader};
//! let llm = Llm::from_asset("qwen2.5-coder-1.5b-instruct-gguf", &LoadOptions::default())?;
//! let mut reader = GenerativeReader::new(llm, ReaderOptions::default())?;
//! let a = reader.read("Who wrote Hamlet?", &[Context::new("p1", "Hamlet is a tragedy by William Shakespeare.")])?;
//! println!("{} ({:.1} tok/s)", a.text, a.usage.decode_tokens_per_sec());
//! # Ok(()) }
//! ```
//!
//! ## API
//!
//! | item | what |
//! |---|---|
//! | [`LoadOptions`] `{ requantize, context_len, f32_prefill, warm_up }` | load-time choices; [`Requantize`] `Auto \| Never \| Always` (Q4_1/Q5_0/Q5_1 → Q8_0) |
//! | [`Llm::load`]`(path, &opts)`, [`Llm::from_asset`]`(name, &opts)` | open, validate (missing file, corrupt header, truncated data, architecture) and load |
//! | [`Llm::architecture`], [`Llm::context_len`], [`Llm::name`], [`Llm::path`], [`Llm::eog_ids`], [`Llm::info`] | what was loaded |
//! | [`Llm::tokenize`]`(text, add_special)`, [`Llm::detokenize`]`(ids)` | the GGUF's BPE tokenizer (special tokens in the text are parsed, as llama.cpp's `parse_special`) |
//! | [`ChatMessage`], [`Llm::render_chat`]`(&msgs, add_generation_prompt)` | the GGUF's Jinja chat template through minijinja; [`Llm::set_chat_template`] overrides it |
//! | [`GenerateParams`], [`Sampling`] `Greedy \| TopP { temperature, top_p, seed }` | decoding choices |
//! | [`Llm::generate_ids`]`(&prompt_ids, &params)`, [`Llm::generate`]`(prompt_text, &params)` → [`Generation`] | KV-cached decoding, prompt prefilled in batches of `prefill_batch`; stops at any end-of-generation id ([`StopReason::Eos`]), a stop string ([`StopReason::StopString`], trimmed from the text) or `max_new_tokens` / the context end ([`StopReason::MaxTokens`]) |
//! | [`GenerativeReader`] + [`ReaderOptions`] | the [`Reader`]: prompt template with `{question}` and `{passages}`, rendered through the chat template; passages that do not fit are dropped lowest rank first |
//! | [`SharedLlm`] | one loaded model used by several parts of a pipeline (the reader and an LLM query transform): [`GenerativeReader::with_shared`], [`GenerativeReader::llm`] |
//!
//! Timings: [`Generation::prefill_secs`] covers the prompt's forward passes (its logits give
//! the first generated token); [`Generation::decode_secs`] covers the rest, i.e.
//! [`Generation::decode_steps`] single-token forward passes (plus sampling and stop checks):
//! `generated_tokens - 1` when the generation stops at `max_new_tokens` or a stop string,
//! `generated_tokens` when it stops at an end-of-generation token (that pass's token is not
//! kept). Tokens/s comparable with llama.cpp's "eval" rate is `decode_steps / decode_secs`
//! (also in a reader's [`Usage`]).
//!
//! ## First question, threads, shared machines
//!
//! [`Llm::load`] ends with [`Llm::warm_up`] (a 32-token prompt and one decoding step,
//! [`LoadOptions::warm_up`]): candle repacks Q4_K / Q6_K / Q8_0 weights into tiles, and the
//! AMX kernel dequantises them to bf16, the first time each matrix is multiplied, so without
//! it that one-off work is timed inside the first question. `bench_llm` also prepares the
//! weights in an untimed warm-up (a whole generation of each prompt), so a user's first
//! [`GenerativeReader::read`] and the benchmark time the same matrix kernels;
//! `tests/llm_user_path.rs` checks that the two paths' tokens/s stay within 1.3× in one
//! process.
//!
//! Threads: candle's CPU pools (`CANDLE_NUM_THREADS` / `RAYON_NUM_THREADS`, read once when
//! first used; `bench_llm` sets both to `--threads`); when neither is set, the workspace's
//! candle-core counts the physical cores, at most [`std::thread::available_parallelism`]
//! (the affinity mask and cgroup quota, which the count of physical cores ignores).
//!
//! The workspace builds candle-core with a patched thread pool (`vendor/candle-core.patch`,
//! docs/dependencies.md): a parallel region's slices go to whichever threads join it while
//! it is open, and the caller waits (briefly spinning, then yielding) only for the workers
//! that joined, instead of spinning until every worker has been scheduled and signalled.
//! On a machine whose cores other processes keep busy, candle's own pool made every matrix
//! product wait for a descheduled worker. `CANDLE_BARRIER_POOL_STRICT=1` restores candle's
//! pool. Notebooks get the same crate: `scripts/evcxr_kernel` declares the patch in each
//! kernel's cargo config (evcxr's crate is outside the workspace, whose `[patch]` it does not
//! see).
//!
//! Decode uses candle's fused single-row matmul for q/k/v and gate/up where candle has it
//! (same storage type, AVX-512 VNNI); `WORKBENCH_LLM_NO_FUSE=1` turns that off, for
//! measurements. Q6_K weights are multiplied in decode by the module's own AVX-512 kernel
//! (`q6k.rs`: one pass over the weights for all the rows of a batch, each row the same
//! whatever their number); `WORKBENCH_LLM_NO_Q6K=1` goes back to candle's. The attention
//! of a decoded position reads the KV cache in place without tensor operations
//! (`decode_attn.rs`, AVX-512), and a prompt's attention reads it in place too
//! (`prefill_attn.rs`); `WORKBENCH_LLM_NO_ATTN=1` goes back to tensor operations for both.
//! The feed-forward gate `silu(g) · u` is one AVX-512 pass with the bits of candle's two
//! (`silu.rs`); `WORKBENCH_LLM_NO_SILU=1` goes back to candle's.
//! Prompts of 16 tokens or more multiply quantised weights on AMX tiles where the CPU has
//! AMX-BF16 (`amx.rs`: weights dequantised to bf16 by the warm-up at load, two bytes each,
//! activations rounded to bf16, f32 sums); [`LoadOptions::amx`] off, or
//! `WORKBENCH_LLM_NO_AMX=1` for the whole process, goes back to candle's kernels.

pub use template::ChatMessage;
pub mod configured;
mod gguf;
mod model;
mod sample;
mod template;
mod tokenizer;

use crate::read::{
    check_question, check_templates, fit_passages, format_passage, user_message, AbstentionRule,
    Answer, Context, Reader, Usage,
};
use crate::{Error, Result};
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// Whether weights stored as Q4_1 / Q5_0 / Q5_1 (no AVX2/AVX-512 matmul kernel in candle)
/// are requantised to Q8_0 at load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Requantize {
    /// Requantise when that was measured to be faster (see [`Requantize::resolve`]).
    #[default]
    Auto,
    /// Keep the file's types.
    Never,
    /// Requantise Q4_1 / Q5_0 / Q5_1 matmul weights to Q8_0.
    Always,
}

impl Requantize {
    /// The decision for this machine. `Auto` requantises: on the development machine
    /// (AVX-512 VNNI, 2 cores) Q8_0 decoded faster than the Q4_1 / Q5_0 kernels (numbers in
    /// `docs/readers.md` and `bench_llm`).
    pub fn resolve(self) -> bool {
        match self {
            Requantize::Auto | Requantize::Always => true,
            Requantize::Never => false,
        }
    }
}

/// Load-time options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadOptions {
    /// Requantisation of Q4_1 / Q5_0 / Q5_1 weights.
    pub requantize: Requantize,
    /// Context window (prompt + generated tokens). `None`: the model's trained context,
    /// capped at [`DEFAULT_CONTEXT_CAP`] (the KV cache grows with use, the rotary tables
    /// are sized by this).
    pub context_len: Option<usize>,
    /// Also keep f32 copies of the layers' matmul weights, dequantised from the file's own
    /// type, and multiply prompts of 16 tokens or more with them (gemm) instead of candle's
    /// quantised kernels; decoding keeps the quantised weights. Costs 4 bytes per weight more
    /// memory; with the workspace's candle, which runs short Q8_0 rows (SmolLM2-135M's
    /// `k` = 576) on its repacked tiles, it is no faster for SmolLM2's prompts
    /// (docs/readers.md). Off by default: prefill logits then differ from llama.cpp's by the
    /// activation quantisation that llama.cpp and the quantised path share.
    #[serde(default)]
    pub f32_prefill: bool,
    /// Run a short prompt and one decoding step at load (see [`Llm::warm_up`]), so that
    /// the one-off preparation of the weights for the matrix kernels (candle's repacked
    /// tiles, the AMX kernel's bf16 tiles) happens in [`Llm::load`] and not inside the
    /// first question. On by default.
    #[serde(default = "yes")]
    pub warm_up: bool,
    /// Multiply prompts of 16 tokens or more with the workbench's AMX kernel where the CPU
    /// has AMX-BF16 (k-quant and Q8_0 weights, packed to bf16 at their first prefill). Off:
    /// candle's quantised kernels multiply them, which on a CPU with AMX-INT8 still run Q4_K
    /// prompts of 32 rows or more on candle's own AMX-INT8 tiles unless the process has
    /// `CANDLE_NO_AMX=1` (the workspace's patched candle). `WORKBENCH_LLM_NO_AMX=1` turns the
    /// workbench's kernel off for the whole process. On by default.
    #[serde(default = "yes")]
    pub amx: bool,
}

fn yes() -> bool {
    true
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            requantize: Requantize::default(),
            context_len: None,
            f32_prefill: false,
            warm_up: true,
            amx: true,
        }
    }
}

/// Tokens of the warm-up prompt: enough rows for every prefill kernel (the AMX kernel from
/// 16, candle's repacked tiles from 2).
const WARM_UP_TOKENS: usize = 32;

/// Default cap on the context window when [`LoadOptions::context_len`] is `None`.
pub const DEFAULT_CONTEXT_CAP: usize = 8192;

/// How the next token is picked.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Sampling {
    /// The most probable token.
    Greedy,
    /// Seeded sampling from the temperature-scaled distribution cut to its top-p nucleus.
    TopP {
        /// Softmax temperature (> 0).
        temperature: f32,
        /// Nucleus mass in (0, 1].
        top_p: f32,
        /// Seed of the sampler's ChaCha8 generator (same seed → same text).
        seed: u64,
    },
}

/// Decoding parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerateParams {
    /// Maximum number of generated tokens (≥ 1).
    pub max_new_tokens: usize,
    /// Greedy or seeded top-p.
    pub sampling: Sampling,
    /// Generation stops when the text contains one of these; the text is cut before it.
    pub stop_strings: Vec<String>,
    /// Prompt tokens per prefill forward pass (≥ 1).
    pub prefill_batch: usize,
}

impl Default for GenerateParams {
    fn default() -> Self {
        GenerateParams {
            max_new_tokens: 128,
            sampling: Sampling::Greedy,
            stop_strings: Vec::new(),
            prefill_batch: 512,
        }
    }
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StopReason {
    /// An end-of-generation token (not included in the output).
    Eos,
    /// A stop string appeared (the text is cut before it; its tokens stay in `token_ids`).
    StopString,
    /// `max_new_tokens` were generated, or the context window is full.
    MaxTokens,
}

/// The result of one generation call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    /// Generated token ids (no end-of-generation id).
    pub token_ids: Vec<u32>,
    /// Their text, cut before the first stop string.
    pub text: String,
    /// Prompt length in tokens.
    pub prompt_tokens: usize,
    /// Number of generated tokens (`token_ids.len()`).
    pub generated_tokens: usize,
    /// Single-token forward passes after the prompt (see the module doc on timings).
    pub decode_steps: usize,
    /// Prompt forward passes, seconds.
    pub prefill_secs: f64,
    /// Everything after the prefill, seconds.
    pub decode_secs: f64,
    /// Why it stopped.
    pub stop: StopReason,
    /// The natural-log probability of each generated token under the model's own
    /// distribution (softmax of its logits at temperature 1, whatever the sampler), in the
    /// order of `token_ids`.
    #[serde(default)]
    pub token_logprobs: Vec<f32>,
}

impl Generation {
    /// Its token counts and times as a reader call's [`Usage`].
    pub fn usage(&self) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens,
            generated_tokens: self.generated_tokens,
            prefill_secs: self.prefill_secs,
            decode_secs: self.decode_secs,
            decode_steps: self.decode_steps,
        }
    }

    /// Prompt tokens per second of prefill.
    pub fn prefill_tokens_per_sec(&self) -> f64 {
        if self.prefill_secs > 0.0 {
            self.prompt_tokens as f64 / self.prefill_secs
        } else {
            0.0
        }
    }
    /// Decode forward passes per second (llama.cpp's "eval" rate).
    pub fn decode_tokens_per_sec(&self) -> f64 {
        if self.decode_secs > 0.0 {
            self.decode_steps as f64 / self.decode_secs
        } else {
            0.0
        }
    }
}

/// What was loaded, for logs and result configs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmInfo {
    /// The GGUF file.
    pub path: PathBuf,
    /// `general.name` (or the file stem).
    pub name: String,
    /// `general.architecture`.
    pub architecture: String,
    /// Layers.
    pub n_layer: usize,
    /// Hidden size.
    pub n_embd: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads.
    pub n_kv_head: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Context window used (≤ trained context).
    pub context_len: usize,
    /// Context the model was trained with.
    pub trained_context_len: usize,
    /// Weight tensors requantised to Q8_0 at load.
    pub requantized_tensors: usize,
    /// The layers' weight tensors whose prompt products run on AMX tiles
    /// ([`LoadOptions::amx`]); 0 on a CPU without AMX-BF16.
    #[serde(default)]
    pub amx_tensors: usize,
    /// Multiply-adds per token of the layers' weight matrices (attention and feed-forward
    /// projections; not the embedding lookup, the output projection, or attention over
    /// the context): what a prefill's compute ceiling divides the CPU's peak rate by.
    pub layer_macs_per_token: u64,
    /// Bytes of weights in memory.
    pub weight_bytes: usize,
    /// Load time, seconds (with the warm-up).
    pub load_secs: f64,
    /// Of which the warm-up ([`LoadOptions::warm_up`]), seconds; 0 without it.
    #[serde(default)]
    pub warm_up_secs: f64,
}

/// A loaded GGUF language model with its tokenizer and chat template.
pub struct Llm {
    path: PathBuf,
    name: String,
    architecture: String,
    model: model::Model,
    tok: tokenizer::GgufTokenizer,
    chat_template: Option<String>,
    context_len: usize,
    load_secs: f64,
    warm_up_secs: f64,
}

impl std::fmt::Debug for Llm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Llm")
            .field("path", &self.path)
            .field("architecture", &self.architecture)
            .field("context_len", &self.context_len)
            .finish()
    }
}

impl Llm {
    /// Load a GGUF file. Validates before loading anything: the file exists, its header
    /// parses, every tensor's data lies inside the file, and `general.architecture` is
    /// `qwen2` or `llama` — each failure an error naming the file.
    pub fn load(path: &Path, opts: &LoadOptions) -> Result<Self> {
        let t0 = Instant::now();
        crate::machine::keep_freed_memory();
        if opts.context_len == Some(0) {
            return Err(Error::param("context_len", "must be at least 1"));
        }
        let mut g = gguf::GgufFile::open(path)?;
        let architecture = g.str("general.architecture")?.to_string();
        let arch = match architecture.as_str() {
            "qwen2" => model::Arch::Qwen2,
            "llama" => model::Arch::Llama,
            other => {
                return Err(Error::bad_input(
                    path,
                    format!("unsupported architecture `{other}` (general.architecture); supported: qwen2, llama"),
                ))
            }
        };
        let cfg = model::Config::from_gguf(&g, arch)?;
        let tok = tokenizer::GgufTokenizer::from_gguf(&g)?;
        if tok.tokens.len() != cfg.vocab {
            return Err(Error::bad_input(path, "vocabulary size mismatch"));
        }
        let context_len = match opts.context_len {
            Some(c) if c > cfg.n_ctx_train => {
                return Err(Error::param(
                    "context_len",
                    format!(
                        "{c} exceeds the model's trained context of {} ({})",
                        cfg.n_ctx_train,
                        path.display()
                    ),
                ))
            }
            Some(c) => c,
            None => cfg.n_ctx_train.min(DEFAULT_CONTEXT_CAP),
        };
        let name = match g.get("general.name") {
            Some(_) => g.str("general.name")?.to_string(),
            None => path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        let chat_template = match g.get("tokenizer.chat_template") {
            Some(_) => Some(g.str("tokenizer.chat_template")?.to_string()),
            None => None,
        };
        let model = model::Model::load(
            &mut g,
            cfg,
            context_len,
            opts.requantize.resolve(),
            opts.f32_prefill,
            opts.amx,
        )?;
        let mut llm = Llm {
            path: path.to_path_buf(),
            name,
            architecture,
            model,
            tok,
            chat_template,
            context_len,
            load_secs: 0.0,
            warm_up_secs: 0.0,
        };
        if opts.warm_up {
            llm.warm_up()?;
        }
        llm.load_secs = t0.elapsed().as_secs_f64();
        Ok(llm)
    }

    /// Run a prompt of 32 tokens and one decoding step, discarding the result (the KV
    /// cache is cleared after): the weights' one-off preparation for the matrix kernels —
    /// candle's repacked tiles for Q4_K / Q6_K / Q8_0 products, the AMX kernel's bf16 tiles
    /// where the CPU has AMX — is made here instead of inside the next generation, so the
    /// first question runs as fast as the following ones. [`Llm::load`] calls it unless
    /// [`LoadOptions::warm_up`] is off; a second call costs one short generation.
    pub fn warm_up(&mut self) -> Result<()> {
        let t = Instant::now();
        let vocab = self.vocab_size().max(1);
        let n = WARM_UP_TOKENS
            .min(self.context_len.saturating_sub(1))
            .max(1);
        let ids: Vec<u32> = (0..n).map(|i| ((i * 7919 + 13) % vocab) as u32).collect();
        let path = self.path.clone();
        let fwd = |e: candle_core::Error| Error::bad_input(&path, format!("warm-up: {e}"));
        self.model.clear_cache();
        let logits = self.model.forward(&ids).map_err(fwd)?;
        if n + 1 < self.context_len {
            let mut cache = self.model.take_cache();
            self.model
                .decode_step(std::slice::from_mut(&mut cache), &[sample::argmax(&logits)])
                .map_err(fwd)?;
        }
        self.model.clear_cache();
        self.warm_up_secs += t.elapsed().as_secs_f64();
        Ok(())
    }

    /// Load the GGUF a config or command line names ([`crate::assets::ModelRef`]): a path
    /// (given to `resolve`, e.g. a config's [`resolve`](crate::pipeline::PipelineConfig::resolve)),
    /// one file of a hub repository (`hf:ORG/NAME[@REVISION]/FILE`, downloaded once) or an
    /// asset name. `field` names the setting in errors.
    pub fn from_model(
        value: &str,
        field: &'static str,
        resolve: impl Fn(&str) -> std::path::PathBuf,
        opts: &LoadOptions,
    ) -> Result<Self> {
        use crate::assets::{Assets, HubFile, ModelRef};
        match ModelRef::parse(value) {
            ModelRef::Path(p) => Self::load(&resolve(p), opts),
            ModelRef::Hub(h) => Self::load(&Assets::load()?.resolve_hub(&HubFile::parse(h, field)?)?, opts),
            ModelRef::Trained(_) => Err(Error::param(
                field,
                format!("`{value}`: a GGUF model is an asset name, a .gguf path or hf:ORG/NAME/FILE, not a trained: recipe"),
            )),
            ModelRef::Asset(a) => Self::from_asset(a, opts),
        }
    }

    /// Load the (single) `.gguf` file of asset `asset_name` from the cache
    /// (`data/assets.toml`), checksum-verified.
    pub fn from_asset(asset_name: &str, opts: &LoadOptions) -> Result<Self> {
        let assets = crate::assets::Assets::load()?;
        let spec = assets.spec(asset_name)?;
        let files: Vec<&String> = spec.files.keys().filter(|f| f.ends_with(".gguf")).collect();
        let [file] = files.as_slice() else {
            return Err(Error::param(
                "asset_name",
                format!(
                    "asset `{asset_name}` has {} .gguf files; expected exactly one",
                    files.len()
                ),
            ));
        };
        let path = assets.resolve(asset_name, file)?;
        Self::load(&path, opts)
    }

    /// `general.architecture` (`qwen2`, `llama`).
    pub fn architecture(&self) -> &str {
        &self.architecture
    }

    /// The context window: prompt plus generated tokens.
    pub fn context_len(&self) -> usize {
        self.context_len
    }

    /// `general.name` from the GGUF (or the file stem).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The GGUF file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every end-of-generation token id (sorted).
    pub fn eog_ids(&self) -> &[u32] {
        &self.tok.eog
    }

    /// Vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.tok.tokens.len()
    }

    /// The text of one vocabulary entry as stored in the GGUF (byte-level symbols).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.tok.tokens.get(id as usize).map(|s| s.as_str())
    }

    /// A summary of what was loaded.
    pub fn info(&self) -> LlmInfo {
        let c = &self.model.cfg;
        LlmInfo {
            path: self.path.clone(),
            name: self.name.clone(),
            architecture: self.architecture.clone(),
            n_layer: c.n_layer,
            n_embd: c.n_embd,
            n_head: c.n_head,
            n_kv_head: c.n_kv_head,
            vocab: c.vocab,
            context_len: self.context_len,
            trained_context_len: c.n_ctx_train,
            requantized_tensors: self.model.requantized,
            amx_tensors: self.model.amx_weights,
            layer_macs_per_token: self.model.layer_macs,
            weight_bytes: self.model.weight_bytes,
            load_secs: self.load_secs,
            warm_up_secs: self.warm_up_secs,
        }
    }

    /// Token ids of `text`. Special tokens written in the text (`<|im_start|>`) become
    /// their ids; `add_special` adds BOS / EOS where the GGUF asks for them
    /// (`tokenizer.ggml.add_bos_token`, `add_eos_token`).
    pub fn tokenize(&self, text: &str, add_special: bool) -> Result<Vec<u32>> {
        self.tok.encode(text, add_special)
    }

    /// Text of `ids`; control tokens (BOS, `<|im_end|>`) are left out.
    pub fn detokenize(&self, ids: &[u32]) -> Result<String> {
        self.tok.decode(ids)
    }

    /// The chat template in use (the GGUF's unless overridden).
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    /// Replace the chat template (a Jinja string as in `tokenizer.chat_template`).
    pub fn set_chat_template(&mut self, template: impl Into<String>) {
        self.chat_template = Some(template.into());
    }

    /// Render `messages` with the chat template; `add_generation_prompt` appends the
    /// assistant's turn opener. A template that is missing or fails to render is an error
    /// naming the file and minijinja's message.
    pub fn render_chat(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String> {
        let Some(t) = &self.chat_template else {
            return Err(Error::bad_input(
                &self.path,
                "the GGUF has no chat template (tokenizer.chat_template); set one with set_chat_template",
            ));
        };
        let tok_text = |id: Option<u32>| {
            id.and_then(|i| self.tok.tokens.get(i as usize))
                .cloned()
                .unwrap_or_default()
        };
        template::render(
            t,
            messages,
            add_generation_prompt,
            &tok_text(self.tok.bos),
            &tok_text(self.tok.eos),
        )
        .map_err(|e| {
            Error::bad_input(
                &self.path,
                format!("chat template (tokenizer.chat_template) failed to render: {e}"),
            )
        })
    }

    /// Tokenize `prompt` (special tokens parsed, BOS as the GGUF asks) and generate.
    pub fn generate(&mut self, prompt: &str, params: &GenerateParams) -> Result<Generation> {
        let ids = self.tokenize(prompt, true)?;
        self.generate_ids(&ids, params)
    }

    fn check_params(&self, prompt_ids: &[u32], p: &GenerateParams) -> Result<()> {
        if prompt_ids.is_empty() {
            return Err(Error::param("prompt", "the prompt has no tokens"));
        }
        if let Some(bad) = prompt_ids
            .iter()
            .find(|&&i| i as usize >= self.vocab_size())
        {
            return Err(Error::param(
                "prompt",
                format!(
                    "token id {bad} is outside the vocabulary of {}",
                    self.vocab_size()
                ),
            ));
        }
        if prompt_ids.len() >= self.context_len {
            return Err(Error::param(
                "prompt",
                format!(
                    "{} prompt tokens leave no room in the context of {}",
                    prompt_ids.len(),
                    self.context_len
                ),
            ));
        }
        if p.max_new_tokens == 0 {
            return Err(Error::param("max_new_tokens", "must be at least 1"));
        }
        if p.prefill_batch == 0 {
            return Err(Error::param("prefill_batch", "must be at least 1"));
        }
        if p.stop_strings.iter().any(|s| s.is_empty()) {
            return Err(Error::param("stop_strings", "a stop string is empty"));
        }
        if let Sampling::TopP {
            temperature, top_p, ..
        } = p.sampling
        {
            if !(temperature > 0.0 && temperature.is_finite()) {
                return Err(Error::param(
                    "temperature",
                    format!("{temperature} is not > 0"),
                ));
            }
            if !(top_p > 0.0 && top_p <= 1.0) {
                return Err(Error::param("top_p", format!("{top_p} is not in (0, 1]")));
            }
        }
        Ok(())
    }

    fn run(&mut self, ids: &[u32]) -> Result<Vec<f32>> {
        let path = self.path.clone();
        self.model
            .forward(ids)
            .map_err(|e| Error::bad_input(path, format!("forward pass: {e}")))
    }

    /// The logits of the token that would follow `ids` (one prefill; the KV cache is reset
    /// first): for scoring answers by their first token, as an LLM judge does.
    ///
    /// Errors: an empty prompt, or one longer than the context.
    pub fn next_token_logits(&mut self, ids: &[u32]) -> Result<Vec<f32>> {
        if ids.is_empty() {
            return Err(Error::param("ids", "the prompt has no token"));
        }
        if ids.len() > self.context_len {
            return Err(Error::param(
                "ids",
                format!(
                    "{} tokens exceed the context of {}",
                    ids.len(),
                    self.context_len
                ),
            ));
        }
        self.model.clear_cache();
        let mut logits = Vec::new();
        for chunk in ids.chunks(GenerateParams::default().prefill_batch) {
            logits = self.run(chunk)?;
        }
        Ok(logits)
    }

    /// Generate from prompt token ids (see the module doc). The KV cache is reset first,
    /// so calls are independent.
    pub fn generate_ids(
        &mut self,
        prompt_ids: &[u32],
        params: &GenerateParams,
    ) -> Result<Generation> {
        let mut g = self.generate_batch(&[prompt_ids], params)?;
        g.pop()
            .ok_or_else(|| Error::param("prompt", "no generation came back"))
    }

    /// Generate from several prompts together: each prompt is prefilled on its own, then
    /// the sequences are decoded in lockstep, one forward pass per step for all that are
    /// still generating (each weight matrix read once per step, not once per sequence).
    /// Each sequence keeps its own KV cache, sampler and stop rules, so every result is
    /// what [`Llm::generate_ids`] gives for that prompt alone (for greedy decoding,
    /// token for token, as far as candle's matmul computes a row the same way whatever
    /// the number of rows; `tests` check this on the shipped models).
    ///
    /// Timings per result: `prefill_secs` is its own prompt's; `decode_secs` runs from
    /// the batch's first decoding step to this sequence's last (shared with the others).
    ///
    /// Errors: any prompt failing the checks of [`Llm::generate_ids`] (naming its
    /// position); a forward pass failing.
    pub fn generate_batch(
        &mut self,
        prompts: &[&[u32]],
        params: &GenerateParams,
    ) -> Result<Vec<Generation>> {
        for (i, p) in prompts.iter().enumerate() {
            self.check_params(p, params).map_err(|e| {
                if prompts.len() > 1 {
                    Error::param(
                        "prompt",
                        format!("prompt {} of {}: {e}", i + 1, prompts.len()),
                    )
                } else {
                    e
                }
            })?;
        }
        let path = self.path.clone();
        let fwd = |e: candle_core::Error| Error::bad_input(&path, format!("forward pass: {e}"));
        let mut seqs = Vec::with_capacity(prompts.len());
        for p in prompts {
            self.model.clear_cache();
            let t0 = Instant::now();
            let mut logits = Vec::new();
            for chunk in p.chunks(params.prefill_batch) {
                logits = self.model.forward(chunk).map_err(&fwd)?;
            }
            let mut cache = self.model.take_cache();
            let room = (p.len() + params.max_new_tokens).min(self.context_len);
            self.model.reserve(&mut cache, room).map_err(&fwd)?;
            seqs.push(Seq {
                cache,
                logits,
                out: Vec::new(),
                logprobs: Vec::new(),
                rng: match params.sampling {
                    Sampling::TopP { seed, .. } => rand_chacha::ChaCha8Rng::seed_from_u64(seed),
                    Sampling::Greedy => rand_chacha::ChaCha8Rng::seed_from_u64(0),
                },
                cut: None,
                stop: None,
                steps: 0,
                prefill_secs: t0.elapsed().as_secs_f64(),
                decode_secs: 0.0,
            });
        }
        let t1 = Instant::now();
        loop {
            let mut active = Vec::new();
            let mut next_ids = Vec::new();
            for (i, s) in seqs.iter_mut().enumerate() {
                if s.stop.is_some() {
                    continue;
                }
                match s.advance(&self.tok, params, self.context_len)? {
                    Some(next) => {
                        active.push(i);
                        next_ids.push(next);
                    }
                    None => {
                        s.decode_secs = t1.elapsed().as_secs_f64();
                        s.cache = Default::default();
                    }
                }
            }
            if active.is_empty() {
                break;
            }
            let mut caches: Vec<_> = active
                .iter()
                .map(|&i| std::mem::take(&mut seqs[i].cache))
                .collect();
            let out = self
                .model
                .decode_step(&mut caches, &next_ids)
                .map_err(&fwd)?;
            for ((&i, cache), logits) in active.iter().zip(caches).zip(out) {
                let s = &mut seqs[i];
                s.cache = cache;
                s.logits = logits;
                s.steps += 1;
            }
        }
        seqs.into_iter()
            .zip(prompts)
            .map(|(s, p)| {
                let text = match s.cut {
                    Some(t) => t,
                    None => self.tok.decode(&s.out)?,
                };
                Ok(Generation {
                    generated_tokens: s.out.len(),
                    token_ids: s.out,
                    text,
                    prompt_tokens: p.len(),
                    decode_steps: s.steps,
                    prefill_secs: s.prefill_secs,
                    decode_secs: s.decode_secs,
                    stop: s.stop.unwrap_or(StopReason::MaxTokens),
                    token_logprobs: s.logprobs,
                })
            })
            .collect()
    }
}

/// One sequence of [`Llm::generate_batch`].
struct Seq {
    cache: model::KvCache,
    /// Logits of the position after the last token run.
    logits: Vec<f32>,
    out: Vec<u32>,
    /// Log-probability of each token of `out`.
    logprobs: Vec<f32>,
    rng: rand_chacha::ChaCha8Rng,
    /// The text cut before a stop string, once one appeared.
    cut: Option<String>,
    stop: Option<StopReason>,
    steps: usize,
    prefill_secs: f64,
    decode_secs: f64,
}

impl Seq {
    /// Pick the next token from the logits and apply the stop rules: `Some(token)` to run
    /// it, or `None` when the sequence has stopped (`stop` set).
    fn advance(
        &mut self,
        tok: &tokenizer::GgufTokenizer,
        params: &GenerateParams,
        context_len: usize,
    ) -> Result<Option<u32>> {
        let next = match params.sampling {
            Sampling::Greedy => sample::argmax(&self.logits),
            Sampling::TopP {
                temperature, top_p, ..
            } => sample::top_p(&self.logits, temperature, top_p, &mut self.rng),
        };
        if tok.eog.binary_search(&next).is_ok() {
            self.stop = Some(StopReason::Eos);
            return Ok(None);
        }
        self.out.push(next);
        self.logprobs.push(sample::log_prob(&self.logits, next));
        if !params.stop_strings.is_empty() {
            let text = tok.decode(&self.out)?;
            let first = params
                .stop_strings
                .iter()
                .filter_map(|s| text.find(s.as_str()))
                .min();
            if let Some(i) = first {
                self.cut = Some(text[..i].to_string());
                self.stop = Some(StopReason::StopString);
                return Ok(None);
            }
        }
        if self.out.len() >= params.max_new_tokens || self.cache.len() >= context_len {
            self.stop = Some(StopReason::MaxTokens);
            return Ok(None);
        }
        Ok(Some(next))
    }
}

/// A loaded [`Llm`] shared by several users, e.g. a pipeline's reader and its LLM query
/// transform, so the model's weights are loaded and held once. Cloning clones the handle,
/// not the model. Calls are serialised: each [`SharedLlm::lock`] holds the model until the
/// guard is dropped (every generation resets the KV cache, so users do not see each
/// other's state).
#[derive(Debug, Clone)]
pub struct SharedLlm(Arc<Mutex<Llm>>);

impl SharedLlm {
    /// Share `llm`.
    pub fn new(llm: Llm) -> Self {
        SharedLlm(Arc::new(Mutex::new(llm)))
    }

    /// The model, for one or more calls. A model whose previous user panicked mid-call is
    /// an error (its KV cache may be half-written), not a panic.
    pub fn lock(&self) -> Result<MutexGuard<'_, Llm>> {
        self.0.lock().map_err(|_| {
            Error::param(
                "llm",
                "the shared model is poisoned: an earlier call panicked while using it",
            )
        })
    }

    /// Whether `self` and `other` are handles of the same loaded model.
    pub fn same_model(&self, other: &SharedLlm) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Options of a [`GenerativeReader`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReaderOptions {
    /// Name for tables and traces (empty: the model's `general.name`).
    pub name: String,
    /// Optional system message.
    pub system: Option<String>,
    /// The user message: `{question}` and `{passages}` are replaced (in one pass: text
    /// put in for one is not searched for the other).
    pub prompt: String,
    /// One passage: `{rank}` (1-based), `{id}`, `{title}`, `{text}` are replaced (in one
    /// pass).
    pub passage: String,
    /// Between passages.
    pub passage_separator: String,
    /// Decoding.
    pub params: GenerateParams,
    /// Which answers are abstentions.
    pub abstention: AbstentionRule,
    /// Questions decoded together by [`Reader::read_many`] (≥ 1; see
    /// [`Llm::generate_batch`]). 1 reads one question at a time.
    #[serde(skip_serializing_if = "is_one")]
    pub batch: usize,
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            name: String::new(),
            system: Some(
                "You answer questions using only the passages you are given. Answer with a short phrase, \
                 not a sentence. If the passages do not contain the answer, reply exactly: Not found"
                    .into(),
            ),
            prompt: "Passages:\n{passages}\n\nQuestion: {question}\nAnswer:".into(),
            passage: "[{rank}] {text}".into(),
            passage_separator: "\n\n".into(),
            params: GenerateParams {
                max_new_tokens: 48,
                stop_strings: vec!["\n\n".into()],
                ..GenerateParams::default()
            },
            abstention: AbstentionRule::default(),
            batch: 1,
        }
    }
}

/// A prompt built for a question and its passages, after fitting the window.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltPrompt {
    /// The rendered chat text.
    pub text: String,
    /// Its token ids.
    pub ids: Vec<u32>,
    /// Passages kept (a rank-order prefix).
    pub kept: usize,
    /// Ids of the dropped passages.
    pub dropped: Vec<String>,
}

/// A [`Reader`] that generates the answer with an [`Llm`].
#[derive(Debug)]
pub struct GenerativeReader {
    llm: SharedLlm,
    opts: ReaderOptions,
    name: String,
    last_prompt: String,
    last_prompts: Vec<String>,
}

impl GenerativeReader {
    /// A reader over `llm`. Checks that the prompt template has `{question}` and
    /// `{passages}` and that the chat template renders.
    pub fn new(llm: Llm, opts: ReaderOptions) -> Result<Self> {
        Self::with_shared(SharedLlm::new(llm), opts)
    }

    /// A reader over a model shared with other users (see [`SharedLlm`]); the checks of
    /// [`GenerativeReader::new`].
    pub fn with_shared(llm: SharedLlm, opts: ReaderOptions) -> Result<Self> {
        check_templates(&opts.prompt, &opts.passage)?;
        if opts.batch == 0 {
            return Err(Error::param("batch", "must be at least 1"));
        }
        let (context_len, model_name) = {
            let m = llm.lock()?;
            (m.context_len(), m.name().to_string())
        };
        if opts.params.max_new_tokens >= context_len {
            return Err(Error::param(
                "max_new_tokens",
                format!(
                    "{} leaves no room in the context of {}",
                    opts.params.max_new_tokens, context_len
                ),
            ));
        }
        let name = if opts.name.is_empty() {
            model_name
        } else {
            opts.name.clone()
        };
        let r = GenerativeReader {
            llm,
            opts,
            name,
            last_prompt: String::new(),
            last_prompts: Vec::new(),
        };
        r.render(&*r.llm.lock()?, "?", "")?;
        Ok(r)
    }

    /// The model's handle: clone it to share the loaded model (an LLM query transform),
    /// or [`SharedLlm::lock`] it to use or change the model (its chat template).
    pub fn llm(&self) -> &SharedLlm {
        &self.llm
    }

    /// The options.
    pub fn options(&self) -> &ReaderOptions {
        &self.opts
    }

    /// The chat text of the last [`Reader::read`] call.
    pub fn last_prompt(&self) -> &str {
        &self.last_prompt
    }

    fn render(&self, llm: &Llm, question: &str, passages: &str) -> Result<String> {
        let user = user_message(&self.opts.prompt, question, passages);
        let mut msgs = Vec::new();
        if let Some(s) = &self.opts.system {
            msgs.push(ChatMessage::system(s.clone()));
        }
        msgs.push(ChatMessage::user(user));
        llm.render_chat(&msgs, true)
    }

    fn join(&self, passages: &[Context]) -> String {
        passages
            .iter()
            .enumerate()
            .map(|(i, p)| format_passage(&self.opts.passage, i + 1, p))
            .collect::<Vec<_>>()
            .join(&self.opts.passage_separator)
    }

    /// Build the prompt for `question` over `passages` (rank order), dropping the
    /// lowest-ranked passages that do not fit `context_len - max_new_tokens`.
    pub fn build_prompt(&self, question: &str, passages: &[Context]) -> Result<BuiltPrompt> {
        let llm = self.llm.lock()?;
        self.build_prompt_with(&llm, question, passages)
    }

    fn build_prompt_with(
        &self,
        llm: &Llm,
        question: &str,
        passages: &[Context],
    ) -> Result<BuiltPrompt> {
        let question = check_question(question)?;
        let room = llm.context_len() - self.opts.params.max_new_tokens;
        let overhead = llm.tokenize(&self.render(llm, question, "")?, true)?.len();
        if overhead > room {
            return Err(Error::param(
                "question",
                format!(
                    "the prompt without passages has {overhead} tokens; the window leaves {room} \
                     ({} context - {} max_new_tokens)",
                    llm.context_len(),
                    self.opts.params.max_new_tokens
                ),
            ));
        }
        let sep = llm.tokenize(&self.opts.passage_separator, false)?.len();
        let mut rank = 0usize;
        let mut err = None;
        let (mut kept, _) = fit_passages(passages, room - overhead, |p| {
            rank += 1;
            match llm.tokenize(&format_passage(&self.opts.passage, rank, p), false) {
                Ok(ids) => ids.len() + sep,
                Err(e) => {
                    err = Some(e);
                    usize::MAX / 4
                }
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        // Token counts of the parts need not add up exactly: shrink until the whole fits.
        loop {
            let text = self.render(llm, question, &self.join(&passages[..kept]))?;
            let ids = llm.tokenize(&text, true)?;
            if ids.len() <= room || kept == 0 {
                let dropped = passages[kept..].iter().map(|p| p.id.clone()).collect();
                return Ok(BuiltPrompt {
                    text,
                    ids,
                    kept,
                    dropped,
                });
            }
            kept -= 1;
        }
    }
}

impl GenerativeReader {
    /// The answer to a question from its generation.
    fn answer(&self, passages: &[Context], built: BuiltPrompt, g: Generation) -> Answer {
        let text = g.text.trim().to_string();
        Answer {
            abstained: self.opts.abstention.is_abstention(&text),
            text,
            passage_ids: passages[..built.kept]
                .iter()
                .map(|p| p.id.clone())
                .collect(),
            dropped: built.dropped,
            evidence: None,
            score: None,
            usage: g.usage(),
        }
    }

    /// The chat texts of the questions of the last [`Reader::read_many`] call (one for
    /// [`Reader::read`]), in order; empty text for a question whose prompt failed.
    pub fn last_prompts(&self) -> &[String] {
        &self.last_prompts
    }
}

impl Reader for GenerativeReader {
    fn name(&self) -> &str {
        &self.name
    }

    fn read(&mut self, question: &str, passages: &[Context]) -> Result<Answer> {
        let mut llm = self.llm.lock()?;
        let built = self.build_prompt_with(&llm, question, passages)?;
        let g = llm.generate_ids(&built.ids, &self.opts.params)?;
        drop(llm);
        self.last_prompt = built.text.clone();
        self.last_prompts = vec![built.text.clone()];
        Ok(self.answer(passages, built, g))
    }

    fn concurrency(&self) -> usize {
        self.opts.batch
    }

    /// Decodes the questions together ([`Llm::generate_batch`]) in groups of
    /// [`ReaderOptions::batch`]; a question whose prompt cannot be built gets its error and
    /// the others are read.
    fn read_many(&mut self, items: &[(&str, &[Context])]) -> Vec<Result<Answer>> {
        let mut out: Vec<Option<Result<Answer>>> = Vec::with_capacity(items.len());
        let mut prompts = Vec::new();
        for group in items.chunks(self.opts.batch.max(1)) {
            let mut llm = match self.llm.lock() {
                Ok(l) => l,
                Err(e) => {
                    let msg = e.to_string();
                    out.extend(
                        group
                            .iter()
                            .map(|_| Some(Err(Error::param("llm", msg.clone())))),
                    );
                    continue;
                }
            };
            let mut built = Vec::with_capacity(group.len());
            for (q, p) in group {
                match self.build_prompt_with(&llm, q, p) {
                    Ok(b) => {
                        prompts.push(b.text.clone());
                        built.push(Some(b));
                    }
                    Err(e) => {
                        prompts.push(String::new());
                        built.push(None);
                        out.push(Some(Err(e)));
                        continue;
                    }
                }
                out.push(None);
            }
            let ids: Vec<&[u32]> = built.iter().flatten().map(|b| b.ids.as_slice()).collect();
            let gens = if ids.is_empty() {
                Ok(Vec::new())
            } else {
                llm.generate_batch(&ids, &self.opts.params)
            };
            drop(llm);
            let base = out.len() - group.len();
            match gens {
                Ok(gens) => {
                    let mut gens = gens.into_iter();
                    for (j, b) in built.into_iter().enumerate() {
                        if let (Some(b), Some(g)) = (b, gens.next()) {
                            out[base + j] = Some(Ok(self.answer(group[j].1, b, g)));
                        }
                    }
                }
                Err(e) => {
                    let msg = e.to_string();
                    for (j, b) in built.iter().enumerate() {
                        if b.is_some() {
                            out[base + j] = Some(Err(Error::param(
                                "reader",
                                format!("batch of {} questions: {msg}", group.len()),
                            )));
                        }
                    }
                }
            }
        }
        if let Some(p) = prompts.last() {
            self.last_prompt = p.clone();
        }
        self.last_prompts = prompts;
        out.into_iter()
            .map(|a| a.unwrap_or_else(|| Err(Error::param("reader", "no answer came back"))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text inserted for one placeholder is not scanned for the others: a passage that
    /// holds `{question}` or `{text}`, a title that holds `{text}`.
    #[test]
    fn placeholders_inside_passages_are_kept() {
        let mut p = Context::new("p{rank}", "Write {question} here; {text} too.");
        p.title = "The {text} title".into();
        assert_eq!(
            format_passage("[{rank}] {title} ({id}): {text}", 2, &p),
            "[2] The {text} title (p{rank}): Write {question} here; {text} too."
        );
        let passages = format_passage("{text}", 1, &p);
        assert_eq!(
            user_message(
                "Passages:\n{passages}\nQuestion: {question}",
                "Who?",
                &passages
            ),
            "Passages:\nWrite {question} here; {text} too.\nQuestion: Who?"
        );
        assert_eq!(
            user_message("{question} / {passages}", "What is {passages}?", "P"),
            "What is {passages}? / P"
        );
    }

    /// The SmolLM2 test fixture. scripts/test fetches it; a missing one fails, never skips.
    fn smol_path() -> std::path::PathBuf {
        crate::assets::Assets::load()
            .and_then(|a| {
                a.resolve(
                    "smollm2-135m-instruct-gguf",
                    "SmolLM2-135M-Instruct.Q4_1.gguf",
                )
            })
            .expect("SmolLM2 GGUF in the asset cache (cargo run --release --bin assets -- fetch smollm2-135m-instruct-gguf)")
    }

    /// `LoadOptions::amx` decides where prompts are multiplied: `amx: false` puts no layer
    /// weight on AMX tiles; on a CPU with AMX-BF16 the default puts them there, and the two
    /// prefills give the same next token with close logits (bf16 tiles against candle's
    /// int8 products) and different ones (the switch took effect).
    #[test]
    fn amx_option_switches_the_prompt_kernel() {
        let path = smol_path();
        let mut off = Llm::load(
            &path,
            &LoadOptions {
                amx: false,
                ..LoadOptions::default()
            },
        )
        .unwrap();
        assert_eq!(off.info().amx_tensors, 0);
        if !crate::kernels::amx::available() {
            crate::kernels::testing::skip(
                "read::generative::tests::amx_option_switches_the_prompt_kernel",
                "CPU has no AMX-BF16 with tile data (or WORKBENCH_LLM_NO_AMX is set): only the off side checked",
            );
            return;
        }
        let mut on = Llm::load(&path, &LoadOptions::default()).unwrap();
        // SmolLM2's 30 layers × 7 matrices, Q8_0 after requantisation: all on tiles.
        assert_eq!(on.info().amx_tensors, 30 * 7, "{:?}", on.info());
        let ids = on
            .tokenize(
                &"The quick brown fox jumps over the lazy dog near the river bank. ".repeat(3),
                false,
            )
            .unwrap();
        assert!(ids.len() >= 16, "{} tokens", ids.len());
        let (a, b) = (
            on.model.forward(&ids).unwrap(),
            off.model.forward(&ids).unwrap(),
        );
        let diff = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        eprintln!("AMX vs candle prefill: max |Δlogit| {diff}");
        assert_eq!(
            sample::argmax(&a),
            sample::argmax(&b),
            "max |Δlogit| {diff}"
        );
        assert!(diff > 0.0, "both prefills took the same kernel");
        assert!(diff < 1.5, "max |Δlogit| {diff}");
    }

    /// The f32-copy prefill (`LoadOptions::f32_prefill`) and the quantised one give the same
    /// next token and close logits on a prompt long enough to take the f32 path; decoding
    /// after it (quantised weights on both) continues the same way.
    #[test]
    fn f32_prefill_matches_quantised_prefill() {
        let path = smol_path();
        let mut quant = Llm::load(&path, &LoadOptions::default()).unwrap();
        let mut f32 = Llm::load(
            &path,
            &LoadOptions {
                f32_prefill: true,
                ..LoadOptions::default()
            },
        )
        .unwrap();
        // Every layer weight has its f32 copy on top (4 bytes each).
        assert!(f32.model.weight_bytes > quant.model.weight_bytes * 3);
        let ids = quant
            .tokenize(
                &"The quick brown fox jumps over the lazy dog near the river bank. ".repeat(3),
                false,
            )
            .unwrap();
        assert!(ids.len() >= model::F32_MIN_ROWS, "{} tokens", ids.len());
        let (a, b) = (
            quant.model.forward(&ids).unwrap(),
            f32.model.forward(&ids).unwrap(),
        );
        let diff = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        eprintln!("f32 vs quantised prefill: max |Δlogit| {diff}");
        assert_eq!(
            sample::argmax(&a),
            sample::argmax(&b),
            "max |Δlogit| {diff}"
        );
        // They differ by the quantised path's Q8_0 requantisation and activation
        // quantisation only: measured 0.74 of logits ~±20 (AVX2 EPYC, 2026-11-25); the
        // quantised path's own one-pass vs chunked prefill differs by 0.50. A wrong f32
        // product (layout, transpose) moves logits by whole units and the argmax.
        assert!(diff < 1.5, "max |Δlogit| {diff}");
        assert!(diff > 0.0, "the f32 path was not taken");
        let next = [sample::argmax(&a)];
        let (a2, b2) = (
            quant.model.forward(&next).unwrap(),
            f32.model.forward(&next).unwrap(),
        );
        assert_eq!(sample::argmax(&a2), sample::argmax(&b2));
    }

    /// A decoding step of several sequences gives each the bit-identical logits of the same
    /// step taken alone, on Qwen2.5-Coder 0.5B (Q4_K with Q6_K tensors, whose single-row
    /// and multi-row kernels differ in candle) and on SmolLM2 (Q8_0).
    #[test]
    fn batched_decode_step_is_bit_identical_to_single() {
        let qwen = Llm::from_asset("qwen2.5-coder-0.5b-instruct-gguf", &LoadOptions::default())
            .expect("Qwen2.5-Coder 0.5B GGUF in the asset cache (scripts/test fetches it)");
        let smol = Llm::load(&smol_path(), &LoadOptions::default()).unwrap();
        for mut llm in [qwen, smol] {
            let texts = [
                "The quick brown fox jumps over the lazy dog near the river bank.",
                "Paris is the capital of France.",
                "Rust is a systems programming language focused on safety, speed and concurrency.",
            ];
            let prompts: Vec<Vec<u32>> = texts
                .iter()
                .map(|t| llm.tokenize(t, false).unwrap())
                .collect();
            let next = [11u32, 264, 1000];
            let mut alone = Vec::new();
            for (p, &t) in prompts.iter().zip(&next) {
                llm.model.clear_cache();
                llm.model.forward(p).unwrap();
                let mut c = llm.model.take_cache();
                alone.push(
                    llm.model
                        .decode_step(std::slice::from_mut(&mut c), &[t])
                        .unwrap(),
                );
            }
            let mut caches = Vec::new();
            for p in &prompts {
                llm.model.clear_cache();
                llm.model.forward(p).unwrap();
                caches.push(llm.model.take_cache());
            }
            let together = llm.model.decode_step(&mut caches, &next).unwrap();
            for (i, a) in alone.iter().enumerate() {
                assert!(a[0] == together[i], "{}: sequence {i} differs", llm.name());
            }
        }
    }

    /// Prefill in one pass, in chunks, and token by token: the same last logits.
    #[test]
    fn chunked_prefill_matches_one_pass() {
        let path = smol_path();
        let mut llm = Llm::load(&path, &LoadOptions::default()).unwrap();
        let ids = llm
            .tokenize(
                "The quick brown fox jumps over the lazy dog near the river bank.",
                false,
            )
            .unwrap();
        let n = ids.len();
        llm.model.clear_cache();
        let one = llm.model.forward(&ids).unwrap();
        let mut diffs = Vec::new();
        for chunk in [1usize, 3, 5] {
            llm.model.clear_cache();
            let mut last = Vec::new();
            for c in ids.chunks(chunk) {
                last = llm.model.forward(c).unwrap();
            }
            assert_eq!(llm.model.cached(), n);
            let diff = one
                .iter()
                .zip(&last)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert_eq!(sample::argmax(&last), sample::argmax(&one), "chunk {chunk}");
            diffs.push((chunk, diff, last));
        }
        // Chunkings agree with each other; the one-pass prefill differs by quantised
        // arithmetic only (measured: max |Δlogit| 0.50 of logits ~±20, same argmax).
        for d in &diffs[1..] {
            let dd =
                d.2.iter()
                    .zip(&diffs[0].2)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
            assert!(dd < 1e-3, "chunk {} vs 1: {dd}", d.0);
        }
        assert!(
            diffs.iter().all(|d| d.1 < 1.0),
            "one pass vs chunks: {:?}",
            diffs.iter().map(|d| (d.0, d.1)).collect::<Vec<_>>()
        );
    }
}
