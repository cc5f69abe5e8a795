//! NQ-open dev questions over the Wikipedia corpora: DPR-style answer recall (top-k
//! retrieval accuracy) of the systems of `configs/studies/nq.toml`, each tested against
//! BM25 at every k (features `dense` + `faiss`).
//!
//! The corpora are cut into DPR's passage unit: windows of `window` words (100) with
//! `overlap` shared words (0). As in DPR, the article title is prepended to the indexed
//! and embedded text (`title\nwindow`, unless `titles` is off); the answer check reads
//! the window text only, as DPR's does. Passage ids are `{corpus}:{doc id}#{window}`.
//! A question counts as answered at k when one of its top k passages contains a gold
//! answer under `answer_match` ([`AnswerMatch`]: `dpr` by default, DPR's `has_answer`).
//!
//! This corpus is ~10^3 times smaller than DPR's 21M-passage Wikipedia, so most NQ
//! answers are simply not in it: the numbers measure this corpus, not DPR's setting.
//!
//! | scale | questions | corpora |
//! |---|---|---|
//! | quick | the first 1,000 | `wikitext-2-raw` |
//! | default, paper | all 3,608 | `enwiki-sample-dump`, `wiki-leads-en`, `wikitext-2-raw` |
//!
//! The questions are those [`nq_open::load`] keeps: of the file's 3,610, two whose only
//! gold answer normalises to nothing (`---`, `)`) are left out, and two such golds (`A+`,
//! `*`) are dropped from questions that keep others; the caption and `manifest.json`
//! (`questions_left_out`, `golds_dropped`) say so.

use super::retrieval::{self, ComparisonRow, Scored, SystemRun, SystemSpec};
use super::{Env, Scale};
use crate::chunk::{Chunker, SlidingWindowParams};
use crate::display::Table;
use crate::evaluate::answer_match::{AnswerMatch, Golds, MatchText};
use crate::evaluate::qa::answer_recall_at_k;
use crate::evaluate::significance::Comparison;
use crate::evaluate::MetricResult;
use crate::load::question_set::BadRecords;
use crate::load::{nq_open, wikipedia_corpus, WIKIPEDIA_CORPORA};
use crate::pipeline::systems::SystemBuilder;
use crate::results::ResultDir;
use crate::{Error, Passage, QaExample, Query, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// The study's result folder at the default scale.
pub const NAME: &str = "nq-answer-recall";
/// The systems file, relative to the project root.
pub const SYSTEMS_FILE: &str = "configs/studies/nq.toml";
/// The table's columns: answer recall at these k.
pub const TOP_K: [usize; 4] = [1, 5, 20, 100];
/// The cache tag of the corpus' token store (late-interaction systems).
const STORE_TAG: &str = "nq-wikipedia";

/// The study's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NqParams {
    /// Sizes; part of the result's name.
    pub scale: Scale,
    /// Wikipedia corpus assets indexed together.
    pub corpora: Vec<String>,
    /// The first this many NQ-open dev questions, in file order (0 = all 3,608 kept by
    /// [`nq_open::load`]).
    pub questions: usize,
    /// How a passage is found to hold a gold answer.
    pub answer_match: AnswerMatch,
    /// Window size in words (DPR: 100).
    pub window: usize,
    /// Words shared by consecutive windows (DPR: 0).
    pub overlap: usize,
    /// Prepend the article title to the indexed text.
    pub titles: bool,
    /// Passages kept per question (raised to the largest k of [`TOP_K`]).
    pub depth: usize,
    /// The systems, in table order.
    pub systems: Vec<SystemSpec>,
    /// The system every other is tested against.
    pub baseline: String,
    /// Trials of the randomisation and bootstrap tests.
    pub trials: usize,
    /// Seed of those tests.
    pub seed: u64,
}

impl NqParams {
    /// The published parameters at `scale`, with the systems of [`SYSTEMS_FILE`].
    pub fn at_scale(env: &Env, scale: Scale) -> Result<Self> {
        let corpora = match scale {
            Scale::Quick => vec!["wikitext-2-raw".to_string()],
            _ => WIKIPEDIA_CORPORA.iter().map(|c| c.to_string()).collect(),
        };
        Ok(NqParams {
            scale,
            corpora,
            questions: scale.pick(1000, 0, 0),
            answer_match: AnswerMatch::Dpr,
            window: 100,
            overlap: 0,
            titles: true,
            depth: 100,
            systems: retrieval::load_systems(&env.resolve(SYSTEMS_FILE))?,
            baseline: "BM25".into(),
            trials: 10_000,
            seed: 42,
        })
    }

