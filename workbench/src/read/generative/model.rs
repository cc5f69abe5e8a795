//! The decoder-only transformer shared by the `llama` and `qwen2` GGUF architectures, on
//! candle's quantized matmuls (`QMatMul`), with a growable KV cache and batched prefill.
//!
//! The two architectures differ only in what the GGUF says: `qwen2` has biases on the
//! q/k/v projections and rotates query/key halves (NeoX RoPE); `llama` has no biases and
//! rotates adjacent pairs (llama.cpp permutes Llama's q/k weights at conversion). Grouped-
//! query attention is computed without repeating the KV heads: the queries of the heads
//! sharing a KV head are stacked as rows of one matmul against that head's cache.

use super::gguf::GgufFile;
use crate::kernels::cpu::switched_off;
use crate::kernels::{amx, decode_attn, prefill_attn, q6k, silu};
use crate::{Error, Result};
use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{DType, Device, Module, Storage, Tensor};
use std::sync::Arc;

/// Architectures this module runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arch {
    Llama,
    Qwen2,
}

/// Hyper-parameters read from the GGUF metadata.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub arch: Arch,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    pub eps: f32,
    pub rope_base: f32,
    pub n_ctx_train: usize,
    pub vocab: usize,
}

struct Layer {
    /// The q, k, v and gate, up weights, for candle's fused single-row matmul (one
    /// activation quantisation and one parallel region per group) in decode.
    qkv_t: [Arc<QTensor>; 3],
    gate_up_t: [Arc<QTensor>; 2],
    attn_norm: Tensor,
    wq: Weight,
    wk: Weight,
    wv: Weight,
    bq: Option<Tensor>,
    bk: Option<Tensor>,
    bv: Option<Tensor>,
    wo: Weight,
    ffn_norm: Tensor,
    gate: Weight,
    up: Weight,
    down: Weight,
}

/// A matmul weight: candle's quantised form, optionally an f32 copy that prefill
/// multiplies with gemm (see [`super::LoadOptions::f32_prefill`]), and for Q6_K on CPUs
/// with AVX-512 the tensor for [`q6k::matmul`], which decoding uses instead of candle.
struct Weight {
    q: QMatMul,
    f32: Option<Tensor>,
    q6k: Option<Arc<QTensor>>,
    /// Multiply several decoding rows one row at a time (see [`row_exact`]).
    per_row: bool,
    /// Q4_K: multiply many decoding rows in groups that stay off candle's AMX kernel.
    grouped: bool,
    /// For quantised weights on CPUs with AMX: the tensor, and its [`amx::pack`]ing, made at
    /// the first prefill that uses it.
    amx: Option<(Arc<QTensor>, std::sync::OnceLock<Option<amx::Packed>>)>,
}

/// Whether candle computes a row of `x · Wᵀ` differently for one row than for several:
/// for Q6_K it runs one kernel on the compact blocks for a single row and another on
/// repacked tiles for more, and their sums differ in the last bits (Q4_K and Q8_0 give
/// bit-identical rows either way, Q4_K below [`CANDLE_AMX_ROWS`] rows). Batched decoding multiplies such weights with
/// [`q6k::matmul`] (the same for any number of rows) where the CPU runs it, else row by
/// row, so that each sequence gets exactly the logits it gets alone.
fn row_exact(dtype: candle_core::quantized::GgmlDType) -> bool {
    dtype == candle_core::quantized::GgmlDType::Q6K
}

/// Rows from which candle multiplies Q4_K weights on its AMX-INT8 tiles (on CPUs with
/// AMX), whose sums round differently from its kernel for fewer rows.
const CANDLE_AMX_ROWS: usize = 32;

/// `x · Wᵀ` with the quantised weights: row by row when `per_row` and `x` has several; in
/// groups of fewer than [`CANDLE_AMX_ROWS`] rows when `grouped`, so that each row gets the
/// sums it gets alone.
fn qforward(q: &QMatMul, per_row: bool, grouped: bool, x: &Tensor) -> candle_core::Result<Tensor> {
    let rows = x.dim(0)?;
    let step = if per_row {
        1
    } else if grouped {
        CANDLE_AMX_ROWS - 1
    } else {
        rows
    };
    if rows <= step {
        return q.forward(x);
    }
    let parts = (0..rows)
        .step_by(step)
        .map(|r| q.forward(&x.narrow(0, r, step.min(rows - r))?))
        .collect::<candle_core::Result<Vec<_>>>()?;
    Tensor::cat(&parts, 0)
}

