//! [`LateInteraction`]: a BERT encoder's token vectors, an optional [`Projection`], L2
//! normalisation; builds and reuses [`TokenStore`]s.

use super::maxsim::{maxsim, normalize_rows};
use super::relevance::{relevance_scores, RelevanceParams, TokenRelevance};
use super::{passage_set_key, Projection, StoreKey, TokenStore, DEFAULT_MODEL};
use crate::assets::Assets;
use crate::encode::{BertEncoder, EncoderParams};
use crate::{Error, Passage, Result};
use std::path::Path;
use std::sync::Arc;

/// Token vectors of one text: wordpieces, their byte spans, and normalised rows.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedTokens {
    /// Wordpieces (no `[CLS]`/`[SEP]`).
    pub tokens: Vec<String>,
    /// Byte span of each wordpiece in the text.
    pub offsets: Vec<(usize, usize)>,
    /// Row-major `tokens.len() × dim`, L2-normalised rows.
    pub vectors: Vec<f32>,
}

/// A late-interaction encoder: a [`BertEncoder`]'s token embeddings, an optional
/// [`Projection`], L2 normalisation.
pub struct LateInteraction {
    encoder: Arc<BertEncoder>,
    model_label: String,
    projection: Option<Projection>,
}

impl LateInteraction {
    /// Wrap an encoder (no projection). The label in names is `minilm` for
    /// `all-minilm-l6-v2`, else the encoder's asset name; store keys carry the encoder's
    /// weights sha256 and `max_length`.
    pub fn new(encoder: Arc<BertEncoder>) -> Self {
        let model_label = match encoder.name() {
            DEFAULT_MODEL => "minilm".to_string(),
            other => other.to_string(),
        };
        LateInteraction {
            encoder,
            model_label,
            projection: None,
        }
    }

    /// The default: raw 384-d MiniLM token embeddings (`all-minilm-l6-v2` with default
    /// [`EncoderParams`], no projection — **not** a trained ColBERT).
    pub fn load_minilm(assets: &Assets) -> Result<Self> {
        let encoder = BertEncoder::load(assets, DEFAULT_MODEL, EncoderParams::default())?;
        Ok(Self::new(Arc::new(encoder)))
    }

    /// Replace the label used in names.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.model_label = label.into();
        self
    }

    /// Add a projection; its input size must equal the encoder's dimension.
    pub fn with_projection(mut self, projection: Projection) -> Result<Self> {
        if projection.in_dim != self.encoder.dim() {
            return Err(Error::param(
                "projection",
                format!(
                    "takes {}-d input, the encoder gives {}-d vectors",
                    projection.in_dim,
                    self.encoder.dim()
                ),
            ));
        }
        self.projection = Some(projection);
        Ok(self)
    }

    /// The encoder.
    pub fn encoder(&self) -> &BertEncoder {
        &self.encoder
    }

    /// The projection, if any.
    pub fn projection(&self) -> Option<&Projection> {
        self.projection.as_ref()
    }

    /// Output dimension (after the projection).
    pub fn dim(&self) -> usize {
        self.projection
            .as_ref()
            .map(|p| p.out_dim)
            .unwrap_or_else(|| self.encoder.dim())
    }

    /// `minilm-raw384`, or `minilm-proj{d}-{sha8}` with a projection.
    pub fn label(&self) -> String {
        match &self.projection {
            None => format!("{}-raw{}", self.model_label, self.dim()),
            Some(p) => format!("{}-proj{}-{}", self.model_label, p.out_dim, p.short_id()),
        }
    }

    /// Token vectors of a text.
    pub fn encode(&self, text: &str) -> Result<EncodedTokens> {
        let te = self.encoder.token_embeddings(text)?;
        // The encoder normalises each row already; the projection (if any) needs the rows
        // renormalised after it.
        let mut vectors: Vec<f32> = te.vectors.iter().flatten().copied().collect();
        if let Some(p) = &self.projection {
            vectors = p.apply(&vectors);
        }
        let dim = self.dim();
        normalize_rows(&mut vectors, dim);
        Ok(EncodedTokens {
            tokens: te.tokens,
            offsets: te.offsets,
            vectors,
        })
    }

    /// Query token vectors; a query with no tokens is an error.
    pub fn encode_query(&self, query: &str) -> Result<EncodedTokens> {
        let e = self.encode(query)?;
        if e.tokens.is_empty() {
            return Err(Error::Empty(format!("query {query:?} has no tokens")));
        }
        Ok(e)
    }

    /// Mean-MaxSim of a query and a passage text.
    pub fn score(&self, query: &str, passage: &str) -> Result<f32> {
        let q = self.encode_query(query)?;
        let d = self.encode(passage)?;
        Ok(maxsim(&q.vectors, &d.vectors, self.dim()))
    }

    /// Token relevance of a passage for a query (report 003 §5).
    pub fn token_relevance(
        &self,
        query: &str,
        passage: &str,
        params: &RelevanceParams,
    ) -> Result<TokenRelevance> {
        let q = self.encode_query(query)?;
        let d = self.encode(passage)?;
        let r = relevance_scores(&q.vectors, &d.vectors, self.dim(), params)?;
        Ok(TokenRelevance {
            query: query.to_string(),
            query_tokens: q.tokens,
            text: passage.to_string(),
            tokens: d.tokens,
            offsets: d.offsets,
            r_abs: r.r_abs,
            r_acc: r.r_acc,
            density: r.density,
            bandwidth: r.bandwidth,
            k_tilde: params.k_tilde,
            score: r.score,
        })
    }

    /// The key a store of these passages must carry.
    pub fn store_key(&self, passages: &[Passage]) -> StoreKey {
        StoreKey {
            model_sha256: self.encoder.model_sha256().to_string(),
            encoder: format!(
                "{} max_length={}",
                self.encoder.name(),
                self.encoder.params().max_length
            ),
            projection: self
                .projection
                .as_ref()
                .map(|p| p.id.clone())
                .unwrap_or_else(|| "none".to_string()),
            passages: passage_set_key(passages),
            dim: self.dim(),
        }
    }

    /// Encode every passage into a new store (with a progress bar).
    pub fn build_store(&self, passages: &[Passage]) -> Result<TokenStore> {
        let mut store = TokenStore::new(self.store_key(passages));
        let mut bar = crate::progress::bar(passages.len(), "token vectors");
        for p in passages {
            let e = self.encode(&p.text)?;
            store.push(&p.id, &p.text, &e.vectors)?;
            crate::progress::tick(&mut bar, 1);
        }
        Ok(store)
    }

    /// Load the store at `path` if its key matches these passages (ids and texts) and
    /// this encoder; otherwise (absent, stale, truncated or corrupt) build it and save
    /// it there. Why an existing file was not used is printed to stderr.
    pub fn load_or_build_store(&self, passages: &[Passage], path: &Path) -> Result<TokenStore> {
        let key = self.store_key(passages);
        if path.exists() {
            match TokenStore::load(path, &key) {
                Ok(store) => return Ok(store),
                Err(e) => eprintln!("rebuilding the token store: {e}"),
            }
        }
        let store = self.build_store(passages)?;
        store.save(path)?;
        Ok(store)
    }
}