    /// Check the values: a corpus, valid systems with the baseline among them, a
    /// window longer than its overlap, at least 1 trial.
    pub fn check(self) -> Result<NqValid> {
        retrieval::check_study(&self.systems, &self.baseline, self.trials)?;
        if self.corpora.is_empty() {
            return Err(Error::param("corpora", "no corpus"));
        }
        SlidingWindowParams::default()
            .window(self.window)
            .overlap(self.overlap)
            .check()?;
        Ok(NqValid(self))
    }

    /// Passages kept per question: `depth`, at least the largest k of [`TOP_K`].
    pub fn run_depth(&self) -> usize {
        self.depth.max(TOP_K[TOP_K.len() - 1])
    }
}

crate::env::checked_params!(NqValid, NqParams, "Checked [`NqParams`].");

impl NqValid {
    /// What `config.json` records: the parameters, the sha256 of the corpora's, the
    /// questions' and the encoders' files, the answer rule spelled out, the encoder's
    /// parameters, the cache keys of the trained re-rankers at this scale, and the
    /// program's sha256.
    pub fn resolved(&self, env: &Env) -> Result<super::Resolved<'_, NqParams>> {
        let assets = self
            .corpora
            .iter()
            .map(String::as_str)
            .chain(["nq-open"])
            .chain(crate::pipeline::system_spec::encoder_assets(&self.systems));
        super::Resolved::new(
            env,
            &self.0,
            assets,
            serde_json::json!({
                "answer_match_rule": self.answer_match.description(),
                "encoder": crate::encode::EncoderParams::default(),
                "trained": crate::pipeline::trained::keys(env, self.scale, &self.systems)?,
            }),
        )
    }
}

/// What the study found.
#[derive(Debug, Clone)]
pub struct NqStudy {
    /// The parameters it ran with.
    pub params: NqParams,
    /// Per corpus: articles, passages, words (and an `all` row).
    pub corpus: Table,
    /// Passages indexed.
    pub passages: usize,
    /// Mean words per window (title excluded).
    pub mean_words: f64,
    /// Questions of the NQ-open dev file with a usable gold answer ([`nq_open::load`]).
    pub questions_available: usize,
    /// Questions of the file left out: every gold answer normalises to nothing.
    pub questions_left_out: usize,
    /// Gold answers dropped from the questions kept, as they normalise to nothing.
    pub golds_dropped: usize,
    /// `(id, question)` of the questions used, in file order.
    pub questions: Vec<(String, String)>,
    /// Questions with an answer usable under the rule.
    pub evaluated: usize,
    /// Every system's run.
    pub runs: Vec<SystemRun>,
    /// Answer recall at each k of [`TOP_K`].
    pub scored: Scored,
    /// Per system, each question's rank of the first passage holding an answer.
    pub first_hit: Vec<Vec<Option<usize>>>,
    /// Every system against the baseline at every k.
    pub comparisons: Vec<ComparisonRow>,
}

impl super::Study for NqValid {
    type Output = NqStudy;

    fn name(&self) -> String {
        NAME.to_string()
    }

    fn scale(&self) -> Scale {
        self.scale
    }

    fn summary_file(&self) -> &'static str {
        "answer_recall.md"
    }

    fn resolved(&self, env: &Env) -> Result<impl serde::Serialize + '_> {
        NqValid::resolved(self, env)
    }

    fn run(&self, env: &Env) -> Result<NqStudy> {
        run(env, self)
    }
}