/// Rows from which a matmul uses the f32 copy (when there is one): one or a few rows are
/// memory-bound, where the quantised weights (a quarter of the bytes) win.
pub(crate) const F32_MIN_ROWS: usize = 16;

/// Rows from which prefill multiplies with [`amx::matmul`] (where it runs).
const AMX_MIN_ROWS: usize = 16;

impl Weight {
    fn new(t: Arc<QTensor>, f32: Option<Tensor>, amx: bool) -> candle_core::Result<Self> {
        let exact = row_exact(t.dtype());
        let fast = exact && q6k::available();
        let tiles = amx && amx::handles(t.dtype()) && amx::available();
        Ok(Weight {
            q: QMatMul::from_arc(t.clone())?,
            f32,
            per_row: exact && !fast,
            grouped: t.dtype() == candle_core::quantized::GgmlDType::Q4K,
            q6k: fast.then(|| t.clone()),
            amx: tiles.then(|| (t, std::sync::OnceLock::new())),
        })
    }

    /// `x · Wᵀ` for `x: [rows, k]` in prefill (a single row as in decoding).
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let rows = x.dim(0)?;
        match &self.f32 {
            Some(w) if rows >= F32_MIN_ROWS => x.matmul(&w.t()?),
            _ if rows == 1 => self.decode(x),
            _ => match self.prefill_amx(x)? {
                Some(y) => Ok(y),
                None => self.q.forward(x),
            },
        }
    }

    /// `x · Wᵀ` with [`amx::matmul`], when this weight has it and `x` has enough rows.
    fn prefill_amx(&self, x: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let Some((t, packed)) = &self.amx else {
            return Ok(None);
        };
        let (rows, k) = x.dims2()?;
        if rows < AMX_MIN_ROWS || x.dtype() != DType::F32 {
            return Ok(None);
        }
        if packed.get().is_none() {
            let _ = packed.set(amx::pack(t)?);
        }
        let Some(p) = packed.get().and_then(Option::as_ref) else {
            return Ok(None);
        };
        let x = x.contiguous()?;
        let (s, l) = x.storage_and_layout();
        let Storage::Cpu(c) = &*s else {
            return Ok(None);
        };
        let at = l.start_offset();
        amx::matmul(p, &c.as_slice::<f32>()?[at..at + rows * k]).map(Some)
    }

    /// `x · Wᵀ` for the rows of decoding sequences: each row the same whatever their
    /// number (see [`row_exact`]).
    fn decode(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        if let Some(t) = &self.q6k {
            let rows = x.dim(0)?;
            let xs = x.contiguous()?.flatten_all()?.to_vec1::<f32>()?;
            if let Some(y) = q6k::matmul(t, &xs)? {
                let n = y.len() / rows;
                return Tensor::from_vec(y, (rows, n), &Device::Cpu);
            }
        }
        qforward(&self.q, self.per_row, self.grouped, x)
    }
}

/// One sequence's per-layer key and value caches, `[n_kv_head, capacity, head_dim]`,
/// grown on demand. The model holds one for [`Model::forward`]; batched decoding
/// ([`Model::decode_step`]) keeps one per sequence.
#[derive(Default)]
pub(crate) struct KvCache {
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    cap: usize,
    len: usize,
}

impl KvCache {
    /// Positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Room for `needed` positions (at most `max_ctx`), keeping what is cached.
    fn reserve(&mut self, cfg: &Config, max_ctx: usize, needed: usize) -> candle_core::Result<()> {
        if needed <= self.cap {
            return Ok(());
        }
        let cap = needed.max(self.cap * 2).max(256).min(max_ctx);
        let shape = (cfg.n_kv_head, cap, cfg.head_dim);
        let (mut k, mut v) = (Vec::new(), Vec::new());
        for l in 0..cfg.n_layer {
            let nk = Tensor::zeros(shape, DType::F32, &Device::Cpu)?;
            let nv = Tensor::zeros(shape, DType::F32, &Device::Cpu)?;
            if self.len > 0 {
                let ok = self.k[l].narrow(1, 0, self.len)?.contiguous()?;
                let ov = self.v[l].narrow(1, 0, self.len)?.contiguous()?;
                nk.slice_set(&ok, 1, 0)?;
                nv.slice_set(&ov, 1, 0)?;
            }
            k.push(nk);
            v.push(nv);
        }
        self.k = k;
        self.v = v;
        self.cap = cap;
        Ok(())
    }
}

