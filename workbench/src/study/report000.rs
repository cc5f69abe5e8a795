//! Report 000's Table 1 and Figure 3 with readers trained here: the ten questions of its
//! §4 over Wikipedia windows, SBERT (all-MiniLM-L6-v2) + FAISS flat top-k passages, read
//! by three extractive readers trained from MiniLM ([`crate::train::reader`], each
//! trained on first use):
//!
//! 1. `minilm-all` (SQuAD training articles + RAG Mini + NQ distant supervision), the
//!    top-k passages concatenated (report 000's way), best span;
//! 2. `minilm-squad` (the SQuAD training articles' answerable questions only), concatenated;
//! 3. `minilm-squad2` (`minilm-all` plus the training articles' unanswerable questions),
//!    concatenated, abstaining when `null − best > threshold`, the threshold chosen for F1
//!    on SQuAD *training*-article questions by the official SQuAD 2.0 search
//!    ([`best_null_threshold`]);
//!
//! and an extra row: `minilm-all` reading the best span of each passage on its own.
//!
//! Questions 6–8, which report 000 expects no corpus answer for, are unanswerable (an
//! empty answer scores 1). Beside the ten questions, an honest set: every question of
//! the five held-out SQuAD articles (gold paragraph given) and the RAG Mini test
//! questions (top-k dense passages of the RAG Mini corpus).
//!
//! | scale | readers | passages of the ten questions | threshold questions | honest sets |
//! |---|---|---|---|---|
//! | quick | the quick recipes (200 updates each, 400 for `minilm-squad2`) | `wikitext-2-raw` windows | 200 | the first 300 questions of each |
//! | default, paper | the published recipes | windows of the three Wikipedia corpora | 1,000 | all |

use super::{Env, Scale};
use crate::chunk::{Chunker, SlidingWindowParams};
use crate::display::Table;
use crate::encode::{BertEncoder, EmbeddingCache, EncoderParams};
use crate::evaluate::qa::{best_null_threshold, exact_match, f1, NullCandidate};
use crate::load::{rag_mini, wikipedia_corpus, WIKIPEDIA_CORPORA};
use crate::read::extractive::{
    char_slice, DecodeParams, ExtractiveReader, MultiPassage, ReaderParams,
};
use crate::read::Context as ReadContext;
use crate::results::ResultDir;
use crate::retrieve::dense::DenseRetriever;
use crate::retrieve::faiss::{IndexParams, VectorIndex};
use crate::retrieve::Retriever;
use crate::train::qa::SpanExample;
use crate::train::reader::{self, ReaderRecipe, TrainedReader};
use crate::{Error, Passage, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// The study's result folder at the default scale.
pub const NAME: &str = "report000_readers";
/// The sentence encoder of the retrieval.
pub const ENCODER: &str = "all-minilm-l6-v2";
/// The recipes the readers are trained with ([`ReaderRecipe::at_scale`]).
pub const RECIPES: [&str; 3] = ["minilm-all", "minilm-squad", "minilm-squad2"];

/// Report 000 §4's ten questions and their answers (empty: no answer expected).
pub const QUESTIONS: [(&str, &[&str]); 10] = [
    ("What is the capital of France?", &["Paris"]),
    ("Who wrote Hamlet?", &["William Shakespeare", "Shakespeare"]),
    (
        "\u{201c}The Big Apple\u{201d} is a nickname for which city?",
        &["New York City", "New York"],
    ),
    (
        "In what year did the first human land on the Moon?",
        &["1969"],
    ),
    ("Who discovered penicillin?", &["Alexander Fleming"]),
    ("What is Retrieval-Augmented Generation?", &[]),
    ("Explain FAISS in one sentence.", &[]),
    ("How do you generate embeddings?", &[]),
    ("Which is the largest continent on Earth?", &["Asia"]),
    (
        "What is the fastest land animal?",
        &["cheetah", "The cheetah"],
    ),
];

/// Report 000's Table 1: (reader, Figure 3 label, EM = F1).
pub const REPORT: [(&str, &str, f64); 3] = [
    ("DeBERTa-v3-large-squad2", "DeBERTa-v3-L (report)", 66.7),
    ("BERT-large-WWM-squad", "BERT-L-WWM (report)", 66.7),
    ("RoBERTa-large-squad2", "RoBERTa-L (report)", 33.3),
];

/// One row of Table 1: a trained recipe read in one way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReaderRow {
    /// Row name.
    pub name: &'static str,
    /// Its short label in Figure 3.
    pub label: &'static str,
    /// Index into [`RECIPES`].
    pub model: usize,
    /// How the top-k passages are read.
    pub mode: MultiPassage,
    /// Abstain with the null threshold chosen on the training articles.
    pub null_threshold: bool,
}

