//! A reader as data: the pipeline's `[reader]` table ([`ReaderConfig`]) holds the
//! settings every reader shares (how passages reach it, how its answer is scored) and one
//! [`ReaderSpec`] variant with that kind's own parameters, built by
//! [`ReaderSpec::build`] against a [`ReaderCtx`] (feature `llm`).
//!
//! ```toml
//! [reader]
//! kind = "openai"                 # generative (default) | openai | extractive
//! prompt = "data/prompts/rag_001.txt"
//! passages = 5
//! model = "qwen2.5-coder-1.5b-instruct"
//! base_url = "http://127.0.0.1:8080/v1"
//! ```
//!
//! A field of another kind (`base_url` for a `generative` reader, `read_mode` for an
//! `openai` one) is an error naming it.
//!
//! To add a reader: write its parameters with an `impl `[`BuildReader`] in
//! `read/<name>.rs` (beside the reader), or here when the reader's module is compiled only
//! with a feature, and add one line to the `stage_specs!` list below.

pub use super::ctx::BuildReader;
#[cfg(feature = "llm")]
pub use super::ctx::{BuiltReader, Generator, ReaderCtx};
use super::{AbstentionRule, AnswerParser};
use crate::Result;
use serde::{Deserialize, Deserializer, Serialize};

crate::build::stage_specs! {
    /// One reader's own parameters. See the [module docs](self).
    pub enum ReaderSpec: dyn BuildReader, default "generative", table "reader";
    /// A GGUF chat model run in process.
    Generative(GenerativeSpec) = "generative",
    /// Any OpenAI-compatible chat-completions server.
    Openai(OpenAiSpec) = "openai",
    /// An extractive question-answering model.
    Extractive(ExtractiveSpec) = "extractive",
}

impl Default for ReaderSpec {
    fn default() -> Self {
        ReaderSpec::Generative(GenerativeSpec::default())
    }
}

impl ReaderSpec {
    /// The model: an asset, a path, `hf:…`, `trained:<recipe>`, or a server's name for it.
    pub fn model(&self) -> &str {
        self.params().model()
    }

    /// The model, to rewrite (a relative path made relative to the config's folder).
    pub fn model_mut(&mut self) -> &mut String {
        self.params_mut().model_mut()
    }

    /// Whether the model is a file or folder the program reads (keyed in a run's
    /// identity), not a server's name for it.
    pub fn model_is_local(&self) -> bool {
        self.params().model_is_local()
    }

    /// Whether the reader decides abstention itself ([`crate::read::Answer::abstained`])
    /// instead of the config's [`AbstentionRule`] on its text.
    pub fn abstains_itself(&self) -> bool {
        self.params().abstains_itself()
    }

    /// Whether it generates text (a query transform can then run on the same model).
    pub fn generates(&self) -> bool {
        self.params().generates()
    }

    /// Check the parameters before any work; errors name the field.
    pub fn check(&self) -> Result<()> {
        self.params().check()
    }

    /// The reader.
    #[cfg(feature = "llm")]
    pub fn build(&self, ctx: &mut ReaderCtx<'_>) -> Result<BuiltReader> {
        self.params().build(ctx)
    }
}

/// The pipeline's `[reader]`: what every reader shares, and the reader's own
/// [`ReaderSpec`] (its `kind` and fields, flattened into the same table).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReaderConfig {
    /// Prompt template file. Default `data/prompts/rag_001.txt`.
    pub prompt: String,
    /// Passages given to the reader (`k`), ≥ 1. Default 5.
    pub passages: usize,
    /// One passage inside `{passages}`: `{i}` (1-based rank), `{id}`, `{title}`,
    /// `{text}`. Default `"[CHUNK {i}]\n{text}"` (report 001).
    pub passage_format: String,
    /// Between passages. Default `"\n\n"`.
    pub passage_separator: String,
    /// Which answers are abstentions. Default [`AbstentionRule::default`].
    pub abstention: AbstentionRule,
    /// How the scored answer is taken out of the raw output ([`AnswerParser`]). Default:
    /// every rule off (the raw output is scored).
    pub parse: AnswerParser,
    /// The reader: `kind` and its own fields.
    #[serde(flatten)]
    pub spec: ReaderSpec,
}