/// Load the corpora and questions, build and run every system, score and compare.
pub fn run(env: &Env, params: &NqValid) -> Result<NqStudy> {
    let p = &params.0;
    let chunker = SlidingWindowParams::default()
        .window(p.window)
        .overlap(p.overlap)
        .check()?;
    let mut passages: Vec<Passage> = Vec::new();
    let mut window_text: HashMap<String, String> = HashMap::new();
    let mut corpus = Table::new(["corpus", "articles", "passages", "words"]);
    let (mut articles, mut words) = (0usize, 0usize);
    for c in &p.corpora {
        let docs = wikipedia_corpus(&env.assets, c)?;
        let ps = chunker.chunk_all(&docs)?;
        let w: usize = ps.iter().map(|p| crate::text::word_count(&p.text)).sum();
        corpus.push([
            c.clone(),
            docs.len().to_string(),
            ps.len().to_string(),
            w.to_string(),
        ])?;
        articles += docs.len();
        words += w;
        for mut ps in ps {
            ps.id = format!("{c}:{}", ps.id);
            window_text.insert(ps.id.clone(), ps.text.clone());
            if p.titles && !ps.title.is_empty() {
                ps.text = format!("{}\n{}", ps.title, ps.text);
            }
            passages.push(ps);
        }
    }
    corpus.push([
        "all".to_string(),
        articles.to_string(),
        passages.len().to_string(),
        words.to_string(),
    ])?;
    if window_text.len() != passages.len() {
        return Err(Error::param(
            "corpora",
            "passage ids are not unique across corpora",
        ));
    }
    let nq = nq_open::load(
        &env.assets.resolve("nq-open", "NQ-open.dev.jsonl")?,
        BadRecords::Skip,
    )?;
    println!("NQ-open dev: {}", nq_open::dropped_note(&nq));
    let (questions_left_out, golds_dropped) = (nq.skipped.len(), nq.dropped_golds.len());
    let all_q = nq.questions;
    let questions_available = all_q.len();
    let questions: Vec<QaExample> = all_q
        .into_iter()
        .take(if p.questions == 0 {
            usize::MAX
        } else {
            p.questions
        })
        .collect();
    let queries: Vec<Query> = questions.iter().map(QaExample::to_query).collect();
    let answers: BTreeMap<String, Vec<String>> = questions
        .iter()
        .map(|q| (q.id.clone(), q.answers.clone()))
        .collect();
    // Each question's answers prepared for the rule once (a regex that cannot be matched
    // as DPR matches it stops the run here, naming the question).
    let rule = p.answer_match;
    let golds: Vec<Golds> = questions
        .iter()
        .map(|q| {
            rule.golds(&q.answers).map_err(|e| {
                Error::param(
                    "answer_match",
                    format!(
                        "NQ-open question `{}` under the `{rule}` answer match: {e}",
                        q.id
                    ),
                )
            })
        })
        .collect::<Result<_>>()?;
    let evaluated = golds.iter().filter(|g| !g.is_empty()).count();
    println!(
        "{} passages ({}-word windows, overlap {}); {} of {questions_available} NQ-open dev questions",
        passages.len(),
        p.window,
        p.overlap,
        questions.len()
    );
    let n_passages = passages.len();
    let mean_words = words as f64 / n_passages.max(1) as f64;
    let depth = p.run_depth();
    let trained = crate::pipeline::trained::for_systems(
        env,
        p.scale,
        &p.systems,
        crate::pipeline::trained::Training::Allow,
    )?;
    let mut builder = SystemBuilder::new(env, trained, passages)?.with_token_store(STORE_TAG);
    let runs = retrieval::run_systems(
        &mut builder,
        &p.systems,
        &queries,
        depth,
        |_| depth,
        &env.root,
    )?;
    // The curve from the rank of each question's first answering passage; the table's
    // columns from the library's `answer_recall_at_k`, which must agree with it.
    let mut prepared: HashMap<String, MatchText> = HashMap::new();
    let mut first_hit = Vec::with_capacity(runs.len());
    for r in &runs {
        let mut ranks = Vec::with_capacity(questions.len());
        for (q, g) in questions.iter().zip(&golds) {
            let mut rank = None;
            if !g.is_empty() {
                for (i, h) in r
                    .run
                    .get(&q.id)
                    .map(Vec::as_slice)
                    .unwrap_or(&[])
                    .iter()
                    .enumerate()
                {
                    let text = window_text.get(&h.id).ok_or_else(|| {
                        Error::param("run", format!("{}: unknown passage id `{}`", r.key, h.id))
                    })?;
                    let t = prepared
                        .entry(h.id.clone())
                        .or_insert_with(|| rule.prepare(text));
                    if g.found_in(t)? {
                        rank = Some(i + 1);
                        break;
                    }
                }
            }
            ranks.push(rank);
        }
        first_hit.push(ranks);
    }
    let names: Vec<String> = TOP_K.iter().map(|k| format!("Top-{k}")).collect();
    let mut si = 0usize;
    let scored = Scored::new(&runs, names, |run| {
        let mut out: Vec<MetricResult> = Vec::new();
        for &k in &TOP_K {
            let m = answer_recall_at_k(run, &window_text, &answers, k, rule)?;
            let from_curve = first_hit[si]
                .iter()
                .filter(|r| r.is_some_and(|r| r <= k))
                .count() as f64
                / evaluated.max(1) as f64;
            if (m.mean - from_curve).abs() > 1e-12 {
                return Err(Error::param(
                    "answer_recall",
                    format!(
                        "{}@{k}: answer_recall_at_k {} vs first-hit ranks {from_curve}",
                        runs[si].key, m.mean
                    ),
                ));
            }
            out.push(m);
        }
        si += 1;
        Ok(out)
    })?;
    let comparisons = scored.compare_to(&p.baseline, p.trials, p.seed)?;
    Ok(NqStudy {
        params: p.clone(),
        corpus,
        passages: n_passages,
        mean_words,
        questions_available,
        questions_left_out,
        golds_dropped,
        questions: questions
            .iter()
            .map(|q| (q.id.clone(), q.question.clone()))
            .collect(),
        evaluated,
        runs,
        scored,
        first_hit,
        comparisons,
    })
}

