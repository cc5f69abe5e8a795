//! Training recipes of the cross-encoder: base model, training groups,
//! hyper-parameters; trained once and reused while the recipe and its inputs are
//! unchanged (`data/cache/cross-encoders/<key>/`, the key as the reader's:
//! [`reader::recipe_key`]).
//!
//! A trained recipe is named in pipeline configs as `trained:<recipe name>`
//! ([`resolve_checkpoint`]).

use super::cross::{encode_groups, CrossTrainModel, PairGroups};
use super::groups::{self, GroupCounts, GroupParams, GroupSet};
use super::reader::{self, load_average, Supervision};
use super::{Stop, TrainConfig, TrainLog};
use crate::assets::Assets;
use crate::rerank::cross_encoder::{CrossEncoder, CrossEncoderParams, PairTokenizer};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Bump when the code that turns a recipe into a checkpoint changes meaning.
pub const CROSS_CACHE_VERSION: &str = "workbench-cross-encoder-v1";

/// Prefix of a trained recipe in a pipeline config's `rerank.model`.
pub use crate::assets::TRAINED_PREFIX;

/// Groups a quick recipe trains on ([`CrossRecipe::at_scale`]): 100 updates of 4 groups,
/// after which its re-ranking of TF-IDF's top 20 is not below TF-IDF's own ranking (a floor
/// in `data/expected.toml`; CHANGELOG.md has the measurements).
pub const QUICK_CROSS_GROUPS: usize = 400;

/// Peak learning rate of the quick recipe (the default recipe's 5e-5 over 375 updates).
pub const QUICK_CROSS_LR: f64 = 1e-4;

/// A complete cross-encoder training recipe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossRecipe {
    /// Short name (`minilm-ce`, …).
    pub name: String,
    /// Base model asset.
    pub base: String,
    /// The questions and positives (the reader's supervision).
    pub supervision: Supervision,
    /// How groups are drawn.
    pub groups: GroupParams,
    /// Pairs per group in training: the positive and the first `group_size − 1` negatives.
    pub group_size: usize,
    /// Longest pair in tokens (training; the trained model reads with the same).
    pub max_length: usize,
    /// Seed of the new classifier's (and a missing pooler's) initialisation.
    pub init_seed: u64,
    /// Train on at most this many groups (a seeded sample; `None`: all).
    pub max_groups: Option<usize>,
    /// The training loop's config (`batch_size` counts groups).
    pub train: TrainConfig,
}

impl CrossRecipe {
    /// The default recipe: MiniLM (all-MiniLM-L6-v2), the reader's default supervision
    /// (SQuAD training articles' answerable questions, RAG Mini training questions, NQ
    /// distant supervision), groups of a positive and 3 BM25 hard negatives, a seeded
    /// sample of 1,500 of the 2,852 groups, pairs of at most 160 tokens, one epoch, 4
    /// groups (16 pairs) per update (375 updates), AdamW lr 5e-5. Sized from the first
    /// measured rate (16 pairs of ≤ 192 tokens in ~17 s per update with a quarter of the
    /// 2 cores, load 10): all 2,852 groups at 192 tokens would take ~1 h on 2 quiet cores.
    pub fn default_minilm() -> Self {
        CrossRecipe {
            name: "minilm-ce".into(),
            base: "all-minilm-l6-v2".into(),
            supervision: reader::ReaderRecipe::default_minilm().supervision,
            groups: GroupParams::default(),
            group_size: 4,
            max_length: 160,
            init_seed: 42,
            max_groups: Some(1500),
            train: TrainConfig {
                epochs: 1,
                batch_size: 4,
                lr: 5e-5,
                warmup_ratio: 0.1,
                max_grad_norm: Some(1.0),
                seed: 42,
                bucket_batches: 8,
                threads: 2,
                checkpoint_every: Some(25),
                ..TrainConfig::default()
            },
        }
    }