/// Weights, rotary tables and the KV cache of one loaded model.
pub(crate) struct Model {
    pub cfg: Config,
    embd: Arc<QTensor>,
    layers: Vec<Layer>,
    out_norm: Tensor,
    output: Weight,
    cos: Tensor,
    sin: Tensor,
    max_ctx: usize,
    cache: KvCache,
    /// Number of weight tensors requantised to Q8_0 at load.
    pub requantized: usize,
    /// Number of the layers' weight tensors that prefill multiplies on AMX tiles (the
    /// output head runs on one row, never on tiles).
    pub amx_weights: usize,
    /// Bytes of the weights as held in memory.
    pub weight_bytes: usize,
    /// Multiply-adds per token of the layers' weight matrices (the elements of every
    /// `blk.*` matrix: attention and feed-forward projections).
    pub layer_macs: u64,
    /// Use candle's fused single-row matmuls in decode (where it has them).
    pub fuse: bool,
    /// The forward passes, as function pointers taken by [`Model::load`].
    passes: Passes,
}

/// A model's forward passes, reached through the copy of the code that loaded it.
///
/// evcxr links the library into every cell's shared object, so each cell has its own copy
/// of candle's thread pool (a `static`). A model loaded in one cell and used in a later
/// one would run partly in each copy: its quantised matmuls go through trait objects made
/// at load (the loading cell's code and pool), everything else through the calling cell's.
/// The two pools' workers then spin beside the caller on the same cores, which slows
/// decoding (many short parallel regions) most. Calling the passes through these pointers
/// keeps every pass in the loading cell's code and pool. In one binary the pointers lead to
/// the same functions as a direct call.
#[derive(Clone, Copy)]
struct Passes {
    forward_in: ForwardIn,
    decode_step: DecodeStep,
}

/// [`Model::forward_in`]'s signature.
type ForwardIn = fn(&Model, &mut KvCache, &[u32]) -> candle_core::Result<Vec<f32>>;
/// [`Model::decode_step`]'s signature.
type DecodeStep = fn(&Model, &mut [KvCache], &[u32]) -> candle_core::Result<Vec<Vec<f32>>>;

fn ce(path: &std::path::Path, what: &str) -> impl Fn(candle_core::Error) -> Error {
    let what = what.to_string();
    let path = path.to_path_buf();
    move |e| Error::bad_input(&path, format!("{what}: {e}"))
}

impl Config {
    pub fn from_gguf(g: &GgufFile, arch: Arch) -> Result<Self> {
        let a = match arch {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
        };
        let k = |s: &str| format!("{a}.{s}");
        let n_embd = g.usize(&k("embedding_length"))?;
        let n_head = g.usize(&k("attention.head_count"))?;
        let n_kv_head = g
            .opt_usize(&k("attention.head_count_kv"))?
            .unwrap_or(n_head);
        if n_head == 0 || n_kv_head == 0 || n_head % n_kv_head != 0 {
            return Err(Error::bad_input(
                &g.path,
                format!("{a}: {n_head} attention heads cannot share {n_kv_head} KV heads"),
            ));
        }
        let head_dim = g
            .opt_usize(&k("attention.key_length"))?
            .unwrap_or(n_embd / n_head);
        if let Some(rd) = g.opt_usize(&k("rope.dimension_count"))? {
            if rd != head_dim {
                return Err(Error::bad_input(
                    &g.path,
                    format!("{a}: partial rotary embeddings (rope.dimension_count {rd} < head size {head_dim}) are not supported"),
                ));
            }
        }
        if g.has_tensor("rope_freqs.weight")
            || g.get(&k("rope.scaling.type"))
                .is_some_and(|v| v.to_string().map(|s| s != "none").unwrap_or(true))
        {
            return Err(Error::bad_input(
                &g.path,
                format!("{a}: RoPE scaling (rope_freqs / rope.scaling.type) is not supported"),
            ));
        }
        let vocab = g.strings("tokenizer.ggml.tokens")?.len();
        Ok(Config {
            arch,
            n_layer: g.usize(&k("block_count"))?,
            n_embd,
            n_head,
            n_kv_head,
            head_dim,
            eps: g
                .opt_f32(&k("attention.layer_norm_rms_epsilon"))?
                .unwrap_or(1e-5),
            rope_base: g.opt_f32(&k("rope.freq_base"))?.unwrap_or(10_000.0),
            n_ctx_train: g.usize(&k("context_length"))?,
            vocab,
        })
    }
}