impl NqStudy {
    /// The answer-recall table's caption: every fact from the parameters or the run.
    pub fn caption(&self) -> String {
        let p = &self.params;
        let n = self.questions.len();
        let th = retrieval::thousands;
        let skipped = n - self.evaluated;
        let used = if n == self.questions_available {
            format!("all {} questions", th(n))
        } else {
            format!(
                "the first {} of {} questions",
                th(n),
                th(self.questions_available)
            )
        };
        let used = if self.questions_left_out + self.golds_dropped == 0 {
            used
        } else {
            format!(
                "{used}; {} left out for want of a gold answer that SQuAD-normalises to \
                 something, {} such gold answers dropped",
                th(self.questions_left_out),
                th(self.golds_dropped)
            )
        };
        let scored = if skipped == 0 {
            "every one with an answer usable under the rule".to_string()
        } else {
            format!(
                "{} scored, {} without an answer usable under the rule skipped",
                th(self.evaluated),
                th(skipped)
            )
        };
        let dpr_note = if p.answer_match == AnswerMatch::Dpr {
            "the same matching rule"
        } else {
            "DPR's string match, not the rule used here"
        };
        let systems: Vec<String> = self
            .runs
            .iter()
            .map(|r| format!("{}: {}", r.key, r.label))
            .collect();
        format!(
            "NQ-open dev, {used} ({scored}): answer recall, the % of questions with a gold answer in \
             the top k passages. Answer match `{rule}`: {desc}. Passages: {passages} windows of at most \
             {window} words (overlap {overlap}; {mean:.1} words on average) from {nc} Wikipedia {corpora_word} \
             ({corpora}){titles}. Retrievers ({depth} passages per question) — {systems}. For scale, DPR on 21M \
             passages with {dpr_note}: BM25 Top-20 59.1, Top-100 73.7; DPR Top-20 78.4, Top-100 85.4.",
            rule = p.answer_match,
            desc = p.answer_match.description(),
            passages = th(self.passages),
            window = p.window,
            overlap = p.overlap,
            mean = self.mean_words,
            nc = p.corpora.len(),
            corpora_word = if p.corpora.len() == 1 { "corpus" } else { "corpora" },
            corpora = p.corpora.join(", "),
            titles = if p.titles {
                ", titles prepended for retrieval, not for matching"
            } else {
                ", no titles"
            },
            depth = p.run_depth(),
            systems = systems.join("; "),
        )
    }

    /// The heading of the significance table.
    pub fn significance_heading(&self) -> String {
        format!(
            "Paired t, randomisation and bootstrap tests ({} trials each, seed {}) against {}, \
             per question, answer match `{}`:",
            retrieval::thousands(self.params.trials),
            self.params.seed,
            self.params.baseline,
            self.params.answer_match,
        )
    }

    /// The figure's title.
    pub fn figure_title(&self) -> String {
        format!(
            "NQ-open dev ({} questions, answer match {}): answer recall@k over {} passages of ≤ {} words",
            retrieval::thousands(self.evaluated),
            self.params.answer_match,
            retrieval::thousands(self.passages),
            self.params.window
        )
    }

    /// Answer recall (%) per system and k, DPR's table shape (`answer_recall.csv`).
    pub fn table(&self) -> Table {
        let rule = self.params.answer_match.name().to_string();
        let mut t = Table::new(
            std::iter::once("retriever".to_string())
                .chain(TOP_K.iter().map(|k| format!("Top-{k}")))
                .chain(["answer_match".to_string()]),
        )
        .caption(self.caption());
        for (si, r) in self.runs.iter().enumerate() {
            let mut row = vec![r.key.clone()];
            row.extend(
                self.scored.results[si]
                    .iter()
                    .map(|m| format!("{:.1}", 100.0 * m.mean)),
            );
            row.push(rule.clone());
            t.rows.push(row);
        }
        t
    }

