//! RAG pipelines described by a TOML file: corpus → chunker → retriever(s) + fusion →
//! optional query transformation → optional re-ranker → reader → evaluation, with a
//! trace per question.
//!
//! | file | what |
//! |---|---|
//! | [`config`] | the TOML schema ([`PipelineConfig`]), defaults, validation naming each field |
//! | [`prompt`] | prompt templates as data files (`data/prompts/*.txt`) |
//! | [`transform`] | [`QueryTransform`] (rewrite, paraphrase-and-fuse), lenient parsing of LLM output, RRF over the variants' runs |
//! | `llm_transform` (feature `llm`) | the LLM rewrite / paraphrase transform on the reader's shared model |
//! | `study` (feature `llm`) | runs configs on one pool of loaded models ([`study::run_config`], at a scale with [`study::run_config_at`]); the reproductions built on it are [`crate::study::repro`] |
//! | [`system_spec`] | a retrieval system as data ([`SystemSpec`]): retrievers, fusion, re-ranker; a TOML list of them |
//! | [`trace`] | per-question trace records (JSONL), SQuAD-format predictions, the summary |
//! | [`cache`] | the retrieval-results cache (keyed like the embedding cache) |
//! | [`run_key`] | what a run's answers depend on, hashed: when a stored result or a journal may be reused; whether two runs can be compared |
//! | `systems` (feature `dense`) | builds retriever / fusion / re-rank specs into stages, sharing first stages and encoders; loads the trained re-rankers `trained` resolved |
//! | `trained` (feature `dense`) | resolves trained models at a scale (re-rankers from the cache or trained when allowed; a `trained:` extractive reader from the cache) before anything is built |
//! | `reader` (feature `llm`) | the generative reader a config names, with its prompt in the traces |
//! | (this module) | [`Pipeline`]: build from a config, [`Pipeline::run`] with any [`Reader`] |
//!
//! ```no_run
//! # fn main() -> workbench::Result<()> {
//! # fn my_reader() -> Box<dyn workbench::read::Reader> { unimplemented!() }
//! use workbench::pipeline::{Pipeline, PipelineConfig};
//! let config = PipelineConfig::from_file("configs/tiny.toml".as_ref())?;
//! let pipeline = Pipeline::build(config)?;
//! let mut reader = my_reader();
//! let run = pipeline.run(reader.as_mut(), None)?;
//! println!("{}", run.summary().to_table());
//! run.write("data/results/tiny".as_ref())?;
//! # Ok(()) }
//! ```
//!
//! ## What happens to one question
//!
//! 1. **Transform** (optional): the [`QueryTransform`] gives the retrieval queries
//!    (rewrite: one; paraphrase-fuse: the variants, plus the question first when
//!    `include_original`, a variant equal to it under `transform::query_key` dropped).
//!    Without one, the query is the question.
//! 2. **Retrieve**: every retriever returns `retrieval.depth` hits for every query; the
//!    retrievers' lists of one query are fused with `retrieval.fusion` (one retriever:
//!    its list as is); the queries' lists are fused with RRF
//!    (`query_transform.rank_constant`, [`transform::fuse_variants`]); the top
//!    `retrieval.depth` are the trace's `retrieved`.
//! 3. **Re-rank** (optional): the top `rerank.depth` of those, re-scored with the
//!    re-ranker against the question (or, with a rewrite, the rewritten query, as
//!    report 004 does), cut to `reader.passages`: the trace's `reranked`.
//! 4. **Read**: the top `reader.passages` passages (rank 1 first) and the question go
//!    to the reader; with no retriever the reader gets no passage (closed-book).
//! 5. **Score**: the prediction is the answer text, or `""` when the reader abstained
//!    (the SQuAD convention for "no answer"); EM and F1 are SQuAD's on that
//!    prediction; context precision ([`crate::evaluate::context`]) is computed on the
//!    passages the reader kept.
//!
//! Steps 1–3 are cached ([`cache`]) when `cache.retrieval` is on, so a second run with
//! another reader does not retrieve again (the transform still runs: its output is part
//! of the key).

pub mod cache;
pub mod config;
#[cfg(feature = "llm")]
pub mod llm_transform;
mod method_run;
pub mod prompt;
#[cfg(feature = "llm")]
pub mod reader;
pub mod run_key;
#[cfg(feature = "llm")]
pub mod study;
pub mod system_spec;
#[cfg(feature = "dense")]
pub mod systems;
pub mod trace;
#[cfg(feature = "dense")]
pub mod trained;
pub mod transform;

pub use config::PipelineConfig;
pub use prompt::PromptTemplate;
pub use run_key::RunKey;
pub use system_spec::SystemSpec;
pub use trace::{PipelineRun, StageTimes, Summary, TraceRecord};
pub use transform::{FnTransform, QueryTransform, Transformed};

use crate::chunk::{Chunker, ParagraphParams, SlidingWindowParams, WholeDocument};
use crate::evaluate::{context, qa};
use crate::load::question_set::{self, QuestionSet};
use crate::read::{Context, Reader};
use crate::rerank::{PassageLookup, Reranker};
use crate::retrieve::fusion::Fusion;
use crate::retrieve::Retriever;
use crate::{Document, Error, Hit, Passage, QaExample, Result};
use config::{ChunkerKind, CorpusKind, QuestionsKind, TransformKind};
use sha2::{Digest, Sha256};
#[cfg(feature = "dense")]
use trained::Trained;

/// Without the feature `dense` nothing is trained, so nothing is resolved.
#[cfg(not(feature = "dense"))]
#[derive(Default)]
struct Trained {
    _nothing: (),
}
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