impl Model {
    /// Load the weights of `g`; requantise Q4_1/Q5_0/Q5_1 matmul weights to Q8_0 when
    /// `requant`; keep f32 copies of the layers' matmul weights for prefill when
    /// `f32_prefill`; multiply prompts on AMX tiles where the CPU has them when `amx`.
    /// `max_ctx` bounds the KV cache and the rotary tables.
    pub fn load(
        g: &mut GgufFile,
        cfg: Config,
        max_ctx: usize,
        requant: bool,
        f32_prefill: bool,
        amx: bool,
    ) -> Result<Self> {
        let path = g.path.clone();
        let cpu = Device::Cpu;
        let mut requantized = 0usize;
        let mut amx_weights = 0usize;
        let mut weight_bytes = 0usize;
        let mut layer_macs = 0u64;
        // `copy`: also keep the f32 copy for prefill (when `f32_prefill`).
        let mut qmm =
            |g: &mut GgufFile, name: &str, copy: bool| -> Result<(Weight, Arc<QTensor>)> {
                // Read once; the f32 copy comes from the file's own type, not the Q8_0
                // requantisation.
                let raw = g.tensor(name, false)?;
                if name.starts_with("blk.") {
                    layer_macs += raw.shape().elem_count() as u64;
                }
                let before = raw.dtype();
                let f32 = if f32_prefill && copy {
                    let w = raw.dequantize(&cpu).map_err(ce(&path, name))?;
                    weight_bytes += w.elem_count() * 4;
                    Some(w)
                } else {
                    None
                };
                let t = if requant {
                    g.requantize(name, raw)?
                } else {
                    raw
                };
                if before != t.dtype() {
                    requantized += 1;
                }
                weight_bytes += t.storage_size_in_bytes();
                let t = Arc::new(t);
                let w = Weight::new(t.clone(), f32, amx).map_err(ce(&path, name))?;
                if name.starts_with("blk.") {
                    amx_weights += usize::from(w.amx.is_some());
                }
                Ok((w, t))
            };
        let vec = |g: &mut GgufFile, name: &str| -> Result<Tensor> {
            g.tensor(name, false)?
                .dequantize(&cpu)
                .map_err(ce(&path, name))
        };
        let opt_vec = |g: &mut GgufFile, name: &str| -> Result<Option<Tensor>> {
            if g.has_tensor(name) {
                vec(g, name).map(Some)
            } else {
                Ok(None)
            }
        };
        let embd = Arc::new(g.tensor("token_embd.weight", false)?);
        let embd_bytes = embd.storage_size_in_bytes();
        let output = if g.has_tensor("output.weight") {
            // The head runs on the last position only: no f32 copy.
            qmm(g, "output.weight", false)?.0
        } else {
            Weight::new(embd.clone(), None, amx).map_err(ce(&path, "token_embd.weight"))?
        };
        let out_norm = vec(g, "output_norm.weight")?;
        let mut layers = Vec::with_capacity(cfg.n_layer);
        for i in 0..cfg.n_layer {
            let p = |s: &str| format!("blk.{i}.{s}");
            let (bq, bk, bv) = match cfg.arch {
                Arch::Qwen2 => (
                    Some(vec(g, &p("attn_q.bias"))?),
                    Some(vec(g, &p("attn_k.bias"))?),
                    Some(vec(g, &p("attn_v.bias"))?),
                ),
                Arch::Llama => (
                    opt_vec(g, &p("attn_q.bias"))?,
                    opt_vec(g, &p("attn_k.bias"))?,
                    opt_vec(g, &p("attn_v.bias"))?,
                ),
            };
            let (wq, q_t) = qmm(g, &p("attn_q.weight"), true)?;
            let (wk, k_t) = qmm(g, &p("attn_k.weight"), true)?;
            let (wv, v_t) = qmm(g, &p("attn_v.weight"), true)?;
            let (gate, gate_t) = qmm(g, &p("ffn_gate.weight"), true)?;
            let (up, up_t) = qmm(g, &p("ffn_up.weight"), true)?;
            layers.push(Layer {
                qkv_t: [q_t, k_t, v_t],
                gate_up_t: [gate_t, up_t],
                attn_norm: vec(g, &p("attn_norm.weight"))?,
                wq,
                wk,
                wv,
                bq,
                bk,
                bv,
                wo: qmm(g, &p("attn_output.weight"), true)?.0,
                ffn_norm: vec(g, &p("ffn_norm.weight"))?,
                gate,
                up,
                down: qmm(g, &p("ffn_down.weight"), true)?.0,
            });
        }
        let (cos, sin) = rope_tables(cfg.head_dim, cfg.rope_base, max_ctx)
            .map_err(ce(&path, "rotary tables"))?;
        let cache = KvCache::default();
        Ok(Model {
            cfg,
            embd,
            layers,
            out_norm,
            output,
            cos,
            sin,
            max_ctx,
            cache,
            requantized,
            amx_weights,
            weight_bytes: weight_bytes + embd_bytes,
            layer_macs,
            fuse: !switched_off("WORKBENCH_LLM_NO_FUSE"),
            passes: Passes {
                forward_in: Model::run_forward_in,
                decode_step: Model::run_decode_step,
            },
        })
    }