    /// Answer recall at every k from 1 to the run depth (`curve.csv`).
    pub fn curve(&self) -> Table {
        let rule = self.params.answer_match.name().to_string();
        let mut t = Table::new(["retriever", "k", "answer_recall", "answer_match"]);
        for (si, r) in self.runs.iter().enumerate() {
            for (k, recall) in self.curve_of(si) {
                t.rows.push(vec![
                    r.key.clone(),
                    k.to_string(),
                    format!("{recall:.4}"),
                    rule.clone(),
                ]);
            }
        }
        t
    }

    fn curve_of(&self, si: usize) -> Vec<(usize, f64)> {
        (1..=self.params.run_depth())
            .map(|k| {
                let found = self.first_hit[si]
                    .iter()
                    .filter(|r| r.is_some_and(|r| r <= k))
                    .count();
                (k, found as f64 / self.evaluated.max(1) as f64)
            })
            .collect()
    }

    /// Every system against the baseline at every k (`significance.csv`).
    pub fn significance(&self) -> Result<Table> {
        let mut t = Table::new(
            ["retriever", "vs", "k"]
                .into_iter()
                .chain(Comparison::COLUMNS)
                .chain(["answer_match"]),
        );
        for r in &self.comparisons {
            t.push(
                [
                    r.system.clone(),
                    self.params.baseline.clone(),
                    r.metric.trim_start_matches("Top-").to_string(),
                ]
                .into_iter()
                .chain(r.comparison.cells())
                .chain([self.params.answer_match.name().to_string()]),
            )?;
        }
        Ok(t)
    }

    /// Each question's 0/1 at every system and k (`per_question.csv`).
    pub fn per_question(&self) -> Result<Table> {
        let mut t = Table::new(
            ["question_id", "question"]
                .into_iter()
                .map(String::from)
                .chain(
                    self.runs
                        .iter()
                        .flat_map(|r| TOP_K.iter().map(move |k| format!("{}@{k}", r.key))),
                )
                .chain(["answer_match".to_string()]),
        );
        for (id, question) in &self.questions {
            let mut row = vec![id.clone(), question.clone()];
            for res in &self.scored.results {
                for m in res {
                    row.push(
                        m.per_query
                            .get(id)
                            .map(|v| format!("{v:.0}"))
                            .unwrap_or_default(),
                    );
                }
            }
            row.push(self.params.answer_match.name().to_string());
            t.push(row)?;
        }
        Ok(t)
    }

    /// The tables as Markdown (`answer_recall.md`).
    pub fn markdown(&self) -> Result<String> {
        let t = self.table();
        Ok(format!(
            "{}\n{}\n\n{}\nCorpus:\n\n{}",
            t.to_markdown(),
            self.significance_heading(),
            self.significance()?.to_markdown(),
            self.corpus.to_markdown()
        ))
    }

    /// Answer recall against k (log scale), one line per system (`answer_recall.png`).
    #[cfg(feature = "plot")]
    pub fn figure(&self) -> crate::plot::Lines {
        crate::plot::Lines {
            title: self.figure_title(),
            x_label: "k (passages retrieved)".into(),
            y_label: "questions with an answer in the top k (%)".into(),
            lines: self
                .runs
                .iter()
                .enumerate()
                .map(|(si, r)| crate::plot::Line {
                    label: r.key.clone(),
                    points: self
                        .curve_of(si)
                        .into_iter()
                        .map(|(k, v)| (k as f64, 100.0 * v))
                        .collect(),
                })
                .collect(),
            log_x: true,
            y_range: None,
            size: (1100, 650),
        }
    }

    /// The numbers `manifest.json` records.
    pub fn summary(&self) -> serde_json::Value {
        let mut s = serde_json::Map::new();
        for (si, r) in self.runs.iter().enumerate() {
            for (ki, k) in TOP_K.iter().enumerate() {
                s.insert(
                    format!("{}@{k}", r.key),
                    self.scored.results[si][ki].mean.into(),
                );
            }
            s.insert(format!("{}_seconds", r.key), r.seconds.into());
        }
        s.insert("questions".into(), self.questions.len().into());
        s.insert("questions_evaluated".into(), self.evaluated.into());
        s.insert(
            "answer_match".into(),
            self.params.answer_match.name().into(),
        );
        s.insert(
            "questions_available".into(),
            self.questions_available.into(),
        );
        s.insert("questions_left_out".into(), self.questions_left_out.into());
        s.insert("golds_dropped".into(), self.golds_dropped.into());
        s.insert("passages".into(), self.passages.into());
        serde_json::Value::Object(s)
    }