    /// The recipe called `name` (`minilm-ce`) at the default scale; its quick size is
    /// [`CrossRecipe::at_scale`] with [`Scale::Quick`](crate::env::Scale::Quick).
    pub fn named(name: &str) -> Result<Self> {
        match name {
            "minilm-ce" => Ok(Self::default_minilm()),
            other => Err(Error::param(
                "recipe",
                format!(
                    "unknown cross-encoder recipe `{other}` (known: minilm-ce; the scale is \
                     set apart, e.g. `--scale quick`)"
                ),
            )),
        }
    }

    /// The recipe `name` at `scale`: at the quick scale it trains on the first
    /// [`QUICK_CROSS_GROUPS`] groups at peak learning rate [`QUICK_CROSS_LR`] and is labelled
    /// `<name>-quick` in records and folders; default and paper use the recipe as it is.
    /// The scale is this argument only: a name never carries it.
    pub fn at_scale(name: &str, scale: crate::env::Scale) -> Result<Self> {
        let mut recipe = Self::named(name)?;
        if scale == crate::env::Scale::Quick {
            recipe.max_groups = Some(QUICK_CROSS_GROUPS);
            recipe.train.lr = QUICK_CROSS_LR;
            recipe.name = format!("{}-quick", recipe.name);
        }
        Ok(recipe)
    }

    /// Check the values.
    pub fn check(&self) -> Result<()> {
        self.train.check()?;
        self.groups.check()?;
        if self.group_size < 2 || self.group_size > self.groups.negatives + 1 {
            return Err(Error::param(
                "group_size",
                format!(
                    "{} must be in 2..={} (a positive and up to {} drawn negatives)",
                    self.group_size,
                    self.groups.negatives + 1,
                    self.groups.negatives
                ),
            ));
        }
        if self.max_length < 8 {
            return Err(Error::param(
                "max_length",
                format!("{} tokens is too short for a pair", self.max_length),
            ));
        }
        Ok(())
    }

    /// The asset names the recipe reads.
    pub fn inputs(&self) -> Vec<&str> {
        reader::supervision_inputs(&self.base, &self.supervision)
    }

    /// The cache key ([`reader::recipe_key`] with [`CROSS_CACHE_VERSION`]).
    pub fn key(&self, assets: &Assets) -> Result<String> {
        let unnamed = CrossRecipe {
            name: String::new(),
            ..self.clone()
        };
        reader::recipe_key(assets, CROSS_CACHE_VERSION, &unnamed, self.inputs())
    }
}

/// A trained cross-encoder in the cache.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainedCrossEncoder {
    /// The recipe.
    pub recipe: CrossRecipe,
    /// Its cache key.
    pub key: String,
    /// The Hugging Face layout checkpoint (`model.safetensors`, `config.json`, `tokenizer.json`).
    pub model_dir: PathBuf,
    /// Training groups.
    pub groups: usize,
    /// Training seconds (updates only).
    pub train_seconds: f64,
    /// Pairs per second (groups per second × group size).
    pub pairs_per_second: f64,
    /// What became of each source's questions.
    pub counts: Vec<GroupCounts>,
    /// NQ question ids in the training groups (keep them out of NQ evaluations).
    pub nq_used: Vec<String>,
    /// Load average when the run ended.
    pub load: String,
}

impl super::checkpoint::RunRecord for TrainedCrossEncoder {
    fn run_paths(&mut self) -> Vec<&mut PathBuf> {
        vec![&mut self.model_dir]
    }
}

/// The project's cache of trained cross-encoders: `<root>/data/cache/cross-encoders`.
pub fn default_cache_root() -> Result<PathBuf> {
    crate::paths::project_cache_dir("cross-encoders")
}

/// The cache folder of a recipe: `cache_root/<key>`.
pub fn cache_dir(assets: &Assets, recipe: &CrossRecipe, cache_root: &Path) -> Result<PathBuf> {
    Ok(cache_root.join(recipe.key(assets)?))
}