/// The shared fields, as the table gives them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Shared {
    prompt: String,
    passages: usize,
    passage_format: String,
    passage_separator: String,
    abstention: AbstentionRule,
    parse: AnswerParser,
}

impl Default for Shared {
    fn default() -> Self {
        let d = ReaderConfig::default();
        Shared {
            prompt: d.prompt,
            passages: d.passages,
            passage_format: d.passage_format,
            passage_separator: d.passage_separator,
            abstention: d.abstention,
            parse: d.parse,
        }
    }
}

const SHARED_FIELDS: [&str; 6] = [
    "prompt",
    "passages",
    "passage_format",
    "passage_separator",
    "abstention",
    "parse",
];

impl Default for ReaderConfig {
    fn default() -> Self {
        ReaderConfig {
            prompt: "data/prompts/rag_001.txt".into(),
            passages: 5,
            passage_format: "[CHUNK {i}]\n{text}".into(),
            passage_separator: "\n\n".into(),
            abstention: AbstentionRule::default(),
            parse: AnswerParser::default(),
            spec: ReaderSpec::default(),
        }
    }
}

impl<'de> Deserialize<'de> for ReaderConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        let toml::Value::Table(mut table) = toml::Value::deserialize(d)? else {
            return Err(D::Error::custom("[reader] must be a table"));
        };
        let mut shared = toml::Table::new();
        for f in SHARED_FIELDS {
            if let Some(v) = table.remove(f) {
                shared.insert(f.to_string(), v);
            }
        }
        let shared = Shared::deserialize(toml::Value::Table(shared.clone())).map_err(|e| {
            // Name the field: the first one that fails alone.
            let field = shared.iter().find(|(k, v)| {
                let one = toml::Table::from_iter([((*k).clone(), (*v).clone())]);
                Shared::deserialize(toml::Value::Table(one)).is_err()
            });
            match field {
                Some((k, _)) => D::Error::custom(format!("reader.{k}: {e}")),
                None => D::Error::custom(e),
            }
        })?;
        let spec: ReaderSpec =
            crate::build::tagged_table::<Tagged>(table, ReaderSpec::DEFAULT_KIND, "reader")
                .map(Into::into)
                .map_err(|e| {
                    D::Error::custom(if e.contains("unknown field") {
                        format!(
                            "{e} (or one of the fields every reader takes: {})",
                            SHARED_FIELDS.join(", ")
                        )
                    } else {
                        e
                    })
                })?;
        Ok(ReaderConfig {
            prompt: shared.prompt,
            passages: shared.passages,
            passage_format: shared.passage_format,
            passage_separator: shared.passage_separator,
            abstention: shared.abstention,
            parse: shared.parse,
            spec,
        })
    }
}

/// Decoding settings of a generating reader (`generative`, `openai`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GenerativeSpec {
    /// Model asset, a path to a `.gguf` file, or `hf:ORG/NAME[@REV]/FILE`. Default
    /// `qwen2.5-coder-1.5b-instruct-gguf`.
    pub model: String,
    /// Most tokens generated. Default 64.
    pub max_new_tokens: usize,
    /// Sampling temperature; 0 = greedy. Default 0.
    pub temperature: f64,
    /// Nucleus sampling mass. Default 1.
    pub top_p: f64,
    /// Sampling seed. Default 42.
    pub seed: u64,
    /// System message; empty = none. Default empty.
    pub system: String,
    /// Generation stops at the first of these. Default `["\n\n"]`.
    pub stop: Vec<String>,
    /// Questions decoded together (one pass over the weights per step for all of them,
    /// answers as when read one at a time). Default 1.
    pub concurrency: usize,
}

impl Default for GenerativeSpec {
    fn default() -> Self {
        GenerativeSpec {
            model: "qwen2.5-coder-1.5b-instruct-gguf".into(),
            max_new_tokens: 64,
            temperature: 0.0,
            top_p: 1.0,
            seed: 42,
            system: String::new(),
            stop: vec!["\n\n".into()],
            concurrency: 1,
        }
    }
}

