//! Late interaction (ColBERT-style MaxSim) over per-token vectors — report 003.
//!
//! ## Score
//!
//! A query and a passage are each encoded into one vector per wordpiece (the last hidden
//! states of a BERT encoder, `[CLS]`/`[SEP]` dropped, optionally projected to `d`
//! dimensions, L2-normalised). The score is the mean over query tokens of the best cosine
//! with any passage token:
//!
//! ```text
//! S(q, d) = (1/|q|) · Σ_i max_j cos(E_qi, E_dj)
//! ```
//!
//! This is report 003's §3.2.1 definition ("instead of using the sum, we use the mean to
//! obtain a more interpretable similarity score"); ColBERT proper (Khattab & Zaharia 2020)
//! **sums** over query tokens. Within one query the two rank passages identically
//! (they differ by the factor `|q|`); the mean keeps scores in `[-1, 1]` and comparable
//! across queries.
//!
//! ## What this is not: no trained ColBERT checkpoint
//!
//! No ColBERT checkpoint is available here. The default encoder is **raw 384-d MiniLM token
//! embeddings** (`all-MiniLM-L6-v2`'s last hidden states, trained for *mean-pooled*
//! sentence vectors, never for token-level matching): no `[Q]`/`[D]` marker tokens, no
//! `[MASK]` query augmentation, no learned projection. Names say so: `maxsim-minilm-raw384`.
//! A learned linear projection (`d × 384`, e.g. ColBERT's `linear.weight`) can be loaded
//! with [`Projection::load`]; names then read `maxsim-minilm-proj{d}-{sha8}`.
//!
//! ## Two retrieval modes (report 003 §3.2.3)
//!
//! - **re-rank** ([`MaxSimReranker`], a [`Reranker`](crate::rerank::Reranker)): a first stage (TF-IDF in the report)
//!   returns the top `k`; exact MaxSim re-scores them.
//! - **end-to-end** ([`MaxSimEndToEnd`], feature `faiss`, a [`Retriever`](crate::retrieve::Retriever)): a
//!   token-level FAISS index over every passage token vector; each query token retrieves
//!   its `k̂` nearest passage tokens, their passages (at most `k̂·|q|`) are the candidates,
//!   and exact MaxSim ranks those. The report sets `k̂ = k/λ` (Figure 6: `k = 1000`,
//!   `k̂ = k/λ`; λ ∈ {1, 2, 5, 10, 20} tried, λ = 2 in the base/best setting, λ = 5 chosen
//!   afterwards "to reduce the number of passages to rank"). Here `k̂ = ⌈k/λ⌉`, default
//!   λ = 2 (the report's best setting); λ < 1 widens the candidate set beyond `k`.
//!
//! Passage token vectors live in a [`TokenStore`]: one flat `f16` array (the report stores
//! embeddings "with 16-bit precision", Appendix B) plus per-passage offsets, saved with a
//! header holding the model's sha256, the projection, a key of the passage set and the
//! sha256 of each passage's text, and a checksum of the whole file, so a store built for
//! another model, projection, corpus or text (or a damaged one) is never read.
//!
//! ## Token relevance (report 003 §5)
//!
//! [`TokenRelevance`] explains a score per passage token: `R_abs` (how many query tokens
//! have this token among their `k̃` best matches), `R_acc` (the sum of those
//! similarities) and a Gaussian kernel density over the positions of the chosen tokens.
//! It renders as highlighted HTML in notebooks.
//!
//! ## Layout
//!
//! | module | concept |
//! |---|---|
//! | [`mod@maxsim`] | the MaxSim kernels (fused `f32` / `f16`, the textbook definition for tests) |
//! | [`relevance`] | token relevance `R_abs` / `R_acc` / KDE and its HTML |
//! | [`projection`] | a learned `d × 384` linear projection |
//! | [`store`] | the token store: vectors, key, file format and its checks |
//! | [`encoder`] | [`LateInteraction`]: encode queries and passages, build or reuse stores |
//! | [`mod@rerank`] | re-rank mode ([`MaxSimReranker`]) |
//! | `end_to_end` | end-to-end mode over a token-level FAISS index, exact by default (feature `faiss`) |
//! | `approx` | fast end-to-end mode: centroid pruning (PLAID) over FAISS k-means, exact MaxSim on the candidates, cached next to the store (feature `faiss`) |
//!
//! Every public item is re-exported here, so `late_interaction::TokenStore` and
//! `late_interaction::store::TokenStore` name the same type.

#[cfg(feature = "faiss")]
pub mod approx;
pub mod encoder;
#[cfg(feature = "faiss")]
pub mod end_to_end;
pub mod maxsim;
pub mod projection;
pub mod relevance;
pub mod rerank;
pub mod store;

#[cfg(feature = "faiss")]
pub use approx::{ApproxSearch, ApproxTokenIndex, CentroidKey, CentroidParams, MaxSimApprox};
pub use encoder::{EncodedTokens, LateInteraction, Markers};
#[cfg(feature = "faiss")]
pub use end_to_end::{MaxSimEndToEnd, TokenIndex};
pub use maxsim::{maxsim, maxsim_f16, maxsim_naive, normalize_rows};
pub use projection::Projection;
pub use relevance::{
    gaussian_kde, relevance_scores, RelevanceKind, RelevanceParams, RelevanceScores, TokenRelevance,
};
pub use rerank::MaxSimReranker;
pub use store::{passage_set_key, StoreKey, TokenStore};

/// The asset whose token embeddings are the default late-interaction encoder.
pub const DEFAULT_MODEL: &str = "all-minilm-l6-v2";

/// Score of a passage with no tokens: −1, the lowest cosine, so it ranks last.
pub const EMPTY_PASSAGE_SCORE: f32 = -1.0;
