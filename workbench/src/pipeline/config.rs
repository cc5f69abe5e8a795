//! The pipeline's TOML schema. Every field has a default (given on each field); an
//! unknown field anywhere is an error naming it (serde `deny_unknown_fields`).
//!
//! ```toml
//! name = "tiny"                       # result name                          default "rag"
//!
//! [corpus]                            # needed when there is a retriever
//! kind = "jsonl"                      # jsonl | text-dir | rag-mini | squad | wikipedia   default "jsonl"
//!                                     # jsonl: {"id","title"?,"text"} or FlashRAG's {"id","contents"}
//! path = "tests/data/pipeline/corpus.jsonl"   # a file or folder …          default ""
//! asset = ""                          # … or an asset of data/assets.toml   default ""
//!
//! [chunker]
//! kind = "whole"                      # whole | sliding | paragraph          default "whole"
//! window = 300                        # sliding: words per window            default 300
//! overlap = 100                       # sliding: words shared                default 100
//! min_words = 21                      # paragraph: shortest kept             default 21
//! max_words = 199                     # paragraph: longest kept              default 199
//!
//! [retrieval]
//! depth = 20                          # candidates per retriever and query   default 20
//! fusion = "minmax"                   # rrf | minmax | zscore | combsum | combmnz   default "rrf"
//! rank_constant = 60.0                # RRF k                                default 60
//! weights = [0.5, 0.5]                # one per retriever, [] = 1 each       default []
//! [[retrieval.retrievers]]            # none = closed-book                   default []
//! kind = "bm25"                       # bm25 | tfidf | dense | oracle | random (controls)   default "bm25"
//!                                     # each kind takes only its own fields below
//! k1 = 0.9                            # bm25                                 default 0.9
//! b = 0.4                             # bm25                                 default 0.4
//! model = "all-minilm-l6-v2"          # dense: encoder asset or folder       default "all-minilm-l6-v2"
//! query_prefix = "query: "            # dense: before each query (E5 / BGE)  default ""
//! passage_prefix = "passage: "        # dense: before each passage           default ""
//! seed = 42                           # random: with each query's text       default 42
//!
//! [query_transform]                   # optional                             default: none
//! kind = "rewrite"                    # rewrite | paraphrase-fuse            default "rewrite"
//! prompt = "data/prompts/rewrite_004.txt"  #                                 default "data/prompts/rewrite_004.txt"
//! variants = 5                        # paraphrase-fuse: paraphrases         default 5
//! include_original = false            # paraphrase-fuse: also the question   default false
//! rank_constant = 60.0                # RRF k over the variants' runs        default 60
//! max_new_tokens = 64                 # generation budget per call           default 64
//! temperature = 0.0                   # 0 = greedy; paraphrase one-call-per-variant sampling   default 0
//! seed = 42                           # sampling seed (variant i: seed + i)  default 42
//!
//! [rerank]                            # optional                             default: none
//! kind = "bi-encoder"                 # bi-encoder | late-interaction | cross-encoder   default "bi-encoder"
//!                                     # each kind takes only its own fields below
//! model = "all-minilm-l6-v2"          # encoder asset; cross-encoder: a folder, or "trained:<recipe>"
//!                                     # (e.g. "trained:minilm-ce", trained by train_reranker)   default "all-minilm-l6-v2"
//! depth = 10                          # first-stage candidates re-ranked     default 10
//! head_dim = 0                        # late-interaction: trained ColBERT projection d (0 = raw)   default 0
//! head_groups = 800                   # late-interaction: its training groups  default 800
//!
//! [method]                            # optional: how retrieval and reading interleave   default: none (retrieve once, read once)
//! kind = "adaptive"                   # naive | closed-book | adaptive | iter-retgen | ircot | self-ask | flare | agentic
//!                                     # each kind takes only its own fields (workbench::method::*)
//! threshold = 0.5                     # adaptive: retrieve below this closed-book confidence; flare: token probability
//! fallback = true                     # adaptive: the closed-book answer when the read abstains
//! iterations = 3                      # iter-retgen: retrieve-and-read turns
//! max_steps = 4                       # ircot: sentences; self-ask: follow-ups; flare: sentences
//! max_searches = 4                    # agentic: searches per question
//! prompt = ""                         # the method's own prompt file (empty: built in)
//!
//! [reader]
//! kind = "generative"                 # generative | openai | extractive     default "generative"
//! model = "qwen2.5-coder-1.5b-instruct-gguf"  # generative: asset, path to a .gguf or hf:ORG/NAME[@REV]/FILE;
//!                                     # openai: the server's model name;
//!                                     # extractive: a QA folder or "trained:<recipe>"
//!                                     # default "qwen2.5-coder-1.5b-instruct-gguf" (extractive: "trained:minilm-all")
//! prompt = "data/prompts/rag_001.txt" # the template                         default that
//! passages = 5                        # passages given to the reader (k)     default 5
//! passage_format = "[CHUNK {i}]\n{text}"   # one passage in {passages}      default that
//! passage_separator = "\n\n"          #                                      default "\n\n"
//! max_new_tokens = 64                 #                                      default 64
//! temperature = 0.0                   # 0 = greedy                           default 0
//! top_p = 1.0                         #                                      default 1
//! seed = 42                           #                                      default 42
//! system = ""                         # system message, "" = none            default ""
//! stop = ["\n\n"]                     # stop strings                         default ["\n\n"]
//! base_url = "http://127.0.0.1:8080/v1"  # openai: API root                  default that
//! api_key_env = "OPENAI_API_KEY"      # openai: env variable with the key    default "" (none)
//! concurrency = 4                     # openai: requests in flight; generative: questions decoded together   default 1
//! timeout_secs = 120.0                # openai: per request                  default 120
//! retries = 3                         # openai: after 429/5xx/timeouts/drops  default 3
//! backoff_secs = 1.0                  # openai: first wait, doubling         default 1
//! read_mode = "concatenate"           # extractive: concatenate | best-per-passage   default "concatenate"
//! null_threshold = 0.0                # extractive: SQuAD 2.0 abstention     default absent (never)
//! [reader.abstention]                 # read::AbstentionRule                 default its defaults
//! phrases = ["not found"]
//! [reader.parse]                      # read::AnswerParser: the scored answer out of the raw output
//! first_line = true                   #                                      default false
//! final_marker = "final answer:"      # text after its last occurrence       default "" (off)
//! lead_ins = ["the answer is", "answer"]   # whole words, optional colon    default []
//! strip_quotes = true                 #                                      default false
//! strip_final_punctuation = true      #                                      default false
//!
//! [questions]
//! kind = "jsonl"                      # jsonl (NQ-open layout or FlashRAG's golden_answers) | rag-mini | squad
//! path = "tests/data/pipeline/questions.jsonl"  # or asset                  default ""
//! asset = ""                          #                                      default ""
//! on_bad_record = "error"             # error | skip (counted)               default "error"
//! limit = 0                           # 0 = all; else a seeded sample        default 0
//! seed = 42                           # of the sample                        default 42
//! answerable_only = true              # squad: drop unanswerable questions   default true
//! split = "all"                       # all | test: only questions no trained  default "all"
//!                                     # model saw (rag-mini: the training recipes' seeded
//!                                     # hash split; squad: the five held-out articles)
//!
//! [evaluation]
//! answer_match = "squad"              # dpr | dpr-regex | squad (Match, context precision)   default: the question set's (squad)
//! judge_model = "qwen2.5-coder-1.5b-instruct-gguf"  # LLM judge: asset, .gguf path or hf:…  default "" (none)
//! judge_prompt = "data/prompts/judge.txt"  # its template                    default that
//! judge_base_url = "http://127.0.0.1:8080/v1"  # judge on an OpenAI-compatible server
//!                                     # with logprobs (judge_model: its model name)   default "" (in process)
//! judge_api_key_env = "OPENAI_API_KEY"  # env variable with the judge server's key   default "" (none)
//! judge_cut = 0.5                     # P(Yes) above it is "correct", in [0, 1)   default: the judge's
//!                                     # calibrated cut for this prompt, else 0.5 (a run's resolved
//!                                     # config names the cut and its judge_cut_source)
//!
//! [cache]
//! retrieval = true                    # cache retrieval results              default true
//! dir = "data/cache/retrieval"        #                                      default that
//! ```
//!
//! Relative paths written in a config file are relative to the file's folder
//! ([`PipelineConfig::from_file`]); the defaults name the workbench's own files relative
//! to the project root (the folder holding `data/assets.toml`; `WORKBENCH_ROOT`
//! overrides). A model field holds an asset name, `trained:<recipe>`, one file of a hub
//! repository (`hf:ORG/NAME/FILE` or `hf:ORG/NAME@REVISION/FILE`: a GGUF reader or judge
//! only), or a path (a value with a `/`, starting with `.`, or ending in `.gguf`; write
//! `./name` for a folder beside the config). [`PipelineConfig::from_file_with`] sets fields
//! from the command line (`rag --set SECTION.KEY=VALUE`).