/// Check a generating reader's decoding settings; errors name the field
/// (`reader.temperature`, …).
fn check_decoding(
    temperature: f64,
    top_p: f64,
    max_new_tokens: usize,
    concurrency: usize,
) -> Result<()> {
    use crate::Error;
    if !(temperature >= 0.0 && temperature.is_finite()) {
        return Err(Error::param("reader.temperature", "must be finite and ≥ 0"));
    }
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(Error::param("reader.top_p", "must be in (0, 1]"));
    }
    if max_new_tokens == 0 {
        return Err(Error::param("reader.max_new_tokens", "must be at least 1"));
    }
    if concurrency == 0 {
        return Err(Error::param("reader.concurrency", "must be at least 1"));
    }
    Ok(())
}

impl BuildReader for GenerativeSpec {
    fn model(&self) -> &str {
        &self.model
    }

    fn model_mut(&mut self) -> &mut String {
        &mut self.model
    }

    fn check(&self) -> Result<()> {
        use crate::assets::ModelRef;
        use crate::Error;
        match ModelRef::parse(&self.model) {
            ModelRef::Hub(h) => {
                crate::assets::HubFile::parse(h, "reader.model")?;
            }
            ModelRef::Trained(_) => {
                return Err(Error::param(
                    "reader.model",
                    "a generative reader loads a GGUF (an asset name, a .gguf path or \
                     hf:ORG/NAME/FILE), not a trained: recipe",
                ))
            }
            ModelRef::Asset(a) if a.trim().is_empty() => {
                return Err(Error::param("reader.model", "no model given"))
            }
            _ => {}
        }
        check_decoding(
            self.temperature,
            self.top_p,
            self.max_new_tokens,
            self.concurrency,
        )
    }

    #[cfg(feature = "llm")]
    fn build(&self, ctx: &mut ReaderCtx<'_>) -> Result<BuiltReader> {
        let llm = (ctx.models)(&self.model)?;
        let reader =
            super::generative::configured::ConfiguredReader::new(llm.clone(), self.options(ctx))?;
        Ok(BuiltReader {
            reader: Box::new(reader),
            generator: Some(Generator::Local(llm)),
        })
    }
}

impl GenerativeSpec {
    /// The generative reader's options: this spec and the prompt parts of `ctx`; its name
    /// is `model` (a `.gguf` path: its file name without the extension).
    #[cfg(feature = "llm")]
    pub fn options(&self, ctx: &ReaderCtx<'_>) -> super::generative::ReaderOptions {
        use super::generative::{GenerateParams, ReaderOptions, Sampling};
        let defaults = ReaderOptions::default();
        ReaderOptions {
            name: super::generative::configured::model_label(&self.model),
            system: Some(self.system.clone()).filter(|s| !s.is_empty()),
            prompt: ctx.prompt.clone(),
            passage: ctx.passage.clone(),
            passage_separator: ctx.passage_separator.clone(),
            params: GenerateParams {
                max_new_tokens: self.max_new_tokens,
                sampling: if self.temperature == 0.0 {
                    Sampling::Greedy
                } else {
                    Sampling::TopP {
                        temperature: self.temperature as f32,
                        top_p: self.top_p as f32,
                        seed: self.seed,
                    }
                },
                stop_strings: self.stop.clone(),
                ..defaults.params
            },
            abstention: ctx.abstention.clone(),
            batch: self.concurrency,
        }
    }
}

/// An OpenAI-compatible reader as configured (`[reader]` with `kind = "openai"`):
/// the server, the model's name there, decoding and retry settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpenAiSpec {
    /// The server's name for the model. Default `qwen2.5-coder-1.5b-instruct-gguf`.
    pub model: String,
    /// The API root up to `/v1`. Default `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// Environment variable holding the API key (its value is never written anywhere);
    /// empty = no key. Default empty.
    pub api_key_env: String,
    /// Most tokens generated. Default 64.
    pub max_new_tokens: usize,
    /// Sampling temperature; 0 = greedy. Default 0.
    pub temperature: f64,
    /// Nucleus sampling mass. Default 1.
    pub top_p: f64,
    /// Sampling seed. Default 42.
    pub seed: u64,
    /// System message; empty = none. Default empty.
    pub system: String,
    /// Generation stops at the first of these. Default `["\n\n"]`.
    pub stop: Vec<String>,
    /// Requests in flight. Default 1.
    pub concurrency: usize,
    /// Seconds allowed per request. Default 120.
    pub timeout_secs: f64,
    /// Further attempts after a timeout, dropped connection, 429, 5xx or malformed
    /// response. Default 3.
    pub retries: usize,
    /// First wait before a retry, seconds (doubling). Default 1.
    pub backoff_secs: f64,
}