/// A built pipeline: passages indexed, retrievers and re-ranker ready, questions loaded,
/// prompt parsed. Run it with any [`Reader`].
pub struct Pipeline {
    config: PipelineConfig,
    passages: Vec<Passage>,
    position: HashMap<String, usize>,
    lookup: PassageLookup,
    retrievers: Vec<std::sync::Arc<dyn Retriever>>,
    fusion: Option<Fusion>,
    reranker: Option<Box<dyn Reranker>>,
    questions: QuestionSet,
    template: PromptTemplate,
    /// The answer-matching rule: the config's, else the question set's.
    rule: crate::evaluate::answer_match::AnswerMatch,
    /// The `[method]`'s own prompt, read once (`None`: no method, or its built-in prompt).
    method_prompt: Option<String>,
    /// The trained extractive reader resolved before building (`trained:<recipe>`).
    #[cfg(feature = "dense")]
    trained_reader: Option<trained::ReaderCheckpoint>,
}

/// A pipeline's first stages, its re-ranker, its passages and their id → text lookup.
type Stages = (
    Vec<std::sync::Arc<dyn Retriever>>,
    Option<Box<dyn Reranker>>,
    Vec<Passage>,
    PassageLookup,
);

/// A JSONL corpus line: `{"id", "title"?, "text"}`, or FlashRAG's `{"id", "contents"}`.
#[derive(serde::Deserialize)]
struct DocLine {
    id: serde_json::Value,
    #[serde(default)]
    title: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    contents: Option<String>,
}

/// FlashRAG's `contents`, `{title}\n{text}`, as (title, text): the title is its first
/// line with one pair of surrounding double quotes removed (FlashRAG's Wikipedia corpus
/// writes `"Aaron"`); without a newline the whole field is the text.
pub fn split_contents(contents: &str) -> (String, String) {
    match contents.split_once('\n') {
        None => (String::new(), contents.to_string()),
        Some((first, rest)) => {
            let t = first.trim();
            let t = t
                .strip_prefix('"')
                .and_then(|t| t.strip_suffix('"'))
                .unwrap_or(t);
            (t.to_string(), rest.to_string())
        }
    }
}

/// Load a corpus of JSON lines. Each line is `{"id", "title"?, "text"}` or, in FlashRAG's
/// layout, `{"id", "contents"}` with `contents` = `{title}\n{text}` ([`split_contents`]);
/// a line with both `text` and `contents` uses `text` and `title`. Other fields are
/// ignored. Errors name the file and line: a line that does not parse, neither `text` nor
/// `contents`, an empty id or text, an id seen before.
pub fn load_jsonl_corpus(path: &Path) -> Result<Vec<Document>> {
    let lines: Vec<DocLine> = crate::load::read_jsonl(path)?;
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(lines.len());
    for (i, d) in lines.into_iter().enumerate() {
        let id = match d.id {
            serde_json::Value::String(s) => s,
            serde_json::Value::Number(n) => n.to_string(),
            other => {
                return Err(Error::record(
                    path,
                    "record",
                    i + 1,
                    format!("`id` must be a string or number, got {other}"),
                ))
            }
        };
        let (title, text) = match (d.text, d.contents) {
            (Some(text), _) => (d.title, text),
            (None, Some(contents)) => split_contents(&contents),
            (None, None) => {
                return Err(Error::record(
                    path,
                    "record",
                    i + 1,
                    format!("document `{id}` has neither `text` nor FlashRAG's `contents`"),
                ))
            }
        };
        if id.trim().is_empty() || text.trim().is_empty() {
            return Err(Error::record(
                path,
                "record",
                i + 1,
                format!("document `{id}`: empty `id` or `text`"),
            ));
        }
        if !seen.insert(id.clone()) {
            return Err(Error::record(
                path,
                "record",
                i + 1,
                format!("duplicate document id `{id}`"),
            ));
        }
        out.push(Document::new(id, title, text));
    }
    if out.is_empty() {
        return Err(Error::bad_input(path, "no documents"));
    }
    Ok(out)
}

fn asset_file(asset: &str, file: &str) -> Result<std::path::PathBuf> {
    crate::assets::Assets::load()?.resolve(asset, file)
}

/// A config's first stage alone: its passages and the retriever that ranks them.
pub struct FirstStage {
    /// The corpus, chunked as the config says.
    pub passages: Vec<Passage>,
    /// The config's retriever or, with several, their fusion.
    pub retriever: std::sync::Arc<dyn Retriever>,
}

/// The first stage of `config` as [`Pipeline::build`] builds it, without questions, prompt
/// or reader: the corpus loaded and chunked, each `[[retrieval.retrievers]]` built, and with
/// several, their lists fused with `retrieval.fusion` (`rank_constant`, `weights`) over
/// `retrieval.depth` candidates each ([`crate::retrieve::fusion::Fused`]). For a `k` up to
/// `retrieval.depth`, the retriever's top `k` of a query is the top `k` of what the pipeline
/// retrieves for it (`retrieved` in its traces). What `retrieve-server` serves.
///
/// Errors: those of [`PipelineConfig::validate`] and of loading, chunking and building; no
/// retriever, or a `[rerank]` section ([`Error::InvalidParam`] naming it: the first stage
/// has no re-ranker); `kind = "oracle"` (it needs the questions).
pub fn first_stage(config: &PipelineConfig) -> Result<FirstStage> {
    config.validate()?;
    if config.retrieval.retrievers.is_empty() {
        return Err(Error::param(
            "retrieval.retrievers",
            "no retriever to serve: add a [[retrieval.retrievers]] entry",
        ));
    }
    if config.rerank.is_some() {
        return Err(Error::param(
            "rerank",
            "the first stage is served without a re-ranker: remove the [rerank] section",
        ));
    }
    let docs = Pipeline::load_corpus(config)?;
    let passages = Pipeline::chunk(config, &docs)?;
    let env = crate::env::Env::project()?;
    let nothing_trained = crate::build::TrainedModels::default();
    #[cfg(feature = "dense")]
    let encoders = crate::build::EncoderPool::default();
    #[cfg(feature = "dense")]
    let ctx = crate::build::BuildCtx::new(&env, &passages, &nothing_trained, &encoders);
    #[cfg(not(feature = "dense"))]
    let ctx = crate::build::BuildCtx::new(&env, &passages, &nothing_trained);
    let ctx = ctx.with_base_dir(&config.base_dir);
    let mut built = config
        .retrieval
        .retrievers
        .iter()
        .map(|r| r.build(&ctx))
        .collect::<Result<Vec<_>>>()?;
    let retriever: std::sync::Arc<dyn Retriever> = if built.len() == 1 {
        built.remove(0)
    } else {
        let r = &config.retrieval;
        let weights = (!r.weights.is_empty()).then(|| r.weights.clone());
        let fusion = Fusion::new(r.fusion.method(r.rank_constant), weights)?;
        let inner = built
            .into_iter()
            .map(|b| Box::new(b) as Box<dyn Retriever>)
            .collect();
        std::sync::Arc::new(crate::retrieve::fusion::Fused::new(inner, fusion, r.depth)?)
    };
    Ok(FirstStage {
        passages,
        retriever,
    })
}