use crate::evaluate::answer_match::AnswerMatch;
use crate::load::question_set::BadRecords;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub use crate::assets::TRAINED_PREFIX;

/// A whole pipeline. See the [module docs](self) for the schema and defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PipelineConfig {
    /// Result name (`data/results/<name>/`). Default `"rag"`.
    pub name: String,
    /// The corpus. Needed when there is a retriever.
    pub corpus: CorpusConfig,
    /// How documents are cut into passages.
    pub chunker: ChunkerConfig,
    /// First-stage retrievers and their fusion.
    pub retrieval: RetrievalConfig,
    /// Optional query transformation (rewrite, paraphrase-and-fuse).
    pub query_transform: Option<QueryTransformConfig>,
    /// Optional re-ranker.
    pub rerank: Option<RerankerSpec>,
    /// Optional method: how retrieval and reading interleave for each question
    /// ([`crate::method`]); without it, retrieve once and read once. Left out of the
    /// resolved config's JSON when absent, so the keys of runs without it are unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<MethodSpec>,
    /// The reader and its prompt.
    pub reader: ReaderConfig,
    /// The question set.
    pub questions: QuestionsConfig,
    /// Scoring options.
    pub evaluation: EvaluationConfig,
    /// Retrieval cache.
    pub cache: CacheConfig,
    /// Folder relative paths resolve against (not part of the file).
    #[serde(skip)]
    pub base_dir: PathBuf,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            name: "rag".into(),
            corpus: CorpusConfig::default(),
            chunker: ChunkerConfig::default(),
            retrieval: RetrievalConfig::default(),
            query_transform: None,
            rerank: None,
            method: None,
            reader: ReaderConfig::default(),
            questions: QuestionsConfig::default(),
            evaluation: EvaluationConfig::default(),
            cache: CacheConfig::default(),
            base_dir: PathBuf::from("."),
        }
    }
}