    /// Write every output into `out`'s staging folder.
    pub fn write(&self, out: &ResultDir) -> Result<()> {
        #[cfg(feature = "plot")]
        crate::plot::render(&self.figure())?.save(out.out_dir(), "answer_recall")?;
        self.table().write_csv(&out.path("answer_recall.csv"))?;
        self.curve().write_csv(&out.path("curve.csv"))?;
        self.significance()?
            .write_csv(&out.path("significance.csv"))?;
        self.per_question()?
            .write_csv(&out.path("per_question.csv"))?;
        self.corpus.write_csv(&out.path("corpus.csv"))?;
        let md = out.path("answer_recall.md");
        std::fs::write(&md, self.markdown()?).map_err(|e| Error::io(&md, e))?;
        let captions = serde_json::json!({
            "answer_recall": self.caption(),
            "significance": self.significance_heading(),
            "figure": self.figure_title(),
        });
        let p = out.path("captions.json");
        std::fs::write(&p, serde_json::to_string_pretty(&captions)? + "\n")
            .map_err(|e| Error::io(&p, e))
    }
}

impl super::Outputs for NqStudy {
    fn write(&self, out: &ResultDir) -> Result<()> {
        NqStudy::write(self, out)
    }
    fn markdown(&self) -> Result<String> {
        NqStudy::markdown(self)
    }
    fn summary(&self) -> Result<serde_json::Value> {
        Ok(NqStudy::summary(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_parameters_check_per_scale() {
        let env = Env::project().unwrap();
        let d = NqParams::at_scale(&env, Scale::Default).unwrap();
        assert_eq!(d.questions, 0);
        assert_eq!(d.corpora.len(), 3);
        let keys: Vec<&str> = d.systems.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, ["BM25", "dense", "hybrid", "BM25+ColBERT"]);
        d.clone().check().unwrap();
        let q = NqParams::at_scale(&env, Scale::Quick).unwrap();
        assert!(q.questions > 0 && q.corpora.len() == 1);
        let mut bad = d.clone();
        bad.overlap = 100;
        assert!(
            bad.check().is_err(),
            "an overlap as long as the window is an error"
        );
        let mut bad = d;
        bad.corpora.clear();
        assert!(bad.check().unwrap_err().to_string().contains("corpora"));
    }

    /// The whole study at a tiny scale (lexical systems, 40 questions, the smallest
    /// corpus): answer recall from the library agrees with the first-hit ranks (checked
    /// inside `run`), is monotone in k, and the outputs are written.
    #[test]
    fn tiny_study_runs_scores_and_writes() {
        let env = Env::project().unwrap();
        let mut p = NqParams::at_scale(&env, Scale::Quick).unwrap();
        p.questions = 40;
        p.trials = 200;
        let tfidf: SystemSpec =
            toml::from_str("key = \"TF-IDF\"\nretrievers = [{ kind = \"tfidf\" }]").unwrap();
        p.systems.retain(|s| s.key == "BM25");
        p.systems.push(tfidf);
        let study = run(&env, &p.check().unwrap()).unwrap();
        assert_eq!(study.questions.len(), 40);
        assert_eq!(study.runs.len(), 2);
        for res in &study.scored.results {
            let means: Vec<f64> = res.iter().map(|m| m.mean).collect();
            assert!(
                means.windows(2).all(|w| w[0] <= w[1]),
                "recall must grow with k: {means:?}"
            );
            assert!(res.iter().all(|m| m.queries() == study.evaluated));
        }
        assert_eq!(study.comparisons.len(), TOP_K.len());
        let curve = study.curve();
        assert_eq!(curve.rows.len(), 2 * study.params.run_depth());
        let tmp = tempfile::tempdir().unwrap();
        let out = ResultDir::at(tmp.path().join("r"), "r", &serde_json::json!({})).unwrap();
        out.begin().unwrap();
        study.write(&out).unwrap();
        let t = Table::read_csv(&out.path("answer_recall.csv")).unwrap();
        assert_eq!(t.rows[0][0], "BM25");
        assert_eq!(
            t.rows[0][4],
            format!("{:.1}", 100.0 * study.scored.results[0][3].mean)
        );
        assert!(out.path("per_question.csv").is_file() && out.path("captions.json").is_file());
    }
}