    /// Forget the cached keys and values (the buffers are dropped too).
    pub fn clear_cache(&mut self) {
        self.cache = KvCache::default();
    }

    /// Positions held in the KV cache.
    #[cfg(test)]
    pub fn cached(&self) -> usize {
        self.cache.len
    }

    /// Take the model's own KV cache out (leaving an empty one): the state of a sequence
    /// that [`Model::forward`] prefilled, for [`Model::decode_step`].
    pub fn take_cache(&mut self) -> KvCache {
        std::mem::take(&mut self.cache)
    }

    /// Make room for `needed` positions in `cache`.
    pub fn reserve(&self, cache: &mut KvCache, needed: usize) -> candle_core::Result<()> {
        cache.reserve(&self.cfg, self.max_ctx, needed)
    }

    /// Run `ids` at positions `cached()..cached() + ids.len()` (appending to the cache) and
    /// return the logits of the last position.
    pub fn forward(&mut self, ids: &[u32]) -> candle_core::Result<Vec<f32>> {
        let mut cache = std::mem::take(&mut self.cache);
        let out = self.forward_in(&mut cache, ids);
        self.cache = cache;
        out
    }

    fn check_room(&self, pos: usize, t: usize) -> candle_core::Result<()> {
        if t == 0 {
            candle_core::bail!("no tokens to run");
        }
        if pos + t > self.max_ctx {
            candle_core::bail!(
                "{} positions exceed the context of {}",
                pos + t,
                self.max_ctx
            );
        }
        Ok(())
    }

    /// `[rows, d]` projections of `h` by `ws` (one activation quantisation and one
    /// parallel region through candle's fused matmul where it has one for these shapes,
    /// else one matmul each). `quantised`: never the f32 prefill copies.
    fn project<const N: usize>(
        &self,
        fused_t: &[Arc<QTensor>; N],
        ws: [&Weight; N],
        h: &Tensor,
        quantised: bool,
    ) -> candle_core::Result<[Tensor; N]> {
        let rows = h.dim(0)?;
        // Not with a Q6_K weight that decoding multiplies with `q6k::matmul`: candle's
        // fused product of it would round differently alone than in a batch.
        let own = ws.iter().any(|w| w.q6k.is_some());
        if self.fuse && !own && (rows == 1 || (quantised && !ws.iter().any(|w| w.per_row))) {
            let ts: Vec<&QTensor> = fused_t.iter().map(|t| t.as_ref()).collect();
            if let Some(out) = QTensor::gemv_fused_shared_lhs(&ts, h)? {
                if let Ok(arr) = <[Tensor; N]>::try_from(out) {
                    return Ok(arr);
                }
            }
        }
        let mut out = Vec::with_capacity(N);
        for w in ws {
            out.push(if quantised {
                w.decode(h)?
            } else {
                w.forward(h)?
            });
        }
        <[Tensor; N]>::try_from(out).map_err(|_| candle_core::Error::Msg("projection count".into()))
    }

    /// Queries, keys and values of `h: [t, d]`, with the biases added.
    fn qkv(&self, l: &Layer, h: &Tensor, quantised: bool) -> candle_core::Result<[Tensor; 3]> {
        let [mut q, mut k, mut v] = self.project(&l.qkv_t, [&l.wq, &l.wk, &l.wv], h, quantised)?;
        if let Some(b) = &l.bq {
            q = q.broadcast_add(b)?;
        }
        if let Some(b) = &l.bk {
            k = k.broadcast_add(b)?;
        }
        if let Some(b) = &l.bv {
            v = v.broadcast_add(b)?;
        }
        Ok([q, k, v])
    }

