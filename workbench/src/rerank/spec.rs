//! A re-ranker as data: [`RerankerSpec`], one variant per re-ranker, each holding its
//! own parameters, checked by [`RerankerSpec::check`] and built by
//! [`RerankerSpec::build`] against a [`BuildCtx`] (feature `dense`).
//!
//! In TOML it is a table with a `kind` (default `bi-encoder`) and that kind's fields only:
//!
//! ```toml
//! [rerank]
//! kind = "cross-encoder"
//! model = "trained:minilm-ce"
//! depth = 20
//! ```
//!
//! Models the workbench trains (`trained:<recipe>` cross-encoders, ColBERT projections
//! with `head_dim > 0`) are named by [`RerankerSpec::trained`] and resolved to files
//! before building (`pipeline::trained`); building only loads them from
//! [`BuildCtx::trained`](crate::build::BuildCtx).
//!
//! To add a re-ranker: write its parameters with an `impl `[`BuildReranker`] (beside the
//! re-ranker in `rerank/<name>.rs`, or here when the re-ranker's module is compiled only
//! with a feature) and add one line to the `stage_specs!` list below.

use super::Reranker;
use crate::assets::TRAINED_PREFIX;
use crate::build::BuildCtx;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// A model a re-ranker spec names that the workbench trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrainedModel<'a> {
    /// A cross-encoder `trained:<recipe>`: the spec's model name and the recipe's.
    CrossEncoder {
        /// The spec's `model` (`trained:<recipe>`).
        model: &'a str,
        /// The recipe (`model` without the prefix).
        recipe: &'a str,
    },
    /// A ColBERT projection of `model`'s token vectors.
    Colbert {
        /// The encoder asset.
        model: &'a str,
        /// The projection's dimension.
        head_dim: usize,
        /// Its training groups (0 = all).
        head_groups: usize,
    },
}

/// What a re-ranker's parameters do: check themselves, and build the re-ranker.
pub trait BuildReranker {
    /// First-stage candidates re-ranked.
    fn depth(&self) -> usize;

    /// The model it loads (asset, folder, or `trained:<recipe>`).
    fn model(&self) -> &str;

    /// The model, to rewrite (a relative folder made relative to the config's folder).
    fn model_mut(&mut self) -> &mut String;

    /// The trained model it names, if any (resolved before building).
    fn trained(&self) -> Option<TrainedModel<'_>> {
        None
    }

    /// Whether its model is an encoder asset (a sentence / token encoder, not a
    /// cross-encoder checkpoint).
    fn uses_encoder_asset(&self) -> bool {
        false
    }

    /// Check the parameters before any work; errors name the field.
    fn check(&self) -> Result<()> {
        if self.depth() == 0 {
            return Err(Error::param("rerank.depth", "k = 0: must be at least 1"));
        }
        // One file of a hub repository is a GGUF; re-rankers are folders.
        if matches!(
            crate::assets::ModelRef::parse(self.model()),
            crate::assets::ModelRef::Hub(_)
        ) {
            return Err(crate::assets::hub_is_one_file("rerank.model", self.model()));
        }
        Ok(())
    }

    /// The re-ranker (loading, never training).
    fn build(&self, ctx: &BuildCtx<'_>) -> Result<Box<dyn Reranker>>;
}

crate::build::stage_specs! {
    /// One re-ranker. See the [module docs](self).
    pub enum RerankerSpec: dyn BuildReranker, default "bi-encoder", table "rerank";
    /// Cosine of sentence vectors.
    BiEncoder(BiEncoderSpec) = "bi-encoder",
    /// MaxSim over token vectors, raw or through a trained ColBERT projection.
    LateInteraction(LateInteractionSpec) = "late-interaction",
    /// A `BertForSequenceClassification` checkpoint.
    CrossEncoder(CrossEncoderSpec) = "cross-encoder",
}

