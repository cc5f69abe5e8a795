//! Trained models, resolved before anything is built (feature `dense`).
//!
//! A pipeline config or a retrieval study's systems may re-rank with models the workbench
//! trains: cross-encoders named `trained:<recipe>` and ColBERT projections
//! (late interaction with `head_dim > 0`); a config may read with an extractive reader it
//! trains (`trained:<recipe>`). [`resolve`] (for re-rank specs), [`for_systems`] and
//! [`for_config`] find each one in the cache ([`Env::cache`]) at a scale's recipe size, a
//! value apart from the name, and train a missing re-ranker first when given
//! [`Training::Allow`] (a missing reader is an error naming `train_reader`). The builders
//! ([`super::systems`], [`super::Pipeline::build_resolved`]) then only load what a
//! [`Trained`] holds, and a trained model that was not resolved is an error there:
//!
//! | trained model | quick | default, paper |
//! |---|---|---|
//! | cross-encoder `trained:minilm-ce` | [`cross_recipe_at`]: 400 groups (100 updates, lr 1e-4) | 1,500 groups (375 updates) |
//! | ColBERT projection | [`QUICK_COLBERT_GROUPS`] groups | `head_groups` of the spec (800 in the studies) |
//! | extractive reader `trained:minilm-all` (and the other reader recipes) | one epoch on 3,200 windows (`minilm-squad2`: two) | the published recipe |

use super::config::PipelineConfig;
use super::system_spec::SystemSpec;
use crate::build::{ColbertHead, CrossCheckpoint, TrainedModels};
use crate::env::{Env, Scale};
use crate::rerank::spec::{RerankerSpec, TrainedModel};
use crate::train::colbert::{ColbertRecipe, TrainedColbert};
use crate::train::cross_recipe::{self, CrossRecipe, TrainedCrossEncoder};
use crate::{Error, Result};
use std::collections::BTreeMap;

/// ColBERT projections at the quick scale train on this many groups.
pub const QUICK_COLBERT_GROUPS: usize = 200;

pub use crate::train::cross_recipe::QUICK_CROSS_GROUPS;

/// What resolving may do when a trained model is not in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Training {
    /// Train it (and cache it).
    Allow,
    /// Fail, naming the model and how to train it.
    Forbid,
}

/// The trained models of a config or of a study's systems: the files the builders load
/// ([`Trained::models`], [`Trained::reader_for`]).
#[derive(Debug, Clone, Default)]
pub struct Trained {
    models: TrainedModels,
    /// The trained extractive reader: its `model` value and its checkpoint.
    reader: Option<(String, ReaderCheckpoint)>,
}

/// A trained extractive reader: its checkpoint folder and the windows it was trained
/// with (the reader reads with the same windows).
pub type ReaderCheckpoint = (std::path::PathBuf, crate::read::extractive::WindowParams);

impl Trained {
    /// The files the builders load ([`BuildCtx::trained`](crate::build::BuildCtx)).
    pub fn models(&self) -> &TrainedModels {
        &self.models
    }

    /// Whether the trained model `spec` re-ranks with (if any) is resolved here: the
    /// builders check this before they load anything else.
    pub fn check(&self, spec: &RerankerSpec) -> Result<()> {
        spec.check_resolved(&self.models)
    }

    /// The trained extractive reader resolved for the `reader.model` value `model`
    /// (`trained:<recipe>`), if this holds it.
    pub fn reader_for(&self, model: &str) -> Option<&ReaderCheckpoint> {
        self.reader
            .as_ref()
            .filter(|(m, _)| m == model)
            .map(|(_, c)| c)
    }

    /// How many trained models this holds.
    pub fn len(&self) -> usize {
        self.models.len() + usize::from(self.reader.is_some())
    }

    /// Whether this holds no trained model.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn add_cross_encoder(&mut self, model: &str, t: &TrainedCrossEncoder) {
        self.models.insert_cross_encoder(
            model,
            CrossCheckpoint {
                label: format!("trained-{}", t.recipe.name),
                dir: t.model_dir.clone(),
                max_length: t.recipe.max_length,
            },
        );
    }

    fn add_colbert(
        &mut self,
        model: &str,
        head_dim: usize,
        head_groups: usize,
        t: &TrainedColbert,
    ) {
        self.models.insert_colbert(
            model,
            head_dim,
            head_groups,
            ColbertHead {
                projection: t.projection_path.clone(),
                tensor: crate::train::colbert::WEIGHT_NAME.to_string(),
                markers: t.recipe.markers.then_some(t.recipe.n_q),
            },
        );
    }
}

