//! Building a [`SystemSpec`] into a retriever (feature `dense`; dense first stages also
//! need `faiss`), for the
//! retrieval studies and the pipeline alike.
//!
//! A [`SystemBuilder`] holds one corpus's passages and builds each distinct first-stage
//! retriever and each encoder once, however many systems share it (BM25 is the first
//! stage of four DL19 systems; dense, hybrid, RRF and the MaxSim re-ranker share one
//! MiniLM). Trained re-rankers (`trained:<recipe>` cross-encoders, ColBERT projections
//! with `head_dim > 0`) come resolved in a [`Trained`] ([`super::trained`]): the builder
//! loads them and never trains.

use super::system_spec::SystemSpec;
use super::trained::Trained;
#[cfg(feature = "faiss")]
use crate::encode::EmbeddingCache;
use crate::encode::{BertEncoder, EncoderParams};
use crate::env::Env;
use crate::pipeline::config::{
    RerankConfig, RerankKind, RetrieverConfig, RetrieverKind, TRAINED_PREFIX,
};
use crate::rerank::late_interaction::{LateInteraction, MaxSimReranker};
use crate::rerank::{PassageLookup, RerankedRetriever, Reranker};
use crate::retrieve::analyzer::Analyzer;
use crate::retrieve::bm25::{Bm25, Bm25Params};
#[cfg(feature = "faiss")]
use crate::retrieve::dense::DenseRetriever;
#[cfg(feature = "faiss")]
use crate::retrieve::faiss::IndexParams;
use crate::retrieve::fusion::{Fused, Fusion};
use crate::retrieve::tfidf::{TfIdf, TfIdfVariant};
use crate::retrieve::Retriever;
use crate::{Passage, Result};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// Builds systems over one corpus, sharing first stages and encoders.
pub struct SystemBuilder<'e> {
    env: &'e Env,
    trained: Trained,
    passages: Vec<Passage>,
    lookup: PassageLookup,
    first_stages: HashMap<String, Arc<dyn Retriever>>,
    encoders: EncoderPool,
    token_store: Option<String>,
}

/// Sentence / token encoders by asset name, each loaded once.
#[derive(Default)]
pub struct EncoderPool {
    loaded: HashMap<String, Arc<BertEncoder>>,
}

impl EncoderPool {
    /// The encoder of asset `model` with the default parameters (loaded on first use).
    pub fn get(&mut self, assets: &crate::assets::Assets, model: &str) -> Result<Arc<BertEncoder>> {
        if let Some(e) = self.loaded.get(model) {
            return Ok(e.clone());
        }
        let e = Arc::new(BertEncoder::load_named(
            assets,
            model,
            EncoderParams::default(),
        )?);
        self.loaded.insert(model.to_string(), e.clone());
        Ok(e)
    }
}

/// The re-ranker `spec` names: a bi-encoder or late-interaction model over an encoder
/// of `encoders` (a trained ColBERT projection when `head_dim > 0`), or a cross-encoder
/// (`trained:<recipe>`, or the checkpoint folder `model_path`). Trained models are
/// loaded from `trained`; one it does not hold is an error.
pub fn reranker(
    env: &Env,
    trained: &Trained,
    spec: &RerankConfig,
    model_path: &Path,
    encoders: &mut EncoderPool,
) -> Result<Box<dyn Reranker>> {
    match spec.kind {
        RerankKind::BiEncoder => Ok(Box::new(crate::rerank::bi_encoder::BiEncoderReranker::new(
            encoders.get(&env.assets, &spec.model)?,
        ))),
        RerankKind::LateInteraction => Ok(Box::new(MaxSimReranker::new(Arc::new(
            late_interaction(env, trained, spec, encoders)?,
        )))),
        RerankKind::CrossEncoder => Ok(Box::new(cross_encoder(trained, &spec.model, model_path)?)),
    }
}