impl Default for RerankerSpec {
    fn default() -> Self {
        RerankerSpec::BiEncoder(Default::default())
    }
}

impl RerankerSpec {
    /// First-stage candidates re-ranked.
    pub fn depth(&self) -> usize {
        self.params().depth()
    }

    /// The model it loads (asset, folder, or `trained:<recipe>`).
    pub fn model(&self) -> &str {
        self.params().model()
    }

    /// The model, to rewrite (a relative folder made relative to the config's folder).
    pub fn model_mut(&mut self) -> &mut String {
        self.params_mut().model_mut()
    }

    /// The trained model it names, if any.
    pub fn trained(&self) -> Option<TrainedModel<'_>> {
        self.params().trained()
    }

    /// Whether its model is an encoder asset (bi-encoder, late interaction).
    pub fn uses_encoder_asset(&self) -> bool {
        self.params().uses_encoder_asset()
    }

    /// Check the parameters before any work; errors name the field.
    pub fn check(&self) -> Result<()> {
        self.params().check()
    }

    /// Whether the trained model it names (if any) is in `ctx`: checked before anything
    /// else is loaded.
    pub fn check_resolved(&self, trained: &crate::build::TrainedModels) -> Result<()> {
        match self.trained() {
            None => Ok(()),
            Some(TrainedModel::CrossEncoder { model, .. }) => {
                trained.cross_encoder(model).map(|_| ())
            }
            Some(TrainedModel::Colbert {
                model,
                head_dim,
                head_groups,
            }) => trained.colbert(model, head_dim, head_groups).map(|_| ()),
        }
    }

    /// The re-ranker.
    pub fn build(&self, ctx: &BuildCtx<'_>) -> Result<Box<dyn Reranker>> {
        self.check_resolved(ctx.trained)?;
        self.params().build(ctx)
    }
}

fn default_model() -> String {
    "all-minilm-l6-v2".into()
}

#[cfg(not(feature = "dense"))]
fn needs_dense<T>() -> Result<T> {
    Err(Error::param(
        "rerank.kind",
        "re-rankers need the crate feature `dense`",
    ))
}

/// A bi-encoder re-ranker's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BiEncoderSpec {
    /// Encoder asset. Default `all-minilm-l6-v2`.
    pub model: String,
    /// First-stage candidates re-ranked. Default 10.
    pub depth: usize,
}

impl Default for BiEncoderSpec {
    fn default() -> Self {
        BiEncoderSpec {
            model: default_model(),
            depth: 10,
        }
    }
}

impl BuildReranker for BiEncoderSpec {
    fn depth(&self) -> usize {
        self.depth
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn model_mut(&mut self) -> &mut String {
        &mut self.model
    }

    fn uses_encoder_asset(&self) -> bool {
        true
    }

    #[cfg(feature = "dense")]
    fn build(&self, ctx: &BuildCtx<'_>) -> Result<Box<dyn Reranker>> {
        Ok(Box::new(super::bi_encoder::BiEncoderReranker::new(
            ctx.encoder(&self.model)?,
        )))
    }

    #[cfg(not(feature = "dense"))]
    fn build(&self, _ctx: &BuildCtx<'_>) -> Result<Box<dyn Reranker>> {
        needs_dense()
    }
}

/// A late-interaction (MaxSim) re-ranker's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LateInteractionSpec {
    /// Encoder asset. Default `all-minilm-l6-v2`.
    pub model: String,
    /// First-stage candidates re-ranked. Default 10.
    pub depth: usize,
    /// The dimension of a trained ColBERT projection of the token vectors (`train::colbert`;
    /// resolved before building by `pipeline::trained`, which trains and caches it when
    /// allowed, as `rag` and the studies do); 0 scores the raw token vectors. Default 0.
    pub head_dim: usize,
    /// With `head_dim > 0`: training groups of the projection (a seeded sample; 0 = all).
    /// Default 800.
    pub head_groups: usize,
}