/// The trained re-rankers of `specs` at `scale`'s recipe sizes: from the cache, or
/// trained into it first when `training` allows.
pub fn resolve<'a>(
    env: &Env,
    scale: Scale,
    specs: impl IntoIterator<Item = &'a RerankerSpec>,
    training: Training,
) -> Result<Trained> {
    let mut out = Trained::default();
    for spec in specs {
        match spec.trained() {
            None => {}
            Some(TrainedModel::CrossEncoder { model, recipe }) => {
                if out.models.has_cross_encoder(model) {
                    continue;
                }
                let at_scale = cross_recipe_at(recipe, scale)?;
                let trained = trained_cross_encoder(env, recipe, &at_scale, scale, training)?;
                out.add_cross_encoder(model, &trained);
            }
            Some(TrainedModel::Colbert {
                model,
                head_dim,
                head_groups,
            }) => {
                if out.models.has_colbert(model, head_dim, head_groups) {
                    continue;
                }
                let recipe = colbert_recipe(model, head_dim, colbert_groups_at(head_groups, scale));
                let trained = trained_colbert(env, &recipe, training)?;
                out.add_colbert(model, head_dim, head_groups, &trained);
            }
        }
    }
    Ok(out)
}

/// [`resolve`] for the re-rankers of a study's systems.
pub fn for_systems(
    env: &Env,
    scale: Scale,
    systems: &[SystemSpec],
    training: Training,
) -> Result<Trained> {
    resolve(
        env,
        scale,
        systems.iter().filter_map(|s| s.rerank.as_ref()),
        training,
    )
}

/// [`resolve`] for a pipeline config's re-ranker, and its extractive reader when that is
/// one the workbench trains (`trained:<recipe>`, at `scale`'s recipe size). Readers are
/// never trained here (hours at the default scale): one that is not in the cache is an
/// error naming the command that trains it.
pub fn for_config(
    env: &Env,
    scale: Scale,
    config: &PipelineConfig,
    training: Training,
) -> Result<Trained> {
    let mut out = resolve(env, scale, config.rerank.iter(), training)?;
    if let crate::read::ReaderSpec::Extractive(e) = &config.reader.spec {
        if let crate::assets::ModelRef::Trained(name) = crate::assets::ModelRef::parse(&e.model) {
            out.reader = Some((e.model.clone(), trained_reader(env, &e.model, name, scale)?));
        }
    }
    Ok(out)
}

/// The folder and windows of the trained extractive reader `recipe` at `scale`, read from
/// the cache.
///
/// Errors: a reader that is not in the cache ([`Error::InvalidParam`] naming
/// `reader.model` and the command that trains it).
fn trained_reader(env: &Env, model: &str, recipe: &str, scale: Scale) -> Result<ReaderCheckpoint> {
    use crate::train::reader::{ReaderRecipe, TrainedReader};
    let r = ReaderRecipe::at_scale(recipe, scale)?;
    let dir = env.cache_dir("readers").join(r.key(&env.assets)?);
    match crate::train::checkpoint::read_done::<TrainedReader>(&dir)? {
        Some((t, _)) => Ok((t.model_dir, t.recipe.windows)),
        None => Err(Error::param(
            "reader.model",
            format!(
                "`{model}` at the {scale} scale (`{}`) is not trained yet ({} has no finished \
                 run): train it with `cargo run --release --bin train_reader -- --recipe \
                 {recipe} --scale {scale}`",
                r.name,
                dir.display(),
            ),
        )),
    }
}

/// The cross-encoder of recipe `name` (`recipe`, at `scale`).
fn trained_cross_encoder(
    env: &Env,
    name: &str,
    recipe: &CrossRecipe,
    scale: Scale,
    training: Training,
) -> Result<TrainedCrossEncoder> {
    let root = env.cache_dir("cross-encoders");
    if let Some((t, _)) = cross_recipe::load_trained(&env.assets, recipe, &root)? {
        return Ok(t);
    }
    if training == Training::Forbid {
        return Err(Error::param(
            "rerank.model",
            format!(
                "cross-encoder `{}` is not in {}; train it with `cargo run --release --bin \
                 train_reranker -- --recipe {name} --scale {scale}`",
                recipe.name,
                root.display(),
            ),
        ));
    }
    println!(
        "cross-encoder `{}` is not in {}: training it ({} groups)",
        recipe.name,
        root.display(),
        recipe.max_groups.map_or("all".into(), |g| g.to_string())
    );
    let set = cross_recipe::recipe_groups(&env.assets, recipe)?;
    Ok(cross_recipe::train_or_load(&env.assets, recipe, &root, &set)?.0)
}

