//! The trained cross-encoder: train a recipe ([`crate::train::cross_recipe`], cached by its
//! inputs) and evaluate it on the held-out SQuAD articles.
//!
//! Held-out evaluation: the answerable questions of the five held-out SQuAD articles over
//! all 646 dev-half paragraphs (each question's own paragraph is its one relevant
//! passage): TF-IDF, dense all-MiniLM-L6-v2, and the trained cross-encoder re-ranking
//! TF-IDF's top `rerank_depth` (the first stage of report 003's table); MRR@10 and
//! Recall@1/10, randomisation tests against dense and TF-IDF.
//!
//! | scale | recipe | held-out questions |
//! |---|---|---|
//! | quick | `<recipe>-quick` (400 groups) | a seeded sample of 200 |
//! | default, paper | the recipe | all |

use super::{Env, Scale};
use crate::chunk::{Chunker, WholeDocument};
use crate::display::Table;
use crate::encode::{BertEncoder, EmbeddingCache, EncoderParams};
use crate::evaluate::{evaluate, significance, Metric, MetricResult};
use crate::load::squad;
use crate::rerank::cross_encoder::{CrossEncoder, CrossEncoderParams};
use crate::rerank::{PassageLookup, RerankedRetriever};
use crate::results::ResultDir;
use crate::retrieve::analyzer::Analyzer;
use crate::retrieve::dense::DenseRetriever;
use crate::retrieve::faiss::IndexParams;
use crate::retrieve::tfidf::{TfIdf, TfIdfVariant};
use crate::retrieve::Retriever;
use crate::train::cross_recipe::{self, CrossRecipe, TrainedCrossEncoder};
use crate::train::groups::GroupSet;
use crate::train::qa_data::HELD_OUT_ARTICLES;
use crate::train::TrainLog;
use crate::{Error, Qrels, Query, Result};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Instant;

/// The evaluation data set asset.
pub const DATA: &str = "squad-v2-dev-half";
/// The held-out table's metrics.
pub const METRICS: [Metric; 3] = [Metric::Mrr(10), Metric::Recall(1), Metric::Recall(10)];

/// The study's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RerankerParams {
    /// Sizes: the recipe's size and the held-out sample.
    pub scale: Scale,
    /// Recipe name (`minilm-ce`; its size is the scale's, labelled `minilm-ce-quick` at the
    /// quick scale).
    pub recipe: String,
    /// Evaluate the latest checkpoint of the recipe's unfinished run instead of training.
    pub partial: bool,
    /// Evaluate a seeded sample of this many held-out questions (`None`: all).
    pub questions: Option<usize>,
    /// TF-IDF candidates re-ranked by the cross-encoder.
    pub rerank_depth: usize,
    /// Passages ranked per query by the first stages.
    pub depth: usize,
    /// Trials of the randomisation tests.
    pub trials: usize,
    /// Seed of the randomisation tests and of the question sample.
    pub seed: u64,
}

impl RerankerParams {
    /// The published parameters of `recipe` at `scale`.
    pub fn at_scale(recipe: &str, scale: Scale) -> Self {
        RerankerParams {
            scale,
            recipe: recipe.to_string(),
            partial: false,
            questions: (scale == Scale::Quick).then_some(200),
            rerank_depth: 20,
            depth: 100,
            trials: 10_000,
            seed: 42,
        }
    }

    /// Check the values and resolve the recipe at the scale.
    pub fn check(self) -> Result<RerankerValid> {
        if self.rerank_depth == 0 || self.depth == 0 {
            return Err(Error::param("depth", "depths must be at least 1"));
        }
        if self.trials == 0 {
            return Err(Error::param("trials", "at least one trial"));
        }
        if self.questions == Some(0) {
            return Err(Error::param("questions", "evaluate at least one question"));
        }
        let recipe = crate::pipeline::trained::cross_recipe_at(&self.recipe, self.scale)?;
        recipe.check()?;
        Ok(RerankerValid {
            params: self,
            recipe,
        })
    }
}

