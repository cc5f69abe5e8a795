//! What a pipeline run leaves behind: one [`TraceRecord`] per question (written as
//! JSON Lines), SQuAD-format predictions, a [`Summary`], a per-question CSV.
//!
//! Files written by [`PipelineRun::write`] into a folder:
//!
//! | file | content |
//! |---|---|
//! | `traces.jsonl` | one [`TraceRecord`] per line, in question order |
//! | `predictions.json` | `{question id: prediction}`, `""` for an abstention: the predictions file of the official SQuAD v2.0 script (`evaluate-v2.0.py data.json predictions.json`) |
//! | `raw_predictions.json` | `{question id: the reader's raw output}`, before answer parsing and abstention |
//! | `summary.json` | the [`Summary`] |
//! | `summary.md` | the summary as a Markdown table under its caption (the run's name and pipeline) |
//! | `per_question.csv` | id, group, em, f1, token recall, abstained, answer found (Match), outcome ([`Outcome`]), context precision, times, the LLM judge's P(Yes) (empty when not judged) |
//! | `config.toml` | the resolved configuration (every default written out) |
//! | `skipped.json` | question-set records left out under `on_bad_record = "skip"` (among them questions whose every gold answer normalises to nothing) |
//! | `dropped_golds.json` | gold answers dropped from the questions run because they SQuAD-normalise to the empty string (line, question id, answer) |

use super::cache::Status;
use super::PipelineConfig;
use crate::display::Table;
use crate::evaluate::answer_match::AnswerMatch;
use crate::evaluate::judge::says_yes;
use crate::load::question_set::{DroppedGold, SkippedRecord};
use crate::{Error, Hit, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

pub use crate::evaluate::groups::question_group;

/// The traces of a run as it goes (JSON Lines), so that a killed run continues where it
/// stopped: [`super::Pipeline::run_journaled`] appends each question's [`TraceRecord`]
/// as soon as it is scored (written and flushed to disk), and a new run with the same
/// `key` takes the recorded questions as done.
///
/// The first line is `{"journal": 1, "key": …}` (with [`Journal::open_for`], also the
/// [`super::RunKey`] the key is the digest of); a journal with another key (another
/// config, program, or contents of an input file) is never continued: it is started over,
/// and [`Journal::discarded`] says why (naming what changed when both have a run key).
/// A last line cut off by a kill (no newline at its end) is dropped, and its question is
/// run again.
#[derive(Debug)]
pub struct Journal {
    path: std::path::PathBuf,
    key: String,
    run: Option<super::RunKey>,
    done: Vec<TraceRecord>,
    discarded: Option<String>,
    file: Option<std::fs::File>,
}

#[derive(Serialize, Deserialize)]
struct JournalHeader {
    journal: u32,
    key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run: Option<super::RunKey>,
}

impl Journal {
    /// Open (or create) the journal at `path` for a run identified by `key` (for
    /// example the sha256 of the resolved configuration and the program).
    pub fn open(path: &Path, key: &str) -> Result<Self> {
        Self::open_keyed(path, key, None)
    }

    /// [`Journal::open`] for the run `run`: its key is [`super::RunKey::digest`], and the
    /// header records `run`, so that a journal of another run is discarded with the reason
    /// naming what changed (`` `reader.prompt` changed since it was written ``).
    pub fn open_for(path: &Path, run: &super::RunKey) -> Result<Self> {
        Self::open_keyed(path, &run.digest(), Some(run.clone()))
    }

    fn open_keyed(path: &Path, key: &str, run: Option<super::RunKey>) -> Result<Self> {
        let mut j = Journal {
            path: path.to_path_buf(),
            key: key.to_string(),
            run,
            done: Vec::new(),
            discarded: None,
            file: None,
        };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(j),
            Err(e) => return Err(Error::io(path, e)),
        };
        let mut lines = text.split_inclusive('\n');
        let header = lines
            .next()
            .and_then(|l| serde_json::from_str::<JournalHeader>(l.trim()).ok());
        match header {
            Some(h) if h.journal == 1 && h.key == key => {}
            Some(h) => {
                let changes = match (&j.run, &h.run) {
                    (Some(now), Some(then)) => now.changes(then),
                    _ => Vec::new(),
                };
                j.discarded = Some(if changes.is_empty() {
                    "it belongs to another configuration or program".into()
                } else {
                    format!("{} changed since it was written", changes.join(", "))
                });
                return Ok(j);
            }
            None => {
                j.discarded = Some("its first line is not a journal header".into());
                return Ok(j);
            }
        }
        for (i, line) in lines.enumerate() {
            if !line.ends_with('\n') {
                break; // the last line, cut off by a kill: dropped, rewritten on continuing
            }
            let r = serde_json::from_str::<TraceRecord>(line.trim()).map_err(|e| {
                Error::malformed(
                    path,
                    i + 2,
                    format!("not a trace record ({e}); delete the journal to start over"),
                )
            })?;
            j.done.push(r);
        }
        Ok(j)
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The questions finished by earlier runs, in order.
    pub fn done(&self) -> &[TraceRecord] {
        &self.done
    }

    /// Why an existing journal was not continued (`None`: it was, or there was none).
    pub fn discarded(&self) -> Option<&str> {
        self.discarded.as_deref()
    }

    /// Start writing: rewrite the file as its header and the records kept (dropping a
    /// cut-off last line, or everything of a discarded journal).
    pub fn begin(&mut self) -> Result<()> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let mut text = serde_json::to_string(&JournalHeader {
            journal: 1,
            key: self.key.clone(),
            run: self.run.clone(),
        })?;
        text.push('\n');
        for r in &self.done {
            text.push_str(&serde_json::to_string(r)?);
            text.push('\n');
        }
        let tmp = self.path.with_extension("jsonl.tmp");
        std::fs::write(&tmp, text).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| Error::io(&self.path, e))?;
        let f = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|e| Error::io(&self.path, e))?;
        self.file = Some(f);
        Ok(())
    }

    /// Append one finished question (written and flushed to disk before returning).
    pub fn append(&mut self, r: &TraceRecord) -> Result<()> {
        if self.file.is_none() {
            self.begin()?;
        }
        let mut line = serde_json::to_string(r)?;
        line.push('\n');
        let path = self.path.clone();
        let f = self
            .file
            .as_mut()
            .ok_or_else(|| Error::bad_input(&path, "journal not open"))?;
        f.write_all(line.as_bytes())
            .and_then(|_| f.sync_data())
            .map_err(|e| Error::io(&path, e))?;
        self.done.push(r.clone());
        Ok(())
    }

    /// Delete the journal (its run's results are written).
    pub fn remove(self) -> Result<()> {
        drop(self.file);
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(&self.path, e)),
            _ => Ok(()),
        }
    }
}

