//! Train an extractive reader recipe ([`crate::train::reader`], cached by its inputs) and
//! evaluate it on the held-out SQuAD articles: the answerable questions of the five
//! articles no recipe trains on, gold paragraph given, SQuAD EM / F1.
//!
//! | scale | recipe |
//! |---|---|
//! | quick | `<recipe>-quick`: 200 updates of 16 in one epoch (`minilm-squad2`: two epochs, 400 updates) |
//! | default, paper | the recipe (416 updates of 16 over two epochs) |
//!
//! `full` trains the recipe's larger run instead (four epochs on every window).
//!
//! Every run also reads [`PROBES`]: eight one-fact questions, each with a passage that states
//! its answer, the same for every recipe and scale; their EM is a sanity floor that `data/expected.toml` grades (a reader that cannot read "Paris"
//! from "Paris is the capital of France" is not worth a table).

use super::{Env, Scale};
use crate::display::Table;
use crate::evaluate::qa::{exact_match, f1};
use crate::read::extractive::{ExtractiveReader, ReaderParams};
use crate::read::{Context, Reader};
use crate::results::ResultDir;
use crate::train::qa::SpanExample;
use crate::train::qa_data::HELD_OUT_ARTICLES;
use crate::train::reader::{self, ReaderRecipe, SupervisionData, TrainedReader};
use crate::train::TrainLog;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The study's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReaderTrainingParams {
    /// Recipe name: `minilm-all`, `minilm-squad`, `minilm-squad2`.
    pub recipe: String,
    /// The recipe's size ([`ReaderRecipe::at_scale`]).
    pub scale: Scale,
    /// The larger run: four epochs on every window (not with the quick scale).
    pub full: bool,
    /// Evaluate the latest checkpoint of the recipe's unfinished run instead of training.
    pub partial: bool,
}

impl ReaderTrainingParams {
    /// Check the values and resolve the recipe.
    pub fn check(self) -> Result<ReaderTrainingValid> {
        if self.full && self.scale == Scale::Quick {
            return Err(Error::param(
                "full",
                "the full run and the quick scale contradict each other: choose one",
            ));
        }
        let recipe = if self.full {
            ReaderRecipe::named(&self.recipe, true)?
        } else {
            ReaderRecipe::at_scale(&self.recipe, self.scale)?
        };
        Ok(ReaderTrainingValid {
            params: self,
            recipe,
        })
    }
}

/// Checked [`ReaderTrainingParams`] with the recipe.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReaderTrainingValid {
    /// The parameters.
    pub params: ReaderTrainingParams,
    /// The recipe trained.
    pub recipe: ReaderRecipe,
}

impl ReaderTrainingValid {
    /// What `config.json` records: the parameters, the recipe and its key, the sha256 of
    /// its input files and the program's sha256.
    pub fn resolved(&self, env: &Env) -> Result<super::Resolved<'_, ReaderTrainingParams>> {
        super::Resolved::new(
            env,
            &self.params,
            self.recipe.inputs(),
            serde_json::json!({
                "recipe": self.recipe,
                "key": self.recipe.key(&env.assets)?,
            }),
        )
    }
}

/// The supervision, and the checkpoint to evaluate: the latest of an unfinished run with
/// `partial` (with its log), else `None` (train or load the recipe in [`run`]).
pub type Prepared = (SupervisionData, Option<(TrainedReader, TrainLog)>);

/// Build the recipe's supervision and, with `partial`, find the latest checkpoint of its
/// unfinished run (an error when there is none). Its result names the result folder
/// ([`result_name`]) before anything trains.
pub fn prepare(env: &Env, params: &ReaderTrainingValid) -> Result<Prepared> {
    let data = reader::supervision(&env.assets, &params.recipe.supervision)?;
    let partial = if params.params.partial {
        Some(
            reader::partial_checkpoint(
                &env.assets,
                &params.recipe,
                &env.cache_dir("readers"),
                &data,
            )?
            .ok_or_else(|| {
                Error::param(
                    "partial",
                    format!(
                        "no checkpoint of `{}`'s run to evaluate",
                        params.recipe.name
                    ),
                )
            })?,
        )
    } else {
        None
    };
    Ok((data, partial))
}

/// The result folder: `reader-<recipe>` (`-partial<updates>` for an unfinished run).
pub fn result_name(params: &ReaderTrainingValid, prepared: &Prepared) -> String {
    match &prepared.1 {
        Some((_, log)) => format!("reader-{}-partial{}", params.recipe.name, log.steps.len()),
        None => format!("reader-{}", params.recipe.name),
    }
}