impl Default for OpenAiSpec {
    fn default() -> Self {
        let g = GenerativeSpec::default();
        OpenAiSpec {
            model: g.model,
            base_url: "http://127.0.0.1:8080/v1".into(),
            api_key_env: String::new(),
            max_new_tokens: g.max_new_tokens,
            temperature: g.temperature,
            top_p: g.top_p,
            seed: g.seed,
            system: g.system,
            stop: g.stop,
            concurrency: 1,
            timeout_secs: 120.0,
            retries: 3,
            backoff_secs: 1.0,
        }
    }
}

impl BuildReader for OpenAiSpec {
    fn model(&self) -> &str {
        &self.model
    }

    fn model_mut(&mut self) -> &mut String {
        &mut self.model
    }

    /// The server's weights are not keyed: the model is known by its name only.
    fn model_is_local(&self) -> bool {
        false
    }

    fn check(&self) -> Result<()> {
        let url = self.base_url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(crate::Error::param(
                "reader.base_url",
                format!("{url:?} is not an http:// or https:// URL"),
            ));
        }
        if self.model.trim().is_empty() {
            return Err(crate::Error::param(
                "reader.model",
                "name the model the server should run (its `model` field)",
            ));
        }
        if !(self.timeout_secs.is_finite() && self.timeout_secs > 0.0) {
            return Err(crate::Error::param(
                "reader.timeout_secs",
                "must be a positive number",
            ));
        }
        if !(self.backoff_secs.is_finite() && self.backoff_secs >= 0.0) {
            return Err(crate::Error::param(
                "reader.backoff_secs",
                "must be finite and ≥ 0",
            ));
        }
        check_decoding(
            self.temperature,
            self.top_p,
            self.max_new_tokens,
            self.concurrency,
        )
    }

    #[cfg(feature = "llm")]
    fn build(&self, ctx: &mut ReaderCtx<'_>) -> Result<BuiltReader> {
        use super::openai::{OpenAiReader, SharedOpenAi};
        let reader = std::sync::Arc::new(OpenAiReader::new(self.options(ctx))?);
        Ok(BuiltReader {
            reader: Box::new(SharedOpenAi(reader.clone())),
            generator: Some(Generator::Remote(reader)),
        })
    }
}

impl OpenAiSpec {
    /// The reader's options: this spec and the prompt parts of `ctx`.
    #[cfg(feature = "llm")]
    pub fn options(&self, ctx: &ReaderCtx<'_>) -> super::openai::OpenAiOptions {
        super::openai::OpenAiOptions {
            base_url: self.base_url.clone(),
            model: self.model.clone(),
            api_key_env: self.api_key_env.clone(),
            name: self.model.clone(),
            system: Some(self.system.clone()).filter(|s| !s.is_empty()),
            prompt: ctx.prompt.clone(),
            passage: ctx.passage.clone(),
            passage_separator: ctx.passage_separator.clone(),
            temperature: self.temperature,
            top_p: self.top_p,
            seed: self.seed,
            max_tokens: self.max_new_tokens,
            stop: self.stop.clone(),
            concurrency: self.concurrency,
            timeout_secs: self.timeout_secs,
            retries: self.retries,
            backoff_secs: self.backoff_secs,
            abstention: ctx.abstention.clone(),
        }
    }
}

/// How an extractive reader reads several passages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadMode {
    /// Report 000: the passages joined into one context; the best span of it.
    #[default]
    Concatenate,
    /// Each passage read alone; the best span over all of them.
    BestPerPassage,
}

/// An extractive reader's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExtractiveSpec {
    /// A Hugging Face `*ForQuestionAnswering` folder (or asset), or `trained:<recipe>` (a
    /// reader the workbench trained: `minilm-all`, `minilm-squad`, `minilm-squad2`, at the
    /// size of the scale it is resolved at). Default `trained:minilm-all`.
    pub model: String,
    /// How the passages are read. Default `concatenate`.
    pub read_mode: ReadMode,
    /// Abstain when the null score beats the best span by more than this (SQuAD 2.0);
    /// absent = never abstain. Default absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub null_threshold: Option<f64>,
}

