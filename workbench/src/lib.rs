//! # workbench
//!
//! Reusable helpers for retrieval-augmented question answering experiments.
//!
//! ## Overview
//!
//! The modules follow the pipeline, one stage each:
//!
//! ```text
//! assets → load → chunk → (retrieve → rerank → read) → evaluate → plot
//! ```
//!
//! | module | stage |
//! |---|---|
//! | [`assets`] | models and data sets through the Hugging Face cache (offline-first, checksummed) |
//! | [`load`] | typed records ([`Document`], [`QaExample`], [`Query`], [`Qrels`]) from every corpus format the reports use |
//! | [`chunk`] | paragraph and sliding-window chunkers that keep offsets into the source |
//! | `plot` (feature `plot`) | figures with plotters, shown inline in evcxr notebooks |
//! | `encode` (feature `dense`) | BERT sentence and token embeddings with candle; the embedding cache |
//! | [`results`] | `data/results/<name>/` folders with the resolved config and a manifest |
//! | [`display`] | tables and figures that render inline in Jupyter (evcxr) |
//!
//! ## Crate features
//!
//! | feature | what it adds | cost |
//! |---|---|---|
//! | (none) | assets, loaders, chunkers, results, HTML tables | light |
//! | `plot` | plotters figures (PNG, SVG), embedded DejaVu font | light |
//! | `parquet` | Hugging Face parquet layouts through polars | heavy (~11 min cold build) |
//! | `tokenizers` | token-count windows with a Hugging Face tokenizer | medium |
#![deny(missing_docs)]

pub mod analysis;
pub mod assets;
pub mod chunk;
pub mod display;
#[cfg(feature = "dense")]
pub mod encode;
pub mod error;
pub mod evaluate;
pub mod load;
pub mod paths;
#[cfg(feature = "plot")]
pub mod plot;
pub mod progress;
pub mod rerank;
pub mod results;
pub mod retrieve;
pub mod text;
pub mod types;

pub use error::{Error, Result};
pub use types::{Document, Hit, Passage, QaExample, Qrels, Query, Run};