/// The three readers of Table 1, then the extra reading mode.
pub const READERS: [ReaderRow; 4] = [
    ReaderRow {
        name: "MiniLM reader (minilm-all)",
        label: "minilm-all",
        model: 0,
        mode: MultiPassage::Concatenate,
        null_threshold: false,
    },
    ReaderRow {
        name: "MiniLM reader, SQuAD only (minilm-squad)",
        label: "minilm-squad",
        model: 1,
        mode: MultiPassage::Concatenate,
        null_threshold: false,
    },
    ReaderRow {
        name: "MiniLM SQuAD 2.0-style reader + null threshold (minilm-squad2)",
        label: "minilm-squad2 + null",
        model: 2,
        mode: MultiPassage::Concatenate,
        null_threshold: true,
    },
    ReaderRow {
        name: "extra: minilm-all, best span per passage",
        label: "minilm-all per passage",
        model: 0,
        mode: MultiPassage::BestPerPassage,
        null_threshold: false,
    },
];

/// The study's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report000Params {
    /// Sizes; part of the result's name and of the readers' recipes.
    pub scale: Scale,
    /// Wikipedia corpus assets whose 100-word windows the ten questions are answered from.
    pub corpora: Vec<String>,
    /// Passages read per question.
    pub k: usize,
    /// SQuAD training-article questions used to choose the null threshold (the first N).
    pub threshold_questions: usize,
    /// Questions of each honest set: the first N of the held-out SQuAD articles' and of
    /// the RAG Mini test questions (0 = all).
    pub honest_questions: usize,
    /// Read with the latest checkpoint of a recipe whose training has not finished
    /// instead of training it (finished recipes read their final checkpoint).
    pub partial: bool,
}

impl Report000Params {
    /// The published parameters at `scale`.
    pub fn at_scale(scale: Scale) -> Self {
        let corpora = match scale {
            Scale::Quick => vec!["wikitext-2-raw".to_string()],
            _ => WIKIPEDIA_CORPORA.iter().map(|c| c.to_string()).collect(),
        };
        Report000Params {
            scale,
            corpora,
            k: 5,
            threshold_questions: scale.pick(200, 1000, 1000),
            honest_questions: scale.pick(300, 0, 0),
            partial: false,
        }
    }

    /// Check the values: a corpus, `k ≥ 1`, at least one threshold question.
    pub fn check(self) -> Result<Report000Valid> {
        if self.corpora.is_empty() {
            return Err(Error::param("corpora", "no corpus"));
        }
        if self.k == 0 {
            return Err(Error::param("k", "read at least one passage"));
        }
        if self.threshold_questions == 0 {
            return Err(Error::param(
                "threshold_questions",
                "the null threshold needs at least one question",
            ));
        }
        let recipes = RECIPES
            .iter()
            .map(|n| ReaderRecipe::at_scale(n, self.scale))
            .collect::<Result<Vec<_>>>()?;
        Ok(Report000Valid {
            params: self,
            recipes,
        })
    }
}

/// Checked [`Report000Params`], with the readers' recipes at its scale.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report000Valid {
    /// The parameters.
    pub params: Report000Params,
    /// The recipes of [`RECIPES`] at the scale.
    pub recipes: Vec<ReaderRecipe>,
}