impl Default for ExtractiveSpec {
    fn default() -> Self {
        ExtractiveSpec {
            model: "trained:minilm-all".into(),
            read_mode: ReadMode::Concatenate,
            null_threshold: None,
        }
    }
}

impl BuildReader for ExtractiveSpec {
    fn model(&self) -> &str {
        &self.model
    }

    fn model_mut(&mut self) -> &mut String {
        &mut self.model
    }

    fn abstains_itself(&self) -> bool {
        true
    }

    fn generates(&self) -> bool {
        false
    }

    fn check(&self) -> Result<()> {
        use crate::assets::ModelRef;
        use crate::Error;
        if self.null_threshold.is_some_and(|t| !t.is_finite()) {
            return Err(Error::param("reader.null_threshold", "must be finite"));
        }
        match ModelRef::parse(&self.model) {
            ModelRef::Asset(a) if a.trim().is_empty() => {
                Err(Error::param("reader.model", "no model given"))
            }
            ModelRef::Hub(_) => Err(crate::assets::hub_is_one_file("reader.model", &self.model)),
            _ => Ok(()),
        }
    }

    #[cfg(feature = "llm")]
    fn build(&self, ctx: &mut ReaderCtx<'_>) -> Result<BuiltReader> {
        Ok(BuiltReader {
            reader: Box::new(self.reader(ctx)?),
            generator: None,
        })
    }
}

