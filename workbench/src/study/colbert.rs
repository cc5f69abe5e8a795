//! Train a ColBERT projection head (report 003's loss) on frozen all-MiniLM-L6-v2 token
//! vectors ([`crate::train::colbert`]), and report the run: its groups, loss curve and
//! speed.
//!
//! Training groups (question, positive, BM25 hard negatives) come from the reader's
//! supervision: the SQuAD dev half's training articles (never the five held-out ones),
//! RAG Mini Wikipedia training questions, NQ-open distant supervision; never DL19. The
//! encoder is frozen: token vectors of the training texts are encoded once (cached under
//! `<cache>/colbert/`, shared by every `d`) and only the `d × 384` projection trains; it is
//! cached under `<cache>/colbert/<key>/` and reused.

use super::{Env, Scale};
use crate::results::ResultDir;
use crate::train::colbert::{self, ColbertRecipe, TrainedColbert};
use crate::train::TrainLog;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The study's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColbertTrainingParams {
    /// Output dimension d.
    pub dim: usize,
    /// Training groups (a seeded sample of all of them; 0 = all; `None`: the recipe's).
    pub groups: Option<usize>,
    /// Epochs (`None`: the recipe's).
    pub epochs: Option<usize>,
    /// ColBERT's `[Q]`/`[D]` markers and `[MASK]` query padding.
    pub markers: bool,
}

impl ColbertTrainingParams {
    /// The recipe: [`ColbertRecipe::default_minilm`] at `dim`, its name marking every
    /// change (`-g<groups>`, `-markers`, `-e<epochs>`), checked.
    pub fn check(self) -> Result<ColbertTrainingValid> {
        let mut recipe = ColbertRecipe::default_minilm(self.dim);
        if let Some(g) = self.groups {
            recipe.max_groups = (g > 0).then_some(g);
            recipe.name.push_str(&format!("-g{g}"));
        }
        if self.markers {
            recipe.markers = true;
            recipe.name.push_str("-markers");
        }
        if let Some(e) = self.epochs {
            recipe.train.epochs = e;
            recipe.name.push_str(&format!("-e{e}"));
        }
        recipe.check()?;
        Ok(ColbertTrainingValid {
            params: self,
            recipe,
        })
    }
}

/// Checked [`ColbertTrainingParams`] with the recipe.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ColbertTrainingValid {
    /// The parameters.
    pub params: ColbertTrainingParams,
    /// The recipe trained.
    pub recipe: ColbertRecipe,
}

impl ColbertTrainingValid {
    /// The result folder: `colbert-d<d>[-g<groups>][-markers][-e<epochs>]`.
    pub fn name(&self) -> String {
        format!(
            "colbert-{}",
            self.recipe.name.trim_start_matches("minilm-colbert-")
        )
    }

    /// What `config.json` records: the parameters, the recipe and its key, the sha256 of
    /// its input files and the program's sha256.
    pub fn resolved(&self, env: &Env) -> Result<super::Resolved<'_, ColbertTrainingParams>> {
        let inputs = self.recipe.inputs();
        super::Resolved::new(
            env,
            &self.params,
            inputs.iter().map(String::as_str),
            serde_json::json!({
                "recipe": self.recipe,
                "key": self.recipe.key(&env.assets)?,
            }),
        )
    }
}

/// A training run.
#[derive(Debug, Clone)]
pub struct ColbertTraining {
    /// The recipe.
    pub recipe: ColbertRecipe,
    /// The trained projection.
    pub trained: TrainedColbert,
    /// The log, when this run trained.
    pub log: Option<TrainLog>,
    /// Wall seconds of this run.
    pub wall_seconds: f64,
}

impl super::Study for ColbertTrainingValid {
    type Output = ColbertTraining;

    fn name(&self) -> String {
        ColbertTrainingValid::name(self)
    }

    fn scale(&self) -> Scale {
        Scale::Default
    }