/// The trained recipe in `cache_root`, if its `done.json` exists.
pub fn load_trained(
    assets: &Assets,
    recipe: &CrossRecipe,
    cache_root: &Path,
) -> Result<Option<(TrainedCrossEncoder, Option<TrainLog>)>> {
    super::checkpoint::read_done(&cache_dir(assets, recipe, cache_root)?)
}

/// The groups of a recipe (its supervision and [`GroupParams`]).
pub fn recipe_groups(assets: &Assets, recipe: &CrossRecipe) -> Result<GroupSet> {
    groups::training_groups(assets, &recipe.supervision, &recipe.groups)
}

/// Train `recipe` on `set` unless `cache_root/<key>/done.json` exists (then load it). A
/// run interrupted earlier resumes from `cache_root/<key>/state/`. `set` must be
/// [`recipe_groups`] of the recipe (the key does not see it otherwise).
pub fn train_or_load(
    assets: &Assets,
    recipe: &CrossRecipe,
    cache_root: &Path,
    set: &GroupSet,
) -> Result<(TrainedCrossEncoder, Option<TrainLog>)> {
    recipe.check()?;
    if let Some(t) = load_trained(assets, recipe, cache_root)? {
        return Ok(t);
    }
    super::training_allowed(&format!("cross-encoder `{}`", recipe.name))?;
    let key = recipe.key(assets)?;
    let dir = cache_root.join(&key);
    let tok_path = assets.resolve(&recipe.base, "tokenizer.json")?;
    let model = base_model(assets, recipe)?;
    let data = training_data(assets, recipe, set, &model)?;
    let log = super::train(
        &model,
        &model.vars,
        &data,
        &recipe.train,
        Some(&dir.join("state")),
        Stop::End,
    )?;
    let model_dir = dir.join("model");
    model.save_pretrained(&model_dir, &tok_path)?;
    let t = TrainedCrossEncoder {
        recipe: recipe.clone(),
        key,
        model_dir,
        groups: data.pairs.len() / recipe.group_size,
        train_seconds: log.seconds(),
        pairs_per_second: log.examples_per_second() * recipe.group_size as f64,
        counts: set.counts.clone(),
        nq_used: set.nq_used.clone(),
        load: load_average(),
    };
    let done = dir.join("done.json");
    std::fs::write(&done, serde_json::to_vec_pretty(&t)?).map_err(|e| Error::io(&done, e))?;
    Ok((t, Some(log)))
}

/// A fresh model to train: `recipe.base` with a new classifier (seeded by
/// `recipe.init_seed`).
pub fn base_model(assets: &Assets, recipe: &CrossRecipe) -> Result<CrossTrainModel> {
    CrossTrainModel::from_checkpoint(
        &assets.resolve(&recipe.base, "config.json")?,
        &assets.resolve(&recipe.base, "model.safetensors")?,
        recipe.init_seed,
        recipe.group_size,
    )
}

/// The groups `recipe` trains `model` on, encoded: its seeded sample of `set`
/// (`max_groups`), pairs cut to `max_length` tokens (at most the model's positions).
pub fn training_data(
    assets: &Assets,
    recipe: &CrossRecipe,
    set: &GroupSet,
    model: &CrossTrainModel,
) -> Result<PairGroups> {
    let tok_path = assets.resolve(&recipe.base, "tokenizer.json")?;
    let max_length = recipe.max_length.min(model.config.max_positions);
    let tok = PairTokenizer::from_file(&tok_path, max_length)?;
    let pad = tok
        .token_to_id("[PAD]")
        .unwrap_or(model.config.pad_token_id);
    let mut chosen: Vec<&groups::Group> = set.groups.iter().collect();
    if let Some(m) = recipe.max_groups {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(recipe.train.seed);
        chosen.shuffle(&mut rng);
        chosen.truncate(m);
    }
    let chosen: Vec<groups::Group> = chosen.into_iter().cloned().collect();
    encode_groups(&tok, &chosen, recipe.group_size, pad)
}