/// A reader recipe ready to train and evaluate: checked parameters and what [`prepare`]
/// found (the supervision, a partial checkpoint). The [`Study`](super::Study) of
/// `train_reader`.
pub struct ReaderTrainingRun {
    /// The checked parameters.
    pub valid: ReaderTrainingValid,
    /// The supervision and the partial checkpoint to evaluate, if any.
    pub prepared: Prepared,
}

impl ReaderTrainingRun {
    /// [`prepare`] `valid`.
    pub fn new(env: &Env, valid: ReaderTrainingValid) -> Result<Self> {
        let prepared = prepare(env, &valid)?;
        Ok(ReaderTrainingRun { valid, prepared })
    }
}

impl super::Study for ReaderTrainingRun {
    type Output = ReaderTraining;

    fn name(&self) -> String {
        result_name(&self.valid, &self.prepared)
    }

    fn scale(&self) -> Scale {
        // The recipe's name says its size (`-quick`): one folder name per recipe.
        Scale::Default
    }

    fn summary_file(&self) -> &'static str {
        "metrics.md"
    }

    fn resolved(&self, env: &Env) -> Result<impl Serialize + '_> {
        self.valid.resolved(env)
    }

    fn run(&self, env: &Env) -> Result<ReaderTraining> {
        run(env, &self.valid, &self.prepared)
    }
}

/// The sanity probes: (question, a passage that states the answer, gold answers). Written for
/// the workbench, none taken from a training or test set (the penicillin passage is also
/// notebook 05's live example).
pub const PROBES: [(&str, &str, &[&str]); 8] = [
    (
        "What is the capital of France?",
        "Paris is the capital and largest city of France, on the river Seine.",
        &["Paris"],
    ),
    (
        "Who discovered penicillin?",
        "Penicillin was discovered in 1928 by Alexander Fleming, a Scottish physician.",
        &["Alexander Fleming", "Fleming"],
    ),
    (
        "When was the Eiffel Tower completed?",
        "The Eiffel Tower was completed in 1889 as the entrance arch of the World's Fair.",
        &["1889"],
    ),
    (
        "What is the largest planet in the Solar System?",
        "Jupiter is the largest planet in the Solar System, a gas giant of hydrogen and helium.",
        &["Jupiter"],
    ),
    (
        "Who wrote Hamlet?",
        "Hamlet is a tragedy written by William Shakespeare around 1600.",
        &["William Shakespeare", "Shakespeare"],
    ),
    (
        "How many legs does a spider have?",
        "Spiders are arachnids: they have eight legs and a body in two segments.",
        &["eight", "8"],
    ),
    (
        "What is the official language of Brazil?",
        "The official language of Brazil is Portuguese, spoken by almost all of its people.",
        &["Portuguese"],
    ),
    (
        "Which river flows through Cairo?",
        "Cairo, the capital of Egypt, lies on the banks of the Nile.",
        &["Nile", "the Nile"],
    ),
];

/// What the study found.
#[derive(Debug, Clone)]
pub struct ReaderTraining {
    /// The recipe.
    pub recipe: ReaderRecipe,
    /// The trained model.
    pub trained: TrainedReader,
    /// The log, when this run trained (or read a partial run).
    pub log: Option<TrainLog>,
    /// What became of each supervision source's questions.
    pub counts: Vec<crate::train::qa_data::SourceCounts>,
    /// NQ question ids used for training.
    pub nq_used: Vec<String>,
    /// Wall seconds of training (or loading) in this run.
    pub train_wall_seconds: f64,
    /// The held-out answerable questions and the reader's prediction for each.
    pub held_out: Vec<(SpanExample, Option<String>)>,
    /// EM and F1 (percent) on them.
    pub em_f1: (f64, f64),
    /// Seconds of prediction.
    pub predict_seconds: f64,
    /// The reader's answer to each of [`PROBES`], in order.
    pub probes: Vec<String>,
}

/// Train (or load) the recipe and read the held-out questions with it.
pub fn run(env: &Env, params: &ReaderTrainingValid, prepared: &Prepared) -> Result<ReaderTraining> {
    let recipe = &params.recipe;
    let (data, partial) = prepared;
    let t0 = Instant::now();
    let (trained, log) = match partial {
        Some((t, l)) => (t.clone(), Some(l.clone())),
        None => reader::train_or_load(&env.assets, recipe, &env.cache_dir("readers"), data)?,
    };
    let train_wall_seconds = t0.elapsed().as_secs_f64();
    // Read through the hub path: the saved folder loads like any QA checkpoint.
    let qa = ExtractiveReader::load_dir(
        &trained.model_dir,
        ReaderParams {
            window: recipe.windows,
            ..ReaderParams::default()
        },
    )?;
    let held: Vec<SpanExample> = data
        .held_out
        .iter()
        .filter(|e| e.answer.is_some())
        .cloned()
        .collect();
    let t1 = Instant::now();
    let preds = reader::predict_gold(&qa, &held)?;
    let predict_seconds = t1.elapsed().as_secs_f64();
    let em_f1 = reader::em_f1(&held, &preds);
    let mut qa = qa;
    let probes = read_probes(&mut qa)?;
    Ok(ReaderTraining {
        recipe: recipe.clone(),
        trained,
        log,
        counts: data.counts.clone(),
        nq_used: data.nq_used.clone(),
        train_wall_seconds,
        held_out: held.into_iter().zip(preds).collect(),
        em_f1,
        predict_seconds,
        probes,
    })
}