/// Checked [`RerankerParams`] with the recipe at its scale.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RerankerValid {
    /// The parameters.
    pub params: RerankerParams,
    /// The recipe trained and evaluated.
    pub recipe: CrossRecipe,
}

impl std::ops::Deref for RerankerValid {
    type Target = RerankerParams;
    fn deref(&self) -> &RerankerParams {
        &self.params
    }
}

impl RerankerValid {
    /// The result folder: `reranker-<recipe>` (the quick recipe's name ends in `-quick`),
    /// `-partial` when an unfinished run is read, `-q<N>` for a sample of N questions
    /// other than the scale's own.
    pub fn name(&self) -> String {
        let mut name = format!("reranker-{}", self.recipe.name);
        if self.partial {
            name.push_str("-partial");
        }
        let published = RerankerParams::at_scale(&self.params.recipe, self.scale).questions;
        if let Some(m) = self.questions.filter(|_| self.questions != published) {
            name.push_str(&format!("-q{m}"));
        }
        name
    }

    /// What `config.json` records: the parameters, the recipe and its cache key, the
    /// evaluation data, the sha256 of every input file and the program's sha256.
    pub fn resolved(&self, env: &Env) -> Result<super::Resolved<'_, RerankerParams>> {
        let mut assets = self.recipe.inputs();
        assets.push(DATA);
        super::Resolved::new(
            env,
            &self.params,
            assets,
            serde_json::json!({
                "recipe": self.recipe,
                "key": self.recipe.key(&env.assets)?,
                "eval_data": DATA,
                "held_out_articles": HELD_OUT_ARTICLES,
            }),
        )
    }
}

/// One evaluated system.
#[derive(Debug, Clone)]
pub struct EvaluatedSystem {
    /// Short key (`tfidf`, `dense`, `tfidf+ce`).
    pub key: &'static str,
    /// Row label.
    pub label: String,
    /// [`METRICS`] results.
    pub results: Vec<MetricResult>,
    /// Seconds for every query.
    pub seconds: f64,
}

/// What the study found.
#[derive(Debug, Clone)]
pub struct RerankerStudy {
    /// The parameters and recipe.
    pub params: RerankerValid,
    /// The training groups (with what became of each source's questions).
    pub groups: GroupSet,
    /// The trained model.
    pub trained: TrainedCrossEncoder,
    /// The training log, when this run trained (or read a partial run).
    pub log: Option<TrainLog>,
    /// Wall seconds of training (or loading) in this run.
    pub train_wall_seconds: f64,
    /// Held-out questions evaluated.
    pub questions: usize,
    /// Paragraphs searched.
    pub passages: usize,
    /// TF-IDF, dense, TF-IDF → cross-encoder.
    pub systems: Vec<EvaluatedSystem>,
}

impl super::Study for RerankerValid {
    type Output = RerankerStudy;

    fn name(&self) -> String {
        RerankerValid::name(self)
    }

    fn scale(&self) -> Scale {
        Scale::Default
    }

    fn summary_file(&self) -> &'static str {
        "metrics.md"
    }

    fn resolved(&self, env: &Env) -> Result<impl serde::Serialize + '_> {
        RerankerValid::resolved(self, env)
    }

    fn run(&self, env: &Env) -> Result<RerankerStudy> {
        run(env, self)
    }
}