/// Seconds spent in each stage for one question.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StageTimes {
    /// Query transformation (0 without one).
    pub transform: f64,
    /// First-stage retrieval and fusion (as measured when it ran, also on a cache hit).
    pub retrieve: f64,
    /// Re-ranking (0 without a re-ranker).
    pub rerank: f64,
    /// The reader call, wall clock (a reader that works on several questions at once:
    /// the batch's wall clock over its questions).
    pub read: f64,
    /// Of which prompt processing, as the reader reports it.
    pub prefill: f64,
    /// Of which generation, as the reader reports it.
    pub decode: f64,
}

impl StageTimes {
    /// Transform + retrieve + rerank + read.
    pub fn total(&self) -> f64 {
        self.transform + self.retrieve + self.rerank + self.read
    }
}

/// What became of one question, from its trace (miss attribution). In this order:
///
/// | outcome | when |
/// |---|---|
/// | `abstained` | the reader abstained |
/// | `correct` | exact match |
/// | `form-miss` | not an exact match, but the prediction contains a gold answer (Match) |
/// | `not-attributable` | every gold answer is a yes / no answer ([`qa::span_golds`](crate::evaluate::qa::span_golds) is empty): a passage holding the word says nothing about whether it holds the answer, so a miss is neither the retriever's nor the reader's |
/// | `retrieval-miss` | no passage given to the reader contains a gold answer |
/// | `reader-miss` | a passage given to the reader contains a gold answer, or there was no passage to judge (closed-book, or no usable gold answer), and the prediction does not |
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Exact match.
    Correct,
    /// Contains a gold answer, not an exact match.
    FormMiss,
    /// The reader had a passage with the answer, or no passage to judge, and missed.
    #[default]
    ReaderMiss,
    /// No passage the reader saw holds a gold answer.
    RetrievalMiss,
    /// A wrong answer to a question whose gold answers cannot be looked for in a passage
    /// (yes / no).
    NotAttributable,
    /// The reader abstained.
    Abstained,
}

