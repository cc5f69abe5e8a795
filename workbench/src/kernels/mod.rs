//! The crate's unsafe SIMD kernels, each behind a safe entry point.
//!
//! Everything that runs CPU-specific instructions (`#[target_feature]` functions,
//! intrinsics, AMX assembly) lives in this module; the stages (`encode`, `read`, `rerank`,
//! `machine`) keep their logic and call the entry points below. The one unsafe entry point
//! used outside is [`gemm::gemm_into`], from the trainable encoder's parallel backward
//! passes (disjoint blocks of one output buffer). One CPU-feature detection serves them all
//! ([`cpu::features`]); a kernel that needs a feature either takes its capability token
//! (e.g. [`cpu::Avx512`], which only [`cpu::Features`] hands out) or is a checked entry
//! point that detects and falls back to its portable path. Each kernel's tests check it
//! against its portable (scalar, or candle's) path on seeded inputs; a test whose CPU lacks
//! the feature prints `SKIP <test>: <why>` instead of passing silently.
//!
//! | file | kernels | needs |
//! |---|---|---|
//! | [`cpu`] | feature detection, tokens, the `WORKBENCH_LLM_NO_*` switches | — |
//! | [`peak`] | the peak multiply-add loops of `machine::ceiling` | per loop (AVX2 … AMX) |
//! | [`tiles`] | AMX tile configuration, saved and restored | AMX |
//! | `rows` (feature `dense`) | the BERT row kernels: LayerNorm, bias + GELU, softmax and their backward passes | AVX2 + FMA, scalar otherwise |
//! | `gemm` (feature `dense`) | bounds-checked strided matrix products through the `gemm` crate | — |
//! | `amx` (feature `llm`) | quantised weights × activation rows on AMX bf16 tiles (prefill) | AMX-BF16, AVX-512 BW |
//! | `q6k` (feature `llm`) | Q6_K weights × a few rows (decoding) | AVX-512 BW, F16C |
//! | `silu` (feature `llm`) | `silu(g) · u`, bit for bit candle's | AVX-512 F |
//! | `decode_attn` (feature `llm`) | one position's attention over the KV cache | AVX-512 F |
//! | `prefill_attn` (feature `llm`) | a prompt's causal attention over the KV cache | — (gemm) |
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

#[cfg(feature = "llm")]
pub(crate) mod amx;
pub mod cpu;
#[cfg(feature = "llm")]
pub(crate) mod decode_attn;
#[cfg(feature = "dense")]
pub(crate) mod gemm;
#[cfg(target_arch = "x86_64")]
pub mod peak;
#[cfg(feature = "llm")]
pub(crate) mod prefill_attn;
#[cfg(feature = "llm")]
pub(crate) mod q6k;
#[cfg(feature = "dense")]
pub mod rows;
#[cfg(feature = "llm")]
pub(crate) mod silu;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(target_arch = "x86_64")]
pub mod tiles;
