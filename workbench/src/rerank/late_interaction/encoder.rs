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
    markers: Option<Markers>,
}

/// ColBERT's input format: `[Q]` / `[D]` marker tokens after `[CLS]` (ColBERT uses
/// `[unused0]` / `[unused1]` of the BERT vocabulary) and queries padded with `[MASK]` to
/// `n_q` ids (query augmentation). See [`BertEncoder::token_embeddings_marked`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Markers {
    /// Query length in ids, `[CLS]`, `[Q]` and `[SEP]` included (ColBERT: 32).
    pub n_q: usize,
    /// Id of the query marker.
    pub q: u32,
    /// Id of the passage marker.
    pub d: u32,
    /// Id of the pad token of queries.
    pub mask: u32,
}

impl Markers {
    /// ColBERT's markers in `encoder`'s vocabulary, queries padded to `n_q` ids.
    pub fn colbert(encoder: &BertEncoder, n_q: usize) -> Result<Self> {
        let id = |t: &str| {
            encoder.tokenizer().token_to_id(t).ok_or_else(|| {
                Error::param(
                    "markers",
                    format!("the vocabulary of {} has no {t}", encoder.name()),
                )
            })
        };
        if !(4..=encoder.params().max_length).contains(&n_q) {
            return Err(Error::param(
                "n_q",
                format!(
                    "{n_q} is outside 4..={} (room for [CLS], [Q], a wordpiece, [SEP])",
                    encoder.params().max_length
                ),
            ));
        }
        Ok(Markers {
            n_q,
            q: id("[unused0]")?,
            d: id("[unused1]")?,
            mask: id("[MASK]")?,
        })
    }
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
            markers: None,
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

    /// Encode in ColBERT's input format ([`Markers::colbert`]): `[Q]`/`[D]` markers,
    /// queries padded with `[MASK]` to `n_q` ids.
    pub fn with_markers(mut self, n_q: usize) -> Result<Self> {
        self.markers = Some(Markers::colbert(&self.encoder, n_q)?);
        Ok(self)
    }

    /// The ColBERT input format, if on.
    pub fn markers(&self) -> Option<&Markers> {
        self.markers.as_ref()
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

    /// `minilm-raw384`, or `minilm-proj{d}-{sha8}` with a projection; `-qd{n_q}` is
    /// appended with ColBERT's markers.
    pub fn label(&self) -> String {
        let base = match &self.projection {
            None => format!("{}-raw{}", self.model_label, self.dim()),
            Some(p) => format!("{}-proj{}-{}", self.model_label, p.out_dim, p.short_id()),
        };
        match &self.markers {
            None => base,
            Some(m) => format!("{base}-qd{}", m.n_q),
        }
    }

    /// Token vectors of a passage text (with the `[D]` marker when markers are on).
    pub fn encode(&self, text: &str) -> Result<EncodedTokens> {
        let te = match &self.markers {
            None => self.encoder.token_embeddings(text)?,
            Some(m) => self
                .encoder
                .token_embeddings_marked(&[text], m.d, None)?
                .remove(0),
        };
        Ok(self.finish(te))
    }

    /// Token vectors of several passage texts, batched (markers as [`encode`](Self::encode)).
    pub fn encode_passages(&self, texts: &[&str]) -> Result<Vec<EncodedTokens>> {
        match &self.markers {
            None => texts.iter().map(|t| self.encode(t)).collect(),
            Some(m) => Ok(self
                .encoder
                .token_embeddings_marked(texts, m.d, None)?
                .into_iter()
                .map(|te| self.finish(te))
                .collect()),
        }
    }

    /// Token vectors of several queries, batched (markers as [`encode_query`](Self::encode_query)).
    pub fn encode_queries(&self, texts: &[&str]) -> Result<Vec<EncodedTokens>> {
        match &self.markers {
            None => texts.iter().map(|t| self.encode_query(t)).collect(),
            Some(m) => Ok(self
                .encoder
                .token_embeddings_marked(texts, m.q, Some((m.mask, m.n_q)))?
                .into_iter()
                .map(|te| self.finish(te))
                .collect()),
        }
    }

    fn finish(&self, te: crate::encode::TokenEmbeddings) -> EncodedTokens {
        // The encoder normalises each row already; the projection (if any) needs the rows
        // renormalised after it.
        let mut vectors: Vec<f32> = te.vectors.iter().flatten().copied().collect();
        if let Some(p) = &self.projection {
            vectors = p.apply(&vectors);
        }
        let dim = self.dim();
        normalize_rows(&mut vectors, dim);
        EncodedTokens {
            tokens: te.tokens,
            offsets: te.offsets,
            vectors,
        }
    }

    /// Query token vectors (with the `[Q]` marker and `[MASK]` padding when markers are
    /// on); a query with no tokens is an error.
    pub fn encode_query(&self, query: &str) -> Result<EncodedTokens> {
        let e = match &self.markers {
            None => self.encode(query)?,
            Some(m) => {
                if query.trim().is_empty() {
                    return Err(Error::Empty(format!("query {query:?} has no tokens")));
                }
                self.finish(
                    self.encoder
                        .token_embeddings_marked(&[query], m.q, Some((m.mask, m.n_q)))?
                        .remove(0),
                )
            }
        };
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
            encoder: match &self.markers {
                None => format!(
                    "{} max_length={}",
                    self.encoder.name(),
                    self.encoder.params().max_length
                ),
                Some(m) => format!(
                    "{} max_length={} colbert-markers q={} d={} mask={} n_q={}",
                    self.encoder.name(),
                    self.encoder.params().max_length,
                    m.q,
                    m.d,
                    m.mask,
                    m.n_q
                ),
            },
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
        for chunk in passages.chunks(16) {
            let texts: Vec<&str> = chunk.iter().map(|p| p.text.as_str()).collect();
            for (p, e) in chunk.iter().zip(self.encode_passages(&texts)?) {
                store.push(&p.id, &p.text, &e.vectors)?;
            }
            crate::progress::tick(&mut bar, chunk.len());
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