    fn summary_file(&self) -> &'static str {
        "metrics.json"
    }

    fn resolved(&self, env: &Env) -> Result<impl serde::Serialize + '_> {
        ColbertTrainingValid::resolved(self, env)
    }

    fn run(&self, env: &Env) -> Result<ColbertTraining> {
        run(env, self)
    }
}

/// Train the recipe (or load it from the cache).
pub fn run(env: &Env, params: &ColbertTrainingValid) -> Result<ColbertTraining> {
    let t0 = Instant::now();
    let (trained, log) =
        colbert::train_or_load(&env.assets, &params.recipe, &env.cache_dir("colbert"))?;
    Ok(ColbertTraining {
        recipe: params.recipe.clone(),
        trained,
        log,
        wall_seconds: t0.elapsed().as_secs_f64(),
    })
}

impl ColbertTraining {
    /// The numbers of the run (also `metrics.json`).
    pub fn summary(&self) -> serde_json::Value {
        let (r, t) = (&self.recipe, &self.trained);
        let first = self.log.as_ref().map(|l| {
            l.steps.iter().take(20).map(|s| s.loss).sum::<f64>()
                / 20f64.min(l.steps.len() as f64).max(1.0)
        });
        let last = self.log.as_ref().map(|l| l.running_loss(20));
        serde_json::json!({
            "recipe": r.name, "key": t.key, "dim": r.dim,
            "groups": t.groups, "passages": t.passages,
            "encode_seconds": t.encode_seconds,
            "train_seconds": t.train_seconds, "groups_per_second": t.examples_per_second,
            "loss_first_20": first, "loss_last_20": last,
            "wall_seconds_this_run": self.wall_seconds, "load_at_training_end": t.load,
            "load_now": crate::machine::load_average(),
            "projection": t.projection_path,
            "storage_bytes_per_token_f16": 2 * r.dim,
        })
    }

    /// The summary as pretty JSON.
    pub fn markdown(&self) -> Result<String> {
        Ok(serde_json::to_string_pretty(&self.summary())?)
    }

    /// `metrics.json` and, when this run trained, `loss.csv` and (feature `plot`)
    /// `loss.png`/`.svg`.
    pub fn write(&self, out: &ResultDir) -> Result<()> {
        if let Some(log) = &self.log {
            let title = format!(
                "ColBERT projection d={}: training loss ({} groups, batch {}, {} hard negatives + in-batch)",
                self.recipe.dim,
                self.trained.groups,
                self.recipe.train.batch_size,
                self.recipe.negatives
            );
            super::write_loss(out, log, &title, 20)?;
        }
        let path = out.path("metrics.json");
        std::fs::write(&path, self.markdown()?).map_err(|e| Error::io(&path, e))?;
        Ok(())
    }
}

impl super::Outputs for ColbertTraining {
    fn write(&self, out: &ResultDir) -> Result<()> {
        ColbertTraining::write(self, out)
    }
    fn markdown(&self) -> Result<String> {
        ColbertTraining::markdown(self)
    }
    fn summary(&self) -> Result<serde_json::Value> {
        Ok(ColbertTraining::summary(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipe_names_mark_every_change() {
        let v = ColbertTrainingParams {
            dim: 64,
            groups: Some(800),
            epochs: None,
            markers: true,
        }
        .check()
        .unwrap();
        assert_eq!(v.recipe.max_groups, Some(800));
        assert!(v.recipe.markers);
        assert_eq!(v.name(), "colbert-d64-g800-markers");
        let all = ColbertTrainingParams {
            dim: 128,
            groups: Some(0),
            epochs: Some(3),
            markers: false,
        }
        .check()
        .unwrap();
        assert_eq!(all.recipe.max_groups, None);
        assert_eq!(all.recipe.train.epochs, 3);
        assert!(ColbertTrainingParams {
            dim: 0,
            groups: None,
            epochs: None,
            markers: false
        }
        .check()
        .is_err());
    }
}