impl Outcome {
    /// Every outcome, in table order.
    pub const ALL: [Outcome; 6] = [
        Outcome::Correct,
        Outcome::FormMiss,
        Outcome::ReaderMiss,
        Outcome::RetrievalMiss,
        Outcome::NotAttributable,
        Outcome::Abstained,
    ];

    /// The outcome of a question scored `em`, whose prediction contains a gold answer
    /// (`found`), whose kept passages have context precision `cp` (`None`: nothing to
    /// judge), answered or `abstained`; `attributable` is false when the gold answers
    /// cannot be looked for in a passage (yes / no).
    pub fn of(
        abstained: bool,
        em: f64,
        found: bool,
        attributable: bool,
        cp: Option<f64>,
    ) -> Outcome {
        if abstained {
            Outcome::Abstained
        } else if em >= 1.0 {
            Outcome::Correct
        } else if found {
            Outcome::FormMiss
        } else if !attributable {
            Outcome::NotAttributable
        } else if cp == Some(0.0) {
            Outcome::RetrievalMiss
        } else {
            Outcome::ReaderMiss
        }
    }

    /// The name in tables and traces: `correct`, `form-miss`, `reader-miss`,
    /// `retrieval-miss`, `not-attributable`, `abstained`.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Correct => "correct",
            Outcome::FormMiss => "form-miss",
            Outcome::ReaderMiss => "reader-miss",
            Outcome::RetrievalMiss => "retrieval-miss",
            Outcome::NotAttributable => "not-attributable",
            Outcome::Abstained => "abstained",
        }
    }
}

/// One question's trace: one line of `traces.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceRecord {
    /// Question id.
    pub id: String,
    /// The question.
    pub question: String,
    /// Gold answers.
    pub gold_answers: Vec<String>,
    /// Question group (report 001's rule, or the question set's `group`).
    pub group: String,
    /// The transformed queries (empty without a transformation).
    pub queries: Vec<String>,
    /// Queries the transformation was asked for (1 for a rewrite, `n` paraphrases; 0
    /// without a transformation). Fewer `queries` than this (not counting the question
    /// under `include_original`) is a short count, never padded.
    #[serde(default)]
    pub transform_requested: usize,
    /// The transformation model's raw output(s).
    #[serde(default)]
    pub transform_raw: Vec<String>,
    /// What had to be repaired in the transformation's output (a short count, a fallback
    /// to the question).
    #[serde(default)]
    pub transform_note: Option<String>,
    /// First-stage hits after fusion (ids and scores), best first.
    pub retrieved: Vec<Hit>,
    /// Re-ranked hits (re-ranker scores), when there is a re-ranker.
    pub reranked: Option<Vec<Hit>>,
    /// Passages the reader kept, in order.
    pub passage_ids: Vec<String>,
    /// Passages the reader dropped to fit its window.
    pub dropped: Vec<String>,
    /// The prompt, when the reader exposes it.
    pub prompt: Option<String>,
    /// The reader's raw output.
    pub answer: String,
    /// Whether the answer is an abstention.
    pub abstained: bool,
    /// What is scored and written to the predictions: the answer parsed by the reader's
    /// `parse` rules (`read::AnswerParser`; the raw answer when they are all off), `""`
    /// for an abstention.
    pub prediction: String,
    /// SQuAD exact match of the prediction, 0 or 1.
    pub em: f64,
    /// SQuAD token F1 of the prediction, 0–1.
    pub f1: f64,
    /// Token recall of the prediction (`evaluate::qa::token_recall`), 0–1.
    #[serde(default)]
    pub recall: f64,
    /// Whether the prediction contains a gold answer under the run's answer-match rule
    /// (the score that makes sense for regex answers).
    pub answer_found: bool,
    /// The LLM judge's P(Yes) for the prediction (`evaluate::judge`; `None`: not judged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<f64>,
    /// Context precision of the kept passages (`None` when not scored).
    pub context_precision: Option<f64>,
    /// What became of the question ([`Outcome`]).
    #[serde(default)]
    pub outcome: Outcome,
    /// Its rank-aware variant (average precision).
    pub context_average_precision: Option<f64>,
    /// Prompt and generated tokens of the query transformation.
    pub transform_tokens: (usize, usize),
    /// Reader prompt tokens.
    pub prompt_tokens: usize,
    /// Reader generated tokens.
    pub generated_tokens: usize,
    /// Seconds per stage.
    pub times: StageTimes,
    /// Whether retrieval came from the cache.
    pub retrieval_cached: bool,
    /// A `[method]` run's calls, in order (retrievals, model generations, reads); empty for
    /// a run without a method. The token counts above are then summed over every call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<crate::method::Step>,
}