impl std::ops::Deref for Report000Valid {
    type Target = Report000Params;
    fn deref(&self) -> &Report000Params {
        &self.params
    }
}

impl Report000Valid {
    /// What `config.json` records: the parameters, the sha256 of every input file (the
    /// recipes' supervision, the corpora, the encoder), the recipes and their cache keys,
    /// the retrieval spelled out, and the program's sha256.
    pub fn resolved(&self, env: &Env) -> Result<super::Resolved<'_, Report000Params>> {
        let mut assets: Vec<&str> = Vec::new();
        for r in &self.recipes {
            for a in r.inputs() {
                if !assets.contains(&a) {
                    assets.push(a);
                }
            }
        }
        for c in &self.corpora {
            if !assets.contains(&c.as_str()) {
                assets.push(c);
            }
        }
        assets.push(ENCODER);
        let keys = self
            .recipes
            .iter()
            .map(|r| r.key(&env.assets))
            .collect::<Result<Vec<_>>>()?;
        super::Resolved::new(
            env,
            &self.params,
            assets,
            serde_json::json!({
                "recipes": self.recipes,
                "keys": keys,
                "retrieval": format!(
                    "{ENCODER} sentence embeddings, FAISS flat inner product; the ten questions over 100-word windows (title + window) of {}, the RAG Mini test questions over the RAG Mini passages",
                    self.corpora.join(", ")
                ),
            }),
        )
    }
}

/// One reader's answer to one of the ten questions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    /// Question number (1–10).
    pub q: usize,
    /// Row of [`READERS`].
    pub reader: usize,
    /// The answer ("" when the reader abstained).
    pub text: String,
    /// Exact match and F1 against the golds (0–1).
    pub em: f64,
    /// F1 (0–1).
    pub f1: f64,
    /// `(passage id, rank from 1, start char, end char)` of the evidence.
    pub evidence: Option<(String, usize, usize, usize)>,
}

/// What the study found.
#[derive(Debug, Clone)]
pub struct Report000Study {
    /// The parameters and recipes it ran with.
    pub params: Report000Valid,
    /// Each recipe's trained model, and the updates of its checkpoint when unfinished.
    pub trained: Vec<(TrainedReader, Option<usize>)>,
    /// The null threshold of the SQuAD 2.0-style reader, its training-article F1 with
    /// it and without abstaining (0–1), and the questions it was chosen on.
    pub threshold: (f32, f64, f64, usize),
    /// Per reader row: EM, F1 on the held-out SQuAD articles; EM, F1 on the RAG Mini
    /// test questions (percent).
    pub honest: Vec<[f64; 4]>,
    /// Questions of the honest sets: held-out SQuAD, RAG Mini test.
    pub honest_sizes: (usize, usize),
    /// Passages the ten questions were answered from.
    pub passages: usize,
    /// Every reader's answer to every question, question-major.
    pub answers: Vec<Answer>,
    /// The top-k passages of each question: `(id, text)`.
    pub contexts: Vec<Vec<(String, String)>>,
}

/// The null threshold maximising mean F1 on `set` (gold paragraph given) for `qa`, with
/// that F1 and the F1 without abstaining.
fn choose_threshold(qa: &ExtractiveReader, set: &[SpanExample]) -> Result<(f32, f64, f64)> {
    let decoded = reader::read_gold(qa, set)?;
    let items: Vec<NullCandidate> = set
        .iter()
        .zip(&decoded)
        .map(|(e, d)| {
            let (null_margin, text) = d
                .nbest
                .first()
                .map(|s| {
                    (
                        d.null_score - s.score,
                        char_slice(&e.context, s.start_char, s.end_char),
                    )
                })
                .unwrap_or((f32::INFINITY, ""));
            NullCandidate {
                null_margin,
                answered: f1(text, &e.golds),
                null: f1("", &e.golds),
            }
        })
        .collect();
    let t = best_null_threshold(&items)?;
    Ok((t.threshold, t.score, t.never_null))
}