impl ExtractiveSpec {
    /// The extractive reader a `[reader]` table configures (`kind = "extractive"`): a QA
    /// folder or asset, or a reader the workbench trained (`trained:<recipe>`, resolved
    /// into `ctx.trained_reader` before building: its folder, read with the recipe's
    /// windows).
    ///
    /// Errors: a `trained:` reader `ctx` does not hold; a folder that is not a QA
    /// checkpoint.
    #[cfg(feature = "llm")]
    pub fn reader(&self, ctx: &ReaderCtx<'_>) -> Result<super::extractive::ExtractiveReader> {
        use super::extractive::{
            fit_window, DecodeParams, ExtractiveReader, MultiPassage, ReaderParams,
        };
        use crate::assets::{Assets, ModelRef};
        use crate::Error;
        let spec = self;
        let params = ReaderParams {
            mode: match spec.read_mode {
                ReadMode::Concatenate => MultiPassage::Concatenate,
                ReadMode::BestPerPassage => MultiPassage::BestPerPassage,
            },
            decode: DecodeParams {
                null_threshold: spec.null_threshold.map(|t| t as f32),
                ..DecodeParams::default()
            },
            ..ReaderParams::default()
        };
        match ModelRef::parse(&spec.model) {
            ModelRef::Trained(_) => match &ctx.trained_reader {
                Some((dir, window)) => ExtractiveReader::load_dir(
                    dir,
                    ReaderParams {
                        window: *window,
                        ..params
                    },
                ),
                None => Err(Error::param(
                    "reader.model",
                    format!(
                        "`{}` is a trained reader that was not resolved before building",
                        spec.model
                    ),
                )),
            },
            ModelRef::Path(p) => {
                let dir = ctx.resolve(p);
                let params = fit_window(params, &dir.join("config.json"))?;
                ExtractiveReader::load_dir(dir, params)
            }
            ModelRef::Asset(a) => {
                let assets = Assets::load()?;
                let params = fit_window(params, &assets.resolve(a, "config.json")?)?;
                ExtractiveReader::load_asset(&assets, a, params)
            }
            ModelRef::Hub(_) => Err(crate::assets::hub_is_one_file("reader.model", &spec.model)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> std::result::Result<ReaderConfig, String> {
        toml::from_str(toml_text).map_err(|e| e.to_string())
    }

    #[test]
    fn the_table_splits_into_shared_fields_and_the_kinds_own() {
        let c = parse("passages = 3\nmax_new_tokens = 8").unwrap();
        assert_eq!(c.passages, 3);
        assert_eq!(c.spec.kind(), "generative");
        let ReaderSpec::Generative(g) = &c.spec else {
            panic!("{c:?}")
        };
        assert_eq!(g.max_new_tokens, 8);
        let e = parse("base_url = \"http://x\"").unwrap_err();
        assert!(e.contains("unknown field `base_url`"), "{e}");
        let e = parse("kind = \"extractive\"\nmax_new_tokens = 8").unwrap_err();
        assert!(e.contains("unknown field `max_new_tokens`"), "{e}");
        let c = parse("kind = \"openai\"\nbase_url = \"http://x/v1\"\npassages = 2").unwrap();
        assert_eq!(
            (c.spec.kind(), c.passages, c.spec.model_is_local()),
            ("openai", 2, false)
        );
        let c = parse("kind = \"extractive\"\nread_mode = \"best-per-passage\"").unwrap();
        assert!(c.spec.abstains_itself());
    }

    #[test]
    fn errors_name_the_field_and_non_finite_numbers_are_refused() {
        let e = parse("max_new_tokens = \"x\"").unwrap_err();
        assert!(e.contains("reader.max_new_tokens: invalid type"), "{e}");
        assert!(!e.contains("every reader takes"), "{e}");
        let e = parse("passages = \"two\"").unwrap_err();
        assert!(e.contains("reader.passages: invalid type"), "{e}");
        let c = parse("kind = \"extractive\"\nnull_threshold = nan").unwrap();
        let e = c.spec.check().unwrap_err().to_string();
        assert!(e.contains("reader.null_threshold"), "{e}");
        for field in ["temperature = nan", "temperature = inf", "top_p = nan"] {
            let e = parse(field).unwrap().spec.check().unwrap_err().to_string();
            assert!(e.contains(field.split(' ').next().unwrap()), "{field}: {e}");
        }
        let e = parse("kind = \"openai\"\ntimeout_secs = inf").unwrap();
        assert!(e.spec.check().is_err());
    }

    #[test]
    fn an_extractive_reader_defaults_to_the_trained_minilm_reader() {
        let c = parse("kind = \"extractive\"").unwrap();
        assert_eq!(c.spec.model(), "trained:minilm-all");
        assert_eq!(
            parse("").unwrap().spec.model(),
            "qwen2.5-coder-1.5b-instruct-gguf"
        );
    }

    #[cfg(feature = "llm")]
    #[test]
    fn the_generative_options_carry_every_setting() {
        let c = parse(
            "passage_separator = \"--\"\nsystem = \"Be brief.\"\nconcurrency = 3\n\
             max_new_tokens = 7\nstop = [\"X\"]\ntemperature = 0.5\ntop_p = 0.9\nseed = 5\n\
             model = \"models/m.gguf\"",
        )
        .unwrap();
        let ReaderSpec::Generative(g) = &c.spec else {
            panic!("{c:?}")
        };
        let ctx = ReaderCtx {
            prompt: "P {passages}".into(),
            passage: "[{rank}] {text}".into(),
            passage_separator: c.passage_separator.clone(),
            abstention: c.abstention.clone(),
            base_dir: std::path::Path::new("."),
            models: Box::new(|m: &str| Err(crate::Error::param("model", m.to_string()))),
            trained_reader: None,
        };
        let o = g.options(&ctx);
        assert_eq!((o.name.as_str(), o.batch), ("m", 3));
        assert_eq!(o.system.as_deref(), Some("Be brief."));
        assert_eq!(
            (o.prompt.as_str(), o.passage_separator.as_str()),
            ("P {passages}", "--")
        );
        assert_eq!(o.params.max_new_tokens, 7);
        assert_eq!(o.params.stop_strings, ["X"]);
        assert_eq!(
            o.params.sampling,
            super::super::generative::Sampling::TopP {
                temperature: 0.5,
                top_p: 0.9,
                seed: 5
            }
        );
    }

    #[test]
    fn every_kind_round_trips_through_toml() {
        for kind in ReaderSpec::KINDS {
            let c = parse(&format!("kind = \"{kind}\"\npassages = 4")).unwrap();
            assert_eq!(c.spec.kind(), *kind);
            let text = toml::to_string(&c).unwrap();
            assert_eq!(parse(&text).unwrap(), c, "{text}");
        }
        assert_eq!(parse("").unwrap(), ReaderConfig::default());
    }
}