/// Each passage's position in `passages`, by id.
///
/// Errors: a passage id given twice ([`Error::InvalidParam`] naming `corpus` and the id).
pub fn passage_positions(passages: &[Passage]) -> Result<HashMap<String, usize>> {
    let mut position = HashMap::with_capacity(passages.len());
    for (i, p) in passages.iter().enumerate() {
        if position.insert(p.id.clone(), i).is_some() {
            return Err(Error::param(
                "corpus",
                format!("passage id `{}` appears twice", p.id),
            ));
        }
    }
    Ok(position)
}

impl Pipeline {
    /// Validate `config` and build everything a run needs. A model the workbench trains (a
    /// `trained:<recipe>` re-ranker or extractive reader, a ColBERT projection) must be
    /// resolved first ([`trained::for_config`], then [`Pipeline::build_resolved`]); here it
    /// is an error.
    pub fn build(config: PipelineConfig) -> Result<Self> {
        Self::build_with(config, &Trained::default())
    }

    /// [`Pipeline::build`] with the trained models `trained` resolved: they are loaded,
    /// never trained.
    #[cfg(feature = "dense")]
    pub fn build_resolved(config: PipelineConfig, trained: &Trained) -> Result<Self> {
        Self::build_with(config, trained)
    }

    fn build_with(config: PipelineConfig, trained: &Trained) -> Result<Self> {
        // Building loads; a path from here into training fails (`train::no_training`).
        #[cfg(feature = "dense")]
        let _loads_only = crate::train::no_training();
        config.validate()?;
        // A trained model that was not resolved fails before anything is loaded.
        #[cfg(feature = "dense")]
        if let Some(r) = &config.rerank {
            trained.check(r)?;
        }
        #[cfg(feature = "dense")]
        if let crate::read::ReaderSpec::Extractive(e) = &config.reader.spec {
            if e.model.starts_with(crate::assets::TRAINED_PREFIX)
                && trained.reader_for(&e.model).is_none()
            {
                return Err(Error::param(
                    "reader.model",
                    format!(
                        "`{}` is a reader the workbench trains: resolve it first with \
                         `pipeline::trained::for_config` (at a scale) and build with \
                         `Pipeline::build_resolved` (the `rag` binary and the studies do)",
                        e.model
                    ),
                ));
            }
        }
        let template = PromptTemplate::load(
            &config.resolve(&config.reader.prompt),
            &config.reader.passage_format,
            &config.reader.passage_separator,
        )?;
        let has_retriever = !config.retrieval.retrievers.is_empty();
        if template.uses_passages() && !has_retriever {
            return Err(Error::param(
                "reader.prompt",
                format!(
                    "{} shows {{passages}} but there is no retriever (closed-book needs a prompt without passages)",
                    template.origin().display()
                ),
            ));
        }
        if !template.uses_passages() && has_retriever {
            return Err(Error::param(
                "reader.prompt",
                format!(
                    "{} has no {{passages}} placeholder, so the retrieved passages would never reach the reader",
                    template.origin().display()
                ),
            ));
        }
        let method_prompt = match config.method.as_ref() {
            Some(m) => match m.prompt_file() {
                Some(f) => {
                    let path = config.resolve(f);
                    let text = crate::load::read_to_string(&path)?;
                    m.check_prompt(&text, &path.display().to_string())?;
                    Some(text)
                }
                None => None,
            },
            None => None,
        };
        let passages = if has_retriever {
            let docs = Self::load_corpus(&config)?;
            Self::chunk(&config, &docs)?
        } else {
            Vec::new()
        };
        let position = passage_positions(&passages)?;
        let questions = Self::load_questions(&config)?;
        // The data set's own rule unless the config names one; the resolved config (and so
        // `config.toml` beside every result) records the rule used.
        let mut config = config;
        let rule = *config
            .evaluation
            .answer_match
            .get_or_insert(questions.answer_match);
        config.resolve_judge_cut()?;
        let (retrievers, reranker, passages, lookup) =
            Self::build_stages(&config, passages, &questions, trained)?;
        let fusion = if retrievers.len() > 1 {
            let weights =
                (!config.retrieval.weights.is_empty()).then(|| config.retrieval.weights.clone());
            let method = config
                .retrieval
                .fusion
                .method(config.retrieval.rank_constant);
            Some(Fusion::new(method, weights)?)
        } else {
            None
        };
        #[cfg(feature = "dense")]
        let trained_reader = match &config.reader.spec {
            crate::read::ReaderSpec::Extractive(e) => trained.reader_for(&e.model).cloned(),
            _ => None,
        };
        Ok(Pipeline {
            config,
            passages,
            position,
            lookup,
            retrievers,
            fusion,
            reranker,
            questions,
            template,
            rule,
            method_prompt,
            #[cfg(feature = "dense")]
            trained_reader,
        })
    }