impl TraceRecord {
    /// Retrieval calls made for the question: a `[method]` run's retrieve steps, else 1
    /// with a retriever and 0 closed-book.
    pub fn retrieval_calls(&self) -> usize {
        if self.steps.is_empty() {
            usize::from(!self.retrieved.is_empty())
        } else {
            self.steps
                .iter()
                .filter(|s| s.kind == crate::method::StepKind::Retrieve)
                .count()
        }
    }
}

/// A whole run: every question's trace and what produced it.
#[derive(Debug, Clone)]
pub struct PipelineRun {
    /// Config name.
    pub name: String,
    /// Reader name.
    pub reader: String,
    /// First stage + re-ranker name (`closed-book` without a retriever).
    pub retrieval: String,
    /// Transformation name, if any.
    pub transform: Option<String>,
    /// Rule used for context precision and `answer_found`.
    pub answer_match: AnswerMatch,
    /// The resolved config.
    pub config: PipelineConfig,
    /// Question records left out under `on_bad_record = "skip"`.
    pub skipped: Vec<SkippedRecord>,
    /// Gold answers dropped from the questions because they normalise to nothing.
    pub dropped_golds: Vec<DroppedGold>,
    /// What the retrieval cache did.
    pub retrieval_cache: Status,
    /// One record per question, in order.
    pub records: Vec<TraceRecord>,
}

/// Aggregate numbers of a run. EM, F1 and context precision in percent / 0–1 as the
/// reports print them; `None` where nothing could be scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Config name.
    pub name: String,
    /// Reader name.
    pub reader: String,
    /// Retrieval name.
    pub retrieval: String,
    /// Transformation name.
    pub transform: Option<String>,
    /// The answer-matching rule of Match and context precision (`None` only in summaries
    /// written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_match: Option<AnswerMatch>,
    /// Questions run.
    pub questions: usize,
    /// Question-set records skipped (counted, never silent).
    pub skipped: usize,
    /// Gold answers dropped from the questions run because they SQuAD-normalise to the
    /// empty string (counted, listed in `dropped_golds.json`).
    #[serde(default)]
    pub dropped_golds: usize,
    /// Questions whose transformation returned fewer queries than asked, or fell back to
    /// the question (see `transform_note` in the traces).
    #[serde(default)]
    pub transform_repaired: usize,
    /// Questions answered (not abstained).
    pub answered: usize,
    /// Abstentions.
    pub abstained: usize,
    /// EM over every question, percent.
    pub em: f64,
    /// F1 over every question, percent.
    pub f1: f64,
    /// EM over answered questions, percent.
    pub em_answered: Option<f64>,
    /// F1 over answered questions, percent.
    pub f1_answered: Option<f64>,
    /// Share of predictions containing a gold answer (answer-match rule), percent.
    pub answer_found: f64,
    /// Mean token recall over every question, percent.
    #[serde(default)]
    pub recall: f64,
    /// Share judged correct by the LLM judge (P(Yes) above [`Summary::judge_cut`],
    /// [`judge::says_yes`](crate::evaluate::judge::says_yes)), percent; `None`: not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<f64>,
    /// The P(Yes) cut of the judge's verdicts (`evaluation.judge_cut`); `None`: not
    /// judged, or a summary written before the cut was recorded (those used 0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_cut: Option<f64>,
    /// Mean P(Yes) over every question (an abstention 0), percent; `None`: not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_mean_p_yes: Option<f64>,
    /// Cohen's kappa of the judge's verdicts against Match (`answer_found`) over every
    /// question, abstentions included (they agree by construction); `None` when not
    /// judged or undefined (both constant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_kappa: Option<f64>,
    /// The same kappa over the questions the reader answered; `None` when not judged,
    /// none was answered, or undefined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_kappa_answered: Option<f64>,
    /// Mean context precision over scored questions.
    pub context_precision: Option<f64>,
    /// Mean rank-aware context precision.
    pub context_average_precision: Option<f64>,
    /// Questions with a context-precision value.
    pub context_scored: usize,
    /// Mean seconds per question by stage.
    pub mean_times: StageTimes,
    /// Mean seconds per question, all stages.
    pub seconds_per_question: f64,
    /// Mean reader prompt tokens.
    pub mean_prompt_tokens: f64,
    /// Mean generated tokens.
    pub mean_generated_tokens: f64,
    /// `hit`, `miss`, `rebuilt: …` or `off`.
    pub retrieval_cache: String,
    /// Mean retrieval calls per question of a `[method]` run (`None` without a method:
    /// one call with a retriever, none closed-book).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_retrieval_calls: Option<f64>,
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut s, mut n) = (0.0, 0usize);
    for x in v {
        s += x;
        n += 1;
    }
    (n > 0).then(|| s / n as f64)
}