/// Corpus formats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CorpusKind {
    /// One JSON document per line: `id`, `text`, optional `title`.
    #[default]
    Jsonl,
    /// A folder of `.txt` files (`load::text_dir`).
    TextDir,
    /// RAG-Mini-Wikipedia CSV (`infos.csv`; with `asset`, `rag-mini-wikipedia`).
    RagMini,
    /// The paragraphs of a SQuAD JSON file (with `asset`, `squad-v2-dev-half`).
    Squad,
    /// One of the Wikipedia assets (`load::wikipedia_corpus`); needs `asset`.
    Wikipedia,
}

/// Where the passages come from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CorpusConfig {
    /// Format. Default `jsonl`.
    pub kind: CorpusKind,
    /// A file or folder. Default empty (then `asset` is used).
    pub path: String,
    /// An asset name of `data/assets.toml`. Default empty.
    pub asset: String,
}

/// Chunkers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChunkerKind {
    /// One passage per document, with the document's id.
    #[default]
    Whole,
    /// Report 001's sliding windows (words).
    Sliding,
    /// Report 000's paragraphs.
    Paragraph,
}

/// Chunker settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChunkerConfig {
    /// Which chunker. Default `whole`.
    pub kind: ChunkerKind,
    /// Sliding: words per window. Default 300.
    pub window: usize,
    /// Sliding: words shared by consecutive windows. Default 100.
    pub overlap: usize,
    /// Paragraph: fewest words kept. Default 21.
    pub min_words: usize,
    /// Paragraph: most words kept. Default 199.
    pub max_words: usize,
}

impl Default for ChunkerConfig {
    fn default() -> Self {
        ChunkerConfig {
            kind: ChunkerKind::Whole,
            window: 300,
            overlap: 100,
            min_words: 21,
            max_words: 199,
        }
    }
}

pub use crate::method::MethodSpec;
pub use crate::rerank::spec::RerankerSpec;
pub use crate::retrieve::spec::RetrieverSpec;

/// Fusion methods (`retrieve::fusion`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FusionKind {
    /// Reciprocal Rank Fusion.
    #[default]
    Rrf,
    /// Weighted min-max (report 001's hybrid).
    Minmax,
    /// Weighted z-score.
    Zscore,
    /// CombSUM.
    Combsum,
    /// CombMNZ.
    Combmnz,
}

impl FusionKind {
    /// The fusion method this names, with RRF's `rank_constant` (k).
    pub fn method(self, rank_constant: f32) -> crate::retrieve::fusion::FusionMethod {
        use crate::retrieve::fusion::FusionMethod;
        match self {
            FusionKind::Rrf => FusionMethod::Rrf { rank_constant },
            FusionKind::Minmax => FusionMethod::MinMax,
            FusionKind::Zscore => FusionMethod::ZScore,
            FusionKind::Combsum => FusionMethod::CombSum,
            FusionKind::Combmnz => FusionMethod::CombMnz,
        }
    }
}

/// First-stage retrieval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetrievalConfig {
    /// Candidates asked from each retriever for each query, and kept after fusion.
    /// Default 20.
    pub depth: usize,
    /// How the retrievers' lists are fused (ignored with one retriever). Default `rrf`.
    pub fusion: FusionKind,
    /// RRF's k. Default 60.
    pub rank_constant: f32,
    /// One weight per retriever; empty = 1 each. Default empty.
    pub weights: Vec<f32>,
    /// The retrievers. Default none (closed-book).
    pub retrievers: Vec<RetrieverSpec>,
}

impl Default for RetrievalConfig {
    fn default() -> Self {
        RetrievalConfig {
            depth: 20,
            fusion: FusionKind::Rrf,
            rank_constant: 60.0,
            weights: Vec::new(),
            retrievers: Vec::new(),
        }
    }
}

/// Query transformations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransformKind {
    /// One rewritten query replaces the question for retrieval (report 004).
    #[default]
    Rewrite,
    /// Several paraphrases, each retrieved, runs fused with RRF (report 002).
    ParaphraseFuse,
}

/// A query transformation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueryTransformConfig {
    /// Which. Default `rewrite`.
    pub kind: TransformKind,
    /// Prompt template (`{question}`). Default `data/prompts/rewrite_004.txt`.
    pub prompt: String,
    /// Paraphrase-fuse: number of paraphrases. Default 5.
    pub variants: usize,
    /// Paraphrase-fuse: retrieve with the original question too. Default false.
    pub include_original: bool,
    /// RRF's k over the variants' runs. Default 60.
    pub rank_constant: f32,
    /// Generation budget per call. Default 64.
    pub max_new_tokens: usize,
    /// Sampling temperature of the paraphrase calls when the prompt has no `{n}` (one
    /// call per variant); 0 = greedy. A rewrite and a list prompt are greedy unless this
    /// is set. Default 0.
    pub temperature: f64,
    /// Sampling seed; variant `i` uses `seed + i`. Default 42.
    pub seed: u64,
}