    /// Rotate `q: [t, nh * hd]` and `k: [t, nkv * hd]` for positions `pos..pos + t`,
    /// append `k` and `v` to layer `li` of `cache` (which has room), and attend: the
    /// `[t, nh * hd]` output of the heads.
    #[allow(clippy::too_many_arguments)]
    fn attend(
        &self,
        cache: &mut KvCache,
        li: usize,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        pos: usize,
        mask: Option<&Tensor>,
    ) -> candle_core::Result<Tensor> {
        let cfg = &self.cfg;
        let (nh, nkv, hd) = (cfg.n_head, cfg.n_kv_head, cfg.head_dim);
        let group = nh / nkv;
        let t = q.dim(0)?;
        let kv_len = pos + t;
        let cos = self.cos.narrow(0, pos, t)?;
        let sin = self.sin.narrow(0, pos, t)?;
        let q = q.reshape((1, t, nh, hd))?.transpose(1, 2)?.contiguous()?;
        let k = k.reshape((1, t, nkv, hd))?.transpose(1, 2)?.contiguous()?;
        let v = v.reshape((t, nkv, hd))?.transpose(0, 1)?.contiguous()?;
        let (q, k) = match cfg.arch {
            Arch::Qwen2 => (
                candle_nn::rotary_emb::rope(&q, &cos, &sin)?,
                candle_nn::rotary_emb::rope(&k, &cos, &sin)?,
            ),
            Arch::Llama => (
                candle_nn::rotary_emb::rope_i(&q, &cos, &sin)?,
                candle_nn::rotary_emb::rope_i(&k, &cos, &sin)?,
            ),
        };
        cache.k[li].slice_set(&k.squeeze(0)?, 1, pos)?;
        cache.v[li].slice_set(&v, 1, pos)?;
        let scale = 1.0 / (hd as f64).sqrt();
        if t == 1 {
            if let Some(y) = self.attend_one(cache, li, &q, kv_len, scale)? {
                return Ok(y);
            }
        }
        // [nkv, group * t, hd]: the heads sharing KV head j are consecutive.
        let q = q.reshape((nkv, group * t, hd))?;
        if t > 1 {
            if let Some(y) = self.attend_prompt(cache, li, &q, pos, t, scale)? {
                return y
                    .reshape((nh, t, hd))?
                    .transpose(0, 1)?
                    .contiguous()?
                    .reshape((t, nh * hd));
            }
        }
        // One KV head at a time: its cached positions `[kv_len, hd]` are a contiguous slab
        // of the cache, so no copy of the cache is made per token. (A batched matmul over
        // the `[nkv, kv_len, hd]` view would need one: its batch stride is the capacity.)
        let mut ys = Vec::with_capacity(nkv);
        for j in 0..nkv {
            let kc = cache.k[li].get(j)?.narrow(0, 0, kv_len)?;
            let vc = cache.v[li].get(j)?.narrow(0, 0, kv_len)?;
            let att = (q.get(j)?.matmul(&kc.t()?)? * scale)?;
            let att = match mask {
                Some(m) => att.broadcast_add(m)?,
                None => att,
            };
            let att = candle_nn::ops::softmax_last_dim(&att)?;
            ys.push(att.matmul(&vc)?); // [group * t, hd]
        }
        let y = Tensor::stack(&ys, 0)?; // [nkv, group * t, hd]
        y.reshape((nh, t, hd))?
            .transpose(0, 1)?
            .contiguous()?
            .reshape((t, nh * hd))
    }

    /// One position's attention (`q: [1, nh, 1, hd]`, rotated) over layer `li` of `cache`
    /// with [`decode_attn::attend`], reading the cache in place: `[1, nh * hd]`, or `None`
    /// where that kernel does not apply.
    fn attend_one(
        &self,
        cache: &KvCache,
        li: usize,
        q: &Tensor,
        kv_len: usize,
        scale: f64,
    ) -> candle_core::Result<Option<Tensor>> {
        if !decode_attn::available() {
            return Ok(None);
        }
        let cfg = &self.cfg;
        let qv = q.flatten_all()?.to_vec1::<f32>()?;
        let (ks, kl) = cache.k[li].storage_and_layout();
        let (vs, vl) = cache.v[li].storage_and_layout();
        let (Storage::Cpu(kc), Storage::Cpu(vc)) = (&*ks, &*vs) else {
            return Ok(None);
        };
        if !kl.is_contiguous() || !vl.is_contiguous() {
            return Ok(None);
        }
        let kf = &kc.as_slice::<f32>()?[kl.start_offset()..];
        let vf = &vc.as_slice::<f32>()?[vl.start_offset()..];
        let shape = decode_attn::Shape {
            n_head: cfg.n_head,
            n_kv_head: cfg.n_kv_head,
            head_dim: cfg.head_dim,
            cap: cache.cap,
            kv_len,
        };
        match decode_attn::attend(&qv, kf, vf, shape, scale as f32) {
            Some(y) => Ok(Some(Tensor::from_vec(
                y,
                (1, cfg.n_head * cfg.head_dim),
                &Device::Cpu,
            )?)),
            None => Ok(None),
        }
    }