fn trained_colbert(
    env: &Env,
    recipe: &ColbertRecipe,
    training: Training,
) -> Result<TrainedColbert> {
    let root = env.cache_dir("colbert");
    if training == Training::Forbid {
        return crate::train::colbert::load_trained(&env.assets, recipe, &root)?.ok_or_else(|| {
            Error::param(
                "rerank.head_dim",
                format!(
                    "the ColBERT projection `{}` is not in {}; run a study that trains it (`dl19`, `nq`) or resolve with Training::Allow",
                    recipe.name,
                    root.display()
                ),
            )
        });
    }
    Ok(crate::train::colbert::train_or_load(&env.assets, recipe, &root)?.0)
}

/// Training groups of a ColBERT projection at `scale`: [`QUICK_COLBERT_GROUPS`] (or
/// fewer, when `groups` asks for fewer) at the quick scale, `groups` otherwise (0 = all).
pub fn colbert_groups_at(groups: usize, scale: Scale) -> usize {
    match scale {
        Scale::Quick if groups == 0 => QUICK_COLBERT_GROUPS,
        Scale::Quick => groups.min(QUICK_COLBERT_GROUPS),
        _ => groups,
    }
}

/// The default ColBERT recipe at `dim` over the frozen encoder `base`, on `groups`
/// sampled groups (0 = all).
pub fn colbert_recipe(base: &str, dim: usize, groups: usize) -> ColbertRecipe {
    let mut recipe = ColbertRecipe::default_minilm(dim);
    recipe.base = base.to_string();
    recipe.max_groups = (groups > 0).then_some(groups);
    recipe
}

/// The cross-encoder recipe `name` at `scale` ([`CrossRecipe::at_scale`]).
pub fn cross_recipe_at(name: &str, scale: Scale) -> Result<CrossRecipe> {
    CrossRecipe::at_scale(name, scale)
}

/// The cache keys of every trained model `systems` re-rank with at `scale`
/// (`system key → recipe key`), computed without training: part of a result's identity,
/// so a retrained model makes the result stale.
pub fn keys(env: &Env, scale: Scale, systems: &[SystemSpec]) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for s in systems {
        if let Some(key) = s
            .rerank
            .as_ref()
            .map(|r| reranker_key(env, scale, r))
            .transpose()?
            .flatten()
        {
            out.insert(s.key.clone(), key);
        }
    }
    Ok(out)
}

/// The cache keys of the trained models `config` names at `scale` (`rerank.model` /
/// `reader.model` → recipe key), computed without training or loading.
pub fn config_keys(
    env: &Env,
    scale: Scale,
    config: &PipelineConfig,
) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    if let Some(key) = config
        .rerank
        .as_ref()
        .map(|r| reranker_key(env, scale, r))
        .transpose()?
        .flatten()
    {
        out.insert("rerank.model".to_string(), key);
    }
    if let crate::read::ReaderSpec::Extractive(e) = &config.reader.spec {
        if let crate::assets::ModelRef::Trained(name) = crate::assets::ModelRef::parse(&e.model) {
            let recipe = crate::train::reader::ReaderRecipe::at_scale(name, scale)?;
            out.insert("reader.model".to_string(), recipe.key(&env.assets)?);
        }
    }
    Ok(out)
}

/// The recipe key of the trained model `spec` re-ranks with at `scale`, if any.
fn reranker_key(env: &Env, scale: Scale, spec: &RerankerSpec) -> Result<Option<String>> {
    Ok(match spec.trained() {
        None => None,
        Some(TrainedModel::CrossEncoder { recipe, .. }) => {
            Some(cross_recipe_at(recipe, scale)?.key(&env.assets)?)
        }
        Some(TrainedModel::Colbert {
            model,
            head_dim,
            head_groups,
        }) => {
            let recipe = colbert_recipe(model, head_dim, colbert_groups_at(head_groups, scale));
            Some(recipe.key(&env.assets)?)
        }
    })
}