impl Default for QueryTransformConfig {
    fn default() -> Self {
        QueryTransformConfig {
            kind: TransformKind::Rewrite,
            prompt: "data/prompts/rewrite_004.txt".into(),
            variants: 5,
            include_original: false,
            rank_constant: 60.0,
            max_new_tokens: 64,
            temperature: 0.0,
            seed: 42,
        }
    }
}

pub use crate::read::spec::{ExtractiveSpec, GenerativeSpec, ReadMode, ReaderConfig, ReaderSpec};

/// Question-set formats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QuestionsKind {
    /// NQ-open layout JSONL (`load::question_set`).
    #[default]
    Jsonl,
    /// RAG-Mini-Wikipedia `questions.csv`.
    RagMini,
    /// The questions of a SQuAD JSON file.
    Squad,
}

/// The question set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QuestionsConfig {
    /// Format. Default `jsonl`.
    pub kind: QuestionsKind,
    /// File. Default empty (then `asset`).
    pub path: String,
    /// Asset name. Default empty.
    pub asset: String,
    /// Bad records: `error` or `skip` (counted). Default `error`.
    pub on_bad_record: BadRecords,
    /// 0 = every question; else a seeded sample of this many, in file order. Default 0.
    pub limit: usize,
    /// Seed of the sample. Default 42.
    pub seed: u64,
    /// SQuAD: keep only answerable questions. Default true.
    pub answerable_only: bool,
    /// `all`, or `test`: only the questions the workbench's trained models never saw.
    /// Required with a `trained:` re-ranker on RAG Mini or SQuAD questions. Default `all`.
    pub split: QuestionSplit,
}

/// Which questions of a set to run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QuestionSplit {
    /// Every question.
    #[default]
    All,
    /// The test side of the training recipes' split: RAG Mini questions whose seeded id
    /// hash puts them on the test side (`train::qa_data::hash_test_side`, the recipes'
    /// `split_seed` and `rag_test_percent`); SQuAD questions of the five held-out articles
    /// (`train::qa_data::HELD_OUT_ARTICLES`). Not defined for JSONL sets.
    Test,
}

impl Default for QuestionsConfig {
    fn default() -> Self {
        QuestionsConfig {
            kind: QuestionsKind::Jsonl,
            path: String::new(),
            asset: String::new(),
            on_bad_record: BadRecords::Error,
            limit: 0,
            seed: 42,
            answerable_only: true,
            split: QuestionSplit::All,
        }
    }
}

/// Scoring options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvaluationConfig {
    /// How a prediction (Match) and a passage (context precision) are judged to contain
    /// a gold answer; `dpr-regex` for regex answers. Absent: the question set's own rule
    /// ([`QuestionSet::answer_match`](crate::load::question_set::QuestionSet::answer_match),
    /// `squad` for every set the workbench loads); [`Pipeline::build`](super::Pipeline::build)
    /// fills it in, so a run's resolved config names the rule it used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer_match: Option<AnswerMatch>,
    /// The LLM judge's GGUF model (an asset name or a `.gguf` path; the reader's own
    /// model is shared); empty = no judge. Default empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub judge_model: String,
    /// The judge's prompt template (`{question}`, `{gold}`, `{answer}`). Default
    /// `data/prompts/judge.txt`.
    pub judge_prompt: String,
    /// An OpenAI-compatible server (API root up to `/v1`) that runs the judge, returning
    /// log-probabilities; `judge_model` is then the server's model name. Empty: the GGUF
    /// in this process. Default empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub judge_base_url: String,
    /// The environment variable holding the judge server's API key; empty: none. Default
    /// empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub judge_api_key_env: String,
    /// The P(Yes) above which the judge's verdict is "correct", in [0, 1). Absent: the
    /// judge model's calibrated cut for this judge prompt
    /// ([`calibration::RECORD`](crate::evaluate::calibration::RECORD)), else 0.5;
    /// [`Pipeline::build`](super::Pipeline::build) fills it in, so a run's resolved config
    /// names the cut it used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_cut: Option<f64>,
    /// Where `judge_cut` came from (`config`, `calibrated: …`, `uncalibrated: …`), filled
    /// in by [`Pipeline::build`](super::Pipeline::build); a value given in a config file
    /// is kept only beside a `judge_cut` it also gives.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub judge_cut_source: String,
}

impl Default for EvaluationConfig {
    fn default() -> Self {
        EvaluationConfig {
            answer_match: None,
            judge_model: String::new(),
            judge_prompt: crate::evaluate::judge::DEFAULT_PROMPT.into(),
            judge_base_url: String::new(),
            judge_api_key_env: String::new(),
            judge_cut: None,
            judge_cut_source: String::new(),
        }
    }
}

/// Retrieval cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Cache retrieval results. Default true.
    pub retrieval: bool,
    /// Folder. Default `data/cache/retrieval`.
    pub dir: String,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            retrieval: true,
            dir: "data/cache/retrieval".into(),
        }
    }
}

/// `path` with `.` and `..` components folded away (lexically: no file-system access).
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

impl PipelineConfig {
    /// Parse a config from TOML text; relative paths resolve against `base_dir`.
    /// Errors: TOML syntax, an unknown field, a wrong type ([`Error::BadInput`] naming
    /// `origin` and, from the TOML parser, the field, line and column).
    pub fn from_toml(text: &str, origin: &Path, base_dir: &Path) -> Result<Self> {
        let mut c: PipelineConfig =
            toml::from_str(text).map_err(|e| Error::bad_input(origin, e.to_string()))?;
        c.base_dir = base_dir.to_path_buf();
        Ok(c)
    }