    /// Load a config file and build.
    pub fn from_file(path: &Path) -> Result<Self> {
        Self::build(PipelineConfig::from_file(path)?)
    }

    /// The configuration.
    pub fn config(&self) -> &PipelineConfig {
        &self.config
    }

    /// The trained extractive reader resolved before building, if the config reads with
    /// one (its checkpoint folder and windows).
    #[cfg(feature = "dense")]
    pub fn trained_reader(&self) -> Option<&trained::ReaderCheckpoint> {
        self.trained_reader.as_ref()
    }

    /// The passages (empty for closed-book).
    pub fn passages(&self) -> &[Passage] {
        &self.passages
    }

    /// The questions (after skipping and sampling).
    pub fn questions(&self) -> &QuestionSet {
        &self.questions
    }

    /// The questions `config` runs (after skipping, the `test` split and sampling), as
    /// [`Pipeline::build`] loads them, without building anything else.
    ///
    /// Errors: those of loading the question set; no question left.
    pub fn load_questions_of(config: &PipelineConfig) -> Result<QuestionSet> {
        Self::load_questions(config)
    }

    /// The reader's prompt template (for building a reader that uses it).
    pub fn template(&self) -> &PromptTemplate {
        &self.template
    }

    /// A name for the first stage + re-ranker, for tables.
    pub fn retrieval_name(&self) -> String {
        if self.retrievers.is_empty() {
            return "closed-book".into();
        }
        let names: Vec<String> = self.retrievers.iter().map(|r| r.name()).collect();
        let mut s = match &self.fusion {
            Some(f) => format!("{}({})", f.tag(), names.join(",")),
            None => names.join(","),
        };
        if let Some(r) = &self.reranker {
            s += &format!(
                "__rerank-d{}-{}",
                self.config.rerank.as_ref().map_or(0, |c| c.depth()),
                r.name()
            );
        }
        s
    }

    pub(crate) fn load_corpus(c: &PipelineConfig) -> Result<Vec<Document>> {
        let cc = &c.corpus;
        let path = |default_asset: &str, file: &str| -> Result<std::path::PathBuf> {
            if !cc.path.is_empty() {
                Ok(c.resolve(&cc.path))
            } else {
                let asset = if cc.asset.is_empty() {
                    default_asset
                } else {
                    cc.asset.as_str()
                };
                asset_file(asset, file)
            }
        };
        match cc.kind {
            CorpusKind::Jsonl => load_jsonl_corpus(&path("", "")?),
            CorpusKind::TextDir => crate::load::text_dir::load(&path("", "")?),
            CorpusKind::RagMini => {
                let infos = path("rag-mini-wikipedia", "infos.csv")?;
                let questions = infos.with_file_name("questions.csv");
                Ok(crate::load::rag_mini::load_csv(&infos, &questions)?.0)
            }
            CorpusKind::Squad => Ok(crate::load::squad::load(&path(
                "squad-v2-dev-half",
                "dev-v2.0.json",
            )?)?
            .contexts),
            CorpusKind::Wikipedia => {
                crate::load::wikipedia_corpus(&crate::assets::Assets::load()?, &cc.asset)
            }
        }
    }

    pub(crate) fn chunk(c: &PipelineConfig, docs: &[Document]) -> Result<Vec<Passage>> {
        let ch = &c.chunker;
        match ch.kind {
            ChunkerKind::Whole => WholeDocument.chunk_all(docs),
            ChunkerKind::Sliding => SlidingWindowParams::default()
                .window(ch.window)
                .overlap(ch.overlap)
                .check()?
                .chunk_all(docs),
            ChunkerKind::Paragraph => ParagraphParams::default()
                .min_words(ch.min_words)
                .max_words(ch.max_words)
                .lowercase(false)
                .check()?
                .chunk_all(docs),
        }
    }

    /// The first stages and the re-ranker, each built from its spec against one
    /// [`BuildCtx`](crate::build::BuildCtx), as the retrieval studies build theirs
    /// ([`systems::SystemBuilder`]); the passages and their lookup come back.
    fn build_stages(
        c: &PipelineConfig,
        passages: Vec<Passage>,
        questions: &QuestionSet,
        trained: &Trained,
    ) -> Result<Stages> {
        let lookup = PassageLookup::from_passages(&passages)?;
        if c.retrieval.retrievers.is_empty() {
            return Ok((Vec::new(), None, passages, lookup));
        }
        let env = crate::env::Env::project()?;
        #[cfg(feature = "dense")]
        let encoders = crate::build::EncoderPool::default();
        #[cfg(feature = "dense")]
        let ctx = crate::build::BuildCtx::new(&env, &passages, trained.models(), &encoders);
        #[cfg(not(feature = "dense"))]
        let (_, nothing_trained) = (trained, crate::build::TrainedModels::default());
        #[cfg(not(feature = "dense"))]
        let ctx = crate::build::BuildCtx::new(&env, &passages, &nothing_trained);
        let ctx = ctx
            .with_questions(&questions.questions)
            .with_base_dir(&c.base_dir);
        let retrievers = c
            .retrieval
            .retrievers
            .iter()
            .map(|r| r.build(&ctx))
            .collect::<Result<Vec<_>>>()?;
        let reranker = c.rerank.as_ref().map(|r| r.build(&ctx)).transpose()?;
        Ok((retrievers, reranker, passages, lookup))
    }