    /// A prompt's attention (`q: [nkv, group · t, hd]`, rotated) over layer `li` of `cache`
    /// with [`prefill_attn::attend`], reading the cache in place: `[nkv, group · t, hd]`,
    /// or `None` where that kernel does not apply.
    fn attend_prompt(
        &self,
        cache: &KvCache,
        li: usize,
        q: &Tensor,
        pos: usize,
        t: usize,
        scale: f64,
    ) -> candle_core::Result<Option<Tensor>> {
        let cfg = &self.cfg;
        let qv = q.flatten_all()?.to_vec1::<f32>()?;
        let (ks, kl) = cache.k[li].storage_and_layout();
        let (vs, vl) = cache.v[li].storage_and_layout();
        let (Storage::Cpu(kc), Storage::Cpu(vc)) = (&*ks, &*vs) else {
            return Ok(None);
        };
        let (Some((k0, k1)), Some((v0, v1))) = (kl.contiguous_offsets(), vl.contiguous_offsets())
        else {
            return Ok(None);
        };
        let kf = &kc.as_slice::<f32>()?[k0..k1];
        let vf = &vc.as_slice::<f32>()?[v0..v1];
        let shape = prefill_attn::Shape {
            n_head: cfg.n_head,
            n_kv_head: cfg.n_kv_head,
            head_dim: cfg.head_dim,
            cap: cache.cap,
            pos,
            t,
        };
        match prefill_attn::attend(&qv, kf, vf, shape, scale as f32) {
            Some(y) => Ok(Some(Tensor::from_vec(y, q.shape(), &Device::Cpu)?)),
            None => Ok(None),
        }
    }

    /// The feed-forward block's output for `h: [t, d]` (already normalised).
    fn ffn(&self, l: &Layer, h: &Tensor, quantised: bool) -> candle_core::Result<Tensor> {
        let [gt, up] = self.project(&l.gate_up_t, [&l.gate, &l.up], h, quantised)?;
        let act = match silu::silu_mul(&gt, &up)? {
            Some(act) => act,
            None => (gt.silu()? * up)?,
        };
        if quantised {
            l.down.decode(&act)
        } else {
            l.down.forward(&act)
        }
    }

    /// Run `ids` at positions `cache.len()..` of `cache` (appending to it) and return the
    /// logits of the last position.
    pub fn forward_in(&self, cache: &mut KvCache, ids: &[u32]) -> candle_core::Result<Vec<f32>> {
        (self.passes.forward_in)(self, cache, ids)
    }

    fn run_forward_in(&self, cache: &mut KvCache, ids: &[u32]) -> candle_core::Result<Vec<f32>> {
        let t = ids.len();
        let pos = cache.len;
        self.check_room(pos, t)?;
        self.reserve(cache, pos + t)?;
        let cfg = &self.cfg;
        let group = cfg.n_head / cfg.n_kv_head;
        let cpu = Device::Cpu;
        let ids_t = Tensor::new(ids, &cpu)?;
        let mut x = self.embd.embedding(&ids_t)?; // [t, d]
        let kv_len = pos + t;
        let mask = if t > 1 {
            // Row (g, i) of a KV head's stacked queries may see keys 0..=pos + i.
            let mut m = vec![0f32; group * t * kv_len];
            for g in 0..group {
                for i in 0..t {
                    let row = &mut m[(g * t + i) * kv_len..(g * t + i + 1) * kv_len];
                    for v in row.iter_mut().skip(pos + i + 1) {
                        *v = f32::NEG_INFINITY;
                    }
                }
            }
            Some(Tensor::from_vec(m, (group * t, kv_len), &cpu)?)
        } else {
            None
        };
        for (li, l) in self.layers.iter().enumerate() {
            let h = candle_nn::ops::rms_norm(&x, &l.attn_norm, cfg.eps)?;
            let [q, k, v] = self.qkv(l, &h, false)?;
            let y = self.attend(cache, li, &q, &k, &v, pos, mask.as_ref())?;
            x = (x + l.wo.forward(&y)?)?;
            let h = candle_nn::ops::rms_norm(&x, &l.ffn_norm, cfg.eps)?;
            x = (&x + self.ffn(l, &h, false)?)?;
        }
        cache.len = kv_len;
        let last = x.narrow(0, t - 1, 1)?;
        let h = candle_nn::ops::rms_norm(&last, &self.out_norm, cfg.eps)?;
        let logits = self.output.decode(&h)?;
        logits.squeeze(0)?.to_vec1::<f32>()
    }