/// A dense retriever over `passages` (their text embedded; the embedding cache reused).
fn dense_over(
    env: &Env,
    encoder: &Arc<BertEncoder>,
    passages: &[Passage],
) -> Result<DenseRetriever> {
    let vectors =
        EmbeddingCache::new(env.cache_dir("embeddings")).get_or_compute(encoder, passages)?;
    let index = VectorIndex::build(IndexParams::flat_ip(), encoder.dim(), &vectors)?;
    DenseRetriever::from_parts(
        encoder.clone(),
        index,
        passages.iter().map(|p| p.id.clone()).collect(),
    )
}

/// The answer text and `(segment, start char, end char)`, or `None` (abstained).
fn read(
    r: &ExtractiveReader,
    q: &str,
    ctx: &[ReadContext],
) -> Result<Option<(String, usize, usize, usize)>> {
    let (d, _) = r.read_spans(q, ctx)?;
    Ok(d.answer().map(|s| {
        let t = &ctx[s.segment].text;
        (
            char_slice(t, s.start_char, s.end_char).to_string(),
            s.segment,
            s.start_char,
            s.end_char,
        )
    }))
}

/// 100-word windows of `corpora` (`{corpus}:{doc}#{w}` ids, as the NQ study cuts them).
fn windows(env: &Env, corpora: &[String]) -> Result<Vec<Passage>> {
    let chunker = SlidingWindowParams::default()
        .window(100)
        .overlap(0)
        .check()?;
    let mut out = Vec::new();
    for c in corpora {
        for mut p in chunker.chunk_all(&wikipedia_corpus(&env.assets, c)?)? {
            p.id = format!("{c}:{}", p.id);
            out.push(p);
        }
    }
    Ok(out)
}

impl super::Study for Report000Valid {
    type Output = Report000Study;

    fn name(&self) -> String {
        NAME.to_string()
    }

    fn scale(&self) -> Scale {
        self.scale
    }

    fn summary_file(&self) -> &'static str {
        "table1.md"
    }

    fn resolved(&self, env: &Env) -> Result<impl serde::Serialize + '_> {
        Report000Valid::resolved(self, env)
    }

    fn run(&self, env: &Env) -> Result<Report000Study> {
        run(env, self)
    }
}