    fn load_questions(c: &PipelineConfig) -> Result<QuestionSet> {
        let q = &c.questions;
        let path = |default_asset: &str, file: &str| -> Result<std::path::PathBuf> {
            if !q.path.is_empty() {
                Ok(c.resolve(&q.path))
            } else {
                let asset = if q.asset.is_empty() {
                    default_asset
                } else {
                    q.asset.as_str()
                };
                asset_file(asset, file)
            }
        };
        let mut set = match q.kind {
            QuestionsKind::Jsonl => {
                let p = if q.path.is_empty() {
                    let assets = crate::assets::Assets::load()?;
                    let spec = assets.spec(&q.asset)?;
                    let file = spec.files.keys().next().cloned().ok_or_else(|| {
                        Error::param(
                            "questions.asset",
                            format!("asset `{}` lists no files", q.asset),
                        )
                    })?;
                    assets.resolve(&q.asset, &file)?
                } else {
                    c.resolve(&q.path)
                };
                question_set::load(&p, q.on_bad_record)?
            }
            QuestionsKind::RagMini => {
                let qp = path("rag-mini-wikipedia", "questions.csv")?;
                let infos = qp.with_file_name("infos.csv");
                let examples = crate::load::rag_mini::load_csv(&infos, &qp)?.1;
                question_set::from_examples(examples, q.on_bad_record, &qp)?
            }
            QuestionsKind::Squad => {
                let sp = path("squad-v2-dev-half", "dev-v2.0.json")?;
                let set = crate::load::squad::load(&sp)?;
                let examples: Vec<QaExample> = set
                    .examples
                    .into_iter()
                    .filter(|e| !(q.answerable_only && e.is_unanswerable()))
                    .collect();
                question_set::from_examples(examples, q.on_bad_record, &sp)?
            }
        };
        if q.split == config::QuestionSplit::Test {
            let before = set.questions.len();
            set.questions = Self::test_side(c, std::mem::take(&mut set.questions))?;
            if set.questions.is_empty() {
                return Err(Error::param(
                    "questions.split",
                    format!("\"test\" leaves none of the {before} questions"),
                ));
            }
        }
        if q.limit > 0 && q.limit < set.questions.len() {
            use rand::seq::index::sample;
            use rand::SeedableRng;
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(q.seed);
            let mut keep = sample(&mut rng, set.questions.len(), q.limit).into_vec();
            keep.sort_unstable();
            set.questions = keep.into_iter().map(|i| set.questions[i].clone()).collect();
        }
        if set.questions.is_empty() {
            return Err(Error::param("questions", "no question to run"));
        }
        Ok(set)
    }

    /// The questions of `questions` no trained model of the workbench saw
    /// ([`config::QuestionSplit::Test`]): RAG Mini ids on the test side of the training
    /// recipe's seeded hash split (the `trained:` re-ranker's recipe, else the default
    /// reader recipe: both use the same split), SQuAD questions of the held-out articles.
    #[cfg(feature = "dense")]
    fn test_side(c: &PipelineConfig, questions: Vec<QaExample>) -> Result<Vec<QaExample>> {
        use crate::train::{cross_recipe::CrossRecipe, qa_data, reader::ReaderRecipe};
        Ok(match c.questions.kind {
            QuestionsKind::RagMini => {
                let trained = c.rerank.as_ref().and_then(|r| match r.trained() {
                    Some(crate::rerank::spec::TrainedModel::CrossEncoder { recipe, .. }) => {
                        Some(recipe)
                    }
                    _ => None,
                });
                let sup = match trained {
                    Some(name) => CrossRecipe::named(name)?.supervision,
                    None => ReaderRecipe::default_minilm().supervision,
                };
                questions
                    .into_iter()
                    .filter(|q| {
                        qa_data::hash_test_side(&q.id, sup.split_seed, sup.rag_test_percent)
                    })
                    .collect()
            }
            QuestionsKind::Squad => questions
                .into_iter()
                .filter(|q| {
                    q.title
                        .as_deref()
                        .is_some_and(|t| qa_data::HELD_OUT_ARTICLES.contains(&t))
                })
                .collect(),
            QuestionsKind::Jsonl => {
                return Err(Error::param(
                    "questions.split",
                    "\"test\" is not defined for a JSONL question set",
                ))
            }
        })
    }

    #[cfg(not(feature = "dense"))]
    fn test_side(_: &PipelineConfig, _: Vec<QaExample>) -> Result<Vec<QaExample>> {
        Err(Error::param(
            "questions.split",
            "\"test\" needs the crate feature `dense` (the training recipes' splits)",
        ))
    }

    /// Retrieval for one list of queries of the question `id`: fused first stage, optional
    /// re-rank. Each retriever is asked with the question's id beside the query
    /// ([`Retriever::retrieve_for`]): the oracle answers by the id.
    fn retrieve(
        &self,
        id: &str,
        question: &str,
        queries: &[String],
        rewrite: bool,
    ) -> Result<cache::Retrieved> {
        let depth = self.config.retrieval.depth;
        let t0 = Instant::now();
        let mut per_query = Vec::with_capacity(queries.len());
        for q in queries {
            let lists = self
                .retrievers
                .iter()
                .map(|r| r.retrieve_for(id, q, depth))
                .collect::<Result<Vec<_>>>()?;
            let fused = match &self.fusion {
                Some(f) => f.fuse(&lists)?,
                None => lists.into_iter().next().unwrap_or_default(),
            };
            per_query.push(fused);
        }
        let rc = self
            .config
            .query_transform
            .as_ref()
            .map_or(crate::retrieve::fusion::RRF_K, |t| t.rank_constant);
        let mut retrieved = transform::fuse_variants(&per_query, rc)?;
        retrieved.truncate(depth);
        let retrieve_secs = t0.elapsed().as_secs_f64();
        let (reranked, rerank_secs) = match (&self.reranker, &self.config.rerank) {
            (Some(rr), Some(rc)) => {
                let t1 = Instant::now();
                let query = if rewrite {
                    queries[0].as_str()
                } else {
                    question
                };
                let cands: Vec<Hit> = retrieved.iter().take(rc.depth()).cloned().collect();
                let out = rr.rerank(query, &cands, &self.lookup, self.config.reader.passages)?;
                (Some(out), t1.elapsed().as_secs_f64())
            }
            _ => (None, 0.0),
        };
        Ok(cache::Retrieved {
            retrieved,
            reranked,
            retrieve_secs,
            rerank_secs,
        })
    }