/// Build the groups, train (or load) the recipe and evaluate it on the held-out articles.
pub fn run(env: &Env, params: &RerankerValid) -> Result<RerankerStudy> {
    let p = &params.params;
    let recipe = &params.recipe;
    let cache_root = env.cache_dir("cross-encoders");
    let set = cross_recipe::recipe_groups(&env.assets, recipe)?;
    let t0 = Instant::now();
    let (trained, log) = if p.partial {
        let (t, l) = cross_recipe::partial_checkpoint(&env.assets, recipe, &cache_root, &set)?
            .ok_or_else(|| {
                Error::param(
                    "partial",
                    format!("no checkpoint of `{}`'s run to evaluate", recipe.name),
                )
            })?;
        (t, Some(l))
    } else {
        cross_recipe::train_or_load(&env.assets, recipe, &cache_root, &set)?
    };
    let train_wall_seconds = t0.elapsed().as_secs_f64();

    // Held-out evaluation over every dev-half paragraph.
    let sq = squad::load(&env.assets.resolve(DATA, "dev-v2.0.json")?)?;
    let passages = WholeDocument.chunk_all(&sq.contexts)?;
    let mut queries: Vec<Query> = Vec::new();
    let mut qrels = Qrels::new();
    for q in sq.examples.iter().filter(|q| !q.is_unanswerable()) {
        let ctx = q
            .context_id
            .clone()
            .ok_or_else(|| Error::param(DATA, format!("question `{}` has no context id", q.id)))?;
        let title = ctx.split_once('#').map(|x| x.0).unwrap_or(&ctx);
        if HELD_OUT_ARTICLES.contains(&title) {
            queries.push(q.to_query());
            qrels.entry(q.id.clone()).or_default().insert(ctx, 1);
        }
    }
    if let Some(m) = p.questions {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(p.seed);
        queries.shuffle(&mut rng);
        queries.truncate(m);
        queries.sort_by(|a, b| a.id.cmp(&b.id));
        let keep: std::collections::HashSet<&str> = queries.iter().map(|q| q.id.as_str()).collect();
        qrels.retain(|q, _| keep.contains(q.as_str()));
    }
    let tfidf = Arc::new(TfIdf::build(
        &passages,
        &Analyzer::default(),
        TfIdfVariant::cosine(),
    )?);
    let encoder = Arc::new(BertEncoder::load(
        &env.assets,
        &recipe.base,
        EncoderParams::default(),
    )?);
    let dense = DenseRetriever::build(
        encoder,
        &passages,
        IndexParams::flat_ip(),
        Some(&EmbeddingCache::new(env.cache_dir("embeddings"))),
    )?;
    let ce = CrossEncoder::load_from_files(
        &format!("trained-{}", recipe.name),
        &trained.model_dir.join("config.json"),
        &trained.model_dir.join("tokenizer.json"),
        &trained.model_dir.join("model.safetensors"),
        CrossEncoderParams {
            max_length: recipe.max_length,
            ..CrossEncoderParams::default()
        },
    )?;
    let reranked = RerankedRetriever::new(
        Box::new(tfidf.clone()),
        Box::new(ce),
        PassageLookup::from_passages(&passages)?,
        p.rerank_depth,
    )?;
    let plan: Vec<(&'static str, String, &dyn Retriever, usize)> = vec![
        ("tfidf", "TF-IDF (cosine)".into(), tfidf.as_ref(), p.depth),
        (
            "dense",
            format!("dense {} flat IP", recipe.base),
            &dense,
            p.depth,
        ),
        (
            "tfidf+ce",
            format!(
                "TF-IDF top-{} → cross-encoder (trained {})",
                p.rerank_depth, recipe.name
            ),
            &reranked,
            p.rerank_depth,
        ),
    ];
    let mut systems = Vec::new();
    for (key, label, r, depth) in plan {
        let t = Instant::now();
        let run = r.retrieve_all(&queries, depth)?;
        let seconds = t.elapsed().as_secs_f64();
        systems.push(EvaluatedSystem {
            key,
            label,
            results: evaluate(&run, &qrels, &METRICS)?,
            seconds,
        });
    }
    Ok(RerankerStudy {
        params: params.clone(),
        groups: set,
        trained,
        log,
        train_wall_seconds,
        questions: queries.len(),
        passages: passages.len(),
        systems,
    })
}

impl RerankerStudy {
    fn system(&self, key: &str) -> Result<&EvaluatedSystem> {
        self.systems
            .iter()
            .find(|s| s.key == key)
            .ok_or_else(|| Error::Empty(format!("no system `{key}`")))
    }