impl<'e> SystemBuilder<'e> {
    /// A builder over `passages`, re-ranking with the trained models of `trained`
    /// ([`super::trained::for_systems`]).
    pub fn new(env: &'e Env, trained: Trained, passages: Vec<Passage>) -> Result<Self> {
        let lookup = PassageLookup::from_passages(&passages)?;
        Ok(SystemBuilder {
            env,
            trained,
            passages,
            lookup,
            first_stages: HashMap::new(),
            encoders: EncoderPool::default(),
            token_store: None,
        })
    }

    /// Late-interaction re-rankers read the corpus' token vectors from a store built once
    /// and cached as `<cache>/late-interaction/<tag>-<model label>.tok` (keyed by the
    /// passages and the model), instead of encoding every candidate per query: worth it
    /// when the queries' candidates cover the corpus many times over.
    pub fn with_token_store(mut self, tag: &str) -> Self {
        self.token_store = Some(tag.to_string());
        self
    }

    /// The corpus.
    pub fn passages(&self) -> &[Passage] {
        &self.passages
    }

    /// The corpus and its id → text lookup, back from the builder (a pipeline keeps them
    /// after its first stages are built, instead of a second copy).
    pub fn into_parts(self) -> (Vec<Passage>, PassageLookup) {
        (self.passages, self.lookup)
    }

    /// The encoder of asset `model` (loaded once).
    pub fn encoder(&mut self, model: &str) -> Result<Arc<BertEncoder>> {
        self.encoders.get(&self.env.assets, model)
    }

    /// The first-stage retriever of `spec` (built once per distinct spec).
    pub fn first_stage(&mut self, spec: &RetrieverConfig) -> Result<Arc<dyn Retriever>> {
        let key = serde_json::to_string(spec)?;
        if let Some(r) = self.first_stages.get(&key) {
            return Ok(r.clone());
        }
        let r: Arc<dyn Retriever> = match spec.kind {
            RetrieverKind::Bm25 => Arc::new(Bm25::build(
                &self.passages,
                &Analyzer::default(),
                Bm25Params::new().k1(spec.k1).b(spec.b),
            )?),
            RetrieverKind::Tfidf => Arc::new(TfIdf::build(
                &self.passages,
                &Analyzer::default(),
                TfIdfVariant::cosine(),
            )?),
            RetrieverKind::Random => Arc::new(crate::retrieve::control::RandomRetriever::new(
                &self.passages,
                spec.seed.unwrap_or(42),
            )?),
            RetrieverKind::Oracle => {
                return Err(crate::Error::param(
                    "retrievers.kind",
                    "`oracle` needs the questions' gold passages: it is built by a pipeline \
                     (questions.kind = \"squad\"), not a retrieval study",
                ))
            }
            #[cfg(not(feature = "faiss"))]
            RetrieverKind::Dense => {
                return Err(crate::Error::param(
                    "retrievers.kind",
                    "`dense` needs the crate feature `faiss`",
                ))
            }
            #[cfg(feature = "faiss")]
            RetrieverKind::Dense => {
                let enc = self.encoder(&spec.model)?;
                let cache = EmbeddingCache::new(self.env.cache_dir("embeddings"));
                let prefixed: Vec<Passage>;
                let passages = if spec.passage_prefix.is_empty() {
                    &self.passages
                } else {
                    prefixed = self
                        .passages
                        .iter()
                        .map(|p| Passage {
                            text: format!("{}{}", spec.passage_prefix, p.text),
                            ..p.clone()
                        })
                        .collect();
                    &prefixed
                };
                Arc::new(
                    DenseRetriever::build(enc, passages, IndexParams::flat_ip(), Some(&cache))?
                        .with_query_prefix(spec.query_prefix.clone()),
                )
            }
        };
        self.first_stages.insert(key, r.clone());
        Ok(r)
    }