/// The latest checkpoint of an unfinished run of `recipe` (interrupted, or still going)
/// exported in the Hugging Face layout to `cache_root/<key>/partial-<updates>/`, with its
/// log; `None` when the run has no checkpoint. The run itself resumes from the same
/// checkpoint with [`train_or_load`].
pub fn partial_checkpoint(
    assets: &Assets,
    recipe: &CrossRecipe,
    cache_root: &Path,
    set: &GroupSet,
) -> Result<Option<(TrainedCrossEncoder, TrainLog)>> {
    let key = recipe.key(assets)?;
    let dir = cache_root.join(&key);
    let Some(st) = super::checkpoint::read_state(&dir.join("state"))? else {
        return Ok(None);
    };
    let steps = st.log.steps.len();
    let model = CrossTrainModel::from_checkpoint(
        &assets.resolve(&recipe.base, "config.json")?,
        &dir.join("state").join("weights.safetensors"),
        recipe.init_seed,
        recipe.group_size,
    )?;
    let model_dir = dir.join(format!("partial-{steps}"));
    model.save_pretrained(&model_dir, &assets.resolve(&recipe.base, "tokenizer.json")?)?;
    let groups = st.log.steps.iter().map(|s| s.examples).sum();
    let t = TrainedCrossEncoder {
        recipe: recipe.clone(),
        key,
        model_dir,
        groups,
        train_seconds: st.log.seconds(),
        pairs_per_second: st.log.examples_per_second() * recipe.group_size as f64,
        counts: set.counts.clone(),
        nq_used: set.nq_used.clone(),
        load: load_average(),
    };
    Ok(Some((t, st.log)))
}

/// The checkpoint folder of `spec` and, for a trained recipe, the recipe: `trained:<recipe>`
/// is the cached model of that recipe (an error naming the recipe, its key and
/// `train_reranker` when it has not been trained); anything else is a folder, returned
/// unchanged.
pub fn resolve_checkpoint(
    spec: &str,
    assets: &Assets,
    cache_root: &Path,
) -> Result<(PathBuf, Option<CrossRecipe>)> {
    let Some(name) = spec.strip_prefix(TRAINED_PREFIX) else {
        return Ok((PathBuf::from(spec), None));
    };
    let recipe = CrossRecipe::named(name)?;
    match load_trained(assets, &recipe, cache_root)? {
        Some((t, _)) => Ok((t.model_dir, Some(recipe))),
        None => Err(Error::param(
            "rerank.model",
            format!(
                "cross-encoder recipe `{name}` (key {}) is not trained in {}: run \
                 `cargo run --release --bin train_reranker -- --recipe {name}` first",
                recipe.key(assets)?,
                cache_root.display()
            ),
        )),
    }
}