/// Read each of [`PROBES`] from its passage alone.
pub fn read_probes(reader: &mut impl Reader) -> Result<Vec<String>> {
    PROBES
        .iter()
        .map(|(q, passage, _)| Ok(reader.read(q, &[Context::new("probe", *passage)])?.text))
        .collect()
}

/// EM (percent) of `answers` on [`PROBES`].
pub fn probe_em(answers: &[String]) -> f64 {
    let hits = PROBES
        .iter()
        .zip(answers)
        .filter(|((_, _, golds), a)| exact_match(a, golds) > 0.0)
        .count();
    100.0 * hits as f64 / PROBES.len() as f64
}

impl ReaderTraining {
    /// What became of each supervision source's questions.
    pub fn supervision_table(&self) -> Result<Table> {
        let mut t = Table::new(["source", "questions", "used", "not used (reason: count)"]);
        for c in &self.counts {
            let why: Vec<String> = c
                .unlocated
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            t.push([
                c.source.clone(),
                c.questions.to_string(),
                c.located.to_string(),
                why.join("; "),
            ])?;
        }
        Ok(t)
    }

    /// Held-out EM / F1 with the training's size and speed.
    pub fn table(&self) -> Result<Table> {
        let mut t = Table::new([
            "reader",
            "questions",
            "EM",
            "F1",
            "train_features",
            "train_s",
            "features_per_s",
            "load",
            "probes EM",
        ]);
        let tr = &self.trained;
        t.push([
            self.recipe.name.clone(),
            self.held_out.len().to_string(),
            format!("{:.1}", self.em_f1.0),
            format!("{:.1}", self.em_f1.1),
            tr.features.to_string(),
            format!("{:.0}", tr.train_seconds),
            format!("{:.2}", tr.examples_per_second),
            tr.load.clone(),
            format!("{:.1}", probe_em(&self.probes)),
        ])?;
        Ok(t)
    }

    /// The answer to each probe, with its golds and EM.
    pub fn probes_table(&self) -> Result<Table> {
        let mut t = Table::new(["question", "answer", "golds", "em"]);
        for ((q, _, golds), a) in PROBES.iter().zip(&self.probes) {
            t.push([
                q.to_string(),
                a.clone(),
                golds.join(" | "),
                exact_match(a, golds).to_string(),
            ])?;
        }
        Ok(t)
    }

    /// Every held-out prediction with its score.
    pub fn predictions(&self) -> Result<Table> {
        let mut t = Table::new(["id", "question", "prediction", "golds", "em", "f1"]);
        for (e, p) in &self.held_out {
            let p = p.clone().unwrap_or_default();
            t.push([
                e.id.clone(),
                e.question.clone(),
                p.clone(),
                e.golds.join(" | "),
                exact_match(&p, &e.golds).to_string(),
                format!("{:.3}", f1(&p, &e.golds)),
            ])?;
        }
        Ok(t)
    }

    /// The table and what it was computed on.
    pub fn markdown(&self) -> Result<String> {
        Ok(format!(
            "{}\n\nHeld-out: the {} answerable questions of {}, gold paragraph given (PyTorch reference, 2 epochs on ~2,000 questions: EM 34.5 / F1 50.9). Prediction {:.1} s. Probes: {} one-fact questions, each read from a passage that states its answer (`probes.csv`).\n\n{}",
            self.table()?.to_markdown(),
            self.held_out.len(),
            HELD_OUT_ARTICLES.join(", "),
            self.predict_seconds,
            PROBES.len(),
            self.probes_table()?.to_markdown(),
        ))
    }