    /// Read and parse a config file, then [`validate`](Self::validate) it.
    ///
    /// A relative path written in the file (`corpus.path`, `questions.path`,
    /// `reader.prompt`, `query_transform.prompt`, `cache.dir`, and a model given as a
    /// path) is relative to **the file's folder**; it is stored relative to the project
    /// root when it lies inside it (so a shipped config's resolved form does not depend on
    /// where the checkout is), else as an absolute path. Fields left out keep their
    /// defaults, which name the workbench's own files relative to the project root.
    pub fn from_file(path: &Path) -> Result<Self> {
        Self::from_file_with(path, &[])
    }

    /// [`from_file`](Self::from_file) with fields set from the command line: each of `sets`
    /// is `SECTION.KEY=VALUE` (`reader.model=models/my.gguf`, `retrieval.depth=20`), the
    /// value read as a TOML value when it is one (a number, a boolean, a quoted string, an
    /// array), else as a string (and as a string again when the TOML value does not fit the
    /// field: `name=2024`). An array of tables is set whole:
    /// `retrieval.retrievers=[{kind="bm25"}]`. A relative path set this way is relative to the
    /// current folder, not the file's. Errors name the setting.
    pub fn from_file_with(path: &Path, sets: &[String]) -> Result<Self> {
        let text = crate::load::read_to_string(path)?;
        let folder = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let folder = std::path::absolute(folder).map_err(|e| Error::io(folder, e))?;
        let base = match crate::paths::project_root() {
            Ok(root) => std::path::absolute(&root).map_err(|e| Error::io(&root, e))?,
            Err(_) => folder.clone(),
        };
        let mut written: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| Error::bad_input(path, e.to_string()))?;
        // The file alone first, so that its own errors point into it.
        let mut c = Self::from_toml(&text, path, &base)?;
        if !sets.is_empty() {
            let parsed = sets
                .iter()
                .map(|s| parse_setting(s))
                .collect::<Result<Vec<_>>>()?;
            // Unquoted values are TOML values when they read as one (`20`, `true`); when the
            // config then does not deserialize, they are tried again as strings
            // (`name=2024`, `reader.model=true`).
            let build = |as_strings: bool| -> Result<(toml::Table, toml::Table)> {
                let mut merged = written.clone();
                let mut cli = toml::Table::new();
                for ((keys, value, unquoted), set) in parsed.iter().zip(sets) {
                    let value = match (as_strings && !value.is_str(), unquoted) {
                        (true, Some(raw)) => toml::Value::String(raw.clone()),
                        _ => value.clone(),
                    };
                    set_key(&mut merged, keys, value.clone(), set)?;
                    set_key(&mut cli, keys, value, set)?;
                }
                Ok((merged, cli))
            };
            let settings = sets
                .iter()
                .map(|s| format!("--set {s}"))
                .collect::<Vec<_>>()
                .join(" ");
            let attempt = |merged: &toml::Table| -> Result<PipelineConfig> {
                let text = toml::to_string(merged)
                    .map_err(|e| Error::bad_input(path, format!("with {settings}: {e}")))?;
                Self::from_toml(&text, path, &base).map_err(|e| match e {
                    Error::BadInput { message, .. } => {
                        Error::bad_input(path, format!("with {settings}: {message}"))
                    }
                    other => other,
                })
            };
            let (merged, cli) = build(false)?;
            let (merged_c, cli) = match attempt(&merged) {
                Ok(m) => (m, cli),
                Err(first) => {
                    let (merged, cli) = build(true)?;
                    (attempt(&merged).map_err(|_| first)?, cli)
                }
            };
            for (keys, _, _) in &parsed {
                remove_key(&mut written, keys);
            }
            c = merged_c;
            let here = std::env::current_dir().map_err(|e| Error::io(".", e))?;
            c.rebase_paths(&cli, &here);
        }
        c.rebase_paths(&written, &folder);
        c.validate()?;
        Ok(c)
    }

    /// Rewrite the relative paths `written` in a file in `folder` as paths relative to
    /// [`PipelineConfig::base_dir`] (or absolute when outside it).
    fn rebase_paths(&mut self, written: &toml::Table, folder: &Path) {
        let has = |section: &str, key: &str| {
            written
                .get(section)
                .and_then(toml::Value::as_table)
                .is_some_and(|t| t.contains_key(key))
        };
        let base = self.base_dir.clone();
        let rebase = |v: &mut String| {
            if v.trim().is_empty() || Path::new(v.as_str()).is_absolute() {
                return;
            }
            let full = normalize(&folder.join(v.as_str()));
            *v = match full.strip_prefix(&base) {
                Ok(rel) => rel.to_string_lossy().into_owned(),
                Err(_) => full.to_string_lossy().into_owned(),
            };
        };
        let model = |v: &mut String| {
            if matches!(
                crate::assets::ModelRef::parse(v),
                crate::assets::ModelRef::Path(_)
            ) {
                rebase(v)
            }
        };
        if has("corpus", "path") {
            rebase(&mut self.corpus.path);
        }
        if has("questions", "path") {
            rebase(&mut self.questions.path);
        }
        if has("reader", "prompt") {
            rebase(&mut self.reader.prompt);
        }
        if has("cache", "dir") {
            rebase(&mut self.cache.dir);
        }
        if has("evaluation", "judge_prompt") {
            rebase(&mut self.evaluation.judge_prompt);
        }
        // A server judge's model is the server's name for it, not a file.
        if has("evaluation", "judge_model") && self.evaluation.judge_base_url.trim().is_empty() {
            model(&mut self.evaluation.judge_model);
        }
        if let Some(t) = self
            .query_transform
            .as_mut()
            .filter(|_| has("query_transform", "prompt"))
        {
            rebase(&mut t.prompt);
        }
        if let Some(f) = self
            .method
            .as_mut()
            .filter(|_| has("method", "prompt"))
            .and_then(|m| m.prompt_file_mut())
        {
            rebase(f);
        }
        // An openai reader's model is the server's name for it, not a file.
        if has("reader", "model") && self.reader.spec.model_is_local() {
            model(self.reader.spec.model_mut());
        }
        if let Some(r) = self.rerank.as_mut().filter(|_| has("rerank", "model")) {
            model(r.model_mut());
        }
        if has("retrieval", "retrievers") {
            for r in &mut self.retrieval.retrievers {
                if let Some(m) = r.model_mut() {
                    model(m);
                }
            }
        }
    }

    /// Fill in `evaluation.judge_cut` and `judge_cut_source` when the config has a judge:
    /// the config's own cut, else the judge model's calibrated cut for this backend and
    /// judge prompt ([`calibration::recorded_cut`](crate::evaluate::calibration::recorded_cut)
    /// on the record under [`base_dir`](Self::base_dir)), else 0.5. A config without a
    /// judge is left as it is.
    ///
    /// Errors: the judge prompt or an existing record cannot be read.
    pub fn resolve_judge_cut(&mut self) -> Result<()> {
        use crate::evaluate::calibration;
        let e = &self.evaluation;
        if e.judge_model.trim().is_empty() {
            return Ok(());
        }
        if e.judge_cut.is_some() {
            if e.judge_cut_source.trim().is_empty() {
                self.evaluation.judge_cut_source = "config".into();
            }
            return Ok(());
        }
        let template = crate::load::read_to_string(&self.resolve(&e.judge_prompt))?;
        let backend = if e.judge_base_url.trim().is_empty() {
            "gguf"
        } else {
            "server"
        };
        let record = self.resolve(calibration::RECORD);
        let found = calibration::recorded_cut(&record, &e.judge_model, backend, &template)?;
        let (cut, source) = match found {
            Some(c) => (
                c.cut,
                format!(
                    "calibrated: {} ({} labelled predictions; cross-validated kappa {}, AUC {})",
                    calibration::RECORD,
                    c.n,
                    c.cv_kappa.map_or("undefined".into(), |k| format!("{k:.3}")),
                    c.auc.map_or("undefined".into(), |a| format!("{a:.3}")),
                ),
            ),
            None => (
                crate::evaluate::judge::DEFAULT_CUT,
                format!(
                    "uncalibrated: {} has no row for this judge model ({backend}) and prompt",
                    calibration::RECORD
                ),
            ),
        };
        self.evaluation.judge_cut = Some(cut);
        self.evaluation.judge_cut_source = source;
        Ok(())
    }

    /// A path of the config, resolved against [`PipelineConfig::base_dir`].
    pub fn resolve(&self, p: &str) -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }

    /// The config as TOML (every default written out): the resolved config.
    pub fn to_toml(&self) -> Result<String> {
        toml::to_string(self).map_err(|e| Error::param("config", e.to_string()))
    }

    /// Check everything that can be checked before any work: each error names the
    /// field (`reader.passages`, `rerank`, …) or the file.
    pub fn validate(&self) -> Result<()> {
        let has_retriever = !self.retrieval.retrievers.is_empty();
        if self.name.trim().is_empty()
            || self.name.contains(['/', '\\'])
            || self.name.starts_with('.')
        {
            return Err(Error::param(
                "name",
                format!("{:?} is not a usable result-folder name", self.name),
            ));
        }
        if self.reader.passages == 0 {
            return Err(Error::param(
                "reader.passages",
                "k = 0: the reader must be given at least 1 passage",
            ));
        }
        if has_retriever && self.retrieval.depth == 0 {
            return Err(Error::param("retrieval.depth", "k = 0: must be at least 1"));
        }
        if has_retriever && self.retrieval.depth < self.reader.passages && self.rerank.is_none() {
            return Err(Error::param(
                "retrieval.depth",
                format!(
                    "{} is smaller than reader.passages = {}",
                    self.retrieval.depth, self.reader.passages
                ),
            ));
        }
        for r in &self.retrieval.retrievers {
            r.check()?;
        }
        if let Some(r) = &self.rerank {
            r.check()?;
        }
        if let Some(r) = &self.rerank {
            if !has_retriever {
                return Err(Error::param(
                    "rerank",
                    "a re-ranker needs a first stage: add a [[retrieval.retrievers]] entry",
                ));
            }
            let trained = matches!(
                r.trained(),
                Some(crate::rerank::spec::TrainedModel::CrossEncoder { .. })
            );
            if trained
                && self.questions.split != QuestionSplit::Test
                && matches!(
                    self.questions.kind,
                    QuestionsKind::RagMini | QuestionsKind::Squad
                )
            {
                return Err(Error::param(
                    "questions.split",
                    format!(
                        "rerank.model = {:?} was trained on {} questions: set \
                         questions.split = \"test\" to run only the questions it never saw",
                        r.model(),
                        if self.questions.kind == QuestionsKind::RagMini {
                            "RAG Mini Wikipedia training"
                        } else {
                            "SQuAD training-article"
                        }
                    ),
                ));
            }
            if r.depth() > self.retrieval.depth {
                return Err(Error::param(
                    "rerank.depth",
                    format!(
                        "{} is larger than retrieval.depth = {} (the candidates there are)",
                        r.depth(),
                        self.retrieval.depth
                    ),
                ));
            }
        }
        if let Some(t) = &self.query_transform {
            if !has_retriever {
                return Err(Error::param(
                    "query_transform",
                    "a query transformation needs a retriever to send the queries to",
                ));
            }
            if t.kind == TransformKind::ParaphraseFuse && t.variants == 0 {
                return Err(Error::param(
                    "query_transform.variants",
                    "k = 0: must be at least 1",
                ));
            }
            if t.max_new_tokens == 0 {
                return Err(Error::param(
                    "query_transform.max_new_tokens",
                    "must be at least 1",
                ));
            }
            if !(t.temperature.is_finite() && t.temperature >= 0.0) {
                return Err(Error::param(
                    "query_transform.temperature",
                    "must be finite and ≥ 0",
                ));
            }
            if !(t.rank_constant.is_finite() && t.rank_constant >= 0.0) {
                return Err(Error::param(
                    "query_transform.rank_constant",
                    "must be finite and ≥ 0",
                ));
            }
            self.require_file("query_transform.prompt", &t.prompt)?;
        }
        if let Some(m) = &self.method {
            m.check()?;
            if m.retrieves() && !has_retriever {
                return Err(Error::param(
                    "method",
                    format!(
                        "`{}` retrieves: add a [[retrieval.retrievers]] entry",
                        m.kind()
                    ),
                ));
            }
            if self.query_transform.is_some() {
                return Err(Error::param(
                    "method",
                    "a method forms its own queries: drop [query_transform] or [method]",
                ));
            }
            if m.generates() && !self.reader.spec.generates() {
                {
                    return Err(Error::param(
                        "method.kind",
                        format!(
                            "`{}` prompts the reader's model directly: the `{}` reader has none (use a generative or openai reader)",
                            m.kind(),
                            self.reader.spec.kind()
                        ),
                    ));
                }
            }
            if let Some(f) = m.prompt_file() {
                self.require_file("method.prompt", f)?;
            }
        }
        if !self.retrieval.weights.is_empty()
            && self.retrieval.weights.len() != self.retrieval.retrievers.len()
        {
            return Err(Error::param(
                "retrieval.weights",
                format!(
                    "{} weights for {} retrievers",
                    self.retrieval.weights.len(),
                    self.retrieval.retrievers.len()
                ),
            ));
        }
        if self.chunker.kind == ChunkerKind::Sliding {
            if self.chunker.window == 0 {
                return Err(Error::param("chunker.window", "must be at least 1"));
            }
            if self.chunker.overlap >= self.chunker.window {
                return Err(Error::param(
                    "chunker.overlap",
                    "must be smaller than chunker.window",
                ));
            }
        }
        if self
            .retrieval
            .retrievers
            .iter()
            .any(|r| matches!(r, RetrieverSpec::Oracle(_)))
        {
            if self.questions.kind != QuestionsKind::Squad {
                return Err(Error::param(
                    "retrieval.retrievers.kind",
                    "`oracle` needs questions whose gold passage is known: questions.kind = \"squad\"",
                ));
            }
            if self.query_transform.is_some() {
                return Err(Error::param(
                    "query_transform",
                    "the oracle knows the questions' gold passages, not those of transformed queries",
                ));
            }
        }
        if has_retriever {
            self.require_source("corpus", &self.corpus.path, &self.corpus.asset)?;
            if self.corpus.kind == CorpusKind::Wikipedia && self.corpus.asset.is_empty() {
                return Err(Error::param(
                    "corpus.asset",
                    "kind = \"wikipedia\" needs an asset name",
                ));
            }
        }
        self.require_source("questions", &self.questions.path, &self.questions.asset)?;
        if self.questions.split == QuestionSplit::Test
            && self.questions.kind == QuestionsKind::Jsonl
        {
            return Err(Error::param(
                "questions.split",
                "\"test\" is defined for rag-mini and squad questions (the training recipes' \
                 held-out sides), not for a JSONL file",
            ));
        }
        if self.questions.kind == QuestionsKind::RagMini
            && self.questions.asset.is_empty()
            && self.questions.path.is_empty()
        {
            return Err(Error::param("questions.path", "empty"));
        }
        self.require_file("reader.prompt", &self.reader.prompt)?;
        let judge_server = self.evaluation.judge_base_url.trim();
        if !judge_server.is_empty() {
            if self.evaluation.judge_model.trim().is_empty() {
                return Err(Error::param(
                    "evaluation.judge_model",
                    "`judge_base_url` is set: name the model the server should judge with",
                ));
            }
            if !(judge_server.starts_with("http://") || judge_server.starts_with("https://")) {
                return Err(Error::param(
                    "evaluation.judge_base_url",
                    format!("{judge_server:?} is not an http:// or https:// URL"),
                ));
            }
        }
        if let Some(c) = self.evaluation.judge_cut {
            if !(0.0..1.0).contains(&c) {
                return Err(Error::param(
                    "evaluation.judge_cut",
                    format!("{c} is not in [0, 1) (a P(Yes) above it is a \"correct\" verdict)"),
                ));
            }
        }
        if !self.evaluation.judge_model.trim().is_empty() {
            self.require_file("evaluation.judge_prompt", &self.evaluation.judge_prompt)?;
            match (
                judge_server.is_empty(),
                crate::assets::ModelRef::parse(&self.evaluation.judge_model),
            ) {
                (true, crate::assets::ModelRef::Path(p)) => {
                    self.require_file("evaluation.judge_model", p)?
                }
                (true, crate::assets::ModelRef::Hub(h)) => {
                    crate::assets::HubFile::parse(h, "evaluation.judge_model")?;
                }
                _ => {}
            }
        }
        self.validate_reader_kind()
    }

    fn validate_reader_kind(&self) -> Result<()> {
        use crate::assets::ModelRef;
        let r = &self.reader.spec;
        r.check()?;
        if self.query_transform.is_some() && !r.generates() {
            return Err(Error::param(
                "query_transform",
                format!(
                    "the `{}` reader has no language model to transform queries with: use a \
                     generative or openai reader",
                    r.kind()
                ),
            ));
        }
        if r.model_is_local() {
            if let ModelRef::Path(p) = ModelRef::parse(r.model()) {
                self.require_file("reader.model", p)?;
            }
        }
        Ok(())
    }

    fn require_file(&self, field: &'static str, p: &str) -> Result<()> {
        if p.trim().is_empty() {
            return Err(Error::param(field, "no file given"));
        }
        let path = self.resolve(p);
        if !path.exists() {
            return Err(Error::bad_input(
                &path,
                format!("file named by `{field}` does not exist"),
            ));
        }
        Ok(())
    }

    fn require_source(&self, section: &'static str, path: &str, asset: &str) -> Result<()> {
        match (path.trim().is_empty(), asset.trim().is_empty()) {
            (true, true) => Err(Error::param(
                section,
                "give a `path` (file or folder) or an `asset`",
            )),
            (false, false) => Err(Error::param(
                section,
                "give either `path` or `asset`, not both",
            )),
            (false, true) => {
                let full = self.resolve(path);
                if !full.exists() {
                    return Err(Error::bad_input(
                        &full,
                        format!("`{section}.path` does not exist"),
                    ));
                }
                Ok(())
            }
            (true, false) => Ok(()),
        }
    }
}