/// Train (or load) the readers, choose the null threshold, score the honest sets and
/// read the ten questions.
pub fn run(env: &Env, params: &Report000Valid) -> Result<Report000Study> {
    let p = &params.params;
    let cache_root = env.cache_dir("readers");
    let mut trained = Vec::new();
    let mut data = None;
    for recipe in &params.recipes {
        let d = reader::supervision(&env.assets, &recipe.supervision)?;
        let t = if p.partial && !reader::is_trained(&env.assets, recipe, &cache_root)? {
            let (t, l) = reader::partial_checkpoint(&env.assets, recipe, &cache_root, &d)?
                .ok_or_else(|| {
                    Error::param(
                        "partial",
                        format!(
                            "no checkpoint of recipe `{}` yet: run `train_reader --recipe {} --scale {}`",
                            recipe.name, RECIPES[trained.len()], p.scale
                        ),
                    )
                })?;
            let updates = l.steps.len();
            (t, Some(updates))
        } else {
            (
                reader::train_or_load(&env.assets, recipe, &cache_root, &d)?.0,
                None,
            )
        };
        trained.push(t);
        // The evaluation sets do not depend on the recipe; the first recipe's are used.
        data.get_or_insert(d);
    }
    let mut data = data.ok_or_else(|| Error::param("recipes", "no recipe"))?;
    if p.honest_questions > 0 {
        data.held_out.truncate(p.honest_questions);
        data.rag_test.truncate(p.honest_questions);
    }
    let base = ReaderParams {
        window: params.recipes[0].windows,
        ..ReaderParams::default()
    };
    let mut models = trained
        .iter()
        .map(|(t, _)| ExtractiveReader::load_dir(&t.model_dir, base.clone()))
        .collect::<Result<Vec<_>>>()?;

    // The null threshold of the SQuAD 2.0-style reader, on training-article questions.
    let thr_set: Vec<SpanExample> = data
        .squad_train_all
        .iter()
        .take(p.threshold_questions)
        .cloned()
        .collect();
    let thr_model = READERS
        .iter()
        .find(|r| r.null_threshold)
        .map(|r| r.model)
        .ok_or_else(|| Error::param("readers", "no reader row has a null threshold"))?;
    let (thr, best, without) = choose_threshold(&models[thr_model], &thr_set)?;
    let params_of = |r: &ReaderRow| ReaderParams {
        mode: r.mode,
        decode: DecodeParams {
            null_threshold: r.null_threshold.then_some(thr),
            ..base.decode
        },
        ..base.clone()
    };

    // Honest set 1: every question of the five held-out articles, gold paragraph given.
    let mut honest = vec![[0.0f64; 4]; READERS.len()];
    for (ri, r) in READERS.iter().enumerate() {
        let qa = &mut models[r.model];
        qa.set_params(params_of(r))?;
        let preds = reader::predict_gold(qa, &data.held_out)?;
        let (em, f) = reader::em_f1(&data.held_out, &preds);
        honest[ri][0] = em;
        honest[ri][1] = f;
    }

    // Honest set 2: RAG Mini test questions over the RAG Mini passages, top-k dense.
    let encoder = Arc::new(BertEncoder::load(
        &env.assets,
        ENCODER,
        EncoderParams::default(),
    )?);
    let (docs, _) = rag_mini::load_csv(
        &env.assets.resolve("rag-mini-wikipedia", "infos.csv")?,
        &env.assets.resolve("rag-mini-wikipedia", "questions.csv")?,
    )?;
    let rag_passages: Vec<Passage> = docs.iter().map(Passage::whole).collect();
    let rag_dense = dense_over(env, &encoder, &rag_passages)?;
    let rag_pos: HashMap<&str, usize> = rag_passages
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id.as_str(), i))
        .collect();
    let mut rag_ctx = Vec::with_capacity(data.rag_test.len());
    for q in &data.rag_test {
        let mut ctx = Vec::new();
        for h in rag_dense.retrieve(&q.question, p.k)? {
            let i = rag_pos[h.id.as_str()];
            ctx.push(ReadContext::new(
                rag_passages[i].id.clone(),
                rag_passages[i].text.clone(),
            ));
        }
        rag_ctx.push(ctx);
    }
    for (ri, r) in READERS.iter().enumerate() {
        let qa = &mut models[r.model];
        qa.set_params(params_of(r))?;
        let (mut em, mut fs) = (0.0, 0.0);
        for (q, ctx) in data.rag_test.iter().zip(&rag_ctx) {
            let a = read(qa, &q.question, ctx)?.map(|x| x.0).unwrap_or_default();
            em += exact_match(&a, &q.answers);
            fs += f1(&a, &q.answers);
        }
        let n = data.rag_test.len().max(1) as f64;
        honest[ri][2] = 100.0 * em / n;
        honest[ri][3] = 100.0 * fs / n;
    }

    // The ten questions over the Wikipedia windows (title + window embedded, the window
    // read).
    let mut passages = windows(env, &p.corpora)?;
    let window_text: Vec<String> = passages.iter().map(|p| p.text.clone()).collect();
    for p in &mut passages {
        if !p.title.is_empty() {
            p.text = format!("{}\n{}", p.title, p.text);
        }
    }
    let dense = dense_over(env, &encoder, &passages)?;
    let pos: HashMap<&str, usize> = passages
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id.as_str(), i))
        .collect();
    let mut answers = Vec::new();
    let mut contexts = Vec::new();
    for (qi, (q, golds)) in QUESTIONS.iter().enumerate() {
        let mut ctx = Vec::new();
        for h in dense.retrieve(q, p.k)? {
            let i = pos[h.id.as_str()];
            ctx.push(ReadContext::new(h.id.clone(), window_text[i].clone()));
        }
        for (ri, row) in READERS.iter().enumerate() {
            let qa = &mut models[row.model];
            qa.set_params(params_of(row))?;
            let r = read(qa, q, &ctx)?;
            let text = r.as_ref().map(|x| x.0.clone()).unwrap_or_default();
            answers.push(Answer {
                q: qi + 1,
                reader: ri,
                em: exact_match(&text, golds),
                f1: f1(&text, golds),
                text,
                evidence: r.map(|(_, seg, a, b)| (ctx[seg].id.clone(), seg + 1, a, b)),
            });
        }
        contexts.push(ctx.into_iter().map(|c| (c.id, c.text)).collect());
    }
    Ok(Report000Study {
        params: params.clone(),
        trained,
        threshold: (thr, best, without, thr_set.len()),
        honest,
        honest_sizes: (data.held_out.len(), data.rag_test.len()),
        passages: passages.len(),
        answers,
        contexts,
    })
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl Report000Study {
    /// Mean EM and F1 (percent) of each reader row on the ten questions.
    pub fn ten(&self) -> Vec<(f64, f64)> {
        let n = QUESTIONS.len() as f64;
        (0..READERS.len())
            .map(|ri| {
                let (em, f) = self
                    .answers
                    .iter()
                    .filter(|a| a.reader == ri)
                    .fold((0.0, 0.0), |(e, f), a| (e + a.em, f + a.f1));
                (100.0 * em / n, 100.0 * f / n)
            })
            .collect()
    }

    /// Table 1: report 000's readers, then ours on the ten questions and the honest sets.
    pub fn table(&self) -> Result<Table> {
        let mut t = Table::new([
            "reader",
            "EM (10 questions)",
            "F1 (10 questions)",
            "EM held-out SQuAD",
            "F1 held-out SQuAD",
            "EM RAG Mini test",
            "F1 RAG Mini test",
            "source",
        ]);
        for (name, _, v) in REPORT {
            t.push([
                name.to_string(),
                format!("{v:.1}"),
                format!("{v:.1}"),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                "report 000 Table 1".into(),
            ])?;
        }
        for ((r, h), (em, f)) in READERS.iter().zip(&self.honest).zip(self.ten()) {
            t.push([
                r.name.to_string(),
                format!("{em:.1}"),
                format!("{f:.1}"),
                format!("{:.1}", h[0]),
                format!("{:.1}", h[1]),
                format!("{:.1}", h[2]),
                format!("{:.1}", h[3]),
                format!("this run, top-{}", self.params.k),
            ])?;
        }
        Ok(t)
    }

    /// The honest sets, one row per reader and set.
    pub fn honest_table(&self) -> Result<Table> {
        let mut t = Table::new(["reader", "set", "questions", "EM", "F1"]);
        for (r, h) in READERS.iter().zip(&self.honest) {
            t.push([
                r.name.to_string(),
                "SQuAD held-out articles (all questions, gold paragraph)".into(),
                self.honest_sizes.0.to_string(),
                format!("{:.1}", h[0]),
                format!("{:.1}", h[1]),
            ])?;
        }
        for (r, h) in READERS.iter().zip(&self.honest) {
            t.push([
                r.name.to_string(),
                format!(
                    "RAG Mini test questions (top-{} dense passages)",
                    self.params.k
                ),
                self.honest_sizes.1.to_string(),
                format!("{:.1}", h[2]),
                format!("{:.1}", h[3]),
            ])?;
        }
        Ok(t)
    }

    /// Every reader's answer to every question.
    pub fn answers_table(&self) -> Result<Table> {
        let mut t = Table::new([
            "q", "question", "golds", "reader", "answer", "em", "f1", "passage", "rank",
        ]);
        for a in &self.answers {
            let (q, golds) = QUESTIONS[a.q - 1];
            let (pid, rank) = match &a.evidence {
                Some((id, rank, ..)) => (id.clone(), rank.to_string()),
                None => (String::new(), String::new()),
            };
            t.push([
                a.q.to_string(),
                q.to_string(),
                golds.join(" | "),
                READERS[a.reader].name.to_string(),
                a.text.clone(),
                a.em.to_string(),
                format!("{:.3}", a.f1),
                pid,
                rank,
            ])?;
        }
        Ok(t)
    }

    /// Each answer highlighted in its passage (HTML).
    pub fn answers_html(&self) -> String {
        let mut html =
            String::from("<div class=\"report000\"><style>mark{background:#ffe066}</style>\n");
        for (qi, (q, golds)) in QUESTIONS.iter().enumerate() {
            html.push_str(&format!(
                "<h3>{}. {}</h3><p>gold: {}</p>\n",
                qi + 1,
                esc(q),
                esc(&if golds.is_empty() {
                    "(no answer expected)".to_string()
                } else {
                    golds.join(" | ")
                })
            ));
            for a in self.answers.iter().filter(|a| a.q == qi + 1) {
                let (pid, rank, evidence) = match &a.evidence {
                    Some((id, rank, s, e)) => {
                        let t = &self.contexts[qi][rank - 1].1;
                        let n = t.chars().count();
                        let ev = format!(
                            "{}<mark>{}</mark>{}",
                            esc(char_slice(t, 0, *s)),
                            esc(char_slice(t, *s, *e)),
                            esc(char_slice(t, *e, n))
                        );
                        (id.clone(), rank.to_string(), ev)
                    }
                    None => (
                        String::new(),
                        String::new(),
                        "(no answer: abstained)".into(),
                    ),
                };
                html.push_str(&format!(
                    "<p><b>{}</b>: “{}” (EM {}, F1 {:.2}) — passage {} (rank {rank})</p><blockquote>{evidence}</blockquote>\n",
                    READERS[a.reader].name,
                    esc(&a.text),
                    a.em,
                    a.f1,
                    esc(&pid)
                ));
            }
        }
        html.push_str("</div>\n");
        html
    }

    /// Figure 3: EM and F1 on the ten questions, report 000's readers beside ours.
    #[cfg(feature = "plot")]
    pub fn figure(&self) -> crate::plot::Bars {
        let mut cats: Vec<String> = REPORT.iter().map(|(_, l, _)| l.to_string()).collect();
        cats.extend(READERS.iter().map(|r| r.label.to_string()));
        let mut em: Vec<f64> = REPORT.iter().map(|(.., v)| *v).collect();
        let mut f1s = em.clone();
        for (e, f) in self.ten() {
            em.push(e);
            f1s.push(f);
        }
        let scale = match self.params.scale {
            Scale::Default => String::new(),
            s => format!(", {s} scale"),
        };
        crate::plot::Bars {
            title: format!("Figure 3: reader EM / F1 on report 000's ten questions (top-{} SBERT passages; ours trained from MiniLM{scale})", self.params.k),
            x_label: "reader (report 000's three, then ours)".into(),
            y_label: "score (%)".into(),
            categories: cats,
            series: vec!["EM".into(), "F1".into()],
            values: vec![em, f1s],
            y_max: Some(100.0),
            size: (1400, 560),
        }
    }

    /// Table 1 as Markdown, with what it was computed from.
    pub fn markdown(&self) -> Result<String> {
        let models: Vec<String> = self
            .trained
            .iter()
            .map(|(t, partial)| {
                format!(
                    "`{}` ({} training windows, key {}{})",
                    t.recipe.name,
                    t.features,
                    t.key,
                    match partial {
                        Some(u) => format!(", UNFINISHED: checkpoint after {u} updates"),
                        None => String::new(),
                    }
                )
            })
            .collect();
        let (thr, _, _, n_thr) = self.threshold;
        Ok(format!(
            "{}\n\nReport 000's ten questions (§4) over {} Wikipedia windows ({}), top-{} SBERT + FAISS passages; questions 6–8 expect no answer (empty = correct). Readers trained by `train_reader`: {}; null threshold {thr:.3} of `{}` chosen on {} SQuAD training-article questions. Honest set: {} questions of the five held-out SQuAD articles (gold paragraph, unanswerable included), {} RAG Mini test questions.\n",
            self.table()?.to_markdown(),
            self.passages,
            self.params.corpora.join(", "),
            self.params.k,
            models.join("; "),
            self.params.recipes[2].name,
            n_thr,
            self.honest_sizes.0,
            self.honest_sizes.1
        ))
    }

    /// The numbers `manifest.json` records.
    pub fn summary(&self) -> serde_json::Value {
        let ten = self.ten();
        serde_json::json!({
            "threshold": self.threshold.0,
            "readers": READERS.iter().map(|r| r.name).collect::<Vec<_>>(),
            "ten_em": ten.iter().map(|t| t.0).collect::<Vec<_>>(),
            "ten_f1": ten.iter().map(|t| t.1).collect::<Vec<_>>(),
            "honest": self.honest,
            "reader_keys": self.trained.iter().map(|(t, _)| t.key.clone()).collect::<Vec<_>>(),
            "partial_updates": self.trained.iter().map(|(_, p)| *p).collect::<Vec<_>>(),
            "recipes": self.params.recipes.iter().map(|r| r.name.clone()).collect::<Vec<_>>(),
            "load": crate::machine::load_average(),
        })
    }

    /// `table1.csv`/`.md`, `honest.csv`, `answers.csv`, `answers.html` and (feature
    /// `plot`) `figure3.png`/`.svg`.
    pub fn write(&self, out: &ResultDir) -> Result<()> {
        self.table()?.write_csv(&out.path("table1.csv"))?;
        let md = out.path("table1.md");
        std::fs::write(&md, self.markdown()?).map_err(|e| Error::io(&md, e))?;
        self.honest_table()?.write_csv(&out.path("honest.csv"))?;
        self.answers_table()?.write_csv(&out.path("answers.csv"))?;
        let html = out.path("answers.html");
        std::fs::write(&html, self.answers_html()).map_err(|e| Error::io(&html, e))?;
        #[cfg(feature = "plot")]
        crate::plot::render(&self.figure())?.save(out.out_dir(), "figure3")?;
        Ok(())
    }
}