impl Summary {
    /// A two-column Markdown/HTML table of the summary.
    pub fn to_table(&self) -> Table {
        let f = |x: Option<f64>, d: usize| x.map_or("–".to_string(), |v| format!("{v:.d$}"));
        let mut t = Table::new(["metric", "value"]).caption(format!(
            "{}: {} → {}{}",
            self.name,
            self.retrieval,
            self.reader,
            self.transform
                .as_ref()
                .map_or(String::new(), |t| format!(" (transform {t})"))
        ));
        let match_label = match self.answer_match {
            Some(r) => format!("Match: gold answer in prediction (%, `{r}` rule)"),
            None => "Match: gold answer in prediction (%)".to_string(),
        };
        let rows: Vec<(&str, String)> = vec![
            ("questions", self.questions.to_string()),
            ("skipped records", self.skipped.to_string()),
            (
                "gold answers dropped (normalise to nothing)",
                self.dropped_golds.to_string(),
            ),
            (
                "transform output repaired (short / fallback)",
                self.transform_repaired.to_string(),
            ),
            ("EM", f(Some(self.em), 2)),
            ("F1", f(Some(self.f1), 2)),
            ("answered", self.answered.to_string()),
            ("abstained", self.abstained.to_string()),
            ("EM (answered only)", f(self.em_answered, 2)),
            ("F1 (answered only)", f(self.f1_answered, 2)),
            (match_label.as_str(), f(Some(self.answer_found), 2)),
            ("token recall (%)", f(Some(self.recall), 2)),
            ("LLM judge: correct (%)", f(self.judge, 2)),
            ("LLM judge: P(Yes) cut", f(self.judge_cut, 3)),
            ("LLM judge: mean P(Yes) (%)", f(self.judge_mean_p_yes, 2)),
            (
                "LLM judge: kappa against Match (answered)",
                f(self.judge_kappa_answered, 3),
            ),
            (
                "LLM judge: kappa against Match (all questions)",
                f(self.judge_kappa, 3),
            ),
            ("context precision", f(self.context_precision, 3)),
            (
                "context precision, rank-aware (AP)",
                f(self.context_average_precision, 3),
            ),
            (
                "questions with context precision",
                self.context_scored.to_string(),
            ),
            (
                "s/question: transform",
                f(Some(self.mean_times.transform), 3),
            ),
            ("s/question: retrieve", f(Some(self.mean_times.retrieve), 3)),
            ("s/question: rerank", f(Some(self.mean_times.rerank), 3)),
            ("s/question: read", f(Some(self.mean_times.read), 3)),
            ("s/question: total", f(Some(self.seconds_per_question), 3)),
            ("mean prompt tokens", f(Some(self.mean_prompt_tokens), 1)),
            (
                "mean generated tokens",
                f(Some(self.mean_generated_tokens), 1),
            ),
            ("retrieval cache", self.retrieval_cache.clone()),
        ];
        let mut rows = rows;
        if let Some(c) = self.mean_retrieval_calls {
            rows.push(("mean retrieval calls", f(Some(c), 2)));
        }
        for (k, v) in rows {
            t.push([k.to_string(), v]).expect("two cells");
        }
        t
    }
}