    /// Run every question through the pipeline with `reader` (and `transform` when the
    /// config has a `[query_transform]`). Nothing is written; see [`PipelineRun::write`].
    ///
    /// Errors: a transform given without a `[query_transform]` section, or the reverse
    /// ([`Error::InvalidParam`] naming `query_transform`); any stage's error, wrapped
    /// with the question's 1-based number ([`Error::AtItem`]).
    pub fn run(
        &self,
        reader: &mut dyn Reader,
        transform: Option<&mut dyn QueryTransform>,
    ) -> Result<PipelineRun> {
        self.run_inner(reader, transform, None)
    }

    /// [`Pipeline::run`], appending each question's trace to `journal` as soon as it is
    /// scored; the questions the journal already holds (a killed run of the same key) are
    /// taken as done: their transform and reading are not repeated. The result equals an
    /// uninterrupted run's except for times and the retrieval-cache flag. The journal is
    /// left in place (remove it once the results are written).
    ///
    /// Errors: those of [`Pipeline::run`]; a journal whose questions are not this run's
    /// first questions in order ([`Error::BadInput`] naming it).
    pub fn run_journaled(
        &self,
        reader: &mut dyn Reader,
        transform: Option<&mut dyn QueryTransform>,
        journal: &mut trace::Journal,
    ) -> Result<PipelineRun> {
        self.run_inner(reader, transform, Some(journal))
    }

    /// The questions a journal already holds, checked to be this run's first questions.
    fn journal_done(&self, journal: Option<&trace::Journal>) -> Result<Vec<TraceRecord>> {
        let qs = &self.questions.questions;
        let Some(j) = journal else {
            return Ok(Vec::new());
        };
        let done = j.done().to_vec();
        let fits = done.len() <= qs.len() && done.iter().zip(qs).all(|(r, q)| r.id == q.id);
        if !fits {
            return Err(Error::bad_input(
                j.path(),
                format!(
                    "the journal's {} questions are not this run's first questions; \
                     delete it to start over",
                    done.len()
                ),
            ));
        }
        Ok(done)
    }

