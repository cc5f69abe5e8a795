//! Running a config's `[method]` ([`crate::method`]) over every question: the method's
//! retrievals go through the pipeline's first stage, fusion and re-ranker (the re-ranker
//! scores against the step's query), each giving `reader.passages` passages; its reads
//! use the pipeline's reader; its generations the reader's model. Every call is a step of
//! the question's trace, and the question is scored as any run's is, over every passage
//! retrieved at any step (a retrieval miss is a question none of them answers).
//!
//! Method runs do not use the retrieval cache: their queries depend on what the model
//! writes.

use super::trace;
use super::{cache, Pipeline, PipelineRun};
use crate::method::{self, Lm, StepKind, Tools};
use crate::read::{Context, Reader};
use crate::{Error, Hit, Result};
use std::time::Instant;

impl Pipeline {
    /// Run every question with the config's `[method]`, `reader` reading and `lm` (the
    /// reader's model, for the methods that prompt it: [`crate::read::ctx::Generator`]
    /// from the reader's build) generating; with `journal`, each question's trace is
    /// appended as soon as it is scored and a killed run continues after the questions
    /// the journal holds (as [`Pipeline::run_journaled`]).
    ///
    /// Errors: a config without `[method]` ([`Error::InvalidParam`] naming `method`); a
    /// method that prompts a model given no `lm`; any step's error, wrapped with the
    /// question's 1-based number ([`Error::AtItem`]).
    pub fn run_method(
        &self,
        reader: &mut dyn Reader,
        mut lm: Option<&mut dyn Lm>,
        journal: Option<&mut trace::Journal>,
    ) -> Result<PipelineRun> {
        let Some(spec) = self.config.method.clone() else {
            return Err(Error::param(
                "method",
                "the config has no [method] section: run it with `Pipeline::run`",
            ));
        };
        let mut journal = journal;
        let qs = &self.questions.questions;
        let mut records = self.journal_done(journal.as_deref())?;
        let at = |i: usize, e: Error| Error::AtItem {
            what: "question",
            number: i + 1,
            source: Box::new(e),
        };
        let n_pass = self.config.reader.passages;
        let mut bar =
            crate::progress::bar(qs.len(), &format!("{} ({})", spec.kind(), reader.name()));
        crate::progress::tick(&mut bar, records.len());
        let start = records.len();
        for (i, q) in qs.iter().enumerate().skip(start) {
            let t0 = Instant::now();
            let mut search = |query: &str| -> Result<Vec<Context>> {
                let r = self.retrieve(&q.id, &q.question, &[query.to_string()], true)?;
                Ok(self.contexts(&r, n_pass))
            };
            let abstains = |a: &crate::read::Answer| self.abstention(a).0;
            let out = method::run(
                &spec,
                self.method_prompt.as_deref(),
                &q.question,
                Tools {
                    search: &mut search,
                    reader: &mut *reader,
                    lm: match lm.as_mut() {
                        Some(l) => Some(&mut **l),
                        None => None,
                    },
                    abstains: &abstains,
                },
            )
            .map_err(|e| at(i, e))?;
            let total = t0.elapsed().as_secs_f64();
            // A fold from +0.0: an empty f64 sum is -0.0, printed as "-0.000".
            let retrieve = out
                .steps
                .iter()
                .filter(|s| s.kind == StepKind::Retrieve)
                .fold(0.0, |a, s| a + s.secs);
            let retrieved: Vec<Hit> = out
                .passages
                .iter()
                .map(|c| Hit {
                    id: c.id.clone(),
                    score: c.score,
                })
                .collect();
            let r = cache::Retrieved {
                retrieved,
                reranked: None,
                retrieve_secs: retrieve,
                rerank_secs: 0.0,
            };
            let meta = super::ReadMeta {
                queries: Vec::new(),
                transform: (0, Vec::new(), None),
                transform_usage: Default::default(),
                transform_secs: 0.0,
                read_secs: (total - retrieve).max(0.0),
                cached: false,
            };
            let passages = out.passages.clone();
            let mut record = self
                .score(None, i, &passages, &r, out.answer, meta)
                .map_err(|e| at(i, e))?;
            record.steps = out.steps;
            if let Some(j) = journal.as_mut() {
                j.append(&record)?;
            }
            records.push(record);
            crate::progress::tick(&mut bar, 1);
        }
        Ok(PipelineRun {
            name: self.config.name.clone(),
            reader: reader.name().to_string(),
            retrieval: format!("{}__{}", self.retrieval_name(), spec.kind()),
            transform: None,
            answer_match: self.rule,
            config: self.config.clone(),
            skipped: self.questions.skipped.clone(),
            dropped_golds: self.questions.dropped_golds.clone(),
            retrieval_cache: cache::Status::Off,
            records,
        })
    }

    /// The first `n` passages of a retrieval (re-ranked when there is a re-ranker), with
    /// their texts.
    pub(super) fn contexts(&self, r: &cache::Retrieved, n: usize) -> Vec<Context> {
        let top: &[Hit] = r.reranked.as_deref().unwrap_or(&r.retrieved);
        top.iter()
            .take(n)
            .map(|h| {
                let p = &self.passages[self.position[&h.id]];
                Context {
                    id: p.id.clone(),
                    title: p.title.clone(),
                    text: p.text.clone(),
                    score: h.score,
                }
            })
            .collect()
    }
}