impl PipelineRun {
    /// The aggregate numbers.
    pub fn summary(&self) -> Summary {
        let r = &self.records;
        let answered: Vec<&TraceRecord> = r.iter().filter(|x| !x.abstained).collect();
        let n = r.len().max(1) as f64;
        let cut = self.judge_cut();
        let t = |f: fn(&StageTimes) -> f64| r.iter().map(|x| f(&x.times)).sum::<f64>() / n;
        let mean_times = StageTimes {
            transform: t(|s| s.transform),
            retrieve: t(|s| s.retrieve),
            rerank: t(|s| s.rerank),
            read: t(|s| s.read),
            prefill: t(|s| s.prefill),
            decode: t(|s| s.decode),
        };
        Summary {
            answer_match: Some(self.answer_match),
            name: self.name.clone(),
            reader: self.reader.clone(),
            retrieval: self.retrieval.clone(),
            transform: self.transform.clone(),
            questions: r.len(),
            skipped: self.skipped.len(),
            dropped_golds: self.dropped_golds.len(),
            transform_repaired: r.iter().filter(|x| x.transform_note.is_some()).count(),
            answered: answered.len(),
            abstained: r.len() - answered.len(),
            em: 100.0 * r.iter().map(|x| x.em).sum::<f64>() / n,
            f1: 100.0 * r.iter().map(|x| x.f1).sum::<f64>() / n,
            em_answered: mean(answered.iter().map(|x| x.em)).map(|v| 100.0 * v),
            f1_answered: mean(answered.iter().map(|x| x.f1)).map(|v| 100.0 * v),
            answer_found: 100.0 * r.iter().filter(|x| x.answer_found).count() as f64 / n,
            recall: 100.0 * r.iter().map(|x| x.recall).sum::<f64>() / n,
            judge: self
                .judged()
                .then(|| 100.0 * r.iter().filter(|x| says_yes(x.judge, cut)).count() as f64 / n),
            judge_cut: self.judged().then_some(cut),
            judge_mean_p_yes: self
                .judged()
                .then(|| 100.0 * r.iter().filter_map(|x| x.judge).sum::<f64>() / n),
            judge_kappa: self.judge_kappa(),
            judge_kappa_answered: self.judge_kappa_answered(),
            context_precision: mean(r.iter().filter_map(|x| x.context_precision)),
            context_average_precision: mean(r.iter().filter_map(|x| x.context_average_precision)),
            context_scored: r.iter().filter(|x| x.context_precision.is_some()).count(),
            seconds_per_question: mean_times.total(),
            mean_times,
            mean_prompt_tokens: r.iter().map(|x| x.prompt_tokens as f64).sum::<f64>() / n,
            mean_generated_tokens: r.iter().map(|x| x.generated_tokens as f64).sum::<f64>() / n,
            retrieval_cache: self.retrieval_cache.to_string(),
            mean_retrieval_calls: self
                .config
                .method
                .is_some()
                .then(|| r.iter().map(|x| x.retrieval_calls() as f64).sum::<f64>() / n),
        }
    }

    /// Questions per [`Outcome`], in [`Outcome::ALL`] order.
    pub fn outcomes(&self) -> [usize; Outcome::ALL.len()] {
        let mut n = [0; Outcome::ALL.len()];
        for r in &self.records {
            let i = Outcome::ALL
                .iter()
                .position(|o| *o == r.outcome)
                .unwrap_or(2);
            n[i] += 1;
        }
        n
    }

    /// `{question id: prediction}` (`""` for an abstention): SQuAD's predictions format.
    pub fn predictions(&self) -> BTreeMap<String, String> {
        self.records
            .iter()
            .map(|r| (r.id.clone(), r.prediction.clone()))
            .collect()
    }

    /// Rows for `evaluate::groups::per_question_frame`, under `system`.
    pub fn question_scores(&self, system: &str) -> Vec<crate::evaluate::groups::QuestionScore> {
        self.records
            .iter()
            .map(|r| crate::evaluate::groups::QuestionScore {
                system: system.to_string(),
                question_id: r.id.clone(),
                group: r.group.clone(),
                em: r.em,
                f1: r.f1,
                abstained: r.abstained,
            })
            .collect()
    }

    /// Per-question values of `em`, `f1`, `recall`, `match` (1 when the prediction
    /// contains a gold answer) or `judge` (1 when the LLM judge's P(Yes) is above the
    /// run's [cut](Self::judge_cut)) keyed by id,
    /// for the paired tests of `evaluate::significance`.
    ///
    /// Errors: an unknown metric; `judge` on a run that was not judged.
    pub fn per_query(&self, metric: &str) -> Result<BTreeMap<String, f64>> {
        if metric == "judge" && !self.judged() {
            return Err(Error::param(
                "metric",
                format!("`judge`: run `{}` was not judged", self.name),
            ));
        }
        let cut = self.judge_cut();
        self.records
            .iter()
            .map(|r| match metric {
                "em" => Ok((r.id.clone(), r.em)),
                "f1" => Ok((r.id.clone(), r.f1)),
                "recall" => Ok((r.id.clone(), r.recall)),
                "match" => Ok((r.id.clone(), if r.answer_found { 1.0 } else { 0.0 })),
                "judge" => Ok((r.id.clone(), if says_yes(r.judge, cut) { 1.0 } else { 0.0 })),
                other => Err(Error::param(
                    "metric",
                    format!("`{other}`: choose `em`, `f1`, `recall`, `match` or `judge`"),
                )),
            })
            .collect()
    }