    /// One decoding step of several sequences together: token `ids[b]` goes at the end of
    /// `caches[b]`. The weight matrices are applied to all the sequences' rows at once
    /// (one pass over the weights per step, instead of one per sequence); attention is
    /// per sequence, over its own cache. Returns each sequence's next-token logits.
    pub fn decode_step(
        &self,
        caches: &mut [KvCache],
        ids: &[u32],
    ) -> candle_core::Result<Vec<Vec<f32>>> {
        (self.passes.decode_step)(self, caches, ids)
    }

    fn run_decode_step(
        &self,
        caches: &mut [KvCache],
        ids: &[u32],
    ) -> candle_core::Result<Vec<Vec<f32>>> {
        let b = ids.len();
        if b != caches.len() {
            candle_core::bail!("{b} tokens for {} sequences", caches.len());
        }
        for c in caches.iter_mut() {
            self.check_room(c.len, 1)?;
            self.reserve(c, c.len + 1)?;
        }
        let cfg = &self.cfg;
        let ids_t = Tensor::new(ids, &Device::Cpu)?;
        let mut x = self.embd.embedding(&ids_t)?; // [b, d]
        for (li, l) in self.layers.iter().enumerate() {
            let h = candle_nn::ops::rms_norm(&x, &l.attn_norm, cfg.eps)?;
            let [q, k, v] = self.qkv(l, &h, true)?;
            let mut ys = Vec::with_capacity(b);
            for (i, c) in caches.iter_mut().enumerate() {
                let pos = c.len;
                let (qi, ki, vi) = (q.narrow(0, i, 1)?, k.narrow(0, i, 1)?, v.narrow(0, i, 1)?);
                ys.push(self.attend(c, li, &qi, &ki, &vi, pos, None)?);
            }
            let y = Tensor::cat(&ys, 0)?;
            x = (x + l.wo.decode(&y)?)?;
            let h = candle_nn::ops::rms_norm(&x, &l.ffn_norm, cfg.eps)?;
            x = (&x + self.ffn(l, &h, true)?)?;
        }
        for c in caches.iter_mut() {
            c.len += 1;
        }
        let h = candle_nn::ops::rms_norm(&x, &self.out_norm, cfg.eps)?;
        self.output.decode(&h)?.to_vec2::<f32>()
    }
}

fn rope_tables(head_dim: usize, base: f32, n: usize) -> candle_core::Result<(Tensor, Tensor)> {
    let half = head_dim / 2;
    let inv: Vec<f64> = (0..half)
        .map(|i| 1.0 / (base as f64).powf(2.0 * i as f64 / head_dim as f64))
        .collect();
    let mut cos = Vec::with_capacity(n * half);
    let mut sin = Vec::with_capacity(n * half);
    for p in 0..n {
        for f in &inv {
            let a = p as f64 * f;
            cos.push(a.cos() as f32);
            sin.push(a.sin() as f32);
        }
    }
    Ok((
        Tensor::from_vec(cos, (n, half), &Device::Cpu)?,
        Tensor::from_vec(sin, (n, half), &Device::Cpu)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::GgmlDType;

    /// Decoding rows of a Q4_K weight get the same bits in a batch of 40 (past candle's AMX
    /// threshold) as each alone.
    #[test]
    fn q4k_decode_rows_are_the_same_alone_or_among_40() -> candle_core::Result<()> {
        let (n, k, rows) = (32, 512, 40);
        let w: Vec<f32> = (0..n * k)
            .map(|i| (i * 7919 % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let q = QTensor::quantize(&Tensor::from_vec(w, (n, k), &Device::Cpu)?, GgmlDType::Q4K)?;
        let weight = Weight::new(Arc::new(q), None, false)?;
        let x: Vec<f32> = (0..rows * k)
            .map(|i| (i * 104_729 % 997) as f32 / 498.5 - 1.0)
            .collect();
        let x = Tensor::from_vec(x, (rows, k), &Device::Cpu)?;
        let all = weight.decode(&x)?.to_vec2::<f32>()?;
        for (r, row) in all.iter().enumerate() {
            let one = weight.decode(&x.narrow(0, r, 1)?)?.to_vec2::<f32>()?;
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&one[0]), bits(row), "row {r}");
        }
        Ok(())
    }
}