/// The cross-encoder `spec` names ([`resolve_checkpoint`]): a trained recipe reads pairs
/// of at most its training `max_length` and is labelled `trained-<recipe>`; a folder loads
/// with default parameters.
pub fn load_cross_encoder(spec: &str, assets: &Assets, cache_root: &Path) -> Result<CrossEncoder> {
    let (dir, recipe) = resolve_checkpoint(spec, assets, cache_root)?;
    match recipe {
        None => CrossEncoder::load_from_dir(&dir),
        Some(r) => CrossEncoder::load_from_files(
            &format!("trained-{}", r.name),
            &dir.join("config.json"),
            &dir.join("tokenizer.json"),
            &dir.join("model.safetensors"),
            CrossEncoderParams {
                max_length: r.max_length,
                ..CrossEncoderParams::default()
            },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_sees_the_configuration_not_the_name() {
        let assets = Assets::load().unwrap();
        let r = CrossRecipe::default_minilm();
        let k = r.key(&assets).unwrap();
        assert_eq!(k.len(), 16);
        let renamed = CrossRecipe {
            name: "other".into(),
            ..r.clone()
        };
        assert_eq!(renamed.key(&assets).unwrap(), k);
        let mut lr = r.clone();
        lr.train.lr *= 2.0;
        assert_ne!(lr.key(&assets).unwrap(), k);
        let mut g = r.clone();
        g.groups.seed += 1;
        assert_ne!(g.key(&assets).unwrap(), k);
        // Not the reader's key for the same supervision.
        let reader = reader::ReaderRecipe::default_minilm();
        assert_ne!(reader.key(&assets).unwrap(), k);
    }

    #[test]
    fn recipes_are_checked() {
        CrossRecipe::default_minilm().check().unwrap();
        let mut r = CrossRecipe::default_minilm();
        r.group_size = r.groups.negatives + 2;
        assert!(r.check().unwrap_err().to_string().contains("group_size"));
        r.group_size = 1;
        assert!(r.check().is_err());
        let quick = CrossRecipe::at_scale("minilm-ce", crate::env::Scale::Quick).unwrap();
        assert_eq!(quick.name, "minilm-ce-quick");
        let e = CrossRecipe::named("minilm-ce-quick")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown cross-encoder recipe `minilm-ce-quick`"),
            "{e}"
        );
        assert_eq!(quick.max_groups, Some(QUICK_CROSS_GROUPS));
        assert_eq!(quick.train.lr, QUICK_CROSS_LR);
        assert_eq!(
            CrossRecipe::at_scale("minilm-ce", crate::env::Scale::Default).unwrap(),
            CrossRecipe::default_minilm()
        );
        let e = CrossRecipe::named("nope").unwrap_err().to_string();
        assert!(e.contains("nope") && e.contains("minilm-ce"), "{e}");
    }

    #[test]
    fn trained_specs_resolve_through_the_cache() {
        let assets = Assets::load().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        // A folder passes through unchanged.
        let (dir, r) = resolve_checkpoint("some/folder", &assets, tmp.path()).unwrap();
        assert_eq!(dir, PathBuf::from("some/folder"));
        assert!(r.is_none());
        // Untrained: an error naming the recipe, its key and what to run.
        let recipe = CrossRecipe::default_minilm();
        let key = recipe.key(&assets).unwrap();
        let e = resolve_checkpoint("trained:minilm-ce", &assets, tmp.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains(&key) && e.contains("train_reranker"), "{e}");
        assert!(resolve_checkpoint("trained:nope", &assets, tmp.path()).is_err());
        // Trained: the done.json's model folder.
        let d = tmp.path().join(&key);
        std::fs::create_dir_all(&d).unwrap();
        let t = TrainedCrossEncoder {
            recipe: recipe.clone(),
            key: key.clone(),
            model_dir: d.join("model"),
            groups: 1,
            train_seconds: 1.0,
            pairs_per_second: 1.0,
            counts: vec![],
            nq_used: vec![],
            load: String::new(),
        };
        std::fs::write(d.join("done.json"), serde_json::to_vec(&t).unwrap()).unwrap();
        let (dir, r) = resolve_checkpoint("trained:minilm-ce", &assets, tmp.path()).unwrap();
        assert_eq!(dir, d.join("model"));
        assert_eq!(r.unwrap().max_length, recipe.max_length);
        // Written through another checkout's cache link (since deleted): the folder it is
        // found in counts, the path's components after the key are kept.
        let t = TrainedCrossEncoder {
            model_dir: PathBuf::from(format!(
                "/gone/checkout/data/cache/cross-encoders/{key}/model"
            )),
            ..t
        };
        std::fs::write(d.join("done.json"), serde_json::to_vec(&t).unwrap()).unwrap();
        let (dir, _) = resolve_checkpoint("trained:minilm-ce", &assets, tmp.path()).unwrap();
        assert_eq!(dir, d.join("model"));
        // A corrupt done.json is an error naming it.
        std::fs::write(d.join("done.json"), "{").unwrap();
        let e = resolve_checkpoint("trained:minilm-ce", &assets, tmp.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("done.json"), "{e}");
    }
}