    /// The P(Yes) cut of the judge's verdicts: the resolved config's `evaluation.judge_cut`
    /// (a run whose config predates it used 0.5, [`DEFAULT_CUT`](crate::evaluate::judge::DEFAULT_CUT)).
    pub fn judge_cut(&self) -> f64 {
        self.config
            .evaluation
            .judge_cut
            .unwrap_or(crate::evaluate::judge::DEFAULT_CUT)
    }

    /// Whether every question has the LLM judge's verdict.
    pub fn judged(&self) -> bool {
        !self.records.is_empty() && self.records.iter().all(|r| r.judge.is_some())
    }

    /// Cohen's kappa of the judge's verdicts against Match over every question,
    /// abstentions included (`None`: not judged, or undefined).
    pub fn judge_kappa(&self) -> Option<f64> {
        self.kappa_over(|_| true)
    }

    /// Cohen's kappa of the judge's verdicts against Match over the questions the reader
    /// answered (`None`: not judged, none answered, or undefined). An abstention is scored
    /// "no" by the judge without asking and never matches, so it agrees by construction.
    pub fn judge_kappa_answered(&self) -> Option<f64> {
        self.kappa_over(|r| !r.abstained)
    }

    fn kappa_over(&self, keep: impl Fn(&TraceRecord) -> bool) -> Option<f64> {
        if !self.judged() {
            return None;
        }
        let kept: Vec<&TraceRecord> = self.records.iter().filter(|r| keep(r)).collect();
        let cut = self.judge_cut();
        let judge: Vec<bool> = kept.iter().map(|r| says_yes(r.judge, cut)).collect();
        let matched: Vec<bool> = kept.iter().map(|r| r.answer_found).collect();
        crate::evaluate::judge::cohen_kappa(&judge, &matched)
            .ok()
            .flatten()
    }

    /// Ask `judge` about every question's prediction (an abstention is 0 without asking),
    /// with a progress bar.
    pub fn judge_with(&mut self, judge: &dyn crate::evaluate::judge::Judge) -> Result<()> {
        let mut bar =
            crate::progress::bar(self.records.len(), &format!("judge ({})", judge.name()));
        for (i, r) in self.records.iter_mut().enumerate() {
            let p = judge
                .p_yes(&r.question, &r.gold_answers, &r.prediction)
                .map_err(|e| Error::AtItem {
                    what: "question",
                    number: i + 1,
                    source: Box::new(e),
                })?;
            r.judge = Some(p);
            crate::progress::tick(&mut bar, 1);
        }
        Ok(())
    }

    /// A run read back from a folder [`PipelineRun::write`] wrote (`traces.jsonl` and
    /// `summary.json`), with the `config` that produced it. The retrieval-cache status,
    /// the skipped records and the dropped gold answers are not read back: they come back
    /// as `hit` and empty.
    pub fn read(dir: &Path, config: PipelineConfig) -> Result<PipelineRun> {
        let sp = dir.join("summary.json");
        let summary: Summary = serde_json::from_str(&crate::load::read_to_string(&sp)?)
            .map_err(|e| Error::bad_input(&sp, e.to_string()))?;
        let tp = dir.join("traces.jsonl");
        let text = crate::load::read_to_string(&tp)?;
        let records = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str::<TraceRecord>(l)
                    .map_err(|e| Error::malformed(&tp, i + 1, e.to_string()))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(PipelineRun {
            name: summary.name,
            reader: summary.reader,
            retrieval: summary.retrieval,
            transform: summary.transform,
            answer_match: match (summary.answer_match, config.evaluation.answer_match) {
                (Some(r), _) | (None, Some(r)) => r,
                (None, None) => {
                    return Err(Error::bad_input(
                        &sp,
                        "the run names no answer-matching rule (written before runs recorded \
                         it): run its config again",
                    ))
                }
            },
            config: {
                // The cut the run was judged at, as its summary records it (a config read
                // raw has none; a summary written before the cut was recorded used 0.5).
                let mut config = config;
                match (summary.judge_cut, config.evaluation.judge_cut) {
                    (Some(s), Some(c)) if s != c => {
                        return Err(Error::bad_input(
                            &sp,
                            format!(
                                "the run was judged at the cut {s}, the config asks for {c}: run the config again"
                            ),
                        ))
                    }
                    (Some(s), None) => {
                        config.evaluation.judge_cut = Some(s);
                        config.evaluation.judge_cut_source = "summary".into();
                    }
                    _ => {}
                }
                config
            },
            skipped: Vec::new(),
            dropped_golds: Vec::new(),
            retrieval_cache: Status::Hit,
            records,
        })
    }

