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
use crate::build::{BuildCtx, EncoderPool};
use crate::encode::BertEncoder;
use crate::env::Env;
use crate::rerank::{PassageLookup, RerankedRetriever, Reranker, RerankerSpec};
use crate::retrieve::fusion::{Fused, Fusion};
use crate::retrieve::{Retriever, RetrieverSpec};
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
    pub fn encoder(&self, model: &str) -> Result<Arc<BertEncoder>> {
        self.encoders.get(&self.env.assets, model)
    }

    /// What the specs are built against: this corpus, the resolved trained models, the
    /// shared encoders.
    fn ctx(&self) -> BuildCtx<'_> {
        BuildCtx::new(
            self.env,
            &self.passages,
            self.trained.models(),
            &self.encoders,
        )
        .with_token_store(self.token_store.as_deref())
    }

    /// The first-stage retriever of `spec` (built once per distinct spec).
    pub fn first_stage(&mut self, spec: &RetrieverSpec) -> Result<Arc<dyn Retriever>> {
        let key = serde_json::to_string(spec)?;
        if let Some(r) = self.first_stages.get(&key) {
            return Ok(r.clone());
        }
        let r = spec.build(&self.ctx())?;
        self.first_stages.insert(key, r.clone());
        Ok(r)
    }

    /// The re-ranker of `spec`; a relative checkpoint folder resolves against `base_dir`.
    pub fn reranker(&mut self, spec: &RerankerSpec, base_dir: &Path) -> Result<Box<dyn Reranker>> {
        let _loads_only = crate::train::no_training();
        spec.build(&self.ctx().with_base_dir(base_dir))
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
                    r.depth(),
                )?))
            }
        }
    }
}