    /// The re-ranker of `spec`; a relative checkpoint folder resolves against `base_dir`.
    pub fn reranker(&mut self, spec: &RerankConfig, base_dir: &Path) -> Result<Box<dyn Reranker>> {
        let _loads_only = crate::train::no_training();
        if let (RerankKind::LateInteraction, Some(tag)) = (spec.kind, &self.token_store) {
            let li = Arc::new(late_interaction(
                self.env,
                &self.trained,
                spec,
                &mut self.encoders,
            )?);
            let dir = self.env.cache_dir("late-interaction");
            std::fs::create_dir_all(&dir).map_err(|e| crate::Error::io(&dir, e))?;
            let t0 = std::time::Instant::now();
            let store = li.load_or_build_store(
                &self.passages,
                &dir.join(format!("{tag}-{}.tok", li.label())),
            )?;
            println!(
                "token store ({}, {} vectors × {}) in {:.1} s",
                li.label(),
                store.n_vectors(),
                store.dim(),
                t0.elapsed().as_secs_f64()
            );
            return Ok(Box::new(
                MaxSimReranker::new(li).with_store(Arc::new(store))?,
            ));
        }
        let path = if Path::new(&spec.model).is_absolute() {
            Path::new(&spec.model).to_path_buf()
        } else {
            base_dir.join(&spec.model)
        };
        reranker(self.env, &self.trained, spec, &path, &mut self.encoders)
    }

    /// The whole system: its first stage (fused when it has several retrievers, each
    /// asked for `depth` candidates), then its re-ranker over the top `rerank.depth`.
    pub fn build(
        &mut self,
        spec: &SystemSpec,
        depth: usize,
        base_dir: &Path,
    ) -> Result<Box<dyn Retriever>> {
        spec.check()?;
        let mut firsts = Vec::with_capacity(spec.retrievers.len());
        for r in &spec.retrievers {
            firsts.push(self.first_stage(r)?);
        }
        let first: Box<dyn Retriever> = if firsts.len() == 1 {
            Box::new(firsts.remove(0))
        } else {
            let weights = (!spec.weights.is_empty()).then(|| spec.weights.clone());
            let fusion = Fusion::new(spec.fusion.method(spec.rank_constant), weights)?;
            Box::new(Fused::new(
                firsts
                    .into_iter()
                    .map(|r| Box::new(r) as Box<dyn Retriever>)
                    .collect(),
                fusion,
                depth,
            )?)
        };
        match &spec.rerank {
            None => Ok(first),
            Some(r) => {
                let reranker = self.reranker(r, base_dir)?;
                Ok(Box::new(RerankedRetriever::new(
                    first,
                    reranker,
                    self.lookup.clone(),
                    r.depth,
                )?))
            }
        }
    }
}

/// The late-interaction model of `spec`: the encoder's raw token vectors, or through the
/// ColBERT projection `trained` holds for it when `head_dim > 0`.
pub fn late_interaction(
    env: &Env,
    trained: &Trained,
    spec: &RerankConfig,
    encoders: &mut EncoderPool,
) -> Result<LateInteraction> {
    let enc = encoders.get(&env.assets, &spec.model)?;
    if spec.head_dim == 0 {
        Ok(LateInteraction::new(enc))
    } else {
        trained.colbert(spec)?.late_interaction(enc)
    }
}

/// The cross-encoder `model` names: a `trained:<recipe>` model that `trained` holds, or
/// else the checkpoint folder `model_path`.
pub fn cross_encoder(
    trained: &Trained,
    model: &str,
    model_path: &Path,
) -> Result<crate::rerank::cross_encoder::CrossEncoder> {
    if !model.starts_with(TRAINED_PREFIX) {
        return crate::rerank::cross_encoder::CrossEncoder::load_from_dir(model_path);
    }
    let t = trained.cross_encoder(model)?;
    crate::rerank::cross_encoder::CrossEncoder::load_from_files(
        &format!("trained-{}", t.recipe.name),
        &t.model_dir.join("config.json"),
        &t.model_dir.join("tokenizer.json"),
        &t.model_dir.join("model.safetensors"),
        crate::rerank::cross_encoder::CrossEncoderParams {
            max_length: t.recipe.max_length,
            ..Default::default()
        },
    )
}