    fn run_inner(
        &self,
        reader: &mut dyn Reader,
        mut transform: Option<&mut dyn QueryTransform>,
        mut journal: Option<&mut trace::Journal>,
    ) -> Result<PipelineRun> {
        if let Some(m) = &self.config.method {
            return Err(Error::param(
                "method",
                format!(
                    "the config names the `{}` method: run it with `Pipeline::run_method` \
                     (the `rag` binary and `pipeline::study::run_config` do)",
                    m.kind()
                ),
            ));
        }
        let tcfg = self.config.query_transform.clone();
        match (&tcfg, transform.is_some()) {
            (Some(t), false) => {
                return Err(Error::param(
                    "query_transform",
                    format!(
                        "the config asks for `{:?}` but no transform was given to run",
                        t.kind
                    ),
                ))
            }
            (None, true) => {
                return Err(Error::param(
                    "query_transform",
                    "a transform was given but the config has no [query_transform] section",
                ))
            }
            _ => {}
        }
        let at = |i: usize, e: Error| Error::AtItem {
            what: "question",
            number: i + 1,
            source: Box::new(e),
        };
        let qs = &self.questions.questions;
        let done = self.journal_done(journal.as_deref())?;
        // 1. Transform (questions done in a journaled run: as recorded).
        let mut queries: Vec<Vec<String>> = Vec::with_capacity(qs.len());
        let mut t_usage = Vec::with_capacity(qs.len());
        let mut t_meta: Vec<(usize, Vec<String>, Option<String>)> = Vec::with_capacity(qs.len());
        let mut t_secs = Vec::with_capacity(qs.len());
        for (i, q) in qs.iter().enumerate() {
            if let Some(r) = done.get(i) {
                queries.push(if tcfg.is_some() {
                    r.queries.clone()
                } else {
                    vec![q.question.clone()]
                });
                t_usage.push(crate::read::Usage {
                    prompt_tokens: r.transform_tokens.0,
                    generated_tokens: r.transform_tokens.1,
                    ..Default::default()
                });
                t_meta.push((
                    r.transform_requested,
                    r.transform_raw.clone(),
                    r.transform_note.clone(),
                ));
                t_secs.push(r.times.transform);
                continue;
            }
            let t0 = Instant::now();
            match (&mut transform, &tcfg) {
                (Some(t), Some(cfg)) => {
                    let out = t.transform(&q.question).map_err(|e| at(i, e))?;
                    transform::check_queries(&t.name(), &q.question, &out.queries)
                        .map_err(|e| at(i, e))?;
                    let mut v = out.queries;
                    if cfg.kind == TransformKind::Rewrite {
                        v.truncate(1);
                    } else if cfg.include_original {
                        v = transform::with_original(&q.question, v);
                    }
                    queries.push(v);
                    t_usage.push(out.usage);
                    t_meta.push((out.requested, out.raw, out.note));
                }
                _ => {
                    queries.push(vec![q.question.clone()]);
                    t_usage.push(Default::default());
                    t_meta.push((0, Vec::new(), None));
                }
            }
            t_secs.push(t0.elapsed().as_secs_f64());
        }
        // 2–3. Retrieve and re-rank (cached).
        let rewrite = matches!(&tcfg, Some(t) if t.kind == TransformKind::Rewrite);
        let (retrieved, cache_status) = if self.retrievers.is_empty() {
            (
                vec![cache::Retrieved::default(); qs.len()],
                cache::Status::Off,
            )
        } else {
            let key = retrieval_cache_key(self, &queries)?;
            let dir = self.config.resolve(&self.config.cache.dir);
            let ids: Vec<&str> = qs.iter().map(|q| q.id.as_str()).collect();
            let cached = if self.config.cache.retrieval {
                cache::read(&dir, &key, &ids)
            } else {
                Err("cache off".to_string())
            };
            match cached {
                Ok(Some(r)) => (r, cache::Status::Hit),
                other => {
                    let mut out = Vec::with_capacity(qs.len());
                    let mut bar = crate::progress::bar(qs.len(), "retrieve");
                    for (i, q) in qs.iter().enumerate() {
                        out.push(
                            self.retrieve(&q.id, &q.question, &queries[i], rewrite)
                                .map_err(|e| at(i, e))?,
                        );
                        crate::progress::tick(&mut bar, 1);
                    }
                    let status = if !self.config.cache.retrieval {
                        cache::Status::Off
                    } else {
                        cache::write(&dir, &key, &ids, &out)?;
                        match other {
                            Err(reason) => cache::Status::Rebuilt(reason),
                            _ => cache::Status::Miss,
                        }
                    };
                    (out, status)
                }
            }
        };
        // 4–5. Read and score, in batches of the reader's concurrency.
        let rule = self.rule;
        let n_pass = self.config.reader.passages;
        let contexts: Vec<Vec<Context>> =
            retrieved.iter().map(|r| self.contexts(r, n_pass)).collect();
        let mut records = done;
        let mut bar = crate::progress::bar(qs.len(), &format!("read ({})", reader.name()));
        crate::progress::tick(&mut bar, records.len());
        let batch = reader.concurrency().max(1);
        let mut start = records.len();
        while start < qs.len() {
            let end = (start + batch).min(qs.len());
            let items: Vec<(&str, &[Context])> = (start..end)
                .map(|i| (qs[i].question.as_str(), contexts[i].as_slice()))
                .collect();
            let t0 = Instant::now();
            let answers = reader.read_many(&items);
            let read_secs = t0.elapsed().as_secs_f64() / items.len() as f64;
            if answers.len() != items.len() {
                return Err(at(
                    start,
                    Error::param(
                        "reader",
                        format!(
                            "`{}` returned {} answers for {} questions",
                            reader.name(),
                            answers.len(),
                            items.len()
                        ),
                    ),
                ));
            }
            for (i, answer) in (start..end).zip(answers) {
                let answer = answer.map_err(|e| at(i, e))?;
                let record = self
                    .score(
                        Some(&*reader),
                        i,
                        &contexts[i],
                        &retrieved[i],
                        answer,
                        ReadMeta {
                            queries: if tcfg.is_some() {
                                queries[i].clone()
                            } else {
                                Vec::new()
                            },
                            transform: t_meta[i].clone(),
                            transform_usage: t_usage[i].clone(),
                            transform_secs: t_secs[i],
                            read_secs,
                            cached: cache_status == cache::Status::Hit,
                        },
                    )
                    .map_err(|e| at(i, e))?;
                if let Some(j) = journal.as_mut() {
                    j.append(&record)?;
                }
                records.push(record);
                crate::progress::tick(&mut bar, 1);
            }
            start = end;
        }
        Ok(PipelineRun {
            name: self.config.name.clone(),
            reader: reader.name().to_string(),
            retrieval: self.retrieval_name(),
            transform: transform.as_ref().map(|t| t.name()),
            answer_match: rule,
            config: self.config.clone(),
            skipped: self.questions.skipped.clone(),
            dropped_golds: self.questions.dropped_golds.clone(),
            retrieval_cache: cache_status,
            records,
        })
    }
}

/// What the read step of one question needs besides the answer.
struct ReadMeta {
    queries: Vec<String>,
    transform: (usize, Vec<String>, Option<String>),
    transform_usage: crate::read::Usage,
    transform_secs: f64,
    read_secs: f64,
    cached: bool,
}

impl Pipeline {
    /// Whether `answer` is an abstention, and its text parsed by the reader's `parse`
    /// rules. Abstention is decided on the parsed answer (`Final answer: Not found.` is an
    /// abstention); the extractive reader abstains on its null score.
    fn abstention(&self, answer: &crate::read::Answer) -> (bool, String) {
        let parser = &self.config.reader.parse;
        let parsed = parser.parse(&answer.text);
        let rule_of = &self.config.reader.abstention;
        let abstained = if self.config.reader.spec.abstains_itself() {
            answer.abstained
        } else {
            rule_of.is_abstention(&parsed)
                || rule_of.is_abstention(&parser.before_lead_ins(&answer.text))
        };
        (abstained, parsed)
    }