    /// What became of each source's questions.
    pub fn groups_table(&self) -> Result<Table> {
        let mut t = Table::new([
            "source",
            "questions",
            "groups",
            "not grouped (reason: count)",
        ]);
        for c in &self.groups.counts {
            let why: Vec<String> = c.skipped.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            t.push([
                c.source.clone(),
                c.questions.to_string(),
                c.grouped.to_string(),
                why.join("; "),
            ])?;
        }
        Ok(t)
    }

    /// The held-out table (MRR@10 marked against dense), the significance tests of the
    /// cross-encoder and dense against TF-IDF and dense, and MRR@10 per query.
    pub fn tables(&self) -> Result<(Table, Table, Table)> {
        let p = &self.params.params;
        let mut mt = Table::new([
            "system",
            "MRR@10",
            "Recall@1",
            "Recall@10",
            "queries",
            "seconds",
        ]);
        let mut sig = Table::new([
            "system",
            "against",
            "metric",
            "mean_a",
            "mean_b",
            "p_randomization",
        ]);
        let mut pq = Table::new(["system", "query", "mrr@10"]);
        for s in &self.systems {
            let mut marks = String::new();
            for against in ["dense", "tfidf"] {
                if s.key == against || s.key == "tfidf" {
                    continue;
                }
                let b = &self.system(against)?.results;
                for (ma, mb) in s.results.iter().zip(b) {
                    let c = significance::compare(&ma.per_query, &mb.per_query, p.trials, p.seed)?;
                    sig.push([
                        s.key.to_string(),
                        against.to_string(),
                        ma.name.clone(),
                        format!("{:.4}", ma.mean),
                        format!("{:.4}", mb.mean),
                        format!("{:.4}", c.randomization.p_value),
                    ])?;
                    if against == "dense" && ma.name == "mrr@10" {
                        marks = c.marker().to_string();
                    }
                }
            }
            mt.push([
                s.label.clone(),
                format!("{:.4}{marks}", s.results[0].mean),
                format!("{:.4}", s.results[1].mean),
                format!("{:.4}", s.results[2].mean),
                s.results[0].per_query.len().to_string(),
                format!("{:.1}", s.seconds),
            ])?;
            for (q, v) in &s.results[0].per_query {
                pq.push([s.key.to_string(), q.clone(), format!("{v:.4}")])?;
            }
        }
        Ok((mt, sig, pq))
    }

    /// The held-out table with what it was computed from.
    pub fn markdown(&self) -> Result<String> {
        let (mt, ..) = self.tables()?;
        let t = &self.trained;
        let r = &self.params.recipe;
        let partial = match &self.log {
            Some(l) if self.params.partial => {
                format!(" UNFINISHED: checkpoint after {} updates.", l.steps.len())
            }
            _ => String::new(),
        };
        Ok(format!(
            "{}\n\nHeld-out: {} answerable questions of the five held-out SQuAD articles ({}) over all {} dev-half paragraphs; † / †† on MRR@10: randomisation test against dense, p < 0.05 / 0.01 ({} trials). Cross-encoder `{}` (key {}): {} groups of {} (SQuAD training articles, RAG Mini training questions, NQ distant supervision), {:.0} s of updates, {:.2} pairs/s, load at the end of training {}.{partial}\n",
            mt.to_markdown(),
            self.questions,
            HELD_OUT_ARTICLES.join(", "),
            self.passages,
            self.params.trials,
            r.name,
            t.key,
            t.groups,
            r.group_size,
            t.train_seconds,
            t.pairs_per_second,
            t.load
        ))
    }

