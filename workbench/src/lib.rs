//! # workbench
//!
//! Reusable helpers for retrieval-augmented question answering experiments.
//!
//! ## Overview
//!
//! The modules follow the pipeline, one stage each:
//!
//! ```text
//! assets → load → chunk → encode → retrieve → rerank → read → evaluate → plot
//! ```
//!
//! | module | stage |
//! |---|---|
//! | [`assets`] | models and data sets through the Hugging Face cache (offline-first, checksummed) |
//! | [`load`] | typed records ([`Document`], [`QaExample`], [`Query`], [`Qrels`]) from every corpus format the reports use |
//! | [`chunk`] | paragraph, sliding-window and whole-document chunkers that keep offsets into the source |
//! | `encode` (feature `dense`) | candle BERT encoders (sentence embeddings, token embeddings) and the embedding cache |
//! | [`retrieve`] | the [`retrieve::Retriever`] trait; TF-IDF, BM25, fusion, dense FAISS retrievers, one file each |
//! | [`rerank`] | the [`rerank::Reranker`] trait; bi-encoder, late-interaction (MaxSim) and cross-encoder rerankers |
//! | [`read`] | the [`read::Reader`] trait: question + ranked passages → answer with abstention flag, evidence, token counts and timings |
//! | [`method`] | RAG methods as control flows over retrieval, the reader and its model: adaptive retrieval, Iter-RetGen, IRCoT, Self-Ask, FLARE, a Search-R1-style agentic loop; every call traced |
//! | [`pipeline`] | TOML-configured RAG pipelines (retrieve → rerank → read → evaluate), query transforms, traces, SQuAD predictions, retrieval cache |
//! | `serve` (feature `serve`) | a pipeline config's first stage served over HTTP in Search-R1's `/retrieve` API |
//! | `train` (feature `dense`) | a generic candle training loop (AdamW, warm-up + decay, clipping, length-grouped batches, resumable checkpoints) and extractive-QA supervision |
//! | [`env`] | where the project lives ([`env::Env`]: assets, caches, results, passed in) and how much of a study runs ([`env::Scale`]) |
//! | [`study`] | the reports' experiments as library code: parameters per scale (quick / default / paper) → checked → run → typed results, tables, figures, result folders |
//! | [`evaluate`] | ranking and QA metrics (aggregate + per query), significance tests, TREC files |
//! | [`analysis`] | embedding-space analyses (t-SNE, feature `tsne`) |
//! | `plot` (feature `plot`) | figures with plotters, shown inline in evcxr notebooks |
//! | [`results`] | `data/results/<name>/` folders with the resolved config and a manifest |
//! | [`grade`] | expected values (`data/expected.toml`) graded against the result folders; README tables generated from them |
//! | [`display`] | tables and figures that render inline in Jupyter (evcxr) |
//! | [`machine`] | the machine a measurement ran on (CPU model, cores, AVX/AMX flags, load average) |
//! | [`kernels`] | the unsafe SIMD kernels behind safe entry points, one CPU-feature detection ([`kernels::cpu::features`]) and its capability tokens |
//! | [`bench`] | benchmark statistics (median, percentiles), process CPU time, the Python peers runner |
//!
//! ## Crate features
//!
//! | feature | what it adds | cost |
//! |---|---|---|
//! | (none) | assets, loaders, chunkers, results, HTML tables | light |
//! | `plot` | plotters figures (PNG, SVG), embedded DejaVu font | light |
//! | `parquet` | Hugging Face parquet layouts through polars | heavy (~11 min cold build) |
//! | `tokenizers` | token-count windows with a Hugging Face tokenizer | medium |
//! | `dense` | candle BERT encoders, rerankers (implies `tokenizers`) | ~4 min cold build |
//! | `faiss` | FAISS indexes (flat, IVF, HNSW), built from vendored source (cmake, openblas) | ~3–15 min cold build |
//! | `tsne` | t-SNE with linfa-tsne | light |
//! | `serve` | the retrieval server (axum on tokio) | light alone; beside `parquet`, hyper's `server` feature rebuilds polars and its HTTP client once |
#![deny(missing_docs)]
// Every unsafe block and impl says why it is sound (`// SAFETY:` above it), and an unsafe
// fn's body is no unsafe block: each unsafe operation in it has its own.
#![warn(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod analysis;
pub mod assets;
pub mod bench;
pub mod build;
pub mod chunk;
pub mod display;
#[cfg(feature = "dense")]
pub mod encode;
pub mod env;
pub mod error;
pub mod evaluate;
pub mod grade;
pub mod kernels;
pub mod load;
pub mod machine;
pub mod method;
pub mod paths;
pub mod pipeline;
#[cfg(feature = "plot")]
pub mod plot;
pub mod progress;
pub mod read;
pub mod rerank;
pub mod results;
pub mod retrieve;
#[cfg(feature = "serve")]
pub mod serve;
pub mod study;
pub mod text;
#[cfg(feature = "dense")]
pub mod train;
pub mod types;

pub use error::{Error, Result};
pub use types::{Document, Hit, Passage, QaExample, Qrels, Query, Run};