impl Default for LateInteractionSpec {
    fn default() -> Self {
        LateInteractionSpec {
            model: default_model(),
            depth: 10,
            head_dim: 0,
            head_groups: 800,
        }
    }
}

impl LateInteractionSpec {
    /// The late-interaction model: the encoder's raw token vectors, or through the
    /// ColBERT projection `ctx` holds for it when `head_dim > 0`.
    #[cfg(feature = "dense")]
    pub fn late_interaction(
        &self,
        ctx: &BuildCtx<'_>,
    ) -> Result<super::late_interaction::LateInteraction> {
        use super::late_interaction::projection::Projection;
        use super::late_interaction::LateInteraction;
        let li = LateInteraction::new(ctx.encoder(&self.model)?);
        if self.head_dim == 0 {
            return Ok(li);
        }
        let head = ctx
            .trained
            .colbert(&self.model, self.head_dim, self.head_groups)?;
        let li = match head.markers {
            Some(n_q) => li.with_markers(n_q)?,
            None => li,
        };
        li.with_projection(Projection::load(&head.projection, Some(&head.tensor))?)
    }
}

impl BuildReranker for LateInteractionSpec {
    fn depth(&self) -> usize {
        self.depth
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn model_mut(&mut self) -> &mut String {
        &mut self.model
    }

    fn uses_encoder_asset(&self) -> bool {
        true
    }

    fn trained(&self) -> Option<TrainedModel<'_>> {
        (self.head_dim > 0).then_some(TrainedModel::Colbert {
            model: &self.model,
            head_dim: self.head_dim,
            head_groups: self.head_groups,
        })
    }

    #[cfg(feature = "dense")]
    fn build(&self, ctx: &BuildCtx<'_>) -> Result<Box<dyn Reranker>> {
        use super::late_interaction::MaxSimReranker;
        use std::sync::Arc;
        let li = Arc::new(self.late_interaction(ctx)?);
        let Some(tag) = ctx.token_store else {
            return Ok(Box::new(MaxSimReranker::new(li)));
        };
        let dir = ctx.env.cache_dir("late-interaction");
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let t0 = std::time::Instant::now();
        let store =
            li.load_or_build_store(ctx.passages, &dir.join(format!("{tag}-{}.tok", li.label())))?;
        println!(
            "token store ({}, {} vectors × {}) in {:.1} s",
            li.label(),
            store.n_vectors(),
            store.dim(),
            t0.elapsed().as_secs_f64()
        );
        Ok(Box::new(
            MaxSimReranker::new(li).with_store(Arc::new(store))?,
        ))
    }

    #[cfg(not(feature = "dense"))]
    fn build(&self, _ctx: &BuildCtx<'_>) -> Result<Box<dyn Reranker>> {
        needs_dense()
    }
}

/// A cross-encoder re-ranker's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CrossEncoderSpec {
    /// A `BertForSequenceClassification` folder (relative to the config's folder), or
    /// `trained:<recipe>` for a cross-encoder trained by `train_reranker`
    /// (`train::cross_recipe`). Default `all-minilm-l6-v2`.
    pub model: String,
    /// First-stage candidates re-ranked. Default 10.
    pub depth: usize,
}

impl Default for CrossEncoderSpec {
    fn default() -> Self {
        CrossEncoderSpec {
            model: default_model(),
            depth: 10,
        }
    }
}

impl CrossEncoderSpec {
    /// The cross-encoder: a `trained:<recipe>` model `ctx` holds, or else the checkpoint
    /// folder `model` (relative to `ctx.base_dir`).
    #[cfg(feature = "dense")]
    pub fn cross_encoder(&self, ctx: &BuildCtx<'_>) -> Result<super::cross_encoder::CrossEncoder> {
        use super::cross_encoder::{CrossEncoder, CrossEncoderParams};
        if !self.model.starts_with(TRAINED_PREFIX) {
            return CrossEncoder::load_from_dir(ctx.resolve(&self.model));
        }
        let t = ctx.trained.cross_encoder(&self.model)?;
        CrossEncoder::load_from_files(
            &t.label,
            &t.dir.join("config.json"),
            &t.dir.join("tokenizer.json"),
            &t.dir.join("model.safetensors"),
            CrossEncoderParams {
                max_length: t.max_length,
                ..Default::default()
            },
        )
    }
}