    /// The numbers `manifest.json` (and `metrics.json`) record.
    pub fn summary(&self) -> serde_json::Value {
        let t = &self.trained;
        let mean = |k: &str, i: usize| self.system(k).ok().map(|s| s.results[i].mean);
        serde_json::json!({
            "recipe": self.params.recipe.name, "key": t.key, "groups": t.groups,
            "group_size": self.params.recipe.group_size, "train_seconds": t.train_seconds,
            "pairs_per_second": t.pairs_per_second,
            "train_wall_seconds_this_run": self.train_wall_seconds,
            "partial_updates": self.params.partial.then(|| self.log.as_ref().map(|l| l.steps.len())).flatten(),
            "load_at_training_end": t.load, "load_now": crate::machine::load_average(),
            "counts": t.counts, "nq_used": t.nq_used.len(),
            "model_dir": t.model_dir, "held_out_questions": self.questions,
            "mrr10_tfidf": mean("tfidf", 0), "mrr10_dense": mean("dense", 0),
            "mrr10_tfidf_ce": mean("tfidf+ce", 0),
            "recall1_tfidf_ce": mean("tfidf+ce", 1), "recall10_tfidf_ce": mean("tfidf+ce", 2),
        })
    }

    /// `groups.csv`, `nq_used_ids.txt`, `metrics.csv`/`.md`/`.json`, `significance.csv`,
    /// `per_query.csv` and, when this run trained, `loss.csv` and (feature `plot`)
    /// `loss.png`/`.svg`.
    pub fn write(&self, out: &ResultDir) -> Result<()> {
        self.groups_table()?.write_csv(&out.path("groups.csv"))?;
        let ids = out.path("nq_used_ids.txt");
        let text: String = self
            .groups
            .nq_used
            .iter()
            .map(|id| format!("{id}\n"))
            .collect();
        std::fs::write(&ids, text).map_err(|e| Error::io(&ids, e))?;
        if let Some(log) = &self.log {
            let r = &self.params.recipe;
            let title = format!(
                "training loss, cross-encoder {} ({} groups of {}, {} groups per update)",
                r.name, self.trained.groups, r.group_size, r.train.batch_size
            );
            super::write_loss(out, log, &title, 25)?;
        }
        let (mt, sig, pq) = self.tables()?;
        mt.write_csv(&out.path("metrics.csv"))?;
        sig.write_csv(&out.path("significance.csv"))?;
        pq.write_csv(&out.path("per_query.csv"))?;
        let md = out.path("metrics.md");
        std::fs::write(&md, self.markdown()?).map_err(|e| Error::io(&md, e))?;
        let js = out.path("metrics.json");
        std::fs::write(&js, serde_json::to_string_pretty(&self.summary())?)
            .map_err(|e| Error::io(&js, e))?;
        Ok(())
    }
}

impl super::Outputs for RerankerStudy {
    fn write(&self, out: &ResultDir) -> Result<()> {
        RerankerStudy::write(self, out)
    }
    fn markdown(&self) -> Result<String> {
        RerankerStudy::markdown(self)
    }
    fn summary(&self) -> Result<serde_json::Value> {
        Ok(RerankerStudy::summary(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_name_the_recipe_and_the_sample() {
        let q = RerankerParams::at_scale("minilm-ce", Scale::Quick)
            .check()
            .unwrap();
        assert_eq!(q.recipe.name, "minilm-ce-quick");
        assert_eq!(q.name(), "reranker-minilm-ce-quick");
        let sample = RerankerParams {
            questions: Some(50),
            ..RerankerParams::at_scale("minilm-ce", Scale::Default)
        };
        assert_eq!(sample.check().unwrap().name(), "reranker-minilm-ce-q50");
        let d = RerankerParams::at_scale("minilm-ce", Scale::Default)
            .check()
            .unwrap();
        assert_eq!(d.name(), "reranker-minilm-ce");
        let bad = RerankerParams {
            questions: Some(0),
            ..RerankerParams::at_scale("minilm-ce", Scale::Quick)
        };
        assert!(bad.check().unwrap_err().to_string().contains("questions"));
        let bad = RerankerParams::at_scale("no-such-recipe", Scale::Default);
        assert!(bad.check().is_err());
    }
}