    /// Score question `i`'s answer into its trace record.
    fn score(
        &self,
        reader: Option<&dyn Reader>,
        i: usize,
        contexts: &[Context],
        r: &cache::Retrieved,
        answer: crate::read::Answer,
        meta: ReadMeta,
    ) -> Result<TraceRecord> {
        let q = &self.questions.questions[i];
        let rule = self.rule;
        let kept: Vec<Context> = contexts
            .iter()
            .filter(|c| answer.passage_ids.contains(&c.id))
            .cloned()
            .collect();
        let prompt = match reader {
            Some(r) => r.prompt(&q.question, &kept)?,
            None => None,
        };
        let (abstained, parsed) = self.abstention(&answer);
        let prediction = if abstained { String::new() } else { parsed };
        // Yes / no golds are not spans of a passage: context precision looks for the other
        // golds only, and a question with none gets no value and its misses are attributed
        // to neither retrieval nor reading.
        let span_golds = qa::span_golds(&q.answers);
        let attributable = !span_golds.is_empty();
        let cp = if attributable {
            let kept_texts: Vec<&str> = kept.iter().map(|c| c.text.as_str()).collect();
            context::context_precision(&kept_texts, &span_golds, rule)?
        } else {
            None
        };
        let answer_found = rule.has_answer(&prediction, &q.answers)?;
        let em = qa::exact_match(&prediction, &q.answers);
        let outcome = trace::Outcome::of(
            abstained,
            em,
            answer_found,
            attributable,
            cp.as_ref().map(|c| c.precision),
        );
        let group = self
            .questions
            .groups
            .get(&q.id)
            .cloned()
            .unwrap_or_else(|| trace::question_group(&q.question).to_string());
        Ok(TraceRecord {
            id: q.id.clone(),
            question: q.question.clone(),
            gold_answers: q.answers.clone(),
            group,
            queries: meta.queries,
            transform_requested: meta.transform.0,
            transform_raw: meta.transform.1,
            transform_note: meta.transform.2,
            retrieved: r.retrieved.clone(),
            reranked: r.reranked.clone(),
            passage_ids: answer.passage_ids.clone(),
            dropped: answer.dropped.clone(),
            prompt,
            answer: answer.text.clone(),
            abstained,
            prediction: prediction.clone(),
            em,
            f1: qa::f1(&prediction, &q.answers),
            recall: qa::token_recall(&prediction, &q.answers),
            answer_found,
            judge: None,
            context_precision: cp.as_ref().map(|c| c.precision),
            outcome,
            context_average_precision: cp.as_ref().map(|c| c.average_precision),
            transform_tokens: (
                meta.transform_usage.prompt_tokens,
                meta.transform_usage.generated_tokens,
            ),
            prompt_tokens: answer.usage.prompt_tokens,
            generated_tokens: answer.usage.generated_tokens,
            times: StageTimes {
                transform: meta.transform_secs,
                retrieve: r.retrieve_secs,
                rerank: r.rerank_secs,
                read: meta.read_secs,
                prefill: answer.usage.prefill_secs,
                decode: answer.usage.decode_secs,
            },
            retrieval_cached: meta.cached,
            steps: Vec::new(),
        })
    }
}

/// The cache key of a pipeline's retrieval for these queries (lowercase hex sha256).
fn retrieval_cache_key(p: &Pipeline, queries: &[Vec<String>]) -> Result<String> {
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(b"workbench-retrieval-v1");
    field(&(p.passages.len() as u64).to_le_bytes());
    for ps in &p.passages {
        field(ps.id.as_bytes());
        field(ps.text.as_bytes());
    }
    for r in &p.retrievers {
        field(r.name().as_bytes());
    }
    // The oracle looks questions up by id: its entries are keyed apart from those it
    // wrote when it looked them up by text.
    if p.config
        .retrieval
        .retrievers
        .iter()
        .any(|r| matches!(r, config::RetrieverSpec::Oracle(_)))
    {
        field(b"oracle-by-question-id");
    }
    field(
        p.fusion
            .as_ref()
            .map_or(String::new(), |f| f.tag())
            .as_bytes(),
    );
    field(&(p.config.retrieval.depth as u64).to_le_bytes());
    match (&p.reranker, &p.config.rerank) {
        (Some(r), Some(c)) => {
            field(r.name().as_bytes());
            field(&(c.depth() as u64).to_le_bytes());
        }
        _ => field(b"no-rerank"),
    }
    field(&(p.config.reader.passages as u64).to_le_bytes());
    field(serde_json::to_string(&p.config.query_transform)?.as_bytes());
    for (q, qs) in p.questions.questions.iter().zip(queries) {
        field(q.id.as_bytes());
        field(&(qs.len() as u64).to_le_bytes());
        for s in qs {
            field(s.as_bytes());
        }
    }
    Ok(hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn corpus(lines: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(lines.as_bytes()).unwrap();
        f
    }

    #[test]
    fn flashrag_contents_split_into_title_and_text() {
        let f = corpus(
            "{\"id\": \"0\", \"contents\": \"\\\"Aaron\\\"\\nAaron is a prophet.\\nHe spoke.\"}\n\
             {\"id\": 1, \"contents\": \"No title here.\"}\n\
             {\"id\": \"2\", \"contents\": \"\\nText after an empty title.\"}\n\
             {\"id\": \"3\", \"title\": \"T\", \"text\": \"own text\", \"contents\": \"X\\nignored\"}\n",
        );
        let docs = load_jsonl_corpus(f.path()).unwrap();
        let got: Vec<(&str, &str, &str)> = docs
            .iter()
            .map(|d| (d.id.as_str(), d.title.as_str(), d.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("0", "Aaron", "Aaron is a prophet.\nHe spoke."),
                ("1", "", "No title here."),
                ("2", "", "Text after an empty title."),
                ("3", "T", "own text"),
            ]
        );
    }

    #[test]
    fn corpus_line_without_text_is_named() {
        let f = corpus("{\"id\": \"a\", \"text\": \"x\"}\n{\"id\": \"b\", \"body\": \"y\"}\n");
        let e = load_jsonl_corpus(f.path()).unwrap_err().to_string();
        assert!(
            e.contains(&f.path().display().to_string())
                && e.contains('2')
                && e.contains("`b`")
                && e.contains("contents"),
            "{e}"
        );
        let f = corpus("{\"id\": \"a\", \"contents\": \"Title only\\n  \"}\n");
        let e = load_jsonl_corpus(f.path()).unwrap_err().to_string();
        assert!(e.contains("empty `id` or `text`"), "{e}");
    }
}