impl BuildReranker for CrossEncoderSpec {
    fn depth(&self) -> usize {
        self.depth
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn model_mut(&mut self) -> &mut String {
        &mut self.model
    }

    fn trained(&self) -> Option<TrainedModel<'_>> {
        self.model
            .strip_prefix(TRAINED_PREFIX)
            .map(|recipe| TrainedModel::CrossEncoder {
                model: &self.model,
                recipe,
            })
    }

    #[cfg(feature = "dense")]
    fn build(&self, ctx: &BuildCtx<'_>) -> Result<Box<dyn Reranker>> {
        Ok(Box::new(self.cross_encoder(ctx)?))
    }

    #[cfg(not(feature = "dense"))]
    fn build(&self, _ctx: &BuildCtx<'_>) -> Result<Box<dyn Reranker>> {
        needs_dense()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> std::result::Result<RerankerSpec, String> {
        toml::from_str(toml_text).map_err(|e| e.to_string())
    }

    #[test]
    fn a_table_without_kind_is_a_bi_encoder_and_each_kind_takes_only_its_fields() {
        let s = parse("depth = 5").unwrap();
        assert_eq!(
            (s.kind(), s.depth(), s.model()),
            ("bi-encoder", 5, "all-minilm-l6-v2")
        );
        let e = parse("kind = \"cross-encoder\"\nhead_dim = 128").unwrap_err();
        assert!(e.contains("unknown field `head_dim`"), "{e}");
        let s = parse("kind = \"late-interaction\"\nhead_dim = 128").unwrap();
        assert_eq!(
            s.trained(),
            Some(TrainedModel::Colbert {
                model: "all-minilm-l6-v2",
                head_dim: 128,
                head_groups: 800
            })
        );
        let s = parse("kind = \"cross-encoder\"\nmodel = \"trained:minilm-ce\"").unwrap();
        assert_eq!(
            s.trained(),
            Some(TrainedModel::CrossEncoder {
                model: "trained:minilm-ce",
                recipe: "minilm-ce"
            })
        );
        assert_eq!(s.variant_name(), "CrossEncoder");
        assert_eq!(
            parse("kind = \"cross-encoder\"\nmodel = \"ce\"")
                .unwrap()
                .trained(),
            None
        );
    }

    #[test]
    fn a_wrong_type_names_the_field() {
        let e = parse("kind = \"cross-encoder\"\ndepth = \"x\"").unwrap_err();
        assert!(e.contains("rerank.depth: invalid type"), "{e}");
    }

    #[test]
    fn every_kind_round_trips_and_checks_name_the_field() {
        for kind in RerankerSpec::KINDS {
            let spec = parse(&format!("kind = \"{kind}\"")).unwrap();
            assert_eq!(spec.kind(), *kind);
            let text = toml::to_string(&spec).unwrap();
            assert_eq!(parse(&text).unwrap(), spec, "{text}");
            let e = parse(&format!("kind = \"{kind}\"\ndepth = 0"))
                .unwrap()
                .check()
                .unwrap_err()
                .to_string();
            assert!(e.contains("rerank.depth"), "{e}");
        }
        let unresolved = parse("kind = \"cross-encoder\"\nmodel = \"trained:minilm-ce\"")
            .unwrap()
            .check_resolved(&Default::default())
            .unwrap_err()
            .to_string();
        assert!(unresolved.contains("not resolved"), "{unresolved}");
    }
}