    /// The numbers `manifest.json` (and `metrics.json`) record.
    pub fn summary(&self) -> serde_json::Value {
        let t = &self.trained;
        serde_json::json!({
            "recipe": self.recipe.name, "key": t.key, "held_out_questions": self.held_out.len(),
            "em": self.em_f1.0, "f1": self.em_f1.1, "train_features": t.features,
            "train_seconds": t.train_seconds, "features_per_second": t.examples_per_second,
            "train_wall_seconds_this_run": self.train_wall_seconds,
            "load_at_training_end": t.load, "load_now": crate::machine::load_average(),
            "nq_used": self.nq_used.len(), "model_dir": t.model_dir, "counts": t.counts,
            "probes_em": probe_em(&self.probes),
        })
    }

    /// `supervision.csv`, `nq_used_ids.txt`, `predictions.csv`, `metrics.csv`/`.md`/`.json`
    /// and, when this run trained, `loss.csv` and (feature `plot`) `loss.png`/`.svg`.
    pub fn write(&self, out: &ResultDir) -> Result<()> {
        self.supervision_table()?
            .write_csv(&out.path("supervision.csv"))?;
        let ids = out.path("nq_used_ids.txt");
        let text: String = self.nq_used.iter().map(|id| format!("{id}\n")).collect();
        std::fs::write(&ids, text).map_err(|e| Error::io(&ids, e))?;
        if let Some(log) = &self.log {
            let title = format!(
                "training loss, reader {} ({} features, batch {})",
                self.recipe.name, self.trained.features, self.recipe.train.batch_size
            );
            super::write_loss(out, log, &title, 25)?;
        }
        self.predictions()?
            .write_csv(&out.path("predictions.csv"))?;
        self.table()?.write_csv(&out.path("metrics.csv"))?;
        self.probes_table()?.write_csv(&out.path("probes.csv"))?;
        let md = out.path("metrics.md");
        std::fs::write(&md, self.markdown()?).map_err(|e| Error::io(&md, e))?;
        let js = out.path("metrics.json");
        std::fs::write(&js, serde_json::to_string_pretty(&self.summary())?)
            .map_err(|e| Error::io(&js, e))?;
        Ok(())
    }
}

impl super::Outputs for ReaderTraining {
    fn write(&self, out: &ResultDir) -> Result<()> {
        ReaderTraining::write(self, out)
    }
    fn markdown(&self) -> Result<String> {
        ReaderTraining::markdown(self)
    }
    fn summary(&self) -> Result<serde_json::Value> {
        Ok(ReaderTraining::summary(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_and_the_full_run() {
        let p = |scale, full| ReaderTrainingParams {
            recipe: "minilm-squad".into(),
            scale,
            full,
            partial: false,
        };
        assert_eq!(
            p(Scale::Quick, false).check().unwrap().recipe.name,
            "minilm-squad-quick"
        );
        assert_eq!(
            p(Scale::Default, true).check().unwrap().recipe.name,
            "minilm-squad-full"
        );
        assert_eq!(
            p(Scale::Default, false).check().unwrap().recipe,
            ReaderRecipe::named("minilm-squad", false).unwrap()
        );
        assert!(p(Scale::Quick, true)
            .check()
            .unwrap_err()
            .to_string()
            .contains("full"));
    }

    /// Answers with the passage's first word: right only on probes whose answer opens the
    /// passage.
    struct FirstWord;
    impl Reader for FirstWord {
        fn name(&self) -> &str {
            "first-word"
        }
        fn read(&mut self, _question: &str, passages: &[Context]) -> Result<crate::read::Answer> {
            let first = passages[0]
                .text
                .split([' ', ','])
                .next()
                .unwrap_or_default();
            Ok(crate::read::Answer {
                text: first.to_string(),
                ..Default::default()
            })
        }
    }

    #[test]
    fn probes_are_read_from_their_passage_and_scored_by_squad_em() {
        let answers = read_probes(&mut FirstWord).unwrap();
        assert_eq!(answers.len(), PROBES.len());
        // Paris, Jupiter and Cairo open their passages; only the first two are golds.
        assert_eq!(answers[0], "Paris");
        assert_eq!(answers[7], "Cairo");
        assert_eq!(probe_em(&answers), 100.0 * 2.0 / 8.0);
        // SQuAD normalisation: articles, case and punctuation do not count.
        let mut golds: Vec<String> = PROBES.iter().map(|p| p.2[0].to_string()).collect();
        golds[7] = "the nile.".into();
        golds[0] = "PARIS".into();
        assert_eq!(probe_em(&golds), 100.0);
        golds[3] = "Jupiter, a gas giant".into();
        assert_eq!(probe_em(&golds), 87.5);
        // An abstention (empty answer) is wrong.
        golds[1] = String::new();
        assert_eq!(probe_em(&golds), 75.0);
        // Every probe's passage states one of its golds.
        for (q, passage, golds) in PROBES {
            assert!(golds.iter().any(|g| passage.contains(g)), "{q}");
        }
    }
}