impl super::Outputs for Report000Study {
    fn write(&self, out: &ResultDir) -> Result<()> {
        Report000Study::write(self, out)
    }
    fn markdown(&self) -> Result<String> {
        Report000Study::markdown(self)
    }
    fn summary(&self) -> Result<serde_json::Value> {
        Ok(Report000Study::summary(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_choose_recipes_corpora_and_bad_values_are_named() {
        let quick = Report000Params::at_scale(Scale::Quick).check().unwrap();
        let names: Vec<&str> = quick.recipes.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "minilm-all-quick",
                "minilm-squad-quick",
                "minilm-squad2-quick"
            ]
        );
        assert_eq!(quick.corpora, ["wikitext-2-raw"]);
        let default = Report000Params::at_scale(Scale::Default).check().unwrap();
        assert_eq!(
            default.recipes[0],
            ReaderRecipe::named("minilm-all", false).unwrap()
        );
        assert_eq!(default.corpora.len(), WIKIPEDIA_CORPORA.len());
        assert_ne!(
            quick.recipes[0].train, default.recipes[0].train,
            "the quick recipe trains less"
        );
        let mut bad = Report000Params::at_scale(Scale::Quick);
        bad.k = 0;
        assert!(bad.check().unwrap_err().to_string().contains('k'));
        let mut bad = Report000Params::at_scale(Scale::Quick);
        bad.corpora.clear();
        assert!(bad.check().unwrap_err().to_string().contains("corpora"));
        let mut bad = Report000Params::at_scale(Scale::Quick);
        bad.threshold_questions = 0;
        assert!(bad
            .check()
            .unwrap_err()
            .to_string()
            .contains("threshold_questions"));
    }

    #[test]
    fn every_reader_row_reads_a_listed_recipe_and_one_abstains() {
        assert!(READERS.iter().all(|r| r.model < RECIPES.len()));
        assert_eq!(READERS.iter().filter(|r| r.null_threshold).count(), 1);
        assert!(QUESTIONS.iter().filter(|(_, g)| g.is_empty()).count() == 3);
    }
}