    /// Write the files listed in the [module docs](self) into `dir` (created).
    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let p = dir.join("traces.jsonl");
        let mut f =
            std::io::BufWriter::new(std::fs::File::create(&p).map_err(|e| Error::io(&p, e))?);
        for r in &self.records {
            serde_json::to_writer(&mut f, r)?;
            f.write_all(b"\n").map_err(|e| Error::io(&p, e))?;
        }
        f.flush().map_err(|e| Error::io(&p, e))?;
        let write = |name: &str, bytes: &[u8]| -> Result<()> {
            let p = dir.join(name);
            std::fs::write(&p, bytes).map_err(|e| Error::io(&p, e))
        };
        write(
            "predictions.json",
            serde_json::to_string_pretty(&self.predictions())?.as_bytes(),
        )?;
        let raw: BTreeMap<&str, &str> = self
            .records
            .iter()
            .map(|r| (r.id.as_str(), r.answer.as_str()))
            .collect();
        write(
            "raw_predictions.json",
            serde_json::to_string_pretty(&raw)?.as_bytes(),
        )?;
        let s = self.summary();
        write("summary.json", serde_json::to_string_pretty(&s)?.as_bytes())?;
        write("summary.md", s.to_table().to_markdown().as_bytes())?;
        write("config.toml", self.config.to_toml()?.as_bytes())?;
        write(
            "skipped.json",
            serde_json::to_string_pretty(&self.skipped)?.as_bytes(),
        )?;
        write(
            "dropped_golds.json",
            serde_json::to_string_pretty(&self.dropped_golds)?.as_bytes(),
        )?;
        let mut t = Table::new([
            "id",
            "group",
            "em",
            "f1",
            "recall",
            "abstained",
            "answer_found",
            "outcome",
            "context_precision",
            "context_average_precision",
            "prompt_tokens",
            "generated_tokens",
            "transform_s",
            "retrieve_s",
            "rerank_s",
            "read_s",
            "judge",
        ]);
        let o = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v:.6}"));
        for r in &self.records {
            t.push([
                r.id.clone(),
                r.group.clone(),
                format!("{}", r.em),
                format!("{:.6}", r.f1),
                format!("{:.6}", r.recall),
                r.abstained.to_string(),
                r.answer_found.to_string(),
                r.outcome.name().to_string(),
                o(r.context_precision),
                o(r.context_average_precision),
                r.prompt_tokens.to_string(),
                r.generated_tokens.to_string(),
                format!("{:.6}", r.times.transform),
                format!("{:.6}", r.times.retrieve),
                format!("{:.6}", r.times.rerank),
                format!("{:.6}", r.times.read),
                o(r.judge),
            ])?;
        }
        t.write_csv(&dir.join("per_question.csv"))
    }
}

/// Read a `traces.jsonl` back, checking every line (errors name the file and line).
pub fn read_traces(path: &Path) -> Result<Vec<TraceRecord>> {
    crate::load::read_jsonl(path)
}

/// Read a SQuAD predictions file and check its shape: one JSON object whose values are
/// all strings. Errors name the file.
pub fn read_predictions(path: &Path) -> Result<BTreeMap<String, String>> {
    let text = crate::load::read_to_string(path)?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::malformed(path, e.line(), e.to_string()))?;
    let serde_json::Value::Object(m) = v else {
        return Err(Error::bad_input(path, "not a JSON object {id: answer}"));
    };
    m.into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => Ok((k, s)),
            other => Err(Error::bad_input(
                path,
                format!("prediction for `{k}` is not a string: {other}"),
            )),
        })
        .collect()
}