/// `SECTION.KEY=VALUE` as its key path, its value, and the text of an unquoted value (see
/// [`PipelineConfig::from_file_with`]). A value that starts like a TOML string, array or table
/// must be one.
#[allow(clippy::type_complexity)]
fn parse_setting(set: &str) -> Result<(Vec<String>, toml::Value, Option<String>)> {
    let bad = |why: &str| {
        Error::param(
            "set",
            format!("`{set}`: {why}; write SECTION.KEY=VALUE, e.g. reader.model=models/my.gguf"),
        )
    };
    let (key, value) = set.split_once('=').ok_or_else(|| bad("no `=`"))?;
    let keys: Vec<String> = key
        .trim()
        .split('.')
        .map(|k| k.trim().to_string())
        .collect();
    if keys.iter().any(|k| k.is_empty()) {
        return Err(bad("an empty key"));
    }
    let value = value.trim();
    let parsed = format!("v = {value}")
        .parse::<toml::Table>()
        .map_err(|e| e.message().to_string())
        .and_then(|mut t| t.remove("v").ok_or_else(|| "no value".to_string()));
    let structured = value.starts_with(['"', '\'', '[', '{']);
    match parsed {
        Ok(v) if structured => Ok((keys, v, None)),
        Ok(v) => Ok((keys, v, Some(value.to_string()))),
        Err(e) if structured => Err(bad(&format!("the value is not valid TOML ({e})"))),
        Err(_) => Ok((
            keys,
            toml::Value::String(value.to_string()),
            Some(value.to_string()),
        )),
    }
}

/// Set `keys` (a path of tables, then the key) in `table` to `value`.
fn set_key(table: &mut toml::Table, keys: &[String], value: toml::Value, set: &str) -> Result<()> {
    let (last, path) = keys
        .split_last()
        .ok_or_else(|| Error::param("set", "no key"))?;
    let mut t = table;
    for k in path {
        let entry = t
            .entry(k.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let why = if entry.is_array() {
            format!("`{k}` is an array of tables: set it whole (`{k}=[{{…}}]`)")
        } else {
            format!("`{k}` is not a section")
        };
        t = entry
            .as_table_mut()
            .ok_or_else(|| Error::param("set", format!("`{set}`: {why}")))?;
    }
    t.insert(last.clone(), value);
    Ok(())
}

/// Remove `keys` from `table` when it is there.
fn remove_key(table: &mut toml::Table, keys: &[String]) {
    let Some((last, path)) = keys.split_last() else {
        return;
    };
    let mut t = table;
    for k in path {
        match t.get_mut(k).and_then(toml::Value::as_table_mut) {
            Some(next) => t = next,
            None => return,
        }
    }
    t.remove(last);
}
